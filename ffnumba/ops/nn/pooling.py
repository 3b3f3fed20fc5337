"""Pooling: max, average, sum or Lp pooling over 1-D, 2-D or 3-D windows.

Math
----
For output position ``o`` the window starts at ``start = o*s - p`` (per
spatial dim) and covers ``[start, start + k)`` clipped to the input::

    max:  out[o] = max over the window            (-inf if the window is empty)
    sum:  out[o] = sum over the window
    avg:  out[o] = sum over the window / size     (0 if size is 0)
    lp:   out[o] = (sum over the window of x^P)^(1/P),  P = p_value in {1, 2, 3}

``size`` is the window volume clipped to the *padded* input
``[-p, i + p)`` when ``count_include_pad`` (the default), else the volume of
the window clipped to the input itself. Output size per spatial dim::

    valid: o = floor((i + 2p - k) / s) + 1
    full:  o = ceil((i + 2p - k) / s) + 1
    same:  o = ceil(i / s)          (pad must be 0; windows [o*s, o*s + k) are
                                     clipped at the end of the input, and avg
                                     divides by the clipped size)

MXNet 1.9.1 accepts ``'same'`` only for 1-D max/avg/sum pooling (and its
imperative call fails unless ``pad`` is given as a 3-tuple of zeros); the
per-dimension rule above is applied here to 2-D and 3-D windows too.

``global_pool`` pools every spatial position into one (kernel = input size,
stride 1, no padding). Gradients: max routes the head gradient to the first
maximum in window order (as MXNet's CPU kernel does; a training forward of 2-D
windows up to 3x3 keeps those positions for the backward, as MKL-DNN's
workspace); avg spreads ``g / size`` over the clipped window; sum copies ``g``; lp
gives ``g * (x / out)^(P-1)`` (0 where ``out`` is 0).

Shapes
------
=============  =====================  ==========================
kernel         data                   output
=============  =====================  ==========================
(k,)           ``(N, C, W)``          ``(N, C, ow)``
(kh, kw)       ``(N, C, H, W)``       ``(N, C, oh, ow)``
(kd, kh, kw)   ``(N, C, D, H, W)``    ``(N, C, od, oh, ow)``
global_pool    ``(N, C, *spatial)``   ``(N, C, 1, ...)``
=============  =====================  ==========================

Note that an empty ``stride`` means 1 (not the kernel size). GPU kernels:
``_conv_cuda`` (one thread per element; the backward gathers). Source: MXNet
1.x ``Pooling`` operator documentation (CPU, non-MKLDNN semantics).
"""
import numpy as np
from numba import njit

from ...base import ParamError, ShapeError
from ..params import Field, Params, Shape
from ..registry import OpDef, register_op
from ..templates import JIT
from . import _conv_cuda as cc, _pool2d, _pool_argmax as _pa
from ._im2col import MODES, TABLE_MAX_OW, _table, _valid, as5d
from ._conv_par import run_split, split_threads
from ._global_pool import global_backward, global_forward, is_whole_plane
from .convolution import channels_last_hint

__all__ = ['PoolingParam', 'pool_output_size']

_POOL_CODES = {'max': 0, 'avg': 1, 'sum': 2, 'lp': 3}
_LAYOUTS = ('NCW', 'NCHW', 'NCDHW', 'NWC', 'NHWC', 'NDHWC')
_CHANNEL_FIRST = {3: 'NCW', 4: 'NCHW', 5: 'NCDHW'}


