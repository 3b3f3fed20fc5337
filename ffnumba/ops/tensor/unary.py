"""Elementwise unary math: exp, log, sqrt, ..., clip, zeros_like, ones_like.

Math
----
===========  ===========================  ==========================================
op           y = f(x)                     dy/dx (computed from)
===========  ===========================  ==========================================
exp          e^x                          y                               (output)
log          ln x                         1 / x                           (input)
sqrt         sqrt(x)                      1 / (2 y)                       (output)
rsqrt        1 / sqrt(x)                  -1 / (2 x sqrt(x))              (input)
square       x^2                          2 x                             (input)
abs          |x|                          sign(x), 0 at 0                 (input)
sign         -1, 0 or 1                   0                               (input)
tanh         tanh(x)                      1 - y^2                         (output)
sigmoid      1 / (1 + e^-x)               y (1 - y)                       (output)
relu         max(x, 0)                    1 if y > 0 else 0               (output)
negative     -x                           -1                              (input)
reciprocal   1 / x                        -1 / x^2                        (input)
clip         min(max(x, a_min), a_max)    1 if a_min <= x <= a_max else 0 (input)
zeros_like   0                            0                               (input)
ones_like    1                            0                               (input)
===========  ===========================  ==========================================

Out-of-domain inputs give what IEEE arithmetic gives (``log(0) = -inf``,
``sqrt(-1) = nan``), as in MXNet. ``clip`` passes the gradient on the closed
interval: at ``x == a_min`` or ``x == a_max`` it is 1 (checked against MXNet
1.9.1).

Shapes
------
======  ================
data    any shape
output  same as ``data``
======  ================

Shape inference runs both ways (the output gives the input), as for every
elementwise op in MXNet.

Source: MXNet 1.x operator documentation (``mx.sym.exp``, ``mx.sym.clip``...).
"""
import math

from numba import njit

from ...base import ParamError
from ..params import Field, Params
from ..registry import OpDef, register_op, same_shape
from ..templates import make_unary, stable_cache_key
from ..nn.activation import relu, relu_grad, sigmoid, sigmoid_grad, tanh, tanh_grad

__all__ = ['UNARY', 'ClipParam']


#: Scalar bodies divide by zero the IEEE way (inf/nan), never raise.
_scalar = njit(error_model='numpy')


@_scalar
def _exp(x, a, b):
    return math.exp(x)


@_scalar
def _exp_grad(y, a, b):
    return y


@_scalar
def _log(x, a, b):
    if x > 0:
        return math.log(x)
    if x == 0:
        return -math.inf
    return math.nan


@_scalar
def _log_grad(x, a, b):
    return 1.0 / x


@_scalar
def _sqrt(x, a, b):
    return math.sqrt(x) if x >= 0 else math.nan


@_scalar
def _sqrt_grad(y, a, b):
    return 0.5 / y


@_scalar
def _rsqrt(x, a, b):
    return 1.0 / math.sqrt(x) if x >= 0 else math.nan


@_scalar
def _rsqrt_grad(x, a, b):
    return -0.5 / (x * math.sqrt(x))


@_scalar
def _square(x, a, b):
    return x * x


@_scalar
def _square_grad(x, a, b):
    return 2.0 * x


@_scalar
def _abs(x, a, b):
    return abs(x)


@_scalar
def _sign(x, a, b):
    if x > 0:
        return 1.0
    if x < 0:
        return -1.0
    return x * 0.0


@_scalar
def _zero(x, a, b):
    return 0.0


@_scalar
def _one(x, a, b):
    return 1.0


@_scalar
def _negative(x, a, b):
    return -x


@_scalar
def _minus_one(x, a, b):
    return -1.0


@_scalar
def _reciprocal(x, a, b):
    return 1.0 / x


@_scalar
def _reciprocal_grad(x, a, b):
    return -1.0 / (x * x)


