"""Which process compiles which kernel in a cold start with a compile-ahead child.

The parent and the child of :mod:`ffnumba._compile_ahead` each install one
:class:`_Claims`, which wraps numba's disk-cache lookup and save so that a
kernel (a numba dispatcher of ffnumba and one signature) is compiled by one of
the two only, and the other loads it from the cache. The helpers compiled
inside a kernel are claimed too: the convolution's forward and backward drivers
share most of theirs (im2col, GEMM dispatch, the scatter), and both processes
compiled them side by side at the start of every cold start before helpers were
claimed (about 2 s of compile each in ResNet-18's).
"""
import hashlib
import logging
import os
import shutil
import time

__all__ = ['CLAIM_WAIT_MAX', 'CLAIM_POLL', 'TRACE_ENV']

_LOG = logging.getLogger(__name__)

#: A claim older than this (seconds) is stalled (a starved or stuck process): the other one
#: stops waiting and compiles the kernel itself (the largest compile takes about 4 s on an
#: idle core).
CLAIM_WAIT_MAX = 10.0
#: Seconds between two looks at the cache while a process waits for the other's kernel.
CLAIM_POLL = 0.01
#: Environment variable naming a file both processes append their claims' timeline to
#: (:func:`_trace`; ``benchmarks/cold_start.py --timeline`` sets and reads it).
TRACE_ENV = 'FFNUMBA_AHEAD_TRACE'


class _Skip(Exception):
    """Raised in the child for a kernel the parent has claimed: the child drops the node.

    It also passes through the load of a cached kernel's by-reference helpers
    (:func:`ffnumba._jit_link._load`), which turns other failures into a cache miss.
    """

    _ff_control_flow = True


