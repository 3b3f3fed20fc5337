"""Independent graph nodes run side by side on two threads (the executor's branch schedule).

On two threads every node of a pass normally splits its own work over the
kernel pool (:mod:`ffnumba.thread_pool`) and joins before the next node starts:
on the small layers of branchy nets (the four towers of an inception module)
the second core idles through each fork and join. Here each pass (forward,
backward) of a CPU executor with gradients gets a fixed two-thread schedule
(made at its first run with two threads): nodes with no data
dependency run at the same time, one per thread, each on one thread inside
(:func:`ffnumba.thread_pool.single_thread`); a node with nothing beside it
keeps the usual split over both.

Dependencies come from memory, not from the graph: each call's arrays (inputs,
outputs, auxiliary states; in backward the head and input gradients and the
temporaries of repeated inputs) are turned into byte ranges, and a call
depends on every earlier call of the pass that writes memory it touches or
touches memory it writes. That covers what the graph alone misses: the memory
plan's reuse of a buffer by a later value, the ``'add'`` contributions of several
consumers to one gradient (kept in the serial order, so sums are unchanged),
shared weights and ``grad_req='add'``. Nodes that draw random numbers (their
draws come from one stream) keep their serial order; ops this module cannot
see into (``Custom``) run alone.

The schedule is a list scheduling of the dependency graph by a fixed cost
model (multiply-adds of convolutions and FullyConnected, elements otherwise):
the same shapes give the same schedule, so a node runs split or on one thread
the same way every step. Two threads then run the calls by their dependencies
(the ready call the model starts first goes first), so a thread that another
process holds back leaves its calls to the other instead of stalling it.
Whichever thread runs it, a node on one thread computes what it computes with
``NUMBA_NUM_THREADS=1``, and a split node what it computes on two threads
today: results do not depend on timing.

``FFNUMBA_BRANCHES=0`` (read at bind) turns the schedule off.
"""
import heapq
import os
import threading
from bisect import bisect_right

import numpy as np

from .blas_threads import numba_blas_single_thread
from .thread_pool import run_parallel, single_thread

__all__ = ['BRANCHES_ENV', 'branches_enabled', 'Schedule', 'schedule_pass', 'cut_nodes',
           'region_lives']

#: Environment variable: ``0`` runs every pass node after node (no branch schedule).
BRANCHES_ENV = 'FFNUMBA_BRANCHES'
#: Ops whose calls draw from a random stream: kept in their serial order.
RANDOM_OPS = frozenset(('Dropout', 'LeakyReLU', 'RNN', '_shuffle'))
RANDOM_PREFIXES = ('_random_', '_sample_', 'random_', 'sample_')
#: Ops that run alone (user code of unknown effects).
ALONE_OPS = frozenset(('Custom',))
#: Multiply-adds per second of one thread in a dense convolution / FullyConnected,
#: elements per second of a memory-bound pass, the split's speed-up of a large
#: node, the node time (seconds) at which a split reaches half of that gain, and the
#: cost of one fork-join: the cost model's constants. ``benchmarks/thread_scaling.py``
#: on GoogLeNet (batch 32) measured 1.46x for its convolutions' forwards, 1.66x for
#: their backwards, 1.3x for pooling and about 1.0-1.1x for its activations. The rates
#: are one thread's on GoogLeNet's nodes (batch 32, 64x64, OpenBLAS, thread CPU time):
#: its convolutions' forwards ran at 0.27-0.65 (median 0.37) of the old model's 2e10
#: multiply-adds per second, its activations and concats at about 0.3 of 1e9 elements.
MAC_RATE = 5.5e10
DEPTHWISE_MAC_RATE = 8.0e9
ELEM_RATE = 3.0e9
SPLIT_SPEEDUP = 1.8
SPLIT_HALF_S = 2.0e-3
FORK_JOIN_S = 3.0e-5
#: Node times (seconds) above which a node always splits: the schedule keeps the best of
#: these variants (by the model).
SPLIT_ABOVE_S = (float('inf'), 0.02, 0.01, 0.005, 0.002)
#: A region between two cuts is run side by side (and its buffers kept apart) only when
#: its longest path is below this fraction of its work (:func:`cut_nodes`). GoogLeNet's
#: inception modules measure 0.52-0.67 by the model, Inception-BN's 0.41-0.8, the first
#: (projection) block of a ResNet-50 or ResNeXt-50 stage 0.72-0.77.
WIDE_REGION = 0.7
#: A schedule is kept only when it is estimated at most this fraction of the split serial pass.
KEEP_BELOW = 0.95


