"""``gather_nd``: pick slices of ``data`` by index tuples (MXNet ``gather_nd``).

Math
----
With ``indices`` of shape ``(M, Y0, ..., Yk)`` and ``data`` of shape
``(X0, ..., X{n-1})``, ``M <= n``::

    out[y0, ..., yk, x_M, ..., x_{n-1}] =
        data[indices[0, y], ..., indices[M-1, y], x_M, ..., x_{n-1}]

Output shape ``(Y0, ..., Yk, X_M, ..., X_{n-1})``. Index values are read as
integers (float indices truncate toward 0, as MXNet casts them); a negative
index counts from the end (``-1`` the last), one outside ``[-X_m, X_m)``
raises :class:`GatherIndexError` (an ``IndexError``), as MXNet 1.9.1 does.

The gradient of ``data`` scatter-adds the head gradient back to the picked
positions (repeated index tuples add up); ``indices`` gets none (zeros).
CPU: ``@njit`` loops; GPU: ``@cuda.jit`` twins (atomic adds in the backward).

Source: MXNet 1.9.1 ``gather_nd`` documentation (``src/operator/tensor/indexing_op.cc``).
"""
import numpy as np
from numba import njit

from ...base import FFError, ShapeError
from ..registry import OpDef, register_op
from ..templates import LazyCudaKernel, import_cuda, launch_1d

__all__ = ['GatherIndexError']

cuda = None  # bound by import_cuda(globals()) on first GPU use


class GatherIndexError(FFError, IndexError):
    """An index of ``gather_nd`` outside its axis (an ``IndexError``, as in MXNet)."""


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    d, i = in_shapes
    if d is None or i is None:
        return list(in_shapes), [None], []
    if len(i) < 1 or i[0] < 1 or i[0] > len(d):
        raise ShapeError('gather_nd: indices must have shape (M, ...) with 1 <= M <= data.ndim '
                         '= %d. Received: data shape %s, indices shape %s'
                         % (len(d), tuple(d), tuple(i)))
    return [tuple(d), tuple(i)], [tuple(i[1:]) + tuple(d[i[0]:])], []


def _infer_type(p, in_types, aux_types):
    return list(in_types), [in_types[0]], []


def _offsets(data_shape, idx):
    """Flat element offsets (in units of the trailing block) of each index tuple, checked."""
    m = idx.shape[0]
    cols = np.trunc(idx.reshape(m, -1).astype(np.float64)).astype(np.int64)
    lead = np.asarray(data_shape[:m], np.int64)
    bad = (cols < -lead[:, None]) | (cols >= lead[:, None])
    if bad.any():
        a, j = np.argwhere(bad)[0]
        raise GatherIndexError('gather_nd: `indices` holds %d for axis %d of `data`, outside '
                               '[-%d, %d). Received: data shape %s'
                               % (cols[a, j], a, lead[a], lead[a], tuple(data_shape)))
    cols = np.where(cols < 0, cols + lead[:, None], cols)
    strides = np.ones(m, np.int64)
    for a in range(m - 2, -1, -1):
        strides[a] = strides[a + 1] * lead[a + 1]
    return np.ascontiguousarray((cols * strides[:, None]).sum(axis=0))


@njit(cache=True, nogil=True)
def _gather_cpu(x, offs, block, out):
    for r in range(offs.size):
        s, o = offs[r] * block, r * block
        for j in range(block):
            out[o + j] = x[s + j]


@njit(cache=True, nogil=True)
def _scatter_cpu(og, offs, block, g):
    for r in range(offs.size):
        s, o = offs[r] * block, r * block
        for j in range(block):
            g[s + j] += og[o + j]


def _build_gpu():
    import_cuda(globals())

    @cuda.jit
    def gather(x, offs, block, out):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, out.size, stride):
            out[i] = x[offs[i // block] * block + i % block]

    @cuda.jit
    def scatter(og, offs, block, g):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, og.size, stride):
            cuda.atomic.add(g, offs[i // block] * block + i % block, og[i])

    return gather, scatter


_GPU = LazyCudaKernel(_build_gpu)


def _block(data_shape, m):
    return int(np.prod(data_shape[m:], dtype=np.int64))


def _host_idx(a):
    return a if isinstance(a, np.ndarray) else a.copy_to_host()


def _forward_cpu(ctx, p, inputs, outputs, aux):
    x, idx = inputs
    offs = _offsets(x.shape, idx)
    out = outputs[0].reshape(-1)
    block = _block(x.shape, idx.shape[0])
    if x.dtype == np.float16:     # float16 stays out of njit: gather the raw bits
        _gather_cpu(x.reshape(-1).view(np.uint16), offs, block, out.view(np.uint16))
    else:
        _gather_cpu(x.reshape(-1), offs, block, out)


def _backward_cpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    x, idx = inputs
    if req[1] == 'write':
        in_grads[1][...] = 0
    if req[0] == 'null':
        return
    g = in_grads[0]
    if req[0] == 'write':
        g[...] = 0
    offs = _offsets(x.shape, idx)
    block = _block(x.shape, idx.shape[0])
    if g.dtype == np.float16:
        acc = g.reshape(-1).astype(np.float32)
        _scatter_cpu(out_grads[0].reshape(-1).astype(np.float32), offs, block, acc)
        g.reshape(-1)[...] = acc
    else:
        _scatter_cpu(out_grads[0].reshape(-1), offs, block, g.reshape(-1))


def _forward_gpu(ctx, p, inputs, outputs, aux):
    x, idx = inputs
    from numba import cuda as _cuda
    offs = _cuda.to_device(_offsets(x.shape, _host_idx(idx)))
    gather, _ = _GPU.kernel
    out = outputs[0]
    if out.size:
        launch_1d(gather, out.size, x.reshape(x.size), offs, _block(x.shape, idx.shape[0]),
                  out.reshape(out.size))


def _backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
    x, idx = inputs
    if req[1] == 'write':
        in_grads[1].copy_to_device(np.zeros(in_grads[1].shape, in_grads[1].dtype))
    if req[0] == 'null':
        return
    g = in_grads[0]
    if req[0] == 'write':
        g.copy_to_device(np.zeros(g.shape, g.dtype))
    from numba import cuda as _cuda
    offs = _cuda.to_device(_offsets(x.shape, _host_idx(idx)))
    _, scatter = _GPU.kernel
    og = out_grads[0]
    if og.size:
        launch_1d(scatter, og.size, og.reshape(og.size), offs, _block(x.shape, idx.shape[0]),
                  g.reshape(g.size))


register_op(OpDef(
    name='gather_nd', arguments=['data', 'indices'], backward_reads=('indices',), infer_shape=_infer_shape,
    infer_type=_infer_type,
    forward={'cpu': _forward_cpu, 'gpu': _forward_gpu},
    backward={'cpu': _backward_cpu, 'gpu': _backward_gpu},
    doc=__doc__,
    input_docs={'data': 'Array to pick from, shape (X0, ..., X{n-1}).',
                'indices': 'Index tuples along the first axis, shape (M, Y0, ..., Yk).'}))
