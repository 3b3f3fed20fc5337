"""FullyConnected: an affine map ``y = x W^T + b`` (MXNet ``FullyConnected``).

Math
----
With ``x`` viewed as a matrix ``(M, K)``, weight ``W`` of shape ``(H, K)`` and
bias ``b`` of shape ``(H,)``::

    y[m, h] = sum_k x[m, k] * W[h, k] + b[h]

Gradients (``g`` is the head gradient, same shape as ``y``)::

    dx = g W          (M, K)
    dW = g^T x        (H, K)
    db = sum_m g      (H,)

Shapes
------
==============  ====================  ==================  ================
mode            data                  weight / bias       output
==============  ====================  ==================  ================
flatten=True    ``(N, d1, ..., dk)``  ``(H, K)``, ``(H,)``  ``(N, H)``, K = d1*...*dk
flatten=False   ``(d0, ..., dk)``     ``(H, dk)``, ``(H,)`` ``(d0, ..., d(k-1), H)``
==============  ====================  ==================  ================

Shape inference runs both ways: the weight and bias shapes follow from the
data, and with ``flatten=True`` the batch size follows from a known output.

CPU: one BLAS GEMM per product (the forward of a few rows against many hidden
units as ``(W x^T)^T``, see :func:`swap_product`). An inference executor runs
``FullyConnected -> relu`` as one call (:func:`fused_relu_forward_cpu`). With
several numba threads and at least ``PAR_MIN_MACS`` multiply-adds, each product
is split over the kernel thread pool (``_conv_par.run_split``) with BLAS held
to one thread: ``y`` and ``dW`` by ranges of hidden units (each thread reads
its own rows of ``W``), ``dx`` by ranges of rows; smaller products run on this
thread, with BLAS held to one thread once other kernels split over the pool (no
OpenBLAS thread is woken beside the pool's). Every output element is still one
BLAS dot product over the same operands, so the split changes no summation
order inside an element except as OpenBLAS's kernels for the part's shape do.

Source: MXNet 1.x ``FullyConnected`` operator documentation.
"""
import math

import numpy as np
from numba import njit

from ...base import DTypeError, ShapeError
from ...blas_threads import numba_blas_single_thread
from ...thread_pool import pool_used
from .. import gemm_cuda
from .._gemm import gemm
from ._conv_par import run_split, split_threads
from .activation import relu
from ._im2col import buffer
from ..params import Field, Params
from ..registry import OpDef, register_op, shape_assign
from ..templates import JIT, LazyCudaKernel, f16_safe, import_cuda

__all__ = ['FullyConnectedParam', 'fused_relu_forward_cpu', 'swap_product']

cuda = None  # bound by import_cuda(globals()) on first GPU use


class FullyConnectedParam(Params):
    """Parameters of :func:`FullyConnected`."""

    num_hidden = Field(int, doc='Number of hidden units H (output features).', low=1)
    no_bias = Field(bool, False, 'Whether to leave out the bias term.')
    flatten = Field(bool, True, 'Whether to flatten every axis but the first of the input '
                                '(otherwise the map applies to the last axis only).')


def _arguments(p):
    return ['data', 'weight'] if p.no_bias else ['data', 'weight', 'bias']


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    """Weight/bias from data, and (flatten) the batch size from the output."""
    ins = list(in_shapes)
    names = _arguments(p)
    H = p.num_hidden
    d = ins[0]
    out = None
    if d is not None:
        d = tuple(d)
        if len(d) == 0:
            raise ShapeError('FullyConnected: data must have at least 1 dimension. '
                             'Received: data shape %s' % (d,))
        if p.flatten:
            K = int(np.prod(d[1:], dtype=np.int64))
            out = (d[0], H)
        else:
            K = d[-1]
            out = d[:-1] + (H,)
        shape_assign(ins, 1, (H, K), names[1])
    elif ins[1] is not None:
        if len(ins[1]) != 2 or ins[1][0] != H:
            raise ShapeError('Shape inconsistent for input `weight`, Provided = %s, '
                             'inferred shape=(%d, K)' % (list(ins[1]), H))
        known_out = out_shapes[0] if out_shapes else None
        if p.flatten and known_out is not None and ins[1][1] is not None:
            # batch size from the output: data taken as (N, K)
            ins[0] = (known_out[0], ins[1][1])
            out = (known_out[0], H)
    if not p.no_bias:
        shape_assign(ins, 2, (H,), names[2])
    if ins[1] is not None and (len(ins[1]) != 2 or ins[1][0] != H):
        raise ShapeError('Shape inconsistent for input `weight`, Provided = %s, '
                         'inferred shape=(%d, K)' % (list(ins[1]), H))
    return ins, [out], list(aux_shapes)


# ------------------------------------------------------------------ CPU kernels

