"""take, pick, batch_take, one_hot: OpCase tables, MXNet 1.9.1 values, index dtypes, errors."""
import json

import numpy as np
import pytest
from hypothesis import strategies as st

import ffnumba as ff
import ffnumba.symbol as sym
from ffnumba.base import ParamError, ShapeError
from ffnumba.testing import OpCase
from ffnumba.testing import strategies as fst


def _fix(j, n, mode):
    j = np.trunc(j).astype(np.int64)
    return np.mod(j, n) if mode == 'wrap' else np.clip(j, 0, n - 1)


# ------------------------------------------------------------------------ take
@st.composite
def take_cases(draw):
    shape = draw(fst.shapes(min_dims=1, max_dims=3, max_side=4))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    idx = draw(fst.shapes(min_dims=1, max_dims=2, max_side=3))
    mode = draw(st.sampled_from(['clip', 'wrap']))
    return dict(axis=axis, mode=mode), dict(a=shape, indices=idx)


class TestTake(OpCase):
    op = 'take'
    params = [dict(), dict(axis=1, mode='wrap'), dict(axis=-1, mode='clip')]
    shapes = [dict(a=(3, 4), indices=(2, 2)), dict(a=(3, 4, 2), indices=(5,))]
    grad_nodes = ['a']

    def cases(self):
        return take_cases()

    def inputs(self, rng, p, shapes):
        # out-of-range and negative float indices, repeated ones (gradient sums)
        n = shapes['a'][p.get('axis', 0)]
        return dict(a=rng.uniform(-1, 1, shapes['a']),
                    indices=rng.integers(-n - 2, 2 * n + 2, shapes['indices']).astype(float)
                    + rng.choice([0.0, 0.4], shapes['indices']))

    def reference(self, p, a, indices):
        axis = p.get('axis', 0)
        j = _fix(indices, a.shape[axis], p.get('mode', 'clip'))
        return [np.take(a, j, axis=axis)]


class TestTakeRaise(TestTake):
    params = [dict(mode='raise'), dict(mode='raise', axis=1)]

    def cases(self):
        return take_cases().map(lambda c: (dict(c[0], mode='raise'), c[1]))

    def inputs(self, rng, p, shapes):
        n = shapes['a'][p.get('axis', 0)]
        return dict(a=rng.uniform(-1, 1, shapes['a']),
                    indices=rng.integers(0, n, shapes['indices']).astype(float))


def test_take_matches_mxnet():
    a = ff.nd.array(np.arange(12).reshape(3, 4))
    idx = ff.nd.array([-1, 5])
    # MXNet 1.9.1 results
    assert ff.nd.take(a, idx).asnumpy().tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]
    assert ff.nd.take(a, idx, mode='wrap').asnumpy().tolist() == [[8, 9, 10, 11]] * 2
    x = ff.nd.array(np.arange(6).reshape(2, 3))
    assert ff.nd.take(x, ff.nd.array([-1.5]), mode='wrap').asnumpy().tolist() == [[3, 4, 5]]
    assert ff.nd.take(a, ff.nd.array([[0, 1], [3, 9]]), axis=1).shape == (3, 2, 2)
    out = ff.nd.take(a, ff.nd.array([1, 2], dtype='int32'))
    assert out.dtype == np.float32 and out.asnumpy().tolist() == [[4, 5, 6, 7], [8, 9, 10, 11]]


def test_take_raise_and_nan_errors():
    a = ff.nd.array(np.arange(12).reshape(3, 4))
    with pytest.raises(ParamError, match=r'take.*index 5.0.*axis 0 of size 3'):
        ff.nd.take(a, ff.nd.array([0, 5]), mode='raise')
    with pytest.raises(ParamError, match='take.*NaN'):
        ff.nd.take(a, ff.nd.array([0, np.nan]))
    with pytest.raises(ShapeError, match='take.*axis'):
        sym.take(sym.Variable('a'), sym.Variable('i'), axis=2).infer_shape(a=(3, 4), i=(2,))
    with pytest.raises(ParamError, match='mode'):
        sym.take(sym.Variable('a'), sym.Variable('i'), mode='nearest')


