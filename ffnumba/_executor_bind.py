"""Memory for executors: what :func:`~ffnumba.executor.simple_bind` allocates, and helpers.

:func:`allocate` infers every shape and dtype of a symbol once and allocates
(or takes from ``shared_exec`` / ``shared_buffer``) the argument, gradient
and auxiliary arrays; :func:`ffnumba.executor.simple_bind` hands them, with
the inferred shapes, to :class:`~ffnumba.executor.Executor`.
:func:`norm_grad_req` is the one place ``grad_req`` (str, list or dict) is
normalised; :func:`plan_gradients` decides which nodes run backward and what
they read, and :func:`plan_memory` shares the buffers of everything else. This module sits below ``executor.py`` and never imports it.
"""
import numpy as np

from .base import FFError, ParamError, ShapeError
from .context import Context, check_device
from .dtype import np_dtype
from .ndarray import ndarray as _nd
from .ndarray._device import same_memory
from .ndarray.ndarray import NDArray
from .symbol import infer as _infer

__all__ = ['allocate', 'ArgumentError']

_REQS = ('write', 'add', 'null')


class ArgumentError(FFError, TypeError):
    """An argument name that the executor does not have, or a value of the wrong type."""


def _zeros(shape, dtype, ctx):
    return _nd.zeros(shape, ctx=ctx, dtype=dtype)


def norm_grad_req(grad_req, names):
    """``grad_req`` (str, list or dict) as a dict name -> 'write'/'add'/'null'.

    The one normaliser of ``grad_req`` (executors, ``simple_bind`` and the
    executor group all call it). ``'inplace'`` counts as ``'write'``; a dict
    gives ``'null'`` to the names it lacks (MXNet).

    Raises
    ------
    ParamError
        For a list of the wrong length, another type, or an unknown request.
    """
    if isinstance(grad_req, str):
        reqs = {n: grad_req for n in names}
    elif isinstance(grad_req, (list, tuple)):
        if len(grad_req) != len(names):
            raise ParamError('grad_req: a list needs one entry per argument (%d), got %d'
                             % (len(names), len(grad_req)))
        reqs = dict(zip(names, grad_req))
    elif isinstance(grad_req, dict):      # names that are not arguments are ignored (MXNet)
        reqs = {n: grad_req.get(n, 'null') for n in names}
    else:
        raise ParamError('grad_req must be a str, list or dict. Received: grad_req=%r'
                         % (grad_req,))
    for n, r in reqs.items():
        if r == 'inplace':
            reqs[n] = r = 'write'
        if r not in _REQS:
            raise ParamError("grad_req must be one of 'write', 'add', 'null'. Received: "
                             "grad_req[%r]=%r" % (n, r))
    return reqs


def _view_of(arr, shape):
    """An NDArray of ``shape`` over the first elements of ``arr`` where its device can share
    memory (the CPU), else a new zero array."""
    view = arr._prefix_view(shape)
    return view if view is not None else _zeros(shape, arr.dtype, arr.context)


def group_contexts(view, ctx, group2ctx):
    """Per argument and auxiliary node: its context (``group2ctx`` by ``ctx_group``).

    Raises
    ------
    FFError
        For a group context of another device type than ``ctx`` (or another
        GPU): arrays on several device types in one executor are not supported.
    """
    out = {}
    for nid in view.arg_nodes + view.aux_nodes:
        group = view.nodes[nid].attrs.get('__ctx_group__')
        c = (group2ctx or {}).get(group, ctx) if group is not None else ctx
        c = Context(c) if not isinstance(c, Context) else c
        if c.device_type != ctx.device_type or not same_memory(c, ctx):
            raise FFError('bind: group2ctx puts %r (ctx_group %r) on %s but the executor runs '
                          'on %s; model parallelism across device types is not supported'
                          % (view.nodes[nid].name, group, c, ctx))
        out[nid] = c
    return out


