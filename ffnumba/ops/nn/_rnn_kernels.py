"""Kernels of the fused ``RNN`` operator (see :mod:`ffnumba.ops.nn.rnn`).

The cell math is written once as scalar ``@njit`` functions (``_lstm_f``,
``_gru_b``...) that take and return numbers; the CPU layer kernels
(``@njit``, one call per layer and direction: one GEMM for the input
projection of every time step, one GEMM per step for the recurrent part) and
the GPU step kernels (``@cuda.jit``, one thread per ``(n, j)`` element) call
them.

Modes: 0 ``rnn_relu``, 1 ``rnn_tanh``, 2 ``lstm``, 3 ``gru``. Gate blocks of
``G * H`` rows in MXNet's order: LSTM ``i, f, g, o``; GRU ``r, z, n``.
"""
import math

import numpy as np
from numba import njit

from ...jit import gpu_body
from ..templates import JIT, LazyCudaKernel, import_cuda

cuda = None  # bound by import_cuda(globals()) on first GPU use

RELU, TANH, LSTM, GRU = 0, 1, 2, 3


# ------------------------------------------------------------------ scalar math
@njit
def _sig(x):
    return 1.0 / (1.0 + math.exp(-x))


@njit
def _rnn_f(mode, a):
    return (a if a > 0 else 0.0) if mode == RELU else math.tanh(a)


@njit
def _rnn_b(mode, v, dh):
    if mode == RELU:
        return dh if v > 0 else 0.0
    return dh * (1.0 - v * v)


@njit
def _lstm_f(ai, af, ag, ao, cp, lo, hi, clip_on, clip_nan):
    i = _sig(ai)
    f = _sig(af)
    g = math.tanh(ag)
    o = _sig(ao)
    c = f * cp + i * g
    if clip_on:
        if clip_nan and c != c:
            c = lo
        elif c < lo:
            c = lo
        elif c > hi:
            c = hi
    return i, f, g, o, c, o * math.tanh(c)


@njit
def _lstm_b(i, f, g, o, c, cp, dh, dc, lo, hi, clip_on):
    """Pre-activation gate gradients and dL/dc_prev; ``dc`` is dL/dc from step t+1."""
    tc = math.tanh(c)
    dcc = dc + dh * o * (1.0 - tc * tc)
    if clip_on and (c <= lo or c >= hi):
        dcc = 0.0   # the clip passes no gradient where it was active
    return (dcc * g * i * (1.0 - i), dcc * cp * f * (1.0 - f), dcc * i * (1.0 - g * g),
            dh * tc * o * (1.0 - o), dcc * f)


@njit
def _gru_f(ar, az, axn, hh, hp):
    """MXNet's GRU: n = tanh(x_n + r * (W_hn h + b_hn)), h' = (1 - z) n + z h."""
    r = _sig(ar)
    z = _sig(az)
    n = math.tanh(axn + r * hh)
    return r, z, n, (1.0 - z) * n + z * hp


@njit
def _gru_b(r, z, n, hh, hp, dh):
    """Gradients (d ar, d az, d x_n, d hh, direct dL/dh_prev)."""
    dan = dh * (1.0 - z) * (1.0 - n * n)
    dar = dan * hh * r * (1.0 - r)
    daz = dh * (hp - n) * z * (1.0 - z)
    return dar, daz, dan, dan * r, dh * z


# ------------------------------------------------------------------ step bodies
# One ``(n, j)`` element of one time step, written once: the CPU layer kernels
# loop over the elements, the GPU step kernels give each thread one. Arrays are
# the step's 2-D ``(N, .)`` views, except ``y``/``dy`` ``(T, N, D*H)`` and
# ``gx``/``dgx`` ``(T*N, G*H)`` (row ``r0 + n``).

