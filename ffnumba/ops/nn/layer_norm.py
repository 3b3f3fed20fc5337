"""Per-sample normalisation: ``LayerNorm``, ``GroupNorm``, ``InstanceNorm``.

Math
----
Each op views ``data`` as ``(A, K, B)`` and normalises every ``(a, b)`` row
of ``K`` values with its own statistics (population variance)::

    mean = sum_k x_k / K,  std = sqrt(sum_k (x_k - mean)^2 / K + eps)
    xhat_k = (x_k - mean) / std,  y_k = gamma[j] * xhat_k + beta[j]

==============  ===========================  ===================  ================
op              (A, K, B)                    scale index j        gamma, beta
==============  ===========================  ===================  ================
LayerNorm       (prod before axis,           k (position on axis) (C,), C = axis
                C = shape[axis],                                   length
                prod after axis)
GroupNorm       (N * G, C / G * S, 1)        group a mod G        (G,) (MXNet 1.9.1)
InstanceNorm    (N * C, S, 1)                channel a mod C      (C,)
==============  ===========================  ===================  ================

(``S`` = product of the spatial sizes, ``G`` = ``num_groups``.) Gradients,
with ``g_k`` the head gradient and ``d_k = g_k * gamma[j]``::

    dx_k = (d_k - mean(d) - xhat_k * mean(d * xhat)) / std
           + g_mean / K + g_std * xhat_k / K
    dgamma[j] = sum g_k xhat_k,  dbeta[j] = sum g_k   (over every element using j)

The last two terms carry the head gradients of the ``mean`` and ``std``
outputs (``output_mean_var=True``). MXNet 1.9.1 drops them (its gradient
through ``mean``/``std`` is 0, checked); they are the true derivative, so
ffnumba keeps them. ``std`` includes ``eps``, as in MXNet.

Shapes
------
=========  ==================================  ====================================
name       LayerNorm                           GroupNorm / InstanceNorm
=========  ==================================  ====================================
data       any, ndim >= 1                      (N, C, ...) (GroupNorm: C % G == 0)
gamma      (shape[axis],)                      (G,) / (C,)
beta       as gamma                            as gamma
output     data.shape                          data.shape
mean, std  data.shape with axis -> 1           GroupNorm: (N, G); InstanceNorm: none
=========  ==================================  ====================================

Source: Ba et al., "Layer Normalization" (2016); Wu & He, "Group Normalization"
(2018); Ulyanov et al., "Instance Normalization" (2016); MXNet 1.9.1
documentation and observed shapes (GroupNorm's gamma is ``(num_groups,)``).
"""
import math

import numpy as np
from numba import njit

from ...base import ShapeError
from ...jit import gpu_body
from ..params import Field, Params, require_finite
from ..registry import OpDef, register_op, shape_assign
from ..templates import JIT, LazyCudaKernel, f16_safe, import_cuda, launch_1d

cuda = None  # bound by import_cuda(globals()) on first GPU use
__all__ = ['LayerNormParam', 'GroupNormParam', 'InstanceNormParam']

_MODES = {'null': 0, 'write': 1, 'add': 2}


class LayerNormParam(Params):
    """Parameters of LayerNorm."""

    axis = Field(int, -1, 'The axis to normalise over (negative counts from the end).')
    eps = Field(float, 1e-5, 'Added to the variance before the square root (>= 0).', low=0.0)
    output_mean_var = Field(bool, False, 'Also output the mean and the std.')

    def validate(self):
        require_finite(self, 'eps')


class GroupNormParam(Params):
    """Parameters of GroupNorm."""

    num_groups = Field(int, 1, 'Number of channel groups (divides the channels).', low=1)
    eps = Field(float, 1e-5, 'Added to the variance before the square root (>= 0).', low=0.0)
    output_mean_var = Field(bool, False, 'Also output the mean and the std.')

    def validate(self):
        require_finite(self, 'eps')


class InstanceNormParam(Params):
    """Parameters of InstanceNorm."""

    eps = Field(float, 1e-3, 'Added to the variance before the square root (>= 0).', low=0.0)

    def validate(self):
        require_finite(self, 'eps')


# ----------------------------------------------------------------- geometry

def _layer_axis(p, ndim):
    ax = p.axis + ndim if p.axis < 0 else p.axis
    if not 0 <= ax < ndim:
        raise ShapeError('LayerNorm: `axis`=%d is out of range for data of %d dims'
                         % (p.axis, ndim))
    return ax


