"""Per-plane loops of the depthwise ``planes`` kernels (:mod:`._depthwise`).

The zero-bordered, stride-phase-major scratch plane (padded column ``j`` at
``(j % s) * L + j // s`` of its row) and the moves into and out of it
(:func:`_fill_plane`, :func:`_unfill_plane`), the 3x3 weight-gradient sums of one
plane (:func:`_dw3x3`) and the data gradients of one plane at stride 1 (:func:`_dx_s1`)
and of 3x3 kernels at stride 2 (:func:`_dx_s2`).
"""
import numpy as np
from numba import njit

from ..templates import JIT

__all__ = ['U', '_fill_plane', '_unfill_plane', '_dw3x3', '_dx_s1', '_dx_s2']

#: Unsigned loop indices: no negative-index wrap-around test, so LLVM vectorises.
U = np.uint64


@njit(inline='always')
def _phase_starts(PW, L):
    """At stride 2, where x columns 0 and 1 sit in a phase-major row (then every second
    column follows contiguously): x column ``c`` is padded column ``c + PW``, in phase
    ``(c + PW) % 2`` at index ``(c + PW) // 2``."""
    return (PW % 2) * L + PW // 2, ((PW + 1) % 2) * L + (PW + 1) // 2


@njit(**JIT)
def _fill_plane(xf, base, H, W, PH, PW, SW, L, Wp, xp, eo):
    """Copy plane ``xf[base:base + H*W]`` into the interior of the phase-major ``xp``.

    Stride 2 on planes of even width: the plane's even and odd columns are first split
    into the scratch ``eo`` (``H*W`` elements) in one vectorised loop, then copied row by
    row (1 thread, 96 planes of 32x32 per sample, batch 32: 0.77 vs 1.43 ms for the
    per-row strided copies below)."""
    if SW == 2 and W % 2 == 0 and eo.size >= H * W:
        _fill_split(xf, base, H, W, PH, PW, L, Wp, xp, eo)
        return
    for h in range(H):
        rb = (h + PH) * Wp
        src = U(base + h * W)
        if SW == 1:
            d0 = U(rb + PW)
            for w in range(U(W)):
                xp[d0 + w] = xf[src + w]
        else:
            for ph in range(SW):     # padded column j = ph + SW*q holds x column j - PW
                qlo = max(0, -((ph - PW) // SW))
                qhi = min(L, (W - 1 - ph + PW) // SW + 1)
                if qhi <= qlo:
                    continue
                d0 = U(rb + ph * L)
                s0 = U(base + h * W + ph - PW)
                for q in range(U(qlo), U(qhi)):
                    xp[d0 + q] = xf[s0 + q * U(SW)]


@njit(**JIT)
def _fill_split(xf, base, H, W, PH, PW, L, Wp, xp, eo):
    """:func:`_fill_plane` at stride 2, ``W`` even: x column ``2i`` (``2i + 1``) is padded
    column ``2i + PW`` (``2i + 1 + PW``), phase ``PW % 2`` (the other) at ``q = (j - ph) / 2``."""
    half = W // 2
    n = U(H * half)
    b = U(base)
    for i in range(n):
        eo[i] = xf[b + U(2) * i]
        eo[n + i] = xf[b + U(2) * i + U(1)]
    e0, o0 = _phase_starts(PW, L)
    for h in range(H):
        rb = (h + PH) * Wp
        de, do = U(rb + e0), U(rb + o0)
        se = U(h * half)
        for i in range(U(half)):
            xp[de + i] = eo[se + i]
        for i in range(U(half)):
            xp[do + i] = eo[n + se + i]


@njit(**JIT)
def _unfill_plane(xp, xf, base, H, W, PH, PW, SW, L, Wp, add, eo):
    """``xf[base:base + H*W] (+)= `` the interior of the phase-major ``xp`` (undoes
    :func:`_fill_plane`; stride 2 on even widths through :func:`_unfill_split`)."""
    if SW == 2 and W % 2 == 0 and eo.size >= H * W:
        _unfill_split(xp, xf, base, H, W, PH, PW, L, Wp, add, eo)
        return
    for h in range(H):
        rb = (h + PH) * Wp
        for ph in range(SW):
            qlo = max(0, -((ph - PW) // SW))
            qhi = min(L, (W - 1 - ph + PW) // SW + 1)
            if qhi <= qlo:
                continue
            s0 = U(rb + ph * L)
            d0 = U(base + h * W + ph - PW)
            for q in range(U(qlo), U(qhi)):
                if add:
                    xf[d0 + q * U(SW)] += xp[s0 + q]
                else:
                    xf[d0 + q * U(SW)] = xp[s0 + q]


@njit(**JIT)
def _unfill_split(xp, xf, base, H, W, PH, PW, L, Wp, add, eo):
    """:func:`_unfill_plane` at stride 2, ``W`` even: each row's two phase runs are copied
    into ``eo`` (even columns, then odd), then interleaved into the plane in one loop
    (as :func:`_fill_split`, reversed; LLVM vectorises the interleaving stores)."""
    half = W // 2
    n = U(H * half)
    e0, o0 = _phase_starts(PW, L)
    for h in range(H):
        rb = (h + PH) * Wp
        se, de, do = U(h * half), U(rb + e0), U(rb + o0)
        for i in range(U(half)):
            eo[se + i] = xp[de + i]
        for i in range(U(half)):
            eo[n + se + i] = xp[do + i]
    b = U(base)
    if add:
        for i in range(n):
            xf[b + U(2) * i] += eo[i]
            xf[b + U(2) * i + U(1)] += eo[n + i]
    else:
        for i in range(n):
            xf[b + U(2) * i] = eo[i]
            xf[b + U(2) * i + U(1)] = eo[n + i]


@njit(**JIT)
def _dw3x3(dyf, xp, dwf, ybase, OH, OW, SH, DH, DW, SW, L, Wp):
    """``dwf[k] += sum dy * x`` of one 3x3 filter over a plane, nine sums per row pass."""
    c1 = (DW % SW) * L + DW // SW
    c2 = ((2 * DW) % SW) * L + (2 * DW) // SW
    for oh in range(OH):
        r0 = oh * SH * Wp
        r1 = r0 + DH * Wp
        r2 = r1 + DH * Wp
        a0, a1, a2 = U(r0), U(r0 + c1), U(r0 + c2)
        a3, a4, a5 = U(r1), U(r1 + c1), U(r1 + c2)
        a6, a7, a8 = U(r2), U(r2 + c1), U(r2 + c2)
        yr = U(ybase + oh * OW)
        s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = s8 = dyf.dtype.type(0)
        for ow in range(U(OW)):
            d = dyf[yr + ow]
            s0 += d * xp[a0 + ow]
            s1 += d * xp[a1 + ow]
            s2 += d * xp[a2 + ow]
            s3 += d * xp[a3 + ow]
            s4 += d * xp[a4 + ow]
            s5 += d * xp[a5 + ow]
            s6 += d * xp[a6 + ow]
            s7 += d * xp[a7 + ow]
            s8 += d * xp[a8 + ow]
        dwf[0] += s0
        dwf[1] += s1
        dwf[2] += s2
        dwf[3] += s3
        dwf[4] += s4
        dwf[5] += s5
        dwf[6] += s6
        dwf[7] += s7
        dwf[8] += s8


@njit(**JIT)
def _dx_s1(dyf, ybase, OH, OW, wf, KH, KW, PH, PW, DH, DW, dyq, dxf, xbase, H, W, add):
    """Stride-1 data gradient of one plane as a correlation of the zero-bordered ``dy``
    with the flipped filter: ``dx[h, w] (+)= sum_k wf[k] * dy[h + PH - kh*DH, w + PW - kw*DW]``.

    ``dyq`` is the plane scratch, ``(OH + 2*BH) x (OW + 2*BW)`` with
    ``B = (K - 1) * D``; its border must be zero.
    """
    BH = (KH - 1) * DH
    BW = (KW - 1) * DW
    Q = OW + 2 * BW
    for oh in range(OH):
        d0 = U((oh + BH) * Q + BW)
        s0 = U(ybase + oh * OW)
        for ow in range(U(OW)):
            dyq[d0 + ow] = dyf[s0 + ow]
    for h in range(H):
        xr = U(xbase + h * W)
        if KH == 3 and KW == 3:
            r0 = (h + PH + BH) * Q + PW + BW
            r1 = r0 - DH * Q
            r2 = r1 - DH * Q
            a0, a1, a2 = U(r0), U(r0 - DW), U(r0 - 2 * DW)
            a3, a4, a5 = U(r1), U(r1 - DW), U(r1 - 2 * DW)
            a6, a7, a8 = U(r2), U(r2 - DW), U(r2 - 2 * DW)
            w0, w1, w2, w3, w4, w5, w6, w7, w8 = (wf[0], wf[1], wf[2], wf[3], wf[4], wf[5],
                                                  wf[6], wf[7], wf[8])
            for wi in range(U(W)):
                v = (w0 * dyq[a0 + wi] + w1 * dyq[a1 + wi] + w2 * dyq[a2 + wi]
                     + w3 * dyq[a3 + wi] + w4 * dyq[a4 + wi] + w5 * dyq[a5 + wi]
                     + w6 * dyq[a6 + wi] + w7 * dyq[a7 + wi] + w8 * dyq[a8 + wi])
                if add:
                    dxf[xr + wi] += v
                else:
                    dxf[xr + wi] = v
            continue
        if not add:
            for wi in range(U(W)):
                dxf[xr + wi] = 0
        for kh in range(KH):
            rb = (h + PH - kh * DH + BH) * Q + PW + BW
            for kw in range(KW):
                wv = wf[kh * KW + kw]
                src = U(rb - kw * DW)
                for wi in range(U(W)):
                    dxf[xr + wi] += wv * dyq[src + wi]


@njit(**JIT)
def _dx_s2(dyf, ybase, OH, OW, wf, dyq, dxp, PH, H, L, add):
    """Stride-2 data gradient of one 3x3 plane (dilation 1, any padding) into the rows
    ``PH .. PH + H - 1`` of the phase-major ``dxp``, each element written (``add``:
    added to) once.

    Padded row ``r`` takes kernel row 1 of output row ``(r - 1) / 2`` when ``r`` is
    odd, rows 0 and 2 of output rows ``r / 2`` and ``r / 2 - 1`` when even; in a row,
    phase 0 (even padded columns, ``j = 2q``) takes kernel columns 0 and 2 of output
    columns ``q`` and ``q - 1``, phase 1 column 1 of ``q``. ``dyq``, ``(OH + 2) x (OW +
    2)`` with a zero border, holds the plane so that every output row and column named
    here exists (``L - 1 <= OW``, ``(PH + H - 1) / 2 <= OH``): no test in the loops, and
    no partly overlapping stores as in a tap-by-tap scatter.
    """
    Q = OW + 2
    for oh in range(OH):
        d0 = U((oh + 1) * Q + 1)
        s0 = U(ybase + oh * OW)
        for ow in range(U(OW)):
            dyq[d0 + ow] = dyf[s0 + ow]
    Wp = 2 * L
    for r in range(PH, PH + H):
        e, o = U(r * Wp), U(r * Wp + L)
        if r % 2 == 0:
            a, b = U((r // 2 + 1) * Q), U((r // 2) * Q)
            w0, w2, w6, w8, w1, w7 = wf[0], wf[2], wf[6], wf[8], wf[1], wf[7]
            for q in range(U(L)):
                v = (w0 * dyq[a + q + U(1)] + w2 * dyq[a + q] + w6 * dyq[b + q + U(1)]
                     + w8 * dyq[b + q])
                dxp[e + q] = dxp[e + q] + v if add else v
            for q in range(U(L)):
                v = w1 * dyq[a + q + U(1)] + w7 * dyq[b + q + U(1)]
                dxp[o + q] = dxp[o + q] + v if add else v
        else:
            c = U(((r - 1) // 2 + 1) * Q)
            w3, w5, w4 = wf[3], wf[5], wf[4]
            for q in range(U(L)):
                v = w3 * dyq[c + q + U(1)] + w5 * dyq[c + q]
                dxp[e + q] = dxp[e + q] + v if add else v
            for q in range(U(L)):
                v = w4 * dyq[c + q + U(1)]
                dxp[o + q] = dxp[o + q] + v if add else v
