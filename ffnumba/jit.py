"""Kernel infrastructure shared by every kernel family: ``ops/`` and ``optimizer/``.

The one home of what a compiled kernel needs, below both the operator
templates (:mod:`ffnumba.ops.templates`) and the optimizer update kernels
(:mod:`ffnumba.optimizer.kernels`):

* :data:`JIT` / :data:`FASTMATH`: the options of every CPU ``@njit`` kernel;
* :func:`lazy_njit` / :class:`LazyKernel`: template kernels whose numba
  dispatcher is created on first call (cheaper ``import ffnumba``);
* :func:`import_cuda`, :class:`LazyCudaKernel`, :func:`launch_1d`,
  :data:`GPU_THREADS`, :data:`fill_gpu`: GPU kernels built on first use (so
  importing ffnumba never needs numba-cuda) and launched as grid-stride loops;
* :func:`gpu_body`: an ``@njit`` body with array arguments, written once and
  called from both a CPU kernel and a GPU kernel (also under the simulator);
* :func:`f16_safe`, ``_up``/``_down``/``_flat``: float16 computed in float32
  on the CPU (numba's CPU backend has no float16);
* :func:`stable_cache_key`: reproducible on-disk cache keys for closures
  (with :mod:`ffnumba._jit_cache`, which adapts numba's cache keys and linking).

It imports only numpy, numba, :mod:`ffnumba._jit_cache` and :mod:`ffnumba._scipy_blas`;
nothing in ffnumba sits below them but the standard library.
"""
import functools
import threading

import numpy as np

# numba's disk-cache keys and linking adapted for ffnumba's kernels (installed on import)
# (HELPER_SALT, LINK_SALT re-exported)
from ._jit_cache import HELPER_SALT, LINK_SALT, importable  # noqa: F401
from . import _jit_link, _scipy_blas

# kernels call the helpers marked ``helper_njit(by_reference=True)`` instead of linking
# copies of them in (False on a numba whose code library this cannot adapt)
_LINK_BY_REFERENCE = _jit_link.install()

# numba's BLAS module loaded without scipy.linalg (85 ms of every start), before numba's
# CPU target is set up at the first compile or cache load
_scipy_blas.preload()

__all__ = ['JIT', 'FASTMATH', 'LazyCudaKernel', 'launch_1d', 'GPU_THREADS', 'import_cuda',
           'f16_safe', 'stable_cache_key', 'fill_gpu', 'gpu_body', 'passthrough', 'selects',
           'direct', 'LazyKernel', 'lazy_njit', 'helper_njit']

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
#: ``no_cfunc_wrapper``: no C entry point (``dispatcher.cfunc``-style ``ctypes`` access),
#: which nothing calls; each signature compiles a few ms faster (the Python entry stays).
JIT = dict(cache=True, nogil=True, fastmath=FASTMATH, error_model='numpy', no_cfunc_wrapper=True)
#: Threads per block for template GPU kernels (tests shrink it to hit block edges).
GPU_THREADS = 256


class LazyKernel:
    """A CPU kernel whose numba dispatcher is built on its first call.

    Creating a numba dispatcher costs about 0.1 ms (signature inspection and
    the disk-cache setup) even when it never runs; the templates build a
    kernel pair for each of a few hundred operators and optimizers, most of
    which a program never calls, so building them on first use takes that
    share off ``import ffnumba``. Only for kernels that Python code calls
    (numba cannot type a call to this wrapper from another kernel). The
    dispatcher is the one ``build()`` returns, so its disk-cache entry is
    the same as an eagerly decorated kernel's.

    Parameters
    ----------
    build : callable() -> numba dispatcher
    """

    __slots__ = ('_build', '_kernel')
    _lock = threading.Lock()

    def __init__(self, build):
        self._build = build
        self._kernel = None

    @property
    def kernel(self):
        """The numba dispatcher (built now if it was not)."""
        k = self._kernel
        if k is None:
            with LazyKernel._lock:     # two executor threads: one dispatcher
                if self._kernel is None:
                    self._kernel = self._build()
                k = self._kernel
        return k

    def __call__(self, *args):
        k = self._kernel
        return (k if k is not None else self.kernel)(*args)


