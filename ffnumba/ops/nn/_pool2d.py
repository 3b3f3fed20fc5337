"""2-D max pooling for the common small windows: separable forward, direct backward.

A max over a ``KH x KW`` window is the max over its rows of each row's max, so
each plane is done in two passes: a row pass takes, for every input row and
output column, the maximum of the ``KW`` elements into a scratch plane
``(H, OW)``; a column pass takes the maximum of ``KH`` scratch rows per
output. A 3x3 stride-1 window costs 3 + 3 compares per output instead of 9,
and each inner loop runs over contiguous output columns.

Results are those of the general kernels in :mod:`.pooling`, bit for bit:
each pass keeps the *first strict* maximum (``v > best``, running from
``-inf``), so the value is the first maximum in row-major window order (which
matters only for -0.0 vs 0.0), NaN never wins, and a window of only NaN or
``-inf`` gives ``-inf``.

Used by :mod:`.pooling` for 2-D max pooling with kernel <= 3, stride <= 2 and
pad <= 1 (any ``pooling_convention``); the forward only for outputs wider than
8, or 5 to 8 wide with stride-1 rows (the offset-table kernel is faster below).
``ENABLED = False`` turns both off. The backward (:func:`max_bwd`, same windows)
scans each output's window directly, as :func:`.pooling._max_bwd`, but whole 3x3
windows as three independent row maxima (about 1.2x faster); a separable
backward carrying each row maximum's index through a scratch plane measured
2.5-3x slower.
"""
import numpy as np
from numba import njit

from ..templates import JIT
from ._conv_par import run_split
from ._im2col import _valid, buffer

#: Whether :mod:`.pooling` takes this path where it applies (tests switch it off).
ENABLED = True


def applies(g, dims, mode, backward=False):
    """Whether this module's 2-D max kernels handle geometry ``g`` (12 ints) on ``dims``."""
    KD, KH, KW, SD, SH, SW, PD, PH, PW = g[:9]
    if backward:
        return (ENABLED and mode == 0 and dims[2] == 1 and KD == 1 and PD == 0
                and KH <= 3 and KW <= 3 and SH <= 2 and SW <= 2 and PH <= 1 and PW <= 1)
    # narrow outputs forward faster through the offset-table kernel of .pooling (1 thread,
    # 32 x C planes, loaded): s1 4x4 1.23 vs 1.14 ms, 2x2 0.67 vs 0.59; s2 -> 8x8 even;
    # here s1 8x8 1.7 vs 2.2 ms and s2 32x32 -> 16x16 1.7 vs 2.5 ms
    return (applies(g, dims, mode, True) and (g[11] > 8 or (SH == 1 and g[11] > 4)))


@njit(inline='always', **JIT)   # no compile of its own (cold start)
def _row_pass(xf, xb, H, W, g, lo, hi, rm):
    """Row maxima ``rm[b*OW + ow]`` of one plane (``-inf`` where a row window is empty).

    Unsigned indices: numba wraps negative signed indices, which stops vectorising.
    """
    KW, SW, PW, OW = g[2], g[5], g[8], g[11]
    usw = np.uint64(SW)
    lowest = rm.dtype.type(-np.inf)
    for b in range(H):
        r = np.uint64(b * OW)
        for ow in range(np.uint64(OW)):
            rm[r + ow] = lowest
        for kw in range(KW):
            n = hi[kw] - lo[kw]
            if n <= 0:
                continue
            src = np.uint64(xb + b * W - PW + lo[kw] * SW + kw)
            o0 = r + np.uint64(lo[kw])
            if SW == 1:
                for t in range(np.uint64(n)):
                    v = xf[src + t]
                    a = rm[o0 + t]
                    rm[o0 + t] = v if v > a else a      # branch-free select
            else:
                for t in range(np.uint64(n)):
                    v = xf[src + t * usw]
                    a = rm[o0 + t]
                    rm[o0 + t] = v if v > a else a


@njit(inline='always', **JIT)   # no compile of its own (cold start)
def _col_range(H, g, oh):
    start = oh * g[4] - g[7]
    return max(start, 0), min(start + g[1], H)


@njit(**JIT)
def max_fwd(xf, yf, dims, g, rm):
    """Max-pool forward of flat ``x`` ``(N, C, 1, H, W)`` (5 ints ``dims``) into flat ``y``
    ``(N, C, 1, OH, OW)``.

    ``g``: the 12-int geometry of :mod:`.pooling` (kernel, stride, pad, output size per
    dim, padded to 3-D); ``rm``: scratch of at least ``H * OW`` elements of ``x``'s dtype.
    """
    N, C, D, H, W = dims
    OH, OW = g[10], g[11]
    lo = np.empty(g[2], np.int64)
    hi = np.empty(g[2], np.int64)
    for kw in range(g[2]):
        lo[kw], hi[kw] = _valid(OW, g[5], g[8], kw, np.int64(1), W)
    lowest = yf.dtype.type(-np.inf)
    for nc in range(N * C):
        _row_pass(xf, nc * H * W, H, W, g, lo, hi, rm)
        q = np.uint64(nc * OH * OW)
        for oh in range(OH):
            b0, b1 = _col_range(H, g, oh)
            for ow in range(np.uint64(OW)):
                yf[q + ow] = lowest
            for b in range(b0, b1):
                r = np.uint64(b * OW)
                for ow in range(np.uint64(OW)):
                    v = rm[r + ow]
                    a = yf[q + ow]
                    yf[q + ow] = v if v > a else a
            q += np.uint64(OW)


