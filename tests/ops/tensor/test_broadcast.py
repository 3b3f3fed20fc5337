"""broadcast_* ops: OpCase tables over hypothesis-drawn compatible shape pairs, plus rules."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba.symbol as sym
from ffnumba.base import ShapeError
from ffnumba.ops.broadcast_templates import broadcast_plan
from ffnumba.ops.registry import get_op
from ffnumba.testing import OpCase, check_symbolic_backward, check_symbolic_forward
from ffnumba.testing import strategies as fst


@st.composite
def broadcast_pairs(draw, max_dims=4):
    """Two shapes that broadcast: each drops some leading axes of a common shape and
    turns some axes into 1."""
    out = draw(fst.shapes(min_dims=1, max_dims=max_dims, max_side=4))

    def operand():
        keep = draw(st.integers(1, len(out)))
        dims = list(out[len(out) - keep:])
        for i in range(len(dims)):
            if draw(st.booleans()):
                dims[i] = 1
        return tuple(dims)
    return operand(), operand()


REFS = {
    'broadcast_add': (np.add, 'any', 'any'),
    'broadcast_sub': (np.subtract, 'any', 'any'),
    'broadcast_mul': (np.multiply, 'any', 'any'),
    'broadcast_div': (np.divide, 'any', 'pos'),
    'broadcast_power': (np.power, 'pos', 'any'),
    'broadcast_maximum': (np.maximum, 'any', 'any'),
    'broadcast_minimum': (np.minimum, 'any', 'any'),
    'broadcast_equal': (lambda a, b: (a == b).astype(float), 'int', 'int'),
    'broadcast_not_equal': (lambda a, b: (a != b).astype(float), 'int', 'int'),
    'broadcast_greater': (lambda a, b: (a > b).astype(float), 'any', 'any'),
    'broadcast_greater_equal': (lambda a, b: (a >= b).astype(float), 'int', 'int'),
    'broadcast_lesser': (lambda a, b: (a < b).astype(float), 'any', 'any'),
    'broadcast_lesser_equal': (lambda a, b: (a <= b).astype(float), 'int', 'int'),
}


def _draw(rng, shape, domain):
    if domain == 'pos':
        return rng.uniform(0.5, 2.0, shape)
    if domain == 'int':     # small integers, so that ties happen
        return rng.integers(-1, 2, shape).astype(np.float64)
    return rng.uniform(-1, 1, shape)


class _BroadcastCase(OpCase):
    shapes = [dict(lhs=(2, 3), rhs=(3,)), dict(lhs=(2, 1, 3), rhs=(4, 1)),
              dict(lhs=(1,), rhs=(2, 2)), dict(lhs=(3, 2), rhs=(3, 2))]
    fn = None
    domains = ('any', 'any')

    def cases(self):
        return st.tuples(st.just({}), broadcast_pairs().map(lambda ab: dict(lhs=ab[0], rhs=ab[1])))

    def inputs(self, rng, p, shapes):
        return {'lhs': _draw(rng, shapes['lhs'], self.domains[0]),
                'rhs': _draw(rng, shapes['rhs'], self.domains[1])}

    def reference(self, p, lhs, rhs):
        return [type(self).fn(lhs, rhs)]


for _name, (_fn, _da, _db) in REFS.items():
    globals()['Test_' + _name] = type('Test_' + _name, (_BroadcastCase,), dict(
        op=_name, fn=staticmethod(_fn), domains=(_da, _db),
        # ties (drawn on purpose) are jumps: a finite difference there is meaningless
        nondifferentiable=_da == 'int'))


@pytest.mark.parametrize('op', [n for n in REFS if 'equal' in n or 'greater' in n or 'lesser' in n])
def test_comparisons_have_zero_gradient(op):
    s = getattr(sym, op)(sym.Variable('a'), sym.Variable('b'))
    loc = {'a': np.array([[0.0, 1.0, 2.0]]), 'b': np.array([[1.0], [2.0]])}
    check_symbolic_backward(s, loc, [np.ones((2, 3))], {'a': np.zeros((1, 3)),
                                                        'b': np.zeros((2, 1))}, rtol=0, atol=0)


@given(broadcast_pairs(max_dims=5))
def test_infer_shape_is_numpy_broadcast(ab):
    a, b = ab
    s = sym.broadcast_mul(sym.Variable('a'), sym.Variable('b'))
    _, outs, _ = s.infer_shape(a=a, b=b)
    assert outs == [np.broadcast_shapes(a, b)]


@given(fst.shapes(max_dims=3), fst.shapes(max_dims=3))
def test_incompatible_shapes_name_both(a, b):
    try:
        np.broadcast_shapes(a, b)
        compatible = True
    except ValueError:
        compatible = False
    s = sym.broadcast_add(sym.Variable('a'), sym.Variable('b'), name='badd')
    if compatible:
        s.infer_shape(a=a, b=b)
    else:
        with pytest.raises(ShapeError) as e:
            s.infer_shape(a=a, b=b)
        msg = str(e.value)
        assert 'badd' in msg and str(tuple(a)) in msg and str(tuple(b)) in msg


def test_gradient_sums_over_broadcast_axes():
    s = sym.broadcast_add(sym.Variable('a'), sym.Variable('b'))
    loc = {'a': np.zeros((2, 1, 3)), 'b': np.zeros((4, 1))}
    og = np.arange(24.0).reshape(2, 4, 3)
    check_symbolic_backward(s, loc, [og], {'a': og.sum(axis=1, keepdims=True),
                                           'b': og.sum(axis=(0, 2))[:, None]}, rtol=1e-12, atol=0)


def test_maximum_minimum_ties_go_to_lhs():
    # MXNet 1.9.1: lhs [[1, 2, 3]], rhs [[2], [1]], head gradient ones
    a, b = np.array([[1.0, 2, 3]]), np.array([[2.0], [1.0]])
    mx_ = sym.broadcast_maximum(sym.Variable('a'), sym.Variable('b'))
    check_symbolic_forward(mx_, {'a': a, 'b': b}, [np.array([[2.0, 2, 3], [1, 2, 3]])])
    check_symbolic_backward(mx_, {'a': a, 'b': b}, [np.ones((2, 3))],
                            {'a': np.array([[1.0, 2, 2]]), 'b': np.array([[1.0], [0]])})
    mn = sym.broadcast_minimum(sym.Variable('a'), sym.Variable('b'))
    check_symbolic_backward(mn, {'a': a, 'b': b}, [np.ones((2, 3))],
                            {'a': np.array([[2.0, 1, 0]]), 'b': np.array([[1.0], [2]])})


def test_power_gradient_matches_mxnet():
    # MXNet 1.9.1: lhs [[0, 2, 3]], rhs [[2], [0.5]]: d lhs = [inf, 4.35355339, 6.28867513]
    fwd, bwd = get_op('broadcast_power').compute('cpu')
    p = get_op('broadcast_power').parse_params({})
    a, b = np.array([[0.0, 2, 3]]), np.array([[2.0], [0.5]])
    out = np.zeros((2, 3))
    fwd(None, p, [a, b], [out], [])
    np.testing.assert_allclose(out, [[0, 4, 9], [0, 2 ** 0.5, 3 ** 0.5]])
    ga, gb = np.zeros_like(a), np.zeros_like(b)
    bwd(None, p, [np.ones((2, 3))], [a, b], [out], [ga, gb], ['write', 'write'], [])
    np.testing.assert_allclose(ga, [[np.inf, 4.35355339, 6.28867513]])
    assert np.isnan(gb).all()          # 0 ** b * log(0): MXNet gives nan too


def test_aliases():
    assert get_op('broadcast_plus') is get_op('broadcast_add')
    assert get_op('broadcast_minus') is get_op('broadcast_sub')


@given(broadcast_pairs(max_dims=5))
def test_plan_collapses_to_few_axes(ab):
    a, b = ab
    out = np.broadcast_shapes(a, b)
    shape, sa, sb, same = broadcast_plan(a, b, out)
    assert int(np.prod(shape)) == int(np.prod(out))
    assert same == (int(np.prod(a)) == int(np.prod(b)) == int(np.prod(out)))
    # walking the plan visits exactly numpy's broadcast pairing
    ia = np.zeros(shape, np.int64)
    ib = np.zeros(shape, np.int64)
    for d in range(len(shape)):
        idx = np.arange(shape[d]).reshape([-1 if k == d else 1 for k in range(len(shape))])
        ia = ia + idx * sa[d]
        ib = ib + idx * sb[d]
    ref_a = np.broadcast_to(np.arange(int(np.prod(a))).reshape(a), out).ravel()
    ref_b = np.broadcast_to(np.arange(int(np.prod(b))).reshape(b), out).ravel()
    assert (ia.ravel() == ref_a).all() and (ib.ravel() == ref_b).all()


@pytest.mark.parametrize('req', [('write', 'null'), ('null', 'add'), ('add', 'write')])
def test_float16_computes_in_float32(req):
    fwd, bwd = get_op('broadcast_mul').compute('cpu')
    p = get_op('broadcast_mul').parse_params({})
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float16)
    b = np.array([0.5, 2.0, -1.0], np.float16)
    out = np.zeros((2, 3), np.float16)
    fwd(None, p, [a, b], [out], [])
    assert out.dtype == np.float16 and (out == a * b).all()
    og = np.ones((2, 3), np.float16)
    ga, gb = np.ones((2, 3), np.float16), np.ones(3, np.float16)
    grads = [ga if req[0] != 'null' else None, gb if req[1] != 'null' else None]
    bwd(None, p, [og], [a, b], [out], grads, list(req), [])
    assert (og == 1).all()                      # the head gradient is left alone
    base = {'write': 0.0, 'add': 1.0}
    if req[0] != 'null':
        np.testing.assert_array_equal(ga, base[req[0]] + np.broadcast_to(b, (2, 3)))
    if req[1] != 'null':
        np.testing.assert_array_equal(gb, base[req[1]] + a.sum(axis=0))


def test_template_bodies_get_reproducible_cache_identities():
    # the disk cache of a template kernel is keyed by its pickled scalar bodies; a random
    # per-process dispatcher uuid would make every process miss it
    from numba import njit
    from ffnumba.ops.templates import stable_cache_key
    from ffnumba.ops.tensor import broadcast
    assert broadcast._add.__dict__['_MemoMixin__uuid'] == 'ffnumba:ffnumba.ops.tensor.elemwise._add'

    def make():
        @njit
        def twin(x):
            return x
        return twin
    a, b = make(), make()
    stable_cache_key(a, b)
    assert a.__dict__['_MemoMixin__uuid'].endswith('make.<locals>.twin')
    assert b.__dict__.get('_MemoMixin__uuid') != a.__dict__['_MemoMixin__uuid']


def test_kernel_infrastructure_has_one_home():
    # JIT options and launch helpers live in ffnumba.jit; templates only imports them,
    # and GPU_THREADS is read from ffnumba.jit alone (patching templates would do nothing).
    from ffnumba import jit
    from ffnumba.ops import broadcast_templates, templates
    for name in ('JIT', 'LazyCudaKernel', 'launch_1d', 'f16_safe', 'fill_gpu', 'import_cuda'):
        assert getattr(templates, name) is getattr(jit, name)
    assert broadcast_templates.LazyCudaKernel is jit.LazyCudaKernel
    assert not hasattr(templates, 'GPU_THREADS')
    assert not hasattr(templates, 'make_reduce')