def _geometry(op, p, shape):
    """``(A, K, B, scale_mode, G, n_scale)`` of the (A, K, B) view (see the module doc)."""
    shape = tuple(int(s) for s in shape)
    if op == 'LayerNorm':
        ax = _layer_axis(p, len(shape))
        a = int(np.prod(shape[:ax], dtype=np.int64))
        b = int(np.prod(shape[ax + 1:], dtype=np.int64))
        return a, shape[ax], b, 0, 1, shape[ax]
    if len(shape) < 2:
        raise ShapeError('%s: data must be (N, C, ...) with ndim >= 2. Received: data shape %s'
                         % (op, shape))
    n, c = shape[0], shape[1]
    s = int(np.prod(shape[2:], dtype=np.int64))
    if op == 'GroupNorm':
        g = p.num_groups
        if c % g:
            raise ShapeError('GroupNorm: the channels (%d, axis 1 of data shape %s) must be a '
                             'multiple of num_groups=%d' % (c, shape, g))
        return n * g, c // g * s, 1, 1, g, g
    return n * c, s, 1, 1, c, c


def _stat_shape(op, p, shape):
    if op == 'LayerNorm':
        ax = _layer_axis(p, len(shape))
        return tuple(1 if d == ax else s for d, s in enumerate(shape))
    return (shape[0], p.num_groups)


def _make_infer(op):
    def infer(p, in_shapes, aux_shapes, out_shapes):
        ins = list(in_shapes)
        if ins[0] is None and out_shapes and out_shapes[0] is not None:
            ins[0] = tuple(out_shapes[0])
        data = ins[0]
        outs = [None] * len(_outputs(p))
        if data is not None:
            geo = _geometry(op, p, data)
            shape_assign(ins, 1, (geo[5],), 'gamma')
            shape_assign(ins, 2, (geo[5],), 'beta')
            outs[0] = tuple(data)
            if len(outs) == 3:
                outs[1] = outs[2] = _stat_shape(op, p, tuple(data))
        return ins, outs, list(aux_shapes)
    return infer


def _outputs(p):
    return ['output', 'mean', 'std'] if getattr(p, 'output_mean_var', False) else ['output']


def _hidden(p):
    return 3 - len(_outputs(p))


def _infer_type(p, in_types, aux_types):
    known = next((t for t in in_types if t is not None), None)
    return [known] * len(in_types), [known] * len(_outputs(p)), []


# ----------------------------------------------------------------- row bodies
# One ``(a, b)`` row per call: the CPU kernels loop over the rows, the GPU kernels
# give each thread a row (grid-stride).

@njit(error_model='numpy')
def _stats_row(x, gamma, beta, smode, ng, eps, write_y, mean, std, y, a, b):
    """Mean and std of row ``(a, b)``; with ``write_y`` also its output."""
    nk = x.shape[1]
    m = 0.0
    for k in range(nk):
        m += x[a, k, b]
    m /= nk
    v = 0.0
    for k in range(nk):
        d = x[a, k, b] - m
        v += d * d
    s = math.sqrt(v / nk + eps)
    mean[a, b] = m
    std[a, b] = s
    if write_y:
        inv = 1.0 / s
        for k in range(nk):
            j = k if smode == 0 else a % ng
            y[a, k, b] = gamma[j] * ((x[a, k, b] - m) * inv) + beta[j]


@njit(error_model='numpy')
def _grad_row(x, gamma, mean, std, og, gm, gs, use_ms, smode, ng, gx, mx, acc_g, acc_b, mg, mb,
              a, b):
    """The data gradient of row ``(a, b)`` (mode ``mx``: 0 null, 1 write, 2 add).

    With ``mg``/``mb`` also adds the row's share of the gamma/beta gradients to
    ``acc_g``/``acc_b`` (the CPU's single pass; GPU threads leave them off).
    """
    nk = x.shape[1]
    m = mean[a, b]
    inv = 1.0 / std[a, b]
    sd = 0.0
    sdx = 0.0
    for k in range(nk):
        j = k if smode == 0 else a % ng
        xh = (x[a, k, b] - m) * inv
        g = og[a, k, b]
        d = g * gamma[j]
        sd += d
        sdx += d * xh
        if mg:
            acc_g[j] += g * xh
        if mb:
            acc_b[j] += g
    if mx == 0:
        return
    sd /= nk
    sdx /= nk
    em = 0.0
    es = 0.0
    if use_ms:
        em = gm[a, b] / nk
        es = gs[a, b] / nk
    for k in range(nk):
        j = k if smode == 0 else a % ng
        xh = (x[a, k, b] - m) * inv
        v = (og[a, k, b] * gamma[j] - sd - xh * sdx) * inv + em + es * xh
        if mx == 1:
            gx[a, k, b] = v
        else:
            gx[a, k, b] += v