class PoolingParam(Params):
    """Parameters of :func:`Pooling`."""

    _ignored = ('cudnn_off',)

    kernel = Field(Shape, (), 'Window size (k,), (kh, kw) or (kd, kh, kw); may be empty '
                              'with global_pool.', low=1)
    pool_type = Field(str, 'max', 'Reduction over the window.', choices=('avg', 'lp', 'max', 'sum'))
    global_pool = Field(bool, False, 'Pool over the whole spatial extent (kernel, stride and pad '
                                     'are ignored).')
    pooling_convention = Field(str, 'valid', "Output size: 'valid' floors, 'full' ceils, "
                                             "'same' gives ceil(input / stride) (no pad).",
                               choices=('full', 'same', 'valid'))
    stride = Field(Shape, (), 'Stride per spatial dim; empty means 1 everywhere (entries '
                   'beyond the kernel\'s are ignored, as MXNet).', low=1)
    pad = Field(Shape, (), 'Implicit padding on both sides per spatial dim; empty means 0.',
                low=0)
    p_value = Field(int, None, 'Power P of lp pooling: 1, 2 or 3.')
    count_include_pad = Field(bool, None, 'avg only: whether padded positions count in the '
                                          'divisor (None means True).')
    layout = Field(str, None, 'Data layout; only channel-first (NCW, NCHW, NCDHW) is '
                              'supported.', choices=_LAYOUTS)

    def validate(self):
        nd = len(self.kernel)
        if not self.global_pool and nd == 0:
            raise ParamError('Pooling: `kernel` must be given unless global_pool=True. '
                             'Received: kernel=()')
        if nd > 3:
            raise ParamError('Pooling: `kernel` must have 1 to 3 entries. Received: kernel=%r'
                             % (self.kernel,))
        if not self.global_pool:
            for name in ('stride', 'pad'):
                v = getattr(self, name)
                # as MXNet 1.9.1: entries beyond the kernel's are ignored
                if len(v) and not nd <= len(v) <= 3:
                    raise ParamError('Pooling: `%s` must be empty or have as many entries as '
                                     '`kernel` (%d; up to 3, extra entries are ignored). '
                                     'Received: %s=%r' % (name, nd, name, v))
        if self.layout is not None and (self.layout not in _CHANNEL_FIRST.values() or
                                        (nd and self.layout != _CHANNEL_FIRST[nd + 2])):
            raise ParamError('Pooling: `layout` must be None or the channel-first layout of the '
                             'kernel (NCW, NCHW or NCDHW). Received: layout=%r' % (self.layout,))
        if self.pooling_convention == 'same' and any(self.pad) and not self.global_pool:
            raise ParamError("Pooling: `pad` must be 0 with pooling_convention='same' (MXNet: "
                             "'same' disables the pad parameter). Received: pad=%r"
                             % (self.pad,))
        if self.pool_type == 'lp' and self.p_value not in (1, 2, 3):
            raise ParamError("Pooling: `p_value` must be 1, 2 or 3 for pool_type='lp'. "
                             "Received: p_value=%r" % (self.p_value,))


