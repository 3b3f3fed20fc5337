"""Elementwise arithmetic on equal shapes and with a scalar (MXNet ``elemwise_*``, ``_*_scalar``).

Math
----
Binary ops take ``lhs`` and ``rhs`` of one shape (no broadcasting; use the
``broadcast_*`` ops for that) and give ``out[i] = f(lhs[i], rhs[i])``.
Scalar ops take ``data`` and a float ``scalar`` ``s``: ``out[i] = f(data[i], s)``.

=======================  ===============  =============================================
op (Symbol operator)     f                gradient
=======================  ===============  =============================================
elemwise_add (``+``)     x + y            1, 1
elemwise_sub (``-``)     x - y            1, -1
elemwise_mul (``*``)     x * y            y, x
elemwise_div (``/``)     x / y            1/y, -x/y^2
_power (``**``)          x ^ y            y x^(y-1), x^y ln x
_mod (``%``)             x mod y          1, -floor(x/y)  (sign of y; 0 when y = 0;
                                          integer operands: grads 0, as MXNet's mod_grad)
_maximum, _minimum       max/min(x, y)    to the larger (smaller) input; ties go to lhs
_plus_scalar             x + s            1
_minus_scalar            x - s            1
_rminus_scalar           s - x            -1
_mul_scalar              x * s            s
_div_scalar              x / s            1/s
_rdiv_scalar             s / x            -s/x^2
_power_scalar            x ^ s            s x^(s-1)
_rpower_scalar           s ^ x            s^x ln s
_maximum_scalar          max(x, s)        1 where x >= s
_minimum_scalar          min(x, s)        1 where x <= s
_mod_scalar              x mod s          1
_rmod_scalar             s mod x          -floor(s/x)
_equal ... _lesser_equal 1.0 or 0.0       0 (comparisons; also the ``_scalar`` forms)
=======================  ===============  =============================================

Comparison results are 1.0/0.0 in the input dtype.

Shapes
------
==========  ======================================
lhs, rhs    one shape (a mismatch is a ShapeError)
data        any shape
output      the input shape
==========  ======================================

Source: MXNet 1.x elementwise operator documentation.
"""
import math
import numbers

from numba import njit, types
from numba.extending import overload

from ...base import ShapeError
from ..params import Field, Params
from ..registry import OpDef, register_op
from ..templates import make_binary, make_unary
from .._float_compute import float64_compute

__all__ = ['ScalarParam', 'BINARY', 'SCALAR', 'COMPARE']

#: Scalar bodies follow IEEE (x / 0 -> inf, 0 / 0 -> nan) instead of raising ZeroDivisionError.
_body = njit(error_model='numpy')


class ScalarParam(Params):
    """Parameters of the ``_*_scalar`` ops."""

    scalar = Field(float, 1.0, 'The scalar operand.', allow_nonfinite=True)
    _ignored = ('is_int',)


def _binary_shape(p, in_shapes, aux_shapes, out_shapes):
    a, b = in_shapes
    if a is not None and b is not None and tuple(a) != tuple(b):
        raise ShapeError('elementwise operands must have the same shape (use broadcast_* ops to '
                         'broadcast): lhs shape %s, rhs shape %s' % (tuple(a), tuple(b)))
    known = a if a is not None else b
    known = None if known is None else tuple(known)
    return [known, known], [known], list(aux_shapes)


def _unary_shape(p, in_shapes, aux_shapes, out_shapes):
    d = in_shapes[0]
    return list(in_shapes), [None if d is None else tuple(d)], list(aux_shapes)


# ---------------------------------------------------------------- binary bodies

@_body
def _one2(x, y):
    return 1.0


@_body
def _neg_one2(x, y):
    return -1.0


@_body
def _zero2(x, y):
    return 0.0


@_body
def _rhs(x, y):
    return y


@_body
def _lhs(x, y):
    return x


@_body
def _add(x, y):
    return x + y


@_body
def _sub(x, y):
    return x - y


