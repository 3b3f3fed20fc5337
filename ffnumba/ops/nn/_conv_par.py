"""Convolution on several threads: the batch split over numba threads, BLAS on one each.

OpenBLAS's own threads help large GEMMs, but a convolution issues many
mid-sized ones (one per chunk of samples and group) and its im2col, col2im,
gather and scatter copies run on one thread whatever BLAS does; on a busy
machine every multi-threaded GEMM also waits for its helper thread to be
scheduled. Here each of ``nt`` numba threads (``prange``) runs the serial
drivers of :mod:`._im2col` on its own contiguous range of samples with its
own scratch, while BLAS is held to one thread (:func:`serial_blas`): copies
and GEMMs both scale, and each call is one fork-join. ``dx`` and ``y`` rows
belong to one thread; the weight gradient is summed from one partial ``dw``
per thread.

Importing this module sets ``OMP_WAIT_POLICY=PASSIVE`` unless the variable is
already set (before numba loads its OpenMP threading layer): idle OpenMP
workers then sleep instead of spinning. Spinning workers took the second core
from OpenBLAS's (which runs the fully-connected GEMMs between the
convolutions): LeNet at batch 32 with 2 threads trained at ~500 samples/s
instead of ~3,400.
"""
import contextlib
import ctypes
import os

from numba import njit, prange

from ..templates import JIT
from ._im2col import backward_range, forward_range

__all__ = ['conv_forward_par', 'conv_backward_par', 'serial_blas', 'split_threads']

os.environ.setdefault('OMP_WAIT_POLICY', 'PASSIVE')

_BLAS = {}


def _numba_blas():
    """``(get, set)`` thread-count functions of the OpenBLAS numba's ``np.dot`` calls, or None.

    numba calls BLAS through ``scipy.linalg.cython_blas``, i.e. scipy's
    bundled OpenBLAS; found once from the loaded libraries.
    """
    if 'fns' not in _BLAS:
        _BLAS['fns'] = None
        try:
            import importlib
            importlib.import_module('scipy.linalg.cython_blas')   # what numba's np.dot binds
            with open('/proc/self/maps') as f:
                paths = sorted({line.split()[-1] for line in f      # not numpy's own copy
                                if 'openblas' in line.lower() and 'scipy' in line.lower()
                                and 'numpy.libs' not in line})
        except (ImportError, OSError):
            paths = []
        for path in paths:
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for prefix in ('scipy_openblas', 'openblas'):
                get = getattr(lib, prefix + '_get_num_threads', None)
                put = getattr(lib, prefix + '_set_num_threads', None)
                if get is not None and put is not None:
                    get.restype = ctypes.c_int
                    _BLAS['fns'] = (get, put)
                    break
            if _BLAS['fns'] is not None:
                break
    return _BLAS['fns']


@contextlib.contextmanager
def serial_blas():
    """Hold numba's BLAS to one thread inside the block (restored after; no-op if not found)."""
    fns = _numba_blas()
    if fns is None:
        yield
        return
    get, put = fns
    before = get()
    if before != 1:
        put(ctypes.c_int(1))
    try:
        yield
    finally:
        if before != 1:
            put(ctypes.c_int(before))


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