def branches_enabled():
    """False when ``FFNUMBA_BRANCHES`` is ``0``/``false``/``no``/``off``."""
    return os.environ.get(BRANCHES_ENV, '1').strip().lower() not in ('0', 'false', 'no', 'off')


def cut_nodes(view, shapes=None):
    """Operator nodes no data edge jumps over (in node order): the joins between branchy regions.

    Node ``c`` is a cut when no output of an operator node before it is read
    by a node after it. Between two cuts lie the nodes that may run side by
    side (an inception module's towers); in a plain chain every node is a cut.
    With ``shapes`` (per entry), a region whose longest path the cost model
    puts at more than :data:`WIDE_REGION` of its work (a residual block: the
    shortcut beside a long main path) gains nothing side by side: its nodes
    become cuts too, so the memory plan shares its buffers as before.
    """
    last = _last_readers(view)
    reach, cuts = -1, set()
    for nid, node in enumerate(view.nodes):
        if node.op is None:
            continue
        if reach <= nid:
            cuts.add(nid)
        for e in range(view.entry_ptr[nid], view.entry_ptr[nid + 1]):
            reach = max(reach, last.get(e, nid))
    if shapes is not None:
        order = sorted(cuts)
        for lo, hi in zip(order, order[1:]):
            region = [n for n in range(lo + 1, hi) if view.nodes[n].op is not None]
            if region and not _wide(view, shapes, region):
                cuts.update(region)
    return cuts


def _wide(view, shapes, region):
    """True when the region's nodes could keep two threads busy (by the cost model)."""
    inside, path, total = set(region), {}, 0.0
    for nid in region:
        node = view.nodes[nid]
        ents = view.in_entries[nid][:node.num_args]
        outs = range(view.entry_ptr[nid], view.entry_ptr[nid + 1])
        c = estimate(node.op.name, [shapes[e] for e in ents], [shapes[e] for e in outs], False)
        total += c
        path[nid] = c + max((path[view.entry_node[e]] for e in ents
                             if view.entry_node[e] in inside), default=0.0)
    return max(path.values()) < WIDE_REGION * total


def _last_readers(view):
    last = {}
    for nid in range(len(view.nodes)):
        for e in view.in_entries[nid]:
            last[e] = nid
    return last


def region_lives(view, cuts):
    """Entry -> node id: each operator output stays alive until the first cut at or after its
    last reader, so the memory plan never hands a buffer freed inside a branchy region to
    another node of that region (which a side-by-side run would race with)."""
    last = _last_readers(view)
    order = sorted(cuts)
    out = {}
    for nid, node in enumerate(view.nodes):
        if node.op is None:
            continue
        for e in range(view.entry_ptr[nid], view.entry_ptr[nid + 1]):
            k = bisect_right(order, last.get(e, nid) - 1)
            if k < len(order):
                out[e] = order[k]
    return out


def _bounds(a):
    """``[lo, hi)`` byte addresses of ``a``'s elements, or None for no array or no elements."""
    if a is None or a.size == 0:
        return None
    lo = hi = a.__array_interface__['data'][0]
    for n, st in zip(a.shape, a.strides):
        if st < 0:
            lo += (n - 1) * st
        else:
            hi += (n - 1) * st
    return lo, hi + a.itemsize


