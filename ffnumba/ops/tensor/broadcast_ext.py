"""Binary math with broadcasting: mod, hypot, logical and/or/xor; elementwise ``_hypot``.

Math
----
======================  =====================================  ===========================
op                      out = f(l, r)                          (d out/d l, d out/d r)
======================  =====================================  ===========================
broadcast_mod           l - r floor(l / r)  (sign of r;        (1, -floor(l / r));
                        0 where r == 0)                        integers: (0, 0)
broadcast_hypot         sqrt(l^2 + r^2)                        (l / out, r / out)
_hypot (hypot)          same, operands of one shape            (l / out, r / out)
_hypot_scalar           sqrt(x^2 + scalar^2)                   x / out
broadcast_logical_and   1 if l != 0 and r != 0 else 0          (0, 0)
broadcast_logical_or    1 if l != 0 or r != 0 else 0           (0, 0)
broadcast_logical_xor   1 if exactly one is non-zero else 0    (0, 0)
======================  =====================================  ===========================

``mod`` follows MXNet 1.9.1 (and Python): the result has the sign of the
divisor, ``5 mod -3 = -1``, ``-5 mod 3 = 1``, and ``x mod 0 = 0`` (MXNet's
choice, where numpy gives nan). The same body serves ``_mod``,
``_mod_scalar`` and ``_rmod_scalar`` (:mod:`ffnumba.ops.tensor.elemwise`).
``hypot`` at ``(0, 0)`` has gradient ``(0, 0)`` here: MXNet 1.9.1 gives nan
(0/0); the function has a kink there and 0 is its subgradient of least norm.

Shapes
------
Numpy broadcasting for the ``broadcast_*`` ops (see
:mod:`ffnumba.ops.tensor.broadcast`); ``_hypot`` takes two arrays of one shape.

Source: MXNet 1.9.1 ``broadcast_mod``, ``broadcast_hypot``, ``hypot``,
``broadcast_logical_*`` documentation; ``mshadow_op::mod``.
"""
import math

from numba import njit

from ..broadcast_templates import make_binary_broadcast
from ..registry import OpDef, register_op
from ..templates import make_binary, make_unary
from .broadcast import _infer_shape as _broadcast_shape
from .elemwise import ScalarParam, _binary_shape, _fmod_py, _mod_dl, _mod_dr, _unary_shape, _zero2

__all__ = ['BROADCAST_EXT']

_body = njit(error_model='numpy')


@_body
def _hypot(x, y):
    return math.sqrt(x * x + y * y)


@_body
def _hypot_dl(x, y):
    h = math.sqrt(x * x + y * y)
    return x / h if h > 0 else 0.0 * x


@_body
def _hypot_dr(x, y):
    h = math.sqrt(x * x + y * y)
    return y / h if h > 0 else 0.0 * y


@_body
def _s_hypot(x, s, b):
    return math.sqrt(x * x + s * s)


@_body
def _s_hypot_d(x, s, b):
    h = math.sqrt(x * x + s * s)
    return x / h if h > 0 else 0.0 * x


@_body
def _land(x, y):
    return 1.0 if (x != 0 and y != 0) else 0.0


@_body
def _lor(x, y):
    return 1.0 if (x != 0 or y != 0) else 0.0


@_body
def _lxor(x, y):
    return 1.0 if ((x != 0) != (y != 0)) else 0.0


#: name -> (f, d/dlhs, d/drhs, aliases, one-line summary).
BROADCAST_EXT = {
    'broadcast_mod': (_fmod_py, _mod_dl, _mod_dr, (),
                      'Modulo with broadcasting; the result has the sign of rhs.'),
    'broadcast_hypot': (_hypot, _hypot_dl, _hypot_dr, (),
                        'sqrt(lhs^2 + rhs^2) with broadcasting.'),
    'broadcast_logical_and': (_land, _zero2, _zero2, (),
                              '1 where lhs and rhs are both non-zero (broadcasting).'),
    'broadcast_logical_or': (_lor, _zero2, _zero2, (),
                             '1 where lhs or rhs is non-zero (broadcasting).'),
    'broadcast_logical_xor': (_lxor, _zero2, _zero2, (),
                              '1 where exactly one of lhs, rhs is non-zero (broadcasting).'),
}

for _name, (_f, _da, _db, _aliases, _summary) in BROADCAST_EXT.items():
    _fwd, _bwd = make_binary_broadcast(_f, _da, _db)
    register_op(OpDef(
        name=_name, aliases=_aliases, arguments=['lhs', 'rhs'], infer_shape=_broadcast_shape,
        forward=_fwd, backward=_bwd,
        zero_gradient=_da is _zero2 and _db is _zero2,     # logical_* (MakeZeroGradNodes)
        doc='%s\n\nSee the table in ``ffnumba.ops.tensor.broadcast_ext``.\n' % _summary,
        input_docs={'lhs': 'First input.', 'rhs': 'Second input.'}))

_fwd, _bwd = make_binary(_hypot, _hypot_dl, _hypot_dr)
register_op(OpDef(
    name='_hypot', aliases=('hypot',), hint='_hypot', arguments=['lhs', 'rhs'],
    infer_shape=_binary_shape, forward=_fwd, backward=_bwd,
    doc='sqrt(lhs^2 + rhs^2), elementwise on operands of one shape.\n\nGradient '
        '(lhs / out, rhs / out); (0, 0) at the origin. Source: MXNet 1.9.1 ``hypot``.\n',
    input_docs={'lhs': 'First operand.', 'rhs': 'Second operand (same shape as lhs).'}))

_fwd, _bwd = make_unary(_s_hypot, _s_hypot_d, grad_uses='input',
                        scalars=lambda p: (p.scalar, 0.0))
register_op(OpDef(
    name='_hypot_scalar', aliases=('_HypotScalar',), hint='_hypotscalar', arguments=['data'],
    infer_shape=_unary_shape, forward=_fwd, backward=_bwd, params=ScalarParam,
    doc='sqrt(data^2 + scalar^2), elementwise (``mx.sym.hypot(x, 3)``).\n\nGradient '
        'data / out; 0 where out is 0. Source: MXNet 1.9.1 ``_hypot_scalar``.\n',
    input_docs={'data': 'Input array.'}))
