"""Norms and nan-aware reductions: ``norm``, ``nansum``, ``nanprod``, ``moments``.

Math
----
For each group ``G`` of input elements sharing the kept axes:

==========  ===============================  ====================================
op          y = f(x_G)                       dy/dx_i
==========  ===============================  ====================================
norm ord=1  sum abs(x_i)                     sign(x_i)  (0 at 0)
norm ord=2  sqrt(sum x_i^2)                  x_i / y    (0 where y = 0)
nansum      sum of the non-nan x_i           1, or 0 where x_i is nan
nanprod     product of the non-nan x_i       product of the other non-nan x_j
                                             (exact with zeros), 0 where x_i is nan
moments     mean = sum x_i / n,              d mean: 1/n
            var = sum (x_i - mean)^2 / n     d var: 2 (x_i - mean) / n
==========  ===============================  ====================================

``norm`` with a 2-tuple ``axis`` gives the Frobenius (ord 2) or entrywise
(ord 1) norm of each matrix, as MXNet 1.9.1 computes. An all-nan group gives
``nansum = 0`` and ``nanprod = 1``.

Parameters and shapes
---------------------
``norm``: ``ord`` in {1, 2}, ``axis`` (None: all), ``keepdims``,
``out_dtype``. ``nansum``/``nanprod``: ``axis``, ``keepdims``, ``exclude`` as
``sum``. ``moments``: ``axes`` (required non-empty in MXNet; None here
reduces every axis), ``keepdims``; two outputs, the mean and the variance
(named ``output0``, ``output1`` as in MXNet). A full
reduction without ``keepdims`` gives shape ``(1,)`` (MXNet's rule): ``(2, 3)``
with ``axis=1`` -> ``(2,)``; with ``keepdims`` -> ``(2, 1)``.

Source: MXNet 1.9.1 ``norm``, ``nansum``, ``nanprod``, ``moments``
documentation; values checked against MXNet 1.9.1.
"""
import math
from types import SimpleNamespace

import numpy as np
from numba import njit

from ...base import ParamError
from ..broadcast_templates import reduce_plan
from ..params import Field, Params, Shape
from ..registry import OpDef, register_op
from ...jit import gpu_body
from ..templates import JIT, LazyCudaKernel, _down, _up, import_cuda, launch_1d
from .reduce import ReduceParam, reduce_axes, reduce_shape

cuda = None  # bound by import_cuda(globals()) on first GPU use
__all__ = ['NormParam', 'MomentsParam']

# kinds of the shared reduction kernels
L1, L2, NANSUM, NANPROD = 0, 1, 2, 3


class NormParam(Params):
    """Parameters of norm."""

    ord = Field(int, 2, 'Order of the norm: 1 or 2.')
    axis = Field(Shape, None, 'Axes to reduce (None: all; a 2-tuple: matrix norms).')
    out_dtype = Field('dtype', None, "Output dtype (None: data's).")
    keepdims = Field(bool, False, 'Keep the reduced axes with size 1.')

    def validate(self):
        if self.ord not in (1, 2):
            raise ParamError('norm: `ord` must be 1 or 2. Received: ord=%r' % self.ord)


class MomentsParam(Params):
    """Parameters of moments."""

    axes = Field(Shape, None, 'Axes to compute the mean and variance over (None: all).')
    keepdims = Field(bool, False, 'Keep the reduced axes with size 1.')


def _spec(p):
    axis = p.axes if p.op_name == 'moments' else p.axis
    return SimpleNamespace(axis=axis, keepdims=p.keepdims,
                           exclude=getattr(p, 'exclude', False), op_name=p.op_name)


def _axes_of(p, shape):
    return reduce_axes(_spec(p), shape)