@njit(**JIT)
def _fc_forward(x, w, b, out, scr, has_bias, swap, relu):
    """``out = x @ w^T (+ b)``, then relu if ``relu`` (``Activation``'s body).

    ``swap``: computed as ``scr = w @ x^T`` ``(H, M)`` and transposed into ``out``
    with the bias (:func:`swap_product`); else straight into ``out``.
    """
    M, H = out.shape
    if swap:
        gemm(1.0, w, x.T, 0.0, scr)
        for m in range(M):
            for h in range(H):
                out[m, h] = scr[h, m] + b[h] if has_bias else scr[h, m]
    else:
        gemm(1.0, x, w.T, 0.0, out)
        if has_bias:
            for m in range(M):
                for h in range(H):
                    out[m, h] += b[h]
    if relu:
        _relu_rows(out)


@njit(**JIT)
def _relu_rows(out):
    """``Activation('relu')``'s scalar body (:func:`.activation.relu`) on the 2-D ``out``
    in place (NaN stays NaN)."""
    for m in range(out.shape[0]):
        row = out[m]
        for h in range(np.uint64(out.shape[1])):
            row[h] = relu(row[h], 0.0, 0.0)


#: Fewest rows ``M`` of a product that :func:`swap_product` computes transposed.
SWAP_MIN_ROWS = 8


def swap_product(M, H):
    """Whether ``x @ W^T`` ``(M, H)`` runs as ``(W @ x^T)^T``: a batch of rows against at
    least twice as many hidden units. OpenBLAS's kernels (and MKL's) run a
    transposed right operand of few rows slowly: (32, 784) x (784, 128) measured 83 us
    straight, 63 us swapped (one thread; np.dot 69 us), (32, 512) x (512, 512) 225 vs
    165 us; with ``M >= H`` or ``M < 8`` the straight call was as fast or faster
    (measured on one thread, OpenBLAS 0.3.31 and MKL).

    Parameters
    ----------
    M : int
        Rows of the data ``(M, K)`` (the batch, flattened).
    H : int
        Hidden units (rows of the weight ``(H, K)``).

    Returns
    -------
    bool
        True when ``M >= SWAP_MIN_ROWS`` and ``H >= 2 * M``; the result is the
        same product either way (within float rounding of the library's GEMM).
    """
    return M >= SWAP_MIN_ROWS and 2 * M <= H


@njit(**JIT)
def _fc_forward_cols(x, w_part, b, out, scr, h0, has_bias):
    """``out[:, h0:h0+Hp] = x @ w_part^T (+ b)`` through ``scr`` ``(M, Hp)``."""
    gemm(1.0, x, w_part.T, 0.0, scr)
    for m in range(out.shape[0]):
        for h in range(scr.shape[1]):
            out[m, h0 + h] = scr[m, h] + b[h0 + h] if has_bias else scr[m, h]


@njit(**JIT)
def _fc_dw_rows(og, x, dw_part, gscr, pscr, h0, add):
    """``dw_part (+)= og[:, h0:h0+Hp]^T @ x``: the head gradient's columns copied to ``gscr``."""
    for h in range(gscr.shape[0]):
        for m in range(og.shape[0]):
            gscr[h, m] = og[m, h0 + h]
    if add:
        gemm(1.0, gscr, x, 0.0, pscr)
        for i in range(dw_part.shape[0]):
            for j in range(dw_part.shape[1]):
                dw_part[i, j] += pscr[i, j]
    else:
        gemm(1.0, gscr, x, 0.0, dw_part)


#: Fewest multiply-adds of one product worth splitting over threads. A fork-join
#: on the pool costs about 80 us on a 2-core VM (waking the other core); a
#: split lost up to 12M multiply-adds and won at 72M (1-thread BLAS beside it).
PAR_MIN_MACS = 1 << 25


