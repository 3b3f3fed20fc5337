"""im2col / col2im by row runs: outputs at least ``TABLE_MAX_OW`` wide, and large strided windows.

Each output row of a column row is one bounds check and one contiguous run. With a horizontal
stride ``sw > 1`` a run ``col[q + ow] = x[src + ow*sw]`` would be a gather LLVM leaves scalar
(about one element per cycle), so each input plane is first split into its ``sw`` column
*phases*, ``ph[r, i, j] = x[i, r + j*sw]``, once per sample and channel: every run is then a
contiguous copy out of one phase, ``ph[r, i, j0 + ow]`` with ``r = (kw*dw - pw) mod sw`` and
``j0 = (kw*dw - pw - r) / sw``, which LLVM vectorises. The split costs one pass over the plane,
against ``KH*KW/sw^2`` passes' worth of unrolled matrix (GoogLeNet's 7x7 stride-2 stem: 12).
:func:`_col2im_rows` adds the runs into zeroed phases in the same order and then the phases
into the image: into a zeroed image (a ``'write'`` gradient) every element gets the same sums
in the same order as a direct scatter, bit for bit; into one holding values (``'add'``) each
element's new terms are summed first, then added.

Strided outputs narrower than ``TABLE_MAX_OW`` take this path when at least
:data:`PHASE_MIN_OW` wide with a window that reads each split element at least four times
(:func:`narrow_rows`); the rest gather through :func:`._im2col._table`. One thread, batch 32,
im2col alone: GoogLeNet's 7x7/2 stem (3x64x64) 1.55 -> 0.9 ms; 3x3/2 on 64x32x32 2.48 ->
2.0-2.3 ms; AlexNet's 11x11/4 stem on 3x64x64 (15 wide) 1.44 ms by the offset table -> 0.9-1.0 ms;
a 3x3/2 kernel with an 8-wide output stays with the table (0.44 vs 0.82 ms by phases).

Source: the im2col formulation of K. Chellapilla, S. Puri, P. Simard (2006); the phase
(polyphase) split of a strided correlation is the decimation identity
``sum_k w[k] x[o*s + k] = sum_r sum_j w[r + j*s] x_r[o + j]`` with ``x_r[m] = x[m*s + r]``.
"""
import numpy as np
from numba import njit

from ...jit import JIT, helper_njit

__all__ = ['PHASE_MIN_OW', 'narrow_rows']

#: Fewest output columns for which a strided kernel narrower than ``TABLE_MAX_OW`` may
#: take the phase-split row runs instead of the offset table (:func:`narrow_rows`).
PHASE_MIN_OW = 8


@helper_njit
def _valid(o_n, s, p, k, d, i_n):
    """Output range ``[lo, hi)`` whose input index ``o*s - p + k*d`` is in ``[0, i_n)``."""
    off = k * d - p
    lo = 0
    if off < 0:
        lo = (-off + s - 1) // s
    hi = 0
    if i_n - off > 0:
        hi = (i_n - off - 1) // s + 1
    if hi > o_n:
        hi = o_n
    if lo > hi:
        lo = hi
    return lo, hi


@helper_njit
def _zero(dst, start, n):
    u, z = np.uint64(start), dst.dtype.type(0)
    for i in range(np.uint64(n)):
        dst[u + i] = z


@helper_njit
def narrow_rows(g):
    """Whether geometry ``g`` narrower than ``TABLE_MAX_OW`` takes the row runs: stride above
    1, at least :data:`PHASE_MIN_OW` output columns, ``kh*kw >= 4*sw^2`` (with ``sh == sw``
    in 2-D: each split element read at least four times)."""
    return g[5] > 1 and g[14] >= PHASE_MIN_OW and g[1] * g[2] >= 4 * g[5] * g[5]


