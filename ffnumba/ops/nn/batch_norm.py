"""Batch normalization (``BatchNorm``).

Math (per channel ``c`` of axis ``axis``; mean and variance over every other axis)::

    training:     mu_c = mean(x[..c..]),  var_c = mean((x - mu_c)^2)   (biased)
    evaluation:   mu_c = moving_mean_c,   var_c = moving_var_c
    y = gamma_c * (x - mu_c) / sqrt(var_c + eps) + beta_c

With ``fix_gamma`` the scale is 1 (MXNet's CPU kernel also writes 1 into the
``gamma`` array, and its gradient is 0). ``use_global_stats`` uses the moving
statistics in training too.

Moving statistics: ``moving = moving * momentum + batch * (1 - momentum)``
(``batch`` is the biased batch variance for ``moving_var``). As in MXNet
1.9.1's CPU operator (``MXNET_MKLDNN_ENABLED=0``) the update happens in the
**backward** pass of a training step: after ``forward(is_train=True)`` and
``backward()`` both stacks show the same moving statistics; a training forward
alone does not change them.

Gradients: through the batch statistics (``dx = gamma * invstd * (g - mean(g) -
xhat * mean(g * xhat))``) unless ``use_global_stats``, where ``dx = gamma *
invstd * g``. As in MXNet, a backward after an evaluation forward uses the first
form with the moving statistics.

Outputs: ``output``; with ``output_mean_var`` also ``mean`` and ``var``, where
(as on MXNet's CPU) ``var`` holds the inverse standard deviation
``1 / sqrt(var_c + eps)``. Without ``output_mean_var`` those two are hidden
outputs (``num_hidden_outputs=2``) and are kept in the node state.

Shapes
------
=============  ===============================  =============================
input          shape                            note
=============  ===============================  =============================
data           (d0, ..., C at ``axis``, ...)    ndim >= 1
gamma, beta    (C,)                             arguments
moving_mean    (C,)                             auxiliary state, init 0
moving_var     (C,)                             auxiliary state, init 1
output         data.shape
mean, var      (C,)                             only with ``output_mean_var``
=============  ===============================  =============================

Source: Ioffe & Szegedy, "Batch Normalization" (2015); MXNet 1.9.1 BatchNorm
documentation and observed CPU behaviour.
"""
import math

import numpy as np
from numba import float64

from ...base import ShapeError, DTypeError
from ..params import Params, Field
from ..registry import OpDef, register_op, shape_assign
from ..templates import LazyCudaKernel, f16_safe, launch_1d, import_cuda
# the CPU kernels (mode NONE: no activation); PART_SUM re-exported
from ._bn_kernels import NONE, PART_SUM, _affine, _bwd_range, _fwd_range  # noqa: F401

cuda = None  # bound by import_cuda(globals()) on first GPU use
__all__ = ['BatchNormParam', 'inference_affine']


# ----------------------------------------------------------------- helpers

def _split(shape, axis):
    """(outer, C, inner) sizes of ``shape`` around ``axis``."""
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    return outer, int(shape[axis]), inner


class BatchNormParam(Params):
    """Parameters of BatchNorm."""

    eps = Field(float, 1e-3, 'Added to the variance before the square root.', low=0.0)
    momentum = Field(float, 0.9, 'Decay of the moving statistics, in [0, 1].',
                     low=0.0, high=1.0)
    fix_gamma = Field(bool, True, 'Fix gamma to 1 (its gradient is 0).')
    use_global_stats = Field(bool, False, 'Normalise with the moving statistics in training too.')
    output_mean_var = Field(bool, False, 'Also output the mean and the inverse std.')
    axis = Field(int, 1, 'The channel axis (negative counts from the end).')
    cudnn_off = Field(bool, False, 'Ignored (MXNet: do not use cuDNN).')
    min_calib_range = Field(float, None, 'Ignored (quantization).')
    max_calib_range = Field(float, None, 'Ignored (quantization).')


def _outputs(p):
    return ['output', 'mean', 'var'] if p.output_mean_var else ['output']


def _hidden(p):
    return 0 if p.output_mean_var else 2


