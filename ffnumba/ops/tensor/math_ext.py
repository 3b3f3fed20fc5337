"""More elementwise unary math: trigonometry, rounding, logs, special functions.

Math
----
============  =================================  ===============================  ======
op            y = f(x)                           dy/dx                            from
============  =================================  ===============================  ======
sin           sin x                              cos x                            input
cos           cos x                              -sin x                           input
tan           tan x                              1 + y^2                          output
arcsin        asin x  (nan for abs(x) > 1)       1 / sqrt(1 - x^2)                input
arccos        acos x  (nan for abs(x) > 1)       -1 / sqrt(1 - x^2)               input
arctan        atan x                             1 / (1 + x^2)                    input
sinh          sinh x                             cosh x                           input
cosh          cosh x                             sinh x                           input
arcsinh       asinh x                            1 / sqrt(x^2 + 1)                input
arccosh       acosh x  (nan for x < 1)           1 / sqrt(x^2 - 1)                input
arctanh       atanh x  (nan for abs(x) > 1)      1 / (1 - x^2)                    input
round         half away from zero (2.5 -> 3)     0                                input
rint          nearest, ties down (1.5 -> 1)      0                                input
floor, ceil   floor x, ceil x                    0                                input
trunc, fix    toward zero                        0                                input
log1p         ln(1 + x)                          1 / (1 + x)                      input
expm1         e^x - 1                            y + 1                            output
log2, log10   log_2 x, log_10 x                  1 / (x ln 2), 1 / (x ln 10)      input
cbrt          x^(1/3) (real, odd)                1 / (3 y^2)                      output
rcbrt         x^(-1/3)                           -y / (3 x)                       input
degrees       x * 180 / pi                       180 / pi                         input
radians       x * pi / 180                       pi / 180                         input
gamma         Gamma(x)                           Gamma(x) psi(x)                  input
gammaln       ln abs(Gamma(x))                   psi(x)                           input
erf           erf x                              2 / sqrt(pi) e^(-x^2)            input
erfinv        erf^-1(x)                          sqrt(pi) / 2 e^(y^2)             output
logical_not   1 if x == 0 else 0                 0                                input
softsign      x / (1 + abs(x))                   1 / (1 + abs(x))^2               input
hard_sigmoid  max(0, min(1, alpha x + beta))     alpha inside (0, 1), else 0      input
smooth_l1     0.5 (s x)^2 if abs(x) < 1/s^2      s^2 x, or sign(x)                input
              else abs(x) - 0.5/s^2
============  =================================  ===============================  ======

``psi`` is the digamma function. Out-of-domain inputs give nan (or +-inf at a
pole), as in MXNet, never an exception. ``rint`` follows MXNet 1.9.1, whose
ties go to the floor (numpy's ``rint`` rounds ties to even). ``hard_sigmoid``'s
gradient is 0 at the two corners, as in MXNet 1.9.1. ``smooth_l1`` (scalar
``s``, the ``sigma`` of Fast R-CNN) is the quadratic piece strictly inside
``abs(x) < 1/s^2``.

Shapes
------
``data``: any shape; ``output``: the same shape (inferred both ways).

Source: MXNet 1.9.1 operator documentation (``mx.sym.sin`` ... ``mx.sym.smooth_l1``);
R. Girshick, "Fast R-CNN" (2015) for smooth L1.
"""
import math

from numba import njit

from ...base import ParamError
from ..params import Field, Params, require_finite
from ..registry import OpDef, register_op
from ..scalar_special import (digamma, erfinv, fceil, ffloor, fround, frint, ftrunc, gamma,
                              lgamma)
from ..templates import make_unary, stable_cache_key
from .unary import _infer

__all__ = ['MATH_UNARY', 'HardSigmoidParam', 'SmoothL1Param']

_scalar = njit(error_model='numpy')
_OVER = 709.78       # e^x overflows float64 past this (Python's math raises; we give inf)


@_scalar
def _sin(x, a, b):
    return math.sin(x) if abs(x) < math.inf else math.nan