def allocate(symbol, ctx, grad_req='write', type_dict=None, shared_arg_names=None,
             shared_exec=None, shared_buffer=None, group2ctx=None, **kwargs):
    """The arrays :func:`ffnumba.executor.simple_bind` binds, with the shapes it inferred.

    Parameters are those of :func:`~ffnumba.executor.simple_bind`.

    Returns
    -------
    (args, grads, reqs, aux, (shapes, types))
        Argument arrays, gradient arrays (None where ``grad_req`` is
        ``'null'``), the normalised ``grad_req`` dict, auxiliary arrays, and
        the per-entry shapes and dtypes of the graph (handed to the
        Executor so it does not infer them again).

    Raises
    ------
    ShapeError
        If some shape cannot be inferred (naming the arguments).
    """
    ctx = Context(ctx) if not isinstance(ctx, Context) else ctx
    check_device(ctx)
    view = symbol._view()
    view.check_unique_names()
    inputs = set(view.arg_names() + view.aux_names())
    kwargs = {k: v for k, v in kwargs.items() if k in inputs}   # MXNet ignores other names
    shapes = _infer.infer_shapes(view, kwargs)
    arg_names, aux_names = view.arg_names(), view.aux_names()
    unknown = [n for nid, n in zip(view.arg_nodes + view.aux_nodes, arg_names + aux_names)
               if shapes[view.entry_ptr[nid]] is None]
    if unknown:
        raise ShapeError('simple_bind: cannot infer the shapes of %s; give their shapes (or '
                         'the shapes they depend on) as keyword arguments' % unknown)
    known_t = {k: np_dtype(v, 'type_dict[%r]' % k) for k, v in (type_dict or {}).items()}
    types = _infer.infer_types(view, known_t)
    missing = {n: np.dtype('float32')
               for nid, n in zip(view.arg_nodes + view.aux_nodes, arg_names + aux_names)
               if types[view.entry_ptr[nid]] is None}
    if missing:
        known_t.update(missing)
        types = _infer.infer_types(view, known_t)
    reqs = norm_grad_req(grad_req, arg_names)
    shared_names = set(shared_arg_names or ())
    s_args = shared_exec.arg_dict if shared_exec is not None else {}
    s_grads = shared_exec.grad_dict if shared_exec is not None else {}
    s_aux = shared_exec.aux_dict if shared_exec is not None else {}

    ctx_of = group_contexts(view, ctx, group2ctx)

    def fits(a, shape, dtype):
        return a is not None and a.shape == shape and np.dtype(a.dtype) == dtype

    def from_buffer(key, shape, dtype, ctx):
        if shared_buffer is None:
            return _zeros(shape, dtype, ctx)
        old = shared_buffer.get(key)
        n = int(np.prod(shape, dtype=np.int64))
        if old is not None and np.dtype(old.dtype) == dtype and old.size >= n \
                and old.context == ctx:
            return old if old.shape == shape else _view_of(old, shape)
        new = _zeros(shape, dtype, ctx)
        shared_buffer[key] = new
        return new

    args, grads = [], []
    for nid, name in zip(view.arg_nodes, arg_names):
        e = view.entry_ptr[nid]
        shape, dtype, ctx = shapes[e], types[e], ctx_of[nid]
        if name in shared_names and fits(s_args.get(name), shape, dtype):
            a = s_args[name]
            g = s_grads.get(name)
            if reqs[name] != 'null' and not fits(g, shape, dtype):
                g = _zeros(shape, dtype, ctx)
        elif name in shared_names:
            a = _zeros(shape, dtype, ctx)
            g = _zeros(shape, dtype, ctx) if reqs[name] != 'null' else None
        else:
            a = from_buffer(name, shape, dtype, ctx)
            g = from_buffer('grad of ' + name, shape, dtype, ctx) if reqs[name] != 'null' else None
        args.append(a)
        grads.append(g if reqs[name] != 'null' else None)
    aux = []
    for nid, name in zip(view.aux_nodes, aux_names):
        e = view.entry_ptr[nid]
        shape, dtype = shapes[e], types[e]
        a = s_aux.get(name)
        aux.append(a if fits(a, shape, dtype) else _zeros(shape, dtype, ctx_of[nid]))
    return args, grads, reqs, aux, (shapes, types)


