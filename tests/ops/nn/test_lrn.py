"""LRN: table tests against a numpy reference, nsize checks, MXNet 1.9.1 goldens."""
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


def lrn_ref(x, nsize, alpha=1e-4, beta=0.75, knorm=2.0):
    """Plain numpy LRN over axis 1 with the window clipped at the edges."""
    c = x.shape[1]
    h = nsize // 2
    sq = x ** 2
    s = np.empty_like(x)
    for k in range(c):
        s[:, k] = sq[:, max(0, k - h):min(c, k + h + 1)].sum(axis=1)
    return x / (knorm + alpha / nsize * s) ** beta


class TestLRN(OpCase):
    op = 'LRN'
    params = [dict(nsize=3), dict(nsize=3, alpha=0.5, beta=0.75, knorm=1.5),
              dict(nsize=5, alpha=2.0, beta=0.6, knorm=1.0), dict(nsize=1, alpha=1.0)]
    shapes = [dict(data=(2, 5, 2, 2)), dict(data=(1, 3, 4)), dict(data=(2, 4))]

    def inputs(self, rng, p, shapes):
        return {'data': rng.uniform(-2, 2, shapes['data'])}

    def reference(self, p, data):
        return [lrn_ref(data, **p)]


def test_even_nsize_is_refused():
    with pytest.raises(ParamError) as e:
        get_op('LRN').parse_params(dict(nsize=4))
    assert str(e.value) == 'LRN: `nsize` must be an odd int >= 1. Received: nsize=4'
    with pytest.raises(ParamError, match='LRN: required parameter `nsize` is missing'):
        get_op('LRN').parse_params({})
    with pytest.raises(ParamError, match='LRN: `nsize` must be an int >= 1'):
        get_op('LRN').parse_params(dict(nsize=0))


@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4),
       nsize=st.sampled_from([1, 3, 5]))
def test_infer_shape_property(shape, nsize):
    s = sym.LRN(sym.Variable('data'), nsize=nsize, name='lrn')
    if len(shape) < 2:
        with pytest.raises(ShapeError, match='Error in operator lrn'):
            s.infer_shape(data=tuple(shape))
    else:
        args, outs, aux = s.infer_shape(data=tuple(shape))
        assert args == [tuple(shape)] and outs == [tuple(shape)] and aux == []


def test_hidden_output():
    op = get_op('LRN')
    p = op.parse_params(dict(nsize=3))
    assert op.list_outputs(p) == ['output'] and op.hidden_outputs(p) == 1


@pytest.mark.parametrize('case', sorted(load_golden('lrn')))
def test_golden_mxnet(case):
    c = load_golden('lrn')[case]
    p = json.loads(str(c['params']))
    is_train = p.pop('is_train')
    s = sym.LRN(sym.Variable('data'), name='op', **p)
    exe = bind_numpy(s, {'data': c['arg_data']})
    exe.forward(is_train=is_train)
    assert_almost_equal(exe.outputs[0].asnumpy(), c['out0'], 1e-5, 1e-6)
    exe.backward([nd.array(c['head0'])])
    assert_almost_equal(exe.grad_dict['data'].asnumpy(), c['grad_data'], 1e-4, 1e-5)
