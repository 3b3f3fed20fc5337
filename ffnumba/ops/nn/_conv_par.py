"""Convolution on several threads: the batch split over numba threads, BLAS on one each.

OpenBLAS's own threads help large GEMMs, but a convolution issues many
mid-sized ones (one per chunk of samples and group) and its im2col, col2im,
gather and scatter copies run on one thread whatever BLAS does; on a busy
machine every multi-threaded GEMM also waits for its helper thread to be
scheduled. Here each of ``nt`` numba threads (``prange``) runs the serial
drivers of :mod:`._im2col` on its own contiguous range of samples with its
own scratch, while BLAS is held to one thread
(:class:`ffnumba.blas_threads.numba_blas_single_thread`): copies
and GEMMs both scale, and each call is one fork-join. ``dx`` and ``y`` rows
belong to one thread; the weight gradient is summed from one partial ``dw``
per thread.

Idle OpenMP workers must sleep, not spin, or they take the core OpenBLAS needs
between convolutions: :mod:`ffnumba.blas_threads` sets ``OMP_WAIT_POLICY=PASSIVE``
(unless the user set it) when ffnumba is imported.
"""
from numba import njit, prange

from ..templates import JIT
from ._im2col import backward_range, forward_range

__all__ = ['conv_forward_par', 'conv_backward_par', 'split_threads']


def split_threads(n):
    """Threads to split a batch of ``n`` samples over: numba's thread count, at most ``n``.

    Multi-context runs cap BLAS at each context's share of the cores
    (:mod:`ffnumba.blas_threads`); a convolution then takes no more threads
    than that share, so contexts running side by side do not oversubscribe.
    """
    from numba import get_num_threads
    from ... import blas_threads
    nt = int(get_num_threads())
    cap = blas_threads._BLAS_LIMITED['threads']     # None unless a multi-context run set it
    if cap:
        nt = min(nt, int(cap))
    return max(1, min(nt, int(n)))


@njit(parallel=True, **JIT)
def conv_forward_par(xf, dims, w3, y, add, bias, has_bias, colbuf, tmpbuf, nbmax, g, nt):
    """:func:`._im2col.conv_forward` with the batch split over ``nt`` threads.

    ``colbuf`` / ``tmpbuf`` hold ``nt`` times the serial driver's scratch.
    """
    N = dims[0]
    G, Fg, CK = w3.shape
    P = y.shape[2]
    csz = CK * nbmax * P
    tsz = Fg * nbmax * P
    for t in prange(nt):
        forward_range(xf, dims, w3, y, add, bias, has_bias, colbuf[t * csz:(t + 1) * csz],
                      tmpbuf[t * tsz:(t + 1) * tsz], nbmax, g, N * t // nt, N * (t + 1) // nt)


@njit(parallel=True, **JIT)
def conv_backward_par(xf, dims, w3, dy, dxf, dw3, mode_dx, mode_dw, colbuf, tmpbuf, partbuf,
                      dwparts, nbmax, g, nt):
    """:func:`._im2col.conv_backward` with the batch split over ``nt`` threads (``nt <= N``).

    ``colbuf`` / ``tmpbuf`` / ``partbuf`` hold ``nt`` times the serial
    driver's scratch; ``dwparts`` ``(nt, G, Fg, Cg*K)`` the per-thread weight
    gradients, summed into ``dw3`` (written or added per ``mode_dw``).
    """
    N = dims[0]
    G, Fg, CK = w3.shape
    P = dy.shape[2]
    csz = CK * nbmax * P
    tsz = Fg * nbmax * P
    psz = Fg * CK
    mode_part = 1 if mode_dw != 0 else 0
    for t in prange(nt):
        backward_range(xf, dims, w3, dy, dxf, dwparts[t], mode_dx, mode_part,
                       colbuf[t * csz:(t + 1) * csz], tmpbuf[t * tsz:(t + 1) * tsz],
                       partbuf[t * psz:(t + 1) * psz], nbmax, g, N * t // nt,
                       N * (t + 1) // nt)
    if mode_dw != 0:
        total = G * Fg * CK
        dwf = dw3.reshape(total)
        parts = dwparts.reshape((nt, total))
        for i in prange(total):
            acc = parts[0, i]
            for t in range(1, nt):
                acc += parts[t, i]
            if mode_dw == 1:
                dwf[i] = acc
            else:
                dwf[i] += acc
