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
from numba import njit

from ...jit import JIT
from ...thread_pool import SPLIT_MIN_ELEMS, kernel_threads, run_parallel, split_range
from .._gemm import gemm
from ._im2col import _gather, backward_range, col2im, forward_range, im2col

#: Weight gradients of at most this many elements stay on the batch split: small enough
#: that each thread's partial is cache-resident and the parts' sum is cheap, where the
#: channel split's narrower GEMMs would cost more than they save.
SMALL_DW = 1 << 16

__all__ = ['conv_forward_par', 'conv_backward_par', 'conv_backward_channels', 'run_split',
           'split_threads', 'sum_parts', 'transform_filters', 'transform_filters_t']


def split_threads(n):
    """Threads to split a batch of ``n`` samples over: numba's thread count, at most ``n``,
    capped at a context's share of the cores in multi-context runs
    (:func:`ffnumba.thread_pool.kernel_threads`, the one rule every kernel split uses)."""
    return kernel_threads(n)


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


@njit(**JIT)
def backward_channel_range(xf, dims, w2, dy, dxf, dw2, mode_dx, mode_dw, colbuf, tmpbuf,
                           nbc, g, clo, chi):
    """Gradients of a one-group convolution for input channels ``clo..chi`` and every sample.

    ``w2`` / ``dw2`` ``(F, C*K)``; ``dx`` rows and ``dw`` columns of those
    channels only are written (``mode`` 1) or added to (2). Chunks of
    ``nbc`` samples: per chunk ``dy`` is gathered whole, the channels'
    columns unrolled, ``dw[:, cols] (+)= dy col^T`` accumulated by the GEMM
    (``beta = 1`` unless the first chunk writes) and ``col = w[:, cols]^T dy``
    scattered back (:func:`._im2col.col2im`).
    """
    N, C = dims[0], dims[1]
    F, CK = w2.shape
    K = CK // C
    P = dy.shape[2]
    cn = chi - clo
    rows = cn * K
    wsl = w2[:, clo * K:chi * K]
    dwsl = dw2[:, clo * K:chi * K]
    if mode_dx == 1:
        plane = dims[2] * dims[3] * dims[4]
        for n in range(N):
            dxf[(n * C + clo) * plane:(n * C + chi) * plane] = 0
    for n0 in range(0, N, nbc):
        nb = min(nbc, N - n0)
        colf = colbuf[:rows * nb * P]
        col = colf.reshape((rows, nb * P))
        dyt = tmpbuf[:F * nb * P].reshape((F, nb * P))
        _gather(dy, n0, nb, 0, F, dyt)
        if mode_dw != 0:
            im2col(xf, dims, n0, nb, clo, cn, g, colf)
            gemm(1.0, dyt, col.T, 0.0 if mode_dw == 1 and n0 == 0 else 1.0, dwsl)
        if mode_dx != 0:
            gemm(1.0, wsl.T, dyt, 0.0, col)
            col2im(colf, dims, n0, nb, clo, cn, g, dxf)


def channel_split(N, C, G, nb1, nt, dw_size):
    """Whether :func:`conv_backward_channels` runs the backward: one group, at least
    ``2 * nt`` input channels, the whole batch in one chunk of one thread (``nb1``:
    the chunks, so the GEMM depths, of one thread), and a weight gradient of more
    than :data:`SMALL_DW` elements (smaller ones stay on the batch split)."""
    return nt > 1 and G == 1 and C >= 2 * nt and nb1 >= N and dw_size > SMALL_DW


def conv_backward_channels(xf, dims, w2, dy, dxf, dw2, mode_dx, mode_dw, colbuf, tmpbuf,
                           nbc, g, nt):
    """:func:`backward_channel_range` with the input channels split over ``nt`` threads.

    ``colbuf`` / ``tmpbuf`` hold ``nt`` pieces of ``ceil(C/nt)*K*nbc*P`` and
    ``F*nbc*P`` elements.
    """
    C = dims[1]
    F, CK = w2.shape
    P = dy.shape[2]
    rmax = -(-C // nt) * (CK // C)
    csz, tsz = rmax * nbc * P, F * nbc * P

    def part(t):
        backward_channel_range(xf, dims, w2, dy, dxf, dw2, mode_dx, mode_dw,
                               colbuf[t * csz:(t + 1) * csz], tmpbuf[t * tsz:(t + 1) * tsz],
                               nbc, g, C * t // nt, C * (t + 1) // nt)
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