def _count(shape):
    return int(np.prod(shape, dtype=np.int64)) if shape is not None else 0


def _shapes(arrays):
    return [a.shape if isinstance(a, np.ndarray) else None for a in arrays]


def estimate(op_name, ins, outs, backward):
    """Seconds one thread spends on a node's call, by a fixed model (for scheduling only).

    ``ins`` / ``outs``: the shapes of the node's inputs and outputs (None for
    none). Convolution, Deconvolution and FullyConnected count multiply-adds
    (depthwise convolutions at a memory-bound rate), the rest the elements
    they touch (pooling 2.6 times); a backward costs twice its forward when it
    multiplies, 1.5 times otherwise.
    """
    elems = sum(_count(a) for a in ins) + sum(_count(a) for a in outs)
    t = elems / ELEM_RATE
    macs = 0
    w = ins[1] if len(ins) > 1 else None
    if w is not None and len(w) >= 2 and outs and outs[0] is not None:
        if op_name == 'Convolution':
            macs = _count(outs[0]) * _count(w[1:])
            dw = w[1] == 1 and w[0] > 1
            t += macs / (DEPTHWISE_MAC_RATE if dw else MAC_RATE)
        elif op_name == 'Deconvolution':
            macs = _count(ins[0]) * _count(w[1:])
            t += macs / MAC_RATE
        elif op_name == 'FullyConnected':
            macs = _count(outs[0]) * int(w[-1])
            t += macs / MAC_RATE
    elif op_name == 'Pooling' and outs:
        t += 1.6 * elems / ELEM_RATE
    return t * (2.0 if macs else 1.5) if backward else t


def _split_cost(c):
    """A node's estimated time when it splits over both threads: the split gains
    ``SPLIT_SPEEDUP`` on large nodes, less on small ones."""
    if c < 2 * FORK_JOIN_S:
        return c
    speedup = 1.0 + (SPLIT_SPEEDUP - 1.0) * c / (c + SPLIT_HALF_S)
    return c / speedup + FORK_JOIN_S


def _dependencies(accesses, op_names):
    """For each call, the earlier calls it must wait for (a set of indices).

    ``accesses[j]``: ``(reads, writes)`` lists of arrays. Byte ranges that
    overlap (the memory plan's views of one storage) form one resource.
    """
    spans = sorted({b for r, w in accesses for b in map(_bounds, r + w) if b is not None})
    starts, ends = [], []
    for lo, hi in spans:                  # merge overlapping ranges into resources
        if starts and lo < ends[-1]:
            ends[-1] = max(ends[-1], hi)
        else:
            starts.append(lo)
            ends.append(hi)

    def res(a):
        b = _bounds(a)
        return None if b is None else bisect_right(starts, b[0]) - 1

    rng_key, all_key = -1, -2
    last_write, readers = {}, {}
    deps = []
    for j, (reads, writes) in enumerate(accesses):
        name = op_names[j]
        rs = {res(a) for a in reads} - {None}
        ws = {res(a) for a in writes} - {None}
        rs.add(all_key)
        if name in ALONE_OPS:
            ws.add(all_key)
        if name in RANDOM_OPS or name.startswith(RANDOM_PREFIXES):
            ws.add(rng_key)
        rs -= ws
        d = set()
        for k in rs:
            if k in last_write:
                d.add(last_write[k])
        for k in ws:
            if k in last_write:
                d.add(last_write[k])
            d.update(readers.get(k, ()))
        for k in rs:
            readers.setdefault(k, []).append(j)
        for k in ws:
            last_write[k] = j
            readers[k] = []
        deps.append(d)
    return deps


