"""``ff.sym`` / ``ff.symbol``: symbolic graphs (MXNet ``mx.sym``).

Importing this package imports every operator family, then generates one
function per registered operator and alias (``ff.sym.FullyConnected``,
``ff.sym.split``...). Operators registered later are reachable too: a
module-level ``__getattr__`` builds their function on first use.
"""
from .. import ops as _ops  # noqa: F401  (registers every operator)
from .symbol import Symbol, Variable, var, Group, load, load_json, make_op_symbol
from . import op_functions as _op_functions

__all__ = ['Symbol', 'Variable', 'var', 'Group', 'load', 'load_json']

_op_functions.populate(globals())


def __getattr__(name):
    from ..base import FFError
    try:
        fn = _op_functions.make_function(name)
    except FFError:
        raise AttributeError("module 'ffnumba.symbol' has no attribute %r" % name) from None
    globals()[name] = fn
    return fn
