"""Convolution: N-D cross-correlation of NC(D)(H)W data with a filter bank.

Math
----
With ``G = num_group`` groups, ``Cg = C / G`` input and ``Fg = F / G`` output
channels per group, stride ``s``, padding ``p`` and dilation ``d``::

    out[n, g*Fg + f, o] = bias[g*Fg + f]
        + sum_{c < Cg, k} weight[g*Fg + f, c, k] * data[n, g*Cg + c, o*s - p + k*d]

(zero outside the input). Per spatial dim the output size is::

    o = floor((i + 2p - d(k - 1) - 1) / s) + 1

Gradients: ``d data`` is the transposed convolution of the head gradient,
``d weight`` correlates the head gradient with the input, ``d bias`` sums the
head gradient over the batch and every spatial position.

Shapes
------
=======  ====================  =====================  ==========  ==================
kernel   data                  weight                 bias        output
=======  ====================  =====================  ==========  ==================
(k,)     ``(N, C, W)``         ``(F, C/G, k)``        ``(F,)``    ``(N, F, ow)``
(kh,kw)  ``(N, C, H, W)``      ``(F, C/G, kh, kw)``   ``(F,)``    ``(N, F, oh, ow)``
3-D      ``(N, C, D, H, W)``   ``(F, C/G, kd,kh,kw)`` ``(F,)``    ``(N, F, od, oh, ow)``
=======  ====================  =====================  ==========  ==================

The weight and bias shapes are inferred from the data. Implementation: im2col + one
BLAS GEMM per group and cache-sized chunk of samples (``_im2col``; strided kernels
unroll by contiguous runs out of each input plane's column phases, ``_im2col_rows``);
1x1 kernels with stride 1 and no pad on planes of at least ``_im2col.DIRECT_MIN_COLS``
positions multiply each sample's NCHW planes directly (no im2col); depthwise
convolutions run direct kernels (``_depthwise``); 2-D 3x3 kernels with stride 1,
dilate 1, one group, at least 16 input channels and an output of at least 4x4 run
Winograd's F(2x2, 3x3) (``_winograd``; Lavin & Gray 2016), those of at most 128 input
channels and outputs of at least 8x8 F(4x4, 3x3) (``_winograd4``; a backward also
needs at most 256 output channels), unless an input holds an inf or NaN (those run
im2col); ``FFNUMBA_CONV_WINOGRAD`` (``0`` off, ``2`` or ``4`` one tile) overrides.
Other 2-D stride-1 layers on planes so small that most of im2col's (tap, output)
pairs fall in the padding (GoogLeNet's 5x5 towers on 4x4 and 2x2 planes, 3x3 kernels
on 2x2 planes) run one GEMM per kernel tap over the outputs it reaches
(``_conv_taps``; split over threads, the threads split the taps, and such backwards
of Winograd's layers on 4x4 planes take the taps too; ``FFNUMBA_CONV_TAPS=0`` off).
With more than one numba thread the batch is split over threads, each on one BLAS
thread (``_conv_par``), except passes of less than :data:`SPLIT_MIN_FLOPS` work,
which run on one thread. float16 is computed in float32 and cast at the edges. An
inference executor may run a Convolution with the BatchNorm and relu after it as one
call (:func:`fused_forward_cpu`, bit-identical). GPU: im2col + the tiled
shared-memory GEMM (``_conv_gemm_cuda``, ``gemm_cuda``); depthwise convolutions use
direct one-thread-per-element kernels (``_conv_cuda``).

Source: MXNet 1.x ``Convolution`` operator documentation; im2col after
Chellapilla et al. (2006).
"""

import math

from ...base import ParamError, ShapeError
from ..params import Field, Params, Shape
from ..registry import OpDef, assign, register_op, shape_assign
from ..templates import f16_safe
from . import _conv_cuda as cc
from . import _conv_epilogue as _ep
from . import _conv_gemm_cuda as cg
from . import _conv_par as cp
from . import _conv_taps as tp
from ...blas_threads import numba_blas_single_thread
from . import _depthwise as dwc
from . import _im2col as ic
from . import _winograd as wg
from . import _winograd4 as w4

__all__ = ['ConvolutionParam', 'conv_output_size', 'check_spatial', 'fused_forward_cpu']

