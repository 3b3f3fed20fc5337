"""norm, nansum, nanprod, moments: OpCase rows over axes, MXNet 1.9.1 values."""
import numpy as np
import pytest

import ffnumba.symbol as sym
from ffnumba import ndarray as nd
from ffnumba.base import ParamError
from ffnumba.testing import OpCase, check_symbolic_backward, check_symbolic_forward


def _axes(p, ndim, key='axis'):
    ax = p.get(key)
    if ax is None:
        return tuple(range(ndim))
    ax = (ax,) if isinstance(ax, int) else ax
    ax = tuple(a % ndim for a in ax)
    if p.get('exclude'):
        ax = tuple(d for d in range(ndim) if d not in ax)
    return ax


def _fix(r, p, ndim, key='axis'):
    if not p.get('keepdims') and r.ndim == 0:
        return r.reshape(1)
    return r


class _Reduce(OpCase):
    shapes = [dict(data=(2, 3, 4)), dict(data=(3, 5))]
    max_batch = None
    npfn = None

    def reference(self, p, data):
        ax = _axes(p, data.ndim)
        return [_fix(np.asarray(type(self).npfn(data, ax, p)), p, data.ndim)]


def _np_norm(x, ax, p):
    if p.get('ord', 2) == 1:
        return np.abs(x).sum(ax, keepdims=p.get('keepdims', False))
    return np.sqrt((x ** 2).sum(ax, keepdims=p.get('keepdims', False)))


class TestNorm(_Reduce):
    op = 'norm'
    params = [{}, dict(ord=1), dict(axis=1), dict(axis=(0, 1), keepdims=True),
              dict(ord=1, axis=-1, keepdims=True)]
    npfn = staticmethod(_np_norm)

    def inputs(self, rng, p, shapes):      # off the kink of |x| at 0
        x = rng.uniform(-1, 1, shapes['data'])
        return {'data': np.where(np.abs(x) < 0.1, 0.3, x)}


class TestNansum(_Reduce):
    op = 'nansum'
    params = [{}, dict(axis=1), dict(axis=(0,), keepdims=True), dict(axis=0, exclude=True)]
    npfn = staticmethod(lambda x, ax, p: np.nansum(x, ax, keepdims=p.get('keepdims', False)))
    grad_nodes = None


class TestNanprod(_Reduce):
    op = 'nanprod'
    params = [{}, dict(axis=1), dict(axis=-1, keepdims=True)]
    npfn = staticmethod(lambda x, ax, p: np.nanprod(x, ax, keepdims=p.get('keepdims', False)))

    def inputs(self, rng, p, shapes):
        return {'data': rng.uniform(0.5, 1.5, shapes['data'])}


class TestMoments(_Reduce):
    op = 'moments'
    params = [dict(axes=(1,)), dict(axes=(0, 1), keepdims=True), dict(axes=(-1,)), {}]

    def reference(self, p, data):
        ax = _axes(p, data.ndim, 'axes')
        kd = p.get('keepdims', False)
        return [_fix(data.mean(ax, keepdims=kd), p, data.ndim),
                _fix(data.var(ax, keepdims=kd), p, data.ndim)]


def test_norm_matches_mxnet():
    x = np.arange(24.).reshape(2, 3, 4) - 5
    np.testing.assert_allclose(nd.norm(nd.array(x, dtype='float64'), axis=(1, 2)).asnumpy(),
                               [12.08304597, 44.92215489], rtol=1e-8)
    np.testing.assert_allclose(nd.norm(nd.array(x), ord=1, axis=(0, 2)).asnumpy(),
                               [48, 54, 84])
    assert nd.norm(nd.array(x)).shape == (1,)
    assert nd.norm(nd.array(x), keepdims=True).shape == (1, 1, 1)
    assert nd.norm(nd.array(x, dtype='float64'), out_dtype='float32').dtype == np.float32
    # gradients at 0 (MXNet 1.9.1): L2 -> 0 where the norm is 0, L1 -> sign
    y = np.array([[0., 0, 3], [1, -2, 0]])
    s = sym.norm(sym.Variable('data'), axis=1)
    check_symbolic_backward(s, {'data': y}, [np.ones(2)],
                            {'data': np.array([[0, 0, 1], [0.4472136, -0.89442719, 0]])},
                            rtol=1e-7)
    s = sym.norm(sym.Variable('data'), ord=1, axis=1)
    check_symbolic_backward(s, {'data': y}, [np.ones(2)],
                            {'data': np.array([[0, 0, 1], [1, -1, 0.]])})
    z = sym.norm(sym.Variable('data'))
    check_symbolic_backward(z, {'data': np.zeros((2, 2))}, [np.ones(1)],
                            {'data': np.zeros((2, 2))})
    with pytest.raises(ParamError, match='ord'):
        nd.norm(nd.array(x), ord=3)


def test_nan_reductions_match_mxnet():
    x = np.array([[1, np.nan, 2], [np.nan, np.nan, np.nan]])
    s = sym.nansum(sym.Variable('data'), axis=1)
    check_symbolic_forward(s, {'data': x}, [np.array([3., 0])])
    check_symbolic_backward(s, {'data': x}, [np.ones(2)],
                            {'data': np.array([[1., 0, 1], [0, 0, 0]])})
    s = sym.nanprod(sym.Variable('data'), axis=1)
    check_symbolic_forward(s, {'data': x}, [np.array([2., 1])])
    check_symbolic_backward(s, {'data': x}, [np.ones(2)],
                            {'data': np.array([[2., 0, 1], [0, 0, 0]])})
    # a zero: the gradient is the product of the others (exact, no 0/0)
    z = np.array([[0., np.nan, 2], [0, 0, 3]])
    check_symbolic_backward(s, {'data': z}, [np.ones(2)],
                            {'data': np.array([[2., 0, 0], [0, 0, 0]])})


def test_moments_match_mxnet():
    y = np.array([[0., 0, 3], [1, -2, 0]])
    s = sym.moments(sym.Variable('data'), axes=(1,))
    assert s.list_outputs() == ['moments0_output0', 'moments0_output1']   # MXNet's names
    check_symbolic_backward(s, {'data': y}, [np.ones(2), np.ones(2)],
                            {'data': np.array([[-1 / 3, -1 / 3, 5 / 3],
                                               [11 / 9, -7 / 9, 5 / 9]])}, rtol=1e-7)
    assert s.infer_shape(data=(2, 3, 4))[1] == [(2, 4), (2, 4)]
    t = sym.moments(sym.Variable('data'), axes=(0, 2), keepdims=True)
    assert t.infer_shape(data=(2, 3, 4))[1] == [(1, 3, 1), (1, 3, 1)]
    u = sym.moments(sym.Variable('data'), axes=(0, 1, 2))
    assert u.infer_shape(data=(2, 3, 4))[1] == [(1,), (1,)]
