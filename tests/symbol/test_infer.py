"""Shape and type inference over graphs (both directions, hints, errors)."""
import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

import _sym_testops  # noqa: F401
import ffnumba.symbol as sym
from ffnumba.base import FFError, ShapeError, DTypeError
from ffnumba.name import NameManager


@pytest.fixture(autouse=True)
def _fresh_names():
    with NameManager():
        yield


def fc_net():
    x = sym.Variable('x')
    return sym.FullyConnected(x, num_hidden=3, name='fc1')


def test_forward_inference_fills_weights():
    arg, out, aux = fc_net().infer_shape(x=(2, 5))
    assert arg == [(2, 5), (3, 5), (3,)] and out == [(2, 3)] and aux == []


def test_positional_shapes():
    arg, out, _ = fc_net().infer_shape((2, 5))
    assert out == [(2, 3)]
    with pytest.raises(FFError, match='positional'):
        fc_net().infer_shape((2, 5), (3, 5), (3,), (1,))


def test_unknown_returns_none_with_warning():
    with pytest.warns(UserWarning, match='x: \\(\\)'):
        res = fc_net().infer_shape(fc1_weight=(3, 5))
    assert res == (None, None, None)


def test_partial_uses_empty_tuples():
    arg, out, aux = fc_net().infer_shape_partial(fc1_weight=(3, 5))
    assert arg[:2] == [(), (3, 5)] and out == [()] and aux == []
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        fc_net().infer_shape_partial()


def test_unknown_keyword_raises():
    with pytest.raises(FFError, match='foo not found'):
        fc_net().infer_shape(x=(2, 5), foo=(3,))


def test_conflict_names_operator_in_mxnet_words():
    with pytest.raises(ShapeError, match='^Error in operator fc1: .*inconsistent'):
        fc_net().infer_shape(x=(2, 5), fc1_weight=(4, 5))


def test_conflict_between_consumers():
    x, y = sym.Variable('x'), sym.Variable('y')
    net = sym.Group([sym._test_wmul(x, y, name='a'), sym._test_wmul(x, sym.Variable('z'),
                                                                      name='b')])
    with pytest.raises(ShapeError, match='Error in operator'):
        net.infer_shape(y=(2, 3), z=(2, 4))


def test_symbol_add_does_not_broadcast():
    x, y = sym.Variable('x'), sym.Variable('y')
    with pytest.raises(ShapeError, match='Error in operator _plus0'):
        (x + y).infer_shape(x=(2, 5), y=(2, 4))
    assert (x + y).infer_shape(x=(2, 5))[0] == [(2, 5), (2, 5)]


def test_backward_inference_from_outputs():
    """An op that reads out_shapes lets a consumer's shape flow back to a free input."""
    x = sym.Variable('x')
    w = sym.Variable('w')
    first = sym._test_wmul(x, w, name='m')       # x unknown; w fixes nothing yet
    net = sym._test_wmul(first, sym.Variable('k'), name='n')
    arg, out, _ = net.infer_shape(k=(4, 2))
    assert arg == [(4, 2)] * 3 and out == [(4, 2)]


def test_shape_hint_attr_and_zero_dims():
    x = sym.Variable('x', shape=(2, 5))
    arg, out, _ = sym.FullyConnected(x, num_hidden=3).infer_shape()
    assert arg[0] == (2, 5) and out == [(2, 3)]
    y = sym.Variable('y', shape=(0, 5))     # 0 means unknown: kept partial, as MXNet
    assert sym.FullyConnected(y, num_hidden=3).infer_shape_partial()[0][0] == (0, 5)
    assert sym.FullyConnected(y, num_hidden=3).infer_shape(y=(0, 5)) == (None, None, None)


def test_aux_shapes():
    bn = sym.BatchNorm(sym.Variable('x'), name='bn')
    arg, out, aux = bn.infer_shape(x=(2, 3, 4))
    assert arg == [(2, 3, 4), (3,), (3,)] and aux == [(3,), (3,)] and out == [(2, 3, 4)]
    c = sym._test_count(sym.Variable('x'), name='c')
    assert c.infer_shape(x=(2,))[2] == [(1,)]


def test_multi_output_shapes_and_padded_types():
    t = sym._test_twoout(sym.Variable('x'))
    assert t.infer_shape(x=(3,))[1] == [(3,), (3,)]
    assert t.infer_type(x='float64')[1] == [np.float64, np.float64]


def test_infer_type_classes_and_defaults():
    arg, out, aux = fc_net().infer_type(x='float16')
    assert arg == [np.float16] * 3 and out == [np.float16]
    assert fc_net().infer_type(fc1_bias=np.float64)[0] == [np.float64] * 3
    with pytest.warns(UserWarning, match='Cannot decide type'):
        assert fc_net().infer_type() == (None, None, None)
    assert fc_net().infer_type_partial()[0] == [None, None, None]


def test_type_conflict():
    with pytest.raises(DTypeError, match='Error in operator fc1'):
        fc_net().infer_type(x='float16', fc1_weight='float32')


def test_dtype_hint():
    x = sym.Variable('x', dtype='float64')
    assert sym.FullyConnected(x, num_hidden=2).infer_type()[1] == [np.float64]


@given(n=st.integers(1, 5), k=st.integers(1, 6), h=st.integers(1, 4), depth=st.integers(1, 3))
def test_mlp_shapes_property(n, k, h, depth):
    with NameManager():
        s = sym.Variable('data')
        for i in range(depth):
            s = sym.FullyConnected(s, num_hidden=h + i, name='fc%d' % i)
            s = sym.Activation(s, act_type='tanh')
    arg, out, _ = s.infer_shape(data=(n, k))
    want = [(n, k)]
    prev = k
    for i in range(depth):
        want += [(h + i, prev), (h + i,)]
        prev = h + i
    assert arg == want and out == [(n, h + depth - 1)]
    # given only the first weight, the batch size stays unknown
    part = s.infer_shape_partial(fc0_weight=(h, k))[0]
    assert part[0] == () and part[1] == (h, k)
