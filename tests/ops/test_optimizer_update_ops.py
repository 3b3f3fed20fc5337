"""sgd_update, adam_update, ... : OpCase rows with numpy references, MXNet 1.9.1 goldens."""
import json
import os

import numpy as np
import pytest

import ffnumba as ff
from ffnumba import ndarray as nd
from ffnumba.base import ParamError
from ffnumba.ops.registry import get_op
from ffnumba.optimizer.update_ops import UPDATE_OPS
from ffnumba.testing import OpCase, bind_numpy

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'data',
                    'update_ops_golden.npz')


def _clip(x, c):
    return np.clip(x, -c, c) if c > 0 else x


def _g(p, grad, weight=None, wd_in=False):
    g = p.get('rescale_grad', 1.0) * grad
    if wd_in:
        g = g + p.get('wd', 0.0) * weight
    return _clip(g, p.get('clip_gradient', -1.0))


def _sgd(p, weight, grad):
    return (1 - p['lr'] * p.get('wd', 0.0)) * weight - p['lr'] * _g(p, grad)


def _sgd_mom(p, weight, grad, mom):
    m = p.get('momentum', 0.0) * mom - p['lr'] * p.get('wd', 0.0) * weight - p['lr'] * _g(p, grad)
    return weight + m


def _nag(p, weight, grad, mom):
    mu, lr, wd = p.get('momentum', 0.0), p['lr'], p.get('wd', 0.0)
    m1 = mu * mom
    return weight - m1 + (1 + mu) * (m1 - lr * (_g(p, grad) + wd * weight))


def _adam(p, weight, grad, mean, var):
    g = _g(p, grad, weight, True)
    b1, b2 = p.get('beta1', 0.9), p.get('beta2', 0.999)
    m = b1 * mean + (1 - b1) * g
    v = b2 * var + (1 - b2) * g * g
    return weight - p['lr'] * m / (np.sqrt(v) + p.get('epsilon', 1e-8))


def _rmsprop(p, weight, grad, n):
    g = _g(p, grad, weight, True)
    g1 = p.get('gamma1', 0.95)
    n = (1 - g1) * g * g + g1 * n
    return _clip(weight - p['lr'] * g / np.sqrt(n + p.get('epsilon', 1e-8)),
                 p.get('clip_weights', -1.0))


def _rmspropalex(p, weight, grad, n, g, delta):
    gr = _g(p, grad, weight, True)
    g1, g2 = p.get('gamma1', 0.95), p.get('gamma2', 0.9)
    n = (1 - g1) * gr * gr + g1 * n
    g = (1 - g1) * gr + g1 * g
    d = g2 * delta - p['lr'] * gr / np.sqrt(n - g * g + p.get('epsilon', 1e-8))
    return _clip(weight + d, p.get('clip_weights', -1.0))


def _ftrl(p, weight, grad, z, n):
    lr, lam, beta = p['lr'], p.get('lamda1', 0.01), p.get('beta', 1.0)
    g = _g(p, grad)
    z = z + g - (np.sqrt(n + g * g) - np.sqrt(n)) * weight / lr
    n = n + g * g
    w = (np.sign(z) * lam - z) / ((beta + np.sqrt(n)) / lr + p.get('wd', 0.0))
    return np.where(np.abs(z) > lam, w, 0.0)


def _signsgd(p, weight, grad):
    return (1 - p['lr'] * p.get('wd', 0.0)) * weight - p['lr'] * np.sign(_g(p, grad))


def _signum(p, weight, grad, mom):
    mu = p.get('momentum', 0.0)
    m = mu * mom - (1 - mu) * (p.get('wd', 0.0) * weight + _g(p, grad))
    return (1 - p['lr'] * p.get('wd_lh', 0.0)) * weight + p['lr'] * np.sign(m)


def _ftml(p, weight, grad, d, v, z):
    b1, b2, t = p.get('beta1', 0.6), p.get('beta2', 0.999), p['t']
    g = np.clip(p.get('rescale_grad', 1.0) * grad + p.get('wd', 0.0) * weight,
                -p['clip_grad'], p['clip_grad']) if p.get('clip_grad', -1.0) >= 0 else \
        p.get('rescale_grad', 1.0) * grad + p.get('wd', 0.0) * weight
    v = b2 * v + (1 - b2) * g * g
    dt = (1 - b1 ** t) / p['lr'] * (np.sqrt(v / (1 - b2 ** t)) + p.get('epsilon', 1e-8))
    z = b1 * z + (1 - b1) * g - (dt - b1 * d) * weight
    return -z / dt


