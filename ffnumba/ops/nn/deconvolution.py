"""Deconvolution: the transposed convolution (gradient of Convolution w.r.t. its data).

Math
----
With ``G`` groups, ``Cg = C / G`` input and ``Fg = F / G`` output channels
per group, every input pixel scatters a weighted copy of its filter::

    out[n, g*Fg + f, o] = bias[g*Fg + f]
        + sum_{c < Cg, i, k : o = i*s - p + k*d} weight[g*Cg + c, f, k] * data[n, g*Cg + c, i]

so the forward pass is Convolution's backward-data and the backward-data is
Convolution's forward (same weight). Per spatial dim the output size is::

    o = s (i - 1) + d (k - 1) + 1 - 2 p + adj

``adj`` (< stride) adds rows at the far edge. A non-zero ``target_shape``
fixes ``o`` instead: with ``t = s (i - 1) + d (k - 1) + 1 - o``, the op uses
``adj = t mod 2`` and ``p = ceil(t / 2)`` (``pad``/``adj`` are then ignored).

Shapes
------
=======  ====================  =====================  ==========  ====================
kernel   data                  weight                 bias        output
=======  ====================  =====================  ==========  ====================
(k,)     ``(N, C, W)``         ``(C, F/G, k)``        ``(F,)``    ``(N, F, ow)``
(kh,kw)  ``(N, C, H, W)``      ``(C, F/G, kh, kw)``   ``(F,)``    ``(N, F, oh, ow)``
3-D      ``(N, C, D, H, W)``   ``(C, F/G, kd,kh,kw)`` ``(F,)``    ``(N, F, od, oh, ow)``
=======  ====================  =====================  ==========  ====================

Note the default ``no_bias=True`` (unlike Convolution). With ``dilate > 1`` and
``stride > 1`` this op computes the true transpose of the dilated convolution
(as Caffe and PyTorch do); MXNet 1.x's CPU kernel is known to be wrong there
(apache/mxnet#11203, #11629). Implementation: the
im2col machinery of ``_im2col`` with image and column spaces swapped (on the
GPU: ``_conv_gemm_cuda``, im2col + the tiled shared-memory GEMM).

Source: MXNet 1.x ``Deconvolution`` operator documentation; V. Dumoulin,
F. Visin, "A guide to convolution arithmetic for deep learning" (2016).
"""
from ...base import ParamError, ShapeError
from ..params import Field, Shape
from ..registry import OpDef, register_op, shape_assign
from . import _conv_gemm_cuda as cg
from . import _im2col as ic
from ..templates import f16_safe
from .convolution import (ConvolutionParam, check_conv_params, check_data, conv_plan,
                          empty_backward, empty_forward, spatial_params)

__all__ = ['DeconvolutionParam', 'deconv_geometry']


class DeconvolutionParam(ConvolutionParam):
    """Parameters of :func:`Deconvolution` (Convolution's plus ``adj``, ``target_shape``)."""

    adj = Field(Shape, (), 'Extra output rows at the far edge per spatial dim (each < stride); '
                           'empty means 0.', low=0)
    target_shape = Field(Shape, (), 'Output spatial shape; when non-zero it sets pad and adj. '
                                    'Empty or all zeros means unused.', low=0)
    no_bias = Field(bool, True, 'Whether to leave out the bias term (default True).')

    def validate(self):
        check_conv_params(self, 'Deconvolution')
        t = self.target_shape
        if any(t) and not all(t):
            raise ParamError('Deconvolution: `target_shape` must be all zeros (unused) or all '
                             'positive. Received: target_shape=%r' % (t,))


