"""GPU kernels of the fused ``RNN`` operator (see :mod:`ffnumba.ops.nn.rnn`).

The cell math is written as scalar ``@njit`` functions (``_lstm_f``,
``_gru_b``...) that take and return numbers; the GPU step kernels
(``@cuda.jit``, one thread per ``(n, j)`` element) call them. The CPU
kernels are in :mod:`._rnn_cpu` (vectorised passes over whole rows).

Modes: 0 ``rnn_relu``, 1 ``rnn_tanh``, 2 ``lstm``, 3 ``gru``. Gate blocks of
``G * H`` rows in MXNet's order: LSTM ``i, f, g, o``; GRU ``r, z, n``.
"""
import math

from numba import njit

from ..templates import LazyCudaKernel, import_cuda

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


# ------------------------------------------------------------------ GPU kernels
def _build_step_fwd():
    import_cuda(globals())

    @cuda.jit
    def k(mode, gx, r0, bx, gh, bh, hp, cp, gates, hn, cn, ghn, y, t, ycol, lens,
          lo, hi, clip_on, clip_nan, proj):
        # one step for every (n, j); arrays are 2-D (N, .) except y (T, N, D*H).
        # proj (LSTMP): hn (N, H) gets o * tanh(c); the caller projects and writes y
        N, H = cp.shape
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for q in range(start, N * H, stride):
            n = q // H
            j = q - n * H
            r = r0 + n
            if t >= lens[n]:     # past this sequence's end: carry the state, output 0
                hn[n, j] = 0.0 if proj else hp[n, j]
                if mode == LSTM:
                    cn[n, j] = cp[n, j]
            elif mode <= TANH:
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
            if not proj:
                y[t, n, ycol + j] = hn[n, j] if t < lens[n] else 0.0
    return k


def _build_step_bwd():
    import_cuda(globals())

    @cuda.jit
    def k(mode, gates, hp, cp, c_s, ghn, dy, t, ycol, dh, dc, dgx, r0, dgh, dhp, lens,
          lo, hi, clip_on, add_dy):
        # add_dy False (LSTMP): dh already holds the output's share
        N, H = dh.shape
        G = gates.shape[1] // H
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for q in range(start, N * H, stride):
            n = q // H
            j = q - n * H
            r = r0 + n
            dht = dh[n, j] + dy[t, n, ycol + j] if add_dy else dh[n, j]
            dhp[n, j] = 0.0
            if t >= lens[n]:     # carried state: the gradient passes through unchanged
                dhp[n, j] = dh[n, j]
                for b in range(G):
                    dgx[r, b * H + j] = 0.0
                    dgh[n, b * H + j] = 0.0
            elif mode <= TANH:
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


def _build_proj_out():
    import_cuda(globals())

    @cuda.jit
    def k(hp, hn, y, t, ycol, lens):
        # LSTMP after hn = (o tanh c) @ Whr.T: carried rows keep hp; write the output
        N, P = hn.shape
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for q in range(start, N * P, stride):
            n = q // P
            j = q - n * P
            if t >= lens[n]:
                hn[n, j] = hp[n, j]
                y[t, n, ycol + j] = 0.0
            else:
                y[t, n, ycol + j] = hn[n, j]
    return k


def _build_proj_grad():
    import_cuda(globals())

    @cuda.jit
    def k(dh, dy, t, ycol, lens, dr, dcarry):
        # LSTMP: dr = dL/d(projected state) (0 past the end), dcarry what a carried
        # state passes straight back (0 within the sequence)
        N, P = dh.shape
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for q in range(start, N * P, stride):
            n = q // P
            j = q - n * P
            if t >= lens[n]:
                dr[n, j] = 0.0
                dcarry[n, j] = dh[n, j]
            else:
                dr[n, j] = dh[n, j] + dy[t, n, ycol + j]
                dcarry[n, j] = 0.0
    return k


proj_out_gpu = LazyCudaKernel(_build_proj_out)
proj_grad_gpu = LazyCudaKernel(_build_proj_grad)
step_fwd_gpu = LazyCudaKernel(_build_step_fwd)
step_bwd_gpu = LazyCudaKernel(_build_step_bwd)
colsum_gpu = LazyCudaKernel(_build_colsum)
axpy_gpu = LazyCudaKernel(_build_axpy)
