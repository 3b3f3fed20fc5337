"""One fork-join for a whole step's optimizer kernels: deferred CPU updates.

:class:`ffnumba.optimizer.Updater` called with a list of parameters (MXNet's
``_update_params`` passes each device's parameters as one list) runs the
optimizer's Python for each parameter in order, as always: update counts,
learning rates and schedules, states, random draws. Inside :func:`deferred`
the fused CPU kernel each update ends in (:class:`~ffnumba.optimizer.kernels.FusedUpdate`)
is not run at once but kept (:func:`collect`), and when the block ends all
kept kernels run together: their flat ranges laid end to end, cut into
pieces of about equal size, and the pieces claimed by the kernel threads in
one fork-join (:func:`ffnumba.thread_pool.run_parallel`). Without it each
parameter is one call on one thread (a weight splits only from
:data:`~ffnumba.optimizer.kernels.UPDATE_MIN_ELEMS` elements per thread, since
every split pays a fork-join), so the second core idled through the update.

The kernels are elementwise over flat arrays, so a piece boundary anywhere
gives the values one whole call gives: the weights are the serial ones bit
for bit. Only an optimizer whose ``update`` ends in its one fused kernel and
reads nothing after it may defer (the class defining ``update`` declares
``_one_kernel_update = True``; :func:`ffnumba.optimizer.updater.defers`); LAMB and LARS, which take
norms between kernels, do not. A float16 multi-precision update flushes
before it copies its master weights back (:func:`flush`).
"""
import itertools
import threading

from ..thread_pool import SPLIT_ALIGN, kernel_threads, run_parallel

__all__ = ['deferred', 'collect', 'flush', 'DEFER_MIN_ELEMS']

#: Fewest elements per thread (all deferred kernels together) before they split over
#: the kernel threads; fewer run one after another on this thread.
DEFER_MIN_ELEMS = 1 << 18
#: Pieces per thread, claimed one at a time (a late thread leaves its pieces to others).
PIECES_PER_THREAD = 4

_LOCAL = threading.local()


class deferred:  # noqa: N801 (used as a context manager, like contextlib's)
    """Context: CPU update kernels collected inside run together at its end.

    Nested blocks join the outer one. The kept kernels also run when the block
    ends with an exception (the updates before it happened, as unbatched).
    Does nothing when only one kernel thread is available.
    """

    def __enter__(self):
        self.outer = getattr(_LOCAL, 'calls', None) is not None
        if not self.outer and kernel_threads(2) > 1:
            _LOCAL.calls = []
        return self

    def __exit__(self, *exc):
        if not self.outer:
            flush()
            _LOCAL.calls = None
        return False


def collect(kernel, flat, hp, write_grad):
    """Keep ``kernel(*flat, hp, write_grad)`` for the end of the :class:`deferred` block.

    ``flat``: the 1-D arrays of one parameter (weight, grad, states), one size.
    Returns False (nothing kept: run it now) outside a block.
    """
    calls = getattr(_LOCAL, 'calls', None)
    if calls is None:
        return False
    calls.append((kernel, flat, hp, write_grad))
    return True


def flush():
    """Run the kernels kept so far in this thread's block (see the module docstring)."""
    calls = getattr(_LOCAL, 'calls', None)
    if not calls:
        return
    _LOCAL.calls = []
    sizes = [c[1][0].size for c in calls]
    total = sum(sizes)
    nt = kernel_threads(total // DEFER_MIN_ELEMS) if total >= 2 * DEFER_MIN_ELEMS else 1
    if nt <= 1:
        for kernel, flat, hp, wg in calls:
            kernel(*flat, hp, wg)
        return
    pieces = _pieces(sizes, total, PIECES_PER_THREAD * nt)
    claim = itertools.count()          # next() is atomic under the GIL

    def worker(_):
        for p in iter(claim.__next__, None):
            if p >= len(pieces):
                return
            for j, lo, hi in pieces[p]:
                kernel, flat, hp, wg = calls[j]
                kernel(*[a[lo:hi] for a in flat], hp, wg)
    run_parallel(worker, nt, 'kernel')


def _pieces(sizes, total, n):
    """``n`` lists of ``(call, lo, hi)``: the calls' ranges laid end to end and cut
    into ``n`` parts of about ``total / n`` elements, each cut inside a call at a
    multiple of :data:`~ffnumba.thread_pool.SPLIT_ALIGN` of that call's range."""
    cuts = [total * p // n for p in range(1, n)]
    pieces = [[] for _ in range(n)]
    p, start = 0, 0
    for j, size in enumerate(sizes):
        lo, end = 0, start + size
        while p < n - 1 and cuts[p] < end:
            hi = min(size, -(-(cuts[p] - start) // SPLIT_ALIGN) * SPLIT_ALIGN)
            if hi > lo:
                pieces[p].append((j, lo, hi))
                lo = hi
            p += 1
        if size > lo:
            pieces[p].append((j, lo, size))
        start = end
    return [q for q in pieces if q]
