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
gives NaN where the skipped pairs give none.

On several threads the threads split the taps (:func:`tap_sets`), not the batch:
each GEMM keeps the shape it has on one thread (all the chunk's samples, all
filters and channels), where a split of the batch or of the filters would halve
GEMMs that are already small (96-128 rows on a 4x4 plane). Each thread sums its
taps into a ``Y`` (or ``dX``) of its own, which the last phase adds in thread order;
each tap's weight gradient is one thread's alone. Measured inside VGG-11 (2 threads,
batch 32, float32, ``benchmarks/net_ops.py``; ms): the backward of 512 -> 512 channels
on 4x4 11.9 against 14.2-15.4 (Winograd split by samples), 256 -> 512 on 4x4 6.1-6.2
against 7.2-7.3, 512 -> 512 on 2x2 3.4-3.8 against 4.0 (im2col). Which calls take the
taps: ``convolution._use_taps`` and :func:`split_forward`.
"""
import functools
import os

import numpy as np
from numba import njit

from ...blas_threads import numba_blas_single_thread
from ...jit import JIT
from .._gemm import gemm
from . import _im2col as ic
from ._conv_epilogue import apply_block, expand
from ._conv_par import run_split, split_threads

__all__ = ['applies', 'enabled', 'reach', 'pairs', 'relayout', 'fold', 'tap_sets', 'split_forward',
           'forward', 'backward', 'forward_range', 'backward_range', 'MAX_REACH', 'MIN_CHANNELS',
           'SPLIT_MIN_REUSE']

#: Largest share of im2col's (tap, output) pairs that reach the input for which the
#: taps run (batch 32, one thread, float32; see :func:`applies`).
MAX_REACH = 0.72
#: Fewest input channels: each tap's GEMM has inner dimension C.
MIN_CHANNELS = 16
#: Target elements of one chunk's ``X`` plus ``Y`` (or ``dY`` plus ``dX``).
CHUNK_ELEMS = 1 << 20
#: Fewest products per weight element (samples times the pairs each tap reaches) for a
#: forward split over threads to take the taps (:func:`split_forward`).
SPLIT_MIN_REUSE = 128


def enabled():
    """Whether the taps may run: ``FFNUMBA_CONV_TAPS`` is not ``0`` (read per call)."""
    return os.environ.get('FFNUMBA_CONV_TAPS', '1').strip() != '0'


def _span(i, o, p, t):
    """Outputs along one dim that tap ``t`` reaches inside an input of size ``i``: output
    ``o_`` and tap ``t`` read input ``o_ - p + t`` (stride 1, dilation 1)."""
    return max(0, min(o, i + p - t) - max(0, p - t))


def reach(i, o, k, p):
    """``(tap, output)`` pairs along one dim that land inside an input of size ``i``."""
    return sum(_span(i, o, p, t) for t in range(k))


def pairs(kernel, pad, xshape, yshape):
    """``(tap, output)`` pairs of a 2-D layer that reach its input (per sample)."""
    (kh, kw), (ph, pw) = kernel, pad
    (H, W), (OH, OW) = xshape[2:], yshape[2:]
    return reach(H, OH, kh, ph) * reach(W, OW, kw, pw)


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
    return (pairs(kernel, pad, xshape, yshape)
            <= MAX_REACH * kernel[0] * kernel[1] * yshape[2] * yshape[3])


def split_forward(kernel, pad, xshape, yshape):
    """Whether a forward split over threads takes the taps (given :func:`applies`): each
    weight element is used at least :data:`SPLIT_MIN_REUSE` times. Below that the weight's
    relayout, a pass over it from memory in a network, costs more than the taps save:
    512 -> 512 channels of 2x2 at batch 32 (57 uses) ran 0.83-0.86x im2col's speed inside
    VGG-11 on two threads; GoogLeNet's 5x5 towers on 4x4 (250 uses) gain."""
    uses = xshape[0] * pairs(kernel, pad, xshape, yshape)
    return uses >= SPLIT_MIN_REUSE * kernel[0] * kernel[1]


