"""argmax, argmin, argmax_channel, topk, sort, argsort."""
import json

import numpy as np
import pytest
from hypothesis import strategies as st

import ffnumba as ff
import ffnumba.symbol as sym
from ffnumba.base import ParamError, ShapeError
from ffnumba.testing import OpCase
from ffnumba.testing import strategies as fst


@st.composite
def axis_cases(draw, extra=None, allow_none=True):
    shape = draw(fst.shapes(min_dims=1, max_dims=3, max_side=4))
    choices = list(range(-len(shape), len(shape))) + ([None] if allow_none else [])
    p = dict(axis=draw(st.sampled_from(choices)))
    if extra:
        p.update(draw(extra(shape, p['axis'])))
    return p, dict(data=shape)


def _rows(data, axis):
    """Move ``axis`` last (None: flatten); returns (rows view, undo)."""
    if axis is None:
        return data.reshape(1, -1), None
    return np.moveaxis(data, axis, -1), axis


# ---------------------------------------------------------------------- argmax
class TestArgmax(OpCase):
    op = 'argmax'
    params = [dict(), dict(axis=1), dict(axis=-1, keepdims=True), dict(keepdims=True)]
    shapes = [dict(data=(2, 3, 4))]
    nondifferentiable = True

    def reference(self, p, data):
        axis, keep = p.get('axis'), p.get('keepdims', False)
        if axis is None:
            r = np.array([np.argmax(data)], float)
            return [r.reshape((1,) * data.ndim) if keep else r]
        return [np.argmax(data, axis=axis, keepdims=keep).astype(float)]


class TestArgmin(TestArgmax):
    op = 'argmin'

    def reference(self, p, data):
        return TestArgmax.reference(self, p, -data)


class TestArgmaxChannel(OpCase):
    op = 'argmax_channel'
    shapes = [dict(data=(2, 3)), dict(data=(2, 3, 4))]
    nondifferentiable = True

    def reference(self, p, data):
        return [np.argmax(data, axis=1).astype(float)]


def test_argmax_ties_dtype_and_errors():
    # MXNet 1.9.1: the first extreme index, in the input dtype
    assert ff.nd.argmax(ff.nd.array([[1, 3, 3]]), axis=1).asnumpy().tolist() == [1]
    assert ff.nd.argmin(ff.nd.array([[1, 1, 3]]), axis=1).asnumpy().tolist() == [0]
    assert ff.nd.argmax(ff.nd.ones((2, 3), dtype='float64'), axis=0).dtype == np.float64
    assert ff.nd.argmax(ff.nd.ones((2, 3, 4))).shape == (1,)
    with pytest.raises(ShapeError, match='am.*axis'):
        sym.argmax(sym.Variable('d'), axis=2, name='am').infer_shape(d=(2, 3))
    with pytest.raises(ShapeError, match='empty'):
        ff.nd.argmax(ff.nd.ones((2, 0)), axis=1)
    assert ff.nd.argmax(ff.nd.ones((0, 3)), axis=1).shape == (0,)
    s = sym.argmax(sym.Variable('d'), axis=1)
    exe = s.simple_bind(ff.cpu(), d=(2, 3))
    exe.grad_dict['d'][:] = 5
    exe.forward(is_train=True)
    exe.backward(ff.nd.ones((2,)))
    assert (exe.grad_dict['d'].asnumpy() == 0).all()       # not differentiable: zeros


# ------------------------------------------------------------------------ topk
def _topk_ref(p, data):
    axis = p.get('axis', -1)
    asc = p.get('is_ascend', False)
    ret = p.get('ret_typ', 'indices')
    rows, _ = _rows(data, axis)
    n = rows.shape[-1]
    k = p.get('k', 1)
    k = n if k < 1 else k
    order = np.argsort(rows if asc else -rows, axis=-1, kind='stable')[..., :k]
    vals = np.take_along_axis(rows, order, -1)
    if ret == 'mask':
        m = np.zeros_like(rows)
        np.put_along_axis(m, order, 1.0, -1)
        return [m.reshape(data.shape) if axis is None else np.moveaxis(m, -1, axis)]
    back = (lambda a: a.reshape(-1)) if axis is None else (lambda a: np.moveaxis(a, -1, axis))
    outs = {'value': [vals], 'indices': [order.astype(float)],
            'both': [vals, order.astype(float)]}[ret]
    return [back(o) for o in outs]


