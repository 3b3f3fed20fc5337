"""Join and split ops: Concat, SliceChannel (split) and slice_axis.

These ops move blocks of an array along one axis without arithmetic. Each
views its arrays as ``(outer, size along the axis, inner)`` and copies whole
blocks: numpy assignments between views on the CPU, the strided grid-stride
copy kernel of :mod:`ffnumba.ops.tensor.shape` on the GPU. Backwards copy or
add the head gradients back into the matching blocks (a gradient outside a
slice is 0).

Shapes
------
=============  ==============================  ================================
op             inputs                          output(s)
=============  ==============================  ================================
Concat         ``arg0..arg{k-1}``, dim         sizes summed along ``dim``
SliceChannel   ``data``, num_outputs k, axis   k outputs, ``axis`` size / k
                                               (dropped if squeeze_axis)
slice_axis     ``data``, axis, begin, end      ``axis`` size ``end - begin``
=============  ==============================  ================================

Source: MXNet 1.x operator documentation, every example checked against
MXNet 1.9.1.
"""
from ...base import ShapeError
from ..params import Field, Params
from ..registry import OpDef, register_op, shape_assign
from ...thread_pool import SPLIT_MIN_ELEMS, split_range
from ..templates import fill_gpu
from .shape import _axis, _gpu_block, _outer_inner, _put, _size

__all__ = ['ConcatParam', 'SliceChannelParam', 'SliceAxisParam']


# ---------------------------------------------------------------------- Concat
class ConcatParam(Params):
    """Parameters of :func:`Concat`."""

    num_args = Field(int, doc='Number of inputs (set from the inputs given).', low=1)
    dim = Field(int, 1, 'Axis along which to concatenate (negative counts from the end).')


def _concat_args(p):
    return ['arg%d' % i for i in range(p.num_args)]