@njit(inline='always', **JIT)   # no compile of its own (cold start)
def _taps(X, Y, wt, dwt, nb, geo, op, sel):
    """The GEMMs of taps ``sel`` (indices ``kh*KW + kw``, in order) on one chunk: ``op`` 0
    ``Y += X Wt^T``, 1 ``X += Y Wt``, 2 ``dWt += Y^T X``, 3 ``dWt = Y^T X`` (the first
    chunk: no zeroing pass) (``X`` ``(H*W*nb, C)``, ``Y`` ``(OH*OW*nb, F)``)."""
    H, W, OH, OW, KH, KW, PH, PW = geo
    for q in range(sel.shape[0]):
        k = sel[q]
        kh, kw = k // KW, k % KW
        oh0, oh1 = max(0, PH - kh), min(OH, H + PH - kh)
        ow0, ow1 = max(0, PW - kw), min(OW, W + PW - kw)
        if oh1 <= oh0 or ow1 <= ow0:
            continue
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
                gemm(1.0, xs, wt[k].T, 1.0, ys)
            elif op == 1:
                gemm(1.0, ys, wt[k], 1.0, xs)
            else:
                gemm(1.0, ys.T, xs, 0.0 if op == 3 and r == 0 else 1.0, dwt[k])


@njit(inline='always', **JIT)   # no compile of its own (cold start)
def _gather(src, n0, nb, b0, b1, R, P, M):
    """``M[p*nb + b, r] = src[((n0 + b)*R + r)*P + p]`` for ``b`` in ``b0..b1``: samples of an
    ``(nb, R, P)`` block as rows."""
    for b in range(b0, b1):
        for r in range(R):
            s = ((n0 + b) * R + r) * P
            for p in range(P):
                M[p * nb + b, r] = src[s + p]


@njit(**JIT)
def fwd_gather(xf, dims, X, n0, nb, b0, b1):
    """Samples ``b0..b1`` of the chunk at ``n0`` into ``X`` (:func:`_gather`)."""
    _gather(xf, n0, nb, b0, b1, dims[1], dims[2] * dims[3], X)


@njit(**JIT)
def fwd_taps(X, Y, wt, nb, geo, sel):
    """``Y = X Wt^T`` summed over taps ``sel`` (``Y`` zeroed first)."""
    Y[:] = 0
    _taps(X, Y, wt, wt, nb, geo, 0, sel)


@njit(**JIT)
def fwd_scatter(parts, y, bias, has_bias, n0, nb, b0, b1, ep, ep_mode):
    """``y[n0 + b] = sum_t parts[t][rows of b] (+ bias)`` for ``b`` in ``b0..b1``, the parts
    added in order (into ``parts[0]``), then the epilogue ``ep_mode`` (:mod:`._conv_epilogue`)."""
    F, OP = y.shape[1], y.shape[2]
    if ep is None:              # a plain convolution: numba prunes the epilogue code
        rep = ep
    else:
        rep = expand(ep, F, OP)
    for b in range(b0, b1):
        yb = y[n0 + b]
        for p in range(OP):       # the parts' rows read whole; the sample's block stays in cache
            row = parts[0, p * nb + b]
            for t in range(1, parts.shape[0]):      # the other threads' parts, in order
                other = parts[t, p * nb + b]
                for f in range(F):
                    row[f] += other[f]
            if has_bias:
                for f in range(F):
                    yb[f, p] = row[f] + bias[f]
            else:
                for f in range(F):
                    yb[f, p] = row[f]
        if ep is not None:
            apply_block(yb.reshape(-1), 0, F, OP, 0, ep, rep, ep_mode)


