"""Shape and type inference over a whole graph (fixed point, both directions).

Every entry (a node output) holds a shape or ``None`` (unknown). Variables
start from the user's shapes and their ``__shape__`` / ``__dtype__`` hints.
Each operator's ``infer_shape`` fills what it can of its inputs and outputs
(a FullyConnected fills its weight from its data); the pass sweeps the graph
forward and backward until nothing changes. Every ``infer_shape`` receives
the known output shapes too (one signature, see :mod:`ffnumba.ops.registry`),
so an operator can infer its inputs from its outputs.

A conflict raises :class:`~ffnumba.base.ShapeError` (or
:class:`~ffnumba.base.DTypeError`) with MXNet's wording:
``Error in operator fc1: Shape inconsistent, Provided = [9,7], inferred shape=(10,7)``.
"""
import ast
import warnings

import numpy as np

from ..base import FFError, ShapeError, DTypeError
from ..dtype import code_dtype, np_dtype
from . import infer_partial as _partial

__all__ = ['infer_shapes', 'infer_types', 'symbol_shapes', 'symbol_types', 'fmt_provided',
           'fmt_inferred']

def fmt_provided(shape):
    """MXNet's ``[9,7]`` form of a shape."""
    return '[%s]' % ','.join(str(d) for d in shape)


def fmt_inferred(shape):
    """MXNet's ``(10,7)`` form of a shape."""
    return '(%s)' % ','.join(str(d) for d in shape)


def _shape_attr(node):
    """The ``__shape__`` attr of a variable as a tuple (0 dims kept), or None when absent.

    Raises
    ------
    ShapeError
        When the attribute is not a tuple of ints (naming the variable).
    """
    s = node.attrs.get('__shape__')
    if not s:
        return None
    try:
        val = ast.literal_eval(s) if len(str(s)) < 1000 else None
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        val = None
    if isinstance(val, int) and not isinstance(val, bool):
        val = (val,)
    if not isinstance(val, (tuple, list)) or \
            not all(isinstance(d, int) and not isinstance(d, bool) for d in val):
        raise ShapeError('Variable %s: its __shape__ attribute %r is not a shape (expected a '
                         'tuple of ints such as (2, 3); 0 marks an unknown size)'
                         % (node.name, s))
    return tuple(val)


def shape_hint(node):
    """The ``__shape__`` attr of a variable as a tuple, or None (0 dims are unknown)."""
    val = _shape_attr(node)
    if not val or any(d <= 0 for d in val):
        return None
    return val


def dtype_hint(node):
    s = node.attrs.get('__dtype__')
    if s is None:
        return None
    try:
        return code_dtype(int(s))
    except (ValueError, FFError):
        return None


def _run(view, values, call, merge_err):
    """Sweep forward and backward over ``view`` until no entry changes."""
    nodes = view.nodes
    ops = [i for i, n in enumerate(nodes) if n.op is not None]
    order = ops + ops[::-1]
    checked = set()   # nodes run once with every entry known (each is checked once)
    while True:
        changed = False
        for nid in order:
            node = nodes[nid]
            ents = view.in_entries[nid]
            start = view.entry_ptr[nid]
            nout = view.entry_ptr[nid + 1] - start
            out_ents = list(range(start, start + nout))
            nargs = node.num_args
            ins = [values[e] for e in ents[:nargs]]
            aux = [values[e] for e in ents[nargs:]]
            outs = [values[e] for e in out_ents]
            if all(v is not None for v in ins) and all(v is not None for v in aux):
                if nid in checked:
                    continue
                checked.add(nid)   # inputs known: check the outputs others inferred
                if ents:
                    outs = [None] * nout
            try:
                res = call(node, ins, aux, outs)
            except FFError as e:
                raise type(e)('Error in operator %s: %s' % (node.name, e)) from None
            except (TypeError, IndexError, ValueError, AttributeError):
                if any(v is None for v in ins + aux):
                    continue  # the op cannot cope with unknown inputs yet
                raise
            if res is None:
                continue
            new_in, new_out, new_aux = res
            new_in = list(new_in) if new_in is not None else []
            new_aux = list(new_aux) if new_aux is not None else []
            new_out = list(new_out) if new_out is not None else []
            if new_out and len(new_out) < nout:
                new_out = new_out + [new_out[0]] * (nout - len(new_out))
            pairs = list(zip(ents[:nargs], new_in)) + list(zip(ents[nargs:], new_aux)) + \
                list(zip(out_ents, new_out))
            for e, v in pairs:
                if v is None:
                    continue
                cur = values[e]
                if cur is None:
                    values[e] = v
                    changed = True
                elif cur != v:
                    raise merge_err(node.name, cur, v)
        if not changed:
            return values


