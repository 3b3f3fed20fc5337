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
"""
import functools

import numpy as np
from numba import njit

__all__ = ['JIT', 'FASTMATH', 'make_unary', 'make_binary', 'LazyCudaKernel', 'launch_1d',
           'GPU_THREADS', 'import_cuda', 'f16_safe']

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


def _flat(a):
    return a.reshape(-1)


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
                        c = a.astype(np.float32)
                        pairs.append((a, c))
                        a = c
                    conv.append(a)
                lst = conv
            new.append(lst)
        if not pairs:
            return fn(ctx, p, *lists)
        res = fn(ctx, p, *new)
        for orig, copy in pairs:
            orig[...] = copy
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


# ------------------------------------------------------------------ broadcasting
_MODES = {'null': 0, 'write': 1, 'add': 2}


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
_PLANS = {}


def broadcast_plan(ashape, bshape, oshape):
    """Index plan of a broadcast binary op: collapsed output shape and strides.

    Both operands are left-padded with 1s to the output's rank; an axis where
    an operand has size 1 gets stride 0. Size-1 output axes are dropped and
    neighbouring axes that both operands walk contiguously (or both skip) are
    merged, so ``(N, C) + (C,)`` runs as two loops whatever the rank.

    Returns
    -------
    (shape, sa, sb, same) : three int64 arrays and a bool
        ``same`` is True when no broadcasting happens (a flat loop suffices).
    """
    key = (tuple(ashape), tuple(bshape), tuple(oshape))
    plan = _PLANS.get(key)
    if plan is not None:
        return plan
    nd = len(oshape)
    pa = (1,) * (nd - len(ashape)) + tuple(ashape)
    pb = (1,) * (nd - len(bshape)) + tuple(bshape)

    def strides(s):
        st, acc = [0] * nd, 1
        for d in range(nd - 1, -1, -1):
            st[d] = acc if s[d] != 1 else 0
            acc *= s[d]
        return st

    sta, stb = strides(pa), strides(pb)
    dims = [(oshape[d], sta[d], stb[d]) for d in range(nd) if oshape[d] != 1]
    merged = []
    for n, x, y in dims:
        if merged:
            m, mx, my = merged[-1]
            if mx == x * n and my == y * n:
                merged[-1] = (m * n, x, y)
                continue
        merged.append((n, x, y))
    if not merged:
        merged = [(1, 0, 0)]
    shape = np.array([m[0] for m in merged], np.int64)
    sa = np.array([m[1] for m in merged], np.int64)
    sb = np.array([m[2] for m in merged], np.int64)
    same = tuple(pa) == tuple(pb) == tuple(oshape)
    plan = (shape, sa, sb, same)
    if len(_PLANS) > 4096:
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


def make_binary_broadcast(f, dfa, dfb):
    """Forward/backward for ``out = f(lhs, rhs)`` under numpy broadcasting.

    The CPU kernel walks the output index space with an odometer over the
    collapsed shape of :func:`broadcast_plan`, reading each operand through
    strides that are 0 on its broadcast axes. The backward accumulates
    ``og * dfa`` into the (possibly smaller) lhs gradient and ``og * dfb``
    into the rhs gradient, so the gradient of a broadcast operand is summed
    over the axes it was broadcast along; ``'write'`` first zeroes it. The
    GPU backward uses atomic adds for the same reason.

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
    def fwd_cpu(a, b, out, shape, sa, sb, same):
        if same:
            for i in range(out.size):
                out[i] = f(a[i], b[i])
            return
        nd = shape.size
        last = nd - 1
        n, sal, sbl = shape[last], sa[last], sb[last]
        idx = np.zeros(nd, np.int64)
        ia = 0
        ib = 0
        i = 0
        while i < out.size:
            # the innermost collapsed axis has stride 1 (walked) or 0 (broadcast)
            # (slices keep the loop index provably >= 0, so LLVM vectorizes it)
            orow = out[i:i + n]
            if sal == 1 and sbl == 1:
                arow, brow = a[ia:ia + n], b[ib:ib + n]
                for k in range(n):
                    orow[k] = f(arow[k], brow[k])
            elif sal == 1 and sbl == 0:
                arow, bv = a[ia:ia + n], b[ib]
                for k in range(n):
                    orow[k] = f(arow[k], bv)
            elif sal == 0 and sbl == 1:
                av, brow = a[ia], b[ib:ib + n]
                for k in range(n):
                    orow[k] = f(av, brow[k])
            else:
                for k in range(n):
                    out[i + k] = f(a[ia + k * sal], b[ib + k * sbl])
            i += n
            d = last - 1
            while d >= 0:
                idx[d] += 1
                ia += sa[d]
                ib += sb[d]
                if idx[d] < shape[d]:
                    break
                ia -= sa[d] * shape[d]
                ib -= sb[d] * shape[d]
                idx[d] = 0
                d -= 1

    @njit(**JIT)
    def bwd_cpu(a, b, og, ga, gb, shape, sa, sb, mode_a, mode_b):
        if mode_a == 1:
            for j in range(ga.size):
                ga[j] = 0
        if mode_b == 1:
            for j in range(gb.size):
                gb[j] = 0
        nd = shape.size
        last = nd - 1
        n, sal, sbl = shape[last], sa[last], sb[last]
        idx = np.zeros(nd, np.int64)
        ia = 0
        ib = 0
        i = 0
        while i < og.size:
            grow = og[i:i + n]
            if sal == 1 and sbl == 1:
                arow, brow = a[ia:ia + n], b[ib:ib + n]
                if mode_a != 0:
                    garow = ga[ia:ia + n]
                    for k in range(n):
                        garow[k] += grow[k] * dfa(arow[k], brow[k])
                if mode_b != 0:
                    gbrow = gb[ib:ib + n]
                    for k in range(n):
                        gbrow[k] += grow[k] * dfb(arow[k], brow[k])
            elif sal == 1 and sbl == 0:
                # rhs broadcast along the row: sum its gradient in a register
                arow, bv, acc = a[ia:ia + n], b[ib], 0.0
                if mode_a != 0:
                    garow = ga[ia:ia + n]
                    for k in range(n):
                        garow[k] += grow[k] * dfa(arow[k], bv)
                if mode_b != 0:
                    for k in range(n):
                        acc += grow[k] * dfb(arow[k], bv)
                    gb[ib] += acc
            elif sal == 0 and sbl == 1:
                av, brow, acc = a[ia], b[ib:ib + n], 0.0
                if mode_b != 0:
                    gbrow = gb[ib:ib + n]
                    for k in range(n):
                        gbrow[k] += grow[k] * dfb(av, brow[k])
                if mode_a != 0:
                    for k in range(n):
                        acc += grow[k] * dfa(av, brow[k])
                    ga[ia] += acc
            else:
                for k in range(n):
                    x = a[ia + k * sal]
                    y = b[ib + k * sbl]
                    g = grow[k]
                    if mode_a != 0:
                        ga[ia + k * sal] += g * dfa(x, y)
                    if mode_b != 0:
                        gb[ib + k * sbl] += g * dfb(x, y)
            i += n
            d = last - 1
            while d >= 0:
                idx[d] += 1
                ia += sa[d]
                ib += sb[d]
                if idx[d] < shape[d]:
                    break
                ia -= sa[d] * shape[d]
                ib -= sb[d] * shape[d]
                idx[d] = 0
                d -= 1

    def build_fwd():
        import_cuda(globals())

        @cuda.jit
        def k(a, b, out, shape, sa, sb):
            start, stride = cuda.grid(1), cuda.gridsize(1)
            for i in range(start, out.size, stride):
                rem = i
                ia = 0
                ib = 0
                for d in range(len(shape) - 1, -1, -1):
                    q = rem % shape[d]
                    rem //= shape[d]
                    ia += q * sa[d]
                    ib += q * sb[d]
                out[i] = f(a[ia], b[ib])
        return k

    def build_bwd():
        import_cuda(globals())

        @cuda.jit
        def k(a, b, og, ga, gb, shape, sa, sb, mode_a, mode_b):
            start, stride = cuda.grid(1), cuda.gridsize(1)
            for i in range(start, og.size, stride):
                rem = i
                ia = 0
                ib = 0
                for d in range(len(shape) - 1, -1, -1):
                    q = rem % shape[d]
                    rem //= shape[d]
                    ia += q * sa[d]
                    ib += q * sb[d]
                if mode_a != 0:
                    cuda.atomic.add(ga, ia, og[i] * dfa(a[ia], b[ib]))
                if mode_b != 0:
                    cuda.atomic.add(gb, ib, og[i] * dfb(a[ia], b[ib]))
        return k

    fwd_gpu, bwd_gpu = LazyCudaKernel(build_fwd), LazyCudaKernel(build_bwd)

    def _grads(in_grads, req, og):
        ga = _flat(in_grads[0]) if req[0] != 'null' else og
        gb = _flat(in_grads[1]) if req[1] != 'null' else og
        return ga, gb, _MODES[req[0]], _MODES[req[1]]

    def forward(ctx, p, inputs, outputs, aux):
        a, b, out = inputs[0], inputs[1], outputs[0]
        shape, sa, sb, same = broadcast_plan(a.shape, b.shape, out.shape)
        a, b, o = _up(a), _up(b), _up(out)
        fwd_cpu(_flat(a), _flat(b), _flat(o), shape, sa, sb, same)
        _down(out, o)

    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        a, b, og = inputs[0], inputs[1], out_grads[0]
        ga, gb, ma, mb = _grads(in_grads, req, _flat(og))
        if ma or mb:
            shape, sa, sb, _ = broadcast_plan(a.shape, b.shape, og.shape)
            ga32, gb32 = _up(ga, ma == 2), _up(gb, mb == 2)
            bwd_cpu(_flat(_up(a)), _flat(_up(b)), _flat(_up(og)), ga32, gb32, shape, sa, sb,
                    ma, mb)
            if ma:
                _down(ga, ga32)
            if mb:
                _down(gb, gb32)

    def _dev_plan(a, b, o):
        # small tuples travel as kernel arguments: no device allocation per launch
        shape, sa, sb, _ = broadcast_plan(tuple(a.shape), tuple(b.shape), tuple(o.shape))
        return tuple(int(v) for v in shape), tuple(int(v) for v in sa), tuple(int(v) for v in sb)

    def forward_gpu(ctx, p, inputs, outputs, aux):
        import_cuda(globals())
        a, b, out = inputs[0], inputs[1], outputs[0]
        plan = _dev_plan(a, b, out)
        fwd_gpu.launch(out.size, _flat(a), _flat(b), _flat(out), *plan)

    def backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        import_cuda(globals())
        a, b, og = inputs[0], inputs[1], out_grads[0]
        ga, gb, ma, mb = _grads(in_grads, req, _flat(og))
        if not (ma or mb):
            return
        for g, m in ((ga, ma), (gb, mb)):
            if m == 1:
                fill_gpu.launch(g.size, g, 0.0)
        plan = _dev_plan(a, b, og)
        bwd_gpu.launch(og.size, _flat(a), _flat(b), _flat(og), ga, gb, *plan, ma, mb)

    forward.kernels = (fwd_cpu, bwd_cpu)
    return {'cpu': forward, 'gpu': forward_gpu}, {'cpu': backward, 'gpu': backward_gpu}


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


