"""Flatten: shapes, copy semantics, alias."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba.symbol as sym
from ffnumba.base import ShapeError
from ffnumba.ops.registry import get_op
from ffnumba.testing import OpCase


class TestFlatten(OpCase):
    op = 'Flatten'
    shapes = [dict(data=(2, 3, 4)), dict(data=(3,)), dict(data=(2, 1, 2, 2))]

    def reference(self, p, data):
        return [data.reshape(data.shape[0], -1)]


@given(shape=st.lists(st.integers(0, 5), min_size=1, max_size=5))
def test_infer_shape_property(shape):
    op = get_op('Flatten')
    ins, outs, _ = op.infer_shape(op.parse_params({}), [tuple(shape)], [], [None])
    assert outs[0] == (shape[0], int(np.prod(shape[1:])))


def test_scalar_input_rejected():
    op = get_op('Flatten')
    with pytest.raises(ShapeError, match='Flatten'):
        op.infer_shape(op.parse_params({}), [()], [], [None])


def test_alias_and_symbol():
    assert get_op('flatten') is get_op('Flatten')
    s = sym.flatten(sym.Variable('data'))
    _, outs, _ = s.infer_shape(data=(4, 2, 3))
    assert outs == [(4, 6)]
