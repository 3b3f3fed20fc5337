"""Winograd minimal filtering F(2x2, 3x3): 3x3, stride 1 convolutions with fewer multiplies.

Each output tile of 2x2 pixels is computed from a 4x4 input tile ``d`` and
the 3x3 filter ``g`` as (Lavin & Gray 2016, eq. 8)::

    Y = A^T [ (G g G^T) (.) (B^T d B) ] A

with the matrices of F(2, 3)::

    B^T = [[1, 0, -1, 0],   G = [[1,    0,    0 ],   A^T = [[1, 1,  1,  0],
           [0, 1,  1, 0],        [1/2,  1/2,  1/2],          [0, 1, -1, -1]]
           [0, -1, 1, 0],        [1/2, -1/2,  1/2],
           [0, 1,  0, -1]]       [0,    0,    1 ]]

Over channels the elementwise product becomes, per each of the 16 tile
positions ``e`` (``xi, nu`` in the paper), one matrix product: with
``U[e] = (G g G^T)[e]`` of shape ``(F, C)`` and ``V[e] = (B^T d B)[e]`` of
shape ``(C, L)`` (``L`` tiles of a chunk of samples), ``M[e] = U[e] V[e]``
and ``Y = A^T M A`` tile by tile. A 3x3 output position then costs
16 / 4 = 4 multiply-adds per input channel instead of 9 (2.25x fewer GEMM
flops than im2col); the transforms are additions only (and halves in ``G``).
F(2x2, 3x3) keeps the float32 error of im2col (its transforms have entries
0, +-1, +-1/2; measured on 64-512 channel layers: max relative error
2-7e-7 against float64 for the output and both gradients, im2col 2-6e-7).
The drivers here also run F(4x4, 3x3) (tile ``m = 4``, 36 positions, :mod:`._winograd4`).

Non-finite values: ``inf - inf`` in the transforms turns an inf im2col passes through into
NaN, and ``G^T dU G`` spreads one NaN over all nine taps of a weight gradient, so a call whose
data, weight (or head gradient) holds an inf or NaN runs im2col (:func:`all_finite`).

Everything is linear, so the gradients are the transposed stages::

    dM = A dY A^T                   (output transform transposed)
    dV[e] = U[e]^T dM[e]            dU[e] = dM[e] V[e]^T   (batched GEMMs)
    dX += B dV B^T, scattered-added over overlapping tiles
    dW = G^T dU G

Layout (tile ``m``, ``a2 = (m + 2)^2`` positions): a chunk of ``nb`` samples
gives ``L = nb * TH * TW`` tiles (``TH = ceil(OH / m)``); ``V`` is the flat
``(a2, C, L)`` and ``M`` the flat ``(a2, F, L)`` scratch, positions
:func:`stride` elements apart (never a power of two: streams a power of two
apart share cache sets, which made the transforms 3-4x slower). Each input
plane is first copied into a zero-bordered ``(m TH + 2) x (m TW + 2)`` plane
(borders written once per call), so tile reads need no bounds checks. The kernels are
``nogil`` and allocation-free; the drivers run on a range of samples (:mod:`._conv_par`),
in chunks of samples (:func:`chunk_size`). Inference fusion: :mod:`._conv_epilogue`.

Source: A. Lavin, S. Gray, "Fast Algorithms for Convolutional Neural Networks", CVPR 2016
(arXiv:1509.09308), section 4 and eqs. (7)-(8).
"""
import os

import numpy as np
from numba import njit

from ...blas_threads import numba_blas_single_thread
from ...jit import JIT, helper_njit
from .._gemm import gemm
from . import _im2col as ic
from ._conv_epilogue import apply_block, expand
from . import _winograd4 as w4
from ._conv_par import run_split, split_threads, sum_parts, transform_filters, transform_filters_t

__all__ = ['tiles', 'chunk_size', 'filter_transform', 'filter_transform_t', 'forward_range',
           'backward_range', 'stride', 'forward', 'backward', 'enabled', 'eligible', 'ALPHA',
           'all_finite']

