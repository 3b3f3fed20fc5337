"""One fused update kernel per optimizer step, on the CPU and the GPU.

An optimizer's math is written once as a scalar ``@njit`` step::

    step(w, g, s0, s1, s2, hp) -> (w', g', s0', s1', s2')

``w``/``g`` are one weight and gradient element, ``s0..s2`` the matching
elements of up to three state arrays (unused slots get ``0.0``), and ``hp``
a tuple of hyper-parameters (lr, wd, rescale_grad, clip, ...) in the compute
dtype (float32 for float16/float32 weights). :func:`make_update` wraps the step in

* a CPU kernel, ``@njit(cache=True, nogil=True)``, one pass over flat arrays;
* a lazy GPU twin, a grid-stride ``@cuda.jit`` loop calling the same step;

so one read and one write of each array per update (memory-bound). The
returned :class:`FusedUpdate` dispatches on the weight's context.

float16 cannot be used in CPU ``@njit`` code: float16 arrays are computed in
float32 and cast back at the edges. GPU float16 arrays take the same host
path (correct but slow; multi-precision training keeps float32 masters on
the device, which run fused).
"""
import numpy as np
from numba import njit

from ..base import DTypeError, ShapeError
from ..jit import JIT, LazyCudaKernel, import_cuda, stable_cache_key

__all__ = ['make_update', 'FusedUpdate', 'clip', 'cuda']

#: ``numba.cuda``, bound on first GPU use (the simulator swaps this global).
cuda = None


@njit
def clip(x, bound):
    """``x`` clipped to ``[-bound, bound]``; no clipping when ``bound < 0``."""
    if bound >= 0.0:
        if x > bound:
            return bound
        if x < -bound:
            return -bound
    return x


def _cpu_loops(step):
    @njit(**JIT)
    def k0(w, g, hp, wg):
        for i in range(w.size):
            nw, ng, _, _, _ = step(w[i], g[i], 0.0, 0.0, 0.0, hp)
            w[i] = nw
            if wg:
                g[i] = ng

    @njit(**JIT)
    def k1(w, g, a, hp, wg):
        for i in range(w.size):
            nw, ng, na, _, _ = step(w[i], g[i], a[i], 0.0, 0.0, hp)
            w[i] = nw
            a[i] = na
            if wg:
                g[i] = ng

    @njit(**JIT)
    def k2(w, g, a, b, hp, wg):
        for i in range(w.size):
            nw, ng, na, nb, _ = step(w[i], g[i], a[i], b[i], 0.0, hp)
            w[i] = nw
            a[i] = na
            b[i] = nb
            if wg:
                g[i] = ng

    @njit(**JIT)
    def k3(w, g, a, b, c, hp, wg):
        for i in range(w.size):
            nw, ng, na, nb, nc = step(w[i], g[i], a[i], b[i], c[i], hp)
            w[i] = nw
            a[i] = na
            b[i] = nb
            c[i] = nc
            if wg:
                g[i] = ng
    return (k0, k1, k2, k3)


def _gpu_builders(step):
    def b0():
        import_cuda(globals())

        @cuda.jit
        def k(w, g, hp, wg):
            start, stride = cuda.grid(1), cuda.gridsize(1)
            for i in range(start, w.size, stride):
                nw, ng, _, _, _ = step(w[i], g[i], 0.0, 0.0, 0.0, hp)
                w[i] = nw
                if wg:
                    g[i] = ng
        return k

    def b1():
        import_cuda(globals())

        @cuda.jit
        def k(w, g, a, hp, wg):
            start, stride = cuda.grid(1), cuda.gridsize(1)
            for i in range(start, w.size, stride):
                nw, ng, na, _, _ = step(w[i], g[i], a[i], 0.0, 0.0, hp)
                w[i] = nw
                a[i] = na
                if wg:
                    g[i] = ng
        return k

    def b2():
        import_cuda(globals())

        @cuda.jit
        def k(w, g, a, b, hp, wg):
            start, stride = cuda.grid(1), cuda.gridsize(1)
            for i in range(start, w.size, stride):
                nw, ng, na, nb, _ = step(w[i], g[i], a[i], b[i], 0.0, hp)
                w[i] = nw
                a[i] = na
                b[i] = nb
                if wg:
                    g[i] = ng
        return k

    def b3():
        import_cuda(globals())

        @cuda.jit
        def k(w, g, a, b, c, hp, wg):
            start, stride = cuda.grid(1), cuda.gridsize(1)
            for i in range(start, w.size, stride):
                nw, ng, na, nb, nc = step(w[i], g[i], a[i], b[i], c[i], hp)
                w[i] = nw
                a[i] = na
                b[i] = nb
                c[i] = nc
                if wg:
                    g[i] = ng
        return k
    return (b0, b1, b2, b3)


