"""CPU kernels of the fused ``RNN`` operator (see :mod:`ffnumba.ops.nn.rnn`).

One ``@njit`` call runs one layer in one direction over the whole sequence:

* forward: the caller projects every time step's input at once with one
  BLAS GEMM straight into the gate buffer; :func:`layer_forward` then runs per
  step one GEMM ``h @ Wh.T`` into a preallocated ``(N, G*H)`` buffer and
  fused passes over contiguous rows that add it, apply the gate
  nonlinearities, update the cell and write the new state and the output;
* backward: :func:`layer_backward` runs per step fused passes that turn dL/dh
  into the pre-activation gate gradients (by time, ``(T*N, G*H)``) and one
  GEMM for dL/dh_prev; the caller then does the weight gradients of the whole
  sequence as single GEMMs over ``T*N`` rows (``dWx = dG.T @ X``,
  ``dWh = dG.T @ H_prev``, ``dX = dG @ Wx``) and the bias gradients as
  column sums.

(The whole-sequence GEMMs stay outside the step kernels so that they can use
the process's BLAS threads while the many small per-step GEMMs run on one.)

States are kept **by time**: ``hs, cs (T+1, N, H)``; the forward direction
reads ``hs[t]`` and writes ``hs[t+1]`` at time t, the backward direction reads
``hs[t+1]`` and writes ``hs[t]``, so for both the states entering each time
step are one contiguous ``(T*N, H)`` block (``hs[0:T]`` or ``hs[1:T+1]``)
for the ``dWh`` GEMM. Initial state: ``hs[0]`` (forward) or ``hs[T]``
(backward); final state the other end.

float32 uses a rational ``tanh`` (Eigen's ``generic_fast_tanh_float``
minimax approximation, a few ulp in float32) and ``sigmoid(x) = (1 + tanh(x /
2)) / 2`` so the gate passes vectorise; float64 uses ``math.tanh`` /
``math.exp`` (exact gradient checks).

``lens`` (``(N,)`` int64) is each sequence's length when ``use_sequence_length``
(else every entry is ``T``): steps at ``t >= lens[n]`` carry the state through
unchanged and give output 0 and no gradient; the backward direction of
sequence n starts at its own last step ``lens[n] - 1``.

Modes: 0 ``rnn_relu``, 1 ``rnn_tanh``, 2 ``lstm``, 3 ``gru`` (gate blocks
LSTM ``i, f, g, o``; GRU ``r, z, n``, MXNet's order).
"""
import math

import numpy as np
from numba import njit, types
from numba.extending import overload

from ..templates import FASTMATH, JIT

RELU, TANH, LSTM, GRU = 0, 1, 2, 3

_CLAMP = np.float32(7.90531110763549805)
_A13, _A11, _A9 = np.float32(-2.76076847742355e-16), np.float32(2.00018790482477e-13), \
    np.float32(-8.60467152213735e-11)
_A7, _A5, _A3, _A1 = np.float32(5.12229709037114e-08), np.float32(1.48572235717979e-05), \
    np.float32(6.37261928875436e-04), np.float32(4.89352455891786e-03)
_B6, _B4, _B2, _B0 = np.float32(1.19825839466702e-06), np.float32(1.18534705686654e-04), \
    np.float32(2.26843463243900e-03), np.float32(4.89352518554385e-03)
_HALF, _ONE = np.float32(0.5), np.float32(1.0)


@njit(**JIT)
def _tanh32(x):
    """float32 tanh, rational minimax on [-7.9, 7.9] (Eigen ``generic_fast_tanh_float``)."""
    x = min(max(np.float32(x), -_CLAMP), _CLAMP)
    x2 = x * x
    p = x2 * _A13 + _A11
    p = x2 * p + _A9
    p = x2 * p + _A7
    p = x2 * p + _A5
    p = x2 * p + _A3
    p = x2 * p + _A1
    q = x2 * _B6 + _B4
    q = x2 * q + _B2
    q = x2 * q + _B0
    return x * p / q


def _th(x):
    """tanh: :func:`_tanh32` for float32, ``math.tanh`` for float64 (picked at compile time)."""
    return math.tanh(x)


def _sg(x):
    """Logistic sigmoid, float32 through :func:`_tanh32`, float64 exact."""
    return 1.0 / (1.0 + math.exp(-x))