# ----------------------------------------------------------------- CPU kernels

@njit(**JIT)
def _fwd_cpu(x, gamma, beta, smode, ng, eps, write_y, mean, std, y):
    """Row statistics into mean/std (A, B); with ``write_y`` also the output."""
    for a in range(x.shape[0]):
        for b in range(x.shape[2]):
            _stats_row(x, gamma, beta, smode, ng, eps, write_y, mean, std, y, a, b)


@njit(**JIT)
def _bwd_cpu(x, gamma, mean, std, og, gm, gs, use_ms, smode, ng, gx, ggam, gbet, mx, mg, mb,
             acc_g, acc_b):
    """Gradients; m* are modes 0 null, 1 write, 2 add for data, gamma, beta.

    ``acc_g``/``acc_b`` (float64, zeroed, gamma's length) accumulate the
    gamma/beta sums, which run over every row: float32 sums of thousands of
    rows would lose ~1e-4 relative.
    """
    for a in range(x.shape[0]):
        for b in range(x.shape[2]):
            _grad_row(x, gamma, mean, std, og, gm, gs, use_ms, smode, ng, gx, mx, acc_g, acc_b,
                      mg, mb, a, b)
    for j in range(acc_g.shape[0]):
        if mg == 1:
            ggam[j] = acc_g[j]
        elif mg == 2:
            ggam[j] += acc_g[j]
        if mb == 1:
            gbet[j] = acc_b[j]
        elif mb == 2:
            gbet[j] += acc_b[j]


# ----------------------------------------------------------------- GPU kernels

