"""Training-time ``BatchNorm -> relu | clip`` as one forward and one backward call (CPU).

The training executor (:mod:`ffnumba._executor_train_fuse`) runs a BatchNorm
whose only consumer is ``Activation(act_type='relu')``, ``relu`` or ``clip``
(MobileNet v2's ``relu6``) through these two calls:

* :func:`forward`: BatchNorm's forward (batch statistics in training, the
  moving ones otherwise, exactly :func:`ffnumba.ops.nn._bn_kernels._batch_stats`
  and :func:`~ffnumba.ops.nn._bn_kernels._affine`) with the activation applied
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

The kernels live in :mod:`._bn_kernels`; BatchNorm alone runs them too (mode ``NONE``).

Source: Ioffe & Szegedy, "Batch Normalization" (2015); the chain rule through
``relu``/``clip`` as in :mod:`ffnumba.ops.nn.activation` and ``ops.tensor.unary``.
"""
import numpy as np
from numba import njit

from ...jit import JIT
from . import batch_norm as _bn
from ._bn_kernels import NONE, RELU, CLIP, U, _bwd_range, _fwd_range  # noqa: F401 (NONE)
from .activation import relu_grad

__all__ = ['NONE', 'RELU', 'CLIP', 'forward', 'backward', 'relu_add_backward']


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
