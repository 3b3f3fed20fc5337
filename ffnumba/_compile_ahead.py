"""A cold start compiles on two cores: a child process shares the kernels with the parent.

numba compiles on one core, under a process-wide lock, so a cold first
training batch compiles the forward's kernels and then the backward's, one
after the other (about 9 s for LeNet, 13 s for ResNet-18 on 2 cores). The
kernels do not depend on the arrays' values, only on their shapes and dtypes,
so on a machine with a second free core the first CPU executor of a process
that runs a training forward starts one child process (:func:`start`). The
child imports ffnumba and runs the bound plan's compute functions on zero
arrays of the same shapes and dtypes, in reverse: the backward's nodes last
to first, then the forward's (a backward that needs its forward's state runs
that forward first). Its results are thrown away, but numba writes each
kernel it compiles to the on-disk cache (``cache=True``). The parent runs
its forward and backward from the front, loading from the cache what the
child has compiled, so the two meet midway whichever is faster.

The two split the kernels by **claims**: before either compiles a kernel
that is not in the cache (a numba dispatcher of ffnumba and one signature,
at the top of a compile; the helpers it calls are compiled inside it), it
claims it with a file created exclusively in a folder of this cold start
(:class:`_Claims`). A kernel the parent has claimed the child skips: it
drops that node and goes on to the next. A kernel the child has claimed the
parent waits for and then loads from the cache (unless the child has exited
or has held the claim :data:`CLAIM_WAIT_MAX` seconds: then it compiles it
itself). So no kernel is compiled by both (before claims, the kernels the
two reached at the same time were: in a ResNet-18 cold start, the
channel-split backward driver and two elementwise kernels). The child runs
at a lower priority (``nice`` 10), so on a busy core it yields to the parent.
When the parent's first backward is done the child, if still running, is
stopped (:meth:`Ahead.done`) and the claims folder removed.

Safe by construction: numba writes every cache file under a temporary name
and renames it into place, so neither process ever reads a torn file (a
child stopped while writing leaves at most an unused ``*.tmp.*`` file); the
two read and write numba's cache under one lock (:meth:`_Claims.locked`), so
two saves into one function's index never race (which lost entries, and
could give two kernels one data file); the child shares nothing else with the parent, and
whatever it has not compiled the parent compiles as before. It runs only when
it can help:

* ``FFNUMBA_COMPILE_AHEAD=0`` turns it off (the test suite does);
  ``=force`` starts the child whatever the load; ``=wait`` also makes the
  first backward wait for it (to test or time the child alone);
* only with at least two usable cores (``os.sched_getaffinity``) and, unless
  forced, one of them idle (:func:`enabled`: the tasks running right now and
  the one-minute load average; on a busy machine the child would only slow
  the parent down), numba's disk cache writable, and a CPU executor with a
  backward pass;
* once per process (the first training executor: the cold start), and
  only while the cache lacks this plan's marker file, which the child writes
  when it is done and the parent after its first backward (a warm start
  spawns nothing);
* a first forward that took under :data:`WARM_FORWARD` seconds found its
  kernels cached: the parent stops the child before its backward;
* a child still running when the parent's interpreter exits is stopped
  then (``atexit``), so no process outlives it.
"""
import atexit
import contextlib
import hashlib
import logging
import os
import pickle
import shutil
import subprocess
import sys
import threading
import time

__all__ = ['start', 'Ahead', 'enabled', 'WARM_FORWARD', 'CLAIM_WAIT_MAX', 'main']

_LOG = logging.getLogger(__name__)


#: A first forward faster than this (seconds) loaded its kernels from the cache: the child is stopped.
WARM_FORWARD = 1.0
#: A claim of the child older than this (seconds) is stalled (a starved or stuck child): the
#: parent stops waiting and compiles the kernel itself (the largest compile takes about 4 s on an
#: idle core).
CLAIM_WAIT_MAX = 10.0
#: Seconds between two looks at the cache while the parent waits for the child's kernel.
CLAIM_POLL = 0.01

_lock = threading.Lock()
_started = False      # one child per process: the cold start


def _mode():
    return os.environ.get('FFNUMBA_COMPILE_AHEAD', '1').strip().lower()


def enabled():
    """Whether a cold start may compile ahead now.

    The switch is on and a second core is there and idle: at least two usable
    cores, and either no more tasks running right now besides this one than
    there are cores less two, or a one-minute load average at most their
    number less one (on a busy machine the child would only take CPU from the
    parent).
    ``FFNUMBA_COMPILE_AHEAD=force`` or ``wait`` skip the load test.
    """
    mode = _mode()
    if mode in ('0', 'false', 'no', 'off'):
        return False
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):     # not on Linux
        cores = os.cpu_count() or 1
    if cores < 2:
        return False
    if mode in ('force', 'wait'):
        return True
    others, load = _load()
    return others <= cores - 2 or load <= cores - 1


