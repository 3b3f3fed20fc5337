"""Legacy row-indexed writes: ``fill_element_0index`` and ``_onehot_encode``
(MXNet's ``mx.nd.fill_element_0index`` and ``mx.nd.onehot_encode``).

Math (``lhs`` of shape ``(N, K)``, index vectors of length ``N``)
-----------------------------------------------------------------
::

    fill_element_0index(lhs, mhs, rhs):  out = lhs;  out[i, rhs[i]] = mhs[i]
    _onehot_encode(lhs, rhs):            out = zeros(rhs.shape); out[i, lhs[i]] = 1

Indices are read as integers (truncated toward 0, as MXNet casts them) and
must lie in ``[0, K)``; anything else is a ParamError naming the row.
``_onehot_encode``'s ``rhs`` only gives the output shape (MXNet's Python
``onehot_encode(indices, out)`` passes ``out`` there and as the output).

Gradients: ``fill_element_0index`` passes the head gradient to ``lhs`` except
at the written positions, and gives ``mhs[i]`` the head gradient at
``(i, rhs[i])``; the index inputs and ``_onehot_encode`` get none (zeros).
CPU: ``@njit`` row loops; GPU: ``@cuda.jit`` twins.

Source: MXNet 1.9.1 ``src/ndarray/ndarray_function.cc`` (legacy
``fill_element_0index``, ``_onehot_encode``) and its Python wrappers.
"""
import numpy as np
from numba import njit

from ...base import ParamError, ShapeError
from ..registry import OpDef, register_op
from ..templates import LazyCudaKernel, import_cuda, launch_1d

cuda = None  # bound by import_cuda(globals()) on first GPU use


def _host(a):
    return a if isinstance(a, np.ndarray) else a.copy_to_host()


def _columns(name, idx, n, k):
    cols = np.trunc(_host(idx).astype(np.float64)).astype(np.int64).reshape(-1)
    bad = np.flatnonzero((cols < 0) | (cols >= k))
    if bad.size:
        raise ParamError('%s: index %d of row %d is outside [0, %d)' % (name, cols[bad[0]],
                                                                       bad[0], k))
    return np.ascontiguousarray(cols[:n])


@njit(cache=True, nogil=True)
def _put_rows(out, cols, vals, use_vals):
    for i in range(cols.size):
        out[i, cols[i]] = vals[i] if use_vals else 1.0


@njit(cache=True, nogil=True)
def _take_rows(g, cols, dst, clear):
    for i in range(cols.size):
        dst[i] += g[i, cols[i]]
        if clear:
            g[i, cols[i]] = 0.0


def _build_gpu():
    import_cuda(globals())

    @cuda.jit
    def put_rows(out, cols, vals, use_vals):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, cols.size, stride):
            out[i, cols[i]] = vals[i] if use_vals else 1.0

    @cuda.jit
    def take_rows(g, cols, dst, clear):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, cols.size, stride):
            dst[i] += g[i, cols[i]]
            if clear:
                g[i, cols[i]] = 0.0

    return put_rows, take_rows


_GPU = LazyCudaKernel(_build_gpu)


def _as32(a):
    return a.astype(np.float32) if a.dtype == np.float16 else a


# ------------------------------------------------------------------ fill_element_0index
def _fill_shape(p, in_shapes, aux_shapes, out_shapes):
    lhs, mhs, rhs = in_shapes
    if lhs is None:
        return list(in_shapes), [None], []
    if len(lhs) != 2:
        raise ShapeError('fill_element_0index: lhs must be 2-D. Received: shape %s'
                         % (tuple(lhs),))
    for nm, s in (('mhs', mhs), ('rhs', rhs)):
        if s is not None and tuple(s) != (lhs[0],):
            raise ShapeError('fill_element_0index: %s must have shape (%d,). Received: %s'
                             % (nm, lhs[0], tuple(s)))
    return [tuple(lhs), (lhs[0],), (lhs[0],)], [tuple(lhs)], []


