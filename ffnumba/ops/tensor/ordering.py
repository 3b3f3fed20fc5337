"""Ordering ops: ``argmax``, ``argmin``, ``argmax_channel``, ``topk``, ``sort``, ``argsort``.

Each op works on rows along one axis: the input is viewed as
``(outer, n, inner)`` with ``n`` the size of ``axis`` (``axis=None``: the
flattened input, ``(1, size, 1)``).

Ordering is stable: equal values keep their index order, so ``argmax`` /
``argmin`` return the first extreme index (a NaN counts as the extreme of both, as
numpy and MXNet 1.9.1: the first NaN wins) and a descending sort of
``[3, 1, 1, 2]`` gives indices ``[0, 3, 1, 2]`` (as MXNet 1.9.1). The CPU
kernels sort one row at a time with a stable merge sort (``@njit``, a
row-sized scratch buffer; a small k partitions the row first); the GPU twins
rank every element against its row (``rank(j) = #{l : x_l before x_j}``, one
thread per element), which needs no scratch memory; rows longer than
``GPU_RANK_MAX`` are sorted on the host instead.

Outputs and gradients
---------------------
==============  ====================================  ==================================
op              outputs                               gradient to ``data``
==============  ====================================  ==================================
argmax/argmin   index (data's dtype); axis removed    none (zeros)
                (kept as 1 with keepdims)
argmax_channel  argmax over axis 1                    none (zeros)
topk            ret_typ value: the k largest (or      value / both: the head gradient
                smallest with is_ascend); indices:    of each value goes back to its
                their indices (``dtype``); mask: 1    element; indices / mask: zeros
                at them, 0 elsewhere; both: values
                and indices
sort            every value, ordered                  back to each element
argsort         the indices that sort (``dtype``)     none (zeros)
==============  ====================================  ==================================

``k < 1`` sorts the whole axis; ``k`` larger than the axis raises ShapeError.
As MXNet, ``topk(ret_typ='value')`` and ``sort`` have a hidden second output
(the indices), counted in the JSON ``node_row_ptr``.

Source: MXNet 1.x ``topk``/``sort``/``argsort``/``argmax`` documentation,
checked against MXNet 1.9.1.
"""
import numpy as np
from numba import njit

from ...base import ShapeError
from ..params import Field, Params
from ..registry import OpDef, register_op
from ..templates import JIT, LazyCudaKernel, import_cuda, launch_1d
from ._axismap import is_gpu, zero
from .shape import _axis

cuda = None  # bound by import_cuda(globals()) on first GPU use

__all__ = ['ArgMaxParam', 'TopKParam', 'SortParam', 'ArgSortParam']


def _rows(axis, shape, op):
    """``(a, outer, n, inner)`` of ``shape`` along ``axis`` (None: flattened, a=None)."""
    shape = tuple(shape)
    if axis is None:
        return None, 1, int(np.prod(shape)), 1
    a = _axis(axis, len(shape), 'axis', op, shape)
    return a, int(np.prod(shape[:a])), shape[a], int(np.prod(shape[a + 1:]))


def _as3(x, outer, n, inner):
    return x.reshape(outer, n, inner)


def _flat(a):
    return a.reshape(a.size)


# ---------------------------------------------------------------------- argmax
@njit(**JIT)
def _arg_cpu(x, out, want_max):
    outer, n, inner = x.shape
    for o in range(outer):
        for i in range(inner):
            best, bj = x[o, 0, i], 0
            for j in range(1, n):
                if best != best:  # a NaN is the extreme (first NaN wins, as numpy/MXNet)
                    break
                v = x[o, j, i]
                if v != v or ((v > best) if want_max else (v < best)):
                    best, bj = v, j
            out[o * inner + i] = bj


def _build_arg_gpu():
    import_cuda(globals())

    @cuda.jit
    def k(x, out, want_max):
        outer, n, inner = x.shape
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for e in range(start, outer * inner, stride):
            o, i = e // inner, e % inner
            best, bj = x[o, 0, i], 0
            for j in range(1, n):
                if best != best:
                    break
                v = x[o, j, i]
                if v != v or ((v > best) if want_max else (v < best)):
                    best, bj = v, j
            out[e] = bj
    return k


