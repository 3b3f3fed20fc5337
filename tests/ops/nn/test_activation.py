"""Activation: every act_type against numpy, gradients, stability at extreme inputs."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from ffnumba.base import ParamError
from ffnumba.ops.registry import OpContext, get_op
from ffnumba.testing import OpCase

_REF = {
    'relu': lambda x: np.maximum(x, 0),
    'sigmoid': lambda x: 1 / (1 + np.exp(-x)),
    'tanh': np.tanh,
    'softrelu': lambda x: np.logaddexp(0, x),
    'softsign': lambda x: x / (1 + np.abs(x)),
}


class TestActivation(OpCase):
    op = 'Activation'
    params = [dict(act_type=a) for a in _REF]
    shapes = [dict(data=(2, 3)), dict(data=(2, 1, 3, 2))]

    def inputs(self, rng, p, shapes):
        # keep relu away from its kink at 0 so the numeric derivative is exact
        x = rng.uniform(-2, 2, shapes['data'])
        x[np.abs(x) < 0.05] = 0.5
        return {'data': x}

    def reference(self, p, data):
        return [_REF[p['act_type']](data)]


def _run(act, x):
    op = get_op('Activation')
    p = op.parse_params(dict(act_type=act))
    out = np.empty_like(x)
    op.forward['cpu'](OpContext(False, None, {}, None, 'act'), p, [x], [out], [])
    return out


def test_bad_act_type():
    with pytest.raises(ParamError) as e:
        get_op('Activation').parse_params(dict(act_type='swish'))
    assert str(e.value).startswith('Activation: `act_type` must be one of')
    assert "Received: act_type='swish'" in str(e.value)


@pytest.mark.parametrize('act', list(_REF))
def test_extreme_inputs_are_finite(act):
    x = np.array([-1e4, -700.0, -50.0, 0.0, 50.0, 700.0, 1e4])
    with np.errstate(over='ignore'):
        ref = _REF[act](x)
    out = _run(act, x)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=0)


def test_softrelu_keeps_tiny_values():
    # log(1 + e^-50) ~ 1.9e-22: a naive log(1 + exp(x)) rounds it to 0
    out = _run('softrelu', np.array([-50.0]))
    np.testing.assert_allclose(out, [np.exp(-50.0)], rtol=1e-12)


def test_nan_propagates():
    for act in _REF:
        assert np.isnan(_run(act, np.array([np.nan]))[0]), act


@given(x=st.lists(st.floats(-30, 30), min_size=1, max_size=8),
       act=st.sampled_from(sorted(_REF)))
def test_gradient_matches_derivative(x, act):
    """The backward (from the output or the input) equals the analytic derivative."""
    x = np.array(x)
    d = {'relu': (x > 0).astype(float), 'sigmoid': _REF['sigmoid'](x) * (1 - _REF['sigmoid'](x)),
         'tanh': 1 - np.tanh(x) ** 2, 'softrelu': _REF['sigmoid'](x),
         'softsign': 1 / (1 + np.abs(x)) ** 2}[act]
    op = get_op('Activation')
    p = op.parse_params(dict(act_type=act))
    out = _run(act, x)
    g = np.empty_like(x)
    og = np.ones_like(x)
    ctx = OpContext(True, None, {}, None, 'act')
    op.backward['cpu'](ctx, p, [og], [x], [out], [g], ['write'], [])
    np.testing.assert_allclose(g, d, rtol=1e-9, atol=1e-12)


def test_scalar_bodies_are_reusable():
    from numba import njit
    from ffnumba.ops.nn import activation as A

    @njit
    def use(x):
        t = A.tanh(x, 0.0, 0.0)
        return A.relu(x, 0.0, 0.0) + A.sigmoid(x, 0.0, 0.0) + A.tanh_grad(t, 0.0, 0.0)

    x = 0.3
    assert use(x) == pytest.approx(x + 1 / (1 + np.exp(-x)) + 1 - np.tanh(x) ** 2)
