"""Convolutions on small planes by taps: one GEMM per kernel tap over the outputs it reaches.

On a small plane most of im2col's work is padding: a 3x3 kernel padded by 1
on a 4x4 plane reaches the input with 100 of its 144 (tap, output) pairs, on
a 2x2 plane with 16 of 36, and a 5x5 kernel padded by 2 on a 4x4 plane with
196 of 400. im2col copies zeros for the rest and multiplies them. Here the
data of a chunk of ``nb`` samples is turned once into the matrix
``X[(ih*W + iw)*nb + b, c] = x[n0 + b, c, ih, iw]``, and the output is
accumulated in ``Y[(oh*OW + ow)*nb + b, f]``. For tap ``(kh, kw)`` the
outputs it reaches form a rectangle ``oh0..oh1 x ow0..ow1``, and their
inputs the same rectangle shifted by ``(kh - ph, kw - pw)``, so each output row of
it is one contiguous block of ``Y`` rows and each input row one of ``X``::

    Y[block] += X[shifted block] @ Wt[k]^T        Wt[k] = w[:, :, kh, kw]   (F, C)

one GEMM per tap and output row, or one per tap when its rectangle spans whole rows
(``W == OW`` and ``kw == pw``: the middle column of a same-padded kernel).
Only the pairs that reach the input are multiplied, as MKL-DNN's direct
convolution does. The gradients run the same blocks transposed::

    dX[shifted block] += dY[block] @ Wt[k]        dWt[k] += dY[block]^T @ X[shifted block]

and ``dx``, ``y`` are turned back into NCHW (``y`` with its bias and a fused
epilogue, :mod:`._conv_epilogue`), ``dWt`` into ``(F, C, kh, kw)``.

Used by :mod:`.convolution` for 2-D, stride-1, undilated, one-group
convolutions where the tap pairs that reach the input are at most
:data:`MAX_REACH` of im2col's (:func:`applies`), with at least :data:`MIN_CHANNELS`
input channels (each GEMM's inner dimension). Results equal im2col's up to float
rounding (the products are summed in another order); an input, weight or
head gradient holding an inf or NaN runs im2col, whose padded ``0 * inf``
gives NaN where the skipped pairs give none. By default only calls that run
on one thread take the taps (:func:`.convolution._use_taps`); with
``FFNUMBA_CONV_TAPS=2`` split calls do too: several threads split the batch as
:mod:`._conv_par` does (each thread its own chunks and its own weight gradient,
summed in thread order) or, for layers wide enough (:func:`by_channels`), the
filters and input channels.
"""
import os

import numpy as np
from numba import njit

from ...blas_threads import numba_blas_single_thread
from ...jit import JIT
from ...thread_pool import SPLIT_MIN_ELEMS, split_range
from .._gemm import gemm
from . import _im2col as ic
from ._conv_epilogue import apply_block, expand
from ._conv_par import run_split, split_threads

__all__ = ['applies', 'by_channels', 'enabled', 'threaded', 'reach', 'relayout', 'forward', 'backward',
           'forward_range', 'backward_range', 'MAX_REACH', 'MIN_CHANNELS', 'SPLIT_MIN_WIDTH']

#: Largest share of im2col's (tap, output) pairs that reach the input for which the
#: taps run (batch 32, one thread, float32; see :func:`applies`).
MAX_REACH = 0.72
#: Fewest input channels: each tap's GEMM has inner dimension C.
MIN_CHANNELS = 16
#: Fewest filters and input channels per thread for :func:`by_channels`.
SPLIT_MIN_WIDTH = 32
#: Target elements of one chunk's ``X`` plus ``Y`` (or ``dY`` plus ``dX``).
CHUNK_ELEMS = 1 << 20


def enabled():
    """Whether the taps may run: ``FFNUMBA_CONV_TAPS`` is not ``0`` (read per call)."""
    return os.environ.get('FFNUMBA_CONV_TAPS', '1').strip() != '0'


def threaded():
    """Whether calls split over several threads take the taps too: ``FFNUMBA_CONV_TAPS=2``."""
    return os.environ.get('FFNUMBA_CONV_TAPS', '1').strip() == '2'