@overload(_th, jit_options=dict(fastmath=FASTMATH))
def _th_impl(x):
    if isinstance(x, types.Float) and x.bitwidth == 32:
        return lambda x: _tanh32(x)
    return lambda x: math.tanh(x)


@overload(_sg, jit_options=dict(fastmath=FASTMATH))
def _sg_impl(x):
    if isinstance(x, types.Float) and x.bitwidth == 32:
        return lambda x: _HALF + _HALF * _tanh32(_HALF * x)
    return lambda x: 1.0 / (1.0 + math.exp(-x))


# ------------------------------------------------------------------ forward
@njit(**JIT)
def _gate_sig(a, b, c):
    """``a = sigmoid(a + b + c)`` elementwise (1-D views: loops from 0 vectorise)."""
    for j in range(a.shape[0]):
        a[j] = _sg(a[j] + b[j] + c[j])


@njit(**JIT)
def _gate_tanh(a, b, c):
    for j in range(a.shape[0]):
        a[j] = _th(a[j] + b[j] + c[j])


@njit(**JIT)
def _step_fwd(mode, g, gh, bh, hp, cp, hn, cn, ghn, yt, ycol, lens, t, lo, hi, clip_on,
              clip_nan, proj):
    """One time step for every sequence. ``g (N, G*H)`` holds ``Wx x + bx`` on
    entry and the activated gates on exit; ``gh (N, G*H)`` is ``Wh h``.
    ``proj`` (LSTMP): ``hn`` gets ``o * tanh(c)`` (N, H) before the projection,
    and the caller writes the state and the output.

    Every loop runs from 0 over 1-D row views (``a[H + j]`` would keep numba's
    negative-index check and stop LLVM from vectorising)."""
    N = g.shape[0]
    H = g.shape[1] // (4 if mode == LSTM else 3 if mode == GRU else 1)
    for n in range(N):
        a, b, p, q, yr = g[n], gh[n], hp[n], hn[n], yt[n, ycol:ycol + H]
        if t >= lens[n] and proj:
            q[:] = 0.0
            cn[n, :] = cp[n, :]
            continue
        if t >= lens[n]:        # past this sequence's end: carry the state, output 0
            for j in range(H):
                q[j] = p[j]
                yr[j] = 0.0
            if mode == LSTM:
                cn[n, :] = cp[n, :]
            continue
        if mode <= TANH:
            for j in range(H):
                a[j] += b[j] + bh[j]
            if mode == RELU:
                for j in range(H):
                    a[j] = max(a[j], 0.0)
            else:
                for j in range(H):
                    a[j] = _th(a[j])
            for j in range(H):
                q[j] = a[j]
        elif mode == LSTM:
            ai, af, ag, ao = a[:H], a[H:2 * H], a[2 * H:3 * H], a[3 * H:]
            _gate_sig(ai, b[:H], bh[:H])
            _gate_sig(af, b[H:2 * H], bh[H:2 * H])
            _gate_tanh(ag, b[2 * H:3 * H], bh[2 * H:3 * H])
            _gate_sig(ao, b[3 * H:], bh[3 * H:])
            cpr, cnr = cp[n], cn[n]
            for j in range(H):
                cnr[j] = af[j] * cpr[j] + ai[j] * ag[j]
            if clip_on:
                for j in range(H):
                    c = cnr[j]
                    if clip_nan and c != c:
                        cnr[j] = lo
                    elif c < lo:
                        cnr[j] = lo
                    elif c > hi:
                        cnr[j] = hi
            for j in range(H):
                q[j] = ao[j] * _th(cnr[j])
        else:
            ar, az, an = a[:H], a[H:2 * H], a[2 * H:]
            _gate_sig(ar, b[:H], bh[:H])
            _gate_sig(az, b[H:2 * H], bh[H:2 * H])
            gr, bn, bhn = ghn[n], b[2 * H:], bh[2 * H:]
            for j in range(H):
                gr[j] = bn[j] + bhn[j]
            for j in range(H):
                an[j] = _th(an[j] + ar[j] * gr[j])
            for j in range(H):
                q[j] = (_ONE - az[j]) * an[j] + az[j] * p[j]
        if not proj:
            for j in range(H):
                yr[j] = q[j]


