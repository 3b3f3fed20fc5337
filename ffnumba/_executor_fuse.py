"""Operator fusion for inference: ``Convolution -> BatchNorm -> Activation('relu')`` as one call.

An executor that computes no gradient (every ``grad_req`` ``'null'``:
``Module.bind(for_training=False)``, ``Module.predict``/``score`` on it,
``FeedForward.predict``, ``simple_bind(..., grad_req='null')``) on the CPU
finds, at bind, every chain

    Convolution [-> BatchNorm] [-> Activation(act_type='relu') | relu | clip]

of at least two nodes (so also ``Convolution -> relu`` without BatchNorm, as in
GoogLeNet, VGG and AlexNet, the depthwise convolutions of MobileNet, and
MobileNet v2's ``clip(0, 6)``). A
``forward(is_train=False)`` without a monitor then runs each chain as one call
of :func:`ffnumba.ops.nn.convolution.fused_forward_cpu`: the BatchNorm's
evaluation map (moving mean and variance, :func:`ffnumba.ops.nn.batch_norm.inference_affine`)
and the relu (or clip) are applied to each output row of the convolution while it is
in cache, and the result goes straight into the last node's output buffer;
the intermediate outputs are not written. With float64 data (or with
``FFNUMBA_FUSE=exact``) the arithmetic is the unfused operators', so the
outputs are bit-identical. With float32 data the BatchNorm is folded into a
float32 per-channel map: its ``scale`` and ``shift`` are computed in float64
exactly as the unfused operator computes them, rounded to float32 once per
forward, and the epilogue multiplies and adds in float32 (the unfused
operator computes ``x * scale + shift`` in float64 and rounds the result).
The outputs then differ from the unfused ones by float32 rounding (a few ulp
of each BatchNorm output, as folding the BatchNorm into the convolution's
weights would), and the epilogue runs about three times faster (MobileNet
v1 / v2 inference, batch 32, one thread: 6-8% faster). Chains without a
BatchNorm (relu or clip only) stay bit-identical. Likewise every
``FullyConnected -> Activation('relu') | relu`` pair (the MLP layers, the
classifier heads of VGG and AlexNet) runs as one call of
:func:`ffnumba.ops.nn.fully_connected.fused_relu_forward_cpu`, the relu applied
to the product's rows in cache, and every ``elemwise_add -> relu`` pair
(ResNet's residual sums) as one pass of
:func:`ffnumba.ops.nn._conv_epilogue.add_relu_forward` (bit-identical).

A chain never fuses across a value someone can observe: a graph output (also
the outputs of a ``get_internals()`` group), a value with more than one
consumer (or consumed other than as the next node's ``data``), a monitor
(``install_monitor`` runs the unfused per-node loop), a training forward
(``is_train=True``: BatchNorm uses the batch statistics), or a training
executor (its backward reads the intermediates; its ``forward(is_train=False)``
runs only the training pairs of :mod:`ffnumba._executor_train_fuse`). BatchNorm fuses with ``axis=1`` and without
``output_mean_var`` (any ``eps``, ``fix_gamma``, ``use_global_stats``); data of
float32 or float64 only (float16 runs unfused). GPU executors run unfused.
``FFNUMBA_FUSE=0`` (read at bind) turns fusion off; ``FFNUMBA_FUSE=exact``
keeps it bit-identical for float32 too.

Memory: the fused call runs at the position of the chain's last node, so the
inputs of every node of a chain stay alive until then (:func:`lives_until`,
passed to :func:`ffnumba._memory_plan.plan_memory`); the plan stays correct
for the unfused forward too (a monitor, ``is_train=True``).
"""
import os

import numpy as np

from .ndarray._device import host_compute
from .ops.nn import batch_norm as _bn
from .ops.nn import convolution as _conv
from .ops.nn import fully_connected as _fc
from .ops.nn import _conv_epilogue as _ep
from .ops.nn._conv_epilogue import AFFINE, CLIP, RELU, make

__all__ = ['FUSE_ENV', 'fusion_enabled', 'exact_epilogue', 'find_chains', 'readers', 'lives_until',
           'in_place', 'fused_plan']

#: Environment variable: ``0`` turns inference fusion off (read at bind).
FUSE_ENV = 'FFNUMBA_FUSE'
_FLOATS = (np.dtype('float32'), np.dtype('float64'))


