"""Leaky rectifiers and friends (``LeakyReLU``).

Math, by ``act_type`` (``s`` = ``slope``; the positive branch is taken for ``x > 0``)::

    leaky  y = x            if x > 0 else s * x
    elu    y = x            if x > 0 else s * (exp(x) - 1)   (computed as expm1)
    selu   y = lam * x      if x > 0 else lam * alpha * (exp(x) - 1)
           (lam = 1.0507009873554805, alpha = 1.6732632423543772)
    gelu   y = x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2)))       (erf form)
    prelu  y = x            if x > 0 else gamma[c] * x   (gamma learnt, c on axis 1;
           a gamma of ndim >= 2 is aligned with data's leading axes and broadcast,
           as MXNet 1.9.1: gamma (N, C) scales data (N, C, H, W) per sample and channel)
    rrelu  y = x            if x > 0 else r * x
           training: r ~ U[lower_bound, upper_bound] per element;
           evaluation: r = (lower_bound + upper_bound) / 2

``rrelu`` has a second visible output ``mask`` holding ``r`` per element (MXNet
leaves it undefined in evaluation; here it holds the constant slope).
Gradients are the exact derivatives; at ``x = 0`` the negative branch's.
(MXNet 1.9.1's CPU ``selu`` gradient for ``x <= 0`` is ``lam * (y + alpha)``
instead of the derivative ``y + lam * alpha``; ffnumba uses the derivative.)

Shapes
------
=======  ============================  =========================================
input    shape                         note
=======  ============================  =========================================
data     any (prelu: ndim >= 2)
gamma    (C,), (1,) or (g0, g1, ...)   only for ``prelu``, auto-created (C,),
                                       C = data.shape[1]; ndim >= 2: each g_i is
                                       data.shape[i] or 1
output   data.shape
mask     data.shape                    only for ``rrelu``
=======  ============================  =========================================

Source: MXNet 1.9.1 LeakyReLU documentation; Klambauer et al. 2017 (SELU),
Hendrycks & Gimpel 2016 (GELU), He et al. 2015 (PReLU), Xu et al. 2015 (RReLU).
Values checked against MXNet 1.9.1 (``tests/data/leaky_relu_golden.npz``).
"""
import math

import numpy as np
from numba import njit

from ...base import ParamError, ShapeError
from ...jit import gpu_body
from ..params import Params, Field
from ..registry import OpDef, register_op, shape_assign, same_type
from ..templates import JIT, LazyCudaKernel, f16_safe, import_cuda, launch_1d, make_unary

cuda = None  # bound by import_cuda(globals()) on first GPU use
__all__ = ['LeakyReLUParam']

SELU_LAMBDA = 1.0507009873554804934193349852946
SELU_ALPHA = 1.6732632423543772848170429916717
_SQRT1_2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327


class LeakyReLUParam(Params):
    """Parameters of LeakyReLU."""

    act_type = Field(str, 'leaky', 'Activation: leaky, elu, selu, gelu, prelu or rrelu.',
                     choices=('elu', 'gelu', 'leaky', 'prelu', 'rrelu', 'selu'))
    slope = Field(float, 0.25, 'Negative slope of leaky, scale of elu.')
    lower_bound = Field(float, 0.125, 'Lower bound of the rrelu slope.')
    upper_bound = Field(float, 0.334, 'Upper bound of the rrelu slope.')

    def validate(self):
        if self.act_type == 'rrelu' and self.upper_bound < self.lower_bound:
            raise ParamError('LeakyReLU: `upper_bound` must be >= lower_bound (%r). '
                             'Received: upper_bound=%r' % (self.lower_bound, self.upper_bound))


# ----------------------------------------------------------- scalar bodies

@njit
def _leaky(x, a, b):
    return x if x > 0 else a * x


@njit
def _d_leaky(x, a, b):
    return 1.0 if x > 0 else a


@njit
def _elu(x, a, b):
    return x if x > 0 else a * math.expm1(x)


@njit
def _d_elu(x, a, b):
    return 1.0 if x > 0 else a * math.exp(x)


@njit
def _selu(x, a, b):
    return SELU_LAMBDA * x if x > 0 else SELU_LAMBDA * SELU_ALPHA * math.expm1(x)


@njit
def _d_selu(x, a, b):
    return SELU_LAMBDA if x > 0 else SELU_LAMBDA * SELU_ALPHA * math.exp(x)


@njit
def _gelu(x, a, b):
    return 0.5 * x * (1.0 + math.erf(x * _SQRT1_2))


@njit
def _d_gelu(x, a, b):
    return 0.5 * (1.0 + math.erf(x * _SQRT1_2)) + x * _INV_SQRT_2PI * math.exp(-0.5 * x * x)


