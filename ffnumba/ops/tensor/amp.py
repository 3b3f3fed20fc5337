"""Mixed-precision helpers: ``all_finite``, ``multi_all_finite``, ``amp_cast``,
``amp_multicast`` (MXNet's AMP operators).

=================  ====================  ==========================================
op                 inputs                output
=================  ====================  ==========================================
all_finite         data                  ``(1,)`` float32: 1 if every element of
                                         ``data`` is finite, else 0
multi_all_finite   data0..data{n-1}      the same over all ``num_arrays`` inputs
amp_cast           data                  ``data`` cast to ``dtype`` when it is a
                                         float array; other dtypes pass unchanged
amp_multicast      data0..data{n-1}      each input cast to the widest float type
                                         among them (``cast_narrow``: narrowest)
=================  ====================  ==========================================

``init_output=False`` (all_finite) leaves the output as it was when every
element is finite (it only ever writes the 0), so several calls can share one
flag, as in MXNet. The finite checks have no gradient (backward writes zeros);
the casts pass the head gradient back cast to the input's dtype.

Source: MXNet 1.9.1 ``src/operator/contrib/all_finite.cc`` and
``src/operator/tensor/amp_cast.cc`` documentation.
"""
import numpy as np
from numba import njit

from ...base import DTypeError
from ...dtype import np_dtype
from ..params import Field, Params
from ..registry import OpDef, get_op, register_op
from ..templates import LazyCudaKernel, import_cuda, launch_1d

__all__ = ['AllFiniteParam', 'MultiAllFiniteParam', 'AmpCastParam', 'AmpMultiCastParam']

cuda = None  # bound by import_cuda(globals()) on first GPU use


class AllFiniteParam(Params):
    """Parameters of all_finite."""

    init_output = Field(bool, True, 'Set the output to 1 before checking.')


class MultiAllFiniteParam(Params):
    """Parameters of multi_all_finite."""

    num_arrays = Field(int, 1, 'Number of input arrays.', low=1)
    init_output = Field(bool, True, 'Set the output to 1 before checking.')


class AmpCastParam(Params):
    """Parameters of amp_cast."""

    dtype = Field('dtype', doc='Target dtype of float inputs (float16, float32, float64).')


class AmpMultiCastParam(Params):
    """Parameters of amp_multicast."""

    num_outputs = Field(int, doc='Number of inputs (and outputs).', low=1)
    cast_narrow = Field(bool, False, 'Cast to the narrowest float type instead of the widest.')


# ------------------------------------------------------------------ kernels
@njit(cache=True, nogil=True)
def _all_finite_cpu(x):
    for i in range(x.size):
        v = x[i]
        if not v - v == 0.0:      # NaN - NaN and inf - inf are NaN
            return False
    return True


def _build_gpu():
    import_cuda(globals())

    @cuda.jit
    def clear_if_not_finite(x, flag):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, x.size, stride):
            v = x[i]
            if not v - v == 0:
                flag[0] = 0.0

    return clear_if_not_finite


_GPU = LazyCudaKernel(_build_gpu)


def _host_finite(a):
    flat = a.reshape(-1)
    return _all_finite_cpu(flat.astype(np.float32) if flat.dtype == np.float16 else flat)


# ------------------------------------------------------------------ finite checks
def _finite_args(p):
    return ['data'] if not hasattr(p, 'num_arrays') else ['data%d' % i
                                                          for i in range(p.num_arrays)]


def _finite_shape(p, in_shapes, aux_shapes, out_shapes):
    return list(in_shapes), [(1,)], []


def _finite_type(p, in_types, aux_types):
    return list(in_types), [np.dtype(np.float32)], []


def _finite_forward_cpu(ctx, p, inputs, outputs, aux):
    out = outputs[0]
    if p.init_output:
        out[0] = 1.0
    if not all(_host_finite(a) for a in inputs if a.size):
        out[0] = 0.0


def _finite_forward_gpu(ctx, p, inputs, outputs, aux):
    kernel = _GPU.kernel
    out = outputs[0]
    if p.init_output:
        out.copy_to_device(np.ones(1, np.float32))
    for a in inputs:
        if a.size:
            launch_1d(kernel, a.size, a.reshape(a.size), out)