def _njit_jit(fn):
    from numba import njit
    return njit(**JIT)(fn)


def lazy_njit(fn):
    """``@njit(**JIT)`` for a kernel only Python calls, built on first call (:class:`LazyKernel`)."""
    return LazyKernel(functools.partial(_njit_jit, fn))


def helper_njit(fn=None, *, by_reference=False):
    """``@njit(**JIT)`` for a helper that kernels call, compiled without numba's Python entry.

    numba compiles each function a kernel calls on its own first (then links it into the
    kernel), with a CPython and a C entry point that such a helper never uses. Without
    them (``no_cpython_wrapper``, ``no_cfunc_wrapper``) a helper signature compiles about
    20 ms faster (1-2 s of a cold ResNet-18); its code and the kernels it is linked
    into are unchanged. Its cache keys carry :data:`HELPER_SALT`, apart from a wrapped
    compile of the same function. A call from Python (a test, the CUDA simulator) runs a
    twin compiled with the wrappers, built on that first call.

    Parameters
    ----------
    fn : function
        The helper's Python function (called from ``@njit`` code); a module-level function
        when ``by_reference``.
    by_reference : bool, default False
        Kernels call the helper's one compiled copy instead of linking a copy of it into
        their own code (:mod:`ffnumba._jit_link`): for big helpers, which LLVM never inlines
        and would optimise and compile again inside every kernel that calls them. Leave it
        off for small helpers that inner loops call (they are inlined).

    Raises
    ------
    ValueError
        ``by_reference`` for a function Python cannot import by its qualified name.
    """
    if fn is None:
        return functools.partial(helper_njit, by_reference=by_reference)
    from numba import njit
    if by_reference and '<locals>' in fn.__qualname__:
        raise ValueError('helper_njit(by_reference=True) needs a module-level function, '
                         'got %s.%s' % (fn.__module__, fn.__qualname__))
    disp = njit(no_cpython_wrapper=True, **JIT)(fn)     # JIT has no_cfunc_wrapper
    disp.__class__ = _helper_class()
    disp._ff_by_reference = bool(by_reference) and _LINK_BY_REFERENCE
    return disp


@functools.lru_cache(maxsize=None)
def _helper_class():
    from numba.core.registry import CPUDispatcher

    class HelperDispatcher(CPUDispatcher):
        """A :func:`helper_njit` dispatcher: called from Python, its wrapped twin runs."""

        def __call__(self, *args, **kwargs):
            with LazyKernel._lock:      # Python calls only (tests): no hurry
                if '_ff_twin' not in self.__dict__:
                    self._ff_twin = _njit_jit(self.py_func)
            return self._ff_twin(*args, **kwargs)

        def add_overload(self, cres):
            super().add_overload(cres)
            if self.__dict__.get('_ff_by_reference'):
                _jit_link.publish(self, cres)
    return HelperDispatcher


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


def gpu_body(fn):
    """An ``@njit`` body (arrays among its arguments) as a ``@cuda.jit`` kernel calls it.

    The math of an op is written once as a plain ``@njit`` function (no
    signature, no ``cache``) over one element, row or group; the CPU kernel
    loops over it and the GPU kernel gives it to a thread. On a GPU, numba
    compiles the dispatcher itself as a CUDA device function, so ``fn`` is
    returned unchanged. Under numba's CUDA simulator kernels run as Python and
    hand over their arrays as wrappers a CPU dispatcher cannot take; there the
    returned function calls ``fn`` with the numpy arrays they wrap (the same
    memory, so writes land).

    Call it inside a kernel builder (``b = gpu_body(_row)``) and call ``b``
    from the kernel.

    Parameters
    ----------
    fn : numba ``@njit`` dispatcher
        The body, compiled without an explicit signature (numba then types it
        for the CUDA target too).

    Returns
    -------
    callable
        ``fn`` itself on a real GPU; under the simulator a Python wrapper that
        unwraps simulator arrays to the numpy arrays they hold and calls ``fn``.
    """
    from numba.core import config
    if not config.ENABLE_CUDASIM:
        return fn

    def call(*args):
        return fn(*[_sim_unwrap(a) for a in args])
    call.__wrapped__ = fn
    return call


