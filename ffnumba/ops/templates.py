"""Kernel templates: one scalar body gives the CPU and the GPU kernels.

An elementwise op is written as plain ``@njit`` scalar functions with the
signature ``f(x, a, b)`` (``a``, ``b``: float params such as a slope or a
scalar; ignored by ops that take none) and a derivative ``df(v, a, b)`` where
``v`` is the input or the output, as the op declares. The templates turn them
into:

* CPU kernels: ``@njit(cache=True, nogil=True)`` loops over flat views;
* GPU kernels: grid-stride ``@cuda.jit`` loops, built on first GPU use (so
  importing ffnumba never needs numba-cuda);

and wrap both in forward/backward functions that follow the registry's
compute contract (``grad_req`` ``'write'``/``'add'`` honoured in the kernel).

The templates for operands of different shapes (:func:`make_binary_broadcast`,
:func:`make_reduce` and their plans) live in
:mod:`ffnumba.ops.broadcast_templates` and are re-exported here.
"""
import functools

import numpy as np
from numba import njit

__all__ = ['JIT', 'FASTMATH', 'make_unary', 'make_binary', 'LazyCudaKernel', 'launch_1d',
           'GPU_THREADS', 'import_cuda', 'f16_safe', 'stable_cache_key', 'fill_gpu',
           'make_binary_broadcast', 'make_reduce', 'broadcast_plan', 'reduce_plan']

#: ``numba.cuda``, bound on first GPU use by :func:`import_cuda`.
cuda = None


def import_cuda(module_globals):
    """Bind ``numba.cuda`` as the global ``cuda`` of a kernel module and return it.

    Kernels must reach ``cuda`` through their module's globals (not a local
    import): numba's CUDA simulator swaps that global when it runs a kernel.
    Call it as ``import_cuda(globals())`` inside a kernel builder.
    """
    if module_globals.get('cuda') is None:
        from numba import cuda as _cuda
        module_globals['cuda'] = _cuda
    return module_globals['cuda']

#: Fast-math flags for every kernel: no ``nnan``/``ninf``, so NaN and inf behave.
FASTMATH = {'nsz', 'arcp', 'contract', 'afn', 'reassoc'}
#: Options of every CPU kernel. ``error_model='numpy'``: x/0 gives inf or nan as in
#: numpy (and MXNet) instead of raising, and loops skip the division checks.
JIT = dict(cache=True, nogil=True, fastmath=FASTMATH, error_model='numpy')
#: Threads per block for template GPU kernels (tests shrink it to hit block edges).
GPU_THREADS = 256


class LazyCudaKernel:
    """A ``@cuda.jit`` kernel built on its first launch.

    Parameters
    ----------
    build : callable() -> numba CUDA kernel
        Imports ``numba.cuda`` and returns the compiled kernel object.
    """

    def __init__(self, build):
        self._build = build
        self._kernel = None

    @property
    def kernel(self):
        if self._kernel is None:
            self._kernel = self._build()
        return self._kernel

    def launch(self, n, *args):
        """Launch over ``n`` elements with a 1-D grid (grid-stride loop inside)."""
        launch_1d(self.kernel, n, *args)