@njit(error_model='numpy')
def _step_fwd_at(mode, gx, r0, bx, gh, bh, hp, cp, gates, hn, cn, ghn, y, t, ycol,
                 lo, hi, clip_on, clip_nan, n, j):
    """Gates and next state of element ``(n, j)`` from the previous ``hp, cp``."""
    H = hp.shape[1]
    r = r0 + n
    if mode <= TANH:
        v = _rnn_f(mode, gx[r, j] + bx[j] + gh[n, j] + bh[j])
        gates[n, j] = v
        hn[n, j] = v
    elif mode == LSTM:
        i, f, g, o, c, h = _lstm_f(
            gx[r, j] + bx[j] + gh[n, j] + bh[j],
            gx[r, H + j] + bx[H + j] + gh[n, H + j] + bh[H + j],
            gx[r, 2 * H + j] + bx[2 * H + j] + gh[n, 2 * H + j] + bh[2 * H + j],
            gx[r, 3 * H + j] + bx[3 * H + j] + gh[n, 3 * H + j] + bh[3 * H + j],
            cp[n, j], lo, hi, clip_on, clip_nan)
        gates[n, j] = i
        gates[n, H + j] = f
        gates[n, 2 * H + j] = g
        gates[n, 3 * H + j] = o
        cn[n, j] = c
        hn[n, j] = h
    else:
        hh = gh[n, 2 * H + j] + bh[2 * H + j]
        rr, z, nn, h = _gru_f(gx[r, j] + bx[j] + gh[n, j] + bh[j],
                              gx[r, H + j] + bx[H + j] + gh[n, H + j] + bh[H + j],
                              gx[r, 2 * H + j] + bx[2 * H + j], hh, hp[n, j])
        gates[n, j] = rr
        gates[n, H + j] = z
        gates[n, 2 * H + j] = nn
        ghn[n, j] = hh
        hn[n, j] = h
    y[t, n, ycol + j] = hn[n, j]


@njit(error_model='numpy')
def _step_bwd_at(mode, gates, hp, cp, c_s, ghn, dy, t, ycol, dh, dc, dgx, r0, dgh, dhp,
                 lo, hi, clip_on, n, j):
    """Gate gradients of element ``(n, j)``; ``dc`` in place, GRU's direct ``dh`` in ``dhp``."""
    H = hp.shape[1]
    r = r0 + n
    dht = dh[n, j] + dy[t, n, ycol + j]
    dhp[n, j] = 0.0
    if mode <= TANH:
        da = _rnn_b(mode, gates[n, j], dht)
        dgx[r, j] = da
        dgh[n, j] = da
    elif mode == LSTM:
        a, b, c, d, dcp = _lstm_b(gates[n, j], gates[n, H + j], gates[n, 2 * H + j],
                                  gates[n, 3 * H + j], c_s[n, j], cp[n, j], dht,
                                  dc[n, j], lo, hi, clip_on)
        dgx[r, j] = a
        dgx[r, H + j] = b
        dgx[r, 2 * H + j] = c
        dgx[r, 3 * H + j] = d
        dgh[n, j] = a
        dgh[n, H + j] = b
        dgh[n, 2 * H + j] = c
        dgh[n, 3 * H + j] = d
        dc[n, j] = dcp
    else:
        a, b, c, dhh, direct = _gru_b(gates[n, j], gates[n, H + j], gates[n, 2 * H + j],
                                      ghn[n, j], hp[n, j], dht)
        dgx[r, j] = a
        dgx[r, H + j] = b
        dgx[r, 2 * H + j] = c
        dgh[n, j] = a
        dgh[n, H + j] = b
        dgh[n, 2 * H + j] = dhh
        dhp[n, j] = direct


# ------------------------------------------------------------------ CPU kernels
@njit(**JIT)
def layer_forward(mode, x2, wx, wh, bx, bh, hs, cs, gates, ghn, y, ycol, rev,
                  lo, hi, clip_on, clip_nan):
    """One layer, one direction over the whole sequence.

    ``x2 (T*N, I)``; ``hs, cs (T+1, N, H)`` with ``hs[0], cs[0]`` the initial
    state (filled in step order, so ``hs[s]`` is the state before step s);
    ``gates (T, N, G*H)`` post-activation gates and ``ghn (T, N, H)`` GRU's
    ``W_hn h + b_hn`` by step; ``y (T, N, D*H)`` gets columns
    ``ycol:ycol+H``. ``rev``: walk time backward.
    """
    T = hs.shape[0] - 1
    N = hs.shape[1]
    H = hs.shape[2]
    gx = np.dot(x2, wx.T)
    gh = np.empty((N, wh.shape[0]), x2.dtype)
    for s in range(T):
        t = T - 1 - s if rev else s
        np.dot(hs[s], wh.T, gh)
        hp, cp, g_s, hn, cn, ghn_s = hs[s], cs[s], gates[s], hs[s + 1], cs[s + 1], ghn[s]
        for n in range(N):
            for j in range(H):
                _step_fwd_at(mode, gx, t * N, bx, gh, bh, hp, cp, g_s, hn, cn, ghn_s, y, t,
                             ycol, lo, hi, clip_on, clip_nan, n, j)


