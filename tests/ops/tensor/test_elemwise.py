"""Elementwise binary and scalar ops: forward, gradients, shapes, MXNet edge cases."""
import numpy as np
import pytest

import ffnumba.symbol as sym
from ffnumba.base import ShapeError
from ffnumba.ops.registry import OpContext, get_op
from ffnumba.ops.tensor.elemwise import BINARY, COMPARE, SCALAR
from ffnumba.testing import OpCase, check_symbolic_backward

_BIN_REF = {
    'elemwise_add': np.add, 'elemwise_sub': np.subtract, 'elemwise_mul': np.multiply,
    'elemwise_div': np.divide, '_power': np.power, '_maximum': np.maximum,
    '_minimum': np.minimum, '_mod': np.mod,
}
_CMP_REF = {'_equal': np.equal, '_not_equal': np.not_equal, '_greater': np.greater,
            '_greater_equal': np.greater_equal, '_lesser': np.less, '_lesser_equal': np.less_equal}
_SCALAR_REF = {
    '_plus_scalar': lambda x, s: x + s, '_minus_scalar': lambda x, s: x - s,
    '_rminus_scalar': lambda x, s: s - x, '_mul_scalar': lambda x, s: x * s,
    '_div_scalar': lambda x, s: x / s, '_rdiv_scalar': lambda x, s: s / x,
    '_power_scalar': lambda x, s: x ** s, '_rpower_scalar': lambda x, s: s ** x,
    '_maximum_scalar': np.maximum, '_minimum_scalar': np.minimum,
    '_mod_scalar': np.mod, '_rmod_scalar': lambda x, s: np.mod(s, x),
}
_SHAPES = [dict(lhs=(2, 3)), dict(lhs=(4,))]


def _positive_pair(rng, p, shapes):
    # positive, separated operands: smooth for power/div, no ties for max/min/mod
    a = rng.uniform(0.5, 2.0, shapes['lhs'])
    return {'lhs': a, 'rhs': a + rng.choice([-0.3, 0.3], a.shape)}


def _make_binary_case(name, ref):
    attrs = dict(op=name, shapes=_SHAPES, params=[{}],
                 inputs=lambda self, rng, p, shapes: _positive_pair(rng, p, shapes),
                 reference=lambda self, p, lhs, rhs: [ref(lhs, rhs).astype(lhs.dtype)],
                 nondifferentiable=name in _CMP_REF)
    return type('Test_' + name, (OpCase,), attrs)


def _make_scalar_case(name, ref):
    attrs = dict(op=name, shapes=[dict(data=(2, 3)), dict(data=(5,))],
                 params=[dict(scalar=1.7), dict(scalar=0.6)],
                 inputs=lambda self, rng, p, shapes: {
                     'data': rng.uniform(0.4, 2.0, shapes['data'])},
                 reference=lambda self, p, data: [ref(data, p['scalar']).astype(data.dtype)],
                 nondifferentiable=name.replace('_scalar', '') in _CMP_REF)
    return type('Test_' + name, (OpCase,), attrs)


for _n, _r in list(_BIN_REF.items()) + list(_CMP_REF.items()):
    globals()['Test_' + _n] = _make_binary_case(_n, _r)
for _n, _r in list(_SCALAR_REF.items()) + [(k + '_scalar', v) for k, v in _CMP_REF.items()]:
    globals()['Test_' + _n] = _make_scalar_case(_n, _r)


def test_tables_are_covered():
    assert set(BINARY) == set(_BIN_REF)
    assert set(SCALAR) == set(_SCALAR_REF)
    assert set(COMPARE) == set(_CMP_REF)


def test_shape_mismatch_names_both_shapes():
    op = get_op('elemwise_add')
    with pytest.raises(ShapeError) as e:
        op.infer_shape(op.parse_params({}), [(2, 3), (3, 2)], [], [None])
    assert '(2, 3)' in str(e.value) and '(3, 2)' in str(e.value)
    with pytest.raises(ShapeError):
        (sym.Variable('a') + sym.Variable('b')).infer_shape(a=(2, 3), b=(2, 4))


def test_shape_inferred_from_either_side():
    s = sym.Variable('a') * sym.Variable('b')
    args, outs, _ = s.infer_shape(b=(3, 4))
    assert args == [(3, 4), (3, 4)] and outs == [(3, 4)]


def test_operator_overloads_reach_these_ops():
    x = sym.Variable('x')
    for expr in (x + 1, 1 - x, x / 2, 2 / x, x ** 2, 2 ** x, -x, x > 1, x == x, x % 3):
        _, outs, _ = expr.infer_shape(x=(2, 2))
        assert outs == [(2, 2)]


def test_mxnet_aliases():
    assert get_op('_Plus') is get_op('elemwise_add')
    assert get_op('_PlusScalar') is get_op('_plus_scalar')
    assert get_op('_RMinusScalar') is get_op('_rminus_scalar')
    assert get_op('_Maximum') is get_op('_maximum')


