"""Kernel templates: one scalar body gives the CPU and the GPU kernels.

An elementwise op is written as plain ``@njit`` scalar functions with the
signature ``f(x, a, b)`` (``a``, ``b``: float params such as a slope or a
scalar; ignored by ops that take none) and a derivative ``df(v, a, b)`` where
``v`` is the input or the output, as the op declares. The templates turn them
into:

* CPU kernels: ``@njit(cache=True, nogil=True)`` loops over flat views, large
  arrays cut into pieces the threads share (:func:`ffnumba.thread_pool.split_range`);
* GPU kernels: grid-stride ``@cuda.jit`` loops, built on first GPU use (so
  importing ffnumba never needs numba-cuda);

and wrap both in forward/backward functions that follow the registry's
compute contract (``grad_req`` ``'write'``/``'add'`` honoured in the kernel).

The templates for operands of different shapes (:func:`make_binary_broadcast`,
:func:`make_reduce` and their plans) live in
:mod:`ffnumba.ops.broadcast_templates`. The kernel infrastructure (``JIT``,
``LazyCudaKernel``, ``launch_1d``, ``f16_safe``, ...) lives in
:mod:`ffnumba.jit`; op files may import those names from here too (this
module uses them), but ``GPU_THREADS`` is read from :mod:`ffnumba.jit` only.
"""

from ..thread_pool import split_range
from ..jit import (JIT, FASTMATH, LazyCudaKernel, launch_1d, import_cuda,  # noqa: F401
                   f16_safe, stable_cache_key, fill_gpu, lazy_njit, _flat, _up, _down)

__all__ = ['make_unary', 'make_binary', 'JIT', 'FASTMATH', 'LazyCudaKernel', 'launch_1d',
           'import_cuda', 'f16_safe', 'stable_cache_key', 'fill_gpu']

#: ``numba.cuda``, bound on first GPU use by :func:`~ffnumba.jit.import_cuda`.
cuda = None
#: Fewest elements per thread before an elementwise pass (:func:`make_unary`,
#: :func:`make_binary`) splits over the kernel threads. Such a pass streams memory at
#: about 10 elements per ns, so a fork-join (30-50 us on the 2-core VM, waking a
#: core and handing the GIL back and forth) pays only above about a million elements:
#: there (quiet cores, batch 32) relu over 0.26-0.5 M elements ran 1.4-2x slower on two
#: threads than on one, and 1 M elements broke even.
ELEMWISE_MIN_ELEMS = 1 << 19



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

    @lazy_njit     # built on first call: most ops never run in a given program
    def fwd_cpu(x, out, a, b):
        for i in range(x.size):
            out[i] = f(x[i], a, b)

    @lazy_njit
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
        x, y = _flat(inputs[0]), _flat(outputs[0])
        split_range(lambda lo, hi: fwd_cpu(x[lo:hi], y[lo:hi], a, b), x.size,
                    ELEMWISE_MIN_ELEMS)

    @f16_safe
    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        if req[0] == 'null':
            return
        a, b = get(p)
        v = _flat(outputs[0] if use_out else inputs[0])
        og, ig, add = _flat(out_grads[0]), _flat(in_grads[0]), req[0] == 'add'
        split_range(lambda lo, hi: bwd_cpu(v[lo:hi], og[lo:hi], ig[lo:hi], add, a, b), v.size,
                    ELEMWISE_MIN_ELEMS)

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
    # the one value the backward reads: the op's OpDef takes it as its backward_reads
    backward.backward_reads = backward_gpu.backward_reads = \
        ('outputs',) if use_out else ('inputs',)
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

    @lazy_njit     # built on first call: most ops never run in a given program
    def fwd_cpu(x, y, out):
        for i in range(x.size):
            out[i] = f(x[i], y[i])

    @lazy_njit
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
        x, y, out = _flat(inputs[0]), _flat(inputs[1]), _flat(outputs[0])
        split_range(lambda lo, hi: fwd_cpu(x[lo:hi], y[lo:hi], out[lo:hi]), x.size,
                    ELEMWISE_MIN_ELEMS)

    @f16_safe
    def backward(ctx, p, out_grads, inputs, outputs, in_grads, req, aux):
        og = _flat(out_grads[0])
        ga, gb, ma, mb = _grads(in_grads, req, og)
        if ma or mb:
            x, y = _flat(inputs[0]), _flat(inputs[1])
            split_range(lambda lo, hi: bwd_cpu(x[lo:hi], y[lo:hi], og[lo:hi], ga[lo:hi],
                                               gb[lo:hi], ma, mb), x.size, ELEMWISE_MIN_ELEMS)

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