@st.composite
def topk_cases(draw, ret_typ):
    def extra(shape, axis):
        n = int(np.prod(shape)) if axis is None else shape[axis]
        return st.fixed_dictionaries(dict(k=st.integers(0, n), is_ascend=st.booleans()))
    p, s = draw(axis_cases(extra))
    p['ret_typ'] = ret_typ
    if ret_typ == 'both':
        p['dtype'] = 'float64'
    return p, s


class TestTopKValue(OpCase):
    op = 'topk'
    params = [dict(ret_typ='value', k=2), dict(ret_typ='value', k=0, axis=0, is_ascend=True),
              dict(ret_typ='value', k=3, axis=None)]
    shapes = [dict(data=(3, 4)), dict(data=(3, 4, 2))]
    max_batch = None

    def cases(self):
        return topk_cases('value')

    def reference(self, p, data):
        return _topk_ref(p, data)


class TestTopKBoth(TestTopKValue):
    params = [dict(ret_typ='both', k=2, dtype='float64')]
    dtypes = ('float64',)

    def cases(self):
        return topk_cases('both')


class TestTopKIndices(TestTopKValue):
    params = [dict(k=2), dict(k=3, is_ascend=True, axis=0), dict(k=2, axis=None)]
    dtypes = ('float32',)
    nondifferentiable = True


class TestTopKMask(TestTopKValue):
    params = [dict(k=2, ret_typ='mask'), dict(k=1, ret_typ='mask', axis=None, is_ascend=True)]
    nondifferentiable = True


def test_topk_matches_mxnet():
    a = ff.nd.array(np.arange(12).reshape(3, 4))
    # MXNet 1.9.1 results
    assert ff.nd.topk(a, k=2).asnumpy().tolist() == [[3, 2]] * 3
    v, i = ff.nd.topk(a, k=2, ret_typ='both')
    assert v.asnumpy().tolist() == [[3, 2], [7, 6], [11, 10]] and i.dtype == np.float32
    assert ff.nd.topk(a, k=2, ret_typ='mask').asnumpy().tolist() == [[0, 0, 1, 1]] * 3
    assert ff.nd.topk(a, axis=None, k=3).asnumpy().tolist() == [11, 10, 9]
    assert ff.nd.topk(a, k=0).shape == (3, 4)
    assert ff.nd.topk(ff.nd.array([[3, 1, 1, 2, 1]]), k=3).asnumpy().tolist() == [[0, 3, 1]]
    assert ff.nd.topk(a, k=1, dtype='int32').dtype == np.int32
    with pytest.raises(ShapeError, match='tk.*k=9'):
        sym.topk(sym.Variable('d'), k=9, name='tk').infer_shape(d=(3, 4))
    with pytest.raises(ParamError, match='ret_typ'):
        sym.topk(sym.Variable('d'), ret_typ='values')


def test_topk_json_outputs_like_mxnet():
    d = sym.Variable('a')
    # (ret_typ, node_row_ptr, list_outputs) from MXNet 1.9.1
    for kw, ptr, outs in [(dict(ret_typ='value'), [0, 1, 3], ['output0']),
                          (dict(ret_typ='both'), [0, 1, 3], ['output0', 'output1']),
                          (dict(), [0, 1, 2], ['output']),
                          (dict(ret_typ='mask'), [0, 1, 2], ['output'])]:
        s = sym.topk(d, name='t', **kw)
        assert json.loads(s.tojson())['node_row_ptr'] == ptr
        assert s.list_outputs() == ['t_' + o for o in outs]
        s2 = sym.load_json(s.tojson())
        assert s2.list_outputs() == s.list_outputs()
    assert json.loads(sym.sort(d).tojson())['node_row_ptr'] == [0, 1, 3]
    assert json.loads(sym.argsort(d).tojson())['node_row_ptr'] == [0, 1, 2]
    assert sym.topk(d, k=2, ret_typ='both').infer_type(a='float64')[1] == [np.float64, np.float32]


