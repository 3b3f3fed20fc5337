"""Axis-map gathers: one engine behind slice, flip, tile, repeat, broadcast, Pad, take...

Many index and shape ops read every output element from one input element
chosen axis by axis. With an output of shape ``(n_0, ..., n_{k-1})``, a map
``m_d`` of length ``n_d`` per output axis and a source stride ``s_d`` per
output axis (in elements of the flat, C-contiguous input)::

    out[i_0, ..., i_{k-1}] = x[sum_d m_d[i_d] * s_d]      (fill if some m_d[i_d] < 0)
    d x[sum_d m_d[i_d] * s_d] += d out[i_0, ..., i_{k-1}]  (scatter-add; fills get none)

Examples: ``slice`` maps ``range(begin, end, step)``; ``reverse`` a reversed
range; ``tile`` ``i % d``; ``repeat`` ``i // r``; broadcasting ``0``; ``Pad``
``-1`` for a constant border, clamped or reflected indices otherwise;
``take`` the (clipped or wrapped) index values; ``SwapAxis`` permutes the
strides. Several output elements may read one input element (tile, repeat,
broadcast, edge padding, repeated take indices), so the backward adds: a
sequential loop on the CPU, atomic adds on the GPU (summation order varies).

A :class:`Plan` holds the maps; :func:`gather_forward` / :func:`gather_backward`
run it on either device and honour ``grad_req`` (``'write'`` zeroes the
gradient first, ``'add'`` accumulates, ``'null'`` does nothing).
"""
import functools

import numpy as np
from numba import njit

from ..templates import JIT, LazyCudaKernel, fill_gpu, import_cuda, launch_1d

cuda = None  # bound by import_cuda(globals()) on first GPU use

__all__ = ['Plan', 'cstrides', 'gather_forward', 'gather_backward', 'is_gpu']


def cstrides(shape):
    """C-order strides of ``shape``, in elements."""
    st, acc = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        st[d] = acc
        acc *= int(shape[d])
    return st


class Plan:
    """Per-output-axis maps and source strides of one gather.

    Parameters
    ----------
    maps : list of 1-D int arrays
        ``maps[d][i]``: index along the source axis read by output index ``i``
        of axis ``d`` (negative: the fill value).
    strides : list of int
        Source stride (elements) of each output axis.
    """

    __slots__ = ('shape', 'maps', 'offsets', 'strides', 'size', 'device_copies')

    def __init__(self, maps, strides):
        maps = [np.asarray(m, np.int64).reshape(-1) for m in maps]
        self.shape = np.array([m.size for m in maps], np.int64)
        self.offsets = np.zeros(len(maps), np.int64)
        if len(maps) > 1:
            self.offsets[1:] = np.cumsum(self.shape[:-1])
        self.maps = np.concatenate(maps) if maps else np.zeros(0, np.int64)
        if not self.maps.size:
            self.maps = np.zeros(1, np.int64)     # numba wants a non-empty buffer shape
        self.strides = np.array(strides, np.int64).reshape(-1)
        self.size = int(np.prod(self.shape)) if len(maps) else 1
        self.device_copies = {}      # device id -> the four arrays on that GPU


@njit(**JIT)
def _row_base(idx, last, offs, maps, strides):
    """Source offset of the row ``idx[:last]`` (-1: the row is fill)."""
    s = 0
    for d in range(last):
        m = maps[offs[d] + idx[d]]
        if m < 0:
            return -1
        s += m * strides[d]
    return s


@njit(**JIT)
def _next_row(idx, last, shape):
    for d in range(last - 1, -1, -1):
        idx[d] += 1
        if idx[d] < shape[d]:
            return
        idx[d] = 0


@njit(**JIT)
def _gather_cpu(x, out, shape, offs, maps, strides, fill):
    # rows of the last output axis: outer axes resolved once per row, then a tight loop
    last = shape.size - 1
    if last < 0:
        out[0] = x[0]
        return
    n, lo, st = shape[last], offs[last], strides[last]
    if n == 0:
        return
    idx = np.zeros(shape.size, np.int64)
    for r in range(out.size // n):
        base, o = _row_base(idx, last, offs, maps, strides), r * n
        if base < 0:
            for j in range(n):
                out[o + j] = fill
        else:
            for j in range(n):
                m = maps[lo + j]
                out[o + j] = fill if m < 0 else x[base + m * st]
        _next_row(idx, last, shape)


@njit(**JIT)
def _scatter_cpu(og, ig, shape, offs, maps, strides):
    last = shape.size - 1
    if last < 0:
        ig[0] += og[0]
        return
    n, lo, st = shape[last], offs[last], strides[last]
    if n == 0:
        return
    idx = np.zeros(shape.size, np.int64)
    for r in range(og.size // n):
        base, o = _row_base(idx, last, offs, maps, strides), r * n
        if base >= 0:
            for j in range(n):
                m = maps[lo + j]
                if m >= 0:
                    ig[base + m * st] += og[o + j]
        _next_row(idx, last, shape)


def _build_gpu():
    import_cuda(globals())

    @cuda.jit(device=True)
    def src_of(i, shape, offs, maps, strides):
        rem, s = i, 0
        for d in range(shape.size - 1, -1, -1):
            q = rem % shape[d]
            rem //= shape[d]
            m = maps[offs[d] + q]
            if m < 0:
                return -1
            s += m * strides[d]
        return s

    @cuda.jit
    def gather(x, out, shape, offs, maps, strides, fill):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, out.size, stride):
            s = src_of(i, shape, offs, maps, strides)
            out[i] = fill if s < 0 else x[s]

    @cuda.jit
    def scatter(og, ig, shape, offs, maps, strides):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, og.size, stride):
            s = src_of(i, shape, offs, maps, strides)
            if s >= 0:
                cuda.atomic.add(ig, s, og[i])

    return gather, scatter


