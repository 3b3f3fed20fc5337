"""Kernels call their big helpers by reference instead of through a linked-in copy.

numba links every function a kernel calls into the kernel's own LLVM module, then
optimises and compiles the whole module again: a helper that 20 kernels call is
optimised and turned into machine code 21 times, though LLVM inlines none of the big
ones (they stay separate functions in each kernel). In ResNet-18's cold start at batch
32, most of the LLVM time of the convolution drivers was spent on such copies: Winograd's
forward driver took 0.22 s to optimise and 0.21 s to compile with its helpers linked in,
0.04 s and 0.04 s without them (the module numba built, timed again on its own).

A helper decorated with ``helper_njit(by_reference=True)`` (:func:`ffnumba.jit.helper_njit`)
is compiled once, on its own. A kernel that calls it keeps the declaration numba made
for the call, renamed to a name that is the same in every process (:func:`ref_name`:
the helper's module, name and argument types), and the process's symbol table maps
that name to the helper's code (``llvmlite.binding.add_symbol``, the way numba binds
its runtime's C functions). So a kernel always calls the one compiled helper, fresh or
loaded from the disk cache.

A kernel's disk-cache entry lists the helpers it calls by reference, its own and those
of the kernels linked into it (:func:`_serialize`); loading the entry loads them first,
through their dispatchers (from their own cache entries, or compiled), and checks their
return types (:func:`_unserialize`). When one cannot be loaded (renamed, moved, another
return type) the entry is a cache miss and the kernel is compiled again
(:func:`_load_overload`): a kernel never runs with a call that points nowhere.

It imports only the standard library and numba (the ``jit`` layer).
"""
import hashlib
import importlib
import sys
import threading

__all__ = ['ref_name', 'publish']

#: Names bound in this process (:func:`publish`): name -> (address, the helper's library).
_BOUND = {}
_LOCK = threading.Lock()


class StaleReference(Exception):
    """A cached kernel's helper could not be loaded as it was when the kernel was compiled."""


def ref_name(module, qualname, argtypes):
    """The symbol a kernel calls a by-reference helper through.

    Parameters
    ----------
    module, qualname : str
        The helper's Python module and qualified name.
    argtypes : tuple of numba types
        The signature's argument types.

    Returns
    -------
    str
        ``ffnumba.ref.<qualname>.<digest>``: the same in every process for the same helper
        and argument types (numba's own symbol names carry a per-process counter).
    """
    digest = hashlib.sha256(repr((module, qualname, tuple(str(t) for t in argtypes)))
                            .encode()).hexdigest()[:20]
    return 'ffnumba.ref.%s.%s' % (qualname, digest)


def publish(dispatcher, cres):
    """Bind a by-reference helper's compiled signature to its :func:`ref_name` symbol.

    Called when the helper's dispatcher adds an overload (a compile or a cache load).
    The compile result's library is marked, so kernels that link it call by reference,
    and kept alive here (kernels call its code). A name already bound to other code (a
    module run again, or argument types whose names collide) is never bound again:
    this library is then linked in as a copy, as numba does.
    """
    from llvmlite import binding as ll
    fn = dispatcher.py_func
    argtypes = tuple(cres.signature.args)
    name = ref_name(fn.__module__, fn.__qualname__, argtypes)
    lib = cres.library
    addr = lib.get_pointer_to_function(cres.fndesc.mangled_name)
    if not addr:
        return
    with _LOCK:
        bound = _BOUND.get(name)
        if bound is None:
            ll.add_symbol(name, addr)
            _BOUND[name] = (addr, lib)
        elif bound[0] != addr:
            return
    # (numba's name of the compiled function, the spec a cached caller loads it by)
    lib._ff_ref = (cres.fndesc.mangled_name,
                   (name, fn.__module__, fn.__qualname__, argtypes, cres.signature.return_type))