@njit(**JIT)
def forward_range(xf, dims, wt, y, bias, has_bias, xbuf, ybuf, nbmax, geo, sel, ep, ep_mode):
    """``y = conv(x, w) (+ bias)`` by taps on one thread, chunk by chunk, each output sample
    followed by the epilogue ``ep_mode`` (:mod:`._conv_epilogue`; 0 none).

    ``xf``: flat ``(N, C, H, W)`` (``dims``); ``wt``: ``(KH*KW, F, C)``, ``wt[kh*KW + kw]
    = w[:, :, kh, kw]``; ``y``: ``(N, F, OH*OW)``; ``xbuf`` / ``ybuf``: scratch of at
    least ``H*W*nbmax*C`` / ``OH*OW*nbmax*F`` elements; ``geo``: ``(H, W, OH, OW,
    KH, KW, PH, PW)``; ``sel``: the taps that reach the input (:func:`tap_sets` on one
    thread).
    """
    N, C, F = dims[0], dims[1], y.shape[1]
    H, W, OH, OW = geo[0], geo[1], geo[2], geo[3]
    for n0 in range(0, N, nbmax):
        nb = min(nbmax, N - n0)
        X = xbuf[:H * W * nb * C].reshape((H * W * nb, C))
        Y = ybuf[:OH * OW * nb * F].reshape((1, OH * OW * nb, F))
        fwd_gather(xf, dims, X, n0, nb, 0, nb)
        fwd_taps(X, Y[0], wt, nb, geo, sel)
        fwd_scatter(Y, y, bias, has_bias, n0, nb, 0, nb, ep, ep_mode)


@njit(**JIT)
def bwd_gather(xf, dims, dyf, F, OP, X, D, n0, nb, b0, b1, mode_dw):
    """Samples ``b0..b1`` of the chunk at ``n0``: the head gradient into ``D`` ``(OP*nb, F)``
    and, for a weight gradient (``mode_dw``), the data into ``X`` (:func:`_gather`)."""
    _gather(dyf, n0, nb, b0, b1, F, OP, D)
    if mode_dw:
        _gather(xf, n0, nb, b0, b1, dims[1], dims[2] * dims[3], X)


@njit(**JIT)
def bwd_taps(X, D, DX, wt, dwt, nb, geo, sel, mode_dx, mode_dw, first):
    """Taps ``sel`` of one chunk: ``dWt[k] += D^T X`` for each (``mode_dw``; ``=`` on the
    ``first`` chunk) and ``DX = sum D Wt`` over them (``mode_dx``; ``DX`` zeroed first)."""
    if mode_dw:
        _taps(X, D, wt, dwt, nb, geo, 3 if first else 2, sel)
    if mode_dx:
        DX[:] = 0
        _taps(DX, D, wt, dwt, nb, geo, 1, sel)


@njit(**JIT)
def bwd_scatter(parts, dxf, C, P, n0, nb, b0, b1, mode_dx):
    """``dx[n0 + b]`` (mode 1 write, 2 add) ``= sum_t parts[t][rows of b]``, the parts added in
    order (into ``parts[0]``), for ``b`` in ``b0..b1``."""
    for b in range(b0, b1):
        s = (n0 + b) * C * P
        for p in range(P):
            row = parts[0, p * nb + b]
            for t in range(1, parts.shape[0]):      # the other threads' parts, in order
                other = parts[t, p * nb + b]
                for c in range(C):
                    row[c] += other[c]
            if mode_dx == 1:
                for c in range(C):
                    dxf[s + c * P + p] = row[c]
            else:
                for c in range(C):
                    dxf[s + c * P + p] += row[c]


