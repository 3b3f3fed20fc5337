"""Copying ops: ``squeeze``, ``reshape_like``, ``_copy`` (``identity``), ``add_n``
(``ElementWiseSum``), ``shape_array`` and ``size_array``.

``squeeze``, ``reshape_like`` and ``_copy`` copy the data unchanged into an
output of another shape (the flat copy kernels of
:mod:`ffnumba.ops.tensor.shape`); their gradient is the head gradient, copied
back. ``add_n`` sums its inputs elementwise; each input's gradient is the head
gradient. ``shape_array`` / ``size_array`` return the input's shape / element
count as int64 and are not differentiable (zero gradient, as MXNet).

Shapes
------
=============  ===================================  =====================================
op             inputs, params                       output
=============  ===================================  =====================================
squeeze        ``data``, axis (None: every 1)       axes of size 1 removed; (1,) if none
                                                    would be left
reshape_like   ``lhs``, ``rhs``, lhs_begin/end,     ``lhs.shape[:lb] + rhs.shape[rb:re] +
               rhs_begin/end (None: whole)          lhs.shape[le:]`` (same element count)
_copy          ``data``                             same shape
add_n          ``arg0 .. arg{k-1}``, same shapes    same shape, the sum
shape_array    ``data``                             (ndim,) int64
size_array     ``data``                             (1,) int64
=============  ===================================  =====================================

Source: MXNet 1.x operator documentation, checked against MXNet 1.9.1.
"""
import numpy as np

from ...base import ShapeError
from ..params import Field, Params, Shape
from ..registry import OpDef, register_op, same_shape
from ..templates import LazyCudaKernel, import_cuda, launch_1d
from ._axismap import first_type, is_gpu, zero
from .shape import _COPY_BWD, _COPY_FWD, _axis, _copy_backward, _copy_forward, _put

cuda = None  # bound by import_cuda(globals()) on first GPU use

__all__ = ['SqueezeParam', 'ReshapeLikeParam', 'AddNParam']

_COPY = dict(forward={'cpu': _copy_forward, 'gpu': _COPY_FWD['gpu']},
             backward={'cpu': _copy_backward, 'gpu': _COPY_BWD['gpu']})


# --------------------------------------------------------------------- squeeze
class SqueezeParam(Params):
    """Parameters of :func:`squeeze`."""

    axis = Field(Shape, None, 'Axes to remove (each of size 1); None removes every axis of '
                              'size 1.')


def _squeeze_out(p, d):
    d = tuple(d)
    if p.axis is None:
        drop = {a for a, n in enumerate(d) if n == 1}
    else:
        drop = set()
        for a in p.axis:
            ax = _axis(a, len(d), 'axis', 'squeeze', d)
            if ax in drop:
                raise ShapeError('squeeze: axis %d is listed twice in axis=%s (input shape %s)'
                                 % (ax, tuple(p.axis), d))
            if d[ax] != 1:
                raise ShapeError('squeeze: axis %d of input shape %s has size %d, not 1'
                                 % (ax, d, d[ax]))
            drop.add(ax)
    out = tuple(n for a, n in enumerate(d) if a not in drop)
    return out if out else (1,)


def _squeeze_infer(p, in_shapes, aux_shapes, out_shapes):
    d = in_shapes[0]
    return list(in_shapes), [None if d is None else _squeeze_out(p, d)], list(aux_shapes)


register_op(OpDef(
    name='squeeze',
    backward_reads=(),
    arguments=['data'],
    infer_shape=_squeeze_infer,
    params=SqueezeParam,
    doc='Remove axes of size 1.\n\n(2, 1, 3, 1) -> (2, 3); axis=(1,) -> (2, 3, 1); (1, 1) '
        '-> (1,) (MXNet 1.x keeps one axis). Raises ShapeError for a listed axis whose size '
        'is not 1.\n\nSource: MXNet 1.x ``squeeze``.\n',
    input_docs={'data': 'Input array.'},
    **_COPY))


# ---------------------------------------------------------------- reshape_like
class ReshapeLikeParam(Params):
    """Parameters of :func:`reshape_like`."""

    lhs_begin = Field(int, None, 'First axis of lhs to replace (None: 0).')
    lhs_end = Field(int, None, 'End (exclusive) of the lhs axes to replace (None: ndim).')
    rhs_begin = Field(int, None, 'First axis of rhs giving the new sizes (None: 0).')
    rhs_end = Field(int, None, 'End (exclusive) of those rhs axes (None: ndim).')


def _span(b, e, nd, what, shape):
    b = 0 if b is None else (b + nd if b < 0 else b)
    e = nd if e is None else (e + nd if e < 0 else e)
    if not 0 <= b <= e <= nd:
        raise ShapeError('reshape_like: %s_begin/%s_end select [%d, %d), not a range of the %d '
                         'axes of %s shape %s' % (what, what, b, e, nd, what, tuple(shape)))
    return b, e


def _rlike_out(p, lhs, rhs):
    lhs, rhs = tuple(lhs), tuple(rhs)
    lb, le = _span(p.lhs_begin, p.lhs_end, len(lhs), 'lhs', lhs)
    rb, re_ = _span(p.rhs_begin, p.rhs_end, len(rhs), 'rhs', rhs)
    out = lhs[:lb] + rhs[rb:re_] + lhs[le:]
    if int(np.prod(out)) != int(np.prod(lhs)):
        raise ShapeError('reshape_like: cannot reshape lhs shape %s to %s (from rhs shape %s): '
                         'they have %d and %d elements' % (lhs, out, rhs, int(np.prod(lhs)),
                                                           int(np.prod(out))))
    return out


