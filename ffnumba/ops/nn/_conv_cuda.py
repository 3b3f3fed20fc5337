"""GPU kernels for Convolution, Deconvolution and Pooling (direct, one thread per element).

Same conv geometry as ``_im2col``: an image-space tensor ``X`` ``(N, Cin, D, H, W)``,
a column-space tensor ``Y`` ``(N, Cout, OD, OH, OW)`` and a weight
``(Cout, Cin/G, KD, KH, KW)``; ``geom`` is the 15-int tuple of
``_im2col.geometry``. Every kernel is a grid-stride loop over its outputs and
gathers what it needs, so no atomics are used and ``grad_req='add'`` is a flag:

* :data:`conv_y`   ``Y (+)= conv(X, W) (+ bias)``     one thread per ``Y`` element;
* :data:`conv_x`   ``X (+)= conv^T(Y, W) (+ bias)``   one thread per ``X`` element;
* :data:`conv_w`   ``W (+)= sum_n Y col(X)``          one thread per weight element;
* :data:`bias_g`   ``b (+)= sum of Y over n and space``;
* :data:`pool_y` / :data:`pool_x` pooling forward / backward (the backward gathers
  from every window that covers an input and, for max, recomputes that window's
  first maximum).

Kernels are built on first use and reach ``cuda`` through this module's
globals (``import_cuda(globals())``) so numba's CUDA simulator can run them.
"""
import math

from numba import njit

from ..templates import LazyCudaKernel, import_cuda

__all__ = ['conv_y', 'conv_x', 'conv_w', 'bias_g', 'bias_grad', 'pool_y', 'pool_x',
           'unravel4', 'unravel5']

cuda = None  # bound by import_cuda(globals()) on first GPU use


@njit
def unravel5(t, C, D, H, W):
    """``(n, c, d, h, w)`` of flat index ``t`` in a C-order ``(N, C, D, H, W)`` array.

    A plain ``@njit`` scalar function: GPU kernels call it as a device function.
    """
    w = t % W
    r = t // W
    h = r % H
    r //= H
    d = r % D
    r //= D
    return r // C, r % C, d, h, w


@njit
def unravel4(t, C, H, W):
    """``(n, c, h, w)`` of flat index ``t`` in a C-order ``(N, C, H, W)`` array."""
    w = t % W
    r = t // W
    h = r % H
    r //= H
    return r // C, r % C, h, w


