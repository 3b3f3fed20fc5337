"""Embedding lookup (``Embedding``).

Math::

    k   = clip(trunc(data[j]), 0, input_dim - 1)      (float indices, cast toward 0)
    out[j, :] = weight[k, :]
    d weight[k, :] = sum over j with index k of g[j, :]   (scatter-add)

Out-of-range indices are clipped into ``[0, input_dim - 1]`` as MXNet 1.9.1
does (checked: ``-1 -> 0``, ``100 -> input_dim - 1``, ``1.7 -> 1``; ``inf``
and huge values give the last row). A NaN index raises
:class:`~ffnumba.base.ParamError`. ``data``
gets no gradient (written as zeros for ``grad_req='write'``). ``sparse_grad`` is
accepted; the weight gradient is always dense.
On a GPU the scatter-add uses atomic adds (the summation order varies).

Shapes
------
=======  =============================  ======================================
input    shape                          note
=======  =============================  ======================================
data     any                            indices (float or int dtype)
weight   (input_dim, output_dim)        auto-created ``{name}_weight``
output   data.shape + (output_dim,)     dtype of the weight (default ``dtype``)
=======  =============================  ======================================

Source: MXNet 1.9.1 Embedding documentation and observed behaviour.
"""
import numpy as np
from numba import njit

from ...base import ParamError
from ..params import Params, Field
from ..registry import OpDef, register_op, shape_assign
from ..templates import JIT, LazyCudaKernel, f16_safe, fill_gpu, import_cuda, launch_1d

cuda = None  # bound by import_cuda(globals()) on first GPU use
__all__ = ['EmbeddingParam']


class EmbeddingParam(Params):
    """Parameters of Embedding."""

    input_dim = Field(int, doc='Vocabulary size: rows of the weight.', low=1)
    output_dim = Field(int, doc='Embedding size: columns of the weight.', low=1)
    dtype = Field('dtype', 'float32', 'dtype of the weight and the output.')
    sparse_grad = Field(bool, False, 'Accepted; the gradient is always dense here.')


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    if ins[0] is None and out_shapes and out_shapes[0] is not None:
        ins[0] = tuple(out_shapes[0])[:-1]
    shape_assign(ins, 1, (p.input_dim, p.output_dim), 'weight')
    out = None if ins[0] is None else tuple(ins[0]) + (p.output_dim,)
    return ins, [out], list(aux_shapes)


def _infer_type(p, in_types, aux_types):
    """weight: its given dtype, else ``dtype``; output follows the weight (MXNet)."""
    ins = list(in_types)
    if ins[1] is None:
        ins[1] = np.dtype(p.dtype)
    if ins[0] is None:
        ins[0] = np.dtype('float32')
    return ins, [np.dtype(ins[1])], list(aux_types)


@njit
def _row(v, n_rows):
    """Row of index value ``v``: truncated toward 0, clipped into ``[0, n_rows - 1]``.

    Clips before the int conversion, so huge floats (and inf) land on the last
    row instead of overflowing.
    """
    if v >= n_rows - 1:
        return n_rows - 1
    if v > 0:
        return int(v)
    return 0


@njit(**JIT)
def _gather(idx, w, out):
    n_rows, dim = w.shape
    for j in range(idx.size):
        k = _row(idx[j], n_rows)
        for d in range(dim):
            out[j, d] = w[k, d]


@njit(**JIT)
def _scatter_add(idx, og, gw, add):
    n_rows, dim = gw.shape
    if not add:
        for k in range(n_rows):
            for d in range(dim):
                gw[k, d] = 0.0
    for j in range(idx.size):
        k = _row(idx[j], n_rows)
        for d in range(dim):
            gw[k, d] += og[j, d]


def _check_indices(ctx, idx):
    """NaN has no row: refuse it rather than read an arbitrary one."""
    if idx.dtype.kind == 'f' and np.isnan(idx).any():
        j = int(np.flatnonzero(np.isnan(idx.reshape(-1)))[0])
        raise ParamError('Embedding (node %s): `data` holds NaN at flat index %d (shape %s); '
                         'indices must be numbers' % (ctx.node_name, j, tuple(idx.shape)))


@f16_safe
def _forward_cpu(ctx, p, inputs, outputs, aux):
    idx, w = inputs
    _check_indices(ctx, idx)
    _gather(idx.reshape(-1), w, outputs[0].reshape(idx.size, p.output_dim))


@f16_safe
def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    idx, w = inputs
    if req[0] == 'write':
        in_grads[0][...] = 0
    if req[1] != 'null':
        _scatter_add(idx.reshape(-1), out_grads[0].reshape(idx.size, p.output_dim),
                     in_grads[1], req[1] == 'add')


def _build_gpu():
    import_cuda(globals())

    @cuda.jit
    def gather(idx, w, out):
        n_rows, dim = w.shape
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for e in range(start, out.size, stride):
            j, d = e // dim, e % dim
            k = _row(idx[j], n_rows)
            out[j, d] = w[k, d]

    @cuda.jit
    def scatter_add(idx, og, gw):
        n_rows, dim = gw.shape
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for e in range(start, og.size, stride):
            j, d = e // dim, e % dim
            k = _row(idx[j], n_rows)
            cuda.atomic.add(gw, (k, d), og[j, d])

    return gather, scatter_add


_GPU = LazyCudaKernel(_build_gpu)


def _forward_gpu(ctx, p, inputs, outputs, aux):
    gather, _ = _GPU.kernel
    idx, w = inputs
    if np.dtype(idx.dtype).kind == 'f':
        _check_indices(ctx, idx.copy_to_host())
    out = outputs[0].reshape(idx.size, p.output_dim)
    launch_1d(gather, out.size, idx.reshape(idx.size), w, out)


def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    _, scatter_add = _GPU.kernel
    idx, w = inputs
    if req[0] == 'write':
        fill_gpu.launch(idx.size, in_grads[0].reshape(idx.size), 0)
    if req[1] != 'null':
        if req[1] == 'write':
            fill_gpu.launch(w.size, in_grads[1].reshape(w.size), 0)
        og = out_grads[0].reshape(idx.size, p.output_dim)
        launch_1d(scatter_add, og.size, idx.reshape(idx.size), og, in_grads[1])


register_op(OpDef(
    name='Embedding',
    backward_reads=('data',),   # the indices; dW scatters dy
    float_only=('weight',),
    arguments=['data', 'weight'],
    params=EmbeddingParam,
    infer_shape=_infer_shape,
    infer_type=_infer_type,
    forward={'cpu': _forward_cpu, 'gpu': _forward_gpu},
    backward={'cpu': _backward_cpu, 'gpu': _backward_gpu},
    doc=__doc__,
    input_docs={'data': 'Indices, any shape.',
                'weight': 'Embedding table (input_dim, output_dim).'},
))
