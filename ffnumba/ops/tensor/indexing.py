"""Index ops: ``take``, ``pick``, ``batch_take`` and ``one_hot``.

Index values may have any dtype (MXNet passes float indices by default);
they are truncated toward 0 before use (``1.7 -> 1``, ``-0.5 -> 0``) as
MXNet 1.9.1 does, then made valid by ``mode``:

=====  ==================================================================
mode   index ``j`` on an axis of size ``n``
=====  ==================================================================
clip   ``min(max(j, 0), n - 1)``
wrap   ``j mod n`` (Python's non-negative remainder)
raise  (take only) ``0 <= j < n`` or :class:`~ffnumba.base.ParamError`
=====  ==================================================================

A NaN index raises ParamError. Index inputs get no gradient (zeros for
``grad_req='write'``); the data gradient is the head gradient scattered back
to the elements read (summed where an element is read twice).

Math / shapes
-------------
==========  ==================================  ====================================
op          inputs                              output
==========  ==================================  ====================================
take        ``a``, ``indices``, axis            ``a.shape[:axis] + indices.shape +
                                                a.shape[axis+1:]``; ``a[.., j, ..]``
pick        ``data``, ``index``, axis           ``data`` without ``axis`` (or 1 with
                                                keepdims); ``data[.., index[..], ..]``
batch_take  ``a`` (N, M), ``indices`` (N,)      (N,): ``a[i, indices[i]]`` (clip)
one_hot     ``indices``, depth                  ``indices.shape + (depth,)``:
                                                on_value at ``j``, off_value elsewhere
                                                (an ``j`` outside [0, depth): all off)
==========  ==================================  ====================================

``take`` runs on the axis-map gather of :mod:`ffnumba.ops.tensor._axismap`;
pick, batch_take and one_hot have their own ``@njit`` kernels and
``@cuda.jit`` twins. On a GPU the index values are read back to the host to
check them (NaN, ``mode='raise'``).

Source: MXNet 1.x operator documentation, checked against MXNet 1.9.1
(batch_take there requires int32 indices; here any dtype is accepted).
"""
import numpy as np
from numba import njit

from ...base import ParamError, ShapeError
from ..params import Field, Params
from ..registry import OpDef, register_op
from ..templates import JIT, LazyCudaKernel, import_cuda, launch_1d
from ._axismap import Plan, cstrides, gather_backward, gather_forward, is_gpu, zero
from .shape import _axis

cuda = None  # bound by import_cuda(globals()) on first GPU use

__all__ = ['TakeParam', 'PickParam', 'OneHotParam']


def _host(a):
    return a.copy_to_host() if is_gpu(a) else a


def _check_nan(op, what, idx):
    if idx.dtype.kind == 'f' and idx.size and np.isnan(idx).any():
        j = int(np.flatnonzero(np.isnan(idx.reshape(-1)))[0])
        raise ParamError('%s: `%s` holds NaN at flat index %d (shape %s); indices must be '
                         'numbers' % (op, what, j, tuple(idx.shape)))


def _trunc(idx, n):
    """Index values truncated toward 0 as int64 (huge values bounded first)."""
    v = np.asarray(idx, np.float64) if idx.dtype.kind == 'f' else idx
    return np.clip(v, -2.0 ** 62, 2.0 ** 62).astype(np.int64) if v.dtype.kind == 'f' \
        else v.astype(np.int64)


def _index_types(p, in_types, aux_types):
    """Output: the data's dtype; an unknown index dtype defaults to the data's."""
    known = in_types[0] if in_types[0] is not None else in_types[1]
    ins = [known if t is None else t for t in in_types]
    return ins, [ins[0]], list(aux_types)


# ------------------------------------------------------------------------ take
class TakeParam(Params):
    """Parameters of :func:`take`."""

    axis = Field(int, 0, 'Axis of `a` to index (negative counts from the end).')
    mode = Field(str, 'clip', 'Out-of-range indices: clip, wrap or raise.',
                 choices=('clip', 'wrap', 'raise'))


def _take_infer(p, in_shapes, aux_shapes, out_shapes):
    a, idx = in_shapes
    if a is None or idx is None:
        return list(in_shapes), [None], list(aux_shapes)
    ax = _axis(p.axis, len(a), 'axis', 'take', a)
    return list(in_shapes), [tuple(a[:ax]) + tuple(idx) + tuple(a[ax + 1:])], list(aux_shapes)


