"""Custom loss heads and gradient blocking (MXNet ``MakeLoss``, ``make_loss``, ``BlockGrad``).

Math
----
All three output their input unchanged (``y = x``). Their backward ignores
the head gradient:

=========================  ============================================
op                         d / d data
=========================  ============================================
MakeLoss                   ``grad_scale / norm`` everywhere, with norm = 1
                           ('null'), ``N = data.shape[0]`` ('batch'), or
                           ``max(1, #(x > valid_thresh))`` ('valid')
make_loss                  1 everywhere
BlockGrad / stop_gradient  0 everywhere
=========================  ============================================

``MakeLoss(f)`` therefore makes the sum of ``f`` the training objective;
``BlockGrad`` lets a value pass forward without gradient flowing back.

Shapes
------
=======  ================
data     any shape
output   same as ``data``
=======  ================

Source: MXNet 1.x ``MakeLoss``/``make_loss``/``BlockGrad`` documentation;
the 'valid' count checked against MXNet 1.9.1.
"""
import numpy as np
from numba import njit

from ..params import Field, Params
from ..registry import OpDef, register_op, same_shape
from ..templates import JIT, LazyCudaKernel, import_cuda
from ..tensor.flatten import COPY_FORWARD

__all__ = ['MakeLossParam']

cuda = None  # bound by import_cuda(globals()) on first GPU use


class MakeLossParam(Params):
    """Parameters of :func:`MakeLoss`."""

    grad_scale = Field(float, 1.0, 'Gradient written for every element (before normalization).')
    valid_thresh = Field(float, 0.0,
                         "Elements above this count as valid for 'valid' normalization.")
    normalization = Field(str, 'null', 'Divide the gradient by nothing, the batch size, or the '
                                       'number of valid elements.',
                          choices=('null', 'batch', 'valid'))


@njit(**JIT)
def _count_above(x, thresh):
    n = 0
    for i in range(x.size):
        if x[i] > thresh:
            n += 1
    return n


def _build_fill():
    import_cuda(globals())

    @cuda.jit
    def k(a, v, add):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, a.size, stride):
            if add:
                a[i] += v
            else:
                a[i] = v
    return k


_gpu_fill = LazyCudaKernel(_build_fill)


def _fill_cpu(ig, value, req):
    if req == 'write':
        ig[...] = value
    elif req == 'add':
        ig += ig.dtype.type(value)


def _fill_gpu(ig, value, req):
    if req != 'null':
        flat = ig.reshape(-1)
        _gpu_fill.launch(flat.size, flat, value, req == 'add')


def _copy_cpu(ctx, p, inputs, outputs, aux):
    outputs[0][...] = inputs[0]


def _makeloss_value(p, x_host):
    if p.normalization == 'batch':
        return p.grad_scale / max(x_host.shape[0] if x_host.ndim else 1, 1)
    if p.normalization == 'valid':
        x = x_host.reshape(-1)
        if x.dtype == np.float16:
            x = x.astype(np.float32)
        return p.grad_scale / max(_count_above(x, p.valid_thresh), 1)
    return p.grad_scale


def _makeloss_backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] != 'null':
        _fill_cpu(in_grads[0], _makeloss_value(p, outputs[0]), req[0])


def _makeloss_backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'null':
        return
    if p.normalization == 'valid':
        value = _makeloss_value(p, outputs[0].copy_to_host())
    elif p.normalization == 'batch':
        value = p.grad_scale / max(outputs[0].shape[0] if outputs[0].ndim else 1, 1)
    else:
        value = p.grad_scale
    _fill_gpu(in_grads[0], value, req[0])


def _const_backward(value, device):
    fill = _fill_cpu if device == 'cpu' else _fill_gpu

    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        fill(in_grads[0], value, req[0])
    return backward


_FWD = {'cpu': _copy_cpu, 'gpu': COPY_FORWARD['gpu']}

register_op(OpDef(
    name='MakeLoss',
    backward_reads=(),
    float_only=True,
    arguments=['data'],
    infer_shape=same_shape,
    forward=_FWD,
    backward={'cpu': _makeloss_backward_cpu, 'gpu': _makeloss_backward_gpu},
    params=MakeLossParam,
    is_loss=True,
    doc=__doc__,
    input_docs={'data': 'The loss values (any shape).'},
))

register_op(OpDef(
    name='make_loss',
    backward_reads=(),
    float_only=True,
    arguments=['data'],
    infer_shape=same_shape,
    forward=_FWD,
    backward={'cpu': _const_backward(1.0, 'cpu'), 'gpu': _const_backward(1.0, 'gpu')},
    is_loss=True,
    doc=__doc__,
    input_docs={'data': 'The loss values (any shape).'},
))

register_op(OpDef(
    name='BlockGrad',
    aliases=('stop_gradient',),
    arguments=['data'],
    infer_shape=same_shape,
    forward=_FWD,
    backward={'cpu': _const_backward(0.0, 'cpu'), 'gpu': _const_backward(0.0, 'gpu')},
    is_loss=True,
    backward_reads=(),
    passes_gradient=False,
    doc=__doc__,
    input_docs={'data': 'Input array.'},
))
