"""Shape inference with partially known shapes (0 = an unknown dimension), as MXNet's.

MXNet's operators each handle a 0 dimension in their shape functions. Ours
take complete shapes, so a node with partial shapes is *probed*: its shape
function runs twice, with every unknown dimension replaced by a sentinel
value (a different one per run, divisible by 1..10 so that splits and
reshapes still accept it). A result dimension equal in both runs does not
depend on the unknowns and is known; one that differs stays 0. A result
dimension that is exactly the sentinel in both runs *carries* an unknown
input dimension unchanged (the batch axis through FullyConnected, a spatial
axis through a 'same' Convolution); where that output dimension is known
from elsewhere, the unknown input dimension is solved, and the solution is
checked by a normal call with the complete shapes and the known outputs.

Probes first use one sentinel per unknown dimension, then one shared by all
(operators such as Concat need their unknown batch dimensions equal), and
then same-rank inputs are merged dimension-wise (``(0, 21) + (5, 0)``
gives ``(5, 21)``), again checked by a normal call, and last the node is
inferred from its complete shapes alone (so a conflict with a partial shape
is reported).
"""
from ..base import FFError

__all__ = ['run_partial', 'merge_dims']

_UNIT = 2520  # lcm(1..10)


def _full(v):
    return v is not None and 0 not in v


def merge_dims(cur, new):
    """Dimension-wise merge of two shapes where 0 is unknown; None on a conflict."""
    if cur is None or new is None:
        return new if cur is None else cur
    if len(cur) != len(new):
        return None
    out = []
    for a, b in zip(cur, new):
        if a and b and a != b:
            return None
        out.append(a or b)
    return tuple(out)


def _try(call, node, slots, n_in, outs):
    """``call`` on ``slots`` (inputs then aux) as flat per-entry results, or None if it fails."""
    try:
        res = call(node, slots[:n_in], slots[n_in:], outs)
    except Exception:  # a probe that the operator rejects tells nothing
        return None
    if res is None:
        return None
    new_in, new_out, new_aux = [list(r) if r is not None else [] for r in res]
    n_aux, n_out = len(slots) - n_in, len(outs)
    if new_out and len(new_out) < n_out:
        new_out = new_out + [new_out[0]] * (n_out - len(new_out))
    pad = lambda l, n: (l + [None] * n)[:n]
    return pad(new_in, n_in) + pad(new_aux, n_aux) + pad(new_out, n_out)


def _probe(call, node, slots, n_in, outs, unknown, shared):
    """Results of two sentinel runs, and the unknowns solved from known outputs."""
    def sentinels(run):
        return {k: _UNIT * (11 + run + (0 if shared else 2 * i)) for i, k in enumerate(unknown)}

    def subst(vals):
        return [None if s is None else tuple(vals.get((i, d), x) for d, x in enumerate(s))
                for i, s in enumerate(slots)]

    s1, s2 = sentinels(0), sentinels(1)
    none_outs = [None] * len(outs)
    r1 = _try(call, node, subst(s1), n_in, none_outs)
    r2 = _try(call, node, subst(s2), n_in, none_outs) if r1 is not None else None
    if r2 is None:
        return None, None
    result = []
    for a, b in zip(r1, r2):
        if a is None or b is None or len(a) != len(b):
            result.append(None)
        else:
            result.append(tuple(x if x == y else 0 for x, y in zip(a, b)))
    solved = {}
    n_slots = len(slots)
    for j, out in enumerate(outs):
        a, b = r1[n_slots + j], r2[n_slots + j]
        if out is None or a is None or b is None or len(a) != len(out):
            continue
        for m, v in enumerate(out):
            if not v:
                continue
            for k in unknown:
                if a[m] == s1[k] and b[m] == s2[k]:
                    if solved.get(k, v) != v:
                        return result, None
                    solved[k] = v
    return result, (subst(solved) if solved else None)


def _verify(call, node, slots, n_in, outs):
    """A normal call on complete ``slots``, checked against the known ``outs``."""
    res = _try(call, node, slots, n_in, [o if _full(o) else None for o in outs])
    if res is None:
        return None
    for i, s in enumerate(slots):
        if s is not None and merge_dims(s, res[i]) != s:
            return None
    for o, r in zip(outs, res[len(slots):]):
        if o is not None and merge_dims(o, r) is None:
            return None
    return [s if s is not None else r for s, r in zip(slots, res)] + res[len(slots):]


