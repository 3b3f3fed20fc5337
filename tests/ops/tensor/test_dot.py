"""dot and batch_dot: OpCase tables over transpose flags and drawn shapes, plus shape rules."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba.symbol as sym
from ffnumba.base import ShapeError
from ffnumba.ops.tensor.dot import batch_dot_shape, dot_shape
from ffnumba.testing import OpCase


def np_dot(a, b, ta=False, tb=False):
    """MXNet's dot: lhs contracted on its last axis (first with transpose_a), rhs on its
    first (last with transpose_b); free axes of lhs then rhs; () -> (1,)."""
    A = a.reshape(a.shape[0], -1).T if ta else a.reshape(-1, a.shape[-1])
    B = b.reshape(-1, b.shape[-1]).T if tb else b.reshape(b.shape[0], -1)
    free = (a.shape[1:] if ta else a.shape[:-1]) + (b.shape[:-1] if tb else b.shape[1:])
    return (A @ B).reshape(free or (1,))


def np_batch_dot(a, b, ta=False, tb=False):
    return np.matmul(np.swapaxes(a, -1, -2) if ta else a, np.swapaxes(b, -1, -2) if tb else b)


@st.composite
def dot_cases(draw):
    ta, tb = draw(st.booleans()), draw(st.booleans())
    k = draw(st.integers(1, 4))
    lfree = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    rfree = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    lhs = (k,) + lfree if ta else lfree + (k,)
    rhs = rfree + (k,) if tb else (k,) + rfree
    return dict(transpose_a=ta, transpose_b=tb), dict(lhs=lhs, rhs=rhs)


@st.composite
def batch_dot_cases(draw):
    ta, tb = draw(st.booleans()), draw(st.booleans())
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
    n, k, m = (draw(st.integers(1, 4)) for _ in range(3))
    lhs = batch + ((k, n) if ta else (n, k))
    rhs = batch + ((m, k) if tb else (k, m))
    return dict(transpose_a=ta, transpose_b=tb), dict(lhs=lhs, rhs=rhs)


class TestDot(OpCase):
    op = 'dot'
    params = [dict()]
    shapes = [dict(lhs=(2, 3), rhs=(3, 4)), dict(lhs=(2, 3, 4), rhs=(4, 5, 2)),
              dict(lhs=(3,), rhs=(3,)), dict(lhs=(3,), rhs=(3, 2)), dict(lhs=(2, 3), rhs=(3,))]

    def cases(self):
        return dot_cases()

    def reference(self, p, lhs, rhs):
        return [np_dot(lhs, rhs, p.get('transpose_a', False), p.get('transpose_b', False))]


class TestDotTransposeA(TestDot):
    params = [dict(transpose_a=True)]
    shapes = [dict(lhs=(3, 2), rhs=(3, 4)), dict(lhs=(4, 3, 2), rhs=(4, 5, 2))]


class TestDotTransposeB(TestDot):
    params = [dict(transpose_b=True)]
    shapes = [dict(lhs=(2, 3), rhs=(4, 3)), dict(lhs=(2, 3, 4), rhs=(2, 5, 4))]


class TestDotTransposeBoth(TestDot):
    params = [dict(transpose_a=True, transpose_b=True)]
    shapes = [dict(lhs=(3, 2), rhs=(4, 3))]


class TestBatchDot(OpCase):
    op = 'batch_dot'
    params = [dict(), dict(transpose_a=True, transpose_b=True)]
    shapes = [dict(lhs=(2, 3, 3), rhs=(2, 3, 3)), dict(lhs=(2, 2, 3, 3), rhs=(2, 2, 3, 3))]

    def cases(self):
        return batch_dot_cases()

    def reference(self, p, lhs, rhs):
        return [np_batch_dot(lhs, rhs, p.get('transpose_a', False), p.get('transpose_b', False))]


class TestBatchDotMixed(TestBatchDot):
    params = [dict(transpose_b=True)]
    shapes = [dict(lhs=(2, 3, 4), rhs=(2, 5, 4))]


@pytest.mark.parametrize('lhs, rhs, ta, tb, out', [
    # MXNet 1.9.1
    ((2, 3), (3, 4), 0, 0, (2, 4)), ((2, 3, 4), (4, 5, 6), 0, 0, (2, 3, 5, 6)),
    ((4, 3, 2), (4, 5, 6), 1, 0, (3, 2, 5, 6)), ((2, 3, 4), (5, 6, 4), 0, 1, (2, 3, 5, 6)),
    ((2, 3, 4), (6, 5, 4), 0, 1, (2, 3, 6, 5)), ((3,), (3,), 0, 0, (1,)),
    ((3,), (3, 4), 0, 0, (4,)), ((2, 3), (3,), 0, 0, (2,)),
])
def test_dot_shapes_match_mxnet(lhs, rhs, ta, tb, out):
    s = sym.dot(sym.Variable('a'), sym.Variable('b'), transpose_a=bool(ta), transpose_b=bool(tb))
    assert s.infer_shape(a=lhs, b=rhs)[1] == [out]


@given(dot_cases(), st.integers(1, 3))
def test_dot_mismatch_names_both_shapes(case, extra):
    p, shapes = case
    lhs, rhs = shapes['lhs'], list(shapes['rhs'])
    rhs[-1 if p['transpose_b'] else 0] += extra
    s = sym.dot(sym.Variable('a'), sym.Variable('b'), name='dotnode', **p)
    with pytest.raises(ShapeError) as e:
        s.infer_shape(a=lhs, b=tuple(rhs))
    msg = str(e.value)
    assert 'dotnode' in msg and str(tuple(lhs)) in msg and str(tuple(rhs)) in msg


def test_batch_dot_errors():
    with pytest.raises(ShapeError, match='leading'):
        batch_dot_shape((2, 3, 4), (3, 4, 5), False, False)
    with pytest.raises(ShapeError, match='rank'):
        batch_dot_shape((3, 4), (4, 5), False, False)
    with pytest.raises(ShapeError, match='contracts'):
        batch_dot_shape((2, 3, 4), (2, 5, 6), False, False)
    with pytest.raises(ShapeError, match='at least 1'):
        dot_shape((), (3,), False, False)


@pytest.mark.parametrize('op, lhs, rhs', [('dot', (2, 3), (3, 4)),
                                         ('batch_dot', (2, 2, 3), (2, 3, 4))])
def test_float16_runs_in_float32(op, lhs, rhs):
    from ffnumba.ops.registry import get_op
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, lhs).astype(np.float16)
    b = rng.uniform(-1, 1, rhs).astype(np.float16)
    ref = (np_dot if op == 'dot' else np_batch_dot)(a.astype(np.float32), b.astype(np.float32))
    fwd, bwd = get_op(op).compute('cpu')
    p = get_op(op).parse_params({})
    out = np.zeros(ref.shape, np.float16)
    fwd(None, p, [a, b], [out], [])
    np.testing.assert_allclose(out, ref, rtol=2e-3, atol=2e-3)
    ga, gb = np.ones(lhs, np.float16), np.zeros(rhs, np.float16)
    og = np.ones(ref.shape, np.float16)
    bwd(None, p, [og], [a, b], [out], [ga, gb], ['add', 'write'], [])
    ref_ga = 1 + np.matmul(og.astype(np.float32), np.swapaxes(b.astype(np.float32), -1, -2))
    np.testing.assert_allclose(ga, ref_ga, rtol=2e-3, atol=2e-3)
