"""The training executor's memory plan (MXNet's ``PlanMemory`` idea, over our two passes).

:func:`plan_gradients` decides which nodes run backward and which forward
values their backward reads (``OpDef.backward_reads``, see :func:`node_reads`).
:func:`plan_memory` then gives every operator output and every intermediate
gradient a *storage*, simulating the executor's run: forward in node order,
then ``backward()`` (head gradients first, then the nodes in reverse order).

* A storage is taken for a value when it is first written and released after
  its last reader: an operator output after its last consumer's forward
  (never a head, nor a value some running backward reads); an intermediate
  gradient after its producer's backward (nothing reads it later).
* A request takes the free storage that fits best (MXNet's ``GraphAllocator``:
  the smallest free one at least as large, else the largest smaller one,
  which grows; only within a factor of 16), else a new one. A node's outputs
  (its input gradients in backward) are taken before its inputs (its output
  gradients) are released, so no kernel sees aliased arrays.
* Gradients of the arguments are the caller's arrays (``grad_req`` exact);
  an output of a running backward that no gradient reaches reads one
  shared zero array per shape and dtype (kernels never write head gradients).

On the CPU a storage is one byte buffer and each value a view of its start
(any dtype); on a GPU values share only with equal shape and dtype. The
environment variable ``FFNUMBA_MEMORY_PLAN=0`` (read at bind) turns sharing
off: every value gets its own buffer, for debugging a suspected aliasing bug.
"""
import os

import numpy as np

from .base import FFError
from .ndarray import ndarray as _nd
from .ndarray._device import host_compute
from .ndarray.ndarray import NDArray

__all__ = ['plan_gradients', 'plan_memory', 'node_reads', 'zero_gradient', 'MemoryPlan',
           'PLAN_ENV']

#: Environment variable: ``0`` gives every value its own buffer (no sharing).
PLAN_ENV = 'FFNUMBA_MEMORY_PLAN'
_MATCH_RANGE = 16     # MXNet's MXNET_EXEC_MATCH_RANGE default


def _zeros(shape, dtype, ctx):
    return _nd.zeros(shape, ctx=ctx, dtype=dtype)


def _view_of(arr, shape):
    """An NDArray of ``shape`` over the first elements of ``arr`` where its device can share
    memory (the CPU), else a new zero array."""
    view = arr._prefix_view(shape)
    return view if view is not None else _zeros(shape, arr.dtype, arr.context)


def sharing_enabled():
    """False when ``FFNUMBA_MEMORY_PLAN`` is ``0``/``false``/``no``/``off``."""
    return os.environ.get(PLAN_ENV, '1').strip().lower() not in ('0', 'false', 'no', 'off')


def node_reads(node):
    """``(argument positions, output positions)`` that ``node``'s backward reads.

    ``OpDef.backward_reads`` (or its value for the node's params) names
    ``'inputs'`` (every argument), ``'outputs'`` (every visible output), or
    single argument or output names (``'data'``, ``'label'``, ``'output'``).

    Raises
    ------
    FFError
        For a name that is neither an argument nor an output of the node.
    """
    reads = node.op.backward_reads
    reads = reads(node.params) if callable(reads) else reads
    args, outs = node.arg_names(), list(node.op.list_outputs(node.params))
    ins, ous = set(), set()
    for r in reads:
        if r == 'inputs':
            ins.update(range(len(args)))
        elif r == 'outputs':
            ous.update(range(len(outs)))
        elif r in args or r in outs:
            ins.update(i for i, a in enumerate(args) if a == r)
            ous.update(i for i, o in enumerate(outs) if o == r)
        else:
            raise FFError('%s: backward_reads names %r, which is neither an argument %s nor '
                          'an output %s' % (node.op.name, r, args, outs))
    return ins, ous


def zero_gradient(node):
    """True when ``node``'s backward never reads its head gradient: its gradient is zero
    whatever the head gradient (``OpDef.zero_gradient``, MXNet's ``MakeZeroGradNodes``), so
    ``backward`` ignores whatever is passed for such a head (any shape) or its absence."""
    return node.op is not None and node.op.has_zero_gradient(node.params)