def _slope(p):
    return (p.slope, 0.0)


_UNARY = {
    'leaky': make_unary(_leaky, _d_leaky, 'input', _slope),
    'elu': make_unary(_elu, _d_elu, 'input', _slope),
    'selu': make_unary(_selu, _d_selu, 'input', _slope),
    'gelu': make_unary(_gelu, _d_gelu, 'input', _slope),
}


# ----------------------------------------------------------- declarations

def _arguments(p):
    return ['data', 'gamma'] if p.act_type == 'prelu' else ['data']


def _outputs(p):
    return ['output', 'mask'] if p.act_type == 'rrelu' else ['output']


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    if ins[0] is None and out_shapes and out_shapes[0] is not None:
        ins[0] = tuple(out_shapes[0])
    data = ins[0]
    if p.act_type == 'prelu' and data is not None:
        if len(data) < 2:
            raise ShapeError('LeakyReLU: prelu needs data with ndim >= 2 (channel on axis 1). '
                             'Received: data shape %s' % (data,))
        if ins[1] is None:
            ins[1] = (data[1],)
        elif len(ins[1]) >= 2:
            g = tuple(ins[1])
            if len(g) > len(data) or any(a not in (1, b) for a, b in zip(g, data)):
                raise ShapeError('Shape inconsistent for input `gamma`, Provided = %s, '
                                 'inferred shape=(%d,) (or a shape that broadcasts against '
                                 'the leading axes of data %s)' % (list(g), data[1], tuple(data)))
        elif tuple(ins[1]) != (1,):
            shape_assign(ins, 1, (data[1],), 'gamma')
    outs = [data] * len(_outputs(p))
    return ins, outs, list(aux_shapes)


def _infer_type(p, in_types, aux_types):
    ins, outs, aux = same_type(p, in_types, aux_types)
    return ins, outs * len(_outputs(p)), aux


# ----------------------------------------------------------- prelu / rrelu CPU

@njit
def _prelu(v, g):
    """PReLU / RReLU of one value with slope ``g`` (CPU and GPU kernels call it)."""
    return v if v > 0 else g * v


@njit
def _prelu_dx(v, d, g):
    """Gradient ``d`` through :func:`_prelu` at ``v``."""
    return d if v > 0 else g * d


@njit(error_model='numpy')
def _masked_at(x, mask, y, i):
    y[i] = _prelu(x[i], mask[i])


@njit(error_model='numpy')
def _masked_grad_at(x, mask, og, gx, add, i):
    g = _prelu_dx(x[i], og[i], mask[i])
    if add:
        gx[i] += g
    else:
        gx[i] = g


@njit(**JIT)
def _prelu_fwd(x, gamma, y):
    n_out, n_c, n_in = x.shape
    one = gamma.shape[0] == 1
    for o in range(n_out):
        for c in range(n_c):
            g = gamma[0] if one else gamma[c]
            for i in range(n_in):
                y[o, c, i] = _prelu(x[o, c, i], g)


@njit(**JIT)
def _prelu_bwd(x, gamma, og, gx, mode_x, gg, mode_g):
    """mode: 0 null, 1 write, 2 add. gg accumulates d/dgamma per channel."""
    n_out, n_c, n_in = x.shape
    one = gamma.shape[0] == 1
    if mode_g == 1:
        for k in range(gg.shape[0]):
            gg[k] = 0.0
    for o in range(n_out):
        for c in range(n_c):
            k = 0 if one else c
            g = gamma[k]
            acc = 0.0
            for i in range(n_in):
                v = x[o, c, i]
                d = og[o, c, i]
                gi = _prelu_dx(v, d, g)
                if not v > 0:
                    acc += d * v
                if mode_x == 1:
                    gx[o, c, i] = gi
                elif mode_x == 2:
                    gx[o, c, i] += gi
            if mode_g != 0:
                gg[k] += acc


@njit(**JIT)
def _masked_fwd(x, mask, y):
    for i in range(x.size):
        _masked_at(x, mask, y, i)


@njit(**JIT)
def _masked_bwd(x, mask, og, gx, add):
    for i in range(x.size):
        _masked_grad_at(x, mask, og, gx, add, i)


_MODES = {'null': 0, 'write': 1, 'add': 2}


def _oci(shape):
    shape = tuple(shape)
    inner = int(np.prod(shape[2:], dtype=np.int64))
    return shape[0], shape[1], inner


def _lead(xshape, gshape):
    """For a gamma of ndim k >= 2: the (1, rows, inner) view of data and data's first k dims."""
    k = len(gshape)
    lead = tuple(xshape[:k])
    return (1, int(np.prod(lead, dtype=np.int64)), int(np.prod(xshape[k:], dtype=np.int64))), lead