def _load():
    """``(tasks running now besides this one, one-minute load average)``; ``(0, 0.0)`` if unknown."""
    try:
        with open('/proc/loadavg') as f:
            fields = f.read().split()
        return int(fields[3].split('/')[0]) - 1, float(fields[0])
    except (OSError, ValueError, IndexError):     # not Linux
        try:
            return 0, os.getloadavg()[0]
        except (AttributeError, OSError):
            return 0, 0.0


def _cache_dir():
    """The folder numba caches ffnumba's convolution kernels in (None if not cached on disk)."""
    try:
        from .ops.nn._im2col import bias_grad
        cache = getattr(bias_grad, '_cache', None)
        path = getattr(cache, '_cache_path', None)
        if path and os.path.isdir(path) or path and _mkdir(path):
            return path if os.access(path, os.W_OK) else None
    except Exception:   # noqa: BLE001 -- no cache, no compile-ahead
        return None
    return None


def _mkdir(path):
    try:
        os.makedirs(path, exist_ok=True)
        return True
    except OSError:
        return False


def _spec_of(arrays):
    return [None if a is None else (tuple(a.shape), a.dtype.str) for a in arrays]


def _plan_spec(fwd, bwd):
    """The work list of the child as picklable records, in the order the parent runs them.

    ``('f', op, params, ins, outs, aux)`` per forward node, then ``('b', op,
    params, ograds, ins, outs, igrads, reqs, aux)`` per backward node; arrays
    as ``(shape, dtype)`` (or None).
    """
    recs = [('f', _name(r, name), r.p, _spec_of(r.ins), _spec_of(r.outs), _spec_of(r.aux))
            for r, name in fwd]
    recs += [('b', _name(r, name), r.p, _spec_of(r.ograds), _spec_of(r.ins), _spec_of(r.outs),
              _spec_of(r.igrads), list(r.reqs), _spec_of(r.aux)) for r, name in bwd]
    return recs


def _name(rec, name):
    """The op name of a record, or the key of a fused training call
    (:func:`ffnumba._executor_train_fuse.ahead_calls`)."""
    return getattr(rec, 'ahead', None) or name


class Ahead:
    """A running compile-ahead child: :meth:`before_backward`, then :meth:`done`.

    ``claims``: this cold start's :class:`_Claims` (installed in this process
    while the child runs), or None.
    """

    def __init__(self, proc, marker, claims=None):
        self._proc = proc
        self._marker = marker
        self._claims = claims
        atexit.register(self.stop)

    def before_backward(self, forward_seconds):
        """Before the first backward: stop the child if the forward found a warm cache.

        A first forward faster than :data:`WARM_FORWARD` seconds loaded its
        kernels from the cache (a cache filled without this plan's marker, e.g.
        with compile-ahead off): the backward's are cached too and the child
        would only take CPU from the parent.
        """
        if forward_seconds < WARM_FORWARD:
            self.stop()
        elif self._proc is not None and _mode() == 'wait':
            self._proc.wait()

    def done(self):
        """After the first backward: stop the child; mark this plan's kernels as cached."""
        self.stop()
        _write_marker(self._marker)

    def stop(self):
        """Stop the child if it still runs and reap it; end the claims (idempotent)."""
        proc, self._proc = self._proc, None
        claims, self._claims = self._claims, None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            atexit.unregister(self.stop)
        if claims is not None:
            claims.close()


class _Skip(Exception):
    """Raised in the child for a kernel the parent has claimed: the child drops the node."""


