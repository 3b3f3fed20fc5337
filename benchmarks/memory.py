"""Memory of a training executor: prints numbers, asserts nothing.

    python benchmarks/memory.py                                   # ffnumba, plan on and off
    python benchmarks/memory.py --mxnet-python /work/mxref/bin/python   # and MXNet 1.9.1
    python benchmarks/memory.py --batch 64 --nets mlp,lenet
    python benchmarks/memory.py --baseline /tmp/membase     # and another ffnumba checkout

Each net is bound for training as ``Module`` binds it (``grad_req='write'`` for the
parameters, ``'null'`` for data and label) and the script prints what the
executor allocated for itself (operator outputs, intermediate gradients: the
``Total N MB allocated`` of ``debug_str()``; the parameter, gradient and
auxiliary arrays it is bound to are not counted, as in MXNet):

* ffnumba with its memory plan, and with ``FFNUMBA_MEMORY_PLAN=0`` (every
  value its own buffer), in MB with two decimals;
* with ``--baseline DIR``, the ffnumba checkout in DIR (say a ``git worktree`` of
  the commit before a change) bound the same way;
* MXNet 1.9.1's ``debug_str()`` total (whole MB, as MXNet prints it) when
  ``--mxnet-python`` names a Python with ``mxnet`` (run with
  ``MXNET_MKLDNN_ENABLED=0``).

Nets: the ``benchmarks/zoo_nets.py`` MLP, LeNet and ResNet-18 (v1, 32x32), and a
"stop_gradient tower": eight FullyConnected(1024)+ReLU layers behind
``BlockGrad`` under a trained FullyConnected head, where nothing below the
stop needs gradients or kept values.
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

NETS = ('mlp', 'stop_gradient_tower', 'lenet', 'resnet18_v1_32')


def tower(S):
    x = S.Flatten(S.Variable('data'))
    for i in range(8):
        x = S.Activation(S.FullyConnected(x, num_hidden=1024, name='t%d' % i),
                         act_type='relu', name='r%d' % i)
    x = S.FullyConnected(S.BlockGrad(x, name='stop'), num_hidden=10, name='head')
    return S.SoftmaxOutput(x, name='softmax')


def build(S, name):
    from zoo_nets import NETS as ZOO
    if name == 'stop_gradient_tower':
        return tower(S), (1, 28, 28)
    builder, shape = ZOO[name]
    return builder(S), shape


def measure(framework, name, batch):
    """``(debug_str total MB, exact bytes or None)`` of one training executor."""
    if framework == 'mxnet':
        import mxnet as fw
    else:
        import ffnumba as fw
    net, shape = build(fw.sym, name)
    inputs = {'data': (batch,) + tuple(shape), 'softmax_label': (batch,)}
    reqs = {n: ('null' if n in inputs else 'write') for n in net.list_arguments()}
    exe = net.simple_bind(fw.cpu(), grad_req=reqs, **inputs)
    text = exe.debug_str()
    total = int(re.findall(r'Total (\d+) MB allocated', text)[-1])
    plan = getattr(exe, '_plan', None)
    return total, (plan.total_bytes if plan is not None else _bytes_without_plan(exe))


def _bytes_without_plan(exe):
    """Bytes of an ffnumba executor from before the memory plan (distinct buffers)."""
    if not hasattr(exe, '_nd_of'):
        return None
    bound = {id(a._data) for a in exe.arg_arrays + exe.aux_arrays}
    bound |= {id(g._data) for g in exe.grad_arrays if g is not None}
    seen, total = set(bound), 0
    for a in [x._data for x in exe._nd_of] + [g for g in exe._gbuf if g is not None]:
        if id(a) not in seen:
            seen.add(id(a))
            total += a.nbytes
    return total


def child(python, framework, nets, batch, env=None):
    cmd = [python, os.path.abspath(__file__), '--worker', framework, '--nets', ','.join(nets),
           '--batch', str(batch)]
    full = dict(os.environ, **(env or {}))
    out = subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=1800)
    if out.returncode != 0:
        sys.stderr.write(out.stderr[-2000:])
        return {}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--nets', default=','.join(NETS))
    ap.add_argument('--batch', type=int, default=64)
    ap.add_argument('--mxnet-python', default=None)
    ap.add_argument('--baseline', default=None, help='another ffnumba checkout to compare')
    ap.add_argument('--worker', default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    nets = args.nets.split(',')
    if args.worker:
        print(json.dumps({n: measure(args.worker, n, args.batch) for n in nets}))
        return
    planned = child(sys.executable, 'ffnumba', nets, args.batch)
    unplanned = child(sys.executable, 'ffnumba', nets, args.batch, {'FFNUMBA_MEMORY_PLAN': '0'})
    base = {}
    if args.baseline:
        path = os.path.abspath(args.baseline)
        base = child(sys.executable, 'ffnumba', nets, args.batch,
                     {'PYTHONPATH': path + os.pathsep + os.environ.get('PYTHONPATH', '')})
    mx = {}
    if args.mxnet_python:
        mx = child(args.mxnet_python, 'mxnet', nets, args.batch, {'MXNET_MKLDNN_ENABLED': '0'})

    def mb(res, n):
        if n not in res:
            return '-'
        total, exact = res[n]
        return '%.2f' % (exact / 2.0 ** 20) if exact is not None else '%d' % total

    print('training executor memory, batch %d (MB the executor allocates; params, their '
          'gradients and aux states not counted)' % args.batch)
    print('%-22s %14s %14s %14s %14s' % ('net', 'ffnumba plan', 'no plan', 'baseline',
                                         'MXNet 1.9.1'))
    for n in nets:
        print('%-22s %14s %14s %14s %14s' % (n, mb(planned, n), mb(unplanned, n), mb(base, n),
                                             ('%d' % mx[n][0]) if n in mx else '-'))


if __name__ == '__main__':
    main()
