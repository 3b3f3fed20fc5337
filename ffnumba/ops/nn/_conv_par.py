"""Convolution on several threads: the batch split over a thread pool, BLAS on one each.

OpenBLAS's own threads help large GEMMs, but a convolution issues many
mid-sized ones (one per chunk of samples and group) and its im2col, col2im,
gather and scatter copies run on one thread whatever BLAS does; on a busy
machine every multi-threaded GEMM also waits for its helper thread to be
scheduled. Here each of ``nt`` parts (``numba.get_num_threads()`` threads of
the persistent ``'kernel'`` pool of :mod:`ffnumba.thread_pool`) runs the
serial ``nogil`` drivers of :mod:`._im2col` on its own contiguous range of
samples with its own scratch, while BLAS is held to one thread
(:class:`ffnumba.blas_threads.numba_blas_single_thread`): copies
and GEMMs both scale, and each call is one fork-join. The serial kernels are
the ones one thread runs anyway, so threads add no compilation (a numba
``prange`` version of these drivers cost about 12 s of compiling on a cold
start of LeNet). ``dx`` and ``y`` rows
belong to one part; the weight gradient is summed from one partial ``dw``
per part, in part order (the same whichever thread ran a part).
"""
import numpy as np

from ...thread_pool import run_parallel
from ._im2col import backward_range, forward_range

__all__ = ['conv_forward_par', 'conv_backward_par', 'run_split', 'split_threads']


def split_threads(n):
    """Threads to split a batch of ``n`` samples over: numba's thread count, at most ``n``.

    Multi-context runs cap BLAS at each context's share of the cores
    (:mod:`ffnumba.blas_threads`); a convolution then takes no more threads
    than that share, so contexts running side by side do not oversubscribe.
    """
    from numba import get_num_threads
    from ...blas_threads import kernel_thread_cap
    nt = int(get_num_threads())
    cap = kernel_thread_cap()     # None unless several contexts or ranks share the cores
    if cap:
        nt = min(nt, int(cap))
    return max(1, min(nt, int(n)))


def run_split(part, nt):
    """``part(t)`` for ``t`` in ``range(nt)``: ``t = 0`` here, the others on the kernel pool.

    The kernels are ``nogil``, so the threads run them concurrently; a part
    no pool thread has started when this thread is done runs here; every
    part is waited for before the first error is raised
    (:func:`ffnumba.thread_pool.run_parallel`).
    """
    run_parallel(part, nt, 'kernel')


def conv_forward_par(xf, dims, w3, y, add, bias, has_bias, colbuf, tmpbuf, nbmax, g, nt,
                     ep=None, ep_mode=0):
    """:func:`._im2col.conv_forward` with the batch split over ``nt`` threads.

    ``ep`` / ``ep_mode``: the epilogue of a fused convolution (:mod:`._conv_epilogue`).

    ``colbuf`` / ``tmpbuf`` hold ``nt`` times the serial driver's scratch.
    Each thread runs the serial ``nogil`` kernel on its own range of samples.
    """
    N = dims[0]
    G, Fg, CK = w3.shape
    P = y.shape[2]
    csz = CK * nbmax * P
    tsz = Fg * nbmax * P

    def part(t):
        forward_range(xf, dims, w3, y, add, bias, has_bias, colbuf[t * csz:(t + 1) * csz],
                      tmpbuf[t * tsz:(t + 1) * tsz], nbmax, g, N * t // nt, N * (t + 1) // nt,
                      ep, ep_mode)
    run_split(part, nt)


def conv_backward_par(xf, dims, w3, dy, dxf, dw3, mode_dx, mode_dw, colbuf, tmpbuf, dwtbuf,
                      dwparts, nbmax, g, nt):
    """:func:`._im2col.conv_backward` with the batch split over ``nt`` threads (``nt <= N``).

    ``colbuf`` / ``tmpbuf`` / ``dwtbuf`` hold ``nt`` times the serial
    driver's scratch; ``dwparts`` ``(nt, G, Fg, Cg*K)`` the per-thread weight
    gradients, summed into ``dw3`` (written when ``mode_dw == 1``, added
    when 2, untouched when 0).
    """
    N = dims[0]
    G, Fg, CK = w3.shape
    P = dy.shape[2]
    csz = CK * nbmax * P
    tsz = Fg * nbmax * P
    wsz = dwtbuf.size // nt
    mode_part = 1 if mode_dw != 0 else 0

    def part(t):
        backward_range(xf, dims, w3, dy, dxf, dwparts[t], mode_dx, mode_part,
                       colbuf[t * csz:(t + 1) * csz], tmpbuf[t * tsz:(t + 1) * tsz],
                       dwtbuf[t * wsz:(t + 1) * wsz], nbmax, g, N * t // nt, N * (t + 1) // nt)
    run_split(part, nt)
    if mode_dw == 1:
        np.copyto(dw3, dwparts[0])
        for t in range(1, nt):
            dw3 += dwparts[t]
    elif mode_dw != 0:
        for t in range(nt):
            dw3 += dwparts[t]
