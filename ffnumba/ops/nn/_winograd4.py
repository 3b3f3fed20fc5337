"""Winograd minimal filtering F(4x4, 3x3): the transforms of 4x4 output tiles from 6x6 input tiles.

Each output tile of 4x4 pixels is computed from a 6x6 input tile ``d`` and
the 3x3 filter ``g`` as ``Y = A^T [(G g G^T) (.) (B^T d B)] A`` (Lavin & Gray
2016, eq. 8), with 36 transform positions: a 3x3 output position costs
36 / 16 = 2.25 multiply-adds per input channel (4 with F(2x2, 3x3), 9 with
im2col). The drivers (chunks of samples, the 36 batched GEMMs, thread split,
scratch strides) are :mod:`._winograd`'s, run with tile ``m = 4``; this module
holds the F(4x4, 3x3) transforms only.

Interpolation points. The matrices come from the Toom-Cook construction on
the points ``0, +a, -a, +b, -b`` and infinity (Lavin & Gray, section 4;
Barabasz, Anderson, Soodhalter, Gregg, "Error analysis and improving the
accuracy of Winograd convolution for deep neural networks", ACM TOMS 46(4),
2020, arXiv:1803.10986, who show the points decide F(4x4, 3x3)'s float32
error and that points nearer 1 than Lavin's ``0, +-1, +-2`` do better). With
``M_j(x) = prod_{l != j} (x - p_l)`` the row ``j`` of ``B^T`` holds the
coefficients of ``M_j`` (``M_inf = prod_l (x - p_l)``), row ``j`` of ``G`` is
``(1, p_j, p_j^2) / M_j(p_j)`` and column ``j`` of ``A^T`` is
``(1, p_j, p_j^2, p_j^3)`` (the infinity row/column ``e_2`` / ``e_3``)::

    B^T = [[a2b2,  0,     -(a2+b2),  0,        1, 0],     a2 = a^2, b2 = b^2
           [0,    -a b2,  -b2,       a,        1, 0],
           [0,     a b2,  -b2,      -a,        1, 0],
           [0,    -b a2,  -a2,       b,        1, 0],
           [0,     b a2,  -a2,      -b,        1, 0],
           [0,     a2b2,   0,       -(a2+b2),  0, 1]]

We use ``a = 3/2, b = 3/4``: every ``B^T`` and ``A^T`` entry (81/64, 45/16,
27/32, ...) is exact in binary, only ``G``'s are rounded. Chosen by a search
over sets ``0, p1..p4`` of 14 candidates (``+-1, +-2, +-1/2, +-1/4, +-3/2,
+-3/4, +-2/3``), float32 forward of a 256-channel 8x8 layer against float64:
max relative error 1.1e-6 for ``+-3/2, +-3/4`` (the best, 1.0e-6, needs the
inexact 2/3), 4.4e-6 for Barabasz et al.'s ``0, +-1, 1/2, -2`` and 9e-6 for
Lavin's ``0, +-1, +-2``; im2col 5.7e-7 (numpy simulation of the algorithm).
Measured with these kernels on VGG-11's 3x3 layers (output / data gradient):
``a, b = 3/2, 3/4`` 0.7-3.7e-6 / 1.2-3.1e-6, ``11/8, 11/16`` and ``3/2, 2/3``
about the same, ``5/4, 5/8`` 1.0-4.3e-6 / 1.6-3.8e-6, ``2, 1/2`` 1.3-7.1e-6 /
3.1-7.1e-6, ``1, 1/2`` 3.6-13e-6 / 3.7-8.5e-6, Lavin's ``2, 1`` 3.4-14e-6.
The transforms are computed in float64 (the constants are Python floats)
and rounded once on store. The measured errors of these kernels and the
rule for when F(4x4, 3x3) runs are in :func:`faster`.

Source: A. Lavin, S. Gray, "Fast Algorithms for Convolutional Neural
Networks", CVPR 2016 (arXiv:1509.09308), section 4 and eqs. (7)-(8).
"""
import os

import numpy as np
from numba import njit

from ...jit import JIT, helper_njit