def deconv_geometry(p, data):
    """``(pad, adj, out_spatial)`` of a deconvolution on ``data`` (shape), checked.

    Parameters
    ----------
    p : DeconvolutionParam
    data : tuple of int
        ``(N, C, *spatial)``.

    Returns
    -------
    (pad, adj, out) : three tuples of int, one entry per spatial dim
        ``out = s (i - 1) + d (k - 1) + 1 - 2 pad + adj``; with a non-zero
        ``target_shape``, ``pad``/``adj`` derived from it.

    Raises
    ------
    ShapeError
        ``target_shape`` larger than the largest output, ``adj >= stride``,
        or a padding that leaves an empty output.
    """
    kernel, stride, pad, dilate = spatial_params(p)
    nd = len(kernel)
    adj = tuple(p.adj) or (0,) * nd
    ins = data[2:]
    full = [s * (i - 1) + d * (k - 1) + 1 for i, k, s, d in zip(ins, kernel, stride, dilate)]
    if any(p.target_shape):
        pad, adj = [], []
        for a, (f, t) in enumerate(zip(full, p.target_shape)):
            if t > f:
                raise ShapeError('Deconvolution: target_shape is too big in spatial dim %d: '
                                 '%d > %d, the largest output for data shape %s, kernel=%s, '
                                 'stride=%s' % (a, t, f, data, kernel, stride))
            pad.append((f - t + 1) // 2)
            adj.append((f - t) % 2)
        pad, adj = tuple(pad), tuple(adj)
    for a, (j, s) in enumerate(zip(adj, stride)):
        if j >= s:
            raise ShapeError('Deconvolution: adj must be smaller than stride in spatial dim %d. '
                             'Received: adj=%s, stride=%s%s'
                             % (a, adj, stride, ' (adj derived from target_shape=%s)'
                                % (p.target_shape,) if any(p.target_shape) else ''))
    out = tuple(f - 2 * q + j for f, q, j in zip(full, pad, adj))
    if min(out) < 1:
        raise ShapeError('Deconvolution: the padding leaves an empty output %s. Received: '
                         'data shape %s, kernel=%s, stride=%s, pad=%s'
                         % (out, data, kernel, stride, pad))
    return pad, adj, out


def _arguments(p):
    return ['data', 'weight'] if p.no_bias else ['data', 'weight', 'bias']


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    """Weight and bias from the data; the output from data and params."""
    ins = list(in_shapes)
    names = _arguments(p)
    if not p.no_bias:
        shape_assign(ins, 2, (p.num_filter,), names[2])
    if ins[0] is None:
        return ins, [None], list(aux_shapes)
    data = check_data('Deconvolution', p, ins[0])
    shape_assign(ins, 1, (data[1], p.num_filter // p.num_group) + tuple(p.kernel), names[1])
    _, _, out = deconv_geometry(p, data)
    return ins, [(data[0], p.num_filter) + out], list(aux_shapes)


# ------------------------------------------------------------------ CPU compute

def _geom(p, x):
    """The kernels' geometry tuple: the output is the image space, the data the columns."""
    pad, _, _ = deconv_geometry(p, x.shape)
    kernel, stride, _, dilate = spatial_params(p)
    return ic.geometry(kernel, stride, pad, dilate, x.shape[2:])


def _plan(ctx, p, x, y_shape, dtype):
    """Geometry tuple, 5-D image (output) shape and buffers."""
    geom = _geom(p, x)
    y5 = ic.as5d(y_shape)
    state = ctx.state if ctx is not None else None
    nb, colbuf, tmpbuf, dwtbuf = conv_plan(state, y5, x.shape[1], p.num_group, geom, dtype)
    return geom, y5, nb, colbuf, tmpbuf, dwtbuf


@f16_safe
def _forward_cpu(ctx, p, inputs, outputs, aux):
    x, w, y = inputs[0], inputs[1], outputs[0]
    if x.size == 0 or y.size == 0:
        return empty_forward(p, inputs, y)
    G = p.num_group
    geom, y5, nb, colbuf, tmpbuf, dwtbuf = _plan(ctx, p, x, y.shape, x.dtype)
    w3 = w.reshape(G, x.shape[1] // G, -1)
    x3 = x.reshape(x.shape[0], x.shape[1], -1)
    ic.conv_backward(colbuf[:1], y5, w3, x3, y.reshape(-1), w3, 1, 0,
                     colbuf, tmpbuf, dwtbuf, nb, geom)
    if not p.no_bias:
        ic.add_bias(y.reshape(y.shape[0], y.shape[1], -1), inputs[2])


@f16_safe
def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    x, w, dy = inputs[0], inputs[1], out_grads[0]
    if x.size == 0 or dy.size == 0:
        return empty_backward(p, out_grads, in_grads, req)
    G = p.num_group
    geom, y5, nb, colbuf, tmpbuf, dwtbuf = _plan(ctx, p, x, dy.shape, x.dtype)
    w3 = w.reshape(G, x.shape[1] // G, -1)
    x3 = x.reshape(x.shape[0], x.shape[1], -1)
    dyf = dy.reshape(-1)
    if req[0] != 'null':
        ic.conv_forward(dyf, y5, w3, in_grads[0].reshape(x3.shape), req[0] == 'add',
                        colbuf[:1], False, colbuf, tmpbuf, nb, geom)
    if req[1] != 'null':
        ic.conv_backward(dyf, y5, w3, x3, colbuf[:1], in_grads[1].reshape(w3.shape), 0,
                         ic.MODES[req[1]], colbuf, tmpbuf, dwtbuf, nb, geom)
    if not p.no_bias and req[2] != 'null':
        ic.bias_grad(dy.reshape(dy.shape[0], dy.shape[1], -1), in_grads[2], req[2] == 'add')


# ------------------------------------------------------------------ GPU compute

def _forward_gpu(ctx, p, inputs, outputs, aux):
    """The image is the output, the data the columns: ``y = col2im(W^T x) (+ b)``."""
    x, w = inputs[0], inputs[1]
    w3 = w.reshape(p.num_group, x.shape[1] // p.num_group, w.size // max(1, x.shape[1]))
    cg.forward(ctx, x, w3, None if p.no_bias else inputs[2], outputs[0], _geom(p, x), False)


def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    x, w = inputs[0], inputs[1]
    w3 = w.reshape(p.num_group, x.shape[1] // p.num_group, w.size // max(1, x.shape[1]))
    cg.backward(ctx, x, w3, out_grads[0], in_grads, req, _geom(p, x), False)


register_op(OpDef(
    name='Deconvolution',
    backward_reads=('data', 'weight'),
    float_only=True,
    arguments=_arguments,
    infer_shape=_infer_shape,
    forward={'cpu': _forward_cpu, 'gpu': _forward_gpu},
    backward={'cpu': _backward_cpu, 'gpu': _backward_gpu},
    params=DeconvolutionParam,
    doc=__doc__,
    input_docs={'data': 'Input data (N, C, *spatial).',
                'weight': 'Filters (C, num_filter/num_group, *kernel).',
                'bias': 'Bias (num_filter,), only when no_bias=False.'},
))
