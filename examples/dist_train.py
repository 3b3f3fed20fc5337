"""Data-parallel training over MPI: an MLP or LeNet on real MNIST with kvstore 'dist_sync'.

    pip install 'ffnumba[dist,data]'
    mpirun -np 2 python -m mpi4py examples/dist_train.py                 # MLP, 5 epochs
    mpirun -np 4 python -m mpi4py examples/dist_train.py --net lenet --epochs 2
    mpirun -np 2 python -m mpi4py examples/dist_train.py --kvstore dist_async

Every rank trains on its own interleaved shard of the 4,000 training images
(``NDArrayIter(num_parts=kv.num_workers, part_index=kv.rank)``) with
``--batch-size`` images per step; the gradients are summed over the ranks, so
the run equals one process with ``num_workers * batch-size`` images per step.
Rank 0 writes the checkpoints ``<out>/<net>-symbol.json`` and
``<out>/<net>-%04d.params`` and the final score; the others only train. Data:
``ff.datasets.load_mnist()`` (MNIST by Y. LeCun and C. Cortes, shipped with
ffnumba). See docs/guide/distributed.md.
"""
import argparse
import logging
import os
import sys
import time

import ffnumba as ff

# The networks of the single-process examples, run unchanged over MPI.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_lenet import lenet  # noqa: E402
from train_mnist import mlp  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--net', choices=('mlp', 'lenet'), default='mlp')
    parser.add_argument('--epochs', type=int, default=5)
    parser.add_argument('--batch-size', type=int, default=50, help='images per rank per step')
    parser.add_argument('--lr', type=float, default=0.1)
    parser.add_argument('--ctx', type=int, default=1, help='CPU contexts per rank')
    parser.add_argument('--out', default=os.path.join('ffnumba_out', 'dist_train'),
                        help='output folder (rank 0 writes)')
    parser.add_argument('--timeout', type=float, default=120,
                        help='seconds to wait for a stuck peer before aborting')
    parser.add_argument('--fp16', action='store_true', help='send gradients as float16')
    parser.add_argument('--kvstore', choices=('dist_sync', 'dist_async'), default='dist_sync',
                        help='dist_async: each update applied at once by a server on rank 0')
    args = parser.parse_args()

    kv = ff.kv.create(args.kvstore)     # one per process; rank and size from MPI
    kv.timeout = args.timeout
    if args.fp16:
        kv.set_gradient_compression({'type': 'fp16'})
    logging.basicConfig(level=logging.INFO,
                        format='[rank %d] %%(message)s' % kv.rank if kv.rank else '%(message)s')
    if kv.rank == 0:
        os.makedirs(args.out, exist_ok=True)
    ff.random.seed(0)                    # the same initial weights everywhere (rank 0's win)

    X_train, y_train, X_test, y_test = ff.datasets.load_mnist()
    train = ff.io.NDArrayIter(X_train, y_train, batch_size=args.batch_size, shuffle=True,
                              num_parts=kv.num_workers, part_index=kv.rank)
    mod = ff.mod.Module(mlp() if args.net == 'mlp' else lenet(),
                        context=[ff.cpu(i) for i in range(args.ctx)])
    prefix = os.path.join(args.out, args.net)
    tic = time.time()
    mod.fit(train, kvstore=kv, optimizer='sgd',
            optimizer_params={'learning_rate': args.lr, 'momentum': 0.9},
            initializer=ff.init.Xavier(), num_epoch=args.epochs,
            epoch_end_callback=ff.callback.do_checkpoint(prefix),
            batch_end_callback=ff.callback.Speedometer(args.batch_size, 20))
    took = time.time() - tic
    seen = args.epochs * train.num_data * kv.num_workers
    kv.barrier()
    if kv.rank == 0:
        test = ff.io.NDArrayIter(X_test, y_test, batch_size=100)
        acc = dict(mod.score(test, 'acc'))['accuracy']
        print('final test accuracy: %.4f' % acc)
        print('training (%s): %d ranks x %d context(s), %d images in %.2f s = %.0f samples/s; '
              'checkpoints under %s' % (args.kvstore, kv.num_workers, args.ctx, seen, took,
                                        seen / took, os.path.abspath(args.out)))
        if hasattr(kv, 'stats'):
            print('dist_sync: %.2f s in agreement checks and all-reduces over %d pushes'
                  % (kv.stats['comm_s'], kv.stats['pushes']))


if __name__ == '__main__':
    main()