_GPU = LazyCudaKernel(_build_gpu)


def is_gpu(a):
    """Whether ``a`` is a numba device array (not a numpy array)."""
    return not isinstance(a, np.ndarray)


def _flat(a):
    return a.reshape(a.size) if is_gpu(a) else a.reshape(-1)


def _to_dev(plan):
    """The plan's arrays on the current GPU (copied once per device, then reused)."""
    from numba import cuda as _cuda
    dev = getattr(_cuda.get_current_device(), 'id', 0)     # the simulator's has no id
    if dev not in plan.device_copies:
        plan.device_copies[dev] = (_cuda.to_device(plan.shape), _cuda.to_device(plan.offsets),
                                   _cuda.to_device(plan.maps), _cuda.to_device(plan.strides))
    return plan.device_copies[dev]


def gather_forward(plan, x, out, fill=0.0):
    """``out = x`` gathered by ``plan`` (numpy or device arrays; out sized ``plan.size``)."""
    if plan.size == 0:
        return
    if is_gpu(x):
        gather, _ = _GPU.kernel
        launch_1d(gather, plan.size, _flat(x), _flat(out), *_to_dev(plan), fill)
        return
    xf, of = _flat(x), _flat(out)
    if x.dtype == np.float16:
        o32 = np.empty(of.size, np.float32)
        _gather_cpu(xf.astype(np.float32), o32, plan.shape, plan.offsets, plan.maps,
                    plan.strides, fill)
        of[...] = o32
        return
    _gather_cpu(xf, of, plan.shape, plan.offsets, plan.maps, plan.strides, fill)


def zero(a):
    """``a[...] = 0`` on either device."""
    if is_gpu(a):
        if a.size:
            fill_gpu.launch(a.size, _flat(a), 0)
    else:
        a[...] = 0


def gather_backward(plan, og, ig, req):
    """Scatter-add ``og`` into ``ig`` through ``plan``, by ``req`` (write/add/null)."""
    if req == 'null' or ig is None:
        return
    if req == 'write':
        zero(ig)
    if plan.size == 0:
        return
    if is_gpu(og):
        _, scatter = _GPU.kernel
        launch_1d(scatter, plan.size, _flat(og), _flat(ig), *_to_dev(plan))
        return
    gf = _flat(ig)
    if ig.dtype == np.float16:
        g32 = gf.astype(np.float32)
        _scatter_cpu(_flat(og).astype(np.float32), g32, plan.shape, plan.offsets, plan.maps,
                     plan.strides)
        gf[...] = g32
        return
    _scatter_cpu(_flat(og), gf, plan.shape, plan.offsets, plan.maps, plan.strides)


def make_gather_op(plan_of, fill_of=None):
    """Registry forward/backward dicts for an op whose output is ``plan_of(p, shapes)``.

    Parameters
    ----------
    plan_of : callable(p, in_shapes) -> Plan
        Built from the input shapes (only ``inputs[0]`` is gathered from;
        other inputs give shapes and get zero gradients). Plans are cached per
        ``(p, shapes)`` (the last 256), so a repeated call builds nothing and
        copies nothing to the GPU.
    fill_of : callable(p) -> float, optional
        The value of map entries < 0 (default 0).
    """
    @functools.lru_cache(maxsize=256)
    def cached(p, shapes):
        return plan_of(p, list(shapes))

    def plan(p, arrays):
        return cached(p, tuple(tuple(int(d) for d in a.shape) for a in arrays))

    def forward(ctx, p, inputs, outputs, aux):
        fill = float(fill_of(p)) if fill_of else 0.0
        gather_forward(plan(p, inputs), inputs[0], outputs[0], fill)

    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        gather_backward(plan(p, inputs), out_grads[0], in_grads[0], req[0])
        for g, r in zip(in_grads[1:], req[1:]):
            if r == 'write' and g is not None:
                zero(g)

    return {'cpu': forward, 'gpu': forward}, {'cpu': backward, 'gpu': backward}


def first_type(p, in_types, aux_types):
    """Type inference: the output has the first input's dtype; unknown inputs take it too.

    For ops whose later inputs only give a shape (``slice_like``,
    ``broadcast_like``, ``reshape_like``, ``Crop``): their dtype is free.
    """
    known = next((t for t in in_types if t is not None), None)
    ins = [known if t is None else t for t in in_types]
    return ins, [ins[0] if ins else None], list(aux_types)