def plan_gradients(view, var_reqs):
    """Which nodes run backward and which forward values their backward reads.

    Gradients flow from the heads down through every operator that passes
    them (``OpDef.passes_gradient``; ``BlockGrad`` does not) to the
    arguments with a ``grad_req`` other than ``'null'``. A node runs its
    backward when one of its inputs depends on such an argument and gradient
    reaches one of its outputs (a loss op makes its own).

    Parameters
    ----------
    view : GraphView
    var_reqs : dict of int to str
        Entry of each argument whose ``grad_req`` is not ``'null'``, to the request.

    Returns
    -------
    need : list of bool
        Per entry: a gradient is computed for it.
    node_bwd : list of bool
        Per node: its backward runs.
    keep : set of int
        Entries some running backward reads (``OpDef.backward_reads``): their
        forward buffers must survive until backward; the others may be shared.
    unreached : list of int
        Argument entries with a request that no gradient reaches (all their
        paths go through ``BlockGrad``): zero for ``'write'``.
    """
    ptr = view.entry_ptr
    depends = [False] * view.num_entries
    for e in var_reqs:
        depends[e] = True
    touched = [False] * len(view.nodes)
    for nid, node in enumerate(view.nodes):
        if node.op is not None and any(depends[e]
                                       for e in view.in_entries[nid][:node.num_args]):
            touched[nid] = True
            for e in range(ptr[nid], ptr[nid + 1]):
                depends[e] = True
    flows = [False] * view.num_entries
    for e in view.heads:
        flows[e] = True
    node_bwd = [False] * len(view.nodes)
    for nid in reversed(range(len(view.nodes))):
        node = view.nodes[nid]
        if not touched[nid] or not node.op.passes_gradient:
            continue
        if not (node.op.is_loss or any(flows[e] for e in range(ptr[nid], ptr[nid + 1]))):
            continue
        node_bwd[nid] = True
        for e in view.in_entries[nid][:node.num_args]:
            if depends[e]:
                flows[e] = True
    need = [depends[e] and flows[e] and (e in var_reqs or node_bwd[view.entry_node[e]])
            for e in range(view.num_entries)]
    keep = set()
    for nid, node in enumerate(view.nodes):
        if node_bwd[nid]:
            reads = node.op.backward_reads
            reads = reads(node.params) if callable(reads) else reads
            if 'inputs' in reads:
                keep.update(view.in_entries[nid])
            if 'outputs' in reads:
                keep.update(range(ptr[nid], ptr[nid + 1]))
    unreached = [e for e in var_reqs if not flows[e]]
    return need, node_bwd, keep, unreached


def plan_memory(view, shapes, types, ctx, nd_of, keep=frozenset(), shared=None):
    """Allocate operator outputs, sharing the buffers of values nothing needs any more.

    An intermediate entry's buffer returns to a pool (keyed by shape and
    dtype) after its last consumer's forward has run; a later entry of the
    same shape and dtype takes it. Heads and the entries in ``keep`` (read
    by a backward, see :func:`plan_gradients`) are never returned. A node's
    outputs are taken before its inputs are released, so no kernel sees
    aliased arrays. An executor without gradients passes no ``keep``.

    ``shared``: per entry, the array of the executor this one reshapes (the
    same graph, so the same lifetimes); an output that fits in it (same
    dtype, no more elements) is a view of it on the CPU, as MXNet's
    ``Executor.reshape`` shares memory; the other outputs get their own buffers.
    """
    last = {}
    for nid, node in enumerate(view.nodes):
        for e in view.in_entries[nid]:
            last[e] = nid
    heads = set(view.heads)
    release = {}
    for nid, node in enumerate(view.nodes):
        if node.op is None:
            continue
        for e in range(view.entry_ptr[nid], view.entry_ptr[nid + 1]):
            if e not in heads and e not in keep:
                release.setdefault(last.get(e, nid), []).append(e)
    pool = {}
    for nid, node in enumerate(view.nodes):
        if node.op is None:
            continue
        for e in range(view.entry_ptr[nid], view.entry_ptr[nid + 1]):
            key = (shapes[e], np.dtype(types[e]).str)
            old = shared[e] if shared is not None else None
            part = old._prefix_view(shapes[e]) \
                if old is not None and np.dtype(old.dtype) == key[1] else None
            if part is not None:      # None on a GPU or where ``old`` is too small
                nd_of[e] = part
                continue
            free = pool.get(key) if shared is None else None  # views only: no new aliasing
            nd_of[e] = free.pop() if (free and e not in heads) else \
                _zeros(shapes[e], types[e], ctx)
        for e in release.get(nid, ()):
            pool.setdefault((shapes[e], np.dtype(types[e]).str), []).append(nd_of[e])


def _host_values(what, value):
    """``value`` as a numeric numpy array, or an ArgumentError naming ``what``."""
    try:
        host = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise ArgumentError('%s must be an NDArray or numeric array. Received: %s (%s)'
                            % (what, type(value).__name__, e)) from None
    if host.dtype.kind not in 'biuf':
        raise ArgumentError('%s must be an NDArray or numeric array. Received: %s of dtype %s'
                            % (what, type(value).__name__, host.dtype))
    return host


