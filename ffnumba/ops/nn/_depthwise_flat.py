"""Depthwise 3x3 stride-1 forward of small planes on the flat NCHW data (no transposes).

A depthwise layer (``num_group == C == num_filter``) whose output plane is its input
plane (3x3, stride 1, "same" padding, any dilation), on planes of
:data:`FLAT_MIN_POSITIONS` to :data:`FLAT_MAX_POSITIONS` positions (MobileNet's 8x8 and
4x4 layers): output ``p`` of channel ``c`` reads its input plane shifted by one flat
offset per tap (``_im2col_flat._shifts``), with a select against the tap's mask where
the window reaches the padding (``w * 0`` is added there, as the phase-major planes of
:mod:`._depthwise` add the zero border; a NaN or inf in the data reaches the outputs
im2col gives). One vectorised loop per channel over its plane replaces the
channels-last kernel's two transposes per sample (1 thread, batch 32, fused BN + relu:
256 channels of 8x8 0.54 vs 0.95 ms, 512 of 4x4 0.36 vs 0.44 ms). Smaller planes run
scalar (2x2: the channels-last kernel is faster), larger ones measured no faster than
the phase-major planes.
"""
import numpy as np
from numba import njit

from ..templates import JIT
from ._conv_epilogue import apply_block
from ._im2col_flat import _shifts

__all__ = ['FLAT_MIN_POSITIONS', 'FLAT_MAX_POSITIONS', 'runs', 'margin', 'shifts', 'flat_fwd']

U = np.uint64

#: Planes (positions) of the stride-1 3x3 layers run by :func:`flat_fwd`: smaller ones
#: run scalar loops, larger ones the phase-major planes faster (measured, one thread).
FLAT_MIN_POSITIONS, FLAT_MAX_POSITIONS = 16, 64


def margin(g, W):
    """Zeros :func:`flat_fwd` keeps on each side of a sample: its largest tap offset."""
    return max(g[7] * W + g[8], ((g[1] - 1) * g[10] - g[7]) * W + (g[2] - 1) * g[11] - g[8])


def runs(dims, g, F):
    """Whether :func:`flat_fwd` runs the forward: 2-D, 3x3, stride 1, ``M == 1``, an
    output plane of the input's size, of :data:`FLAT_MIN_POSITIONS` to
    :data:`FLAT_MAX_POSITIONS` positions."""
    return (dims[2] == 1 and g[0] == 1 and g[1] == 3 and g[2] == 3 and g[4] == 1 and g[5] == 1
            and F == dims[1] and g[13] == dims[3] and g[14] == dims[4]
            and FLAT_MIN_POSITIONS <= g[13] * g[14] <= FLAT_MAX_POSITIONS)


def shifts(dims, g):
    """``(offs, mask)`` of :func:`flat_fwd`: per tap ``k``, its flat input offset and
    ``mask[k * P + p]``, 1 where output ``p`` reads a real element (not padding)."""
    offs, mask = _shifts(dims, g)
    return offs, mask.reshape(-1)


@njit(**JIT)
def flat_fwd(xf, dims, w2, bias, has_bias, mask, offs, yf, xs, nlo, nhi, ep, rep, ep_mode):
    """Forward of a 3x3 stride-1 layer whose output plane is its input plane's size,
    samples ``nlo..nhi``, on the flat NCHW data (no transposes, no padded planes):
    output ``p`` of channel ``c`` is ``bias + sum_k w[c, k] * x[c*P + p + offs[k]]`` over
    the taps inside the plane (``mask``; the others add ``w * 0``), one loop over the
    plane per channel. ``xs`` holds the sample with zero margins, so every read is in
    bounds. A fused convolution's epilogue runs on the sample's output while it is in
    cache (``ep=None``: compiled without it)."""
    C, H, W = dims[1], dims[3], dims[4]
    P = H * W
    L = C * P
    up = U(P)
    mg = (xs.size - L) // 2
    xs[:mg] = 0
    xs[mg + L:] = 0
    z = yf.dtype.type(0)
    a0, a1, a2 = U(mg + offs[0]), U(mg + offs[1]), U(mg + offs[2])
    a3, a4, a5 = U(mg + offs[3]), U(mg + offs[4]), U(mg + offs[5])
    a6, a7, a8 = U(mg + offs[6]), U(mg + offs[7]), U(mg + offs[8])
    for n in range(nlo, nhi):
        src = U(n * L)
        for i in range(U(L)):
            xs[U(mg) + i] = xf[src + i]
        for c in range(C):
            w0, w1, w2_, w3, w4 = w2[c, 0], w2[c, 1], w2[c, 2], w2[c, 3], w2[c, 4]
            w5, w6, w7, w8 = w2[c, 5], w2[c, 6], w2[c, 7], w2[c, 8]
            b = bias[c] if has_bias else z
            cb = U(c * P)
            yb = src + cb
            for p in range(up):       # loads first, then selects: no branch, so it vectorises
                t = cb + p
                x0, x1, x2 = xs[a0 + t], xs[a1 + t], xs[a2 + t]
                x3, x4, x5 = xs[a3 + t], xs[a4 + t], xs[a5 + t]
                x6, x7, x8 = xs[a6 + t], xs[a7 + t], xs[a8 + t]
                v = b
                v = v + w0 * (x0 if mask[p] else z)
                v = v + w1 * (x1 if mask[up + p] else z)
                v = v + w2_ * (x2 if mask[2 * up + p] else z)
                v = v + w3 * (x3 if mask[3 * up + p] else z)
                v = v + w4 * (x4 if mask[4 * up + p] else z)
                v = v + w5 * (x5 if mask[5 * up + p] else z)
                v = v + w6 * (x6 if mask[6 * up + p] else z)
                v = v + w7 * (x7 if mask[7 * up + p] else z)
                v = v + w8 * (x8 if mask[8 * up + p] else z)
                yf[yb + p] = v
        if ep is not None:          # numba prunes this for a plain convolution
            apply_block(yf, n * L, C, P, 0, ep, rep, ep_mode)