@njit(inline='always', **JIT)   # no compile of its own (cold start)
def _phases(xf, xbase, rows, W, SW, WQ, ph, back):
    """Split: ``ph[(r*rows + i)*WQ + j] = xf[xbase + i*W + r + j*SW]`` for every
    ``r + j*SW < W``; ``back``: the reverse, adding (``xf[...] += ph[...]``)."""
    usw = np.uint64(SW)
    for i in range(rows):
        for r in range(SW):
            up = np.uint64((r * rows + i) * WQ)
            ux = np.uint64(xbase + i * W + r)
            for j in range(np.uint64((W - r + SW - 1) // SW)):
                if back:
                    xf[ux + j * usw] += ph[up + j]
                else:
                    ph[up + j] = xf[ux + j * usw]


@njit(inline='always', **JIT)   # no compile of its own (cold start)
def _tap(kw, DW, PW, SW, rows, WQ):
    """Offset of tap ``kw``'s runs in the source: in the image (``sw == 1``) or its phase.

    The phase formula gives ``base`` for ``sw == 1`` too, but without this branch im2col
    ran 8-12% slower, stride-1 runs included (interleaved, one thread)."""
    base = kw * DW - PW
    if SW == 1:
        return base
    r = base % SW
    return r * rows * WQ + (base - r) // SW


@helper_njit(by_reference=True)
def _im2col_rows(xf, dims, n0, nb, c0, cg, g, colf):
    """:func:`._im2col.im2col` by row runs: one bounds check per output row, contiguous runs
    (out of the plane's column phases when strided)."""
    C, D, H, W = dims[1], dims[2], dims[3], dims[4]
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
    P = OD * OH * OW
    L = nb * P
    rows = D * H
    WQ = (W + SW - 1) // SW             # the row length of the source: W when sw == 1
    ph = np.empty(SW * rows * WQ if SW > 1 else 1, xf.dtype)   # the image's dtype
    for b in range(nb):
        for c in range(cg):
            xbase = ((n0 + b) * C + c0 + c) * rows * W
            src, sbase = xf, xbase
            if SW > 1:
                _phases(xf, xbase, rows, W, SW, WQ, ph, False)
                src, sbase = ph, 0
            for kd in range(KD):
                dlo, dhi = _valid(OD, SD, PD, kd, DD, D)
                for kh in range(KH):
                    hlo, hhi = _valid(OH, SH, PH, kh, DH, H)
                    for kw in range(KW):
                        wlo, whi = _valid(OW, SW, PW, kw, DW, W)
                        tap = sbase + _tap(kw, DW, PW, SW, rows, WQ)
                        row = ((c * KD + kd) * KH + kh) * KW + kw
                        q = row * L + b * P
                        for od in range(OD):
                            if od < dlo or od >= dhi:
                                _zero(colf, q, OH * OW)
                                q += OH * OW
                                continue
                            dbase = tap + (od * SD - PD + kd * DD) * H * WQ
                            for oh in range(OH):
                                if oh < hlo or oh >= hhi:
                                    _zero(colf, q, OW)
                                else:
                                    _zero(colf, q, wlo)
                                    uq = np.uint64(q)
                                    us = np.uint64(dbase + (oh * SH - PH + kh * DH) * WQ)
                                    for ow in range(np.uint64(wlo), np.uint64(whi)):
                                        colf[uq + ow] = src[us + ow]
                                    _zero(colf, q + whi, OW - whi)
                                q += OW


@helper_njit(by_reference=True)
def _col2im_rows(colf, dims, n0, nb, c0, cg, g, xf):
    """:func:`._im2col.col2im` by row runs as in :func:`_im2col_rows` (strided: added into
    zeroed column phases, which are then added into the image)."""
    C, D, H, W = dims[1], dims[2], dims[3], dims[4]
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
    P = OD * OH * OW
    L = nb * P
    rows = D * H
    WQ = (W + SW - 1) // SW
    ph = np.empty(SW * rows * WQ if SW > 1 else 1, xf.dtype)   # the image's dtype
    for b in range(nb):
        for c in range(cg):
            xbase = ((n0 + b) * C + c0 + c) * rows * W
            dst, dbase0 = xf, xbase
            if SW > 1:
                _zero(ph, 0, ph.size)
                dst, dbase0 = ph, 0
            for kd in range(KD):
                dlo, dhi = _valid(OD, SD, PD, kd, DD, D)
                for kh in range(KH):
                    hlo, hhi = _valid(OH, SH, PH, kh, DH, H)
                    for kw in range(KW):
                        wlo, whi = _valid(OW, SW, PW, kw, DW, W)
                        tap = dbase0 + _tap(kw, DW, PW, SW, rows, WQ)
                        row = ((c * KD + kd) * KH + kh) * KW + kw
                        for od in range(dlo, dhi):
                            dbase = tap + (od * SD - PD + kd * DD) * H * WQ
                            for oh in range(hlo, hhi):
                                uq = np.uint64(row * L + b * P + (od * OH + oh) * OW)
                                ud = np.uint64(dbase + (oh * SH - PH + kh * DH) * WQ)
                                for ow in range(np.uint64(wlo), np.uint64(whi)):
                                    dst[ud + ow] += colf[uq + ow]
            if SW > 1:
                _phases(xf, xbase, rows, W, SW, WQ, ph, True)
