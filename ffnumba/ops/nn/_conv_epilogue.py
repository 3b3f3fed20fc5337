"""Epilogues of fused inference convolutions: a per-channel affine map, then relu or clip.

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
* relu (mode bit 2), ``Activation``'s (and ``relu``'s) scalar body:
  ``x if x > 0 or x != x else 0`` (NaN stays NaN);
* clip (mode bit 4), ``clip``'s scalar body: ``a_min if x < a_min else a_max if
  x > a_max else x`` (MobileNet v2's relu6).

``ep`` (:func:`make`) is a float64 ``(3, max(F, 2))`` array: the ``scale`` and
``shift`` rows, then ``a_min, a_max`` in the first two columns of the third
row. Mode 0 does nothing. A chain has one activation: relu and clip never
come together.
"""
import numpy as np
from numba import njit

from ..templates import JIT

__all__ = ['AFFINE', 'RELU', 'CLIP', 'value', 'apply_row', 'apply_all', 'make', 'no_epilogue']

#: Mode bits.
AFFINE, RELU, CLIP = 1, 2, 4
U = np.uint64


@njit(inline='always', **JIT)
def value(t, like, ep, f, mode):
    """The epilogue of one element ``t`` of channel ``f`` (``like``: an array of the output
    dtype, to round the affine map to it as the unfused BatchNorm's store does)."""
    if mode & AFFINE:
        t = like.dtype.type(t * ep[0, f] + ep[1, f])
    if mode & RELU:
        return t if t > 0 or t != t else like.dtype.type(0)
    if mode & CLIP:
        lo = ep[2, 0]
        hi = ep[2, 1]
        return lo if t < lo else (hi if t > hi else t)
    return t


@njit(**JIT)
def apply_row(yf, start, n, ep, f, mode):
    """The epilogue of channel ``f`` on ``yf[start:start + n]`` of the flat ``yf`` (in place;
    no slice is made, so short rows cost no array set-up)."""
    z = yf.dtype.type(0)
    scale = ep[0, f]
    shift = ep[1, f]
    lo = ep[2, 0]
    hi = ep[2, 1]
    s = U(start)
    if mode == AFFINE:
        for i in range(s, s + U(n)):
            yf[i] = yf[i] * scale + shift
    elif mode == RELU:
        for i in range(s, s + U(n)):
            v = yf[i]
            yf[i] = v if v > 0 or v != v else z
    elif mode == AFFINE | RELU:
        for i in range(s, s + U(n)):
            v = yf.dtype.type(yf[i] * scale + shift)
            yf[i] = v if v > 0 or v != v else z
    elif mode == CLIP:
        for i in range(s, s + U(n)):
            v = yf[i]
            yf[i] = lo if v < lo else (hi if v > hi else v)
    elif mode == AFFINE | CLIP:
        for i in range(s, s + U(n)):
            v = yf.dtype.type(yf[i] * scale + shift)
            yf[i] = lo if v < lo else (hi if v > hi else v)


@njit(**JIT)
def apply_all(yf, F, P, ep, mode):
    """:func:`apply_row` on every ``(sample, channel)`` row of the flat ``(nb, F, P)`` ``yf``."""
    for n in range(yf.size // max(1, F * P)):
        for f in range(F):
            apply_row(yf, (n * F + f) * P, P, ep, f, mode)


def make(channels, a_min=0.0, a_max=0.0):
    """An ``ep`` array for ``channels`` output channels with the clip bounds set
    (the affine rows are filled by ``batch_norm.inference_affine``)."""
    ep = np.zeros((3, max(int(channels), 2)))
    ep[2, 0], ep[2, 1] = a_min, a_max
    return ep


def no_epilogue():
    """The ``ep`` array passed with mode 0 (never read)."""
    return make(1)