@_body
def _mul(x, y):
    return x * y


@_body
def _div(x, y):
    return x / y


@_body
def _div_dl(x, y):
    return 1.0 / y


@_body
def _div_dr(x, y):
    return -x / (y * y)


@_body
def _pow(x, y):
    return x ** y


@_body
def _pow_dl(x, y):
    return y * x ** (y - 1.0)


@_body
def _pow_dr(x, y):
    return x ** y * math.log(x)


@_body
def _max(x, y):
    return x if x >= y else y


@_body
def _max_dl(x, y):
    return 1.0 if x >= y else 0.0


@_body
def _max_dr(x, y):
    return 0.0 if x >= y else 1.0


@_body
def _min(x, y):
    return x if x <= y else y


@_body
def _min_dl(x, y):
    return 1.0 if x <= y else 0.0


@_body
def _min_dr(x, y):
    return 0.0 if x <= y else 1.0


@_body
def _eq(x, y):
    return 1.0 if x == y else 0.0


@_body
def _ne(x, y):
    return 1.0 if x != y else 0.0


@_body
def _gt(x, y):
    return 1.0 if x > y else 0.0


@_body
def _ge(x, y):
    return 1.0 if x >= y else 0.0


@_body
def _lt(x, y):
    return 1.0 if x < y else 0.0


@_body
def _le(x, y):
    return 1.0 if x <= y else 0.0


@_body
def _floor(q):
    """Float floor that keeps inf/nan and works on both CPU and GPU targets."""
    if not abs(q) < 4503599627370496.0:  # 2**52: already integral, inf or nan
        return q
    t = float(int(q))
    return t - 1.0 if t > q else t


@_body
def _fmod_py(a, b):
    """Python-style modulo (sign of ``b``), 0 when ``b == 0`` (MXNet's ``mod``)."""
    if b == 0:
        return 0.0 * a
    r = a - b * _floor(a / b)
    # the kernels' 'arcp' fast-math may compute a / b as a * (1 / b): 49 / 49 can come out
    # one ulp below 1 and floor to 0; bring r back into [0, b) (or (b, 0] for b < 0)
    if (r >= b) if b > 0 else (r <= b):
        r -= b
    elif (r < 0) if b > 0 else (r > 0):
        r += b
    return r


def _float_one(x):
    """1.0 for a float operand, 0.0 for an integer one (compiled code)."""
    return 0.0 if isinstance(x, numbers.Integral) else 1.0   # CUDA simulator: numpy scalars


@overload(_float_one, target='generic')
def _float_one_overload(x):
    if isinstance(x, types.Integer):
        return lambda x: 0.0
    return lambda x: 1.0


@_body
def _mod_dr(x, y):
    """-floor(x / y), the quotient _fmod_py uses (-inf at y == 0, as MXNet); 0 for integers."""
    if _float_one(x) == 0.0:   # integer mod has zero gradients (MXNet's mod_rgrad)
        return 0.0
    q = _floor(x / y)
    if y == 0:
        return -q
    r = x - y * q   # the same 'arcp' correction as _fmod_py
    if (r >= y) if y > 0 else (r <= y):
        q += 1.0
    elif (r < 0) if y > 0 else (r > 0):
        q -= 1.0
    return -q


@_body
def _mod_dl(x, y):
    """1 for floats, 0 for integers (MXNet's mod_grad)."""
    return _float_one(x)


# ---------------------------------------------------------------- scalar bodies (x, s, _)

@_body
def _s_one(x, s, b):
    return 1.0


@_body
def _s_neg_one(x, s, b):
    return -1.0


@_body
def _s_zero(x, s, b):
    return 0.0


@_body
def _s_scalar(x, s, b):
    return s


@_body
def _s_add(x, s, b):
    return x + s


@_body
def _s_sub(x, s, b):
    return x - s


@_body
def _s_rsub(x, s, b):
    return s - x


@_body
def _s_mul(x, s, b):
    return x * s


