"""The process-wide BLAS thread cap of multi-CPU-context runs (``FFNUMBA_BLAS_THREADS``).

See the Notes of :class:`~ffnumba.module.executor_group.DataParallelExecutorGroup`.
"""
import logging
import os

from .base import ParamError

__all__ = ['BLAS_THREADS_ENV']

_BLAS_LIMITED = {'threads': None}

#: Environment variable that chooses the BLAS thread cap of multi-CPU runs.
BLAS_THREADS_ENV = 'FFNUMBA_BLAS_THREADS'


def _cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


#: Variables by which a user chooses BLAS threads; set, a single context leaves BLAS alone.
USER_THREAD_VARS = ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS')


def _blas_thread_cap(n_devices):
    """The BLAS thread cap for ``n_devices`` concurrent CPU executors, or None.

    ``FFNUMBA_BLAS_THREADS`` unset or empty: ``max(1, cores // n_devices)``
    for several devices; for one device ``max(1, cores - 1)``, or None when the
    user set ``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS``/``MKL_NUM_THREADS``
    (their choice stands). A positive integer: that cap; ``0``: None (leave BLAS alone).

    One context leaves one core to the rest of the machine: OpenBLAS splits
    a GEMM statically over its threads and spin-waits for the slowest, so
    when another process holds a core every GEMM waits for a time slice. On
    2 cores with one busy competitor, LeNet (batch 32) trained 10x slower
    with 2 BLAS threads than with 1 and burnt 7-13x the CPU per sample
    (``benchmarks/contexts.py``); two contexts are the way to use both cores.

    Raises
    ------
    ParamError
        When the variable is not a non-negative integer.
    """
    raw = os.environ.get(BLAS_THREADS_ENV, '').strip()
    if not raw:
        if n_devices > 1:
            return max(1, _cpu_count() // n_devices)
        if any(os.environ.get(v, '').strip() for v in USER_THREAD_VARS):
            return None
        return max(1, _cpu_count() - 1)
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ParamError('%s must be a non-negative integer (0 leaves BLAS alone). '
                         'Received: %s=%r' % (BLAS_THREADS_ENV, BLAS_THREADS_ENV, raw))
    return value or None


def _limit_blas_threads(n):
    """Cap the threads of every loaded OpenBLAS (numpy's and numba's) at ``n``.

    Several executors calling BLAS concurrently, each with its own pool of
    BLAS threads, oversubscribe the cores (OpenBLAS threads spin while they
    wait): on 2 cores a 2-context run became 10x slower. Uses threadpoolctl
    when installed, else the libraries' ``*_set_num_threads`` through ctypes.
    The cap is process-wide and is never undone; it only ever goes down.
    """
    if _BLAS_LIMITED['threads'] is not None and _BLAS_LIMITED['threads'] <= n:
        return
    _BLAS_LIMITED['threads'] = n
    logging.getLogger(__name__).info(
        'ffnumba: BLAS limited to %d thread(s) for the rest of this process '
        '(set %s=0 to leave BLAS alone)', n, BLAS_THREADS_ENV)
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(limits=n, user_api='blas')
        return
    except ImportError:
        pass
    import ctypes
    try:
        with open('/proc/self/maps') as f:
            paths = {line.split()[-1] for line in f if 'openblas' in line.lower()}
    except OSError:  # not Linux: leave BLAS alone
        return
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for sym in ('openblas_set_num_threads', 'scipy_openblas_set_num_threads',
                    'scipy_openblas_set_num_threads64_', 'openblas_set_num_threads64_'):
            fn = getattr(lib, sym, None)
            if fn is not None:
                fn(ctypes.c_int(n))
                break