def _concat_infer(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    o = out_shapes[0] if out_shapes else None
    names = _concat_args(p)
    ref = next((i for i, s in enumerate(ins) if s is not None), None)
    ref_shape = ins[ref] if ref is not None else o
    if ref_shape is None:
        return ins, [None], list(aux_shapes)
    nd = len(ref_shape)
    dim = _axis(p.dim, nd, 'dim', 'Concat', ref_shape)

    def check(name, s, rname, r):
        if len(s) != nd or any(s[j] != r[j] for j in range(nd) if j != dim):
            raise ShapeError('Concat: shape %s of input %s does not match %s of %s: every '
                             'axis but dim=%d must agree' % (tuple(s), name, tuple(r), rname, dim))

    for i, s in enumerate(ins):
        if s is not None and ref is not None:
            check(names[i], s, names[ref], ins[ref])
    missing = [i for i, s in enumerate(ins) if s is None]
    if o is not None:
        if ref is not None:
            check('output', o, names[ref], ins[ref])
        if len(missing) == 1:
            rest = o[dim] - sum(s[dim] for s in ins if s is not None)
            if rest <= 0:
                raise ShapeError('Concat: output shape %s is too small for the inputs %s'
                                 % (tuple(o), [tuple(s) for s in ins if s is not None]))
            shape_assign(ins, missing[0], tuple(o[:dim]) + (rest,) + tuple(o[dim + 1:]),
                         names[missing[0]])
            missing = []
    if missing:
        return ins, [None], list(aux_shapes)
    r = ins[0]
    out = tuple(r[:dim]) + (sum(s[dim] for s in ins),) + tuple(r[dim + 1:])
    return ins, [out], list(aux_shapes)


def _as3(x, axis):
    """View ``x`` as ``(outer, x.shape[axis], inner)``."""
    # sizes spelled out, not -1: numpy cannot infer -1 for an array of size 0
    return x.reshape(_size(x.shape[:axis]), x.shape[axis], _size(x.shape[axis + 1:]))


def _by_outer(fn, o3):
    """``fn(lo, hi)`` over the outer index of ``o3``, cut over the kernel threads when
    large (numpy's copies release the GIL): the same values as one call."""
    per = max(1, o3.shape[1] * o3.shape[2])
    split_range(fn, o3.shape[0], -(-SPLIT_MIN_ELEMS // per), 1)


def _concat_forward(ctx, p, inputs, outputs, aux):
    out = outputs[0]
    dim = _axis(p.dim, out.ndim, 'dim', 'Concat', out.shape)
    o3 = _as3(out, dim)
    x3s = [_as3(x, dim) for x in inputs]

    def copy(lo, hi):
        off = 0
        for x3 in x3s:
            n = x3.shape[1]
            o3[lo:hi, off:off + n, :] = x3[lo:hi]
            off += n
    _by_outer(copy, o3)


def _concat_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    og = out_grads[0]
    dim = _axis(p.dim, og.ndim, 'dim', 'Concat', og.shape)
    g3 = _as3(og, dim)
    gs = [(x.shape[dim], _as3(g, dim) if r != 'null' else None, r)
          for x, g, r in zip(inputs, in_grads, req)]

    def copy(lo, hi):
        off = 0
        for n, g, r in gs:
            if r != 'null':
                _put(g[lo:hi], g3[lo:hi, off:off + n, :], r)
            off += n
    _by_outer(copy, g3)


def _concat_forward_gpu(ctx, p, inputs, outputs, aux):
    out = outputs[0]
    dim = _axis(p.dim, out.ndim, 'dim', 'Concat', tuple(out.shape))
    outer, inner = _outer_inner(out.shape, dim)
    total, off = tuple(out.shape)[dim], 0
    for x in inputs:
        n = tuple(x.shape)[dim]
        _gpu_block(x, n, 0, out, total, off, outer, n, inner, False)
        off += n


def _concat_backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    og = out_grads[0]
    dim = _axis(p.dim, og.ndim, 'dim', 'Concat', tuple(og.shape))
    outer, inner = _outer_inner(og.shape, dim)
    total, off = tuple(og.shape)[dim], 0
    for x, g, r in zip(inputs, in_grads, req):
        n = tuple(x.shape)[dim]
        if r != 'null':
            _gpu_block(og, total, off, g, n, 0, outer, n, inner, r == 'add')
        off += n


register_op(OpDef(
    name='Concat',
    backward_reads=(),   # slices of dy
    aliases=('concat',),
    arguments=_concat_args,
    infer_shape=_concat_infer,
    forward={'cpu': _concat_forward, 'gpu': _concat_forward_gpu},
    backward={'cpu': _concat_backward, 'gpu': _concat_backward_gpu},
    params=ConcatParam,
    variadic='num_args',
    doc='Join arrays along an existing axis.\n\nEvery axis but `dim` must agree; the '
        'output size along `dim` is the sum of the inputs\'.\n',
    input_docs={'data': 'The arrays to join (arg0, arg1, ...).'},
))


# ---------------------------------------------------------------- SliceChannel
class SliceChannelParam(Params):
    """Parameters of :func:`SliceChannel`."""

    num_outputs = Field(int, doc='Number of equal parts to split into.', low=1)
    axis = Field(int, 1, 'Axis to split along (negative counts from the end).')
    squeeze_axis = Field(bool, False, 'Drop the split axis (its size must equal num_outputs).')


def _split_outputs(p):
    return ['output%d' % i for i in range(p.num_outputs)]


def _split_infer(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    k = p.num_outputs
    d = ins[0]
    o = next((s for s in (out_shapes or []) if s is not None), None)
    if d is None and o is not None:
        nd = len(o) + (1 if p.squeeze_axis else 0)
        a = p.axis + nd if p.axis < 0 else p.axis
        if 0 <= a < nd:
            if p.squeeze_axis:
                ins[0] = tuple(o[:a]) + (k,) + tuple(o[a:])
            else:
                ins[0] = tuple(o[:a]) + (o[a] * k,) + tuple(o[a + 1:])
            d = ins[0]
    if d is None:
        return ins, [None] * k, list(aux_shapes)
    a = _axis(p.axis, len(d), 'axis', 'SliceChannel', d)
    if d[a] % k:
        raise ShapeError('SliceChannel: cannot split axis %d of input shape %s into '
                         'num_outputs=%d equal parts' % (a, tuple(d), k))
    if p.squeeze_axis:
        if d[a] != k:
            raise ShapeError('SliceChannel: with squeeze_axis=True the size of axis %d must equal '
                             'num_outputs=%d. Received: input shape %s' % (a, k, tuple(d)))
        out = tuple(d[:a]) + tuple(d[a + 1:])
    else:
        out = tuple(d[:a]) + (d[a] // k,) + tuple(d[a + 1:])
    return ins, [out] * k, list(aux_shapes)


def _split_forward(ctx, p, inputs, outputs, aux):
    x = inputs[0]
    a = _axis(p.axis, x.ndim, 'axis', 'SliceChannel', x.shape)
    x3, n = _as3(x, a), x.shape[a] // p.num_outputs
    for i, out in enumerate(outputs):
        out.reshape(x3.shape[0], n, x3.shape[2])[...] = x3[:, i * n:(i + 1) * n, :]


def _split_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'null':
        return
    x = inputs[0]
    a = _axis(p.axis, x.ndim, 'axis', 'SliceChannel', x.shape)
    g3, n = _as3(in_grads[0], a), x.shape[a] // p.num_outputs
    for i, og in enumerate(out_grads):
        part = g3[:, i * n:(i + 1) * n, :]
        if og is None:
            if req[0] == 'write':
                part[...] = 0
            continue
        _put(part, og.reshape(part.shape), req[0])


def _split_forward_gpu(ctx, p, inputs, outputs, aux):
    x = inputs[0]
    a = _axis(p.axis, x.ndim, 'axis', 'SliceChannel', tuple(x.shape))
    outer, inner = _outer_inner(x.shape, a)
    total = tuple(x.shape)[a]
    n = total // p.num_outputs
    for i, out in enumerate(outputs):
        _gpu_block(x, total, i * n, out, n, 0, outer, n, inner, False)


def _split_backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'null':
        return
    x, g = inputs[0], in_grads[0]
    a = _axis(p.axis, x.ndim, 'axis', 'SliceChannel', tuple(x.shape))
    outer, inner = _outer_inner(x.shape, a)
    total = tuple(x.shape)[a]
    n = total // p.num_outputs
    if req[0] == 'write':
        fill_gpu.launch(g.size, g.reshape(-1), 0)
    for i, og in enumerate(out_grads):
        if og is not None:
            _gpu_block(og, n, 0, g, total, i * n, outer, n, inner, True)


register_op(OpDef(
    name='SliceChannel',
    backward_reads=(),
    aliases=('split',),
    arguments=['data'],
    outputs=_split_outputs,
    infer_shape=_split_infer,
    forward={'cpu': _split_forward, 'gpu': _split_forward_gpu},
    backward={'cpu': _split_backward, 'gpu': _split_backward_gpu},
    params=SliceChannelParam,
    doc='Split an array into `num_outputs` equal parts along `axis`.\n\n'
        '(2, 6), num_outputs=3, axis=1 -> three (2, 2); squeeze_axis drops the axis '
        'when each part has size 1 there.\n',
    input_docs={'data': 'Input array.'},
))


# ------------------------------------------------------------------ slice_axis
class SliceAxisParam(Params):
    """Parameters of :func:`slice_axis`."""

    axis = Field(int, doc='Axis to slice (negative counts from the end).')
    begin = Field(int, doc='First index (negative counts from the end).')
    end = Field(int, None, 'One past the last index (None: the axis size; negative '
                           'counts from the end).')


def _slice_range(p, shape):
    a = _axis(p.axis, len(shape), 'axis', 'slice_axis', shape)
    n = shape[a]
    b = p.begin + n if p.begin < 0 else p.begin
    e = n if p.end is None else (p.end + n if p.end < 0 else p.end)
    if not (0 <= b < e <= n):
        raise ShapeError('slice_axis: invalid range begin=%s, end=%s for axis %d of size %d '
                         '(input shape %s); need 0 <= begin < end <= size after adding the '
                         'size to negatives' % (p.begin, p.end, a, n, tuple(shape)))
    return a, b, e


def _slice_infer(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    d = ins[0]
    if d is None:
        return ins, [None], list(aux_shapes)
    a, b, e = _slice_range(p, d)
    return ins, [tuple(d[:a]) + (e - b,) + tuple(d[a + 1:])], list(aux_shapes)


def _slice_forward(ctx, p, inputs, outputs, aux):
    x = inputs[0]
    a, b, e = _slice_range(p, x.shape)
    out = outputs[0]
    _as3(out, a)[...] = _as3(x, a)[:, b:e, :]


def _slice_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'null':
        return
    x = inputs[0]
    a, b, e = _slice_range(p, x.shape)
    g3 = _as3(in_grads[0], a)
    if req[0] == 'write':
        g3[:, :b, :] = 0
        g3[:, e:, :] = 0
    _put(g3[:, b:e, :], _as3(out_grads[0], a), req[0])


def _slice_forward_gpu(ctx, p, inputs, outputs, aux):
    x = inputs[0]
    a, b, e = _slice_range(p, tuple(x.shape))
    outer, inner = _outer_inner(x.shape, a)
    _gpu_block(x, tuple(x.shape)[a], b, outputs[0], e - b, 0, outer, e - b, inner, False)


def _slice_backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'null':
        return
    x, g = inputs[0], in_grads[0]
    a, b, e = _slice_range(p, tuple(x.shape))
    outer, inner = _outer_inner(x.shape, a)
    if req[0] == 'write':
        fill_gpu.launch(g.size, g.reshape(-1), 0)
    _gpu_block(out_grads[0], e - b, 0, g, tuple(x.shape)[a], b, outer, e - b, inner, True)


register_op(OpDef(
    name='slice_axis',
    backward_reads=(),
    arguments=['data'],
    infer_shape=_slice_infer,
    forward={'cpu': _slice_forward, 'gpu': _slice_forward_gpu},
    backward={'cpu': _slice_backward, 'gpu': _slice_backward_gpu},
    params=SliceAxisParam,
    doc='Take the range [begin, end) of one axis.\n\n(2, 5), axis=1, begin=1, end=None -> '
        '(2, 4); begin=-3, end=-1 -> (2, 2). The gradient outside the range is 0.\n',
    input_docs={'data': 'Input array.'},
))