def plan_gradients(view, var_reqs, keep_all=False):
    """Which nodes run backward and which forward values their backward reads.

    Gradients flow from the heads down through every operator that passes
    them (``OpDef.passes_gradient``; ``BlockGrad`` does not) to the
    arguments with a ``grad_req`` other than ``'null'``. A node runs its
    backward when one of its inputs depends on such an argument and gradient
    reaches one of its outputs (a loss op makes its own).

    Parameters
    ----------
    view : GraphView
    var_reqs : dict of int to str
        Entry of each argument whose ``grad_req`` is not ``'null'``, to the request.
    keep_all : bool, default False
        Keep every input and output of a running backward (a monitor with
        ``monitor_all`` reports them after the node's backward).

    Returns
    -------
    need : list of bool
        Per entry: a gradient is computed for it.
    node_bwd : list of bool
        Per node: its backward runs.
    keep : set of int
        Entries some running backward reads (:func:`node_reads`): their
        forward buffers must survive until backward; the others may be shared.
    unreached : list of int
        Argument entries with a request that no gradient reaches (all their
        paths go through ``BlockGrad``): zero for ``'write'``.
    """
    ptr = view.entry_ptr
    depends = [False] * view.num_entries
    for e in var_reqs:
        depends[e] = True
    touched = [False] * len(view.nodes)
    for nid, node in enumerate(view.nodes):
        if node.op is not None and any(depends[e]
                                       for e in view.in_entries[nid][:node.num_args]):
            touched[nid] = True
            for e in range(ptr[nid], ptr[nid + 1]):
                depends[e] = True
    flows = [False] * view.num_entries
    for e in view.heads:
        flows[e] = True
    node_bwd = [False] * len(view.nodes)
    for nid in reversed(range(len(view.nodes))):
        node = view.nodes[nid]
        if not touched[nid] or not node.op.passes_gradient:
            continue
        if not (node.op.is_loss or any(flows[e] for e in range(ptr[nid], ptr[nid + 1]))):
            continue
        node_bwd[nid] = True
        for e in view.in_entries[nid][:node.num_args]:
            if depends[e]:
                flows[e] = True
    need = [depends[e] and flows[e] and (e in var_reqs or node_bwd[view.entry_node[e]])
            for e in range(view.num_entries)]
    keep = set()
    for nid, node in enumerate(view.nodes):
        if node_bwd[nid]:
            ins = view.in_entries[nid]
            if keep_all:
                keep.update(ins)
                keep.update(range(ptr[nid], ptr[nid + 1]))
                continue
            read_in, read_out = node_reads(node)
            keep.update(ins[i] for i in read_in)
            keep.update(ptr[nid] + i for i in read_out)
    unreached = [e for e in var_reqs if not flows[e]]
    return need, node_bwd, keep, unreached


class MemoryPlan:
    """The storages of one executor and which value lives in which.

    Attributes
    ----------
    nbytes : list of int
        Size of each storage (the largest value it holds).
    fwd, grad : dict of int to int
        Entry -> storage id of its forward value / its gradient.
    kind : dict of int to str
        How each operator output is held: ``'head'``, ``'kept'`` (a backward
        reads it), ``'shared'`` (its storage holds other values too) or ``'own'``.
    zero_bytes, own_bytes : int
        Bytes of the zero head-gradient arrays and of buffers outside the pool
        (views of a reshaped executor's arrays count 0).
    held : list of list
        Per storage, the values it holds in turn (``('fwd', e)``, ``('grad', e)``,
        ``('tmp', (nid, pos))``).
    steps : list
        The backward's contributions in order (see :func:`_backward_steps`);
        empty for an executor without gradients.
    """

    def __init__(self):
        self.nbytes, self.held, self.fwd, self.grad, self.kind = [], [], {}, {}, {}
        self.steps = []
        self.zero_bytes = self.own_bytes = 0

    @property
    def total_bytes(self):
        """Everything this plan allocated (MXNet's ``Total N MB allocated``)."""
        return sum(self.nbytes) + self.zero_bytes + self.own_bytes


