"""Softmax family: ``softmax``, ``log_softmax``, ``softmin`` and ``SoftmaxActivation``.

Math, along one axis of length K (``T`` = ``temperature``, default 1)::

    softmax:      y_k = exp((x_k - m) / T) / sum_j exp((x_j - m) / T),   m = max_j x_j
    log_softmax:  y_k = (x_k - m) / T - log(sum_j exp((x_j - m) / T))

    softmin:      softmax of -x / T

Subtracting the maximum of ``x_k / T`` keeps every exponent <= 0 (no overflow).
With ``use_length=True`` a second input ``length`` (data's shape without
``axis``) keeps only the first ``length`` entries of each row: the softmax
runs over them and the rest of the row (output and gradient) is 0, as in
MXNet 1.9.1 (a row of length 0 is all zeros; lengths are clipped to
``[0, K]``). ``length`` gets no gradient. These are not
loss heads: the backward uses the head gradient ``g``::

    softmax:      dx_k = y_k * (g_k - sum_j g_j y_j) / T
    log_softmax:  dx_k = (g_k - exp(y_k) * sum_j g_j) / T

``SoftmaxActivation`` (deprecated in MXNet) is a softmax over the last axis
(``mode='instance'``; MXNet 1.9.1 flattens to ``(prod(shape[:-1]), shape[-1])``,
checked on 3-D input) or over axis 1 (``mode='channel'``).

Shapes
------
=======  ====================  ===============================================
input    shape                 note
=======  ====================  ===============================================
data     any                   SoftmaxActivation: (N, ...) with ndim >= 1
output   data.shape            dtype = ``dtype`` param if given, else data's
=======  ====================  ===============================================

Source: MXNet 1.9.1 documentation of softmax, log_softmax, SoftmaxActivation.
"""
import math

import numpy as np
from numba import njit

from ...base import ShapeError, ParamError
from ...jit import gpu_body
from ..params import Params, Field
from ..registry import OpDef, register_op, shape_assign
from ..templates import JIT, LazyCudaKernel, f16_safe, import_cuda, launch_1d

cuda = None  # bound by import_cuda(globals()) on first GPU use
__all__ = ['SoftmaxParam', 'SoftmaxActivationParam', 'cpu_forward', 'gpu_forward']


class SoftmaxParam(Params):
    """Parameters of softmax and log_softmax."""

    axis = Field(int, -1, 'The axis to normalise over (negative counts from the end).')
    temperature = Field(float, None, 'Divides the input before the exponential (None: 1).')
    dtype = Field('dtype', None, 'Output dtype: float16, float32 or float64 (None: data\'s).')
    use_length = Field(bool, False, 'Take a `length` input: only the first length[...] entries '
                                    'along `axis` count; the rest give 0.')

    def validate(self):
        if self.temperature is not None and not np.isfinite(self.temperature):
            raise ParamError('%s: `temperature` must be a finite float or None. '
                             'Received: temperature=%r' % (self.op_name, self.temperature))
        if self.temperature is not None and self.temperature == 0:
            raise ParamError('%s: `temperature` must be a non-zero float or None. '
                             'Received: temperature=%r' % (self.op_name, self.temperature))
        if self.dtype is not None and self.dtype not in ('float16', 'float32', 'float64'):
            raise ParamError("%s: `dtype` must be one of 'float16', 'float32', 'float64' or None. "
                             'Received: dtype=%r' % (self.op_name, self.dtype))


class SoftmaxActivationParam(Params):
    """Parameters of SoftmaxActivation."""

    mode = Field(str, 'instance', "'instance': over the last axis; 'channel': over axis 1.",
                 choices=('channel', 'instance'))


# ----------------------------------------------------------------- row bodies
# One ``(o, i)`` row (the K entries along axis 1) per call: the CPU kernels loop
# over the rows, the GPU kernels give each thread a row (grid-stride).

@njit(error_model='numpy', inline='always')
def _row_len(lens, use_len, n_k, o, i):
    """The row's valid length: ``lens[o, i]`` clipped to ``[0, K]``, or ``K``."""
    if use_len:
        return min(max(int(lens[o, i]), 0), n_k)
    return n_k


@njit(error_model='numpy', inline='always')
def _fwd_row(x, inv_t, log, lens, use_len, y, o, i):
    """Softmax of row ``(o, i)``; entries past its length are 0.

    The exponent is ``x * inv_t - max_j(x_j * inv_t)``, so a negative ``inv_t``
    (softmin) stays <= 0 too.
    """
    n_k = x.shape[1]
    n = _row_len(lens, use_len, n_k, o, i)
    for k in range(n, n_k):
        y[o, k, i] = 0.0
    if n == 0:
        return
    m = x[o, 0, i] * inv_t
    for k in range(1, n):
        v = x[o, k, i] * inv_t
        if v > m:
            m = v
    s = 0.0
    for k in range(n):
        s += math.exp(x[o, k, i] * inv_t - m)
    if log:
        ls = math.log(s)
        for k in range(n):
            y[o, k, i] = x[o, k, i] * inv_t - m - ls
    else:
        r = 1.0 / s
        for k in range(n):
            y[o, k, i] = math.exp(x[o, k, i] * inv_t - m) * r


