"""Generate ``ff.sym.<Op>`` functions from the operator registry.

Each registered operator and alias gets a function with a real signature
(inputs by position or keyword, params keyword-only with their defaults,
``name`` and ``attr``) and a numpydoc docstring built from the ``OpDef``:
its ``doc``, one entry per input from ``input_docs`` and one per param from
the typed fields. Nothing is written by hand, so the docs follow the code.
"""
import inspect

from ..ops.params import REQUIRED, Shape
from ..ops.registry import get_op, list_ops
from .compose import make_op_symbol

__all__ = ['make_function', 'populate']

_KIND = {int: 'int', float: 'float', bool: 'bool', str: 'str', Shape: 'tuple of int',
         'dtype': 'str (dtype name)'}


def _default_params(op):
    """A params object with defaults (REQUIRED -> None), for listing inputs."""
    cls = op.params
    p = object.__new__(cls)
    vals = {k: (None if f.default is REQUIRED else f.default) for k, f in cls._fields.items()}
    object.__setattr__(p, '_values', vals)
    object.__setattr__(p, '_raw', {})
    object.__setattr__(p, 'op_name', op.name)
    return p


def _input_names(op):
    """Best-effort input names (arguments then aux) of ``op`` under default params."""
    if op.variadic:
        return []
    try:
        p = _default_params(op)
        return list(op.list_arguments(p)) + list(op.list_aux(p))
    except Exception:  # a params-dependent list that needs a required value
        return list(op.input_docs) or ['data']


def _field_type(f):
    t = _KIND.get(f.kind, str(f.kind))
    if f.choices:
        t = '{%s}' % ', '.join(repr(c) for c in f.choices)
    if f.default is REQUIRED:
        return t + ', required'
    return '%s, default %r' % (t, f.default)


def _field_range(f):
    parts = []
    if f.low is not None:
        parts.append('>= %s' % f.low)
    if f.high is not None:
        parts.append('<= %s' % f.high)
    return (' Range: %s.' % ', '.join(parts)) if parts else ''


def build_doc(op, fname):
    """The numpydoc docstring of the generated function ``fname`` for ``op``."""
    body = (op.doc or '').strip() or ('Apply the %s operator.' % op.name)
    lines = [body, '']
    if fname != op.name:
        lines += ['Alias of :func:`%s`.' % op.name, '']
    lines += ['Parameters', '----------']
    if op.variadic:
        lines += ['*data : Symbol', '    %s' % op.input_docs.get(
            'data', 'The inputs; their count sets `%s`.' % op.variadic)]
    aux = []
    try:
        aux = list(op.list_aux(_default_params(op)))
    except Exception:
        pass
    for nm in _input_names(op):
        doc = op.input_docs.get(nm, 'Input `%s`.' % nm)
        kind = 'auxiliary state' if nm in aux else 'input'
        lines += ['%s : Symbol, optional' % nm,
                  '    %s Created as the variable ``{name}_%s`` (an %s) when omitted.'
                  % (doc.rstrip(), nm, kind)]
    for k, f in op.params._fields.items():
        lines += ['%s : %s' % (k, _field_type(f)),
                  '    %s%s' % (f.doc, _field_range(f))]
    lines += ['name : str, optional',
              '    Node name; default ``%s<N>`` from the current NameManager.' % op.hint,
              'attr : dict of str to str, optional',
              '    Extra attributes of the node (merged over the current AttrScope).',
              '', 'Returns', '-------', 'Symbol',
              '    The %s output(s) of the new node.' % op.name]
    if op.is_loss:
        lines += ['', 'Notes', '-----',
                  'A loss head: its backward ignores head gradients.']
    return '\n'.join(lines)


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