class _Pool:
    """Storage ids with their sizes; free lists by key (dtype and shape on a GPU)."""

    def __init__(self, plan, gpu):
        self.plan, self.gpu, self.free = plan, gpu, {}

    def request(self, shape, dtype):
        nb = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        key = (tuple(shape), np.dtype(dtype).str) if self.gpu else None
        free, plan = self.free.get(key, []), self.plan
        fits = [s for s in free if nb <= plan.nbytes[s] <= nb * _MATCH_RANGE]
        small = [s for s in free if plan.nbytes[s] < nb and plan.nbytes[s] * _MATCH_RANGE >= nb]
        if fits:
            sid = min(fits, key=lambda s: plan.nbytes[s])
        elif small:
            sid = max(small, key=lambda s: plan.nbytes[s])
            plan.nbytes[sid] = nb
        else:
            plan.nbytes.append(nb)
            plan.held.append([])
            return len(plan.nbytes) - 1
        free.remove(sid)
        return sid

    def release(self, sid, shape, dtype):
        key = (tuple(shape), np.dtype(dtype).str) if self.gpu else None
        self.free.setdefault(key, []).append(sid)


def _backward_steps(view, need, node_bwd, var_reqs):
    """The contributions ``backward()`` writes, in its order, as a list.

    ``('head', k, e)`` for each head gradient the user gives (output ``k``,
    entry ``e``), then per running node ``('node', nid, [(pos, e, dup)...])``
    for its input gradients (``dup``: a repeated input, written to a
    temporary). The executor builds its backward calls from this list.
    """
    steps = []
    for k, e in enumerate(view.heads):
        producer = view.nodes[view.entry_node[e]]
        if not need[e]:
            continue
        if producer.op is not None and (producer.op.is_loss or zero_gradient(producer)):
            continue
        steps.append(('head', k, e))
    for nid in reversed(range(len(view.nodes))):
        node = view.nodes[nid]
        if node.op is None or not node_bwd[nid]:
            continue
        seen, ins = set(), []
        for pos, e in enumerate(view.in_entries[nid][:node.num_args]):
            if need[e]:
                ins.append((pos, e, e in seen))
                seen.add(e)
        steps.append(('node', nid, ins))
    return steps


