"""``SVMOutput``: identity forward, (squared) hinge-loss gradient backward.

Math
----
The data is viewed as rows of ``C`` class scores ``s`` with one class label
``k`` per row (``m`` = ``margin``, ``c`` = ``regularization_coefficient``).
The loss the backward differentiates, per row::

    L2-SVM (default):          c * ( max(0, m - s_k)^2 + sum_{x != k} max(0, m + s_x)^2 )
    L1-SVM (use_linear=True):  c * ( max(0, m - s_k)   + sum_{x != k} max(0, m + s_x) )

so ``grad_k = -2 c (m - s_k)`` (L1: ``-c``) where ``m > s_k``, and
``grad_x = 2 c (m + s_x)`` (L1: ``c``) where ``m > -s_x``, 0 elsewhere.
The forward returns ``data`` unchanged. A loss head: the head gradient is
ignored and ``label`` gets no gradient. Labels are truncated to integers;
one outside ``[0, C)`` raises :class:`~ffnumba.base.ParamError`.

Shapes
------
======  ======================  ==========================================
data    (d0, ..., d(n-2), C)    ndim >= 2
label   (d0, ..., d(n-2))       data's shape without the last axis
output  data.shape
======  ======================  ==========================================

MXNet 1.9.1 infers the same label shape, but its backward pairs rows with
labels correctly only for 2-D data (it flattens data to ``(N, rest)``);
ffnumba pairs every row of ``C`` scores with its label for any rank.

Source: Y. Tang, "Deep Learning using Linear Support Vector Machines"
(2013); MXNet 1.9.1 ``SVMOutput`` documentation and values.
"""
import numpy as np
from numba import njit

from ...base import ParamError, ShapeError
from ..params import Field, Params, require_finite
from ..registry import OpDef, register_op, shape_assign
from ..templates import JIT, LazyCudaKernel, f16_safe, fill_gpu, import_cuda, launch_1d

cuda = None  # bound by import_cuda(globals()) on first GPU use
__all__ = ['SVMOutputParam']


class SVMOutputParam(Params):
    """Parameters of SVMOutput."""

    margin = Field(float, 1.0, 'The margin of the hinge loss.')
    regularization_coefficient = Field(float, 1.0, 'Scales the loss (and the gradient).')
    use_linear = Field(bool, False, 'L1-SVM (hinge) instead of L2-SVM (squared hinge).')

    def validate(self):
        require_finite(self, 'margin', 'regularization_coefficient')


def _infer(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    d = ins[0]
    if d is not None:
        if len(d) < 2:
            raise ShapeError('SVMOutput: data must have ndim >= 2 (rows of class scores). '
                             'Received: data shape %s' % (tuple(d),))
        shape_assign(ins, 1, tuple(d)[:-1], 'label')
    return ins, [None if d is None else tuple(d)], list(aux_shapes)


_body = njit(error_model='numpy')


@_body
def _grad(s, is_label, margin, coef, linear):
    if is_label:
        if margin > s:
            return -coef if linear else -2.0 * coef * (margin - s)
        return 0.0
    if margin > -s:
        return coef if linear else 2.0 * coef * (margin + s)
    return 0.0


@njit(**JIT)
def _bwd_cpu(x, label, margin, coef, linear, add, gx):
    rows, c = x.shape
    for r in range(rows):
        k = int(label[r])
        for j in range(c):
            v = _grad(x[r, j], j == k, margin, coef, linear)
            if add:
                gx[r, j] += v
            else:
                gx[r, j] = v


def _build_gpu():
    import_cuda(globals())

    @cuda.jit
    def bwd(x, label, margin, coef, linear, add, gx):
        rows, c = x.shape
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, rows * c, stride):
            r = i // c
            j = i % c
            v = _grad(x[r, j], j == int(label[r]), margin, coef, linear)
            if add:
                gx[r, j] += v
            else:
                gx[r, j] = v
    return bwd


_GPU = LazyCudaKernel(_build_gpu)


def _rows(x):
    c = tuple(x.shape)[-1]          # (the CUDA simulator's shapes have no negative indexing)
    return x.reshape(x.size // c, c)


def _check_labels(ctx, label_host, c):
    lab = np.trunc(np.asarray(label_host, dtype=np.float64).reshape(-1))
    bad = np.flatnonzero(~((lab >= 0) & (lab < c)))
    if bad.size:
        raise ParamError('SVMOutput (node %s): label %r at index %d is out of range [0, %d)'
                         % (ctx.node_name if ctx else '', float(lab[bad[0]]), bad[0], c))


def _forward_cpu(ctx, p, inputs, outputs, aux):
    outputs[0][...] = inputs[0]


@f16_safe
def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    x, label = inputs
    if req[1] == 'write':
        in_grads[1][...] = 0
    if req[0] == 'null':
        return
    _check_labels(ctx, label, tuple(x.shape)[-1])
    _bwd_cpu(_rows(x), label.reshape(label.size), p.margin, p.regularization_coefficient, p.use_linear,
             req[0] == 'add', _rows(in_grads[0]))


def _forward_gpu(ctx, p, inputs, outputs, aux):
    outputs[0].copy_to_device(inputs[0])


def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    x, label = inputs
    if req[1] == 'write':
        fill_gpu.launch(in_grads[1].size, in_grads[1].reshape(-1), 0.0)
    if req[0] == 'null':
        return
    _check_labels(ctx, label.copy_to_host(), tuple(x.shape)[-1])
    launch_1d(_GPU.kernel, x.size, _rows(x), label.reshape(label.size), p.margin,
              p.regularization_coefficient, p.use_linear, req[0] == 'add', _rows(in_grads[0]))


register_op(OpDef(
    name='SVMOutput',
    backward_reads=('data', 'label'),
    float_only=('data',),
    arguments=['data', 'label'],
    params=SVMOutputParam,
    infer_shape=_infer,
    forward={'cpu': _forward_cpu, 'gpu': _forward_gpu},
    backward={'cpu': _backward_cpu, 'gpu': _backward_gpu},
    is_loss=True,
    doc='Support vector machine output layer (a loss head).\n\n' + __doc__,
    input_docs={'data': 'Class scores, (..., C).', 'label': 'Class indices, data.shape[:-1].'},
))
