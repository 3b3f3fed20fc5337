"""broadcast_mod/hypot/logical_* and _hypot: OpCase rows and MXNet's values."""
import numpy as np
from hypothesis import strategies as st

import ffnumba.symbol as sym
from ffnumba.testing import OpCase, check_symbolic_backward, check_symbolic_forward
from test_broadcast import broadcast_pairs


def _mod_ref(a, b):
    return np.where(b == 0, 0.0, np.mod(a, np.where(b == 0, 1, b)))


REFS = {
    'broadcast_mod': (_mod_ref, 'mod'),
    'broadcast_hypot': (np.hypot, 'any'),
    'broadcast_logical_and': (lambda a, b: ((a != 0) & (b != 0)).astype(float), 'int'),
    'broadcast_logical_or': (lambda a, b: ((a != 0) | (b != 0)).astype(float), 'int'),
    'broadcast_logical_xor': (lambda a, b: ((a != 0) ^ (b != 0)).astype(float), 'int'),
}


def _draw(rng, shape, domain, side):
    if domain == 'int':
        return rng.integers(-1, 2, shape).astype(np.float64)
    if domain == 'mod':
        if side == 0:       # dividends off the multiples of the divisor (the jumps)
            return rng.uniform(-3, 3, shape)
        return rng.choice([-1, 1], shape) * rng.uniform(0.7, 1.3, shape) * 7.3
    return rng.uniform(-1, 1, shape)


class _Case(OpCase):
    shapes = [dict(lhs=(2, 3), rhs=(3,)), dict(lhs=(2, 1, 3), rhs=(4, 1)),
              dict(lhs=(3, 2), rhs=(3, 2))]
    fn = None
    domain = 'any'

    def cases(self):
        return st.tuples(st.just({}), broadcast_pairs().map(lambda ab: dict(lhs=ab[0], rhs=ab[1])))

    def inputs(self, rng, p, shapes):
        return {'lhs': _draw(rng, shapes['lhs'], self.domain, 0),
                'rhs': _draw(rng, shapes['rhs'], self.domain, 1)}

    def reference(self, p, lhs, rhs):
        return [type(self).fn(lhs, rhs)]


for _name, (_fn, _dom) in REFS.items():
    globals()['Test_' + _name] = type('Test_' + _name, (_Case,), dict(
        op=_name, fn=staticmethod(_fn), domain=_dom, nondifferentiable=_dom == 'int'))


class TestHypot(OpCase):
    op = '_hypot'
    shapes = [dict(lhs=(2, 3), rhs=(2, 3)), dict(lhs=(4,), rhs=(4,))]

    def reference(self, p, lhs, rhs):
        return [np.hypot(lhs, rhs)]


def test_mod_sign_semantics_match_mxnet():
    # MXNet 1.9.1: broadcast_mod([5,-5,5,-5,5.5], [3,3,-3,-3,0]) = [2, 1, -1, -2, 0]
    a, b = sym.Variable('a'), sym.Variable('b')
    loc = {'a': np.array([5., -5, 5, -5, 5.5]), 'b': np.array([3., 3, -3, -3, 0])}
    for s in (sym.broadcast_mod(a, b), sym._mod(a, b)):
        check_symbolic_forward(s, loc, [np.array([2., 1, -1, -2, 0])])
    check_symbolic_forward(sym._mod_scalar(a, scalar=3), {'a': np.array([5., -5, 5.5])},
                           [np.array([2., 1, 2.5])])
    check_symbolic_forward(sym._rmod_scalar(a, scalar=5), {'a': np.array([3., -3, 0])},
                           [np.array([2., -1, 0])])
    # d/db (a mod b) = -floor(a / b)
    check_symbolic_backward(sym.broadcast_mod(a, b), {'a': np.array([[5.], [-5.]]),
                                                      'b': np.array([3., -3.])},
                            [np.ones((2, 2))], {'a': np.array([[2.], [2.]]),
                                                'b': np.array([-1 + 2., 2 - 1.])})


