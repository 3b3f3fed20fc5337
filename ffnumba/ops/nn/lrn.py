"""Local response normalization across channels (``LRN``).

Math (channel axis 1, ``h = nsize // 2``, window clipped at the edges)::

    s[n, c, ...] = knorm + alpha / nsize * sum_{c' = max(0, c-h)}^{min(C-1, c+h)} x[n, c', ...]^2
    y = x * s^(-beta)

Exact gradient (the window is symmetric, so ``c`` is in the window of ``c'``
exactly when ``c'`` is in the window of ``c``)::

    dx_c = g_c * s_c^(-beta)
           - 2 * alpha * beta / nsize * x_c * sum_{c' in win(c)} g_c' * x_c' * s_c'^(-beta-1)

The scale ``s`` is MXNet's hidden second output (``tmp_norm``); here it lives
in the node state between forward and backward.

CPU kernels work a sample at a time on ``(C, H*W)`` rows, the contiguous
spatial axis innermost: each window sum adds at most ``nsize`` whole rows
(squares in the forward, ``g * x * s^(-beta-1)`` in the backward), and the
batch is split over numba's threads for inputs of at least
``PAR_MIN_SIZE`` (forward) or ``PAR_MIN_SIZE_BWD`` (backward) elements. ``beta == 0.75`` computes ``s^(-beta)`` as
``1 / sqrt(s * sqrt(s))`` (within 2.5 ulp of the exact power).

Shapes
------
=======  ====================  ==================================================
input    shape                 note
=======  ====================  ==================================================
data     (N, C, ...)           MXNet takes 4-D only; any ndim >= 2 works here
output   data.shape
=======  ====================  ==================================================

Source: Krizhevsky et al., "ImageNet Classification with Deep Convolutional
Neural Networks" (2012), section 3.3; MXNet 1.9.1 LRN documentation. Values
checked against MXNet 1.9.1 (``tests/data/lrn_golden.npz``).
"""
import numpy as np
from numba import njit

from ...base import ShapeError, ParamError
from ...jit import gpu_body
from ..params import Params, Field
from ..registry import OpDef, register_op, same_shape
from ._conv_par import run_split, split_threads
from ._im2col import buffer
from ..templates import JIT, LazyCudaKernel, f16_safe, import_cuda, launch_1d

cuda = None  # bound by import_cuda(globals()) on first GPU use
__all__ = ['LRNParam']


class LRNParam(Params):
    """Parameters of LRN."""

    alpha = Field(float, 1e-4, 'Scale of the sum of squares.')
    beta = Field(float, 0.75, 'Exponent of the normaliser.')
    knorm = Field(float, 2.0, 'Constant added to the scaled sum of squares.')
    nsize = Field(int, doc='Number of channels in the window (odd, >= 1).', low=1)

    def validate(self):
        if self.nsize % 2 == 0:
            raise ParamError('LRN: `nsize` must be an odd int >= 1. Received: nsize=%r'
                             % self.nsize)


@njit
def _lrn_point(x, o, c, i, alpha, beta, knorm, nsize, scale, y):
    """Scale and output at one (o, c, i) (the GPU kernels; CPU: ``_lrn_fwd_range``)."""
    n_c = x.shape[1]
    h = nsize // 2
    acc = 0.0
    for k in range(max(0, c - h), min(n_c - 1, c + h) + 1):
        v = x[o, k, i]
        acc += v * v
    s = knorm + alpha / nsize * acc
    scale[o, c, i] = s
    y[o, c, i] = x[o, c, i] * s ** (-beta)


@njit
def _lrn_grad_point(x, og, scale, o, c, i, alpha, beta, nsize):
    """d loss / d x at one (o, c, i) (the GPU kernels; CPU: ``_lrn_bwd_range``)."""
    n_c = x.shape[1]
    h = nsize // 2
    acc = 0.0
    for k in range(max(0, c - h), min(n_c - 1, c + h) + 1):
        acc += og[o, k, i] * x[o, k, i] * scale[o, k, i] ** (-beta - 1.0)
    return og[o, c, i] * scale[o, c, i] ** (-beta) - 2.0 * alpha * beta / nsize * x[o, c, i] * acc


@njit(**JIT)
def _pow_neg(s, beta, one):
    """``s ** -beta``; ``beta == 0.75`` (AlexNet's and MXNet's default) as
    ``1 / sqrt(s * sqrt(s))``: two correctly rounded square roots, which
    vectorise, instead of a ``pow`` call per element (within 2.5 ulp of the
    exact power over s in 1e-3..1e6, float32 and float64). ``one`` is 1 in
    the dtype of ``s``, so float32 stays float32 (a float64 literal would
    promote the loop, about 1.7x slower)."""
    if beta == 0.75:
        return one / np.sqrt(s * np.sqrt(s))
    return s ** (-beta)


