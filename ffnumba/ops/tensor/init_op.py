"""Creation ops (``_zeros``, ``_ones``, ``_full``, ``_arange``, ``_linspace``, ``_eye``)
and ``stack``.

A creation op has no inputs: its output is a constant array whose shape comes
from its params. MXNet's ``mx.sym.zeros(shape=(0, H))`` (what
``BaseRNNCell.begin_state`` emits) may hold ``0`` for a dimension that is not
known yet; shape inference then takes it from the consumer of the output
(the batch size of the data the state meets), as MXNet does.

Values
------
==========  ===================================================================
op          ``out`` (flat index ``i``)
==========  ===================================================================
_zeros      ``0``
_ones       ``1``
_full       ``value``
_arange     ``start + (i // repeat) * step``, ``ceil((stop - start) / step) * repeat``
            elements (``stop=None``: the range ``[0, start)``)
_linspace   ``num`` points from ``start`` to ``stop`` (``stop`` left out when
            ``endpoint=False``): step ``(stop - start) / (num - 1 or num)``
_eye        ``(N, M)`` with ones on diagonal ``k`` (``M=0`` means ``M=N``)
stack       inputs ``arg0..arg{k-1}`` of one shape, joined along a new axis
==========  ===================================================================

Source: MXNet 1.x operator documentation (``mx.sym.zeros``, ``arange``,
``linspace``, ``eye``, ``stack``); dtypes default to float32 as in MXNet.
"""
import math

import numpy as np

from ...base import ParamError, ShapeError
from ...dtype import np_dtype
from ..params import Field, Params, Shape
from ..registry import OpDef, register_op, shape_assign, same_type
from ..templates import LazyCudaKernel, fill_gpu, import_cuda
from .concat import _as3
from .shape import _axis, _gpu_block, _outer_inner, _put

__all__ = ['InitParam', 'FullParam', 'ArangeParam', 'LinspaceParam', 'EyeParam', 'StackParam']

cuda = None  # bound by import_cuda(globals()) on first GPU use

_CTX_DOC = 'Context of the output (kept for MXNet compatibility; the executor decides).'
_DTYPE_DOC = 'Output dtype (float16, float32, float64, uint8, int8, int32, int64).'


class InitParam(Params):
    """Parameters of :func:`_zeros` and :func:`_ones`."""

    shape = Field(Shape, Shape(), 'Output shape; 0 (or -1, as MXNet) marks a dimension that '
                                  'shape inference fills from the consumer.', low=-1)
    ctx = Field(str, '', _CTX_DOC)
    dtype = Field('dtype', 'float32', _DTYPE_DOC)


class FullParam(InitParam):
    """Parameters of :func:`_full`."""

    value = Field(float, doc='The value every element gets.')


class ArangeParam(Params):
    """Parameters of :func:`_arange`."""

    start = Field(float, doc='First value (the end of the range when `stop` is None).')
    stop = Field(float, None, 'End of the range, excluded (None: the range is [0, start)).')
    step = Field(float, 1.0, 'Spacing of the values (non-zero).')
    repeat = Field(int, 1, 'Times each value repeats.', low=1)
    infer_range = Field(bool, False, 'Unsupported in MXNet 1.x symbols; must be False.')
    ctx = Field(str, '', _CTX_DOC)
    dtype = Field('dtype', 'float32', _DTYPE_DOC)

    def validate(self):
        if self.step == 0:
            raise ParamError('_arange: `step` must be non-zero. Received: step=0')
        if self.infer_range:
            raise ParamError('_arange: `infer_range=True` is not supported; give `stop`. '
                             'Received: infer_range=True')


class LinspaceParam(Params):
    """Parameters of :func:`_linspace`."""

    start = Field(float, doc='First value.')
    stop = Field(float, doc='Last value (included when `endpoint`).')
    num = Field(int, doc='Number of points.', low=0)
    endpoint = Field(bool, True, 'Include `stop` as the last point.')
    ctx = Field(str, '', _CTX_DOC)
    dtype = Field('dtype', 'float32', _DTYPE_DOC)


class EyeParam(Params):
    """Parameters of :func:`_eye`."""

    N = Field(int, doc='Number of rows.', low=0)
    M = Field(int, 0, 'Number of columns (0: equal to N).', low=0)
    k = Field(int, 0, 'Diagonal: 0 the main one, > 0 above it, < 0 below it.')
    ctx = Field(str, '', _CTX_DOC)
    dtype = Field('dtype', 'float32', _DTYPE_DOC)