_LAYOUTS = ('NCW', 'NCHW', 'NCDHW', 'NHWC', 'NDHWC')
_CHANNEL_FIRST = {1: 'NCW', 2: 'NCHW', 3: 'NCDHW'}


class ConvolutionParam(Params):
    """Parameters of :func:`Convolution`."""

    _ignored = ('workspace', 'cudnn_tune', 'cudnn_off')

    kernel = Field(Shape, doc='Kernel size (k,), (kh, kw) or (kd, kh, kw).', low=1)
    stride = Field(Shape, (), 'Stride per spatial dim; empty means 1 everywhere.', low=1)
    dilate = Field(Shape, (), 'Dilation per spatial dim; empty means 1 everywhere.', low=1)
    pad = Field(Shape, (), 'Zero padding on both sides per spatial dim; empty means 0.', low=0)
    num_filter = Field(int, doc='Number of output channels F.', low=1, high=100000)
    num_group = Field(int, 1, 'Number of groups G: input and output channels are split '
                              'into G independent convolutions.', low=1)
    no_bias = Field(bool, False, 'Whether to leave out the bias term.')
    layout = Field(str, None, 'Data layout; only channel-first (NCW, NCHW, NCDHW) is '
                              'supported on the CPU.', choices=_LAYOUTS)

    def validate(self):
        check_conv_params(self, 'Convolution')


def check_conv_params(p, op):
    """Shared checks of kernel/stride/dilate/pad lengths, groups and layout.

    Parameters
    ----------
    p : ConvolutionParam or DeconvolutionParam
    op : str
        ``'Convolution'`` or ``'Deconvolution'`` (message prefix).

    Raises
    ------
    ParamError
        A kernel of 0 or more than 3 dims, a stride/dilate/pad (and adj,
        target_shape) whose length differs from the kernel's, ``num_filter``
        not a multiple of ``num_group``, or a layout other than channel-first.
    """
    nd = len(p.kernel)
    if not 1 <= nd <= 3:
        raise ParamError('%s: `kernel` must be a tuple of 1 to 3 ints. Received: kernel=%r'
                         % (op, p.kernel))
    for name in ('stride', 'dilate', 'pad') + (('adj', 'target_shape') if op == 'Deconvolution'
                                               else ()):
        v = getattr(p, name)
        if len(v) not in (0, nd):
            raise ParamError('%s: `%s` must be empty or have as many entries as `kernel` '
                             '(%d). Received: %s=%r' % (op, name, nd, name, v))
    if p.num_filter % p.num_group:
        raise ParamError('%s: `num_filter` must be a multiple of `num_group` (%d). '
                         'Received: num_filter=%r' % (op, p.num_group, p.num_filter))
    if p.layout is not None and p.layout != _CHANNEL_FIRST[nd]:
        raise ParamError('%s: `layout` must be %r (or None) for a %d-D kernel; other '
                         'layouts are not supported. Received: layout=%r'
                         % (op, _CHANNEL_FIRST[nd], nd, p.layout))


def spatial_params(p):
    """``(kernel, stride, pad, dilate)`` with empty tuples filled by defaults."""
    nd = len(p.kernel)
    stride = tuple(p.stride) or (1,) * nd
    pad = tuple(p.pad) or (0,) * nd
    dilate = tuple(p.dilate) or (1,) * nd
    return tuple(p.kernel), stride, pad, dilate


def conv_output_size(i, k, s, p, d):
    """Output size of one spatial dim: ``floor((i + 2p - d(k-1) - 1) / s) + 1``.

    Parameters
    ----------
    i, k, s, p, d : int
        Input size, kernel, stride (>= 1), pad, dilation (>= 1).

    Source: MXNet ``Convolution`` documentation; Dumoulin & Visin (2016).
    """
    return (i + 2 * p - d * (k - 1) - 1) // s + 1