def _fill_fwd(dev):
    def forward(ctx, p, inputs, outputs, aux):
        lhs, mhs, rhs = inputs
        out = outputs[0]
        cols = _columns('fill_element_0index', rhs, lhs.shape[0], lhs.shape[1])
        if dev == 'cpu':
            host = _as32(lhs.copy())
            _put_rows(host, cols, _as32(mhs), True)
            out[...] = host
            return
        from numba import cuda as _cuda
        out.copy_to_device(lhs)
        if cols.size:
            launch_1d(_GPU.kernel[0], cols.size, out, _cuda.to_device(cols), mhs, True)
    return forward


def _fill_bwd(dev):
    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        lhs, mhs, rhs = inputs
        cols = _columns('fill_element_0index', rhs, lhs.shape[0], lhs.shape[1])
        og = _as32(_host(out_grads[0])).copy()
        picked = np.zeros(cols.size, og.dtype)
        _take_rows(og, cols, picked, True)    # og now zero at the written positions
        for g, r, val in zip(in_grads, req, (og, picked, np.zeros(cols.size, og.dtype))):
            if r == 'null':
                continue
            if dev == 'cpu':
                g[...] = val if r == 'write' else g + val
            else:
                g.copy_to_device((val if r == 'write' else g.copy_to_host() + val)
                                 .astype(g.dtype))
    return backward


register_op(OpDef(
    name='fill_element_0index', arguments=['lhs', 'mhs', 'rhs'], infer_shape=_fill_shape,
    forward={d: _fill_fwd(d) for d in ('cpu', 'gpu')},
    backward={d: _fill_bwd(d) for d in ('cpu', 'gpu')},
    doc='A copy of `lhs` with out[i, rhs[i]] = mhs[i].\n',
    input_docs={'lhs': 'Matrix (N, K).', 'mhs': 'Values (N,).',
                'rhs': 'Column indices (N,) in [0, K).'}))


# ------------------------------------------------------------------ _onehot_encode
def _onehot_shape(p, in_shapes, aux_shapes, out_shapes):
    lhs, rhs = in_shapes
    if rhs is None:
        return list(in_shapes), [None], []
    if len(rhs) != 2 or (lhs is not None and tuple(lhs) != (rhs[0],)):
        raise ShapeError('_onehot_encode: needs indices (N,) and a 2-D (N, K) array. '
                         'Received: %s, %s' % (lhs, tuple(rhs)))
    return [(rhs[0],), tuple(rhs)], [tuple(rhs)], []


def _onehot_fwd(dev):
    def forward(ctx, p, inputs, outputs, aux):
        idx, out = inputs[0], outputs[0]
        cols = _columns('onehot_encode', idx, out.shape[0], out.shape[1])
        if dev == 'cpu':
            host = np.zeros(out.shape, np.float32 if out.dtype == np.float16 else out.dtype)
            _put_rows(host, cols, host[:, 0], False)
            out[...] = host
            return
        from numba import cuda as _cuda
        out.copy_to_device(np.zeros(out.shape, out.dtype))
        if cols.size:
            launch_1d(_GPU.kernel[0], cols.size, out, _cuda.to_device(cols), out[:, 0], False)
    return forward


def _zero_grads(dev):
    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        for g, r in zip(in_grads, req):
            if r == 'write':
                if dev == 'cpu':
                    g[...] = 0
                else:
                    g.copy_to_device(np.zeros(g.shape, g.dtype))
    return backward


register_op(OpDef(
    name='_onehot_encode', arguments=['lhs', 'rhs'], infer_shape=_onehot_shape,
    forward={d: _onehot_fwd(d) for d in ('cpu', 'gpu')},
    backward={d: _zero_grads(d) for d in ('cpu', 'gpu')},
    doc='One-hot rows: out[i, lhs[i]] = 1, zeros elsewhere; `rhs` gives the shape.\n',
    input_docs={'lhs': 'Indices (N,).', 'rhs': 'Any (N, K) array: the output shape.'}))
