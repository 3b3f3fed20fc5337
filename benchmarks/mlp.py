"""Speed of the MNIST MLP (784-128-10, ReLU, SoftmaxOutput): prints numbers, asserts nothing.

    python benchmarks/mlp.py                 # everything
    python benchmarks/mlp.py --quick         # fewer epochs

Reports, on load_mnist() (4,000 training images):
  * training samples/s with FeedForward.fit at batch 32 and 256, on [cpu(0)] and
    [cpu(0), cpu(1)], measured after a warm-up epoch (numba compiles excluded);
  * the wall time of 10 epochs at batch 100 on [cpu(0), cpu(1)] (the main example's setting;
    real MXNet 1.9.1 Module.fit takes about 1.1 s for this on 2 cores);
  * inference samples/s (FeedForward.predict, batch 256);
  * the time from a fresh process to the first finished training batch, with a cold numba
    cache (an empty NUMBA_CACHE_DIR) and with a warm one (the same directory again).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def mlp(ff):
    data = ff.sym.Variable('data')
    net = ff.sym.Flatten(data)
    net = ff.sym.FullyConnected(net, num_hidden=128, name='fc1')
    net = ff.sym.Activation(net, act_type='relu', name='relu1')
    net = ff.sym.FullyConnected(net, num_hidden=10, name='fc2')
    return ff.sym.SoftmaxOutput(net, name='softmax')


def train_speed(ff, X, y, batch, nctx, epochs):
    model = ff.FeedForward(mlp(ff), ctx=[ff.cpu(i) for i in range(nctx)], num_epoch=1,
                           optimizer='sgd', learning_rate=0.05, momentum=0.9,
                           initializer=ff.init.Xavier(), numpy_batch_size=batch)
    model.fit(X, y)                                   # warm-up: compiles
    model = ff.FeedForward(mlp(ff), ctx=[ff.cpu(i) for i in range(nctx)], num_epoch=epochs,
                           optimizer='sgd', learning_rate=0.05, momentum=0.9,
                           initializer=ff.init.Xavier(), numpy_batch_size=batch)
    tic = time.perf_counter()
    model.fit(X, y)
    dt = time.perf_counter() - tic
    return epochs * len(y) / dt, dt, model


def first_batch():
    """Child process: time from start to the first finished training batch."""
    t0 = time.perf_counter()
    import ffnumba as ff
    X, y, _, _ = ff.datasets.load_mnist()
    done = {}

    def cb(param):
        if 'time' not in done:
            done['time'] = time.perf_counter() - t0
    model = ff.FeedForward(mlp(ff), ctx=[ff.cpu(0)], num_epoch=1, optimizer='sgd',
                           learning_rate=0.1, numpy_batch_size=100)
    model.fit(X[:200], y[:200], batch_end_callback=cb)
    print('%.3f' % done['time'])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--first-batch', action='store_true', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_batch:
        return first_batch()
    import ffnumba as ff
    import logging
    logging.disable(logging.INFO)
    print('threads: NUMBA_NUM_THREADS=%s OMP/OPENBLAS=%s' % (
        os.environ.get('NUMBA_NUM_THREADS', 'default'), os.environ.get('OPENBLAS_NUM_THREADS', 'default')))
    X, y, Xt, yt = ff.datasets.load_mnist()
    epochs = 2 if args.quick else 5
    for batch in (32, 256):
        for nctx in (1, 2):
            sps, _, _ = train_speed(ff, X, y, batch, nctx, epochs)
            print('train  batch %3d  %d ctx: %8.0f samples/s' % (batch, nctx, sps))
    _, dt, model = train_speed(ff, X, y, 100, 2, 10)
    print('train  10 epochs x 4000 images, batch 100, 2 ctx: %.2f s (MXNet 1.9.1: ~1.1 s)' % dt)
    model.predict(Xt[:256])
    tic = time.perf_counter()
    reps = 5
    for _ in range(reps):
        model.predict(Xt)
    print('infer  batch 100 (numpy_batch_size), ctx[0]: %8.0f samples/s'
          % (reps * len(yt) / (time.perf_counter() - tic)))
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        cmd = [sys.executable, os.path.abspath(__file__), '--first-batch']
        cold = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        warm = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    print('first finished batch from process start: cold cache %s s, warm cache %s s'
          % (cold.strip(), warm.strip()))


if __name__ == '__main__':
    main()
