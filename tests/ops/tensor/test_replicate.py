"""tile, repeat, broadcast_to/axis/like, reverse (flip), SwapAxis (swapaxes)."""
import json

import numpy as np
import pytest
from hypothesis import strategies as st

import ffnumba as ff
import ffnumba.symbol as sym
from ffnumba.base import ParamError, ShapeError
from ffnumba.testing import OpCase
from ffnumba.testing import strategies as fst


# ------------------------------------------------------------------------ tile
@st.composite
def tile_cases(draw):
    shape = draw(fst.shapes(min_dims=1, max_dims=3, max_side=3))
    reps = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=4)))
    return dict(reps=reps), dict(data=shape)


class TestTile(OpCase):
    op = 'tile'
    params = [dict(reps=(2,)), dict(reps=(2, 1, 3))]
    shapes = [dict(data=(3, 4)), dict(data=(2,))]

    def cases(self):
        return tile_cases()

    def reference(self, p, data):
        return [np.tile(data, p['reps'])]


def test_tile_shapes_match_mxnet():
    a = ff.nd.ones((3, 4))
    assert ff.nd.tile(a, reps=(2,)).shape == (3, 8)          # MXNet 1.9.1
    assert ff.nd.tile(a, reps=(2, 1, 1)).shape == (2, 3, 4)
    assert ff.nd.tile(a, reps=()).shape == (3, 4)
    assert ff.nd.tile(ff.nd.ones((0, 2)), reps=(2, 2)).shape == (0, 4)
    for bad in [(1, 2, -3), (1, 0, 3)]:                     # MXNet 1.9.1 rejects both
        with pytest.raises(ParamError, match='tile: `reps`'):
            ff.nd.tile(a, reps=bad)


# ---------------------------------------------------------------------- repeat
@st.composite
def repeat_cases(draw):
    shape = draw(fst.shapes(min_dims=1, max_dims=3, max_side=3))
    axis = draw(st.sampled_from([None] + list(range(-len(shape), len(shape)))))
    return dict(repeats=draw(st.integers(1, 3)), axis=axis), dict(data=shape)


class TestRepeat(OpCase):
    op = 'repeat'
    params = [dict(repeats=2), dict(repeats=3, axis=-1), dict(repeats=2, axis=0)]
    shapes = [dict(data=(2, 3))]

    def cases(self):
        return repeat_cases()

    def reference(self, p, data):
        return [np.repeat(data, p['repeats'], axis=p.get('axis'))]


def test_repeat_errors():
    with pytest.raises(ShapeError, match='rp.*axis'):
        sym.repeat(sym.Variable('d'), repeats=2, axis=2, name='rp').infer_shape(d=(2, 3))
    with pytest.raises(ParamError, match='repeats'):
        sym.repeat(sym.Variable('d'), repeats=-1)


# ------------------------------------------------------------------- broadcast
@st.composite
def bto_cases(draw):
    out = draw(fst.shapes(min_dims=1, max_dims=3, max_side=3))
    d = tuple(n if draw(st.booleans()) else 1 for n in out)
    shape = tuple(0 if (a == b and draw(st.booleans())) else b for a, b in zip(d, out))
    return dict(shape=shape), dict(data=d)


class TestBroadcastTo(OpCase):
    op = 'broadcast_to'
    params = [dict(shape=(0, 4, 0))]
    shapes = [dict(data=(2, 1, 3))]
    max_batch = None

    def cases(self):
        return bto_cases()

    def reference(self, p, data):
        shape = tuple(n if s == 0 else s for n, s in zip(data.shape, p['shape']))
        return [np.broadcast_to(data, shape)]


class TestBroadcastAxis(OpCase):
    op = 'broadcast_axis'
    params = [dict(axis=(1, 2), size=(3, 4)), dict(axis=(0,), size=(2,))]
    shapes = [dict(data=(1, 1, 1))]
    max_batch = None

    def reference(self, p, data):
        shape = list(data.shape)
        for a, n in zip(p['axis'], p['size']):
            shape[a] = n
        return [np.broadcast_to(data, shape)]


class TestBroadcastAxesAlias(TestBroadcastAxis):
    op = 'broadcast_axes'
    params = [dict(axis=(-1,), size=(5,))]
    shapes = [dict(data=(2, 1))]


class TestBroadcastLike(OpCase):
    op = 'broadcast_like'
    params = [dict(), dict(lhs_axes=(0,), rhs_axes=(2,))]
    shapes = [dict(lhs=(1, 3), rhs=(4, 3))]
    grad_nodes = ['lhs']
    max_batch = None

    def inputs(self, rng, p, shapes):
        if p.get('rhs_axes'):
            shapes = dict(shapes, rhs=(2, 3, 4))
        return {n: rng.uniform(-1, 1, s) for n, s in shapes.items()}

    def _setup(self, p, given_shapes, seed=0):
        if p.get('rhs_axes'):
            given_shapes = dict(given_shapes, rhs=(2, 3, 4))
        return super()._setup(p, given_shapes, seed)

    def reference(self, p, lhs, rhs):
        if p.get('rhs_axes'):
            return [np.broadcast_to(lhs, (rhs.shape[2], lhs.shape[1]))]
        return [np.broadcast_to(lhs, rhs.shape)]


