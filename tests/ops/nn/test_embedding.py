"""Embedding: lookups, index clipping, scatter-add gradients, inference, MXNet golden."""
import json

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba.symbol as sym
from ffnumba import ndarray as nd
from ffnumba.base import ParamError, ShapeError
from ffnumba.ops.registry import get_op
from ffnumba.testing import OpCase, assert_almost_equal, bind_numpy

from golden import load_golden


def embed_ref(data, weight):
    idx = np.clip(np.trunc(data).astype(np.int64), 0, weight.shape[0] - 1)
    return weight[idx]


class TestEmbedding(OpCase):
    op = 'Embedding'
    params = [dict(input_dim=5, output_dim=3), dict(input_dim=2, output_dim=1)]
    shapes = [dict(data=(4,)), dict(data=(2, 3))]
    grad_nodes = ['weight']

    def inputs(self, rng, p, shapes):
        # integer-valued float indices with repeats (the gradient must add them up)
        return {'data': rng.integers(0, p['input_dim'], shapes['data']).astype(np.float64)}

    def reference(self, p, data, weight):
        return [embed_ref(data, weight)]


def _bind(idx, weight, grad_req='write', **p):
    s = sym.Embedding(sym.Variable('data'), name='emb', **p)
    return bind_numpy(s, {'data': idx, 'emb_weight': weight}, grad_req=grad_req)


def test_clipping_and_truncation():
    w = np.arange(8.0).reshape(4, 2)
    idx = np.array([1.7, -1, 100, 2.5, -0.5, 3.99])
    exe = _bind(idx, w, grad_req='null', input_dim=4, output_dim=2)
    exe.forward()
    assert_almost_equal(exe.outputs[0].asnumpy(), w[[1, 0, 3, 2, 0, 3]], 0, 0)


def test_scatter_add_and_no_data_gradient():
    w = np.zeros((3, 2))
    idx = np.array([[2.0, 0.0], [2.0, 2.0]])
    exe = _bind(idx, w, input_dim=3, output_dim=2)
    exe.forward(is_train=True)
    og = np.arange(8.0).reshape(2, 2, 2)
    exe.backward([nd.array(og, dtype='float64')])
    expect = np.zeros((3, 2))
    expect[2] = og[0, 0] + og[1, 0] + og[1, 1]
    expect[0] = og[0, 1]
    assert_almost_equal(exe.grad_dict['emb_weight'].asnumpy(), expect, 0, 0)
    assert_almost_equal(exe.grad_dict['data'].asnumpy(), np.zeros(idx.shape), 0, 0)


def test_integer_indices_and_dtype_param():
    s = sym.Embedding(sym.Variable('data'), input_dim=4, output_dim=2, dtype='float64', name='e')
    args, outs, _ = s.infer_type(data='int32')
    assert [np.dtype(t) for t in args] == [np.int32, np.float64] and np.dtype(outs[0]) == np.float64
    w = np.arange(8.0).reshape(4, 2)
    exe = bind_numpy(s, {'data': np.array([3, 0, 9], dtype=np.int32), 'e_weight': w},
                     grad_req='null')
    exe.forward()
    assert exe.outputs[0].dtype == np.float64
    assert_almost_equal(exe.outputs[0].asnumpy(), w[[3, 0, 3]], 0, 0)


def test_bad_params():
    with pytest.raises(ParamError) as e:
        get_op('Embedding').parse_params(dict(input_dim=0, output_dim=3))
    assert str(e.value) == 'Embedding: `input_dim` must be an int >= 1. Received: input_dim=0'
    with pytest.raises(ParamError, match='Embedding: required parameter `output_dim`'):
        get_op('Embedding').parse_params(dict(input_dim=3))
    get_op('Embedding').parse_params(dict(input_dim=3, output_dim=2, sparse_grad=True))


@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
       vocab=st.integers(1, 9), dim=st.integers(1, 6))
def test_infer_shape_property(shape, vocab, dim):
    s = sym.Embedding(sym.Variable('data'), input_dim=vocab, output_dim=dim, name='e')
    args, outs, _ = s.infer_shape(data=tuple(shape))
    assert args == [tuple(shape), (vocab, dim)] and outs == [tuple(shape) + (dim,)]
    with pytest.raises(ShapeError, match='Error in operator e'):
        s.infer_shape(data=tuple(shape), e_weight=(vocab + 1, dim))


def test_golden_mxnet():
    c = load_golden('embedding')['clip']
    p = json.loads(str(c['params']))
    p.pop('is_train')
    exe = bind_numpy(sym.Embedding(sym.Variable('data'), name='op', **p),
                     {'data': c['arg_data'], 'op_weight': c['arg_op_weight']},
                     grad_req={'op_weight': 'write'})
    exe.forward(is_train=True)
    assert_almost_equal(exe.outputs[0].asnumpy(), c['out0'], 0, 0)
    exe.backward([nd.array(c['head0'])])
    assert_almost_equal(exe.grad_dict['op_weight'].asnumpy(), c['grad_op_weight'], 1e-6, 1e-6)