# ------------------------------------------------------------------ reductions
_RPLANS = {}


def reduce_plan(shape, axes):
    """Offsets that split a C-contiguous array into reduction groups.

    Returns ``(koff, roff)``: int64 arrays such that output element ``o``
    reduces ``x.flat[koff[o] + roff[j]]`` over ``j``. ``koff`` walks the kept
    axes in order (the output's flat order with or without keepdims),
    ``roff`` the reduced ones.
    """
    shape, axes = tuple(int(s) for s in shape), tuple(sorted(set(axes)))
    key = (shape, axes)
    plan = _RPLANS.get(key)
    if plan is not None:
        return plan
    nd = len(shape)
    st, acc = [0] * nd, 1
    for d in range(nd - 1, -1, -1):
        st[d] = acc
        acc *= shape[d]

    def offsets(dims):
        off = np.zeros(1, np.int64)
        for d in dims:
            off = (off[:, None] + np.arange(shape[d], dtype=np.int64)[None, :] * st[d]).ravel()
        return off

    plan = (offsets([d for d in range(nd) if d not in axes]), offsets(list(axes)))
    if len(_RPLANS) > 1024:
        _RPLANS.clear()
    _RPLANS[key] = plan
    return plan


@njit
def _no_pre(v, s1, s2):
    return s1, s2