REFS = {
    'sgd_update': (_sgd, [dict(lr=0.1, wd=0.01), dict(lr=0.05, rescale_grad=0.5,
                                                      clip_gradient=0.3)]),
    'sgd_mom_update': (_sgd_mom, [dict(lr=0.1, momentum=0.9, wd=0.01)]),
    'nag_mom_update': (_nag, [dict(lr=0.1, momentum=0.9, wd=0.01, rescale_grad=0.5)]),
    'adam_update': (_adam, [dict(lr=0.01, wd=0.01, clip_gradient=0.5),
                            dict(lr=0.02, beta1=0.8, beta2=0.99, epsilon=1e-6)]),
    'rmsprop_update': (_rmsprop, [dict(lr=0.01, gamma1=0.9, wd=0.01, clip_weights=0.5)]),
    'rmspropalex_update': (_rmspropalex, [dict(lr=0.01, gamma1=0.9, gamma2=0.8)]),
    'ftrl_update': (_ftrl, [dict(lr=0.1, lamda1=0.01, beta=1.0, wd=0.01)]),
    'signsgd_update': (_signsgd, [dict(lr=0.1, wd=0.01)]),
    'signum_update': (_signum, [dict(lr=0.1, momentum=0.9, wd=0.01, wd_lh=0.02)]),
    'ftml_update': (_ftml, [dict(lr=0.01, t=3, wd=0.01, rescale_grad=0.5),
                            dict(lr=0.02, t=1, beta1=0.7, clip_grad=0.1, epsilon=1e-6)]),
    'mp_sgd_update': (lambda p, weight, grad, weight32: _sgd(p, weight32, grad),
                      [dict(lr=0.1, wd=0.01)]),
    'mp_sgd_mom_update': (lambda p, weight, grad, mom, weight32: _sgd_mom(p, weight32, grad, mom),
                          [dict(lr=0.1, momentum=0.9)]),
}


class _UpdateCase(OpCase):
    shapes = [dict(weight=(3, 4)), dict(weight=(5,))]
    nondifferentiable = True       # MXNet registers no gradient; backward writes zeros
    fn = None

    def inputs(self, rng, p, shapes):
        v = {n: rng.uniform(-1, 1, s) for n, s in shapes.items()}
        for n in ('n', 'var', 'v'):
            if n in v:
                v[n] = rng.uniform(0.1, 1.0, shapes[n])
        if 'g' in v and 'n' in v:          # rmspropalex: n - g^2 stays positive
            v['g'] = 0.2 * v['g']
        if 'weight32' in v:
            v['weight32'] = v['weight']
        return v

    def reference(self, p, **inputs):
        return [type(self).fn(p, **inputs)]


for _name, (_fn, _params) in REFS.items():
    globals()['Test_' + _name] = type('Test_' + _name, (_UpdateCase,), dict(
        op=_name, fn=staticmethod(_fn), params=_params))


def test_table_is_covered():
    assert set(REFS) == set(UPDATE_OPS)


def _golden_cases():
    g = np.load(DATA)
    return g, json.loads(str(g['cases']))