@_body
def _s_div(x, s, b):
    return x / s


@_body
def _s_div_d(x, s, b):
    return 1.0 / s


@_body
def _s_rdiv(x, s, b):
    return s / x


@_body
def _s_rdiv_d(x, s, b):
    return -s / (x * x)


@_body
def _s_pow(x, s, b):
    return x ** s


@_body
def _s_pow_d(x, s, b):
    return s * x ** (s - 1.0)


@_body
def _s_rpow(x, s, b):
    return s ** x


@_body
def _s_rpow_d(y, s, b):
    return y * math.log(s)


@_body
def _s_max(x, s, b):
    return x if x >= s else s


@_body
def _s_max_d(x, s, b):
    return 1.0 if x >= s else 0.0


@_body
def _s_min(x, s, b):
    return x if x <= s else s


@_body
def _s_min_d(x, s, b):
    return 1.0 if x <= s else 0.0


@_body
def _s_mod(x, s, b):
    return _fmod_py(x, s)


@_body
def _s_rmod(x, s, b):
    return _fmod_py(s, x)


@_body
def _s_rmod_d(x, s, b):
    return _mod_dr(s, x)


@_body
def _s_mod_d(x, s, b):
    return _mod_dl(x, s)


@_body
def _s_eq(x, s, b):
    return 1.0 if x == s else 0.0


@_body
def _s_ne(x, s, b):
    return 1.0 if x != s else 0.0


@_body
def _s_gt(x, s, b):
    return 1.0 if x > s else 0.0


@_body
def _s_ge(x, s, b):
    return 1.0 if x >= s else 0.0


@_body
def _s_lt(x, s, b):
    return 1.0 if x < s else 0.0


@_body
def _s_le(x, s, b):
    return 1.0 if x <= s else 0.0


# ---------------------------------------------------------------- tables

#: name -> (f, d/dlhs, d/drhs, hint, aliases)
BINARY = {
    'elemwise_add': (_add, _one2, _one2, '_plus', ('_plus', '_Plus', '_add')),
    'elemwise_sub': (_sub, _one2, _neg_one2, '_minus', ('_minus', '_Minus', '_sub')),
    'elemwise_mul': (_mul, _rhs, _lhs, '_mul', ('_mul', '_Mul')),
    'elemwise_div': (_div, _div_dl, _div_dr, '_div', ('_div', '_Div')),
    '_power': (_pow, _pow_dl, _pow_dr, '_power', ('_Power',)),
    '_maximum': (_max, _max_dl, _max_dr, '_maximum', ('_Maximum',)),
    '_minimum': (_min, _min_dl, _min_dr, '_minimum', ('_Minimum',)),
    '_mod': (_fmod_py, _mod_dl, _mod_dr, '_mod', ('_Mod',)),
}

#: name -> (f, df, grad_uses, hint, aliases)
SCALAR = {
    '_plus_scalar': (_s_add, _s_one, 'input', '_plusscalar', ('_PlusScalar',)),
    '_minus_scalar': (_s_sub, _s_one, 'input', '_minusscalar', ('_MinusScalar',)),
    '_rminus_scalar': (_s_rsub, _s_neg_one, 'input', '_rminusscalar', ('_RMinusScalar',)),
    '_mul_scalar': (_s_mul, _s_scalar, 'input', '_mulscalar', ('_MulScalar',)),
    '_div_scalar': (_s_div, _s_div_d, 'input', '_divscalar', ('_DivScalar',)),
    '_rdiv_scalar': (_s_rdiv, _s_rdiv_d, 'input', '_rdivscalar', ('_RDivScalar',)),
    '_power_scalar': (_s_pow, _s_pow_d, 'input', '_powerscalar', ('_PowerScalar',)),
    '_rpower_scalar': (_s_rpow, _s_rpow_d, 'output', '_rpower_scalar', ('_RPowerScalar',)),
    '_maximum_scalar': (_s_max, _s_max_d, 'input', '_maximumscalar', ('_MaximumScalar',)),
    '_minimum_scalar': (_s_min, _s_min_d, 'input', '_minimumscalar', ('_MinimumScalar',)),
    '_mod_scalar': (_s_mod, _s_mod_d, 'input', '_modscalar', ('_ModScalar',)),
    '_rmod_scalar': (_s_rmod, _s_rmod_d, 'input', '_rmodscalar', ('_RModScalar',)),
}