class _Claims:
    """Which process compiles which kernel: one file per kernel in a folder of the cold start.

    Installed (:meth:`install`) in the parent and in the child, it wraps the
    disk-cache lookup of numba's dispatchers (``Cache.load_overload``, the
    step before a compile) for ffnumba's kernels at the top of a compile (not
    the helpers compiled inside one: ``numba:compile`` events count the
    depth). On a cache miss the process creates ``<folder>/<kernel>.claim``
    exclusively (``O_EXCL``) and compiles; numba then saves the kernel
    (``save_overload``) and the claim file is removed. When the file is
    there already, the other process is compiling that kernel: the child
    raises :class:`_Skip`; the parent polls the cache every
    :data:`CLAIM_POLL` s until the kernel is there, and compiles it itself
    when the child has exited (``alive()`` false), the claim is gone without
    a cache entry (the child failed), or the claim is older than
    :data:`CLAIM_WAIT_MAX` s (a stalled child).

    Parameters
    ----------
    folder : str
        The claims folder (made by the parent, removed by :meth:`close`).
    role : {'parent', 'child'}
    alive : callable() -> bool, optional
        The parent's test that the child still runs.
    """

    _active = None      # the installed instance of this process
    _real = None        # numba's (load_overload, save_overload)

    def __init__(self, folder, role, alive=None):
        self.folder = folder
        self.role = role
        self.alive = alive or (lambda: True)
        self.depth = 0
        self.mine = {}      # (cache id, signature) -> claim path, held by this process
        self.waited = 0.0   # seconds the parent waited for the child's kernels
        self._lock_path = os.path.join(folder, 'cache.lock')

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

    def miss(self, cache, sig, target_context):
        """A top-level kernel not in the cache: claim it (None: compile it here), skip it
        (child), or wait for the child's and return what it cached (parent)."""
        try:
            path = self._path(cache, sig, target_context)
        except Exception:   # noqa: BLE001 -- numba's internals changed: compile here unclaimed
            return None
        tic = time.perf_counter()
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
                return None
            if self.role == 'child':
                raise _Skip(str(sig))
            # the child compiles it: wait for the cache entry
            while self.alive() and _age(path) < CLAIM_WAIT_MAX:
                time.sleep(CLAIM_POLL)
                with self.locked():
                    res = _Claims._real[0](cache, sig, target_context)
                if res is not None:
                    self.waited += time.perf_counter() - tic
                    return res
            with self.locked():     # saved as the claim went
                res = _Claims._real[0](cache, sig, target_context)
            self.waited += time.perf_counter() - tic
            if res is not None:
                return res
            if os.path.exists(path):    # the child is gone or slow: compile here, unclaimed
                return None
            # the claim was dropped without a cache entry: claim it ourselves

    @contextlib.contextmanager
    def locked(self):
        """Hold this cold start's cache lock (``<folder>/cache.lock``, ``flock``) for one
        numba cache read or write.

        numba's save of a kernel reads its function's index, adds the entry and
        writes the index back, then writes the data file it numbered. The index
        is shared by every signature of a function (and by every closure of one
        template, which has one qualname), so two processes saving into it at
        once lose one entry (recompiled by the next warm start) or give two
        keys one data file, one index naming the other's code: a kernel that
        computes another operator's result. Under the lock the saves of the
        parent and the child run one after the other, and neither reads an
        entry while the other writes it. Without the folder (closed) or
        ``fcntl`` (not POSIX) it holds nothing.
        """
        fd = None
        try:
            import fcntl
            fd = os.open(self._lock_path, os.O_CREAT | os.O_RDWR)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except (ImportError, OSError):
            if fd is not None:
                os.close(fd)
            fd = None
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)        # closing the only descriptor releases the flock

    def saved(self, cache, sig):
        """numba saved a kernel this process compiled: its claim ends."""
        path = self.mine.pop((id(cache), str(sig)), None)
        if path is not None:
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
    with claims.locked():
        res = _Claims._real[0](cache, sig, target_context)
    if res is not None or claims.depth > 0 or not _ours(cache):
        return res
    return claims.miss(cache, sig, target_context)


def _save_overload(cache, sig, data):
    claims = _Claims._active
    if claims is None:
        return _Claims._real[1](cache, sig, data)
    try:
        with claims.locked():
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


