"""BatchNorm's CPU kernels, alone and followed by an activation (``relu``, ``clip``).

Data is flat ``(outer, C, inner)``. Each driver runs on channels ``clo..chi`` (the
channels split over threads, :func:`ffnumba.ops.nn.batch_norm._run_channels`), a
cache-sized block of them at a time. ``mode`` :data:`NONE` is BatchNorm alone (its
operator's forward and backward); :data:`RELU` and :data:`CLIP` apply the activation
before the store and fold its backward into BatchNorm's (:mod:`._bn_act`, the training
executor's fusion). Both run the same compiled drivers, so a network with both compiles
one kernel pair (a cold ResNet-18 compiles two kernels fewer); mode ``NONE`` runs the
plain operator's loops, the activation modes the unfused operators' arithmetic in
their order (bit-identical to the unfused pair).

Source: Ioffe & Szegedy, "Batch Normalization" (2015); the chain rule through
``relu``/``clip`` as in :mod:`ffnumba.ops.nn.activation` and ``ops.tensor.unary``.
"""
import numpy as np
from numba import njit

from ...jit import JIT, helper_njit
from ..tensor.unary import _clip, _clip_grad
from .activation import relu, relu_grad

__all__ = ['NONE', 'RELU', 'CLIP', 'U', 'PART_SUM']

#: Unsigned loop indices: no negative-index wrap-around test, so LLVM vectorises.
U = np.uint64
#: Most terms of one partial sum in the data's dtype (float32 lanes: twice the float64
#: width); the partial sums are added in float64.
PART_SUM = 4096


@njit(**JIT)
def _affine(mean, var, gamma, beta, eps, acc, clo, chi):
    """``acc[0, c] = gamma / sqrt(var + eps)`` (scale), ``acc[1, c] = beta - mean * scale``
    (shift) in float64 for channels ``clo..chi``: ``y = x * scale + shift``."""
    for c in range(clo, chi):
        scale = gamma[c] / np.sqrt(var[c] + eps)
        acc[0, c] = scale
        acc[1, c] = beta[c] - mean[c] * scale


@helper_njit(by_reference=True)
def _batch_stats(xf, O, C, I, mean, var, acc, clo, chi):
    """Store the batch mean and biased variance of channels ``clo..chi`` in ``mean`` /
    ``var`` (sums of ``x - x[0, c, 0]`` and of its square, the shift guarding against
    cancellation; an inf or NaN shift is 0, so an inf gives an inf mean as in MXNet)."""
    n = O * I
    for c in range(clo, chi):
        acc[0, c] = 0.0
        acc[1, c] = 0.0
        k = xf[c * I]
        acc[2, c] = k if k - k == 0 else 0.0
    z = xf.dtype.type(0)
    for o in range(O):
        for c in range(clo, chi):
            k = xf.dtype.type(acc[2, c])      # an element of x: exact in its dtype
            for i0 in range(0, I, PART_SUM):
                b = U((o * C + c) * I + i0)
                s = z
                ss = z
                for i in range(U(min(PART_SUM, I - i0))):
                    d = xf[b + i] - k
                    s += d
                    ss += d * d
                acc[0, c] += s
                acc[1, c] += ss
    for c in range(clo, chi):
        m = acc[0, c] / n
        mean[c] = acc[2, c] + m
        var[c] = max(acc[1, c] / n - m * m, 0.0)


#: Activation modes of the fused kernels (``NONE``: BatchNorm alone, the operator's own
#: CPU kernels: one compiled kernel pair for both).
NONE, RELU, CLIP = 0, 1, 2


@helper_njit(by_reference=True)
def _fwd_block(xf, O, C, I, batch, mean, var, gamma, beta, eps, yf, acc, mode, lo, hi,
               clo, chi):
    """BatchNorm's training/evaluation forward of channels ``clo..chi`` with the
    activation (``mode``, bounds ``lo``, ``hi``; :data:`NONE`: none) applied before the store."""
    if batch:
        _batch_stats(xf, O, C, I, mean, var, acc, clo, chi)
    _affine(mean, var, gamma, beta, eps, acc, clo, chi)
    t = yf.dtype.type
    for o in range(O):
        for c in range(clo, chi):
            b = U((o * C + c) * I)
            scale = acc[0, c]
            shift = acc[1, c]
            if mode == RELU:
                for i in range(U(I)):
                    yf[b + i] = relu(t(xf[b + i] * scale + shift), lo, hi)
            elif mode == CLIP:
                for i in range(U(I)):
                    yf[b + i] = _clip(t(xf[b + i] * scale + shift), lo, hi)
            else:       # NONE: BatchNorm alone
                for i in range(U(I)):
                    yf[b + i] = t(xf[b + i] * scale + shift)


@helper_njit
def _grad(xf, gf, j, scale, shift, mode, lo, hi):
    """The gradient reaching the BatchNorm output at element ``j``, in the data's dtype."""
    t = gf.dtype.type
    v = t(xf[j] * scale + shift)
    if mode == RELU:
        return t(gf[j] * relu_grad(v, lo, hi))
    return t(gf[j] * _clip_grad(v, lo, hi))


