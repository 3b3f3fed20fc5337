"""The optimizer update of a zoo network's training step: one list per device (the
kernels deferred and split over threads together) against one call per parameter.

    NUMBA_NUM_THREADS=2 python benchmarks/net_update.py --nets alexnet,mobilenet_v1

Each net is bound once (batch ``--batch``, SGD with momentum 0.9, as ``zoo.py``);
steps alternate between the two ways of updating, so a busy phase of the machine
hits both. ``list`` is :meth:`ffnumba.mod.Module.update` as shipped (MXNet's
``_update_params``: the updater gets each device's parameters as one list, and
:mod:`ffnumba.optimizer._deferred` runs their kernels in one fork-join);
``each`` calls the updater once per parameter, as before, each kernel on its own.
Prints the median update time and the median whole step (forward, backward,
update) of each, in milliseconds. Prints numbers, asserts nothing.
"""
import argparse
import logging
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import ffnumba as ff  # noqa: E402
from zoo_nets import NETS  # noqa: E402


def each(mod):
    """The update as one updater call per parameter (the tree before the list call)."""
    g = mod._exec_group
    for i, (w, grad) in enumerate(zip(g.param_arrays, g.grad_arrays)):
        if grad[0] is not None:
            mod._updater(i, grad[0], w[0])


def measure(net, batch, steps):
    build, shape = NETS[net]
    sym = build(ff.sym)
    rng = np.random.default_rng(0)
    data = ff.nd.array(rng.uniform(0, 1, (batch,) + shape).astype(np.float32))
    label = ff.nd.array(rng.integers(0, 10, batch).astype(np.float32))
    mod = ff.mod.Module(sym, context=ff.cpu())
    mod.bind([('data', (batch,) + shape)], [('softmax_label', (batch,))])
    mod.init_params(ff.init.Xavier(magnitude=2.0))
    mod.init_optimizer(optimizer='sgd', optimizer_params={'learning_rate': 0.01,
                                                          'momentum': 0.9})
    b = ff.io.DataBatch([data], [label])
    ways = {'list': mod.update, 'each': lambda: each(mod)}
    times = {k: ([], []) for k in ways}
    for i in range(2 * steps + 4):
        name = ('list', 'each')[i % 2]
        t0 = time.perf_counter()
        mod.forward_backward(b)
        t1 = time.perf_counter()
        ways[name]()
        mod.get_outputs()[0].asnumpy()
        t2 = time.perf_counter()
        if i >= 4:
            times[name][0].append(t2 - t1)
            times[name][1].append(t2 - t0)
    n = sum(a.size for a in mod.get_params()[0].values())
    med = {k: [1e3 * float(np.median(v)) for v in times[k]] for k in ways}
    print('%-14s %6.2fM params %3d arrays | update list %6.2f each %6.2f ms (%.2fx) | '
          'step list %7.2f each %7.2f ms (%.3fx)'
          % (net, n / 1e6, len(mod._exec_group.param_arrays), med['list'][0], med['each'][0],
             med['each'][0] / med['list'][0], med['list'][1], med['each'][1],
             med['each'][1] / med['list'][1]), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--nets', default='lenet,alexnet,mobilenet_v1,googlenet,resnet50_v1_32')
    ap.add_argument('--batch', type=int, default=32)
    ap.add_argument('--steps', type=int, default=30, help='steps of each way')
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    print('threads %d, batch %d, median of %d steps each'
          % (ff.thread_pool.kernel_threads(1 << 30), args.batch, args.steps))
    for net in args.nets.split(','):
        measure(net, args.batch, args.steps)


if __name__ == '__main__':
    main()
