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

A kvstore with several devices (:meth:`ffnumba.kvstore.local.KVStore.pushpull`)
opens a :class:`chain` per key naming the devices' gradients (``sources``) and
weights (``outs``): the key's update then runs the kernel's reducing twin, which sums
the gradients in device order, updates and writes the new weight to every device in
one pass (inside a block, kept and split with the others; outside, at once: the
same values whatever the thread count).
"""
import itertools
import threading

from ..thread_pool import SPLIT_ALIGN, kernel_threads, run_parallel, split_range

__all__ = ['deferred', 'chain', 'chaining', 'collect', 'step', 'flush', 'DEFER_MIN_ELEMS']

#: Fewest elements per thread (all deferred kernels together; a chain's elements count
#: once per step) before they split over the kernel threads; fewer run one after
#: another on this thread.
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
            _LOCAL.chain = None
            flush()
            _LOCAL.calls = None
        return False


class chain:  # noqa: N801 (a context manager)
    """Context inside a :class:`deferred` block: the steps kept inside (:func:`collect`,
    :func:`step`) form one chain, which runs piece by piece, each piece of its range
    through all of its steps in order (a kvstore key's sum, update and copies back:
    each piece's values stay in cache between them). Every step of a chain works
    elementwise on arrays of one size. Outside a block each step runs when it is made.

    ``sources`` and ``outs`` (flat host arrays) declare that the update kept next
    reads the sum of ``sources`` as its gradient and that its new weight goes to every
    array of ``outs``: an update kernel with a reducing twin (``red`` of
    :func:`collect`) then becomes one step that does all of it in one pass, and
    :attr:`fused` says so (the caller then adds no sum or copy steps of its own).
    """

    def __init__(self, sources=None, outs=None):
        self.sources, self.outs, self.fused = sources, outs, False
        self.steps = None

    def __enter__(self):
        if getattr(_LOCAL, 'calls', None) is not None:
            self.steps = []
        _LOCAL.chain = self
        return self

    @property
    def active(self):
        """Whether this chain keeps its steps (a :class:`deferred` block is open)."""
        return self.steps is not None

    def __exit__(self, *exc):
        _LOCAL.chain = None
        if self.steps:
            _LOCAL.calls.append((self.steps[0][0], [run for _, run in self.steps]))
        return False


def _keep(size, run):
    ch = getattr(_LOCAL, 'chain', None)
    if ch is not None and ch.active:
        ch.steps.append((size, run))
    else:
        _LOCAL.calls.append((size, [run]))


def _cut(arrays, lo, hi):
    return [a[lo:hi] for a in arrays]


def collect(kernel, flat, hp, write_grad, red=None):
    """Keep ``kernel(*flat, hp, write_grad)`` for the end of the :class:`deferred` block.

    ``flat``: the 1-D arrays of one parameter (weight, grad, states), one size.
    ``red``: the kernel's reducing twin (``red(w, sources, *states, outs, hp, wg)``),
    used when the open :class:`chain` declares ``sources`` and ``outs``.
    Returns False (nothing kept: run it now) outside a block.
    """
    ch = getattr(_LOCAL, 'chain', None)
    if red is not None and ch is not None and ch.sources and not ch.fused:
        src, outs, w, states = ch.sources, ch.outs, flat[0], flat[2:]
        ch.fused = True

        def run(lo, hi):
            red(w[lo:hi], tuple(_cut(src, lo, hi)), *_cut(states, lo, hi),
                tuple(_cut(outs, lo, hi)), hp, write_grad)
        if ch.active:
            _keep(w.size, run)
        else:       # no block: now, the same pass (the values do not depend on threads)
            split_range(run, w.size, DEFER_MIN_ELEMS)
        return True
    if getattr(_LOCAL, 'calls', None) is None:
        return False
    _keep(flat[0].size, lambda lo, hi: kernel(*_cut(flat, lo, hi), hp, write_grad))
    return True


def chaining():
    """Whether a :class:`chain` is open on this thread (its steps are kept, not run)."""
    ch = getattr(_LOCAL, 'chain', None)
    return ch is not None and ch.active


def step(fn, flat):
    """``fn(*flat)`` on 1-D arrays of one size, elementwise: kept as the next step of the
    open :class:`chain`, else run now, cut into pieces over the kernel threads
    (:func:`ffnumba.thread_pool.split_range`). ``fn`` must give the values one call over
    the whole range gives, however the range is cut (numpy's ``add``, ``copyto``).
    """
    if chaining():
        _keep(flat[0].size, lambda lo, hi: fn(*_cut(flat, lo, hi)))
    else:
        split_range(lambda lo, hi: fn(*_cut(flat, lo, hi)), flat[0].size)


def flush():
    """Run the kernels kept so far in this thread's block (see the module docstring)."""
    calls = getattr(_LOCAL, 'calls', None)
    if not calls:
        return
    _LOCAL.calls = []
    sizes = [size for size, _ in calls]
    total = sum(sizes)
    work = sum(size * len(runs) for size, runs in calls)     # elements times steps
    nt = kernel_threads(work // DEFER_MIN_ELEMS) if work >= 2 * DEFER_MIN_ELEMS else 1
    if nt <= 1:
        for size, runs in calls:
            for run in runs:
                run(0, size)
        return
    pieces = _pieces(sizes, total, PIECES_PER_THREAD * nt)
    claim = itertools.count()          # next() is atomic under the GIL

    def worker(_):
        for p in iter(claim.__next__, None):
            if p >= len(pieces):
                return
            for j, lo, hi in pieces[p]:
                for run in calls[j][1]:
                    run(lo, hi)
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
