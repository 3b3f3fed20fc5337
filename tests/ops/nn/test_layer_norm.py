"""LayerNorm, GroupNorm, InstanceNorm (+ L2Normalization goldens): OpCase rows, MXNet values."""
import json
import os

import numpy as np
import pytest

import ffnumba.symbol as sym
from ffnumba import ndarray as nd
from ffnumba.base import ParamError, ShapeError
from ffnumba.ops.registry import get_op
from ffnumba.testing import OpCase, bind_numpy, check_symbolic_backward


def _norm(x, axes, eps):
    m = x.mean(axes, keepdims=True)
    sd = np.sqrt(x.var(axes, keepdims=True) + eps)
    return (x - m) / sd, m, sd


def _layer_ref(p, data, gamma, beta):
    ax = p.get('axis', -1) % data.ndim
    xh, m, sd = _norm(data, (ax,), p.get('eps', 1e-5))
    shape = [1] * data.ndim
    shape[ax] = -1
    out = [xh * gamma.reshape(shape) + beta.reshape(shape)]
    return out + ([m, sd] if p.get('output_mean_var') else [])


def _group_ref(p, data, gamma, beta):
    n, c = data.shape[:2]
    g = p.get('num_groups', 1)
    xg = data.reshape(n, g, -1)
    xh, m, sd = _norm(xg, (2,), p.get('eps', 1e-5))
    out = [(xh * gamma[None, :, None] + beta[None, :, None]).reshape(data.shape)]
    return out + ([m[..., 0], sd[..., 0]] if p.get('output_mean_var') else [])


def _instance_ref(p, data, gamma, beta):
    n, c = data.shape[:2]
    xh, _, _ = _norm(data.reshape(n, c, -1), (2,), p.get('eps', 1e-3))
    return [(xh * gamma[None, :, None] + beta[None, :, None]).reshape(data.shape)]


class _Norm(OpCase):
    def inputs(self, rng, p, shapes):
        v = {n: rng.uniform(-1, 1, s) for n, s in shapes.items()}
        v['gamma'] = rng.uniform(0.5, 1.5, shapes['gamma']) * rng.choice([-1, 1], shapes['gamma'])
        return v


class TestLayerNorm(_Norm):
    op = 'LayerNorm'
    params = [{}, dict(axis=1, eps=1e-3), dict(output_mean_var=True), dict(axis=0)]
    shapes = [dict(data=(3, 4)), dict(data=(2, 3, 4))]
    max_batch = None

    def reference(self, p, data, gamma, beta):
        return _layer_ref(p, data, gamma, beta)


class TestGroupNorm(_Norm):
    op = 'GroupNorm'
    params = [dict(num_groups=2), dict(num_groups=1, output_mean_var=True),
              dict(num_groups=3, eps=1e-3)]
    shapes = [dict(data=(2, 6, 3)), dict(data=(3, 6, 2, 2)), dict(data=(2, 6))]

    def reference(self, p, data, gamma, beta):
        return _group_ref(p, data, gamma, beta)


class TestInstanceNorm(_Norm):
    op = 'InstanceNorm'
    params = [{}, dict(eps=1e-5)]
    shapes = [dict(data=(2, 3, 4)), dict(data=(3, 2, 2, 3))]

    def reference(self, p, data, gamma, beta):
        return _instance_ref(p, data, gamma, beta)


def test_shapes_match_mxnet():
    a = sym.Variable('a')
    # MXNet 1.9.1 infer_shape(a=(2, 4, 3))
    assert sym.LayerNorm(a, axis=1, output_mean_var=True).infer_shape(a=(2, 4, 3)) == (
        [(2, 4, 3), (4,), (4,)], [(2, 4, 3), (2, 1, 3), (2, 1, 3)], [])
    assert sym.GroupNorm(a, num_groups=2, output_mean_var=True).infer_shape(a=(2, 4, 3)) == (
        [(2, 4, 3), (2,), (2,)], [(2, 4, 3), (2, 2), (2, 2)], [])
    assert sym.InstanceNorm(a).infer_shape(a=(2, 4, 3)) == ([(2, 4, 3), (4,), (4,)],
                                                            [(2, 4, 3)], [])
    s = sym.LayerNorm(a, name='ln')
    assert s.list_arguments() == ['a', 'ln_gamma', 'ln_beta']
    assert s.list_outputs() == ['ln_output']
    assert sym.LayerNorm(a, name='ln', output_mean_var=True).list_outputs() == [
        'ln_output', 'ln_mean', 'ln_std']