def fusion_enabled():
    """False when ``FFNUMBA_FUSE`` is ``0``/``false``/``no``/``off``."""
    return os.environ.get(FUSE_ENV, '1').strip().lower() not in ('0', 'false', 'no', 'off')


def exact_epilogue():
    """True when ``FFNUMBA_FUSE`` is ``exact``: float32 BatchNorm epilogues in float64,
    bit-identical to the unfused operators (read at bind)."""
    return os.environ.get(FUSE_ENV, '1').strip().lower() == 'exact'


def _bn_fusable(node, ndim):
    p = node.params
    return (node.op.name == 'BatchNorm' and not p.output_mean_var
            and (p.axis == 1 or p.axis + ndim == 1))


def _activation(node):
    """``(mode bit, a_min, a_max)`` of an activation that fuses, else None."""
    name = node.op.name
    if (name == 'Activation' and node.params.act_type == 'relu') or name == 'relu':
        return RELU, 0.0, 0.0
    if name == 'clip':
        return CLIP, node.params.a_min, node.params.a_max
    return None


def readers(view):
    """``(heads, uses)`` of a graph: the set of its output entries, and entry -> ``[(node id,
    input position)]`` of every node reading that entry (the one home of this map for the
    inference and the training fusions)."""
    uses = {}
    for nid, ents in enumerate(view.in_entries):
        for pos, e in enumerate(ents):
            uses.setdefault(e, []).append((nid, pos))
    return set(view.heads), uses


def find_chains(view, shapes, types, ctx):
    """The fusable chains of a graph: a list of ``(conv, bn, act)`` node ids.

    ``bn`` or ``act`` is None where the chain lacks it; every chain has at
    least two nodes. ``conv`` may be a FullyConnected or an ``elemwise_add`` node
    (then ``bn`` is None and ``act`` a relu). Empty on a GPU context or with ``FFNUMBA_FUSE=0``.

    Parameters
    ----------
    view : GraphView
    shapes, types : list
        Per entry, the bound shapes and dtypes.
    ctx : Context
    """
    if not host_compute(ctx) or not fusion_enabled():
        return []
    heads, uses = readers(view)

    def sole_consumer(nid):
        """The one node reading ``nid``'s only output as its data, or None."""
        if view.entry_ptr[nid + 1] - view.entry_ptr[nid] != 1:
            return None
        e = view.entry_ptr[nid]
        use = uses.get(e, [])
        if e in heads or len(use) != 1 or use[0][1] != 0:
            return None
        return use[0][0]

    chains = []
    for nid, node in enumerate(view.nodes):
        if node.op is None or node.op.name not in ('Convolution', 'FullyConnected',
                                                   'elemwise_add'):
            continue
        e = view.entry_ptr[nid]
        if np.dtype(types[e]) not in _FLOATS:
            continue
        if node.op.name in ('FullyConnected', 'elemwise_add'):
            nxt = sole_consumer(nid)
            act = _activation(view.nodes[nxt]) if nxt is not None else None
            if act is not None and act[0] == RELU:
                chains.append((nid, None, nxt))
            continue
        bn, act = None, None
        nxt = sole_consumer(nid)
        if nxt is not None and _bn_fusable(view.nodes[nxt], len(shapes[e])):
            bn, nxt = nxt, sole_consumer(nxt)
        if nxt is not None and _activation(view.nodes[nxt]) is not None:
            act = nxt
        if bn is not None or act is not None:
            chains.append((nid, bn, act))
    return chains


def lives_until(view, chains):
    """Entry -> node id: every input of a chain's nodes is read at the chain's last node."""
    out = {}
    for chain in chains:
        nids = [n for n in chain if n is not None]
        for nid in nids:
            for e in view.in_entries[nid]:
                out[e] = max(out.get(e, -1), nids[-1])
    return out