def _take_plan(p, a_shape, idx):
    a_shape = tuple(a_shape)
    ax = _axis(p.axis, len(a_shape), 'axis', 'take', a_shape)
    n = a_shape[ax]
    idx = _host(idx)
    _check_nan('take', 'indices', idx)
    j = _trunc(idx.reshape(-1), n)
    if j.size and n == 0:
        raise ShapeError('take: cannot index the empty axis %d of `a` shape %s'
                         % (ax, a_shape))
    if p.mode == 'raise':
        bad = (j < 0) | (j >= n)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise ParamError('take: index %s at flat position %d of `indices` (shape %s) is '
                             'out of range for axis %d of size %d (mode=raise)'
                             % (idx.reshape(-1)[k], k, tuple(idx.shape), ax, n))
    elif p.mode == 'wrap':
        j = np.mod(j, n) if n else j
    else:
        j = np.clip(j, 0, max(n - 1, 0))
    st = cstrides(a_shape)
    maps = [np.arange(m) for m in a_shape[:ax]] + [j] + [np.arange(m) for m in a_shape[ax + 1:]]
    return Plan(maps, st[:ax] + [st[ax]] + st[ax + 1:])


def _take_forward(ctx, p, inputs, outputs, aux):
    a, idx = inputs
    gather_forward(_take_plan(p, a.shape, idx), a, outputs[0])


def _take_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    a, idx = inputs
    if req[1] == 'write':
        zero(in_grads[1])
    if req[0] != 'null':
        gather_backward(_take_plan(p, a.shape, idx), out_grads[0], in_grads[0], req[0])


register_op(OpDef(
    name='take',
    backward_reads=('indices',),
    arguments=['a', 'indices'],
    infer_shape=_take_infer,
    infer_type=_index_types,
    forward={'cpu': _take_forward, 'gpu': _take_forward},
    backward={'cpu': _take_backward, 'gpu': _take_backward},
    params=TakeParam,
    doc='Take elements of `a` along `axis` at `indices`.\n\nout.shape = a.shape[:axis] + '
        'indices.shape + a.shape[axis+1:]. (3, 4) with indices [[0, 1], [3, 9]] and axis=1 '
        '-> (3, 2, 2). Float indices truncate toward 0; mode clip (default), wrap or raise '
        '(ParamError on an out-of-range index). Only `a` gets a gradient.\n\nSource: '
        'MXNet 1.x ``take``.\n',
    input_docs={'a': 'The array to index.', 'indices': 'Indices (any dtype, any shape).'},
))


# ------------------------------------------------------------------------ pick
@njit
def _fix(v, n, wrap):
    """Truncated, clipped or wrapped index of value ``v`` on an axis of size ``n``."""
    if v != v:
        return 0
    if wrap:
        if v >= 2.0 ** 62 or v <= -2.0 ** 62:
            return 0
        j = int(v) % n
        return j + n if j < 0 else j
    if v >= n - 1:
        return n - 1
    if v > 0:
        return int(v)
    return 0


@njit(**JIT)
def _pick_cpu(x, idx, out, wrap):
    outer, n, inner = x.shape
    for o in range(outer):
        for i in range(inner):
            out[o * inner + i] = x[o, _fix(idx[o * inner + i], n, wrap), i]


@njit(**JIT)
def _pick_bwd_cpu(og, idx, ig, wrap):
    outer, n, inner = ig.shape
    for o in range(outer):
        for i in range(inner):
            ig[o, _fix(idx[o * inner + i], n, wrap), i] += og[o * inner + i]