class Schedule:
    """The calls of one pass with their dependencies, each to run split or on one thread.

    ``lanes[w]``: the model's list of ``(call, split)`` for thread ``w`` in
    start order (``split``: the call splits over the kernel pool as usual, else
    it runs on one thread). :meth:`run` follows the dependencies, not the lanes:
    two threads take the ready call that starts first in the model, so a
    thread another process delays leaves its calls to the other. Which thread
    runs a call never changes its values (a call on one thread computes the
    same on either; the calls that split are fixed here).
    ``estimate`` / ``serial``: the model's seconds for this schedule and for
    the plain split pass.
    """

    def __init__(self, lanes, deps, start, estimate_s, serial_s):
        self.lanes = lanes
        self.estimate = estimate_s
        self.serial = serial_s
        n = len(deps)
        self._rank = [0] * n
        self._split = [False] * n
        for r, j in enumerate(sorted(range(n), key=lambda j: (start[j], j))):
            self._rank[j] = r
        for lane in lanes:
            for j, split in lane:
                self._split[j] = bool(split)
        self._succ = [[] for _ in range(n)]
        for j, d in enumerate(deps):
            for i in d:
                self._succ[i].append(j)
        self._missing = [len(d) for d in deps]
        self._ready = sorted((self._rank[j], j) for j in range(n) if not deps[j])

    @property
    def parallel_calls(self):
        """Calls that run on one thread beside another (the schedule's gain)."""
        return sum(1 for lane in self.lanes for _, split in lane if not split)

    def run_in_order(self, call):
        """``call(i)`` for every call in pass order on this thread, each split or on one thread
        as in :meth:`run` (so with the same values). Returns as :meth:`run`."""
        before = single_thread(False)
        try:
            with numba_blas_single_thread():
                for j, split in enumerate(self._split):
                    single_thread(not split)
                    try:
                        call(j)
                    except Exception as e:   # noqa: B902 (reported by the caller)
                        return j, e
        finally:
            single_thread(before)
        return None

    def run(self, call):
        """``call(i)`` for every call of the pass, on this thread and one ``'branch'`` pool thread.

        Returns
        -------
        None, or ``(i, exception)`` of the first failed call (no call starts
        after a failure, and every started call has finished when this returns).
        """
        n, succ, split, rank = len(self._missing), self._succ, self._split, self._rank
        missing = list(self._missing)
        ready = list(self._ready)
        cond = threading.Condition()
        state = {'done': 0, 'failed': None}

        def worker(_):
            before = single_thread(False)
            try:
                while True:
                    with cond:
                        while not ready and state['done'] < n and state['failed'] is None:
                            cond.wait()
                        if not ready or state['failed'] is not None:
                            cond.notify_all()
                            return
                        j = heapq.heappop(ready)[1]
                    single_thread(not split[j])
                    try:
                        call(j)
                    except Exception as e:   # noqa: B902 (reported by the caller)
                        with cond:
                            if state['failed'] is None:
                                state['failed'] = (j, e)
                            cond.notify_all()
                        return
                    with cond:
                        state['done'] += 1
                        woke = 0
                        for s in succ[j]:
                            missing[s] -= 1
                            if not missing[s]:
                                heapq.heappush(ready, (rank[s], s))
                                woke += 1
                        if woke > 1 or state['done'] == n:   # one: this thread takes it
                            cond.notify_all()
            finally:
                single_thread(before)

        with numba_blas_single_thread():
            run_parallel(worker, 2, 'branch')
        return state['failed']