_ARG_GPU = LazyCudaKernel(_build_arg_gpu)


class ArgMaxParam(Params):
    """Parameters of :func:`argmax` and :func:`argmin`."""

    axis = Field(int, None, 'Axis to reduce (None: the flattened input).')
    keepdims = Field(bool, False, 'Keep the reduced axis with size 1.')


def _arg_out(axis, keepdims, d, op):
    a, _, n, _ = _rows(axis, d, op)
    if n == 0:
        raise ShapeError('%s: cannot reduce an empty axis (input shape %s, axis=%s)'
                         % (op, tuple(d), axis))
    if a is None:
        return (1,) * len(d) if keepdims else (1,)
    return tuple(d[:a]) + ((1,) if keepdims else ()) + tuple(d[a + 1:])


def _make_arg(name, want_max, get_axis, get_keep, params, doc, aliases=()):
    def infer(p, in_shapes, aux_shapes, out_shapes):
        d = in_shapes[0]
        out = None if d is None else _arg_out(get_axis(p), get_keep(p), d, name)
        return list(in_shapes), [out], list(aux_shapes)

    def forward(ctx, p, inputs, outputs, aux):
        x, out = inputs[0], outputs[0]
        _, outer, n, inner = _rows(get_axis(p), x.shape, name)
        if outer * inner == 0:
            return
        x3 = _as3(x, outer, n, inner)
        if is_gpu(x):
            launch_1d(_ARG_GPU.kernel, outer * inner, x3, _flat(out), want_max)
            return
        res = np.empty(outer * inner, np.float64)
        _arg_cpu(x3.astype(np.float32) if x.dtype == np.float16 else x3, res, want_max)
        out.reshape(-1)[...] = res

    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        if req[0] == 'write':
            zero(in_grads[0])

    register_op(OpDef(name=name, aliases=aliases, arguments=['data'], infer_shape=infer,
                      forward={'cpu': forward, 'gpu': forward},
                      backward={'cpu': backward, 'gpu': backward},
                      params=params, doc=doc, input_docs={'data': 'Input array.'},
                      zero_gradient=True))


_make_arg('argmax', True, lambda p: p.axis, lambda p: p.keepdims, ArgMaxParam,
          'Index of the largest element along `axis` (the first on ties), in the input dtype.'
          '\n\n(2, 3, 4), axis=1 -> (2, 4); axis=None -> (1,). Not differentiable.\n\n'
          'Source: MXNet 1.x ``argmax``.\n')
class ArgMinParam(ArgMaxParam):
    """Parameters of :func:`argmin`."""


_make_arg('argmin', False, lambda p: p.axis, lambda p: p.keepdims, ArgMinParam,
          'Index of the smallest element along `axis` (the first on ties), in the input '
          'dtype.\n\nNot differentiable.\n\nSource: MXNet 1.x ``argmin``.\n')


class ArgMaxChannelParam(Params):
    """Parameters of :func:`argmax_channel` (none)."""


_make_arg('argmax_channel', True, lambda p: 1, lambda p: False, ArgMaxChannelParam,
          'argmax over axis 1 (the channel axis).\n\n(2, 3) -> (2,); (2, 3, 4) -> (2, 4) '
          '(as MXNet 1.9.1). Not differentiable.\n\nSource: MXNet 1.x ``argmax_channel``.\n')


# ------------------------------------------------------------------ sort kernels
@njit(**JIT)
def _row_order(x, o, i, asc, buf, k):
    """The first ``k`` positions of row ``x[o, :, i]`` in stable order.

    Ascending, or descending by ordering ``-x``; ties keep index order. For a
    small ``k`` the row is partitioned around its k-th key first (O(n)), and
    only the k chosen positions are sorted.
    """
    n = buf.size
    for j in range(n):
        v = np.float64(x[o, j, i])        # float first: no unsigned wrap-around on negation
        buf[j] = v if asc else -v
    if 4 * k >= n:
        return np.argsort(buf, kind='mergesort')
    kth = np.partition(buf, k - 1)[k - 1]
    sel = np.empty(k, np.int64)
    c = 0
    for j in range(n):                    # keys below the k-th, in index order
        if buf[j] < kth:
            sel[c] = j
            c += 1
    for j in range(n):                    # then the first keys equal to it
        if c < k and buf[j] == kth:
            sel[c] = j
            c += 1
    if c < k:                             # NaN keys: fall back to the full sort
        return np.argsort(buf, kind='mergesort')
    keys = np.empty(k, np.float64)
    for r in range(k):
        keys[r] = buf[sel[r]]
    return sel[np.argsort(keys, kind='mergesort')]


