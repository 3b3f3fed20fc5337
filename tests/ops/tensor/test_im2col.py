"""im2col / col2im: OpCase rows against a numpy patch loop, convolution identity, adjointness."""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba.base import ParamError, ShapeError
from ffnumba.testing import OpCase


def _np_im2col(x, kernel, stride=None, dilate=None, pad=None):
    k = len(kernel)
    stride, dilate, pad = stride or (1,) * k, dilate or (1,) * k, pad or (0,) * k
    if k == 1:
        x, kernel, stride, dilate, pad = (x[:, :, None], (1,) + tuple(kernel), (1,) + stride,
                                          (1,) + dilate, (0,) + pad)
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dilate[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    ow = (w + 2 * pad[1] - dilate[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    out = np.zeros((n, c, kernel[0], kernel[1], oh, ow))
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            y0, x0 = i * dilate[0], j * dilate[1]
            out[:, :, i, j] = xp[:, :, y0:y0 + stride[0] * oh:stride[0],
                                 x0:x0 + stride[1] * ow:stride[1]][:, :, :oh, :ow]
    return out.reshape(n, c * kernel[0] * kernel[1], oh * ow)


class TestIm2col(OpCase):
    op = 'im2col'
    params = [dict(kernel=(2, 2)), dict(kernel=(3, 2), stride=(2, 1), dilate=(1, 2), pad=(1, 1)),
              dict(kernel=(3,), pad=(1,))]
    shapes = [dict(data=(2, 2, 4, 5))]
    max_batch = None

    def cases(self):
        import hypothesis.strategies as st
        return st.sampled_from(self._all_cases())

    def _all_cases(self):
        return [(p, dict(data=(2, 2, 5) if len(p['kernel']) == 1 else (2, 2, 4, 5)))
                for p in self.params]

    def reference(self, p, data):
        return [_np_im2col(data, p['kernel'], p.get('stride'), p.get('dilate'), p.get('pad'))]


class TestCol2im(OpCase):
    op = 'col2im'
    params = [dict(kernel=(2, 2), output_size=(3, 4)),
              dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), output_size=(4, 5))]
    max_batch = None

    def cases(self):
        import hypothesis.strategies as st
        return st.sampled_from(self._all_cases())

    def _all_cases(self):
        out = []
        for p in self.params:
            cols = _np_im2col(np.zeros((1, 2) + p['output_size']), p['kernel'], p.get('stride'),
                              p.get('dilate'), p.get('pad'))
            out.append((p, dict(data=(2,) + cols.shape[1:])))
        return out

    def reference(self, p, data):
        # col2im is the adjoint of im2col: build it column by column from the numpy im2col
        n, rows, l = data.shape
        c = rows // (p['kernel'][0] * p['kernel'][1])
        size = c * int(np.prod(p['output_size']))
        basis = np.eye(size).reshape((size, 1, c) + p['output_size'])
        mat = np.stack([_np_im2col(b, p['kernel'], p.get('stride'), p.get('dilate'),
                                   p.get('pad')).reshape(-1) for b in basis])
        return [(data.reshape(n, -1) @ mat.T).reshape((n, c) + p['output_size'])]


def test_convolution_through_im2col_and_reconstruction():
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(2, 3, 9, 7))
    w = rng.uniform(size=(4, 3, 3, 3))
    kw = dict(kernel=(3, 3), stride=(2, 2), dilate=(2, 2), pad=(1, 1))
    col = ff.nd.im2col(ff.nd.array(x, dtype='float64'), **kw).asnumpy()
    conv = ff.nd.Convolution(ff.nd.array(x, dtype='float64'), ff.nd.array(w, dtype='float64'),
                             num_filter=4, no_bias=True, **kw).asnumpy()
    np.testing.assert_allclose((w.reshape(4, -1) @ col).reshape(conv.shape), conv, rtol=1e-10)
    kw = dict(kernel=(3, 3), stride=(1, 1))
    im1 = ff.nd.col2im(ff.nd.im2col(ff.nd.array(x), **kw), (9, 7), **kw).asnumpy()
    ones = ff.nd.col2im(ff.nd.ones_like(ff.nd.im2col(ff.nd.array(x), **kw)), (9, 7), **kw)
    np.testing.assert_allclose(im1, ones.asnumpy() * x.astype(np.float32), rtol=1e-5)


def test_errors():
    with pytest.raises(ParamError, match='1 or 2'):
        ff.nd.im2col(ff.nd.zeros((1, 1, 2, 2, 2)), kernel=(1, 1, 1))
    with pytest.raises(ParamError, match='stride'):
        ff.nd.im2col(ff.nd.zeros((1, 1, 4, 4)), kernel=(2, 2), stride=(1,))
    with pytest.raises(ShapeError, match='does not fit'):
        ff.nd.im2col(ff.nd.zeros((1, 1, 2, 2)), kernel=(3, 3))
    with pytest.raises(ShapeError, match='col2im'):
        ff.nd.col2im(ff.nd.zeros((1, 5, 4)), output_size=(3, 3), kernel=(2, 2))
