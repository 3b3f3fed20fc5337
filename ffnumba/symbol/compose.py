"""Making symbols: ``Variable``, ``Group``, ``load``/``load_json`` and operator application.

Everything that creates a new :class:`~ffnumba.symbol.symbol.Symbol` from
outside a Symbol lives here or is re-exported here: ``make_op_symbol`` (the
body of every ``ff.sym.<Op>``, defined next to the Symbol class because
Symbol's arithmetic operators use it too), variables, groups and graphs read
from MXNet JSON (:mod:`ffnumba.symbol.json`). This module sits above
``symbol.py`` and ``json.py``; neither imports it.
"""
from ..base import DTypeError
from ..dtype import dtype_code
from .graph import Node
from .symbol import Symbol, make_op_symbol, _scope_attrs

__all__ = ['Variable', 'var', 'Group', 'load', 'load_json', 'make_op_symbol']

_STYPE_CODES = {'default': 0, 'row_sparse': 1, 'csr': 2}


def Variable(name, attr=None, shape=None, lr_mult=None, wd_mult=None, dtype=None, init=None,
             stype=None, **kwargs):
    """A named input of a graph (an ``op: "null"`` node).

    Parameters
    ----------
    name : str
    attr : dict of str, optional
        Extra attributes (merged over the current :class:`~ffnumba.AttrScope`).
    shape : tuple of int, optional
        Shape hint, stored as ``__shape__``.
    lr_mult, wd_mult : float, optional
        Learning-rate / weight-decay multipliers (``__lr_mult__``, ``__wd_mult__``).
    dtype : str or numpy dtype, optional
        Stored as MXNet's dtype code in ``__dtype__``.
    init : Initializer or str, optional
        Stored as ``init.dumps()`` (or the string) in ``__init__``.
    stype : str, optional
        Storage type (``'default'``); stored as ``__storage_type__``.
    **kwargs : str
        More attributes; names must look like ``__name__``.

    Returns
    -------
    Symbol

    Raises
    ------
    TypeError
        If ``name`` is not a string.
    ValueError
        For an extra attribute that is not a dunder name.
    """
    if not isinstance(name, str):
        raise DTypeError('Expect a string for variable `name`')   # a TypeError too
    attrs = _scope_attrs(attr)
    if shape is not None:
        attrs['__shape__'] = str(shape)
    if lr_mult is not None:
        attrs['__lr_mult__'] = str(lr_mult)
    if wd_mult is not None:
        attrs['__wd_mult__'] = str(wd_mult)
    if dtype is not None:
        attrs['__dtype__'] = str(dtype_code(dtype))
    if init is not None:
        if not isinstance(init, str):
            init = init.dumps() if hasattr(init, 'dumps') else str(init)
        attrs['__init__'] = init
    if stype is not None:
        if stype not in _STYPE_CODES:
            raise ValueError('Variable %s: unknown stype %r' % (name, stype))
        attrs['__storage_type__'] = str(_STYPE_CODES[stype])
    for k, v in kwargs.items():
        if k.startswith('__') and k.endswith('__'):
            attrs[k] = str(v)
        else:
            raise ValueError('Attribute name=%s is not supported. Additional attributes must '
                             'start and end with double underscores, e.g, __yourattr__' % k)
    return Symbol([(Node(None, name, attrs=attrs), 0)])


var = Variable


def Group(symbols):
    """One symbol whose outputs are the outputs of ``symbols``, in order.

    Raises
    ------
    TypeError
        If ``symbols`` is empty or holds something that is not a Symbol.
    """
    symbols = list(symbols)
    if not symbols or any(not isinstance(s, Symbol) for s in symbols):
        raise DTypeError('Expected a list of symbols as input')   # a TypeError too
    outs = []
    for s in symbols:
        outs.extend(s._outputs)
    return Symbol(outs)


def load(fname):
    """Load a symbol from an MXNet JSON file.

    Raises
    ------
    FFError
        Naming the file when it is missing, not JSON, or names an unknown operator.
    """
    from .json import load_file
    return Symbol(load_file(fname))


def load_json(json_str):
    """Load a symbol from an MXNet JSON string (new or old ``param``/``attr`` layout)."""
    from .json import from_json
    return Symbol(from_json(json_str))