@njit(**JIT)
def _topk_cpu(x, k, asc, vals, idxs, mask, want_v, want_i, want_m):
    # one row at a time: only a row-sized scratch buffer besides the outputs
    outer, n, inner = x.shape
    buf = np.empty(n, np.float64)
    for o in range(outer):
        for i in range(inner):
            order = _row_order(x, o, i, asc, buf, k)
            if want_m:
                for j in range(n):
                    mask[o, j, i] = 0
            for r in range(k):
                j = order[r]
                if want_v:
                    vals[o, r, i] = x[o, j, i]
                if want_i:
                    idxs[o, r, i] = j
                if want_m:
                    mask[o, j, i] = 1


@njit(**JIT)
def _topk_bwd_cpu(x, k, asc, og, ig, add):
    outer, n, inner = x.shape
    buf = np.empty(n, np.float64)
    for o in range(outer):
        for i in range(inner):
            order = _row_order(x, o, i, asc, buf, k)
            if not add:
                for j in range(n):
                    ig[o, j, i] = 0
            for r in range(k):
                ig[o, order[r], i] += og[o, r, i]


def _build_order_gpu():
    import_cuda(globals())

    @cuda.jit(device=True)
    def rank(x, o, j, i, asc):
        n = x.shape[1]
        v, r = x[o, j, i], 0
        for l in range(n):
            u = x[o, l, i]
            if (u < v if asc else u > v) or (u == v and l < j):
                r += 1
        return r

    @cuda.jit
    def fwd(x, k, asc, vals, idxs, mask, want_v, want_i, want_m):
        outer, n, inner = x.shape
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for e in range(start, outer * n * inner, stride):
            o, rem = e // (n * inner), e % (n * inner)
            j, i = rem // inner, rem % inner
            r = rank(x, o, j, i, asc)
            if r < k:
                if want_v:
                    vals[o, r, i] = x[o, j, i]
                if want_i:
                    idxs[o, r, i] = j
            if want_m:
                mask[o, j, i] = 1 if r < k else 0

    @cuda.jit
    def bwd(x, k, asc, og, ig, add):
        outer, n, inner = x.shape
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for e in range(start, outer * n * inner, stride):
            o, rem = e // (n * inner), e % (n * inner)
            j, i = rem // inner, rem % inner
            r = rank(x, o, j, i, asc)
            g = og[o, r, i] if r < k else 0.0
            if add:
                ig[o, j, i] += g
            else:
                ig[o, j, i] = g

    return fwd, bwd


_ORDER_GPU = LazyCudaKernel(_build_order_gpu)

#: Longest row the GPU kernels rank in place (O(n^2) work per row); longer rows are
#: sorted on the host (a copy each way).
GPU_RANK_MAX = 2048


# ------------------------------------------------------------------------ topk
class TopKParam(Params):
    """Parameters of :func:`topk`."""

    axis = Field(int, -1, 'Axis to select along (None: the flattened input).', optional=True)
    k = Field(int, 1, 'Number of elements to select; k < 1 sorts the whole axis.')
    ret_typ = Field(str, 'indices', 'What to return: value, indices, mask or both (values '
                                    'and indices).', choices=('both', 'indices', 'mask', 'value'))
    is_ascend = Field(bool, False, 'Select the smallest instead of the largest.')
    dtype = Field('dtype', 'float32', 'dtype of the returned indices.')


def _k_of(p, n, shape, op):
    k = p.k if p.k >= 1 else n
    if k > n:
        raise ShapeError('%s: k=%d must not exceed the size %d of the axis (input shape %s, '
                         'axis=%s)' % (op, p.k, n, tuple(shape), p.axis))
    return k


def _topk_infer(p, in_shapes, aux_shapes, out_shapes):
    return _topk_shapes(p, in_shapes, aux_shapes, 'topk')


