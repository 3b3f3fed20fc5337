"""Flatten: collapse every axis but the first (MXNet ``Flatten``, alias ``flatten``).

Math
----
``y[n, j] = x[n, i1, ..., ik]`` with ``j`` the row-major index of
``(i1, ..., ik)``; the gradient reshapes the head gradient back.

Shapes
------
======  ==========================================
data    ``(N, d1, ..., dk)``
output  ``(N, d1*...*dk)``; a 1-D ``(N,)`` gives ``(N, 1)``
======  ==========================================

The executor owns its outputs, so the forward copies the data into the output
buffer (one memory pass, no allocation).

Source: MXNet 1.x ``Flatten`` operator documentation.
"""
import numpy as np
from numba import njit

from ...base import ShapeError
from ..registry import OpDef, register_op
from ..templates import make_unary

__all__ = ['identity', 'one', 'COPY_FORWARD', 'COPY_BACKWARD']


@njit
def identity(x, a, b):
    """The input itself."""
    return x


@njit
def one(v, a, b):
    """Derivative of the identity."""
    return 1.0


#: Elementwise copy (forward) and its gradient, for every device; reused by other ops.
COPY_FORWARD, COPY_BACKWARD = make_unary(identity, one, grad_uses='input')


def _forward_cpu(ctx, p, inputs, outputs, aux):
    outputs[0].reshape(-1)[...] = inputs[0].reshape(-1)


def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'write':
        in_grads[0].reshape(-1)[...] = out_grads[0].reshape(-1)
    elif req[0] == 'add':
        in_grads[0].reshape(-1)[...] += out_grads[0].reshape(-1)


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    d = ins[0]
    if d is None:
        return ins, [None], list(aux_shapes)
    if len(d) == 0:
        raise ShapeError('Flatten: data must have at least 1 dimension. Received: data shape ()')
    out = (d[0], int(np.prod(d[1:], dtype=np.int64)))
    return ins, [out], list(aux_shapes)


register_op(OpDef(
    name='Flatten',
    backward_reads=(),   # a copy: dx = dy reshaped
    aliases=('flatten',),
    arguments=['data'],
    infer_shape=_infer_shape,
    forward={'cpu': _forward_cpu, 'gpu': COPY_FORWARD['gpu']},
    backward={'cpu': _backward_cpu, 'gpu': COPY_BACKWARD['gpu']},
    doc=__doc__,
    input_docs={'data': 'Input array with at least one axis.'},
))
