"""Inference forward with and without operator fusion: prints numbers, asserts nothing.

    python benchmarks/fusion.py                                  # a few zoo nets, batch 32
    python benchmarks/fusion.py --nets mobilenet_v2 --batch 1 --rounds 20
    NUMBA_NUM_THREADS=2 python benchmarks/fusion.py --wall       # two threads: wall-clock

Binds each ``zoo_nets.NETS`` network twice the way ``Module.predict`` does
(``Module.bind(for_training=False)``), once with ``FFNUMBA_FUSE=0``, gives both
the same parameters, checks that their outputs are bit-identical, then times
``forward(is_train=False)`` of the two alternately (interleaved) and prints the
best of ``--rounds``. The default clock is this thread's CPU time, which a
busy machine disturbs less than wall-clock time; it only counts the work
when every kernel runs on this thread (``NUMBA_NUM_THREADS=1``,
``OPENBLAS_NUM_THREADS=1``; set here unless already set), so use ``--wall``
with more threads.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
for _var in ('NUMBA_NUM_THREADS', 'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS',
             'FFNUMBA_BLAS_THREADS'):
    os.environ.setdefault(_var, '1')


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--nets', default='inception_bn,resnet18_v1_32,mobilenet_v1,mobilenet_v2,'
                                     'vgg11_bn,googlenet')
    p.add_argument('--batch', type=int, default=32)
    p.add_argument('--rounds', type=int, default=10)
    p.add_argument('--wall', action='store_true', help='wall-clock instead of thread CPU time')
    args = p.parse_args()
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.dirname(HERE))
    import numpy as np
    import ffnumba as ff
    from zoo_nets import NETS
    clock = time.perf_counter if args.wall else time.thread_time
    print('%-16s %5s | %10s %10s | %s' % ('net', 'batch', 'fused ms', 'unfused ms', 'speedup'))
    for name in args.nets.split(','):
        build, shape = NETS[name]
        net = build(ff.sym)
        mods = {}
        for fuse in ('1', '0'):
            os.environ['FFNUMBA_FUSE'] = fuse
            mod = ff.mod.Module(net, context=ff.cpu())
            mod.bind([('data', (args.batch,) + shape)], [('softmax_label', (args.batch,))],
                     for_training=False)
            mod.init_params(ff.init.Xavier(magnitude=2.0))
            mods[fuse] = mod
        os.environ.pop('FFNUMBA_FUSE')
        mods['0'].set_params(*mods['1'].get_params())
        rng = np.random.default_rng(0)
        batch = ff.io.DataBatch([ff.nd.array(rng.uniform(0, 1, (args.batch,) + shape))],
                                [ff.nd.zeros((args.batch,))])
        best, outs = {}, {}
        for _ in range(args.rounds):
            for fuse, mod in mods.items():
                tic = clock()
                mod.forward(batch, is_train=False)
                outs[fuse] = mod.get_outputs()[0].asnumpy()
                best[fuse] = min(best.get(fuse, 1e9), clock() - tic)
        same = 'bit-identical' if np.array_equal(outs['1'], outs['0']) else 'OUTPUTS DIFFER'
        print('%-16s %5d | %10.1f %10.1f | %.2fx  (%d chains fused; %s)'
              % (name, args.batch, best['1'] * 1e3, best['0'] * 1e3, best['0'] / best['1'],
                 len(mods['1']._exec_group.execs[0].fused_nodes), same), flush=True)


if __name__ == '__main__':
    main()
