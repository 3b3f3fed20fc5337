"""Depthwise 3x3 forward of small planes on the flat NCHW data (no transposes).

A depthwise layer (``num_group == C == num_filter``) with an output plane of
:data:`FLAT_MIN_POSITIONS` to :data:`FLAT_MAX_POSITIONS` positions (MobileNet's 8x8
and 4x4 layers), either stride 1 with the output plane the input's ("same" padding,
any dilation) or stride 2, pad 1 on an even plane: output ``p`` of channel ``c``
reads, per tap, one run of a flat array shifted by a constant offset, with a select
against the tap's mask where the window reaches the padding (``w * 0`` is added
there, as the phase-major planes of :mod:`._depthwise` add the zero border; a NaN or
inf in the data reaches the outputs im2col gives). At stride 1 the array is the
sample itself (offsets ``_im2col_flat._shifts``); at stride 2 its four row/column
phase planes, each the size of the output plane. One vectorised loop per channel
over its plane replaces the channels-last kernel's two transposes per sample (1
thread, batch 32, fused BN + relu, loaded: 256 channels of 8x8 0.49 vs 0.95 ms, 512 of
4x4 0.33 vs 0.44 ms, 128 of 16x16 at stride 2 0.65 vs 0.93 ms). Smaller output planes
run scalar, larger ones measured no faster than the phase-major planes. 2x2 outputs
of 2x2 (stride 1) and 4x4 (stride 2) planes, MobileNet's last layers, take
:func:`tiny_fwd`: the taps written out, one loop over the channels (960 channels of
2x2: 0.12 vs 0.20 ms, 576 of 4x4 at stride 2: 0.11 vs 0.25 ms, fused, as above).
"""
import numpy as np
from numba import njit

from ..templates import JIT
from ._conv_epilogue import apply_block
from ._im2col_flat import _shifts

__all__ = ['FLAT_MIN_POSITIONS', 'FLAT_MAX_POSITIONS', 'runs', 'scratch_size', 'shifts',
           'flat_fwd', 'tiny', 'tiny_fwd']

U = np.uint64

#: Planes (positions) of the stride-1 3x3 layers run by :func:`flat_fwd`: smaller ones
#: run scalar loops, larger ones the phase-major planes faster (measured, one thread).
FLAT_MIN_POSITIONS, FLAT_MAX_POSITIONS = 16, 64


def runs(dims, g, F):
    """Whether :func:`flat_fwd` runs the forward: 2-D, 3x3, ``M == 1``, an output plane of
    :data:`FLAT_MIN_POSITIONS` to :data:`FLAT_MAX_POSITIONS` positions, and either stride 1
    with the output plane the input's size, or stride 2, pad 1, dilate 1 on an even plane."""
    if not (dims[2] == 1 and g[0] == 1 and g[1] == 3 and g[2] == 3 and F == dims[1]
            and FLAT_MIN_POSITIONS <= g[13] * g[14] <= FLAT_MAX_POSITIONS):
        return False
    if g[4] == 1 and g[5] == 1:
        return g[13] == dims[3] and g[14] == dims[4]
    return (g[4] == 2 and g[5] == 2 and g[7] == 1 and g[8] == 1 and g[10] == 1 and g[11] == 1
            and dims[3] % 2 == 0 and dims[4] % 2 == 0)


def scratch_size(dims, g):
    """Elements of :func:`flat_fwd`'s ``xs``."""
    C, H, W = dims[1], dims[3], dims[4]
    if g[4] == 1:
        return C * H * W + 2 * _margin(g, W)
    mg = g[14] + 1
    return 4 * (C * g[13] * g[14] + mg) + mg


def _margin(g, W):
    return max(g[7] * W + g[8], ((g[1] - 1) * g[10] - g[7]) * W + (g[2] - 1) * g[11] - g[8])


