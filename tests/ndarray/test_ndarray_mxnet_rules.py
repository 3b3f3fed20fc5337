"""NDArray as MXNet users use it: fluent methods, MXNet's arithmetic rules,
indexing, reductions, numpy protocols, pickling and creation with ``out=``.
Expected values checked against MXNet 1.9.1."""
import pickle

import numpy as np
import pytest

import ffnumba as mx
from ffnumba.base import FFError, ShapeError
from ffnumba.ops.registry import get_op

nd = mx.nd


def test_fluent_methods_come_from_the_registry():
    x = nd.array([[1.0, -2.0], [3.0, 0.5]])
    np.testing.assert_allclose(x.exp().asnumpy(), np.exp(x.asnumpy()), rtol=1e-6)
    np.testing.assert_allclose(x.clip(0, 1).asnumpy(), [[1, 0], [1, 0.5]])
    np.testing.assert_allclose(x.transpose().asnumpy(), x.asnumpy().T)
    assert x.abs().asnumpy().min() >= 0
    # a listed MXNet name without a registered operator is an AttributeError ...
    missing = [n for n in ('arccosh', 'rcbrt', 'degrees') if not _registered(n)]
    for name in missing:
        with pytest.raises(AttributeError):
            getattr(x, name)
    # ... and a name MXNet never had is one too
    with pytest.raises(AttributeError):
        x.not_a_method
    assert 'exp' in dir(x)


def _registered(name):
    try:
        get_op(name)
        return True
    except FFError:
        return False


def test_integer_division_and_mod_follow_mxnet():
    a = nd.array([-7, 7, 5, -5, 3], dtype='int32')
    b = nd.array([2, -2, 4, 3, -2], dtype='int32')
    q = a / b
    assert q.dtype is np.int32
    np.testing.assert_array_equal(q.asnumpy(), [-3, -3, 1, -1, -1])   # truncation
    np.testing.assert_array_equal((a % b).asnumpy(), [1, -1, 1, 1, -1])  # divisor's sign
    np.testing.assert_array_equal((a % 3).asnumpy(), [2, 1, 2, 1, 0])
    np.testing.assert_array_equal((a / 2).asnumpy(), [-3, 3, 2, -2, 1])
    f = nd.array([-7.0, 7, 5, -5, 3])
    g = nd.array([2.0, -2, 0, 3, -2])
    np.testing.assert_array_equal((f % g).asnumpy(), [1, -1, 0, 1, -1])  # x % 0 == 0
    np.testing.assert_allclose((7.5 % f).asnumpy(), [-6.5, 0.5, 2.5, -2.5, 1.5])
    with pytest.raises(FFError, match='division by zero'):
        a / nd.zeros((5,), dtype='int32')
    a /= b
    np.testing.assert_array_equal(a.asnumpy(), [-3, -3, 1, -1, -1])


def test_nan_propagates_in_max_min():
    x = nd.array([1.0, np.nan, 3.0])
    assert np.isnan(x.max().asscalar()) and np.isnan(x.min().asscalar())
    assert np.isnan(nd.max(x).asscalar()) and np.isnan(nd.min(x).asscalar())
    y = nd.array([[np.nan, 1.0], [2.0, 5.0]])
    np.testing.assert_array_equal(nd.max(y, axis=1).asnumpy(), [np.nan, 5.0])


def test_bool_float_int_tolist_matmul():
    assert not bool(nd.array([]))
    assert bool(nd.array([2.0])) and not bool(nd.zeros((1,)))
    with pytest.raises(ValueError):
        bool(nd.ones((2,)))
    assert float(nd.array([2.5])) == 2.5 and int(nd.array([3.0])) == 3
    assert nd.array([[1, 2], [3, 4]]).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    a = nd.array([[1.0, 2], [3, 4]])
    np.testing.assert_allclose((a @ a).asnumpy(), a.asnumpy() @ a.asnumpy())
    np.testing.assert_allclose((np.eye(2) @ a).asnumpy(), a.asnumpy())


def test_indexing_with_index_arrays_and_size1_assignment():
    x = nd.array(np.arange(12).reshape(3, 4))
    idx = nd.array([2, 0])
    np.testing.assert_array_equal(x[idx].asnumpy(), np.arange(12).reshape(3, 4)[[2, 0]])
    np.testing.assert_array_equal(x[np.array([1])].asnumpy(), [[4, 5, 6, 7]])
    np.testing.assert_array_equal(x[(idx, nd.array([1, 3]))].asnumpy(), [9, 3])
    b = nd.zeros((3,))
    b[0] = nd.array([3.5])
    np.testing.assert_array_equal(b.asnumpy(), [3.5, 0, 0])
    x[idx] = 0
    assert x.asnumpy()[[0, 2]].sum() == 0
    with pytest.raises(IndexError):
        x[nd.array([7])]


