"""One-pass forward kernels of stride-1 same-plane pooling with a 3x3 window.

:mod:`._pool2d`'s flat same-plane forwards (:func:`._pool2d.max_same_fwd`,
:func:`._pool2d.avg_fwd`) make one pass over a block of whole planes per
window offset, each reading and writing a block accumulator. With a 3x3
window (Inception's and GoogLeNet's pad-1 branch pooling) the nine offsets are
fixed in number, so :func:`max3_fwd` and :func:`avg3_fwd` take all nine for
each output in one loop, the accumulator in a register: the same arrays
(:func:`._pool2d.avg_plan`: the flat shifts ``offs`` and masks ``fmask``),
the same operations in the same order per output, so the results are the
offset-by-offset kernels' bit for bit:

* max: the first strict maximum (``m and v > best``, from ``-inf``) in
  row-major window order: NaN never wins, -0.0 vs 0.0 goes to the first;
* avg / sum: the float64 sum of the unmasked elements in row-major window
  order (a masked one adds ``+0.0``), then divided by ``size`` (avg).

Outputs whose nine shifted reads all lie inside ``xf`` run the register loop
(vectorised); the few at the ends of ``xf`` (at most ``W + 1`` per side)
test the mask before each read.

Kernel alone, 1 thread, float32, batch 32, 3x3 pad 1, loaded: avg 192 x 8x8
0.68 -> 0.38 ms, 576 x 4x4 0.52 -> 0.28 ms, 1024 x 2x2 0.23 -> 0.13 ms; max
192 x 8x8 0.30 -> 0.28 ms, 576 x 4x4 0.22 -> 0.21 ms (max was close to the
memory traffic already). NaN outputs are NaN; their sign bit is not kept (nor
by the other kernels).
"""
import numpy as np
from numba import njit

from ..templates import JIT as _JIT

__all__ = ['max3_fwd', 'avg3_fwd']

U = np.uint64
#: No fast-math here: ``reassoc`` would let the compiler regroup the nine-term sum held
#: in a register and ``nsz`` fold its leading ``0.0 +`` (a -0.0 window sum), both of
#: which the offset-by-offset kernels cannot do (their sum goes through memory).
JIT = dict(_JIT, fastmath=False)


@njit(inline='always', **JIT)
def _mx(xf, j, o, m, i, best):
    v = xf[j + o]
    return v if (m[i] != 0) & (v > best) else best      # & not and: no branch


@njit(inline='always', **JIT)
def _sm(xf, j, o, m, i, acc):
    v = xf[j + o]
    return acc + (v if m[i] else 0.0)


@njit(inline='always', **JIT)
def _bounds(n, s, L, offs):
    """The in-block range ``[a, b)`` of outputs whose every shifted read is inside ``xf``."""
    omin, omax = offs.min(), offs.max()
    a = min(max(0, -omin - s), L)
    b = max(min(L, n - s - omax), a)
    return a, b


@njit(inline='always', **JIT)
def _max_end(xf, yf, s, i, offs, fmask, lowest):
    best = lowest
    for k in range(9):
        if fmask[k, i]:
            v = xf[s + i + offs[k]]
            best = v if v > best else best
    yf[s + i] = best


@njit(inline='always', **JIT)
def _avg_end(xf, yf, s, i, offs, fmask, size, divide):
    t = 0.0
    for k in range(9):
        if fmask[k, i]:
            t += xf[s + i + offs[k]]
    d = size[i]
    yf[s + i] = (t / d if d > 0 else 0.0) if divide else t