__all__ = ['ALPHA', 'M', 'POINTS', 'filter_transform', 'filter_transform_t', 'input_tf',
           'input_tf_t', 'output_tf', 'output_tf_t', 'faster', 'tile']

#: Output tile side and input tile side (m + r - 1): 36 transform positions.
M, ALPHA = 4, 6
#: The finite interpolation points (infinity is the sixth).
POINTS = (0.0, 1.5, -1.5, 0.75, -0.75)

_A, _B = 1.5, 0.75
_A2, _B2 = _A * _A, _B * _B
_A2B2, _S2 = _A2 * _B2, _A2 + _B2
_AB2, _BA2 = _A * _B2, _B * _A2
_CA = 1.0 / (2.0 * _A2 * (_A2 - _B2))          # 1 / M_{+-a}(+-a)
_CB = 1.0 / (2.0 * _B2 * (_B2 - _A2))          # 1 / M_{+-b}(+-b)
_C0 = 1.0 / _A2B2                              # 1 / M_0(0)
_F = np.float64                                # the transforms compute in float64


# ---------------------------------------------------------------- 1-D transforms

@helper_njit
def _bt(d0, d1, d2, d3, d4, d5):
    """``B^T d`` for one column of six values."""
    ea, oa = d4 - _B2 * d2, _A * d3 - _AB2 * d1
    eb, ob = d4 - _A2 * d2, _B * d3 - _BA2 * d1
    return (_A2B2 * d0 - _S2 * d2 + d4, ea + oa, ea - oa, eb + ob, eb - ob,
            _A2B2 * d1 - _S2 * d3 + d5)


@helper_njit
def _b(v0, v1, v2, v3, v4, v5):
    """``B v``: :func:`_bt` transposed."""
    da, db, sa, sb = v1 - v2, v3 - v4, v1 + v2, v3 + v4
    return (_A2B2 * v0, _A2B2 * v5 - _AB2 * da - _BA2 * db, -_S2 * v0 - _B2 * sa - _A2 * sb,
            _A * da + _B * db - _S2 * v5, _F(v0 + sa + sb), _F(v5))


@helper_njit
def _g(g0, g1, g2):
    """``G g`` for one column of three filter taps: six values."""
    pa, qa = _CA * (g0 + _A2 * g2), _CA * _A * g1
    pb, qb = _CB * (g0 + _B2 * g2), _CB * _B * g1
    return _C0 * g0, pa + qa, pa - qa, pb + qb, pb - qb, _F(g2)


@helper_njit
def _gt(u0, u1, u2, u3, u4, u5):
    """``G^T u``: :func:`_g` transposed (three values)."""
    sa, sb, da, db = u1 + u2, u3 + u4, u1 - u2, u3 - u4
    return (_C0 * u0 + _CA * sa + _CB * sb, _CA * _A * da + _CB * _B * db,
            _CA * _A2 * sa + _CB * _B2 * sb + u5)


@helper_njit
def _at(m0, m1, m2, m3, m4, m5):
    """``A^T m`` for one column of six transform values: four outputs."""
    sa, sb, da, db = m1 + m2, m3 + m4, m1 - m2, m3 - m4
    return (_F(m0 + sa + sb), _A * da + _B * db, _A2 * sa + _B2 * sb,
            _A * _A2 * da + _B * _B2 * db + m5)


@helper_njit
def _a(y0, y1, y2, y3):
    """``A y``: :func:`_at` transposed (six values)."""
    ea, oa = y0 + _A2 * y2, _A * y1 + _A * _A2 * y3
    eb, ob = y0 + _B2 * y2, _B * y1 + _B * _B2 * y3
    return _F(y0), ea + oa, ea - oa, eb + ob, eb - ob, _F(y3)


# ---------------------------------------------------------------- filter transform