def _build_conv_y():
    import_cuda(globals())

    @cuda.jit
    def k(x, w, b, y, g, has_bias, add):
        N, Cin, D, H, W = x.shape
        _, Cout, OD, OH, OW = y.shape
        KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW = g[:12]
        Cg = w.shape[1]
        Fg = Cout // (Cin // Cg)
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for t in range(start, y.size, stride):
            n, co, od, oh, ow = unravel5(t, Cout, OD, OH, OW)
            c0 = (co // Fg) * Cg
            acc = 0.0
            for c in range(Cg):
                for kd in range(KD):
                    i_d = od * SD - PD + kd * DD
                    if i_d < 0 or i_d >= D:
                        continue
                    for kh in range(KH):
                        i_h = oh * SH - PH + kh * DH
                        if i_h < 0 or i_h >= H:
                            continue
                        for kw in range(KW):
                            i_w = ow * SW - PW + kw * DW
                            if 0 <= i_w < W:
                                acc += w[co, c, kd, kh, kw] * x[n, c0 + c, i_d, i_h, i_w]
            if has_bias:
                acc += b[co]
            if add:
                y[n, co, od, oh, ow] += acc
            else:
                y[n, co, od, oh, ow] = acc
    return k


def _build_conv_x():
    import_cuda(globals())

    @cuda.jit
    def k(y, w, b, x, g, has_bias, add):
        N, Cin, D, H, W = x.shape
        _, Cout, OD, OH, OW = y.shape
        KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW = g[:12]
        Cg = w.shape[1]
        Fg = Cout // (Cin // Cg)
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for t in range(start, x.size, stride):
            n, ci, i_d, ih, iw = unravel5(t, Cin, D, H, W)
            grp = ci // Cg
            c = ci - grp * Cg
            acc = 0.0
            for kd in range(KD):
                nd_ = i_d + PD - kd * DD
                if nd_ < 0 or nd_ % SD != 0 or nd_ // SD >= OD:
                    continue
                od = nd_ // SD
                for kh in range(KH):
                    nh = ih + PH - kh * DH
                    if nh < 0 or nh % SH != 0 or nh // SH >= OH:
                        continue
                    oh = nh // SH
                    for kw in range(KW):
                        nw = iw + PW - kw * DW
                        if nw < 0 or nw % SW != 0 or nw // SW >= OW:
                            continue
                        ow = nw // SW
                        for f in range(Fg):
                            co = grp * Fg + f
                            acc += w[co, c, kd, kh, kw] * y[n, co, od, oh, ow]
            if has_bias:
                acc += b[ci]
            if add:
                x[n, ci, i_d, ih, iw] += acc
            else:
                x[n, ci, i_d, ih, iw] = acc
    return k


def _build_conv_w():
    import_cuda(globals())

    @cuda.jit
    def k(x, y, dw, g, add):
        N, Cin, D, H, W = x.shape
        _, Cout, OD, OH, OW = y.shape
        KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW = g[:12]
        Cg = dw.shape[1]
        Fg = Cout // (Cin // Cg)
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for t in range(start, dw.size, stride):
            co, c, kd, kh, kw = unravel5(t, Cg, KD, KH, KW)
            ci = (co // Fg) * Cg + c
            acc = 0.0
            for n in range(N):
                for od in range(OD):
                    i_d = od * SD - PD + kd * DD
                    if i_d < 0 or i_d >= D:
                        continue
                    for oh in range(OH):
                        i_h = oh * SH - PH + kh * DH
                        if i_h < 0 or i_h >= H:
                            continue
                        for ow in range(OW):
                            i_w = ow * SW - PW + kw * DW
                            if 0 <= i_w < W:
                                acc += y[n, co, od, oh, ow] * x[n, ci, i_d, i_h, i_w]
            if add:
                dw[co, c, kd, kh, kw] += acc
            else:
                dw[co, c, kd, kh, kw] = acc
    return k


def _build_bias_g():
    import_cuda(globals())

    @cuda.jit
    def k(y, db, add):
        N, C, P = y.shape
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for co in range(start, C, stride):
            acc = 0.0
            for n in range(N):
                for i in range(P):
                    acc += y[n, co, i]
            if add:
                db[co] += acc
            else:
                db[co] = acc
    return k


def _build_pool_y():
    import_cuda(globals())

    @cuda.jit
    def k(x, y, g, mode, include_pad, pv, lowest):
        N, C, D, H, W = x.shape
        KD, KH, KW, SD, SH, SW, PD, PH, PW = g[:9]
        OD, OH, OW = y.shape[2], y.shape[3], y.shape[4]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for t in range(start, y.size, stride):
            n, c, od, oh, ow = unravel5(t, C, OD, OH, OW)
            d0 = od * SD - PD
            h0 = oh * SH - PH
            w0 = ow * SW - PW
            d1 = min(d0 + KD, D + PD)
            h1 = min(h0 + KH, H + PH)
            w1 = min(w0 + KW, W + PW)
            dlo, hlo, wlo = max(d0, 0), max(h0, 0), max(w0, 0)
            dhi, hhi, whi = min(d1, D), min(h1, H), min(w1, W)
            acc = lowest if mode == 0 else 0.0
            for a in range(dlo, dhi):
                for b in range(hlo, hhi):
                    for e in range(wlo, whi):
                        v = x[n, c, a, b, e]
                        if mode == 0:
                            if v > acc:
                                acc = v
                        elif mode == 3:
                            acc += v ** pv
                        else:
                            acc += v
            if mode == 1:
                if include_pad:
                    size = (d1 - d0) * (h1 - h0) * (w1 - w0)
                else:
                    size = max(0, dhi - dlo) * max(0, hhi - hlo) * max(0, whi - wlo)
                acc = acc / size if size > 0 else 0.0
            elif mode == 3 and pv == 2:
                acc = math.sqrt(acc)
            elif mode == 3 and pv == 3:
                acc = math.copysign(abs(acc) ** (1.0 / 3.0), acc)
            y[n, c, od, oh, ow] = acc
    return k


def _build_pool_x():
    import_cuda(globals())

    @cuda.jit
    def k(x, y, dy, dx, g, mode, include_pad, pv, add):
        N, C, D, H, W = x.shape
        KD, KH, KW, SD, SH, SW, PD, PH, PW = g[:9]
        OD, OH, OW = y.shape[2], y.shape[3], y.shape[4]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for t in range(start, x.size, stride):
            n, c, i_d, ih, iw = unravel5(t, C, D, H, W)
            acc = 0.0
            # outputs whose window [o*s - p, o*s - p + k) covers this input
            for od in range(max(0, (i_d + PD - KD + SD) // SD), min(OD, (i_d + PD) // SD + 1)):
                d0 = od * SD - PD
                d1 = min(d0 + KD, D + PD)
                for oh in range(max(0, (ih + PH - KH + SH) // SH), min(OH, (ih + PH) // SH + 1)):
                    h0 = oh * SH - PH
                    h1 = min(h0 + KH, H + PH)
                    for ow in range(max(0, (iw + PW - KW + SW) // SW),
                                    min(OW, (iw + PW) // SW + 1)):
                        w0 = ow * SW - PW
                        w1 = min(w0 + KW, W + PW)
                        gv = dy[n, c, od, oh, ow]
                        if mode == 0:
                            # is this input the first strict maximum of the window?
                            best = -math.inf
                            ba, bb, be = -1, -1, -1
                            for a in range(max(d0, 0), min(d1, D)):
                                for b in range(max(h0, 0), min(h1, H)):
                                    for e in range(max(w0, 0), min(w1, W)):
                                        v = x[n, c, a, b, e]
                                        if v > best:
                                            best = v
                                            ba, bb, be = a, b, e
                            if ba == i_d and bb == ih and be == iw:
                                acc += gv
                        elif mode == 1:
                            if include_pad:
                                size = (d1 - d0) * (h1 - h0) * (w1 - w0)
                            else:
                                size = ((min(d1, D) - max(d0, 0)) * (min(h1, H) - max(h0, 0))
                                        * (min(w1, W) - max(w0, 0)))
                            if size > 0:
                                acc += gv / size
                        elif mode == 3 and pv > 1:
                            out = y[n, c, od, oh, ow]
                            if out != 0:
                                ratio = x[n, c, i_d, ih, iw] / out
                                acc += gv * (ratio if pv == 2 else ratio * ratio)
                        else:
                            acc += gv
            if add:
                dx[n, c, i_d, ih, iw] += acc
            else:
                dx[n, c, i_d, ih, iw] = acc
    return k


conv_y = LazyCudaKernel(_build_conv_y)
conv_x = LazyCudaKernel(_build_conv_x)
conv_w = LazyCudaKernel(_build_conv_w)
bias_g = LazyCudaKernel(_build_bias_g)
pool_y = LazyCudaKernel(_build_pool_y)
pool_x = LazyCudaKernel(_build_pool_x)


def bias_grad(dy, db, add):
    """Launch :data:`bias_g`: ``db (+)= sum of dy (N, F, *spatial) over n and space``."""
    n, f = dy.shape[0], dy.shape[1]
    bias_g.launch(f, dy.reshape(n, f, dy.size // max(n * f, 1)), db, add)
