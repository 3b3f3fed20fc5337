"""Shared convolution machinery: im2col / col2im and the batched GEMM drivers.

Every convolution-like op here (Convolution, Deconvolution) is expressed on
one *conv geometry* between an **image-space** tensor ``X`` of shape
``(N, Cin, D, H, W)`` and a **column-space** tensor ``Y`` of shape
``(N, Cout, OD, OH, OW)`` (1-D and 2-D ops use unit leading spatial dims)::

    Y[n, g*Fg + f, o] = sum_{c, k} W[g, f, c*K + k] * X[n, g*Cg + c, o*s - p + k*d]

with ``G`` groups, ``Fg = Cout / G``, ``Cg = Cin / G`` and ``K`` the kernel
volume. Two drivers cover both ops:

* :func:`conv_forward`   ``Y (+)= conv(X, W)``           (Convolution forward,
  Deconvolution backward-data);
* :func:`conv_backward`  ``dX (+)= conv^T(Y, W)`` and ``dW (+)= Y col(X)^T``
  (Convolution backward, Deconvolution forward and weight gradient).

``im2col`` unrolls a chunk of ``nb`` samples of one group into a matrix
``col`` of shape ``(Cg*K, nb*P)`` (``P = OD*OH*OW``), so each group of each
chunk costs one BLAS GEMM (:func:`ffnumba.ops._gemm.gemm` inside ``@njit``). Chunks keep ``col``
cache-sized. Pointwise kernels (1x1, stride 1, no pad) with one sample per
chunk skip im2col: a sample's planes are its ``col``, and the forward, data-
and weight-gradient GEMMs read and write the NCHW arrays themselves. The
weight gradient is accumulated by the GEMM itself (``beta = 1`` after the first
chunk): ``dy col^T`` straight into ``dw``, or, when ``dw`` has fewer rows than
columns (``Fg < Cg*K``), ``col dy^T`` into a transposed scratch copied into ``dw``
once per call (OpenBLAS ran the GEMM with more output rows 10-25% faster). Outputs narrower than
:data:`TABLE_MAX_OW` im2col/col2im through an offset table (one loop over the output plane
per column row), unless a large strided window (``_im2col_rows.narrow_rows``); the others
copy row runs (out of the plane's column phases when strided, ``_im2col_rows``). All
kernels are ``nogil``: two executors in two threads run in parallel. Hot copy loops index
with unsigned integers, which lets LLVM drop numba's negative-index wraparound and
vectorise them.

Source: K. Chellapilla, S. Puri, P. Simard, "High Performance Convolutional
Neural Networks for Document Processing" (2006), the im2col formulation MXNet
uses on the CPU.
"""
import threading

import numpy as np
from numba import njit

from ...jit import JIT, helper_njit
from .._gemm import gemm
from ._im2col_flat import _col2im_flat, _flat_shift, _im2col_flat
from ._im2col_rows import _col2im_rows, _im2col_rows, _valid, narrow_rows  # noqa: F401
from ._conv_epilogue import apply_block, expand

__all__ = ['geometry', 'as5d', 'buffer', 'is_pointwise', 'chunk_size', 'conv_forward',
           'conv_backward', 'forward_range', 'backward_range', 'add_bias', 'bias_grad', 'im2col',
           'col2im', 'MODES', 'TABLE_MAX_OW', 'DIRECT_MIN_COLS']

#: ``req`` string -> kernel mode code.
MODES = {'null': 0, 'write': 1, 'add': 2}
#: Target number of elements of one ``col`` chunk (keeps it in the L2 cache).
COL_CHUNK_ELEMS = 1 << 17
#: Fewest GEMM columns (``nb * P``) a chunk should have: deep layers with small
#: outputs (4x4: P=16) would otherwise run one skinny GEMM per sample, and the
#: weight gradient would be transposed and accumulated once per sample.
MIN_GEMM_COLS = 512
#: Most elements of one ``col`` chunk (16 MiB of float32).
COL_MAX_ELEMS = 1 << 22
#: Outputs narrower than this im2col/col2im through a per-call offset table
#: (one loop over the whole output plane) instead of per-row runs.
TABLE_MAX_OW = 16
#: Fewest output positions a pointwise convolution needs to multiply each
#: sample's data in place (one GEMM per sample) rather than gathered chunks.
DIRECT_MIN_COLS = 256


