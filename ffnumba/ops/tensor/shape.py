"""Shape and layout ops: Reshape, transpose, expand_dims, Cast.

These ops move data without arithmetic. The executor owns every output
buffer, so each forward copies into its output (one memory pass, no
allocation) and each backward copies or adds the head gradient back. On the
CPU the copies are numpy assignments between views; on the GPU one strided
grid-stride copy kernel serves transpose and the join/split ops of
:mod:`ffnumba.ops.tensor.concat` (Concat, SliceChannel, slice_axis).

Reshape codes (``shape=``), applied left to right while walking the input axes
(with ``reverse=True`` both the input shape and ``shape`` are read from the
right, and the result is reversed back):

====  ======================================================================
code  meaning
====  ======================================================================
> 0   this size (consumes one input axis)
0     copy the current input axis
-1    infer this size from the element count (at most once; consumes one axis)
-2    copy every remaining input axis
-3    merge the current and the next input axis into one
-4    split the current input axis into the next two codes (one may be -1)
====  ======================================================================

``(2, 3, 4, 5)``: ``(0, -1)`` -> ``(2, 60)``; ``(-3, -2)`` -> ``(6, 4, 5)``;
``(0, -3)`` -> ``(2, 12)``; ``(-4, 1, 2, -2)`` -> ``(1, 2, 3, 4, 5)``;
``(0, 0, -1)`` -> ``(2, 3, 20)``. ``(10, 5, 4)``: ``(-1, 0)`` -> ``(40, 5)``,
with ``reverse=True`` -> ``(50, 4)``. A result whose element count differs
from the input's raises ``ShapeError`` (MXNet 1.9.1 does not check this).

Shapes
------
=============  ==============================  ================================
op             inputs                          output(s)
=============  ==============================  ================================
transpose      ``(d0, ..., dn)``, axes         ``(d[axes[0]], ...)``; () reverses
expand_dims    ``(d0, ..., dn)``, axis         a 1 inserted at ``axis``
Cast           ``data``, dtype                 same shape, new dtype
=============  ==============================  ================================

Source: MXNet 1.x operator documentation, every example checked against
MXNet 1.9.1.
"""
import numpy as np

from ...base import ParamError, ShapeError
from ...dtype import np_dtype
from ..params import Field, Params, Shape
from ..registry import OpDef, register_op
from ..templates import LazyCudaKernel, import_cuda, launch_1d, make_unary
from .flatten import identity, one

__all__ = ['ReshapeParam', 'reshape_shape', 'TransposeParam', 'ExpandDimsParam', 'CastParam']

cuda = None  # bound by import_cuda(globals()) on first GPU use

# Flat copy kernels (forward: out = x; backward: ig (+)= og) for the GPU.
_COPY_FWD, _COPY_BWD = make_unary(identity, one, grad_uses='input')


def _build_strided_copy():
    import_cuda(globals())

    @cuda.jit
    def k(src, soff, sst, dst, doff, dstt, shape, n, add):
        # walk `shape` in C order; element q goes src[soff + q.sst] -> dst[doff + q.dstt]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, n, stride):
            rem = i
            si = soff
            di = doff
            for d in range(len(shape) - 1, -1, -1):
                q = rem % shape[d]
                rem //= shape[d]
                si += q * sst[d]
                di += q * dstt[d]
            if add:
                dst[di] += src[si]
            else:
                dst[di] = src[si]
    return k


_strided_copy = LazyCudaKernel(_build_strided_copy)


def _cstrides(shape):
    st, acc = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        st[d] = acc
        acc *= int(shape[d])
    return st


def _gpu_copy(src, soff, sst, dst, doff, dstt, shape, add):
    """GPU strided copy (or add) of a ``shape`` block between two flat device arrays."""
    n = _size(shape)
    if n:
        launch_1d(_strided_copy.kernel, n, src.reshape(-1), soff, tuple(sst), dst.reshape(-1),
                  doff, tuple(dstt), tuple(int(d) for d in shape), n, add)


def _gpu_block(src, s_len, s_off, dst, d_len, d_off, outer, n, inner, add):
    """Copy ``src[:, s_off:s_off+n, :]`` into ``dst[:, d_off:d_off+n, :]`` (3-D views)."""
    _gpu_copy(src, s_off * inner, (s_len * inner, inner, 1), dst, d_off * inner,
              (d_len * inner, inner, 1), (outer, n, inner), add)


def _outer_inner(shape, axis):
    shape = tuple(shape)
    return _size(shape[:axis]), _size(shape[axis + 1:])