def reach(i, o, k, p):
    """``(tap, output)`` pairs along one dim that land inside an input of size ``i``.

    Output ``o_`` and tap ``t`` read input ``o_ - p + t`` (stride 1, dilation 1).
    """
    return sum(max(0, min(o, i + p - t) - max(0, p - t)) for t in range(k))


def applies(kernel, stride, pad, dilate, groups, xshape, yshape):
    """Whether the taps run this convolution: 2-D, stride 1, dilate 1, one group, at
    least :data:`MIN_CHANNELS` input channels, and at most :data:`MAX_REACH` of
    im2col's pairs reaching the input (4x4 planes with a same-padded 3x3 kernel:
    0.69; 2x2: 0.44; 4x4 with a 5x5: 0.49; 8x8 with a 3x3: 0.84, im2col).

    Parameters
    ----------
    kernel, stride, pad, dilate : tuple of int
        The spatial parameters, filled (:func:`.convolution.spatial_params`).
    groups : int
    xshape, yshape : tuple of int
        ``(N, C, H, W)`` and ``(N, F, OH, OW)``.
    """
    if (len(xshape) != 4 or tuple(stride) != (1, 1) or tuple(dilate) != (1, 1) or groups != 1
            or xshape[1] < MIN_CHANNELS):
        return False
    (kh, kw), (ph, pw) = kernel, pad
    (H, W), (OH, OW) = xshape[2:], yshape[2:]
    pairs = reach(H, OH, kh, ph) * reach(W, OW, kw, pw)
    return pairs <= MAX_REACH * kh * kw * OH * OW


@njit(inline='always', **JIT)   # no compile of its own (cold start)
def _taps(X, Y, wt, dwt, nb, geo, op, f0, f1, c0, c1):
    """Every tap's GEMMs on one chunk, on filters ``f0..f1`` or input channels ``c0..c1``:
    ``op`` 0 ``Y += X Wt[:, f0:f1]^T`` (``Y`` that range's columns), 1 ``X += Y Wt[:, :, c0:c1]``
    (``X`` that range's columns), 2 ``dWt[:, f0:f1] += Y[:, f0:f1]^T X`` (``X`` ``(H*W*nb, C)``,
    ``Y`` ``(OH*OW*nb, F)`` unless said)."""
    H, W, OH, OW, KH, KW, PH, PW = geo
    for kh in range(KH):
        oh0, oh1 = max(0, PH - kh), min(OH, H + PH - kh)
        for kw in range(KW):
            ow0, ow1 = max(0, PW - kw), min(OW, W + PW - kw)
            if oh1 <= oh0 or ow1 <= ow0:
                continue
            k = kh * KW + kw
            iw0 = ow0 - PW + kw
            whole = ow0 == 0 and ow1 == OW and iw0 == 0 and W == OW
            nrow = 1 if whole else oh1 - oh0
            m = ((oh1 - oh0) * OW if whole else ow1 - ow0) * nb
            for r in range(nrow):
                oh = oh0 + r
                ya = (oh * OW + ow0) * nb
                xa = ((oh - PH + kh) * W + iw0) * nb
                xs, ys = X[xa:xa + m], Y[ya:ya + m]
                if op == 0:
                    gemm(1.0, xs, wt[k, f0:f1].T, 1.0, ys)
                elif op == 1:
                    gemm(1.0, ys, wt[k, :, c0:c1], 1.0, xs)
                else:
                    gemm(1.0, ys[:, f0:f1].T, xs, 1.0, dwt[k, f0:f1])


@njit(inline='always', **JIT)   # no compile of its own (cold start)
def _gather(src, n0, nb, R, P, M):
    """``M[p*nb + b, r] = src[((n0 + b)*R + r)*P + p]``: an ``(nb, R, P)`` block as rows."""
    for b in range(nb):
        for r in range(R):
            s = ((n0 + b) * R + r) * P
            for p in range(P):
                M[p * nb + b, r] = src[s + p]