def _expand_gamma(gamma, lead):
    """gamma broadcast to data's leading dims, flat (one slope per row of the view)."""
    return np.ascontiguousarray(np.broadcast_to(gamma, lead)).reshape(-1)


def _reduce_gamma_grad(gg_rows, lead, gshape):
    """Per-row gamma gradients summed over the axes gamma is broadcast along."""
    g = gg_rows.reshape(lead)
    axes = tuple(i for i, (a, b) in enumerate(zip(gshape, lead)) if a == 1 and b != 1)
    return g.sum(axis=axes, keepdims=True).reshape(gshape) if axes else g.reshape(gshape)


def _rrelu_mask(ctx, p, shape, dtype):
    if ctx.is_train:
        return ctx.rng.uniform(p.lower_bound, p.upper_bound, size=shape).astype(dtype)
    return np.full(shape, 0.5 * (p.lower_bound + p.upper_bound), dtype)


@f16_safe
def _forward_cpu(ctx, p, inputs, outputs, aux):
    x = inputs[0]
    if p.act_type in _UNARY:
        return _UNARY[p.act_type][0]['cpu'](ctx, p, inputs, outputs, aux)
    if p.act_type == 'prelu':
        gamma = inputs[1]
        if gamma.ndim >= 2:
            s, lead = _lead(x.shape, gamma.shape)
            gamma = _expand_gamma(gamma, lead)
        else:
            s = _oci(x.shape)
        _prelu_fwd(x.reshape(s), gamma, outputs[0].reshape(s))
    else:
        outputs[1][...] = _rrelu_mask(ctx, p, x.shape, x.dtype)
        _masked_fwd(x.reshape(-1), outputs[1].reshape(-1), outputs[0].reshape(-1))


@f16_safe
def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    x = inputs[0]
    if p.act_type in _UNARY:
        return _UNARY[p.act_type][1]['cpu'](ctx, p, out_grads, inputs, outputs, in_grads,
                                            req, aux)
    if p.act_type == 'prelu':
        if req[0] == 'null' and req[1] == 'null':
            return
        gamma = inputs[1]
        if gamma.ndim >= 2:
            s, lead = _lead(x.shape, gamma.shape)
            gamma = _expand_gamma(gamma, lead)
            gg = np.zeros(gamma.shape, x.dtype)
        else:
            s = _oci(x.shape)
            gg = in_grads[1] if req[1] != 'null' else gamma
        og = out_grads[0].reshape(s)
        gx = in_grads[0].reshape(s) if req[0] != 'null' else og
        _prelu_bwd(x.reshape(s), gamma, og, gx, _MODES[req[0]], gg,
                   _MODES[req[1]] if inputs[1].ndim < 2 else int(req[1] != 'null'))
        if inputs[1].ndim >= 2 and req[1] != 'null':
            red = _reduce_gamma_grad(gg, lead, inputs[1].shape)
            if req[1] == 'add':
                in_grads[1][...] += red
            else:
                in_grads[1][...] = red
    elif req[0] != 'null':
        _masked_bwd(x.reshape(-1), outputs[1].reshape(-1), out_grads[0].reshape(-1),
                    in_grads[0].reshape(-1), req[0] == 'add')


# ----------------------------------------------------------- prelu / rrelu GPU

