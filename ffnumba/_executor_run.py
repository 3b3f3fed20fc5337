"""The bound call plan an :class:`~ffnumba.executor.Executor` runs every step.

Binding precomputes, per operator node, the compute function and the exact
arguments it receives (``OpContext``, parsed params, input/output/aux arrays;
for backward the head and input gradients and their requests).
:class:`CallPlan` turns that into flat argument tuples and runs them in a
plain loop: no dict lookups, attribute parsing or shape checks per step. The
dtype- and size-dependent wrappers of a compute function (float16 computed in
float32, integers in float64, empty outputs skipped) are resolved once here
through :func:`ffnumba.jit.direct`, as are implementations chosen from the
params (``Activation``'s ``act_type``): a bound executor's arrays never change
dtype or shape (``reshape`` makes a new executor; ``forward(**kwargs)`` copies
into the bound arrays after checking their shapes).

Errors still name the node: an exception raised by a kernel is re-raised
through :func:`ffnumba._executor_bind._reraise`. An executor with a monitor
takes its own per-node loop (the monitor reads each node's record). This module sits beside
``_executor_bind`` below ``executor.py`` and never imports it.

With exactly two kernel threads, a pass follows its branch schedule when it has one
(:mod:`ffnumba._executor_branches`: independent nodes side by side, one per
thread), made the first time it is wanted; its first run (compiling) takes the
schedule's calls one after another on this thread.
"""
from ._executor_bind import _reraise
from ._executor_branches import schedule_pass
from .jit import direct
from .thread_pool import kernel_threads

__all__ = ['CallPlan']


class CallPlan:
    """Flat per-node calls of one executor's forward and backward passes.

    Parameters
    ----------
    nodes : list
        The graph's nodes (``GraphView.nodes``), to name a failing node.
    fwd_plan, bwd_plan : list of executor records
        Each with ``nid``, ``fwd``/``bwd``, ``ctx``, ``p``, ``ins``, ``outs``,
        ``aux`` (and for backward ``ograds``, ``igrads``, ``reqs``, ``post``:
        NDArray pairs ``(tmp, dst)`` whose ``tmp`` is added into ``dst`` after the call).
    branches : bool, default False
        Run passes by their branch schedule on two threads (CPU arrays only).
    """

    def __init__(self, nodes, fwd_plan, bwd_plan, branches=False):
        self._nodes = nodes
        self._branches = branches
        self._sched = {}      # pass -> Schedule or None, made on first use
        self._runs = {'forward': 0, 'backward': 0}
        self._fwd_nids = [r.nid for r in fwd_plan]
        self._bwd_nids = [r.nid for r in bwd_plan]
        self._ctxs = [r.ctx for r in fwd_plan]
        self._fwd = [(direct(r.fwd, r.p, r.ins, r.outs, r.aux), r.ctx, r.p, r.ins, r.outs, r.aux)
                     for r in fwd_plan]
        self._bwd = [(direct(r.bwd, r.p, r.ograds, r.ins, r.outs, r.igrads, r.reqs, r.aux),
                      r.ctx, r.p, r.ograds, r.ins, r.outs, r.igrads, r.reqs, r.aux, r.post)
                     for r in bwd_plan]
        self._train = None

    def set_train(self, is_train):
        """Set ``OpContext.is_train`` of every node (only when it changes)."""
        if is_train is not self._train:
            for c in self._ctxs:
                c.is_train = is_train
            self._train = is_train

    def _schedule(self, what):
        """The branch schedule of pass ``what`` to run now, or None (run node after node)."""
        if not self._branches or kernel_threads(3) != 2:
            return None      # one thread, or more than two (splits then use them all)
        if what not in self._sched:
            self._sched[what] = self._make_schedule(what)
        return self._sched[what]

    def _make_schedule(self, what):
        names = [self._nodes[n].op.name for n in
                 (self._fwd_nids if what == 'forward' else self._bwd_nids)]
        if what == 'forward':
            acc = [(ins + aux, outs + aux, ins, outs) for _, _, _, ins, outs, aux in self._fwd]
        else:
            acc = [(og + ins + outs + aux, ig + [a._data for pair in post for a in pair],
                    ins, outs) for _, _, _, og, ins, outs, ig, _, aux, post in self._bwd]
        return schedule_pass(names, acc, what == 'backward')

    def _run_scheduled(self, sched, calls, what, nids):
        runs = self._runs[what]
        self._runs[what] = runs + 1
        # the first run (compiling) goes node after node on this thread, each node split
        # or on one thread as the schedule says, so every run gives the same numbers
        failed = sched.run(calls) if runs else sched.run_in_order(calls)
        if failed is not None:
            i, e = failed
            _reraise(self._nodes[nids[i]], what, e)

    def forward(self):
        """Run every node's forward in graph order (no monitor)."""
        sched = self._schedule('forward')
        if sched is not None:
            fwd = self._fwd

            def call(i):
                fn, ctx, p, ins, outs, aux = fwd[i]
                fn(ctx, p, ins, outs, aux)
            return self._run_scheduled(sched, call, 'forward', self._fwd_nids)
        i = 0
        try:
            for fn, ctx, p, ins, outs, aux in self._fwd:
                fn(ctx, p, ins, outs, aux)
                i += 1
        except Exception as e:  # name the node; never leak a bare kernel traceback
            _reraise(self._nodes[self._fwd_nids[i]], 'forward', e)

    def backward(self):
        """Run the backward of every node that has one, in reverse order (no monitor)."""
        sched = self._schedule('backward')
        if sched is not None:
            bwd = self._bwd

            def call(i):
                fn, ctx, p, og, ins, outs, ig, reqs, aux, post = bwd[i]
                fn(ctx, p, og, ins, outs, ig, reqs, aux)
                for tmp, dst in post:
                    dst._add_from(tmp)
            return self._run_scheduled(sched, call, 'backward', self._bwd_nids)
        i = 0
        try:
            for fn, ctx, p, og, ins, outs, ig, reqs, aux, post in self._bwd:
                fn(ctx, p, og, ins, outs, ig, reqs, aux)
                for tmp, dst in post:
                    dst._add_from(tmp)
                i += 1
        except Exception as e:
            _reraise(self._nodes[self._bwd_nids[i]], 'backward', e)