@njit(**JIT)
def _window_sum(src, c, h, acc):
    """``acc[i] = sum_{k in win(c)} src[k, i]`` over contiguous rows (window clipped)."""
    n_c, n_in = src.shape
    k0, k1 = max(0, c - h), min(n_c - 1, c + h)
    for i in range(n_in):
        acc[i] = src[k0, i]
    for k in range(k0 + 1, k1 + 1):
        for i in range(n_in):
            acc[i] += src[k, i]


@njit(**JIT)
def _lrn_fwd_range(x, a, beta, knorm, one, h, scale, y, sq, lo, hi):
    """Samples ``[lo, hi)`` of the forward; ``sq`` is ``(C, I)`` scratch.

    ``a = alpha / nsize``, ``knorm`` and ``one`` in the dtype of ``x``;
    ``h = nsize // 2``.

    Per sample: the squares once into ``sq``, then each channel's window sum
    as a plain sum of its (at most ``nsize``) contiguous rows, the spatial
    axis innermost. Not a sliding sum: adding the entering square and
    subtracting the leaving one cancels catastrophically when a large value
    leaves a window of small ones (the scale of a quiet channel next to a
    loud one would lose all its digits); the plain sum costs ``nsize`` adds
    per element, which the vectorised loop makes small next to the power.
    """
    n_c, n_in = x.shape[1], x.shape[2]
    for o in range(lo, hi):
        xo, so, yo = x[o], scale[o], y[o]
        for c in range(n_c):
            for i in range(n_in):
                sq[c, i] = xo[c, i] * xo[c, i]
        for c in range(n_c):
            row = so[c]
            _window_sum(sq, c, h, row)
            for i in range(n_in):
                s = knorm + a * row[i]
                row[i] = s
                yo[c, i] = xo[c, i] * _pow_neg(s, beta, one)


@njit(**JIT)
def _lrn_bwd_range(x, og, scale, coef, beta, one, h, add, gx, t, u, acc, lo, hi):
    """Samples ``[lo, hi)`` of the backward; ``t``, ``u`` ``(C, I)`` and ``acc`` ``(I,)`` scratch.

    With ``p = s^(-beta)``: ``u = g * p`` and ``t = g * x * p / s``
    (``= g * x * s^(-beta-1)``), then ``dx_c = u_c - 2 alpha beta / nsize *
    x_c * sum_{win(c)} t`` with the window summed as in the forward;
    ``coef = 2 alpha beta / nsize`` and ``one`` in the dtype of ``x``.
    """
    n_c, n_in = x.shape[1], x.shape[2]
    for o in range(lo, hi):
        xo, go, so, dxo = x[o], og[o], scale[o], gx[o]
        for c in range(n_c):
            for i in range(n_in):
                s = so[c, i]
                gp = go[c, i] * _pow_neg(s, beta, one)
                u[c, i] = gp
                t[c, i] = gp * xo[c, i] / s
        for c in range(n_c):
            _window_sum(t, c, h, acc)
            if add:
                for i in range(n_in):
                    dxo[c, i] += u[c, i] - coef * xo[c, i] * acc[i]
            else:
                for i in range(n_in):
                    dxo[c, i] = u[c, i] - coef * xo[c, i] * acc[i]


def _build_gpu():
    import_cuda(globals())
    point, grad_point = gpu_body(_lrn_point), gpu_body(_lrn_grad_point)

    @cuda.jit
    def fwd(x, alpha, beta, knorm, nsize, scale, y):
        n_c, n_in = x.shape[1], x.shape[2]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for j in range(start, x.size, stride):
            point(x, j // (n_c * n_in), (j // n_in) % n_c, j % n_in, alpha, beta, knorm, nsize,
                  scale, y)

    @cuda.jit
    def bwd(x, og, scale, alpha, beta, nsize, add, gx):
        n_c, n_in = x.shape[1], x.shape[2]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for j in range(start, x.size, stride):
            o, c, i = j // (n_c * n_in), (j // n_in) % n_c, j % n_in
            g = grad_point(x, og, scale, o, c, i, alpha, beta, nsize)
            if add:
                gx[o, c, i] += g
            else:
                gx[o, c, i] = g

    return fwd, bwd


_GPU = LazyCudaKernel(_build_gpu)


def _split(shape):
    shape = tuple(shape)
    return shape[0], shape[1], int(np.prod(shape[2:], dtype=np.int64))


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    if in_shapes[0] is None and out_shapes and out_shapes[0] is not None:
        in_shapes = [tuple(out_shapes[0])]
    d = in_shapes[0]
    if d is not None and len(d) < 2:
        raise ShapeError('LRN: data must have ndim >= 2 (N, C, ...). Received: data shape %s'
                         % (tuple(d),))
    return same_shape(p, in_shapes, aux_shapes, out_shapes)