@_scalar
def _cos(x, a, b):
    return math.cos(x) if abs(x) < math.inf else math.nan


@_scalar
def _neg_sin(x, a, b):
    return -_sin(x, a, b)


@_scalar
def _tan(x, a, b):
    return math.tan(x) if abs(x) < math.inf else math.nan


@_scalar
def _tan_grad(y, a, b):
    return 1.0 + y * y


@_scalar
def _asin(x, a, b):
    return math.asin(x) if abs(x) <= 1 else math.nan


@_scalar
def _acos(x, a, b):
    return math.acos(x) if abs(x) <= 1 else math.nan


@_scalar
def _asin_grad(x, a, b):
    return 1.0 / math.sqrt(1.0 - x * x) if abs(x) < 1 else math.nan


@_scalar
def _acos_grad(x, a, b):
    return -_asin_grad(x, a, b)


@_scalar
def _atan(x, a, b):
    return math.atan(x)


@_scalar
def _atan_grad(x, a, b):
    return 1.0 / (1.0 + x * x)


@_scalar
def _sinh(x, a, b):
    if abs(x) > _OVER:
        return x * math.inf
    return math.sinh(x)


@_scalar
def _cosh(x, a, b):
    if abs(x) > _OVER:
        return math.inf
    return math.cosh(x)


@_scalar
def _asinh(x, a, b):
    return math.asinh(x)


@_scalar
def _asinh_grad(x, a, b):
    return 1.0 / math.sqrt(x * x + 1.0)


@_scalar
def _acosh(x, a, b):
    return math.acosh(x) if x >= 1 else math.nan


@_scalar
def _acosh_grad(x, a, b):
    return 1.0 / math.sqrt(x * x - 1.0) if x >= 1 else math.nan


@_scalar
def _atanh(x, a, b):
    if abs(x) < 1:
        return math.atanh(x)
    if abs(x) == 1:
        return x * math.inf
    return math.nan


@_scalar
def _atanh_grad(x, a, b):
    return 1.0 / (1.0 - x * x)


@_scalar
def _round(x, a, b):
    return fround(x)


@_scalar
def _rint(x, a, b):
    return frint(x)


@_scalar
def _floor(x, a, b):
    return ffloor(x)


@_scalar
def _ceil(x, a, b):
    return fceil(x)


@_scalar
def _trunc(x, a, b):
    return ftrunc(x)


@_scalar
def _zero(x, a, b):
    return 0.0


@_scalar
def _log1p(x, a, b):
    if x > -1:
        return math.log1p(x)
    return -math.inf if x == -1 else math.nan


@_scalar
def _log1p_grad(x, a, b):
    return 1.0 / (1.0 + x)


@_scalar
def _expm1(x, a, b):
    return math.inf if x > _OVER else math.expm1(x)


@_scalar
def _expm1_grad(y, a, b):
    return y + 1.0


@_scalar
def _log2(x, a, b):
    if x > 0:
        return math.log2(x)
    return -math.inf if x == 0 else math.nan


@_scalar
def _log2_grad(x, a, b):
    return 1.0 / (x * 0.6931471805599453)


@_scalar
def _log10(x, a, b):
    if x > 0:
        return math.log10(x)
    return -math.inf if x == 0 else math.nan


@_scalar
def _log10_grad(x, a, b):
    return 1.0 / (x * 2.302585092994046)


@_scalar
def _cbrt(x, a, b):
    if x != x or x == 0:
        return x
    r = abs(x) ** (1.0 / 3.0)
    if abs(x) < math.inf:
        r = r - (r * r * r - abs(x)) / (3.0 * r * r)     # one Newton step: exact to 1 ulp
    return r if x > 0 else -r


@_scalar
def _cbrt_grad(y, a, b):
    return 1.0 / (3.0 * y * y)


@_scalar
def _rcbrt(x, a, b):
    return 1.0 / _cbrt(x, a, b)


@_scalar
def _rcbrt_grad(x, a, b):
    return -1.0 / (3.0 * x * _cbrt(x, a, b))