class _Claims:
    """Which process compiles which kernel: one file per kernel in a folder of the cold start.

    Installed (:meth:`install`) in the parent and in the child, it wraps the
    disk-cache lookup of numba's dispatchers (``Cache.load_overload``, the
    step before a compile) for ffnumba's kernels, at the top of a compile and
    for the helpers compiled inside one (``numba:compile`` events count the
    depth). On a cache miss the process creates ``<folder>/<kernel>.claim``
    exclusively (``O_EXCL``) and compiles; numba then saves the kernel
    (``save_overload``) and the claim file is removed. When the file is
    there already, the other process is compiling that kernel. At the top of
    a compile the child raises :class:`_Skip` (it goes on to another node)
    and the parent waits; inside a compile either waits. A waiting process
    polls the cache every :data:`CLAIM_POLL` s until the kernel is there, and
    compiles it itself when the other has exited (``alive()`` false), the
    claim is gone without a cache entry (the other failed), the claim is
    older than :data:`CLAIM_WAIT_MAX` s (a stalled process), or, inside a
    compile, the other process is waiting inside one too (no deadlock).

    Parameters
    ----------
    folder : str
        The claims folder (made by the parent, removed by :meth:`close`).
    role : {'parent', 'child'}
    alive : callable() -> bool, optional
        The parent's test that the child still runs (the child's: always true; the
        parent removes the folder when it is done, which ends the child's waits).
    """

    _active = None      # the installed instance of this process
    _real = None        # numba's (load_overload, save_overload)

    def __init__(self, folder, role, alive=None):
        self.folder = folder
        self.role = role
        self.alive = alive or (lambda: True)
        self.depth = 0
        self.mine = {}      # (cache id, signature) -> claim path, held by this process
        self.waited = 0.0   # seconds this process waited for the other's kernels
        self.deferred = None    # the parent's claim that deferred the child's node (_wait_for)
        self.patient = False    # the child waits for the parent's helpers (its last pass)

    # ------------------------------------------------------------ hooks
    def install(self):
        """Wrap numba's cache lookup and save for this process (one instance at a time)."""
        from numba.core import caching, event
        cls = caching.Cache
        if _Claims._real is None:
            _Claims._real = (cls.load_overload, cls.save_overload)
            cls.load_overload = _load_overload
            cls.save_overload = _save_overload
            event.register('numba:compile', _depth_listener())
        _Claims._active = self

    def close(self):
        """Uninstall (the wrappers stay, inert) and remove the claims folder."""
        if _Claims._active is self:
            _Claims._active = None
        shutil.rmtree(self.folder, ignore_errors=True)

    # ------------------------------------------------------------ claims
    def _path(self, cache, sig, target_context):
        """The claim file of a kernel: named by numba's cache file and index key (the
        signature, the machine, the hashes of the bytecode and of a closure's cells), the
        same in both processes."""
        key = cache._index_key(sig, target_context.codegen())
        name = '%s|%s|%r' % (cache._cache_path, cache._impl.filename_base, key)
        return os.path.join(self.folder, hashlib.sha1(name.encode()).hexdigest()[:24] + '.claim')

    def miss(self, cache, sig, target_context, nested=False):
        """A kernel not in the cache: claim it (None: compile it here), or, when the other
        process holds its claim, skip it (the child at the top of a compile: :class:`_Skip`)
        or wait for it (:meth:`_wait_for`) and return what the other cached (None: compile it
        here). ``nested``: a helper compiled inside another kernel."""
        try:
            path = self._path(cache, sig, target_context)
        except Exception:   # noqa: BLE001 -- numba's internals changed: compile here unclaimed
            return None
        while True:
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            except OSError:             # no folder (closed) or not writable: compile here
                return None
            else:
                os.write(fd, self.role.encode())
                os.close(fd)
                self.mine[(id(cache), str(sig))] = path
                _trace(self.role, 'claim', cache, sig, nested)
                return None
            if self.role == 'child' and not nested:     # (its own claim too: a deferral)
                _trace(self.role, 'skip', cache, sig, nested)
                raise _Skip(str(sig))
            if path in self.mine.values():  # the parent's own, left by a compile that raised
                return None
            res, again = self._wait_for(path, cache, sig, target_context, nested)
            if not again:
                return res
            # the claim was dropped without a cache entry: claim it ourselves

    def _wait_for(self, path, cache, sig, target_context, nested):
        """Poll the cache while the other process holds the claim ``path``.

        In the child's first pass over its nodes (``patient`` false) a helper
        the parent holds ends the node's compile instead (:class:`_Skip`,
        ``deferred``: the claim's path): the child moves on to its next node and
        retries this one once the parent's helper is in the cache.

        ``(entry, False)`` once the kernel is cached; ``(None, False)`` to compile
        it here, unclaimed: the other process has exited (``alive()`` false) or
        held the claim :data:`CLAIM_WAIT_MAX` s, or (``nested``) the other
        process is itself waiting inside a compile; ``(None, True)`` when the
        claim is gone without an entry (claim it). Waits inside a compile take
        ``<folder>/nested.waiting`` exclusively: only one process at a time waits
        while it holds claims of its own, so two never wait for each other (a
        process at the top of a compile holds none).
        """
        mark = os.path.join(self.folder, 'nested.waiting')
        if nested and self.role == 'child' and not self.patient:
            self.deferred = path        # the child retries the node once this claim is gone
            _trace(self.role, 'defer', cache, sig, nested)
            raise _Skip(str(sig))
        if nested:
            try:
                os.close(os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except OSError:             # the other waits (or the folder is gone): compile here
                _trace(self.role, 'no-wait', cache, sig, nested)
                return None, False
        _trace(self.role, 'wait', cache, sig, nested)
        tic = time.perf_counter()
        try:
            while self.alive() and _age(path) < CLAIM_WAIT_MAX:
                time.sleep(CLAIM_POLL)
                res = self._load(cache, sig, target_context)
                if res is not None:
                    _trace(self.role, 'loaded', cache, sig, nested)
                    return res, False
            res = self._load(cache, sig, target_context)    # saved as the claim went
            _trace(self.role, 'loaded' if res is not None else 'gave-up', cache, sig, nested)
            return res, res is None and not os.path.exists(path)
        finally:
            self.waited += time.perf_counter() - tic
            if nested:
                try:
                    os.remove(mark)
                except OSError:
                    pass

    @staticmethod
    def _load(cache, sig, target_context):
        """numba's own cache lookup. A save by the other process is never half seen: the
        data file is written before the index names it and each is renamed into place
        (:func:`ffnumba._jit_cache._safe_save` for ffnumba's kernels, which also keeps two
        saves into one index from losing an entry)."""
        return _Claims._real[0](cache, sig, target_context)

    def saved(self, cache, sig):
        """numba saved a kernel this process compiled: its claim ends."""
        path = self.mine.pop((id(cache), str(sig)), None)
        if path is not None:
            _trace(self.role, 'saved', cache, sig, self.depth > 0)
            try:
                os.remove(path)
            except OSError:
                pass

    def release(self):
        """Drop every claim this process holds (the child, after a node failed)."""
        for path in self.mine.values():
            try:
                os.remove(path)
            except OSError:
                pass
        self.mine.clear()


def _install(claims):
    """:meth:`_Claims.install`; without claims (each compiles what it meets, as before them)
    if numba's cache classes are not what it wraps."""
    try:
        claims.install()
    except Exception:   # noqa: BLE001 -- another numba: no claims
        _LOG.debug('compile-ahead claims not installed', exc_info=True)


def _trace(role, event, cache, sig, nested):
    """One line of the cold start's timeline, when :data:`TRACE_ENV` names a file:
    ``<unix time> <role> <event> <top|nested> <module.function> <signature>``."""
    path = os.environ.get(TRACE_ENV)
    if not path:
        return
    fn = getattr(cache, '_py_func', None)
    name = '%s.%s' % (getattr(fn, '__module__', '?'), getattr(fn, '__qualname__', '?'))
    line = '%.4f %s %s %s %s %s\n' % (time.time(), role, event,
                                      'nested' if nested else 'top', name,
                                      str(sig).replace(' ', ''))
    try:
        with open(path, 'a') as f:     # one short append per line: whole lines from both
            f.write(line)
    except OSError:
        pass


def _age(path):
    """Seconds since the claim ``path`` was made; infinite when it is gone."""
    try:
        return time.time() - os.stat(path).st_mtime
    except OSError:
        return float('inf')


def _ours(cache):
    mod = getattr(getattr(cache, '_py_func', None), '__module__', '') or ''
    return mod.startswith('ffnumba.')


def _load_overload(cache, sig, target_context):
    claims = _Claims._active
    if claims is None:
        return _Claims._real[0](cache, sig, target_context)
    res = claims._load(cache, sig, target_context)
    if res is not None or not _ours(cache):
        return res
    return claims.miss(cache, sig, target_context, nested=claims.depth > 0)


def _save_overload(cache, sig, data):
    claims = _Claims._active
    if claims is None:
        return _Claims._real[1](cache, sig, data)
    try:
        _Claims._real[1](cache, sig, data)
    finally:
        claims.saved(cache, sig)


def _depth_listener():
    from numba.core import event

    class Depth(event.Listener):
        """Counts the compiles in progress (numba compiles under one process-wide lock)."""

        def on_start(self, ev):
            if _Claims._active is not None:
                _Claims._active.depth += 1

        def on_end(self, ev):
            if _Claims._active is not None:
                _Claims._active.depth = max(0, _Claims._active.depth - 1)
    return Depth()