def test_reductions_exclude_out_and_argmax_out():
    x = nd.array([[1.0, 5.0], [7.0, 2.0]])
    np.testing.assert_allclose(x.sum(axis=1, exclude=True).asnumpy(), [8, 7])
    o = nd.zeros((2,))
    assert x.argmax(axis=1, out=o) is o
    np.testing.assert_array_equal(o.asnumpy(), [1, 0])
    np.testing.assert_array_equal(x.argmin(axis=0).asnumpy(), [0, 1])
    np.testing.assert_allclose(x.norm().asnumpy(), [np.sqrt(79.0)], rtol=1e-6)
    np.testing.assert_allclose(x.norm(ord=1, axis=0).asnumpy(), [8, 7])
    with pytest.raises(FFError, match='ord'):
        x.norm(ord=3)
    with pytest.raises(ShapeError):
        x.sum(axis=2)


def test_flatten_expand_dims_squeeze_inplace():
    x = nd.ones((2, 1, 3))
    f = x.flatten()
    f[:] = 5
    assert x.asnumpy().max() == 1            # a copy by default (MXNet)
    v = x.flatten(inplace=True)
    v[:] = 7
    assert x.asnumpy().min() == 7            # a view with inplace=True
    assert x.expand_dims(0).shape == (1, 2, 1, 3)
    assert x.expand_dims(-1, inplace=True).shape == (2, 1, 3, 1)
    assert x.squeeze().shape == (2, 3) and x.squeeze(axis=1).shape == (2, 3)
    with pytest.raises(ShapeError):
        x.squeeze(axis=0)
    with pytest.raises(ShapeError):
        x.expand_dims(5)


def test_numpy_protocols():
    x = nd.array([1.0, 2.0, 3.0])
    m = np.mean(x)                            # the method, as numpy calls it: an NDArray
    assert isinstance(m, nd.NDArray) and float(m) == pytest.approx(2.0)
    a = nd.array([[0.3, 0.7], [0.9, 0.1]])
    assert np.argmax(a, axis=1).asnumpy().tolist() == [1, 0]
    assert float(np.sum(a)) == pytest.approx(2.0) and float(np.max(a)) == pytest.approx(0.9)
    assert np.std(x) == pytest.approx(np.std([1.0, 2.0, 3.0]))
    assert isinstance(np.exp(x), np.ndarray)
    r = np.ones(3) + x                        # numpy on the left still gives an NDArray
    assert isinstance(r, nd.NDArray) and r.asnumpy().tolist() == [2, 3, 4]
    assert isinstance(np.ones(3) == x, nd.NDArray)
    np.testing.assert_allclose(np.concatenate([x, x]), [1, 2, 3, 1, 2, 3])


def test_pickle_uses_mxnet_payload():
    x = nd.array([[1, 2], [3, 4]], dtype='int32')
    state = x.__getstate__()
    assert set(state) == {'handle'}
    y = pickle.loads(pickle.dumps(x))
    assert y.dtype is np.int32 and y.asnumpy().tolist() == [[1, 2], [3, 4]]


def test_from_numpy_zero_copy():
    a = np.arange(6, dtype='float32').reshape(3, 2)
    m = nd.from_numpy(a)
    with pytest.raises(ValueError):
        a[0, 0] = 9                           # MXNet: the numpy side becomes read-only
    m[2, 1] = 100
    assert a[2, 1] == 100                     # shared memory
    c = np.arange(6.0).reshape(2, 3)
    m2 = nd.from_numpy(c, zero_copy=False)
    m2[:] = 0
    assert c.sum() == 15
    with pytest.raises(ShapeError, match='C-contiguous'):
        nd.from_numpy(np.ones((2, 3)).T)


def test_creation_out_moveaxis_load_frombuffer_crop_alias():
    o = nd.ones((2, 2))
    assert nd.zeros((2, 2), out=o) is o and o.asnumpy().sum() == 0
    assert nd.ones((2, 2), out=o) is o and o.asnumpy().sum() == 4
    r = nd.zeros((4,))
    assert nd.arange(4, out=r) is r and r.asnumpy().tolist() == [0, 1, 2, 3]
    with pytest.raises(ShapeError):
        nd.full((3,), 1.0, out=o)
    x = nd.zeros((2, 3, 4))
    assert nd.moveaxis(x, 0, 2).shape == (3, 4, 2)
    assert nd.moveaxis(x, [0, 1], [-1, -2]).shape == (4, 3, 2)
    with pytest.raises(ShapeError):
        nd.moveaxis(x, 3, 0)
    buf = nd.dumps({'a': nd.array([1.0, 2.0])})
    loaded = nd.load_frombuffer(buf)
    assert loaded['a'].asnumpy().tolist() == [1.0, 2.0]
    if _registered('slice'):
        np.testing.assert_array_equal(nd.crop(x, begin=(0, 0, 0), end=(1, 2, 2)).shape,
                                      (1, 2, 2))
