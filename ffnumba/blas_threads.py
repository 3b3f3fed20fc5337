"""CPU threading knobs in one place: the BLAS thread cap (``FFNUMBA_BLAS_THREADS``),
and numba's BLAS held to one thread around kernels that split work themselves.

See the Notes of :class:`~ffnumba.module.executor_group.DataParallelExecutorGroup`.
"""
import ctypes
import logging
import os
import threading

from .base import ParamError

__all__ = ['BLAS_THREADS_ENV', 'register_blas']

_BLAS_LIMITED = {'threads': None, 'shared': False, 'contexts_only': False}
#: How many groups of CPU executors are running side by side right now
#: (:func:`contexts_running`): a cap shared only by contexts holds kernels there only.
_RUNNING = [0]
_RUNNING_LOCK = threading.Lock()
#: ``(get_num_threads, set_num_threads)`` of further BLAS libraries the kernels call
#: (:func:`register_blas`), held and capped with numba's.
_REGISTERED = []


def register_blas(get, put):
    """Add a BLAS library's ``get()`` / ``put(n)`` thread functions to the ones managed here.

    :mod:`ffnumba.ops._gemm` registers the library its kernels call, so the
    cap (:func:`_limit_blas_threads`) and the one-thread sections
    (:class:`numba_blas_single_thread`) apply to it as to numba's BLAS.
    A cap already set applies at once.
    """
    _REGISTERED.append((get, put))
    cap = _BLAS_LIMITED['threads']
    if cap is not None and get() > cap:
        put(cap)

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


def _limit_blas_threads(n, shared=True, contexts=False):
    """Cap the threads of every loaded OpenBLAS (numpy's and numba's) at ``n``.

    ``shared``: the cap is this executor's share of cores that others use at
    the same time (several contexts, several MPI ranks), so kernels that split
    work over numba threads take no more (:func:`kernel_thread_cap`); False for
    a single context, whose cap only keeps OpenBLAS off a core another
    process may hold. ``contexts``: the sharers are this process's own CPU
    contexts, which run side by side only inside :func:`contexts_running`
    (their forward and backward); kernels called outside it (the kvstore's
    sums and the optimizer's update, which run once for all contexts) keep
    every numba thread. A cap shared with MPI ranks holds everywhere.

    Several executors calling BLAS concurrently, each with its own pool of
    BLAS threads, oversubscribe the cores (OpenBLAS threads spin while they
    wait): on 2 cores a 2-context run became 10x slower. Uses threadpoolctl
    when installed, else the libraries' ``*_set_num_threads`` through ctypes.
    The cap is process-wide and is never undone; it only ever goes down.
    """
    if shared:
        _BLAS_LIMITED['contexts_only'] = bool(contexts) and (
            _BLAS_LIMITED['contexts_only'] or not _BLAS_LIMITED['shared'])
    _BLAS_LIMITED['shared'] = _BLAS_LIMITED['shared'] or bool(shared)
    if _BLAS_LIMITED['threads'] is not None and _BLAS_LIMITED['threads'] <= n:
        return
    _BLAS_LIMITED['threads'] = n
    logging.getLogger(__name__).info(
        'ffnumba: BLAS limited to %d thread(s) for the rest of this process '
        '(set %s=0 to leave BLAS alone)', n, BLAS_THREADS_ENV)
    for _, put in _REGISTERED:
        put(n)
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(limits=n, user_api='blas')
        return
    except ImportError:
        pass
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


def kernel_thread_cap():
    """Threads a kernel that splits its own work over threads may use, or None.

    The BLAS cap when it is a share of cores used by other executors at the
    same time (several CPU contexts or MPI ranks: see :func:`_limit_blas_threads`);
    None otherwise, so a single context's convolutions use every numba thread
    (their BLAS calls run on one thread each, and idle OpenMP workers sleep).
    A cap shared only by this process's contexts holds only while they run
    side by side (:func:`contexts_running`).
    """
    if not _BLAS_LIMITED['shared']:
        return None
    if _BLAS_LIMITED['contexts_only'] and not _RUNNING[0]:
        return None
    return _BLAS_LIMITED['threads']


class contexts_running:  # noqa: N801 (a context manager used like a function)
    """``with contexts_running(): ...`` marks CPU executors running side by side.

    The executor group wraps its concurrent forward and backward in it: there
    a kernel's split is held to the context's share of the cores
    (:func:`kernel_thread_cap`). Everything else (one kvstore sum and one
    optimizer update for all contexts) splits over every numba thread. The
    kernels split by piece counts that depend only on the thread count in
    force, so a run repeats bit for bit either way.
    """

    def __enter__(self):
        with _RUNNING_LOCK:     # modules driven from several Python threads
            _RUNNING[0] += 1
        return self

    def __exit__(self, *exc):
        with _RUNNING_LOCK:
            _RUNNING[0] -= 1
        return False


_NUMBA_BLAS = {}


def _numba_blas():
    """``(get_num_threads, set_num_threads)`` of the OpenBLAS that numba's ``np.dot``
    calls (scipy's bundled copy, bound through ``scipy.linalg.cython_blas``; never
    numpy's own), found once from the loaded libraries, or None when not found."""
    if 'fns' in _NUMBA_BLAS:
        return _NUMBA_BLAS['fns']
    fns = None
    try:
        import importlib
        importlib.import_module('scipy.linalg.cython_blas')   # loads numba's BLAS
        with open('/proc/self/maps') as f:
            paths = sorted({line.split()[-1] for line in f
                            if 'openblas' in line.lower() and 'scipy' in line.lower()
                            and 'numpy' not in line.lower()})
    except (ImportError, OSError):
        paths = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for stem in ('scipy_openblas', 'openblas'):
            get = getattr(lib, stem + '_get_num_threads', None)
            put = getattr(lib, stem + '_set_num_threads', None)
            if get is not None and put is not None:
                get.restype = ctypes.c_int
                fns = (get, lambda n, put=put: put(ctypes.c_int(n)))
                break
        if fns:
            break
    _NUMBA_BLAS['fns'] = fns
    return fns


class numba_blas_single_thread:  # noqa: N801 (a context manager used like a function)
    """``with numba_blas_single_thread(): ...`` runs numba's BLAS calls on one thread.

    For kernels made of many small GEMMs (the fused RNN's per-step products) and
    for kernels that split their work over numba threads themselves (the
    convolution's and pooling's split of the batch over a thread pool, one BLAS
    thread per worker):
    a multi-threaded OpenBLAS pays a thread hand-off per call, and its threads
    spin while they wait, so on a loaded machine 2 threads made an LSTM step
    10x slower. Restores the previous count (never above a cap set by
    :func:`_limit_blas_threads`); a no-op where the library is not found or
    already runs one thread. Libraries added by :func:`register_blas` (the
    one :mod:`ffnumba.ops._gemm` calls) are held the same way; numpy's own
    BLAS is held only when it is that library.
    """

    def __enter__(self):
        fns = _numba_blas()
        self._restore = []
        for get, put in ([fns] if fns is not None else []) + _REGISTERED:
            n = get()
            if n > 1:
                put(1)
                self._restore.append((put, n))
        return self

    def __exit__(self, *exc):
        cap = _BLAS_LIMITED['threads']
        for put, n in self._restore:
            put(n if cap is None else min(cap, n))
        return False
