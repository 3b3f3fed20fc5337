"""``ff.sym`` / ``ff.symbol``: symbolic graphs (MXNet ``mx.sym``).

Importing this package imports every operator family, then generates one
function per registered operator and alias (``ff.sym.FullyConnected``,
``ff.sym.split``...). Operators registered later are reachable too: a
module-level ``__getattr__`` builds their function on first use.
"""
import builtins as _builtins

from .. import ops as _ops  # noqa: F401  (registers every operator)
from .symbol import Symbol, make_op_symbol
from .compose import Variable, var, Group, load, load_json
from . import op_functions as _op_functions
from .creation import zeros, ones, full, arange, linspace, eye
from . import random  # noqa: F401  (mx.sym.random.uniform...)
from .wrappers import histogram
from ._fluent import install as _install_fluent

_install_fluent(Symbol)   # x.exp(), x.reshape(...): MXNet's fluent methods, from the registry

__all__ = ['Symbol', 'Variable', 'var', 'Group', 'load', 'load_json', 'maximum', 'minimum',
           'pow', 'power', 'hypot', 'zeros', 'ones', 'full', 'arange', 'linspace', 'eye']


def _sym_or_scalar(left, right, sym_op, scalar_op, fallback):
    if isinstance(left, Symbol):
        return left._bin(right, sym_op, sym_op, scalar_op, scalar_op.replace('_scalar', 'scalar'))
    if isinstance(right, Symbol):
        # max/min/hypot are symmetric, so the scalar op works with the operands swapped
        return right._bin(left, sym_op, sym_op, scalar_op, scalar_op.replace('_scalar', 'scalar'))
    return fallback(left, right)


def maximum(left, right):
    """Elementwise maximum of two symbols (same shape) or a symbol and a number.

    MXNet ``mx.sym.maximum``: ``_maximum`` for two symbols, ``_maximum_scalar``
    with one number; two numbers give the Python ``max``.
    """
    return _sym_or_scalar(left, right, '_maximum', '_maximum_scalar', _builtins.max)


def minimum(left, right):
    """Elementwise minimum of two symbols (same shape) or a symbol and a number."""
    return _sym_or_scalar(left, right, '_minimum', '_minimum_scalar', _builtins.min)


def hypot(left, right):
    """``sqrt(left^2 + right^2)`` of two symbols (same shape) or a symbol and a number.

    MXNet ``mx.sym.hypot``: ``_hypot`` for two symbols, ``_hypot_scalar`` with
    one number; two numbers give ``math.hypot``.
    """
    import math
    return _sym_or_scalar(left, right, '_hypot', '_hypot_scalar', math.hypot)


def pow(base, exp):
    """``base ** exp`` for symbols and numbers (MXNet ``mx.sym.pow``)."""
    if isinstance(base, Symbol):
        return base ** exp
    if isinstance(exp, Symbol):
        return exp.__rpow__(base)
    return _builtins.pow(base, exp)


power = pow

_op_functions.populate(globals())


def __getattr__(name):
    from ..base import FFError
    try:
        fn = _op_functions.make_function(name)
    except FFError:
        raise AttributeError("module 'ffnumba.symbol' has no attribute %r" % name) from None
    globals()[name] = fn
    return fn