def pool_output_size(i, k, s, p, convention):
    """Pooled size of one spatial dim: ``floor``/``ceil`` of ``(i + 2p - k) / s``, plus 1.

    Parameters
    ----------
    i, k, s, p : int
        Input size, kernel, stride (>= 1), pad.
    convention : {'valid', 'full', 'same'}
        MXNet's ``pooling_convention``; ``'same'`` gives ``ceil(i / s)``.

    Source: MXNet ``Pooling`` documentation.
    """
    if convention == 'same':
        return -(-i // s)
    num = i + 2 * p - k
    if convention == 'full':
        return -(-num // s) + 1
    return num // s + 1


def _window(p, data):
    """``(kernel, stride, pad)`` for data of the given shape (global_pool resolved)."""
    nsp = len(data) - 2
    if p.global_pool:
        return tuple(data[2:]), (1,) * nsp, (0,) * nsp
    return (tuple(p.kernel), tuple(p.stride)[:nsp] or (1,) * nsp,
            tuple(p.pad)[:nsp] or (0,) * nsp)


def _out_spatial(p, data):
    data = tuple(int(v) for v in data)
    nd = len(p.kernel)
    if p.global_pool:
        if not 3 <= len(data) <= 5:
            raise ShapeError('Pooling: `data` must be 3-D, 4-D or 5-D (batch, channel, spatial) '
                             'for global pooling. Received: data shape %s' % (data,))
        return (1,) * (len(data) - 2)
    if len(data) != nd + 2:
        raise ShapeError('Pooling: `data` must be %d-D (batch, channel, %d spatial) for a kernel '
                         'of length %d. Received: data shape %s' % (nd + 2, nd, nd, data))
    kernel, stride, pad = _window(p, data)
    out = []
    for a, (i, k, s, q) in enumerate(zip(data[2:], kernel, stride, pad)):
        if k > i + 2 * q and p.pooling_convention != 'same':
            raise ShapeError('Pooling: the kernel exceeds the padded input in spatial dim %d: '
                             '%d > %d + 2*%d. Received: data shape %s, kernel=%s, pad=%s.%s'
                             % (a, k, i, q, data, kernel, pad, channels_last_hint(data)))
        out.append(pool_output_size(i, k, s, q, p.pooling_convention))
    return tuple(out)


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    """The output from the data and params (no inputs to fill)."""
    data = in_shapes[0]
    if data is None:
        return list(in_shapes), [None], list(aux_shapes)
    return list(in_shapes), [tuple(data[:2]) + _out_spatial(p, data)], list(aux_shapes)


# ------------------------------------------------------------------ CPU kernels

@njit(inline='always', **JIT)   # no compile of its own (cold start)
def _bounds(o, s, p, k, i):
    """``(start, end)`` clipped to the padded input, then ``(lo, hi)`` clipped to the input."""
    start = o * s - p
    end = min(start + k, i + p)
    return start, end, max(start, 0), min(end, i)


@njit(inline='always', **JIT)   # no compile of its own (cold start)
def _row_setup(g, W, include_pad):
    """Per-kw valid output ranges and per-ow window widths (padded or clipped) of one row."""
    KW, SW, PW, OW = g[2], g[5], g[8], g[11]
    lo = np.empty(KW, np.int64)
    hi = np.empty(KW, np.int64)
    for kw in range(KW):
        lo[kw], hi[kw] = _valid(OW, SW, PW, kw, np.int64(1), W)   # int64: one _valid signature
    width = np.empty(OW, np.float64)
    for ow in range(OW):
        w0, w1, wlo, whi = _bounds(ow, SW, PW, KW, W)
        width[ow] = (w1 - w0) if include_pad else max(0, whi - wlo)
    return lo, hi, width


@njit(**JIT)
def _pool_fwd(xf, yf, dims, g, mode, include_pad, pv, lowest):
    """Forward over flat ``x`` ``(N, C, D, H, W)`` (shape ``dims``) into flat ``y``.

    Works one output row at a time: for each window offset the whole row is
    updated in a stride-``SW`` sweep, so the inner loop is long and branch-free.
    Every output element still sees its window in row-major order.
    """
    N, C, D, H, W = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW, OD, OH, OW = g
    plane_in = D * H * W
    lo, hi, width = _row_setup(g, W, include_pad)
    acc = np.empty(OW, np.float64)
    usw = np.uint64(SW)
    q = 0
    for nc in range(N * C):
        xb = nc * plane_in
        for od in range(OD):
            d0, d1, dlo, dhi = _bounds(od, SD, PD, KD, D)
            for oh in range(OH):
                h0, h1, hlo, hhi = _bounds(oh, SH, PH, KH, H)
                init = lowest if mode == 0 else 0.0
                for ow in range(OW):
                    acc[ow] = init
                for a in range(dlo, dhi):
                    for b in range(hlo, hhi):
                        rb = xb + (a * H + b) * W - PW
                        for kw in range(KW):
                            n = hi[kw] - lo[kw]
                            if n <= 0:
                                continue
                            src = np.uint64(rb + lo[kw] * SW + kw)
                            o0 = np.uint64(lo[kw])
                            if mode == 0:
                                for t in range(np.uint64(n)):
                                    v = xf[src + t * usw]
                                    a0 = acc[o0 + t]
                                    acc[o0 + t] = v if v > a0 else a0   # branch-free select
                            elif mode == 3 and pv == 2:
                                for t in range(np.uint64(n)):
                                    v = xf[src + t * usw]
                                    acc[o0 + t] += v * v
                            elif mode == 3 and pv == 3:
                                for t in range(np.uint64(n)):
                                    v = xf[src + t * usw]
                                    acc[o0 + t] += v * v * v
                            else:
                                for t in range(np.uint64(n)):
                                    acc[o0 + t] += xf[src + t * usw]
                if mode == 1:
                    if include_pad:
                        dh = (d1 - d0) * (h1 - h0)
                    else:
                        dh = max(0, dhi - dlo) * max(0, hhi - hlo)
                    for ow in range(OW):
                        size = dh * width[ow]
                        acc[ow] = acc[ow] / size if size > 0 else 0.0
                elif mode == 3 and pv == 2:
                    for ow in range(OW):
                        acc[ow] = np.sqrt(acc[ow])
                elif mode == 3 and pv == 3:
                    for ow in range(OW):
                        acc[ow] = np.cbrt(acc[ow])
                for ow in range(OW):
                    yf[q + ow] = acc[ow]
                q += OW


@njit(**JIT)
def _pool_bwd(xf, yf, dyf, dxf, dims, g, mode, include_pad, pv, write):
    """avg/sum/lp backward: ``dx (+)= d out / d x . dy`` on flat arrays, row at a time.

    ``write`` zeroes ``dx`` first; max pooling uses :func:`_max_bwd`.
    """
    N, C, D, H, W = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW, OD, OH, OW = g
    plane_in = D * H * W
    if write:
        dxf[:] = 0
    lo, hi, width = _row_setup(g, W, include_pad)
    inv = np.empty(OW, np.float64)
    gs = np.empty(OW, np.float64)
    usw = np.uint64(SW)
    q = 0
    for nc in range(N * C):
        xb = nc * plane_in
        for od in range(OD):
            d0, d1, dlo, dhi = _bounds(od, SD, PD, KD, D)
            for oh in range(OH):
                h0, h1, hlo, hhi = _bounds(oh, SH, PH, KH, H)
                if mode == 1:
                    if include_pad:
                        dh = (d1 - d0) * (h1 - h0)
                    else:
                        dh = max(0, dhi - dlo) * max(0, hhi - hlo)
                    for ow in range(OW):
                        size = dh * width[ow]
                        gs[ow] = dyf[q + ow] / size if size > 0 else 0.0
                elif mode == 3 and pv > 1:
                    for ow in range(OW):
                        out = yf[q + ow]
                        gs[ow] = dyf[q + ow] / out if out != 0 else 0.0
                        inv[ow] = 1.0 / out if out != 0 else 0.0
                else:
                    for ow in range(OW):
                        gs[ow] = dyf[q + ow]
                for a in range(dlo, dhi):
                    for b in range(hlo, hhi):
                        rb = xb + (a * H + b) * W - PW
                        for kw in range(KW):
                            n = hi[kw] - lo[kw]
                            if n <= 0:
                                continue
                            src = np.uint64(rb + lo[kw] * SW + kw)
                            o0 = np.uint64(lo[kw])
                            if mode == 3 and pv == 2:
                                # d out / d x = x / out
                                for t in range(np.uint64(n)):
                                    i = src + t * usw
                                    dxf[i] += gs[o0 + t] * xf[i]
                            elif mode == 3 and pv == 3:
                                # d out / d x = (x / out)^2
                                for t in range(np.uint64(n)):
                                    i = src + t * usw
                                    r = xf[i] * inv[o0 + t]
                                    dxf[i] += gs[o0 + t] * xf[i] * r
                            else:
                                for t in range(np.uint64(n)):
                                    dxf[src + t * usw] += gs[o0 + t]
                q += OW


@njit(**JIT)
def _max_bwd(xf, dyf, dxf, dims, g, write):
    """Max-pooling backward: the first strict maximum of each window gets the gradient.

    One output element at a time with the running maximum in registers
    (branch-free selects); a window of only NaN or -inf routes nothing.
    """
    N, C, D, H, W = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW, OD, OH, OW = g
    plane_in = D * H * W
    if write:
        dxf[:] = 0
    none = np.uint64(0xFFFFFFFFFFFFFFFF)
    q = np.uint64(0)
    for nc in range(N * C):
        xb = nc * plane_in
        for od in range(OD):
            d0, d1, dlo, dhi = _bounds(od, SD, PD, KD, D)
            for oh in range(OH):
                h0, h1, hlo, hhi = _bounds(oh, SH, PH, KH, H)
                for ow in range(OW):
                    w0, w1, wlo, whi = _bounds(ow, SW, PW, KW, W)
                    uwlo, uwhi = np.uint64(max(wlo, 0)), np.uint64(max(whi, 0))
                    best = -np.inf
                    bi = none
                    for a in range(dlo, dhi):
                        for b in range(hlo, hhi):
                            base = np.uint64(xb + (a * H + b) * W)
                            for e in range(uwlo, uwhi):
                                v = xf[base + e]
                                take = v > best
                                best = v if take else best
                                bi = base + e if take else bi
                    if bi != none:
                        dxf[bi] += dyf[q]
                    q += np.uint64(1)


@njit(**JIT)
def _max_fwd_table(xf, yf, dims, g15, lowest):
    """Max forward for narrow outputs: one pass per window offset over the whole output plane.

    ``g15`` is the conv geometry (unit dilation) whose :func:`_im2col._table`
    gives each output position's input offset per window offset (-1: outside).
    """
    N, C = dims[0], dims[1]
    plane_in = dims[2] * dims[3] * dims[4]
    K = g15[0] * g15[1] * g15[2]
    P = g15[12] * g15[13] * g15[14]
    up = np.uint64(P)
    tab = _table(dims, g15)
    acc = np.empty(P, xf.dtype)
    for nc in range(N * C):
        xb = nc * plane_in
        for i in range(up):
            acc[i] = lowest
        for r in range(K):
            ut = np.uint64(r * P)
            for i in range(up):
                t = tab[ut + i]
                v = xf[np.uint64(xb + max(t, 0))]
                a0 = acc[i]
                acc[i] = v if (t >= 0 and v > a0) else a0
        uq = np.uint64(nc * P)
        for i in range(up):
            yf[uq + i] = acc[i]


# The same kernels on nt contiguous ranges of the N*C planes, one range per numba thread:
# each range is a slice of the flat arrays with dims (1, planes, D, H, W).

def _range(dims, t, nt):
    """Planes ``[lo, hi)`` of range ``t`` of ``nt`` and the 5-D dims of that slice."""
    n = dims[0] * dims[1]
    lo, hi = n * t // nt, n * (t + 1) // nt
    return lo, hi, (1, hi - lo, dims[2], dims[3], dims[4])


# The N*C planes split over ``nt`` threads of a small pool (``_conv_par.run_split``), each
# running the serial nogil kernel on its own planes: no parallel=True compile.
def _pool_fwd_par(xf, yf, dims, g, mode, include_pad, pv, lowest, nt):
    pin, pout = dims[2] * dims[3] * dims[4], g[9] * g[10] * g[11]

    def part(t):
        lo, hi, d = _range(dims, t, nt)
        _pool_fwd(xf[lo * pin:hi * pin], yf[lo * pout:hi * pout], d, g, mode, include_pad, pv,
                  lowest)
    run_split(part, nt)


def _max_fwd_table_par(xf, yf, dims, g15, lowest, nt):
    pin, pout = dims[2] * dims[3] * dims[4], g15[12] * g15[13] * g15[14]

    def part(t):
        lo, hi, d = _range(dims, t, nt)
        _max_fwd_table(xf[lo * pin:hi * pin], yf[lo * pout:hi * pout], d, g15, lowest)
    run_split(part, nt)


def _pool_bwd_par(xf, yf, dyf, dxf, dims, g, mode, include_pad, pv, write, nt):
    pin, pout = dims[2] * dims[3] * dims[4], g[9] * g[10] * g[11]

    def part(t):
        lo, hi, d = _range(dims, t, nt)
        _pool_bwd(xf[lo * pin:hi * pin], yf[lo * pout:hi * pout], dyf[lo * pout:hi * pout],
                  dxf[lo * pin:hi * pin], d, g, mode, include_pad, pv, write)
    run_split(part, nt)


def _max_bwd_par(xf, dyf, dxf, dims, g, write, nt):
    pin, pout = dims[2] * dims[3] * dims[4], g[9] * g[10] * g[11]

    def part(t):
        lo, hi, d = _range(dims, t, nt)
        _max_bwd(xf[lo * pin:hi * pin], dyf[lo * pout:hi * pout], dxf[lo * pin:hi * pin], d, g,
                 write)
    run_split(part, nt)


def _threads(x, backward=False):
    """Threads for pooling ``x``: numba's (capped as convolution's), 1 below
    ``PAR_MIN_SIZE`` (forward) or ``PAR_MIN_SIZE_BWD`` (backward) input elements."""
    least = PAR_MIN_SIZE_BWD if backward else PAR_MIN_SIZE
    return split_threads(x.shape[0] * x.shape[1]) if x.size >= least else 1


#: Fewest input elements worth a parallel pooling call. Measured on a quiet
#: 2-core VM, whole nets at 2 threads, batch 32: 2^15 trained GoogLeNet and
#: Inception-BN 2-3% faster and ran their inference 4-5% faster than 2^19
#: (fwd) / 2^17 (bwd), which had been chosen on a busy machine; VGG-11 equal.
PAR_MIN_SIZE = 1 << 15
#: Fewest input elements worth a parallel pooling backward.
PAR_MIN_SIZE_BWD = 1 << 15


def _table_geom(g):
    """The 12-int pooling geometry as the 15-int conv geometry (unit dilation) of ``_table``."""
    return tuple(g[:9]) + (1, 1, 1) + tuple(g[9:])


def _geom(p, shape, out_shape):
    """12 ints for the kernels: kernel, stride, pad and output size, padded to 3-D."""
    kernel, stride, pad = _window(p, shape)
    fill = 3 - len(kernel)
    return (((1,) * fill + kernel) + ((1,) * fill + stride) + ((0,) * fill + pad)
            + as5d(out_shape)[2:])


def _modes(p):
    include = True if p.count_include_pad is None else p.count_include_pad
    return _POOL_CODES[p.pool_type], include, int(p.p_value or 1)


def _forward_cpu(ctx, p, inputs, outputs, aux):
    x, y = inputs[0], outputs[0]
    half = x.dtype == np.float16
    xw = x.astype(np.float32) if half else x
    yw = np.empty(y.shape, np.float32) if half else y
    mode, include, pv = _modes(p)
    # the max over an empty window (wholly in the padding) is -inf, the identity of max;
    # MXNet 1.9.1 writes -FLT_MAX there, a finite number that looks like data
    lowest = xw.dtype.type(-np.inf)
    g = _geom(p, x.shape, y.shape)
    nt = _threads(x)
    xf, yf, dims = xw.reshape(-1), yw.reshape(-1), as5d(x.shape)
    table = mode == 0 and g[11] < TABLE_MAX_OW
    if _pool2d.keeps_argmax(ctx, g, dims, mode):      # training: positions kept for backward
        _pa.train_forward(ctx.state, xf, yf, dims, g, nt)
    elif is_whole_plane(g, dims, mode):     # global pooling: one flat loop per plane
        global_forward(xf, yf, dims, mode, lowest, nt)
    elif _pool2d.applies(g, dims, mode):  # 2-D max (separable), stride-1 same-plane avg/sum
        _pool2d.forward(xf, yf, dims, g, nt, ctx.state, mode, include)
    elif table and nt > 1:
        _max_fwd_table_par(xf, yf, dims, _table_geom(g), lowest, nt)
    elif table:
        _max_fwd_table(xf, yf, dims, _table_geom(g), lowest)
    elif nt > 1:
        _pool_fwd_par(xf, yf, dims, g, mode, include, pv, lowest, nt)
    else:
        _pool_fwd(xf, yf, dims, g, mode, include, pv, lowest)
    if half:
        y[...] = yw


def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'null':
        return
    x, y, dy, dx = inputs[0], outputs[0], out_grads[0], in_grads[0]
    half = x.dtype == np.float16
    mode, include, pv = _modes(p)
    if half:
        work = np.zeros(x.shape, np.float32)
        x, y, dy = (a.astype(np.float32) for a in (x, y, dy))
    else:
        work = dx
    write = MODES[req[0]] == 1 and not half
    g = _geom(p, x.shape, y.shape)
    nt = _threads(x, backward=True)
    xf, yf, dyf, dxf, dims = (x.reshape(-1), y.reshape(-1), dy.reshape(-1), work.reshape(-1),
                              as5d(x.shape))
    if mode == 0 and _pa.stashed_backward(getattr(ctx, 'state', None), dyf, dxf, dims, g,
                                          write, nt):
        pass                                     # routed to the forward's kept positions
    elif is_whole_plane(g, dims, mode):
        global_backward(xf, dyf, dxf, dims, mode, write, nt)
    elif _pool2d.applies(g, dims, mode, backward=True):
        _pool2d.backward(xf, dyf, dxf, dims, g, write, nt, mode, include,
                         getattr(ctx, 'state', None))
    elif mode == 0 and nt > 1:    # (a table version, as the forward's, measured 1.5-2x slower)
        _max_bwd_par(xf, dyf, dxf, dims, g, write, nt)
    elif mode == 0:
        _max_bwd(xf, dyf, dxf, dims, g, write)
    elif nt > 1:
        _pool_bwd_par(xf, yf, dyf, dxf, dims, g, mode, include, pv, write, nt)
    else:
        _pool_bwd(xf, yf, dyf, dxf, dims, g, mode, include, pv, write)
    if half:
        if req[0] == 'add':
            dx[...] = (dx.astype(np.float32) + work).astype(dx.dtype)
        else:
            dx[...] = work


def _d5(a):
    return a.reshape(*as5d(a.shape))


def _forward_gpu(ctx, p, inputs, outputs, aux):
    x, y = inputs[0], outputs[0]
    mode, include, pv = _modes(p)
    cc.pool_y.launch(y.size, _d5(x), _d5(y), _geom(p, x.shape, y.shape), mode, include, pv,
                     float(-np.inf))


def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'null':
        return
    x, y = inputs[0], outputs[0]
    mode, include, pv = _modes(p)
    cc.pool_x.launch(x.size, _d5(x), _d5(y), _d5(out_grads[0]), _d5(in_grads[0]),
                     _geom(p, x.shape, y.shape), mode, include, pv, req[0] == 'add')



def _backward_reads(p):
    """Max pooling finds each window's maximum in x again; avg and sum need only dy;
    lp reads x and y (dx = dy * x |x|^(p-2) / y^(p-1))."""
    return {'max': ('data',), 'avg': (), 'sum': ()}.get(p.pool_type, ('data', 'output'))


register_op(OpDef(
    name='Pooling',
    backward_reads=_backward_reads,
    float_only=True,
    arguments=['data'],
    infer_shape=_infer_shape,
    forward={'cpu': _forward_cpu, 'gpu': _forward_gpu},
    backward={'cpu': _backward_cpu, 'gpu': _backward_gpu},
    params=PoolingParam,
    # MXNet 1.9.1 counts a hidden workspace output for max pooling (JSON node_row_ptr).
    num_hidden_outputs=lambda p: 1 if p.pool_type == 'max' else 0,
    doc=__doc__,
    input_docs={'data': 'Input data (N, C, *spatial).'},
))
