"""Symbol: a graph of operators with named inputs (MXNet ``mx.sym.Symbol``).

A :class:`Symbol` is a list of output entries ``(node, index)``; nodes are
shared between symbols. Composition (``__call__``) copies the graph; only
``_set_attr`` changes a node in place, as in MXNet.
``ff.sym.<Op>`` functions (generated from the operator registry) and the
arithmetic overloads build new nodes; :func:`Variable` makes an input.
"""
import numbers
import warnings

import numpy as np

from ..attribute import HIDDEN_KEYS, normalize_key
from ..base import FFError
from ..dtype import np_dtype, dtype_code
from .graph import Node, GraphView, topo_order
from . import infer as _infer
from .compose import make_op_symbol, _make, _scope_attrs

__all__ = ['Symbol', 'Variable', 'var', 'Group', 'load', 'load_json', 'make_op_symbol']

_STYPE_CODES = {'default': 0, 'row_sparse': 1, 'csr': 2}


def _with_twins(attrs):
    """MXNet's listing of attrs: hidden ``__key__`` entries also appear as ``key``."""
    out = {}
    for k, v in attrs.items():
        out[k] = v
        if k.startswith('__') and k.endswith('__') and k[2:-2] in HIDDEN_KEYS:
            out[k[2:-2]] = v
    return out


def _copy_graph(outputs):
    """Copy every node reachable from ``outputs``; returns (new outputs, old id -> new node)."""
    nodes = topo_order([n for n, _ in outputs])
    new = {}
    for n in nodes:
        c = n.copy()
        c.inputs = [(new[id(src)], i) for src, i in n.inputs]
        new[id(n)] = c
    return [(new[id(n)], i) for n, i in outputs], new


