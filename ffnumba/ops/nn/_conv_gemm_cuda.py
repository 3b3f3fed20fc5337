"""GPU convolution as im2col + the tiled shared-memory GEMM (:mod:`ffnumba.ops.gemm_cuda`).

Same conv geometry as ``_im2col`` and ``_conv_cuda``: an image-space tensor
``X`` ``(N, Cin, D, H, W)``, a column-space tensor ``Y`` ``(N, Cout, P)`` with
``P = OD*OH*OW``, a weight ``W3`` ``(G, Cout/G, Cin/G*K)`` (``K`` the kernel
volume) and ``geom`` the 15-int tuple of ``_im2col.geometry``. A chunk of
``nb`` samples is unrolled into ``col`` ``(nb, Cin*K, P)``, viewed per group
as ``(nb*G, Cin/G*K, P)``, so each chunk costs one batched GEMM launch:

* :func:`conv_y`  ``Y (+)= W3 @ im2col(X)``               (Convolution forward,
  Deconvolution data gradient);
* :func:`conv_x`  ``X (+)= col2im(W3^T @ Y)``             (Convolution data
  gradient, Deconvolution forward);
* :func:`conv_w`  ``W3 (+)= sum_n Y[n] @ im2col(X)[n]^T`` (both weight gradients;
  the GEMM sums the samples of a chunk, ``beta=1`` adds the next chunks).

``im2col`` writes every column entry (zeros in the padding); ``col2im``
gathers, one thread per image element, so no atomics are needed and
``grad_req='add'`` is a flag. Chunks keep ``col`` below
:data:`COL_MAX_ELEMS`; the buffer is kept in the op's state.

Source: K. Chellapilla, S. Puri, P. Simard, "High Performance Convolutional
Neural Networks for Document Processing" (2006), the im2col formulation.
"""
from .. import gemm_cuda
from ..templates import LazyCudaKernel, fill_gpu, import_cuda
from . import _conv_cuda as cc
from ._conv_cuda import unravel5
from ._im2col import as5d

__all__ = ['conv_y', 'conv_x', 'conv_w', 'forward', 'backward', 'COL_MAX_ELEMS']

cuda = None  # bound by import_cuda(globals()) on first GPU use

#: Most elements of one GPU column buffer (16 MiB of float32), unless one sample's
#: columns alone are more. Each node keeps its own buffer: executors in two threads
#: may launch on one device.
COL_MAX_ELEMS = 1 << 22


def _build_im2col():
    import_cuda(globals())

    @cuda.jit
    def k(x, n0, col, g):
        D, H, W = x.shape[2], x.shape[3], x.shape[4]
        KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
        rows, P = col.shape[1], col.shape[2]
        KV = KD * KH * KW
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for t in range(start, col.size, stride):
            p = t % P
            r = t // P
            row = r % rows
            nn = r // rows
            ci = row // KV
            _, _, kd, kh, kw = unravel5(row, 1, KD, KH, KW)
            _, _, od, oh, ow = unravel5(p, 1, OD, OH, OW)
            i_d = od * SD - PD + kd * DD
            i_h = oh * SH - PH + kh * DH
            i_w = ow * SW - PW + kw * DW
            if 0 <= i_d < D and 0 <= i_h < H and 0 <= i_w < W:
                col[nn, row, p] = x[n0 + nn, ci, i_d, i_h, i_w]
            else:
                col[nn, row, p] = 0
    return k