def test_logical_ops_match_mxnet():
    a, b = sym.Variable('a'), sym.Variable('b')
    loc = {'a': np.array([[0., 1, 2]]), 'b': np.array([[0.], [3]])}
    check_symbolic_forward(sym.broadcast_logical_and(a, b), loc, [np.array([[0., 0, 0], [0, 1, 1]])])
    check_symbolic_forward(sym.broadcast_logical_xor(a, b), loc, [np.array([[0., 1, 1], [1, 0, 0]])])
    check_symbolic_forward(sym.broadcast_logical_or(a, b), loc, [np.array([[0., 1, 1], [1, 1, 1]])])


def test_hypot_alias_and_origin_gradient():
    a, b = sym.Variable('a'), sym.Variable('b')
    s = sym.hypot(a, b)
    assert s.tojson().count('"_hypot"') == 1
    check_symbolic_backward(s, {'a': np.array([3., 0]), 'b': np.array([4., 0])},
                            [np.ones(2)], {'a': np.array([0.6, 0]), 'b': np.array([0.8, 0])})


class TestHypotScalar(OpCase):
    op = '_hypot_scalar'
    params = [dict(scalar=3.0), dict(scalar=-0.5)]
    shapes = [dict(data=(2, 3)), dict(data=(4,))]

    def reference(self, p, data):
        return [np.hypot(data, p['scalar'])]


def test_hypot_with_a_number_matches_mxnet():
    # MXNet 1.9.1: mx.sym.hypot(x, 3) is _hypot_scalar; nd.hypot broadcasts two arrays
    import ffnumba as mx
    a = sym.Variable('a')
    for s in (sym.hypot(a, 3), sym.hypot(3, a)):
        assert s.tojson().count('"_hypot_scalar"') == 1
        check_symbolic_forward(s, {'a': np.array([4., 0])}, [np.array([5., 3])])
        check_symbolic_backward(s, {'a': np.array([4., 0])}, [np.ones(2)],
                                {'a': np.array([0.8, 0])})
    out = mx.nd.hypot(mx.nd.array([[3.], [6.]]), mx.nd.array([4., 8.]))
    np.testing.assert_allclose(out.asnumpy(), [[5, np.hypot(3, 8)], [np.hypot(6, 4), 10]],
                               rtol=1e-6)
    assert mx.nd.hypot(mx.nd.array([4.]), 3).asnumpy()[0] == 5
    assert sym.hypot(3, 4) == 5


def test_mod_exact_multiples_and_integer_gradients_match_mxnet():
    # 49 mod 49 is 0 even when the kernel's fast-math takes a / b as a * (1 / b); integer mod
    # has zero gradients (MXNet 1.9.1's mod_grad/mod_rgrad)
    import ffnumba as mx
    a = np.array([[49], [98], [-49], [50]])
    b = np.array([[49, -49, 7, 0]])
    want = np.where(b == 0, 0, np.mod(a, np.where(b == 0, 1, b)))
    for dt in ('int32', 'int64', 'float32', 'float64'):
        got = mx.nd.modulo(mx.nd.array(a, dtype=dt), mx.nd.array(b, dtype=dt))
        np.testing.assert_array_equal(got.asnumpy(), want)
    x, y = sym.Variable('a'), sym.Variable('b')
    s = sym.broadcast_mod(sym.cast(x, dtype='int32'), sym.cast(y, dtype='int32'))
    check_symbolic_backward(s, {'a': a.astype(float), 'b': b.astype(float)},
                            [np.ones((4, 4))], {'a': np.zeros((4, 1)), 'b': np.zeros((1, 4))})
    check_symbolic_backward(sym.broadcast_mod(x, y), {'a': np.array([[5.], [6.]]),
                                                      'b': np.array([3., 0.])},
                            [np.ones((2, 2))], {'a': np.array([[2.], [2.]]),
                                                'b': np.array([-3., -np.inf])})


def test_nd_logical_helpers_broadcast_and_take_numbers():
    import ffnumba as mx
    a, b = mx.nd.array([[0., 1, 2]]), mx.nd.array([[0.], [3]])
    np.testing.assert_array_equal(mx.nd.logical_and(a, b).asnumpy(), [[0, 0, 0], [0, 1, 1]])
    np.testing.assert_array_equal(mx.nd.logical_or(a, 0).asnumpy(), [[0, 1, 1]])
    np.testing.assert_array_equal(mx.nd.logical_xor(1, a).asnumpy(), [[1, 0, 0]])
    assert mx.nd.logical_and(1, 0) == 0.0