def _zero_grads_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    for g, r in zip(in_grads, req):
        if r == 'write':
            g[...] = 0


def _zero_grads_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    for g, r in zip(in_grads, req):
        if r == 'write':
            g.copy_to_device(np.zeros(g.shape, g.dtype))


for _name, _params, _variadic in (('all_finite', AllFiniteParam, None),
                                  ('multi_all_finite', MultiAllFiniteParam, 'num_arrays')):
    register_op(OpDef(
        name=_name, arguments=_finite_args, infer_shape=_finite_shape,
        infer_type=_finite_type,
        forward={'cpu': _finite_forward_cpu, 'gpu': _finite_forward_gpu},
        backward={'cpu': _zero_grads_cpu, 'gpu': _zero_grads_gpu}, params=_params,
        variadic=_variadic,
        doc='1 (float32, shape (1,)) if every element of the input%s is finite, else 0.\n'
            % ('s' if _variadic else ''),
        input_docs={'data': 'Float array%s.' % ('s (data0, data1, ...)' if _variadic else '')}))


# ------------------------------------------------------------------ casts
def _is_float(t):
    return t is not None and np.issubdtype(np.dtype(t), np.floating)


def _amp_cast_type(p, in_types, aux_types):
    t = in_types[0]
    if t is None:
        return [None], [None], []
    return [t], [np_dtype(p.dtype) if _is_float(t) else np.dtype(t)], []


def _same_shapes(p, in_shapes, aux_shapes, out_shapes):
    return list(in_shapes), [None if s is None else tuple(s) for s in in_shapes], []


def _cast(dev, ctx, p, x, out):
    with np.errstate(over='ignore', invalid='ignore'):   # overflow to inf is the AMP cast
        get_op('Cast').forward[dev](ctx, p, [x], [out], [])


def _cast_back(dev, ctx, p, og, x, out, ig, req):
    get_op('Cast').backward[dev](ctx, p, [og], [x], [out], [ig], [req], [])


def _make_cast(dev):
    def forward(ctx, p, inputs, outputs, aux):
        for x, out in zip(inputs, outputs):
            _cast(dev, ctx, p, x, out)

    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        for og, x, out, ig, r in zip(out_grads, inputs, outputs, in_grads, req):
            if r != 'null':
                _cast_back(dev, ctx, p, og, x, out, ig, r)
    return forward, backward


_CAST = {dev: _make_cast(dev) for dev in ('cpu', 'gpu')}

register_op(OpDef(
    name='amp_cast', arguments=['data'], backward_reads=(), infer_shape=_same_shapes, infer_type=_amp_cast_type,
    forward={d: f for d, (f, _) in _CAST.items()},
    backward={d: b for d, (_, b) in _CAST.items()}, params=AmpCastParam,
    doc='Cast a float array to `dtype` (other dtypes pass unchanged); the gradient is cast '
        'back.\n', input_docs={'data': 'Input array.'}))


def _multicast_args(p):
    return ['data%d' % i for i in range(p.num_outputs)]


def _multicast_type(p, in_types, aux_types):
    if any(t is None for t in in_types):
        return list(in_types), [None] * len(in_types), []
    floats = [np.dtype(t) for t in in_types if _is_float(t)]
    if not floats:
        raise DTypeError('amp_multicast: needs at least one float input. Received: %s'
                         % [np.dtype(t).name for t in in_types])
    pick = min if p.cast_narrow else max
    target = pick(floats, key=lambda t: t.itemsize)
    return list(in_types), [target if _is_float(t) else np.dtype(t) for t in in_types], []


register_op(OpDef(
    name='amp_multicast', arguments=_multicast_args, backward_reads=(), infer_shape=_same_shapes,
    infer_type=_multicast_type, outputs=lambda p: ['output%d' % i for i in range(p.num_outputs)],
    forward={d: f for d, (f, _) in _CAST.items()},
    backward={d: b for d, (_, b) in _CAST.items()}, params=AmpMultiCastParam,
    variadic='num_outputs',
    doc='Cast every float input to the widest float type among them (`cast_narrow`: the '
        'narrowest); the gradients are cast back.\n',
    input_docs={'data': 'Input arrays (data0, data1, ...).'}))
