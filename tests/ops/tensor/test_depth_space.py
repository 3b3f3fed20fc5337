"""depth_to_space / space_to_depth: OpCase rows against numpy reshapes, round trip, errors."""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba.base import ParamError, ShapeError
from ffnumba.testing import OpCase


def _d2s(x, b):
    n, c, h, w = x.shape
    t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    return t.reshape(n, c // (b * b), h * b, w * b)


def _s2d(x, b):
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


class TestDepthToSpace(OpCase):
    op = 'depth_to_space'
    params = [dict(block_size=2), dict(block_size=1)]
    shapes = [dict(data=(2, 8, 2, 3)), dict(data=(1, 4, 1, 1))]

    def reference(self, p, data):
        return [_d2s(data, p['block_size'])]


class TestSpaceToDepth(OpCase):
    op = 'space_to_depth'
    params = [dict(block_size=2)]
    shapes = [dict(data=(2, 3, 4, 2)), dict(data=(1, 1, 2, 6))]

    def reference(self, p, data):
        return [_s2d(data, p['block_size'])]


def test_round_trip_and_block_three():
    x = np.arange(2 * 18 * 2 * 1, dtype=np.float32).reshape(2, 18, 2, 1)
    y = ff.nd.depth_to_space(ff.nd.array(x), 3)
    np.testing.assert_array_equal(y.asnumpy(), _d2s(x, 3))
    np.testing.assert_array_equal(ff.nd.space_to_depth(y, block_size=3).asnumpy(), x)


def test_errors():
    with pytest.raises(ShapeError, match='divisible'):
        ff.nd.depth_to_space(ff.nd.zeros((1, 3, 2, 2)), 2)
    with pytest.raises(ShapeError, match='zero dimension'):
        ff.nd.depth_to_space(ff.nd.zeros((1, 4, 0, 3)), 2)
    with pytest.raises(ParamError, match='block_size'):
        ff.nd.depth_to_space(ff.nd.zeros((1, 4, 2, 2)), 0)
    with pytest.raises(ShapeError, match='divisible'):
        ff.nd.space_to_depth(ff.nd.zeros((1, 1, 3, 2)), 2)
    with pytest.raises(ShapeError, match='4-D'):
        ff.nd.space_to_depth(ff.nd.zeros((4, 2)), 2)