def test_take_zero_size_and_index_gradient():
    assert ff.nd.take(ff.nd.ones((3, 0)), ff.nd.array([0, 2])).shape == (2, 0)
    assert ff.nd.take(ff.nd.ones((3, 2)), ff.nd.zeros((0,))).shape == (0, 2)
    with pytest.raises(ShapeError, match='empty axis'):
        ff.nd.take(ff.nd.ones((0, 2)), ff.nd.array([0]))
    s = sym.take(sym.Variable('a'), sym.Variable('i'))
    exe = s.simple_bind(ff.cpu(), a=(3, 2), i=(2,))
    exe.arg_dict['a'][:] = np.arange(6).reshape(3, 2)
    exe.arg_dict['i'][:] = np.array([1, 1])
    exe.grad_dict['i'][:] = 7
    exe.forward(is_train=True)
    exe.backward(ff.nd.ones((2, 2)))
    assert exe.grad_dict['a'].asnumpy().tolist() == [[0, 0], [2, 2], [0, 0]]
    assert exe.grad_dict['i'].asnumpy().tolist() == [0, 0]
    assert json.loads(s.tojson())['nodes'][2]['op'] == 'take'


# ------------------------------------------------------------------------ pick
@st.composite
def pick_cases(draw):
    shape = draw(fst.shapes(min_dims=1, max_dims=3, max_side=4))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    a = axis % len(shape)
    keep = draw(st.booleans())
    idx = tuple(shape[:a]) + ((1,) if keep and draw(st.booleans()) else ()) + tuple(shape[a + 1:])
    p = dict(axis=axis, keepdims=keep, mode=draw(st.sampled_from(['clip', 'wrap'])))
    return p, dict(data=shape, index=idx or (1,))


class TestPick(OpCase):
    op = 'pick'
    params = [dict(), dict(axis=0, keepdims=True), dict(axis=1, mode='wrap')]
    shapes = [dict(data=(2, 3, 4), index=(2, 3))]
    grad_nodes = ['data']
    max_batch = None

    def cases(self):
        return pick_cases()

    def _setup(self, p, given_shapes, seed=0):
        d = given_shapes['data']
        a = p.get('axis', -1) % len(d)
        given_shapes = dict(given_shapes)
        if int(np.prod(given_shapes['index'])) != int(np.prod(d)) // d[a]:
            given_shapes['index'] = tuple(d[:a]) + tuple(d[a + 1:])
        return super()._setup(p, given_shapes, seed)

    def inputs(self, rng, p, shapes):
        n = shapes['data'][p.get('axis', -1)]
        return dict(data=rng.uniform(-1, 1, shapes['data']),
                    index=rng.integers(-n - 1, 2 * n, shapes['index']).astype(float))

    def reference(self, p, data, index):
        axis = p.get('axis', -1) % data.ndim
        j = _fix(index, data.shape[axis], p.get('mode', 'clip'))
        j = j.reshape(data.shape[:axis] + (1,) + data.shape[axis + 1:])
        out = np.take_along_axis(data, j, axis=axis)
        return [out if p.get('keepdims') else np.squeeze(out, axis)]


class TestChooseElementAlias(OpCase):
    op = 'choose_element_0index'
    shapes = [dict(data=(3, 4), index=(3,))]
    grad_nodes = ['data']
    batch_inputs = ('data', 'index')

    def inputs(self, rng, p, shapes):
        return dict(data=rng.uniform(-1, 1, shapes['data']),
                    index=rng.integers(0, 4, shapes['index']).astype(float))

    def reference(self, p, data, index):
        return [data[np.arange(len(index)), index.astype(int)]]


def test_pick_matches_mxnet_and_errors():
    a = ff.nd.array(np.arange(12).reshape(3, 4))
    idx = ff.nd.array([0, 5, -1])
    assert ff.nd.pick(a, idx, axis=1).asnumpy().tolist() == [0, 7, 8]          # MXNet 1.9.1
    assert ff.nd.pick(a, idx, axis=1, mode='wrap').asnumpy().tolist() == [0, 5, 11]
    assert ff.nd.pick(ff.nd.ones((2, 3)), ff.nd.array([0, 1]), keepdims=True).shape == (2, 1)
    with pytest.raises(ShapeError, match='pk.*index'):
        sym.pick(sym.Variable('d'), sym.Variable('i'), name='pk').infer_shape(d=(2, 3), i=(3,))
    with pytest.raises(ShapeError, match='axis=None'):
        sym.pick(sym.Variable('d'), sym.Variable('i'), axis=None).infer_shape(d=(2, 3), i=(2,))
    with pytest.raises(ParamError, match='mode'):
        sym.pick(sym.Variable('d'), sym.Variable('i'), mode='raise')