# ------------------------------------------------------------------ inference
def _init_shape(p, in_shapes, aux_shapes, out_shapes):
    want = tuple(max(int(d), 0) for d in p.shape)   # -1 is unknown too
    o = out_shapes[0] if out_shapes else None
    if o is not None:
        if len(o) != len(want) or any(w and w != d for w, d in zip(want, o)):
            raise ShapeError('Shape inconsistent: the output shape %s does not fit shape=%s '
                             '(0 marks an unknown dimension)' % (tuple(o), want))
        return [], [tuple(o)], []
    if any(d == 0 for d in want):
        return [], [None], []
    return [], [want], []


def _arange_len(p):
    start, stop = (0.0, p.start) if p.stop is None else (p.start, p.stop)
    n = int(math.ceil((stop - start) / p.step))
    if n <= 0:
        raise ShapeError('_arange: the range is empty: start=%s, stop=%s, step=%s'
                         % (p.start, p.stop, p.step))
    return start, n


def _arange_shape(p, in_shapes, aux_shapes, out_shapes):
    return [], [(_arange_len(p)[1] * p.repeat,)], []


def _linspace_step(p):
    div = (p.num - 1) if p.endpoint else p.num
    return (p.stop - p.start) / div if div > 0 else 0.0


def _linspace_shape(p, in_shapes, aux_shapes, out_shapes):
    return [], [(p.num,)], []


def _eye_shape(p, in_shapes, aux_shapes, out_shapes):
    return [], [(p.N, p.M or p.N)], []


def _own_type(p, in_types, aux_types):
    return [], [np_dtype(p.dtype)], []


# ------------------------------------------------------------------ values
def _affine(p):
    """``(a, b, repeat)``: output element ``i`` is ``a + (i // repeat) * b``."""
    name = p.op_name
    if name == '_zeros':
        return 0.0, 0.0, 1
    if name == '_ones':
        return 1.0, 0.0, 1
    if name == '_full':
        return p.value, 0.0, 1
    if name == '_arange':
        return _arange_len(p)[0], p.step, p.repeat
    return p.start, _linspace_step(p), 1


def _check_out(ctx, p, out):
    """The inferred output shape must fit ``shape`` (0 dims are free)."""
    want = tuple(getattr(p, 'shape', ()) or ())
    got = tuple(out.shape)
    if want and (len(want) != len(got) or any(w > 0 and w != d for w, d in zip(want, got))):
        raise ShapeError('Error in operator %s: Shape inconsistent: the consumer needs %s, '
                         'shape=%s (0 marks an unknown dimension)' % (ctx.node_name, got, want))


def _fill_forward(ctx, p, inputs, outputs, aux):
    _check_out(ctx, p, outputs[0])
    out = outputs[0].reshape(-1)
    a, b, rep = _affine(p)
    if b == 0.0:
        out[...] = a
    else:
        idx = np.arange(out.size, dtype=np.float64) // rep
        np.copyto(out, a + idx * b, casting='unsafe')


def _eye_forward(ctx, p, inputs, outputs, aux):
    out = outputs[0]
    out[...] = 0
    n, m = out.shape
    r = np.arange(max(0, -p.k), min(n, m - p.k)) if m - p.k > 0 else np.arange(0)
    out[r, r + p.k] = 1


def _no_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    """A creation op has no inputs, so nothing to differentiate."""


