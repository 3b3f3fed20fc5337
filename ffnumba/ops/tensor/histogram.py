"""``_histogram``: counts of values per bin (MXNet ``mx.nd.histogram`` / ``mx.sym.histogram``).

Two forms, as MXNet's:

* ``bin_cnt`` given: ``bin_cnt`` equal bins over ``range=(lo, hi)`` (default the
  data's min and max; ``(x - 0.5, x + 0.5)`` when they are equal); one input ``data``.
* ``bin_cnt`` left out: a second input ``bins`` holds the increasing edges.

Outputs: ``counts`` (int64, ``(n_bins,)``) and ``bin_edges`` (``(n_bins + 1,)``,
the data's dtype). A value ``v`` falls in bin ``j`` when
``edges[j] <= v < edges[j + 1]``; the last bin also takes ``v == edges[-1]``;
values outside ``[edges[0], edges[-1]]`` and NaN are not counted (numpy
``histogram`` semantics, which MXNet follows).

No gradient (MXNet registers none): backward writes zeros.
CPU: ``@njit`` loop with a binary search per value; GPU: ``@cuda.jit`` twin
with atomic adds.

Source: MXNet 1.9.1 ``src/operator/tensor/histogram.cc`` documentation and numpy
``histogram``.
"""
import numpy as np
from numba import njit

from ...base import ParamError, ShapeError
from ..params import Field, Params
from ..registry import OpDef, register_op
from ..templates import LazyCudaKernel, import_cuda, launch_1d

__all__ = ['HistogramParam']

cuda = None  # bound by import_cuda(globals()) on first GPU use


class HistogramParam(Params):
    """Parameters of _histogram."""

    bin_cnt = Field(int, None, 'Number of equal bins (None: the edges come from `bins`).', low=1)
    range = Field(tuple, None, '(lo, hi) of the equal bins (default: the data min and max).')

    def validate(self):
        if self.range is not None:
            try:
                lo, hi = (float(v) for v in self.range)
            except (TypeError, ValueError):
                lo, hi = 1.0, 0.0
            if not lo <= hi:
                raise ParamError('_histogram: `range` must be (lo, hi) with lo <= hi. '
                                 'Received: range=%r' % (self.range,))
            if self.bin_cnt is None:
                raise ParamError('_histogram: `range` needs `bin_cnt`; with `bins` edges '
                                 'leave it out. Received: range=%r' % (self.range,))


@njit(cache=True, nogil=True)
def _count_cpu(x, edges, counts):
    nb = edges.size - 1
    lo, hi = edges[0], edges[nb]
    for i in range(x.size):
        v = x[i]
        if not (v >= lo and v <= hi):
            continue
        a, b = 0, nb            # edges[a] <= v < edges[b]
        while b - a > 1:
            m = (a + b) // 2
            if v >= edges[m]:
                a = m
            else:
                b = m
        counts[a] += 1


def _build_gpu():
    import_cuda(globals())

    @cuda.jit
    def count(x, edges, counts):
        nb = edges.size - 1
        lo, hi = edges[0], edges[nb]
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, x.size, stride):
            v = x[i]
            if v >= lo and v <= hi:
                a, b = 0, nb
                while b - a > 1:
                    m = (a + b) // 2
                    if v >= edges[m]:
                        a = m
                    else:
                        b = m
                cuda.atomic.add(counts, a, 1)

    return count


_GPU = LazyCudaKernel(_build_gpu)


def _args(p):
    return ['data'] if p.bin_cnt is not None else ['data', 'bins']


def _infer_shape(p, in_shapes, aux_shapes, out_shapes):
    ins = list(in_shapes)
    if p.bin_cnt is not None:
        return ins, [(p.bin_cnt,), (p.bin_cnt + 1,)], []
    b = ins[1]
    if b is None:
        return ins, [None, None], []
    if len(b) != 1 or b[0] < 2:
        raise ShapeError('_histogram: `bins` must be 1-D with at least 2 edges. Received: '
                         'shape %s' % (tuple(b),))
    return ins, [(b[0] - 1,), (b[0],)], []


def _infer_type(p, in_types, aux_types):
    t = in_types[0]
    return list(in_types), [np.dtype(np.int64), t], []


def _edges(p, x, bins):
    """The bin edges (float64, host) for data ``x`` (host array)."""
    if p.bin_cnt is None:
        e = np.asarray(bins, np.float64)
        if np.any(np.diff(e) < 0):
            raise ParamError('_histogram: `bins` edges must increase monotonically')
        return e
    if p.range is not None:
        lo, hi = float(p.range[0]), float(p.range[1])
    elif x.size:
        lo, hi = float(np.nanmin(x)), float(np.nanmax(x))
    else:
        lo, hi = 0.0, 1.0
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return np.linspace(lo, hi, p.bin_cnt + 1)


def _forward_cpu(ctx, p, inputs, outputs, aux):
    x = inputs[0].reshape(-1)
    x = x.astype(np.float32) if x.dtype == np.float16 else x
    edges = _edges(p, x, inputs[1] if len(inputs) > 1 else None)
    counts = np.zeros(edges.size - 1, np.int64)
    _count_cpu(x, edges.astype(x.dtype), counts)
    outputs[0][...] = counts
    outputs[1][...] = edges


def _forward_gpu(ctx, p, inputs, outputs, aux):
    from numba import cuda as _cuda
    x = inputs[0]
    need_host = p.bin_cnt is None or p.range is None
    host = x.copy_to_host().reshape(-1) if need_host else np.zeros(0, x.dtype)
    edges = _edges(p, host, inputs[1].copy_to_host() if len(inputs) > 1 else None)
    counts = _cuda.to_device(np.zeros(edges.size - 1, np.int64))
    if x.size:
        launch_1d(_GPU.kernel, x.size, x.reshape(x.size),
                  _cuda.to_device(edges.astype(np.dtype(x.dtype))), counts)
    outputs[0].copy_to_device(counts)
    outputs[1].copy_to_device(edges.astype(outputs[1].dtype))


def _backward(dev):
    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        for g, r in zip(in_grads, req):
            if r == 'write':
                if dev == 'cpu':
                    g[...] = 0
                else:
                    g.copy_to_device(np.zeros(g.shape, g.dtype))
    return backward


register_op(OpDef(
    name='_histogram', arguments=_args, infer_shape=_infer_shape, infer_type=_infer_type,
    outputs=['counts', 'bin_edges'],
    forward={'cpu': _forward_cpu, 'gpu': _forward_gpu},
    backward={'cpu': _backward('cpu'), 'gpu': _backward('gpu')}, params=HistogramParam,
    doc=__doc__,
    input_docs={'data': 'Values (any shape; flattened).',
                'bins': 'Increasing bin edges (only without `bin_cnt`).'}))
