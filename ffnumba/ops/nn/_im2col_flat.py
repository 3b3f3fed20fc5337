"""im2col / col2im of stride-1 convolutions whose output plane is the input plane.

With stride 1 and an output the size of the input (a ``(2p+1) x (2q+1)`` kernel padded
by ``(p, q)``, as GoogLeNet's 5x5 pad-2 and most 3x3 pad-1 layers), column row
``(c, kh, kw)`` of a sample is its plane ``c`` shifted by the flat offset
``(kh*dh - p) * W + kw*dw - q``, with zeros where the window reaches the padding. One
contiguous, vectorised copy per row (a select against a mask, never a multiply) replaces
the offset-table gather :mod:`._im2col` uses for outputs narrower than its
``TABLE_MAX_OW``; :func:`_col2im_flat` adds back in the table's order, so results are
the same bit for bit. Planes narrower than ``TABLE_MAX_OW`` with at least
:data:`FLAT_MIN_COLS` positions take this path (:func:`._im2col.im2col`,
:func:`._im2col.col2im`).

Source: the im2col formulation of K. Chellapilla, S. Puri, P. Simard (2006).
"""
import numpy as np
from numba import njit

from ...jit import JIT, helper_njit

#: Fewest output positions (``OH * OW``) for which a stride-1 kernel whose output plane
#: is its input plane unrolls by flat shifted copies (:func:`_im2col_flat`) rather than
#: the offset table (1 thread, batch 32: 5x5 at 8x8 0.27 vs 0.76 ms, 3x3 at 4x4 0.18 vs
#: 0.21 ms; at 2x2 the table is faster, 0.11 vs 0.21 ms).
FLAT_MIN_COLS = 16


@helper_njit
def _flat_shift(dims, g):
    """Whether conv geometry ``g`` on 5-D ``dims`` takes the flat shifted copies: 2-D,
    stride 1, an output plane equal to the input plane of at least ``FLAT_MIN_COLS``."""
    return (g[0] == 1 and dims[2] == 1 and g[12] == 1 and g[4] == 1 and g[5] == 1
            and g[13] == dims[3] and g[14] == dims[4] and g[13] * g[14] >= FLAT_MIN_COLS)


@helper_njit(by_reference=True)
def _shifts(dims, g):
    """Per 2-D kernel offset ``k``: the flat shift ``offs[k]`` of a same-plane geometry and
    ``mask[k, p]``, whether output ``p`` reads a real element (not padding) there."""
    H, W = dims[3], dims[4]
    KH, KW, PH, PW, DH, DW = g[1], g[2], g[7], g[8], g[10], g[11]
    offs = np.empty(KH * KW, np.int64)
    mask = np.zeros((KH * KW, H * W), np.uint8)
    k = 0
    for kh in range(KH):
        dh = kh * DH - PH
        for kw in range(KW):
            dw = kw * DW - PW
            offs[k] = dh * W + dw
            for h in range(max(0, -dh), min(H, H - dh)):
                for w in range(max(0, -dw), min(W, W - dw)):
                    mask[k, h * W + w] = 1
            k += 1
    return offs, mask


@helper_njit(by_reference=True)
def _im2col_flat(xf, dims, n0, nb, c0, cg, g, colf):
    """:func:`._im2col.im2col` of a :func:`_flat_shift` geometry: each column row is its plane
    shifted by one flat offset, masked (a select) where the window reaches the padding."""
    C = dims[1]
    P = dims[3] * dims[4]
    offs, mask = _shifts(dims, g)
    K = offs.size
    L = nb * P
    z = colf.dtype.type(0)
    for b in range(nb):
        for c in range(cg):
            xbase = ((n0 + b) * C + c0 + c) * P
            for k in range(K):
                m = mask[k]
                lo = min(max(0, -offs[k]), P)            # outside [lo, hi): off the plane
                hi = max(min(P, P - offs[k]), lo)
                uq = np.uint64((c * K + k) * L + b * P)
                src = np.uint64(xbase + offs[k] + lo) - np.uint64(lo)
                for i in range(np.uint64(lo)):
                    colf[uq + i] = z
                for i in range(np.uint64(lo), np.uint64(hi)):
                    v = xf[src + i]
                    colf[uq + i] = v if m[i] else z
                for i in range(np.uint64(hi), np.uint64(P)):
                    colf[uq + i] = z


@helper_njit(by_reference=True)
def _col2im_flat(colf, dims, n0, nb, c0, cg, g, xf):
    """:func:`._im2col.col2im` of a :func:`_flat_shift` geometry (adds in the offset table's order)."""
    C = dims[1]
    P = dims[3] * dims[4]
    offs, mask = _shifts(dims, g)
    K = offs.size
    L = nb * P
    for b in range(nb):
        for c in range(cg):
            xbase = ((n0 + b) * C + c0 + c) * P
            for k in range(K):
                m = mask[k]
                lo = min(max(0, -offs[k]), P)
                hi = max(min(P, P - offs[k]), lo)
                uq = np.uint64((c * K + k) * L + b * P)
                dst = np.uint64(xbase + offs[k] + lo) - np.uint64(lo)
                for i in range(np.uint64(lo), np.uint64(hi)):
                    a = xf[dst + i]
                    xf[dst + i] = a + colf[uq + i] if m[i] else a
