"""``L2Normalization``: divide by the L2 norm over a sample, a channel axis or the spatial axes.

Math
----
``data`` is viewed as ``(A, K, B)``; each ``(a, b)`` row of ``K`` values is
scaled to unit L2 norm::

    norm = sqrt(sum_k x_k^2 + eps),   y_k = x_k / norm
    dx_k = (g_k - y_k * sum_j g_j y_j) / norm

========  ==================================  ==============================
mode      rows normalised                     (A, K, B)
========  ==================================  ==============================
instance  every axis but 0 (one per sample)   (N, prod(shape[1:]), 1)
channel   axis 1, per sample and position     (N, C, prod(shape[2:]))
spatial   axes 2..., per sample and channel   (N * C, prod(shape[2:]), 1)
========  ==================================  ==============================

Shapes
------
``data``: ``(N, ...)``, ndim >= 1 for ``instance``, >= 3 for ``channel`` and
``spatial`` (MXNet 1.9.1's rule); ``output``: ``data.shape``. MXNet keeps the
norm as a hidden second output (``num_hidden_outputs=1``, for the JSON row
pointers).

Source: MXNet 1.9.1 ``L2Normalization`` documentation and observed values.
"""
import math

import numpy as np
from numba import njit

from ...base import ShapeError
from ...jit import gpu_body
from ..params import Field, Params, require_finite
from ..registry import OpDef, register_op, same_shape
from ..templates import JIT, LazyCudaKernel, f16_safe, import_cuda, launch_1d

cuda = None  # bound by import_cuda(globals()) on first GPU use
__all__ = ['L2NormalizationParam']


class L2NormalizationParam(Params):
    """Parameters of L2Normalization."""

    eps = Field(float, 1e-10, 'Added to the sum of squares before the square root (>= 0).',
                low=0.0)
    mode = Field(str, 'instance', "Rows to normalise: 'instance', 'channel' or 'spatial'.",
                 choices=('channel', 'instance', 'spatial'))

    def validate(self):
        require_finite(self, 'eps')


def _view(p, shape):
    shape = tuple(int(s) for s in shape)
    need = 1 if p.mode == 'instance' else 3
    if len(shape) < need:
        raise ShapeError("L2Normalization: mode=%r needs data with ndim >= %d. Received: data "
                         "shape %s" % (p.mode, need, shape))
    n = shape[0]
    if p.mode == 'instance':
        return n, int(np.prod(shape[1:], dtype=np.int64)), 1
    s = int(np.prod(shape[2:], dtype=np.int64))
    if p.mode == 'channel':
        return n, shape[1], s
    return n * shape[1], s, 1


def _infer(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    if ins[0] is None and out_shapes and out_shapes[0] is not None:
        ins[0] = tuple(out_shapes[0])
    if ins[0] is not None:
        _view(p, ins[0])
    return same_shape(p, ins, aux_shapes, out_shapes)


# Row bodies, one ``(a, b)`` row per call: the CPU kernels loop over the rows, the GPU
# kernels give each thread a row (grid-stride).

@njit(error_model='numpy')
def _fwd_row(x, eps, y, a, b):
    s = 0.0
    for k in range(x.shape[1]):
        s += x[a, k, b] * x[a, k, b]
    inv = 1.0 / math.sqrt(s + eps)
    for k in range(x.shape[1]):
        y[a, k, b] = x[a, k, b] * inv


@njit(error_model='numpy')
def _bwd_row(x, og, eps, add, gx, a, b):
    s = 0.0
    gy = 0.0
    for k in range(x.shape[1]):
        s += x[a, k, b] * x[a, k, b]
        gy += og[a, k, b] * x[a, k, b]
    inv = 1.0 / math.sqrt(s + eps)
    gy *= inv * inv
    for k in range(x.shape[1]):
        v = (og[a, k, b] - x[a, k, b] * gy) * inv
        if add:
            gx[a, k, b] += v
        else:
            gx[a, k, b] = v


@njit(**JIT)
def _fwd_cpu(x, eps, y):
    for a in range(x.shape[0]):
        for b in range(x.shape[2]):
            _fwd_row(x, eps, y, a, b)


@njit(**JIT)
def _bwd_cpu(x, og, eps, add, gx):
    for a in range(x.shape[0]):
        for b in range(x.shape[2]):
            _bwd_row(x, og, eps, add, gx, a, b)


def _build_gpu():
    import_cuda(globals())
    fwd_row, bwd_row = gpu_body(_fwd_row), gpu_body(_bwd_row)

    @cuda.jit
    def fwd(x, eps, y):
        nb = x.shape[2]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for r in range(start, x.shape[0] * nb, stride):
            fwd_row(x, eps, y, r // nb, r % nb)

    @cuda.jit
    def bwd(x, og, eps, add, gx):
        nb = x.shape[2]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for r in range(start, x.shape[0] * nb, stride):
            bwd_row(x, og, eps, add, gx, r // nb, r % nb)

    return fwd, bwd


_GPU = LazyCudaKernel(_build_gpu)


@f16_safe
def _forward_cpu(ctx, p, inputs, outputs, aux):
    v = _view(p, inputs[0].shape)
    _fwd_cpu(inputs[0].reshape(v), p.eps, outputs[0].reshape(v))


@f16_safe
def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'null':
        return
    v = _view(p, inputs[0].shape)
    _bwd_cpu(inputs[0].reshape(v), out_grads[0].reshape(v), p.eps, req[0] == 'add',
             in_grads[0].reshape(v))


def _forward_gpu(ctx, p, inputs, outputs, aux):
    v = _view(p, inputs[0].shape)
    launch_1d(_GPU.kernel[0], v[0] * v[2], inputs[0].reshape(v), p.eps, outputs[0].reshape(v))


def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'null':
        return
    v = _view(p, inputs[0].shape)
    launch_1d(_GPU.kernel[1], v[0] * v[2], inputs[0].reshape(v), out_grads[0].reshape(v),
              p.eps, req[0] == 'add', in_grads[0].reshape(v))


register_op(OpDef(
    name='L2Normalization',
    backward_reads=('data',),
    float_only=True,
    arguments=['data'],
    num_hidden_outputs=1,
    params=L2NormalizationParam,
    infer_shape=_infer,
    forward={'cpu': _forward_cpu, 'gpu': _forward_gpu},
    backward={'cpu': _backward_cpu, 'gpu': _backward_gpu},
    doc='Normalise to unit L2 norm per sample, channel or spatial map.\n\n' + __doc__,
    input_docs={'data': 'Input, (N, ...).'},
))
