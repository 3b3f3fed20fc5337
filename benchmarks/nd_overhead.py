"""Imperative ``nd.<Op>`` call overhead: microseconds per call on a small array.

    PYTHONPATH=. python benchmarks/nd_overhead.py            # ffnumba
    /work/mxref/bin/python benchmarks/nd_overhead.py --mxnet  # MXNet 1.9.1, same calls

Each call runs on a 4x4 float32 array (FullyConnected: batch 4, 4 -> 4), so the
time is almost all dispatch: argument parsing, shape/type inference, output
allocation and the kernel call. Reported: the best of ``--repeat`` runs of
``--number`` calls each, with ``wait_to_read`` on the result (MXNet's engine is
asynchronous).
"""
import argparse
import timeit


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--mxnet', action='store_true', help='time MXNet instead of ffnumba')
    ap.add_argument('--number', type=int, default=200)
    ap.add_argument('--repeat', type=int, default=5)
    args = ap.parse_args()
    if args.mxnet:
        import mxnet as mx
    else:
        import ffnumba as mx
    import numpy as np
    nd = mx.nd
    rng = np.random.RandomState(0)
    x = nd.array(rng.rand(4, 4))
    y = nd.array(rng.rand(4, 4))
    w = nd.array(rng.rand(4, 4))
    b = nd.array(rng.rand(4))
    calls = [
        ('nd.sum(x)', lambda: nd.sum(x)),
        ("nd.Activation(x, act_type='relu')", lambda: nd.Activation(x, act_type='relu')),
        ('nd.broadcast_add(x, y)', lambda: nd.broadcast_add(x, y)),
        ('nd.FullyConnected(x, w, b, num_hidden=4)',
         lambda: nd.FullyConnected(x, w, b, num_hidden=4)),
        ('x + y', lambda: x + y),
    ]
    print('%s: microseconds per call (4x4 float32), best of %d x %d'
          % ('mxnet ' + mx.__version__ if args.mxnet else 'ffnumba', args.repeat, args.number))
    for label, fn in calls:
        fn().wait_to_read()  # compile / warm up
        t = min(timeit.repeat(lambda: fn().wait_to_read(), number=args.number,
                              repeat=args.repeat))
        print('  %-42s %9.1f' % (label, 1e6 * t / args.number))


if __name__ == '__main__':
    main()
