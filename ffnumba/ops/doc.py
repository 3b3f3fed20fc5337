"""The numpydoc text of an operator's generated functions (``ff.sym.<Op>`` and ``ff.nd.<Op>``).

Built from the registry entry alone (params, their types, ranges and docs, the input
names), so it lives with the registry and both front ends read it.
"""
from .params import REQUIRED, Shape

__all__ = ['build_doc']

_KIND = {int: 'int', float: 'float', bool: 'bool', str: 'str', Shape: 'tuple of int',
         'dtype': 'str (dtype name)'}


def _default_params(op):
    """The params record under the declared defaults, required ones None.

    Built by :meth:`Params.parse` (``partial=True``: the one place a record
    is made), for naming inputs only: required params have no value here and
    cross-field checks need them, so it is never handed to a kernel.
    """
    return op.params.parse(op.name, {}, partial=True)


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


#: fname -> (op, docstring): ``ff.sym`` and ``ff.nd`` (and ``ff.nd``'s operator
#: methods, per call) build the same text; kept while the registry holds that op.
_BUILT = {}


def build_doc(op, fname):
    """The numpydoc docstring of the generated function ``fname`` for ``op``."""
    hit = _BUILT.get(fname)
    if hit is not None and hit[0] is op:
        return hit[1]
    doc = _build_doc(op, fname)
    _BUILT[fname] = (op, doc)
    return doc


def _build_doc(op, fname):
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