def _build_pick_gpu():
    import_cuda(globals())

    @cuda.jit
    def fwd(x, idx, out, wrap):
        outer, n, inner = x.shape
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for e in range(start, outer * inner, stride):
            out[e] = x[e // inner, _fix(idx[e], n, wrap), e % inner]

    @cuda.jit
    def bwd(og, idx, ig, wrap):
        outer, n, inner = ig.shape
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for e in range(start, outer * inner, stride):
            ig[e // inner, _fix(idx[e], n, wrap), e % inner] += og[e]

    return fwd, bwd


_PICK_GPU = LazyCudaKernel(_build_pick_gpu)


class PickParam(Params):
    """Parameters of :func:`pick`."""

    axis = Field(int, -1, 'Axis to pick along (negative counts from the end).', optional=True)
    keepdims = Field(bool, False, 'Keep `axis` with size 1.')
    mode = Field(str, 'clip', 'Out-of-range indices: clip or wrap.', choices=('clip', 'wrap'))


def _pick_dims(p, d, op='pick'):
    d = tuple(d)
    if p.axis is None:
        raise ShapeError('%s: axis=None is not supported (MXNet 1.9.1 rejects it too); give '
                         'an axis' % op)
    a = _axis(p.axis, len(d), 'axis', op, d)
    return a, int(np.prod(d[:a])), d[a], int(np.prod(d[a + 1:]))


def _pick_infer(p, in_shapes, aux_shapes, out_shapes):
    d, idx = in_shapes
    if d is None:
        return list(in_shapes), [None], list(aux_shapes)
    a, outer, _, inner = _pick_dims(p, d)
    ins = list(in_shapes)
    if idx is None:
        ins[1] = tuple(d[:a]) + tuple(d[a + 1:])
    elif int(np.prod(idx)) != outer * inner:
        raise ShapeError('pick: `index` shape %s must have the shape of `data` %s without axis '
                         '%d, i.e. %s' % (tuple(idx), tuple(d), a, tuple(d[:a]) + tuple(d[a + 1:])))
    out = tuple(d[:a]) + ((1,) if p.keepdims else ()) + tuple(d[a + 1:])
    return ins, [out], list(aux_shapes)


def _cpu_idx(idx):
    """Flat index values a CPU kernel can read (numba has no float16)."""
    idx = idx.reshape(-1)
    return idx.astype(np.float32) if idx.dtype == np.float16 else idx


def _pick_run(p, x, idx, out, dims, wrap, op):
    outer, n, inner = dims
    if outer * inner == 0:
        return
    if n == 0:
        raise ShapeError('%s: cannot pick from an empty axis (data shape %s)'
                         % (op, tuple(x.shape)))
    _check_nan(op, 'index', _host(idx))
    x3 = x.reshape(outer, n, inner)
    if is_gpu(x):
        fwd, _ = _PICK_GPU.kernel
        launch_1d(fwd, outer * inner, x3, idx.reshape(idx.size), out.reshape(out.size), wrap)
    elif x.dtype == np.float16:
        o32 = np.empty(out.size, np.float32)
        _pick_cpu(x3.astype(np.float32), _cpu_idx(idx), o32, wrap)
        out.reshape(-1)[...] = o32
    else:
        _pick_cpu(x3, _cpu_idx(idx), out.reshape(-1), wrap)


def _pick_grad(og, idx, ig, r, dims, wrap):
    if r == 'null':
        return
    if r == 'write':
        zero(ig)
    outer, n, inner = dims
    if outer * inner * n == 0:
        return
    g3 = ig.reshape(outer, n, inner)
    if is_gpu(og):
        _, bwd = _PICK_GPU.kernel
        launch_1d(bwd, outer * inner, og.reshape(og.size), idx.reshape(idx.size), g3, wrap)
    elif ig.dtype == np.float16:
        g32 = g3.astype(np.float32)
        _pick_bwd_cpu(og.reshape(-1).astype(np.float32), _cpu_idx(idx), g32, wrap)
        g3[...] = g32
    else:
        _pick_bwd_cpu(og.reshape(-1), _cpu_idx(idx), g3, wrap)


def _pick_forward(ctx, p, inputs, outputs, aux):
    x, idx = inputs
    _, outer, n, inner = _pick_dims(p, x.shape)
    _pick_run(p, x, idx, outputs[0], (outer, n, inner), p.mode == 'wrap', 'pick')


def _pick_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    x, idx = inputs
    _, outer, n, inner = _pick_dims(p, x.shape)
    if req[1] == 'write':
        zero(in_grads[1])
    _pick_grad(out_grads[0], idx, in_grads[0], req[0], (outer, n, inner), p.mode == 'wrap')


register_op(OpDef(
    name='pick',
    backward_reads=('index',),
    aliases=('choose_element_0index',),
    arguments=['data', 'index'],
    infer_shape=_pick_infer,
    infer_type=_index_types,
    forward={'cpu': _pick_forward, 'gpu': _pick_forward},
    backward={'cpu': _pick_backward, 'gpu': _pick_backward},
    params=PickParam,
    doc='Pick one element along `axis` per position: out[.., i, ..] = data[.., index[..], '
        '..].\n\n(2, 3) with index [0, 1] and axis=-1 -> (2,) [data[0, 0], data[1, 1]]; '
        'keepdims=True -> (2, 1). `index` must have the size of `data` without `axis`; its '
        'values truncate toward 0 and clip (or wrap). Only `data` gets a gradient.\n\n'
        'Source: MXNet 1.x ``pick``.\n',
    input_docs={'data': 'Input array.', 'index': 'Index per position (any dtype).'},
))


# ------------------------------------------------------------------ batch_take
def _bt_dims(a, idx):
    a, idx = tuple(a), tuple(idx)
    n = int(np.prod(idx))
    if len(a) < 1 or int(np.prod(a[:-1])) != n:
        raise ShapeError('batch_take: `a` shape %s must be (N, M) with N = indices.size = %d '
                         '(indices shape %s)' % (a, n, idx))
    return n, a[-1], 1


def _bt_types(p, in_types, aux_types):
    """MXNet: unknown indices are int32 (other index dtypes are accepted here too)."""
    a = in_types[0]
    idx = np.dtype('int32') if in_types[1] is None else in_types[1]
    return [a, idx], [a], list(aux_types)


def _bt_infer(p, in_shapes, aux_shapes, out_shapes):
    a, idx = in_shapes
    if a is None or idx is None:
        return list(in_shapes), [None if idx is None else tuple(idx)], list(aux_shapes)
    _bt_dims(a, idx)
    return list(in_shapes), [tuple(idx)], list(aux_shapes)


def _bt_forward(ctx, p, inputs, outputs, aux):
    a, idx = inputs
    _pick_run(p, a, idx, outputs[0], _bt_dims(a.shape, idx.shape), False, 'batch_take')


def _bt_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    a, idx = inputs
    if req[1] == 'write':
        zero(in_grads[1])
    _pick_grad(out_grads[0], idx, in_grads[0], req[0], _bt_dims(a.shape, idx.shape), False)


register_op(OpDef(
    name='batch_take',
    backward_reads=('indices',),
    arguments=['a', 'indices'],
    infer_shape=_bt_infer,
    infer_type=_bt_types,
    forward={'cpu': _bt_forward, 'gpu': _bt_forward},
    backward={'cpu': _bt_backward, 'gpu': _bt_backward},
    doc='Take one element per row: out[i] = a[i, indices[i]].\n\n`a` (N, M), `indices` '
        '(N,) -> (N,); indices are truncated toward 0 and clipped into [0, M - 1]. Only `a` '
        'gets a gradient.\n\nSource: MXNet 1.x ``batch_take``.\n',
    input_docs={'a': 'Input array (N, M).', 'indices': 'Column per row (N,).'},
))


# --------------------------------------------------------------------- one_hot
@njit(**JIT)
def _one_hot_cpu(idx, out, on, off):
    depth = out.shape[1]
    for j in range(idx.size):
        v = idx[j]
        for d in range(depth):
            out[j, d] = off
        if v == v and -1.0 < v < depth:
            out[j, int(v)] = on


def _build_one_hot_gpu():
    import_cuda(globals())

    @cuda.jit
    def k(idx, out, on, off):
        depth = out.shape[1]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for e in range(start, out.size, stride):
            j, d = e // depth, e % depth
            v = idx[j]
            hit = v == v and -1.0 < v < depth and int(v) == d
            out[j, d] = on if hit else off
    return k


_ONE_HOT_GPU = LazyCudaKernel(_build_one_hot_gpu)


class OneHotParam(Params):
    """Parameters of :func:`one_hot`."""

    depth = Field(int, doc='Length of the one-hot axis.', low=0)
    on_value = Field(float, 1.0, 'Value at the index.')
    off_value = Field(float, 0.0, 'Value elsewhere.')
    dtype = Field('dtype', 'float32', 'Output dtype.')


def _one_hot_infer(p, in_shapes, aux_shapes, out_shapes):
    d = in_shapes[0]
    return list(in_shapes), [None if d is None else tuple(d) + (p.depth,)], list(aux_shapes)


def _one_hot_type(p, in_types, aux_types):
    ins = [np.dtype('float32') if t is None else t for t in in_types]
    return ins, [np.dtype(p.dtype)], list(aux_types)


def _one_hot_forward(ctx, p, inputs, outputs, aux):
    idx, out = inputs[0], outputs[0]
    if out.size == 0:
        return
    if is_gpu(idx):
        o2 = out.reshape(idx.size, p.depth)
        launch_1d(_ONE_HOT_GPU.kernel, o2.size, idx.reshape(idx.size), o2, p.on_value,
                  p.off_value)
        return
    o2 = out.reshape(idx.size, p.depth)
    tmp = o2 if out.dtype.kind == 'f' and out.dtype != np.float16 else \
        np.empty(o2.shape, np.float64)
    _one_hot_cpu(idx.reshape(-1).astype(np.float64), tmp, p.on_value, p.off_value)
    if tmp is not o2:
        o2[...] = tmp


def _one_hot_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'write':
        zero(in_grads[0])


register_op(OpDef(
    name='one_hot',
    arguments=['indices'],
    infer_shape=_one_hot_infer,
    infer_type=_one_hot_type,
    forward={'cpu': _one_hot_forward, 'gpu': _one_hot_forward},
    backward={'cpu': _one_hot_backward, 'gpu': _one_hot_backward},
    params=OneHotParam,
    zero_gradient=True,
    doc='One-hot encode: out[.., j] = on_value where j == trunc(indices[..]), off_value '
        'elsewhere.\n\nindices (2,) [1, 2.7], depth=4 -> [[0, 1, 0, 0], [0, 0, 1, 0]]; an '
        'index outside [0, depth) gives a row of off_value. Not differentiable: `indices` '
        'gets a zero gradient.\n\nSource: MXNet 1.x ``one_hot``.\n',
    input_docs={'indices': 'Indices (any dtype, any shape).'},
))
