"""Symbol: a graph of operators with named inputs (MXNet ``mx.sym.Symbol``).

A :class:`Symbol` is a list of output entries ``(node, index)``; nodes are
shared between symbols. Composition (``__call__``) copies the graph; only
``_set_attr`` changes a node in place, as in MXNet.
``ff.sym.<Op>`` functions (generated from the operator registry) and the
arithmetic overloads build new nodes (:func:`make_op_symbol`);
:func:`~ffnumba.symbol.compose.Variable` makes an input.
"""
import numbers

import numpy as np

from ..attribute import AttrScope, HIDDEN_KEYS, normalize_key
from ..base import FFError, ParamError, _Null
from ..name import NameManager
from ..ops.registry import get_op
from .graph import Node, GraphView, topo_order
from . import infer as _infer

__all__ = ['Symbol', 'make_op_symbol']


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

    def _gen_atomic_symbol(self):
        """The head node's operator and params on fresh inputs ``{name}_{arg}`` (MXNet's)."""
        heads = {id(n): n for n, _ in self._outputs}
        node = next(iter(heads.values()))
        if len(heads) != 1 or node.op is None:
            raise FFError('_gen_atomic_symbol: needs a symbol whose outputs come from one '
                          'operator node; got %s' % self.list_outputs())
        kw = dict(node.params.to_attrs(), **{k: v for k, v in node.attrs.items()
                                              if k.startswith('__')})
        return make_op_symbol(node.op, [], kw, name=node.name)

    def __copy__(self):
        outputs, _ = _copy_graph(self._outputs)
        return Symbol(outputs)

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __getstate__(self):
        return {'json': self.tojson()}

    def __setstate__(self, state):
        from .json import from_json
        self._outputs = from_json(state['json'])
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

    def __bool__(self):
        from ..base import NotImplementedForSymbol
        raise NotImplementedForSymbol(self.__bool__, 'bool')

    # ------------------------------------------------------------ inference
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
        return _infer.symbol_shapes(self._view(), args, kwargs, partial=False)

    def infer_shape_partial(self, *args, **kwargs):
        """Like :meth:`infer_shape`, with ``()`` for unknown shapes and no warning."""
        return _infer.symbol_shapes(self._view(), args, kwargs, partial=True)

    def infer_type(self, *args, **kwargs):
        """Infer argument, output and auxiliary dtypes (numpy type classes).

        Returns ``(None, None, None)`` with a ``UserWarning`` when some stay unknown.

        Raises
        ------
        DTypeError
            On inconsistent types, naming the operator.
        """
        return _infer.symbol_types(self._view(), args, kwargs, partial=False)

    def infer_type_partial(self, *args, **kwargs):
        """Like :meth:`infer_type`, with ``None`` for unknown types and no warning."""
        return _infer.symbol_types(self._view(), args, kwargs, partial=True)

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
                           shared_buffer=shared_buffer, group2ctx=group2ctx, **kwargs)

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


# ------------------------------------------------------------ applying an operator
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
    from ..ops.doc import _input_names
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

