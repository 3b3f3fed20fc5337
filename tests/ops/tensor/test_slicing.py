"""slice (crop), slice_like, split_v2: OpCase tables, MXNet examples, errors, JSON round trips."""
import json

import numpy as np
import pytest
from hypothesis import strategies as st

import ffnumba as ff
import ffnumba.symbol as sym
from ffnumba.base import ParamError, ShapeError
from ffnumba.ops.registry import get_op
from ffnumba.testing import OpCase
from ffnumba.testing import strategies as fst


# ----------------------------------------------------------------------- slice
@st.composite
def slice_cases(draw):
    shape = draw(fst.shapes(min_dims=1, max_dims=3, max_side=4))
    k = draw(st.integers(1, len(shape)))
    begin, end, step = [], [], []
    for d in range(k):
        n = shape[d]
        s = draw(st.sampled_from([None, 1, 2, -1, -2]))
        idx = list(range(n))
        while True:
            b = draw(st.sampled_from([None] + list(range(-n, n))))
            e = draw(st.sampled_from([None] + list(range(-n - 1, n + 1))))
            if len(idx[slice(b, e, s)]):
                break
        begin.append(b)
        end.append(e)
        step.append(s)
    p = dict(begin=tuple(begin), end=tuple(end))
    if draw(st.booleans()):
        p['step'] = tuple(step)
    elif any(s not in (None, 1) for s in step):
        p['step'] = tuple(step)
    return p, dict(data=shape)


def _py_slice(p, data):
    step = p.get('step') or (None,) * len(p['begin'])
    return data[tuple(slice(b, e, s) for b, e, s in zip(p['begin'], p['end'], step))]


class TestSlice(OpCase):
    op = 'slice'
    params = [dict(begin=(None, 1), end=(None, None), step=(-1, 2)),
              dict(begin=(1,), end=(3,)), dict(begin=(0, -3), end=(2, -1))]
    shapes = [dict(data=(4, 5)), dict(data=(4, 5, 2))]
    max_batch = None

    def cases(self):
        return slice_cases()

    def reference(self, p, data):
        return [_py_slice(p, data)]


class TestCropAlias(TestSlice):
    op = 'crop'
    params = [dict(begin=(1,), end=(3,))]
    shapes = [dict(data=(4, 5))]


def test_slice_matches_mxnet_examples():
    # MXNet 1.9.1: nd.slice(arange(12).reshape(3, 4)... ) results
    x = ff.nd.array(np.arange(20).reshape(4, 5))
    got = ff.nd.slice(x, begin=(None, 1), end=(None, None), step=(-1, 2)).asnumpy()
    assert got.tolist() == [[16, 18], [11, 13], [6, 8], [1, 3]]
    assert ff.nd.slice(ff.nd.ones((4, 5, 6)), begin=(1,), end=(None,)).shape == (3, 5, 6)
    assert ff.nd.slice(ff.nd.ones((4, 5)), begin=(-1, None), end=(-3, None),
                       step=(-1, None)).shape == (2, 5)
    assert ff.nd.crop(x, begin=(1,), end=(3,)).shape == (2, 5)


def test_slice_json_round_trip_keeps_none_entries():
    s = sym.slice(sym.Variable('d'), begin=(0, None), end=(2, -1), step=(1, None), name='sl')
    node = json.loads(s.tojson())['nodes'][1]
    assert node['op'] == 'slice'
    assert node['attrs'] == {'begin': '(0, None)', 'end': '(2, -1)', 'step': '(1, None)'}
    s2 = sym.load_json(s.tojson())
    assert s2.infer_shape(d=(4, 5))[1] == [(2, 4)]
    # MXNet's own JSON strings parse the same
    p = get_op('slice').parse_params({'begin': '(0, None)', 'end': '(2, -1)', 'step': '()'})
    assert p.begin == (0, None) and p.end == (2, -1) and p.step == ()


@pytest.mark.parametrize('kw, err', [
    (dict(begin=(0,), end=(1, 2)), ParamError),
    (dict(begin=(0, 0), end=(1, 2), step=(1,)), ParamError),
    (dict(begin=(0,), end=(2,), step=(0,)), ParamError),
    (dict(begin=('a',), end=(2,)), ParamError),
])
def test_slice_bad_params(kw, err):
    with pytest.raises(err, match='slice'):
        sym.slice(sym.Variable('d'), **kw)


def test_slice_too_many_entries_names_op_and_shape():
    s = sym.slice(sym.Variable('d'), name='sl', begin=(0, 0, 0), end=(1, 1, 1))
    with pytest.raises(ShapeError) as e:
        s.infer_shape(d=(4, 5))
    assert 'sl' in str(e.value) and str((4, 5)) in str(e.value)


@pytest.mark.parametrize('kw, shape', [
    # MXNet 1.9.1 gives these shapes (empty ranges are size 0, out-of-range values clip)
    (dict(begin=(3,), end=(1,)), (0, 5)),
    (dict(begin=(10,), end=(12,)), (0, 5)),
    (dict(begin=(1,), end=(12,)), (3, 5)),
    (dict(begin=(-10,), end=(2,)), (2, 5)),
    (dict(begin=(10,), end=(None,), step=(-1,)), (4, 5)),
    (dict(begin=(None,), end=(-10,), step=(-1,)), (4, 5)),
])
def test_slice_clipping_matches_mxnet(kw, shape):
    x = ff.nd.array(np.arange(20).reshape(4, 5))
    out = ff.nd.slice(x, **kw)
    assert out.shape == shape
    step = kw.get('step', (None,))[0]
    np.testing.assert_array_equal(out.asnumpy(),
                                  x.asnumpy()[kw['begin'][0]:kw['end'][0]:step])