def plan_memory(view, shapes, types, ctx, nd_of, keep=frozenset(), shared=None,
                grads=None, share=True, lives_until=None, cuts=None, in_place=None):
    """Allocate operator outputs and intermediate gradients over shared storages.

    Parameters
    ----------
    view, shapes, types, ctx
        The bound graph, its per-entry shapes and dtypes, and the context.
    nd_of : list
        Per entry: the bound array of an argument or auxiliary state; filled
        here with an NDArray for every operator output.
    keep : set of int
        Entries a running backward reads (:func:`plan_gradients`).
    shared : list, optional
        Per entry, the array of the executor this one reshapes (the same
        graph, so the same lifetimes): an output that fits (same dtype, no
        more elements) is a view of it on the CPU, as MXNet's
        ``Executor.reshape`` shares memory; the others get their own buffers.
    grads : tuple, optional
        ``(need, node_bwd, var_reqs, gbuf)`` of a training executor: ``gbuf``
        (per entry, the caller's gradient array of each argument with a
        request) is filled with a buffer for every other gradient; None for
        an executor without gradients.
    share : bool, default True
        False gives every value its own buffer.
    lives_until : dict of int to int, optional
        Entry -> a node id until which the entry stays alive even if its last
        consumer runs earlier (the inputs of a fused chain, read when the
        chain's last node runs: :mod:`ffnumba._executor_fuse`).
    cuts : set of int, optional
        Node ids at which the backward frees the gradient storages released
        since the last one (:func:`ffnumba._executor_branches.cut_nodes`): nodes
        between two cuts may run side by side, so none of them gets a storage
        another of them freed. None frees each storage at once.
    in_place : dict of int to list of int, optional
        Output entry -> input entries whose storage it may take over (the first
        one of the same shape and dtype whose storage is released at that very
        node, as MXNet's in-place option): its kernel writes over an input it
        reads last (:func:`ffnumba._executor_fuse.in_place`). Without sharing, or
        for a reshaped executor, nothing is taken over.

    Returns
    -------
    plan : MemoryPlan
    tmps : dict of (int, int) to array
        ``(node id, argument position)`` -> the temporary an input gradient
        of a repeated input is written to before it is added.
    """
    plan = MemoryPlan()
    gpu = not host_compute(ctx)     # host buffers are shared as bytes across dtypes
    pool = _Pool(plan, gpu)
    heads = set(view.heads)
    last = {}
    for nid in range(len(view.nodes)):
        for e in view.in_entries[nid]:
            last[e] = nid
    for e, nid in (lives_until or {}).items():
        last[e] = max(last.get(e, nid), nid)
    release = {}
    for nid, node in enumerate(view.nodes):
        if node.op is None:
            continue
        for e in range(view.entry_ptr[nid], view.entry_ptr[nid + 1]):
            plan.kind[e] = 'head' if e in heads else 'kept' if e in keep else 'shared'
            if e not in heads and e not in keep and share:
                release.setdefault(last.get(e, nid), []).append(e)
    views, moved = {}, set()
    for nid, node in enumerate(view.nodes):
        if node.op is None:
            continue
        for e in range(view.entry_ptr[nid], view.entry_ptr[nid + 1]):
            old = shared[e] if shared is not None else None
            if shared is not None:
                if old is not None and not gpu and np.dtype(old.dtype) == np.dtype(types[e]) \
                        and old.size >= int(np.prod(shapes[e], dtype=np.int64)):
                    views[e] = _view_of(old, shapes[e])
                else:
                    views[e] = _zeros(shapes[e], types[e], ctx)
                    plan.own_bytes += views[e]._data.nbytes
                continue
            dying = release.get(nid, ())
            src = next((a for a in (in_place or {}).get(e, ()) if a in dying and a not in moved
                        and tuple(shapes[a]) == tuple(shapes[e])
                        and np.dtype(types[a]) == np.dtype(types[e])), None)
            if src is None:
                plan.fwd[e] = pool.request(shapes[e], types[e])
            else:                        # the output takes the dying input's storage over
                plan.fwd[e] = plan.fwd[src]
                moved.add(src)
        if shared is None:
            for e in release.get(nid, ()):
                if e not in moved:
                    pool.release(plan.fwd[e], shapes[e], types[e])
    tmps, zero_of, gentries = {}, {}, {}
    if grads is not None:
        need, node_bwd, var_reqs, gbuf = grads
        if shared is not None:
            pool = _Pool(plan, gpu)     # the reshaped executor's storages are not ours

        def take(e):
            if e not in var_reqs and e not in plan.grad:
                plan.grad[e] = pool.request(shapes[e], types[e])

        plan.steps = _backward_steps(view, need, node_bwd, var_reqs)
        pending = []

        def free(sid, e):
            if cuts is None:
                pool.release(sid, shapes[e], types[e])
            else:
                pending.append((sid, e))
        for step in plan.steps:
            if step[0] == 'head':
                take(step[2])
                continue
            _, nid, ins = step
            temps = []
            for pos, e, dup in ins:
                if dup:
                    sid = pool.request(shapes[e], types[e])
                    gentries[(nid, pos)] = (sid, e)
                    temps.append((sid, e))
                else:
                    take(e)
            for sid, e in temps if share else ():
                free(sid, e)
            node = view.nodes[nid]
            for e in range(view.entry_ptr[nid], view.entry_ptr[nid + 1]):
                if e in plan.grad and share:
                    free(plan.grad[e], e)
                elif e not in plan.grad and not node.op.is_loss:
                    key = (shapes[e], np.dtype(types[e]).str)
                    if key not in zero_of:
                        zero_of[key] = _zeros(shapes[e], types[e], ctx)._data
                        plan.zero_bytes += zero_of[key].nbytes
                    gbuf[e] = zero_of[key]
            if cuts is not None and nid in cuts:
                for sid, e in pending:
                    pool.release(sid, shapes[e], types[e])
                del pending[:]
    _materialise(plan, gpu, ctx, shapes, types, nd_of, views, grads, gentries, tmps)
    return plan, tmps


def _materialise(plan, gpu, ctx, shapes, types, nd_of, views, grads, gentries, tmps):
    """Allocate each storage once and hand out the views the plan assigned."""
    uses = {}
    for e, sid in plan.fwd.items():
        uses.setdefault(sid, []).append(('fwd', e))
    for e, sid in plan.grad.items():
        uses.setdefault(sid, []).append(('grad', e))
    for key, (sid, _) in gentries.items():
        uses.setdefault(sid, []).append(('tmp', key))
    for sid, users in uses.items():
        plan.held[sid] = users
    bufs = [None] * len(plan.nbytes)

    def array(sid, e):
        if gpu:                          # equal shape and dtype only: the same array
            if bufs[sid] is None:
                bufs[sid] = _zeros(shapes[e], types[e], ctx)
            return bufs[sid]
        if bufs[sid] is None:
            # through nd.zeros: running out of memory is an FFError naming the size
            bufs[sid] = _zeros((max(plan.nbytes[sid], 1),), np.uint8, ctx)._data
        n = int(np.prod(shapes[e], dtype=np.int64)) * np.dtype(types[e]).itemsize
        return NDArray(bufs[sid][:n].view(types[e]).reshape(shapes[e]), ctx)

    for e, v in views.items():
        nd_of[e] = v
    for e, sid in plan.fwd.items():
        nd_of[e] = array(sid, e)
        if plan.kind[e] == 'shared' and len(plan.held[sid]) == 1:
            plan.kind[e] = 'own'
    if grads is not None:
        gbuf = grads[3]
        for e, sid in plan.grad.items():
            gbuf[e] = array(sid, e)._data
        for key, (sid, e) in gentries.items():
            tmps[key] = array(sid, e)._data


