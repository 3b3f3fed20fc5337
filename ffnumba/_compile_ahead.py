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

The two split the kernels by **claims** (:mod:`ffnumba._compile_claims`):
before either compiles a kernel that is not in the cache (a numba dispatcher
of ffnumba and one signature), it claims it with a file created exclusively
in a folder of this cold start. A kernel the parent has claimed the child
skips: it drops that node and goes on to the next. A kernel the child has
claimed the parent waits for and then loads from the cache (unless the child
has exited or has held the claim :data:`CLAIM_WAIT_MAX` seconds: then it
compiles it itself). The helpers compiled inside a kernel are claimed too; a
node of the child that needs a helper the parent is compiling is retried as
soon as that helper is cached (:func:`main`). So no kernel and no helper is
compiled by both (before claims, the kernels the two reached at the same time
were, in a ResNet-18 cold start, the channel-split backward driver and two
elementwise kernels; before helper claims, the im2col and GEMM helpers the
convolution's forward and backward drivers share, about 2 s of each's start). The child runs
at a lower priority (``nice`` 10), so on a busy core it yields to the parent.
When the parent's first backward is done the child, if still running, is
stopped (:meth:`Ahead.done`) and the claims folder removed.

Safe by construction: numba writes every cache file under a temporary name
and renames it into place, so neither process ever reads a torn file (a
child stopped while writing leaves at most an unused ``*.tmp.*`` file); two
saves into one function's index never race (:func:`ffnumba._jit_cache._safe_save`:
numba's own scheme lost entries and could give two kernels one data file); the
child shares nothing else with the parent, and
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
import hashlib
import logging
import os
import pickle
import shutil
import subprocess
import sys
import threading

from ._compile_claims import CLAIM_WAIT_MAX, _Claims, _Skip, _install

__all__ = ['start', 'Ahead', 'enabled', 'WARM_FORWARD', 'CLAIM_WAIT_MAX', 'main']

_LOG = logging.getLogger(__name__)


#: A first forward faster than this (seconds) loaded its kernels from the cache: the child is stopped.
WARM_FORWARD = 1.0

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


def named(nodes, runs):
    """``runs`` (an executor's forward and backward call records) as the ``(record, op
    name)`` lists :func:`start` takes; ``nodes``: the graph's nodes (``record.nid`` indexes
    them; a variable's name is None)."""
    names = [node.op.name if node.op is not None else None for node in nodes]
    return tuple([(r, names[r.nid]) for r in run] for run in runs)


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
    parent has claimed is dropped (:class:`_Skip`). A node that needs a helper
    the parent is compiling is deferred: it runs again before the next node
    once the parent's claim of that helper is gone, and after the last node
    (waiting for the parent's helpers then) if it never was. A backward that
    needs its forward's state runs that forward first.
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
    deferred = []       # (record, the parent's claim it waits for)
    for rec in pickle.loads(payload)[::-1]:
        still = []
        for r, path in deferred + [(rec, None)]:
            if path is not None and os.path.exists(path):
                still.append((r, path))     # the parent still compiles that helper
                continue
            path = _try_node(r, rng, claims)
            if path is not None:
                still.append((r, path))
        deferred = still
    if claims is not None:
        claims.patient = True       # what is still deferred waits for the parent's helpers
    for rec, _ in deferred:
        _try_node(rec, rng, claims)
    _write_marker(marker)


def _try_node(rec, rng, claims):
    """:func:`_run_node`; the path of the parent's claim of a helper it needed when it was
    deferred (retry it once that claim is gone), else None (done, or dropped)."""
    if claims is not None:
        claims.deferred = None
    try:
        _run_node(rec, rng)
    except Exception:   # noqa: BLE001 -- claimed by the parent, or the parent compiles it
        if claims is not None:
            claims.release()
            return claims.deferred
    return None


#: Ops whose training forward keeps what their backward then uses instead of a kernel of
#: its own (max pooling's positions, :mod:`ffnumba.ops.nn._pool_argmax`): the child runs
#: the forward before the backward, so it compiles the backward the parent will run.
FORWARD_FIRST = frozenset(('Pooling',))


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
    if rec[1] in FORWARD_FIRST:     # its backward takes another kernel after a forward
        direct(fwd, p, ins, outs, aux)(ctx, p, ins, outs, aux)
    try:
        direct(bwd, p, og, ins, outs, ig, reqs, aux)(ctx, p, og, ins, outs, ig, reqs, aux)
    except _Skip:
        raise
    except Exception:   # noqa: BLE001 -- e.g. state the forward keeps: run it first
        if _Claims._active is not None and _Claims._active.deferred is not None:
            raise       # numba wrapped the child's _Skip: the node is deferred
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
