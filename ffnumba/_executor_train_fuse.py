"""Training-time fusion: ``BatchNorm -> relu | clip`` and ``elemwise_add -> relu`` as one
forward and one backward call.

A CPU executor with gradients finds, at bind, every BatchNorm (float32 or
float64 data, without ``output_mean_var``, at least :data:`MIN_INNER` elements
per channel and sample) whose output is read by exactly one
node, as that node's data, and by nobody else (not a graph output, nor a
``get_internals()`` head), where that node is ``Activation(act_type='relu')``,
``relu`` or ``clip`` (MobileNet v2's ``relu6``). Its forward and backward calls
(:class:`ffnumba._executor_run.CallPlan`, the plain and the two-thread branch
schedule alike) then run the pair as one call each
(:mod:`ffnumba.ops.nn._bn_act`): the forward writes the activation's output
straight from the normalised values, and the backward turns the activation's
head gradient into BatchNorm's on the fly, so neither the BatchNorm output nor
its gradient is written or read. Results are bit-identical to the unfused
operators (the same arithmetic in the same order), moving statistics and
``grad_req='add'`` included.

The backward pair fuses only where the memory plan runs the two backward calls
one right after the other (always in a chain; the fused call runs there), and
where no input of the BatchNorm is repeated. A pair with no backward at all
(nothing upstream needs a gradient) fuses its forward only; a pair whose
activation runs backward but whose BatchNorm does not stays unfused. A
``backward()`` before any forward runs the unfused pair (it reads whatever the
buffers hold, as unfused). Monitors run the unfused per-node loop.
``FFNUMBA_FUSE=0`` (read at bind) turns this off too.

Every ``Convolution -> relu`` pair (GoogLeNet, VGG, AlexNet: no BatchNorm between) whose
convolution output is read by the relu alone, and whose convolution runs backward (so its
data and weight stay alive through the forward), runs its forward as one call: the
convolution with the relu as its epilogue
(:func:`ffnumba.ops.nn.convolution.fused_forward_cpu`, the inference fusion's call),
writing the relu's output straight from each GEMM chunk; the convolution's own output is
never written. The backward stays the two unfused calls: the relu's reads only its
output, the convolution's only its data, weight and head gradient. Bit-identical (the
relu's scalar body on the same values).

Likewise every ``elemwise_add -> relu`` pair (ResNet's residual sums; the same
conditions on the sum) runs its forward as one pass
(:func:`ffnumba.ops.nn._conv_epilogue.add_relu_forward`) and its backward as one
pass that writes (or adds) the masked head gradient straight into both
operands' gradients (:func:`ffnumba.ops.nn._bn_act.relu_add_backward`): the sum
and its gradient are never written. Bit-identical (elementwise, no sums).
"""
import numpy as np

from ._executor_fuse import fusion_enabled, readers
from .ndarray._device import host_compute
from .ops.nn import _bn_act
from .ops.nn import convolution as _conv
from .ops.nn._conv_epilogue import RELU, add_relu_forward, make
from .ops.registry import get_op

__all__ = ['train_chains', 'conv_relu_chains', 'train_plans', 'ahead_calls']

_FLOATS = (np.dtype('float32'), np.dtype('float64'))
#: Fewest elements per channel and sample (after the channel axis) of a fused BatchNorm
#: (measured, one thread, batch 32: 4x8 planes 1.2x faster fused, 4x4 0.95x, 2x2 0.8x).
MIN_INNER = 32


def _act_mode(node):
    """``(mode, lo, hi)`` of an activation that fuses after a BatchNorm, else None."""
    name = node.op.name if node.op is not None else None
    if (name == 'Activation' and node.params.act_type == 'relu') or name == 'relu':
        return _bn_act.RELU, 0.0, 0.0
    if name == 'clip':
        return _bn_act.CLIP, float(node.params.a_min), float(node.params.a_max)
    return None