def in_place(view, chains, ctx, inference):
    """Output entry -> input entries: sums an inference executor may write over one of
    their summands (the first whose storage the memory plan frees at that node:
    :func:`ffnumba._memory_plan.plan_memory`'s ``in_place``), so the pass writes into
    cache lines it has just read instead of a third buffer (ResNet's residual sums;
    8.4M float32: 4.2 -> 3.2 ms, loaded).

    Each fused ``elemwise_add -> relu`` pair, and on the CPU of an executor without
    gradients (``inference``) each other ``elemwise_add`` (ResNet v2, MobileNet v2: its
    kernel reads ``a[i]`` and ``b[i]`` before it writes ``out[i]``). The unfused forward
    of a fused pair's plan stays correct: the relu then writes over a summand the add
    has read. Nothing is written in place on a GPU or with ``FFNUMBA_FUSE=0``.
    """
    out = {view.entry_ptr[act]: list(view.in_entries[add])
           for add, _, act in chains if view.nodes[add].op.name == 'elemwise_add'}
    if inference and host_compute(ctx) and fusion_enabled():
        inner = {c[0] for c in chains}
        for nid, node in enumerate(view.nodes):
            if node.op is not None and node.op.name == 'elemwise_add' and nid not in inner:
                out[view.entry_ptr[nid]] = list(view.in_entries[nid])
    return out


def _fused_call(conv, bn, act, kind='Convolution'):
    """``fwd(ctx, p, ins, outs, aux)`` of one chain: the convolution with its epilogue
    (records of the chain's nodes; ``bn``, ``act`` may be None), or a FullyConnected
    with its relu (``kind``: the first node's operator)."""
    if kind == 'FullyConnected':
        fc = _fc.fused_relu_forward_cpu

        def fwd_fc(ctx, p, ins, outs, aux):
            fc(ctx, p, ins, outs[0])
        return fwd_fc
    if kind == 'elemwise_add':
        add_relu = _ep.add_relu_forward

        def fwd_add(ctx, p, ins, outs, aux):
            add_relu(ins[0], ins[1], outs[0])
        return fwd_add
    fused = _conv.fused_forward_cpu
    mode, lo, hi = (0, 0.0, 0.0) if act is None else _activation(act)
    ep = make(conv.p.num_filter, lo, hi)     # this executor's own, refilled per call
    if bn is None:
        def fwd(ctx, p, ins, outs, aux):
            fused(ctx, p, ins, outs[0], ep, mode)
        return fwd
    mode |= AFFINE
    affine, bp = _bn.inference_affine, bn.p
    gamma, beta, (mean, var) = bn.ins[1], bn.ins[2], bn.aux
    if conv.ins[0].dtype == np.float32 and not exact_epilogue():
        ep32 = np.empty(ep.shape, np.float32)   # the folded map: float32 arithmetic

        def fwd32(ctx, p, ins, outs, aux):
            ep32[...] = affine(bp, gamma, beta, mean, var, ep)
            fused(ctx, p, ins, outs[0], ep32, mode)
        return fwd32

    def fwd(ctx, p, ins, outs, aux):
        fused(ctx, p, ins, outs[0], affine(bp, gamma, beta, mean, var, ep), mode)
    return fwd


def fused_plan(fwd_plan, chains, make_rec, nodes):
    """The forward records with each chain replaced by one call at its last node's place.

    Parameters
    ----------
    fwd_plan : list of executor records
        The unfused forward, in graph order (``nid``, ``fwd``, ``p``, ``ctx``,
        ``ins``, ``outs``, ``aux``, ``name``).
    chains : list
        :func:`find_chains`.
    make_rec : callable
        Makes an empty record.
    nodes : list
        The graph's nodes (``GraphView.nodes``).

    Returns
    -------
    list of records
        The fused records carry the convolution's ``nid``, ``ctx``, params and
        inputs and the last node's outputs.
    """
    rec_of = {r.nid: r for r in fwd_plan}
    fused_at, inner = {}, set()
    for conv, bn, act in chains:
        nids = [n for n in (conv, bn, act) if n is not None]
        c, b = rec_of[conv], rec_of.get(bn)
        r = make_rec()
        r.nid, r.name, r.p, r.ctx, r.ins, r.aux = c.nid, c.name, c.p, c.ctx, c.ins, []
        r.outs = rec_of[nids[-1]].outs
        r.out_names = rec_of[nids[-1]].out_names
        r.fwd = _fused_call(c, b, None if act is None else nodes[act], nodes[conv].op.name)
        fused_at[nids[-1]] = r
        inner.update(nids)
    return [fused_at[r.nid] if r.nid in fused_at else r
            for r in fwd_plan if r.nid in fused_at or r.nid not in inner]