def _axis(p, ndim):
    ax = p.axis + ndim if p.axis < 0 else p.axis
    if not 0 <= ax < ndim:
        raise ShapeError('BatchNorm: `axis`=%d is out of range for data of %d dims'
                         % (p.axis, ndim))
    return ax


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    ins, aux = list(in_shapes), list(aux_shapes)
    if ins[0] is None and out_shapes and out_shapes[0] is not None:
        ins[0] = tuple(out_shapes[0])
    data = ins[0]
    c_shape = None
    if data is not None:
        c_shape = (data[_axis(p, len(data))],)
    else:
        c_shape = next((s for s in ins[1:] + aux if s is not None), None)
    if c_shape is not None:
        shape_assign(ins, 1, c_shape, 'gamma')
        shape_assign(ins, 2, c_shape, 'beta')
        shape_assign(aux, 0, c_shape, 'moving_mean')
        shape_assign(aux, 1, c_shape, 'moving_var')
    outs = [data] + ([c_shape, c_shape] if p.output_mean_var else [])
    return ins, outs, aux


def _infer_type(p, in_types, aux_types):
    """data's dtype for the output; float32 params for float16 data (MXNet)."""
    ins, aux = list(in_types), list(aux_types)
    dt = ins[0]
    if dt is None:
        return ins, [None] * len(_outputs(p)), aux
    dt = np.dtype(dt)
    pt = np.dtype('float32') if dt == np.float16 else dt
    for lst, idx, names in ((ins, (1, 2), ('gamma', 'beta')),
                            (aux, (0, 1), ('moving_mean', 'moving_var'))):
        for i, n in zip(idx, names):
            if lst[i] is not None and np.dtype(lst[i]) != pt:
                raise DTypeError('BatchNorm: `%s` must have dtype %s for %s data. Received: %s'
                                 % (n, pt, dt, np.dtype(lst[i])))
            lst[i] = pt
    outs = [dt] + ([pt, pt] if p.output_mean_var else [])
    return ins, outs, aux


# ----------------------------------------------------------------- CPU kernels
#
# Data is flat (outer, C, inner). Each kernel runs on channels ``clo..chi`` so the
# channels split over threads (``_conv_par.run_split``), a cache-sized block of them at
# a time, and streams through memory in order (sample by sample, the block's channels
# contiguous) with per-channel float64 accumulators in ``acc`` (fed by partial sums of
# at most ``PART_SUM`` terms in the data's dtype, MXNet's own float accumulation for
# float32; vectorised twice as wide as float64 ones): the training forward
# reads the data twice (statistics, then normalise), the evaluation forward once, the
# backward twice (sums, data gradient). The kernels are in :mod:`._bn_kernels` (mode ``NONE``:
# no activation; one compiled pair for BatchNorm alone and BatchNorm -> relu).

#: Fewest elements per thread before the channels split over threads; the split's pieces
#: scale with it (2-core VM, batch 32, each alone: (32, 256, 8, 8) 87 us on one thread against
#: 104-109 split with 2^18 here; (32, 1024, 8, 8) split 0.32 / 0.43 ms forward / backward
#: against 0.37 / 0.56 in smaller pieces).
PAR_MIN_ELEMS = 1 << 19
#: Elements of one block of channels, read twice (about 512 KiB of float32: the second pass
#: finds the block in the L2 cache, beside the output it writes). ResNet-50's BatchNorm
#: layers at batch 32 (one of each shape, weighted by its count; forward / backward, ms):
#: 2 threads 15.6 / 22.4 -> 14.2 / 20.3 against 2^18 for both constants, 1 thread 22.8 /
#: 34.6 -> 22.1 / 34.1.
BLOCK_ELEMS = 1 << 17


