"""numba's disk cache and linking, adapted for ffnumba's kernels (installed when imported).

* Cache keys of ffnumba's closures (template kernels) computed from their bodies' code
  and constants (:func:`_stable_index_key`), not from a pickle that differs between a
  package compiled from source and one loaded from ``.pyc`` files; bodies from a module
  Python cannot import (code run by ``exec`` under a made-up ``__name__``) keep numba's
  own per-process key, since a cached kernel that refers to them could not be loaded.
* Every ffnumba kernel's key salted (:data:`LINK_SALT`; :data:`HELPER_SALT` for the
  wrapper-less helpers of :func:`ffnumba.jit.helper_njit`).
* Linked-in copies of callees made internal (:func:`_own_copies`): a kernel gives the
  same bits fresh or cached.
* Each kernel's ``FunctionCache`` built on first use (:class:`_LazyCache`).
* Cache entries saved safely when several processes compile at once (:func:`_safe_save`).
* Cached kernels loaded without parsing their LLVM IR (:func:`_lazy_shared`): it is parsed
  only if a new compile links the kernel in.

It imports only the standard library, numpy and numba (the ``jit`` layer).
"""
import contextlib
import hashlib
import os
import struct
import sys
import threading

import numpy as np

__all__ = ['HELPER_SALT', 'LINK_SALT', 'importable']

#: Cache-key salt of :func:`ffnumba.jit.helper_njit` functions: their entries have no
#: CPython entry point (``-2``: compiled since helpers may call helpers by reference).
HELPER_SALT = 'ffnumba-no-cpython-wrapper-2'


def importable(fn):
    """Whether a function's module is one Python can import again (in ``sys.modules``).

    Code run by ``exec`` in a namespace with a made-up ``__name__`` (a notebook cell
    runner, a docs checker) is not: numba pickles such a function under the module
    ``<dynamic>``, and a cached kernel that refers to it fails to load in the next
    process (``ModuleNotFoundError: No module named '<dynamic>'``).
    """
    fn = getattr(fn, 'py_func', fn)
    return sys.modules.get(getattr(fn, '__module__', None) or '') is not None