@njit(**JIT)
def backward_range(xf, dims, wt, dyf, dxf, dwt, mode_dx, mode_dw, xbuf, dxbuf, ybuf, nbmax,
                   geo, sel):
    """Gradients by taps on one thread: ``dx`` (mode 1 write, 2 add, 0 skip) and the weight
    gradient ``dwt`` ``(KH*KW, F, C)`` (written when ``mode_dw``, as :func:`forward_range`'s
    ``wt``), chunk by chunk.

    ``dyf``: flat ``(N, F, OH*OW)``; scratch of at least ``H*W*nbmax*C`` elements (``xbuf``:
    ``X``; ``dxbuf``: ``dX``) and ``OH*OW*nbmax*F`` (``ybuf``: ``dY``); ``sel``: the taps that
    reach the input (:func:`tap_sets`; the others' ``dwt`` rows are the caller's to zero).
    """
    N, C, H, W = dims[0], dims[1], geo[0], geo[1]
    F, OP = wt.shape[1], geo[2] * geo[3]
    P = H * W
    for n0 in range(0, N, nbmax):
        nb = min(nbmax, N - n0)
        D = ybuf[:OP * nb * F].reshape((OP * nb, F))
        X = xbuf[:P * nb * C].reshape((P * nb, C))
        DX = dxbuf[:P * nb * C].reshape((1, P * nb, C))
        bwd_gather(xf, dims, dyf, F, OP, X, D, n0, nb, 0, nb, mode_dw)
        bwd_taps(X, D, DX[0], wt, dwt, nb, geo, sel, mode_dx, mode_dw, n0 == 0)
        if mode_dx:
            bwd_scatter(DX, dxf, C, P, n0, nb, 0, nb, mode_dx)


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


@njit(**JIT)
def fold(dwt, dw3, f0, f1, add):
    """``dw3[f, c, k] = dwt[k, f, c]`` (``+=`` when ``add``) for filters ``f0..f1``:
    :func:`relayout` backwards, one filter's ``C*K`` block (in cache) at a time, from ``K``
    contiguous rows (512 x 512 x 9 float32: 0.47 ms; numpy's transposing copy 0.9 ms)."""
    C, K = dw3.shape[1], dw3.shape[2]
    for f in range(f0, f1):
        dst = dw3[f]
        for k in range(K):
            src = dwt[k, f]
            if add:
                for c in range(C):
                    dst[c, k] += src[c]
            else:
                for c in range(C):
                    dst[c, k] = src[c]


