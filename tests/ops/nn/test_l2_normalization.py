"""L2Normalization: OpCase rows per mode, MXNet's dimension rules and values."""
import json

import numpy as np
import pytest

import ffnumba.symbol as sym
from ffnumba import ndarray as nd
from ffnumba.base import ParamError, ShapeError
from ffnumba.ops.registry import get_op
from ffnumba.testing import OpCase

_AXES = {'instance': lambda nd_: tuple(range(1, nd_)), 'channel': lambda nd_: (1,),
         'spatial': lambda nd_: tuple(range(2, nd_))}


def _ref(p, data):
    axes = _AXES[p.get('mode', 'instance')](data.ndim)
    return data / np.sqrt((data ** 2).sum(axes, keepdims=True) + p.get('eps', 1e-10))


class TestL2Normalization(OpCase):
    op = 'L2Normalization'
    params = [{}, dict(mode='channel'), dict(mode='spatial', eps=1e-3)]
    shapes = [dict(data=(2, 3, 4)), dict(data=(3, 2, 2, 2))]

    def reference(self, p, data):
        return [_ref(p, data)]


def test_instance_mode_on_low_rank_and_hidden_norm_output():
    # MXNet 1.9.1: instance mode on (2,) normalises each element; node_row_ptr [0, 1, 3]
    np.testing.assert_allclose(nd.L2Normalization(nd.array([2.0, -3.0])).asnumpy(), [1, -1])
    np.testing.assert_allclose(nd.L2Normalization(nd.ones((2, 3))).asnumpy(),
                               np.full((2, 3), 0.57735026), rtol=1e-6)
    s = sym.L2Normalization(sym.Variable('a'))
    assert json.loads(s.tojson())['node_row_ptr'] == [0, 1, 3]


@pytest.mark.parametrize('mode', ['channel', 'spatial'])
def test_channel_and_spatial_need_3_dims(mode):
    with pytest.raises(ShapeError, match='ndim >= 3'):
        sym.L2Normalization(sym.Variable('a'), mode=mode).infer_shape(a=(2, 3))


def test_bad_params():
    with pytest.raises(ParamError, match='mode'):
        get_op('L2Normalization').parse_params(dict(mode='batch'))
    with pytest.raises(ParamError, match='eps'):
        get_op('L2Normalization').parse_params(dict(eps=float('inf')))
