"""Checks of ``OpDef.backward_reads``: a backward never reads what its op says it does not.

The training executor shares the buffer of every forward value no running
backward reads (:mod:`ffnumba._memory_plan`), so a wrong declaration gives
silently wrong gradients. :func:`check_backward_reads` runs a backward, then
overwrites the inputs and outputs the declaration calls unread with garbage
(NaN; a large value in integer arrays) and runs it again: the gradients must
not change. :func:`probe_backward_reads` garbles one value at a time and
names those that change them (to find what to declare).

:func:`check_zero_gradient` checks ``OpDef.zero_gradient`` (the executor
never passes such an op its head gradients): the op's backward, called with
random head gradients, writes zeros to every input gradient and adds nothing.
"""
import numpy as np

from .. import ndarray as nd
from .._memory_plan import node_reads
from .gradcheck import bind_numpy

__all__ = ['check_backward_reads', 'probe_backward_reads', 'check_zero_gradient']


def _garble(arr):
    data = arr._data
    if data.dtype.kind == 'f':
        arr[:] = np.nan
    elif data.dtype.kind in 'iu':
        arr[:] = np.iinfo(data.dtype).max // 3
    elif data.dtype.kind == 'b':
        arr[:] = np.logical_not(arr.asnumpy())


def _run(sym, location, aux_states, op_name, is_train, grad_nodes, head_grads, pick):
    """Gradients before and after garbling what ``pick(node) -> (ins, outs)`` names."""
    nodes = list(grad_nodes or sym.list_arguments())
    exe = bind_numpy(sym, location, aux_states, grad_req={n: 'write' for n in nodes},
                     dtype='float64')
    exe.forward(is_train=is_train)
    rng = np.random.default_rng(7)
    heads = None
    if head_grads:
        heads = [nd.array(rng.standard_normal(o.shape), dtype='float64') for o in exe.outputs]
    exe.backward(heads)
    before = {n: exe.grad_dict[n].asnumpy().copy() for n in nodes}
    view = exe._view
    ptr = view.entry_ptr
    bwd = {r.nid for r in exe._bwd_plan}
    targets = [nid for nid in bwd if view.nodes[nid].op.name == op_name]
    assert targets, '%s: no backward of %s runs in %s' % (op_name, op_name, sym.name)
    others = set()                     # what the backwards of other nodes read: left alone
    for nid in bwd - set(targets):
        ins, outs = node_reads(view.nodes[nid])
        others.update(view.in_entries[nid][i] for i in ins)
        others.update(ptr[nid] + i for i in outs)
    garbled = []
    for nid in targets:
        node = view.nodes[nid]
        ins, outs = pick(node)
        for i in ins:
            garbled.append(view.in_entries[nid][i])
        for i in outs:
            garbled.append(ptr[nid] + i)
    for e in set(garbled) - others:
        _garble(exe._nd_of[e])
    try:
        exe.backward(heads)
    except Exception as err:        # a kernel that checks what it reads (labels, indices)
        return before, {n: err for n in nodes}
    after = {n: exe.grad_dict[n].asnumpy() for n in nodes}
    return before, after


def _same(a, b):
    return not isinstance(b, Exception) and np.array_equal(a, b, equal_nan=True)


def check_backward_reads(sym, location, aux_states=None, op_name=None, is_train=True,
                         grad_nodes=None, head_grads=True):
    """Assert that ``op_name``'s backward in ``sym`` reads only what it declares.

    Parameters
    ----------
    sym : Symbol
        A graph with at least one running backward of the op.
    location, aux_states : dict
        Values of the arguments and auxiliary states (bound as float64).
    op_name : str
        Registry name of the op under test.
    is_train : bool
        Mode of the forward.
    grad_nodes : list of str, optional
        Arguments that get gradients (default: all).
    head_grads : bool
        Pass random head gradients (False for loss heads, which ignore them).

    Raises
    ------
    AssertionError
        Naming the op, its declaration and the gradient that changed.
    """
    def unread(node):
        ins, outs = node_reads(node)
        return ([i for i in range(node.num_args) if i not in ins],
                [i for i in range(node.num_outputs()) if i not in outs])

    before, after = _run(sym, location, aux_states, op_name, is_train, grad_nodes, head_grads,
                         unread)
    for n in before:
        if not _same(before[n], after[n]):
            from ..ops.registry import get_op
            raise AssertionError(
                '%s declares backward_reads=%r, but the gradient of %r changes when the values '
                'it does not declare are garbage:\nbefore %s\nafter %s'
                % (op_name, get_op(op_name).backward_reads, n, before[n], after[n]))


