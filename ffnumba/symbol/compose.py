"""Applying an operator to input symbols (the body of every ``ff.sym.<Op>``).

Inputs go by position or keyword; a missing input becomes a Variable
``{node}_{input}`` that copies the node's attributes (as MXNet's JSON
shows); a variadic operator takes ``*data`` and its count param is set from
the number of inputs. Names come from the current
:class:`~ffnumba.name.NameManager`, extra attributes from the current
:class:`~ffnumba.attribute.AttrScope`.
"""
from ..attribute import AttrScope, HIDDEN_KEYS, normalize_key
from ..base import FFError, ParamError, _Null
from ..name import NameManager
from ..ops.registry import get_op
from .graph import Node

__all__ = ['make_op_symbol']


def _scope_attrs(attr):
    attrs = AttrScope.current.get(attr)
    out = {}
    for k, v in attrs.items():
        if not isinstance(v, str):
            raise ValueError('Attributes need to be string. Received: %s=%r' % (k, v))
        out[normalize_key(k)] = v
    return out


def make_op_symbol(op, args, kwargs, name=None, attr=None, hint=None):
    """Apply operator ``op`` (an OpDef) to input symbols and params.

    Parameters
    ----------
    op : OpDef
    args : sequence of Symbol
        Inputs by position (argument order, then aux).
    kwargs : dict
        Inputs by name (Symbol values), attributes (``__key__`` names and
        MXNet's hidden keys ``lr_mult``, ``wd_mult``, ``ctx_group``... stored
        as ``__key__``; auto-created inputs inherit them, so
        ``FullyConnected(x, num_hidden=4, lr_mult=2)`` gives its weight and
        bias ``__lr_mult__``) and params (anything else; ``_Null`` values
        are skipped). Values after the input symbols in ``args`` fill the
        params in declaration order (``Dropout(x, 0.5)``); ``None`` among
        the inputs leaves that input to be auto-created.
    name : str, optional
        Node name; default ``NameManager.current.get(None, hint)``.
    attr : dict of str, optional
        Extra attributes (merged over the current :class:`AttrScope`).
    hint : str, optional
        Auto-name prefix (default ``op.hint``).

    Returns
    -------
    Symbol
        All visible outputs of the new node.

    Raises
    ------
    ParamError
        For bad params, unknown or duplicate inputs, or too many inputs.
    """
    from .symbol import Symbol
    sym_kw, params, call_attrs = {}, {}, {}
    for k, v in kwargs.items():
        if isinstance(v, Symbol):
            sym_kw[k] = v
        elif k.startswith('__') and k.endswith('__') or k in HIDDEN_KEYS:
            if v is not _Null and v is not None:  # __layout__=, lr_mult=, ctx_group=...
                call_attrs[normalize_key(k)] = str(v)
        elif v is not _Null:
            params[k] = v
    args = list(args)
    values = []  # MXNet: positions past the operator's inputs fill its params in order
    if not op.variadic:
        in_names = _signature_inputs(op, params)
        n_in = len(in_names)
        values, args = args[n_in:], args[:n_in]
        if values and any(isinstance(v, Symbol) for v in values):
            raise ParamError('%s: takes at most %d inputs (%s), got %d'
                             % (op.name, n_in, ', '.join(in_names), n_in + len(values)))
    if values:
        names = [k for k in op.params._fields if not (op.variadic and k == op.variadic)]
        if len(values) > len(names):
            raise ParamError('%s: takes at most %d param values by position (%s), got %d'
                             % (op.name, len(names), ', '.join(names), len(values)))
        for k, v in zip(names, values):
            if k in params:
                raise ParamError('%s: got param `%s` both by position and by keyword'
                                 % (op.name, k))
            params[k] = v
    if op.variadic:
        if sym_kw:
            raise ParamError('%s: inputs go by position (*data); got keyword inputs %s'
                             % (op.name, sorted(sym_kw)))
        if op.variadic not in params:
            params[op.variadic] = len(args)
    p = op.parse_params(params)
    attrs = _scope_attrs(attr)
    attrs.update(call_attrs)
    name = NameManager.current.get(name, hint or op.hint)
    in_names = list(op.list_arguments(p)) + list(op.list_aux(p))
    while len(args) > len(in_names) and args[-1] is None:  # Convolution(x, w, None, no_bias=True)
        args.pop()
    if len(args) > len(in_names):
        raise ParamError('%s: takes at most %d inputs (%s), got %d'
                         % (op.name, len(in_names), ', '.join(in_names), len(args)))
    inputs = [None] * len(in_names)
    for i, a in enumerate(args):
        if a is not None and not isinstance(a, Symbol):
            raise ParamError('%s: input `%s` must be a Symbol. Received: %s=%r'
                             % (op.name, in_names[i], in_names[i], a))
        inputs[i] = a
    for k, v in sym_kw.items():
        if k not in in_names:
            raise ParamError('%s: unknown input `%s`. Inputs: %s'
                             % (op.name, k, ', '.join(in_names)))
        i = in_names.index(k)
        if inputs[i] is not None:
            raise ParamError('%s: input `%s` given twice' % (op.name, k))
        inputs[i] = v
    var_attrs = p.to_attrs()
    var_attrs.update(attrs)
    extra = getattr(op, 'input_attrs', None)
    if callable(extra):
        extra = extra(p)
    if extra is None:
        extra = _default_aux_attrs(op.list_aux(p))
    entries = []
    for nm, s in zip(in_names, inputs):
        if s is None:
            va = dict(var_attrs)
            va.update(extra.get(nm, {}))
            entries.append((Node(None, '%s_%s' % (name, nm), attrs=va), 0))
        else:
            if len(s._outputs) != 1:
                raise ParamError('%s: input `%s` must have one output; it is a group of %d '
                                 '(%s)' % (op.name, nm, len(s._outputs), s.list_outputs()))
            entries.append(s._outputs[0])
    node = Node(op, name, p, attrs, entries)
    return Symbol([(node, i) for i in range(node.num_outputs())])


def _signature_inputs(op, params):
    """The inputs a call can give by position: the longer list of those under the
    keyword params (``LeakyReLU(x, g, act_type='prelu')`` has two) and those under
    the defaults (``Convolution(x, w, None, no_bias=True)`` keeps three)."""
    from .op_functions import _input_names
    default = _input_names(op)
    try:
        p = op.parse_params(params)
        names = list(op.list_arguments(p)) + list(op.list_aux(p))
    except FFError:
        return default
    return names if len(names) >= len(default) else default


def _default_aux_attrs(aux_names):
    """MXNet's initial values of running statistics (zero means, unit variances)."""
    out = {}
    for nm in aux_names:
        if nm.endswith('moving_mean') or nm.endswith('running_mean'):
            out[nm] = {'__init__': '["zero", {}]'}
        elif nm.endswith('moving_var') or nm.endswith('running_var'):
            out[nm] = {'__init__': '["one", {}]'}
    return out


def _make(opname, hint, args, **params):
    return make_op_symbol(get_op(opname), args, params, hint=hint)