def shifts(dims, g):
    """``(offs, mask)`` of :func:`flat_fwd`: per tap ``k``, where its input run starts in
    ``xs`` (``offs[9]``: where the sample's copy starts) and ``mask[k * P + p]``, 1 where
    output ``p`` reads a real element (not padding)."""
    if g[4] == 1:
        rel, mask = _shifts(dims, g)
        mg = _margin(g, dims[4])
        return np.append(rel + mg, mg), mask.reshape(-1)
    OH, OW = g[13], g[14]
    P = OH * OW
    L = dims[1] * P
    mg = OW + 1
    offs = np.empty(10, np.int64)
    mask = np.ones((9, OH, OW), np.uint8)
    for kh in range(3):
        for kw in range(3):
            rp, dr = (1, -1) if kh == 0 else (0, 0) if kh == 1 else (1, 0)
            cp, dc = (1, -1) if kw == 0 else (0, 0) if kw == 1 else (1, 0)
            k = kh * 3 + kw
            offs[k] = mg + (2 * rp + cp) * (L + mg) + dr * OW + dc
            if dr:
                mask[k, 0, :] = 0
            if dc:
                mask[k, :, 0] = 0
    offs[9] = mg
    return offs, mask.reshape(-1)


@njit(**JIT)
def flat_fwd(xf, dims, w2, bias, has_bias, mask, offs, yf, xs, nlo, nhi, ep, rep, ep_mode):
    """Forward of samples ``nlo..nhi`` on the flat NCHW data (no transposes, no padded
    planes): output ``p`` of channel ``c`` is ``bias + sum_k w[c, k] * xs[offs[k] + c*P + p]``
    over the taps inside the plane (``mask``; the others add ``w * 0``), one loop over the
    plane per channel, where ``xs`` holds the sample: at stride 1 a copy with margins
    (``offs``: :func:`shifts`), at stride 2 its four row/column phase planes
    (:func:`phases`). Every read is in bounds. A fused convolution's epilogue runs on
    the sample's output while it is in cache (``ep=None``: compiled without it)."""
    C, H, W = dims[1], dims[3], dims[4]
    P = mask.size // 9
    L = C * P
    Lx = C * H * W
    up = U(P)
    z = yf.dtype.type(0)
    a0, a1, a2 = U(offs[0]), U(offs[1]), U(offs[2])
    a3, a4, a5 = U(offs[3]), U(offs[4]), U(offs[5])
    a6, a7, a8 = U(offs[6]), U(offs[7]), U(offs[8])
    split = L != Lx           # stride 2: four phase planes of the output's size
    mg = offs[9]
    for n in range(nlo, nhi):
        src = U(n * Lx)
        if split:
            _split4(xf, src, C * (H // 2), W, xs, mg, L)
        else:
            for i in range(U(Lx)):
                xs[U(mg) + i] = xf[src + i]
        for c in range(C):
            w0, w1, w2_, w3, w4 = w2[c, 0], w2[c, 1], w2[c, 2], w2[c, 3], w2[c, 4]
            w5, w6, w7, w8 = w2[c, 5], w2[c, 6], w2[c, 7], w2[c, 8]
            b = bias[c] if has_bias else z
            cb = U(c * P)
            yb = U(n * L) + cb
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


@njit(**JIT)
def _split4(xf, src, R, W, xs, mg, L):
    """The four phase planes of a sample of ``R = C*H/2`` row pairs of width ``W`` (even):
    phase ``(rp, cp)`` (row, column parity) at ``xs[mg + (2*rp + cp) * (L + mg):]``."""
    OW = U(W // 2)
    st = U(L + mg)
    b00 = U(mg)
    b01, b10, b11 = b00 + st, b00 + U(2) * st, b00 + U(3) * st
    for j in range(U(R)):
        s0 = src + U(2) * j * U(W)
        s1 = s0 + U(W)
        d = j * OW
        for q in range(OW):
            xs[b00 + d + q] = xf[s0 + U(2) * q]
            xs[b01 + d + q] = xf[s0 + U(2) * q + U(1)]
            xs[b10 + d + q] = xf[s1 + U(2) * q]
            xs[b11 + d + q] = xf[s1 + U(2) * q + U(1)]


def tiny(dims, g, F):
    """Whether :func:`tiny_fwd` runs the forward: 2-D, 3x3, pad 1, dilate 1, ``M == 1``,
    a 2x2 output of a 2x2 plane at stride 1 or of a 4x4 plane at stride 2."""
    s = g[4]
    return (dims[2] == 1 and g[0] == 1 and g[1] == 3 and g[2] == 3 and F == dims[1]
            and g[5] == s and g[7] == 1 and g[8] == 1 and g[10] == 1 and g[11] == 1
            and g[13] == 2 and g[14] == 2 and s in (1, 2) and dims[3] == dims[4] == 2 * s)


@njit(**JIT)
def tiny_fwd(xf, wt, bias, has_bias, yf, C, s2, nlo, nhi, ep, rep, ep_mode):
    """Forward of samples ``nlo..nhi`` of a :func:`tiny` layer (MobileNet's last planes):
    each channel's four outputs written out tap by tap from its 4 (or 16) inputs, one
    vectorised loop over the channels (``wt``: the ``(9, C)`` weights, flat). Taps on
    the padding are skipped (as the channels-last kernel does)."""
    uc = U(C)
    z = yf.dtype.type(0)
    HW = U(16) if s2 else U(4)
    for n in range(nlo, nhi):
        xb = U(n) * uc * HW
        yb = U(n) * uc * U(4)
        for c in range(uc):
            w0, w1, w2, w3 = wt[c], wt[uc + c], wt[U(2) * uc + c], wt[U(3) * uc + c]
            w4, w5, w6 = wt[U(4) * uc + c], wt[U(5) * uc + c], wt[U(6) * uc + c]
            w7, w8 = wt[U(7) * uc + c], wt[U(8) * uc + c]
            b = bias[c] if has_bias else z
            i = xb + HW * c
            o = yb + U(4) * c
            if s2:          # x[r, q] = xf[i + 4r + q]; output (oh, ow) reads rows 2oh-1..2oh+1
                x00, x01, x02, x03 = xf[i], xf[i + U(1)], xf[i + U(2)], xf[i + U(3)]
                x10, x11, x12, x13 = xf[i + U(4)], xf[i + U(5)], xf[i + U(6)], xf[i + U(7)]
                x20, x21, x22, x23 = xf[i + U(8)], xf[i + U(9)], xf[i + U(10)], xf[i + U(11)]
                x31, x32, x33 = xf[i + U(13)], xf[i + U(14)], xf[i + U(15)]
                x30 = xf[i + U(12)]
                yf[o] = b + w4 * x00 + w5 * x01 + w7 * x10 + w8 * x11
                yf[o + U(1)] = (b + w3 * x01 + w4 * x02 + w5 * x03 + w6 * x11 + w7 * x12
                                + w8 * x13)
                yf[o + U(2)] = (b + w1 * x10 + w2 * x11 + w4 * x20 + w5 * x21 + w7 * x30
                                + w8 * x31)
                yf[o + U(3)] = (b + w0 * x11 + w1 * x12 + w2 * x13 + w3 * x21 + w4 * x22
                                + w5 * x23 + w6 * x31 + w7 * x32 + w8 * x33)
            else:
                x0, x1, x2, x3 = xf[i], xf[i + U(1)], xf[i + U(2)], xf[i + U(3)]
                yf[o] = b + w4 * x0 + w5 * x1 + w7 * x2 + w8 * x3
                yf[o + U(1)] = b + w3 * x0 + w4 * x1 + w6 * x2 + w7 * x3
                yf[o + U(2)] = b + w1 * x0 + w2 * x1 + w4 * x2 + w5 * x3
                yf[o + U(3)] = b + w0 * x0 + w1 * x1 + w3 * x2 + w4 * x3
        if ep is not None:          # numba prunes this for a plain convolution
            apply_block(yf, n * C * 4, C, 4, 0, ep, rep, ep_mode)