@njit(**JIT)
def max3_fwd(xf, yf, offs, fmask, acc):
    """:func:`._pool2d.max_same_fwd` of a 3x3 window (``offs.size == 9``), one pass.

    Same arguments (``acc`` unused); ``yf``: flat output of ``xf``'s size and dtype.
    """
    n = xf.size
    B = fmask.shape[1]
    lowest = yf.dtype.type(-np.inf)
    o0, o1, o2, o3, o4, o5, o6, o7, o8 = (U(offs[0]), U(offs[1]), U(offs[2]), U(offs[3]),
                                          U(offs[4]), U(offs[5]), U(offs[6]), U(offs[7]),
                                          U(offs[8]))
    m0, m1, m2, m3, m4, m5, m6, m7, m8 = (fmask[0], fmask[1], fmask[2], fmask[3], fmask[4],
                                          fmask[5], fmask[6], fmask[7], fmask[8])
    for s in range(0, n, B):
        L = min(B, n - s)
        a, b = _bounds(n, s, L, offs)
        for i in range(a):                     # the ends: unmasked reads only
            _max_end(xf, yf, s, i, offs, fmask, lowest)
        for i in range(b, L):
            _max_end(xf, yf, s, i, offs, fmask, lowest)
        us = U(s)
        for i in range(U(a), U(b)):
            j = us + i
            best = _mx(xf, j, o0, m0, i, lowest)
            best = _mx(xf, j, o1, m1, i, best)
            best = _mx(xf, j, o2, m2, i, best)
            best = _mx(xf, j, o3, m3, i, best)
            best = _mx(xf, j, o4, m4, i, best)
            best = _mx(xf, j, o5, m5, i, best)
            best = _mx(xf, j, o6, m6, i, best)
            best = _mx(xf, j, o7, m7, i, best)
            yf[j] = _mx(xf, j, o8, m8, i, best)


@njit(**JIT)
def avg3_fwd(xf, yf, offs, fmask, size, divide, acc):
    """:func:`._pool2d.avg_fwd` of a 3x3 window (``offs.size == 9``), one pass.

    Same arguments (``acc`` unused): avg (``divide``) or sum pooling.
    """
    n = xf.size
    B = fmask.shape[1]
    o0, o1, o2, o3, o4, o5, o6, o7, o8 = (U(offs[0]), U(offs[1]), U(offs[2]), U(offs[3]),
                                          U(offs[4]), U(offs[5]), U(offs[6]), U(offs[7]),
                                          U(offs[8]))
    m0, m1, m2, m3, m4, m5, m6, m7, m8 = (fmask[0], fmask[1], fmask[2], fmask[3], fmask[4],
                                          fmask[5], fmask[6], fmask[7], fmask[8])
    for s in range(0, n, B):
        L = min(B, n - s)
        a, b = _bounds(n, s, L, offs)
        for i in range(a):                     # the ends: unmasked reads only
            _avg_end(xf, yf, s, i, offs, fmask, size, divide)
        for i in range(b, L):
            _avg_end(xf, yf, s, i, offs, fmask, size, divide)
        us = U(s)
        if divide:
            for i in range(U(a), U(b)):
                j = us + i
                t = _sm(xf, j, o0, m0, i, 0.0)
                t = _sm(xf, j, o1, m1, i, t)
                t = _sm(xf, j, o2, m2, i, t)
                t = _sm(xf, j, o3, m3, i, t)
                t = _sm(xf, j, o4, m4, i, t)
                t = _sm(xf, j, o5, m5, i, t)
                t = _sm(xf, j, o6, m6, i, t)
                t = _sm(xf, j, o7, m7, i, t)
                t = _sm(xf, j, o8, m8, i, t)
                d = size[i]
                yf[j] = t / d if d > 0 else 0.0
        else:
            for i in range(U(a), U(b)):
                j = us + i
                t = _sm(xf, j, o0, m0, i, 0.0)
                t = _sm(xf, j, o1, m1, i, t)
                t = _sm(xf, j, o2, m2, i, t)
                t = _sm(xf, j, o3, m3, i, t)
                t = _sm(xf, j, o4, m4, i, t)
                t = _sm(xf, j, o5, m5, i, t)
                t = _sm(xf, j, o6, m6, i, t)
                t = _sm(xf, j, o7, m7, i, t)
                yf[j] = _sm(xf, j, o8, m8, i, t)

