"""Where a second thread helps: per-operator 1-thread vs 2-thread time of one zoo net's training step.

    python benchmarks/thread_scaling.py --net vgg11
    python benchmarks/thread_scaling.py --net mobilenet_v1 --layers --rounds 10

One process, numba's and BLAS's thread counts switched between 1 and 2 before each
training step (Module forward_backward + SGD-momentum update, batch 32), so both
counts see the same phases of a shared machine. Besides the wall clock, every
operator call is charged each thread's CPU time (``/proc/self/task/*/schedstat``;
this thread's own by ``time.thread_time``): ``2t max`` is the busiest thread's
CPU time, what the call would take on two otherwise idle cores, and ``2t sum``
all threads' (above ``1t cpu``: work the split adds). ``ratio`` = ``1t cpu`` /
``2t max``: near 1, the op runs on one thread; ``lost`` = ``2t max - 1t cpu / 2``
is what the op keeps from a perfect split. The calls the executor fuses (a convolution with
its relu, BatchNorm with its activation, a residual sum with its relu) are timed under
their fused rows (``benchmarks/_profile.fused_calls``). Figures are the minimum over
``--rounds`` steps. Linux only. Prints numbers, asserts nothing. On branchy nets
the executor's branch schedule runs calls side by side (``benchmarks/branches.py``),
which mixes the per-operator rows: set ``FFNUMBA_BRANCHES=0`` for them.
"""
import argparse
import collections
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ME = str(threading.get_native_id())


def set_threads(n):
    """numba's threads and every BLAS ffnumba manages at ``n``."""
    import numba
    from ffnumba import blas_threads as bt
    numba.set_num_threads(n)
    fns = bt._numba_blas()
    for _, put in ([fns] if fns else []) + bt._REGISTERED:
        put(n)


def cpu_times():
    """Nanoseconds of CPU time of each thread of this process."""
    out = {}
    for t in os.listdir('/proc/self/task'):
        try:
            with open('/proc/self/task/%s/schedstat' % t) as f:
                out[t] = int(f.read().split()[0])
        except OSError:
            pass
    out[ME] = time.thread_time_ns()     # schedstat of a running thread lags
    return out


def delta(a, b):
    d = [b[t] - a.get(t, 0) for t in b]
    return max(d) * 1e-9, sum(d) * 1e-9


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--net', default='vgg11')
    p.add_argument('--batch', type=int, default=32)
    p.add_argument('--rounds', type=int, default=8)
    p.add_argument('--layers', action='store_true', help='one row per operator and shape')
    args = p.parse_args()
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.dirname(HERE))
    import numpy as np
    import numba
    import ffnumba as ff
    from ffnumba.ops import get_op
    from zoo_nets import NETS
    if numba.config.NUMBA_NUM_THREADS < 2:
        sys.exit('start with NUMBA_NUM_THREADS=2 (and OPENBLAS_NUM_THREADS=2)')
    build, shape = NETS[args.net]
    sym = build(ff.sym)
    rng = np.random.default_rng(0)
    data = ff.nd.array(rng.uniform(0, 1, (args.batch,) + shape).astype(np.float32))
    label = ff.nd.array(rng.integers(0, 10, args.batch).astype(np.float32))
    wall, cmax, csum = collections.Counter(), collections.Counter(), collections.Counter()

    def key(name, kind, a):
        if not args.layers:
            return (name, kind)
        arrays = a[2] if kind == 'fwd' else a[3]
        return (name, kind, str(tuple(arrays[0].shape)) if arrays else '')

    for name in sorted({n['op'] for n in json.loads(sym.tojson())['nodes'] if n['op'] != 'null'}):
        op = get_op(name)
        op.__dict__.pop('_guarded', None)     # the registry caches its wrapped kernels
        for kind, table in (('fwd', op.forward), ('bwd', op.backward)):
            def timed(*a, _fn=table['cpu'], _n=name, _kind=kind):
                k = key(_n, _kind, a)
                c0, t0 = cpu_times(), time.perf_counter()
                _fn(*a)
                wall[k] += time.perf_counter() - t0
                m, s = delta(c0, cpu_times())
                cmax[k] += m
                csum[k] += s
            table['cpu'] = timed
    from _profile import patch_fused

    def timed_fused(fn, label):             # fused calls: no operator table (see _profile)
        def call(*a):
            k = (label[0], label[1][:3].replace('for', 'fwd').replace('bac', 'bwd'))
            if args.layers:
                k += (next((str(tuple(v.shape)) for v in a if isinstance(v, np.ndarray)), ''),)
            c0, t0 = cpu_times(), time.perf_counter()
            out = fn(*a)
            wall[k] += time.perf_counter() - t0
            m, s = delta(c0, cpu_times())
            cmax[k] += m
            csum[k] += s
            return out
        return call
    patch_fused(timed_fused)                # before bind: the executor looks them up there
    mod = ff.mod.Module(sym, context=ff.cpu())
    mod.bind([('data', (args.batch,) + shape)], [('softmax_label', (args.batch,))])
    mod.init_params(ff.init.Xavier(magnitude=2.0))
    mod.init_optimizer(optimizer='sgd', optimizer_params={'learning_rate': 0.01, 'momentum': 0.9})
    batch = ff.io.DataBatch([data], [label])
    best = collections.defaultdict(lambda: 1e9)
    for r in range(args.rounds + 1):
        for n in (1, 2):
            set_threads(n)
            wall.clear(), cmax.clear(), csum.clear()
            c0, t0 = cpu_times(), time.perf_counter()
            mod.forward_backward(batch)
            c1, t1 = cpu_times(), time.perf_counter()
            mod.update()
            mod.get_outputs()[0].asnumpy()
            c2, t2 = cpu_times(), time.perf_counter()
            if r == 0:           # compiles
                continue
            wall[('update',)], (cmax[('update',)], csum[('update',)]) = t2 - t1, delta(c1, c2)
            wall[('STEP',)], (cmax[('STEP',)], csum[('STEP',)]) = t2 - t0, delta(c0, c2)
            for k in wall:
                for what, table in (('wall', wall), ('max', cmax), ('sum', csum)):
                    best[(n, what, k)] = min(best[(n, what, k)], table[k])
    keys = sorted({k for (n, w, k) in best}, key=lambda k: -best[(1, 'max', k)])
    print('%-40s %8s %8s %8s %8s %6s %7s   (ms, min of %d steps)'
          % (args.net, '1t cpu', '2t wall', '2t max', '2t sum', 'ratio', 'lost', args.rounds))
    for k in keys:
        one = best[(1, 'max', k)] * 1e3
        w, m, s = (best[(2, x, k)] * 1e3 for x in ('wall', 'max', 'sum'))
        print('%-40s %8.2f %8.2f %8.2f %8.2f %6.2f %7.2f'
              % (' '.join(k)[:40], one, w, m, s, one / max(m, 1e-6), m - one / 2))


if __name__ == '__main__':
    main()
