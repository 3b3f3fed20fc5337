"""``softmax_cross_entropy``: summed cross-entropy of a softmax against integer labels.

Math
----
For ``data`` of shape ``(N, K)`` and class labels ``l_i``::

    out = sum_i ( log sum_k exp(x_ik) - x_i,l_i )            (shape (1,))
    dx_ik = g * (softmax(x_i)_k - [k == l_i])                (g: the head gradient)

The log-sum-exp subtracts each row's maximum first (no overflow). Unlike
``SoftmaxOutput`` this is an ordinary operator: its backward multiplies by
the head gradient. Labels are truncated to integers; one outside ``[0, K)``
raises :class:`~ffnumba.base.ParamError` (checked on the host before the
kernels run). ``label`` gets no gradient (zeros when asked for; MXNet 1.9.1
refuses a gradient request on it).

Shapes
------
=====  =========  =============================================
data   (N, K)     2-D (MXNet's rule)
label  (N,)       inferred from data when not given
out    (1,)
=====  =========  =============================================

Source: MXNet 1.9.1 ``softmax_cross_entropy`` documentation and values
(``[[1, 2, 3], [0.5, -1, 2]]`` with labels ``[2, 0]`` gives 2.14891726).
"""
import math

import numpy as np
from numba import njit

from ...base import ParamError, ShapeError
from ...jit import gpu_body
from ..registry import OpDef, register_op, shape_assign
from ..templates import JIT, LazyCudaKernel, f16_safe, fill_gpu, import_cuda, launch_1d

cuda = None  # bound by import_cuda(globals()) on first GPU use
__all__ = []


def _infer(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    d = ins[0]
    if d is not None:
        if len(d) != 2:
            raise ShapeError('softmax_cross_entropy: data must be 2-D (N, K). Received: data '
                             'shape %s' % (tuple(d),))
        shape_assign(ins, 1, (d[0],), 'label')
    if ins[1] is not None and len(ins[1]) != 1:
        raise ShapeError('softmax_cross_entropy: label must be 1-D (N,). Received: label '
                         'shape %s' % (tuple(ins[1]),))
    return ins, [(1,)], list(aux_shapes)


def _check_labels(ctx, label_host, k):
    lab = np.trunc(np.asarray(label_host, dtype=np.float64).reshape(-1))
    bad = np.flatnonzero(~((lab >= 0) & (lab < k)))
    if bad.size:
        raise ParamError('softmax_cross_entropy (node %s): label %r at index %d is out of range '
                         '[0, %d)' % (ctx.node_name if ctx else '', float(label_host[bad[0]]),
                                      bad[0], k))


@njit(error_model='numpy')
def _row_lse(x, i):
    """``(m, s)``: the max of row i and the sum of ``exp(x - m)`` over it."""
    k = x.shape[1]
    m = x[i, 0]
    for j in range(1, k):
        if x[i, j] > m:
            m = x[i, j]
    s = 0.0
    for j in range(k):
        s += math.exp(x[i, j] - m)
    return m, s


@njit(error_model='numpy')
def _row_loss(x, label, i):
    """log-sum-exp of row i minus its label entry (CPU and GPU kernels call it)."""
    m, s = _row_lse(x, i)
    return m + math.log(s) - x[i, int(label[i])]


@njit(error_model='numpy')
def _row_grad(x, label, i, g, add, gx):
    """``gx[i] (+)= g (softmax(x[i]) - onehot(label[i]))``."""
    m, s = _row_lse(x, i)
    lab = int(label[i])
    for j in range(x.shape[1]):
        v = math.exp(x[i, j] - m) / s
        if j == lab:
            v -= 1.0
        if add:
            gx[i, j] += g * v
        else:
            gx[i, j] = g * v


@njit(**JIT)
def _fwd_cpu(x, label, out):
    t = 0.0
    for i in range(x.shape[0]):
        t += _row_loss(x, label, i)
    out[0] = t


@njit(**JIT)
def _bwd_cpu(x, label, og, add, gx):
    g = og[0]
    for i in range(x.shape[0]):
        _row_grad(x, label, i, g, add, gx)


def _build_gpu():
    import_cuda(globals())
    row_loss, row_grad = gpu_body(_row_loss), gpu_body(_row_grad)

    @cuda.jit
    def rows(x, label, tmp):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, x.shape[0], stride):
            tmp[i] = row_loss(x, label, i)

    @cuda.jit
    def total(tmp, out):
        if cuda.grid(1) == 0:
            t = 0.0
            for i in range(tmp.size):
                t += tmp[i]
            out[0] = t

    @cuda.jit
    def grad(x, label, og, add, gx):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        g = og[0]
        for i in range(start, x.shape[0], stride):
            row_grad(x, label, i, g, add, gx)

    return rows, total, grad


_GPU = LazyCudaKernel(_build_gpu)


@f16_safe
def _forward_cpu(ctx, p, inputs, outputs, aux):
    x, label = inputs
    _check_labels(ctx, label, x.shape[1])
    _fwd_cpu(x, label, outputs[0])


@f16_safe
def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    x, label = inputs
    if req[0] != 'null':
        _check_labels(ctx, label, x.shape[1])
        _bwd_cpu(x, label, out_grads[0], req[0] == 'add', in_grads[0])
    if req[1] == 'write':
        in_grads[1][...] = 0


def _forward_gpu(ctx, p, inputs, outputs, aux):
    import_cuda(globals())
    x, label = inputs
    _check_labels(ctx, label.copy_to_host(), x.shape[1])
    rows, total, _ = _GPU.kernel
    tmp = cuda.device_array(x.shape[0], np.float64)
    launch_1d(rows, x.shape[0], x, label, tmp)
    total[1, 1](tmp, outputs[0])


def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    x, label = inputs
    if req[0] != 'null':
        _check_labels(ctx, label.copy_to_host(), x.shape[1])
        launch_1d(_GPU.kernel[2], x.shape[0], x, label, out_grads[0], req[0] == 'add',
                  in_grads[0])
    if req[1] == 'write':
        fill_gpu.launch(in_grads[1].size, in_grads[1].reshape(-1), 0.0)


register_op(OpDef(
    name='softmax_cross_entropy',
    backward_reads=('data', 'label'),
    float_only=('data',),
    arguments=['data', 'label'],
    infer_shape=_infer,
    forward={'cpu': _forward_cpu, 'gpu': _forward_gpu},
    backward={'cpu': _backward_cpu, 'gpu': _backward_gpu},
    doc='Sum over the batch of the softmax cross-entropy of data against integer labels.\n\n'
        + __doc__,
    input_docs={'data': 'Scores, (N, K).', 'label': 'Class indices, (N,).'},
))
