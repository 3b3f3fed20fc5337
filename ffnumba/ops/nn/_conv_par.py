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
per part, in part order (the same whichever thread ran a part), the sum itself
cut over the threads by elements (:func:`sum_parts`).

Deep layers whose whole batch is one column chunk (small output planes, large
weights: VGG's 512-channel 4x4 and 2x2 layers) split the backward by input
channels instead (:func:`conv_backward_channels`): a per-sample split would
give every thread a partial weight gradient as large as the weight, written
in full by a GEMM of half the depth and then summed, so two threads used 1.6
times the CPU of one there. By channels each thread writes its own columns
of ``dw`` and rows of ``dx``, with the chunks (so the GEMM depths) of one
thread.
"""
from contextlib import contextmanager

from numba import njit

from ...blas_threads import numba_blas_single_thread
from ...jit import JIT
from ...thread_pool import (SPLIT_MIN_ELEMS, kernel_threads, run_parallel, single_thread,
                            split_range)
from ._im2col import backward_range, forward_range

#: Weight gradients of at most this many elements stay on the batch split: small enough
#: that each thread's partial is cache-resident and the parts' sum is cheap, where the
#: channel split's narrower GEMMs would cost more than they save.
SMALL_DW = 1 << 16

__all__ = ['one_thread', 'conv_forward_par', 'conv_backward_par', 'conv_backward_channels',
           'run_split', 'split_threads', 'sum_parts', 'transform_filters', 'transform_filters_t']


def split_threads(n):
    """Threads to split a batch of ``n`` samples over: numba's thread count, at most ``n``,
    capped at a context's share of the cores in multi-context runs
    (:func:`ffnumba.thread_pool.kernel_threads`, the one rule every kernel split uses)."""
    return kernel_threads(n)


@contextmanager
def one_thread(on=True):
    """``with one_thread(): ...`` runs the kernels inside on this thread alone: every
    :func:`split_threads` answers 1 (:func:`ffnumba.thread_pool.single_thread`) and numba's
    BLAS runs one thread (:class:`ffnumba.blas_threads.numba_blas_single_thread`).
    ``on=False`` changes nothing."""
    if not on:
        yield
        return
    before = single_thread(True)
    try:
        with numba_blas_single_thread():
            yield
    finally:
        single_thread(before)


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
                       dwtbuf[t * wsz:(t + 1) * wsz], nbmax, g, N * t // nt, N * (t + 1) // nt,
                       0, dims[1])
    run_split(part, nt)
    if mode_dw != 0:
        size = dw3.size
        sum_parts(dwparts.reshape((nt, 1, size)), 0, dw3.reshape((1, size)), size, mode_dw == 1)


@njit(**JIT)
def add_parts(parts, t0, dst, ncol, lo, hi, write):
    """``dst (+)= parts[t0] + parts[t0 + 1] + ...`` on elements ``lo..hi`` of the first
    ``ncol`` columns of ``dst`` ``(R, L)`` (flat index ``r * ncol + c``).

    ``parts`` ``(nt, R, L)``; ``write``: ``dst`` starts as ``parts[t0]``, else
    at its own value. Each element is summed in part order, a block of columns
    at a time. ``dst`` may be ``parts[t0 - 1]``.
    """
    nt = parts.shape[0]
    i = lo
    while i < hi:
        r = i // ncol
        c0 = i - r * ncol
        c1 = min(ncol, c0 + (hi - i), c0 + 4096)
        d = dst[r]
        first = t0
        if write:
            src = parts[t0, r]
            for c in range(c0, c1):
                d[c] = src[c]
            first = t0 + 1
        for t in range(first, nt):
            src = parts[t, r]
            for c in range(c0, c1):
                d[c] += src[c]
        i += c1 - c0


def sum_parts(parts, t0, dst, ncol, write):
    """:func:`add_parts` on all ``R * ncol`` elements, cut over the kernel threads.

    The per-thread partial sums of a weight gradient (``parts`` ``(nt, R, L)``,
    C-contiguous, as ``dst`` ``(R, L)``); the same values as summing them one
    after another on one thread (:func:`ffnumba.thread_pool.split_range`).
    """
    split_range(lambda lo, hi: add_parts(parts, t0, dst, ncol, lo, hi, write),
                dst.shape[0] * ncol)


def channel_split(N, C, G, nb1, nt, dw_size):
    """Whether :func:`conv_backward_channels` runs the backward: one group, at least
    ``2 * nt`` input channels, the whole batch in one chunk of one thread (``nb1``:
    the chunks, so the GEMM depths, of one thread), and a weight gradient of more
    than :data:`SMALL_DW` elements (smaller ones stay on the batch split)."""
    return nt > 1 and G == 1 and C >= 2 * nt and nb1 >= N and dw_size > SMALL_DW


def conv_backward_channels(xf, dims, w2, dy, dxf, dw2, mode_dx, mode_dw, colbuf, tmpbuf,
                           nbc, g, nt):
    """Gradients of a one-group convolution with the input channels split over ``nt`` threads.

    ``w2`` / ``dw2`` ``(F, C*K)``. Each thread runs :func:`._im2col.backward_range` on
    every sample and its own input channels: it writes (``mode`` 1) or adds to (2)
    their ``dx`` rows and ``dw`` columns only, in chunks of ``nbc`` samples (``dy``
    gathered whole per chunk, the channels' columns unrolled, ``dw[:, cols] (+)= dy
    col^T`` accumulated by the GEMM, ``col = w[:, cols]^T dy`` scattered back). The
    batch split's compiled kernel: threads add no compilation.
    ``colbuf`` / ``tmpbuf`` hold ``nt`` pieces of ``ceil(C/nt)*K*nbc*P`` and
    ``F*nbc*P`` elements.
    """
    N, C = dims[0], dims[1]
    F, CK = w2.shape
    P = dy.shape[2]
    rmax = -(-C // nt) * (CK // C)
    csz, tsz = rmax * nbc * P, F * nbc * P
    w3, dw3 = w2.reshape((1, F, CK)), dw2.reshape((1, F, CK))

    def part(t):
        backward_range(xf, dims, w3, dy, dxf, dw3, mode_dx, mode_dw,
                       colbuf[t * csz:(t + 1) * csz], tmpbuf[t * tsz:(t + 1) * tsz],
                       tmpbuf[:1], nbc, g, 0, N, C * t // nt, C * (t + 1) // nt)
    run_split(part, nt)


def _filter_split(fn, F, C):
    """``fn(lo, hi)`` over filters ``0..F``, cut over the kernel threads for large weights."""
    split_range(fn, F, max(1, SPLIT_MIN_ELEMS // (16 * C)), 1)


def transform_filters(ft, w, u, us):
    """``ft(w, u, us)`` (:func:`._winograd.filter_transform` or F(4x4)'s) with the
    filters cut over the threads: each piece is the transform of ``w[lo:hi]``
    into ``u`` from ``lo * C`` on (the same values as one call)."""
    C = w.shape[1]
    _filter_split(lambda lo, hi: ft(w[lo:hi], u[lo * C:], us), w.shape[0], C)


def transform_filters_t(ftt, du, us, dw, add):
    """``ftt(du, us, dw, add)`` (:func:`._winograd.filter_transform_t` or F(4x4)'s),
    the filters cut over the threads as in :func:`transform_filters`."""
    C = dw.shape[1]
    _filter_split(lambda lo, hi: ftt(du[lo * C:], us, dw[lo:hi], add), dw.shape[0], C)