@_scalar
def _degrees(x, a, b):
    return x * (180.0 / math.pi)


@_scalar
def _degrees_grad(x, a, b):
    return 180.0 / math.pi


@_scalar
def _radians(x, a, b):
    return x * (math.pi / 180.0)


@_scalar
def _radians_grad(x, a, b):
    return math.pi / 180.0


@_scalar
def _gamma(x, a, b):
    return gamma(x)


@_scalar
def _gamma_grad(x, a, b):
    return gamma(x) * digamma(x)


@_scalar
def _gammaln(x, a, b):
    return lgamma(x)


@_scalar
def _gammaln_grad(x, a, b):
    return digamma(x)


@_scalar
def _erf(x, a, b):
    return math.erf(x)


@_scalar
def _erf_grad(x, a, b):
    return 1.1283791670955126 * math.exp(-x * x)


@_scalar
def _erfinv(x, a, b):
    return erfinv(x * 1.0)      # bool and int inputs as floats


@_scalar
def _erfinv_grad(y, a, b):
    if abs(y) > 26.0:
        return math.inf
    return 0.886226925452758 * math.exp(y * y)


@_scalar
def _logical_not(x, a, b):
    return 1.0 if x == 0 else 0.0


@_scalar
def _softsign(x, a, b):
    return x / (1.0 + abs(x))


@_scalar
def _softsign_grad(x, a, b):
    d = 1.0 + abs(x)
    return 1.0 / (d * d)


@_scalar
def _hard_sigmoid(x, a, b):
    v = a * x + b
    if v <= 0:
        return 0.0
    if v >= 1:
        return 1.0
    return v


@_scalar
def _hard_sigmoid_grad(x, a, b):
    v = a * x + b
    return a if 0 < v < 1 else 0.0


@_scalar
def _smooth_l1(x, s2, b):
    # s2 = sigma^2
    if abs(x) < 1.0 / s2:
        return 0.5 * s2 * x * x
    return abs(x) - 0.5 / s2


@_scalar
def _smooth_l1_grad(x, s2, b):
    if abs(x) < 1.0 / s2:
        return s2 * x
    if x > 0:
        return 1.0
    return -1.0 if x < 0 else 0.0


#: name -> (forward body, derivative body, grad_uses, one-line summary).
MATH_UNARY = {
    'sin': (_sin, _cos, 'input', 'Sine (radians).'),
    'cos': (_cos, _neg_sin, 'input', 'Cosine (radians).'),
    'tan': (_tan, _tan_grad, 'output', 'Tangent (radians).'),
    'arcsin': (_asin, _asin_grad, 'input', 'Inverse sine, in [-pi/2, pi/2].'),
    'arccos': (_acos, _acos_grad, 'input', 'Inverse cosine, in [0, pi].'),
    'arctan': (_atan, _atan_grad, 'input', 'Inverse tangent, in (-pi/2, pi/2).'),
    'sinh': (_sinh, _cosh, 'input', 'Hyperbolic sine.'),
    'cosh': (_cosh, _sinh, 'input', 'Hyperbolic cosine.'),
    'arcsinh': (_asinh, _asinh_grad, 'input', 'Inverse hyperbolic sine.'),
    'arccosh': (_acosh, _acosh_grad, 'input', 'Inverse hyperbolic cosine (x >= 1).'),
    'arctanh': (_atanh, _atanh_grad, 'input', 'Inverse hyperbolic tangent (|x| < 1).'),
    'round': (_round, _zero, 'input', 'Round to the nearest integer, half away from zero.'),
    'rint': (_rint, _zero, 'input', 'Round to the nearest integer; a tie goes down (MXNet).'),
    'floor': (_floor, _zero, 'input', 'Largest integer <= x.'),
    'ceil': (_ceil, _zero, 'input', 'Smallest integer >= x.'),
    'trunc': (_trunc, _zero, 'input', 'Round toward zero.'),
    'fix': (_trunc, _zero, 'input', 'Round toward zero (same as trunc).'),
    'log1p': (_log1p, _log1p_grad, 'input', 'ln(1 + x), accurate for small x.'),
    'expm1': (_expm1, _expm1_grad, 'output', 'e^x - 1, accurate for small x.'),
    'log2': (_log2, _log2_grad, 'input', 'Base-2 logarithm.'),
    'log10': (_log10, _log10_grad, 'input', 'Base-10 logarithm.'),
    'cbrt': (_cbrt, _cbrt_grad, 'output', 'Real cube root.'),
    'rcbrt': (_rcbrt, _rcbrt_grad, 'input', 'Reciprocal real cube root, x^(-1/3).'),
    'degrees': (_degrees, _degrees_grad, 'input', 'Radians to degrees.'),
    'radians': (_radians, _radians_grad, 'input', 'Degrees to radians.'),
    'gamma': (_gamma, _gamma_grad, 'input', 'Gamma function.'),
    'gammaln': (_gammaln, _gammaln_grad, 'input', 'ln |Gamma(x)|.'),
    'erf': (_erf, _erf_grad, 'input', 'Gauss error function.'),
    'erfinv': (_erfinv, _erfinv_grad, 'output', 'Inverse Gauss error function.'),
    'logical_not': (_logical_not, _zero, 'input', '1 where x == 0, else 0.'),
    'softsign': (_softsign, _softsign_grad, 'input', 'x / (1 + |x|).'),
}