@njit(error_model='numpy', inline='always')
def _bwd_row(y, og, inv_t, log, lens, use_len, add, gx, o, i):
    """The data gradient of row ``(o, i)`` from the output ``y``; 0 past its length."""
    n_k = y.shape[1]
    n = _row_len(lens, use_len, n_k, o, i)
    if not add:
        for k in range(n, n_k):
            gx[o, k, i] = 0.0
    s = 0.0
    if log:
        for k in range(n):
            s += og[o, k, i]
    else:
        for k in range(n):
            s += og[o, k, i] * y[o, k, i]
    for k in range(n):
        if log:
            g = (og[o, k, i] - math.exp(y[o, k, i]) * s) * inv_t
        else:
            g = y[o, k, i] * (og[o, k, i] - s) * inv_t
        if add:
            gx[o, k, i] += g
        else:
            gx[o, k, i] = g


# ----------------------------------------------------------------- CPU kernels

@njit(**JIT)
def _fwd(x, inv_t, log, lens, use_len, y):
    """Softmax over axis 1 of x (outer, K, inner); ``lens`` (outer, inner) masks with use_len."""
    for o in range(x.shape[0]):
        for i in range(x.shape[2]):
            _fwd_row(x, inv_t, log, lens, use_len, y, o, i)


@njit(**JIT)
def _bwd(y, og, inv_t, log, lens, use_len, add, gx):
    for o in range(y.shape[0]):
        for i in range(y.shape[2]):
            _bwd_row(y, og, inv_t, log, lens, use_len, add, gx, o, i)


# ----------------------------------------------------------------- GPU kernels