def check_data(op, p, data, what='data'):
    """Rank and group checks of the data shape; returns it as a tuple.

    Parameters
    ----------
    op : str
        Operator name for the message.
    p : ConvolutionParam
    data : tuple of int
        ``(N, C, *spatial)`` with ``len(spatial) == len(p.kernel)``.
    what : str, default 'data'

    Raises
    ------
    ShapeError
        Wrong rank, or ``C`` not a multiple of ``num_group``.
    """
    data = tuple(int(v) for v in data)
    nd = len(p.kernel)
    if len(data) != nd + 2:
        raise ShapeError('%s: `%s` must be %d-D (batch, channel, %d spatial) for a kernel of '
                         'length %d. Received: %s shape %s'
                         % (op, what, nd + 2, nd, nd, what, data))
    if data[1] % p.num_group:
        raise ShapeError('%s: the channel count of `%s` must be a multiple of num_group=%d. '
                         'Received: %s shape %s' % (op, what, p.num_group, what, data))
    return data


def channels_last_hint(data):
    """A sentence for shape errors when ``data`` looks channels-last (``N, ..., C``).

    ffnumba's convolution and pooling take MXNet's default channels-first
    layout (``NCW``/``NCHW``/``NCDHW``). Data whose last axis is small (1, 3
    or 4: grey, RGB, RGBA) while axis 1 is larger usually came from a
    channels-last source (TensorFlow/Keras, PIL, OpenCV).

    Parameters
    ----------
    data : tuple of int

    Returns
    -------
    str
        ``''``, or a hint naming the layout and the transpose that fixes it.
    """
    if 3 <= len(data) <= 5 and data[-1] in (1, 3, 4) and data[1] > 4:
        spatial = ('D', 'H', 'W')[5 - len(data):]
        order = (0, len(data) - 1) + tuple(range(1, len(data) - 1))
        return (' The data looks channels-last (N, %s, C) = %s, but this operator expects '
                'channels-first (N, C, %s): transpose it with X.transpose%s.'
                % (', '.join(spatial), data, ', '.join(spatial), order))
    return ''