class _Unkeyable(Exception):
    """A closure refers to a function from a module that cannot be imported again."""


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
        if not importable(fn):
            raise _Unkeyable(fn.__qualname__)
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
    again. Keys of other functions, and of a closure this cannot digest or that
    refers to a function from a module Python cannot import (:func:`importable`), are
    numba's.
    """

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
#: its own copies of the functions it linked in (:func:`_own_copies`), saved under
#: key-derived data-file names (:func:`_safe_save`; ``-2``: entries an index written by the
#: racy numbered scheme names are never loaded; ``-3``: big helpers called by reference,
#: :mod:`ffnumba._jit_link`, so no entry holding copies of them is loaded).
LINK_SALT = 'ffnumba-own-copies-3'


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
                    cache._cache_file.save = _safe_save.__get__(cache._cache_file)
                    if self._ff_salt is not None:
                        cache._index_key = _with_salt(cache._index_key, self._ff_salt)
                    self._ff_real = cache
                real = self._ff_real
        return real

    def __getattr__(self, name):
        return getattr(self._ff_build(), name)

    def __repr__(self):
        return repr(self._ff_build())


@contextlib.contextmanager
def _file_lock(path):
    """An exclusive ``flock`` on ``path`` across processes; no lock where there is no ``fcntl``
    (Windows) or the file cannot be opened (a read-only cache folder)."""
    try:
        import fcntl
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)    # releases the lock


def _safe_save(self, key, data):
    """numba's ``IndexDataCacheFile.save``, safe when processes save entries of one kernel at once.

    numba names a new entry's data file by the first number its index does not use, writes
    the index, then the data. Two processes that read the index before either wrote it
    (two fuzz workers, the test suite beside its CUDA-simulator child, a program beside
    ffnumba's compile-ahead child) pick the same number for different keys, and the index
    can end up naming the other key's code: an entry for float32 arrays that holds a float64
    kernel (found: ``TypeError: can't unbox array`` in ``exp`` backward in CI), or another
    operator's body of the same template kernel with the same signature (wrong numbers).
    Here the data file is named by a digest of the key and the source stamp, so one file
    only ever holds one key's code for one version of the source; it is written (atomically,
    numba's ``_open_for_write``) before the index names it; and the index's
    read-modify-write holds an exclusive lock (:func:`_file_lock`), so no process drops
    another's entry. Without the lock (no ``fcntl``) an entry can still be dropped, which
    costs a recompile, never wrong code.

    The name is ``<function>.<stamp digest>-<key digest>.nbc`` (the stamp digest also covers
    numba's version, which the index is checked against): numba reused its numbered
    files once an edit of the source reset the index, and these would pile up one set per
    edit, so each save also removes the function's data files of other source stamps (and
    numba's numbered ones): :func:`_drop_stale`.
    """
    base = self._index_name[:-len('.nbi')]
    stamp = hashlib.sha256(repr((self._source_stamp, self._version)).encode()).hexdigest()[:8]
    name = '%s.%s-%s.nbc' % (base, stamp, hashlib.sha256(repr(key).encode()).hexdigest()[:16])
    self._save_data(name, data)
    with _file_lock(self._index_path + '.lock'):
        overloads = self._load_index()
        if overloads.get(key) != name:
            overloads[key] = name
            self._save_index(overloads)
        _drop_stale(self._cache_path, base, stamp)


def _drop_stale(folder, base, stamp):
    """Remove ``folder``'s data files of function ``base`` not saved for source ``stamp``."""
    keep = '%s.%s-' % (base, stamp)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for f in names:
        if f.startswith(base + '.') and f.endswith('.nbc') and not f.startswith(keep):
            try:
                os.remove(os.path.join(folder, f))
            except OSError:
                pass


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


def _elf_defined_symbols(obj):
    """Names of the symbols an ELF64 little-endian object file defines; None if ``obj`` is not
    one, or has no symbol table, or does not parse.

    Defined: a section index other than ``SHN_UNDEF``, not a section or file symbol, with a
    name (the ELF specification's symbol table, ``Elf64_Sym``). For numba's cached kernels
    the set equals what numba reads from the kernel's IR (checked in the tests).
    """
    if len(obj) < 64 or obj[:4] != b'\x7fELF' or obj[4] != 2 or obj[5] != 1:
        return None
    try:
        shoff, = struct.unpack_from('<Q', obj, 0x28)
        shentsize, shnum = struct.unpack_from('<HH', obj, 0x3A)
        sections = [struct.unpack_from('<IIQQQQIIQQ', obj, shoff + i * shentsize)
                    for i in range(shnum)]
        tables = [sh for sh in sections if sh[1] == 2 and sh[9] > 0]     # SHT_SYMTAB
        names = set()
        for sh in tables:
            offset, size, link, entsize = sh[4], sh[5], sh[6], sh[9]
            strings = sections[link][4]
            for at in range(offset + entsize, offset + size, entsize):   # entry 0 is null
                name, info, _, shndx = struct.unpack_from('<IBBH', obj, at)
                if shndx == 0 or info & 0xF in (3, 4) or name == 0:  # undefined, SECTION, FILE
                    continue
                start = strings + name
                names.add(obj[start:obj.index(b'\0', start)].decode())
    except (struct.error, IndexError, ValueError, UnicodeDecodeError):
        return None     # not the object file it claims to be: numba's own load
    return names if tables else None


def _lazy_shared(real):
    """numba's ``CPUCodeLibrary._unserialize`` (a cache load), the kernel's IR left unparsed.

    numba stores a cached kernel as its object code and its LLVM IR (bitcode), and
    on every load parses the IR and walks it for the names of the symbols the kernel
    defines (about two thirds of a load's time). ResNet-18's warm start at batch 32
    loads 25 kernels: 1.09 s before, 0.94 s after; LeNet's 0.47 s and 0.42 s (best of
    three interleaved rounds). The IR is needed only when a new compile links the kernel in
    (:func:`_shared_on_demand`); the names are read from the object file's symbol
    table instead. Any other kind of entry, or object code that is not ELF (not
    Linux), loads as numba does.
    """
    def _unserialize(cls, codegen, state):
        name, kind, data = state
        # (an entry with more than object code and IR: numba's own load refuses it)
        names = _elf_defined_symbols(data[0]) if kind == 'object' and len(data) == 2 else None
        engine = getattr(codegen, '_engine', None)
        if names is None or not isinstance(getattr(engine, '_defined_symbols', None), set):
            return real(cls, codegen, state)
        self = codegen.create_library(name)
        self.enable_object_caching()
        self._set_compiled_object(data[0])
        self._ff_bitcode = data[1]
        self._finalize_final_module()
        engine._defined_symbols |= names
        return self
    _unserialize.__wrapped__ = real
    return classmethod(_unserialize)


def _shared_on_demand(real):
    """numba's ``CPUCodeLibrary._get_module_for_linking``, parsing a lazily loaded kernel's
    IR (:func:`_lazy_shared`) the first time it is linked into another."""
    def _get_module_for_linking(self):
        bitcode = self.__dict__.pop('_ff_bitcode', None)
        if bitcode is not None and self._shared_module is None:
            from llvmlite import binding as ll
            self._shared_module = ll.parse_bitcode(bitcode)
        return real(self)
    _get_module_for_linking.__wrapped__ = real
    return _get_module_for_linking


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
    if lib is not None and hasattr(lib, '_get_module_for_linking') and \
            not hasattr(lib._get_module_for_linking, '__wrapped__') and \
            isinstance(lib.__dict__.get('_unserialize'), classmethod):
        lib._unserialize = _lazy_shared(lib.__dict__['_unserialize'].__func__)
        lib._get_module_for_linking = _shared_on_demand(lib._get_module_for_linking)


_install_stable_index_key()