class ShapeTypeError(ShapeError, TypeError):
    """A shape that is not a tuple of ints (also a ``TypeError``, as MXNet raises)."""


def as_shape(name, value):
    """``value`` as a tuple of non-negative ints (0 marks an unknown dimension).

    Raises
    ------
    ShapeError
        For a negative dimension; :class:`ShapeTypeError` (also a ``TypeError``) for
        a value that is not a sequence of ints.
    """
    if isinstance(value, (int, np.integer)) or not hasattr(value, '__len__') \
            or isinstance(value, (str, bytes)):
        raise ShapeTypeError('The shape of %s must be a tuple of ints. Received: %r'
                             % (name, value))
    dims = []
    for d in value:
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool):
            raise ShapeTypeError('The shape of %s must be a tuple of ints. Received: %r'
                                 % (name, value))
        if d < 0:
            raise ShapeError('The shape of %s must have dimensions >= 0. Received: %r'
                             % (name, tuple(value)))
        dims.append(int(d))
    return tuple(dims)


def _seed(view, known, convert, hint):
    """Entry values: variables from ``known`` (``convert(name, value)``) or ``hint(node)``."""
    values = [None] * view.num_entries
    for nid in view.arg_nodes + view.aux_nodes:
        node = view.nodes[nid]
        if node.name in known and known[node.name] is not None:
            values[view.entry_ptr[nid]] = convert(node.name, known[node.name])
        elif hint is not None:
            values[view.entry_ptr[nid]] = hint(node)
    return values


def _partial_hint(node):
    """The ``__shape__`` attr as a tuple even with unknown (0) dimensions, or None."""
    return _shape_attr(node) or None


def infer_shapes(view, known, use_hints=True, partial_zeros=False):
    """Entry shapes of ``view`` given ``known``: {variable name: shape}.

    With ``partial_zeros`` (``Symbol.infer_shape`` and ``infer_shape_partial``),
    a 0 in a given shape or a ``__shape__`` hint means an unknown dimension, as
    in MXNet: such a partial shape is completed from what the operators infer,
    or from the other same-rank shapes at an operator
    (``Variable('a', shape=(0, 10)) + Variable('b', shape=(12, 0))`` gives
    ``(12, 10)``), partial shapes flow through the operators (see
    :mod:`ffnumba.symbol.infer_partial`), and an entry left partial is returned
    with its zeros.

    Returns
    -------
    list
        One tuple (or None where unknown) per entry.

    Raises
    ------
    ShapeError
        ``Error in operator <node>: ...`` on a conflict.
    """
    values = _seed(view, known, as_shape,
                   (_partial_hint if partial_zeros else shape_hint) if use_hints else None)

    def call(node, ins, aux, outs):
        res = node.op.infer_shape(node.params, ins, aux, outs)
        if res is None:
            return None
        return tuple([None if s is None else tuple(int(d) for d in s) for s in part]
                     if part is not None else None for part in res)

    def err(name, cur, new):
        return ShapeError('Error in operator %s: Shape inconsistent, Provided = %s, '
                          'inferred shape=%s' % (name, fmt_provided(cur), fmt_inferred(new)))

    if partial_zeros and any(v is not None and 0 in v for v in values):
        return _partial.run_partial(view, values, call, err)
    values = _run(view, values, call, err)
    seeds = _creation_partials(view) if any(v is None for v in values) else {}
    if seeds:  # ``ones(shape=(2, -1))``: unknown dimensions completed as partial shapes
        for e, v in seeds.items():
            values[e] = values[e] or v
        values = _partial.run_partial(view, values, call, err)
        values = [None if v is None or 0 in v else v for v in values]
    return values


def _creation_partials(view):
    """``{entry: partial shape}`` of input-less nodes whose ``shape`` param has 0 or -1 dims."""
    out = {}
    for nid, node in enumerate(view.nodes):
        shape = getattr(node.params, 'shape', None) if node.op is not None else None
        if shape and not view.in_entries[nid] and isinstance(shape, tuple) \
                and any(int(d) <= 0 for d in shape):
            out[view.entry_ptr[nid]] = tuple(max(int(d), 0) for d in shape)
    return out