# ------------------------------------------------------------------ sort, argsort
class TestSort(OpCase):
    op = 'sort'
    params = [dict(), dict(axis=0, is_ascend=False), dict(axis=None)]
    shapes = [dict(data=(3, 4)), dict(data=(2, 3, 2))]
    max_batch = None

    def cases(self):
        return axis_cases(lambda s, a: st.fixed_dictionaries(dict(is_ascend=st.booleans())))

    def reference(self, p, data):
        return _topk_ref(dict(p, k=0, ret_typ='value', is_ascend=p.get('is_ascend', True)), data)


class TestArgsort(TestSort):
    op = 'argsort'
    dtypes = ('float32',)
    nondifferentiable = True

    def reference(self, p, data):
        return _topk_ref(dict(p, k=0, ret_typ='indices', is_ascend=p.get('is_ascend', True)),
                         data)


def test_sort_argsort_match_mxnet():
    x = ff.nd.array([[3, 1, 1, 2]])
    # MXNet 1.9.1: stable order on ties
    assert ff.nd.sort(x, is_ascend=False).asnumpy().tolist() == [[3, 2, 1, 1]]
    assert ff.nd.argsort(x, is_ascend=False).asnumpy().tolist() == [[0, 3, 1, 2]]
    assert ff.nd.argsort(ff.nd.array([[3, 1, 1, 2, 1]])).asnumpy().tolist() == [[1, 2, 4, 3, 0]]
    assert ff.nd.sort(ff.nd.array([[3, 1], [2, 1]]), axis=None).asnumpy().tolist() == [1, 1, 2, 3]
    assert ff.nd.argsort(x, dtype='int64').dtype == np.int64
    assert ff.nd.sort(ff.nd.ones((0, 3))).shape == (0, 3)


@pytest.mark.parametrize('asc', [False, True])
def test_topk_small_k_on_long_rows_with_ties(asc):
    # k much smaller than the row takes the partition path; ties keep index order
    rng = np.random.default_rng(11)
    a = rng.integers(0, 6, (3, 40)).astype(np.float64)
    for k in (1, 3, 9):
        ref = np.argsort(a if asc else -a, axis=1, kind='stable')[:, :k]
        x = ff.nd.array(a, dtype='float64')
        got = ff.nd.topk(x, k=k, is_ascend=asc).asnumpy()
        np.testing.assert_array_equal(got, ref)
        mask = np.zeros_like(a)
        np.put_along_axis(mask, ref, 1.0, 1)
        np.testing.assert_array_equal(ff.nd.topk(x, k=k, is_ascend=asc, ret_typ='mask').asnumpy(),
                                      mask)
        # the value gradient lands on the chosen elements
        s = sym.topk(sym.Variable('d'), k=k, is_ascend=asc, ret_typ='value')
        exe = s.simple_bind(ff.cpu(), d=a.shape, type_dict={'d': 'float64'})
        exe.arg_dict['d'][:] = a
        exe.forward(is_train=True)
        head = rng.standard_normal((3, k))
        exe.backward(ff.nd.array(head, dtype='float64'))
        expect = np.zeros_like(a)
        np.put_along_axis(expect, ref, head, 1)
        np.testing.assert_array_equal(exe.grad_dict['d'].asnumpy(), expect)
        np.testing.assert_array_equal(exe.outputs[0].asnumpy(), np.take_along_axis(a, ref, 1))