@njit(**JIT)
def filter_transform(w, uf, us):
    """``uf[e*us + f*C + c] = (G w[f, c] G^T)[e]`` (``e = 6 r + s``) for ``w`` ``(F, C, 3, 3)``."""
    F, C = w.shape[0], w.shape[1]
    wf = w.reshape(F * C * 9)
    st = np.uint64(us)
    for q in range(np.uint64(F * C)):
        k = np.uint64(9) * q
        # G g, column by column; float64 taps: one compiled _g (its float32 twin computed the
        # same, every product being with a float64 constant first)
        c0 = _g(_F(wf[k]), _F(wf[k + 3]), _F(wf[k + 6]))
        c1 = _g(_F(wf[k + 1]), _F(wf[k + 4]), _F(wf[k + 7]))
        c2 = _g(_F(wf[k + 2]), _F(wf[k + 5]), _F(wf[k + 8]))
        for r in range(6):
            row = _g(c0[r], c1[r], c2[r])
            for s in range(6):
                uf[q + np.uint64(6 * r + s) * st] = row[s]


@njit(**JIT)
def filter_transform_t(df, us, dw, add):
    """``dw[f, c] (+)= G^T dU[:, f, c] G``: :func:`filter_transform` transposed."""
    F, C = dw.shape[0], dw.shape[1]
    wf = dw.reshape(F * C * 9)
    st = np.uint64(us)
    for q in range(np.uint64(F * C)):
        r0 = _gt(df[q], df[q + st], df[q + 2 * st], df[q + 3 * st], df[q + 4 * st],
                 df[q + 5 * st])
        r1 = _gt(df[q + 6 * st], df[q + 7 * st], df[q + 8 * st], df[q + 9 * st],
                 df[q + 10 * st], df[q + 11 * st])
        r2 = _gt(df[q + 12 * st], df[q + 13 * st], df[q + 14 * st], df[q + 15 * st],
                 df[q + 16 * st], df[q + 17 * st])
        r3 = _gt(df[q + 18 * st], df[q + 19 * st], df[q + 20 * st], df[q + 21 * st],
                 df[q + 22 * st], df[q + 23 * st])
        r4 = _gt(df[q + 24 * st], df[q + 25 * st], df[q + 26 * st], df[q + 27 * st],
                 df[q + 28 * st], df[q + 29 * st])
        r5 = _gt(df[q + 30 * st], df[q + 31 * st], df[q + 32 * st], df[q + 33 * st],
                 df[q + 34 * st], df[q + 35 * st])
        k = np.uint64(9) * q
        for j in range(3):           # column j of dU G, then G^T of it
            g = _gt(r0[j], r1[j], r2[j], r3[j], r4[j], r5[j])
            for i in range(3):
                if add:
                    wf[k + np.uint64(3 * i + j)] += g[i]
                else:
                    wf[k + np.uint64(3 * i + j)] = g[i]


# ---------------------------------------------------------------- data transforms

@helper_njit
def _col(p, o, row):
    """``B^T`` of the six entries ``p[o + k*row]``: one column of a 6x6 tile.

    In float64 (exact), so :func:`_bt` compiles once for both passes (in float32 it computed
    the same: each of its sums has a float64 product in it first)."""
    return _bt(_F(p[o]), _F(p[o + row]), _F(p[o + 2 * row]), _F(p[o + 3 * row]),
               _F(p[o + 4 * row]), _F(p[o + 5 * row]))


@helper_njit(by_reference=True)
def input_tf(padf, row, TH, TW, v, base, CL):
    """``v[e*CL + base + i*TW + j] = (B^T d B)[e]`` for the 6x6 tiles ``d`` of one padded plane."""
    ucl = np.uint64(CL)
    ur = np.uint64(row)
    u1, u2, u3, u4, u5 = (np.uint64(1), np.uint64(2), np.uint64(3), np.uint64(4),
                          np.uint64(5))     # uint64 offsets: one compiled _col
    for i in range(TH):
        r0 = np.uint64(4 * i * row)
        q = np.uint64(base + i * TW)
        # tiles overlap by two columns: a tile's columns 4 and 5 are the next one's 0 and 1
        c4, c5 = _col(padf, r0, ur), _col(padf, r0 + u1, ur)
        for j in range(np.uint64(TW)):
            k = r0 + np.uint64(4) * j
            c0, c1, c2 = c4, c5, _col(padf, k + u2, ur)
            c3, c4, c5 = _col(padf, k + u3, ur), _col(padf, k + u4, ur), _col(padf, k + u5, ur)
            o = q + j
            for r in range(6):
                t = _bt(c0[r], c1[r], c2[r], c3[r], c4[r], c5[r])
                e = np.uint64(6 * r)
                for s in range(6):
                    v[o + (e + np.uint64(s)) * ucl] = t[s]


