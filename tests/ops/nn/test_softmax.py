"""softmax, log_softmax, SoftmaxActivation: tables, stability, params, MXNet goldens."""
import json

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba.symbol as sym
from ffnumba import ndarray as nd
from ffnumba.base import ParamError, ShapeError
from ffnumba.ops.registry import OpContext, get_op
from ffnumba.testing import OpCase, assert_almost_equal, bind_numpy

from golden import load_golden


def softmax_ref(x, axis=-1, temperature=None, log=False):
    z = x / (temperature or 1.0)
    z = z - z.max(axis=axis, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=axis, keepdims=True))
    return z - lse if log else np.exp(z - lse)


_TABLE = [dict(), dict(axis=0), dict(axis=1, temperature=2.0), dict(axis=-2, temperature=0.5)]
_SHAPES = [dict(data=(2, 3, 4)), dict(data=(3, 5))]


class TestSoftmax(OpCase):
    op = 'softmax'
    params = _TABLE
    shapes = _SHAPES

    def reference(self, p, data):
        return [softmax_ref(data, **p)]


class TestLogSoftmax(OpCase):
    op = 'log_softmax'
    params = _TABLE
    shapes = _SHAPES

    def reference(self, p, data):
        return [softmax_ref(data, log=True, **p)]


class TestSoftmaxActivation(OpCase):
    op = 'SoftmaxActivation'
    params = [dict(), dict(mode='channel')]
    shapes = [dict(data=(2, 3)), dict(data=(2, 3, 2, 2))]

    def reference(self, p, data):
        if p.get('mode') == 'channel':
            return [softmax_ref(data, axis=1)]
        return [softmax_ref(data, axis=-1)]


def _fwd(op, x, **p):
    d = get_op(op)
    pp = d.parse_params(p)
    t = np.dtype(pp.dtype) if getattr(pp, 'dtype', None) else x.dtype
    out = np.empty(x.shape, t)
    d.forward['cpu'](OpContext(False, None, {}, None, op), pp, [x], [out], [])
    return out


@pytest.mark.parametrize('op', ['softmax', 'log_softmax'])
def test_extreme_inputs_are_finite(op):
    x = np.array([[1e4, -1e4, 0.0], [-800.0, -800.0, -799.0], [3e38, 3e38, -3e38]])
    out = _fwd(op, x)
    assert np.all(np.isfinite(out) | (out == -np.inf))
    assert_almost_equal(out[:2], softmax_ref(x[:2], log=op == 'log_softmax'), 1e-12, 1e-300)


@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data())
def test_rows_sum_to_one_and_shape(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = np.random.default_rng(0).standard_normal(shape) * 5
    out = _fwd('softmax', x, axis=axis)
    assert_almost_equal(out.sum(axis=axis), np.ones(out.sum(axis=axis).shape), 1e-12, 1e-12)
    s = sym.softmax(sym.Variable('data'), axis=axis, name='sm')
    assert s.infer_shape(data=tuple(shape))[1] == [tuple(shape)]
    with pytest.raises(ShapeError, match='Error in operator sm: .*axis'):
        sym.softmax(sym.Variable('data'), axis=len(shape), name='sm').infer_shape(
            data=tuple(shape))


def test_dtype_param():
    s = sym.softmax(sym.Variable('data'), dtype='float64', name='sm')
    args, outs, _ = s.infer_type(data='float32')
    assert np.dtype(args[0]) == np.float32 and np.dtype(outs[0]) == np.float64
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = _fwd('log_softmax', x.astype(np.float16), dtype='float32')
    assert out.dtype == np.float32
    assert_almost_equal(out, softmax_ref(x.astype(np.float64), log=True), 1e-6, 1e-6)


def test_bad_params():
    with pytest.raises(ParamError, match=r'softmax: `temperature` must be a finite'):
        get_op('softmax').parse_params(dict(temperature=float('inf')))
    with pytest.raises(ParamError, match=r'log_softmax: `temperature` must be a non-zero'):
        get_op('log_softmax').parse_params(dict(temperature=0.0))
    with pytest.raises(ParamError, match=r"SoftmaxActivation: `mode` must be one of"):
        get_op('SoftmaxActivation').parse_params(dict(mode='spatial'))


@pytest.mark.parametrize('case', sorted(load_golden('softmax')))
def test_golden_mxnet(case):
    """Against MXNet 1.9.1. MXNet's 3-D ``instance`` backward sums over axis 1, which is not
    the derivative of its own forward (over the last axis): only its forward is compared."""
    c = load_golden('softmax')[case]
    p = json.loads(str(c['params']))
    is_train = p.pop('is_train')
    op = ('SoftmaxActivation' if case.startswith('act') else
          'log_softmax' if case.startswith('log') else 'softmax')
    s = getattr(sym, op)(sym.Variable('data'), name='op', **p)
    exe = bind_numpy(s, {'data': c['arg_data']})
    exe.forward(is_train=is_train)
    assert_almost_equal(exe.outputs[0].asnumpy(), c['out0'], 1e-5, 1e-6)
    if case != 'act_instance':
        exe.backward([nd.array(c['head0'], dtype=c['head0'].dtype)])
        assert_almost_equal(exe.grad_dict['data'].asnumpy(), c['grad_data'], 1e-5, 1e-6)
