"""``diag``: a diagonal of an array, or a matrix built from a vector (MXNet ``diag``).

Math
----
* data of rank >= 2: ``out[..., j] = data[..., r0 + j, ..., c0 + j, ...]`` along
  ``axis1``/``axis2`` (numpy ``diagonal(data, k, axis1, axis2)``: the two axes
  are removed and the diagonal becomes the last axis), with ``r0 = max(-k, 0)``,
  ``c0 = max(k, 0)``; its length ``min(n1 - r0, n2 - c0)`` must be > 0.
* data of rank 1 (length ``n``): the ``(n + |k|, n + |k|)`` matrix with ``data``
  on diagonal ``k`` and zeros elsewhere (numpy ``diag(v, k)``).

The gradient moves the head gradient back to the diagonal (zeros elsewhere),
or reads the diagonal of the head gradient for rank 1. Both directions run on
the axis-map gather of :mod:`ffnumba.ops.tensor._axismap` (CPU ``@njit``,
``@cuda.jit`` twin).

Errors: ``axis1 == axis2`` or an axis out of range is a ParamError/ShapeError;
an empty diagonal (``|k|`` too large) is a ShapeError, as MXNet refuses it.

Source: MXNet 1.9.1 ``diag`` documentation (``src/operator/tensor/diag_op.cc``).
"""
import functools

import numpy as np

from ...base import ShapeError
from ..params import Field, Params
from ..registry import OpDef, register_op
from ._axismap import Plan, cstrides, gather_backward, gather_forward, is_gpu

__all__ = ['DiagParam']


class DiagParam(Params):
    """Parameters of diag."""

    k = Field(int, 0, 'Diagonal: 0 the main one, > 0 above it, < 0 below it.')
    axis1 = Field(int, 0, 'First axis of the 2-D planes the diagonal is taken from.')
    axis2 = Field(int, 1, 'Second axis of the 2-D planes the diagonal is taken from.')


def _axes(axis1, axis2, nd):
    a1, a2 = axis1, axis2
    for name, a in (('axis1', a1), ('axis2', a2)):
        if not -nd <= a < nd:
            raise ShapeError('diag: `%s`=%d is out of range for data of rank %d'
                             % (name, a, nd))
    a1, a2 = a1 % nd, a2 % nd
    if a1 == a2:
        raise ShapeError('diag: `axis1` and `axis2` must differ. Received: axis1=%d, axis2=%d'
                         % (axis1, axis2))
    return a1, a2


def _out_shape(k, axis1, axis2, d):
    if len(d) == 0:
        raise ShapeError('diag: data must have at least 1 dimension. Received: shape ()')
    if len(d) == 1:
        m = d[0] + abs(k)
        return (m, m)
    a1, a2 = _axes(axis1, axis2, len(d))
    n = min(d[a1] - max(-k, 0), d[a2] - max(k, 0))
    if n <= 0:
        raise ShapeError('diag: diagonal k=%d is empty for data of shape %s (axis1=%d, axis2=%d)'
                         % (k, tuple(d), axis1, axis2))
    return tuple(s for i, s in enumerate(d) if i not in (a1, a2)) + (n,)


@functools.lru_cache(maxsize=64)
def _plan(k, axis1, axis2, d):
    """Gather of the diagonal of an array of shape ``d`` (rank >= 2)."""
    a1, a2 = _axes(axis1, axis2, len(d))
    st = cstrides(d)
    n = _out_shape(k, axis1, axis2, d)[-1]
    j = np.arange(n)
    maps = [np.arange(s) * st[i] for i, s in enumerate(d) if i not in (a1, a2)]
    maps.append((j + max(-k, 0)) * st[a1] + (j + max(k, 0)) * st[a2])
    return Plan(maps, [1] * len(maps))


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    d = in_shapes[0]
    if d is None:
        return [None], [None], []
    return [tuple(d)], [_out_shape(p.k, p.axis1, p.axis2, d)], []


def _forward(ctx, p, inputs, outputs, aux):
    x, out = inputs[0], outputs[0]
    if x.ndim == 1:   # scatter the vector onto diagonal k of a zeroed matrix
        gather_backward(_plan(p.k, 0, 1, tuple(out.shape)), x, out, 'write')
    else:
        gather_forward(_plan(p.k, p.axis1, p.axis2, tuple(x.shape)), x, out)


def _backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    x, og, ig = inputs[0], out_grads[0], in_grads[0]
    if x.ndim > 1:
        gather_backward(_plan(p.k, p.axis1, p.axis2, tuple(x.shape)), og, ig, req[0])
        return
    if req[0] == 'null':
        return
    plan = _plan(p.k, 0, 1, tuple(og.shape))
    if req[0] == 'write':
        gather_forward(plan, og, ig)
    elif is_gpu(ig):        # 'add' on a device: gather into a scratch array, add on the host
        from numba import cuda as _cuda
        tmp = _cuda.device_array(ig.shape, ig.dtype)
        gather_forward(plan, og, tmp)
        ig.copy_to_device(ig.copy_to_host() + tmp.copy_to_host())
    else:
        tmp = np.empty_like(ig)
        gather_forward(plan, og, tmp)
        ig += tmp


register_op(OpDef(
    name='diag', arguments=['data'], backward_reads=(), infer_shape=_infer_shape,
    forward={'cpu': _forward, 'gpu': _forward}, backward={'cpu': _backward, 'gpu': _backward},
    params=DiagParam, doc=__doc__,
    input_docs={'data': 'A vector (builds a matrix) or an array of rank >= 2.'}))