def probe_backward_reads(sym, location, aux_states=None, op_name=None, is_train=True,
                         grad_nodes=None, head_grads=True):
    """The argument and output names of ``op_name`` whose garbling changes a gradient.

    One run per value; a value the backward reads only in some branches may
    escape a probe, so a declaration made from it still needs
    :func:`check_backward_reads` over many cases.
    """
    from ..ops.registry import get_op
    sample = None
    found = []
    view_nodes = sym._view().nodes
    for node in view_nodes:
        if node.op is not None and node.op.name == get_op(op_name).name:
            sample = node
            break
    names = [('in', i, a) for i, a in enumerate(sample.arg_names())]
    names += [('out', i, o) for i, o in enumerate(sample.op.list_outputs(sample.params))]
    for kind, idx, name in names:
        pick = (lambda node, k=kind, i=idx: ([i], []) if k == 'in' else ([], [i]))
        before, after = _run(sym, location, aux_states, op_name, is_train, grad_nodes,
                             head_grads, pick)
        if any(not _same(before[n], after[n]) for n in before):
            found.append(name)
    return found


def check_zero_gradient(sym, location, aux_states=None, op_name=None, is_train=True,
                        grad_nodes=None):
    """Assert that ``op_name``'s backward in ``sym`` gives zero input gradients whatever
    its head gradients (what its ``OpDef.zero_gradient`` declares).

    The executor hands such an op shared zero head gradients, so this calls the
    op's backward kernel itself, on the forward values of a bound executor, with
    random head gradients: ``'write'`` must make every input gradient zero and
    ``'add'`` must leave it as it was (both start as random values).

    Parameters
    ----------
    sym : Symbol
        A graph with at least one running backward of the op.
    location, aux_states : dict
        Values of the arguments and auxiliary states (bound as float64).
    op_name : str
        Registry name of the op under test.
    is_train : bool
        Mode of the forward.
    grad_nodes : list of str, optional
        Arguments that get gradients (default: all).

    Raises
    ------
    AssertionError
        Naming the op, the request and the input whose gradient is not zero (or
        unchanged), or when the op does not declare a zero gradient for its params.
    """
    from ..ops.registry import get_op
    name = get_op(op_name).name
    nodes = list(grad_nodes or sym.list_arguments())
    exe = bind_numpy(sym, location, aux_states, grad_req={n: 'write' for n in nodes},
                     dtype='float64')
    exe.forward(is_train=is_train)
    view = exe._view
    recs = [r for r in exe._bwd_plan if view.nodes[r.nid].op.name == name]
    assert recs, '%s: no backward of %s runs in %s' % (name, name, sym.name)
    rng = np.random.default_rng(11)
    for r in recs:
        node = view.nodes[r.nid]
        assert node.op.has_zero_gradient(node.params), \
            '%s does not declare zero_gradient for params %s' % (name, node.params)
        heads = [rng.standard_normal(np.shape(g)).astype(np.asarray(g).dtype)
                 for g in r.ograds]
        got = [i for i, g in enumerate(r.igrads) if g is not None]
        assert got, '%s: no input gradient is computed' % name
        for req in ('write', 'add'):
            init = [None if g is None else rng.standard_normal(np.shape(g)).astype(
                np.asarray(g).dtype) for g in r.igrads]
            igrads = [None if g is None else g.copy() for g in init]
            reqs = [req if g is not None else 'null' for g in init]
            r.bwd(r.ctx, r.p, heads, r.ins, r.outs, igrads, reqs, r.aux)
            for i in got:
                want = np.zeros_like(init[i]) if req == 'write' else init[i]
                if not np.array_equal(igrads[i], want):
                    raise AssertionError(
                        '%s declares zero_gradient, but with random head gradients and '
                        "req=%r the gradient of input %d (%s) is %s, not %s"
                        % (name, req, i, node.arg_names()[i], igrads[i],
                           'zero' if req == 'write' else 'unchanged'))