@njit(**JIT)
def forward_range(xf, dims, wt, y, bias, has_bias, xbuf, ybuf, nbmax, geo, nlo, nhi, f0, f1,
                  ep, ep_mode):
    """``y = conv(x, w) (+ bias)`` on samples ``nlo..nhi`` and filters ``f0..f1`` by taps,
    each output sample followed by the epilogue ``ep_mode`` (:mod:`._conv_epilogue`; 0 none).

    ``xf``: flat ``(N, C, H, W)`` (``dims``); ``wt``: ``(KH*KW, F, C)``, ``wt[kh*KW + kw]
    = w[:, :, kh, kw]``; ``y``: ``(N, F, OH*OW)``; ``xbuf`` / ``ybuf``: scratch of at
    least ``H*W*nbmax*C`` / ``OH*OW*nbmax*(f1 - f0)`` elements; ``geo``: ``(H, W, OH, OW,
    KH, KW, PH, PW)``.
    """
    C = dims[1]
    F, OP = y.shape[1], y.shape[2]
    FT = f1 - f0
    H, W, OH, OW = geo[0], geo[1], geo[2], geo[3]
    if ep is None:              # a plain convolution: numba prunes the epilogue code
        rep = ep
    else:
        rep = expand(ep, F, OP)
    for n0 in range(nlo, nhi, nbmax):
        nb = min(nbmax, nhi - n0)
        X = xbuf[:H * W * nb * C].reshape((H * W * nb, C))
        Y = ybuf[:OH * OW * nb * FT].reshape((OH * OW * nb, FT))
        _gather(xf, n0, nb, C, H * W, X)
        Y[:] = 0
        _taps(X, Y, wt, wt, nb, geo, 0, f0, f1, 0, C)
        for b in range(nb):
            yb = y[n0 + b]
            for p in range(OP):       # Y's rows read whole; the sample's block stays in cache
                row = Y[p * nb + b]
                if has_bias:
                    for f in range(FT):
                        yb[f0 + f, p] = row[f] + bias[f0 + f]
                else:
                    for f in range(FT):
                        yb[f0 + f, p] = row[f]
            if ep is not None:
                apply_block(yb.reshape(-1), f0 * OP, FT, OP, f0, ep, rep, ep_mode)


@njit(**JIT)
def backward_range(xf, dims, wt, dy, dxf, dwt, mode_dx, mode_dw, xbuf, dxbuf, ybuf, nbmax, geo,
                   nlo, nhi, f0, f1, c0, c1):
    """Gradients by taps on samples ``nlo..nhi``: ``dx`` of input channels ``c0..c1``
    (mode 1 write, 2 add, 0 skip) and filters ``f0..f1`` of the weight gradient ``dwt``
    ``(KH*KW, F, C)`` (written when ``mode_dw``, as :func:`forward_range`'s ``wt``).

    ``dy``: flat ``(N, F, OH*OW)``; scratch of at least ``H*W*nbmax*C`` (``xbuf``: ``X``),
    ``H*W*nbmax*(c1 - c0)`` (``dxbuf``: ``dX``) and ``OH*OW*nbmax*F`` (``ybuf``: ``dY``).
    """
    C, H, W = dims[1], geo[0], geo[1]
    F, OH, OW = wt.shape[1], geo[2], geo[3]
    P, CT = H * W, c1 - c0
    if mode_dw:
        dwt[:, f0:f1] = 0
    for n0 in range(nlo, nhi, nbmax):
        nb = min(nbmax, nhi - n0)
        D = ybuf[:OH * OW * nb * F].reshape((OH * OW * nb, F))
        _gather(dy, n0, nb, F, OH * OW, D)
        if mode_dw and f1 > f0:
            X = xbuf[:P * nb * C].reshape((P * nb, C))
            _gather(xf, n0, nb, C, P, X)
            _taps(X, D, wt, dwt, nb, geo, 2, f0, f1, 0, C)
        if mode_dx and c1 > c0:
            DX = dxbuf[:P * nb * CT].reshape((P * nb, CT))
            DX[:] = 0
            _taps(DX, D, wt, dwt, nb, geo, 1, 0, F, c0, c1)
            for b in range(nb):
                s = (n0 + b) * C * P
                for p in range(P):
                    row = DX[p * nb + b]
                    if mode_dx == 1:
                        for c in range(CT):
                            dxf[s + (c0 + c) * P + p] = row[c]
                    else:
                        for c in range(CT):
                            dxf[s + (c0 + c) * P + p] += row[c]