def _sim_unwrap(a):
    """The numpy array inside a simulator array wrapper; anything else unchanged."""
    a = a.__dict__.get('_item', a) if hasattr(a, '__dict__') else a
    return getattr(a, '_ary', a)


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
    return passthrough(wrapped, fn, _no_f16)


def _no_f16(*lists):
    return not any(a is not None and getattr(a, 'dtype', None) == np.float16
                   for lst in lists if isinstance(lst, (list, tuple)) for a in lst)


# ------------------------------------------------------------------ bound call plans
def passthrough(wrapper, inner, test):
    """Mark ``wrapper(ctx, p, *lists)`` as a plain call of ``inner`` whenever ``test(*lists)``.

    Wrappers of compute functions (float16 in float32, integers in float64,
    empty outputs) decide per call from the arrays' dtypes and sizes. An
    executor's arrays never change dtype or shape once bound, so it asks
    :func:`direct` once, at bind time, and calls the innermost function
    itself. Returns ``wrapper``.
    """
    wrapper._ff_passthrough = (inner, test)
    return wrapper


def selects(dispatch, choose):
    """Mark ``dispatch(ctx, p, *lists)`` as a plain call of ``choose(p)(ctx, p, *lists)``.

    For compute functions that pick their implementation from the params
    (``Activation``'s ``act_type``): :func:`direct` makes the choice once.
    Returns ``dispatch``.
    """
    dispatch._ff_select = choose
    return dispatch


def direct(fn, p, *lists):
    """The function to call instead of ``fn(ctx, p, *lists)`` for these params and arrays.

    Resolves :func:`selects` dispatchers for ``p`` and unwraps every
    :func:`passthrough` wrapper whose test says it would only forward the
    call; a wrapper that would do work (a float16 array, an empty output) is
    kept, with what it wraps.
    """
    while True:
        choose = getattr(fn, '_ff_select', None)
        if choose is not None:
            fn = choose(p)
            continue
        mark = getattr(fn, '_ff_passthrough', None)
        if mark is None or not mark[1](*lists):
            return fn
        fn = mark[0]


# ------------------------------------------------------------------ disk cache of closures
def stable_cache_key(*fns):
    """Give njit scalar bodies a deterministic identity so template kernels cache on disk.

    A template kernel is a closure over its scalar bodies, and numba keys the
    on-disk cache of a closure by the pickled closure variables. A dispatcher
    pickles with a random per-process uuid, so without this every process
    misses the cache, recompiles, and adds another entry to ``__pycache__``.
    Naming each body by ``module.qualname`` makes the key reproducible (the
    body's code is still pickled by value, so editing it changes the key).
    The njit helpers a body calls through its module globals are named too (the
    pickled body carries them). Call it on the bodies before building kernels
    from them; already-named dispatchers are left alone, and so are bodies from a
    module Python cannot import again (:func:`ffnumba._jit_cache.importable`: code run by
    ``exec`` under a made-up ``__name__``): their kernels keep numba's per-process key,
    as a cached kernel that refers to them could not be loaded by the next process.
    """
    todo = list(fns)[::-1]          # popped from the end: the first body gets the name
    while todo:
        f = todo.pop()
        if f is None or f.__dict__.get('_MemoMixin__uuid') is not None \
                or not hasattr(f, '_set_uuid') or not importable(f):
            continue
        name = 'ffnumba:%s.%s' % (f.py_func.__module__, f.py_func.__qualname__)
        if f._memo.get(name) is None:      # a twin (same qualname) keeps a random uuid
            f._set_uuid(name)
        # the body is pickled with the globals it names: njit helpers it calls need names too
        glb = f.py_func.__globals__
        todo.extend(glb[n] for n in f.py_func.__code__.co_names
                    if hasattr(glb.get(n), '_set_uuid'))
    return fns