class Symbol:
    """A symbolic graph: one or more output entries of operator nodes.

    Build with :func:`Variable`, the ``ff.sym.<Op>`` functions, arithmetic
    (``+ - * / **`` between symbols of equal shape or with scalars) and
    :func:`Group`.
    """

    __array_priority__ = 1000.0

    def __init__(self, outputs):
        self._outputs = list(outputs)
        self._view_cache = None

    # ------------------------------------------------------------ structure
    def _view(self):
        if self._view_cache is None:
            self._view_cache = GraphView(self._outputs)
        return self._view_cache

    @property
    def name(self):
        """Name of the head node; ``None`` for a group of several outputs."""
        if len(self._outputs) != 1:
            return None
        return self._outputs[0][0].name

    def list_arguments(self):
        """Argument names (variables that are not auxiliary states), in DFS order."""
        return self._view().arg_names()

    def list_auxiliary_states(self):
        """Auxiliary-state names (variables feeding mutable inputs, e.g. BN moving stats)."""
        return self._view().aux_names()

    def list_inputs(self):
        """Every variable name, arguments and auxiliary states, in DFS order."""
        v = self._view()
        return [n.name for n in v.nodes if n.op is None]

    def list_outputs(self):
        """Output names: ``{node}_output`` (or ``{node}_{name}``), a variable's own name."""
        return [n.output_names()[i] for n, i in self._outputs]

    def get_internals(self):
        """A group of every output of every node (variables included), topological order."""
        outs = []
        for n in self._view().nodes:
            outs.extend((n, i) for i in range(n.num_outputs()))
        return Symbol(outs)

    def get_children(self):
        """A group of the head nodes' inputs, or ``None`` when there are none."""
        ins, seen = [], set()
        for n, _ in self._outputs:  # each head node once (a multi-output node too)
            if id(n) not in seen:
                seen.add(id(n))
                ins.extend(n.inputs)
        return Symbol(ins) if ins else None

    def __bool__(self):
        from ..base import NotImplementedForSymbol
        raise NotImplementedForSymbol(self.__bool__, 'bool')

    def __len__(self):
        return len(self._outputs)

    def __iter__(self):
        return (self[i] for i in range(len(self._outputs)))

    def __getitem__(self, index):
        """One output by position or by name (``internals['fc1_output']``)."""
        if isinstance(index, str):
            names = self.list_outputs()
            hits = [i for i, n in enumerate(names) if n == index]
            if not hits:
                raise ValueError('Cannot find output that matches name "%s"' % index)
            if len(hits) > 1:
                raise ValueError('There are multiple outputs with name "%s"' % index)
            index = hits[0]
        if isinstance(index, slice):
            return Symbol(self._outputs[index])
        if not isinstance(index, (int, np.integer)):
            raise TypeError('Symbol only supports integer or string indexing')
        if index < 0:
            index += len(self._outputs)
        if not 0 <= index < len(self._outputs):
            raise IndexError('Symbol index %d out of range (%d outputs)'
                             % (index, len(self._outputs)))
        return Symbol([self._outputs[index]])

    # ------------------------------------------------------------ attributes
    def attr(self, key):
        """The head node's attribute ``key`` as a string, or None."""
        if len(self._outputs) != 1:
            return None
        attrs = self._outputs[0][0].json_attrs()
        if key in attrs:
            return attrs[key]
        return attrs.get(normalize_key(key))

    def list_attr(self, recursive=False):
        """The head node's attributes (hidden ``__key__`` ones also as ``key``)."""
        if recursive:
            out = {}
            for name, d in self.attr_dict().items():
                for k, v in d.items():
                    out['%s$%s' % (name, k)] = v
            return out
        if len(self._outputs) != 1:
            return {}
        return _with_twins(self._outputs[0][0].json_attrs())

    def attr_dict(self):
        """``{node name: {key: value}}`` for every node that has attributes."""
        out = {}
        for n in self._view().nodes:
            a = n.json_attrs()
            if a:
                out[n.name] = _with_twins(a)
        return out

    def _set_attr(self, **kwargs):
        """Set string attributes on the head node(s) (values must be str)."""
        for k, v in kwargs.items():
            if not isinstance(v, str):
                raise ValueError('Set Attr only accepts string values. Received: %s=%r' % (k, v))
            for node, _ in self._outputs:
                if node.op is not None and (k in node.op.params._fields
                                            or k in node.op.params._ignored):
                    raw = node.params.to_attrs()
                    raw[k] = v
                    node.params = node.op.parse_params(raw)
                    node._nargs = None
                    self._view_cache = None
                else:
                    node.attrs[normalize_key(k)] = v

    # ------------------------------------------------------------ composition
    def __call__(self, *args, **kwargs):
        """A copy whose free inputs are replaced (by position or by name); ``name=`` renames."""
        s = self.__copy__()
        s._compose(*args, **kwargs)
        return s

    def _compose(self, *args, **kwargs):
        name = kwargs.pop('name', None)
        if args and kwargs:
            raise FFError('compose only accepts input Symbols either as positional or '
                          'keyword arguments, not both')
        for a in list(args) + list(kwargs.values()):
            if not isinstance(a, Symbol):
                raise TypeError('Compose expects Symbol as arguments')
            if len(a._outputs) != 1:
                raise FFError('Compose: an input must have one output; got %s'
                              % a.list_outputs())
        view = self._view()
        if args:
            names = view.arg_names()
            if len(args) > len(names):
                raise FFError('Compose: %d inputs given for %d arguments %s'
                              % (len(args), len(names), names))
            repl = dict(zip(names, args))
        else:
            inputs = self.list_inputs()
            for k in kwargs:
                if k not in inputs:
                    raise FFError('Compose: keyword argument %r is not an input of the '
                                  'symbol; inputs are %s' % (k, inputs))
            repl = kwargs
        outputs, new = _copy_graph(self._outputs)
        for n in new.values():
            n.inputs = [repl[src.name]._outputs[0]
                        if (src.op is None and src.name in repl) else (src, i)
                        for src, i in n.inputs]
        outputs = [repl[n.name]._outputs[0] if (n.op is None and n.name in repl) else (n, i)
                   for n, i in outputs]
        if name is not None:
            heads = {id(n): n for n, _ in outputs}
            for n in heads.values():
                n.name = name
        self._outputs = outputs
        self._view_cache = None

    def __copy__(self):
        outputs, _ = _copy_graph(self._outputs)
        return Symbol(outputs)

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __getstate__(self):
        return {'json': self.tojson()}

    def __setstate__(self, state):
        from .json import from_json
        other = from_json(state['json'])
        self._outputs = other._outputs
        self._view_cache = None

    # ------------------------------------------------------------ operators
    def _bin(self, other, sym_op, sym_hint, scalar_op, scalar_hint):
        if isinstance(other, Symbol):
            return _make(sym_op, sym_hint, [self, other])
        if isinstance(other, numbers.Number) and not isinstance(other, bool) or \
                isinstance(other, np.generic):
            return _make(scalar_op, scalar_hint, [self], scalar=other)
        raise TypeError('type %s not supported' % type(other).__name__)

    def _rscalar(self, other, op, hint):
        if isinstance(other, numbers.Number) or isinstance(other, np.generic):
            return _make(op, hint, [self], scalar=other)
        raise TypeError('type %s not supported' % type(other).__name__)

    def __add__(self, o):
        return self._bin(o, 'elemwise_add', '_plus', '_plus_scalar', '_plusscalar')

    __radd__ = __add__

    def __sub__(self, o):
        return self._bin(o, 'elemwise_sub', '_minus', '_minus_scalar', '_minusscalar')

    def __rsub__(self, o):
        return self._rscalar(o, '_rminus_scalar', '_rminusscalar')

    def __mul__(self, o):
        return self._bin(o, 'elemwise_mul', '_mul', '_mul_scalar', '_mulscalar')

    __rmul__ = __mul__

    def __truediv__(self, o):
        return self._bin(o, 'elemwise_div', '_div', '_div_scalar', '_divscalar')

    def __rtruediv__(self, o):
        return self._rscalar(o, '_rdiv_scalar', '_rdivscalar')

    __div__, __rdiv__ = __truediv__, __rtruediv__

    def __mod__(self, o):
        return self._bin(o, '_mod', '_mod', '_mod_scalar', '_modscalar')

    def __rmod__(self, o):
        return self._rscalar(o, '_rmod_scalar', '_rmodscalar')

    def __pow__(self, o):
        return self._bin(o, '_power', '_power', '_power_scalar', '_powerscalar')

    def __rpow__(self, o):
        return self._rscalar(o, '_rpower_scalar', '_rpower_scalar')

    def __neg__(self):
        return _make('_mul_scalar', '_mulscalar', [self], scalar=-1.0)

    def __abs__(self):
        return _make('abs', 'abs', [self])

    def _cmp(self, o, name):
        return self._bin(o, name, name, name + '_scalar', name + '_scalar')

    def __eq__(self, o):
        return self._cmp(o, '_equal')

    def __ne__(self, o):
        return self._cmp(o, '_not_equal')

    def __gt__(self, o):
        return self._cmp(o, '_greater')

    def __ge__(self, o):
        return self._cmp(o, '_greater_equal')

    def __lt__(self, o):
        return self._cmp(o, '_lesser')

    def __le__(self, o):
        return self._cmp(o, '_lesser_equal')

    __hash__ = object.__hash__

    # ------------------------------------------------------------ inference
    def _known(self, what, args, kwargs):
        view = self._view()
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
        return view, known

    def infer_shape(self, *args, **kwargs):
        """Infer argument, output and auxiliary shapes from the given ones.

        Parameters
        ----------
        *args : tuple
            Shapes by position in ``list_arguments()`` order.
        **kwargs : tuple
            Shapes by input name.

        Returns
        -------
        (arg_shapes, out_shapes, aux_shapes)
            Lists of tuples in list order, or ``(None, None, None)`` with a
            ``UserWarning`` naming the arguments left unknown.

        Raises
        ------
        ShapeError
            ``Error in operator <node>: Shape inconsistent ...`` on a conflict.
        """
        return self._infer_shape_impl(False, args, kwargs)

    def infer_shape_partial(self, *args, **kwargs):
        """Like :meth:`infer_shape`, with ``()`` for unknown shapes and no warning."""
        return self._infer_shape_impl(True, args, kwargs)

    def _infer_shape_impl(self, partial, args, kwargs):
        view, known = self._known('infer_shape', args, kwargs)
        shapes = _infer.infer_shapes(view, known, partial_zeros=True)
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

    def infer_type(self, *args, **kwargs):
        """Infer argument, output and auxiliary dtypes (numpy type classes).

        Returns ``(None, None, None)`` with a ``UserWarning`` when some stay unknown.

        Raises
        ------
        DTypeError
            On inconsistent types, naming the operator.
        """
        return self._infer_type_impl(False, args, kwargs)

    def infer_type_partial(self, *args, **kwargs):
        """Like :meth:`infer_type`, with ``None`` for unknown types and no warning."""
        return self._infer_type_impl(True, args, kwargs)

    def _infer_type_impl(self, partial, args, kwargs):
        view, known = self._known('infer_type', args, kwargs)
        known = {k: np_dtype(v, 'infer_type: %s' % k) for k, v in known.items()}
        types = _infer.infer_types(view, known)
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

    # ------------------------------------------------------------ serialisation
    def tojson(self, remove_amp_cast=True):
        """The graph as MXNet 1.x JSON (2-space indent, byte-compatible)."""
        from .json import to_json
        return to_json(self)

    def save(self, fname, remove_amp_cast=True):
        """Write :meth:`tojson` to ``fname`` (through a temporary file and a rename)."""
        from .json import save_file
        save_file(self, fname)

    def debug_str(self):
        """A readable listing of outputs, variables and operators."""
        lines = ['Symbol Outputs:']
        for k, (n, i) in enumerate(self._outputs):
            lines.append('\toutput[%d]=%s(%d)' % (k, n.name, i))
        for n in self._view().nodes:
            if n.op is None:
                lines.append('Variable:%s' % n.name)
                continue
            lines.append('-' * 20)
            lines.append('Op:%s, Name=%s' % (n.op.name, n.name))
            lines.append('Inputs:')
            nargs = n.num_args
            for k, (src, i) in enumerate(n.inputs):
                lines.append('\targ[%d]=%s(%d) version=%d' % (k, src.name, i, int(k >= nargs)))
            attrs = n.json_attrs()
            if attrs:
                lines.append('Attrs:')
                lines.extend('\t%s=%s' % kv for kv in sorted(attrs.items()))
        return '\n'.join(lines) + '\n'

    def __repr__(self):
        if len(self._outputs) == 1:
            return '<Symbol %s>' % self._outputs[0][0].name
        return '<Symbol group [%s]>' % ', '.join(n.name for n, _ in self._outputs)

    __str__ = __repr__

    # ------------------------------------------------------------ binding
    def simple_bind(self, ctx, grad_req='write', type_dict=None, stype_dict=None,
                    group2ctx=None, shared_arg_names=None, shared_exec=None,
                    shared_buffer=None, **kwargs):
        """Infer shapes and types from ``kwargs`` and bind to freshly allocated arrays.

        See :func:`ffnumba.executor.simple_bind`.
        """
        from ..executor import simple_bind
        return simple_bind(self, ctx, grad_req=grad_req, type_dict=type_dict,
                           shared_arg_names=shared_arg_names, shared_exec=shared_exec,
                           shared_buffer=shared_buffer, **kwargs)

    def bind(self, ctx, args, args_grad=None, grad_req='write', aux_states=None,
             group2ctx=None, shared_exec=None):
        """Bind to the caller's arrays. See :class:`ffnumba.executor.Executor`."""
        from ..executor import Executor
        return Executor(self, ctx, args, args_grad=args_grad, grad_req=grad_req,
                        aux_states=aux_states, shared_exec=shared_exec)

    def eval(self, ctx=None, **kwargs):
        """Run forward once on the given arrays; returns the list of outputs."""
        from ..context import current_context
        ctx = ctx or current_context()
        exe = self.bind(ctx, kwargs, grad_req='null')
        return exe.forward(is_train=False)


from ._fluent import install as _install_fluent  # noqa: E402

_install_fluent(Symbol)


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
        raise TypeError('Expect a string for variable `name`')
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
        raise TypeError('Expected a list of symbols as input')
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
    return load_file(fname)


def load_json(json_str):
    """Load a symbol from an MXNet JSON string (new or old ``param``/``attr`` layout)."""
    from .json import from_json
    return from_json(json_str)
