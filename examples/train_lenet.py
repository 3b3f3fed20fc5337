"""MXNet's classic LeNet trained with FeedForward on real MNIST (or Fashion-MNIST).

    python examples/train_lenet.py                      # load_mnist(), 10 epochs, 2 CPU contexts
    python examples/train_lenet.py --dataset fashion    # Debian's full Fashion-MNIST

Network (LeCun et al. 1998, as in MXNet's image-classification example): conv 5x5x20, tanh,
max-pool 2, conv 5x5x50, tanh, max-pool 2, fc 500, tanh, fc 10, SoftmaxOutput.
MNIST: Y. LeCun, C. Cortes. Fashion-MNIST: Zalando SE (MIT).
"""
import argparse
import logging
import time

import ffnumba as ff


def lenet():
    data = ff.sym.Variable('data')
    net = ff.sym.Convolution(data, kernel=(5, 5), num_filter=20, name='conv1')
    net = ff.sym.Activation(net, act_type='tanh', name='tanh1')
    net = ff.sym.Pooling(net, pool_type='max', kernel=(2, 2), stride=(2, 2), name='pool1')
    net = ff.sym.Convolution(net, kernel=(5, 5), num_filter=50, name='conv2')
    net = ff.sym.Activation(net, act_type='tanh', name='tanh2')
    net = ff.sym.Pooling(net, pool_type='max', kernel=(2, 2), stride=(2, 2), name='pool2')
    net = ff.sym.Flatten(net)
    net = ff.sym.FullyConnected(net, num_hidden=500, name='fc1')
    net = ff.sym.Activation(net, act_type='tanh', name='tanh3')
    net = ff.sym.FullyConnected(net, num_hidden=10, name='fc2')
    return ff.sym.SoftmaxOutput(net, name='softmax')


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--dataset', choices=['mnist', 'fashion'], default='mnist')
    parser.add_argument('--epochs', type=int, default=10)
    parser.add_argument('--ctx', type=int, default=2, help='number of CPU contexts')
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--lr', type=float, default=0.05)
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format='%(message)s')
    ff.random.seed(args.seed)

    load = ff.datasets.load_mnist if args.dataset == 'mnist' else ff.datasets.load_fashion_mnist
    X_train, y_train, X_test, y_test = load()
    model = ff.FeedForward(lenet(), ctx=[ff.cpu(i) for i in range(args.ctx)],
                           num_epoch=args.epochs, optimizer='sgd', learning_rate=args.lr,
                           momentum=0.9, wd=1e-4, initializer=ff.init.Xavier(),
                           numpy_batch_size=args.batch_size)
    tic = time.time()
    model.fit(X_train, y_train, eval_data=(X_test, y_test), eval_metric='acc',
              batch_end_callback=ff.callback.Speedometer(args.batch_size, 50))
    dt = time.time() - tic
    print('final test accuracy: %.4f' % model.score(X_test, y_test))
    print('training: %d epochs of %d images in %.1f s = %.0f samples/s on %d context(s)'
          % (args.epochs, len(y_train), dt, args.epochs * len(y_train) / dt, args.ctx))


if __name__ == '__main__':
    main()