#: comparison name -> (binary body, scalar body, binary aliases, scalar aliases)
COMPARE = {
    '_equal': (_eq, _s_eq, ('_Equal',), ('_EqualScalar',)),
    '_not_equal': (_ne, _s_ne, (), ('_NotEqualScalar',)),
    '_greater': (_gt, _s_gt, ('_Greater',), ('_GreaterScalar',)),
    '_greater_equal': (_ge, _s_ge, (), ('_GreaterEqualScalar',)),
    '_lesser': (_lt, _s_lt, ('_Lesser',), ('_LesserScalar',)),
    '_lesser_equal': (_le, _s_le, (), ('_LesserEqualScalar',)),
}

_BIN_DOCS = {'lhs': 'First operand.', 'rhs': 'Second operand (same shape as lhs).'}
_UN_DOCS = {'data': 'Input array.'}


#: ops whose bodies cannot compile for integer operands (``**``: see ops._float_compute)
FLOAT64_COMPUTE = ('_power', '_power_scalar', '_rpower_scalar')


#: ops whose derivative is a constant (or zero): their backward reads neither x nor y
CONSTANT_DERIVATIVE = ('elemwise_add', 'elemwise_sub', '_plus_scalar', '_minus_scalar',
                       '_rminus_scalar', '_mul_scalar', '_div_scalar', '_mod_scalar')


def _register_binary(name, f, dfa, dfb, hint, aliases, zero_gradient=False):
    fwd, bwd = make_binary(f, dfa, dfb)
    zero = dfa is _zero2 and dfb is _zero2
    if name in FLOAT64_COMPUTE:
        fwd, bwd = float64_compute(fwd, bwd)
    register_op(OpDef(name=name, arguments=['lhs', 'rhs'], infer_shape=_binary_shape,
                      forward=fwd, backward=bwd, aliases=aliases, hint=hint,
                      backward_reads=(() if zero or name in CONSTANT_DERIVATIVE
                                      else ('lhs', 'rhs')),
                      zero_gradient=zero_gradient, doc=__doc__, input_docs=_BIN_DOCS))


def _register_scalar(name, f, df, uses, hint, aliases, zero_gradient=False):
    fwd, bwd = make_unary(f, df, grad_uses=uses, scalars=lambda p: (p.scalar, 0.0))
    if name in FLOAT64_COMPUTE:
        fwd, bwd = float64_compute(fwd, bwd)
    register_op(OpDef(name=name, arguments=['data'], infer_shape=_unary_shape,
                      forward=fwd, backward=bwd, params=ScalarParam, aliases=aliases,
                      backward_reads=(() if name in CONSTANT_DERIVATIVE or df is _s_zero
                                      else ('outputs',) if uses == 'output' else ('inputs',)),
                      zero_gradient=zero_gradient, hint=hint, doc=__doc__,
                      input_docs=_UN_DOCS))


for _n, (_f, _da, _db, _h, _al) in BINARY.items():
    _register_binary(_n, _f, _da, _db, _h, _al)
for _n, (_f, _d, _u, _h, _al) in SCALAR.items():
    _register_scalar(_n, _f, _d, _u, _h, _al)
for _n, (_fb, _fs, _alb, _als) in COMPARE.items():     # MXNet: MakeZeroGradNodes
    _register_binary(_n, _fb, _zero2, _zero2, _n, _alb, zero_gradient=True)
    _register_scalar(_n + '_scalar', _fs, _s_zero, 'input', _n + '_scalar', _als,
                     zero_gradient=True)
