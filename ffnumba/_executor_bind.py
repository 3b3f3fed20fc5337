"""Allocation for :func:`simple_bind` and the helpers executors share.

:func:`simple_bind` infers every shape and dtype of a symbol, allocates (or
takes from ``shared_exec`` / ``shared_buffer``) the argument, gradient and
auxiliary arrays, and hands them to :class:`~ffnumba.executor.Executor`,
which precomputes and runs the graph. Re-exported as
``ffnumba.executor.simple_bind``.
"""
import numpy as np

from .base import ParamError, ShapeError
from .context import Context, check_device
from .dtype import np_dtype
from .ndarray import ndarray as _nd
from .ndarray.ndarray import NDArray
from .symbol import infer as _infer

__all__ = ['simple_bind']

_REQS = ('write', 'add', 'null')


def _zeros(shape, dtype, ctx):
    return _nd.zeros(shape, ctx=ctx, dtype=dtype)


def _is_gpu(ctx):
    return ctx.device_type == 'gpu'


def _norm_req(grad_req, names):
    """``grad_req`` (str, list or dict) as a dict name -> 'write'/'add'/'null'."""
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
    """An NDArray of ``shape`` over the first elements of ``arr`` (no copy on the CPU)."""
    n = int(np.prod(shape, dtype=np.int64))
    if _is_gpu(arr.context):
        return _zeros(shape, arr.dtype, arr.context)
    return NDArray(arr._data.reshape(-1)[:n].reshape(shape), arr.context)


def simple_bind(symbol, ctx, grad_req='write', type_dict=None, shared_arg_names=None,
                shared_exec=None, shared_buffer=None, **kwargs):
    """Bind ``symbol`` to new zero arrays whose shapes and dtypes are inferred.

    Parameters
    ----------
    symbol : Symbol
    ctx : Context
    grad_req : str, list or dict, default 'write'
    type_dict : dict of str to dtype, optional
        Input dtypes; the rest is inferred, float32 where nothing says otherwise.
    shared_arg_names : list of str, optional
        Arguments (parameters) whose arrays and gradients are taken from
        ``shared_exec`` when it has them with the same shape and dtype.
    shared_exec : Executor, optional
        The executor to share with (also its auxiliary states, by name).
    shared_buffer : dict, optional
        Arrays for the other arguments, by name (gradients under
        ``'grad of ' + name``). An entry at least as large is reused as a
        view; otherwise a new array is allocated and stored in the dict.
    **kwargs : tuple
        Input shapes by name (names that are not inputs are ignored, as in MXNet).

    Returns
    -------
    Executor

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
    reqs = _norm_req(grad_req, arg_names)
    shared_names = set(shared_arg_names or ())
    s_args = shared_exec.arg_dict if shared_exec is not None else {}
    s_grads = shared_exec.grad_dict if shared_exec is not None else {}
    s_aux = shared_exec.aux_dict if shared_exec is not None else {}

    def fits(a, shape, dtype):
        return a is not None and a.shape == shape and np.dtype(a.dtype) == dtype

    def from_buffer(key, shape, dtype):
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
        shape, dtype = shapes[e], types[e]
        if name in shared_names and fits(s_args.get(name), shape, dtype):
            a = s_args[name]
            g = s_grads.get(name)
            if reqs[name] != 'null' and not fits(g, shape, dtype):
                g = _zeros(shape, dtype, ctx)
        elif name in shared_names:
            a = _zeros(shape, dtype, ctx)
            g = _zeros(shape, dtype, ctx) if reqs[name] != 'null' else None
        else:
            a = from_buffer(name, shape, dtype)
            g = from_buffer('grad of ' + name, shape, dtype) if reqs[name] != 'null' else None
        args.append(a)
        grads.append(g if reqs[name] != 'null' else None)
    aux = []
    for nid, name in zip(view.aux_nodes, aux_names):
        e = view.entry_ptr[nid]
        shape, dtype = shapes[e], types[e]
        a = s_aux.get(name)
        aux.append(a if fits(a, shape, dtype) else _zeros(shape, dtype, ctx))
    from .executor import Executor
    return Executor(symbol, ctx, args, grads, reqs, aux)