def schedule_pass(op_names, accesses, backward):
    """The two-thread :class:`Schedule` of one pass, or None when it would not pay.

    Parameters
    ----------
    op_names : list of str
        Each call's op name.
    accesses : list of (reads, writes, ins, outs)
        Each call's arrays read and written (``None`` entries are skipped), and
        the inputs and outputs the cost model reads.
    backward : bool
        Costs of a backward pass.
    """
    n = len(accesses)
    if n < 3 or any(a is not None and not isinstance(a, np.ndarray)
                    for r, w, _, _ in accesses for a in r + w):
        return None    # few calls, or arrays whose memory this module cannot see (a GPU's)
    deps = _dependencies([(r, w) for r, w, _, _ in accesses], op_names)
    cost = [estimate(op_names[j], _shapes(ins), _shapes(outs), backward)
            for j, (_, _, ins, outs) in enumerate(accesses)]
    succ = [[] for _ in range(n)]
    for j, d in enumerate(deps):
        for i in d:
            succ[i].append(j)
    level = [0.0] * n
    for j in range(n - 1, -1, -1):
        level[j] = cost[j] + max((level[s] for s in succ[j]), default=0.0)
    best = None
    for big in SPLIT_ABOVE_S:
        d = [set(x) for x in deps]
        lanes, finish, start = _simulate(n, d, succ, cost, level, big)
        makespan = max(finish) if finish else 0.0
        if best is None or makespan < best[0]:
            best = (makespan, lanes, d, start)
    makespan, lanes, deps, start = best
    serial = sum(_split_cost(c) for c in cost)
    if not lanes[1] or makespan > KEEP_BELOW * serial:
        return None    # nothing side by side (a chain keeps its kernels' own splits), or no gain
    return Schedule(lanes, deps, start, makespan, serial)


def _simulate(n, deps, succ, cost, level, big=float('inf')):
    """List-schedule the calls on two simulated threads; returns ``(lanes, finish, start)``.

    A call starts when its dependencies have finished; the ready call on the
    longest remaining path goes first. With both threads free and one call
    ready it splits over both (nothing else can start before it ends); with
    one thread free it runs there on one thread, unless waiting for the busy
    thread and splitting would finish sooner. A split call has both threads
    to itself: it gets a dependency on each lane's call before it, and each
    lane's next call one on it (added to ``deps``). A call of at least ``big`` seconds
    always splits (it waits for both threads).
    """
    missing = [len(d) for d in deps]
    ready = [(-level[j], j) for j in range(n) if not missing[j]]
    heapq.heapify(ready)
    finish = [0.0] * n
    start = [0.0] * n
    free = [0.0, 0.0]            # when each thread is next free
    running = []                 # heap of (finish time, call)
    lanes = [[], []]
    splits = []                  # (split call, lane 1's length when it started)
    done = 0
    t = 0.0
    while done < n:
        while running and running[0][0] <= t:
            _, j = heapq.heappop(running)
            done += 1
            for s in succ[j]:
                missing[s] -= 1
                if not missing[s]:
                    heapq.heappush(ready, (-level[s], s))
        idle = [w for w in (0, 1) if free[w] <= t]
        if not ready or not idle:
            if running:
                t = running[0][0]
            continue
        _, j = heapq.heappop(ready)
        if cost[j] >= big and len(idle) == 1:
            heapq.heappush(ready, (-level[j], j))        # wait for both threads
            t = free[1 - idle[0]]
            continue
        if len(idle) == 2 and (not ready or cost[j] >= big) and _split_cost(cost[j]) < cost[j]:
            end = t + _split_cost(cost[j])
            free[0] = free[1] = end
            lanes[0].append((j, True))
            splits.append((j, len(lanes[1])))
        else:
            w = idle[0]
            busy = free[1 - w]
            if len(idle) == 1 and busy + min(cost[j], _split_cost(cost[j])) < t + cost[j]:
                heapq.heappush(ready, (-level[j], j))    # wait for the other, then split
                t = busy
                continue
            end = t + cost[j]
            free[w] = end
            lanes[w].append((j, False))
        finish[j] = end
        start[j] = t
        heapq.heappush(running, (end, j))
    lane1 = lanes[1]
    for j, k in splits:
        if k > 0:
            deps[j].add(lane1[k - 1][0])
        if k < len(lane1):
            deps[lane1[k][0]].add(j)
    lane0 = lanes[0]
    for k, (j, split) in enumerate(lane0):
        if split and k > 0:
            deps[j].add(lane0[k - 1][0])
        if split and k + 1 < len(lane0):
            deps[lane0[k + 1][0]].add(j)
    return lanes, finish, start