@_scalar
def _clip(x, a, b):
    if x < a:
        return a
    if x > b:
        return b
    return x


@_scalar
def _clip_grad(x, a, b):
    return 1.0 if (x >= a and x <= b) else 0.0


class ClipParam(Params):
    """Parameters of :func:`clip`."""

    a_min = Field(float, doc='Lower bound of the output (may be -inf).', allow_nonfinite=True)
    a_max = Field(float, doc='Upper bound of the output (>= a_min; may be inf).',
                  allow_nonfinite=True)

    def validate(self):
        for name in ('a_min', 'a_max'):
            if getattr(self, name) != getattr(self, name):
                raise ParamError('clip: `%s` must be a float or +-inf, not nan. Received: %s=nan'
                                 % (name, name))
        if self.a_min > self.a_max:
            raise ParamError('clip: `a_max` must be >= a_min. Received: a_min=%r, a_max=%r'
                             % (self.a_min, self.a_max))


#: name -> (forward body, derivative body, grad_uses, one-line summary).
UNARY = {
    'exp': (_exp, _exp_grad, 'output', 'Exponential, e^x.'),
    'log': (_log, _log_grad, 'input', 'Natural logarithm.'),
    'sqrt': (_sqrt, _sqrt_grad, 'output', 'Square root.'),
    'rsqrt': (_rsqrt, _rsqrt_grad, 'input', 'Reciprocal square root, 1/sqrt(x).'),
    'square': (_square, _square_grad, 'input', 'Square, x^2.'),
    'abs': (_abs, _sign, 'input', 'Absolute value.'),
    'sign': (_sign, _zero, 'input', 'Sign: -1, 0 or 1.'),
    'tanh': (tanh, tanh_grad, 'output', 'Hyperbolic tangent.'),
    'sigmoid': (sigmoid, sigmoid_grad, 'output', 'Logistic sigmoid, 1/(1+e^-x).'),
    'relu': (relu, relu_grad, 'output', 'Rectified linear unit, max(x, 0).'),
    'negative': (_negative, _minus_one, 'input', 'Numerical negative, -x.'),
    'reciprocal': (_reciprocal, _reciprocal_grad, 'input', 'Reciprocal, 1/x.'),
    'zeros_like': (_zero, _zero, 'input', 'An array of zeros shaped like the input.'),
    'ones_like': (_one, _zero, 'input', 'An array of ones shaped like the input.'),
}


_infer = same_shape   # elementwise: the output also gives the input

#: ops whose gradient MXNet makes zero whatever the head gradient (``MakeZeroGradNodes``);
#: ``sign`` has a zero derivative too, but MXNet's backward multiplies the head gradient.
ZERO_GRADIENT = ('zeros_like', 'ones_like')


for _name, (_f, _df, _uses, _summary) in UNARY.items():
    stable_cache_key(_f, _df)
    _fwd, _bwd = make_unary(_f, _df, grad_uses=_uses)
    register_op(OpDef(
        name=_name,
        arguments=['data'],
        infer_shape=_infer,
        forward=_fwd,
        backward=_bwd,
        zero_gradient=_name in ZERO_GRADIENT,
        doc='%s\n\nElementwise; see the table in ``ffnumba.ops.tensor.unary``.\n' % _summary,
        input_docs={'data': 'Input array.'},
    ))

stable_cache_key(_clip, _clip_grad)
_fwd, _bwd = make_unary(_clip, _clip_grad, grad_uses='input',
                        scalars=lambda p: (p.a_min, p.a_max))
register_op(OpDef(
    name='clip',
    arguments=['data'],
    infer_shape=_infer,
    forward=_fwd,
    backward=_bwd,
    params=ClipParam,
    doc='Clip (limit) the values of an array to [a_min, a_max].\n\n'
        'y = min(max(x, a_min), a_max); the gradient is 1 on the closed interval '
        '[a_min, a_max] and 0 outside.\n',
    input_docs={'data': 'Input array.'},
))
