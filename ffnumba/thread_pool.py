"""Persistent thread pools and the fork-join that splits CPU work over them.

One helper for every place that runs ``nogil`` work side by side: the data
parallel executor group (one executor per CPU context), the kvstore reduce and
update of several contexts, and the kernels that split a batch over threads
(convolution, pooling, FullyConnected: ``ops.nn._conv_par``).

``run_parallel(fn, n)`` calls ``fn(0)`` on the calling thread and
``fn(1) .. fn(n - 1)`` on a persistent pool, waits for every call and then
raises the first error (so no part is still writing into an array when the
caller sees the exception). Idle pool threads block on a queue: they take no
CPU while they wait, unlike OpenBLAS's threads, which spin after each call.

Each use names its own pool (``'exec'``, ``'kernel'``, ...): a kernel split
inside an executor that itself runs on the ``'exec'`` pool never waits for a
thread of the pool it runs on. A call made from a thread of the pool it asks
for runs its parts one after another instead of deadlocking.
"""
import os
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ['get_pool', 'run_parallel', 'kernel_threads', 'run_ranges']

_POOLS = {}
_LOCK = threading.Lock()
_LOCAL = threading.local()


def get_pool(name, n):
    """The persistent pool ``name`` with at least ``n`` worker threads.

    Parameters
    ----------
    name : str
        Which pool (``'exec'``, ``'kernel'``, ...); threads are named
        ``ffnumba-<name>_<i>``.
    n : int
        Fewest workers. A smaller pool is replaced by a larger one (the old one
        finishes its queued work and exits); sizes never shrink.

    Returns
    -------
    concurrent.futures.ThreadPoolExecutor
    """
    with _LOCK:
        pool, size = _POOLS.get(name, (None, 0))
        if size < n:
            old = pool
            size = max(int(n), 1)
            pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix='ffnumba-' + name,
                                      initializer=_mark, initargs=(name,))
            _POOLS[name] = (pool, size)
            if old is not None:
                old.shutdown(wait=False)
        return pool


def _mark(name):
    _LOCAL.pool = name


def run_parallel(fn, n, pool='kernel'):
    """``fn(i)`` for ``i`` in ``range(n)``: ``i = 0`` on this thread, the others on ``pool``.

    Parameters
    ----------
    fn : callable
        Called once with each index; runs concurrently with the others, so it
        must write disjoint data (``nogil`` numba kernels run truly in parallel).
    n : int
        Number of calls; ``n == 1`` calls ``fn(0)`` here, ``n <= 0`` nothing.
    pool : str, default 'kernel'
        The pool's name (see :func:`get_pool`). Called from a thread of that
        same pool, the calls run here one after another.

    Raises
    ------
    BaseException
        The first exception any call raised (this thread's first), after
        every call has finished.
    """
    n = int(n)
    if n <= 1 or getattr(_LOCAL, 'pool', None) == pool:
        for i in range(n):
            fn(i)
        return
    executor = get_pool(pool, max(n - 1, os.cpu_count() or 1))
    futures = [executor.submit(fn, i) for i in range(1, n)]
    err = None
    try:
        fn(0)
    except BaseException as e:       # noqa: B902 (re-raised below, after the others)
        err = e
    for f in futures:
        try:
            f.result()
        except BaseException as e:   # noqa: B902
            err = err or e
    if err is not None:
        raise err


def kernel_threads(n):
    """Threads to split ``n`` independent items over: numba's thread count, at most ``n``.

    Multi-context runs cap BLAS at each context's share of the cores
    (:func:`ffnumba.blas_threads.kernel_thread_cap`); a kernel then takes no
    more threads than that share, so contexts running side by side do not
    oversubscribe.
    """
    from numba import get_num_threads
    from .blas_threads import kernel_thread_cap
    nt = int(get_num_threads())
    cap = kernel_thread_cap()     # None unless several contexts or ranks share the cores
    if cap:
        nt = min(nt, int(cap))
    return max(1, min(nt, int(n)))


def run_ranges(fn, n, min_items, pool='kernel'):
    """``fn(lo, hi)`` over ``[0, n)`` cut into contiguous ranges, one per kernel thread.

    One call ``fn(0, n)`` on this thread when ``n < min_items`` or one thread is
    available; otherwise :func:`kernel_threads` ranges of about equal length
    (each at least ``min_items // 2`` long) through :func:`run_parallel`.
    """
    nt = kernel_threads(max(1, 2 * n // max(1, min_items))) if n >= min_items else 1
    if nt == 1:
        fn(0, n)
        return
    run_parallel(lambda t: fn(n * t // nt, n * (t + 1) // nt), nt, pool)