def check_spatial(op, p, data):
    """Output spatial sizes of a convolution.

    Parameters
    ----------
    op : str
        Operator name for the message.
    p : ConvolutionParam
    data : tuple of int
        ``(N, C, *spatial)``, already checked by :func:`check_data`.

    Returns
    -------
    tuple of int
        :func:`conv_output_size` per spatial dim.

    Raises
    ------
    ShapeError
        When the dilated kernel exceeds the padded input in some dim (the
        message names the dim, the data shape, kernel, pad and dilate).
    """
    kernel, stride, pad, dilate = spatial_params(p)
    out = []
    for a, (i, k, s, q, d) in enumerate(zip(data[2:], kernel, stride, pad, dilate)):
        dk = d * (k - 1) + 1
        if dk > i + 2 * q:
            raise ShapeError('%s: the (dilated) kernel exceeds the padded input in spatial dim '
                             '%d: %d > %d + 2*%d. Received: data shape %s, kernel=%s, pad=%s, '
                             'dilate=%s.%s' % (op, a, dk, i, q, data, kernel, pad, dilate,
                                               channels_last_hint(data)))
        out.append(conv_output_size(i, k, s, q, d))
    return tuple(out)


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
    data = check_data('Convolution', p, ins[0])
    wshape = (p.num_filter, data[1] // p.num_group) + tuple(p.kernel)
    if ins[1] is not None and tuple(ins[1]) != wshape and channels_last_hint(data):
        raise ShapeError('Convolution: the weight %s expects %d input channels, but data of '
                         'shape %s has %d.%s' % (tuple(ins[1]), ins[1][1] * p.num_group, data,
                                                 data[1], channels_last_hint(data)))
    shape_assign(ins, 1, wshape, names[1])
    out = (data[0], p.num_filter) + check_spatial('Convolution', p, data)
    return ins, [out], list(aux_shapes)


# ------------------------------------------------------------------ CPU compute

def conv_plan(state, x5, F, G, geom, dtype, nt=1):
    """Buffers and chunk size for a conv geometry: ``(nb, colbuf, tmpbuf, dwtbuf)``.

    ``nt`` threads (each on ``N / nt`` samples) get ``nt`` times the scratch;
    ``dwtbuf`` (the transposed weight-gradient accumulator of
    :func:`._im2col.backward_range`) is one element unless ``F / G < C / G * K``.
    """
    N, C = x5[0], x5[1]
    K = geom[0] * geom[1] * geom[2]
    P = geom[12] * geom[13] * geom[14]
    rows = C // G * K
    nb = ic.chunk_size(-(-N // nt), rows, P, ic.is_pointwise(geom))
    colbuf = ic.buffer(state, 'col', nt * rows * nb * P, dtype)
    tmpbuf = ic.buffer(state, 'tmp', nt * F // G * nb * P, dtype)
    dwtbuf = ic.buffer(state, 'dwt', nt * F * rows if F // G < rows else 1, dtype)
    return nb, colbuf, tmpbuf, dwtbuf


def _geom(p, x, y):
    kernel, stride, pad, dilate = spatial_params(p)
    return ic.geometry(kernel, stride, pad, dilate, y.shape[2:])


def empty_forward(p, inputs, y):
    """Forward on empty data or output: ``y`` is the bias alone (or 0).

    Shared by Convolution and Deconvolution (the GEMM views cannot be formed
    from a zero-size dimension).
    """
    y[...] = 0
    if not p.no_bias and y.size:
        y += inputs[2].reshape((1, -1) + (1,) * (y.ndim - 2))


def empty_backward(p, out_grads, in_grads, req):
    """Backward on empty data or head gradient: sums over nothing are 0."""
    for i in (0, 1):
        if req[i] == 'write':
            in_grads[i][...] = 0
    if not p.no_bias and req[2] != 'null':
        dy = out_grads[0]
        assign(in_grads[2], dy.sum(axis=(0,) + tuple(range(2, dy.ndim))), req[2])


def _use_winograd(p, xshape, yshape, arrays, backward=False):
    """The Winograd output tile the CPU kernels run: 0 (im2col), 2 or 4.

    Only 2-D 3x3 kernels with stride 1, dilate 1 and one group qualify
    (:func:`_winograd.eligible`), and only where F(2x2, 3x3) measured faster
    than im2col (:func:`_winograd.faster`); there :func:`_winograd4.tile`
    picks F(4x4, 3x3) (4) or F(2x2, 3x3) (2) for the forward or the
    ``backward``. ``FFNUMBA_CONV_WINOGRAD=0``
    turns Winograd off. ``arrays`` (data, weight and, backward, the head
    gradient) holding an inf or NaN run im2col, whose results they match
    (:func:`_winograd.all_finite`).
    """
    if _winograd_layer(p, xshape, yshape) and wg.all_finite(*arrays):
        return w4.tile(xshape, yshape, backward)
    return 0


def _winograd_layer(p, xshape, yshape):
    """Whether the layer's geometry is Winograd's and Winograd is on (finite or not)."""
    kernel, stride, pad, dilate = spatial_params(p)
    return (wg.eligible(kernel, stride, pad, dilate, p.num_group, xshape) and wg.enabled()
            and wg.faster(xshape, yshape))


def _use_taps(p, xshape, yshape, arrays, backward=False):
    """Whether the CPU kernels run the layer tap by tap (:mod:`._conv_taps`).

    Small planes, where most of im2col's pairs fall in the padding
    (:func:`_conv_taps.applies`), unless the layer is Winograd's. Split over threads, a
    ``backward`` takes the taps on Winograd's layers too, split by taps (Winograd split by
    samples runs GEMMs a few columns wide on these planes: 512 channels on 4x4, 2
    threads, batch 32: 11.9 against 14.2-15.4 ms inside VGG-11; on one thread Winograd is
    faster, 17.5 against 19.5 ms), and a forward only where each weight element is used
    often enough (:func:`_conv_taps.split_forward`). ``FFNUMBA_CONV_TAPS=0`` turns the
    taps off. ``arrays`` holding an inf or NaN run im2col, whose results they match (the
    padding's ``0 * inf``).
    """
    kernel, stride, pad, dilate = spatial_params(p)
    if not (tp.applies(kernel, stride, pad, dilate, p.num_group, xshape, yshape)
            and tp.enabled() and wg.all_finite(*arrays)):
        return False
    split = cp.split_threads(xshape[0]) > 1
    if backward:
        return split or not _winograd_layer(p, xshape, yshape)
    return (not _winograd_layer(p, xshape, yshape)
            and (not split or tp.split_forward(kernel, pad, xshape, yshape)))


#: Fewest flops of a forward, or a backward by the taps, split over threads (:func:`_small_pass`).
SPLIT_MIN_FLOPS = 24_000_000


def _small_pass(p, xshape, yshape, grads=0):
    """Whether a CPU forward (``grads`` 0) or a backward of ``grads`` gradients by the taps
    (three fork-joins per chunk; an im2col backward keeps its split) runs on one thread:
    its work, 2 flops per multiply-add of the ``(tap, output)`` pairs that reach the input
    where the taps run (:func:`_conv_taps.pairs`), of all pairs elsewhere, is below
    :data:`SPLIT_MIN_FLOPS` (2 threads, batch 32, each layer alone: 1x1 forwards of 7-17
    MFLOP 0.07-0.10 ms against 0.10-0.12 ms split; see docs/guide/devices.md)."""
    kernel, stride, pad, dilate = spatial_params(p)
    taps = tp.applies(kernel, stride, pad, dilate, p.num_group, xshape, yshape) and tp.enabled()
    if (grads and not taps) or cp.split_threads(xshape[0]) == 1:
        return False
    pairs = tp.pairs(kernel, pad, xshape, yshape) if taps else (
        math.prod(kernel) * math.prod(yshape[2:]))
    flops = 2 * xshape[0] * yshape[1] * (xshape[1] // p.num_group) * pairs
    return max(grads, 1) * flops < SPLIT_MIN_FLOPS


@f16_safe
def _forward_cpu(ctx, p, inputs, outputs, aux):
    _conv_cpu(ctx, p, inputs, outputs[0], None, 0)


def fused_forward_cpu(ctx, p, inputs, y, ep, mode):
    """A CPU Convolution forward whose every output row passes through an epilogue.

    The fused call of an inference executor's ``Convolution [-> BatchNorm]
    [-> relu | clip]`` chain (see :mod:`ffnumba._executor_fuse`): the
    per-channel affine map and/or the activation run on each output row right after it
    is computed (im2col GEMM chunk, Winograd output transform, depthwise
    sample), while it is in cache, with exactly the unfused operators'
    arithmetic (:mod:`._conv_epilogue`), so the result is bit-identical.

    Parameters
    ----------
    ctx : OpContext
        The convolution node's context (with it, scratch comes from a per-thread pool).
    p : ConvolutionParam
    inputs : list of ndarray
        ``data``, ``weight`` (and ``bias``), float32 or float64.
    y : ndarray (N, F, *out_spatial)
        Written: the last fused node's output.
    ep : ndarray (3, max(F, 2)) float64
        :func:`._conv_epilogue.make`: the ``scale`` and ``shift`` rows
        (``batch_norm.inference_affine``, read with the affine bit), then the
        clip bounds ``a_min, a_max`` (read with the clip bit).
    mode : int
        Bits ``_conv_epilogue.AFFINE`` (1), ``RELU`` (2), ``CLIP`` (4); relu and
        clip never together.

    Shapes are those the executor bound and checked; nothing is raised here
    beyond what the unfused Convolution forward raises.
    """
    _conv_cpu(ctx, p, inputs, y, ep, mode)


#: Pointwise (1x1, stride 1, no pad) forwards whose weight has fewer elements than this
#: run one GEMM per sample on its data, no gather or scatter (1 thread, batch 32: 32 -> 192
#: of 8x8 0.26 vs 0.49 ms, 96 -> 576 of 4x4 0.54 vs 0.60; 256 -> 512 of 4x4 1.73 vs 1.21).
SMALL_POINTWISE_WEIGHT = 1 << 16

#: The ``ep`` of a plain convolution (mode 0: never read).
_NO_EP = _ep.no_epilogue()


def _conv_cpu(ctx, p, inputs, y, ep, mode):
    """CPU forward into ``y`` with the epilogue ``mode`` (0: a plain convolution)."""
    x, w = inputs[0], inputs[1]
    ep = ep if mode else None         # None: the drivers compile without the epilogue
    if x.size == 0 or y.size == 0:
        empty_forward(p, inputs, y)
        if mode and y.size:
            P = y[0, 0].size
            _ep.apply_all(y.reshape(-1), y.shape[1], P, ep, _ep.expand(ep, y.shape[1], P), mode)
        return
    x5 = ic.as5d(x.shape)
    geom = _geom(p, x, y)
    state = ctx.state if ctx is not None else None
    if dwc.cpu_depthwise(p, x.shape):
        dwc.forward(state, x, w, y, w.reshape(-1) if p.no_bias else inputs[2], not p.no_bias,
                    geom, _NO_EP if ep is None else ep, mode)
        return
    with cp.one_thread(_small_pass(p, x.shape, y.shape)):
        _conv_paths(state, p, inputs, y, ep, mode, x5, geom)


def _conv_paths(state, p, inputs, y, ep, mode, x5, geom):
    """The forward of a layer that is not depthwise: Winograd, the taps or im2col."""
    x, w = inputs[0], inputs[1]
    F, G = p.num_filter, p.num_group
    m = _use_winograd(p, x.shape, y.shape, (x, w))
    if m:
        wg.forward(state, x, w, None if p.no_bias else inputs[2], y, spatial_params(p)[2], m,
                   ep, mode)
        return
    if _use_taps(p, x.shape, y.shape, (x, w)):
        tp.forward(state, x, w, None if p.no_bias else inputs[2], y, spatial_params(p)[2],
                   ep, mode)
        return
    nt = cp.split_threads(x5[0])
    nb, colbuf, tmpbuf, _ = conv_plan(state, x5, F, G, geom, x.dtype, nt)
    if G == 1 and F * x5[1] < SMALL_POINTWISE_WEIGHT and ic.is_pointwise(geom):
        nb = 1                        # one GEMM per sample on its own data
    b = w.reshape(-1) if p.no_bias else inputs[2]
    args = (x.reshape(-1), x5, w.reshape(G, F // G, -1), y.reshape(y.shape[0], F, -1),
            False, b, not p.no_bias, colbuf, tmpbuf, nb, geom)
    if nt == 1:
        ic.forward_range(*args, 0, x5[0], ep, mode)
        return
    with numba_blas_single_thread():
        cp.conv_forward_par(*args, nt, ep, mode)


@f16_safe
def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    x, w, dy = inputs[0], inputs[1], out_grads[0]
    if x.size == 0 or dy.size == 0:
        return empty_backward(p, out_grads, in_grads, req)
    mode_dx, mode_dw = ic.MODES[req[0]], ic.MODES[req[1]]
    if mode_dx or mode_dw:
        _grads_cpu(ctx.state if ctx is not None else None, p, x, w, dy, in_grads,
                   mode_dx, mode_dw)
    if not p.no_bias and req[2] != 'null':
        ic.bias_grad(dy.reshape(dy.shape[0], p.num_filter, -1), in_grads[2], req[2] == 'add')


def _grads_cpu(state, p, x, w, dy, in_grads, mode_dx, mode_dw):
    """Data and weight gradients (modes 0 skip, 1 write, 2 add) by the forward's CPU path,
    except that a split backward that :func:`_by_channels` takes runs im2col by input
    channels instead of Winograd (per-thread weight gradients 16 times the weight)."""
    geom = _geom(p, x, dy)
    if dwc.cpu_depthwise(p, x.shape):
        dwc.backward(state, x, w, dy, in_grads[0] if mode_dx else None, in_grads[1],
                     mode_dx, mode_dw, geom)
        return
    with cp.one_thread(_small_pass(p, x.shape, dy.shape, (mode_dx > 0) + (mode_dw > 0))):
        _grads_paths(state, p, x, w, dy, in_grads, mode_dx, mode_dw, geom)


def _grads_paths(state, p, x, w, dy, in_grads, mode_dx, mode_dw, geom):
    """The backward of a layer that is not depthwise: the taps, im2col or Winograd."""
    G, F = p.num_group, p.num_filter
    x5 = ic.as5d(x.shape)
    nt = cp.split_threads(x5[0])
    w3 = w.reshape(G, F // G, -1)
    if _use_taps(p, x.shape, dy.shape, (x, w, dy), True):
        tp.backward(state, x, w, dy, in_grads[0] if mode_dx else None,
                    in_grads[1] if mode_dw else None, mode_dx, mode_dw, spatial_params(p)[2])
        return
    if _by_channels(state, p, x, w3, dy, in_grads, mode_dx, mode_dw, geom, x5, nt):
        return
    m = _use_winograd(p, x.shape, dy.shape, (x, w, dy), True)
    if m:
        wg.backward(state, x, w, dy, in_grads[0] if mode_dx else None,
                    in_grads[1] if mode_dw else None, mode_dx, mode_dw, spatial_params(p)[2], m)
        return
    dw = in_grads[1].reshape(w3.shape) if mode_dw else w3
    nb, colbuf, tmpbuf, dwtbuf = conv_plan(state, x5, F, G, geom, x.dtype, nt)
    dx = in_grads[0].reshape(-1) if mode_dx else colbuf[:1]
    args = (x.reshape(-1), x5, w3, dy.reshape(dy.shape[0], F, -1), dx, dw, mode_dx, mode_dw,
            colbuf, tmpbuf, dwtbuf)
    if nt == 1:
        ic.conv_backward(*args, nb, geom)
        return
    dwparts = ic.buffer(state, 'dwparts', nt * w3.size, x.dtype)
    with numba_blas_single_thread():
        cp.conv_backward_par(*args, dwparts.reshape((nt,) + w3.shape), nb, geom, nt)


def _by_channels(state, p, x, w3, dy, in_grads, mode_dx, mode_dw, geom, x5, nt):
    """The im2col backward split by input channels (:func:`._conv_par.channel_split`), or False."""
    N, C, F = x5[0], x5[1], p.num_filter
    K = geom[0] * geom[1] * geom[2]
    P = geom[12] * geom[13] * geom[14]
    nbc = ic.chunk_size(N, C * K, P, ic.is_pointwise(geom))     # one thread's chunks
    if not mode_dw or not cp.channel_split(N, C, p.num_group, nbc, nt, w3.size):
        return False
    rmax = -(-C // nt) * K
    colbuf = ic.buffer(state, 'col', nt * rmax * nbc * P, x.dtype)
    tmpbuf = ic.buffer(state, 'tmp', nt * F * nbc * P, x.dtype)
    dx = in_grads[0].reshape(-1) if mode_dx else colbuf[:1]
    with numba_blas_single_thread():
        cp.conv_backward_channels(x.reshape(-1), x5, w3[0], dy.reshape(N, F, -1), dx,
                                  in_grads[1].reshape(w3[0].shape), mode_dx, mode_dw,
                                  colbuf, tmpbuf, nbc, geom, nt)
    return True


# ------------------------------------------------------------------ GPU compute

def _gpu_w3(p, w):
    return w.reshape(p.num_group, p.num_filter // p.num_group, w.size // p.num_filter)


def _forward_gpu(ctx, p, inputs, outputs, aux):
    """im2col + the tiled GEMM; depthwise convolutions run the direct kernel."""
    x, w, y = inputs[0], inputs[1], outputs[0]
    if dwc.is_depthwise(p, x.shape):
        b = w.reshape(w.size) if p.no_bias else inputs[2]
        cc.conv_y.launch(y.size, cg.d5(x), cg.d5(w), b, cg.d5(y), _geom(p, x, y),
                         not p.no_bias, False)
        return
    cg.forward(ctx, x, _gpu_w3(p, w), None if p.no_bias else inputs[2], y, _geom(p, x, y),
               True)


def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    x, w, dy = inputs[0], inputs[1], out_grads[0]
    geom = _geom(p, x, dy)
    if not dwc.is_depthwise(p, x.shape):
        return cg.backward(ctx, x, _gpu_w3(p, w), dy, in_grads, req, geom, True)
    if req[0] != 'null':
        cc.conv_x.launch(x.size, cg.d5(dy), cg.d5(w), w.reshape(w.size), cg.d5(in_grads[0]), geom,
                         False, req[0] == 'add')
    if req[1] != 'null':
        cc.conv_w.launch(w.size, cg.d5(x), cg.d5(dy), cg.d5(in_grads[1]), geom, req[1] == 'add')
    if not p.no_bias and req[2] != 'null':
        cc.bias_grad(dy, in_grads[2], req[2] == 'add')


register_op(OpDef(
    name='Convolution',
    backward_reads=('data', 'weight'),   # dx = W * dy, dW = x * dy, db = sum dy
    float_only=True,
    arguments=_arguments,
    infer_shape=_infer_shape,
    forward={'cpu': _forward_cpu, 'gpu': _forward_gpu},
    backward={'cpu': _backward_cpu, 'gpu': _backward_gpu},
    params=ConvolutionParam,
    doc=__doc__,
    input_docs={'data': 'Input data (N, C, *spatial).',
                'weight': 'Filters (num_filter, C/num_group, *kernel).',
                'bias': 'Bias (num_filter,).'},
))
