"""2-D pooling kernels for the common small windows: max (separable forward, direct
backward) and stride-1 average/sum pooling that keeps the plane's size (flat shifted passes).

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
8, or 5 to 8 wide with stride-1 rows or a 3x3 window (the offset-table kernel is
faster below). 3x3 windows take each whole window's three row elements and then
three row maxima in registers (:func:`_max_fwd3`).
``ENABLED = False`` turns all of this module's kernels off. The backward
(:func:`max_bwd`, same windows) scans each output's window directly, as
:func:`.pooling._max_bwd`, whole 3x3 windows as three independent row maxima
(1.2x), finding a row's maxima before adding any ``dy``; a separable backward
carrying each row maximum's index through a scratch plane was 2.5-3x slower.

A training forward of those windows keeps each maximum's position instead
(:mod:`._pool_argmax`, :func:`keeps_argmax`), and its backward only routes ``dy``.

Average, sum and max pooling with stride 1 whose output plane is the input
plane (a ``(2p+1) x (2q+1)`` window padded by ``(p, q)``, as Inception's 3x3
pad-1 branch pooling; ``pooling_convention='same'`` too) run flat shifted
passes: window offset ``(kh, kw)`` reads the flat input shifted by
``(kh - p) * W + kw - q``, so each offset is one long vectorised pass over a
block of whole planes, masked where the shifted element lies outside its
plane (a select, never a multiply, so an inf or NaN next door does not
leak). The general kernels loop over output rows of ``OW`` elements, about 9
short loops per row (10x MXNet's time at 4x4 planes). Results are the
general kernels' bit for bit: :func:`avg_fwd` adds the window in the same
row-major order in float64 and divides by the same size; :func:`avg_bwd`
adds each ``dy / size`` into ``dx`` in the same order (outputs in row-major
order, so offsets by descending ``kh``, then ascending ``kw``). Max pooling
takes them for planes of at most :data:`FLAT_MAX_PLANE` elements forward and
for every plane backward (:func:`max_same_fwd`, :func:`max_same_bwd`: the
first strict maximum per window, routed in output order, as above).
"""
import numpy as np
from numba import njit

from ...jit import JIT, helper_njit
from ._conv_par import run_split
from ._im2col import _valid, buffer
from ._pool_argmax import STATE_KEY, output_row, whole_columns
from ._pool_same3 import avg3_fwd, max3_fwd

#: Whether :mod:`.pooling` takes this path where it applies (tests switch it off).
ENABLED = True
#: Largest plane (H*W) whose same-plane stride-1 max pooling forward runs the flat
#: kernel (1 thread, loaded, batch 32, 3x3 pad 1: 4x4 planes 0.21 vs 1.26 ms for the
#: offset table, 16x16 0.41 vs 1.05 ms separable; 32x32 2.9 vs 2.5 ms).
FLAT_MAX_PLANE = 256


def applies(g, dims, mode, backward=False):
    """Whether this module's 2-D kernels handle geometry ``g`` (12 ints) on ``dims``."""
    KD, KH, KW, SD, SH, SW, PD, PH, PW = g[:9]
    if mode in (1, 2) or _flat_max(g, dims, mode, backward):
        return ENABLED and is_same_plane(g, dims)
    if backward:
        return (ENABLED and mode == 0 and dims[2] == 1 and KD == 1 and PD == 0
                and KH <= 3 and KW <= 3 and SH <= 2 and SW <= 2 and PH <= 1 and PW <= 1)
    # narrow outputs forward faster through the offset-table kernel of .pooling (1 thread,
    # 32 x C planes, loaded): s1 4x4 1.23 vs 1.14 ms, 2x2 0.67 vs 0.59; s2 -> 8x8 even;
    # here s1 8x8 1.7 vs 2.2 ms and s2 32x32 -> 16x16 1.7 vs 2.5 ms; the fused 3x3 kernel
    # (_max_fwd3) also wins s2 16x16 -> 8x8 (192 planes: 1.21 vs 1.83 ms), not -> 4x4 or 2x2
    return (applies(g, dims, mode, True) and g[11] > 4
            and (g[11] > 8 or SH == 1 or (KH == 3 and KW == 3)))


def _flat_max(g, dims, mode, backward):
    """Whether max pooling takes the flat same-plane kernels (:func:`max_same_fwd`): always
    backward, forward on planes of at most :data:`FLAT_MAX_PLANE` elements."""
    return (mode == 0 and is_same_plane(g, dims)
            and (backward or dims[3] * dims[4] <= FLAT_MAX_PLANE))


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


