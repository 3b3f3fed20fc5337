"""Generate ``ff.sym.<Op>`` functions from the operator registry.

Each registered operator and alias gets a function with a real signature
(inputs by position or keyword, params keyword-only with their defaults,
``name`` and ``attr``) and a numpydoc docstring built from the ``OpDef``:
its ``doc``, one entry per input from ``input_docs`` and one per param from
the typed fields. Nothing is written by hand, so the docs follow the code.
"""
import inspect

from ..ops.doc import _input_names, build_doc  # noqa: F401
from ..ops.params import REQUIRED
from ..ops.registry import get_op, list_ops
from .symbol import make_op_symbol

__all__ = ['make_function', 'populate']

def _signature(op):
    P = inspect.Parameter
    params = []
    if op.variadic:
        params.append(P('data', P.VAR_POSITIONAL))
    else:
        for nm in _input_names(op):
            params.append(P(nm, P.POSITIONAL_OR_KEYWORD, default=None))
    for k, f in op.params._fields.items():
        if op.variadic and k == op.variadic:
            continue
        default = P.empty if f.default is REQUIRED else f.default
        params.append(P(k, P.KEYWORD_ONLY, default=default))
    params.append(P('name', P.KEYWORD_ONLY, default=None))
    params.append(P('attr', P.KEYWORD_ONLY, default=None))
    params.append(P('kwargs', P.VAR_KEYWORD))
    return inspect.Signature(params)


def make_function(fname):
    """The ``ff.sym`` function for operator (or alias) ``fname``."""
    op = get_op(fname)
    hint = op.hint if fname == op.name else fname.lower()

    def creator(*args, name=None, attr=None, **kwargs):
        return make_op_symbol(op, args, kwargs, name=name, attr=attr, hint=hint)

    creator.__name__ = fname
    creator.__qualname__ = fname
    creator.__module__ = 'ffnumba.symbol'
    creator.__doc__ = build_doc(op, fname)
    try:
        creator.__signature__ = _signature(op)
    except ValueError:  # an odd input name that cannot be a parameter
        pass
    return creator


def populate(namespace, protected=()):
    """Add a function for every registered operator and alias to ``namespace``.

    Names already in ``namespace`` or in ``protected`` are left alone.

    Returns
    -------
    list of str
        The names added.
    """
    added = []
    for fname in list_ops(include_aliases=True):
        if fname in namespace or fname in protected or not fname.isidentifier():
            continue
        namespace[fname] = make_function(fname)
        added.append(fname)
    return added