@njit(inline='always', **JIT)   # no compile of its own (cold start)
def _scan(xf, base, rows, cols, W, best, bi):
    """First strict maximum (value, flat index) of ``rows x cols`` elements from ``base``,
    continuing from ``(best, bi)``, in row-major order."""
    for a in range(rows):
        r = base + np.uint64(a * W)
        for e in range(cols):
            i = r + np.uint64(e)
            v = xf[i]
            take = v > best
            best = v if take else best
            bi = i if take else bi
    return best, bi


@njit(inline='always', **JIT)   # no compile of its own (cold start)
def _row3(xf, r, lowest, none):
    """First strict maximum (value, flat index; ``(-inf, none)`` if none) of 3 elements."""
    v0, v1, v2 = xf[r], xf[r + np.uint64(1)], xf[r + np.uint64(2)]
    t0 = v0 > lowest
    b = v0 if t0 else lowest
    i = r if t0 else none
    t1 = v1 > b
    b = v1 if t1 else b
    i = r + np.uint64(1) if t1 else i
    t2 = v2 > b
    b = v2 if t2 else b
    i = r + np.uint64(2) if t2 else i
    return b, i


@njit(**JIT)
def max_bwd(xf, dyf, dxf, dims, g, write):
    """Max-pool backward: ``dx (+)= dy`` at each window's first maximum in row-major order
    (``write`` zeroes ``dx`` first); a window of only NaN or ``-inf`` routes nothing.

    Whole 3x3 windows take three independent row maxima and then the first strict
    maximum of those (shorter dependency chains than one 9-step scan; same pick:
    ties keep the earlier row, and within a row the earlier column); windows
    clipped by the border scan their clipped rectangle. ``dy`` is added in output
    order, as :func:`.pooling._max_bwd` does, so results are bit for bit its.
    """
    N, C, D, H, W = dims
    KH, KW, SH, SW, PH, PW, OH, OW = g[1], g[2], g[4], g[5], g[7], g[8], g[10], g[11]
    if write:
        dxf[:] = 0
    none = np.uint64(0xFFFFFFFFFFFFFFFF)
    lowest = xf.dtype.type(-np.inf)
    # interior columns: the whole window inside [0, W)
    owa = min((PW + SW - 1) // SW, OW)
    owb = max(min((W - KW + PW) // SW + 1, OW), owa)
    uw = np.uint64(W)
    q = np.uint64(0)
    for nc in range(N * C):
        xb = nc * H * W
        for oh in range(OH):
            start = oh * SH - PH
            b0, b1 = max(start, 0), min(start + KH, H)
            nr = max(b1 - b0, 0)
            rowb = xb + b0 * W
            whole = nr == 3 and KW == 3
            for ow in range(OW):
                if whole and owa <= ow < owb:
                    r = np.uint64(rowb + ow * SW - PW)
                    m0, i0 = _row3(xf, r, lowest, none)
                    m1, i1 = _row3(xf, r + uw, lowest, none)
                    m2, i2 = _row3(xf, r + uw + uw, lowest, none)
                    t = m1 > m0
                    best = m1 if t else m0
                    bi = i1 if t else i0
                    bi = i2 if m2 > best else bi
                else:
                    c0 = max(ow * SW - PW, 0)
                    c1 = min(ow * SW - PW + KW, W)
                    best, bi = _scan(xf, np.uint64(rowb + c0), nr, max(c1 - c0, 0), W, lowest,
                                     none)
                if bi != none:
                    dxf[bi] += dyf[q]
                q += np.uint64(1)


def _parts(dims, nt):
    """Per thread: planes ``[lo, hi)`` and the dims of that slice (``nt`` near-equal ranges)."""
    n = dims[0] * dims[1]
    return [(n * t // nt, n * (t + 1) // nt, (1, n * (t + 1) // nt - n * t // nt) + dims[2:])
            for t in range(nt)]


def forward(xf, yf, dims, g, nt, state=None):
    """:func:`max_fwd` with the N*C planes split over ``nt`` threads; scratch from ``state``."""
    H, W = dims[3], dims[4]
    pin, pout, m = H * W, g[10] * g[11], H * g[11]
    # each thread's scratch starts 64 elements past a 64-element boundary after the previous
    # one's end: no cache line shared (false sharing made 2 threads 2x slower than one)
    step = (m + 63) // 64 * 64 + 64
    rm = buffer(state, 'pool2d_rm', nt * step, xf.dtype)
    if nt == 1:
        max_fwd(xf, yf, dims, g, rm)
        return
    parts = _parts(tuple(dims), nt)

    def part(t):
        lo, hi, d = parts[t]
        max_fwd(xf[lo * pin:hi * pin], yf[lo * pout:hi * pout], d, g,
                rm[t * step:t * step + m])
    run_split(part, nt)


def backward(xf, dyf, dxf, dims, g, write, nt):
    """:func:`max_bwd` with the N*C planes split over ``nt`` threads."""
    if nt == 1:
        max_bwd(xf, dyf, dxf, dims, g, write)
        return
    pin, pout = dims[3] * dims[4], g[10] * g[11]
    parts = _parts(tuple(dims), nt)

    def part(t):
        lo, hi, d = parts[t]
        max_bwd(xf[lo * pin:hi * pin], dyf[lo * pout:hi * pout], dxf[lo * pin:hi * pin], d, g,
                write)
    run_split(part, nt)
