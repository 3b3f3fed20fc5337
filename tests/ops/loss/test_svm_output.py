"""SVMOutput: OpCase rows (loss gradients for L1/L2-SVM), MXNet 1.9.1 values, label checks."""
import numpy as np
import pytest

import ffnumba.symbol as sym
from ffnumba.base import FFError, ParamError, ShapeError
from ffnumba.ops.registry import get_op
from ffnumba.testing import OpCase, bind_numpy, check_symbolic_backward


class TestSVMOutput(OpCase):
    op = 'SVMOutput'
    params = [{}, dict(margin=0.5, regularization_coefficient=2.0),
              dict(use_linear=True, margin=1.5)]
    shapes = [dict(data=(4, 3)), dict(data=(2, 3, 5))]
    grad_nodes = ['data']

    def inputs(self, rng, p, shapes):
        m = p.get('margin', 1.0)
        x = rng.uniform(-2, 2, shapes['data'])
        # keep scores off the hinge points +-margin
        x = np.where(np.abs(np.abs(x) - m) < 0.1, x + 0.25, x)
        c = shapes['data'][-1]
        return {'data': x, 'label': rng.integers(0, c, shapes['label']).astype(float)}

    def reference(self, p, data, label):
        return [data]

    def loss(self, p, outputs, inputs):
        if outputs is None:
            return 0.0
        s = outputs[0].reshape(-1, outputs[0].shape[-1])
        lab = inputs['label'].reshape(-1).astype(int)
        m, c = p.get('margin', 1.0), p.get('regularization_coefficient', 1.0)
        onehot = np.eye(s.shape[1])[lab].astype(bool)
        h = np.where(onehot, np.maximum(0, m - s), np.maximum(0, m + s))
        return c * np.sum(h if p.get('use_linear') else h ** 2)


def test_gradients_match_mxnet():
    # MXNet 1.9.1, margin 1, regularization_coefficient 0.5
    x = np.array([[0.5, -0.2, 1.5], [-2.0, 0.3, 0.9]])
    loc = {'data': x, 'label': np.array([2., 0])}
    s = sym.SVMOutput(sym.Variable('data'), sym.Variable('label'), margin=1.0,
                      regularization_coefficient=0.5)
    check_symbolic_backward(s, loc, None, {'data': np.array([[1.5, 0.8, 0], [-3, 1.3, 1.9]])},
                            grad_req={'data': 'write', 'label': 'null'})
    s = sym.SVMOutput(sym.Variable('data'), sym.Variable('label'), margin=1.0,
                      regularization_coefficient=0.5, use_linear=True)
    check_symbolic_backward(s, loc, None, {'data': np.array([[0.5, 0.5, 0], [-0.5, 0.5, 0.5]])},
                            grad_req={'data': 'write', 'label': 'null'})


def test_shapes_and_errors():
    s = sym.SVMOutput(sym.Variable('data'), sym.Variable('label'))
    assert s.infer_shape(data=(2, 3)) == ([(2, 3), (2,)], [(2, 3)], [])
    assert s.infer_shape(data=(2, 3, 4)) == ([(2, 3, 4), (2, 3)], [(2, 3, 4)], [])
    with pytest.raises(ShapeError, match='ndim >= 2'):
        s.infer_shape(data=(5,))
    with pytest.raises(ParamError, match='margin'):
        get_op('SVMOutput').parse_params(dict(margin=float('nan')))
    exe = bind_numpy(s, {'data': np.zeros((2, 3)), 'label': np.array([0., 3.])},
                     grad_req={'data': 'write', 'label': 'null'})
    exe.forward(is_train=True)
    with pytest.raises(FFError, match='out of range'):
        exe.backward()