@njit(**JIT)
def _proj_out(hp, hn, yt, ycol, lens, t):
    """LSTMP after ``hn = (o * tanh(c)) @ Whr.T``: carried rows keep ``hp``; output."""
    P = hn.shape[1]
    for n in range(hn.shape[0]):
        yr = yt[n, ycol:ycol + P]
        if t >= lens[n]:
            hn[n, :] = hp[n, :]
            yr[:] = 0.0
        else:
            yr[:] = hn[n, :]


@njit(**JIT)
def layer_forward(mode, wh, bx, bh, hs, cs, gates, ghn, gh, y, ycol, rev, lens,
                  lo, hi, clip_on, clip_nan, whr, hraw, proj):
    """One layer, one direction over the whole sequence.

    ``gates (T*N, G*H)`` holds ``X @ Wx.T`` (by time) on entry; ``hs, cs (T+1, N, H)`` by time (see the
    module docstring) with the initial state already in place; ``gates (T*N,
    G*H)`` gets the activated gates by time, ``ghn (T, N, H)`` GRU's ``Wh_n h
    + bh_n``, ``gh (N, G*H)`` is scratch; ``y (T, N, D*H)`` gets columns
    ``ycol:ycol+H``. ``proj`` (LSTMP, ``whr (P, H)``): ``hs (T+1, N, P)`` holds
    the projected states, ``hraw (T, N, H)`` gets ``o * tanh(c)`` by time.
    """
    T = hs.shape[0] - 1
    N = hs.shape[1]
    GH = gates.shape[1]
    for r in range(T * N):
        row = gates[r]
        for k in range(GH):
            row[k] += bx[k]
    for s in range(T):
        t = T - 1 - s if rev else s
        hin, hout = (t + 1, t) if rev else (t, t + 1)
        np.dot(hs[hin], wh.T, gh)
        _step_fwd(mode, gates[t * N:(t + 1) * N], gh, bh, hs[hin], cs[hin],
                  hraw[t] if proj else hs[hout], cs[hout], ghn[t], y[t], ycol, lens, t, lo, hi,
                  clip_on, clip_nan, proj)
        if proj:
            np.dot(hraw[t], whr.T, hs[hout])
            _proj_out(hs[hin], hs[hout], y[t], ycol, lens, t)


# ------------------------------------------------------------------ backward
@njit(**JIT)
def _step_bwd(mode, g, c_new, cp, hp, ghn, dyt, ycol, dh, dc, dg, dgr, dhp, lens, t, lo, hi,
              clip_on, direct, add_dy):
    """Gate gradients of one time step; ``dh, dc`` come in as dL/d(state after t)
    (without the output's share; ``dh`` is overwritten) and ``dc`` leaves as
    dL/dc_prev. ``direct``: fill ``dhp`` with the part of dL/dh_prev that
    does not go through ``Wh`` (GRU's ``z``, carried states). ``add_dy``: add
    the output's gradient ``dyt`` to ``dh`` first (LSTMP adds it before the projection)."""
    N, H = dh.shape
    for n in range(N):
        a, dr, hr = g[n], dg[n], dh[n]
        if t >= lens[n]:        # carried state: the gradient passes through unchanged
            dr[:] = 0.0
            if mode == GRU:
                dgr[n, :] = 0.0
            dhp[n, :] = hr
            continue
        if add_dy:
            dyr = dyt[n, ycol:ycol + H]
            for j in range(H):
                hr[j] += dyr[j]
        if mode <= TANH:
            if mode == RELU:
                for j in range(H):
                    dr[j] = hr[j] if a[j] > 0 else 0.0
            else:
                for j in range(H):
                    dr[j] = hr[j] * (_ONE - a[j] * a[j])
            if direct:
                dhp[n, :] = 0.0
        elif mode == LSTM:
            ai, af, ag, ao = a[:H], a[H:2 * H], a[2 * H:3 * H], a[3 * H:]
            di, df, dgg, do = dr[:H], dr[H:2 * H], dr[2 * H:3 * H], dr[3 * H:]
            cnr, cpr, dcr = c_new[n], cp[n], dc[n]
            for j in range(H):
                tc = _th(cnr[j])
                dcr[j] += hr[j] * ao[j] * (_ONE - tc * tc)
                do[j] = hr[j] * tc * ao[j] * (_ONE - ao[j])
            if clip_on:     # the clip passes no gradient where it was active
                for j in range(H):
                    if cnr[j] <= lo or cnr[j] >= hi:
                        dcr[j] = 0.0
            for j in range(H):
                di[j] = dcr[j] * ag[j] * ai[j] * (_ONE - ai[j])
            for j in range(H):
                df[j] = dcr[j] * cpr[j] * af[j] * (_ONE - af[j])
            for j in range(H):
                dgg[j] = dcr[j] * ai[j] * (_ONE - ag[j] * ag[j])
            for j in range(H):
                dcr[j] *= af[j]
            if direct:
                dhp[n, :] = 0.0
        else:
            ar, az, an = a[:H], a[H:2 * H], a[2 * H:]
            dar, daz, dan = dr[:H], dr[H:2 * H], dr[2 * H:]
            d2 = dgr[n]
            d2n, hhr, hpr, dp = d2[2 * H:], ghn[n], hp[n], dhp[n]
            for j in range(H):
                dan[j] = hr[j] * (_ONE - az[j]) * (_ONE - an[j] * an[j])
            for j in range(H):
                dar[j] = dan[j] * hhr[j] * ar[j] * (_ONE - ar[j])
            for j in range(H):
                daz[j] = hr[j] * (hpr[j] - an[j]) * az[j] * (_ONE - az[j])
            for j in range(H):
                d2n[j] = dan[j] * ar[j]
            for j in range(H):
                dp[j] = hr[j] * az[j]
            d2[:2 * H] = dr[:2 * H]


