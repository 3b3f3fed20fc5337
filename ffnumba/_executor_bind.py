"""Memory for executors: what :func:`~ffnumba.executor.simple_bind` allocates, and helpers.

:func:`allocate` infers every shape and dtype of a symbol once and allocates
(or takes from ``shared_exec`` / ``shared_buffer``) the argument, gradient
and auxiliary arrays; :func:`ffnumba.executor.simple_bind` hands them, with
the inferred shapes, to :class:`~ffnumba.executor.Executor`.
:func:`norm_grad_req` is the one place ``grad_req`` (str, list or dict) is
normalised. The memory plan (:func:`plan_gradients`, :func:`plan_memory`)
lives in :mod:`ffnumba._memory_plan`, below this module, which sits below
``executor.py`` and never imports it.
"""
import numpy as np

from .base import FFError, ParamError, ShapeError
from .context import Context, check_device
from .dtype import np_dtype
from .ndarray._device import same_memory
from .ndarray.ndarray import NDArray
from ._memory_plan import _view_of, _zeros
from .symbol import infer as _infer

__all__ = ['allocate', 'ArgumentError']

_REQS = ('write', 'add', 'null')


class ArgumentError(FFError, TypeError):
    """An argument name that the executor does not have, or a value of the wrong type."""


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


def report(callback, monitor_all, node, rec, ctx, backward, in_shapes, inputs=False):
    """Monitor callbacks for one node's forward (or backward), named as MXNet names them.

    ``rec``: the executor's precomputed call of ``node``; ``in_shapes``: its
    argument shapes (for zeros where a backward computes no gradient).
    ``inputs``: the forward's inputs (``monitor_all``), reported before the node
    runs as MXNet does (a node may write its output over an input it frees);
    otherwise the forward's outputs, after it ran.
    """
    wrap = lambda a: NDArray(a, ctx)
    if inputs:
        names = node.arg_names() + node.aux_names()
        for name, a in zip(names, rec.ins + rec.aux):
            callback('%s_%s' % (node.name, name), wrap(a))
        return
    if not backward:
        for name, a in zip(rec.out_names, rec.outs):
            callback(name, wrap(a))
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