@njit(inline='always', **JIT)   # no compile of its own (cold start)
def _first(v, best):
    """``v`` if it is strictly greater than ``best`` (never NaN), else ``best``."""
    return v if v > best else best


@njit(inline='always', **JIT)   # no compile of its own (cold start)
def _border3(xf, rb, ow, SW, PW, W, lowest):
    m = lowest
    for e in range(max(ow * SW - PW, 0), min(ow * SW - PW + 3, W)):
        m = _first(xf[rb + e], m)
    return m


@helper_njit
def _max_fwd3(xf, yf, dims, g, rm):
    """:func:`max_fwd` of a 3x3 window: whole windows take their three row elements, and
    then their three row maxima, in registers (one sweep per pass instead of three
    read-modify-write sweeps; about 2x faster at 32x32 planes, stride 2). The same first
    strict maximum in row-major window order: each step keeps the earlier element unless
    the later one is strictly greater, whichever way the steps are grouped."""
    N, C, D, H, W = dims
    SH, SW, PH, PW, OH, OW = g[4], g[5], g[7], g[8], g[10], g[11]
    lowest = yf.dtype.type(-np.inf)
    owa = min((PW + SW - 1) // SW, OW)                    # whole windows: [owa, owb)
    owb = max(min((W - 3 + PW) // SW + 1, OW), owa)
    usw, one, uow = np.uint64(SW), np.uint64(1), np.uint64(OW)
    for nc in range(N * C):
        xb = nc * H * W
        for b in range(H):
            r, rb = b * OW, xb + b * W
            for ow in range(owa):
                rm[r + ow] = _border3(xf, rb, ow, SW, PW, W, lowest)
            src = np.uint64(rb + owa * SW - PW)
            ur = np.uint64(r + owa)
            for t in range(np.uint64(owb - owa)):
                i = src + t * usw
                rm[ur + t] = _first(xf[i + one + one], _first(xf[i + one],
                                                             _first(xf[i], lowest)))
            for ow in range(owb, OW):
                rm[r + ow] = _border3(xf, rb, ow, SW, PW, W, lowest)
        q = np.uint64(nc * OH * OW)
        for oh in range(OH):
            b0, b1 = _col_range(H, g, oh)
            if b1 - b0 == 3:
                r0 = np.uint64(b0 * OW)
                for ow in range(uow):
                    yf[q + ow] = _first(rm[r0 + uow + uow + ow],
                                        _first(rm[r0 + uow + ow], _first(rm[r0 + ow], lowest)))
            else:
                for ow in range(uow):
                    yf[q + ow] = lowest
                for b in range(b0, b1):
                    r = np.uint64(b * OW)
                    for ow in range(uow):
                        yf[q + ow] = _first(rm[r + ow], yf[q + ow])
            q += uow


@njit(**JIT)
def max_fwd(xf, yf, dims, g, rm):
    """Max-pool forward of flat ``x`` ``(N, C, 1, H, W)`` (5 ints ``dims``) into flat ``y``
    ``(N, C, 1, OH, OW)``.

    ``g``: the 12-int geometry of :mod:`.pooling` (kernel, stride, pad, output size per
    dim, padded to 3-D); ``rm``: scratch of at least ``H * OW`` elements of ``x``'s dtype.
    3x3 windows run :func:`_max_fwd3`.
    """
    if g[1] == 3 and g[2] == 3:
        _max_fwd3(xf, yf, dims, g, rm)
        return
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


@njit(**JIT)
def max_bwd(xf, dyf, dxf, dims, g, write):
    """Max-pool backward: ``dx (+)= dy`` at each window's first maximum in row-major order
    (``write`` zeroes ``dx`` first); a window of only NaN or ``-inf`` routes nothing.

    Per output row, one loop finds each window's maximum (``idx``; no stores, so
    windows are independent), a second adds ``dy`` there in output order, as
    :func:`.pooling._max_bwd`: bit for bit its results. Whole 3x3 windows take
    three row maxima, then the first strict maximum of those (ties keep the
    earlier row, then column); border windows scan their clipped rectangle.
    """
    N, C, D, H, W = dims
    OH, OW = g[10], g[11]
    if write:
        dxf[:] = 0
    none = np.uint64(0xFFFFFFFFFFFFFFFF)
    lowest = xf.dtype.type(-np.inf)
    idx = np.empty(max(OW, 1), np.uint64)
    owa, owb = whole_columns(g, W)
    q = np.uint64(0)
    for nc in range(N * C):
        for oh in range(OH):
            output_row(xf, nc * H * W, oh, g, H, W, owa, owb, lowest, none, idx)
            for ow in range(OW):
                bi = idx[ow]
                if bi != none:
                    dxf[bi] += dyf[q]
                q += np.uint64(1)


def keeps_argmax(ctx, g, dims, mode):
    """Whether this forward keeps its windows' maximum positions for the backward
    (:mod:`._pool_argmax`): a training max pooling whose backward :func:`max_bwd` would
    scan. Otherwise the positions an earlier forward kept are dropped."""
    state = getattr(ctx, 'state', None)
    if state is None:
        return False
    keep = (ctx.is_train and mode == 0 and applies(g, dims, 0, True)
            and not _flat_max(g, dims, 0, True))
    if not keep:
        state.pop(STATE_KEY, None)
    return keep


def _parts(dims, nt):
    """Per thread: planes ``[lo, hi)`` and the dims of that slice (``nt`` near-equal ranges)."""
    n = dims[0] * dims[1]
    return [(n * t // nt, n * (t + 1) // nt, (1, n * (t + 1) // nt - n * t // nt) + dims[2:])
            for t in range(nt)]


def forward(xf, yf, dims, g, nt, state=None, mode=0, include_pad=True):
    """:func:`max_fwd` (``mode`` 0) or :func:`avg_forward` (1 avg, 2 sum) with the N*C
    planes split over ``nt`` threads; scratch from ``state``."""
    if mode:
        return avg_forward(xf, yf, dims, g, mode, include_pad, nt, state)
    if _flat_max(g, dims, mode, False):
        return max_same_forward(xf, yf, dims, g, nt, state)
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


def backward(xf, dyf, dxf, dims, g, write, nt, mode=0, include_pad=True, state=None):
    """:func:`max_bwd` (``mode`` 0) or :func:`avg_backward` (1 avg, 2 sum) with the N*C
    planes split over ``nt`` threads."""
    if mode:
        return avg_backward(dyf, dxf, dims, g, mode, include_pad, write, nt, state)
    if _flat_max(g, dims, mode, True):
        return max_same_backward(xf, dyf, dxf, dims, g, write, nt, state)
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


# ---------------------------------------------------------------- avg / sum, stride 1

#: Elements per block of whole planes in :func:`avg_fwd` / :func:`avg_bwd` (at least
#: one plane): the float64 block scratch and the masks stay in the L1 cache.
AVG_BLOCK = 512


def is_same_plane(g, dims):
    """Whether ``g`` is a 2-D stride-1 window whose output plane is the input plane."""
    KD, KH, KW, SD, SH, SW, PD, PH, PW, OD, OH, OW = g
    return (dims[2] == 1 and KD == 1 and PD == 0 and SH == 1 and SW == 1
            and OH == dims[3] and OW == dims[4] and PH < KH and PW < KW)


def avg_plan(g, dims, include_pad, state=None):
    """Offsets, masks and window sizes of :func:`avg_fwd` / :func:`avg_bwd`, kept in ``state``.

    Returns ``(offs, fmask, bmask, size, block)``: per window offset ``k = kh*KW + kw``
    the flat shift ``offs[k]``, ``fmask[k, i]`` whether output ``i`` of a block reads a
    real element at that offset, ``bmask[k, i]`` whether input ``i`` is read by an output
    at that offset; ``size[i]`` the divisor (float64) as the general kernel computes it
    (``count_include_pad``: clipped to the padded input, else to the input); ``block``
    elements (whole planes) per block.
    """
    H, W = dims[3], dims[4]
    KH, KW, PH, PW = g[1], g[2], g[7], g[8]
    key = ('_avg_pool2d', H, W, KH, KW, PH, PW, bool(include_pad))
    got = state.get(key) if state is not None else None
    if got is not None:
        return got
    planes = max(1, AVG_BLOCK // (H * W))
    h = np.tile(np.repeat(np.arange(H), W), planes)
    w = np.tile(np.arange(W), H * planes)
    kh, kw = np.divmod(np.arange(KH * KW), KW)
    dh, dw = (kh - PH)[:, None], (kw - PW)[:, None]
    offs = ((kh - PH) * W + kw - PW).astype(np.int64)
    fmask = ((h + dh >= 0) & (h + dh < H) & (w + dw >= 0) & (w + dw < W)).astype(np.uint8)
    bmask = ((h - dh >= 0) & (h - dh < H) & (w - dw >= 0) & (w - dw < W)).astype(np.uint8)
    if include_pad:    # window [o - p, o - p + k) clipped to [-p, i + p)
        rows = np.minimum(h - PH + KH, H + PH) - (h - PH)
        cols = np.minimum(w - PW + KW, W + PW) - (w - PW)
    else:
        rows = np.minimum(h - PH + KH, H) - np.maximum(h - PH, 0)
        cols = np.minimum(w - PW + KW, W) - np.maximum(w - PW, 0)
    size = (np.maximum(rows, 0) * np.maximum(cols, 0)).astype(np.float64)
    got = (offs, fmask, bmask, size, planes * H * W)
    if state is not None:
        state[key] = got
    return got


@njit(**JIT)
def avg_fwd(xf, yf, offs, fmask, size, divide, acc):
    """Same-plane stride-1 avg (``divide``) or sum pooling of flat ``xf`` into flat ``yf``.

    Arrays from :func:`avg_plan`; ``acc``: float64 scratch of a block. Each block of
    whole planes sums offset by offset (row-major window order) in float64; a
    masked element is skipped (adds +0.0 to a sum that is never -0.0). Nine offsets
    (3x3): all at once, :func:`._pool_same3.avg3_fwd`.
    """
    n, K, B = xf.size, offs.size, fmask.shape[1]
    if K == 9:
        return avg3_fwd(xf, yf, offs, fmask, size, divide, acc)
    for s in range(0, n, B):
        L = min(B, n - s)
        for i in range(L):
            acc[i] = 0.0
        for k in range(K):
            off = offs[k]
            lo = max(0, -off)            # masked outside [lo, hi): the plane stays in the block
            hi = min(L, L - off)
            m = fmask[k]
            src = np.uint64(s + off + lo)
            ulo = np.uint64(lo)
            for t in range(np.uint64(max(hi - lo, 0))):
                v = xf[src + t]
                acc[ulo + t] += v if m[ulo + t] else 0.0
        us = np.uint64(s)
        if divide:
            for i in range(np.uint64(L)):
                d = size[i]
                yf[us + i] = acc[i] / d if d > 0 else 0.0
        else:
            for i in range(np.uint64(L)):
                yf[us + i] = acc[i]


@njit(**JIT)
def avg_bwd(dyf, dxf, offs, KW, bmask, size, divide, write, gs):
    """Backward of :func:`avg_fwd`: ``dx (+)= sum of dy / size`` over the windows holding x.

    ``KW``: the window width; ``write`` zeroes ``dx`` first; ``gs``: float64 scratch of a
    block. Offsets go by
    descending ``kh`` and ascending ``kw``: the order in which the general kernel's
    output rows reach each ``dx`` element, each addition rounded to ``dx``'s dtype.
    """
    n, K, B = dyf.size, offs.size, bmask.shape[1]
    if write:
        dxf[:] = 0
    for s in range(0, n, B):
        L = min(B, n - s)
        us = np.uint64(s)
        for i in range(np.uint64(L)):
            d = size[i]
            if divide:
                gs[i] = dyf[us + i] / d if d > 0 else 0.0
            else:
                gs[i] = dyf[us + i]
        for kr in range(K // KW):
            for kw in range(KW):
                k = (K // KW - 1 - kr) * KW + kw
                off = offs[k]
                lo = max(0, off)
                hi = min(L, L + off)
                m = bmask[k]
                ulo = np.uint64(lo)
                src = np.uint64(lo - off)
                dst = us + ulo
                for t in range(np.uint64(max(hi - lo, 0))):
                    a = dxf[dst + t]
                    dxf[dst + t] = a + gs[src + t] if m[ulo + t] else a


def avg_forward(xf, yf, dims, g, mode, include_pad, nt, state=None):
    """:func:`avg_fwd` with the N*C planes split over ``nt`` threads."""
    offs, fmask, _, size, block = avg_plan(g, dims, include_pad, state)
    pin = dims[3] * dims[4]
    acc = buffer(state, 'avg_pool2d', nt * (block + 64), np.float64)
    parts = _parts(tuple(dims), nt)

    def part(t):
        lo, hi, _ = parts[t]
        avg_fwd(xf[lo * pin:hi * pin], yf[lo * pin:hi * pin], offs, fmask, size, mode == 1,
                acc[t * (block + 64):t * (block + 64) + block])
    run_split(part, nt)


def avg_backward(dyf, dxf, dims, g, mode, include_pad, write, nt, state=None):
    """:func:`avg_bwd` with the N*C planes split over ``nt`` threads."""
    offs, _, bmask, size, block = avg_plan(g, dims, include_pad, state)
    pin = dims[3] * dims[4]
    gs = buffer(state, 'avg_pool2d', nt * (block + 64), np.float64)
    parts = _parts(tuple(dims), nt)

    def part(t):
        lo, hi, _ = parts[t]
        avg_bwd(dyf[lo * pin:hi * pin], dxf[lo * pin:hi * pin], offs, g[2], bmask, size,
                mode == 1,
                write, gs[t * (block + 64):t * (block + 64) + block])
    run_split(part, nt)


@njit(**JIT)
def max_same_fwd(xf, yf, offs, fmask, acc):
    """Same-plane stride-1 max pooling of flat ``xf`` into flat ``yf`` (:func:`avg_plan`'s
    arrays; ``acc``: scratch of a block in ``x``'s dtype): offset by offset in row-major
    window order, the first strict maximum from ``-inf``, as the general kernels (nine
    offsets: all at once, :func:`._pool_same3.max3_fwd`)."""
    n, K, B = xf.size, offs.size, fmask.shape[1]
    if K == 9:
        return max3_fwd(xf, yf, offs, fmask, acc)
    lowest = acc.dtype.type(-np.inf)
    for s in range(0, n, B):
        L = min(B, n - s)
        for i in range(L):
            acc[i] = lowest
        for k in range(K):
            off = offs[k]
            lo = max(0, -off)
            hi = min(L, L - off)
            m = fmask[k]
            src = np.uint64(s + off + lo)
            ulo = np.uint64(lo)
            for t in range(np.uint64(max(hi - lo, 0))):
                v = xf[src + t]
                a = acc[ulo + t]
                acc[ulo + t] = v if (m[ulo + t] and v > a) else a
        us = np.uint64(s)
        for i in range(np.uint64(L)):
            yf[us + i] = acc[i]


@njit(**JIT)
def max_same_bwd(xf, dyf, dxf, offs, fmask, write, best, arg):
    """Backward of :func:`max_same_fwd`: ``dx (+)= dy`` at each window's first maximum
    (``write`` zeroes ``dx`` first), added in output order as :func:`max_bwd`; a window
    of only NaN or ``-inf`` routes nothing. ``best`` / ``arg``: block scratch in ``x``'s
    dtype / int32."""
    n, K, B = xf.size, offs.size, fmask.shape[1]
    if write:
        dxf[:] = 0
    lowest = best.dtype.type(-np.inf)
    for s in range(0, n, B):
        L = min(B, n - s)
        for i in range(L):
            best[i] = lowest
            arg[i] = -1
        for k in range(K):
            off = offs[k]
            lo = max(0, -off)
            hi = min(L, L - off)
            m = fmask[k]
            src = np.uint64(s + off + lo)
            ulo = np.uint64(lo)
            kk = np.int32(k)
            for t in range(np.uint64(max(hi - lo, 0))):
                v = xf[src + t]
                a = best[ulo + t]
                take = m[ulo + t] and v > a
                best[ulo + t] = v if take else a
                arg[ulo + t] = kk if take else arg[ulo + t]
        for i in range(L):
            k = arg[i]
            if k >= 0:
                dxf[np.uint64(s + i + offs[k])] += dyf[np.uint64(s + i)]


def max_same_forward(xf, yf, dims, g, nt, state=None):
    """:func:`max_same_fwd` with the N*C planes split over ``nt`` threads."""
    offs, fmask, _, _, block = avg_plan(g, dims, True, state)
    pin = dims[3] * dims[4]
    acc = buffer(state, 'max_same', nt * (block + 64), xf.dtype)
    parts = _parts(tuple(dims), nt)

    def part(t):
        lo, hi, _ = parts[t]
        max_same_fwd(xf[lo * pin:hi * pin], yf[lo * pin:hi * pin], offs, fmask,
                     acc[t * (block + 64):t * (block + 64) + block])
    run_split(part, nt)


def max_same_backward(xf, dyf, dxf, dims, g, write, nt, state=None):
    """:func:`max_same_bwd` with the N*C planes split over ``nt`` threads."""
    offs, fmask, _, _, block = avg_plan(g, dims, True, state)
    pin = dims[3] * dims[4]
    best = buffer(state, 'max_same', nt * (block + 64), xf.dtype)
    arg = buffer(state, 'max_same_arg', nt * (block + 64), np.int32)
    parts = _parts(tuple(dims), nt)

    def part(t):
        lo, hi, _ = parts[t]
        sl = slice(t * (block + 64), t * (block + 64) + block)
        max_same_bwd(xf[lo * pin:hi * pin], dyf[lo * pin:hi * pin], dxf[lo * pin:hi * pin],
                     offs, fmask, write, best[sl], arg[sl])
    run_split(part, nt)
