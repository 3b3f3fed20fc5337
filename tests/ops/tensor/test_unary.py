"""Elementwise unary ops: one OpCase per op plus MXNet's values at kinks and domain edges."""
import numpy as np
import pytest
from hypothesis import strategies as st

import ffnumba.symbol as sym
from ffnumba.base import ParamError
from ffnumba.ops.registry import get_op
from ffnumba.testing import OpCase, check_symbolic_backward, check_symbolic_forward
from ffnumba.testing import strategies as fst


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# name -> (numpy reference, input domain: 'any', 'pos' (0.5..2) or 'away' (|x| >= 0.1))
REFS = {
    'exp': (np.exp, 'any'),
    'log': (np.log, 'pos'),
    'sqrt': (np.sqrt, 'pos'),
    'rsqrt': (lambda x: 1 / np.sqrt(x), 'pos'),
    'square': (np.square, 'any'),
    'abs': (np.abs, 'away'),
    'sign': (np.sign, 'away'),
    'tanh': (np.tanh, 'any'),
    'sigmoid': (_sigmoid, 'any'),
    'relu': (lambda x: np.maximum(x, 0), 'away'),
    'negative': (np.negative, 'any'),
    'reciprocal': (lambda x: 1 / x, 'pos'),
    'zeros_like': (np.zeros_like, 'any'),
    'ones_like': (np.ones_like, 'any'),
}


def _draw(rng, shape, domain):
    if domain == 'pos':
        return rng.uniform(0.5, 2.0, shape)
    x = rng.uniform(-1, 1, shape)
    if domain == 'away':
        x = np.where(x >= 0, 1, -1) * (0.1 + 0.9 * np.abs(x))
    return x


class _UnaryCase(OpCase):
    shapes = [dict(data=(3,)), dict(data=(2, 3, 2))]
    fn = None
    domain = 'any'

    def cases(self):
        return st.tuples(st.sampled_from(self.params), fst.shapes(max_dims=3, max_side=4)
                         .map(lambda s: dict(data=s)))

    def inputs(self, rng, p, shapes):
        return {'data': _draw(rng, shapes['data'], self.domain)}

    def reference(self, p, data):
        return [type(self).fn(data)]


for _name, (_fn, _domain) in REFS.items():
    globals()['Test_' + _name] = type('Test_' + _name, (_UnaryCase,), dict(
        op=_name, fn=staticmethod(_fn), domain=_domain))


class TestClip(_UnaryCase):
    op = 'clip'
    params = [dict(a_min=-0.5, a_max=0.5), dict(a_min=0.0, a_max=2.0)]

    def inputs(self, rng, p, shapes):
        # keep the inputs off the kinks at a_min and a_max
        x = rng.uniform(-1, 1, shapes['data'])
        for b in (p['a_min'], p['a_max']):
            x = np.where(np.abs(x - b) < 0.05, b + 0.1, x)
        return {'data': x}

    def reference(self, p, data):
        return [np.clip(data, p['a_min'], p['a_max'])]


def _check(op, x, y, dx, **params):
    s = getattr(sym, op)(sym.Variable('data'), name='u', **params)
    x = np.asarray(x, dtype=np.float64)
    check_symbolic_forward(s, {'data': x}, [np.asarray(y, dtype=np.float64)], rtol=1e-7, atol=0)
    check_symbolic_backward(s, {'data': x}, [np.ones_like(x)],
                            {'data': np.asarray(dx, dtype=np.float64)}, rtol=1e-7, atol=0)


def test_clip_gradient_is_one_on_the_closed_interval():
    # MXNet 1.9.1: nd.clip(x, -1, 1) on [-2, -1, 0, 0.5, 1, 2] -> grad [0, 1, 1, 1, 1, 0]
    _check('clip', [-2, -1, 0, 0.5, 1, 2], [-1, -1, 0, 0.5, 1, 1], [0, 1, 1, 1, 1, 0],
           a_min=-1, a_max=1)


@pytest.mark.parametrize('op, y, dx', [
    # MXNet 1.9.1 values on x = [-2, -1, 0, 0.5, 1, 2]
    ('relu', [0, 0, 0, 0.5, 1, 2], [0, 0, 0, 1, 1, 1]),
    ('abs', [2, 1, 0, 0.5, 1, 2], [-1, -1, 0, 1, 1, 1]),
    ('sign', [-1, -1, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0]),
    ('zeros_like', [0] * 6, [0] * 6),
    ('ones_like', [1] * 6, [0] * 6),
])
def test_values_at_kinks_match_mxnet(op, y, dx):
    _check(op, [-2, -1, 0, 0.5, 1, 2], y, dx)


def test_rsqrt_and_reciprocal_match_mxnet():
    _check('rsqrt', [0.25, 4.0], [2.0, 0.5], [-4.0, -0.0625])
    _check('reciprocal', [0.25, 4.0], [4.0, 0.25], [-16.0, -0.0625])


def test_out_of_domain_gives_ieee_values():
    fwd, _ = get_op('sqrt').compute('cpu')
    out = np.zeros(2)
    fwd(None, get_op('sqrt').parse_params({}), [np.array([-1.0, 4.0])], [out], [])
    assert np.isnan(out[0]) and out[1] == 2.0
    out = np.zeros(3)
    fwd, _ = get_op('log').compute('cpu')
    fwd(None, get_op('log').parse_params({}), [np.array([0.0, -1.0, 1.0])], [out], [])
    assert out[0] == -np.inf and np.isnan(out[1]) and out[2] == 0.0


def test_clip_bounds_must_be_ordered():
    with pytest.raises(ParamError, match='a_max'):
        get_op('clip').parse_params(dict(a_min=1.0, a_max=0.0))
    with pytest.raises(ParamError, match='a_min'):
        get_op('clip').parse_params(dict(a_max=1.0))


@pytest.mark.parametrize('op', sorted(REFS) + ['clip'])
def test_shape_inferred_both_ways(op):
    params = dict(a_min=0, a_max=1) if op == 'clip' else {}
    opdef = get_op(op)
    p = opdef.parse_params(params)
    assert opdef.infer_shape(p, [(2, 3)], [], [None])[1] == [(2, 3)]
    ins, outs, _ = opdef.infer_shape(p, [None], [], out_shapes=[(4, 1)])
    assert ins == [(4, 1)] and outs == [(4, 1)]


def test_float32_in_float32_out():
    s = sym.exp(sym.Variable('data'))
    _, outs, _ = s.infer_type(data='float32')
    assert outs == [np.float32]