def _kb(n):
    return '%.1f KB' % (n / 1024.0) if n < (1 << 20) else '%.2f MB' % (n / float(1 << 20))


def describe(view, plan):
    """The plan as text: MXNet's listing of the backward nodes, then each value's storage.

    Each running backward is listed as MXNet lists ``_backward_<op>``: its
    inputs are the gradients of the node's outputs (named after the
    backward nodes that write them, ``head_grad<k>`` for a head gradient
    the user gives) and the forward values it reads (``OpDef.backward_reads``).
    Then one line per operator node (``kept``: a backward reads it;
    ``shared``: its storage also holds other values; ``[s<i>]``: the storage)
    and one per storage with its size and what it holds in turn.
    """
    names = view.entry_names()
    writers = {}
    for step in plan.steps:
        if step[0] == 'head':
            writers.setdefault(step[2], []).append('head_grad%d' % step[1])
        else:
            for pos, e, _ in step[2]:
                writers.setdefault(e, []).append('%s_backward(%d)'
                                                 % (view.nodes[step[1]].name, pos))
    lines = []
    for step in plan.steps:
        if step[0] != 'node':
            continue
        nid = step[1]
        node = view.nodes[nid]
        read_in, read_out = node_reads(node)
        ins = []
        if not node.op.is_loss:
            for i, e in enumerate(range(view.entry_ptr[nid], view.entry_ptr[nid + 1])):
                src = '+'.join(writers.get(e, ())) or 'zeros'
                ins.append(src + (' [s%d]' % plan.grad[e] if e in plan.grad else ''))
        for i, e in enumerate(view.in_entries[nid][:node.num_args]):
            if i in read_in:
                src = view.nodes[view.entry_node[e]]
                ins.append('%s(%d)%s' % (src.name, e - view.entry_ptr[view.entry_node[e]],
                                         ' version=0' if src.op is None else ''))
        for i in sorted(read_out):
            ins.append('%s(%d)' % (node.name, i))
        lines += ['-' * 20, 'Op:_backward_%s, Name=%s_backward' % (node.op.name, node.name),
                  'Inputs:'] + ['\targ[%d]=%s' % kv for kv in enumerate(ins)]
        attrs = node.json_attrs()
        if attrs:
            lines += ['Attrs:'] + ['\t%s=%s' % kv for kv in sorted(attrs.items())]
        lines += ['Control deps:', '\tcdep[0]=%s' % node.name]
    bwd = {step[1] for step in plan.steps if step[0] == 'node'}
    lines.append('Memory plan:')
    for nid, node in enumerate(view.nodes):
        if node.op is None:
            continue
        outs = []
        for e in range(view.entry_ptr[nid], view.entry_ptr[nid + 1]):
            where = ' [s%d]' % plan.fwd[e] if e in plan.fwd else ''
            grad = '; gradient [s%d]' % plan.grad[e] if e in plan.grad else ''
            outs.append('%s %s%s%s' % (names[e], plan.kind[e], where, grad))
        lines.append('\t%s (%s): backward %s; %s' % (node.name, node.op.name,
                                                    'runs' if nid in bwd else 'skipped',
                                                    ', '.join(outs)))
    for sid, n in enumerate(plan.nbytes):
        held = [names[x] if k == 'fwd' else 'gradient of ' + names[x] if k == 'grad'
                else 'temporary of %s' % view.nodes[x[0]].name for k, x in plan.held[sid]]
        lines.append('\ts%d: %s: %s' % (sid, _kb(n), ', '.join(held)))
    if plan.zero_bytes:
        lines.append('\tzero head gradients: %s' % _kb(plan.zero_bytes))
    return lines