def _infer(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    n_out = 2 if p.op_name == 'moments' else 1
    if ins[0] is None:
        return ins, [None] * n_out, list(aux_shapes)
    return ins, [reduce_shape(_spec(p), ins[0])] * n_out, list(aux_shapes)


def _norm_type(p, in_types, aux_types):
    dt = in_types[0]
    out = np.dtype(p.out_dtype) if p.out_dtype is not None else dt
    return [dt], [out], []


def _moments_type(p, in_types, aux_types):
    return [in_types[0]], [in_types[0]] * 2, []


# ----------------------------------------------------------------- scalar bodies

_body = njit(error_model='numpy')


@_body
def _term(kind, v):
    """What a group folds from one element (sum for L1/L2/nansum, product for nanprod)."""
    if kind == L1:
        return abs(v)
    if kind == L2:
        return v * v
    if v != v:
        return 1.0 if kind == NANPROD else 0.0
    return v


@_body
def _elem_grad(kind, x, y, p_nz, n_zero):
    if kind == L1:
        if x > 0:
            return 1.0
        return -1.0 if x < 0 else 0.0
    if kind == L2:
        return x / y if y > 0 else 0.0
    if x != x:
        return 0.0
    if kind == NANSUM:
        return 1.0
    if n_zero == 0:
        return p_nz / x
    if n_zero == 1 and x == 0:
        return p_nz
    return 0.0


# ----------------------------------------------------------------- group bodies
# One group ``o`` (the elements ``koff[o] + roff[j]``) per call: the CPU kernels loop
# over the groups, the GPU kernels give each thread a group (grid-stride).

@_body
def _reduce_group(x, out, koff, roff, kind, o):
    base = koff[o]
    acc = 1.0 if kind == NANPROD else 0.0
    for j in range(roff.size):
        t = _term(kind, x[base + roff[j]])
        if kind == NANPROD:
            acc *= t
        else:
            acc += t
    if kind == L2:
        acc = math.sqrt(acc)
    out[o] = acc


@_body
def _reduce_grad_group(x, y, og, ig, koff, roff, kind, add, o):
    base = koff[o]
    p_nz = 1.0
    n_zero = 0
    if kind == NANPROD:
        for j in range(roff.size):
            v = x[base + roff[j]]
            if v == 0:
                n_zero += 1
            elif v == v:
                p_nz *= v
    g = og[o]
    yo = 1.0 * y[o]
    for j in range(roff.size):
        k = base + roff[j]
        v = g * _elem_grad(kind, x[k], yo, p_nz, n_zero)
        if add:
            ig[k] += v
        else:
            ig[k] = v


@_body
def _group_mean(x, base, roff):
    m = 0.0
    for j in range(roff.size):
        m += x[base + roff[j]]
    return m / roff.size


@_body
def _moments_group(x, mean, var, koff, roff, o):
    base = koff[o]
    m = _group_mean(x, base, roff)
    v = 0.0
    for j in range(roff.size):
        d = x[base + roff[j]] - m
        v += d * d
    mean[o] = m
    var[o] = v / roff.size


@_body
def _moments_grad_group(x, gm, gv, ig, koff, roff, add, o):
    base = koff[o]
    n = roff.size
    m = _group_mean(x, base, roff)
    for j in range(n):
        k = base + roff[j]
        v = gm[o] / n + gv[o] * 2.0 * (x[k] - m) / n
        if add:
            ig[k] += v
        else:
            ig[k] = v


# ----------------------------------------------------------------- CPU kernels

@njit(**JIT)
def _fwd_cpu(x, out, koff, roff, kind):
    for o in range(koff.size):
        _reduce_group(x, out, koff, roff, kind, o)


@njit(**JIT)
def _bwd_cpu(x, y, og, ig, koff, roff, kind, add):
    for o in range(koff.size):
        _reduce_grad_group(x, y, og, ig, koff, roff, kind, add, o)


@njit(**JIT)
def _moments_cpu(x, mean, var, koff, roff):
    for o in range(koff.size):
        _moments_group(x, mean, var, koff, roff, o)


@njit(**JIT)
def _moments_bwd_cpu(x, gm, gv, ig, koff, roff, add):
    for o in range(koff.size):
        _moments_grad_group(x, gm, gv, ig, koff, roff, add, o)


# ----------------------------------------------------------------- GPU kernels

def _build_gpu():
    import_cuda(globals())
    reduce_group, reduce_grad_group = gpu_body(_reduce_group), gpu_body(_reduce_grad_group)
    moments_group, moments_grad_group = gpu_body(_moments_group), gpu_body(_moments_grad_group)

    @cuda.jit
    def fwd(x, out, koff, roff, kind):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for o in range(start, koff.size, stride):
            reduce_group(x, out, koff, roff, kind, o)

    @cuda.jit
    def bwd(x, y, og, ig, koff, roff, kind, add):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for o in range(start, koff.size, stride):
            reduce_grad_group(x, y, og, ig, koff, roff, kind, add, o)

    @cuda.jit
    def moments(x, mean, var, koff, roff):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for o in range(start, koff.size, stride):
            moments_group(x, mean, var, koff, roff, o)

    @cuda.jit
    def moments_bwd(x, gm, gv, ig, koff, roff, add):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for o in range(start, koff.size, stride):
            moments_grad_group(x, gm, gv, ig, koff, roff, add, o)

    return fwd, bwd, moments, moments_bwd


_GPU = LazyCudaKernel(_build_gpu)


def _flat(a):
    return a.reshape(-1)


_DEV_PLANS = {}


def _plan(p, x, device=False):
    """Reduction offsets (see ``reduce_plan``); on a GPU, device copies cached per shape."""
    shape = tuple(x.shape)
    axes = tuple(_axes_of(p, shape))
    if not device:
        return reduce_plan(shape, axes)
    import_cuda(globals())
    try:
        dev = cuda.get_current_device().id
    except Exception:       # the simulator may not tell
        dev = 0
    key = (shape, axes, dev)
    plan = _DEV_PLANS.get(key)
    if plan is None:
        koff, roff = reduce_plan(shape, axes)
        if len(_DEV_PLANS) > 256:
            _DEV_PLANS.clear()
        plan = _DEV_PLANS[key] = (cuda.to_device(koff), cuda.to_device(roff))
    return plan


def _make_reduction(kind):
    def forward_cpu(ctx, p, inputs, outputs, aux):
        koff, roff = _plan(p, inputs[0])
        o = _up(outputs[0])
        _fwd_cpu(_flat(_up(inputs[0])), _flat(o), koff, roff, kind)
        _down(outputs[0], o)

    def backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        if req[0] == 'null':
            return
        koff, roff = _plan(p, inputs[0])
        add = req[0] == 'add'
        ig = _up(in_grads[0], add)
        _bwd_cpu(_flat(_up(inputs[0])), _flat(_up(outputs[0])), _flat(_up(out_grads[0])),
                 _flat(ig), koff, roff, kind, add)
        _down(in_grads[0], ig)

    def forward_gpu(ctx, p, inputs, outputs, aux):
        koff, roff = _plan(p, inputs[0], True)
        launch_1d(_GPU.kernel[0], koff.size, _flat(inputs[0]), _flat(outputs[0]), koff, roff,
                  kind)

    def backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        if req[0] == 'null':
            return
        koff, roff = _plan(p, inputs[0], True)
        launch_1d(_GPU.kernel[1], koff.size, _flat(inputs[0]), _flat(outputs[0]),
                  _flat(out_grads[0]), _flat(in_grads[0]), koff, roff, kind, req[0] == 'add')

    return {'cpu': forward_cpu, 'gpu': forward_gpu}, {'cpu': backward_cpu, 'gpu': backward_gpu}


def _moments_forward_cpu(ctx, p, inputs, outputs, aux):
    koff, roff = _plan(p, inputs[0])
    m, v = _up(outputs[0]), _up(outputs[1])
    _moments_cpu(_flat(_up(inputs[0])), _flat(m), _flat(v), koff, roff)
    _down(outputs[0], m)
    _down(outputs[1], v)


def _moments_backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'null':
        return
    koff, roff = _plan(p, inputs[0])
    add = req[0] == 'add'
    ig = _up(in_grads[0], add)
    _moments_bwd_cpu(_flat(_up(inputs[0])), _flat(_up(out_grads[0])), _flat(_up(out_grads[1])),
                     _flat(ig), koff, roff, add)
    _down(in_grads[0], ig)


def _moments_forward_gpu(ctx, p, inputs, outputs, aux):
    koff, roff = _plan(p, inputs[0], True)
    launch_1d(_GPU.kernel[2], koff.size, _flat(inputs[0]), _flat(outputs[0]),
              _flat(outputs[1]), koff, roff)


def _moments_backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'null':
        return
    koff, roff = _plan(p, inputs[0], True)
    launch_1d(_GPU.kernel[3], koff.size, _flat(inputs[0]), _flat(out_grads[0]),
              _flat(out_grads[1]), _flat(in_grads[0]), koff, roff, req[0] == 'add')


def _norm_compute():
    l1, l2 = _make_reduction(L1), _make_reduction(L2)

    def pick(i, dev):
        return lambda ctx, p, *a: (l1 if p.ord == 1 else l2)[i][dev](ctx, p, *a)
    return ({'cpu': pick(0, 'cpu'), 'gpu': pick(0, 'gpu')},
            {'cpu': pick(1, 'cpu'), 'gpu': pick(1, 'gpu')})


_fwd, _bwd = _norm_compute()
register_op(OpDef(
    name='norm', float_only=True, arguments=['data'], params=NormParam, infer_shape=_infer,
    infer_type=_norm_type, forward=_fwd, backward=_bwd,
    doc='The L1 or L2 norm over the given axes (all by default).\n\n' + __doc__,
    input_docs={'data': 'Input array.'}))

for _name, _kind, _summary in (('nansum', NANSUM, 'Sum treating nan as 0.'),
                               ('nanprod', NANPROD, 'Product treating nan as 1.')):
    _fwd, _bwd = _make_reduction(_kind)
    register_op(OpDef(
        name=_name, float_only=True, arguments=['data'], params=ReduceParam, infer_shape=_infer,
        forward=_fwd, backward=_bwd, doc='%s\n\n%s' % (_summary, __doc__),
        input_docs={'data': 'Input array.'}))

register_op(OpDef(
    name='moments', float_only=True, arguments=['data'], params=MomentsParam,
    outputs=['output0', 'output1'], infer_shape=_infer, infer_type=_moments_type,
    forward={'cpu': _moments_forward_cpu, 'gpu': _moments_forward_gpu},
    backward={'cpu': _moments_backward_cpu, 'gpu': _moments_backward_gpu},
    doc='Mean and (population) variance over the given axes.\n\n' + __doc__,
    input_docs={'data': 'Input array.'}))
