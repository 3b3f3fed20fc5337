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
* :func:`stable_cache_key`: reproducible on-disk cache keys for closures.

It imports only numpy and numba; nothing in ffnumba sits below it but the
standard library.
"""
import functools
import os
import threading

import numpy as np

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
JIT = dict(cache=True, nogil=True, fastmath=FASTMATH, error_model='numpy')
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


#: Cache-key salt of :func:`helper_njit` functions: their entries have no CPython entry point.
HELPER_SALT = 'ffnumba-no-cpython-wrapper-1'


def helper_njit(fn):
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
        The helper's Python function (called from ``@njit`` code).
    """
    from numba import njit
    disp = njit(no_cpython_wrapper=True, no_cfunc_wrapper=True, **JIT)(fn)
    disp.__class__ = _helper_class()
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
    from them; already-named dispatchers are left alone.
    """
    todo = list(fns)[::-1]          # popped from the end: the first body gets the name
    while todo:
        f = todo.pop()
        if f is None or f.__dict__.get('_MemoMixin__uuid') is not None \
                or not hasattr(f, '_set_uuid'):
            continue
        name = 'ffnumba:%s.%s' % (f.py_func.__module__, f.py_func.__qualname__)
        if f._memo.get(name) is None:      # a twin (same qualname) keeps a random uuid
            f._set_uuid(name)
        # the body is pickled with the globals it names: njit helpers it calls need names too
        glb = f.py_func.__globals__
        todo.extend(glb[n] for n in f.py_func.__code__.co_names
                    if hasattr(glb.get(n), '_set_uuid'))
    return fns


def _digest_value(v, h, seen):
    """Feed ``v`` (a closure cell or a global a kernel body names) into ``h`` by value.

    Dispatchers and Python functions by their code (recursively through the
    globals they name), constants by a canonical ``repr``; anything else by its
    pickle (as numba does). Never by object identity, which is what makes a
    pickle differ between a module compiled from source and one loaded from
    its ``.pyc`` (pickle shares repeated objects, and which strings are one
    object depends on how the code was loaded).
    """
    import types
    fn = getattr(v, 'py_func', v)
    if isinstance(fn, types.FunctionType):
        h.update(b'F%s.%s' % (fn.__module__.encode(), fn.__qualname__.encode()))
        if id(fn) in seen:
            return
        seen.add(id(fn))
        if fn is not v:         # a dispatcher: its options change the code too
            h.update(repr(sorted((k, repr(sorted(o) if isinstance(o, (set, frozenset)) else o))
                                 for k, o in v.targetoptions.items())).encode())
        _digest_code(fn.__code__, h)
        _digest_value(fn.__defaults__, h, seen)
        _digest_value(tuple(sorted((fn.__kwdefaults__ or {}).items())), h, seen)
        glb = fn.__globals__
        for name in fn.__code__.co_names:
            if name in glb:
                h.update(b'G' + name.encode())
                _digest_value(glb[name], h, seen)
        for cell in fn.__closure__ or ():
            _digest_value(cell.cell_contents, h, seen)
    elif isinstance(v, types.ModuleType):
        h.update(b'M' + v.__name__.encode())
    elif v is None or isinstance(v, (bool, int, float, complex, str, bytes, np.generic, np.dtype)):
        h.update(b'C' + repr(v).encode())
    elif isinstance(v, (set, frozenset)):
        h.update(b'S' + repr(sorted(map(repr, v))).encode())
    elif isinstance(v, tuple):
        h.update(b'T%d' % len(v))
        for x in v:
            _digest_value(x, h, seen)
    else:
        from numba.core.serialize import dumps
        h.update(b'P' + dumps(v))


def _digest_code(code, h):
    import types
    h.update(code.co_code)
    h.update(repr((code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
                   code.co_argcount, code.co_kwonlyargcount, code.co_flags)).encode())
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _digest_code(c, h)
        elif isinstance(c, frozenset):
            h.update(repr(sorted(map(repr, c))).encode())
        else:
            h.update(repr(c).encode())


def _stable_index_key(real):
    """numba's ``Cache._index_key`` with the closure part computed by value for ffnumba's kernels.

    numba keys a closure's cache entries by the hash of its pickled cells: for
    a template kernel, the scalar bodies it closes over, pickled with their
    code. That pickle differs between a process that compiled ffnumba's
    modules from source and one that loaded their ``.pyc`` files, so a warm
    start missed every template kernel a cold start had cached when the two
    loaded the package differently (the first run after an edit or install,
    ``PYTHONDONTWRITEBYTECODE``, another bytecode folder) and compiled them
    again. Keys of other functions, and of a closure this cannot digest, are
    numba's.
    """
    import hashlib

    def _index_key(self, sig, codegen):
        py = self._py_func
        if not py.__closure__ or not (py.__module__ or '').startswith('ffnumba.'):
            return real(self, sig, codegen)
        try:
            h = hashlib.sha256()
            for cell in py.__closure__:
                _digest_value(cell.cell_contents, h, set())
        except Exception:   # noqa: BLE001 -- something this does not know: numba's key
            return real(self, sig, codegen)
        return (sig, codegen.magic_tuple(),
                (hashlib.sha256(py.__code__.co_code).hexdigest(), 'ffnumba:' + h.hexdigest()))
    _index_key.__wrapped__ = real
    return _index_key


def _salted(real):
    """``real`` (the closure-aware key) with :data:`LINK_SALT` in every ffnumba kernel's key,
    so no entry compiled before :func:`_own_copies` existed is loaded."""
    def _index_key(self, sig, codegen):
        key = real(self, sig, codegen)
        if not self._py_func.__code__.co_filename.startswith(_PACKAGE_DIR) or \
                LINK_SALT in key[1]:
            return key
        return (key[0], key[1] + (LINK_SALT,)) + tuple(key[2:])
    _index_key.__wrapped__ = real
    return _index_key


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep

#: Part of every ffnumba kernel's cache key: entries compiled with each library calling
#: its own copies of the functions it linked in (:func:`_own_copies`).
LINK_SALT = 'ffnumba-own-copies-1'


def _own_copies(real):
    """numba's ``CPUCodeLibrary._finalize_final_module``, the linked-in copies made internal first.

    numba links a compiled callee into each caller's module as ``linkonce_odr``
    (weak) functions, optimises the whole module, then loads its object code.
    A weak definition binds to a strong one of the same name loaded earlier:
    a caller compiled in this process (its callees compiled standalone just
    before it) called the standalone callees, while the same caller loaded
    from the disk cache called them only if something had loaded them first,
    and its own copies otherwise. With ``fastmath`` reassociation the two
    copies are compiled in different contexts and may round differently, so
    results depended on what the process had run before (found: BatchNorm's
    backward through ``_bwd_block``, a fused-vs-unfused bitwise test that
    failed after an edit recompiled part of the cache). Made ``internal``
    after optimisation, a library always calls the code that was compiled
    into it, fresh or cached; the code itself is unchanged.
    """
    from llvmlite import binding as ll

    def _finalize_final_module(self):
        try:
            for fn in self._final_module.functions:
                if not fn.is_declaration and fn.linkage == ll.Linkage.linkonce_odr:
                    fn.linkage = ll.Linkage.internal
        except Exception:   # noqa: BLE001 -- another numba: its own binding
            pass
        return real(self)
    _finalize_final_module.__wrapped__ = real
    return _finalize_final_module


class _LazyCache:
    """A numba dispatcher's disk cache (``FunctionCache``), built on first use.

    numba builds it when a kernel is decorated: the cache folder made and proved writable
    with a temporary file, the source stat-ed and hashed, about 0.3 ms for each of the ~200
    kernels ``import ffnumba`` decorates. Built at the first cache lookup (the step before
    any compile), only the kernels a program runs pay it. Every attribute is the real
    cache's: files, keys and errors are numba's (an uncacheable kernel raises at its first
    call, not at import). ``salt``: appended to every index key (:func:`helper_njit`).
    """

    __slots__ = ('_ff_py_func', '_ff_real', '_ff_salt')
    _lock = threading.Lock()

    def __init__(self, py_func, salt=None):
        self._ff_py_func = py_func
        self._ff_real = None
        self._ff_salt = salt

    def _ff_build(self):
        real = self._ff_real
        if real is None:
            with _LazyCache._lock:
                if self._ff_real is None:
                    from numba.core.caching import FunctionCache
                    cache = FunctionCache(self._ff_py_func)
                    if self._ff_salt is not None:
                        cache._index_key = _with_salt(cache._index_key, self._ff_salt)
                    self._ff_real = cache
                real = self._ff_real
        return real

    def __getattr__(self, name):
        return getattr(self._ff_build(), name)

    def __repr__(self):
        return repr(self._ff_build())


def _with_salt(index_key, salt):
    def salted(sig, codegen):
        return index_key(sig, codegen) + (salt,)
    return salted


def _lazy_caching(real):
    """numba's ``Dispatcher.enable_caching``, with a :class:`_LazyCache` for ffnumba's kernels."""
    def enable_caching(self):
        if not self.py_func.__code__.co_filename.startswith(_PACKAGE_DIR):
            return real(self)
        self._cache = _LazyCache(self.py_func, HELPER_SALT if self.targetoptions.get(
            'no_cpython_wrapper') else None)
    enable_caching.__wrapped__ = real
    return enable_caching


def _install_stable_index_key():
    from numba.core import caching, codegen, dispatcher
    if not hasattr(caching.Cache._index_key, '__wrapped__'):
        caching.Cache._index_key = _salted(_stable_index_key(caching.Cache._index_key))
    if not hasattr(dispatcher.Dispatcher.enable_caching, '__wrapped__'):
        dispatcher.Dispatcher.enable_caching = _lazy_caching(dispatcher.Dispatcher.enable_caching)
    lib = getattr(codegen, 'CPUCodeLibrary', None)
    if lib is not None and hasattr(lib, '_finalize_final_module') and \
            not hasattr(lib._finalize_final_module, '__wrapped__'):
        lib._finalize_final_module = _own_copies(lib._finalize_final_module)


_install_stable_index_key()
