"""where: elementwise and row selection, gradients to x and y only, shape and type rules."""
import numpy as np
import pytest
from hypothesis import strategies as st

import ffnumba.symbol as sym
from ffnumba.base import ShapeError
from ffnumba.testing import OpCase, check_symbolic_backward, check_symbolic_forward
from ffnumba.testing import strategies as fst


class TestWhere(OpCase):
    op = 'where'
    shapes = [dict(condition=(2, 3), x=(2, 3), y=(2, 3)), dict(condition=(3,), x=(3, 2, 2)),
              dict(condition=(4,), x=(4,))]
    grad_nodes = ['x', 'y']

    def cases(self):
        def shapes(s, row):
            return dict(condition=s[:1] if row else s, x=s, y=s)
        return st.tuples(st.just({}), st.builds(shapes, fst.shapes(max_dims=3, max_side=4),
                                                st.booleans()))

    def inputs(self, rng, p, shapes):
        out = {n: rng.uniform(-1, 1, s) for n, s in shapes.items()}
        out['condition'] = rng.integers(0, 2, shapes['condition']).astype(np.float64)
        return out

    def reference(self, p, condition, x, y):
        c = condition.reshape(condition.shape + (1,) * (x.ndim - condition.ndim))
        return [np.where(c != 0, x, y)]


def test_gradients_match_mxnet():
    # MXNet 1.9.1: row selection with condition [1, 0]; the condition gets zeros
    s = sym.where(sym.Variable('c'), sym.Variable('x'), sym.Variable('y'))
    loc = {'c': np.array([1.0, 0.0]), 'x': np.ones((2, 3)), 'y': np.ones((2, 3))}
    check_symbolic_backward(s, loc, [np.ones((2, 3))],
                            {'c': np.zeros(2), 'x': [[1, 1, 1], [0, 0, 0]],
                             'y': [[0, 0, 0], [1, 1, 1]]})
    loc = {'c': np.array([[1.0, 0, 0.5], [0, -1, 0]]), 'x': np.full((2, 3), 2.0),
           'y': np.full((2, 3), 3.0)}
    check_symbolic_forward(s, loc, [np.array([[2.0, 3, 2], [3, 2, 3]])])
    check_symbolic_backward(s, loc, [np.ones((2, 3))],
                            {'c': np.zeros((2, 3)), 'x': [[1, 0, 1], [0, 1, 0]],
                             'y': [[0, 1, 0], [1, 0, 1]]})


@pytest.mark.parametrize('cond, x, y', [((3,), (2, 3), (2, 3)), ((2, 1), (2, 3), (2, 3)),
                                        ((2, 3), (2, 3), (2, 4))])
def test_bad_shapes_raise(cond, x, y):
    s = sym.where(sym.Variable('c'), sym.Variable('x'), sym.Variable('y'), name='sel')
    with pytest.raises(ShapeError, match='sel'):
        s.infer_shape(c=cond, x=x, y=y)


def test_y_shape_and_types_inferred():
    s = sym.where(sym.Variable('c'), sym.Variable('x'), sym.Variable('y'))
    args, outs, _ = s.infer_shape(c=(2,), x=(2, 5))
    assert args == [(2,), (2, 5), (2, 5)] and outs == [(2, 5)]
    args, outs, _ = s.infer_type(c='int32', x='float64')
    assert args == [np.int32, np.float64, np.float64] and outs == [np.float64]
