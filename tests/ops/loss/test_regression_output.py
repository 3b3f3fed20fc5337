"""Linear/Logistic/MAE regression heads: forward, loss gradients, label shapes, MXNet numbers."""
import numpy as np
import pytest

import ffnumba.symbol as sym
from ffnumba.base import ShapeError
from ffnumba.ops.registry import OpContext, get_op
from ffnumba.testing import OpCase, check_symbolic_backward


def _m(label):
    return label.size / label.shape[0]


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


class _RegressionCase(OpCase):
    params = [{}, dict(grad_scale=2.5)]
    shapes = [dict(data=(4, 1)), dict(data=(2, 3)), dict(data=(3, 2, 2))]
    grad_nodes = ['data']

    def inputs(self, rng, p, shapes):
        data = rng.uniform(-1, 1, shapes['data'])
        # keep |data - label| away from 0 (MAE's kink)
        label = data.reshape(shapes['label']) + rng.choice([-0.5, 0.5], shapes['label'])
        return {'data': data, 'label': label}


class TestLinearRegressionOutput(_RegressionCase):
    op = 'LinearRegressionOutput'

    def reference(self, p, data, label):
        return [data]

    def loss(self, p, outputs, inputs):
        if outputs is None:
            return 0.0
        y = inputs['label'].reshape(outputs[0].shape)
        return p.get('grad_scale', 1.0) / (2 * _m(inputs['label'])) * np.sum((outputs[0] - y) ** 2)


class TestLogisticRegressionOutput(_RegressionCase):
    op = 'LogisticRegressionOutput'

    def inputs(self, rng, p, shapes):
        return {'data': rng.uniform(-2, 2, shapes['data']),
                'label': rng.uniform(0, 1, shapes['label'])}

    def reference(self, p, data, label):
        return [_sigmoid(data)]

    def loss(self, p, outputs, inputs):
        if outputs is None:
            return 0.0
        o, y = outputs[0], inputs['label'].reshape(outputs[0].shape)
        ce = -(y * np.log(o) + (1 - y) * np.log(1 - o))
        return p.get('grad_scale', 1.0) / _m(inputs['label']) * np.sum(ce)


class TestMAERegressionOutput(_RegressionCase):
    op = 'MAERegressionOutput'

    def reference(self, p, data, label):
        return [data]

    def loss(self, p, outputs, inputs):
        if outputs is None:
            return 0.0
        y = inputs['label'].reshape(outputs[0].shape)
        return p.get('grad_scale', 1.0) / _m(inputs['label']) * np.sum(np.abs(outputs[0] - y))


_NAMES = ['LinearRegressionOutput', 'LogisticRegressionOutput', 'MAERegressionOutput']


@pytest.mark.parametrize('name', _NAMES)
def test_label_shapes(name):
    s = getattr(sym, name)(sym.Variable('data'), name='reg')
    assert s.list_arguments() == ['data', 'reg_label']
    assert s.infer_shape(data=(4, 1))[0] == [(4, 1), (4,)]
    assert s.infer_shape(data=(2, 3))[0] == [(2, 3), (2, 3)]
    assert s.infer_shape(data=(4, 1), reg_label=(4, 1))[0] == [(4, 1), (4, 1)]
    with pytest.raises(ShapeError):
        s.infer_shape(data=(2, 3), reg_label=(6, 1))


def test_mae_matches_mxnet():
    # MXNet 1.9.1: sign(0) counts as -1; grad_scale 2 / m=3; the label gets no gradient
    x = np.array([[0.5, -1, 2], [0, 0.3, -0.2]])
    y = np.array([[0.5, 0, 0], [1, 0.3, -1]])
    s = sym.MAERegressionOutput(sym.Variable('data'), sym.Variable('label'), grad_scale=2)
    g = check_symbolic_backward(s, dict(data=x, label=y), None,
                                dict(data=np.array([-2, -2, 2, -2, -2, 2]).reshape(2, 3) / 3,
                                     label=np.zeros((2, 3))), dtype='float64', atol=1e-12)
    assert g['label'].shape == (2, 3)


@pytest.mark.parametrize('name,expect', [
    ('LinearRegressionOutput', lambda x, y: x - y),
    ('LogisticRegressionOutput', lambda x, y: _sigmoid(x) - y)])
def test_gradient_formula(name, expect):
    x = np.array([[0.5], [-1.0], [2.0]])
    y = np.array([1.0, 0.0, 0.5])
    s = getattr(sym, name)(sym.Variable('data'), sym.Variable('label'), grad_scale=3)
    check_symbolic_backward(s, dict(data=x, label=y), None,
                            dict(data=3 * expect(x, y.reshape(3, 1))), dtype='float64',
                            rtol=1e-12, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize('name', _NAMES)
def test_gpu_kernels_match_cpu(name):
    from numba import cuda
    op = get_op(name)
    p = op.parse_params(dict(grad_scale=1.5))
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, (3, 2)), rng.uniform(-1, 1, (3, 2))
    ctx = OpContext(True, None, {}, None, 'reg')
    out = np.empty_like(x)
    op.forward['cpu'](ctx, p, [x, y], [out], [])
    g = [np.ones_like(x), np.ones_like(y)]
    op.backward['cpu'](ctx, p, None, [x, y], [out], g, ['add', 'write'], [])
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    dout = cuda.to_device(np.zeros_like(x))
    op.forward['gpu'](ctx, p, [dx, dy], [dout], [])
    dg = [cuda.to_device(np.ones_like(x)), cuda.to_device(np.ones_like(y))]
    op.backward['gpu'](ctx, p, None, [dx, dy], [dout], dg, ['add', 'write'], [])
    np.testing.assert_allclose(dout.copy_to_host(), out, atol=1e-12)
    np.testing.assert_allclose(dg[0].copy_to_host(), g[0], atol=1e-12)
    np.testing.assert_array_equal(dg[1].copy_to_host(), 0)