def _topk_shapes(p, in_shapes, aux_shapes, op):
    d = in_shapes[0]
    n_out = 2 if p.ret_typ == 'both' else 1
    if d is None:
        return list(in_shapes), [None] * n_out, list(aux_shapes)
    a, _, n, _ = _rows(p.axis, d, op)
    k = _k_of(p, n, d, op)
    if p.ret_typ == 'mask':
        return list(in_shapes), [tuple(d)], list(aux_shapes)
    out = (k,) if a is None else tuple(d[:a]) + (k,) + tuple(d[a + 1:])
    return list(in_shapes), [out] * n_out, list(aux_shapes)


def _topk_type(p, in_types, aux_types):
    t = in_types[0] if in_types[0] is not None else np.dtype('float32')
    outs = {'value': [t], 'indices': [np.dtype(p.dtype)], 'mask': [t],
            'both': [t, np.dtype(p.dtype)]}[p.ret_typ]
    return [t], outs, list(aux_types)


def _order_forward(p, x, outputs, op):
    _, outer, n, inner = _rows(p.axis, x.shape, op)
    k = _k_of(p, n, x.shape, op)
    want_v = p.ret_typ in ('value', 'both')
    want_i = p.ret_typ in ('indices', 'both')
    want_m = p.ret_typ == 'mask'
    if outer * n * inner == 0:
        return
    outs = list(outputs)
    vals = outs.pop(0) if want_v else None
    idxs = outs.pop(0) if want_i else None
    mask = outs.pop(0) if want_m else None
    x3 = _as3(x, outer, n, inner)
    if is_gpu(x) and n > GPU_RANK_MAX:
        # long rows: the per-element rank is O(n^2); sort on the host instead
        host = [np.empty(tuple(a.shape), a.dtype) for a in outputs]
        _order_forward(p, x.copy_to_host(), host, op)
        for dev, h in zip(outputs, host):
            dev.copy_to_device(h)
        return
    if is_gpu(x):
        from numba import cuda as _cuda
        dummy = _cuda.device_array((1, 1, 1), np.float64)
        v3 = _as3(vals, outer, k, inner) if want_v else dummy
        i3 = _as3(idxs, outer, k, inner) if want_i else dummy
        m3 = _as3(mask, outer, n, inner) if want_m else dummy
        fwd, _ = _ORDER_GPU.kernel
        launch_1d(fwd, outer * n * inner, x3, k, p.is_ascend, v3, i3, m3, want_v, want_i,
                  want_m)
        return
    f32 = lambda a: a.astype(np.float32) if a.dtype == np.float16 else a   # noqa: E731
    none = np.empty((1, 1, 1), np.float64)      # stands in for an output not asked for
    v3 = f32(_as3(vals, outer, k, inner)) if want_v else none
    i3 = f32(_as3(idxs, outer, k, inner)) if want_i else none
    m3 = f32(_as3(mask, outer, n, inner)) if want_m else none
    _topk_cpu(f32(x3), k, p.is_ascend, v3, i3, m3, want_v, want_i, want_m)
    for arr, tmp in ((vals, v3), (idxs, i3), (mask, m3)):
        if arr is not None and arr.dtype == np.float16:
            arr.reshape(tmp.shape)[...] = tmp


def _order_backward(p, x, og, ig, r, op):
    if r == 'null':
        return
    _, outer, n, inner = _rows(p.axis, x.shape, op)
    k = _k_of(p, n, x.shape, op)
    if p.ret_typ in ('indices', 'mask') or og is None or outer * n * inner == 0:
        if r == 'write':
            zero(ig)
        return
    if is_gpu(x) and n > GPU_RANK_MAX:
        g = ig.copy_to_host()
        _order_backward(p, x.copy_to_host(), og.copy_to_host(), g, r, op)
        ig.copy_to_device(g)
        return
    x3, g3 = _as3(x, outer, n, inner), _as3(ig, outer, n, inner)
    if is_gpu(x):
        _, bwd = _ORDER_GPU.kernel
        launch_1d(bwd, outer * n * inner, x3, k, p.is_ascend, _as3(og, outer, k, inner), g3,
                  r == 'add')
        return
    if ig.dtype == np.float16:
        g32 = g3.astype(np.float32)
        _topk_bwd_cpu(x3.astype(np.float32), k, p.is_ascend,
                      _as3(og, outer, k, inner).astype(np.float32), g32, r == 'add')
        g3[...] = g32
    else:
        _topk_bwd_cpu(x3, k, p.is_ascend, _as3(og, outer, k, inner), g3, r == 'add')