def _build_gpu():
    import_cuda(globals())
    masked_at, masked_grad_at = gpu_body(_masked_at), gpu_body(_masked_grad_at)

    @cuda.jit
    def prelu_fwd(x, gamma, y, n_c, n_in):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for j in range(start, x.size, stride):
            c = 0 if gamma.size == 1 else (j // n_in) % n_c
            y[j] = _prelu(x[j], gamma[c])

    @cuda.jit
    def prelu_bwd_x(x, gamma, og, gx, add, n_c, n_in):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for j in range(start, x.size, stride):
            c = 0 if gamma.size == 1 else (j // n_in) % n_c
            g = _prelu_dx(x[j], og[j], gamma[c])
            if add:
                gx[j] += g
            else:
                gx[j] = g

    @cuda.jit
    def prelu_bwd_g(x, og, gg, add, n_c, n_in):
        # one thread per gamma entry, summing over the elements of its channel
        # (of every element when gamma has one entry)
        start, stride = cuda.grid(1), cuda.gridsize(1)
        per = n_c * n_in
        for k in range(start, gg.size, stride):
            acc = 0.0
            if gg.size == 1:
                for j in range(x.size):
                    if x[j] <= 0:
                        acc += og[j] * x[j]
            else:
                for o in range(x.size // per):
                    for i in range(n_in):
                        j = o * per + k * n_in + i
                        if x[j] <= 0:
                            acc += og[j] * x[j]
            if add:
                gg[k] += acc
            else:
                gg[k] = acc

    @cuda.jit
    def masked_fwd(x, mask, y):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for j in range(start, x.size, stride):
            masked_at(x, mask, y, j)

    @cuda.jit
    def masked_bwd(x, mask, og, gx, add):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for j in range(start, x.size, stride):
            masked_grad_at(x, mask, og, gx, add, j)

    return dict(prelu_fwd=prelu_fwd, prelu_bwd_x=prelu_bwd_x, prelu_bwd_g=prelu_bwd_g,
                masked_fwd=masked_fwd, masked_bwd=masked_bwd)


_GPU = LazyCudaKernel(_build_gpu)


def _forward_gpu(ctx, p, inputs, outputs, aux):
    if p.act_type in _UNARY:
        return _UNARY[p.act_type][0]['gpu'](ctx, p, inputs, outputs, aux)
    k = _GPU.kernel
    x = inputs[0].reshape(-1)
    y = outputs[0].reshape(-1)
    if p.act_type == 'prelu':
        gamma = inputs[1]
        if len(gamma.shape) >= 2:
            (_, n_c, n_in), lead = _lead(inputs[0].shape, gamma.shape)
            gamma = cuda.to_device(_expand_gamma(gamma.copy_to_host(), lead))
        else:
            _, n_c, n_in = _oci(inputs[0].shape)
        launch_1d(k['prelu_fwd'], x.size, x, gamma, y, n_c, n_in)
    else:
        mask = _rrelu_mask(ctx, p, inputs[0].shape, np.dtype(inputs[0].dtype))
        outputs[1].copy_to_device(mask)
        launch_1d(k['masked_fwd'], x.size, x, outputs[1].reshape(-1), y)


def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if p.act_type in _UNARY:
        return _UNARY[p.act_type][1]['gpu'](ctx, p, out_grads, inputs, outputs, in_grads,
                                            req, aux)
    k = _GPU.kernel
    x = inputs[0].reshape(-1)
    og = out_grads[0].reshape(-1)
    if p.act_type == 'prelu':
        gamma, full = inputs[1], len(inputs[1].shape) >= 2
        if full:
            (_, n_c, n_in), lead = _lead(inputs[0].shape, gamma.shape)
            gamma = cuda.to_device(_expand_gamma(gamma.copy_to_host(), lead))
        else:
            _, n_c, n_in = _oci(inputs[0].shape)
        if req[0] != 'null':
            launch_1d(k['prelu_bwd_x'], x.size, x, gamma, og, in_grads[0].reshape(-1),
                      req[0] == 'add', n_c, n_in)
        if req[1] != 'null' and full:
            gg = cuda.device_array(gamma.shape, np.dtype(x.dtype))
            launch_1d(k['prelu_bwd_g'], gg.size, x, og, gg, False, n_c, n_in)
            red = _reduce_gamma_grad(gg.copy_to_host(), lead, tuple(inputs[1].shape))
            if req[1] == 'add':
                red = red + in_grads[1].copy_to_host()
            in_grads[1].copy_to_device(np.ascontiguousarray(red, dtype=np.dtype(x.dtype)))
        elif req[1] != 'null':
            launch_1d(k['prelu_bwd_g'], in_grads[1].size, x, og, in_grads[1],
                      req[1] == 'add', n_c, n_in)
    elif req[0] != 'null':
        launch_1d(k['masked_bwd'], x.size, x, outputs[1].reshape(-1), og,
                  in_grads[0].reshape(-1), req[0] == 'add')



def _backward_reads(p):
    """leaky, elu, selu, gelu: the derivative at x; prelu: x and gamma; rrelu: x and the mask."""
    return {'prelu': ('data', 'gamma'), 'rrelu': ('data', 'mask')}.get(p.act_type, ('data',))


_OP = register_op(OpDef(
    name='LeakyReLU',
    backward_reads=_backward_reads,
    float_only=True,
    arguments=_arguments,
    outputs=_outputs,
    params=LeakyReLUParam,
    infer_shape=_infer_shape,
    infer_type=_infer_type,
    forward={'cpu': _forward_cpu, 'gpu': _forward_gpu},
    backward={'cpu': _backward_cpu, 'gpu': _backward_gpu},
    doc=__doc__,
    input_docs={'data': 'Input array.',
                'gamma': 'prelu slopes, (C,) or (1,); auto-created `{name}_gamma`.'},
))


def _input_attrs(p):
    # MXNet's FSetInputVarAttrOnCompose: an auto-created prelu slope starts at 0.25
    return {'gamma': {'__init__': '["Constant", {"value": 0.25}]'}} if p.act_type == 'prelu' \
        else {}


_OP.input_attrs = _input_attrs