# ------------------------------------------------------------------ batch_take
class TestBatchTake(OpCase):
    op = 'batch_take'
    shapes = [dict(a=(3, 4), indices=(3,)), dict(a=(5, 2), indices=(5,))]
    grad_nodes = ['a']
    batch_inputs = ('a', 'indices')

    def inputs(self, rng, p, shapes):
        m = shapes['a'][-1]
        return dict(a=rng.uniform(-1, 1, shapes['a']),
                    indices=rng.integers(-2, m + 2, shapes['indices']).astype(float))

    def reference(self, p, a, indices):
        j = _fix(indices, a.shape[1], 'clip')
        return [a[np.arange(a.shape[0]), j]]


def test_batch_take_matches_mxnet():
    a = ff.nd.array(np.arange(12).reshape(3, 4))
    # MXNet 1.9.1 (int32 indices there): [0, 7, 8]
    assert ff.nd.batch_take(a, ff.nd.array([0, 5, -1], dtype='int32')).asnumpy().tolist() == \
        [0, 7, 8]
    assert ff.nd.batch_take(a, ff.nd.array([0, 5, -1])).asnumpy().tolist() == [0, 7, 8]
    with pytest.raises(ShapeError, match='batch_take'):
        ff.nd.batch_take(a, ff.nd.array([0, 1]))
    # index dtypes as MXNet infers them: unknown batch_take indices are int32, other
    # ops' unknown indices take the data's dtype (MXNet leaves them to the float32 default)
    s = sym.batch_take(sym.Variable('a'), sym.Variable('i'))
    assert s.infer_type(a='float64')[0] == [np.float64, np.int32]
    s = sym.take(sym.Variable('a'), sym.Variable('i'))
    assert s.infer_type(a='float64', i='int32') == ([np.float64, np.int32], [np.float64], [])
    assert s.infer_type(a='float64')[0] == [np.float64, np.float64]


# --------------------------------------------------------------------- one_hot
class TestOneHot(OpCase):
    op = 'one_hot'
    params = [dict(depth=4), dict(depth=3, on_value=5, off_value=-1)]
    shapes = [dict(indices=(5,)), dict(indices=(2, 3))]
    dtypes = ('float32',)
    nondifferentiable = True

    def inputs(self, rng, p, shapes):
        d = p['depth']
        return dict(indices=rng.integers(-2, d + 2, shapes['indices']) + 0.5)

    def reference(self, p, indices):
        j = np.trunc(indices).astype(int)
        out = np.where(j[..., None] == np.arange(p['depth']), p.get('on_value', 1.0),
                       p.get('off_value', 0.0))
        return [out]


class TestOneHot64(TestOneHot):
    params = [dict(depth=4, dtype='float64')]
    dtypes = ('float64',)


def test_one_hot_matches_mxnet():
    got = ff.nd.one_hot(ff.nd.array([1, -1, 7, 2.7]), 4).asnumpy().tolist()
    assert got == [[0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 1, 0]]   # MXNet 1.9.1
    out = ff.nd.one_hot(ff.nd.array([1, 0]), 3, dtype='int32')
    assert out.dtype == np.int32 and out.asnumpy().tolist() == [[0, 1, 0], [1, 0, 0]]
    assert ff.nd.one_hot(ff.nd.array([[1, 2]]), 3, on_value=5, off_value=-1).asnumpy().tolist() \
        == [[[-1, 5, -1], [-1, -1, 5]]]
    assert ff.nd.one_hot(ff.nd.zeros((0,)), 3).shape == (0, 3)
    s = sym.one_hot(sym.Variable('i'), depth=3, dtype='int64')
    assert s.infer_type(i='float32')[1] == [np.int64]
    assert json.loads(s.tojson())['nodes'][1]['attrs'] == {'depth': '3', 'dtype': 'int64'}
    with pytest.raises(ParamError, match='depth'):
        sym.one_hot(sym.Variable('i'))