def start(device_type, fwd, bwd):
    """Start the child for a bound executor's ``fwd`` and ``bwd`` plans, or return None.

    Each plan is a list of ``(record, op name)``, records with the executor's
    ``p``, ``ins``, ``outs``, ``aux`` (and ``ograds``, ``igrads``, ``reqs``).
    ``None`` when compile-ahead is off or useless (see the module notes): the
    caller then compiles everything itself, as without this module.
    """
    global _started
    if device_type not in ('cpu', 'cpu_pinned', 'cpu_shared') or not bwd:
        return None
    with _lock:
        if _started or not enabled():
            return None
        _started = True
    cache = _cache_dir()
    if cache is None:
        return None
    try:
        import numba
        payload = pickle.dumps(_plan_spec(fwd, bwd), protocol=pickle.HIGHEST_PROTOCOL)
        key = hashlib.sha1(payload + numba.__version__.encode()).hexdigest()[:20]
    except Exception:   # noqa: BLE001 -- params that do not pickle: compile here
        return None
    marker = os.path.join(cache, 'ffnumba-ahead-%s.done' % key)
    if os.path.exists(marker):          # a warm cache: nothing to compile ahead
        return None
    folder = '%s.claims-%d' % (marker[:-len('.done')], os.getpid())
    if not _mkdir(folder):
        return None
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env['PYTHONPATH'] = root + os.pathsep + env.get('PYTHONPATH', '')
    env['FFNUMBA_COMPILE_AHEAD'] = '0'
    try:
        proc = subprocess.Popen([sys.executable, '-c', _CHILD, marker, folder],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env, close_fds=True)
    except Exception:   # noqa: BLE001 -- no child: compile here as before
        _LOG.debug('compile-ahead child did not start', exc_info=True)
        shutil.rmtree(folder, ignore_errors=True)
        return None
    claims = _Claims(folder, 'parent', alive=lambda: proc.poll() is None)
    _install(claims)
    # fed from a thread: a plan larger than the pipe's buffer would otherwise block
    # this process until the child has imported ffnumba and reads it
    threading.Thread(target=_feed, args=(proc.stdin, payload), daemon=True,
                     name='ffnumba-compile-ahead-feed').start()
    return Ahead(proc, marker, claims)


_CHILD = ('import sys; from ffnumba._compile_ahead import main; '
          'main(sys.argv[1], sys.stdin.buffer.read(), sys.argv[2])')


def _feed(pipe, payload):
    try:
        pipe.write(payload)
        pipe.close()
    except OSError:     # the child is gone (stopped early): nothing to feed
        pass


def _zeros(spec):
    import numpy as np
    return [None if s is None else np.zeros(s[0], np.dtype(s[1])) for s in spec]


def main(marker, payload, folder=None):
    """The child: run the plan's nodes on zeros, last first; write ``marker`` when done.

    ``payload``: the pickled list of :func:`_plan_spec`, in the parent's
    order (forward, then backward); ``folder``: the claims folder of
    :class:`_Claims` (None: no claims). Last first: the parent works from the
    front, so the two meet midway whichever is faster; a node whose kernel the
    parent has claimed is dropped (:class:`_Skip`). A backward that needs its
    forward's state runs that forward first.
    """
    try:
        os.nice(10)     # speculative work: yields to the parent (and everything else) on a busy core
    except (AttributeError, OSError):
        pass
    import numpy as np
    np.seterr(all='ignore')
    claims = None
    if folder is not None:
        claims = _Claims(folder, 'child')
        _install(claims)
    rng = np.random.default_rng(0)
    for rec in pickle.loads(payload)[::-1]:
        try:
            _run_node(rec, rng)
        except Exception:   # noqa: BLE001 -- claimed by the parent, or the parent compiles it
            if claims is not None:
                claims.release()
            continue
    _write_marker(marker)


def _run_node(rec, rng):
    """Run one :func:`_plan_spec` record on zeros (see :func:`main`)."""
    from .context import cpu
    from .jit import direct
    from .ops.registry import OpContext, get_op
    if isinstance(rec[1], tuple):       # a fused training call
        from ._executor_train_fuse import ahead_calls
        fwd, bwd = ahead_calls(rec[1])
    else:
        fwd, bwd = get_op(rec[1]).compute('cpu')
    ctx = OpContext(True, cpu(), {}, rng, str(rec[1]))
    p = rec[2]
    if rec[0] == 'f':
        ins, outs, aux = _zeros(rec[3]), _zeros(rec[4]), _zeros(rec[5])
        direct(fwd, p, ins, outs, aux)(ctx, p, ins, outs, aux)
        return
    og, ins, outs, ig, aux = (_zeros(rec[3]), _zeros(rec[4]), _zeros(rec[5]),
                              _zeros(rec[6]), _zeros(rec[8]))
    reqs = rec[7]
    try:
        direct(bwd, p, og, ins, outs, ig, reqs, aux)(ctx, p, og, ins, outs, ig, reqs, aux)
    except _Skip:
        raise
    except Exception:   # noqa: BLE001 -- e.g. state the forward keeps: run it first
        direct(fwd, p, ins, outs, aux)(ctx, p, ins, outs, aux)
        direct(bwd, p, og, ins, outs, ig, reqs, aux)(ctx, p, og, ins, outs, ig, reqs, aux)


def _write_marker(marker):
    if os.path.exists(marker):
        return
    tmp = '%s.tmp.%d' % (marker, os.getpid())
    try:
        with open(tmp, 'w') as f:
            f.write('done\n')
        os.replace(tmp, marker)
    except OSError:     # a read-only cache: the next cold start spawns again
        pass
