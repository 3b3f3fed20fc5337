"""Persistent thread pools and the fork-join that splits CPU work over them.

One helper for every place that runs ``nogil`` work side by side: the data
parallel executor group (one executor per CPU context), the kvstore reduce and
update of several contexts, and the kernels that split a batch over threads
(convolution, pooling, FullyConnected: ``ops.nn._conv_par``).

``run_parallel(fn, n)`` calls ``fn(0)`` on the calling thread and
``fn(1) .. fn(n - 1)`` on a persistent pool, waits for every call and then
raises the first error (so no part is still writing into an array when the
caller sees the exception). Idle pool threads block, each on its own lock:
they take no CPU while they wait, unlike OpenBLAS's threads, which spin after
each call. Waking one is a lock release (no queue, future or event per part):
a fork-join of two empty parts measured 2.6 us against 18 us through
``concurrent.futures`` (median, 2-core VM, loaded).
``FFNUMBA_POOL_SPIN=<microseconds>`` (default 0: off) makes pool threads spin,
without the GIL, that long after each part before sleeping, and the caller spin
before it sleeps on the join (``docs/guide/devices.md``): faster fork-joins on
a machine ffnumba has to itself, CPU taken from any other process.

``split_range(fn, size)`` cuts a flat range of elements into a few contiguous
pieces per kernel thread (:func:`kernel_threads`) and runs ``fn(lo, hi)`` on
each over the ``'kernel'`` pool, each thread claiming the next free piece: the elementwise kernels (activations,
optimizer updates, ...) use it, so their values do not depend on the split.

Each use names its own pool (``'exec'``, ``'kernel'``, ...): a kernel split
inside an executor that itself runs on the ``'exec'`` pool never waits for a
thread of the pool it runs on. A call made from a thread of the pool it asks
for runs its parts one after another instead of deadlocking.
"""
import itertools
import logging
import os
import threading
from concurrent.futures import Future

import numba
import numpy as np
from numba import get_num_threads, njit, types
from numba.core.extending import intrinsic

from .blas_threads import kernel_thread_cap

__all__ = ['get_pool', 'run_parallel', 'pool_used', 'kernel_threads', 'split_range',
           'single_thread']

_POOLS = {}
_USED = set()
_LOCK = threading.Lock()
_LOCAL = threading.local()
#: numba's thread count at import (``NUMBA_NUM_THREADS``): ``set_num_threads`` can only
#: lower it, so at 1 :func:`kernel_threads` answers without asking numba (0.07 instead
#: of 2.8 us; it runs on every call of a kernel that may split: elementwise ops,
#: convolution, pooling, BatchNorm, the optimizer updates).
_MAX_THREADS = numba.config.NUMBA_NUM_THREADS


@intrinsic
def _load_acquire(typingctx, arr, i):
    """``arr[i]`` (int64) read with acquire ordering: a spin loop re-reads it every time."""
    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.load_atomic(builder.gep(ary.data, [args[1]]), 'acquire', 8)
    return types.int64(arr, types.intp), codegen


@intrinsic
def _store_release(typingctx, arr, i, v):
    """``arr[i] = v`` (int64) with release ordering."""
    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        builder.store_atomic(args[2], builder.gep(ary.data, [args[1]]), 'release', 8)
        return context.get_dummy_value()
    return types.void(arr, types.intp, types.int64), codegen


@njit(nogil=True, cache=True)
def _spin(flag, slot, value, done, n):
    """Store ``done`` in ``flag[1]`` when ``done > 0``, then spin (no GIL) up to ``n``
    iterations until ``flag[slot] >= value``; returns whether it saw it.

    ``flag``: a worker's int64 array of 2 (``[handed a job, ticket of the last job
    done]``); ``slot`` 0 or 1; ``value``, ``done``, ``n``: int.

    Tickets only grow, so ``flag[1] >= ticket`` holds once that job is done, even if the
    worker has finished a later job of the same fork-join since."""
    if done > 0:
        _store_release(flag, 1, done)
    for _ in range(n):
        if _load_acquire(flag, slot) >= value:
            return True
    return False


#: Spin iterations per microsecond on this machine (measured once, on first need).
_SPIN_RATE = []


def spin_iterations():
    """Iterations of :func:`_spin` in ``FFNUMBA_POOL_SPIN`` microseconds (read now; 0: off)."""
    text = os.environ.get('FFNUMBA_POOL_SPIN', '0').strip() or '0'
    try:
        us = float(text)
    except ValueError:
        logging.getLogger(__name__).warning(
            'FFNUMBA_POOL_SPIN=%r is not a number of microseconds: the pool does not spin', text)
        us = 0.0
    if us <= 0:
        return 0
    if not _SPIN_RATE:
        import time
        flag = np.zeros(2, np.int64)
        _spin(flag, 0, 1, 0, 10)
        t = time.perf_counter()
        _spin(flag, 0, 1, 0, 1 << 20)
        _SPIN_RATE.append((1 << 20) / max(1e-3, (time.perf_counter() - t) * 1e6))
    return max(1, int(us * _SPIN_RATE[0]))