@helper_njit(by_reference=True)
def input_tf_t(v, base, CL, TH, TW, padf, row):
    """``padf += B dV B^T`` per 6x6 tile (scatter-add): :func:`input_tf` transposed."""
    ucl = np.uint64(CL)
    for i in range(TH):
        q = np.uint64(base + i * TW)
        for j in range(np.uint64(TW)):
            o = q + j
            cols = (_b(v[o], v[o + 6 * ucl], v[o + 12 * ucl], v[o + 18 * ucl],
                       v[o + 24 * ucl], v[o + 30 * ucl]),
                    _b(v[o + ucl], v[o + 7 * ucl], v[o + 13 * ucl], v[o + 19 * ucl],
                       v[o + 25 * ucl], v[o + 31 * ucl]),
                    _b(v[o + 2 * ucl], v[o + 8 * ucl], v[o + 14 * ucl], v[o + 20 * ucl],
                       v[o + 26 * ucl], v[o + 32 * ucl]),
                    _b(v[o + 3 * ucl], v[o + 9 * ucl], v[o + 15 * ucl], v[o + 21 * ucl],
                       v[o + 27 * ucl], v[o + 33 * ucl]),
                    _b(v[o + 4 * ucl], v[o + 10 * ucl], v[o + 16 * ucl], v[o + 22 * ucl],
                       v[o + 28 * ucl], v[o + 34 * ucl]),
                    _b(v[o + 5 * ucl], v[o + 11 * ucl], v[o + 17 * ucl], v[o + 23 * ucl],
                       v[o + 29 * ucl], v[o + 35 * ucl]))
            c0, c1, c2, c3, c4, c5 = cols
            for k in range(6):           # row k of (B dV) B^T
                x = _b(c0[k], c1[k], c2[k], c3[k], c4[k], c5[k])
                d = np.uint64((4 * i + k) * row) + np.uint64(4) * j
                for s in range(6):
                    padf[d + np.uint64(s)] += x[s]


@helper_njit(by_reference=True)
def output_tf(m, base, FL, TH, TW, yp, OH, OW, bv):
    """``yp = A^T M A + bv`` for the 4x4 tiles of one output plane ``yp`` (flat ``OH x OW``)."""
    ufl = np.uint64(FL)
    for i in range(TH):
        q = np.uint64(base + i * TW)
        for j in range(TW):
            o = q + np.uint64(j)
            s0 = _at(m[o], m[o + 6 * ufl], m[o + 12 * ufl], m[o + 18 * ufl],
                     m[o + 24 * ufl], m[o + 30 * ufl])
            s1 = _at(m[o + ufl], m[o + 7 * ufl], m[o + 13 * ufl], m[o + 19 * ufl],
                     m[o + 25 * ufl], m[o + 31 * ufl])
            s2 = _at(m[o + 2 * ufl], m[o + 8 * ufl], m[o + 14 * ufl], m[o + 20 * ufl],
                     m[o + 26 * ufl], m[o + 32 * ufl])
            s3 = _at(m[o + 3 * ufl], m[o + 9 * ufl], m[o + 15 * ufl], m[o + 21 * ufl],
                     m[o + 27 * ufl], m[o + 33 * ufl])
            s4 = _at(m[o + 4 * ufl], m[o + 10 * ufl], m[o + 16 * ufl], m[o + 22 * ufl],
                     m[o + 28 * ufl], m[o + 34 * ufl])
            s5 = _at(m[o + 5 * ufl], m[o + 11 * ufl], m[o + 17 * ufl], m[o + 23 * ufl],
                     m[o + 29 * ufl], m[o + 35 * ufl])
            nw = min(4, OW - 4 * j)
            for r in range(min(4, OH - 4 * i)):
                t = _at(s0[r], s1[r], s2[r], s3[r], s4[r], s5[r])
                d = np.uint64((4 * i + r) * OW + 4 * j)
                for s in range(nw):
                    yp[d + np.uint64(s)] = t[s] + bv