def _fc_threads(M, K, H, n):
    """Threads for a ``(M, K) x (K, H)`` product split into ``n``-long ranges.

    0 when the product is too small to split but other kernels of this process
    split their work over the kernel pool: it then runs here with BLAS held to
    one thread, so it wakes no OpenBLAS thread (which would spin beside the
    pool's threads afterwards). A network of fully-connected layers only keeps
    BLAS's own threads for its products.
    """
    if M * K * H < PAR_MIN_MACS:
        return 0 if pool_used('kernel') and split_threads(2) > 1 else 1
    return split_threads(n // 16 if n >= 32 else 1)


def _ranges(n, nt):
    return [(n * t // nt, n * (t + 1) // nt) for t in range(nt)]


@njit(**JIT)
def _dot_into(a, b, out, scratch, add, ta):
    """``out = op(a) @ b`` (or ``out += op(a) @ b`` through ``scratch``); ``op(a) = a.T`` if ``ta``.

    Both gradients call it with C-contiguous operands (the transpose is taken
    inside), so it compiles and loads one signature per dtype.
    """
    dst = scratch if add else out
    if ta:
        gemm(1.0, a.T, b, 0.0, dst)
    else:
        gemm(1.0, a, b, 0.0, dst)
    if add:
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                out[i, j] += scratch[i, j]


@njit(**JIT)
def _bias_grad(og, db, add):
    if not add:
        for h in range(db.shape[0]):
            db[h] = 0.0
    for m in range(og.shape[0]):
        for h in range(og.shape[1]):
            db[h] += og[m, h]


def _as2d(p, x, H):
    """The ``(M, K)`` view of the data and the ``(M, H)`` view for outputs."""
    shape = tuple(x.shape)      # (a simulated CUDA array's shape takes no negative slice)
    if p.flatten:
        M, K = shape[0], math.prod(shape[1:])
    else:
        M, K = math.prod(shape[:-1]), shape[-1]
    return x.reshape(M, K), M


def _check_dtypes(ctx, p, arrays):
    """One dtype for data, weight, bias and output (the BLAS kernels need it)."""
    names = ['data', 'weight'] + ([] if p.no_bias else ['bias']) + ['output']
    dt = arrays[0].dtype
    for n, a in zip(names, arrays):
        if a.dtype != dt:
            raise DTypeError('FullyConnected (node %s): `%s` has dtype %s but `data` has %s; '
                             'all inputs must share one dtype' % (ctx.node_name, n, a.dtype, dt))


def _forward_cpu(ctx, p, inputs, outputs, aux):
    y = outputs[0]
    _check_dtypes(ctx, p, list(inputs) + [y])
    if y.dtype == np.float16:
        _forward_f16(ctx, p, inputs, outputs, aux)
    else:       # the usual call: no wrapper (a small layer's call costs microseconds)
        _forward_into(ctx, p, inputs, y, False)


@f16_safe
def _forward_f16(ctx, p, inputs, outputs, aux):
    _forward_into(ctx, p, inputs, outputs[0], False)


def fused_relu_forward_cpu(ctx, p, inputs, y):
    """A CPU FullyConnected forward followed by ``relu`` on its output, as one call.

    The fused call of an inference executor's ``FullyConnected -> relu``
    chain (:mod:`ffnumba._executor_fuse`): the product, bias and
    ``Activation('relu')``'s arithmetic on the output rows while they are in
    cache; bit-identical to the two nodes unfused.

    Parameters
    ----------
    ctx : OpContext
        The FullyConnected node's context.
    p : FullyConnectedParam
    inputs : list of ndarray
        ``data``, ``weight`` (and ``bias``), one dtype, float32 or float64.
    y : ndarray
        Written: the relu node's output (the FullyConnected output shape).

    Raises
    ------
    DTypeError
        As the unfused FullyConnected: inputs and output of different dtypes.
    """
    _check_dtypes(ctx, p, list(inputs) + [y])
    _forward_into(ctx, p, inputs, y, True)


#: The ``scr`` argument of a product that is not swapped, per dtype (never written).
_NO_SCRATCH = {np.dtype(t): np.empty((1, 1), t) for t in ('float32', 'float64')}


def _forward_into(ctx, p, inputs, y, relu):
    x, M = _as2d(p, inputs[0], p.num_hidden)
    w = inputs[1]
    b = inputs[2] if not p.no_bias else w[0]
    H = p.num_hidden
    out = y.reshape(M, H)
    nt = _fc_threads(M, w.shape[1], H, H)
    if nt <= 1:
        swap = swap_product(M, H)
        scr = _scratch(ctx, 'fc_t', (H, M), out.dtype) if swap else _NO_SCRATCH[out.dtype]
        if nt == 1:
            _fc_forward(x, w, b, out, scr, not p.no_bias, swap, relu)
        else:
            with numba_blas_single_thread():
                _fc_forward(x, w, b, out, scr, not p.no_bias, swap, relu)
        return
    buf = _scratch(ctx, 'fc_cols', (M * H,), out.dtype)
    rng = _ranges(H, nt)

    def part(t):
        h0, h1 = rng[t]
        _fc_forward_cols(x, w[h0:h1], b, out, buf[M * h0:M * h1].reshape(M, h1 - h0), h0,
                         not p.no_bias)
    with numba_blas_single_thread():
        run_split(part, nt)
    if relu:
        _relu_rows(out)


def _scratch(ctx, key, shape, dtype):
    """Scratch of ``shape`` from the per-thread pool of :func:`._im2col.buffer`."""
    n = math.prod(shape)
    return buffer(getattr(ctx, 'state', None), key, n, dtype)[:n].reshape(shape)


@f16_safe
def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    H = p.num_hidden
    x, M = _as2d(p, inputs[0], H)
    w = inputs[1]
    og = out_grads[0].reshape(M, H)
    K = w.shape[1]
    nt = _fc_threads(M, K, H, max(M, H))
    if nt != 1:
        with numba_blas_single_thread():
            if nt > 1:
                _backward_split(ctx, og, x, w, in_grads, req, M, H, K, nt)
            else:
                _backward_dots(ctx, og, x, w, in_grads, req)
    else:
        _backward_dots(ctx, og, x, w, in_grads, req)
    if not p.no_bias and req[2] != 'null':
        _bias_grad(og, in_grads[2], req[2] == 'add')


def _backward_dots(ctx, og, x, w, in_grads, req):
    """``dx (+)= og w`` and ``dW (+)= og^T x``, one BLAS call each."""
    for i, a, b, ta in ((0, og, w, False), (1, og, x, True)):
        if req[i] == 'null':
            continue
        add = req[i] == 'add'
        dst = in_grads[i].reshape(a.shape[1] if ta else a.shape[0], b.shape[1])
        scratch = _scratch(ctx, 'fc_scratch%d' % i, dst.shape, dst.dtype) if add else dst
        _dot_into(a, b, dst, scratch, add, ta)


def _backward_split(ctx, og, x, w, in_grads, req, M, H, K, nt):
    """``dx`` by row ranges and ``dW`` by hidden-unit ranges, one part per pool thread."""
    dx = in_grads[0].reshape(M, K) if req[0] != 'null' else None
    dw = in_grads[1] if req[1] != 'null' else None
    add_x, add_w = req[0] == 'add', req[1] == 'add'
    xs = _scratch(ctx, 'fc_scratch0', (M, K), og.dtype) if add_x else dx
    gscr = _scratch(ctx, 'fc_gcols', (H * M,), og.dtype) if dw is not None else None
    pscr = _scratch(ctx, 'fc_scratch1', (H * K,), og.dtype) if add_w else None
    rx, rw = _ranges(M, nt), _ranges(H, nt)

    def part(t):
        if dx is not None:
            m0, m1 = rx[t]
            if m1 > m0:
                _dot_into(og[m0:m1], w, dx[m0:m1], xs[m0:m1], add_x, False)
        if dw is not None:
            h0, h1 = rw[t]
            if h1 > h0:
                _fc_dw_rows(og, x, dw[h0:h1], gscr[M * h0:M * h1].reshape(h1 - h0, M),
                            pscr[K * h0:K * h1].reshape(h1 - h0, K) if add_w else dw[h0:h1],
                            h0, add_w)
    run_split(part, nt)


# ------------------------------------------------------------------ GPU kernels

def _build_db():
    import_cuda(globals())

    @cuda.jit
    def k(og, db, add):
        M, H = og.shape
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for h in range(start, H, stride):
            acc = 0.0
            for m in range(M):
                acc += og[m, h]
            if add:
                db[h] += acc
            else:
                db[h] = acc
    return k


_gpu_db = LazyCudaKernel(_build_db)


def _forward_gpu(ctx, p, inputs, outputs, aux):
    """``y = x W^T (+ b)``: the bias is broadcast into ``y``, then the tiled GEMM adds."""
    H = p.num_hidden
    x, M = _as2d(p, inputs[0], H)
    out = outputs[0].reshape(M, H)
    if not p.no_bias:
        gemm_cuda.bias_fill(out.reshape(M, H, 1), inputs[2], False)
    gemm_cuda.gemm(x, inputs[1], out, 1.0, 0.0 if p.no_bias else 1.0, trans_b=True)


def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    """``dx (+)= dy W`` and ``dW (+)= dy^T x`` through the tiled GEMM (``beta=1`` adds)."""
    H = p.num_hidden
    x, M = _as2d(p, inputs[0], H)
    w = inputs[1]
    og = out_grads[0].reshape(M, H)
    if req[0] != 'null':
        gemm_cuda.gemm(og, w, in_grads[0].reshape(M, w.shape[1]), 1.0,
                       1.0 if req[0] == 'add' else 0.0)
    if req[1] != 'null':
        gemm_cuda.gemm(og, x, in_grads[1], 1.0, 1.0 if req[1] == 'add' else 0.0, trans_a=True)
    if not p.no_bias and req[2] != 'null':
        _gpu_db.launch(H, og, in_grads[2], req[2] == 'add')


register_op(OpDef(
    name='FullyConnected',
    float_only=True,
    arguments=_arguments,
    infer_shape=_infer_shape,
    forward={'cpu': _forward_cpu, 'gpu': _forward_gpu},
    backward={'cpu': _backward_cpu, 'gpu': _backward_gpu},
    backward_reads=('inputs',),     # dx = dy W, dW = dy^T x, db = sum dy: never y
    params=FullyConnectedParam,
    doc=__doc__,
    input_docs={'data': 'Input data.',
                'weight': 'Weight matrix (num_hidden, K).',
                'bias': 'Bias vector (num_hidden,).'},
))