def _run_channels(kernel, size, c, *args):
    """``kernel(*args, clo, chi)`` over all ``c`` channels, split over threads (ranges
    of channels the threads claim, :func:`ffnumba.thread_pool.split_range`) when
    each gets at least :data:`PAR_MIN_ELEMS` elements."""
    from ...thread_pool import split_range
    split_range(lambda lo, hi: kernel(*args, lo, hi), c, -(-PAR_MIN_ELEMS * c // max(1, size)), 1)


# ----------------------------------------------------------------- compute

def _state(ctx, c, dtype, alloc=np.empty):
    """Per-node buffers: batch ``mean``, ``var`` (C,), channel ``sums`` (2, C) and, on
    the CPU, the kernels' float64 scratch ``acc`` (3, C).

    ``alloc`` makes an array (``numpy.empty`` or ``cuda.device_array``).
    """
    st = ctx.state
    if st.get('mean') is None or st['mean'].shape != (c,) or st['mean'].dtype != dtype:
        st['mean'] = alloc(c, dtype)
        st['var'] = alloc(c, dtype)
        st['sums'] = alloc((2, c), dtype)
        if alloc is np.empty:
            st['acc'] = np.empty((3, c), np.float64)
    return st


@f16_safe
def _forward_cpu(ctx, p, inputs, outputs, aux):
    data, gamma, beta = inputs
    o, c, i = _split(data.shape, _axis(p, data.ndim))
    st = _state(ctx, c, gamma.dtype)
    if p.fix_gamma:
        gamma[...] = 1
    batch = ctx.is_train and not p.use_global_stats
    if not batch:
        st['mean'][...] = aux[0]
        st['var'][...] = aux[1]
    st['batch'] = batch
    _run_channels(_fwd_range, data.size, c, data.reshape(-1), o, c, i, batch, st['mean'],
                  st['var'], gamma, beta, p.eps, outputs[0].reshape(-1), st['acc'], NONE,
                  0.0, 0.0, BLOCK_ELEMS)
    if p.output_mean_var:
        outputs[1][...] = st['mean']
        outputs[2][...] = 1.0 / np.sqrt(st['var'] + p.eps)


def inference_affine(p, gamma, beta, moving_mean, moving_var, out):
    """The evaluation forward's per-channel map ``y = x * scale + shift``, for fused kernels.

    Exactly the values the CPU forward computes (the same :func:`_affine`), so
    a fused convolution epilogue (``_conv_epilogue``) is bit-identical to
    this operator. As the forward, ``fix_gamma`` writes 1 into ``gamma``.

    Parameters
    ----------
    p : BatchNormParam
    gamma, beta, moving_mean, moving_var : ndarray (C,)
        float32 or float64.
    out : ndarray (>= 2, >= C) float64
        Rows 0 and 1 receive ``scale`` and ``shift``.

    Returns
    -------
    ndarray
        ``out``.
    """
    if p.fix_gamma:
        gamma[...] = 1
    _affine(moving_mean, moving_var, gamma, beta, p.eps, out, 0, gamma.shape[0])
    return out


@f16_safe
def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    data, gamma, _ = inputs
    o, c, i = _split(data.shape, _axis(p, data.ndim))
    st = ctx.state
    if 'batch' not in st:        # backward without a forward: recompute as forward would
        _forward_cpu(ctx, p, inputs, outputs, aux)
    mean, var, sums = st['mean'], st['var'], st['sums']
    # like MXNet, the data gradient goes through the batch statistics unless
    # use_global_stats (also after an evaluation forward, with the moving stats)
    mode = {'null': 0, 'write': 1, 'add': 2}[req[0]]
    xf = data.reshape(-1)
    _run_channels(_bwd_range, data.size, c, xf, out_grads[0].reshape(-1), o, c, i, mean,
                  var, gamma, inputs[2], p.eps, not p.use_global_stats, mode, sums,
                  in_grads[0].reshape(-1) if mode else xf, st['acc'], st['acc'], NONE,
                  0.0, 0.0, BLOCK_ELEMS)
    _param_grads(p, st, sums, in_grads, req, aux)


def _param_grads(p, st, sums, in_grads, req, aux):
    """gamma's and beta's gradients from the channel ``sums``; the moving statistics'
    update after a training forward (``st``: the node state)."""
    if req[1] == 'write':
        in_grads[1][...] = 0 if p.fix_gamma else sums[1]
    elif req[1] == 'add' and not p.fix_gamma:
        in_grads[1] += sums[1]
    if req[2] == 'write':
        in_grads[2][...] = sums[0]
    elif req[2] == 'add':
        in_grads[2] += sums[0]
    if st['batch']:
        m = p.momentum
        aux[0][...] = aux[0] * m + st['mean'] * (1.0 - m)
        aux[1][...] = aux[1] * m + st['var'] * (1.0 - m)


# ----------------------------------------------------------------- GPU kernels

#: Threads per block of the per-channel reductions (a power of two).
RED_THREADS = 128


def _build_gpu():
    import_cuda(globals())
    nt = RED_THREADS

    @cuda.jit(device=True)
    def block_sum(sm, v, tid):
        sm[tid] = v
        cuda.syncthreads()
        step = nt // 2
        while step > 0:
            if tid < step:
                sm[tid] += sm[tid + step]
            cuda.syncthreads()
            step //= 2
        r = sm[0]
        cuda.syncthreads()
        return r

    @cuda.jit
    def stats(x, mean, var):
        """One block per channel (grid-stride over channels)."""
        sm = cuda.shared.array(nt, float64)
        tid = cuda.threadIdx.x
        n_out, n_c, n_in = x.shape
        n = n_out * n_in
        for c in range(cuda.blockIdx.x, n_c, cuda.gridDim.x):
            s = 0.0
            for j in range(tid, n, nt):
                s += x[j // n_in, c, j % n_in]
            m = block_sum(sm, s, tid) / n
            ss = 0.0
            for j in range(tid, n, nt):
                d = x[j // n_in, c, j % n_in] - m
                ss += d * d
            v = block_sum(sm, ss, tid) / n
            if tid == 0:
                mean[c] = m
                var[c] = v

    @cuda.jit
    def channel_sums(x, og, mean, var, eps, sums):
        sm = cuda.shared.array(nt, float64)
        tid = cuda.threadIdx.x
        n_out, n_c, n_in = x.shape
        n = n_out * n_in
        for c in range(cuda.blockIdx.x, n_c, cuda.gridDim.x):
            invstd = 1.0 / math.sqrt(var[c] + eps)
            s0 = 0.0
            s1 = 0.0
            for j in range(tid, n, nt):
                g = og[j // n_in, c, j % n_in]
                s0 += g
                s1 += g * (x[j // n_in, c, j % n_in] - mean[c]) * invstd
            t0 = block_sum(sm, s0, tid)
            t1 = block_sum(sm, s1, tid)
            if tid == 0:
                sums[0, c] = t0
                sums[1, c] = t1

    @cuda.jit
    def normalize(x, mean, var, gamma, beta, eps, y):
        n_out, n_c, n_in = x.shape
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for j in range(start, x.size, stride):
            o = j // (n_c * n_in)
            c = (j // n_in) % n_c
            i = j % n_in
            scale = gamma[c] / math.sqrt(var[c] + eps)
            y[o, c, i] = (x[o, c, i] - mean[c]) * scale + beta[c]

    @cuda.jit
    def grad_data(x, og, mean, var, gamma, eps, sums, batch, add, gx):
        n_out, n_c, n_in = x.shape
        n = n_out * n_in
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for j in range(start, x.size, stride):
            o = j // (n_c * n_in)
            c = (j // n_in) % n_c
            i = j % n_in
            invstd = 1.0 / math.sqrt(var[c] + eps)
            k = gamma[c] * invstd
            if batch:
                xhat = (x[o, c, i] - mean[c]) * invstd
                g = k * (og[o, c, i] - sums[0, c] / n - xhat * sums[1, c] / n)
            else:
                g = k * og[o, c, i]
            if add:
                gx[o, c, i] += g
            else:
                gx[o, c, i] = g

    @cuda.jit
    def channel_ops(op, a, b, s, out):
        """Small (C,) updates. op 0: out = s; 1: out = a; 2: out += a;
        3: out = out * s + a * (1 - s); 4: out = 1 / sqrt(a + s)."""
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for c in range(start, out.size, stride):
            if op == 0:
                out[c] = s
            elif op == 1:
                out[c] = a[c]
            elif op == 2:
                out[c] += a[c]
            elif op == 3:
                out[c] = out[c] * s + a[c] * (1.0 - s)
            else:
                out[c] = 1.0 / math.sqrt(a[c] + s)

    return dict(stats=stats, channel_sums=channel_sums, normalize=normalize,
                grad_data=grad_data, channel_ops=channel_ops)


_GPU = LazyCudaKernel(_build_gpu)


def _per_channel(k, c, *args):
    k[max(1, min(c, 1024)), RED_THREADS](*args)


def _forward_gpu(ctx, p, inputs, outputs, aux):
    k = _GPU.kernel
    ops = k['channel_ops']
    data, gamma, beta = inputs
    o, c, i = _split(tuple(data.shape), _axis(p, data.ndim))
    x = data.reshape(o, c, i)
    st = _state(ctx, c, np.dtype(gamma.dtype), cuda.device_array)
    if p.fix_gamma:
        launch_1d(ops, c, 0, gamma, gamma, 1.0, gamma)
    batch = ctx.is_train and not p.use_global_stats
    if batch:
        _per_channel(k['stats'], c, x, st['mean'], st['var'])
    else:
        launch_1d(ops, c, 1, aux[0], aux[0], 0.0, st['mean'])
        launch_1d(ops, c, 1, aux[1], aux[1], 0.0, st['var'])
    st['batch'] = batch
    launch_1d(k['normalize'], x.size, x, st['mean'], st['var'], gamma, beta, p.eps,
              outputs[0].reshape(o, c, i))
    if p.output_mean_var:
        launch_1d(ops, c, 1, st['mean'], st['mean'], 0.0, outputs[1])
        launch_1d(ops, c, 4, st['var'], st['var'], p.eps, outputs[2])


def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    k = _GPU.kernel
    ops = k['channel_ops']
    data, gamma, _ = inputs
    o, c, i = _split(tuple(data.shape), _axis(p, data.ndim))
    x = data.reshape(o, c, i)
    og = out_grads[0].reshape(o, c, i)
    st = ctx.state
    if 'batch' not in st:        # backward without a forward: recompute as forward would
        _forward_gpu(ctx, p, inputs, outputs, aux)
    mean, var, sums = st['mean'], st['var'], st['sums']
    _per_channel(k['channel_sums'], c, x, og, mean, var, p.eps, sums)
    if req[0] != 'null':
        launch_1d(k['grad_data'], x.size, x, og, mean, var, gamma, p.eps, sums,
                  not p.use_global_stats, req[0] == 'add', in_grads[0].reshape(o, c, i))
    if req[1] == 'write':
        if p.fix_gamma:
            launch_1d(ops, c, 0, mean, mean, 0.0, in_grads[1])
        else:
            launch_1d(ops, c, 1, sums[1], sums[1], 0.0, in_grads[1])
    elif req[1] == 'add' and not p.fix_gamma:
        launch_1d(ops, c, 2, sums[1], sums[1], 0.0, in_grads[1])
    if req[2] != 'null':
        launch_1d(ops, c, 1 if req[2] == 'write' else 2, sums[0], sums[0], 0.0, in_grads[2])
    if st['batch']:
        launch_1d(ops, c, 3, mean, mean, p.momentum, aux[0])
        launch_1d(ops, c, 3, var, var, p.momentum, aux[1])


register_op(OpDef(
    name='BatchNorm',
    backward_reads=('data', 'gamma'),   # batch mean/var live in the node's state
    float_only=True,
    arguments=['data', 'gamma', 'beta'],
    aux=['moving_mean', 'moving_var'],
    outputs=_outputs,
    num_hidden_outputs=_hidden,
    params=BatchNormParam,
    infer_shape=_infer_shape,
    infer_type=_infer_type,
    forward={'cpu': _forward_cpu, 'gpu': _forward_gpu},
    backward={'cpu': _backward_cpu, 'gpu': _backward_gpu},
    hint='batchnorm',
    doc=__doc__,
    input_docs={'data': 'Input, channel on `axis`.',
                'gamma': 'Scale (C,).', 'beta': 'Shift (C,).',
                'moving_mean': 'Running mean (C,), auxiliary.',
                'moving_var': 'Running variance (C,), auxiliary.'},
))
