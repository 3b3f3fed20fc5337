"""Epilogues of fused inference convolutions: a per-channel affine map, then relu or clip.

An executor bound without gradients runs a ``Convolution -> BatchNorm ->
Activation('relu')`` chain (or a shorter one) as one call
(:func:`ffnumba.ops.nn.convolution.fused_forward_cpu`). The convolution's
drivers (im2col, Winograd, depthwise) call :func:`apply_row` on each output
row right after writing it, while it is still in cache, so the intermediate
outputs are never written to memory.

With a float64 ``ep`` the arithmetic is the unfused kernels', operation for
operation, so fused and unfused outputs are bit-identical:

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
come together. A float32 ``ep`` (an executor's BatchNorm folded for float32
data, :mod:`ffnumba._executor_fuse`) runs the affine map in float32: within
float32 rounding of the unfused BatchNorm, not bit-identical.
"""
import numpy as np
from numba import njit

from ..templates import JIT

__all__ = ['AFFINE', 'RELU', 'CLIP', 'SHORT_ROW', 'apply_row', 'apply_block', 'apply_channels',
           'expand', 'apply_all',
           'make', 'no_epilogue', 'add_relu', 'add_relu_forward']

#: Mode bits.
AFFINE, RELU, CLIP = 1, 2, 4
#: Rows shorter than this run through :func:`apply_block`'s one loop per block.
SHORT_ROW = 32
U = np.uint64


@njit(inline='always', **JIT)
def apply_row(yf, start, n, ep, f, mode):
    """The epilogue of channel ``f`` on ``yf[start:start + n]`` of the flat ``yf`` (in place).

    Inlined into its callers, with one loop per mode: the loops stay
    branch-free (vectorised selects), and a short row costs no call or slice.
    """
    z = yf.dtype.type(0)
    scale = ep[0, f]
    shift = ep[1, f]
    lo = ep[2, 0]
    hi = ep[2, 1]
    s = U(start)
    e = s + U(n)
    if mode == AFFINE:
        for i in range(s, e):
            yf[i] = yf[i] * scale + shift
    elif mode == RELU:
        for i in range(s, e):
            v = yf[i]
            yf[i] = v if v > 0 or v != v else z
    elif mode == AFFINE | RELU:
        for i in range(s, e):
            v = yf.dtype.type(yf[i] * scale + shift)
            yf[i] = v if v > 0 or v != v else z
    elif mode == CLIP:
        for i in range(s, e):
            v = yf[i]
            yf[i] = lo if v < lo else (hi if v > hi else v)
    elif mode == AFFINE | CLIP:
        for i in range(s, e):
            v = yf.dtype.type(yf[i] * scale + shift)
            yf[i] = lo if v < lo else (hi if v > hi else v)


@njit(inline='always', **JIT)
def _apply_flat(yf, start, n, rep, r0, lo, hi, mode):
    """The epilogue of ``yf[start + j]`` with the per-element parameters ``rep[:, r0 + j]``
    (``j < n``): one long branch-free loop over many short rows."""
    z = yf.dtype.type(0)
    s = U(start)
    d = U(r0) - s
    e = s + U(n)
    if mode == AFFINE:
        for i in range(s, e):
            yf[i] = yf[i] * rep[0, i + d] + rep[1, i + d]
    elif mode == RELU:
        for i in range(s, e):
            v = yf[i]
            yf[i] = v if v > 0 or v != v else z
    elif mode == AFFINE | RELU:
        for i in range(s, e):
            v = yf.dtype.type(yf[i] * rep[0, i + d] + rep[1, i + d])
            yf[i] = v if v > 0 or v != v else z
    elif mode == CLIP:
        for i in range(s, e):
            v = yf[i]
            yf[i] = lo if v < lo else (hi if v > hi else v)
    elif mode == AFFINE | CLIP:
        for i in range(s, e):
            v = yf.dtype.type(yf[i] * rep[0, i + d] + rep[1, i + d])
            yf[i] = lo if v < lo else (hi if v > hi else v)


@njit(inline='always', **JIT)
def apply_channels(yt, start, C, ep, mode):
    """The epilogue of channels ``0..C`` of one position stored channels-last, ``yt[start + c]``
    (the per-channel parameters are ``ep``'s rows, read in order: one vectorised loop)."""
    _apply_flat(yt, start, C, ep, 0, ep[2, 0], ep[2, 1], mode)


@njit(**JIT)
def expand(ep, F, P):
    """The ``rep`` of :func:`apply_block`: ``(2, F*P)`` per-element ``scale`` and ``shift``
    when rows of ``P`` are shorter than :data:`SHORT_ROW`, else a dummy."""
    if P >= SHORT_ROW:
        return np.zeros((2, 1), ep.dtype)
    rep = np.empty((2, F * P), ep.dtype)
    for f in range(F):
        for i in range(P):
            rep[0, f * P + i] = ep[0, f]
            rep[1, f * P + i] = ep[1, f]
    return rep


@njit(inline='always', **JIT)
def apply_block(yf, start, F, P, f0, ep, rep, mode):
    """The epilogue of channels ``f0..f0+F`` of one sample, ``yf[start + f*P + i]``.

    Rows of at least :data:`SHORT_ROW` elements run :func:`apply_row` each;
    shorter ones one loop over the block with ``rep`` (:func:`expand`), so the
    loop stays vectorised (a loop of a few elements runs scalar, and its
    selects become mispredicted branches).
    """
    if P < SHORT_ROW:
        _apply_flat(yf, start, F * P, rep, f0 * P, ep[2, 0], ep[2, 1], mode)
    else:
        for f in range(F):
            apply_row(yf, start + f * P, P, ep, f0 + f, mode)


@njit(**JIT)
def apply_all(yf, F, P, ep, rep, mode):
    """:func:`apply_block` on every sample of the flat ``(nb, F, P)`` ``yf``."""
    for n in range(yf.size // max(1, F * P)):
        apply_block(yf, n * F * P, F, P, 0, ep, rep, mode)


def make(channels, a_min=0.0, a_max=0.0):
    """An ``ep`` array for ``channels`` output channels with the clip bounds set
    (the affine rows are filled by ``batch_norm.inference_affine``)."""
    ep = np.zeros((3, max(int(channels), 2)))
    ep[2, 0], ep[2, 1] = a_min, a_max
    return ep


def no_epilogue():
    """The ``ep`` array passed with mode 0 (never read)."""
    return make(1)


@njit(**JIT)
def add_relu(a, b, out):
    """``out = relu(a + b)`` on flat arrays of one dtype: ``elemwise_add``'s sum (in the
    dtype) and ``Activation('relu')``'s scalar body, in one pass."""
    z = out.dtype.type(0)
    for i in range(U(out.size)):
        v = a[i] + b[i]
        out[i] = v if v > 0 or v != v else z


def add_relu_forward(a, b, out):
    """The fused call of an inference executor's ``elemwise_add -> relu`` pair (ResNet's
    residual sums): :func:`add_relu` on ``(N, ...)`` arrays of one shape and dtype,
    float32 or float64, cut into pieces the kernel threads share
    (:func:`ffnumba.thread_pool.split_range`, as the unfused elementwise operators);
    bit-identical to the two nodes unfused."""
    from ...thread_pool import split_range
    af, bf, of = a.reshape(-1), b.reshape(-1), out.reshape(-1)
    split_range(lambda lo, hi: add_relu(af[lo:hi], bf[lo:hi], of[lo:hi]), of.size)