def _build_affine():
    import_cuda(globals())

    @cuda.jit
    def k(out, a, b, rep):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, out.size, stride):
            out[i] = a + (i // rep) * b
    return k


def _build_eye():
    import_cuda(globals())

    @cuda.jit
    def k(out, m, diag):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, out.size, stride):
            out[i] = 1 if (i % m) - (i // m) == diag else 0
    return k


_affine_gpu = LazyCudaKernel(_build_affine)
_eye_gpu = LazyCudaKernel(_build_eye)


def _fill_forward_gpu(ctx, p, inputs, outputs, aux):
    _check_out(ctx, p, outputs[0])
    out = outputs[0].reshape(-1)
    if out.size:
        a, b, rep = _affine(p)
        _affine_gpu.launch(out.size, out, a, b, rep)


def _eye_forward_gpu(ctx, p, inputs, outputs, aux):
    out = outputs[0]
    if out.size:
        _eye_gpu.launch(out.size, out.reshape(-1), tuple(out.shape)[1], p.k)


def _register_creation(name, params, infer_shape, doc, fwd=_fill_forward, fwd_gpu=_fill_forward_gpu):
    register_op(OpDef(
        name=name, aliases=(name[1:],), arguments=[], infer_shape=infer_shape,
        infer_type=_own_type, forward={'cpu': fwd, 'gpu': fwd_gpu},
        backward={'cpu': _no_backward, 'gpu': _no_backward}, params=params, hint=name,
        doc=doc))


_register_creation('_zeros', InitParam, _init_shape,
                   'An array of zeros.\n\n``zeros(shape=(0, 8))`` leaves the batch size to '
                   'shape inference (what RNN cells\' begin_state emits).\n')
_register_creation('_ones', InitParam, _init_shape, 'An array of ones.\n')
_register_creation('_full', FullParam, _init_shape, 'An array filled with `value`.\n')
_register_creation('_arange', ArangeParam, _arange_shape,
                   'Evenly spaced values in [start, stop).\n\n``arange(2, 8, 2, repeat=2)`` -> '
                   '[2, 2, 4, 4, 6, 6].\n')
_register_creation('_linspace', LinspaceParam, _linspace_shape,
                   '`num` evenly spaced values from start to stop.\n\n``linspace(0, 1, 5)`` -> '
                   '[0, .25, .5, .75, 1].\n')
_register_creation('_eye', EyeParam, _eye_shape,
                   'A 2-D array with ones on diagonal `k` and zeros elsewhere.\n',
                   fwd=_eye_forward, fwd_gpu=_eye_forward_gpu)


# ------------------------------------------------------------------------ stack
class StackParam(Params):
    """Parameters of :func:`stack`."""

    num_args = Field(int, doc='Number of inputs (set from the inputs given).', low=1)
    axis = Field(int, 0, 'Position of the new axis in the output (negative counts from the end).')


def _stack_args(p):
    return ['arg%d' % i for i in range(p.num_args)]


def _stack_axis(p, out_ndim):
    return _axis(p.axis, out_ndim, 'axis', 'stack', ())


def _stack_infer(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    names = _stack_args(p)
    o = out_shapes[0] if out_shapes else None
    ref = next((s for s in ins if s is not None), None)
    if ref is None and o is not None:
        a = _stack_axis(p, len(o))
        ref = tuple(o[:a]) + tuple(o[a + 1:])
    if ref is None:
        return ins, [None], list(aux_shapes)
    for i in range(len(ins)):
        if ins[i] is not None and tuple(ins[i]) != tuple(ref):
            raise ShapeError('stack: every input must have the same shape; %s has %s, '
                             'another input has %s' % (names[i], tuple(ins[i]), tuple(ref)))
        shape_assign(ins, i, ref, names[i])
    a = _stack_axis(p, len(ref) + 1)
    out = tuple(ref[:a]) + (p.num_args,) + tuple(ref[a:])
    return ins, [out], list(aux_shapes)


def _stack_forward(ctx, p, inputs, outputs, aux):
    out = outputs[0]
    a = _stack_axis(p, out.ndim)
    o3 = _as3(out, a)
    for i, x in enumerate(inputs):
        o3[:, i, :] = x.reshape(o3.shape[0], o3.shape[2])


def _stack_backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    og = out_grads[0]
    a = _stack_axis(p, og.ndim)
    g3 = _as3(og, a)
    for i, (g, r) in enumerate(zip(in_grads, req)):
        if r != 'null':
            _put(g.reshape(g3.shape[0], g3.shape[2]), g3[:, i, :], r)


def _stack_forward_gpu(ctx, p, inputs, outputs, aux):
    out = outputs[0]
    a = _stack_axis(p, len(out.shape))
    outer, inner = _outer_inner(out.shape, a)
    for i, x in enumerate(inputs):
        _gpu_block(x, 1, 0, out, p.num_args, i, outer, 1, inner, False)


def _stack_backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    og = out_grads[0]
    a = _stack_axis(p, len(og.shape))
    outer, inner = _outer_inner(og.shape, a)
    for i, (g, r) in enumerate(zip(in_grads, req)):
        if r == 'null':
            continue
        if r == 'write':
            fill_gpu.launch(g.size, g.reshape(-1), 0)
        _gpu_block(og, p.num_args, i, g, 1, 0, outer, 1, inner, True)


register_op(OpDef(
    name='stack',
    arguments=_stack_args,
    infer_shape=_stack_infer,
    infer_type=same_type,
    forward={'cpu': _stack_forward, 'gpu': _stack_forward_gpu},
    backward={'cpu': _stack_backward, 'gpu': _stack_backward_gpu},
    params=StackParam,
    variadic='num_args',
    doc='Join arrays of one shape along a new axis.\n\nThree (2, 5) inputs with axis=1 -> '
        '(2, 3, 5); the gradient of each input is its slice of the head gradient.\n',
    input_docs={'data': 'The arrays to stack (arg0, arg1, ...).'},
))