def make_reduce(combine, finalize, grad, axes_of, pre=None):
    """Forward/backward of a reduction over some axes.

    Parameters
    ----------
    combine : njit function (acc, v) -> acc
        Folds the next value of a group in (the first value seeds ``acc``).
    finalize : njit function (acc, n) -> y
        Turns the folded value of a group of ``n`` elements into the output.
    grad : njit function (x, y, n, s1, s2) -> dy/dx
        ``y`` is the group's output, ``s1``/``s2`` the statistics of ``pre``.
    axes_of : callable(p, shape) -> tuple of int
        The reduced axes (non-negative) of an input of ``shape``.
    pre : njit function (v, s1, s2) -> (s1, s2), optional
        Per-group statistics the gradient needs (prod: product of the
        non-zeros and the count of zeros), folded from ``(1, 0)``.

    Returns
    -------
    (forward, backward) : dicts ``{'cpu': fn, 'gpu': fn}``.
    """
    use_pre = pre is not None
    pre = pre if use_pre else _no_pre
    stable_cache_key(combine, finalize, grad, pre)

    @njit(**JIT)
    def fwd_cpu(x, out, koff, roff, swap):
        n = roff.size
        if swap:
            # the last axis is kept: sweep whole rows of outputs per reduced index
            for o in range(koff.size):
                out[o] = x[koff[o] + roff[0]]
            for j in range(1, n):
                r = roff[j]
                for o in range(koff.size):
                    out[o] = combine(out[o], x[koff[o] + r])
            for o in range(koff.size):
                out[o] = finalize(out[o], n)
            return
        if roff[n - 1] == n - 1:
            # each group is one contiguous run: read it as a slice (vectorizes)
            for o in range(koff.size):
                row = x[koff[o]:koff[o] + n]
                acc = row[0]
                for j in range(1, n):
                    acc = combine(acc, row[j])
                out[o] = finalize(acc, n)
            return
        for o in range(koff.size):
            base = koff[o]
            acc = x[base + roff[0]]
            for j in range(1, n):
                acc = combine(acc, x[base + roff[j]])
            out[o] = finalize(acc, n)

    @njit(**JIT)
    def bwd_cpu(x, y, og, ig, koff, roff, add, swap):
        n = roff.size
        if swap and not use_pre:
            for j in range(n):
                r = roff[j]
                for o in range(koff.size):
                    k = koff[o] + r
                    v = og[o] * grad(x[k], y[o], n, 1.0, 0.0)
                    if add:
                        ig[k] += v
                    else:
                        ig[k] = v
            return
        for o in range(koff.size):
            base = koff[o]
            s1 = 1.0
            s2 = 0.0
            if use_pre:
                for j in range(n):
                    s1, s2 = pre(x[base + roff[j]], s1, s2)
            g, yo = og[o], y[o]
            if add:
                for j in range(n):
                    k = base + roff[j]
                    ig[k] += g * grad(x[k], yo, n, s1, s2)
            else:
                for j in range(n):
                    k = base + roff[j]
                    ig[k] = g * grad(x[k], yo, n, s1, s2)

    def build_fwd():
        import_cuda(globals())

        @cuda.jit
        def k(x, out, koff, roff):
            start, stride = cuda.grid(1), cuda.gridsize(1)
            n = roff.size
            for o in range(start, koff.size, stride):
                base = koff[o]
                acc = x[base + roff[0]]
                for j in range(1, n):
                    acc = combine(acc, x[base + roff[j]])
                out[o] = finalize(acc, n)
        return k

    def build_bwd():
        import_cuda(globals())

        @cuda.jit
        def k(x, y, og, ig, koff, roff, add):
            start, stride = cuda.grid(1), cuda.gridsize(1)
            n = roff.size
            for o in range(start, koff.size, stride):
                base = koff[o]
                s1 = 1.0
                s2 = 0.0
                if use_pre:
                    for j in range(n):
                        s1, s2 = pre(x[base + roff[j]], s1, s2)
                for j in range(n):
                    i = base + roff[j]
                    v = og[o] * grad(x[i], y[o], n, s1, s2)
                    if add:
                        ig[i] += v
                    else:
                        ig[i] = v
        return k

    fwd_gpu, bwd_gpu = LazyCudaKernel(build_fwd), LazyCudaKernel(build_bwd)

    def _plan(p, x):
        axes = axes_of(p, x.shape)
        koff, roff = reduce_plan(x.shape, axes)
        swap = x.ndim > 0 and (x.ndim - 1) not in axes and roff.size > 1
        return koff, roff, swap

    def forward(ctx, p, inputs, outputs, aux):
        x = inputs[0]
        koff, roff, swap = _plan(p, x)
        o = _up(outputs[0])
        fwd_cpu(_flat(_up(x)), _flat(o), koff, roff, swap)
        _down(outputs[0], o)

    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        if req[0] == 'null':
            return
        x = inputs[0]
        koff, roff, swap = _plan(p, x)
        add = req[0] == 'add'
        ig = _up(in_grads[0], add)
        bwd_cpu(_flat(_up(x)), _flat(_up(outputs[0])), _flat(_up(out_grads[0])), _flat(ig),
                koff, roff, add, swap)
        _down(in_grads[0], ig)

    dev_plans = {}

    def _dev_plan(x, p):
        shape = tuple(x.shape)
        axes = tuple(axes_of(p, shape))
        try:
            dev = cuda.get_current_device().id
        except Exception:       # the simulator may not tell
            dev = 0
        key = (shape, axes, dev)
        plan = dev_plans.get(key)
        if plan is None:
            koff, roff = reduce_plan(shape, axes)
            if len(dev_plans) > 256:
                dev_plans.clear()
            plan = dev_plans[key] = (cuda.to_device(koff), cuda.to_device(roff))
        return plan

    def forward_gpu(ctx, p, inputs, outputs, aux):
        import_cuda(globals())
        x = inputs[0]
        koff, roff = _dev_plan(x, p)
        fwd_gpu.launch(koff.size, _flat(x), _flat(outputs[0]), koff, roff)

    def backward_gpu(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        if req[0] == 'null':
            return
        import_cuda(globals())
        x = inputs[0]
        koff, roff = _dev_plan(x, p)
        bwd_gpu.launch(koff.size, _flat(x), _flat(outputs[0]), _flat(out_grads[0]),
                       _flat(in_grads[0]), koff, roff, req[0] == 'add')

    forward.kernels = (fwd_cpu, bwd_cpu)
    return {'cpu': forward, 'gpu': forward_gpu}, {'cpu': backward, 'gpu': backward_gpu}


__all__ += ['make_binary_broadcast', 'make_reduce', 'stable_cache_key', 'broadcast_plan',
            'reduce_plan', 'fill_gpu']