@njit(**JIT)
def _proj_grad(dh, dyt, ycol, lens, t, dr, dcarry):
    """LSTMP: ``dr`` = dL/d(projected state at t) (0 past the end), ``dcarry`` the
    gradient a carried state passes straight back (0 within the sequence)."""
    P = dh.shape[1]
    for n in range(dh.shape[0]):
        if t >= lens[n]:
            dr[n, :] = 0.0
            dcarry[n, :] = dh[n, :]
        else:
            dyr, d, hr = dyt[n, ycol:ycol + P], dr[n], dh[n]
            for j in range(P):
                d[j] = hr[j] + dyr[j]
            dcarry[n, :] = 0.0


@njit(**JIT)
def layer_backward(mode, wh, hs, cs, gates, ghn, dy, ycol, rev, lens, dh, dc,
                   dgx, dgh, dhp, lo, hi, clip_on, whr, drs, dhr, dcarry, proj):
    """The recurrence of the backward of :func:`layer_forward`.

    ``dh, dc (N, H)`` come in as dL/d(final state) and leave as dL/d(initial
    state). Fills ``dgx (T*N, G*H)`` (pre-activation gate gradients by time)
    and ``dgh``, the same array as ``dgx`` except for GRU (its own ``(T*N,
    G*H)``: the recurrent n-gate gradient differs); scratch ``dhp (N, H)``.
    ``proj`` (LSTMP): ``dh, dcarry (N, P)``, ``drs (T*N, P)`` gets dL/d(projected
    state) by time, scratch ``dhr (N, H)``. The caller turns these into the
    weight and input gradients.
    """
    T = hs.shape[0] - 1
    N = hs.shape[1]
    minlen = lens.min()
    for s in range(T - 1, -1, -1):
        t = T - 1 - s if rev else s
        hin, hout = (t + 1, t) if rev else (t, t + 1)
        rows = slice(t * N, (t + 1) * N)
        direct = mode == GRU or t >= minlen
        if proj:
            _proj_grad(dh, dy[t], ycol, lens, t, drs[rows], dcarry)
            np.dot(drs[rows], whr, dhr)
            _step_bwd(mode, gates[rows], cs[hout], cs[hin], hs[hin], ghn[t], dy[t], ycol, dhr,
                      dc, dgx[rows], dgh[rows], dhp, lens, t, lo, hi, clip_on, False, False)
            np.dot(dgh[rows], wh, dh)
            if direct:
                dh += dcarry
            continue
        _step_bwd(mode, gates[rows], cs[hout], cs[hin], hs[hin], ghn[t], dy[t], ycol, dh, dc,
                  dgx[rows], dgh[rows], dhp, lens, t, lo, hi, clip_on, direct, True)
        np.dot(dgh[rows], wh, dh)
        if direct:
            dh += dhp