@njit(**JIT)
def layer_backward(mode, x2, wx, wh, hs, cs, gates, ghn, dy, ycol, rev, dh, dc,
                   dgx, dgh, dhp, dwx, dwh, dbx, dbh, dx2, lo, hi, clip_on):
    """Backward of :func:`layer_forward`; adds into ``dwx, dwh, dbx, dbh, dx2``.

    ``dh, dc (N, H)`` come in as dL/d(final state) and leave as dL/d(initial
    state); ``dgx (T*N, G*H)``, ``dgh (T, N, G*H)``, ``dhp (N, H)`` are scratch.
    """
    T = hs.shape[0] - 1
    N = hs.shape[1]
    H = hs.shape[2]
    for s in range(T - 1, -1, -1):
        t = T - 1 - s if rev else s
        g_s, hp, cp, c_s, ghn_s, dgh_s = gates[s], hs[s], cs[s], cs[s + 1], ghn[s], dgh[s]
        for n in range(N):
            for j in range(H):
                _step_bwd_at(mode, g_s, hp, cp, c_s, ghn_s, dy, t, ycol, dh, dc, dgx, t * N,
                             dgh_s, dhp, lo, hi, clip_on, n, j)
        np.dot(dgh[s], wh, dh)
        if mode == GRU:
            dh += dhp
    GH = dgh.shape[2]
    dg2 = dgh.reshape(T * N, GH)
    dwh += np.dot(dg2.T, hs[:T].reshape(T * N, H))
    dwx += np.dot(dgx.T, x2)
    dx2 += np.dot(dgx, wx)
    for r in range(T * N):
        for k in range(GH):
            dbx[k] += dgx[r, k]
            dbh[k] += dg2[r, k]


# ------------------------------------------------------------------ GPU kernels
def _build_step_fwd():
    import_cuda(globals())
    step = gpu_body(_step_fwd_at)

    @cuda.jit
    def k(mode, gx, r0, bx, gh, bh, hp, cp, gates, hn, cn, ghn, y, t, ycol,
          lo, hi, clip_on, clip_nan):
        H = hp.shape[1]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for q in range(start, hp.shape[0] * H, stride):
            step(mode, gx, r0, bx, gh, bh, hp, cp, gates, hn, cn, ghn, y, t, ycol,
                 lo, hi, clip_on, clip_nan, q // H, q % H)
    return k


def _build_step_bwd():
    import_cuda(globals())
    step = gpu_body(_step_bwd_at)

    @cuda.jit
    def k(mode, gates, hp, cp, c_s, ghn, dy, t, ycol, dh, dc, dgx, r0, dgh, dhp,
          lo, hi, clip_on):
        H = hp.shape[1]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for q in range(start, hp.shape[0] * H, stride):
            step(mode, gates, hp, cp, c_s, ghn, dy, t, ycol, dh, dc, dgx, r0, dgh, dhp,
                 lo, hi, clip_on, q // H, q % H)
    return k


def _build_colsum():
    import_cuda(globals())

    @cuda.jit
    def k(a, out):
        # out[k] += sum_r a[r, k]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for q in range(start, a.shape[1], stride):
            acc = 0.0
            for r in range(a.shape[0]):
                acc += a[r, q]
            out[q] += acc
    return k


def _build_axpy():
    import_cuda(globals())

    @cuda.jit
    def k(dst, src, scale, add):
        # dst (+)= src * scale (flat)
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for q in range(start, dst.size, stride):
            if add:
                dst[q] += src[q] * scale[q % scale.size]
            else:
                dst[q] = src[q] * scale[q % scale.size]
    return k


step_fwd_gpu = LazyCudaKernel(_build_step_fwd)
step_bwd_gpu = LazyCudaKernel(_build_step_bwd)
colsum_gpu = LazyCudaKernel(_build_colsum)
axpy_gpu = LazyCudaKernel(_build_axpy)
