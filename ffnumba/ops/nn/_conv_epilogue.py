"""Epilogues of fused inference convolutions: a per-channel affine map, then relu.

An executor bound without gradients runs a ``Convolution -> BatchNorm ->
Activation('relu')`` chain (or a shorter one) as one call
(:func:`ffnumba.ops.nn.convolution.fused_forward_cpu`). The convolution's
drivers (im2col, Winograd, depthwise) call :func:`apply_row` on each output
row right after writing it, while it is still in cache, so the intermediate
outputs are never written to memory.

The arithmetic is the unfused kernels', operation for operation, so fused and
unfused outputs are bit-identical:

* affine (mode bit 1), BatchNorm's inference map (``batch_norm._fwd_block``):
  ``y = x * scale[c] + shift[c]`` with float64 ``scale = gamma / sqrt(var + eps)``,
  ``shift = beta - mean * scale`` (:func:`ffnumba.ops.nn.batch_norm.inference_affine`),
  rounded to the output dtype;
* relu (mode bit 2), ``Activation``'s scalar body: ``x if x > 0 or x != x else 0``
  (NaN stays NaN).

``ep`` is a float64 ``(2, F)`` array (``scale``, ``shift`` rows); mode 0 does nothing.
"""
import numpy as np
from numba import njit

from ..templates import JIT

__all__ = ['AFFINE', 'RELU', 'apply_row', 'apply_all', 'no_epilogue']

#: Mode bits.
AFFINE, RELU = 1, 2
U = np.uint64


@njit(**JIT)
def apply_row(row, ep, f, mode):
    """The epilogue of channel ``f`` on the flat ``row`` (in place)."""
    n = U(row.size)
    z = row.dtype.type(0)
    if mode == AFFINE:
        scale = ep[0, f]
        shift = ep[1, f]
        for i in range(n):
            row[i] = row[i] * scale + shift
    elif mode == RELU:
        for i in range(n):
            v = row[i]
            row[i] = v if v > 0 or v != v else z
    elif mode == AFFINE | RELU:
        scale = ep[0, f]
        shift = ep[1, f]
        for i in range(n):
            v = row.dtype.type(row[i] * scale + shift)
            row[i] = v if v > 0 or v != v else z


@njit(**JIT)
def apply_all(y3, ep, mode):
    """:func:`apply_row` on every ``y3[n, f]`` of an ``(N, F, P)`` array."""
    for n in range(y3.shape[0]):
        for f in range(y3.shape[1]):
            apply_row(y3[n, f], ep, f, mode)


def no_epilogue():
    """The ``ep`` array passed with mode 0 (never read)."""
    return np.zeros((2, 1))
