"""softmax_cross_entropy: OpCase rows, MXNet 1.9.1 values, label checks."""
import numpy as np
import pytest

import ffnumba.symbol as sym
from ffnumba.base import FFError, ShapeError
from ffnumba.testing import OpCase, bind_numpy, check_symbolic_backward, check_symbolic_forward


def _ref(data, label):
    m = data.max(1, keepdims=True)
    lse = np.log(np.exp(data - m).sum(1)) + m[:, 0]
    return np.array([(lse - data[np.arange(len(label)), label.astype(int)]).sum()])


class TestSoftmaxCrossEntropy(OpCase):
    op = 'softmax_cross_entropy'
    shapes = [dict(data=(3, 4)), dict(data=(2, 5))]
    grad_nodes = ['data']

    def inputs(self, rng, p, shapes):
        n, k = shapes['data']
        return {'data': rng.uniform(-2, 2, (n, k)), 'label': rng.integers(0, k, n).astype(float)}

    def reference(self, p, data, label):
        return [_ref(data, label)]


def test_values_match_mxnet():
    # MXNet 1.9.1: loss 2.14891726; gradient with head gradient 2
    a, b = sym.Variable('data'), sym.Variable('label')
    s = sym.softmax_cross_entropy(a, b)
    loc = {'data': np.array([[1., 2, 3], [0.5, -1, 2]]), 'label': np.array([2., 0])}
    check_symbolic_forward(s, loc, [np.array([2.14891726])], rtol=1e-7)
    check_symbolic_backward(s, loc, [np.array([2.0])],
                            {'data': np.array([[0.18006115, 0.48945694, -0.66951809],
                                               [-1.64941922, 0.07822515, 1.57119407]])},
                            rtol=1e-7, grad_req={'data': 'write', 'label': 'null'})


def test_shapes_and_bad_labels():
    s = sym.softmax_cross_entropy(sym.Variable('data'), sym.Variable('label'))
    assert s.infer_shape(data=(4, 3)) == ([(4, 3), (4,)], [(1,)], [])
    with pytest.raises(ShapeError, match='2-D'):
        s.infer_shape(data=(4, 3, 2))
    exe = bind_numpy(s, {'data': np.zeros((2, 3)), 'label': np.array([0., 3.])},
                     grad_req='null')
    with pytest.raises(FFError, match='out of range'):
        exe.forward()