def as5d(shape):
    """``(N, C, *spatial)`` padded to ``(N, C, D, H, W)`` with unit dims."""
    shape = tuple(int(s) for s in shape)
    return shape[:2] + (1,) * (5 - len(shape)) + shape[2:]


def _pad3(t, fill):
    t = tuple(int(v) for v in t)
    return (fill,) * (3 - len(t)) + t


def geometry(kernel, stride, pad, dilate, out_spatial):
    """The 15-int tuple the kernels take: ``k(3), s(3), p(3), d(3), o(3)``."""
    return (_pad3(kernel, 1) + _pad3(stride, 1) + _pad3(pad, 0) + _pad3(dilate, 1)
            + _pad3(out_spatial, 1))


def is_pointwise(g):
    """Whether the :func:`geometry` tuple ``g`` is a 1x1(x1) kernel, stride 1, no pad."""
    return tuple(g[:9]) == (1, 1, 1, 1, 1, 1, 0, 0, 0)


def chunk_size(n, rows, p, pointwise=False):
    """Samples per chunk of a ``(rows, nb * p)`` column matrix.

    Cache-sized (:data:`COL_CHUNK_ELEMS`) when that still gives each GEMM at
    least :data:`MIN_GEMM_COLS` columns; otherwise as many samples as reach
    that width, within :data:`COL_MAX_ELEMS`. A ``pointwise`` kernel (1x1,
    stride 1, no pad) whose plane has at least :data:`DIRECT_MIN_COLS`
    positions runs one sample per chunk: the drivers then multiply the
    sample's NCHW data itself, with no im2col, gather or scatter.
    """
    if pointwise and p >= DIRECT_MIN_COLS:
        return 1
    per_sample = max(1, rows * p)
    nb = max(COL_CHUNK_ELEMS // per_sample, -(-MIN_GEMM_COLS // max(1, p)))
    nb = min(nb, max(1, COL_MAX_ELEMS // per_sample))
    return int(max(1, min(n, nb)))


_SCRATCH = threading.local()


def buffer(state, name, size, dtype):
    """A 1-D scratch array of ``size`` elements, shared by every node of this thread.

    Scratch only: its contents are not kept from one call to the next. With a
    node's ``state`` (any non-None value) the array comes from a per-thread
    pool keyed by ``name`` and dtype and grown on demand to the largest
    request, so the nodes of a graph, which run one after another, share one
    array per name (as MXNet's per-device temporary space): a whole network
    touches one scratch set that stays in cache instead of one cold set per
    node (GoogLeNet training at 64x64, batch 32, one thread: 10-15% faster),
    and ResNet-18 (batch 32) holds 93 MB of scratch instead of 419 MB of
    per-node arrays whose page faults a first batch paid. Executors in other
    threads (several contexts) have pools of their own.

    Parameters
    ----------
    state : dict or None
        The node's state: any non-None value takes the per-thread pool;
        None returns a new array.
    name : str
        The scratch's role; two arrays needed at once need two names.
    size : int
        Elements wanted (at least 1 is returned).
    dtype : numpy dtype

    Returns
    -------
    ndarray, 1-D, ``max(1, size)`` elements, uninitialised
    """
    dtype = np.dtype(dtype)
    n = max(1, int(size))
    if state is None:
        return np.empty(n, dtype)
    pool = getattr(_SCRATCH, 'pool', None)
    if pool is None:
        pool = _SCRATCH.pool = {}
    key = (name, dtype.str)
    buf = pool.get(key)
    if buf is None or buf.size < n:
        buf = pool[key] = np.empty(n, dtype)
    return buf[:n]


# ---------------------------------------------------------------- im2col / col2im

@helper_njit
def _pointwise(g):
    """Whether ``g`` is a 1x1(x1) kernel with unit stride and no padding (col == image)."""
    return (g[0] == 1 and g[1] == 1 and g[2] == 1 and g[3] == 1 and g[4] == 1 and g[5] == 1
            and g[6] == 0 and g[7] == 0 and g[8] == 0)


@helper_njit(by_reference=True)
def _table(dims, g):
    """``tab[r*P + p]``: offset in one input plane read by column row ``r`` at output ``p``, or -1.

    Flattens a small output plane into one loop of ``P`` gathers per column
    row, instead of ``OH`` runs of ``OW`` elements (each with its own bounds).
    """
    D, H, W = dims[2], dims[3], dims[4]
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
    P = OD * OH * OW
    tab = np.empty(KD * KH * KW * P, np.int64)
    q = 0
    for kd in range(KD):
        for kh in range(KH):
            for kw in range(KW):
                for od in range(OD):
                    i = od * SD - PD + kd * DD
                    for oh in range(OH):
                        j = oh * SH - PH + kh * DH
                        for ow in range(OW):
                            k = ow * SW - PW + kw * DW
                            ok = 0 <= i < D and 0 <= j < H and 0 <= k < W
                            tab[q] = (i * H + j) * W + k if ok else -1
                            q += 1
    return tab


# Inlined into the drivers at numba-IR level (one call site each): no never-called library of
# their own (0.4 s of a cold start). Inlining their helpers too compiled twice as long.
@njit(inline='always', **JIT)
def im2col(xf, dims, n0, nb, c0, cg, g, colf):
    """Unroll samples ``n0..n0+nb`` and channels ``c0..c0+cg`` of flat ``xf`` into ``colf``.

    ``colf`` is the flat ``(cg*K, nb*P)`` column matrix; ``dims`` the 5-D
    shape of ``xf``; ``g`` the :func:`geometry` tuple. Pointwise kernels copy
    whole planes; stride-1 kernels whose output plane is the input plane copy
    shifted planes (:func:`_flat_shift`); other outputs narrower than
    :data:`TABLE_MAX_OW` gather through a :func:`_table`; wider ones (and large strided
    windows) copy row runs, out of column phases when strided (:mod:`._im2col_rows`).
    """
    C, D, H, W = dims[1], dims[2], dims[3], dims[4]
    K = g[0] * g[1] * g[2]
    P = g[12] * g[13] * g[14]
    L = nb * P
    plane = D * H * W
    up = np.uint64(P)
    if _pointwise(g):
        for b in range(nb):
            for c in range(cg):
                us = np.uint64(((n0 + b) * C + c0 + c) * plane)
                uq = np.uint64(c * L + b * P)
                for i in range(up):
                    colf[uq + i] = xf[us + i]
        return
    if g[14] >= TABLE_MAX_OW or narrow_rows(g):
        _im2col_rows(xf, dims, n0, nb, c0, cg, g, colf)
        return
    if _flat_shift(dims, g):
        _im2col_flat(xf, dims, n0, nb, c0, cg, g, colf)
        return
    tab = _table(dims, g)
    z = colf.dtype.type(0)
    for b in range(nb):
        for c in range(cg):
            xbase = ((n0 + b) * C + c0 + c) * plane
            for r in range(K):
                uq = np.uint64((c * K + r) * L + b * P)
                ut = np.uint64(r * P)
                for i in range(up):
                    t = tab[ut + i]
                    v = xf[np.uint64(xbase + max(t, 0))]
                    colf[uq + i] = v if t >= 0 else z


@njit(inline='always', **JIT)
def col2im(colf, dims, n0, nb, c0, cg, g, xf):
    """Scatter-add flat column matrix ``colf`` into flat image ``xf``; :func:`im2col`'s paths."""
    C, D, H, W = dims[1], dims[2], dims[3], dims[4]
    K = g[0] * g[1] * g[2]
    P = g[12] * g[13] * g[14]
    L = nb * P
    plane = D * H * W
    up = np.uint64(P)
    if _pointwise(g):
        for b in range(nb):
            for c in range(cg):
                ud = np.uint64(((n0 + b) * C + c0 + c) * plane)
                uq = np.uint64(c * L + b * P)
                for i in range(up):
                    xf[ud + i] += colf[uq + i]
        return
    if g[14] >= TABLE_MAX_OW or narrow_rows(g):
        _col2im_rows(colf, dims, n0, nb, c0, cg, g, xf)
        return
    if _flat_shift(dims, g):
        _col2im_flat(colf, dims, n0, nb, c0, cg, g, xf)
        return
    tab = _table(dims, g)
    for b in range(nb):
        for c in range(cg):
            xbase = ((n0 + b) * C + c0 + c) * plane
            for r in range(K):
                uq = np.uint64((c * K + r) * L + b * P)
                ut = np.uint64(r * P)
                for i in range(up):
                    t = tab[ut + i]
                    if t >= 0:
                        xf[np.uint64(xbase + t)] += colf[uq + i]


#: Rows per block of :func:`_transpose` of more than :data:`TR_SMALL` elements.
TR_BLOCK = 32
#: Most elements a :func:`_transpose` moves in one block (they fit the L1 cache).
TR_SMALL = 8192


@helper_njit
def _transpose(src, sbase, R, Q, dst, dbase, add):
    """``dst[dbase + q*R + r] (+)= src[sbase + r*Q + q]`` for ``r < R``, ``q < Q``; above
    :data:`TR_SMALL` elements in blocks of :data:`TR_BLOCK` source rows, as a power-of-two row
    length (16x16 plane, 256 channels) would map every strided column read to a few cache sets."""
    blk = R if R * Q <= TR_SMALL else TR_BLOCK
    for r0 in range(0, R, blk):
        r1 = min(R, r0 + blk)
        for q in range(Q):
            d = np.uint64(dbase + q * R)
            s = np.uint64(sbase + q)
            if add:
                for r in range(np.uint64(r0), np.uint64(r1)):
                    dst[d + r] += src[s + r * np.uint64(Q)]
            else:
                for r in range(np.uint64(r0), np.uint64(r1)):
                    dst[d + r] = src[s + r * np.uint64(Q)]


# ---------------------------------------------------------------- gather / scatter

@helper_njit
def _gather(y, n0, nb, f0, fg, tmp):
    """``tmp[f, b*P + p] = y[n0 + b, f0 + f, p]``."""
    P = y.shape[2]
    up = np.uint64(P)
    for b in range(nb):
        for f in range(fg):
            src = y[n0 + b, f0 + f]
            dst = tmp[f]
            off = np.uint64(b * P)
            for i in range(up):
                dst[off + i] = src[i]


@helper_njit(by_reference=True)
def _scatter(tmp, n0, nb, f0, fg, y, add, bias, has_bias, ep, ep_mode, rep):
    """``y[n0 + b, f0 + f, p] (+)= tmp[f, b*P + p] (+ bias[f0 + f])``, then the epilogue
    ``ep_mode`` of :mod:`._conv_epilogue` on each sample's rows (mode 0: none)."""
    P = y.shape[2]
    up = np.uint64(P)
    for b in range(nb):
        for f in range(fg):
            dst = y[n0 + b, f0 + f]
            src = tmp[f]
            off = np.uint64(b * P)
            v = bias[f0 + f] if has_bias else bias.dtype.type(0)
            if add:
                for i in range(up):
                    dst[i] += src[off + i] + v
            else:
                for i in range(up):
                    dst[i] = src[off + i] + v
        if ep is not None:      # None (a plain convolution): numba prunes this branch
            apply_block(y[n0 + b].reshape(-1), f0 * P, fg, P, f0, ep, rep, ep_mode)


# ---------------------------------------------------------------- drivers

def conv_forward(xf, dims, w3, y, add, bias, has_bias, colbuf, tmpbuf, nbmax, g):
    """``y (+)= conv(x, w) (+ bias)``.

    ``xf``: flat image ``(N, Cin, D, H, W)`` (shape in ``dims``); ``w3``:
    ``(G, Fg, Cg*K)``; ``y``: ``(N, G*Fg, P)``; ``bias``: ``(G*Fg,)`` (read
    only when ``has_bias``); ``colbuf`` / ``tmpbuf``: flat scratch of at
    least ``Cg*K*nbmax*P`` / ``Fg*nbmax*P`` elements. A Python call of
    :func:`forward_range` on every sample: one compiled kernel whatever the
    thread count (a compiled wrapper would compile the whole driver again).
    """
    forward_range(xf, dims, w3, y, add, bias, has_bias, colbuf, tmpbuf, nbmax, g, 0, dims[0],
                  None, 0)


@njit(**JIT)
def forward_range(xf, dims, w3, y, add, bias, has_bias, colbuf, tmpbuf, nbmax, g, nlo, nhi,
                  ep, ep_mode):
    """:func:`conv_forward` on samples ``nlo..nhi`` only, each output row followed by the
    epilogue ``ep_mode`` (``ep``: :mod:`._conv_epilogue`; 0 none) while it is in cache.
    ``ep=None`` (every plain convolution) compiles a version without the epilogue code
    (numba prunes ``ep is None`` branches on arguments): a cold start pays nothing for it."""
    C = dims[1]
    G, Fg, CK = w3.shape
    cg = C // G
    P = y.shape[2]
    direct = nbmax == 1 and _pointwise(g)      # 1x1: the sample's data is its col matrix
    if ep is None:
        rep = ep
    else:
        rep = expand(ep, G * Fg, P)
    for n0 in range(nlo, nhi, nbmax):
        nb = min(nbmax, nhi - n0)
        colf = colbuf[:CK * nb * P]
        for j in range(G):
            if direct:
                col = xf[(n0 * C + j * cg) * P:(n0 * C + (j + 1) * cg) * P].reshape((cg, P))
            else:
                im2col(xf, dims, n0, nb, j * cg, cg, g, colf)
                col = colf.reshape((CK, nb * P))
            if nb == 1 and not add:
                yj = y[n0, j * Fg:(j + 1) * Fg]
                gemm(1.0, w3[j], col, 0.0, yj)
                if has_bias:
                    for f in range(Fg):
                        v = bias[j * Fg + f]
                        row = yj[f]
                        for i in range(np.uint64(P)):
                            row[i] += v
                if ep is not None:
                    apply_block(y[n0].reshape(-1), j * Fg * P, Fg, P, j * Fg, ep, rep, ep_mode)
            else:
                tmp = tmpbuf[:Fg * nb * P].reshape((Fg, nb * P))
                gemm(1.0, w3[j], col, 0.0, tmp)
                _scatter(tmp, n0, nb, j * Fg, Fg, y, add, bias, has_bias, ep, ep_mode, rep)


def conv_backward(xf, dims, w3, dy, dxf, dw3, mode_dx, mode_dw, colbuf, tmpbuf, dwtbuf, nbmax,
                  g):
    """Gradients of ``y = conv(x, w)``: ``dx`` (col2im of ``w^T dy``) and ``dw``.

    Modes are 0 (null), 1 (write), 2 (add). ``xf`` is only read when
    ``mode_dw`` is set and ``dxf`` only written when ``mode_dx`` is set (pass
    any 1-element array otherwise). ``dw`` is accumulated by the GEMMs themselves
    (``beta = 1`` after the first chunk); ``dwtbuf`` holds ``G*Fg*Cg*K`` elements
    when ``Fg < Cg*K`` (the transposed accumulator; otherwise any 1-element array).
    A Python call of :func:`backward_range` on every sample, as :func:`conv_forward`.
    """
    backward_range(xf, dims, w3, dy, dxf, dw3, mode_dx, mode_dw, colbuf, tmpbuf, dwtbuf, nbmax,
                   g, 0, dims[0], 0, dims[1])


@njit(**JIT)
def backward_range(xf, dims, w3, dy, dxf, dw3, mode_dx, mode_dw, colbuf, tmpbuf, dwtbuf, nbmax,
                   g, nlo, nhi, clo, chi):
    """:func:`conv_backward` on samples ``nlo..nhi``, input channels ``clo..chi`` (all: the
    batch split; a range, one group: the channel split of :mod:`._conv_par`, the same
    compiled kernel): their ``dx`` rows and ``dw`` columns (a range: accumulated by the
    GEMM, ``dwtbuf`` unused)."""
    C = dims[1]
    G, Fg, CK = w3.shape
    K = CK * G // C
    cg = (chi - clo) // G           # channels per group in the range (all of them: C // G)
    ck = cg * K
    kl = clo * K                    # the range's first column of w and dw (0: every channel)
    P = dy.shape[2]
    pw = _pointwise(g)
    direct = nbmax == 1 and pw      # 1x1: GEMMs on the samples' own planes
    tr = mode_dw != 0 and Fg < ck and ck == CK  # dw^T in dwtbuf, then into dw (all channels)
    if mode_dx == 1 and not pw:     # col2im adds; a pointwise dx is written plane by plane
        plane = dims[2] * dims[3] * dims[4]
        for n in range(nlo, nhi):
            dxf[(n * C + clo) * plane:(n * C + chi) * plane] = 0
    for n0 in range(nlo, nhi, nbmax):
        nb = min(nbmax, nhi - n0)
        colf = colbuf[:ck * nb * P]
        col = colf.reshape((ck, nb * P))
        for j in range(G):
            c0 = clo + j * cg
            wj = w3[j][:, kl:kl + ck]
            if nb == 1:
                dyt = dy[n0, j * Fg:(j + 1) * Fg]
            else:
                dyt = tmpbuf[:Fg * nb * P].reshape((Fg, nb * P))
                _gather(dy, n0, nb, j * Fg, Fg, dyt)
            if mode_dw != 0:
                if direct:
                    lo = (n0 * C + c0) * P
                    colj = xf[lo:lo + cg * P].reshape((cg, P))
                else:
                    im2col(xf, dims, n0, nb, c0, cg, g, colf)
                    colj = col
                if tr:
                    dwt = dwtbuf[j * Fg * CK:(j + 1) * Fg * CK].reshape((CK, Fg))
                    gemm(1.0, colj, dyt.T, 0.0 if n0 == nlo else 1.0, dwt)
                else:   # the first chunk writes dw (mode write), the others add in place
                    first = mode_dw == 1 and n0 == nlo
                    gemm(1.0, dyt, colj.T, 0.0 if first else 1.0, dw3[j][:, kl:kl + ck])
            if mode_dx != 0:
                if direct:
                    lo = (n0 * C + c0) * P
                    gemm(1.0, wj.T, dyt, 0.0 if mode_dx == 1 else 1.0,
                         dxf[lo:lo + cg * P].reshape((cg, P)))
                else:
                    gemm(1.0, wj.T, dyt, 0.0, col)
                    if pw:  # run-time False (direct), mode_dx: no literals, the forward's _scatter
                        _scatter(col, n0, nb, c0, cg, dxf.reshape((dims[0], C, P)),
                                 mode_dx == 2, colf, direct, None, mode_dx, None)
                    else:
                        col2im(colf, dims, n0, nb, c0, cg, g, dxf)
    if tr and nhi > nlo:
        for j in range(G):
            _transpose(dwtbuf, j * Fg * CK, CK, Fg, dw3[j].reshape(-1), 0, mode_dw == 2)


@njit(**JIT)
def add_bias(y, b):
    """``y[n, f, :] += b[f]`` for ``y`` of shape ``(N, F, P)``."""
    N, F, P = y.shape
    for n in range(N):
        for f in range(F):
            v = b[f]
            row = y[n, f]
            for i in range(np.uint64(P)):
                row[i] += v


@njit(**JIT)
def bias_grad(dy, db, add):
    """``db (+)= sum over n and p of dy[n, :, p]``."""
    N, F, P = dy.shape
    for f in range(F):
        acc = 0.0
        for n in range(N):
            row = dy[n, f]
            for i in range(np.uint64(P)):
                acc += row[i]
        if add:
            db[f] += acc
        else:
            db[f] = acc
