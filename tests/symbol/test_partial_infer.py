"""Partial shapes (0 = unknown dimension) flow through operators, as MXNet's infer_shape."""
import ffnumba as mx


def _args(s, **kw):
    return dict(zip(s.list_arguments(), s.infer_shape(**kw)[0]))


def test_unknown_batch_solved_through_fully_connected():
    a = mx.sym.Variable('a', shape=(0, 10))
    d = mx.sym.FullyConnected(a, num_hidden=21, name='fc') + mx.sym.Variable('c', shape=(5, 0))
    shapes = _args(d)
    assert shapes == {'a': (5, 10), 'fc_weight': (21, 10), 'fc_bias': (21,), 'c': (5, 21)}


def test_unknown_spatial_solved_through_same_convolution():
    a = mx.sym.Variable('a', shape=(0, 10, 0, 0))
    conv = mx.sym.Convolution(a, num_filter=21, kernel=(3, 3), pad=(1, 1), name='conv')
    shapes = _args(conv + mx.sym.Variable('c', shape=(5, 21, 32, 32)))
    assert shapes['a'] == (5, 10, 32, 32)
    assert shapes['conv_weight'] == (21, 10, 3, 3)


def test_concat_of_partial_shapes():
    a, b = mx.sym.Variable('a', shape=(0, 10)), mx.sym.Variable('b', shape=(0, 5))
    cat = mx.sym.Concat(a, b, num_args=2, dim=1)
    assert cat.infer_shape_partial() == ([(0, 10), (0, 5)], [(0, 15)], [])
    shapes = _args(mx.sym.Variable('d', shape=(2, 0)) + cat)
    assert (shapes['a'], shapes['b'], shapes['d']) == ((2, 10), (2, 5), (2, 15))


def test_partial_weight_keeps_its_unknown_dimension():
    data = mx.sym.Variable('data', shape=(1, 0, 0, 0))
    weight = mx.sym.Variable('weight')
    conv = mx.sym.Convolution(mx.sym.cast(data, dtype='float16'),
                              weight=mx.sym.cast(weight, dtype='float16'), pad=(3, 3),
                              num_filter=64, stride=(2, 2), no_bias=True, kernel=(7, 7))
    args, outs, _ = conv.infer_shape_partial()
    assert args == [(1, 0, 0, 0), (64, 0, 7, 7)]
    assert outs == [(1, 64, 0, 0)]
    # a spatial size that stride 2 divides is not solved backwards (not an identity)
    assert conv.infer_shape() == (None, None, None)


def test_every_node_is_checked_once_its_inputs_are_known():
    import pytest
    v, x = mx.sym.Variable('V'), mx.sym.Variable('x')
    net = mx.sym.transpose(v, name='vt') + (x + v)    # V is (2, 3): (3, 2) + (2, 3) cannot add
    with pytest.raises(mx.base.ShapeError, match='vt: Shape inconsistent'):
        net.simple_bind(mx.cpu(), x=(2, 3), grad_req='null')
    with pytest.raises(mx.base.ShapeError):
        net.infer_shape(x=(2, 3))
    assert (mx.sym.transpose(v) + (x + v)).infer_shape(x=(3, 3))[1] == [(3, 3)]


def test_creation_ops_with_unknown_dimensions_take_them_from_consumers():
    import numpy as np
    for s1, s2 in (([2, 3], [-1, -1]), ([2, -1], [3, -1]), ([2, 0], [3, 0])):
        net = mx.sym.ones(shape=s1) + mx.sym.transpose(mx.sym.ones(shape=s2))
        out = net.bind(mx.cpu(), args={}).forward()[0]
        assert out.shape == (2, 3)
        np.testing.assert_array_equal(out.asnumpy(), 2)
    import pytest
    with pytest.raises(mx.base.ShapeError, match='cannot infer'):   # nothing says the size
        (mx.sym.ones(shape=[2, -1]) + mx.sym.ones(shape=[2, -1])).bind(mx.cpu(), args={})
