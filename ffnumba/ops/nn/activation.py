"""Activation: elementwise nonlinearities (MXNet ``Activation``).

Math
----
==========  ===========================  ===================================
act_type    y = f(x)                     dy/dx (computed from)
==========  ===========================  ===================================
relu        max(x, 0)                    1 if y > 0 else 0        (output)
sigmoid     1 / (1 + exp(-x))            y (1 - y)                (output)
tanh        tanh(x)                      1 - y^2                  (output)
softrelu    log(1 + exp(x))              1 - exp(-y)              (output)
softsign    x / (1 + |x|)                1 / (1 + |x|)^2          (input)
==========  ===========================  ===================================

``softrelu`` is evaluated as ``max(x, 0) + log1p(exp(-|x|))`` so it neither
overflows nor loses the small values of very negative inputs.

Shapes
------
=======  ================
data     any shape
output   same as ``data``
=======  ================

The scalar bodies (``relu``, ``relu_grad``, ``sigmoid``, ...) are module-level
``@njit`` functions with the template signature ``f(x, a, b)`` (``a``, ``b``
unused) so other op families can reuse them with :func:`make_unary`.

Source: MXNet 1.x ``Activation`` operator documentation.
"""
import math

from numba import njit

from ..params import Field, Params
from ..registry import OpDef, register_op, same_shape
from ..templates import make_unary
from ...jit import selects
from .. import scalar_math

__all__ = ['ActivationParam', 'relu', 'relu_grad', 'sigmoid', 'sigmoid_grad', 'tanh',
           'tanh_grad', 'softrelu', 'softrelu_grad', 'softsign', 'softsign_grad', 'ACTIVATIONS']


@njit
def relu(x, a, b):
    """max(x, 0); NaN stays NaN."""
    if x > 0 or x != x:
        return x
    return 0.0


@njit
def relu_grad(y, a, b):
    """Derivative of relu from its output."""
    return 1.0 if y > 0 else 0.0


@njit
def sigmoid(x, a, b):
    """Logistic function, without overflow for large ``|x|``."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@njit
def sigmoid_grad(y, a, b):
    """Derivative of the sigmoid from its output."""
    return y * (1.0 - y)


@njit
def tanh(x, a, b):
    """Hyperbolic tangent (float32: vectorizable form, see ``ops.scalar_math``)."""
    return scalar_math.tanh(x)


@njit
def tanh_grad(y, a, b):
    """Derivative of tanh from its output."""
    return 1.0 - y * y


@njit
def softrelu(x, a, b):
    """log(1 + e^x), stable for any x."""
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


@njit
def softrelu_grad(y, a, b):
    """Derivative of softrelu from its output: 1 - e^-y (= sigmoid(x))."""
    return -math.expm1(-y)


@njit
def softsign(x, a, b):
    """x / (1 + |x|)."""
    return x / (1.0 + abs(x))


@njit
def softsign_grad(x, a, b):
    """Derivative of softsign from its input."""
    d = 1.0 + abs(x)
    return 1.0 / (d * d)


#: act_type -> (forward dict, backward dict), built from the scalar bodies.
ACTIVATIONS = {
    'relu': make_unary(relu, relu_grad, grad_uses='output'),
    'sigmoid': make_unary(sigmoid, sigmoid_grad, grad_uses='output'),
    'tanh': make_unary(tanh, tanh_grad, grad_uses='output'),
    'softrelu': make_unary(softrelu, softrelu_grad, grad_uses='output'),
    'softsign': make_unary(softsign, softsign_grad, grad_uses='input'),
}


class ActivationParam(Params):
    """Parameters of :func:`Activation`."""

    act_type = Field(str, doc='Activation function to apply.',
                     choices=('relu', 'sigmoid', 'softrelu', 'softsign', 'tanh'))


def _dispatch(kind, device):
    def call(ctx, p, *args):
        return ACTIVATIONS[p.act_type][kind][device](ctx, p, *args)
    # an executor picks the function once, at bind time
    return selects(call, lambda p: ACTIVATIONS[p.act_type][kind][device])


register_op(OpDef(
    name='Activation',
    float_only=True,
    arguments=['data'],
    infer_shape=same_shape,
    forward={d: _dispatch(0, d) for d in ('cpu', 'gpu')},
    backward={d: _dispatch(1, d) for d in ('cpu', 'gpu')},
    # the gradient is written in terms of y, except softsign's (in terms of x)
    backward_reads=lambda p: ('inputs',) if p.act_type == 'softsign' else ('outputs',),
    params=ActivationParam,
    doc=__doc__,
    input_docs={'data': 'Input array.'},
))