def infer_types(view, known, use_hints=True):
    """Entry dtypes (``numpy.dtype`` or None) of ``view`` given {name: dtype}.

    Raises
    ------
    DTypeError
        ``Error in operator <node>: ...`` on a conflict.
    """
    values = _seed(view, known, lambda _, v: np.dtype(v), dtype_hint if use_hints else None)

    def call(node, ins, aux, outs):
        res = node.op.infer_type(node.params, ins, aux)
        if res is None:
            return None
        return tuple([None if t is None else np.dtype(t) for t in part]
                     if part is not None else None for part in res)

    def err(name, cur, new):
        return DTypeError('Error in operator %s: Type inconsistent, Provided = %s, '
                          'inferred type=%s' % (name, np.dtype(cur).name, np.dtype(new).name))

    return _run(view, values, call, err)


# ------------------------------------------------------------ Symbol.infer_shape / infer_type
def _known(view, what, args, kwargs):
    """``{input name: value}`` from positional (argument order) or keyword values."""
    names = view.arg_names()
    inputs = names + view.aux_names()
    known = {}
    if args and kwargs:
        raise FFError('%s: give known values either by position or by keyword, not both'
                      % what)
    if len(args) > len(names):
        raise FFError('%s: %d positional values for %d arguments %s'
                      % (what, len(args), len(names), names))
    for n, v in zip(names, args):
        if v is not None:
            known[n] = v
    for k, v in kwargs.items():
        if k not in inputs:
            raise FFError('%s: keyword argument name %s not found.\nCandidate arguments:\n%s'
                          % (what, k, '\n'.join('\t[%d]%s' % x for x in enumerate(inputs))))
        if v is not None:
            known[k] = v
    return known


def symbol_shapes(view, args, kwargs, partial):
    """``Symbol.infer_shape`` (``partial=False``) and ``infer_shape_partial`` (True).

    Returns ``(arg_shapes, out_shapes, aux_shapes)``; see
    :meth:`ffnumba.symbol.Symbol.infer_shape`.
    """
    known = _known(view, 'infer_shape', args, kwargs)
    shapes = infer_shapes(view, known, partial_zeros=True)
    if not partial:  # a shape with an unknown (0) dimension is unknown
        shapes = [None if s is not None and 0 in s else s for s in shapes]
    arg_s = [shapes[view.entry_ptr[i]] for i in view.arg_nodes]
    aux_s = [shapes[view.entry_ptr[i]] for i in view.aux_nodes]
    out_s = [shapes[e] for e in view.heads]
    if partial:
        fix = lambda l: [s if s is not None else () for s in l]
        return fix(arg_s), fix(out_s), fix(aux_s)
    if any(s is None for s in arg_s + aux_s + out_s):
        unknown = ['%s: ()' % n for n, s in zip(view.arg_names(), arg_s) if s is None]
        warnings.warn('Cannot decide shape for the following arguments (0s in shape means '
                      'unknown dimensions). Consider providing them as input:\n\t'
                      + '\n\t'.join(unknown[:10]), stacklevel=3)
        return None, None, None
    return arg_s, out_s, aux_s


def symbol_types(view, args, kwargs, partial):
    """``Symbol.infer_type`` (``partial=False``) and ``infer_type_partial`` (True)."""
    known = _known(view, 'infer_type', args, kwargs)
    known = {k: np_dtype(v, 'infer_type: %s' % k) for k, v in known.items()}
    types = infer_types(view, known)
    conv = lambda l: [None if t is None else np.dtype(t).type for t in l]
    arg_t = conv(types[view.entry_ptr[i]] for i in view.arg_nodes)
    aux_t = conv(types[view.entry_ptr[i]] for i in view.aux_nodes)
    out_t = conv(types[e] for e in view.heads)
    if not partial and any(t is None for t in arg_t + aux_t + out_t):
        unknown = ['%s: None' % n for n, t in zip(view.arg_names(), arg_t) if t is None]
        warnings.warn('Cannot decide type for the following arguments. Consider providing '
                      'them as input:\n\t' + '\n\t'.join(unknown[:10]), stacklevel=2)
        return None, None, None
    return arg_t, out_t, aux_t
