"""Operators on empty outputs: nothing to compute, and the gradient is zero.

When every output of an operator has zero elements (a batch of 0 rows, a
zero-length axis kept in the output), the forward has nothing to write and
the backward's result is exactly zero: each input gradient is a sum over no
output elements. :func:`guard_empty` wraps an op's forward/backward so that
kernels (which assume at least one element: ``x.reshape(n, -1)``, an index
0 read before a loop) never run on such calls. Ops whose output is
non-empty while an input is empty (``sum`` over a zero-length axis,
``Concat`` with an empty piece) handle that case themselves.
"""
import numpy as np

from ..jit import passthrough

__all__ = ['guard_empty']


def _all_empty(outputs):
    return bool(outputs) and all(o is not None and o.size == 0 for o in outputs)


def _zero(g):
    if isinstance(g, np.ndarray):
        g[...] = 0
    elif g.size:                    # a device array
        from .templates import fill_gpu
        fill_gpu.launch(g.size, g.reshape(-1), 0)


def guard_empty(forward, backward):
    """``(forward, backward)`` that skip the kernels when every output is empty.

    The backward then writes zeros into ``'write'`` gradients and leaves
    ``'add'`` gradients as they are (adding zero).
    """
    def fwd(ctx, p, inputs, outputs, aux):
        if _all_empty(outputs):
            return
        return forward(ctx, p, inputs, outputs, aux)

    def bwd(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        if _all_empty(outputs):
            for g, r in zip(in_grads, req):
                if g is not None and r == 'write':
                    _zero(g)
            return
        return backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux)

    fwd.__wrapped__, bwd.__wrapped__ = forward, backward
    passthrough(fwd, forward, lambda inputs, outputs, aux: not _all_empty(outputs))
    passthrough(bwd, backward, lambda og, inputs, outputs, *rest: not _all_empty(outputs))
    return fwd, bwd
