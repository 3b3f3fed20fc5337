"""Training-time ``BatchNorm -> relu | clip`` as one forward and one backward call (CPU).

The training executor (:mod:`ffnumba._executor_train_fuse`) runs a BatchNorm
whose only consumer is ``Activation(act_type='relu')``, ``relu`` or ``clip``
(MobileNet v2's ``relu6``) through these two calls:

* :func:`forward`: BatchNorm's forward (batch statistics in training, the
  moving ones otherwise, exactly :func:`ffnumba.ops.nn.batch_norm._batch_stats`
  and :func:`~ffnumba.ops.nn.batch_norm._affine`) with the activation applied
  to each normalised value before it is stored: ``y = f(round(x * scale +
  shift))``, the activation's own scalar body on the value BatchNorm would have
  stored. The BatchNorm output itself is not written.
* :func:`backward`: the activation's backward folded into BatchNorm's. The
  BatchNorm output ``b = round(x * scale + shift)`` is recomputed from the data
  (the same per-channel ``scale`` and ``shift``, so the same bits), the
  gradient reaching it is ``g = round(dy * f'(b))`` (relu: ``f'(b) = 1`` where
  ``b > 0``, which is where ``y > 0``; clip: 1 on the closed interval), and
  BatchNorm's two passes (channel sums, then the data gradient) use ``g``; the
  intermediate gradient is never written. The moving statistics are updated
  as :func:`ffnumba.ops.nn.batch_norm._backward_cpu` updates them.

Every value is computed with the unfused operators' arithmetic in their order,
so the results are bit-identical to the unfused pair (float32 and float64). The
recomputation assumes ``gamma`` and ``beta`` are not changed between the forward
and the backward of a step (an optimizer updates them after the backward).
Channels split over threads as BatchNorm's kernels do.

:func:`relu_add_backward` is the backward of ResNet's ``relu(elemwise_add(a, b))``
in one elementwise pass (the masked head gradient into both operands' gradients).

Source: Ioffe & Szegedy, "Batch Normalization" (2015); the chain rule through
``relu``/``clip`` as in :mod:`ffnumba.ops.nn.activation` and ``ops.tensor.unary``.
"""
import numpy as np
from numba import njit

from ...jit import JIT, helper_njit
from ..tensor.unary import _clip, _clip_grad
from . import batch_norm as _bn
from .activation import relu, relu_grad

__all__ = ['RELU', 'CLIP', 'forward', 'backward', 'relu_add_backward']

#: Activation modes of the fused kernels.
RELU, CLIP = 1, 2
U = _bn.U
PART_SUM = _bn.PART_SUM


@helper_njit
def _fwd_block(xf, O, C, I, batch, mean, var, gamma, beta, eps, yf, acc, mode, lo, hi,
               clo, chi):
    """BatchNorm's training/evaluation forward of channels ``clo..chi`` with the
    activation (``mode``, bounds ``lo``, ``hi``) applied before the store."""
    if batch:
        _bn._batch_stats(xf, O, C, I, mean, var, acc, clo, chi)
    _bn._affine(mean, var, gamma, beta, eps, acc, clo, chi)
    t = yf.dtype.type
    for o in range(O):
        for c in range(clo, chi):
            b = U((o * C + c) * I)
            scale = acc[0, c]
            shift = acc[1, c]
            if mode == RELU:
                for i in range(U(I)):
                    yf[b + i] = relu(t(xf[b + i] * scale + shift), lo, hi)
            else:
                for i in range(U(I)):
                    yf[b + i] = _clip(t(xf[b + i] * scale + shift), lo, hi)


@helper_njit
def _grad(xf, gf, j, scale, shift, mode, lo, hi):
    """The gradient reaching the BatchNorm output at element ``j``, in the data's dtype."""
    t = gf.dtype.type
    v = t(xf[j] * scale + shift)
    if mode == RELU:
        return t(gf[j] * relu_grad(v, lo, hi))
    return t(gf[j] * _clip_grad(v, lo, hi))


@helper_njit
def _bwd_block(xf, gf, O, C, I, mean, var, gamma, beta, eps, batch, wmode, sums, dxf, acc,
               ss, grow, mode, lo, hi, clo, chi):
    """:func:`ffnumba.ops.nn.batch_norm._bwd_block` with the head gradient ``gf`` of the
    activation's output turned into the BatchNorm output's on the fly (``ss``: float64
    scratch (2, C) for the forward's scale and shift; ``grow``: scratch for one row of
    ``I`` gradients)."""
    n = O * I
    _bn._affine(mean, var, gamma, beta, eps, ss, clo, chi)
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
                for i in range(m):
                    grow[i] = _grad(xf, gf, b + i, scale, shift, mode, lo, hi)
                s0 = z
                s1 = z
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
    """:func:`_fwd_block` on blocks of channels of at most ``block`` elements."""
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
    grow = np.empty(I, gf.dtype)
    for c0 in range(clo, chi, step):
        _bwd_block(xf, gf, O, C, I, mean, var, gamma, beta, eps, batch, wmode, sums, dxf, acc,
                   ss, grow, mode, lo, hi, c0, min(chi, c0 + step))