def _copy_into(src, dst, name):
    if isinstance(src, NDArray):
        host = src._host()
    else:
        host = _host_values('copy_params_from: %s' % name, src)
    if tuple(host.shape) != dst.shape:
        raise ShapeError('copy_params_from: %s has shape %s, the executor needs %s'
                         % (name, tuple(host.shape), dst.shape))
    dst._copy_from(host)


def _arrays(value, names, what, allow_missing):
    """The arrays bound for ``names`` from a list or dict (None where missing and allowed)."""
    if value is None:
        return [None] * len(names)
    if isinstance(value, dict):
        out = []
        for n in names:
            if n in value:
                out.append(value[n])
            elif allow_missing:
                out.append(None)
            else:
                raise ParamError('key `%s` is missing in `%s`' % (n, what))
    elif isinstance(value, (list, tuple)):
        if len(value) != len(names):
            raise ParamError('Length of %s does not match the number of %s'
                             % (what, 'auxiliary states' if what == 'aux_states'
                                else 'arguments'))
        out = list(value)
    else:
        raise ArgumentError('Only accept list of NDArrays or dict of str to NDArray for %s'
                            % what)
    for n, a in zip(names, out):
        if a is not None and not isinstance(a, NDArray):
            raise ArgumentError('%s[%r] must be an NDArray, got %s'
                                % (what, n, type(a).__name__))
    return out


def _reraise(node, phase, err):
    """Raise ``err`` again as an FFError naming the node (``Error in operator fc1: ...``)."""
    msg = str(err)
    if isinstance(err, FFError):
        if msg.startswith('Error in operator'):
            raise err
        try:
            new = type(err)('Error in operator %s: %s' % (node.name, msg))
        except TypeError:
            new = FFError('Error in operator %s: %s' % (node.name, msg))
        raise new from err
    raise FFError('Error in operator %s (%s %s): %s: %s'
                  % (node.name, node.op.name, phase, type(err).__name__, msg)) from err


def report(callback, monitor_all, node, rec, ctx, backward, in_shapes):
    """Monitor callbacks for one node's forward (or backward), named as MXNet names them.

    ``rec``: the executor's precomputed call of ``node``; ``in_shapes``: its
    argument shapes (for zeros where a backward computes no gradient).
    """
    wrap = lambda a: NDArray(a, ctx)
    if not backward:
        for name, a in zip(rec.out_names, rec.outs):
            callback(name, wrap(a))
        if monitor_all:
            names = node.arg_names() + node.aux_names()
            for name, a in zip(names, rec.ins + rec.aux):
                callback('%s_%s' % (node.name, name), wrap(a))
        return
    base = node.name + '_backward'
    if monitor_all:
        ins = [g for g in rec.ograds if g is not None] + rec.ins
        for i, a in enumerate(ins):
            callback('%s_input%d' % (base, i), wrap(a))
    n = len(rec.igrads)
    for i, g in enumerate(rec.igrads):
        arr = wrap(g) if g is not None else _zeros(in_shapes[i], rec.ins[i].dtype, ctx)
        callback(base + ('_output' if n == 1 else '_output%d' % i), arr)


# Operators whose gradient is zero whatever the head gradient (MXNet registers
# ``MakeZeroGradNodes`` for them): their head gradients are never read, so
# ``backward`` ignores whatever is passed for them (any shape) or its absence.
_CMP = ('equal', 'not_equal', 'greater', 'greater_equal', 'lesser', 'lesser_equal',
        'logical_and', 'logical_or', 'logical_xor')
_ZERO_GRAD_OPS = frozenset(
    ['argmax', 'argmin', 'argmax_channel', 'argsort', 'shape_array', 'size_array', 'zeros_like',
     'ones_like', 'one_hot', 'logical_not'] + ['_' + c for c in _CMP]
    + ['_%s_scalar' % c for c in _CMP] + ['broadcast_' + c for c in _CMP])


def zero_gradient(node):
    """True when ``node``'s backward never reads its head gradient."""
    op = node.op
    if op is None:
        return False
    if op.name == 'topk':
        return getattr(node.params, 'ret_typ', 'indices') in ('indices', 'mask')
    return op.name in _ZERO_GRAD_OPS