@helper_njit(by_reference=True)
def output_tf_t(gp, OH, OW, TH, TW, m, base, FL):
    """``m[:, base + tile] = A dY A^T`` for the 4x4 tiles of one head-gradient plane ``gp``."""
    ufl = np.uint64(FL)
    for i in range(TH):
        q = np.uint64(base + i * TW)
        nh = min(4, OH - 4 * i)
        for j in range(TW):
            o = q + np.uint64(j)
            nw = min(4, OW - 4 * j)
            d = (4 * i) * OW + 4 * j
            r0 = _a(*_row4(gp, d, nw, 0 < nh))
            r1 = _a(*_row4(gp, d + OW, nw, 1 < nh))
            r2 = _a(*_row4(gp, d + 2 * OW, nw, 2 < nh))
            r3 = _a(*_row4(gp, d + 3 * OW, nw, 3 < nh))
            for s in range(6):           # column s of dY A^T, then A of it
                col = _a(r0[s], r1[s], r2[s], r3[s])
                for r in range(6):
                    m[o + np.uint64(6 * r + s) * ufl] = col[r]


@helper_njit
def _row4(gp, d, nw, ok):
    """The four values ``gp[d:d+4]`` of a tile row, 0 past the plane's edge (``nw``, ``ok``)."""
    z = 0.0
    if not ok:
        return z, z, z, z
    ud = np.uint64(d)
    return (gp[ud] if nw > 0 else z, gp[ud + 1] if nw > 1 else z,
            gp[ud + 2] if nw > 2 else z, gp[ud + 3] if nw > 3 else z)


#: Most input channels for which F(4x4, 3x3)'s forward error stayed within 4x im2col's.
MAX_CHANNELS = 128
#: Most output channels of an F(4x4, 3x3) backward (its data gradient sums over them; its
#: error measured up to 256).
MAX_BACKWARD_FILTERS = 256
#: Smallest output height and width of an F(4x4, 3x3) forward or backward (at 4x4 it was slower than
#: F(2x2, 3x3); at 8x8 with <= 128 input channels 1.0-1.3x faster, see :func:`faster`).
MIN_OUT = 8