@helper_njit(by_reference=True)
def _bwd_block(xf, gf, O, C, I, mean, var, gamma, beta, eps, batch, wmode, sums, dxf, acc,
               ss, grow, mode, lo, hi, clo, chi):
    """Channels ``clo..chi``: ``sums[0, c] = sum(g)``, ``sums[1, c] = sum(g * xhat)``, then
    (``wmode`` 1 write, 2 add, 0 none) the data gradient through the batch statistics
    when ``batch`` (``dx = k (g - mean(g) - xhat mean(g xhat))``, ``k = gamma / std``,
    as ``a g + bx x + cc`` with per-channel constants in ``acc``). ``g``: the head
    gradient ``gf`` itself (mode :data:`NONE`), or that of the activation's output turned
    into the BatchNorm output's on the fly (``ss``: float64 scratch (2, C) for the
    forward's scale and shift; ``grow``: scratch for one row of ``I`` gradients)."""
    n = O * I
    if mode != NONE:
        _affine(mean, var, gamma, beta, eps, ss, clo, chi)
    for c in range(clo, chi):
        acc[0, c] = 0.0
        acc[1, c] = 0.0
    z = gf.dtype.type(0)
    for o in range(O):
        for c in range(clo, chi):
            mc = mean[c]
            scale = ss[0, c]
            shift = ss[1, c]
            for i0 in range(0, I, PART_SUM):
                b = U((o * C + c) * I + i0)
                m = U(min(PART_SUM, I - i0))
                s0 = z
                s1 = z
                if mode == NONE:
                    for i in range(m):      # the unfused kernel's loop
                        g = gf[b + i]
                        s0 += g
                        s1 += g * (xf[b + i] - mc)
                else:
                    for i in range(m):
                        grow[i] = _grad(xf, gf, b + i, scale, shift, mode, lo, hi)
                    for i in range(m):      # the unfused kernel's loop (the same sum order)
                        s0 += grow[i]
                        s1 += grow[i] * (xf[b + i] - mc)
                acc[0, c] += s0
                acc[1, c] += s1
    for c in range(clo, chi):
        invstd = 1.0 / np.sqrt(var[c] + eps)
        s0 = acc[0, c]
        s1 = acc[1, c] * invstd
        sums[0, c] = s0
        sums[1, c] = s1
        k = gamma[c] * invstd
        bx = 0.0
        cc = 0.0
        if batch:
            bx = -k * invstd * s1 / n
            cc = -k * s0 / n - bx * mean[c]
        acc[0, c] = k
        acc[1, c] = bx
        acc[2, c] = cc
    if wmode == 0:
        return
    for o in range(O):
        for c in range(clo, chi):
            b = U((o * C + c) * I)
            a = acc[0, c]
            bx = acc[1, c]
            cc = acc[2, c]
            scale = ss[0, c]
            shift = ss[1, c]
            if mode == NONE:            # the unfused kernel's loops
                if wmode == 1:
                    for i in range(U(I)):
                        dxf[b + i] = a * gf[b + i] + bx * xf[b + i] + cc
                else:
                    for i in range(U(I)):
                        dxf[b + i] += a * gf[b + i] + bx * xf[b + i] + cc
                continue
            # the row's gradient first, in memory: the data gradient below is then the
            # unfused kernel's very expression (the same contraction into FMAs)
            for i in range(U(I)):
                grow[i] = _grad(xf, gf, b + i, scale, shift, mode, lo, hi)
            if wmode == 1:
                for i in range(U(I)):
                    dxf[b + i] = a * grow[i] + bx * xf[b + i] + cc
            else:
                for i in range(U(I)):
                    dxf[b + i] += a * grow[i] + bx * xf[b + i] + cc


@njit(**JIT)
def _fwd_range(xf, O, C, I, batch, mean, var, gamma, beta, eps, yf, acc, mode, lo, hi, block,
               clo, chi):
    """:func:`_fwd_block` on blocks of channels of at most ``block`` elements, so the
    normalising pass reads the block from cache, not memory."""
    step = max(1, block // max(1, O * I))
    for c0 in range(clo, chi, step):
        _fwd_block(xf, O, C, I, batch, mean, var, gamma, beta, eps, yf, acc, mode, lo, hi, c0,
                   min(chi, c0 + step))


@njit(**JIT)
def _bwd_range(xf, gf, O, C, I, mean, var, gamma, beta, eps, batch, wmode, sums, dxf, acc, ss,
               mode, lo, hi, block, clo, chi):
    """:func:`_bwd_block` on blocks of channels (data and head gradient together at most
    ``block`` elements)."""
    step = max(1, block // max(1, 2 * O * I))
    grow = np.empty(I if mode != NONE else 0, gf.dtype)    # NONE reads gf directly
    for c0 in range(clo, chi, step):
        _bwd_block(xf, gf, O, C, I, mean, var, gamma, beta, eps, batch, wmode, sums, dxf, acc,
                   ss, grow, mode, lo, hi, c0, min(chi, c0 + step))