def _build_gpu():
    import_cuda(globals())
    stats_row, grad_row = gpu_body(_stats_row), gpu_body(_grad_row)

    @cuda.jit
    def fwd(x, gamma, beta, smode, ng, eps, write_y, mean, std, y):
        nb = x.shape[2]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for r in range(start, x.shape[0] * nb, stride):
            stats_row(x, gamma, beta, smode, ng, eps, write_y, mean, std, y, r // nb, r % nb)

    @cuda.jit
    def grad_x(x, gamma, mean, std, og, gm, gs, use_ms, smode, ng, gx, mx):
        nb = x.shape[2]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for r in range(start, x.shape[0] * nb, stride):
            grad_row(x, gamma, mean, std, og, gm, gs, use_ms, smode, ng, gx, mx, gamma, gamma,
                     0, 0, r // nb, r % nb)

    @cuda.jit
    def grad_scale(x, mean, std, og, smode, ng, ggam, gbet, mg, mb):
        na, nk, nb = x.shape
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for j in range(start, ggam.size, stride):
            sg = 0.0
            sb = 0.0
            if smode == 0:
                for a in range(na):
                    for b in range(nb):
                        g = og[a, j, b]
                        sg += g * (x[a, j, b] - mean[a, b]) / std[a, b]
                        sb += g
            else:
                for a in range(j, na, ng):
                    for k in range(nk):
                        for b in range(nb):
                            g = og[a, k, b]
                            sg += g * (x[a, k, b] - mean[a, b]) / std[a, b]
                            sb += g
            if mg == 1:
                ggam[j] = sg
            elif mg == 2:
                ggam[j] += sg
            if mb == 1:
                gbet[j] = sb
            elif mb == 2:
                gbet[j] += sb

    return fwd, grad_x, grad_scale


_GPU = LazyCudaKernel(_build_gpu)


# ----------------------------------------------------------------- glue

def _make_compute(op):
    def views(p, inputs):
        na, nk, nb, smode, ng, _ = _geometry(op, p, inputs[0].shape)
        return inputs[0].reshape(na, nk, nb), (na, nb), smode, ng

    def stats_out(outputs, st_shape, empty):
        if len(outputs) == 3:
            return outputs[1].reshape(st_shape), outputs[2].reshape(st_shape)
        return empty(st_shape), empty(st_shape)

    @f16_safe
    def forward_cpu(ctx, p, inputs, outputs, aux):
        x, st_shape, smode, ng = views(p, inputs)
        mean, std = stats_out(outputs, st_shape, lambda s: np.empty(s, x.dtype))
        _fwd_cpu(x, inputs[1], inputs[2], smode, ng, p.eps, True, mean, std,
                 outputs[0].reshape(x.shape))

    @f16_safe
    def backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        modes = [_MODES[r] for r in req]
        if not any(modes):
            return
        x, st_shape, smode, ng = views(p, inputs)
        mean, std = np.empty(st_shape), np.empty(st_shape)
        _fwd_cpu(x, inputs[1], inputs[2], smode, ng, p.eps, False, mean, std, x)
        use_ms = len(out_grads) == 3 and out_grads[1] is not None
        gm, gs = ((out_grads[1].reshape(st_shape), out_grads[2].reshape(st_shape)) if use_ms
                  else (mean, std))
        gx = in_grads[0].reshape(x.shape) if modes[0] else x
        gg = in_grads[1] if modes[1] else inputs[1]
        gb = in_grads[2] if modes[2] else inputs[2]
        _bwd_cpu(x, inputs[1], mean, std, out_grads[0].reshape(x.shape), gm, gs, use_ms, smode,
                 ng, gx, gg, gb, modes[0], modes[1], modes[2],
                 np.zeros(inputs[1].shape[0]), np.zeros(inputs[1].shape[0]))

    def forward_gpu(ctx, p, inputs, outputs, aux):
        import_cuda(globals())
        x, st_shape, smode, ng = views(p, inputs)
        mean, std = stats_out(outputs, st_shape, lambda s: cuda.device_array(s, x.dtype))
        launch_1d(_GPU.kernel[0], st_shape[0] * st_shape[1], x, inputs[1], inputs[2], smode,
                  ng, p.eps, True, mean, std, outputs[0].reshape(x.shape))

    def backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        modes = [_MODES[r] for r in req]
        if not any(modes):
            return
        import_cuda(globals())
        fwd, grad_x, grad_scale = _GPU.kernel
        x, st_shape, smode, ng = views(p, inputs)
        mean, std = cuda.device_array(st_shape, x.dtype), cuda.device_array(st_shape, x.dtype)
        rows = st_shape[0] * st_shape[1]
        launch_1d(fwd, rows, x, inputs[1], inputs[2], smode, ng, p.eps, False, mean, std, x)
        og = out_grads[0].reshape(x.shape)
        if modes[0]:
            use_ms = len(out_grads) == 3 and out_grads[1] is not None
            gm, gs = ((out_grads[1].reshape(st_shape), out_grads[2].reshape(st_shape))
                      if use_ms else (mean, std))
            launch_1d(grad_x, rows, x, inputs[1], mean, std, og, gm, gs, use_ms, smode, ng,
                      in_grads[0].reshape(x.shape), modes[0])
        if modes[1] or modes[2]:
            gg = in_grads[1] if modes[1] else inputs[1]
            gb = in_grads[2] if modes[2] else inputs[2]
            launch_1d(grad_scale, inputs[1].size, x, mean, std, og, smode, ng, gg, gb,
                      modes[1], modes[2])

    return {'cpu': forward_cpu, 'gpu': forward_gpu}, {'cpu': backward_cpu, 'gpu': backward_gpu}


_DOCS = {
    'LayerNorm': ('Layer normalisation over one axis (default the last), with a learned '
                  'per-position scale and shift.', LayerNormParam,
                  {'data': 'Input, any shape.', 'gamma': 'Scale, (shape[axis],).',
                   'beta': 'Shift, (shape[axis],).'}),
    'GroupNorm': ('Group normalisation: the channels of each sample split into `num_groups` '
                  'groups, each normalised over its channels and spatial positions.',
                  GroupNormParam,
                  {'data': 'Input, (N, C, ...).', 'gamma': 'Scale per group, (num_groups,).',
                   'beta': 'Shift per group, (num_groups,).'}),
    'InstanceNorm': ('Instance normalisation: each channel of each sample normalised over '
                     'its spatial positions.', InstanceNormParam,
                     {'data': 'Input, (N, C, ...).', 'gamma': 'Scale per channel, (C,).',
                      'beta': 'Shift per channel, (C,).'}),
}

for _op, (_summary, _params, _inputs) in _DOCS.items():
    _fwd, _bwd = _make_compute(_op)
    register_op(OpDef(
        name=_op, float_only=True, backward_reads=('data', 'gamma'), arguments=['data', 'gamma', 'beta'], outputs=_outputs,
        num_hidden_outputs=_hidden, params=_params, infer_shape=_make_infer(_op),
        infer_type=_infer_type, forward=_fwd, backward=_bwd,
        doc='%s\n\n%s' % (_summary, __doc__), input_docs=_inputs))
