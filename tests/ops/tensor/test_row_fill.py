"""fill_element_0index and _onehot_encode (legacy row writes): OpCase rows, nd helpers."""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba.base import ParamError, ShapeError
from ffnumba.testing import OpCase


class TestFillElement0Index(OpCase):
    op = 'fill_element_0index'
    shapes = [dict(lhs=(4, 3), mhs=(4,), rhs=(4,)), dict(lhs=(1, 5), mhs=(1,), rhs=(1,))]
    grad_nodes = ['lhs', 'mhs']
    max_batch = None

    def inputs(self, rng, p, shapes):
        n, k = shapes['lhs']
        return {'lhs': rng.standard_normal((n, k)), 'mhs': rng.standard_normal(n),
                'rhs': rng.integers(0, k, n).astype(np.float64)}

    def reference(self, p, lhs, mhs, rhs):
        out = lhs.copy()
        out[np.arange(lhs.shape[0]), rhs.astype(int)] = mhs
        return [out]


class TestOnehotEncode(OpCase):
    op = '_onehot_encode'
    shapes = [dict(lhs=(4,), rhs=(4, 3)), dict(lhs=(2,), rhs=(2, 6))]
    nondifferentiable = True
    max_batch = None

    def inputs(self, rng, p, shapes):
        n, k = shapes['rhs']
        return {'lhs': rng.integers(0, k, n).astype(np.float64), 'rhs': rng.standard_normal((n, k))}

    def reference(self, p, lhs, rhs):
        out = np.zeros(rhs.shape)
        out[np.arange(rhs.shape[0]), lhs.astype(int)] = 1
        return [out]


def test_nd_helpers_as_mxnet_calls_them():
    npy = np.arange(12.0).reshape(4, 3)
    idx, val = np.array([2, 0, 1, 2]), np.array([-1.0, -2, -3, -4])
    got = ff.nd.fill_element_0index(ff.nd.array(npy), ff.nd.array(val), ff.nd.array(idx))
    want = npy.copy()
    want[np.arange(4), idx] = val
    np.testing.assert_array_equal(got.asnumpy(), want)
    arr = ff.nd.array(npy)
    res = ff.nd.onehot_encode(ff.nd.array(idx), out=arr)
    assert res is arr
    np.testing.assert_array_equal(arr.asnumpy(), np.eye(3)[idx])


def test_errors():
    with pytest.raises(ParamError, match='outside'):
        ff.nd.onehot_encode(ff.nd.array([0, 3]), ff.nd.zeros((2, 3)))
    with pytest.raises(ParamError, match='outside'):
        ff.nd.fill_element_0index(ff.nd.zeros((2, 3)), ff.nd.zeros(2), ff.nd.array([0, -1]))
    with pytest.raises(ShapeError, match='mhs'):
        ff.nd.fill_element_0index(ff.nd.zeros((2, 3)), ff.nd.zeros(3), ff.nd.zeros(2))