def test_slice_zero_size_axis():
    x = ff.nd.array(np.zeros((0, 3)))
    assert ff.nd.slice(x, begin=(None, 1), end=(None, 3)).shape == (0, 2)


# ------------------------------------------------------------------ slice_like
@st.composite
def slice_like_cases(draw):
    shape = draw(fst.shapes(min_dims=1, max_dims=3, max_side=4))
    like = tuple(draw(st.integers(1, n)) for n in shape)
    axes = draw(st.sampled_from([(), tuple(range(len(shape))), (-1,), (0,)]))
    return dict(axes=axes), dict(data=shape, shape_like=like)


class TestSliceLike(OpCase):
    op = 'slice_like'
    params = [dict(), dict(axes=(0, -1))]
    shapes = [dict(data=(4, 5, 6), shape_like=(2, 3, 4))]
    grad_nodes = ['data']
    max_batch = None

    def cases(self):
        return slice_like_cases()

    def reference(self, p, data, shape_like):
        axes = p.get('axes') or range(data.ndim)
        sl = [slice(None)] * data.ndim
        for a in axes:
            sl[a] = slice(0, shape_like.shape[a])
        return [data[tuple(sl)]]


def test_slice_like_errors():
    s = sym.slice_like(sym.Variable('a'), sym.Variable('b'), name='sk')
    with pytest.raises(ShapeError, match='sk.*longer'):
        s.infer_shape(a=(2, 3), b=(3, 3))
    with pytest.raises(ShapeError, match='as many axes'):
        s.infer_shape(a=(2, 3), b=(1,))


# -------------------------------------------------------------------- split_v2
@st.composite
def split_v2_cases(draw):
    shape = list(draw(fst.shapes(min_dims=1, max_dims=3, max_side=4)))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    if draw(st.booleans()):
        k = draw(st.integers(1, 3))
        shape[axis] = k * draw(st.integers(1, 2))
        return dict(indices_or_sections=k, axis=axis), dict(data=tuple(shape))
    n = shape[axis] = draw(st.integers(2, 5))
    pts = sorted(set(draw(st.lists(st.integers(1, n - 1), min_size=1, max_size=3))))
    return dict(indices_or_sections=tuple(pts), axis=axis), dict(data=tuple(shape))


def _np_split(p, data):
    return np.split(data, p['indices_or_sections'], axis=p.get('axis', 0))


class TestSplitV2(OpCase):
    op = 'split_v2'
    params = [dict(indices_or_sections=3), dict(indices_or_sections=(1, 3), axis=1)]
    shapes = [dict(data=(6, 4))]
    max_batch = None

    def cases(self):
        return split_v2_cases()

    def reference(self, p, data):
        return _np_split(p, data)


class TestSplitV2Squeeze(OpCase):
    op = '_split_v2'
    params = [dict(indices=(0, 1, 2), axis=-1, squeeze_axis=True)]
    shapes = [dict(data=(2, 3))]

    def reference(self, p, data):
        return [data[:, i] for i in range(3)]


def test_split_v2_json_matches_mxnet():
    s = sym.split_v2(sym.Variable('d'), indices_or_sections=(1, 3), axis=1)
    j = json.loads(s.tojson())
    node = j['nodes'][1]
    # MXNet 1.9.1: {"axis": "1", "indices": "[0, 1, 3]", "sections": "0", "squeeze_axis": "False"}
    assert node['op'] == '_split_v2'
    assert node['attrs'] == {'axis': '1', 'indices': '[0, 1, 3]', 'sections': '0',
                             'squeeze_axis': 'False'}
    assert j['node_row_ptr'] == [0, 1, 4]
    s2 = sym.load_json(s.tojson())
    assert s2.infer_shape(d=(2, 5))[1] == [(2, 1), (2, 2), (2, 2)]
    s3 = sym.split_v2(sym.Variable('d'), indices_or_sections=3)
    assert json.loads(s3.tojson())['nodes'][1]['attrs'] == {
        'axis': '0', 'indices': '[]', 'sections': '3', 'squeeze_axis': 'False'}


def test_split_v2_imperative_and_errors():
    x = ff.nd.array(np.arange(20).reshape(4, 5))
    parts = ff.nd.split_v2(x, (1, 3), axis=1)
    assert [q.shape for q in parts] == [(4, 1), (4, 2), (4, 2)]
    assert parts[2].asnumpy().tolist() == np.arange(20).reshape(4, 5)[:, 3:].tolist()
    with pytest.raises(ShapeError, match='equal'):
        ff.nd.split_v2(x, 3)
    with pytest.raises(ParamError, match='indices_or_sections'):
        sym.split_v2(sym.Variable('d'), indices_or_sections=0)
    with pytest.raises(ShapeError, match='increasing'):
        ff.nd.split_v2(x, (3, 1), axis=1)
