"""Pooling whose one window is the whole input plane (global pooling, ResNet/MobileNet heads).

With no padding, a single output position per spatial dim and a window at
least as large as the input, every window of max, avg or sum pooling is the
whole ``D*H*W`` plane of one ``(n, c)``: ``global_pool=True`` and, for
example, ``kernel=(7, 7)`` on a 7x7 input. The general row-sweep kernels
(``pooling._pool_fwd``/``_pool_bwd``) cover every pool type, padding and
stride and take about 2 s to compile; these two flat loops give the same
numbers (sums in float64, in row-major order; the first strict maximum)
and compile in a fraction of that, which is most of the pooling share of a
cold start of a network whose only pooling is its global head.

Math (``P = D*H*W``, per plane)::

    max: y = max_i x_i    (-inf when no x_i > -inf)     dx_i (+)= dy at the first strict maximum
    avg: y = sum_i x_i / P                               dx_i (+)= dy / P
    sum: y = sum_i x_i                                   dx_i (+)= dy

Source: MXNet 1.x ``Pooling`` operator documentation (``global_pool``).
"""
import numpy as np
from numba import njit

from ..templates import JIT
from ._conv_par import run_split

__all__ = ['is_whole_plane', 'global_forward', 'global_backward']


def is_whole_plane(g, dims, mode):
    """Whether pooling geometry ``g`` (12 ints) pools each whole plane of ``dims``.

    Parameters
    ----------
    g : tuple of 12 int
        Kernel, stride, pad and output size, each padded to 3-D (``pooling._geom``).
    dims : tuple of 5 int
        ``(N, C, D, H, W)`` of the data.
    mode : int
        0 max, 1 avg, 2 sum, 3 lp (lp always takes the general kernels).
    """
    return (mode in (0, 1, 2) and tuple(g[6:9]) == (0, 0, 0) and tuple(g[9:12]) == (1, 1, 1)
            and all(g[a] >= dims[2 + a] for a in range(3)))


@njit(**JIT)
def _fwd(xf, yf, planes, plane, mode, lowest):
    """``yf[c]`` = max (mode 0), mean (1) or sum (2) of plane ``c`` of flat ``xf``."""
    up = np.uint64(plane)
    for c in range(planes):
        base = np.uint64(c * plane)
        if mode == 0:
            best = lowest
            for i in range(up):
                v = xf[base + i]
                best = v if v > best else best      # NaN never wins, as the general kernel
            yf[c] = best
        else:
            acc = 0.0
            for i in range(up):
                acc += xf[base + i]
            if mode == 1:
                acc = acc / plane if plane > 0 else 0.0
            yf[c] = acc


@njit(**JIT)
def _bwd(xf, dyf, dxf, planes, plane, mode, write):
    """``dx (+)= d y / d x . dy`` for :func:`_fwd`; ``write`` overwrites ``dxf``."""
    up = np.uint64(plane)
    for c in range(planes):
        base = np.uint64(c * plane)
        if mode == 0:
            best = -np.inf
            at = -1
            for i in range(plane):
                v = xf[base + np.uint64(i)]
                take = v > best
                best = v if take else best
                at = i if take else at
            if write:
                for i in range(up):
                    dxf[base + i] = 0.0
            if at >= 0:
                dxf[base + np.uint64(at)] += dyf[c]
        else:
            g = float(dyf[c])
            if mode == 1:
                g = g / plane
            if write:
                for i in range(up):
                    dxf[base + i] = g
            else:
                for i in range(up):
                    dxf[base + i] += g


def _ranges(planes, nt):
    return [(planes * t // nt, planes * (t + 1) // nt) for t in range(nt)]


def global_forward(xf, yf, dims, mode, lowest, nt):
    """Forward over flat ``xf`` (shape ``dims``) into flat ``yf`` (one value per plane).

    ``nt`` > 1 splits the planes over the convolution thread pool (``run_split``).
    """
    planes, plane = dims[0] * dims[1], dims[2] * dims[3] * dims[4]
    if nt <= 1:
        _fwd(xf, yf, planes, plane, mode, lowest)
        return
    parts = _ranges(planes, nt)

    def part(t):
        lo, hi = parts[t]
        _fwd(xf[lo * plane:hi * plane], yf[lo:hi], hi - lo, plane, mode, lowest)
    run_split(part, nt)


def global_backward(xf, dyf, dxf, dims, mode, write, nt):
    """Backward of :func:`global_forward` into flat ``dxf`` (``write``: overwrite it)."""
    planes, plane = dims[0] * dims[1], dims[2] * dims[3] * dims[4]
    if nt <= 1:
        _bwd(xf, dyf, dxf, planes, plane, mode, write)
        return
    parts = _ranges(planes, nt)

    def part(t):
        lo, hi = parts[t]
        _bwd(xf[lo * plane:hi * plane], dyf[lo:hi], dxf[lo * plane:hi * plane], hi - lo, plane,
             mode, write)
    run_split(part, nt)
