"""diag: OpCase rows against numpy (diagonal of rank >= 2, matrix from a vector), errors."""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba.base import ShapeError
from ffnumba.testing import OpCase


class TestDiagExtract(OpCase):
    op = 'diag'
    params = [dict(), dict(k=1), dict(k=-1), dict(k=1, axis1=2, axis2=0)]
    shapes = [dict(data=(3, 4, 3)), dict(data=(4, 3, 2))]
    max_batch = None

    def reference(self, p, data):
        return [np.diagonal(data, p.get('k', 0), p.get('axis1', 0), p.get('axis2', 1))]


class TestDiagMatrix(OpCase):
    op = 'diag'
    params = [dict(), dict(k=2), dict(k=-1)]
    shapes = [dict(data=(3,)), dict(data=(1,))]
    max_batch = None

    def reference(self, p, data):
        return [np.diag(data, p.get('k', 0))]


def test_2d_main_uses_and_errors():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for k in (0, 1, -1, 3, -2):
        np.testing.assert_array_equal(ff.nd.diag(ff.nd.array(a), k=k).asnumpy(), np.diag(a, k))
    with pytest.raises(ShapeError, match='empty'):
        ff.nd.diag(ff.nd.array(a), k=5)
    with pytest.raises(ShapeError, match='differ'):
        ff.nd.diag(ff.nd.array(a), axis1=1, axis2=-1)
    with pytest.raises(ShapeError, match='out of range'):
        ff.nd.diag(ff.nd.array(a), axis2=2)