def launch_1d(kernel, n, *args):
    """Launch a grid-stride kernel over ``n`` elements.

    Parameters
    ----------
    kernel : numba CUDA kernel
        A ``@cuda.jit`` grid-stride loop (every thread walks ``i += gridsize``).
    n : int
        Work items; blocks = ``ceil(n / GPU_THREADS)``, at least 1, at most 4096.
    *args
        Kernel arguments.
    """
    threads = GPU_THREADS
    blocks = max(1, min((n + threads - 1) // threads, 4096))
    kernel[blocks, threads](*args)


def _build_fill():
    import_cuda(globals())

    @cuda.jit
    def k(x, v):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, x.size, stride):
            x[i] = v
    return k


#: GPU kernel ``x[:] = v`` over a flat array.
fill_gpu = LazyCudaKernel(_build_fill)


def _flat(a):
    return a.reshape(-1)


def _up(a, keep=True):
    """A float32 twin of a float16 array (CPU @njit has no float16); others as they are.

    ``keep=False`` skips copying the values (a buffer the kernel overwrites).
    """
    if a.dtype != np.float16:
        return a
    return a.astype(np.float32) if keep else np.empty(a.shape, np.float32)


def _down(dst, src):
    """Copy a float32 twin made by :func:`_up` back into its float16 array."""
    if src is not dst:
        dst[...] = src.reshape(dst.shape)


def f16_safe(fn):
    """Run a CPU compute function on float32 copies of its float16 arrays.

    numba's CPU backend has no float16. Every float16 array in the list
    arguments of ``fn(ctx, p, *lists)`` (a compute function of the registry
    contract) is copied to float32, ``fn`` runs on the copies, and each copy is
    cast back into its array: outputs, gradients (``'add'`` accumulates in
    float32, then rounds once) and in-place updated aux states alike. Other
    dtypes pass through untouched, so the wrapper costs nothing for them.

    Parameters
    ----------
    fn : callable(ctx, p, *lists)
        A CPU ``forward`` or ``backward`` of :class:`~ffnumba.ops.registry.OpDef`.

    Returns
    -------
    callable
        ``fn`` with the same signature (``functools.wraps``).
    """
    @functools.wraps(fn)
    def wrapped(ctx, p, *lists):
        pairs = []
        new = []
        for lst in lists:
            if isinstance(lst, (list, tuple)):
                conv = []
                for a in lst:
                    if a is not None and getattr(a, 'dtype', None) == np.float16:
                        c = _up(a)
                        pairs.append((a, c))
                        a = c
                    conv.append(a)
                lst = conv
            new.append(lst)
        if not pairs:
            return fn(ctx, p, *lists)
        res = fn(ctx, p, *new)
        for orig, copy in pairs:
            _down(orig, copy)
        return res
    return wrapped


def make_unary(f, df, grad_uses='input', scalars=None):
    """Forward/backward for ``y = f(x, a, b)`` on every device.

    The backward is ``dx (+)= dy * df(v, a, b)`` elementwise (chain rule).
    Arrays of any shape are walked flat; float32 and float64 run natively,
    float16 runs in float32 on the CPU (:func:`f16_safe`).

    Parameters
    ----------
    f : njit function (x, a, b) -> y
        Scalar forward body, a plain ``@njit`` (no signature) so the GPU
        kernel can call it too.
    df : njit function (v, a, b) -> dy/dx
        ``v`` is ``x`` when ``grad_uses='input'`` and ``y`` when ``'output'``.
    grad_uses : {'input', 'output'}, default 'input'
    scalars : callable(p) -> (a, b), optional
        Reads the float params the body uses (default ``(0.0, 0.0)``).

    Returns
    -------
    (forward, backward) : two dicts ``{'cpu': fn, 'gpu': fn}`` for :class:`OpDef`.

    Raises
    ------
    ValueError
        If ``grad_uses`` is neither ``'input'`` nor ``'output'`` (a programming
        error at import, never a user error).
    """
    if grad_uses not in ('input', 'output'):
        raise ValueError(grad_uses)
    use_out = grad_uses == 'output'
    get = scalars or (lambda p: (0.0, 0.0))
    stable_cache_key(f, df)

    @njit(**JIT)
    def fwd_cpu(x, out, a, b):
        for i in range(x.size):
            out[i] = f(x[i], a, b)

    @njit(**JIT)
    def bwd_cpu(v, og, ig, add, a, b):
        if add:
            for i in range(v.size):
                ig[i] += og[i] * df(v[i], a, b)
        else:
            for i in range(v.size):
                ig[i] = og[i] * df(v[i], a, b)

    def build_fwd():
        import_cuda(globals())

        @cuda.jit
        def k(x, out, a, b):
            start, stride = cuda.grid(1), cuda.gridsize(1)
            for i in range(start, x.size, stride):
                out[i] = f(x[i], a, b)
        return k

    def build_bwd():
        import_cuda(globals())

        @cuda.jit
        def k(v, og, ig, add, a, b):
            start, stride = cuda.grid(1), cuda.gridsize(1)
            for i in range(start, v.size, stride):
                g = og[i] * df(v[i], a, b)
                if add:
                    ig[i] += g
                else:
                    ig[i] = g
        return k

    fwd_gpu, bwd_gpu = LazyCudaKernel(build_fwd), LazyCudaKernel(build_bwd)

    @f16_safe
    def forward(ctx, p, inputs, outputs, aux):
        a, b = get(p)
        fwd_cpu(_flat(inputs[0]), _flat(outputs[0]), a, b)

    @f16_safe
    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        if req[0] == 'null':
            return
        a, b = get(p)
        v = outputs[0] if use_out else inputs[0]
        bwd_cpu(_flat(v), _flat(out_grads[0]), _flat(in_grads[0]), req[0] == 'add', a, b)

    def forward_gpu(ctx, p, inputs, outputs, aux):
        a, b = get(p)
        x = _flat(inputs[0])
        fwd_gpu.launch(x.size, x, _flat(outputs[0]), a, b)

    def backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        if req[0] == 'null':
            return
        a, b = get(p)
        v = _flat(outputs[0] if use_out else inputs[0])
        bwd_gpu.launch(v.size, v, _flat(out_grads[0]), _flat(in_grads[0]), req[0] == 'add', a, b)

    forward.kernels = (fwd_cpu, bwd_cpu)
    return {'cpu': forward, 'gpu': forward_gpu}, {'cpu': backward, 'gpu': backward_gpu}


def make_binary(f, dfa, dfb):
    """Forward/backward for same-shape ``y = f(a, b)`` on every device.

    The backward is ``da (+)= dy * dfa(a, b)``, ``db (+)= dy * dfb(a, b)``
    elementwise, each honouring its own ``grad_req``. Both operands must
    have the output's shape (the op's shape inference guarantees it); float16
    runs in float32 on the CPU (:func:`f16_safe`).

    Parameters
    ----------
    f : njit function (x, y) -> out
    dfa, dfb : njit functions (x, y) -> d out / d x and d out / d y

    Returns
    -------
    (forward, backward) : dicts ``{'cpu': fn, 'gpu': fn}`` for :class:`OpDef`.
    """
    stable_cache_key(f, dfa, dfb)

    @njit(**JIT)
    def fwd_cpu(x, y, out):
        for i in range(x.size):
            out[i] = f(x[i], y[i])

    @njit(**JIT)
    def bwd_cpu(x, y, og, ga, gb, mode_a, mode_b):
        # mode: 0 null, 1 write, 2 add
        for i in range(x.size):
            if mode_a == 1:
                ga[i] = og[i] * dfa(x[i], y[i])
            elif mode_a == 2:
                ga[i] += og[i] * dfa(x[i], y[i])
            if mode_b == 1:
                gb[i] = og[i] * dfb(x[i], y[i])
            elif mode_b == 2:
                gb[i] += og[i] * dfb(x[i], y[i])

    def build_fwd():
        import_cuda(globals())

        @cuda.jit
        def k(x, y, out):
            start, stride = cuda.grid(1), cuda.gridsize(1)
            for i in range(start, x.size, stride):
                out[i] = f(x[i], y[i])
        return k

    def build_bwd():
        import_cuda(globals())

        @cuda.jit
        def k(x, y, og, ga, gb, mode_a, mode_b):
            start, stride = cuda.grid(1), cuda.gridsize(1)
            for i in range(start, x.size, stride):
                if mode_a == 1:
                    ga[i] = og[i] * dfa(x[i], y[i])
                elif mode_a == 2:
                    ga[i] += og[i] * dfa(x[i], y[i])
                if mode_b == 1:
                    gb[i] = og[i] * dfb(x[i], y[i])
                elif mode_b == 2:
                    gb[i] += og[i] * dfb(x[i], y[i])
        return k

    fwd_gpu, bwd_gpu = LazyCudaKernel(build_fwd), LazyCudaKernel(build_bwd)
    modes = {'null': 0, 'write': 1, 'add': 2}

    def _grads(in_grads, req, og):
        ga = _flat(in_grads[0]) if req[0] != 'null' else og
        gb = _flat(in_grads[1]) if req[1] != 'null' else og
        return ga, gb, modes[req[0]], modes[req[1]]

    @f16_safe
    def forward(ctx, p, inputs, outputs, aux):
        fwd_cpu(_flat(inputs[0]), _flat(inputs[1]), _flat(outputs[0]))

    @f16_safe
    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        og = _flat(out_grads[0])
        ga, gb, ma, mb = _grads(in_grads, req, og)
        if ma or mb:
            bwd_cpu(_flat(inputs[0]), _flat(inputs[1]), og, ga, gb, ma, mb)

    def forward_gpu(ctx, p, inputs, outputs, aux):
        x = _flat(inputs[0])
        fwd_gpu.launch(x.size, x, _flat(inputs[1]), _flat(outputs[0]))

    def backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        og = _flat(out_grads[0])
        ga, gb, ma, mb = _grads(in_grads, req, og)
        if ma or mb:
            x = _flat(inputs[0])
            bwd_gpu.launch(x.size, x, _flat(inputs[1]), og, ga, gb, ma, mb)

    return {'cpu': forward, 'gpu': forward_gpu}, {'cpu': backward, 'gpu': backward_gpu}


# ------------------------------------------------------------------ disk cache of closures
def stable_cache_key(*fns):
    """Give njit scalar bodies a deterministic identity so template kernels cache on disk.

    A template kernel is a closure over its scalar bodies, and numba keys the
    on-disk cache of a closure by the pickled closure variables. A dispatcher
    pickles with a random per-process uuid, so without this every process
    misses the cache, recompiles, and adds another entry to ``__pycache__``.
    Naming each body by ``module.qualname`` makes the key reproducible (the
    body's code is still pickled by value, so editing it changes the key).
    Call it on the bodies before building kernels from them; already-named
    dispatchers are left alone.
    """
    for f in fns:
        if f is None or f.__dict__.get('_MemoMixin__uuid') is not None \
                or not hasattr(f, '_set_uuid'):
            continue
        name = 'ffnumba:%s.%s' % (f.py_func.__module__, f.py_func.__qualname__)
        if f._memo.get(name) is None:      # a twin (same qualname) keeps a random uuid
            f._set_uuid(name)
    return fns


# ------------------------------------------------------------------ broadcast and reduce
# The broadcast/reduce templates live in broadcast_templates (they import the
# helpers above, hence the import at the bottom); re-exported for old imports.
from .broadcast_templates import (  # noqa: E402
    broadcast_plan, make_binary_broadcast, make_reduce, reduce_plan)
