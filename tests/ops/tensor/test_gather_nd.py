"""gather_nd: OpCase rows against numpy fancy indexing, negative indices, bound errors."""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba.base import ShapeError
from ffnumba.ops.tensor.gather_nd import GatherIndexError
from ffnumba.testing import OpCase


class TestGatherND(OpCase):
    op = 'gather_nd'
    shapes = [dict(data=(3, 4, 2), indices=(2, 5)), dict(data=(4, 3), indices=(1, 2, 2)),
              dict(data=(2, 3), indices=(2, 3))]
    grad_nodes = ['data']
    max_batch = None

    def inputs(self, rng, p, shapes):
        d, i = shapes['data'], shapes['indices']
        idx = np.stack([rng.integers(-d[a], d[a], i[1:]) for a in range(i[0])])
        return {'data': rng.standard_normal(d), 'indices': idx.astype(np.float64)}

    def reference(self, p, data, indices):
        return [data[tuple(indices.astype(np.int64))]]


def test_mxnet_examples_and_negative_wrap():
    data = ff.nd.array([[0, 1, 2], [3, 4, 5]])
    got = ff.nd.gather_nd(data, ff.nd.array([[1, 1, 0], [0, 1, 0]]))
    np.testing.assert_array_equal(got.asnumpy(), [3, 4, 0])
    a = ff.nd.gather_nd(data, ff.nd.array([[0, 1, -1], [0, 1, -2]]))
    b = ff.nd.gather_nd(data, ff.nd.array([[0, 1, 1], [0, 1, 1]]))
    np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    rows = ff.nd.gather_nd(data, ff.nd.array([[1, 0]]))
    np.testing.assert_array_equal(rows.asnumpy(), [[3, 4, 5], [0, 1, 2]])


def test_repeated_indices_add_in_the_gradient():
    x = ff.sym.Variable('x')
    s = ff.sym.gather_nd(x, ff.sym.Variable('i'))
    exe = s.bind(ff.cpu(), {'x': ff.nd.zeros((3,)), 'i': ff.nd.array([[2, 2, 0]])},
                 {'x': ff.nd.zeros((3,))}, grad_req={'x': 'write', 'i': 'null'})
    exe.forward(is_train=True)
    exe.backward(ff.nd.array([1.0, 2.0, 5.0]))
    np.testing.assert_array_equal(exe.grad_dict['x'].asnumpy(), [5.0, 0.0, 3.0])


def test_errors():
    data = ff.nd.array([[0, 1, 2], [3, 4, 5]])
    for bad in ([[0, 1, 0], [0, 1, 3]], [[0, 1, 0], [0, 1, -5]]):
        with pytest.raises(IndexError, match=r'outside \[-3, 3\)'):
            ff.nd.gather_nd(data, ff.nd.array(bad))
    with pytest.raises(GatherIndexError):
        ff.nd.gather_nd(data, ff.nd.array([[2]]))
    with pytest.raises(ShapeError, match='M <= data.ndim'):
        ff.nd.gather_nd(data, ff.nd.zeros((3, 1)))
