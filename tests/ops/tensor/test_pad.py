"""Pad (constant / edge / reflect) and MXNet's legacy Crop."""
import json

import numpy as np
import pytest
from hypothesis import strategies as st

import ffnumba as ff
import ffnumba.symbol as sym
from ffnumba.base import ParamError, ShapeError
from ffnumba.testing import OpCase


# ------------------------------------------------------------------------- Pad
@st.composite
def pad_cases(draw):
    nd = draw(st.sampled_from([4, 5]))
    shape = tuple(draw(st.integers(1, 2)) for _ in range(2)) + \
        tuple(draw(st.integers(2, 4)) for _ in range(nd - 2))
    mode = draw(st.sampled_from(['constant', 'edge', 'reflect']))
    pw = [0, 0, 0, 0]
    for n in shape[2:]:
        hi = n - 1 if mode == 'reflect' else 3
        pw += [draw(st.integers(0, hi)), draw(st.integers(0, hi))]
    p = dict(mode=mode, pad_width=tuple(pw))
    if mode == 'constant':
        p['constant_value'] = draw(st.sampled_from([0.0, -1.5]))
    return p, dict(data=shape)


def _np_pad(p, data):
    pw = p['pad_width']
    width = [(pw[2 * a], pw[2 * a + 1]) for a in range(data.ndim)]
    if p['mode'] == 'constant':
        return np.pad(data, width, mode='constant', constant_values=p.get('constant_value', 0))
    return np.pad(data, width, mode=p['mode'])


class TestPad(OpCase):
    op = 'Pad'
    params = [dict(mode='constant', pad_width=(0, 0, 0, 0, 2, 1, 1, 2), constant_value=-1),
              dict(mode='edge', pad_width=(0, 0, 0, 0, 2, 1, 1, 2)),
              dict(mode='reflect', pad_width=(0, 0, 0, 0, 2, 1, 1, 2))]
    shapes = [dict(data=(2, 1, 5, 6))]

    def cases(self):
        return pad_cases()

    def reference(self, p, data):
        return [_np_pad(p, data)]


class TestPad5D(TestPad):
    op = 'pad'
    params = [dict(mode='reflect', pad_width=(0, 0, 0, 0, 1, 1, 0, 2, 1, 0))]
    shapes = [dict(data=(1, 2, 3, 3, 2))]


def test_pad_reflect_matches_mxnet_values():
    # MXNet 1.9.1 nd.Pad(arange(60).reshape(2, 1, 5, 6), 'reflect', (0,0,0,0,2,1,1,2))[0, 0, 0]
    x = ff.nd.array(np.arange(60).reshape(2, 1, 5, 6))
    got = ff.nd.Pad(x, mode='reflect', pad_width=(0, 0, 0, 0, 2, 1, 1, 2)).asnumpy()[0, 0]
    assert got[0].tolist() == [13, 12, 13, 14, 15, 16, 17, 16, 15]
    got = ff.nd.pad(x, mode='edge', pad_width=(0, 0, 0, 0, 2, 1, 1, 2)).asnumpy()[0, 0]
    assert got[-1].tolist() == [24, 24, 25, 26, 27, 28, 29, 29, 29]


@pytest.mark.parametrize('shape, kw, match', [
    ((2, 3), dict(mode='constant', pad_width=(0, 0, 1, 1)), '4-D or 5-D'),
    ((2, 1, 5, 6), dict(mode='constant', pad_width=(1, 0, 0, 0, 2, 1, 1, 2)), 'first two'),
    ((2, 1, 5, 6), dict(mode='reflect', pad_width=(0, 0, 0, 0, 5, 1, 1, 2)), 'smaller'),
    ((2, 1, 5, 6), dict(mode='edge', pad_width=(0, 0, 0, 0, 1, 1)), '2 \\* ndim'),
])
def test_pad_errors_match_mxnet_rules(shape, kw, match):
    s = sym.Pad(sym.Variable('d'), name='pd', **kw)
    with pytest.raises(ShapeError, match='pd.*' + match):
        s.infer_shape(d=shape)