def _size(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _copy_forward(ctx, p, inputs, outputs, aux):
    outputs[0].reshape(-1)[...] = inputs[0].reshape(-1)


def _copy_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    _put(in_grads[0], out_grads[0].reshape(in_grads[0].shape), req[0])


def _put(dst, src, req):
    """``dst = src`` or ``dst += src`` by ``req`` (numpy, casting as needed)."""
    if req == 'write':
        np.copyto(dst, src, casting='unsafe')
    elif req == 'add':
        dst += src.astype(dst.dtype, copy=False)


def _axis(axis, ndim, what, op, shape):
    """Normalise a possibly negative axis into ``[0, ndim)``."""
    a = axis + ndim if axis < 0 else axis
    if not 0 <= a < ndim:
        raise ShapeError('%s: `%s` must be in [%d, %d) for input shape %s. Received: %s=%d'
                         % (op, what, -ndim, ndim, tuple(shape), what, axis))
    return a


# --------------------------------------------------------------------- Reshape
class ReshapeParam(Params):
    """Parameters of :func:`Reshape`."""

    shape = Field(Shape, (), 'Target shape; codes 0, -1, -2, -3, -4 (see the op docstring).')
    reverse = Field(bool, False, 'Apply the codes from the right (last axes first).')
    target_shape = Field(Shape, (), '(Deprecated) Target shape; a 0 is inferred.')
    keep_highest = Field(bool, False, '(Deprecated) With target_shape: keep the first axis.')


def _apply_codes(spec, dshape):
    """Output shape of the Reshape codes ``spec`` on ``dshape``; ValueError(reason)."""
    out, src, inf, i = [], 0, -1, 0
    nd, n = len(dshape), len(spec)
    while i < n:
        d = spec[i]
        if d > 0:
            out.append(d)
            src += 1
        elif d == 0:
            if src >= nd:
                raise ValueError('code 0 at position %d copies input axis %d, but the input '
                                 'has %d axes' % (i, src, nd))
            out.append(dshape[src])
            src += 1
        elif d == -1:
            if inf >= 0:
                raise ValueError('only one dimension can be -1 (inferred)')
            inf = len(out)
            out.append(1)
            src += 1
        elif d == -2:
            out.extend(dshape[src:])
            src = nd
        elif d == -3:
            if src + 1 >= nd:
                raise ValueError('code -3 at position %d merges input axes %d and %d, but the '
                                 'input has %d axes' % (i, src, src + 1, nd))
            out.append(dshape[src] * dshape[src + 1])
            src += 2
        elif d == -4:
            if i + 2 >= n:
                raise ValueError('code -4 at position %d must be followed by two sizes' % i)
            if src >= nd:
                raise ValueError('code -4 at position %d splits input axis %d, but the input '
                                 'has %d axes' % (i, src, nd))
            d0, d1, d2 = dshape[src], spec[i + 1], spec[i + 2]
            src += 1
            i += 2
            if d1 == -1 and d2 == -1:
                raise ValueError('the two sizes after -4 cannot both be -1')
            if d1 == -1 and d2 > 0:
                d1 = d0 // d2
            elif d2 == -1 and d1 > 0:
                d2 = d0 // d1
            if d1 <= 0 or d2 <= 0 or d1 * d2 != d0:
                raise ValueError('code -4 splits input axis of size %d into %d x %d'
                                 % (d0, spec[i - 1], spec[i]))
            out += [d1, d2]
        else:
            raise ValueError('unknown code %d at position %d' % (d, i))
        i += 1
    if inf >= 0:
        rest = _size(out)
        if rest == 0 or _size(dshape) % rest:
            raise ValueError('cannot infer the -1 dimension: %d elements do not divide by %d'
                             % (_size(dshape), rest))
        out[inf] = _size(dshape) // rest
    return out


def reshape_shape(p, dshape):
    """Output shape of Reshape ``p`` on an input of shape ``dshape``.

    Raises
    ------
    ShapeError
        Naming the ``shape`` param and the input shape, when the codes do not
        fit or the element counts differ.
    """
    dshape = tuple(int(d) for d in dshape)
    if len(p.shape):
        what = 'shape=%s%s' % (tuple(p.shape), ', reverse=True' if p.reverse else '')
        try:
            if p.reverse:
                out = _apply_codes(list(p.shape)[::-1], dshape[::-1])[::-1]
            else:
                out = _apply_codes(list(p.shape), dshape)
        except ValueError as e:
            raise ShapeError('Reshape: cannot reshape input of shape %s with %s: %s'
                             % (dshape, what, e)) from None
    elif len(p.target_shape):
        what = 'target_shape=%s' % (tuple(p.target_shape),)
        out = list(p.target_shape)
        start = 0
        if p.keep_highest:
            out[0], start = dshape[0], 1
        zeros = [j for j in range(start, len(out)) if out[j] == 0]
        if len(zeros) > 1 or any(d < 0 for d in out):
            raise ShapeError('Reshape: %s may hold at most one 0 (inferred) and no negative '
                             'sizes' % what)
        if zeros:
            out[zeros[0]] = 1
            rest = _size(out)
            out[zeros[0]] = _size(dshape) // rest if rest else 0
    else:
        raise ShapeError('Reshape: `shape` must be given. Received: shape=()')
    out = tuple(out)
    if _size(out) != _size(dshape):
        raise ShapeError('Reshape: cannot reshape input of shape %s with %s: the result %s has '
                         '%d elements, the input %d' % (dshape, what, out, _size(out),
                                                          _size(dshape)))
    return out


def _reshape_infer(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    out = None if ins[0] is None else reshape_shape(p, ins[0])
    return ins, [out], list(aux_shapes)


register_op(OpDef(
    name='Reshape',
    backward_reads=(),   # a copy: dx = dy reshaped
    aliases=('reshape',),
    arguments=['data'],
    infer_shape=_reshape_infer,
    forward={'cpu': _copy_forward, 'gpu': _COPY_FWD['gpu']},
    backward={'cpu': _copy_backward, 'gpu': _COPY_BWD['gpu']},
    params=ReshapeParam,
    doc='Reshape an array without changing its data.\n\n'
        'Codes in `shape`, read left to right while walking the input axes: a size > 0 '
        'is taken as is; 0 copies the input axis; -1 is inferred from the element count '
        '(once); -2 copies all remaining axes; -3 merges two input axes; -4 splits one '
        'input axis into the next two codes (one may be -1). With `reverse` the codes and '
        'the input axes are read from the right.\n\n'
        'Examples for an input (2, 3, 4, 5): (0, -1) -> (2, 60); (-3, -2) -> (6, 4, 5); '
        '(-4, 1, 2, -2) -> (1, 2, 3, 4, 5); (0, 0, -1) -> (2, 3, 20). Input (10, 5, 4): '
        '(-1, 0) -> (40, 5), with reverse=True -> (50, 4).\n\n'
        'Raises ShapeError when the codes do not fit the input or the element counts '
        'differ.\n\nSource: MXNet 1.x ``Reshape`` documentation.\n',
    input_docs={'data': 'Input array.'},
))


# ------------------------------------------------------------------- transpose
class TransposeParam(Params):
    """Parameters of :func:`transpose`."""

    axes = Field(Shape, (), 'Permutation of the axes; () reverses them.')


def _perm(p, ndim, shape):
    if not len(p.axes):
        return tuple(range(ndim - 1, -1, -1))
    axes = tuple(a + ndim if a < 0 else a for a in p.axes)
    if sorted(axes) != list(range(ndim)):
        raise ShapeError('transpose: `axes` must be a permutation of the %d axes of input '
                         'shape %s. Received: axes=%s' % (ndim, tuple(shape), tuple(p.axes)))
    return axes


def _transpose_infer(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    d = ins[0]
    o = out_shapes[0] if out_shapes else None
    if d is None and o is not None:
        perm = _perm(p, len(o), o)
        inv = np.argsort(perm)
        ins[0] = tuple(o[i] for i in inv)
        d = ins[0]
    if d is None:
        return ins, [None], list(aux_shapes)
    perm = _perm(p, len(d), d)
    return ins, [tuple(d[a] for a in perm)], list(aux_shapes)


def _transpose_forward(ctx, p, inputs, outputs, aux):
    x = inputs[0]
    np.copyto(outputs[0], x.transpose(_perm(p, x.ndim, x.shape)))


def _transpose_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    x = inputs[0]
    inv = tuple(np.argsort(_perm(p, x.ndim, x.shape)))
    _put(in_grads[0], out_grads[0].transpose(inv), req[0])


def _transpose_forward_gpu(ctx, p, inputs, outputs, aux):
    x, out = inputs[0], outputs[0]
    perm = _perm(p, x.ndim, tuple(x.shape))
    xs = _cstrides(tuple(x.shape))
    _gpu_copy(x, 0, [xs[a] for a in perm], out, 0, _cstrides(tuple(out.shape)),
              tuple(out.shape), False)


def _transpose_backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'null':
        return
    x, og = inputs[0], out_grads[0]
    perm = _perm(p, x.ndim, tuple(x.shape))
    xs = _cstrides(tuple(x.shape))
    _gpu_copy(og, 0, _cstrides(tuple(og.shape)), in_grads[0], 0, [xs[a] for a in perm],
              tuple(og.shape), req[0] == 'add')


register_op(OpDef(
    name='transpose',
    backward_reads=(),
    arguments=['data'],
    infer_shape=_transpose_infer,
    forward={'cpu': _transpose_forward, 'gpu': _transpose_forward_gpu},
    backward={'cpu': _transpose_backward, 'gpu': _transpose_backward_gpu},
    params=TransposeParam,
    doc='Permute the axes of an array.\n\nout.shape[i] = data.shape[axes[i]]; '
        'the default axes=() reverses the axes.\n',
    input_docs={'data': 'Input array.'},
))


# ----------------------------------------------------------------- expand_dims
class ExpandDimsParam(Params):
    """Parameters of :func:`expand_dims`."""

    axis = Field(int, doc='Where to insert the new axis, in [-ndim-1, ndim].')


def _expand_infer(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    d = ins[0]
    o = out_shapes[0] if out_shapes else None
    if d is None and o is not None and len(o) >= 1:
        a = p.axis + len(o) if p.axis < 0 else p.axis
        if 0 <= a < len(o) and o[a] == 1:
            ins[0] = tuple(o[:a]) + tuple(o[a + 1:])
            d = ins[0]
    if d is None:
        return ins, [None], list(aux_shapes)
    nd = len(d)
    a = p.axis + nd + 1 if p.axis < 0 else p.axis
    if not 0 <= a <= nd:
        raise ShapeError('expand_dims: `axis` must be in [%d, %d] for input shape %s. '
                         'Received: axis=%d' % (-nd - 1, nd, tuple(d), p.axis))
    return ins, [tuple(d[:a]) + (1,) + tuple(d[a:])], list(aux_shapes)


register_op(OpDef(
    name='expand_dims',
    backward_reads=(),
    arguments=['data'],
    infer_shape=_expand_infer,
    forward={'cpu': _copy_forward, 'gpu': _COPY_FWD['gpu']},
    backward={'cpu': _copy_backward, 'gpu': _COPY_BWD['gpu']},
    params=ExpandDimsParam,
    doc='Insert an axis of size 1 at `axis`.\n\n(2, 3) with axis=1 -> (2, 1, 3); '
        'axis=-1 -> (2, 3, 1).\n',
    input_docs={'data': 'Input array.'},
))


# ------------------------------------------------------------------------ Cast
class CastParam(Params):
    """Parameters of :func:`Cast`."""

    dtype = Field('dtype', doc='Output dtype: float16, float32, float64, uint8, int8, int32, '
                               'int64 or bool.')

    def validate(self):
        try:
            np_dtype(self.dtype)
        except Exception:
            raise ParamError('Cast: `dtype` must be one of float16, float32, float64, uint8, '
                             'int8, int32, int64, bool. Received: dtype=%r' % self.dtype) from None


def _cast_type(p, in_types, aux_types):
    return list(in_types), [np_dtype(p.dtype)], list(aux_types)


def _cast_shape(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    o = out_shapes[0] if out_shapes else None
    if ins[0] is None and o is not None:
        ins[0] = tuple(o)
    return ins, [ins[0]], list(aux_shapes)


def _cast_forward(ctx, p, inputs, outputs, aux):
    # numpy's unsafe cast truncates floats toward 0, as MXNet's Cast does.
    np.copyto(outputs[0], inputs[0], casting='unsafe')


def _cast_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    _put(in_grads[0], out_grads[0], req[0])


register_op(OpDef(
    name='Cast',
    backward_reads=(),
    aliases=('cast',),
    arguments=['data'],
    infer_shape=_cast_shape,
    infer_type=_cast_type,
    forward={'cpu': _cast_forward, 'gpu': _COPY_FWD['gpu']},
    backward={'cpu': _cast_backward, 'gpu': _COPY_BWD['gpu']},
    params=CastParam,
    doc='Cast an array to another dtype.\n\nFloats cast to integers truncate toward 0; '
        'the gradient is cast back to the input dtype.\n',
    input_docs={'data': 'Input array.'},
))
