"""Run a float kernel on integer or bool arrays: compute in float64, cast at the edges.

Some scalar bodies cannot be compiled for integer operands: ``x ** n`` with an
integer exponent makes LLVM emit a call to ``__powidf2`` (under the kernels'
fast-math flags even ``float(x) ** float(n)`` is folded back to it), which
numba does not link, and the process aborts. :func:`float64_compute` wraps
an op's CPU forward/backward so such inputs reach the kernel as float64
copies; results are cast back to the arrays' dtypes (numpy's ``astype``:
truncation toward zero for ints, non-zero -> True for bool).
"""
import numpy as np

from ..jit import passthrough

__all__ = ['float64_compute']


def _needs(arrays):
    return any(a is not None and a.dtype.kind not in 'fc' for a in arrays)


def _up(a, copy_values=True):
    if a is None or a.dtype.kind == 'f':
        return a
    return a.astype(np.float64) if copy_values else np.empty(a.shape, np.float64)


def _down(dst, src):
    if dst is not None and src is not dst:
        with np.errstate(invalid='ignore', over='ignore'):
            dst[...] = src.astype(dst.dtype)


def float64_compute(forward, backward):
    """Wrap the ``'cpu'`` entries of an op's forward/backward dicts (in place).

    Parameters
    ----------
    forward, backward : dict
        ``{'cpu': fn, ...}`` following the registry's compute contract.

    Returns
    -------
    (forward, backward) : the same dicts, whose CPU functions pass float
    arrays through untouched and integer/bool arrays as float64 copies.
    """
    fwd, bwd = forward['cpu'], backward['cpu']

    def fwd_cpu(ctx, p, inputs, outputs, aux):
        if not _needs(list(inputs) + list(outputs)):
            return fwd(ctx, p, inputs, outputs, aux)
        outs = [_up(o, False) for o in outputs]
        fwd(ctx, p, [_up(a) for a in inputs], outs, aux)
        for o, o64 in zip(outputs, outs):
            _down(o, o64)

    def bwd_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        arrays = list(out_grads) + list(inputs) + list(outputs) + list(in_grads)
        if not _needs(arrays):
            return bwd(ctx, p, out_grads, inputs, outputs, in_grads, req, aux)
        igs = [_up(g, r == 'add') for g, r in zip(in_grads, req)]
        bwd(ctx, p, [_up(g) for g in out_grads], [_up(a) for a in inputs],
            [_up(o) for o in outputs], igs, req, aux)
        for g, g64 in zip(in_grads, igs):
            _down(g, g64)

    fwd_cpu.__wrapped__, bwd_cpu.__wrapped__ = fwd, bwd
    passthrough(fwd_cpu, fwd, lambda inputs, outputs, aux: not _needs(list(inputs) + list(outputs)))
    passthrough(bwd_cpu, bwd, lambda og, inputs, outputs, igs, req, aux:
                not _needs(list(og) + list(inputs) + list(outputs) + list(igs)))
    for attr in ('kernels',):
        if hasattr(fwd, attr):
            setattr(fwd_cpu, attr, getattr(fwd, attr))
    forward['cpu'], backward['cpu'] = fwd_cpu, bwd_cpu
    return forward, backward