def test_pad_bad_mode_and_json():
    with pytest.raises(ParamError, match='mode'):
        sym.Pad(sym.Variable('d'), mode='wrap', pad_width=(0, 0, 0, 0, 1, 1, 1, 1))
    s = sym.Pad(sym.Variable('d'), mode='constant', pad_width=(0, 0, 0, 0, 1, 1, 1, 1),
                constant_value=2)
    node = json.loads(s.tojson())['nodes'][1]
    assert node['op'] == 'Pad' and node['attrs']['pad_width'] == '(0, 0, 0, 0, 1, 1, 1, 1)'
    assert sym.load_json(s.tojson()).infer_shape(d=(1, 1, 2, 2))[1] == [(1, 1, 4, 4)]


def test_pad_zero_size_batch():
    out = ff.nd.Pad(ff.nd.zeros((0, 1, 2, 2)), mode='edge', pad_width=(0, 0, 0, 0, 1, 1, 1, 1))
    assert out.shape == (0, 1, 4, 4)


# ------------------------------------------------------------------------ Crop
class TestCrop(OpCase):
    op = 'Crop'
    params = [dict(num_args=1, offset=(1, 2), h_w=(2, 3)),
              dict(num_args=1, h_w=(2, 3), center_crop=True)]
    shapes = [dict(arg0=(2, 1, 5, 6))]
    batch_inputs = ('arg0',)

    def reference(self, p, arg0):
        h, w = p['h_w']
        if p.get('center_crop'):
            y, x = (arg0.shape[2] - h) // 2, (arg0.shape[3] - w) // 2
        else:
            y, x = p['offset']
        return [arg0[:, :, y:y + h, x:x + w]]


class TestCropLike(OpCase):
    op = 'Crop'
    params = [dict(num_args=2), dict(num_args=2, center_crop=True)]
    shapes = [dict(arg0=(2, 2, 5, 6), arg1=(1, 1, 3, 4))]
    grad_nodes = ['arg0']
    batch_inputs = ('arg0',)

    def reference(self, p, arg0, arg1):
        h, w = arg1.shape[2:]
        y, x = ((arg0.shape[2] - h) // 2, (arg0.shape[3] - w) // 2) if p.get('center_crop') \
            else (0, 0)
        return [arg0[:, :, y:y + h, x:x + w]]


def test_crop_matches_mxnet():
    x = ff.nd.array(np.arange(60).reshape(2, 1, 5, 6))
    # MXNet 1.9.1 values
    assert ff.nd.Crop(x, num_args=1, offset=(1, 2), h_w=(2, 3)).asnumpy()[0, 0].tolist() == \
        [[8, 9, 10], [14, 15, 16]]
    assert ff.nd.Crop(x, num_args=1, h_w=(2, 3), center_crop=True).asnumpy()[0, 0].tolist() == \
        [[7, 8, 9], [13, 14, 15]]
    s = sym.Crop(sym.Variable('a'), sym.Variable('b'), num_args=2, center_crop=True)
    assert s.list_arguments() == ['a', 'b']
    assert s.infer_shape(a=(1, 2, 7, 8), b=(1, 1, 3, 4))[1] == [(1, 2, 3, 4)]


@pytest.mark.parametrize('shape, kw, match', [
    ((2, 5, 6), dict(num_args=1, h_w=(2, 2)), '4-D'),
    ((1, 1, 5, 6), dict(num_args=1, h_w=(6, 2)), 'fit'),
    ((1, 1, 5, 6), dict(num_args=1, h_w=(2, 2), offset=(4, 0)), 'exceeds'),
    ((1, 1, 5, 6), dict(num_args=1), 'positive'),
])
def test_crop_errors(shape, kw, match):
    s = sym.Crop(sym.Variable('d'), name='cr', **kw)
    with pytest.raises(ShapeError, match='cr.*' + match):
        s.infer_shape(d=shape)