class HardSigmoidParam(Params):
    """Parameters of :func:`hard_sigmoid`."""

    alpha = Field(float, 0.2, 'Slope of hard sigmoid.')
    beta = Field(float, 0.5, 'Bias of hard sigmoid.')

    def validate(self):
        require_finite(self, 'alpha', 'beta')


class SmoothL1Param(Params):
    """Parameters of :func:`smooth_l1`."""

    scalar = Field(float, 1.0, 'sigma: the quadratic piece is |x| < 1/sigma^2 (> 0).')

    def validate(self):
        require_finite(self, 'scalar')
        if not self.scalar > 0:
            raise ParamError('smooth_l1: `scalar` must be a float > 0. Received: scalar=%r'
                             % self.scalar)


def _register(name, f, df, uses, summary, params=None, scalars=None, doc=None,
              zero_gradient=False):
    stable_cache_key(f, df)
    fwd, bwd = make_unary(f, df, grad_uses=uses, scalars=scalars)
    kw = {} if params is None else dict(params=params)
    register_op(OpDef(
        name=name, arguments=['data'], infer_shape=_infer, forward=fwd, backward=bwd,
        doc=doc or ('%s\n\nElementwise; see the table in ``ffnumba.ops.tensor.math_ext``.\n'
                    % summary),
        input_docs={'data': 'Input array.'}, zero_gradient=zero_gradient, **kw))


for _name, (_f, _df, _uses, _summary) in MATH_UNARY.items():
    # logical_not: MXNet's MakeZeroGradNodes (round, floor, ... multiply the head gradient by 0)
    _register(_name, _f, _df, _uses, _summary, zero_gradient=_name == 'logical_not')

_register('hard_sigmoid', _hard_sigmoid, _hard_sigmoid_grad, 'input', None,
          params=HardSigmoidParam, scalars=lambda p: (p.alpha, p.beta),
          doc='Hard sigmoid: y = max(0, min(1, alpha * x + beta)).\n\nThe gradient is alpha '
              'where 0 < alpha * x + beta < 1 and 0 elsewhere (MXNet 1.9.1).\n')
_register('smooth_l1', _smooth_l1, _smooth_l1_grad, 'input', None,
          params=SmoothL1Param, scalars=lambda p: (p.scalar * p.scalar, 0.0),
          doc='Smooth L1 (Huber-like) loss, elementwise, with sigma = `scalar`.\n\n'
              'y = 0.5 (sigma x)^2 where |x| < 1/sigma^2, else |x| - 0.5/sigma^2; '
              'dy/dx = sigma^2 x inside, sign(x) outside.\n\n'
              'Source: R. Girshick, "Fast R-CNN" (2015); MXNet 1.9.1 ``smooth_l1``.\n')