def train_chains(view, shapes, types, ctx):
    """``[(bn, act)]`` node ids of the BatchNorm -> activation pairs that may fuse.

    Only BatchNorms with at least :data:`MIN_INNER` elements per channel and sample
    (the plane of a convolution): on smaller ones the per-row loops of the fused
    kernels cost more than the separate activation pass saves. Empty on a GPU
    context or with ``FFNUMBA_FUSE=0``.
    """
    if not host_compute(ctx) or not fusion_enabled():
        return []
    heads, uses = readers(view)
    out = []
    for nid, node in enumerate(view.nodes):
        name = node.op.name if node.op is not None else None
        if name not in ('BatchNorm', 'elemwise_add'):
            continue
        e = view.entry_ptr[nid]
        if view.entry_ptr[nid + 1] - e != 1 or e in heads or np.dtype(types[e]) not in _FLOATS:
            continue
        if name == 'BatchNorm':
            ax = node.params.axis % len(shapes[e]) if shapes[e] else 0
            if node.params.output_mean_var or \
                    int(np.prod(shapes[e][ax + 1:], dtype=np.int64)) < MIN_INNER:
                continue
        use = uses.get(e, [])
        if len(use) != 1 or use[0][1] != 0:
            continue
        mode = _act_mode(view.nodes[use[0][0]])
        if mode is None or (name == 'elemwise_add' and mode[0] != _bn_act.RELU):
            continue
        out.append((nid, use[0][0]))
    return out


def conv_relu_chains(view, types, ctx, backward):
    """``[(conv, act)]`` node ids of the ``Convolution -> relu`` pairs whose forward fuses.

    The convolution's only output (float32 or float64, not a graph output) is read by
    the relu alone, as its data; the relu's backward does not read its input (it never
    exists); the convolution is in ``backward`` (the node ids whose backward runs), so
    the memory plan keeps its data until the backward and the fused call, at the relu's
    place, still reads it. Empty on a GPU context or with ``FFNUMBA_FUSE=0``.
    """
    if not host_compute(ctx) or not fusion_enabled():
        return []
    heads, uses = readers(view)
    out = []
    for nid, node in enumerate(view.nodes):
        if node.op is None or node.op.name != 'Convolution' or nid not in backward:
            continue
        e = view.entry_ptr[nid]
        if view.entry_ptr[nid + 1] - e != 1 or e in heads or np.dtype(types[e]) not in _FLOATS:
            continue
        use = uses.get(e, [])
        if len(use) != 1 or use[0][1] != 0:
            continue
        act = view.nodes[use[0][0]]
        mode = _act_mode(act)
        if mode is None or mode[0] != _bn_act.RELU:
            continue
        reads = act.op.backward_reads
        reads = reads(act.params) if callable(reads) else reads
        if 'inputs' in reads or 'data' in reads:
            continue
        out.append((nid, use[0][0]))
    return out


def _conv_relu_call(num_filter):
    fused, ep = _conv.fused_forward_cpu, make(num_filter)

    def call(ctx, p, ins, outs, aux):
        fused(ctx, p, ins, outs[0], ep, RELU)
    return call


def _add_fwd_call():
    fwd = add_relu_forward

    def call(ctx, p, ins, outs, aux):
        fwd(ins[0], ins[1], outs[0])
    return call


def _add_bwd_call():
    bwd = _bn_act.relu_add_backward

    def call(ctx, p, og, ins, outs, ig, reqs, aux):
        bwd(outs[0], og[0], ig, reqs)
    return call


def _fwd_call(mode, lo, hi):
    fwd = _bn_act.forward

    def call(ctx, p, ins, outs, aux):
        fwd(ctx, p, ins, outs[0], aux, mode, lo, hi)
    return call


def _bwd_call(mode, lo, hi, act_rec, bn_rec):
    bwd = _bn_act.backward
    a, b = act_rec, bn_rec

    def call(ctx, p, og, ins, outs, ig, reqs, aux):
        if 'batch' not in ctx.state:      # no forward yet: the unfused pair, as it would run
            a.bwd(a.ctx, a.p, a.ograds, a.ins, a.outs, a.igrads, a.reqs, a.aux)
            b.bwd(b.ctx, b.p, b.ograds, b.ins, b.outs, b.igrads, b.reqs, b.aux)
            return
        bwd(ctx, p, og[0], ins, ig, reqs, aux, mode, lo, hi)
    return call


