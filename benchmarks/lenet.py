"""LeNet speed at batch 64 on one and two CPU contexts: prints numbers, asserts nothing.

    python benchmarks/lenet.py [--epochs 2] [--profile]

Training and inference samples/s with FeedForward on load_mnist() (4,000 images), measured
after a warm-up epoch (numba compiles excluded). For reference, real MXNet 1.9.1 trains this
LeNet at about 3,100 samples/s on these 2 cores (Module.fit, two CPU contexts).
With --profile it also prints the share of executor time spent in each operator type
(one context, forward+backward), using the executor's per-op timer.
"""
import argparse
import logging
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'examples'))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--epochs', type=int, default=2)
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--profile', action='store_true')
    args = parser.parse_args()
    import ffnumba as ff
    from train_lenet import lenet
    logging.disable(logging.INFO)
    X, y, Xt, yt = ff.datasets.load_mnist()
    for nctx in (1, 2):
        ctx = [ff.cpu(i) for i in range(nctx)]
        kw = dict(ctx=ctx, optimizer='sgd', learning_rate=0.05, momentum=0.9,
                  initializer=ff.init.Xavier(), numpy_batch_size=args.batch_size)
        ff.FeedForward(lenet(), num_epoch=1, **kw).fit(X[:640], y[:640])   # warm-up
        model = ff.FeedForward(lenet(), num_epoch=args.epochs, **kw)
        tic = time.perf_counter()
        model.fit(X, y)
        dt = time.perf_counter() - tic
        print('train  batch %d  %d ctx: %7.0f samples/s' % (args.batch_size, nctx,
                                                           args.epochs * len(y) / dt))
        tic = time.perf_counter()
        model.predict(Xt)
        print('infer  batch %d  ctx[0]: %7.0f samples/s' % (args.batch_size,
                                                            len(yt) / (time.perf_counter() - tic)))
    if args.profile:
        profile(ff, lenet, X, y, args.batch_size)


def profile(ff, lenet, X, y, batch):
    """Share of one executor's forward+backward time per operator type (1 context)."""
    from _profile import op_profile
    rows = op_profile(ff, lenet(), {'data': X[:batch], 'softmax_label': y[:batch]}, steps=20)
    whole = sum(ms for _, _, _, ms in rows)
    print('per-op time, batch %d, 1 context, forward+backward: %.2f ms/batch' % (batch, whole))
    for name, kind, share, ms in rows:
        print('  %-18s %-8s %5.1f%%  %6.2f ms' % (name, kind, share, ms))
    conv = sum(share for name, _, share, _ in rows if name == 'Convolution')
    print('  convolution share of forward+backward: %.1f%%' % conv)

if __name__ == '__main__':
    main()
