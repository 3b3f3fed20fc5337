"""NDArray behaviours MXNet 1.9.1's own unit tests rely on (checked against MXNet)."""
import numpy as np
import pytest

import ffnumba as mx
from ffnumba.base import FFError


def test_creation_ops_need_no_ndarray_input():
    e = mx.nd.eye(3, k=1, ctx=mx.cpu())
    np.testing.assert_array_equal(e.asnumpy(), np.eye(3, k=1))
    assert e.context == mx.cpu()
    lin = mx.nd.linspace(0, 1, 5, ctx='cpu(0)')
    np.testing.assert_allclose(lin.asnumpy(), np.linspace(0, 1, 5))
    assert mx.nd.linspace(0, 1, 5).context == mx.current_context()
    with pytest.raises(FFError):
        mx.nd.eye(2, ctx='tpu(0)')


def test_broadcast_to_takes_numpy_shape():
    out = mx.nd.ones((1, 3)).broadcast_to(shape=np.array([4, 3]))
    assert out.shape == (4, 3)
    with pytest.raises(FFError):
        mx.nd.broadcast_like(mx.nd.ones((1, 3)), mx.nd.ones((4, 3)), lhs_axes=(), rhs_axes=())


def test_argmax_argmin_nan_is_extreme():
    # MXNet 1.9.1 (and numpy): the first NaN is both the max and the min
    d = np.array([[1, np.nan, 3, np.nan], [2, 1, 0, -1]], dtype=np.float32)
    x = mx.nd.array(d)
    np.testing.assert_array_equal(mx.nd.argmax(x, axis=1).asnumpy(), [1, 0])
    np.testing.assert_array_equal(mx.nd.argmin(x, axis=1).asnumpy(), [1, 3])
    np.testing.assert_array_equal(mx.nd.argmax(x, axis=0).asnumpy(), [1, 0, 0, 0])


def test_tostype_default_copies():
    x = mx.nd.array([1.0, 2.0])
    y = x.tostype('default')
    y[0] = 5
    assert x.asnumpy()[0] == 1.0 and y.stype == 'default'
    with pytest.raises(FFError):
        x.tostype('csr')


def test_min_max_of_zero_size_array_raise_ffnumba_error():
    a = mx.nd.zeros((5, 0))
    for fn in (a.min, a.max):
        with pytest.raises(FFError, match='zero-size'):
            fn()