def forward(ctx, p, inputs, out, aux, mode, lo, hi):
    """BatchNorm's forward followed by the activation, into ``out``.

    Parameters
    ----------
    ctx : OpContext
        The BatchNorm node's (its state keeps the statistics for the backward).
    p : BatchNormParam
        Without ``output_mean_var``.
    inputs : list of ndarray
        ``data`` (float32 or float64, channel on ``p.axis``), ``gamma``, ``beta``.
    out : ndarray
        The activation's output, ``data``'s shape and dtype.
    aux : list of ndarray
        ``moving_mean``, ``moving_var`` (read by an evaluation forward).
    mode : int
        :data:`RELU` or :data:`CLIP`; ``lo``, ``hi``: clip's bounds (floats).
    """
    data, gamma, beta = inputs
    o, c, i = _bn._split(data.shape, _bn._axis(p, data.ndim))
    st = _bn._state(ctx, c, gamma.dtype)
    if p.fix_gamma:
        gamma[...] = 1
    batch = ctx.is_train and not p.use_global_stats
    if not batch:
        st['mean'][...] = aux[0]
        st['var'][...] = aux[1]
    st['batch'] = batch
    _bn._run_channels(_fwd_range, data.size, c, data.reshape(-1), o, c, i, batch, st['mean'],
                      st['var'], gamma, beta, p.eps, out.reshape(-1), st['acc'], mode,
                      float(lo), float(hi), _bn.BLOCK_ELEMS)


def backward(ctx, p, dy, inputs, in_grads, req, aux, mode, lo, hi):
    """The activation's backward and BatchNorm's in one call (after :func:`forward`).

    Parameters
    ----------
    ctx, p, mode, lo, hi
        As :func:`forward`.
    dy : ndarray
        The gradient of the activation's output.
    inputs : list of ndarray
        BatchNorm's ``data``, ``gamma``, ``beta``.
    in_grads, req : list
        BatchNorm's input gradients and their requests (``'write'``, ``'add'``,
        ``'null'``), as its backward receives them.
    aux : list of ndarray
        ``moving_mean``, ``moving_var``: updated after a training forward.
    """
    data, gamma, beta = inputs
    o, c, i = _bn._split(data.shape, _bn._axis(p, data.ndim))
    st = ctx.state
    mean, var, sums = st['mean'], st['var'], st['sums']
    ss = st.get('ss')
    if ss is None or ss.shape[1] != c:
        ss = st['ss'] = np.empty((2, c), np.float64)
    wmode = {'null': 0, 'write': 1, 'add': 2}[req[0]]
    xf = data.reshape(-1)
    _bn._run_channels(_bwd_range, data.size, c, xf, dy.reshape(-1), o, c, i, mean, var, gamma,
                      beta, p.eps, not p.use_global_stats, wmode, sums,
                      in_grads[0].reshape(-1) if wmode else xf, st['acc'], ss, mode,
                      float(lo), float(hi), _bn.BLOCK_ELEMS)
    _bn._param_grads(p, st, sums, in_grads, req, aux)


# ------------------------------------------------ elemwise_add -> relu (ResNet's residual sums)

@njit(**JIT)
def _relu_add_bwd(y, dy, ga, gb, ma, mb):
    """``g = dy * relu'(y)`` (relu's backward, in the dtype) written (mode 1) or added (2)
    into ``ga`` and ``gb`` as ``elemwise_add``'s backward does (``g * 1.0``)."""
    t = dy.dtype.type
    for i in range(U(y.size)):
        g = t(dy[i] * relu_grad(y[i], 0.0, 0.0))
        if ma == 1:
            ga[i] = g * 1.0
        elif ma == 2:
            ga[i] += g * 1.0
        if mb == 1:
            gb[i] = g * 1.0
        elif mb == 2:
            gb[i] += g * 1.0


def relu_add_backward(y, dy, in_grads, req):
    """The backward of ``relu(elemwise_add(a, b))`` in one pass: bit-identical to relu's
    backward followed by ``elemwise_add``'s, without the sum's gradient.

    Parameters
    ----------
    y, dy : ndarray
        The relu's output and its gradient (one shape, float32 or float64).
    in_grads : list of ndarray or None
        The gradients of ``a`` and ``b`` (``y``'s shape and dtype).
    req : list of str
        Their requests, ``'write'``, ``'add'`` or ``'null'``.
    """
    from ...thread_pool import split_range
    modes = {'null': 0, 'write': 1, 'add': 2}
    ma, mb = modes[req[0]], modes[req[1]]
    if not (ma or mb):
        return
    yf, gf = y.reshape(-1), dy.reshape(-1)
    ga = in_grads[0].reshape(-1) if ma else gf
    gb = in_grads[1].reshape(-1) if mb else gf
    split_range(lambda lo, hi: _relu_add_bwd(yf[lo:hi], gf[lo:hi], ga[lo:hi], gb[lo:hi],
                                             ma, mb), yf.size)