#: Input tile side (m + r - 1 for m = 2, r = 3): 16 transform positions.
ALPHA = 4
#: Target elements of a chunk's larger transformed matrix ``V`` or ``M`` (``a2 max(C, F) L``).
V_CHUNK_ELEMS = 1 << 18
#: Bounds of the fewest GEMM columns (tiles) a chunk aims for, ``F * C / 1024`` (``U[e]``'s size).
MIN_TILES, MAX_TILES = 64, 256


def tiles(oh, ow, m=2):
    """``(TH, TW)``: ``m x m`` output tiles per column and row of an ``oh x ow`` output."""
    return -(-oh // m), -(-ow // m)


def chunk_size(n, c, f, t, a2=16):
    """Samples per chunk of ``n`` (``t`` tiles each, ``a2`` positions): the larger of ``V``
    and ``M`` near :data:`V_CHUNK_ELEMS` elements, at least ``c * f / 1024`` tiles (within
    :data:`MIN_TILES`..:data:`MAX_TILES`): short chunks that stay in cache for small weights,
    wide GEMMs for large ``U[e]``. Against a fixed 2^19 and 256 (batch 32, the 12 Winograd
    layers of ResNet-50, VGG-11, GoogLeNet): 2 threads forward 34.3 -> 31.7 ms, backward 64.4
    -> 60.2; 1 thread 57.0 -> 54.0 and 108.0 -> 104.6 (see docs/guide/devices.md)."""
    per = a2 * max(c, f) * max(1, t)
    least = min(MAX_TILES, max(MIN_TILES, c * f // 1024))
    nb = max(V_CHUNK_ELEMS // per, -(-least // max(1, t)))
    return int(max(1, min(n, nb)))


@helper_njit
def stride(n):
    """Elements between consecutive transform positions of an ``n``-element matrix.

    ``n`` rounded up to 16 elements, plus 16 when that is a multiple of 1024:
    the 16 (36) position streams a transform reads or writes then never sit a
    power of two apart (which would map them onto the same cache sets).
    """
    s = (n + 15) // 16 * 16
    if s % 1024 == 0:
        s += 16
    return s


# ---------------------------------------------------------------- filter transform

@helper_njit
def _g3(a, b, d, h):
    """``G (a, b, d)^T``: the four entries of one column of ``G g`` (``h`` = 1/2 in their dtype)."""
    return a, h * (a + b + d), h * (a - b + d), d


@helper_njit
def _gt4(a, b, d, e, h):
    """``G^T (a, b, d, e)^T``: three entries (``h`` = 1/2 in their dtype)."""
    return a + h * (b + d), h * (b - d), h * (b + d) + e


@njit(**JIT)
def filter_transform(w, uf, us):
    """``uf[e*us + f*C + c] = (G w[f, c] G^T)[e]`` for ``w`` of shape ``(F, C, 3, 3)``.

    ``uf`` is flat, ``16 * us`` elements; position ``e`` holds the ``(F, C)``
    matrix ``U[e]`` at offset ``e * us`` (``us >= F*C``, see :func:`stride`).
    """
    F, C = w.shape[0], w.shape[1]
    h = uf.dtype.type(0.5)
    wf = w.reshape(F * C * 9)
    FC = np.uint64(us)
    for q in range(np.uint64(F * C)):
        k = np.uint64(9) * q
        # G g: columns of the 3x3 filter (rows 0..2 of column j are wf[k+j], wf[k+3+j], wf[k+6+j])
        a0, a1, a2, a3 = _g3(wf[k], wf[k + 3], wf[k + 6], h)
        b0, b1, b2, b3 = _g3(wf[k + 1], wf[k + 4], wf[k + 7], h)
        c0, c1, c2, c3 = _g3(wf[k + 2], wf[k + 5], wf[k + 8], h)
        # (G g) G^T: row r of G g times G^T, to positions 4r .. 4r+3 (``e`` a variable:
        # a literal argument would compile one _put4 per constant)
        rows = (_g3(a0, b0, c0, h), _g3(a1, b1, c1, h), _g3(a2, b2, c2, h), _g3(a3, b3, c3, h))
        for r in range(4):
            _put4(uf, q, FC, 4 * r, rows[r])


@helper_njit
def _put4(uf, q, st, e, v):
    """``uf[q + (e + i) * st] = v[i]`` for ``i < 4``."""
    for i in range(4):
        uf[q + np.uint64(e + i) * st] = v[i]


@njit(**JIT)
def filter_transform_t(df, us, dw, add):
    """``dw[f, c] (+)= G^T dU[:, f, c] G``: :func:`filter_transform` transposed (same layout of ``df``)."""
    F, C = dw.shape[0], dw.shape[1]
    h = df.dtype.type(0.5)
    wf = dw.reshape(F * C * 9)
    FC = np.uint64(us)
    for q in range(np.uint64(F * C)):
        # du G: row r of the 4x4 dU times G gives 3 entries
        r00, r01, r02 = _gt4(df[q], df[q + FC], df[q + 2 * FC], df[q + 3 * FC], h)
        r10, r11, r12 = _gt4(df[q + 4 * FC], df[q + 5 * FC], df[q + 6 * FC], df[q + 7 * FC], h)
        r20, r21, r22 = _gt4(df[q + 8 * FC], df[q + 9 * FC], df[q + 10 * FC],
                             df[q + 11 * FC], h)
        r30, r31, r32 = _gt4(df[q + 12 * FC], df[q + 13 * FC], df[q + 14 * FC],
                             df[q + 15 * FC], h)
        # G^T (du G), column by column
        g00, g10, g20 = _gt4(r00, r10, r20, r30, h)
        g01, g11, g21 = _gt4(r01, r11, r21, r31, h)
        g02, g12, g22 = _gt4(r02, r12, r22, r32, h)
        k = np.uint64(9) * q
        out = (g00, g01, g02, g10, g11, g12, g20, g21, g22)
        for i in range(9):
            if add:
                wf[k + i] += out[i]
            else:
                wf[k + i] = out[i]


# ---------------------------------------------------------------- data transforms

@helper_njit(by_reference=True)
def _load_plane(xf, src, H, W, ph, pw, padf, row):
    """Copy one ``H x W`` plane at ``xf[src:]`` into the zero-bordered ``padf`` (row length ``row``)."""
    uw = np.uint64(W)
    for h in range(H):
        us = np.uint64(src + h * W)
        ud = np.uint64((h + ph) * row + pw)
        for i in range(uw):
            padf[ud + i] = xf[us + i]


@helper_njit
def _bt4(d0, d1, d2, d3):
    """``B^T d`` for one column of four values."""
    return d0 - d2, d1 + d2, d2 - d1, d1 - d3


@helper_njit
def _col4(p, o, row):
    """``B^T`` of the four entries ``p[o + k*row]``: one column of a 4x4 tile."""
    return _bt4(p[o], p[o + row], p[o + 2 * row], p[o + 3 * row])


@helper_njit(by_reference=True)
def _input_tf(padf, row, TH, TW, v, base, CL):
    """``v[e*CL + base + i*TW + j] = (B^T d B)[e]`` for the tiles ``d`` of one padded plane."""
    ucl, ur = np.uint64(CL), np.uint64(row)
    for i in range(TH):
        r0 = np.uint64(2 * i * row)
        q = np.uint64(base + i * TW)
        # tiles overlap by two columns: a tile's columns 2 and 3 are the next one's 0 and 1
        c2, c3 = _col4(padf, r0, ur), _col4(padf, r0 + np.uint64(1), ur)
        for j in range(np.uint64(TW)):
            k = r0 + np.uint64(2) * j
            c0, c1 = c2, c3
            c2, c3 = _col4(padf, k + np.uint64(2), ur), _col4(padf, k + np.uint64(3), ur)
            o = q + j
            for r in range(4):       # row r of B^T d, times B
                t = _bt4(c0[r], c1[r], c2[r], c3[r])
                for s in range(4):
                    v[o + np.uint64(4 * r + s) * ucl] = t[s]


@helper_njit
def _bt_col(v0, v1, v2, v3):
    """``B (v0, v1, v2, v3)^T``: the transpose of the row combination in :func:`_input_tf`."""
    return v0, v1 - v2 + v3, v1 + v2 - v0, -v3


@helper_njit(by_reference=True)
def _input_tf_t(v, base, CL, TH, TW, padf, row):
    """``padf += B dV B^T`` per tile (scatter-add of overlapping 4x4 tiles): :func:`_input_tf` transposed."""
    ucl = np.uint64(CL)
    for i in range(TH):
        q = np.uint64(base + i * TW)
        for j in range(np.uint64(TW)):
            o = q + j
            # columns of B dV: one per s, from dV[r, s] (e = 4 r + s)
            a0, a1, a2, a3 = _bt_col(v[o], v[o + 4 * ucl], v[o + 8 * ucl], v[o + 12 * ucl])
            b0, b1, b2, b3 = _bt_col(v[o + ucl], v[o + 5 * ucl], v[o + 9 * ucl],
                                     v[o + 13 * ucl])
            c0, c1, c2, c3 = _bt_col(v[o + 2 * ucl], v[o + 6 * ucl], v[o + 10 * ucl],
                                     v[o + 14 * ucl])
            d0, d1, d2, d3 = _bt_col(v[o + 3 * ucl], v[o + 7 * ucl], v[o + 11 * ucl],
                                     v[o + 15 * ucl])
            rows = ((a0, b0, c0, d0), (a1, b1, c1, d1), (a2, b2, c2, d2), (a3, b3, c3, d3))
            for r in range(4):
                p0, p1, p2, p3 = rows[r]
                x0, x1, x2, x3 = _bt_col(p0, p1, p2, p3)
                d = np.uint64((2 * i + r) * row) + np.uint64(2) * j
                padf[d] += x0
                padf[d + 1] += x1
                padf[d + 2] += x2
                padf[d + 3] += x3


@helper_njit(by_reference=True)
def _output_tf(m, base, FL, TH, TW, yp, OH, OW, bv):
    """``yp = A^T M A + bv`` for the tiles of one output plane ``yp`` (flat, ``OH x OW``)."""
    ufl = np.uint64(FL)
    uow = np.uint64(OW)
    for i in range(TH):
        q = np.uint64(base + i * TW)
        h = 2 * i
        two = h + 1 < OH
        for j in range(np.uint64(TW)):
            o = q + j
            # rows of A^T M: s0 = m0 + m1 + m2, s1 = m1 - m2 - m3 (per column s)
            m00, m01, m02, m03 = m[o], m[o + ufl], m[o + 2 * ufl], m[o + 3 * ufl]
            m10, m11, m12, m13 = m[o + 4 * ufl], m[o + 5 * ufl], m[o + 6 * ufl], m[o + 7 * ufl]
            m20, m21, m22, m23 = m[o + 8*ufl], m[o + 9*ufl], m[o + 10*ufl], m[o + 11*ufl]
            m30, m31, m32, m33 = m[o + 12*ufl], m[o + 13*ufl], m[o + 14*ufl], m[o + 15*ufl]
            s00 = m00 + m10 + m20
            s01 = m01 + m11 + m21
            s02 = m02 + m12 + m22
            s03 = m03 + m13 + m23
            s10 = m10 - m20 - m30
            s11 = m11 - m21 - m31
            s12 = m12 - m22 - m32
            s13 = m13 - m23 - m33
            y00 = s00 + s01 + s02 + bv
            y01 = s01 - s02 - s03 + bv
            y10 = s10 + s11 + s12 + bv
            y11 = s11 - s12 - s13 + bv
            w = np.uint64(2) * j
            d = np.uint64(h) * uow + w
            wide = w + 1 < uow
            yp[d] = y00
            if wide:
                yp[d + 1] = y01
            if two:
                yp[d + uow] = y10
                if wide:
                    yp[d + uow + 1] = y11


@helper_njit(by_reference=True)
def _output_tf_t(gp, OH, OW, TH, TW, m, base, FL):
    """``m[:, base + tile] = A dY A^T`` for the 2x2 tiles of one head-gradient plane ``gp``."""
    ufl = np.uint64(FL)
    uow = np.uint64(OW)
    z = gp.dtype.type(0)
    for i in range(TH):
        q = np.uint64(base + i * TW)
        h = 2 * i
        two = h + 1 < OH
        for j in range(np.uint64(TW)):
            o = q + j
            w = np.uint64(2) * j
            d = np.uint64(h) * uow + w
            wide = w + 1 < uow
            g00 = gp[d]
            g01 = gp[d + 1] if wide else z
            g10 = gp[d + uow] if two else z
            g11 = gp[d + uow + 1] if two and wide else z
            # rows of A g: g0, g0 + g1, g0 - g1, -g1 (g0, g1 the rows of the tile); same on columns
            rows = ((g00, g01), (g00 + g10, g01 + g11), (g00 - g10, g01 - g11), (-g10, -g11))
            for r in range(4):
                a, b = rows[r]
                ur = np.uint64(4 * r)
                m[o + ur * ufl] = a
                m[o + (ur + 1) * ufl] = a + b
                m[o + (ur + 2) * ufl] = a - b
                m[o + (ur + 3) * ufl] = -b


# ---------------------------------------------------------------- drivers

@helper_njit
def _mat(buf, e, st, rows, cols):
    """The ``(rows, cols)`` matrix of transform position ``e`` in a flat buffer of stride ``st``."""
    return buf[e * st:e * st + rows * cols].reshape((rows, cols))


@njit(**JIT)
def forward_range(xf, dims, uf, us, y, bias, has_bias, vbuf, mbuf, padbuf, nbmax, ph, pw,
                  nlo, nhi, m, ep, ep_mode):
    """``y = conv3x3(x, w) (+ bias)`` on samples ``nlo..nhi``, by F(m x m, 3x3) (``m`` 2 or 4),
    each output sample followed by the epilogue ``ep_mode`` (:mod:`._conv_epilogue`; 0 none).

    ``xf``: flat ``(N, C, H, W)`` (``dims``); ``uf`` / ``us``: ``U`` from
    :func:`filter_transform`; ``y``: ``(N, F, OH, OW)``; ``vbuf`` / ``mbuf``
    / ``padbuf``: flat scratch of at least ``a2*stride(C*nbmax*T)`` /
    ``a2*stride(F*nbmax*T)`` / ``(m TH+2)*(m TW+2)`` elements (``a2 = (m+2)^2``).
    """
    C, H, W = dims[1], dims[2], dims[3]
    F = y.shape[1]
    OH, OW = y.shape[2], y.shape[3]
    TH, TW = (OH + m - 1) // m, (OW + m - 1) // m
    T = TH * TW
    row = m * TW + 2
    padf = padbuf[:(m * TH + 2) * row]
    padf[:] = 0
    z = y.dtype.type(0)
    if ep is None:              # a plain convolution: numba prunes the epilogue code
        rep = ep
    else:
        rep = expand(ep, F, OH * OW)
    for n0 in range(nlo, nhi, nbmax):
        nb = min(nbmax, nhi - n0)
        L = nb * T
        vs, ms = stride(C * L), stride(F * L)
        for b in range(nb):
            for c in range(C):
                _load_plane(xf, ((n0 + b) * C + c) * H * W, H, W, ph, pw, padf, row)
                if m == 4:
                    w4.input_tf(padf, row, TH, TW, vbuf, c * L + b * T, vs)
                else:
                    _input_tf(padf, row, TH, TW, vbuf, c * L + b * T, vs)
        for e in range((m + 2) * (m + 2)):
            gemm(1.0, _mat(uf, e, us, F, C), _mat(vbuf, e, vs, C, L), 0.0, _mat(mbuf, e, ms, F, L))
        for b in range(nb):
            yb = y[n0 + b]
            for f in range(F):
                bv = bias[f] if has_bias else z
                yf = yb[f].reshape(OH * OW)
                if m == 4:
                    w4.output_tf(mbuf, f * L + b * T, ms, TH, TW, yf, OH, OW, bv)
                else:
                    _output_tf(mbuf, f * L + b * T, ms, TH, TW, yf, OH, OW, bv)
            if ep is not None:
                apply_block(yb.reshape(-1), 0, F, OH * OW, 0, ep, rep, ep_mode)


@njit(**JIT)
def backward_range(xf, dims, uf, us, dy, dxf, duf, mode_dx, mode_du, vbuf, mbuf, padbuf,
                   nbmax, ph, pw, nlo, nhi, m, m4):
    """Gradients of :func:`forward_range` on samples ``nlo..nhi``.

    ``dxf`` (flat like ``xf``) gets ``B dV B^T`` scattered-added (written
    when ``mode_dx == 1``, added when 2, untouched when 0); ``duf`` (laid
    out like ``uf``) gets ``dM V^T`` summed over these samples (written when
    ``mode_du == 1``, added when 2) by the GEMMs themselves (``beta = 1``
    after the first chunk). ``m4``: None runs F(2x2, 3x3) only (``m == 2``; numba
    prunes the F(4x4, 3x3) code, about 2 s of a cold start), anything else gives one
    compiled body for both tiles: the zoo's nets run both in their backward (F(4x4, 3x3)
    on the wide early layers), where two specialisations compiled the driver twice.
    """
    C, H, W = dims[1], dims[2], dims[3]
    F = dy.shape[1]
    OH, OW = dy.shape[2], dy.shape[3]
    TH, TW = (OH + m - 1) // m, (OW + m - 1) // m
    T = TH * TW
    row = m * TW + 2
    psz = (m * TH + 2) * row
    padf = padbuf[:psz]
    if mode_du != 0:
        padf[:] = 0
    for n0 in range(nlo, nhi, nbmax):
        nb = min(nbmax, nhi - n0)
        L = nb * T
        vs, ms = stride(C * L), stride(F * L)
        for b in range(nb):
            for f in range(F):
                g = dy[n0 + b, f].reshape(OH * OW)
                if m4 is not None and m == 4:
                    w4.output_tf_t(g, OH, OW, TH, TW, mbuf, f * L + b * T, ms)
                else:
                    _output_tf_t(g, OH, OW, TH, TW, mbuf, f * L + b * T, ms)
        if mode_du != 0:
            for b in range(nb):
                for c in range(C):
                    _load_plane(xf, ((n0 + b) * C + c) * H * W, H, W, ph, pw, padf, row)
                    if m4 is not None and m == 4:
                        w4.input_tf(padf, row, TH, TW, vbuf, c * L + b * T, vs)
                    else:
                        _input_tf(padf, row, TH, TW, vbuf, c * L + b * T, vs)
            first = mode_du == 1 and n0 == nlo
            for e in range((m + 2) * (m + 2)):
                me = _mat(mbuf, e, ms, F, L)
                ve = _mat(vbuf, e, vs, C, L)
                gemm(1.0, me, ve.T, 0.0 if first else 1.0, _mat(duf, e, us, F, C))
        if mode_dx != 0:
            for e in range((m + 2) * (m + 2)):
                gemm(1.0, _mat(uf, e, us, F, C).T, _mat(mbuf, e, ms, F, L), 0.0,
                     _mat(vbuf, e, vs, C, L))
            for b in range(nb):
                for c in range(C):
                    padf[:] = 0
                    if m4 is not None and m == 4:
                        w4.input_tf_t(vbuf, c * L + b * T, vs, TH, TW, padf, row)
                    else:
                        _input_tf_t(vbuf, c * L + b * T, vs, TH, TW, padf, row)
                    dst = ((n0 + b) * C + c) * H * W
                    uw = np.uint64(W)
                    for h in range(H):
                        ud = np.uint64(dst + h * W)
                        us_ = np.uint64((h + ph) * row + pw)
                        if mode_dx == 1:
                            for i in range(uw):
                                dxf[ud + i] = padf[us_ + i]
                        else:
                            for i in range(uw):
                                dxf[ud + i] += padf[us_ + i]
        if mode_du != 0 and mode_dx != 0:
            padf[:] = 0          # the load of the next chunk relies on zero borders


# ---------------------------------------------------------------- Python drivers

@njit(**JIT)
def _finite(a):
    s = z = a.dtype.type(0)
    for i in range(a.size):
        s += a[i] * z          # inf * 0 and NaN * 0 are NaN (a loop that vectorises)
    return s == 0


def all_finite(*arrays):
    """Whether no element of the (contiguous) arrays is an inf or NaN."""
    return all(_finite(a.reshape(-1)) for a in arrays)


def enabled():
    """Whether the Winograd path may run: ``FFNUMBA_CONV_WINOGRAD`` is not ``0`` (read per call)."""
    return os.environ.get('FFNUMBA_CONV_WINOGRAD', '1').strip() != '0'


def eligible(kernel, stride, pad, dilate, groups, xshape):
    """Whether a Convolution has F(2x2, 3x3)'s geometry: 2-D, kernel 3x3, stride 1, dilate 1,
    ``num_group == 1`` (any pad)."""
    return (len(xshape) == 4 and tuple(kernel) == (3, 3) and tuple(stride) == (1, 1)
            and tuple(dilate) == (1, 1) and groups == 1)


#: Fewest input channels for which F(2x2, 3x3) beat im2col (3-channel stems: the
#: 16 GEMMs have inner dimension C = 3 and run far below BLAS speed).
MIN_CHANNELS = 16
#: Smallest output height and width: a 2x2 output is one tile per sample, and the
#: filter transform (F*C filters, done per call) costs as much as the GEMMs saved.
MIN_OUT = 4


def faster(xshape, yshape):
    """The measured dispatch rule: whether F(2x2, 3x3) beats im2col for this layer.

    Winograd when the layer has at least :data:`MIN_CHANNELS` input channels
    and an output of at least :data:`MIN_OUT` x :data:`MIN_OUT`. Measured
    (``benchmarks/conv_winograd.py``, batch 32, one thread, float32, loaded
    machine, so +-15% noise) on the 3x3 layers of VGG-11 and ResNet-18 at
    32x32: mostly 1.2-1.5x faster forward and backward from 64 channels at
    32x32 down to 256-512 channels at 4x4 (all layers together 1.2x); 0.4x
    on the 3-channel stem and 0.6-0.7x on 512 channels at 2x2.

    Parameters
    ----------
    xshape : tuple of int ``(N, C, H, W)``
    yshape : tuple of int ``(N, F, OH, OW)``
    """
    oh, ow = yshape[2], yshape[3]
    return xshape[1] >= MIN_CHANNELS and min(oh, ow) >= MIN_OUT


def _plan(state, dims, F, OH, OW, dtype, nt, m):
    N, C = dims[0], dims[1]
    TH, TW = tiles(OH, OW, m)
    T, a2 = TH * TW, (m + 2) * (m + 2)
    nb = chunk_size(-(-N // nt), C, F, T, a2)
    vsz, msz = a2 * stride.py_func(C * nb * T), a2 * stride.py_func(F * nb * T)
    psz = (m * TH + 2) * (m * TW + 2)
    vbuf = ic.buffer(state, 'wino_v', nt * vsz, dtype)
    mbuf = ic.buffer(state, 'wino_m', nt * msz, dtype)
    pbuf = ic.buffer(state, 'wino_pad', nt * psz, dtype)
    us = stride.py_func(F * C)      # py_func: no kernel to load on a warm start
    u = ic.buffer(state, 'wino_u', a2 * us, dtype)
    return nb, (vbuf, vsz), (mbuf, msz), (pbuf, psz), (u, us)


def forward(state, x, w, bias, y, pad, m=2, ep=None, ep_mode=0):
    """``y = conv(x, w) + bias`` by F(m x m, 3x3), the batch split over threads as in :mod:`._conv_par`.

    ``state``: the op's state (scratch); x ``(N, C, H, W)``; w ``(F, C, 3, 3)``; bias ``(F,)`` or
    None; y ``(N, F, OH, OW)``, written; pad ``(int, int)``; ``m``: 2 (F(2x2, 3x3)) or 4
    (F(4x4, 3x3), :mod:`._winograd4`); ``ep``, ``ep_mode``: an epilogue.
    """
    N, C = x.shape[0], x.shape[1]
    F, OH, OW = y.shape[1], y.shape[2], y.shape[3]
    x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
    nt = split_threads(N)
    nb, (vbuf, vsz), (mbuf, msz), (pbuf, psz), (u, us) = _plan(state, x.shape, F, OH, OW,
                                                               x.dtype, nt, m)
    transform_filters(w4.filter_transform if m == 4 else filter_transform, w, u, us)
    has_bias = bias is not None
    b = bias if has_bias else w.reshape(-1)
    xf, dims = x.reshape(-1), tuple(int(s) for s in x.shape)

    def part(t):
        forward_range(xf, dims, u, us, y, b, has_bias, vbuf[t * vsz:(t + 1) * vsz],
                      mbuf[t * msz:(t + 1) * msz], pbuf[t * psz:(t + 1) * psz], nb,
                      pad[0], pad[1], N * t // nt, N * (t + 1) // nt, m, ep, ep_mode)
    if nt == 1:
        part(0)
        return
    with numba_blas_single_thread():
        run_split(part, nt)


def backward(state, x, w, dy, dx, dw, mode_dx, mode_dw, pad, m=2):
    """Data and weight gradients of :func:`forward` (modes 0 null, 1 write, 2 add).

    ``dx`` ``(N, C, H, W)`` and ``dw`` ``(F, C, 3, 3)`` are only touched
    when their mode is set (pass None otherwise). The weight gradient is
    accumulated in the transformed domain (``dU``, one part per thread),
    summed, then transformed back once: ``dw (+)= G^T dU G``.
    """
    N, C = x.shape[0], x.shape[1]
    F, OH, OW = dy.shape[1], dy.shape[2], dy.shape[3]
    x, w, dy = np.ascontiguousarray(x), np.ascontiguousarray(w), np.ascontiguousarray(dy)
    nt = split_threads(N)
    nb, (vbuf, vsz), (mbuf, msz), (pbuf, psz), (u, us) = _plan(state, x.shape, F, OH, OW,
                                                               x.dtype, nt, m)
    a2 = (m + 2) * (m + 2)
    if mode_dx:
        transform_filters(w4.filter_transform if m == 4 else filter_transform, w, u, us)
    dus = ic.buffer(state, 'wino_du', nt * a2 * us, x.dtype).reshape((nt, a2 * us))
    xf, dims = x.reshape(-1), tuple(int(s) for s in x.shape)
    dxf = dx.reshape(-1) if mode_dx else vbuf[:1]
    mode_du = 1 if mode_dw else 0
    # F(4x4, 3x3) forced off (FFNUMBA_CONV_WINOGRAD=2): the driver without its code
    only2 = m == 2 and os.environ.get('FFNUMBA_CONV_WINOGRAD', '1').strip() == '2'

    def part(t):
        backward_range(xf, dims, u, us, dy, dxf, dus[t], mode_dx, mode_du,
                       vbuf[t * vsz:(t + 1) * vsz], mbuf[t * msz:(t + 1) * msz],
                       pbuf[t * psz:(t + 1) * psz], nb, pad[0], pad[1], N * t // nt,
                       N * (t + 1) // nt, m, None if only2 else True)
    if nt == 1:
        part(0)
    else:
        with numba_blas_single_thread():
            run_split(part, nt)
    if mode_dw:
        du = dus[0]
        if nt > 1:      # the (F, C) matrices only: the stride's padding is never written
            rows = dus.reshape((nt, a2, us))
            sum_parts(rows, 1, rows[0], F * C, False)
        transform_filters_t(w4.filter_transform_t if m == 4 else filter_transform_t, du, us, dw,
                            mode_dw == 2)