def faster(xshape, yshape, backward=False):
    """The measured rule: whether F(4x4, 3x3) runs rather than F(2x2, 3x3) on a Winograd layer.

    Forwards and backwards of layers of at most :data:`MAX_CHANNELS` input
    channels with an output of at least :data:`MIN_OUT` x :data:`MIN_OUT`;
    a backward also needs at most :data:`MAX_BACKWARD_FILTERS` output
    channels (the data gradient sums over them). Measured with
    ``benchmarks/conv_winograd.py`` (float32, batch 8 for the errors, batch
    32 and one thread for the times, loaded machine so +-15%) on the 3x3
    layers of VGG-11 and ResNet-18 at 32x32 and of GoogLeNet and
    Inception-BN at 64x64. Max relative error against float64 (output |
    data gradient | weight gradient), F(4x4, 3x3) / im2col:

    ==================  ===============  ===============  ===============
    layer               output           data gradient    weight gradient
    ==================  ===============  ===============  ===============
    64->64 @32          1.5e-6 / 5.6e-7  1.4e-6 / 2.1e-7  2.3e-6 / 4.1e-7
    64->128 @16         1.9e-6 / 5.3e-7  1.8e-6 / 3.3e-7  1.8e-6 / 4.6e-7
    64->192 @16         1.9e-6 / 5.3e-7  1.9e-6 / 2.7e-7  2.1e-6 / 3.4e-7
    128->128 @16        2.3e-6 / 6.8e-7  1.9e-6 / 2.6e-7  2.1e-6 / 3.7e-7
    96->128 @8          1.9e-6 / 6.6e-7  1.6e-6 / 2.9e-7  9.7e-7 / 4.5e-7
    128->192 @8         2.6e-6 / 6.7e-7  2.4e-6 / 3.2e-7  1.2e-6 / 6.5e-7
    128->256 @8         2.6e-6 / 6.8e-7  2.1e-6 / 3.6e-7  9.8e-7 / 5.3e-7
    256->256 @8         3.7e-6 / 5.8e-7  2.2e-6 / 3.2e-7  1.0e-6 / 5.6e-7
    512->512 @4         3.5e-6 / 4.9e-7  3.1e-6 / 3.5e-7  7.2e-7 / 6.6e-7
    ==================  ===============  ===============  ===============

    (F(2x2, 3x3): 2-9e-7 throughout.) The output stays within 4x of
    im2col's error up to 128 input channels (2.7-3.8x), beyond it 5.5-7x,
    hence :data:`MAX_CHANNELS`. The gradients' errors are 5-9x im2col's,
    whose data gradient is unusually exact, but on the layers the forward
    rule admits they stay at or below that forward's own error (at most
    2.6e-6, i.e. about 20 float32 ulps of the largest value): the same
    error bound, so the backward follows the forward's rule (decision of
    this session; before, every backward ran F(2x2, 3x3)). Times
    (``--cpu-time``, best of 3 x 3, ms), F(2x2, 3x3) -> F(4x4, 3x3):

    ==================  ====================  ====================
    layer               forward               backward
    ==================  ====================  ====================
    64->64 @32          20.8 -> 17.9 (1.16x)  42.7 -> 34.8 (1.23x)
    64->128 @16          8.9 ->  7.8 (1.15x)  16.9 -> 12.7 (1.32x)
    64->192 @16         12.8 -> 11.6 (1.11x)  23.1 -> 18.3 (1.26x)
    128->128 @16        14.7 -> 12.2 (1.21x)  30.1 -> 22.8 (1.32x)
    96->128 @8           3.5 ->  3.1 (1.10x)   6.5 ->  5.1 (1.27x)
    128->192 @8          5.8 ->  5.2 (1.12x)  11.0 ->  9.3 (1.18x)
    64->96 @8            1.9 ->  1.7 (1.14x)   3.8 ->  3.2 (1.21x)
    96->96 @8            2.7 ->  2.4 (1.11x)   5.3 ->  4.4 (1.21x)
    128->256 @8          7.4 ->  7.2 (1.03x)  13.6 -> 11.2 (1.21x)
    256->256 @8         13.3 -> 13.0 (1.02x)  25.3 -> 23.2 (1.09x)
    96->128 @4           1.1 ->  1.3 (0.86x)   2.2 ->  2.3 (0.95x)
    512->512 @4         17.2 -> 21.8 (0.79x)  32.2 -> 42.1 (0.76x)
    ==================  ====================  ====================

    F(4x4, 3x3) is faster from 8x8 outputs up (at 4x4, one tile per sample,
    the 36 GEMMs are narrow and the per-call filter transform of ``36 F C``
    values outweighs the multiplies saved), hence :data:`MIN_OUT`. With two
    threads (batch split, each thread its own transformed weight gradient)
    the backward measured 1.04-1.5x faster than F(2x2, 3x3) on the same
    layers (wall clock, loaded).

    Parameters
    ----------
    xshape : tuple of int ``(N, C, H, W)``
    yshape : tuple of int ``(N, F, OH, OW)``
    backward : bool
    """
    return (xshape[1] <= MAX_CHANNELS and min(yshape[2], yshape[3]) >= MIN_OUT
            and (not backward or yshape[1] <= MAX_BACKWARD_FILTERS))


def tile(xshape, yshape, backward=False):
    """The Winograd output tile (2 or 4) of a layer :mod:`._winograd` takes.

    ``FFNUMBA_CONV_WINOGRAD`` (read per call): ``2`` runs F(2x2, 3x3) only,
    ``4`` F(4x4, 3x3) on every such layer (forward and backward), unset or
    ``1`` the rule :func:`faster` (``0``, Winograd off, is read by
    :func:`._winograd.enabled`).
    """
    env = os.environ.get('FFNUMBA_CONV_WINOGRAD', '1').strip()
    if env in ('2', '4'):
        return int(env)
    return 4 if faster(xshape, yshape, backward) else 2
