"""softmin and softmax/log_softmax with use_length: OpCase rows and MXNet 1.9.1 values."""
import numpy as np
import pytest

import ffnumba.symbol as sym
from ffnumba import ndarray as nd
from ffnumba.testing import OpCase, check_symbolic_backward, check_symbolic_forward

from test_softmax import softmax_ref


def _masked_ref(data, length, axis=-1, log=False, temperature=None):
    ax = axis % data.ndim
    k = data.shape[ax]
    idx = np.arange(k).reshape([-1 if d == ax else 1 for d in range(data.ndim)])
    mask = idx < np.expand_dims(np.clip(length.astype(int), 0, k), ax)
    z = np.where(mask, data / (temperature or 1.0), -np.inf)
    m = np.max(np.where(mask, z, -1e300), axis=ax, keepdims=True)
    e = np.where(mask, np.exp(z - m), 0.0)
    s = e.sum(axis=ax, keepdims=True)
    if log:
        with np.errstate(divide='ignore', invalid='ignore'):
            out = z - m - np.log(s)
    else:
        with np.errstate(invalid='ignore'):
            out = e / s
    return np.where(mask, out, 0.0)


class TestSoftmin(OpCase):
    op = 'softmin'
    params = [dict(), dict(axis=0, temperature=2.0), dict(axis=1, temperature=0.5)]
    shapes = [dict(data=(2, 3, 4)), dict(data=(3, 5))]

    def reference(self, p, data):
        return [softmax_ref(-data, axis=p.get('axis', -1), temperature=p.get('temperature'))]


class _Length(OpCase):
    shapes = [dict(data=(2, 3, 4)), dict(data=(3, 5))]
    grad_nodes = ['data']
    log = False

    def make_symbol(self, p):
        return getattr(sym, self.op)(sym.Variable('data'), sym.Variable('length'),
                                     use_length=True, name='op', **p)

    def inputs(self, rng, p, shapes):
        k = shapes['data'][p.get('axis', -1) % len(shapes['data'])]
        return {'data': rng.uniform(-1, 1, shapes['data']),
                'length': rng.integers(0, k + 2, shapes['length']).astype(np.float64)}

    def reference(self, p, data, length):
        return [_masked_ref(data, length, log=self.log, **p)]


class TestSoftmaxLength(_Length):
    op = 'softmax'
    params = [dict(), dict(axis=1, temperature=2.0), dict(axis=0)]


class TestLogSoftmaxLength(_Length):
    op = 'log_softmax'
    params = [dict(), dict(axis=0)]
    log = True


def test_use_length_matches_mxnet():
    # MXNet 1.9.1: softmax(x, length, use_length=True) with int32 lengths
    x = np.arange(12.).reshape(2, 2, 3) * 0.1
    s = sym.softmax(sym.Variable('data'), sym.Variable('length'), use_length=True)
    assert s.list_arguments() == ['data', 'length']
    assert s.infer_shape(data=(2, 2, 3)) == ([(2, 2, 3), (2, 2)], [(2, 2, 3)], [])
    out = nd.softmax(nd.array(x, dtype='float64'), nd.array([[1, 3], [0, 2]], dtype='int32'),
                     use_length=True).asnumpy()
    np.testing.assert_allclose(out, [[[1, 0, 0], [0.30060961, 0.33222499, 0.3671654]],
                                     [[0, 0, 0], [0.47502081, 0.52497919, 0]]], rtol=1e-7)
    # a length above K (3 > 2 here) makes MXNet 1.9.1 read past the row (its values for that
    # row are garbage, not summing to 1); ffnumba clips it to K
    out = nd.softmax(nd.array(x, dtype='float64'),
                     nd.array([[1, 2, 0], [3, 1, 2]], dtype='int32'), use_length=True,
                     axis=1).asnumpy()
    np.testing.assert_allclose(out, [[[1, 0.42555748, 0], [0, 0.57444252, 0]],
                                     [[0.42555748, 1, 0.42555748],
                                      [0.57444252, 0, 0.57444252]]], rtol=1e-7)
    head = np.random.RandomState(0).randn(2, 2, 3)
    check_symbolic_backward(
        s, {'data': x, 'length': np.array([[1., 3], [0, 2]])}, [head],
        {'data': np.array([[[0, 0, 0], [0.39248563, 0.30973242, -0.70221805]],
                           [[0, 0, 0], [0.06647241, -0.06647241, 0]]])},
        rtol=1e-6, atol=1e-8, grad_req={'data': 'write', 'length': 'null'})


def test_softmin_matches_mxnet():
    np.testing.assert_allclose(nd.softmin(nd.array([1., 2, 3]), temperature=2.0).asnumpy(),
                               [0.5064804, 0.3071959, 0.18632373], rtol=1e-6)
    # large inputs: no overflow
    out = nd.softmin(nd.array([1000., 0.0], dtype='float64')).asnumpy()
    np.testing.assert_allclose(out, [0, 1])