def test_broadcast_shapes_match_mxnet_and_errors():
    assert ff.nd.broadcast_like(ff.nd.ones((1, 3)), ff.nd.ones((4, 3, 5)), lhs_axes=(0,),
                                rhs_axes=(2,)).shape == (5, 3)          # MXNet 1.9.1
    assert ff.nd.broadcast_axes(ff.nd.ones((2, 1, 1)), axis=(1, 2), size=(3, 4)).shape == \
        (2, 3, 4)
    with pytest.raises(ShapeError, match='bt.*cannot broadcast'):
        sym.broadcast_to(sym.Variable('d'), shape=(4, 3), name='bt').infer_shape(d=(2, 3))
    with pytest.raises(ShapeError, match='as many axes'):
        sym.broadcast_to(sym.Variable('d'), shape=(4,)).infer_shape(d=(2, 3))
    with pytest.raises(ShapeError, match='must be 1'):
        sym.broadcast_axis(sym.Variable('d'), axis=0, size=3).infer_shape(d=(2, 3))
    with pytest.raises(ShapeError, match='twice'):                 # MXNet 1.9.1 rejects it too
        ff.nd.broadcast_axis(ff.nd.ones((1, 2)), axis=(0, 0), size=(3, 4))
    with pytest.raises(ParamError, match='same length'):
        sym.broadcast_axis(sym.Variable('d'), axis=(0, 1), size=(3,))
    assert ff.nd.broadcast_to(ff.nd.ones((0, 1)), shape=(0, 3)).shape == (0, 3)


# --------------------------------------------------------------------- reverse
@st.composite
def reverse_cases(draw):
    shape = draw(fst.shapes(min_dims=1, max_dims=3, max_side=3))
    axes = draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1, max_size=2))
    return dict(axis=tuple(axes)), dict(data=shape)


class TestReverse(OpCase):
    op = 'reverse'
    params = [dict(axis=(1,)), dict(axis=(0, -1))]
    shapes = [dict(data=(2, 3, 4))]

    def cases(self):
        return reverse_cases()

    def reference(self, p, data):
        out = data
        for a in p['axis']:          # MXNet 1.9.1: axis=(1, 1) reverses twice
            out = np.flip(out, a)
        return [out]


class TestFlipAlias(TestReverse):
    op = 'flip'
    params = [dict(axis=(0,))]


def test_flip_json_uses_mxnet_name():
    node = json.loads(sym.flip(sym.Variable('a'), axis=1).tojson())['nodes'][1]
    assert node['op'] == 'reverse' and node['attrs'] == {'axis': '1'}
    with pytest.raises(ShapeError, match='axis'):
        sym.flip(sym.Variable('a'), axis=2).infer_shape(a=(2, 3))
    x = ff.nd.array(np.arange(6).reshape(2, 3))
    assert ff.nd.reverse(x, axis=(1, 1)).asnumpy().tolist() == [[0, 1, 2], [3, 4, 5]]   # MXNet


# -------------------------------------------------------------------- SwapAxis
@st.composite
def swap_cases(draw):
    shape = draw(fst.shapes(min_dims=1, max_dims=4, max_side=3))
    n = len(shape)
    return (dict(dim1=draw(st.integers(-n, n - 1)), dim2=draw(st.integers(-n, n - 1))),
            dict(data=shape))


class TestSwapAxis(OpCase):
    op = 'SwapAxis'
    params = [dict(dim1=0, dim2=2), dict(dim1=1), dict(dim1=-1, dim2=1)]
    shapes = [dict(data=(2, 3, 4))]

    def cases(self):
        return swap_cases()

    def reference(self, p, data):
        return [np.swapaxes(data, p.get('dim1', 0), p.get('dim2', 0))]


class TestSwapaxesAlias(TestSwapAxis):
    op = 'swapaxes'
    params = [dict(dim1=0, dim2=1)]


def test_swapaxes_errors_and_json():
    with pytest.raises(ShapeError, match='dim2'):
        sym.swapaxes(sym.Variable('a'), dim1=0, dim2=3).infer_shape(a=(2, 3))
    s = sym.swapaxes(sym.Variable('a'), dim1=1)
    assert json.loads(s.tojson())['nodes'][1]['op'] == 'SwapAxis'
    assert sym.load_json(s.tojson()).infer_shape(a=(2, 3))[1] == [(3, 2)]
