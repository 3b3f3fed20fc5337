"""Training steps with the kernels' split sizes as they are and as they were, interleaved in one process: prints numbers.

    python benchmarks/split_sizes.py --nets mobilenet_v1,mobilenet_v2 --rounds 40

The smallest work an elementwise pass (:data:`ffnumba.ops.templates.ELEMWISE_MIN_ELEMS`),
a BatchNorm (:data:`ffnumba.ops.nn.batch_norm.PAR_MIN_ELEMS`) or an optimizer update
(:data:`ffnumba.optimizer.kernels.UPDATE_MIN_ELEMS`) splits over the kernel threads is
read at every call, so one process can alternate them step by step: ``before`` (the
sizes before they were raised: 2^16 elements per thread for elementwise passes and
updates, 2^15 for BatchNorm), ``no-update`` (today's, the update's as before) and
``now``. Alternating steps see the same phases of a shared machine, which a 1-3%
change needs: separate processes (``zoo.py --baseline``) differ by more than that
from run to run. One Module per net (batch 32, SGD with momentum, the training step
of ``zoo.py``), ``NUMBA_NUM_THREADS`` threads (set it to 2); each figure is the
median (and the fastest) of ``--rounds`` steps. Asserts nothing.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--nets', default='mobilenet_v1,mobilenet_v2')
    p.add_argument('--batch', type=int, default=32)
    p.add_argument('--rounds', type=int, default=40)
    args = p.parse_args()
    sys.path.insert(0, HERE)
    import logging
    import numpy as np
    import ffnumba as ff
    from ffnumba.ops import templates
    from ffnumba.ops.nn import batch_norm
    from ffnumba.optimizer import kernels
    from zoo_nets import NETS
    logging.disable(logging.WARNING)
    now = (templates.ELEMWISE_MIN_ELEMS, batch_norm.PAR_MIN_ELEMS, kernels.UPDATE_MIN_ELEMS)
    modes = {'before': (1 << 16, 1 << 15, 1 << 16), 'no-update': now[:2] + (1 << 16,),
             'now': now}

    def use(sizes):
        templates.ELEMWISE_MIN_ELEMS, batch_norm.PAR_MIN_ELEMS, kernels.UPDATE_MIN_ELEMS = sizes

    print('threads %s, batch %d, ms per training step (median, min of %d), samples/s'
          % (os.environ.get('NUMBA_NUM_THREADS', 'all'), args.batch, args.rounds))
    for net in args.nets.split(','):
        build, shape = NETS[net]
        rng = np.random.default_rng(0)
        batch = ff.io.DataBatch(
            [ff.nd.array(rng.uniform(0, 1, (args.batch,) + shape).astype(np.float32))],
            [ff.nd.array(rng.integers(0, 10, args.batch).astype(np.float32))])
        mod = ff.mod.Module(build(ff.sym), context=ff.cpu())
        mod.bind([('data', (args.batch,) + shape)], [('softmax_label', (args.batch,))])
        mod.init_params(ff.init.Xavier(magnitude=2.0))
        mod.init_optimizer(optimizer='sgd', optimizer_params={'learning_rate': 0.01,
                                                              'momentum': 0.9})

        def step():
            mod.forward_backward(batch)
            mod.update()
            mod.get_outputs()[0].asnumpy()
        for sizes in modes.values():          # compile, and warm each mode up
            use(sizes)
            step()
            step()
        times = {m: [] for m in modes}
        for _ in range(args.rounds):
            for m, sizes in modes.items():
                use(sizes)
                tic = time.perf_counter()
                step()
                times[m].append(time.perf_counter() - tic)
        use(now)
        print('%-14s %s' % (net, ' | '.join(
            '%s %.1f (%.1f) ms %.1f/s' % (m, np.median(t) * 1e3, min(t) * 1e3,
                                          args.batch / np.median(t))
            for m, t in times.items())))


if __name__ == '__main__':
    main()