def train_plans(view, shapes, types, ctx, fwd_plan, bwd_plan, make_rec):
    """The forward and backward records with each fusable pair replaced by one record.

    Parameters
    ----------
    view : GraphView
    shapes, types : list
        Per entry, the bound shape and dtype.
    ctx : Context
    fwd_plan, bwd_plan : list of executor records
        The unfused passes (see :mod:`ffnumba._executor_run`).
    make_rec : callable
        Makes an empty record.

    Returns
    -------
    (fwd_plan, bwd_plan) : two lists
        New lists (the given ones are not changed); the fused forward record
        sits at the activation's place, the fused backward record at the
        activation's backward's.
    """
    chains = train_chains(view, shapes, types, ctx)
    bpos = {r.nid: k for k, r in enumerate(bwd_plan)}
    convs = conv_relu_chains(view, types, ctx, bpos)
    if not chains and not convs:
        return fwd_plan, bwd_plan
    frec = {r.nid: r for r in fwd_plan}
    fwd_at, bwd_at, drop, drop_fwd = {}, {}, set(), set()
    for conv, act in convs:
        r = _record(make_rec, frec[conv], frec[act])
        r.fwd = _conv_relu_call(view.nodes[conv].params.num_filter)
        r.ahead = ('convrelu',)
        fwd_at[act] = r
        drop_fwd.add(conv)
    for bn, act in chains:
        mode, lo, hi = _act_mode(view.nodes[act])
        add = view.nodes[bn].op.name == 'elemwise_add'
        ka, kb = bpos.get(act), bpos.get(bn)
        if ka is not None or kb is not None:
            if ka is None or kb != ka + 1:
                continue
            ar, br = bwd_plan[ka], bwd_plan[kb]
            if ar.post or br.post or ar.reqs[0] != 'write':
                continue
            r = _record(make_rec, br, frec[act])
            r.ograds, r.igrads, r.reqs, r.post = ar.ograds, br.igrads, br.reqs, []
            r.bwd = _add_bwd_call() if add else _bwd_call(mode, lo, hi, ar, br)
            r.ahead = ('addrelu',) if add else ('bnact', mode, lo, hi)
            bwd_at[act] = r
            drop.add(bn)
        r = _record(make_rec, frec[bn], frec[act])
        r.fwd = _add_fwd_call() if add else _fwd_call(mode, lo, hi)
        r.ahead = ('addrelu',) if add else ('bnact', mode, lo, hi)
        fwd_at[act] = r
        drop.add(bn)
    fwd = [fwd_at.get(r.nid, r) for r in fwd_plan if r.nid not in drop | drop_fwd]
    bwd = [bwd_at.get(r.nid, r) for r in bwd_plan if r.nid not in drop]
    return fwd, bwd


def ahead_calls(key):
    """``(forward, backward)`` compute functions of a fused record's ``ahead`` key, for
    the cold start's compile-ahead child (:mod:`ffnumba._compile_ahead`), which runs
    them on zeros so that their kernels are compiled there."""
    if key[0] == 'addrelu':
        return _add_fwd_call(), _add_bwd_call()
    if key[0] == 'convrelu':
        fused = _conv.fused_forward_cpu

        def forward(ctx, p, ins, outs, aux):
            fused(ctx, p, ins, outs[0], make(p.num_filter), RELU)
        return forward, get_op('Convolution').compute('cpu')[1]
    mode, lo, hi = key[1:]
    bwd = _bn_act.backward

    def backward(ctx, p, og, ins, outs, ig, reqs, aux):
        bwd(ctx, p, og[0], ins, ig, reqs, aux, mode, lo, hi)
    return _fwd_call(mode, lo, hi), backward


def _record(make_rec, bn, act):
    """A record with the first node's (the BatchNorm's, the sum's or the convolution's)
    node, context, params, inputs and calls, and the activation's outputs."""
    r = make_rec()
    r.nid, r.name, r.p, r.ctx, r.ins, r.aux = bn.nid, bn.name, bn.p, bn.ctx, bn.ins, bn.aux
    r.outs, r.out_names = act.outs, act.out_names
    r.fwd, r.bwd = bn.fwd, bn.bwd
    return r