@njit(**JIT)
def relayout(w3, wt, f0, f1):
    """``wt[k, f, c] = w3[f, c, k]`` for filters ``f0..f1``: one filter ``w3[f]`` (``C*K``
    elements, in cache) at a time, written as ``K`` contiguous rows (a loop over ``k``
    innermost would write ``K`` streams ``F*C`` elements apart, which share cache sets: 2x
    slower)."""
    C, K = w3.shape[1], w3.shape[2]
    for f in range(f0, f1):
        src = w3[f]
        for k in range(K):
            dst = wt[k, f]
            for c in range(C):
                dst[c] = src[c, k]


def by_channels(C, F, nt):
    """Whether ``nt > 1`` threads split filters and channels (every thread on the whole batch,
    so each GEMM keeps all its rows) rather than samples: at least :data:`SPLIT_MIN_WIDTH`
    filters and input channels per thread. On 2x2 planes the batch split halves GEMMs of
    one output row per sample (2 threads, batch 32: 192 -> 384 channels ran 1.3x slower
    than on one thread)."""
    return nt > 1 and min(C, F) >= SPLIT_MIN_WIDTH * nt


def _plan(state, x, F, geo, nt, split, backward=False):
    """``(nb, xbuf, xsz, dxbuf, dxsz, ybuf, ysz)``: samples per chunk and each thread's scratch
    (``split``: by filters and channels, each thread's ``y`` / ``dx`` columns only; the
    ``dx`` scratch for a ``backward`` only). Split by filters and channels, every thread
    gathers the chunk's whole ``X`` (and ``dY``) itself: ``nt`` copies, small on the
    planes the taps take."""
    N, C = x.shape[0], x.shape[1]
    P, OP = geo[0] * geo[1], geo[2] * geo[3]
    nb = int(max(1, min(N if split else -(-N // nt), CHUNK_ELEMS // (P * C + OP * F))))
    ft, ct = (-(-F // nt), -(-C // nt)) if split else (F, C)
    xsz, dxsz, ysz = P * nb * C, P * nb * ct if backward else 1, OP * nb * max(F, ft)
    return (nb, ic.buffer(state, 'taps_x', nt * xsz, x.dtype), xsz,
            ic.buffer(state, 'taps_dx', nt * dxsz, x.dtype), dxsz,
            ic.buffer(state, 'taps_y', nt * ysz, x.dtype), ysz)


def _weights(state, w):
    """``wt`` ``(KH*KW, F, C)`` with ``wt[kh*KW + kw] = w[:, :, kh, kw]`` (scratch), the
    filters cut over the kernel threads."""
    F, C = w.shape[0], w.shape[1]
    K = w.shape[2] * w.shape[3]
    wt = ic.buffer(state, 'taps_w', K * F * C, w.dtype).reshape((K, F, C))
    w3 = w.reshape(F, C, K)
    split_range(lambda lo, hi: relayout(w3, wt, lo, hi), F, max(1, SPLIT_MIN_ELEMS // (C * K)), 1)
    return wt


def _geo(x, y, w, pad):
    return (int(x.shape[2]), int(x.shape[3]), int(y.shape[2]), int(y.shape[3]),
            int(w.shape[2]), int(w.shape[3]), int(pad[0]), int(pad[1]))


def _run(part, nt):
    if nt == 1:
        part(0)
        return
    with numba_blas_single_thread():
        run_split(part, nt)


def forward(state, x, w, bias, y, pad, ep=None, ep_mode=0):
    """``y = conv(x, w) + bias`` by taps, on several threads by samples (as :mod:`._conv_par`)
    or by filters (:func:`by_channels`).

    ``state``: the op's state (scratch); x ``(N, C, H, W)``; w ``(F, C, KH, KW)``; bias
    ``(F,)`` or None; y ``(N, F, OH, OW)``, written; pad ``(ph, pw)``; ``ep``, ``ep_mode``:
    an epilogue (:mod:`._conv_epilogue`).
    """
    N, C, F = x.shape[0], x.shape[1], w.shape[0]
    x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
    geo = _geo(x, y, w, pad)
    nt = split_threads(N)
    split = by_channels(C, F, nt)
    nb, xbuf, xsz, _, _, ybuf, ysz = _plan(state, x, F, geo, nt, split)
    wt = _weights(state, w)
    has_bias = bias is not None
    b = bias if has_bias else w.reshape(-1)
    xf, dims, y3 = x.reshape(-1), tuple(int(s) for s in x.shape), y.reshape(N, F, -1)

    def part(t):
        n0, n1, f0, f1 = ((0, N, F * t // nt, F * (t + 1) // nt) if split else
                          (N * t // nt, N * (t + 1) // nt, 0, F))
        forward_range(xf, dims, wt, y3, b, has_bias, xbuf[t * xsz:(t + 1) * xsz],
                      ybuf[t * ysz:(t + 1) * ysz], nb, geo, n0, n1, f0, f1, ep, ep_mode)
    _run(part, nt)


def backward(state, x, w, dy, dx, dw, mode_dx, mode_dw, pad):
    """Data and weight gradients of :func:`forward` (modes 0 null, 1 write, 2 add).

    ``dx`` ``(N, C, H, W)`` and ``dw`` ``(F, C, KH, KW)`` are only touched when their mode
    is set (pass None otherwise). Split by samples, each thread's weight gradient (in
    ``wt``'s layout) is summed in thread order; split by filters and channels, each
    thread writes its own filters' rows of one. Then it is turned into ``dw``'s layout.
    """
    N, C, F = x.shape[0], x.shape[1], w.shape[0]
    x, w, dy = np.ascontiguousarray(x), np.ascontiguousarray(w), np.ascontiguousarray(dy)
    geo = _geo(x, dy, w, pad)
    K = geo[4] * geo[5]
    nt = split_threads(N)
    split = by_channels(C, F, nt)
    nb, xbuf, xsz, dxbuf, dxsz, ybuf, ysz = _plan(state, x, F, geo, nt, split, True)
    wt = _weights(state, w) if mode_dx else ic.buffer(state, 'taps_w', K * F * C,
                                                      x.dtype).reshape((K, F, C))
    nparts = 1 if split else nt
    parts = ic.buffer(state, 'taps_dw', nparts * K * F * C if mode_dw else 1, x.dtype)
    xf, dims, dyf = x.reshape(-1), tuple(int(s) for s in x.shape), dy.reshape(-1)
    dxf = dx.reshape(-1) if mode_dx else xbuf[:1]
    psz = K * F * C

    def part(t):
        if split:
            n0, n1, f0, f1, c0, c1 = 0, N, F * t // nt, F * (t + 1) // nt, C * t // nt, \
                C * (t + 1) // nt
            q = 0
        else:
            n0, n1, f0, f1, c0, c1 = N * t // nt, N * (t + 1) // nt, 0, F, 0, C
            q = t
        dwt = parts[q * psz:(q + 1) * psz].reshape((K, F, C)) if mode_dw else wt
        backward_range(xf, dims, wt, dyf, dxf, dwt, mode_dx, mode_dw,
                       xbuf[t * xsz:(t + 1) * xsz], dxbuf[t * dxsz:(t + 1) * dxsz],
                       ybuf[t * ysz:(t + 1) * ysz], nb, geo, n0, n1, f0, f1, c0, c1)
    _run(part, nt)
    if mode_dw:
        d = parts[:nparts * psz].reshape((nparts, K, F, C))
        total = d[0]
        for t in range(1, nparts):
            total += d[t]           # in thread order: the same sum whichever thread ran a part
        dw3 = dw.reshape(F, C, K)

        def fold(lo, hi):           # numpy's copy loops release the GIL: the threads share it
            if mode_dw == 1:
                np.copyto(dw3[lo:hi], total[:, lo:hi].transpose(1, 2, 0))
            else:
                dw3[lo:hi] += total[:, lo:hi].transpose(1, 2, 0)
        split_range(fold, F, max(1, SPLIT_MIN_ELEMS // (C * K)), 1)