class _Worker:
    """One persistent thread of a pool: sleeps on its own lock until handed a job.

    With ``FFNUMBA_POOL_SPIN`` (microseconds, read when the worker starts) it
    first spins that long after each job, without the GIL, on ``flag[0]``
    (set by :meth:`hand`), and publishes the number (ticket) of the job it
    finished in ``flag[1]``, which :func:`run_parallel`'s caller spins on
    before it sleeps on its lock.
    """

    def __init__(self, pool, index):
        self.pool = pool
        self.job = None
        self.ticket = 0
        self.flag = np.zeros(2, np.int64)      # [handed a job, ticket of the last job done]
        self.spins = spin_iterations()
        self.go = threading.Lock()
        self.go.acquire()
        self.thread = threading.Thread(target=self._loop, daemon=True,
                                       name='ffnumba-%s_%d' % (pool.name, index))
        self.thread.start()

    def hand(self, job):
        """Give this (idle) worker ``job`` (a callable of no arguments) and wake it.

        Returns the job's ticket (see :class:`_Worker`).
        """
        self.ticket += 1
        self.job = job
        self.flag[0] = 1          # before the release: the worker resets it after acquiring
        self.go.release()
        return self.ticket

    def _loop(self):
        _LOCAL.pool = self.pool.name
        while True:
            self.go.acquire()                 # blocks: no CPU while idle
            self.flag[0] = 0
            job, self.job, ticket = self.job, None, self.ticket
            job()
            self.pool.idle.append(self)
            if self.spins:                    # no GIL while spinning; then the lock
                _spin(self.flag, 0, 1, ticket, self.spins)


class Pool:
    """Persistent threads named ``ffnumba-<name>_<i>``, each blocked on its own lock when idle.

    :func:`run_parallel` hands a fork-join's parts to the idle ones only
    (:attr:`idle`, popped and appended atomically under the GIL), so a busy
    or unscheduled worker never holds a caller up, and one wake-up costs a
    lock release (no queue, future or condition variable per part).
    """

    def __init__(self, name):
        self.name = name
        self.idle = []
        self.size = 0

    def grow(self, n):
        """Start workers until there are at least ``n`` (sizes never shrink)."""
        with _LOCK:
            while self.size < n:
                self.idle.append(_Worker(self, self.size))
                self.size += 1
        return self

    def take(self):
        """An idle worker (now reserved for the caller), or None."""
        try:
            return self.idle.pop()
        except IndexError:
            return None

    def submit(self, fn, *args, **kwargs):
        """Run ``fn(*args, **kwargs)`` on an idle worker (a new one when none is idle).

        Returns
        -------
        concurrent.futures.Future
            Its result or exception.
        """
        fut = Future()

        def job():
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn(*args, **kwargs))
                except BaseException as e:   # noqa: B902 (handed to the future)
                    fut.set_exception(e)
        worker = self.take()
        while worker is None:
            self.grow(self.size + 1)
            worker = self.take()
        worker.hand(job)
        return fut


def get_pool(name, n):
    """The persistent pool ``name`` with at least ``n`` worker threads.

    Parameters
    ----------
    name : str
        Which pool (``'exec'``, ``'kernel'``, ...); threads are named
        ``ffnumba-<name>_<i>``.
    n : int
        Fewest workers; a smaller pool starts more (sizes never shrink).

    Returns
    -------
    Pool
        With ``submit(fn, *args)`` returning a :class:`concurrent.futures.Future`.
    """
    pool = _POOLS.get(name)
    if pool is None:
        with _LOCK:
            pool = _POOLS.setdefault(name, Pool(name))
    if pool.size < n:
        pool.grow(max(int(n), 1))
    return pool


def _forget_pools():
    """In a forked child the parent's pool threads do not exist: start afresh."""
    global _LOCK
    _POOLS.clear()
    _LOCK = threading.Lock()


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(after_in_child=_forget_pools)


def run_parallel(fn, n, pool='kernel'):
    """``fn(i)`` for ``i`` in ``range(n)``: ``i = 0`` on this thread, the others on ``pool``.

    Each call is claimed once, by whichever thread gets to it first: this
    thread takes part 0, wakes up to ``n - 1`` idle pool threads, and then
    claims parts in turn with them, so it waits only for the parts pool
    threads are running when no part is left. A pool thread that the OS has
    not scheduled (another process holds the core) or that is busy elsewhere
    therefore never delays the caller by more than the part it is already
    running, and a part shorter than waking another core is simply run here.
    Part ``i`` is always one call with the same argument, so who runs it
    does not change any value. Idle pool threads block on a lock: they take
    no CPU while they wait, unlike OpenBLAS's threads, which spin after each
    call.

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
        The first exception any call raised (in index order), after every
        started call has finished.
    """
    n = int(n)
    if n <= 1 or getattr(_LOCAL, 'pool', None) == pool:
        for i in range(n):
            fn(i)
        return
    workers = _POOLS.get(pool)
    if workers is None or workers.size < n - 1:
        workers = get_pool(pool, max(n - 1, os.cpu_count() or 1))
    _USED.add(pool)
    claim = itertools.count()
    finished = itertools.count()
    last = threading.Lock()
    last.acquire()
    errors = [None] * n

    def parts():
        for i in iter(claim.__next__, None):
            if i >= n:
                return
            try:
                fn(i)
            except BaseException as e:   # noqa: B902 (re-raised by the caller)
                errors[i] = e
            if next(finished) == n - 1:
                last.release()

    next(claim)                            # part 0 is this thread's
    handed = []
    for _ in range(n - 1):
        w = workers.take()
        if w is None:
            break
        handed.append((w, w.hand(parts)))
    try:
        fn(0)
    except BaseException as e:   # noqa: B902 (re-raised below)
        errors[0] = e
    if next(finished) == n - 1:
        last.release()
    parts()
    for w, ticket in handed:               # FFNUMBA_POOL_SPIN: spin before sleeping
        if not w.spins or not _spin(w.flag, 1, ticket, 0, w.spins):
            break
    last.acquire()                         # every part finished (none left to claim)
    for e in errors:
        if e is not None:
            raise e