def test_group_norm_matches_mxnet_values():
    # MXNet 1.9.1: GroupNorm(x, gamma=[1.5, -0.5], beta=[0.1, 0.2], num_groups=2) on
    # RandomState(0).randn(2, 4, 3); mean/std outputs below
    x = np.random.RandomState(0).randn(2, 4, 3)
    out = nd.GroupNorm(nd.array(x, dtype='float64'), nd.array([1.5, -0.5], dtype='float64'),
                       nd.array([0.1, 0.2], dtype='float64'), num_groups=2, output_mean_var=True)
    np.testing.assert_allclose(out[1].asnumpy(), [[1.0456868, 0.45073798],
                                                  [0.4915285, -0.38635468]], rtol=1e-6)
    np.testing.assert_allclose(out[2].asnumpy(), [[1.0903881, 0.580453],
                                                  [0.53652537, 1.1672592]], rtol=1e-6)


def test_mean_std_head_gradients_are_the_true_derivative():
    # d mean / dx = 1/K, d std / dx = xhat / K (MXNet 1.9.1 returns 0 here)
    x = np.random.RandomState(1).randn(2, 4)
    s = sym.LayerNorm(sym.Variable('data'), name='ln', output_mean_var=True)
    xh, m, sd = _norm(x, (1,), 1e-5)
    heads = [np.zeros((2, 4)), np.ones((2, 1)), 2 * np.ones((2, 1))]
    check_symbolic_backward(s, {'data': x, 'ln_gamma': np.ones(4), 'ln_beta': np.zeros(4)},
                            heads, {'data': 0.25 + 2 * xh / 4}, rtol=1e-6, atol=1e-9)


def test_bad_shapes_and_params_raise():
    a = sym.Variable('a')
    with pytest.raises(ShapeError, match='multiple of num_groups=4'):
        sym.GroupNorm(a, num_groups=4).infer_shape(a=(2, 6, 3))
    with pytest.raises(ShapeError, match='ndim >= 2'):
        sym.InstanceNorm(a).infer_shape(a=(5,))
    with pytest.raises(ShapeError, match='axis'):
        sym.LayerNorm(a, axis=3).infer_shape(a=(2, 3))
    with pytest.raises(ShapeError, match='gamma'):
        sym.LayerNorm(a, name='ln').infer_shape(a=(2, 3), ln_gamma=(4,))
    for op in ('LayerNorm', 'GroupNorm', 'InstanceNorm'):
        with pytest.raises(ParamError, match='eps'):
            get_op(op).parse_params(dict(eps=float('nan')))
    with pytest.raises(ParamError, match='num_groups'):
        get_op('GroupNorm').parse_params(dict(num_groups=0))


_GOLDEN = np.load(os.path.join(os.path.dirname(__file__), '..', '..', 'data',
                               'norm_ops_golden.npz'))


@pytest.mark.parametrize('case', json.loads(str(_GOLDEN['cases'])), ids=lambda c: c[0])
def test_matches_mxnet_golden(case):
    """Forward and every gradient against MXNet 1.9.1 (float32; tools/make_norm_fixtures.py)."""
    name, op, params, names = case
    s = getattr(sym, op)(*[sym.Variable(n) for n in names], name='o', **params)
    loc = {n: _GOLDEN['%s|%s' % (name, n)] for n in names}
    exe = bind_numpy(s, loc, grad_req='write')
    exe.forward(is_train=True)
    exe.backward([nd.array(_GOLDEN[name + '|head'])])
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), _GOLDEN[name + '|output'],
                               rtol=1e-5, atol=1e-5)
    for n in names:
        np.testing.assert_allclose(exe.grad_dict[n].asnumpy(), _GOLDEN['%s|grad_%s' % (name, n)],
                                   rtol=1e-4, atol=1e-5, err_msg=n)


def test_float32_gamma_beta_grads_sum_many_rows_accurately():
    # gamma/beta gradients sum over every row; MXNet 1.9.1's float32 result stays within
    # 1e-4 of the float64 truth for (4096, 512) (its test_layer_norm), so must ours
    import ffnumba as ff
    rng = np.random.default_rng(3)
    x = rng.normal(0, 1, (4096, 64))
    gamma, beta, og = rng.normal(0, 1, 64), rng.normal(0, 1, 64), rng.normal(0, 1, x.shape)
    s = ff.sym.LayerNorm(ff.sym.var('data'), ff.sym.var('gamma'), ff.sym.var('beta'), axis=-1)
    exe = s.simple_bind(ff.cpu(), data=x.shape)
    for n, v in (('data', x), ('gamma', gamma), ('beta', beta)):
        exe.arg_dict[n][:] = v
    exe.forward(is_train=True)
    exe.backward([ff.nd.array(og)])
    x32 = x.astype(np.float32).astype(np.float64)
    xhat = (x32 - x32.mean(1, keepdims=True)) / np.sqrt(x32.var(1, keepdims=True) + 1e-5)
    og32 = og.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(exe.grad_dict['gamma'].asnumpy(), (og32 * xhat).sum(0),
                               rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(exe.grad_dict['beta'].asnumpy(), og32.sum(0), rtol=1e-6, atol=1e-5)
