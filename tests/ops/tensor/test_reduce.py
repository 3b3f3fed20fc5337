"""Reductions: OpCase over hypothesis-drawn shapes/axis/keepdims/exclude, plus MXNet's rules."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba.symbol as sym
from ffnumba.base import ShapeError
from ffnumba.ops.registry import get_op
from ffnumba.testing import OpCase, check_symbolic_backward, check_symbolic_forward
from ffnumba.testing import strategies as fst

NP = {'sum': np.sum, 'mean': np.mean, 'max': np.max, 'min': np.min, 'prod': np.prod}


def np_reduce(op, x, axis=None, keepdims=False, exclude=False):
    """MXNet's reduction semantics written with numpy."""
    nd = x.ndim
    if axis is None or axis == ():
        axes = tuple(range(nd))
    else:
        axes = tuple(sorted(a % nd for a in np.atleast_1d(axis)))
        if exclude:
            axes = tuple(d for d in range(nd) if d not in axes)
    y = NP[op](x, axis=axes, keepdims=bool(keepdims))
    return np.asarray(y).reshape(y.shape if np.ndim(y) else (1,))


@st.composite
def reduce_cases(draw):
    shape = draw(fst.shapes(min_dims=1, max_dims=3, max_side=4))
    nd = len(shape)
    kind = draw(st.sampled_from(['none', 'int', 'tuple']))
    p = {}
    if kind == 'int':
        p['axis'] = draw(st.integers(-nd, nd - 1))
    elif kind == 'tuple':
        axes = draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True))
        p['axis'] = tuple(a - nd if draw(st.booleans()) else a for a in axes)
    if draw(st.booleans()):
        p['keepdims'] = True
    if kind != 'none' and draw(st.booleans()):
        p['exclude'] = True
    return p, dict(data=shape)


class _ReduceCase(OpCase):
    params = [dict(), dict(axis=1), dict(axis=(0, 2), keepdims=True), dict(axis=-1, exclude=True),
              dict(axis=(1, -1), keepdims=True, exclude=True)]
    shapes = [dict(data=(2, 3, 4))]

    def cases(self):
        return reduce_cases()

    def reference(self, p, data):
        return [np_reduce(self.op, data, p.get('axis'), p.get('keepdims', False),
                          p.get('exclude', False))]


class TestSum(_ReduceCase):
    op = 'sum'


class TestMean(_ReduceCase):
    op = 'mean'


class TestMax(_ReduceCase):
    op = 'max'


class TestMin(_ReduceCase):
    op = 'min'


class TestProd(_ReduceCase):
    op = 'prod'

    def inputs(self, rng, p, shapes):
        # magnitudes near 1 keep the product of up to 64 elements well scaled
        x = rng.uniform(0.8, 1.25, shapes['data'])
        return {'data': x * rng.choice([-1.0, 1.0], shapes['data'])}


@given(reduce_cases(), st.sampled_from(sorted(NP)))
def test_infer_shape_matches_numpy_rule(case, op):
    p, shapes = case
    opdef = get_op(op)
    _, outs, _ = opdef.infer_shape(opdef.parse_params(p), [shapes['data']], [], [None])
    x = np.ones(shapes['data'])
    assert outs == [np_reduce(op, x, p.get('axis'), p.get('keepdims', False),
                              p.get('exclude', False)).shape]


def test_full_reduction_gives_shape_1():
    s = sym.sum(sym.Variable('data'))
    assert s.infer_shape(data=(2, 3))[1] == [(1,)]
    assert sym.sum(sym.Variable('data'), keepdims=True).infer_shape(data=(2, 3))[1] == [(1, 1)]
    assert sym.sum(sym.Variable('data'), axis=()).infer_shape(data=(2, 3))[1] == [(1,)]
    # exclude with every axis listed reduces nothing (MXNet 1.9.1)
    assert sym.sum(sym.Variable('data'), axis=(0, 1), exclude=True) \
        .infer_shape(data=(2, 3))[1] == [(2, 3)]


def test_max_min_ties_all_get_the_gradient():
    # MXNet 1.9.1: x = [[1, 3, 3], [2, 2, 0]]
    x = np.array([[1.0, 3, 3], [2, 2, 0]])
    s = sym.max(sym.Variable('data'), axis=1)
    check_symbolic_forward(s, {'data': x}, [np.array([3.0, 2])])
    check_symbolic_backward(s, {'data': x}, [np.ones(2)], {'data': [[0, 1, 1], [1, 1, 0]]})
    s = sym.max(sym.Variable('data'))
    check_symbolic_backward(s, {'data': x}, [np.ones(1)], {'data': [[0, 1, 1], [0, 0, 0]]})
    s = sym.min(sym.Variable('data'), axis=1)
    check_symbolic_backward(s, {'data': x}, [np.ones(2)], {'data': [[1, 0, 0], [0, 0, 1]]})


def test_prod_gradient_with_zeros_is_exact():
    # one zero: only the zero gets the product of the others; two zeros: all 0.
    # (MXNet 1.9.1 returns nan at the zeros; this is the true derivative.)
    x = np.array([[1.0, 0, 3], [2, 0, 0], [2, 3, 4]])
    s = sym.prod(sym.Variable('data'), axis=1)
    check_symbolic_forward(s, {'data': x}, [np.array([0.0, 0, 24])])
    check_symbolic_backward(s, {'data': x}, [np.ones(3)],
                            {'data': [[0, 3, 0], [0, 0, 0], [12, 8, 6]]}, rtol=1e-12, atol=0)


def test_mean_gradient_and_grad_req_add():
    x = np.arange(6.0).reshape(2, 3)
    s = sym.mean(sym.Variable('data'), axis=0)
    check_symbolic_backward(s, {'data': x}, [np.array([2.0, 4, 6])],
                            {'data': [[1, 2, 3], [1, 2, 3]]}, rtol=1e-12, atol=0)


@pytest.mark.parametrize('axis', [3, -4, (0, 0), (1, -2)])
def test_bad_axes_raise_shape_error(axis):
    s = sym.sum(sym.Variable('data'), axis=axis, name='red')
    with pytest.raises(ShapeError) as e:
        s.infer_shape(data=(2, 3, 4))
    assert 'red' in str(e.value) and '(2, 3, 4)' in str(e.value)


def test_aliases():
    assert get_op('sum_axis') is get_op('sum')
    assert get_op('max_axis') is get_op('max')
    assert get_op('min_axis') is get_op('min')


def test_float16_computes_in_float32():
    fwd, bwd = get_op('mean').compute('cpu')
    p = get_op('mean').parse_params(dict(axis=0))
    x = np.arange(6, dtype=np.float16).reshape(3, 2)
    out = np.zeros(2, np.float16)
    fwd(None, p, [x], [out], [])
    assert out.dtype == np.float16 and out.tolist() == [2.0, 3.0]
    ig = np.ones((3, 2), np.float16)
    bwd(None, p, [np.array([3.0, 6.0], np.float16)], [x], [out], [ig], ['add'], [])
    assert ig.tolist() == [[2.0, 3.0]] * 3