def _flat(a):
    return a.reshape(-1)


class FusedUpdate:
    """CPU and GPU kernels of one scalar step; call :meth:`__call__` with NDArrays.

    Parameters
    ----------
    step : njit function
        The scalar step (see the module docstring).
    name : str
        Shown in errors.
    """

    def __init__(self, step, name):
        self.name = name
        self.step = step
        # the CPU loops close over ``step``: name it, or every process misses numba's disk
        # cache (and adds an entry to it) and recompiles the loop on its first update
        stable_cache_key(step)
        self.cpu = _cpu_loops(step)
        self.gpu = tuple(LazyCudaKernel(b) for b in _gpu_builders(step))

    def __call__(self, weight, grad, states, hp, write_grad=False):
        """Update ``weight`` (and ``states``, and ``grad`` if ``write_grad``) in place.

        Parameters
        ----------
        weight, grad : NDArray
            Same shape; ``grad`` is read (and written back when ``write_grad``).
        states : sequence of NDArray
            0 to 3 arrays of the weight's shape.
        hp : sequence of float
            Hyper-parameters, in the order the step reads them.
        """
        if grad.shape != weight.shape:
            raise ShapeError('%s: gradient shape %s does not match weight shape %s'
                             % (self.name, grad.shape, weight.shape))
        if np.dtype(weight.dtype).kind != 'f' or np.dtype(grad.dtype).kind != 'f':
            # an int weight would truncate every step to nothing (or to INT_MIN garbage)
            raise DTypeError('%s: weights and gradients must have a float dtype. Received: '
                             'weight %s, grad %s' % (self.name, np.dtype(weight.dtype).name,
                                                     np.dtype(grad.dtype).name))
        for k, s in enumerate(states):
            # the kernels index every state by the weight's flat index: check before they run
            if s.shape != weight.shape:
                raise ShapeError('%s: optimizer state %d has shape %s but the weight has shape '
                                 '%s (a state created for another weight?)'
                                 % (self.name, k, s.shape, weight.shape))
        arrays = [weight._data, grad._data] + [s._data for s in states]
        cdt = np.dtype(weight._data.dtype)
        if cdt == np.float16:
            cdt = np.dtype(np.float32)
        # a homogeneous tuple of scalars: one type for the CPU, the GPU and the simulator
        hp = tuple(cdt.type(x) for x in hp)
        n = len(states)
        if weight.context.device_type == 'gpu' and \
                all(np.dtype(a.dtype) != np.float16 for a in arrays):
            self.gpu[n].launch(weight.size, *[_flat(a) for a in arrays], hp, bool(write_grad))
            return
        gpu = weight.context.device_type == 'gpu'
        hosts = [a.copy_to_host() if gpu else a for a in arrays]
        work = [np.ascontiguousarray(h, np.float32 if h.dtype == np.float16 else h.dtype)
                for h in hosts]
        self.cpu[n](*[_flat(a) for a in work], hp, bool(write_grad))
        for k, (orig, h, wk) in enumerate(zip(arrays, hosts, work)):
            if k == 1 and not write_grad:
                continue
            if gpu:
                orig.copy_to_device(np.ascontiguousarray(wk.astype(h.dtype, copy=False)))
            elif wk is not h:
                h[...] = wk


def make_update(step, name):
    """A :class:`FusedUpdate` for a scalar step."""
    return FusedUpdate(step, name)
