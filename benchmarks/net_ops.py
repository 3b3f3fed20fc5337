"""Per-layer kernel times of one zoo network, grouped by kind (not a test; prints numbers).

Every Convolution, BatchNorm, clip, Activation, LRN and (non-global) Pooling node of a
``zoo_nets.NETS`` network is timed alone through the operator's CPU compute functions (forward in
training mode, then backward), at the shapes the network gives it; repeated
layers are timed once and counted as often as they occur. Convolutions are
grouped as depthwise (``num_group == channels``), pointwise (1x1) or other::

    NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \\
        python benchmarks/net_ops.py --net mobilenet_v2 [--batch 32] [--repeat 10] [--layers]
        [--cpu-time]

``--infer`` times the evaluation forward (``is_train=False``) instead of the
training forward and backward. Compare two checkouts by running this script with
``PYTHONPATH`` pointing at one, then at the other.

``--mxnet PYTHON`` also times every distinct layer as a single-operator MXNet 1.9.1
symbol in that interpreter (``_mx_layers.py``; MKL-DNN as installed, the thread
variables of this process passed on), each right after ffnumba's, and prints the layers sorted by
``count * (ours - MXNet)`` ms, the largest gap first. ``--ops Convolution,Pooling``
restricts the layers timed; ``--best`` reports the fastest repeat instead of the median.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
#: Wall clock by default; ``--cpu-time`` uses this thread's CPU time (steadier on a busy
#: machine, but it misses the work of other threads: use it with one thread).
CLOCK = time.perf_counter
#: How the repeats are summarised: the median, or with ``--best`` the minimum (steadier
#: on a busy machine, where a slow phase only ever adds time).
STAT = np.median


OPS = ('Convolution', 'BatchNorm', 'clip', 'Activation', 'LRN', 'Pooling')


def layers(net, batch, ops=OPS):
    """``[(kind, op, params, data shape, count)]`` of the network's timed nodes."""
    import ffnumba as ff
    sys.path.insert(0, HERE)
    from zoo_nets import NETS
    build, shape = NETS[net]
    sym = build(ff.sym)
    internals = sym.get_internals()
    arg_shapes, out_shapes, _ = internals.infer_shape(data=(batch,) + shape)
    out_of = dict(zip(internals.list_outputs(), out_shapes))
    nodes = json.loads(sym.tojson())['nodes']
    seen = collections.OrderedDict()
    for node in nodes:
        if node['op'] not in ops:
            continue
        if node['op'] == 'Pooling' and node.get('attrs', {}).get('global_pool') == 'True':
            continue
        src = nodes[node['inputs'][0][0]]
        key_out = src['name'] + ('_output' if src['op'] != 'null' else '')
        if src['op'] != 'null' and src['name'] + '_output' not in out_of:
            key_out = src['name'] + '_output0'
        dshape = out_of.get(key_out) or (batch,) + shape
        params = {k: v for k, v in node.get('attrs', {}).items() if not k.startswith('__')}
        kind = node['op']
        if kind == 'Convolution':
            g = int(params.get('num_group', 1))
            kernel = params['kernel']
            kind = ('conv depthwise' if g > 1 and g == dshape[1] else
                    'conv 1x1' if kernel in ('(1, 1)', '(1,1)') else 'conv other')
        elif kind == 'Pooling':
            kind = 'pool ' + params.get('pool_type', 'max')
        key = (kind, node['op'], json.dumps(params, sort_keys=True), tuple(dshape))
        seen[key] = seen.get(key, 0) + 1
    return [(k[0], k[1], json.loads(k[2]), k[3], n) for k, n in seen.items()]


def bench(op_name, params, dshape, infer, repeat):
    """Median (or best) ms of (forward, backward) for one node; backward 0 with ``infer``."""
    from ffnumba.ops.registry import OpContext, get_op
    op = get_op(op_name)
    p = op.parse_params(params)
    n_args = len(op.list_arguments(p))
    ins, outs, aux = op.infer_shape(p, [tuple(dshape)] + [None] * (n_args - 1),
                                    [None] * len(op.list_aux(p)), [None])
    rng = np.random.default_rng(0)
    arrays = [rng.uniform(-1, 1, s).astype(np.float32) for s in ins]
    auxs = [np.ones(s, np.float32) for s in aux]
    ys = [np.empty(s, np.float32) for s in outs]
    dys = [rng.uniform(-1, 1, s).astype(np.float32) for s in outs]
    grads = [np.empty(s, np.float32) for s in ins]
    reqs = ['write'] * len(ins)
    ctx = OpContext(not infer, None, {}, rng, op_name)
    fwd, bwd = op.compute('cpu')
    tf, tb = [], []
    for i in range(repeat + 1):
        t0 = CLOCK()
        fwd(ctx, p, arrays, ys, auxs)
        t1 = CLOCK()
        if not infer:
            bwd(ctx, p, dys, arrays, ys, grads, reqs, auxs)
        t2 = CLOCK()
        if i:
            tf.append(t1 - t0)
            tb.append(t2 - t1)
    return 1e3 * float(STAT(tf)), 1e3 * float(STAT(tb))


