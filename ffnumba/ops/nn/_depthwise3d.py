"""Depthwise convolution of 3-D data (``M == 1``): tap-major direct loops.

The 3-D kernels of :mod:`._depthwise` (its drivers split the batch over threads):
each tap of each channel is one strided loop over the valid output range
(:func:`._im2col._valid`), so taps on the padding are skipped. Images are flat
``(N, C, D, H, W)`` arrays with the 5-D shape in ``dims``; ``g`` is the 15-int
geometry of :func:`._im2col.geometry`.
"""
from numba import njit

from ..templates import JIT
from ._im2col import _valid

__all__ = ['dw_forward3d', 'dw_backward3d']


@njit(**JIT)
def dw_forward3d(xf, dims, w, yf, bias, has_bias, g, nlo, nhi):
    """``y = depthwise(x, w) (+ bias)`` of samples ``nlo..nhi``; ``w`` is ``(C, K)``."""
    C, D, H, W = dims[1], dims[2], dims[3], dims[4]
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
    P = OD * OH * OW
    HW = H * W
    for n in range(nlo, nhi):
        for c in range(C):
            xbase = (n * C + c) * D * HW
            ybase = (n * C + c) * P
            v0 = bias[c] if has_bias else yf.dtype.type(0)
            for i in range(ybase, ybase + P):
                yf[i] = v0
            for kd in range(KD):
                dlo, dhi = _valid(OD, SD, PD, kd, DD, D)
                for kh in range(KH):
                    hlo, hhi = _valid(OH, SH, PH, kh, DH, H)
                    for kw in range(KW):
                        wlo, whi = _valid(OW, SW, PW, kw, DW, W)
                        wv = w[c, (kd * KH + kh) * KW + kw]
                        for od in range(dlo, dhi):
                            dbase = xbase + (od * SD - PD + kd * DD) * HW
                            for oh in range(hlo, hhi):
                                us = dbase + (oh * SH - PH + kh * DH) * W + kw * DW - PW
                                ud = ybase + (od * OH + oh) * OW
                                for ow in range(wlo, whi):
                                    yf[ud + ow] += wv * xf[us + ow * SW]


@njit(**JIT)
def dw_backward3d(xf, dims, w, dyf, dxf, dwp, mode_dx, want_dw, g, nlo, nhi):
    """Backward of samples ``nlo..nhi``: their ``dx`` and ``dwp = sum dy * x`` ``(C, K)``."""
    C, D, H, W = dims[1], dims[2], dims[3], dims[4]
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
    P = OD * OH * OW
    HW = H * W
    if mode_dx == 1:
        dxf[nlo * C * D * HW:nhi * C * D * HW] = 0
    if want_dw:
        dwp[...] = 0
    for n in range(nlo, nhi):
        for c in range(C):
            xbase = (n * C + c) * D * HW
            ybase = (n * C + c) * P
            for kd in range(KD):
                dlo, dhi = _valid(OD, SD, PD, kd, DD, D)
                for kh in range(KH):
                    hlo, hhi = _valid(OH, SH, PH, kh, DH, H)
                    for kw in range(KW):
                        wlo, whi = _valid(OW, SW, PW, kw, DW, W)
                        k = (kd * KH + kh) * KW + kw
                        wv = w[c, k]
                        acc = 0.0
                        for od in range(dlo, dhi):
                            dbase = xbase + (od * SD - PD + kd * DD) * HW
                            for oh in range(hlo, hhi):
                                us = dbase + (oh * SH - PH + kh * DH) * W + kw * DW - PW
                                ud = ybase + (od * OH + oh) * OW
                                if want_dw:
                                    for ow in range(wlo, whi):
                                        acc += dyf[ud + ow] * xf[us + ow * SW]
                                if mode_dx != 0:
                                    for ow in range(wlo, whi):
                                        dxf[us + ow * SW] += wv * dyf[ud + ow]
                        if want_dw:
                            dwp[c, k] += acc
