"""MakeLoss, make_loss and BlockGrad: identity forward, constant backward (MXNet numbers)."""
import numpy as np
import pytest

import ffnumba.symbol as sym
from ffnumba.base import ParamError
from ffnumba.ops.registry import OpContext, get_op
from ffnumba.testing import OpCase, check_symbolic_backward

X = np.array([[0.5, -1, 2], [0, 0.3, -0.2]])


class TestMakeLoss(OpCase):
    op = 'MakeLoss'
    params = [{}, dict(grad_scale=2.0, normalization='batch')]
    shapes = [dict(data=(2, 3)), dict(data=(4,))]

    def reference(self, p, data):
        return [data]

    def loss(self, p, outputs, inputs):
        if outputs is None:
            return 0.0
        n = outputs[0].shape[0] if p.get('normalization') == 'batch' else 1
        return p.get('grad_scale', 1.0) / n * np.sum(outputs[0])


class TestMakeLossLower(OpCase):
    op = 'make_loss'
    shapes = [dict(data=(2, 3))]

    def reference(self, p, data):
        return [data]

    def loss(self, p, outputs, inputs):
        return 0.0 if outputs is None else np.sum(outputs[0])


class TestBlockGrad(OpCase):
    op = 'BlockGrad'
    shapes = [dict(data=(2, 3)), dict(data=(5,))]
    nondifferentiable = True   # zero gradient: checked below

    def reference(self, p, data):
        return [data]


@pytest.mark.parametrize('kw,value', [
    # values printed by MXNet 1.9.1 for X (head gradients are ignored)
    ({}, 1.0),
    (dict(normalization='batch', grad_scale=2), 1.0),
    (dict(normalization='valid'), 1 / 3),
    (dict(normalization='valid', valid_thresh=0.4), 0.5),
    (dict(normalization='valid', valid_thresh=5), 1.0),
])
def test_makeloss_matches_mxnet(kw, value):
    s = sym.MakeLoss(sym.Variable('data'), **kw)
    check_symbolic_backward(s, dict(data=X), None, dict(data=np.full(X.shape, value)),
                            dtype='float64', rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('name,value', [('make_loss', 1.0), ('BlockGrad', 0.0),
                                        ('stop_gradient', 0.0)])
def test_constant_gradients_ignore_heads(name, value):
    op = get_op(name)
    p = op.parse_params({})
    out = np.empty_like(X)
    ctx = OpContext(True, None, {}, None, 'n')
    op.forward['cpu'](ctx, p, [X], [out], [])
    np.testing.assert_array_equal(out, X)
    g = [np.full_like(X, 7.0)]
    op.backward['cpu'](ctx, p, [np.full_like(X, 3.0)], [X], [out], g, ['write'], [])
    np.testing.assert_array_equal(g[0], value)
    g = [np.full_like(X, 7.0)]
    op.backward['cpu'](ctx, p, [np.full_like(X, 3.0)], [X], [out], g, ['add'], [])
    np.testing.assert_array_equal(g[0], 7.0 + value)


def test_blockgrad_stops_gradient_in_a_graph():
    a, b = sym.Variable('a'), sym.Variable('b')
    s = sym.MakeLoss(a * sym.BlockGrad(b))
    va, vb = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    check_symbolic_backward(s, dict(a=va, b=vb), None, dict(a=vb, b=np.zeros(2)),
                            dtype='float64', rtol=1e-12, atol=1e-12)


def test_bad_normalization():
    with pytest.raises(ParamError, match='normalization'):
        get_op('MakeLoss').parse_params(dict(normalization='mean'))


@pytest.mark.gpu
@pytest.mark.parametrize('name,kw', [('MakeLoss', dict(normalization='valid')),
                                     ('MakeLoss', dict(normalization='batch', grad_scale=3)),
                                     ('make_loss', {}), ('BlockGrad', {})])
def test_gpu_kernels_match_cpu(name, kw):
    from numba import cuda
    op = get_op(name)
    p = op.parse_params(kw)
    ctx = OpContext(True, None, {}, None, 'n')
    out = np.empty_like(X)
    op.forward['cpu'](ctx, p, [X], [out], [])
    g = [np.ones_like(X)]
    op.backward['cpu'](ctx, p, None, [X], [out], g, ['add'], [])
    dx, dout = cuda.to_device(X), cuda.to_device(np.zeros_like(X))
    op.forward['gpu'](ctx, p, [dx], [dout], [])
    dg = [cuda.to_device(np.ones_like(X))]
    op.backward['gpu'](ctx, p, None, [dx], [dout], dg, ['add'], [])
    np.testing.assert_array_equal(dout.copy_to_host(), out)
    np.testing.assert_allclose(dg[0].copy_to_host(), g[0], atol=1e-12)