def _build_col2im():
    import_cuda(globals())

    @cuda.jit
    def k(col, n0, x, g, add):
        C, D, H, W = x.shape[1], x.shape[2], x.shape[3], x.shape[4]
        KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
        nb = col.shape[0]
        KV = KD * KH * KW
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for t in range(start, nb * C * D * H * W, stride):
            nn, ci, i_d, ih, iw = unravel5(t, C, D, H, W)
            acc = 0.0
            for kd in range(KD):
                a = i_d + PD - kd * DD
                if a < 0 or a % SD != 0 or a // SD >= OD:
                    continue
                for kh in range(KH):
                    b = ih + PH - kh * DH
                    if b < 0 or b % SH != 0 or b // SH >= OH:
                        continue
                    for kw in range(KW):
                        e = iw + PW - kw * DW
                        if e < 0 or e % SW != 0 or e // SW >= OW:
                            continue
                        p = ((a // SD) * OH + b // SH) * OW + e // SW
                        acc += col[nn, ci * KV + (kd * KH + kh) * KW + kw, p]
            if add:
                x[n0 + nn, ci, i_d, ih, iw] += acc
            else:
                x[n0 + nn, ci, i_d, ih, iw] = acc
    return k


_im2col = LazyCudaKernel(_build_im2col)
_col2im = LazyCudaKernel(_build_col2im)


def _chunks(state, x5, geom, dtype):
    """Yield ``(n0, m, col)``: sample chunks and their ``(m, Cin*K, P)`` column buffer."""
    from numba import cuda as _cuda
    N, C = x5.shape[0], x5.shape[1]
    rows = C * geom[0] * geom[1] * geom[2]
    P = geom[12] * geom[13] * geom[14]
    per = max(1, rows * P)
    nb = max(1, min(N, COL_MAX_ELEMS // per))
    buf = state.get('gpu_col') if state is not None else None
    if buf is None or buf.size < nb * per or buf.dtype != dtype:
        buf = _cuda.device_array(nb * per, dtype)
        if state is not None:
            state['gpu_col'] = buf
    for n0 in range(0, N, nb):
        m = min(nb, N - n0)
        yield n0, m, buf[:m * rows * P].reshape(m, rows, P)


def conv_y(x5, w3, y3, geom, state, add):
    """``Y (+)= W3 @ im2col(X)``.

    Parameters
    ----------
    x5 : device array ``(N, Cin, D, H, W)``
    w3 : device array ``(G, Cout/G, Cin/G*K)``
    y3 : device array ``(N, Cout, P)`` (written, or added to with ``add``)
    geom : tuple of 15 int
    state : dict or None
        Keeps the column buffer between calls.
    add : bool
    """
    G, F = w3.shape[0], w3.shape[1]
    for n0, m, col in _chunks(state, x5, geom, x5.dtype):
        _im2col.launch(col.size, x5, n0, col, geom)
        gemm_cuda.gemm(w3, col.reshape(m * G, col.shape[1] // G, col.shape[2]),
                       y3[n0:n0 + m].reshape(m * G, F, y3.shape[2]), 1.0, 1.0 if add else 0.0)


def conv_x(y3, w3, x5, geom, state, add):
    """``X (+)= col2im(W3^T @ Y)`` (shapes as in :func:`conv_y`)."""
    G, F = w3.shape[0], w3.shape[1]
    for n0, m, col in _chunks(state, x5, geom, x5.dtype):
        gemm_cuda.gemm(w3, y3[n0:n0 + m].reshape(m * G, F, y3.shape[2]),
                       col.reshape(m * G, col.shape[1] // G, col.shape[2]), trans_a=True)
        _col2im.launch(m * x5.size // max(1, x5.shape[0]), col, n0, x5, geom, add)


def conv_w(x5, y3, w3, geom, state, add):
    """``W3 (+)= sum_n Y[n] @ im2col(X)[n]^T`` (shapes as in :func:`conv_y`)."""
    G, F = w3.shape[0], w3.shape[1]
    beta = 1.0 if add else 0.0
    if x5.shape[0] == 0 and not add:         # a sum over no samples
        fill_gpu.launch(w3.size, w3.reshape(w3.size), 0.0)
    for n0, m, col in _chunks(state, x5, geom, x5.dtype):
        _im2col.launch(col.size, x5, n0, col, geom)
        gemm_cuda.gemm(y3[n0:n0 + m].reshape(m * G, F, y3.shape[2]),
                       col.reshape(m * G, col.shape[1] // G, col.shape[2]), w3, 1.0, beta,
                       trans_b=True)
        beta = 1.0


def d5(a):
    """A device array ``(N, C, *spatial)`` viewed as ``(N, C, D, H, W)``."""
    return a.reshape(*as5d(a.shape))


def d3(a):
    """A device array ``(N, C, *spatial)`` viewed as ``(N, C, P)``."""
    n, c = a.shape[0], a.shape[1]
    return a.reshape(n, c, a.size // max(1, n * c))


def forward(ctx, data, w3, bias, out, geom, is_conv):
    """Convolution (``is_conv``) or Deconvolution forward through the GEMM, plus the bias.

    Convolution maps the image ``data`` to the columns ``out``
    (:func:`conv_y`); Deconvolution maps the columns ``data`` to the image
    ``out`` (:func:`conv_x`). ``bias`` ``(F,)`` or None is added per channel
    of ``out``.
    """
    state = ctx.state if ctx is not None else None
    if is_conv:
        conv_y(d5(data), w3, d3(out), geom, state, False)
    else:
        conv_x(d3(data), w3, d5(out), geom, state, False)
    if bias is not None:
        gemm_cuda.bias_fill(d3(out), bias, True)


def backward(ctx, data, w3, dy, grads, req, geom, is_conv):
    """Gradients of :func:`forward`: ``grads`` = ``[d data, d weight(, d bias)]``.

    ``w3`` is the weight viewed ``(G, Cout/G, Cin/G*K)``; its gradient is viewed
    the same way. Convolution: ``d data = col2im(W^T dy)``, Deconvolution:
    ``d data = W im2col(dy)``; both: ``dW = sum_n`` (columns) ``im2col(image)^T``,
    ``d bias`` sums ``dy`` over the batch and space.
    """
    state = ctx.state if ctx is not None else None
    if req[0] != 'null':
        if is_conv:
            conv_x(d3(dy), w3, d5(grads[0]), geom, state, req[0] == 'add')
        else:
            conv_y(d5(dy), w3, d3(grads[0]), geom, state, req[0] == 'add')
    if req[1] != 'null':
        image, cols = (data, dy) if is_conv else (dy, data)
        conv_w(d5(image), d3(cols), grads[1].reshape(w3.shape), geom, state, req[1] == 'add')
    if len(grads) > 2 and req[2] != 'null':
        cc.bias_grad(dy, grads[2], req[2] == 'add')
