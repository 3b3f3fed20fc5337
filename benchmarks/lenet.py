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


def profile(ff, lenet, X, y, batch, steps=20):
    """Share of one executor's forward+backward time per operator type (1 context).

    Wraps each operator's CPU forward/backward with a timer before binding
    (benchmark-only instrumentation) and restores them afterwards.
    """
    import collections
    import json

    import numpy as np
    from ffnumba.ops import get_op
    sym = lenet()
    ops = sorted({n['op'] for n in json.loads(sym.tojson())['nodes'] if n['op'] != 'null'})
    totals = collections.Counter()
    saved = []
    for name in ops:
        op = get_op(name)
        for kind, table in (('forward', op.forward), ('backward', op.backward)):
            fn = table['cpu']
            saved.append((table, fn))

            def timed(*args, _fn=fn, _key=(name, kind)):
                tic = time.perf_counter()
                _fn(*args)
                totals[_key] += time.perf_counter() - tic
            table['cpu'] = timed
    try:
        exe = sym.simple_bind(ff.cpu(0), data=(batch, 1, 28, 28))
        rng = np.random.default_rng(0)
        for k, v in exe.arg_dict.items():
            if k.endswith('weight'):
                v[:] = rng.uniform(-0.1, 0.1, v.shape)
        exe.arg_dict['data'][:] = X[:batch]
        exe.arg_dict['softmax_label'][:] = y[:batch]
        exe.forward(is_train=True)
        exe.backward()
        totals.clear()
        tic = time.perf_counter()
        for _ in range(steps):
            exe.forward(is_train=True)
            exe.backward()
        whole = time.perf_counter() - tic
    finally:
        for table, fn in saved:
            table['cpu'] = fn
    in_ops = sum(totals.values())
    print('per-op time, batch %d, 1 context, forward+backward: %.2f ms/batch '
          '(%.1f%% inside kernels)' % (batch, 1000 * whole / steps, 100 * in_ops / whole))
    for (name, kind), t in sorted(totals.items(), key=lambda kv: -kv[1]):
        print('  %-14s %-8s %5.1f%%  %6.2f ms' % (name, kind, 100 * t / whole, 1000 * t / steps))
    conv = sum(t for (name, _), t in totals.items() if name == 'Convolution')
    print('  convolution share of forward+backward: %.1f%%' % (100 * conv / whole))


if __name__ == '__main__':
    main()
