"""Tests of ffnumba.datasets: shapes, dtypes, ranges, the fixed split, IDX parsing, errors."""
import builtins
import gzip
import os
import subprocess
import sys

import numpy as np
import pytest

from ffnumba import datasets
from ffnumba.base import FFError


def _check(arrays, n_train, n_test, hw):
    X_tr, y_tr, X_te, y_te = arrays
    assert X_tr.shape == (n_train, 1) + hw and X_te.shape == (n_test, 1) + hw
    assert y_tr.shape == (n_train,) and y_te.shape == (n_test,)
    assert X_tr.dtype == np.float32 and X_te.dtype == np.float32
    assert y_tr.dtype == np.int64 and y_te.dtype == np.int64
    for X in (X_tr, X_te):
        assert X.min() == 0.0 and X.max() == 1.0
    for y in (y_tr, y_te):
        assert set(np.unique(y)) == set(range(10))


def test_mnist_split_is_fixed_and_complete():
    a = datasets.load_mnist()
    _check(a, 4000, 1000, (28, 28))
    b = datasets.load_mnist()
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
        assert x is not y and x.flags.writeable      # copies, not the cache
    a[0][:] = -1                                     # changing a copy leaves the cache alone
    assert datasets.load_mnist()[0].min() == 0.0
    labels = np.concatenate([a[1], a[3]])
    assert np.bincount(labels).tolist() == [500] * 10  # the 5,000 images, 500 per digit
    assert not (np.diff(a[1][:50]) >= 0).all()       # shuffled, not class-sorted


def test_digits():
    _check(datasets.load_digits(), 1500, 297, (8, 8))
    X, y, Xt, yt = datasets.load_digits(n_train=1000, seed=3)
    assert X.shape[0] == 1000 and Xt.shape[0] == 797
    with pytest.raises(FFError, match='n_train'):
        datasets.load_digits(n_train=1797)


def _write_idx(path, magic, arr):
    header = magic.to_bytes(4, 'big') + b''.join(int(d).to_bytes(4, 'big') for d in arr.shape)
    with gzip.open(path, 'wb') as f:
        f.write(header + arr.astype(np.uint8).tobytes())


def _fake_fashion(folder, n_train=6, n_test=4):
    rng = np.random.default_rng(0)
    for prefix, n in (('train', n_train), ('t10k', n_test)):
        imgs = rng.integers(0, 256, (n, 28, 28))
        imgs[0, 0, 0], imgs[0, 0, 1] = 0, 255
        _write_idx(os.path.join(folder, '%s-images-idx3-ubyte.gz' % prefix), 2051, imgs)
        _write_idx(os.path.join(folder, '%s-labels-idx1-ubyte.gz' % prefix), 2049,
                   np.arange(n) % 10)


def test_fashion_mnist_idx_reader(tmp_path):
    _fake_fashion(str(tmp_path))
    X, y, Xt, yt = datasets.load_fashion_mnist(str(tmp_path))
    assert X.shape == (6, 1, 28, 28) and Xt.shape == (4, 1, 28, 28)
    assert X.dtype == np.float32 and y.dtype == np.int64
    assert X.min() == 0.0 and X.max() == 1.0
    assert y.tolist() == [0, 1, 2, 3, 4, 5] and yt.tolist() == [0, 1, 2, 3]
    assert len(datasets.FASHION_MNIST_CLASSES) == 10


def test_fashion_mnist_errors(tmp_path):
    with pytest.raises(FFError, match='apt-get install -y dataset-fashion-mnist'):
        datasets.load_fashion_mnist(str(tmp_path / 'nowhere'))
    bad = tmp_path / 'bad'
    bad.mkdir()
    _fake_fashion(str(bad))
    _write_idx(str(bad / 'train-labels-idx1-ubyte.gz'), 2051, np.arange(6))
    with pytest.raises(FFError, match='magic number 2051, expected 2049'):
        datasets.load_fashion_mnist(str(bad))
    short = tmp_path / 'short'
    short.mkdir()
    _fake_fashion(str(short))
    with gzip.open(str(short / 't10k-images-idx3-ubyte.gz'), 'wb') as f:
        f.write((2051).to_bytes(4, 'big') + (4).to_bytes(4, 'big') + (28).to_bytes(4, 'big')
                + (28).to_bytes(4, 'big') + b'\0' * 100)
    with pytest.raises(FFError, match='holds 100 data bytes'):
        datasets.load_fashion_mnist(str(short))
    mism = tmp_path / 'mism'
    mism.mkdir()
    _fake_fashion(str(mism))
    _write_idx(str(mism / 'train-labels-idx1-ubyte.gz'), 2049, np.arange(5))
    with pytest.raises(FFError, match='6 images but .* has 5 labels'):
        datasets.load_fashion_mnist(str(mism))


@pytest.mark.skipif(not os.path.isdir(datasets.FASHION_MNIST_DIR),
                    reason='Fashion-MNIST absent: apt-get install -y dataset-fashion-mnist')
def test_fashion_mnist_real():
    X, y, Xt, yt = datasets.load_fashion_mnist()
    assert X.shape == (60000, 1, 28, 28) and Xt.shape == (10000, 1, 28, 28)
    assert np.bincount(y).tolist() == [6000] * 10 and np.bincount(yt).tolist() == [1000] * 10
    assert X.dtype == np.float32 and 0.0 <= X.min() and X.max() <= 1.0


def test_missing_packages_say_how_to_install(monkeypatch):
    real_import = builtins.__import__

    def no_sklearn(name, *args, **kwargs):
        if name.startswith('sklearn'):
            raise ImportError('no sklearn')
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, '__import__', no_sklearn)
    monkeypatch.setattr(datasets, '_cache', {})
    with pytest.raises(FFError, match=r'pip install ffnumba\[data\]'):
        datasets.load_digits(n_train=1234)
    monkeypatch.setattr(builtins, '__import__', real_import)


def test_mnist_ships_with_the_package_and_needs_no_extra():
    """load_mnist reads the file inside ffnumba, importing nothing beyond numpy."""
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('mlxtend', 'sklearn', 'pandas', 'scipy',\n"
            "                                  'matplotlib', 'hypothesis'):\n"
            "            raise ImportError('blocked: ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "import ffnumba as ff\n"
            "X, y, Xt, yt = ff.datasets.load_mnist()\n"
            "print(X.shape, Xt.shape, sorted(set(y.tolist())) == list(range(10)))\n")
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == '(4000, 1, 28, 28) (1000, 1, 28, 28) True'


def test_damaged_mnist_file_is_an_fferror(tmp_path):
    bad = tmp_path / 'mnist_5k.csv.gz'
    bad.write_bytes(b'not gzip at all')
    with pytest.raises(FFError, match='reinstall ffnumba'):
        datasets._build_mnist(str(bad))