def _build_gpu():
    import_cuda(globals())
    fwd_row, bwd_row = gpu_body(_fwd_row), gpu_body(_bwd_row)

    @cuda.jit
    def fwd(x, inv_t, log, lens, use_len, y):
        n_in = x.shape[2]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for r in range(start, x.shape[0] * n_in, stride):
            fwd_row(x, inv_t, log, lens, use_len, y, r // n_in, r % n_in)

    @cuda.jit
    def bwd(y, og, inv_t, log, lens, use_len, add, gx):
        n_in = y.shape[2]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for r in range(start, y.shape[0] * n_in, stride):
            bwd_row(y, og, inv_t, log, lens, use_len, add, gx, r // n_in, r % n_in)

    return fwd, bwd


_GPU = LazyCudaKernel(_build_gpu)
_NO_LEN = np.zeros((1, 1), np.int64)
_DEV_NO_LEN = {}


def _no_len_device():
    """The dummy length array on the current GPU (made once per device)."""
    import_cuda(globals())
    try:
        dev = cuda.get_current_device().id
    except Exception:       # the simulator may not tell
        dev = 0
    arr = _DEV_NO_LEN.get(dev)
    if arr is None:
        arr = _DEV_NO_LEN[dev] = cuda.to_device(_NO_LEN)
    return arr


def cpu_forward(x, inv_t, log, y):
    """CPU softmax over axis 1 of ``(outer, K, inner)`` arrays (also used by ``SoftmaxOutput``)."""
    _fwd(x, inv_t, log, _NO_LEN, False, y)


def gpu_forward(x, inv_t, log, y):
    """GPU twin of :func:`cpu_forward` on ``(outer, K, inner)`` device arrays."""
    launch_1d(_GPU.kernel[0], x.shape[0] * x.shape[2], x, inv_t, log, _no_len_device(),
              False, y)


# ----------------------------------------------------------------- glue

def _axis_split(p, shape):
    shape = tuple(shape)        # (the CUDA simulator's shape type has no negative indexing)
    nd, axis = len(shape), p.axis
    ax = axis + nd if axis < 0 else axis
    if not 0 <= ax < nd:
        raise ShapeError('%s: `axis`=%d is out of range for data of %d dims'
                         % (p.op_name, axis, nd))
    outer = int(np.prod(shape[:ax], dtype=np.int64))
    inner = int(np.prod(shape[ax + 1:], dtype=np.int64))
    return outer, int(shape[ax]), inner


def _activation_split(p, shape):
    shape = tuple(shape)
    if len(shape) < 1:
        raise ShapeError('SoftmaxActivation: data must have ndim >= 1')
    if p.mode == 'instance':       # MXNet flattens to (prod(shape[:-1]), shape[-1])
        return int(np.prod(shape[:-1], dtype=np.int64)), shape[-1], 1
    c = shape[1] if len(shape) > 1 else 1
    return shape[0], c, int(np.prod(shape[2:], dtype=np.int64))


def _lengths(p, inputs, s, device=False):
    """``(lens, use_len)``: the length input viewed as (outer, inner), or a dummy."""
    if not getattr(p, 'use_length', False):
        return (_no_len_device() if device else _NO_LEN), False
    return inputs[1].reshape(s[0], s[2]), True


def _make(split, inv_t, log):
    """forward/backward dicts for one softmax flavour.

    split(p, shape) -> (outer, K, inner); inv_t(p) -> 1 / temperature (negated for softmin).
    """
    @f16_safe
    def _forward_cpu(ctx, p, inputs, outputs, aux):
        s = split(p, inputs[0].shape)
        lens, use = _lengths(p, inputs, s)
        _fwd(inputs[0].reshape(s), inv_t(p), log, lens, use, outputs[0].reshape(s))

    @f16_safe
    def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        if len(req) > 1 and req[1] == 'write':
            in_grads[1][...] = 0
        if req[0] == 'null':
            return
        s = split(p, inputs[0].shape)
        lens, use = _lengths(p, inputs, s)
        _bwd(outputs[0].reshape(s), out_grads[0].reshape(s), inv_t(p), log, lens, use,
             req[0] == 'add', in_grads[0].reshape(s))

    def _forward_gpu(ctx, p, inputs, outputs, aux):
        s = split(p, inputs[0].shape)
        lens, use = _lengths(p, inputs, s, True)
        launch_1d(_GPU.kernel[0], s[0] * s[2], inputs[0].reshape(s), inv_t(p), log, lens, use,
                  outputs[0].reshape(s))

    def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        if len(req) > 1 and req[1] == 'write':
            in_grads[1].copy_to_device(np.zeros(in_grads[1].shape, in_grads[1].dtype))
        if req[0] == 'null':
            return
        s = split(p, inputs[0].shape)
        lens, use = _lengths(p, inputs, s, True)
        launch_1d(_GPU.kernel[1], s[0] * s[2], outputs[0].reshape(s),
                  out_grads[0].reshape(s), inv_t(p), log, lens, use, req[0] == 'add',
                  in_grads[0].reshape(s))

    return {'cpu': _forward_cpu, 'gpu': _forward_gpu}, {'cpu': _backward_cpu, 'gpu': _backward_gpu}


def _inv_temperature(p):
    return 1.0 if p.temperature is None else 1.0 / p.temperature


def _softmax_shape(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    if ins[0] is None and out_shapes and out_shapes[0] is not None:
        ins[0] = tuple(out_shapes[0])
    if ins[0] is None:
        return ins, [None], list(aux_shapes)
    shape = tuple(ins[0])
    (_axis_split if p.op_name != 'SoftmaxActivation' else _activation_split)(p, shape)
    if getattr(p, 'use_length', False):
        ax = p.axis % len(shape)
        shape_assign(ins, 1, shape[:ax] + shape[ax + 1:], 'length')
    return ins, [shape], list(aux_shapes)


def _softmax_type(p, in_types, aux_types):
    dt = in_types[0]
    out = np.dtype(p.dtype) if p.dtype is not None else dt
    if len(in_types) > 1:        # the length input keeps its own (integer) dtype
        return [dt, in_types[1] if in_types[1] is not None else np.dtype(np.int32)], [out], []
    return [dt], [out], []


def _arguments(p):
    return ['data', 'length'] if p.use_length else ['data']


def _neg_inv_temperature(p):
    return -_inv_temperature(p)


for _name, _log, _inv in (('softmax', False, _inv_temperature),
                          ('log_softmax', True, _inv_temperature),
                          ('softmin', False, _neg_inv_temperature)):
    _f, _b = _make(_axis_split, _inv, _log)
    register_op(OpDef(
        name=_name,
        float_only=('data',),
        backward_reads=lambda p: ('length', 'output') if p.use_length else ('output',),
        arguments=_arguments,
        params=SoftmaxParam,
        infer_shape=_softmax_shape,
        infer_type=_softmax_type,
        forward=_f,
        backward=_b,
        doc=__doc__,
        input_docs={'data': 'Input array.',
                    'length': 'With use_length: valid entries along `axis`, shaped like data '
                              'without that axis (integers; larger values are clipped to K).'},
    ))

_f, _b = _make(_activation_split, lambda p: 1.0, False)
register_op(OpDef(
    name='SoftmaxActivation',
    backward_reads=('output',),
    float_only=True,
    arguments=['data'],
    params=SoftmaxActivationParam,
    infer_shape=_softmax_shape,
    forward=_f,
    backward=_b,
    doc=__doc__,
    input_docs={'data': 'Input, (N, ...).'},
))
