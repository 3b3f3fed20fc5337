"""Regression loss heads (MXNet ``LinearRegressionOutput``, ``LogisticRegressionOutput``,
``MAERegressionOutput``).

Math
----
With ``m = label.size / label.shape[0]`` (outputs per sample) and
``gs = grad_scale``:

===========================  ===============  ===============================
op                           out              d loss / d data
===========================  ===============  ===============================
LinearRegressionOutput       x                gs * (out - label) / m
LogisticRegressionOutput     sigmoid(x)       gs * (out - label) / m
MAERegressionOutput          x                gs * s(out - label) / m
===========================  ===============  ===============================

where ``s(d) = 1`` if ``d > 0`` else ``-1`` (MXNet's choice at ``d = 0``).
These are the gradients of ``gs/(2m) * sum (x - y)^2``, of the binary
cross-entropy of ``sigmoid(x)``, and of ``gs/m * sum |x - y|``. They are loss
heads: head gradients are ignored, and the label gets no gradient.

Shapes
------
==========  =====================================
data        ``(N, ...)``
label       ``(N,)`` when data is ``(N, 1)``, else the shape of data
output      the shape of data
==========  =====================================

Source: MXNet 1.x regression output documentation; checked against MXNet 1.9.1.
"""
from numba import njit

from ...base import ShapeError
from ..nn.activation import ACTIVATIONS
from ..params import Field, Params
from ..registry import OpDef, register_op
from ..tensor.flatten import COPY_FORWARD
from ..templates import JIT, LazyCudaKernel, f16_safe, fill_gpu, import_cuda

__all__ = ['RegressionOutputParam']

cuda = None  # bound by import_cuda(globals()) on first GPU use


class RegressionOutputParam(Params):
    """Parameters of the regression output heads."""

    grad_scale = Field(float, 1.0, 'Scale applied to the gradient.')


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    d, lab = ins[0], ins[1]
    if d is None:
        if lab is not None and len(lab) == 1:
            ins[0] = (lab[0], 1)
            d = ins[0]
        elif lab is not None:
            ins[0] = d = tuple(lab)
        else:
            return ins, [None], list(aux_shapes)
    d = tuple(d)
    expect = (d[0],) if len(d) == 2 and d[1] == 1 else d
    if lab is None:
        ins[1] = expect
    elif tuple(lab) not in (expect, d):
        raise ShapeError('Shape inconsistent for input `label`, Provided = %s, inferred shape=%s'
                         % (list(lab), expect))
    return ins, [d], list(aux_shapes)


@njit
def _reg_scalar(out, label, scale, use_sign):
    """One element of the gradient: ``scale * (out - label)`` or ``scale * s(out - label)``."""
    diff = out - label
    if use_sign:
        diff = 1.0 if diff > 0 else -1.0
    return scale * diff


@njit(**JIT)
def _reg_grad(out, label, grad, scale, use_sign, add):
    for i in range(out.size):
        g = _reg_scalar(out[i], label[i], scale, use_sign)
        if add:
            grad[i] += g
        else:
            grad[i] = g


def _build_grad():
    import_cuda(globals())

    @cuda.jit
    def k(out, label, grad, scale, use_sign, add):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, out.size, stride):
            g = _reg_scalar(out[i], label[i], scale, use_sign)
            if add:
                grad[i] += g
            else:
                grad[i] = g
    return k


_gpu_grad = LazyCudaKernel(_build_grad)


def _copy_cpu(ctx, p, inputs, outputs, aux):
    outputs[0][...] = inputs[0]


def _scale(p, label):
    """``grad_scale / m`` with ``m = label.size / label.shape[0]`` outputs per sample."""
    m = label.size // label.shape[0] if label.ndim and label.shape[0] else 1
    return p.grad_scale / max(m, 1)


def _make_backward(use_sign):
    @f16_safe
    def backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        if req[1] == 'write':
            in_grads[1][...] = 0
        if req[0] == 'null':
            return
        label = inputs[1]
        _reg_grad(outputs[0].reshape(-1), label.reshape(-1), in_grads[0].reshape(-1),
                  _scale(p, label), use_sign, req[0] == 'add')

    def backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        if req[1] == 'write':
            g1 = in_grads[1].reshape(-1)
            fill_gpu.launch(g1.size, g1, 0.0)
        if req[0] == 'null':
            return
        out, label = outputs[0].reshape(-1), inputs[1]
        _gpu_grad.launch(out.size, out, label.reshape(-1), in_grads[0].reshape(-1),
                         _scale(p, label), use_sign, req[0] == 'add')

    return backward_cpu, backward_gpu


_DOCS = {'data': 'Input scores.', 'label': 'Regression targets.'}

for _name, _fwd, _sign in (
        ('LinearRegressionOutput', {'cpu': _copy_cpu, 'gpu': COPY_FORWARD['gpu']}, False),
        ('LogisticRegressionOutput', ACTIVATIONS['sigmoid'][0], False),
        ('MAERegressionOutput', {'cpu': _copy_cpu, 'gpu': COPY_FORWARD['gpu']}, True)):
    _bc, _bg = _make_backward(_sign)
    register_op(OpDef(
        name=_name,
        float_only=True,
        backward_reads=('label', 'output'),
        arguments=['data', 'label'],
        infer_shape=_infer_shape,
        forward=_fwd,
        backward={'cpu': _bc, 'gpu': _bg},
        params=RegressionOutputParam,
        is_loss=True,
        doc=__doc__,
        input_docs=_DOCS,
    ))