def pool_used(name):
    """True once :func:`run_parallel` has split work over the pool ``name`` in this process.

    Kernels too small to split ask this to choose how many BLAS threads to use:
    beside a pool that splits other kernels, OpenBLAS's own threads (which spin
    after each call) would take the core the pool's threads need.
    """
    return name in _USED


#: Fewest elements per thread before :func:`split_range` splits a flat range: below
#: it a fork-join (waking a pool thread, tens of microseconds) costs about what
#: the second core saves on a memory-bound elementwise pass.
SPLIT_MIN_ELEMS = 1 << 16
#: Pieces of :func:`split_range` start at multiples of this many elements (a cache
#: line of float32): two threads never write the same line.
SPLIT_ALIGN = 16
#: Most pieces per thread of :func:`split_range` (claimed one at a time).
PIECES_PER_THREAD = 4


def single_thread(on):
    """Make :func:`kernel_threads` answer 1 on this thread (``on=True``) or lift that.

    The executor's branch schedule (:mod:`ffnumba._executor_branches`) runs
    independent nodes side by side, one per thread, each on one thread inside:
    their kernels must not also split over the kernel pool. Thread-local, so
    the other threads keep their splits. Returns the previous setting.
    """
    before = getattr(_LOCAL, 'single', False)
    _LOCAL.single = bool(on)
    return before


def kernel_threads(n):
    """Threads to split ``n`` independent pieces of work over: numba's thread count, at most ``n``.

    Multi-context runs cap BLAS at each context's share of the cores
    (:func:`ffnumba.blas_threads.kernel_thread_cap`); a kernel then takes no
    more threads than that share, so contexts running side by side do not
    oversubscribe. 1 on a thread in :func:`single_thread` mode. At least 1.
    """
    if _MAX_THREADS == 1 or getattr(_LOCAL, 'single', False):
        return 1
    nt = get_num_threads()
    cap = kernel_thread_cap()     # None unless several contexts or ranks share the cores
    if cap:
        nt = min(nt, int(cap))
    return max(1, min(nt, int(n)))


def split_range(fn, size, least=SPLIT_MIN_ELEMS, align=SPLIT_ALIGN):
    """``fn(lo, hi)`` over ``[0, size)`` cut into one contiguous piece per kernel thread.

    Parameters
    ----------
    fn : callable(int, int)
        Works on elements ``lo..hi``; the pieces run concurrently (``nogil``
        numba kernels truly in parallel), so ``fn`` must write only its own
        elements.
    size : int
        Elements in all.
    least : int, default :data:`SPLIT_MIN_ELEMS`
        Fewest elements per thread; a smaller ``size`` runs as one call
        ``fn(0, size)`` here (so does ``size == 0``).
    align : int, default :data:`SPLIT_ALIGN`
        Pieces start at multiples of it (1 for ranges of channels or filters).

    Notes
    -----
    The range is cut into up to :data:`PIECES_PER_THREAD` pieces per thread
    (each at least about ``least / PIECES_PER_THREAD`` elements), and each
    thread takes the next unclaimed piece until none is left: a thread that
    starts late (another process held its core) leaves its pieces to the
    others instead of making them wait for a whole share. Piece boundaries
    are multiples of ``align``. Whichever thread runs a piece, an
    elementwise ``fn`` gives the same values as one call over the whole range.
    """
    size, least = int(size), max(1, int(least))
    nt = kernel_threads(size // least) if size >= 2 * least else 1
    if nt <= 1:
        fn(0, size)
        return
    pieces = max(nt, min(PIECES_PER_THREAD * nt, size // max(1, least // PIECES_PER_THREAD)))
    align = max(1, int(align))
    cuts = [min(size, (size * t // pieces + align - 1) // align * align)
            for t in range(pieces)] + [size]
    claim = itertools.count()      # next() is atomic under the GIL

    def worker(_):
        for i in iter(claim.__next__, None):
            if i >= pieces:
                return
            if cuts[i] < cuts[i + 1]:
                fn(cuts[i], cuts[i + 1])
    run_parallel(worker, nt, 'kernel')