def _finalize(real):
    """numba's ``CPUCodeLibrary.finalize``: by-reference helpers called, not linked in."""
    def finalize(self):
        deps = {}
        keep = []
        for lib in self._linking_libraries:
            deps.update(getattr(lib, '_ff_deps', None) or {})
            ref = getattr(lib, '_ff_ref', None)
            if ref is None:
                keep.append(lib)
                continue
            mangled, spec = ref
            deps[spec[0]] = spec
            self._reload_init.update(lib._reload_init)
            try:
                fn = self._final_module.get_function(mangled)
            except NameError:       # not called here directly (a library linked in calls it)
                continue
            if fn.is_declaration:
                fn.name = spec[0]
        if deps:
            self._linking_libraries = keep
            self._ff_deps = deps
        return real(self)
    finalize.__wrapped__ = real
    return finalize


def _serialize(real):
    """numba's ``CPUCodeLibrary.serialize_using_object_code``, with the helpers to load first."""
    def serialize_using_object_code(self):
        name, kind, data = real(self)
        deps = getattr(self, '_ff_deps', None)
        if deps:
            data = tuple(data) + (tuple(deps[k] for k in sorted(deps)),)
        return name, kind, data
    serialize_using_object_code.__wrapped__ = real
    return serialize_using_object_code


def _load(spec):
    """Load (or compile) one helper a cached kernel calls; :class:`StaleReference` if it cannot.

    An exception that steers a compile (one with ``_ff_control_flow`` set: the compile-ahead
    child's skip of a kernel the parent is compiling) passes through.
    """
    try:
        name, module, qualname, argtypes, restype = spec
        obj = sys.modules.get(module) or importlib.import_module(module)
        for part in qualname.split('.'):
            obj = getattr(obj, part)
        if not getattr(obj, '_ff_by_reference', False):
            raise StaleReference('%s.%s is no longer called by reference' % (module, qualname))
        obj.compile(tuple(argtypes))
        cres = obj.overloads[tuple(argtypes)]
        addr = cres.library.get_pointer_to_function(cres.fndesc.mangled_name)
    except StaleReference:
        raise
    except Exception as e:   # noqa: BLE001 -- any failure: compile the caller again
        if getattr(e, '_ff_control_flow', False):
            raise
        raise StaleReference('%r: %s' % (spec, e)) from e
    if cres.signature.return_type != restype or _BOUND.get(name, (None,))[0] != addr:
        raise StaleReference('%s.%s%s returns %s, not %s, or is bound to other code' % (
            module, qualname, tuple(argtypes), cres.signature.return_type, restype))


def _unserialize(real):
    """numba's ``CPUCodeLibrary._unserialize``: a kernel's by-reference helpers loaded first."""
    def _unserialize(cls, codegen, state):
        name, kind, data = state
        deps = None
        if kind == 'object' and len(data) == 3:
            deps = data[2]
            for spec in deps:
                _load(spec)
            state = (name, kind, tuple(data[:2]))
        lib = real(cls, codegen, state)
        if deps:
            lib._ff_deps = {spec[0]: spec for spec in deps}
        return lib
    _unserialize.__wrapped__ = real
    return classmethod(_unserialize)


def _load_overload(real):
    """numba's ``Cache.load_overload``: an entry whose helpers cannot be loaded is a miss."""
    def load_overload(self, sig, target_context):
        try:
            return real(self, sig, target_context)
        except StaleReference:
            return None
    load_overload.__wrapped__ = real
    return load_overload


def install():
    """Install the hooks (once); numba without them (another version) links copies as before.

    Returns
    -------
    bool
        Whether kernels can call helpers by reference in this process.
    """
    from numba.core import caching, codegen
    lib = getattr(codegen, 'CPUCodeLibrary', None)
    if lib is None:
        return False
    if hasattr(lib.finalize, '__wrapped__'):      # installed before (a module run again)
        return getattr(lib.finalize, '__module__', None) == __name__
    if not isinstance(lib.__dict__.get('_unserialize'), classmethod):
        return False
    lib.finalize = _finalize(lib.finalize)
    lib.serialize_using_object_code = _serialize(lib.serialize_using_object_code)
    lib._unserialize = _unserialize(lib.__dict__['_unserialize'].__func__)
    caching.Cache.load_overload = _load_overload(caching.Cache.load_overload)
    return True
