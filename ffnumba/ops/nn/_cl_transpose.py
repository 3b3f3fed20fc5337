"""Channels-last copies of one sample for the depthwise kernels (``_depthwise``).

``to_cl`` copies a flat ``(C, P)`` sample to ``(P, C)`` and ``from_cl`` back, by
tiles of :data:`CL_TILE` channels (and positions): a plain loop over a whole
strided column (a stride of ``P`` floats, 1 KiB on a 16x16 plane) kept evicting
its own cache lines from L1 (measured: 128 channels of 16x16, 32 samples, 0.92 ->
0.34 ms; 1024 channels of 2x2 back, 0.082 -> 0.046 ms). Plain copies: the
values are unchanged.
"""
import numpy as np
from numba import njit

from ..templates import JIT

__all__ = ['CL_TILE', 'to_cl', 'from_cl']

U = np.uint64
#: Channels (and positions) per tile.
CL_TILE = 32


@njit(**JIT)
def to_cl(src, base, C, P, dst):
    """``dst[i, c] = src[base + c*P + i]`` for ``i < P``: one sample to ``(P, C)``
    (contiguous writes, strided reads), by tiles on planes of at least :data:`CL_TILE`
    positions."""
    T = CL_TILE if P >= CL_TILE else C      # (short planes: one tile, as fast as any)
    for c0 in range(0, C, T):
        c1 = min(C, c0 + T)
        for i0 in range(0, P, CL_TILE):
            for i in range(i0, min(P, i0 + CL_TILE)):
                d = U(i * C)
                s = U(base + i)
                for c in range(U(c0), U(c1)):
                    dst[d + c] = src[s + c * U(P)]


@njit(**JIT)
def from_cl(src, C, P, dst, base):
    """``dst[base + c*P + i] = src[i*C + c]``: one ``(P, C)`` sample back to ``(C, P)``,
    by blocks of :data:`CL_TILE` channels (contiguous reads of each position's block)."""
    for c0 in range(0, C, CL_TILE):
        c1 = min(C, c0 + CL_TILE)
        for i in range(P):
            s = U(i * C)
            d = U(base + i)
            for c in range(U(c0), U(c1)):
                dst[d + c * U(P)] = src[s + c]