def _topk_forward(ctx, p, inputs, outputs, aux):
    _order_forward(p, inputs[0], outputs, 'topk')


def _topk_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    _order_backward(p, inputs[0], out_grads[0], in_grads[0], req[0], 'topk')


register_op(OpDef(
    name='topk',
    arguments=['data'],
    outputs=lambda p: (['output0', 'output1'] if p.ret_typ == 'both'
                       else ['output0'] if p.ret_typ == 'value' else ['output']),
    num_hidden_outputs=lambda p: 1 if p.ret_typ == 'value' else 0,
    infer_shape=_topk_infer,
    infer_type=_topk_type,
    forward={'cpu': _topk_forward, 'gpu': _topk_forward},
    backward={'cpu': _topk_backward, 'gpu': _topk_backward},
    params=TopKParam,
    zero_gradient=lambda p: p.ret_typ in ('indices', 'mask'),
    doc='The k largest (or smallest) elements along `axis`.\n\n[[0, 1, 2, 3], ...] with '
        'k=2: indices [[3, 2], ...]; ret_typ=value: [[3, 2], ...]; mask: [[0, 0, 1, 1], ...]; '
        'both: values and indices. Ties keep index order. Gradient (value/both): each '
        'value\'s head gradient goes back to its element.\n\nSource: MXNet 1.x ``topk``.\n',
    input_docs={'data': 'Input array.'},
))


# ------------------------------------------------------------------ sort, argsort
class SortParam(Params):
    """Parameters of :func:`sort`."""

    axis = Field(int, -1, 'Axis to sort along (None: the flattened input).', optional=True)
    is_ascend = Field(bool, True, 'Ascending (default) or descending order.')


class ArgSortParam(SortParam):
    """Parameters of :func:`argsort`."""

    dtype = Field('dtype', 'float32', 'dtype of the returned indices.')


class _AsTopK:
    """A sort/argsort params record seen as the topk it is (k=0: the whole axis)."""

    def __init__(self, p, ret_typ):
        self.axis, self.is_ascend, self.k, self.ret_typ = p.axis, p.is_ascend, 0, ret_typ
        self.dtype = getattr(p, 'dtype', 'float32')


def _register_sort(name, params, ret_typ, doc, outputs, hidden):
    def infer(p, in_shapes, aux_shapes, out_shapes):
        return _topk_shapes(_AsTopK(p, ret_typ), in_shapes, aux_shapes, name)

    def infer_type(p, in_types, aux_types):
        return _topk_type(_AsTopK(p, ret_typ), in_types, aux_types)

    def forward(ctx, p, inputs, outputs, aux):
        _order_forward(_AsTopK(p, ret_typ), inputs[0], outputs, name)

    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        _order_backward(_AsTopK(p, ret_typ), inputs[0], out_grads[0], in_grads[0], req[0],
                        name)

    register_op(OpDef(name=name, arguments=['data'], outputs=outputs,
                      num_hidden_outputs=hidden, infer_shape=infer, infer_type=infer_type,
                      forward={'cpu': forward, 'gpu': forward},
                      backward={'cpu': backward, 'gpu': backward},
                      params=params, doc=doc, input_docs={'data': 'Input array.'},
                      zero_gradient=ret_typ == 'indices'))


_register_sort('sort', SortParam, 'value',
               'Sort along `axis` (ascending by default; stable).\n\naxis=None sorts the '
               'flattened input. The gradient of each sorted value goes back to its element.'
               '\n\nSource: MXNet 1.x ``sort``.\n', ['output0'], 1)
_register_sort('argsort', ArgSortParam, 'indices',
               'Indices that sort `data` along `axis` (stable; ascending by default), in '
               '`dtype`.\n\n[[3, 1, 1, 2, 1]] -> [[1, 2, 4, 3, 0]]. Not differentiable.\n\n'
               'Source: MXNet 1.x ``argsort``.\n', ['output'], 0)
