"""UpSampling: nearest (1 or more inputs, concat/sum), bilinear, inference, MXNet goldens."""
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


def nearest_ref(p, *xs):
    oh = xs[0].shape[2] * p['scale']
    ups = [x.repeat(oh // x.shape[2], axis=2).repeat(oh // x.shape[2], axis=3) for x in xs]
    if p.get('multi_input_mode', 'concat') == 'sum':
        return sum(ups)
    return np.concatenate(ups, axis=1)


def bilinear_ref(data, weight, s):
    """Per-channel transposed convolution, stride s, pad ceil((s-1)/2), written out plainly."""
    n, c, h, w = data.shape
    k = weight.shape[2]
    pad = int(np.ceil((s - 1) / 2))
    full = np.zeros((n, c, (h - 1) * s + k, (w - 1) * s + k))
    for y in range(h):
        for x in range(w):
            full[:, :, y * s:y * s + k, x * s:x * s + k] += \
                data[:, :, y, x][:, :, None, None] * weight[None, :, 0]
    return full[:, :, pad:pad + h * s, pad:pad + w * s]


class TestNearest(OpCase):
    op = 'UpSampling'
    params = [dict(scale=2, sample_type='nearest'), dict(scale=3, sample_type='nearest')]
    shapes = [dict(arg0=(2, 3, 2, 1)), dict(arg0=(1, 1, 3, 3))]

    def reference(self, p, arg0):
        return [nearest_ref(p, arg0)]


class TestNearestTwoInputs(OpCase):
    op = 'UpSampling'
    params = [dict(scale=2, sample_type='nearest', num_args=2),
              dict(scale=2, sample_type='nearest', num_args=2, multi_input_mode='sum')]
    shapes = [dict(arg0=(2, 2, 2, 2), arg1=(2, 2, 1, 1)),
              dict(arg0=(1, 2, 1, 2), arg1=(1, 2, 2, 4))]

    def reference(self, p, arg0, arg1):
        return [nearest_ref(p, arg0, arg1)]


class TestBilinear(OpCase):
    op = 'UpSampling'
    params = [dict(scale=2, sample_type='bilinear', num_filter=2),
              dict(scale=3, sample_type='bilinear', num_filter=2)]
    shapes = [dict(data=(1, 2, 3, 2)), dict(data=(2, 2, 2, 2))]

    def reference(self, p, data, weight):
        return [bilinear_ref(data, weight, p['scale'])]


def test_declaration():
    up = sym.UpSampling(sym.Variable('a'), sym.Variable('b'), scale=2, sample_type='nearest',
                        num_args=2, name='up')
    assert up.list_arguments() == ['a', 'b']
    assert get_op('UpSampling').list_arguments(
        get_op('UpSampling').parse_params(dict(scale=2, sample_type='nearest', num_args=3))) \
        == ['arg0', 'arg1', 'arg2']
    b = sym.UpSampling(sym.Variable('data'), scale=2, sample_type='bilinear', num_filter=3,
                       name='up')
    assert b.list_arguments() == ['data', 'up_weight']
    assert b.infer_shape(data=(1, 3, 4, 4))[0][1] == (3, 1, 4, 4)


def test_bad_params():
    with pytest.raises(ParamError) as e:
        get_op('UpSampling').parse_params(dict(scale=2, sample_type='cubic'))
    assert str(e.value) == ("UpSampling: `sample_type` must be one of 'bilinear', 'nearest'. "
                            "Received: sample_type='cubic'")
    with pytest.raises(ParamError, match='UpSampling: `scale` must be an int >= 1'):
        get_op('UpSampling').parse_params(dict(scale=0, sample_type='nearest'))


def test_shape_errors():
    a, b = sym.Variable('a'), sym.Variable('b')
    with pytest.raises(ShapeError, match='Error in operator up: .*4-D'):
        sym.UpSampling(a, scale=2, sample_type='nearest', name='up').infer_shape(a=(2, 3, 4))
    two = sym.UpSampling(a, b, scale=2, sample_type='nearest', num_args=2, name='up')
    with pytest.raises(ShapeError, match='cannot be scaled'):
        two.infer_shape(a=(2, 3, 4, 4), b=(2, 3, 3, 3))
    summed = sym.UpSampling(a, b, scale=2, sample_type='nearest', num_args=2,
                            multi_input_mode='sum', name='up')
    with pytest.raises(ShapeError, match='equal channels'):
        summed.infer_shape(a=(1, 2, 2, 2), b=(1, 3, 2, 2))
    bil = sym.UpSampling(a, scale=2, sample_type='bilinear', num_filter=5, name='up')
    with pytest.raises(ShapeError, match='num_filter'):
        bil.infer_shape(a=(1, 3, 2, 2))


@given(shape=st.tuples(*[st.integers(1, 4)] * 4), scale=st.integers(1, 4))
def test_infer_shape_property(shape, scale):
    n, c, h, w = shape
    s = sym.UpSampling(sym.Variable('data'), scale=scale, sample_type='nearest', name='up')
    assert s.infer_shape(data=shape)[1] == [(n, c, h * scale, w * scale)]
    k = 2 * scale - scale % 2
    b = sym.UpSampling(sym.Variable('data'), scale=scale, sample_type='bilinear', name='up')
    args, outs, _ = b.infer_shape(data=shape)
    assert args[1] == (c, 1, k, k) and outs == [(n, c, h * scale, w * scale)]


@pytest.mark.parametrize('case', sorted(load_golden('upsampling')))
def test_golden_mxnet(case):
    c = load_golden('upsampling')[case]
    p = json.loads(str(c['params']))
    is_train = p.pop('is_train')
    names = [k[4:] for k in c if k.startswith('arg_')]
    s = sym.UpSampling(*[sym.Variable(n) for n in names], name='op', **p)
    exe = bind_numpy(s, {n: c['arg_' + n] for n in names})
    exe.forward(is_train=is_train)
    assert_almost_equal(exe.outputs[0].asnumpy(), c['out0'], 1e-5, 1e-6)
    exe.backward([nd.array(c['head0'])])
    for n in names:
        assert_almost_equal(exe.grad_dict[n].asnumpy(), c['grad_' + n], 1e-5, 1e-5,
                            names=('grad ' + n, 'mxnet'))
