"""Depthwise convolution (``num_group == C``, ``num_filter = M * C``) as direct loops, no im2col.

A depthwise layer (MobileNet, Howard et al. 2017) filters each channel with its own
kernels: output channel ``f = c * M + m`` (channel multiplier ``M``) is
``y[n, f, o] = sum_k w[f, k] * x[n, c, o*s - p + k*d] (+ b[f])``. Through the generic
im2col path it costs one tiny GEMM per channel and chunk, where BLAS call overhead
dominates. Two direct kernels replace it for 1-D and 2-D data:

* **planes** (outputs of more than :data:`CL_MAX_POSITIONS` positions): each input
  plane is copied once into a zero-bordered scratch plane whose rows are stored
  *stride-phase major* (padded column ``j`` at ``(j % s) * L + j // s``), so every tap
  of every stride and dilation reads a contiguous run of the row and the inner loops
  over output columns vectorise; 3x3 kernels sum their nine taps (and the nine weight
  gradient sums) in one pass per row. At stride 1 the data gradient is a correlation
  of the zero-bordered head gradient with the flipped filter; 3x3 kernels at stride 2
  write each row of a second (phase-major) scratch plane once from the one or two
  head-gradient rows that reach it (:func:`._depthwise_rows._dx_s2`; 1 thread, batch
  32, 64 channels of 32x32: 2.0 -> 0.85 ms, MXNet 1.9.1 takes 1.76 ms for both
  gradients); other strides accumulate tap by tap into it. That plane is copied back
  without its border (at stride 2 on even widths through one interleaving loop:
  2.0 -> 1.2 ms for the same data gradient, before the row kernel).
* **channels-last** (small outputs, ``M == 1``: MobileNet's 4x4 and 2x2 planes, where a
  row is too short to vectorise): each sample is transposed to ``(H*W, C)`` and every
  output position and tap is one vector operation over the channels. The forwards of
  3x3 layers with outputs of 16 to 64 positions (stride 1 "same", or stride 2 pad 1 on
  even planes) run :mod:`._depthwise_flat` instead (no transposes).

Both run on a range of samples with their own scratch, so ``_conv_par.run_split``
splits the batch over threads; each thread writes its own weight-gradient partial
``(F, K)`` and the partials are summed (:func:`forward`, :func:`backward`). 3-D data
keeps the tap-major loops of :func:`dw_forward3d` / :func:`dw_backward3d` (``M == 1``).

Images are flat ``(N, C, D, H, W)`` arrays with the 5-D shape in ``dims`` (see
:func:`_im2col.as5d`); ``g`` is the 15-int geometry of :func:`_im2col.geometry`.
Modes are 0 (null), 1 (write), 2 (add). Non-finite values: a NaN or inf in the data
gives the outputs im2col gives; one in the weight or head gradient can reach fewer
border positions than through im2col (channels-last and 3-D kernels skip the taps that
fall on padding, where im2col multiplies them by zero and gets NaN).
"""
import numpy as np
from numba import njit

from ..templates import JIT
from . import _conv_par as cp
from . import _depthwise_flat as dfl
from ._conv_epilogue import apply_all, apply_channels, apply_row, expand
from ._depthwise3d import dw_backward3d, dw_forward3d
from ._depthwise_rows import U, _dw3x3, _dx_s1, _dx_s2, _fill_plane, _unfill_plane
from ._im2col import _transpose, buffer

__all__ = ['is_depthwise', 'cpu_depthwise', 'forward', 'backward']

#: Largest output plane (positions) run by the channels-last kernels.
CL_MAX_POSITIONS = 64
#: Output elements of the samples a fused forward computes before their epilogue (in cache).
EP_BLOCK = 1 << 17


def is_depthwise(p, data_shape):
    """True when the convolution is depthwise with channel multiplier 1."""
    return p.num_group > 1 and p.num_group == data_shape[1] == p.num_filter


def cpu_depthwise(p, data_shape):
    """True when the CPU direct kernels run it: depthwise, multiplier ``M >= 1`` for
    1-D/2-D data, ``M == 1`` for 3-D."""
    if len(data_shape) == 5:
        return is_depthwise(p, data_shape)
    return p.num_group > 1 and p.num_group == data_shape[1]


# ---------------------------------------------------------------- planes (2-D)