@pytest.mark.parametrize('case', range(13))
def test_in_place_steps_match_mxnet(case):
    g, cases = _golden_cases()
    c = cases[case]
    key, op, states = c['key'], c['op'], c['states']
    arrs = {n: nd.array(g['%s/in/%s' % (key, n)], dtype=g['%s/in/%s' % (key, n)].dtype)
            for n in ['weight'] + states}
    for k in range(3):
        grad = g['%s/grad%d' % (key, k)]
        res = getattr(nd, op)(arrs['weight'], nd.array(grad, dtype=grad.dtype),
                              *[arrs[s] for s in states], out=arrs['weight'], **c['params'])
        assert res is arrs['weight']
        for n, a in arrs.items():
            want = g['%s/step%d/%s' % (key, k, n)]
            assert a.dtype == want.dtype, (op, n)
            tol = dict(rtol=2e-3, atol=2e-3) if want.dtype == np.float16 else \
                dict(rtol=1e-5, atol=1e-6) if want.dtype == np.float32 else \
                dict(rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(a.asnumpy(), want, err_msg='%s %s step %d' % (op, n, k),
                                       **tol)


def test_out_is_a_new_array_and_weight_is_kept():
    w = nd.array([1.0, 2.0])
    m = nd.zeros(2)
    new = nd.sgd_mom_update(w, nd.ones(2), m, lr=0.5, momentum=0.9)
    np.testing.assert_allclose(new.asnumpy(), [0.5, 1.5])
    np.testing.assert_allclose(w.asnumpy(), [1.0, 2.0])
    np.testing.assert_allclose(m.asnumpy(), [-0.5, -0.5])     # state updated in place


def test_symbolic_use_and_param_checks():
    s = ff.sym.adam_update(ff.sym.Variable('w'), ff.sym.Variable('g'), ff.sym.Variable('m'),
                           ff.sym.Variable('v'), lr=0.1)
    assert s.list_arguments() == ['w', 'g', 'm', 'v']
    assert s.infer_shape(w=(2, 3))[0] == [(2, 3)] * 4
    with pytest.raises(ParamError, match='lr'):
        get_op('sgd_update').parse_params({})
    with pytest.raises(ParamError, match='wd'):
        get_op('sgd_update').parse_params(dict(lr=0.1, wd=float('nan')))
    get_op('sgd_update').parse_params(dict(lr=0.1, lazy_update=False))


WANT_FTML = [[0.911634087562561, -2.0883657932281494, 0.5883659720420837],
             [0.9505924582481384, 1.3579891920089722, 0.43002989888191223],
             [4.409943721839227e-05, 8.999884448712692e-05, 9.024884093378205e-06],
             [-0.8665924668312073, 2.8359782695770264, -0.2530149519443512]]


def test_ftml_update_matches_mxnet_in_place():
    # numbers from MXNet 1.9.1: mx.nd.ftml_update(w, g, d, v, z, out=w, lr=0.1, t=2, wd=0.01,
    # clip_grad=0.3, rescale_grad=2.0), w=[1, -2, 0.5], g=[0.1, 0.4, -0.05], d=v=z=0
    w, d, v, z = nd.array([1.0, -2.0, 0.5]), nd.zeros(3), nd.zeros(3), nd.zeros(3)
    res = nd.ftml_update(w, nd.array([0.1, 0.4, -0.05]), d, v, z, out=w, lr=0.1, t=2, wd=0.01,
                         clip_grad=0.3, rescale_grad=2.0)
    assert res is w
    np.testing.assert_allclose(w.asnumpy(), WANT_FTML[0], rtol=1e-5)  # float32 rounding
    for a, want in zip((d, v, z), WANT_FTML[1:]):
        np.testing.assert_allclose(a.asnumpy(), want, rtol=5e-5)
    with pytest.raises(ParamError, match='t'):
        get_op('ftml_update').parse_params(dict(lr=0.1))


def test_float16_weight_with_float32_master():
    w = nd.array([1.0, 2.0], dtype='float16')
    w32 = w.astype('float32')
    nd.mp_sgd_update(w, nd.array([0.5, 0.5], dtype='float16'), w32, lr=0.1, out=w)
    assert w.dtype == np.float16 and w32.dtype == np.float32
    np.testing.assert_allclose(w32.asnumpy(), [0.95, 1.95], rtol=1e-6)
    np.testing.assert_allclose(w.asnumpy(), [0.95, 1.95], rtol=1e-3)


def test_plain_ops_accept_float16():
    exe = bind_numpy(ff.sym.sgd_update(ff.sym.Variable('w'), ff.sym.Variable('g'), lr=0.5),
                     {'w': np.array([1.0, 2.0]), 'g': np.ones(2)}, grad_req='null',
                     dtype='float16')
    exe.forward()
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), [0.5, 1.5])


@pytest.mark.gpu
@pytest.mark.parametrize('dtype', ['float16', 'float32'])
def test_gpu_states_and_mp_match_cpu(dtype):
    def run(ctx):
        rng = np.random.default_rng(0)
        w = nd.array(rng.uniform(-1, 1, 6), ctx=ctx, dtype=dtype)
        m = nd.array(rng.uniform(-1, 1, 6), ctx=ctx, dtype=dtype)
        g = nd.array(rng.uniform(-1, 1, 6), ctx=ctx, dtype=dtype)
        nd.sgd_mom_update(w, g, m, lr=0.1, momentum=0.9, wd=0.01, out=w)
        w32 = w.astype('float32')
        m32 = nd.zeros(6, ctx=ctx)
        nd.mp_sgd_mom_update(w, g, m32, w32, lr=0.1, momentum=0.9, out=w)
        return [a.asnumpy().astype(np.float64) for a in (w, m, w32, m32)]
    tol = 1e-3 if dtype == 'float16' else 1e-6
    for a, b in zip(run(ff.gpu(0)), run(ff.cpu())):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