def _rlike_infer(p, in_shapes, aux_shapes, out_shapes):
    lhs, rhs = in_shapes
    out = None if lhs is None or rhs is None else _rlike_out(p, lhs, rhs)
    return list(in_shapes), [out], list(aux_shapes)


def _rlike_backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    _copy_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux)
    if req[1] == 'write':
        zero(in_grads[1])


def _rlike_backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    _COPY_BWD['gpu'](ctx, p, out_grads, inputs, outputs, in_grads, req, aux)
    if req[1] == 'write':
        zero(in_grads[1])


register_op(OpDef(
    name='reshape_like',
    backward_reads=(),
    arguments=['lhs', 'rhs'],
    infer_shape=_rlike_infer,
    infer_type=first_type,
    forward=_COPY['forward'],
    backward={'cpu': _rlike_backward_cpu, 'gpu': _rlike_backward_gpu},
    params=ReshapeLikeParam,
    doc='Reshape `lhs` to the shape of `rhs` (or replace lhs axes [lhs_begin, lhs_end) by '
        'rhs axes [rhs_begin, rhs_end)).\n\n(2, 3, 4) like (6, 4, 3) with lhs_begin=1, '
        'rhs_begin=1 -> (2, 4, 3). The element counts must agree. `rhs` gets a zero '
        'gradient.\n\nSource: MXNet 1.x ``reshape_like``.\n',
    input_docs={'lhs': 'Array to reshape.', 'rhs': 'Array whose shape is used.'},
))


# ----------------------------------------------------------------------- _copy
register_op(OpDef(
    name='_copy',
    backward_reads=(),
    aliases=('identity',),
    arguments=['data'],
    infer_shape=same_shape,
    doc='Copy of the input (gradient: the head gradient).\n\nSource: MXNet 1.x ``_copy`` '
        '(alias ``identity``).\n',
    input_docs={'data': 'Input array.'},
    **_COPY))


# ----------------------------------------------------------------------- add_n
def _build_add_gpu():
    import_cuda(globals())

    @cuda.jit
    def k(dst, src, first):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, dst.size, stride):
            if first:
                dst[i] = src[i]
            else:
                dst[i] += src[i]
    return k


_ADD_GPU = LazyCudaKernel(_build_add_gpu)


class AddNParam(Params):
    """Parameters of :func:`add_n`."""

    num_args = Field(int, doc='Number of inputs (set from the inputs given).', low=1)


def _addn_forward(ctx, p, inputs, outputs, aux):
    out = outputs[0]
    if is_gpu(out):
        for i, x in enumerate(inputs):
            if x.size:
                launch_1d(_ADD_GPU.kernel, x.size, out.reshape(out.size), x.reshape(x.size),
                          i == 0)
        return
    np.copyto(out, inputs[0])
    for x in inputs[1:]:
        np.add(out, x, out=out)


def _addn_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    og = out_grads[0]
    for g, r in zip(in_grads, req):
        if r == 'null' or g is None:
            continue
        if is_gpu(og):
            if r == 'write':
                zero(g)
            if g.size:
                launch_1d(_ADD_GPU.kernel, g.size, g.reshape(g.size), og.reshape(og.size), False)
        else:
            _put(g, og, r)


register_op(OpDef(
    name='add_n',
    backward_reads=(),
    aliases=('ElementWiseSum',),
    arguments=lambda p: ['arg%d' % i for i in range(p.num_args)],
    infer_shape=same_shape,
    forward={'cpu': _addn_forward, 'gpu': _addn_forward},
    backward={'cpu': _addn_backward, 'gpu': _addn_backward},
    params=AddNParam,
    variadic='num_args',
    doc='Elementwise sum of all inputs (same shapes).\n\nEach input\'s gradient is the head '
        'gradient.\n\nSource: MXNet 1.x ``add_n`` (alias ``ElementWiseSum``).\n',
    input_docs={'data': 'The arrays to add (arg0, arg1, ...).'},
))


# ---------------------------------------------------------- shape_array, size_array
def _int64_out(p, in_types, aux_types):
    ins = [np.dtype('float32') if t is None else t for t in in_types]
    return ins, [np.dtype('int64')], list(aux_types)


def _make_meta(name, value_of, doc):
    def infer(p, in_shapes, aux_shapes, out_shapes):
        d = in_shapes[0]
        return list(in_shapes), [None if d is None else (len(value_of((0,) * len(d))),)], \
            list(aux_shapes)

    def forward(ctx, p, inputs, outputs, aux):
        val = np.array(value_of(tuple(inputs[0].shape)), np.int64)
        if is_gpu(outputs[0]):
            outputs[0].copy_to_device(val)
        else:
            outputs[0][...] = val

    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        if req[0] == 'write':
            zero(in_grads[0])

    register_op(OpDef(name=name, arguments=['data'], infer_shape=infer, infer_type=_int64_out,
                      forward={'cpu': forward, 'gpu': forward},
                      backward={'cpu': backward, 'gpu': backward}, zero_gradient=True,
                      doc=doc, input_docs={'data': 'Input array.'}))


_make_meta('shape_array', lambda s: list(s),
           'The shape of the input as a 1-D int64 array.\n\n(2, 3) -> [2, 3]. Not '
           'differentiable.\n\nSource: MXNet 1.x ``shape_array``.\n')
_make_meta('size_array', lambda s: [int(np.prod(s))],
           'The element count of the input as a (1,) int64 array.\n\n(2, 3) -> [6]. Not '
           'differentiable.\n\nSource: MXNet 1.x ``size_array``.\n')