def _node_partial(call, node, ins, aux, outs):
    slots, n_in = list(ins) + list(aux), len(ins)
    unknown = [(i, d) for i, s in enumerate(slots) if s is not None
               for d, x in enumerate(s) if x == 0]
    if not unknown:   # unknowns only in the outputs: infer the inputs backwards
        return _backward_probe(call, node, slots, n_in, outs)
    result = None
    for shared in (False, True):
        if not unknown:
            break
        result, solved = _probe(call, node, slots, n_in, outs, unknown, shared)
        if solved is not None:
            if all(s is None or 0 not in s for s in solved):
                checked = _verify(call, node, solved, n_in, outs)
                if checked is not None:
                    return checked
            elif not shared:
                return [merge_dims(r, s) if i < len(slots) else r
                        for i, (r, s) in enumerate(zip(result, solved + [None] * len(outs)))]
        if result is not None:
            break
    if result is not None and all(_full(r) or r is None for r in result[:len(slots)]):
        return result
    # same-rank inputs merged dimension-wise (elementwise operators)
    known = [s for s in slots[:n_in] if s is not None]
    merged = known[0] if known else None
    for s in known[1:]:
        merged = merge_dims(merged, s) if merged is not None else None
    if merged is not None and _full(merged):
        trial = [merged if s is not None and merge_dims(s, merged) == merged and 0 in s
                 else s for s in slots]
        checked = _verify(call, node, trial, n_in, outs)
        if checked is not None:
            return checked
    if result is None:  # what the complete shapes alone give (a conflict then shows)
        result = _try(call, node, [s if _full(s) else None for s in slots], n_in,
                      [o if _full(o) else None for o in outs])
    return result


def _backward_probe(call, node, slots, n_in, outs):
    """Inputs from partial outputs: the output unknowns replaced by two sentinel sets."""
    runs = []
    for run in (0, 1):
        subst = [None if o is None else tuple(x or _UNIT * (11 + run + 2 * d)
                                              for d, x in enumerate(o)) for o in outs]
        runs.append(_try(call, node, slots, n_in, subst))
        if runs[-1] is None:
            return None
    return [None if a is None or b is None or len(a) != len(b)
            else tuple(x if x == y else 0 for x, y in zip(a, b)) for a, b in zip(*runs)]


def run_partial(view, values, call, err):
    """Sweep ``view`` forward and backward until no entry changes, with partial shapes.

    ``values``: per entry a shape (0 = unknown dimension) or None.
    ``call(node, ins, aux, outs)``: the operator's normalized shape function.
    ``err(node_name, current, inferred)``: the exception for a conflict.
    """
    nodes = view.nodes
    ops = [i for i, n in enumerate(nodes) if n.op is not None]
    order = ops + ops[::-1]
    while True:
        changed = False
        for nid in order:
            node = nodes[nid]
            ents = list(view.in_entries[nid])
            start = view.entry_ptr[nid]
            out_ents = list(range(start, view.entry_ptr[nid + 1]))
            nargs = node.num_args
            ins = [values[e] for e in ents[:nargs]]
            aux = [values[e] for e in ents[nargs:]]
            outs = [values[e] for e in out_ents]
            every = ins + aux + outs
            if all(_full(v) for v in every):
                continue
            if any(v is not None and 0 in v for v in every):
                flat = _node_partial(call, node, ins, aux, outs)
            else:
                try:
                    flat = _try_strict(call, node, ins, aux, outs)
                except FFError as e:
                    raise type(e)('Error in operator %s: %s' % (node.name, e)) from None
            if flat is None:
                continue
            for e, v in zip(ents + out_ents, flat):
                if v is None:
                    continue
                cur = values[e]
                new = merge_dims(cur, v)
                if new is None:
                    raise err(node.name, cur, v)
                if new != cur:
                    values[e] = new
                    changed = True
        if not changed:
            return values


def _try_strict(call, node, ins, aux, outs):
    """A normal call (FFError propagates); None where the op cannot cope with unknowns yet."""
    try:
        res = call(node, ins, aux, outs)
    except FFError:
        raise
    except (TypeError, IndexError, ValueError, AttributeError):
        if any(v is None for v in ins + aux):
            return None
        raise
    if res is None:
        return None
    slots = list(ins) + list(aux)
    new_in, new_out, new_aux = [list(r) if r is not None else [] for r in res]
    if new_out and len(new_out) < len(outs):
        new_out = new_out + [new_out[0]] * (len(outs) - len(new_out))
    pad = lambda l, n: (l + [None] * n)[:n]
    return pad(new_in, len(ins)) + pad(new_aux, len(slots) - len(ins)) + pad(new_out, len(outs))
