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
import numpy as np
from numba import njit

__all__ = ['JIT', 'FASTMATH', 'make_unary', 'make_binary', 'LazyCudaKernel', 'launch_1d',
           'GPU_THREADS', 'import_cuda']

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
    """Launch a grid-stride kernel over ``n`` elements."""
    threads = GPU_THREADS
    blocks = max(1, min((n + threads - 1) // threads, 4096))
    kernel[blocks, threads](*args)


def _flat(a):
    return a.reshape(-1)


def make_unary(f, df, grad_uses='input', scalars=None):
    """Forward/backward for ``y = f(x, a, b)`` on every device.

    Parameters
    ----------
    f : njit function (x, a, b) -> y
    df : njit function (v, a, b) -> dy/dx
        ``v`` is ``x`` when ``grad_uses='input'`` and ``y`` when ``'output'``.
    grad_uses : {'input', 'output'}
    scalars : callable(p) -> (a, b), optional
        Reads the float params the body uses (default ``(0.0, 0.0)``).

    Returns
    -------
    (forward, backward) : two dicts ``{'cpu': fn, 'gpu': fn}`` for :class:`OpDef`.
    """
    if grad_uses not in ('input', 'output'):
        raise ValueError(grad_uses)
    use_out = grad_uses == 'output'
    get = scalars or (lambda p: (0.0, 0.0))

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

    def forward(ctx, p, inputs, outputs, aux):
        a, b = get(p)
        fwd_cpu(_flat(inputs[0]), _flat(outputs[0]), a, b)

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

    Parameters
    ----------
    f : njit function (x, y) -> out
    dfa, dfb : njit functions (x, y) -> d out / d x and d out / d y

    Returns
    -------
    (forward, backward) dicts for :class:`OpDef`.
    """
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

    def forward(ctx, p, inputs, outputs, aux):
        fwd_cpu(_flat(inputs[0]), _flat(inputs[1]), _flat(outputs[0]))

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


# ------------------------------------------------------------------ broadcasting
_MODES = {'null': 0, 'write': 1, 'add': 2}
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
            for k in range(n):
                x = a[ia + k * sal]
                y = b[ib + k * sbl]
                g = og[i + k]
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
                for d in range(shape.size - 1, -1, -1):
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
                for d in range(shape.size - 1, -1, -1):
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
        fwd_cpu(_flat(a), _flat(b), _flat(out), shape, sa, sb, same)

    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        a, b, og = inputs[0], inputs[1], out_grads[0]
        ga, gb, ma, mb = _grads(in_grads, req, _flat(og))
        if ma or mb:
            shape, sa, sb, _ = broadcast_plan(a.shape, b.shape, og.shape)
            bwd_cpu(_flat(a), _flat(b), _flat(og), ga, gb, shape, sa, sb, ma, mb)

    def _dev_plan(a, b, o):
        shape, sa, sb, _ = broadcast_plan(a.shape, b.shape, o.shape)
        return cuda.to_device(shape), cuda.to_device(sa), cuda.to_device(sb)

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

    @njit(**JIT)
    def fwd_cpu(x, out, koff, roff):
        n = roff.size
        for o in range(koff.size):
            base = koff[o]
            acc = x[base + roff[0]]
            for j in range(1, n):
                acc = combine(acc, x[base + roff[j]])
            out[o] = finalize(acc, n)

    @njit(**JIT)
    def bwd_cpu(x, y, og, ig, koff, roff, add):
        n = roff.size
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

    def forward(ctx, p, inputs, outputs, aux):
        x = inputs[0]
        koff, roff = reduce_plan(x.shape, axes_of(p, x.shape))
        fwd_cpu(_flat(x), _flat(outputs[0]), koff, roff)

    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        if req[0] == 'null':
            return
        x = inputs[0]
        koff, roff = reduce_plan(x.shape, axes_of(p, x.shape))
        bwd_cpu(_flat(x), _flat(outputs[0]), _flat(out_grads[0]), _flat(in_grads[0]),
                koff, roff, req[0] == 'add')

    def _dev_plan(x, p):
        koff, roff = reduce_plan(x.shape, axes_of(p, x.shape))
        return cuda.to_device(koff), cuda.to_device(roff)

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


__all__ += ['make_binary_broadcast', 'make_reduce', 'broadcast_plan', 'reduce_plan', 'fill_gpu']