@functools.lru_cache(maxsize=256)
def tap_sets(geo, nt):
    """The taps each of up to ``nt`` threads runs: a tuple of int64 arrays of tap indices
    ``kh*KW + kw`` (ascending), one per thread with work, taps that reach no output left out.

    Each tap costs the (tap, output) pairs it reaches; the taps, costliest first, go to
    the thread with the least cost so far (the lower index on a tie), so the sets depend
    on the layer and ``nt`` alone and every run sums the same parts in the same order.
    A 3x3 kernel on a 4x4 plane splits 46:54 over two threads. Cached per layer (the
    arrays are shared: read only).
    """
    H, W, OH, OW, KH, KW, PH, PW = geo
    cost = [_span(H, OH, PH, k // KW) * _span(W, OW, PW, k % KW) for k in range(KH * KW)]
    sets, load = [[] for _ in range(max(1, nt))], [0] * max(1, nt)
    for k in sorted((k for k in range(KH * KW) if cost[k]), key=lambda k: (-cost[k], k)):
        t = min(range(len(load)), key=lambda t: (load[t], t))
        sets[t].append(k)
        load[t] += cost[k]
    return tuple(np.array(sorted(s), np.int64) for s in sets if s)


def _plan(state, x, F, geo, nt, backward=False):
    """``(nb, xbuf, dxbuf, ybuf)``: samples per chunk and the scratch: the chunk's ``X`` and
    ``dY`` (``ybuf`` forward: one ``Y`` per thread) and, backward, one ``dX`` per thread."""
    N, C = x.shape[0], x.shape[1]
    P, OP = geo[0] * geo[1], geo[2] * geo[3]
    nb = int(max(1, min(N, CHUNK_ELEMS // (P * C + OP * F))))
    return (nb, ic.buffer(state, 'taps_x', P * nb * C, x.dtype),
            ic.buffer(state, 'taps_dx', nt * P * nb * C if backward else 1, x.dtype),
            ic.buffer(state, 'taps_y', (1 if backward else nt) * OP * nb * F, x.dtype))


def _geo(x, y, w, pad):
    return (int(x.shape[2]), int(x.shape[3]), int(y.shape[2]), int(y.shape[3]),
            int(w.shape[2]), int(w.shape[3]), int(pad[0]), int(pad[1]))


def _chunks(N, nb, nt, phases):
    """Each chunk of ``nb`` samples through ``phases`` in turn, each phase ``phase(t, n0,
    nb, b0, b1)`` on ``nt`` threads (``b0..b1``: thread ``t``'s samples of the chunk)."""
    with numba_blas_single_thread():
        for n0 in range(0, N, nb):
            m = min(nb, N - n0)
            for phase in phases:
                run_split(lambda t, n0=n0, m=m: phase(t, n0, m, m * t // nt, m * (t + 1) // nt),
                          nt)


def forward(state, x, w, bias, y, pad, ep=None, ep_mode=0):
    """``y = conv(x, w) + bias`` by taps; on several threads, the taps split between them.

    ``state``: the op's state (scratch); x ``(N, C, H, W)``; w ``(F, C, KH, KW)``; bias
    ``(F,)`` or None; y ``(N, F, OH, OW)``, written; pad ``(ph, pw)``; ``ep``, ``ep_mode``:
    an epilogue (:mod:`._conv_epilogue`). Split over threads, each chunk of samples runs
    three phases: the threads gather the chunk's samples into ``X`` (each its own
    samples; first, each its filters of the weight's :func:`relayout`), run their taps'
    GEMMs into a ``Y`` of their own (:func:`tap_sets`; every GEMM keeps the one-thread
    shape), and write ``y`` from the sum of the ``Y`` (each its own samples).
    """
    N, C, F = x.shape[0], x.shape[1], w.shape[0]
    x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
    geo = _geo(x, y, w, pad)
    K = geo[4] * geo[5]
    sets = tap_sets(geo, split_threads(N))
    nt = len(sets)
    nb, xbuf, _, ybuf = _plan(state, x, F, geo, nt)
    w3 = w.reshape(F, C, K)
    wt = ic.buffer(state, 'taps_w', K * F * C, w.dtype).reshape((K, F, C))
    has_bias = bias is not None
    b = bias if has_bias else w.reshape(-1)
    xf, dims, y3 = x.reshape(-1), tuple(int(s) for s in x.shape), y.reshape(N, F, -1)
    if nt == 1:
        relayout(w3, wt, 0, F)
        forward_range(xf, dims, wt, y3, b, has_bias, xbuf, ybuf, nb, geo, sets[0], ep, ep_mode)
        return
    P, OP = geo[0] * geo[1], geo[2] * geo[3]

    def gather(t, n0, m, b0, b1):
        if n0 == 0:
            relayout(w3, wt, F * t // nt, F * (t + 1) // nt)
        fwd_gather(xf, dims, xbuf[:P * m * C].reshape((P * m, C)), n0, m, b0, b1)

    def taps(t, n0, m, b0, b1):
        fwd_taps(xbuf[:P * m * C].reshape((P * m, C)),
                 ybuf[:nt * OP * m * F].reshape((nt, OP * m, F))[t], wt, m, geo, sets[t])

    def scatter(t, n0, m, b0, b1):
        fwd_scatter(ybuf[:nt * OP * m * F].reshape((nt, OP * m, F)), y3, b, has_bias, n0, m,
                    b0, b1, ep, ep_mode)
    _chunks(N, nb, nt, (gather, taps, scatter))


def backward(state, x, w, dy, dx, dw, mode_dx, mode_dw, pad):
    """Data and weight gradients of :func:`forward` (modes 0 null, 1 write, 2 add).

    ``dx`` ``(N, C, H, W)`` and ``dw`` ``(F, C, KH, KW)`` are only touched when their mode
    is set (pass None otherwise). Split over threads as :func:`forward`: each thread runs
    its taps, the weight gradient of each of them whole (no sum across threads) and its
    own part of ``dX``, which the third phase sums in thread order. The weight gradient
    (in ``wt``'s layout) is then turned into ``dw``'s (:func:`fold`).
    """
    N, C, F = x.shape[0], x.shape[1], w.shape[0]
    x, w, dy = np.ascontiguousarray(x), np.ascontiguousarray(w), np.ascontiguousarray(dy)
    geo = _geo(x, dy, w, pad)
    K = geo[4] * geo[5]
    sets = tap_sets(geo, split_threads(N))
    nt = len(sets)
    nb, xbuf, dxbuf, ybuf = _plan(state, x, F, geo, nt, True)
    wt = ic.buffer(state, 'taps_w', K * F * C, x.dtype).reshape((K, F, C))
    dwt = ic.buffer(state, 'taps_dw', K * F * C if mode_dw else 1, x.dtype)
    dwt = dwt.reshape((K, F, C)) if mode_dw else wt
    if mode_dw:
        reached = set(int(k) for s in sets for k in s)
        for k in range(K):
            if k not in reached:     # a tap that reaches no output: its gradient is 0
                dwt[k] = 0
    xf, dims, dyf = x.reshape(-1), tuple(int(s) for s in x.shape), dy.reshape(-1)
    dxf = dx.reshape(-1) if mode_dx else xbuf[:1]
    w3, dw3 = w.reshape(F, C, K), (dw if mode_dw else w).reshape(F, C, K)
    if nt > 1:
        _split_backward(xf, dims, w3, wt, dyf, dxf, dwt, dw3, mode_dx, mode_dw, xbuf, dxbuf,
                        ybuf, nb, geo, sets)
        return
    if mode_dx:
        relayout(w3, wt, 0, F)
    backward_range(xf, dims, wt, dyf, dxf, dwt, mode_dx, mode_dw, xbuf, dxbuf, ybuf, nb, geo,
                   sets[0])
    if mode_dw:
        fold(dwt, dw3, 0, F, mode_dw == 2)


def _split_backward(xf, dims, w3, wt, dyf, dxf, dwt, dw3, mode_dx, mode_dw, xbuf, dxbuf, ybuf,
                    nb, geo, sets):
    """:func:`backward`'s phases per chunk on ``len(sets)`` threads: gather (and, first, the
    weight's :func:`relayout`), taps, ``dx`` (and, last, the weight gradient's
    :func:`fold`); each thread its own samples and filters."""
    N, C, nt = dims[0], dims[1], len(sets)
    F, P, OP = wt.shape[1], geo[0] * geo[1], geo[2] * geo[3]

    def gather(t, n0, m, b0, b1):
        if n0 == 0 and mode_dx:
            relayout(w3, wt, F * t // nt, F * (t + 1) // nt)
        bwd_gather(xf, dims, dyf, F, OP, xbuf[:P * m * C].reshape((P * m, C)),
                   ybuf[:OP * m * F].reshape((OP * m, F)), n0, m, b0, b1, mode_dw)

    def taps(t, n0, m, b0, b1):
        bwd_taps(xbuf[:P * m * C].reshape((P * m, C)), ybuf[:OP * m * F].reshape((OP * m, F)),
                 dxbuf[:nt * P * m * C].reshape((nt, P * m, C))[t], wt, dwt, m, geo, sets[t],
                 mode_dx, mode_dw, n0 == 0)

    def scatter(t, n0, m, b0, b1):
        if mode_dx:
            bwd_scatter(dxbuf[:nt * P * m * C].reshape((nt, P * m, C)), dxf, C, P, n0, m, b0,
                        b1, mode_dx)
        if mode_dw and n0 + m == N:
            fold(dwt, dw3, F * t // nt, F * (t + 1) // nt, mode_dw == 2)
    _chunks(N, nb, nt, (gather, taps, scatter))
