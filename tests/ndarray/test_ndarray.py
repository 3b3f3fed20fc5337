"""NDArray core behaviour, checked against what MXNet 1.9.1 does."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba as ff
import ffnumba.ndarray as nd
from ffnumba.base import DTypeError, FFError, ShapeError


def test_array_defaults_to_float32_even_from_int64():
    assert nd.array(np.arange(3, dtype=np.int64)).dtype is np.float32
    assert nd.array([1, 2]).dtype is np.float32
    src = nd.array([1, 2], dtype='int32')
    assert nd.array(src).dtype is np.int32
    assert nd.array(src, dtype='float64').dtype is np.float64


def test_creation_functions():
    z = nd.zeros((2, 3))
    assert z.shape == (2, 3) and z.dtype is np.float32 and not z.asnumpy().any()
    assert nd.zeros(4).shape == (4,)
    np.testing.assert_array_equal(nd.ones((2,), dtype='int8').asnumpy(), [1, 1])
    f = nd.full((2,), 3.5, dtype='int32')
    assert f.dtype is np.int32
    np.testing.assert_array_equal(f.asnumpy(), [3, 3])
    np.testing.assert_array_equal(nd.arange(0, 3, repeat=2).asnumpy(), [0, 0, 1, 1, 2, 2])
    assert nd.empty((1, 2)).shape == (1, 2)
    assert str(nd.zeros((1,)).context) == 'cpu(0)'
    with ff.Context('cpu', 1):
        assert nd.zeros((1,)).context == ff.cpu(1)


def test_properties():
    a = nd.zeros((2, 3, 4), dtype='float64')
    assert (a.ndim, a.size, a.stype, a.dtype) == (3, 24, 'default', np.float64)
    assert a.T.shape == (4, 3, 2)
    assert np.asarray(a).shape == (2, 3, 4)


@given(sa=st.lists(st.integers(1, 3), min_size=1, max_size=3),
       drop=st.integers(0, 2), ones=st.lists(st.booleans(), min_size=3, max_size=3))
def test_arithmetic_broadcasts_like_numpy(sa, drop, ones):
    sb = [1 if o else d for d, o in zip(sa, ones)][drop:] or [1]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(sa).astype(np.float32)
    y = rng.standard_normal(sb).astype(np.float32) + 3
    a, b = nd.array(x), nd.array(y)
    for got, want in ((a + b, x + y), (a - b, x - y), (a * b, x * y), (a / b, x / y)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)
    np.testing.assert_allclose((2 - a).asnumpy(), 2 - x, rtol=1e-6)
    np.testing.assert_allclose((2 / b).asnumpy(), 2 / y, rtol=1e-6)
    assert (a * 2.0).dtype is np.float32


def test_comparisons_give_the_input_dtype():
    r = nd.array([1, 2, 3]) > 2
    assert r.dtype is np.float32
    np.testing.assert_array_equal(r.asnumpy(), [0, 0, 1])


def test_incompatible_broadcast_is_shape_error():
    with pytest.raises(ShapeError, match=r'\(2, 3\).*\(4,\)'):
        nd.ones((2, 3)) + nd.ones((4,))


def test_basic_indexing_gives_views():
    a = nd.array(np.arange(6).reshape(2, 3))
    b = a[1]
    b[:] = 7
    c = a[0:1]
    c[:] = -1
    np.testing.assert_array_equal(a.asnumpy(), [[-1, -1, -1], [7, 7, 7]])
    v = a[1]
    v += 10
    np.testing.assert_array_equal(a.asnumpy()[1], [17, 17, 17])
    a[:] = 0.5
    assert (a.asnumpy() == 0.5).all()


def test_scalar_index_of_vector_is_shape_1():
    x = nd.array([1, 2, 3])[1]
    assert x.shape == (1,) and x.asscalar() == 2.0


def test_inplace_arithmetic_keeps_identity_and_dtype():
    a = nd.ones((2,), dtype='float16')
    ident = id(a)
    a += 1
    a *= nd.array([2, 3], dtype='float16')
    assert id(a) == ident and a.dtype is np.float16
    np.testing.assert_array_equal(a.asnumpy(), [4, 6])


def test_copyto_and_as_in_context():
    x = nd.array([1, 2])
    z = nd.zeros((2,))
    assert x.copyto(z) is z
    np.testing.assert_array_equal(z.asnumpy(), [1, 2])
    y = x.copyto(ff.cpu(1))
    assert y.context == ff.cpu(1) and y is not x
    assert x.as_in_context(ff.cpu(0)) is x
    assert x.as_in_context(ff.cpu(2)).context == ff.cpu(2)
    with pytest.raises(ShapeError, match='copyto'):
        x.copyto(nd.zeros((3,)))
    with pytest.raises(FFError):
        x.copyto('cpu')


def test_copy_is_independent():
    x = nd.array([1, 2])
    c = x.copy()
    c[:] = 0
    np.testing.assert_array_equal(x.asnumpy(), [1, 2])


def test_astype_float_to_int_truncates_toward_zero():
    r = nd.array([-1.7, 1.7, 2.5]).astype('int32')
    assert r.dtype is np.int32
    np.testing.assert_array_equal(r.asnumpy(), [-1, 1, 2])
    same = nd.ones((1,))
    assert same.astype('float32', copy=False) is same


def test_asscalar_and_truth_value():
    assert nd.array([3.5]).asscalar() == 3.5
    with pytest.raises(ShapeError, match='not a scalar'):
        nd.ones((2, 3)).asscalar()
    assert bool(nd.array([1]))
    with pytest.raises(ValueError, match='ambiguous'):
        bool(nd.ones((2,)))


def test_reshape():
    a = nd.array(np.arange(6))
    assert a.reshape(-1, 2).shape == (3, 2)
    assert a.reshape((2, 3)).shape == (2, 3)
    assert a.reshape(shape=(6, 1)).shape == (6, 1)
    r = a.reshape(2, 3)
    r[:] = 1
    assert (a.asnumpy() == 1).all()  # a reshape is a view
    with pytest.raises(ShapeError, match='reshape'):
        a.reshape(4, 2)


def test_reshape_special_codes_like_mxnet():
    a = nd.zeros((2, 3, 4))
    assert a.reshape(0, -1).shape == (2, 12)            # values from MXNet 1.9.1
    assert a.reshape((-3, 0)).shape == (6, 4)
    assert a.reshape(-4, 1, 2, -2).shape == (1, 2, 3, 4)
    assert a.reshape(shape=(0, 0, -1)).shape == (2, 3, 4)
    assert a.reshape((-1, 0), reverse=True).shape == (6, 4)
    v = a.reshape(0, -1)
    v[:] = 3
    assert (a.asnumpy() == 3).all()                      # still a view
    with pytest.raises(ShapeError, match='reshape'):
        a.reshape(-3, -3)
    with pytest.raises(ShapeError, match='reshape'):
        a.reshape(5, 0)


def test_concat():
    a, b = nd.ones((2, 1)), nd.zeros((2, 2))
    assert nd.concat(a, b).shape == (2, 3)
    assert nd.concatenate([a, a]).shape == (4, 1)
    with pytest.raises(ShapeError):
        nd.concatenate([a, nd.zeros((3, 3))])
    with pytest.raises(ShapeError):
        nd.concatenate([])


def test_unknown_dtype_is_dtype_error():
    with pytest.raises(DTypeError):
        nd.zeros((2,), dtype='complex64')
    with pytest.raises(DTypeError):
        nd.array([1], dtype='not_a_dtype')


def test_reductions():
    a = nd.array([[1, 2], [3, 4]])
    np.testing.assert_allclose(a.sum().asnumpy(), [10])
    np.testing.assert_allclose(a.sum(axis=0).asnumpy(), [4, 6])
    np.testing.assert_allclose(a.mean(axis=1).asnumpy(), [1.5, 3.5])
    np.testing.assert_allclose(a.max().asnumpy(), [4])
    np.testing.assert_allclose(a.norm().asnumpy(), [np.sqrt(30)], rtol=1e-6)


def test_reductions_keep_dtype_and_are_never_0d_as_mxnet():
    # MXNet 1.9.1: int32 sum/argmax stay int32; full reductions have shape (1,)
    a = nd.array(np.arange(6).reshape(2, 3), dtype='int32')
    assert a.sum().dtype is np.int32 and a.sum().shape == (1,)
    assert a.sum(keepdims=True).shape == (1, 1)
    assert a.argmax().shape == (1,) and a.argmax().dtype is np.int32
    assert a.argmax().asnumpy()[0] == 5
    np.testing.assert_array_equal(a.argmax(axis=1).asnumpy(), [2, 2])
    np.testing.assert_array_equal(a.min(axis=[0, 1]).asnumpy(), [0])
    assert a.max(axis=1, keepdims=True).shape == (2, 1)
    assert a.expand_dims(0).shape == (1, 2, 3) and a.expand_dims(-1).shape == (2, 3, 1)
    assert a.flatten().shape == (2, 3)
    assert a.zeros_like().dtype is np.int32 and a.ones_like().asnumpy().sum() == 6


@pytest.mark.parametrize('call', [lambda a: a.sum(axis=2), lambda a: a.mean(axis=(0, -3)),
                                  lambda a: a.argmax(axis=5), lambda a: a.argmax(axis=(0, 1)),
                                  lambda a: a.expand_dims(4)])
def test_bad_axis_is_shape_error(call):
    with pytest.raises(ShapeError, match='axis'):
        call(nd.zeros((2, 3)))


def test_gpu_context_without_device_is_clear_fferror():
    if ff.num_gpus():
        return  # a real GPU is present: the error path is not reachable
    with pytest.raises(FFError, match='no such CUDA device'):
        nd.zeros((2,), ctx=ff.gpu(0))


def test_indexing_assignment_and_conversion_errors_are_fferrors():
    a = nd.zeros((2, 3))
    with pytest.raises(IndexError):  # an NDArrayIndexError: FFError and IndexError
        a[5]
    with pytest.raises(FFError, match=r'shape \(2, 3\).*out of range'):
        a[5] = 1
    with pytest.raises(ShapeError, match=r'shape \(3, 3\)'):
        a[:] = np.zeros((3, 3))
    with pytest.raises(ShapeError, match='rectangular'):
        nd.array([[1, 2], [3]])
    with pytest.raises(DTypeError, match='cannot convert'):
        nd.array(['a', 'b'])
    assert [r.shape for r in a] == [(3,), (3,)]  # iteration still ends cleanly


def test_save_to_missing_folder_is_fferror(tmp_path):
    with pytest.raises(FFError, match='cannot write'):
        nd.save(str(tmp_path / 'nope' / 'x.params'), {'a': nd.zeros(2)})


def test_allocation_failure_is_an_fferror_naming_the_shape():
    with pytest.raises(ff.base.FFError, match=r'shape \(1000000000000, 1000\)'):
        ff.nd.zeros((10 ** 12, 1000))
    data = ff.sym.var('data')
    net = ff.sym.Pooling(data, kernel=(2, 2), pad=(10 ** 6, 10 ** 6), pool_type='max')
    with pytest.raises(ff.base.FFError, match='out of memory'):
        net.simple_bind(ff.cpu(), data=(2, 3, 4, 4))