def _short(params):
    return ','.join('%s=%s' % kv for kv in sorted(params.items())
                    if kv[0] in ('kernel', 'stride', 'pad', 'num_filter', 'num_group', 'a_max',
                                 'act_type', 'pool_type'))


class MXNet:
    """A child process of ``python`` timing MXNet layers one at a time (``_mx_layers.py``)."""

    def __init__(self, python):
        self.proc = subprocess.Popen([python, os.path.join(HERE, '_mx_layers.py')],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=dict(os.environ))

    def time(self, op, params, shape, infer, repeat):
        """``(fwd ms, bwd ms)`` of one layer, summarised as ours (``STAT``, ``CLOCK``)."""
        job = {'op': op, 'params': params, 'shape': list(shape), 'infer': infer,
               'repeat': repeat, 'best': STAT is np.min, 'cpu_time': CLOCK is time.thread_time}
        self.proc.stdin.write(json.dumps(job) + '\n')
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError('the MXNet timing process ended (see its error output)')
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--net', default='mobilenet_v2')
    ap.add_argument('--batch', type=int, default=32)
    ap.add_argument('--repeat', type=int, default=10)
    ap.add_argument('--infer', action='store_true', help='time the evaluation forward only')
    ap.add_argument('--layers', action='store_true', help='print every distinct layer')
    ap.add_argument('--cpu-time', action='store_true',
                    help="time with this thread's CPU time instead of the wall clock")
    ap.add_argument('--best', action='store_true',
                    help='report the fastest repeat instead of the median (ours and MXNet)')
    ap.add_argument('--ops', default=','.join(OPS),
                    help='operators to time (comma list of %s)' % ', '.join(OPS))
    ap.add_argument('--mxnet', metavar='PYTHON',
                    help='also time each layer in MXNet 1.9.1 run by this interpreter')
    args = ap.parse_args()
    unknown = sorted(set(args.ops.split(',')) - set(OPS))
    if unknown:        # one data input each: a Concat or elemwise_add is not timed alone
        ap.error('--ops: %s not timed by this script (one of %s)'
                 % (', '.join(unknown), ', '.join(OPS)))
    global CLOCK, STAT
    if args.cpu_time:
        CLOCK = time.thread_time
    if args.best:
        STAT = np.min
    todo = layers(args.net, args.batch, tuple(args.ops.split(',')))
    totals = collections.OrderedDict()
    ours, theirs = [], []
    mxnet = MXNet(args.mxnet) if args.mxnet else None
    for kind, op_name, params, dshape, count in todo:
        f, b = bench(op_name, params, dshape, args.infer, args.repeat)
        ours.append((f, b))
        if mxnet:       # interleaved: a slow phase of a busy machine hits both
            theirs.append(mxnet.time(op_name, params, dshape, args.infer, args.repeat))
        tf, tb = totals.get(kind, (0.0, 0.0))
        totals[kind] = (tf + count * f, tb + count * b)
        if args.layers and not args.mxnet:
            print('  %-15s x%-2d %-22s %-34s fwd %7.3f bwd %7.3f ms'
                  % (kind, count, dshape, _short(params), f, b))
    print('%s batch %d, %s, ms per step (%s of %d, %s):'
          % (args.net, args.batch, 'inference' if args.infer else 'training',
             'best' if args.best else 'median', args.repeat,
             'thread CPU time' if args.cpu_time else 'wall'))
    for kind, (f, b) in totals.items():
        print('  %-15s forward %8.2f  backward %8.2f' % (kind, f, b))
    print('  %-15s %8.2f' % ('total', sum(f + b for f, b in totals.values())))
    if not args.mxnet:
        return
    mxnet.close()
    rows = sorted(zip(todo, ours, theirs),
                  key=lambda r: -r[0][4] * (sum(r[1]) - sum(r[2])))
    print('per layer, ours vs MXNet (ms per occurrence; gap = count * (ours - MXNet)):')
    print('  %-12s %-4s %-20s %-44s %7s %7s %7s %7s %7s' % (
        'kind', 'n', 'data', 'params', 'fwd', 'mx fwd', 'bwd', 'mx bwd', 'gap'))
    gap_by = collections.OrderedDict()
    for (kind, _, params, dshape, count), (f, b), (mf, mb) in rows:
        gap = count * (f + b - mf - mb)
        g0 = gap_by.get(kind, (0.0, 0.0))
        gap_by[kind] = (g0[0] + count * (f + b), g0[1] + count * (mf + mb))
        print('  %-12s x%-3d %-20s %-44s %7.3f %7.3f %7.3f %7.3f %7.2f' % (
            kind, count, 'x'.join(map(str, dshape)), _short(params), f, mf, b, mb, gap))
    for kind, (a, m) in gap_by.items():
        print('  %-15s ours %8.2f  MXNet %8.2f  ratio %.2f' % (kind, a, m, a / m if m else 0))
    print('  %-15s ours %8.2f  MXNet %8.2f' % ('total', sum(v[0] for v in gap_by.values()),
                                               sum(v[1] for v in gap_by.values())))


if __name__ == '__main__':
    main()