@njit(**JIT)
def _planes_fwd(xf, dims, w, yf, bias, has_bias, g, xp, eo, nlo, nhi, ep, ep_mode):
    """Forward of samples ``nlo..nhi`` with the phase-major scratch plane ``xp`` (``eo``:
    :func:`_fill_plane`'s). A fused convolution's epilogue ``ep_mode``
    (:mod:`._conv_epilogue`) runs on each output plane right after it is computed, in
    cache (``ep=None``: a plain convolution, compiled without it)."""
    C, H, W = dims[1], dims[3], dims[4]
    KH, KW, SH, SW, PH, PW, DH, DW, OH, OW = (g[1], g[2], g[4], g[5], g[7], g[8], g[10],
                                              g[11], g[13], g[14])
    F = w.shape[0]
    M = F // C
    L = -(-(W + 2 * PW) // SW)
    Wp = SW * L
    P = OH * OW
    cols = np.empty(KW, np.int64)
    for kw in range(KW):
        cols[kw] = ((kw * DW) % SW) * L + (kw * DW) // SW
    xp[:] = 0
    for n in range(nlo, nhi):
        for c in range(C):
            _fill_plane(xf, (n * C + c) * H * W, H, W, PH, PW, SW, L, Wp, xp, eo)
            for m in range(M):
                f = c * M + m
                v0 = bias[f] if has_bias else yf.dtype.type(0)
                ybase = (n * F + f) * P
                if KH == 3 and KW == 3:
                    w0, w1, w2 = w[f, 0], w[f, 1], w[f, 2]
                    w3, w4, w5 = w[f, 3], w[f, 4], w[f, 5]
                    w6, w7, w8 = w[f, 6], w[f, 7], w[f, 8]
                    c0 = (0 % SW) * L
                    c1 = (DW % SW) * L + DW // SW
                    c2 = ((2 * DW) % SW) * L + (2 * DW) // SW
                    for oh in range(OH):
                        r0 = oh * SH * Wp
                        r1 = r0 + DH * Wp
                        r2 = r1 + DH * Wp
                        a0, a1, a2 = U(r0 + c0), U(r0 + c1), U(r0 + c2)
                        a3, a4, a5 = U(r1 + c0), U(r1 + c1), U(r1 + c2)
                        a6, a7, a8 = U(r2 + c0), U(r2 + c1), U(r2 + c2)
                        yr = U(ybase + oh * OW)
                        for ow in range(U(OW)):
                            yf[yr + ow] = (v0 + w0 * xp[a0 + ow] + w1 * xp[a1 + ow]
                                           + w2 * xp[a2 + ow] + w3 * xp[a3 + ow]
                                           + w4 * xp[a4 + ow] + w5 * xp[a5 + ow]
                                           + w6 * xp[a6 + ow] + w7 * xp[a7 + ow]
                                           + w8 * xp[a8 + ow])
                    if ep is not None:
                        apply_row(yf, ybase, P, ep, f, ep_mode)
                    continue
                for oh in range(OH):
                    yr = U(ybase + oh * OW)
                    for ow in range(U(OW)):
                        yf[yr + ow] = v0
                    for kh in range(KH):
                        rb = (oh * SH + kh * DH) * Wp
                        for kw in range(KW):
                            src = U(rb + cols[kw])
                            wv = w[f, kh * KW + kw]
                            for ow in range(U(OW)):
                                yf[yr + ow] += wv * xp[src + ow]
                if ep is not None:
                    apply_row(yf, ybase, P, ep, f, ep_mode)


@njit(**JIT)
def _planes_bwd(xf, dims, w, dyf, dxf, dwp, mode_dx, want_dw, g, xp, dxp, eo, dyq, nlo,
                nhi):
    """Backward of samples ``nlo..nhi``: their ``dx`` and ``dwp = sum dy * x`` over them
    (``eo``: :func:`_fill_plane`'s scratch; ``dyq``: :func:`_dx_s2`'s).

    3x3 weight gradients take :func:`_dw3x3`, stride-1 data gradients
    :func:`_dx_s1`, those of 3x3 kernels at stride 2 (dilation 1) :func:`_dx_s2`;
    the tap loop here does the rest (its column offsets computed once per call:
    integer division in it would run per row).
    """
    C, H, W = dims[1], dims[3], dims[4]
    KH, KW, SH, SW, PH, PW, DH, DW, OH, OW = (g[1], g[2], g[4], g[5], g[7], g[8], g[10],
                                              g[11], g[13], g[14])
    F = w.shape[0]
    M = F // C
    L = -(-(W + 2 * PW) // SW)
    Wp = SW * L
    P = OH * OW
    s1 = SH == 1 and SW == 1      # dx gathers from a zero-bordered dy plane in dxp
    k3 = KH == 3 and KW == 3
    taps_dw = want_dw and not k3
    s2 = k3 and SH == 2 and SW == 2 and DH == 1 and DW == 1
    taps_dx = mode_dx != 0 and not s1 and not s2
    cols = np.empty(KW, np.int64)
    for kw in range(KW):
        cols[kw] = ((kw * DW) % SW) * L + (kw * DW) // SW
    xp[:] = 0
    dxp[:] = 0
    dyq[:] = 0
    if want_dw:
        dwp[...] = 0
    for n in range(nlo, nhi):
        for c in range(C):
            xbase = (n * C + c) * H * W
            if want_dw:
                _fill_plane(xf, xbase, H, W, PH, PW, SW, L, Wp, xp, eo)
            if taps_dx:
                dxp[:] = 0
            for m in range(M):
                f = c * M + m
                ybase = (n * F + f) * P
                if want_dw and k3:
                    _dw3x3(dyf, xp, dwp[f], ybase, OH, OW, SH, DH, DW, SW, L, Wp)
                if mode_dx != 0 and s1:
                    _dx_s1(dyf, ybase, OH, OW, w[f], KH, KW, PH, PW, DH, DW, dxp, dxf, xbase,
                           H, W, mode_dx == 2 or m > 0)
                if mode_dx != 0 and s2:
                    _dx_s2(dyf, ybase, OH, OW, w[f], dyq, dxp, PH, H, L, m > 0)
                if not (taps_dw or taps_dx):
                    continue
                for oh in range(OH):
                    yr = U(ybase + oh * OW)
                    for kh in range(KH):
                        rb = (oh * SH + kh * DH) * Wp
                        for kw in range(KW):
                            src = U(rb + cols[kw])
                            k = kh * KW + kw
                            if taps_dw:
                                acc = dwp.dtype.type(0)
                                for ow in range(U(OW)):
                                    acc += dyf[yr + ow] * xp[src + ow]
                                dwp[f, k] += acc
                            if taps_dx:
                                wv = w[f, k]
                                for ow in range(U(OW)):
                                    dxp[src + ow] += wv * dyf[yr + ow]
            if taps_dx or (mode_dx != 0 and s2):
                _unfill_plane(dxp, dxf, xbase, H, W, PH, PW, SW, L, Wp, mode_dx == 2, eo)


@njit(**JIT)
def _cl_fwd(xf, dims, wt, yf, bias, has_bias, g, xt, yt, nlo, nhi, ep, ep_mode):
    """Forward of samples ``nlo..nhi`` on ``(positions, C)`` copies; ``wt`` is ``(K, C)``.

    A fused convolution's epilogue ``ep_mode`` (:mod:`._conv_epilogue`) runs on each
    position's channels in the copy, before it is written back (``ep=None``: a plain
    convolution, compiled without it)."""
    C, H, W = dims[1], dims[3], dims[4]
    KH, KW, SH, SW, PH, PW, DH, DW, OH, OW = (g[1], g[2], g[4], g[5], g[7], g[8], g[10],
                                              g[11], g[13], g[14])
    P = OH * OW
    HW = H * W
    for n in range(nlo, nhi):
        _transpose(xf, n * C * HW, C, HW, xt, 0, False)
        for oh in range(OH):
            for ow in range(OW):
                ob = U((oh * OW + ow) * C)
                if has_bias:
                    for c in range(U(C)):
                        yt[ob + c] = bias[c]
                else:
                    for c in range(U(C)):
                        yt[ob + c] = 0
                for kh in range(KH):
                    ih = oh * SH - PH + kh * DH
                    if ih < 0 or ih >= H:
                        continue
                    for kw in range(KW):
                        iw = ow * SW - PW + kw * DW
                        if iw < 0 or iw >= W:
                            continue
                        ib = U((ih * W + iw) * C)
                        wr = wt[kh * KW + kw]
                        for c in range(U(C)):
                            yt[ob + c] += wr[c] * xt[ib + c]
                if ep is not None:          # numba prunes this for a plain convolution
                    apply_channels(yt, (oh * OW + ow) * C, C, ep, ep_mode)
        _transpose(yt, 0, P, C, yf, n * C * P, False)


@njit(**JIT)
def _cl_bwd(xf, dims, wt, dyf, dxf, dwp, mode_dx, want_dw, g, xt, dyt, dxt, dwt, nlo, nhi):
    """Backward of samples ``nlo..nhi`` on ``(positions, C)`` copies; ``dwp`` is ``(C, K)``."""
    C, H, W = dims[1], dims[3], dims[4]
    KH, KW, SH, SW, PH, PW, DH, DW, OH, OW = (g[1], g[2], g[4], g[5], g[7], g[8], g[10],
                                              g[11], g[13], g[14])
    P = OH * OW
    HW = H * W
    K = KH * KW
    if want_dw:
        dwt[:] = 0
    for n in range(nlo, nhi):
        _transpose(dyf, n * C * P, C, P, dyt, 0, False)
        if want_dw:
            _transpose(xf, n * C * HW, C, HW, xt, 0, False)
        if mode_dx != 0:
            dxt[:] = 0
        for oh in range(OH):
            for ow in range(OW):
                ob = U((oh * OW + ow) * C)
                for kh in range(KH):
                    ih = oh * SH - PH + kh * DH
                    if ih < 0 or ih >= H:
                        continue
                    for kw in range(KW):
                        iw = ow * SW - PW + kw * DW
                        if iw < 0 or iw >= W:
                            continue
                        ib = U((ih * W + iw) * C)
                        k = kh * KW + kw
                        kb = U(k * C)
                        wr = wt[k]
                        if want_dw and mode_dx != 0:    # one pass: each dy element read once
                            for c in range(U(C)):
                                d = dyt[ob + c]
                                dwt[kb + c] += d * xt[ib + c]
                                dxt[ib + c] += wr[c] * d
                        elif want_dw:
                            for c in range(U(C)):
                                dwt[kb + c] += dyt[ob + c] * xt[ib + c]
                        elif mode_dx != 0:
                            for c in range(U(C)):
                                dxt[ib + c] += wr[c] * dyt[ob + c]
        if mode_dx != 0:
            _transpose(dxt, 0, HW, C, dxf, n * C * HW, mode_dx == 2)
    if want_dw:
        for c in range(C):
            for k in range(K):
                dwp[c, k] = dwt[k * C + c]


# ---------------------------------------------------------------- drivers

def _kind(dims, g, F):
    """``'3d'``, ``'cl'`` (channels-last, small planes) or ``'planes'``."""
    if dims[2] > 1 or g[0] > 1:
        return '3d'
    if F == dims[1] and g[13] * g[14] <= CL_MAX_POSITIONS:
        return 'cl'
    return 'planes'


def _scratch(state, dt, kind, dims, g, nt, backward):
    """Per-thread tuples of scratch arrays (views of one :func:`._im2col.buffer` array)."""
    C, H, W = dims[1], dims[3], dims[4]
    if kind == 'planes':      # padded input plane (and dx plane / bordered dy plane)
        size = (H + 2 * g[7]) * g[5] * -(-(W + 2 * g[8]) // g[5])
        if backward:
            size = max(size, (g[13] + 2 * (g[1] - 1) * g[10]) * (g[14] + 2 * (g[2] - 1) * g[11]))
        sizes = ((size, size, H * W, (g[13] + 2) * (g[14] + 2)) if backward
                 else (size, H * W))
    elif kind == 'flat':      # the sample with zero margins
        sizes = (dfl.scratch_size(dims, g),)
    elif kind == 'cl':        # x, y (dy) transposed; backward: dx transposed, dw (K, C)
        sizes = (H * W * C, g[13] * g[14] * C) + ((H * W * C, g[1] * g[2] * C) if backward
                                                  else ())
    else:
        return [()] * nt
    one = sum(sizes)
    buf = buffer(state, 'dw_' + kind, nt * one, dt)
    ends = np.cumsum((0,) + sizes)
    return [tuple(buf[t * one + ends[i]:t * one + ends[i + 1]] for i in range(len(sizes)))
            for t in range(nt)]


def _ranges(N, nt):
    return [(N * t // nt, N * (t + 1) // nt) for t in range(nt)]


def forward(state, x, w, y, bias, has_bias, g, ep=None, ep_mode=0):
    """``y = depthwise(x, w) (+ bias)``, the batch split over :func:`_conv_par.split_threads`.

    ``state``: the node state keeping the scratch; x ``(N, C, *spatial)``; w ``(F, 1,
    *kernel)``, ``F = M * C``; y ``(N, F, *out_spatial)``, written; bias ``(F,)``, read only
    when ``has_bias``; g: :func:`_im2col.geometry`. A fused convolution's epilogue
    ``ep_mode`` (:mod:`._conv_epilogue`) runs on blocks of :data:`EP_BLOCK` output elements.
    """
    from ._im2col import as5d
    dims = as5d(x.shape)
    F = w.shape[0]
    kind = 'flat' if dfl.runs(dims, g, F) else 'tiny' if dfl.tiny(dims, g, F) else \
        _kind(dims, g, F)
    nt = cp.split_threads(dims[0])
    scratch = _scratch(state, x.dtype, kind, dims, g, nt, False)
    xf, yf, w2 = x.reshape(-1), y.reshape(-1), w.reshape(F, -1)
    wt = np.ascontiguousarray(w2.T) if kind in ('cl', 'tiny') else w2
    ranges = _ranges(dims[0], nt)
    y3 = y.reshape(dims[0], F, -1)
    blocks = ep_mode and kind == '3d'   # the epilogue after blocks of samples (others: inside)
    step = max(1, EP_BLOCK // max(1, y3.shape[1] * y3.shape[2])) if blocks else dims[0]
    rep = expand(ep, F, y3.shape[2]) if blocks or (ep_mode and kind in ('flat', 'tiny')) \
        else None
    if kind == 'flat':
        offs, mask = dfl.shifts(dims, g)

    def part(t):
        for lo in range(ranges[t][0], ranges[t][1], step):
            hi = min(ranges[t][1], lo + step)
            if kind == 'planes':
                _planes_fwd(xf, dims, w2, yf, bias, has_bias, g, scratch[t][0], scratch[t][1],
                            lo, hi, ep if ep_mode else None, ep_mode)
            elif kind == 'cl':
                _cl_fwd(xf, dims, wt, yf, bias, has_bias, g, scratch[t][0], scratch[t][1], lo,
                        hi, ep if ep_mode else None, ep_mode)
            elif kind == 'tiny':
                dfl.tiny_fwd(xf, wt.reshape(-1), bias, has_bias, yf, F, g[4] == 2, lo, hi,
                             ep if ep_mode else None, rep, ep_mode)
            elif kind == 'flat':
                dfl.flat_fwd(xf, dims, w2, bias, has_bias, mask, offs, yf, scratch[t][0], lo, hi,
                             ep if ep_mode else None, rep, ep_mode)
            else:
                dw_forward3d(xf, dims, w2, yf, bias, has_bias, g, lo, hi)
            if blocks:          # (channels-last: applied inside)
                apply_all(y3[lo:hi].reshape(-1), F, y3.shape[2], ep, rep, ep_mode)
    if nt == 1:
        part(0)
    else:
        cp.run_split(part, nt)


def backward(state, x, w, dy, dx, dw, mode_dx, mode_dw, g):
    """Data and weight gradients of :func:`forward`, the batch split over threads.

    ``dx`` (like ``x``) is written (``mode_dx`` 1) or added to (2) or left
    alone (0, pass None); ``dw`` (like ``w``) likewise with ``mode_dw``: the
    threads' partial sums ``(F, K)`` are added up and then stored.
    """
    from ._im2col import as5d
    dims = as5d(x.shape)
    F = w.shape[0]
    kind = _kind(dims, g, F)
    nt = cp.split_threads(dims[0])
    scratch = _scratch(state, x.dtype, kind, dims, g, nt, True)
    xf, dyf, w2 = x.reshape(-1), dy.reshape(-1), w.reshape(F, -1)
    dxf = dx.reshape(-1) if mode_dx else xf[:1]
    want_dw = mode_dw != 0
    parts = buffer(state, 'dw_parts', nt * w2.size, x.dtype).reshape((nt,) + w2.shape)
    wt = np.ascontiguousarray(w2.T) if kind == 'cl' else w2
    ranges = _ranges(dims[0], nt)

    def part(t):
        lo, hi = ranges[t]
        if kind == 'planes':
            _planes_bwd(xf, dims, w2, dyf, dxf, parts[t], mode_dx, want_dw, g,
                        scratch[t][0], scratch[t][1], scratch[t][2], scratch[t][3], lo, hi)
        elif kind == 'cl':
            s = scratch[t]
            _cl_bwd(xf, dims, wt, dyf, dxf, parts[t], mode_dx, want_dw, g, s[0], s[1],
                    s[2], s[3], lo, hi)
        else:
            dw_backward3d(xf, dims, w2, dyf, dxf, parts[t], mode_dx, want_dw, g, lo, hi)
    if nt == 1:
        part(0)
    else:
        cp.run_split(part, nt)
    if want_dw:
        total = parts[0] if nt == 1 else parts.sum(axis=0)
        d2 = dw.reshape(w2.shape)
        if mode_dw == 1:
            d2[...] = total
        else:
            d2 += total
