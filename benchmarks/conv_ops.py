"""Micro-benchmark of the LeNet-sized Convolution and Pooling kernels (not a test).

Prints milliseconds per forward and per backward call at batch 32 and 64, the
way MXNet's classic LeNet uses them (conv 5x5x20, maxpool 2, conv 5x5x50,
maxpool 2 on 28x28 MNIST; the first conv needs no data gradient). Run it
single-threaded to see the cost one executor thread pays::

    NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \\
        python benchmarks/conv_ops.py [--repeat 30] [--dtype float32] [--cpu-time]
"""
import argparse
import time

import numpy as np

from ffnumba.ops.registry import OpContext, get_op

#: Wall clock by default; ``--cpu-time`` uses this thread's CPU time (steadier on a busy box).
CLOCK = time.perf_counter

LAYERS = [
    # (name, op, params, data shape without batch, grad reqs)
    ('conv1 5x5x20', 'Convolution', dict(kernel=(5, 5), num_filter=20), (1, 28, 28),
     ['null', 'write', 'write']),
    ('pool1 max 2x2', 'Pooling', dict(kernel=(2, 2), stride=(2, 2), pool_type='max'),
     (20, 24, 24), ['write']),
    ('conv2 5x5x50', 'Convolution', dict(kernel=(5, 5), num_filter=50), (20, 12, 12),
     ['write', 'write', 'write']),
    ('pool2 max 2x2', 'Pooling', dict(kernel=(2, 2), stride=(2, 2), pool_type='max'),
     (50, 8, 8), ['write']),
]


def bench_layer(op_name, params, dshape, reqs, batch, dtype, repeat):
    """Median ms of forward and backward for one layer."""
    op = get_op(op_name)
    p = op.parse_params(params)
    n_args = len(op.list_arguments(p))
    ins, outs, _ = op.infer_shape(p, [(batch,) + dshape] + [None] * (n_args - 1), [], [None])
    rng = np.random.default_rng(0)
    arrays = [rng.uniform(-1, 1, s).astype(dtype) for s in ins]
    y = np.empty(outs[0], dtype)
    dy = rng.uniform(-1, 1, outs[0]).astype(dtype)
    grads = [np.empty(s, dtype) for s in ins]
    ctx = OpContext(True, None, {}, rng, op_name)
    fwd, bwd = op.compute('cpu')
    fwd(ctx, p, arrays, [y], [])                      # compile / warm the buffers
    bwd(ctx, p, [dy], arrays, [y], grads, reqs, [])
    tf, tb = [], []
    for _ in range(repeat):
        t0 = CLOCK()
        fwd(ctx, p, arrays, [y], [])
        t1 = CLOCK()
        bwd(ctx, p, [dy], arrays, [y], grads, reqs, [])
        t2 = CLOCK()
        tf.append(t1 - t0)
        tb.append(t2 - t1)
    return 1e3 * float(np.median(tf)), 1e3 * float(np.median(tb))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--repeat', type=int, default=30)
    ap.add_argument('--dtype', default='float32')
    ap.add_argument('--batch', type=int, nargs='*', default=[32, 64])
    ap.add_argument('--cpu-time', action='store_true',
                    help="time with this thread's CPU time instead of the wall clock")
    args = ap.parse_args()
    global CLOCK
    if args.cpu_time:
        CLOCK = time.thread_time
    for batch in args.batch:
        total = 0.0
        print('batch %d (%s), ms per call (median of %d, %s):'
              % (batch, args.dtype, args.repeat, 'thread CPU time' if args.cpu_time else 'wall'))
        for name, op_name, params, dshape, reqs in LAYERS:
            f, b = bench_layer(op_name, params, dshape, reqs, batch, args.dtype, args.repeat)
            total += f + b
            print('  %-14s forward %7.3f  backward %7.3f' % (name, f, b))
        print('  %-14s %7.3f ms  (%.0f samples/s for these layers alone)'
              % ('total', total, 1e3 * batch / total))


if __name__ == '__main__':
    main()