def _scale(ctx, shape, dtype):
    s = ctx.state.get('scale')
    if s is None or s.shape != shape or s.dtype != dtype:
        s = ctx.state['scale'] = np.empty(shape, dtype)
    return s


#: Fewest input elements worth splitting the forward's batch over threads.
#: Measured on a 2-core VM (loaded, float32, nsize 5, best of 30), one thread
#: against two: 65k elements 0.05 vs 0.11 ms, 262k 0.20 vs 0.23-0.25 ms,
#: AlexNet's 461k 0.37 vs 0.33 ms, 2.1M 1.3-1.5 vs 0.92-0.97 ms.
PAR_MIN_SIZE = 3 << 17

#: Fewest input elements worth a split backward (about 1.6x the forward's
#: work): 65k 0.08 vs 0.14 ms, 262k 0.32-0.37 vs 0.28-0.33 ms, 461k 0.58-0.61
#: vs 0.45 ms, 2.1M 2.4 vs 1.4-1.5 ms.
PAR_MIN_SIZE_BWD = 1 << 18


def _threads(n, size, backward=False):
    """Threads for a batch of ``n`` samples, ``size`` elements (1 below the thresholds)."""
    least = PAR_MIN_SIZE_BWD if backward else PAR_MIN_SIZE
    return split_threads(n) if size >= least else 1


@f16_safe
def _forward_cpu(ctx, p, inputs, outputs, aux):
    x = inputs[0]
    s = _split(x.shape)
    n, c, m = s
    scale = _scale(ctx, s, x.dtype)
    x3, y3 = x.reshape(s), outputs[0].reshape(s)
    nt = _threads(n, x.size)
    sq = buffer(ctx.state, 'lrn', nt * c * m, x.dtype).reshape(nt, c, m)
    dt = x.dtype.type
    a, knorm, one = dt(p.alpha / p.nsize), dt(p.knorm), dt(1)

    def part(t):
        _lrn_fwd_range(x3, a, p.beta, knorm, one, p.nsize // 2, scale, y3, sq[t],
                       n * t // nt, n * (t + 1) // nt)
    if nt > 1:
        run_split(part, nt)
    else:
        part(0)


@f16_safe
def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'null':
        return
    x = inputs[0]
    s = _split(x.shape)
    n, c, m = s
    scale = ctx.state.get('scale')
    if scale is None or scale.shape != s or scale.dtype != x.dtype:
        _forward_cpu(ctx, p, inputs, [np.empty_like(outputs[0])], aux)
        scale = ctx.state['scale']
    x3, g3, dx3 = x.reshape(s), out_grads[0].reshape(s), in_grads[0].reshape(s)
    add = req[0] == 'add'
    nt = _threads(n, x.size, backward=True)
    buf = buffer(ctx.state, 'lrn', nt * (2 * c + 1) * m, x.dtype).reshape(nt, 2 * c + 1, m)
    dt = x.dtype.type
    coef, one = dt(2.0 * p.alpha * p.beta / p.nsize), dt(1)

    def part(t):
        b = buf[t]
        _lrn_bwd_range(x3, g3, scale, coef, p.beta, one, p.nsize // 2, add, dx3, b[:c],
                       b[c:2 * c], b[2 * c], n * t // nt, n * (t + 1) // nt)
    if nt > 1:
        run_split(part, nt)
    else:
        part(0)


def _forward_gpu(ctx, p, inputs, outputs, aux):
    fwd, _ = _GPU.kernel
    x = inputs[0]
    s = _split(x.shape)
    scale = ctx.state.get('scale')
    if scale is None or tuple(scale.shape) != s or scale.dtype != x.dtype:
        scale = ctx.state['scale'] = cuda.device_array(s, x.dtype)
    launch_1d(fwd, x.size, x.reshape(s), p.alpha, p.beta, p.knorm, p.nsize, scale,
              outputs[0].reshape(s))


def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    if req[0] == 'null':
        return
    _, bwd = _GPU.kernel
    x = inputs[0]
    s = _split(x.shape)
    scale = ctx.state.get('scale')
    if scale is None or tuple(scale.shape) != s:
        _forward_gpu(ctx, p, inputs, [cuda.device_array(tuple(x.shape), x.dtype)], aux)
        scale = ctx.state['scale']
    launch_1d(bwd, x.size, x.reshape(s), out_grads[0].reshape(s), scale, p.alpha, p.beta,
              p.nsize, req[0] == 'add', in_grads[0].reshape(s))


register_op(OpDef(
    name='LRN',
    backward_reads=('data',),
    float_only=True,
    arguments=['data'],
    params=LRNParam,
    num_hidden_outputs=1,
    infer_shape=_infer_shape,
    forward={'cpu': _forward_cpu, 'gpu': _forward_gpu},
    backward={'cpu': _backward_cpu, 'gpu': _backward_gpu},
    doc=__doc__,
    input_docs={'data': 'Input (N, C, ...).'},
))