def _run(name, inputs, og, **kw):
    op = get_op(name)
    p = op.parse_params(kw)
    ctx = OpContext(True, None, {}, None, 'n')
    out = np.empty_like(inputs[0])
    op.forward['cpu'](ctx, p, inputs, [out], [])
    grads = [np.zeros_like(a) for a in inputs]
    op.backward['cpu'](ctx, p, [og], inputs, [out], grads, ['write'] * len(inputs), [])
    return out, grads


def test_mod_matches_mxnet():
    # numbers from MXNet 1.9.1 (autograd through _mod / _rmod_scalar)
    x = np.array([5.5, -5.5, 5.5, -5.5, 3.0, 0.7])
    y = np.array([2.0, 2.0, -2.0, -2.0, 0.0, 0.3])
    out, (gx, gy) = _run('_mod', [x, y], np.ones(6))
    np.testing.assert_allclose(out, [1.5, 0.5, -0.5, -1.5, 0.0, 0.1], atol=1e-12)
    np.testing.assert_array_equal(gx, np.ones(6))
    np.testing.assert_array_equal(gy, [-2.0, 3.0, 3.0, -2.0, -np.inf, -2.0])
    out, (gx,) = _run('_rmod_scalar', [x], np.ones(6), scalar=2.5)
    np.testing.assert_allclose(out, [2.5, -3.0, 2.5, -3.0, 2.5, 0.4], atol=1e-12)
    np.testing.assert_array_equal(gx, [0.0, 1.0, 0.0, 1.0, 0.0, -3.0])


def test_division_by_zero_is_ieee():
    out, (ga, gb) = _run('elemwise_div', [np.array([1.0, -1.0, 0.0]), np.zeros(3)], np.ones(3))
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2])
    out, _ = _run('_rdiv_scalar', [np.array([0.0])], np.ones(1), scalar=1.0)
    assert out[0] == np.inf


def test_max_min_ties_go_to_lhs():
    a = np.array([1.0, 2.0])
    _, (ga, gb) = _run('_maximum', [a, a.copy()], np.ones(2))
    np.testing.assert_array_equal(ga, [1, 1])
    np.testing.assert_array_equal(gb, [0, 0])
    _, (ga,) = _run('_maximum_scalar', [a], np.ones(2), scalar=2.0)
    np.testing.assert_array_equal(ga, [0, 1])


def test_comparisons_output_input_dtype_and_zero_grad():
    a = np.array([1.0, 2.0, 3.0], np.float32)
    out, (ga, gb) = _run('_greater', [a, np.full(3, 2.0, np.float32)], np.ones(3, np.float32))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [0, 0, 1])
    np.testing.assert_array_equal(ga, 0)
    np.testing.assert_array_equal(gb, 0)


def test_scalar_param_parsing():
    op = get_op('_plus_scalar')
    assert op.parse_params({'scalar': '2'}).scalar == 2.0
    assert op.parse_params({'scalar': '1', 'is_int': 'True'}).scalar == 1.0
    assert op.parse_params({}).scalar == 1.0


def test_known_backward_through_graph():
    a, b = sym.Variable('a'), sym.Variable('b')
    s = (a * b) / 2.0 - a
    va, vb = np.array([[1.0, 2.0]]), np.array([[3.0, -1.0]])
    og = np.array([[1.0, 1.0]])
    check_symbolic_backward(s, dict(a=va, b=vb), [og], dict(a=vb / 2 - 1, b=va / 2),
                            rtol=1e-12, atol=1e-12, dtype='float64')


def build_graph(S):
    """Same graph as ``tools/make_coreops_numbers.py::build_graph`` (keep in sync)."""
    d = S.Variable('data')
    a = S.FullyConnected(d, num_hidden=8, name='fc1')
    a = S.Activation(a, act_type='softrelu', name='act')
    a = S.Dropout(a, p=0.3, axes=(1,), name='drop')
    b = S.Flatten(a, name='fl')
    c = (b + 1) * 2 - b / 3 + (b ** 2) - (2 - b) + S.BlockGrad(b, name='bg') + (b > 0.5)
    c = S.elemwise_mul(c, 2 / b, name='em') % 3 + (1 ** b) + (-b)
    l1 = S.SoftmaxOutput(c, name='softmax', normalization='valid', use_ignore=True)
    l2 = S.LinearRegressionOutput(c, name='lin', grad_scale=0.5)
    l3 = S.MakeLoss(S.make_loss(c, name='ml0'), name='ml', normalization='batch')
    return S.Group([l1, l2, l3, S.stop_gradient(b)])


def test_graph_json_is_mxnets():
    """Auto names, hints, param strings and hidden outputs equal MXNet 1.9.1's JSON bytes."""
    import os
    from ffnumba.name import NameManager
    path = os.path.join(os.path.dirname(__file__), '..', '..', 'data', 'coreops_graph.json')
    with open(path) as f:
        expected = f.read()
    with NameManager():
        got = build_graph(sym).tojson()
    assert got == expected
    loaded = sym.load_json(expected)
    assert loaded.tojson() == expected
    _, outs, _ = loaded.infer_shape(data=(4, 5))
    assert outs == [(4, 8)] * 4
