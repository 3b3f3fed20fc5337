"""A cold start compiles on two cores: a child process compiles the kernels from the back.

numba compiles on one core, under a process-wide lock, so a cold first
training batch compiles the forward's kernels and then the backward's, one
after the other (about 9 s for LeNet, 13 s for ResNet-18 on 2 cores). The
backward's kernels do not depend on the forward's results, only on the
arrays' shapes and dtypes, so on a machine with a second free core the first
CPU executor of a process that runs a training forward starts one child
process (:func:`start`). The child imports ffnumba and runs the bound plan's
compute functions on zero arrays of the same shapes and dtypes, in reverse:
the backward's nodes last to first, then the forward's (a backward that needs
its forward's state runs that forward first). Its results are thrown away,
but numba writes each kernel it compiles to the on-disk cache
(``cache=True``). The parent never waits for it: it runs its forward and
backward from the front, loading from the cache what the child has compiled
and compiling the rest itself, so the two meet midway whichever is faster
(at worst one kernel is compiled by both). The child runs at a lower
priority (``nice`` 10), so on a busy core it yields to the parent. When the
parent's first backward is done the child, if still running, is stopped
(:meth:`Ahead.done`).

Safe by construction: numba writes every cache file under a temporary name
and renames it into place, data before index, so neither process ever reads
a torn or half-written entry (a kernel both compile is written twice, with
the same contents; a child stopped while writing leaves at most an unused
``*.tmp.*`` file); the child shares nothing else with the parent, and
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
import subprocess
import sys
import threading

__all__ = ['start', 'Ahead', 'enabled', 'WARM_FORWARD', 'main']

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
    recs = [('f', name, r.p, _spec_of(r.ins), _spec_of(r.outs), _spec_of(r.aux))
            for r, name in fwd]
    recs += [('b', name, r.p, _spec_of(r.ograds), _spec_of(r.ins), _spec_of(r.outs),
              _spec_of(r.igrads), list(r.reqs), _spec_of(r.aux)) for r, name in bwd]
    return recs


class Ahead:
    """A running compile-ahead child: :meth:`before_backward`, then :meth:`done`."""

    def __init__(self, proc, marker):
        self._proc = proc
        self._marker = marker
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
        """Stop the child if it still runs and reap it (idempotent)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        atexit.unregister(self.stop)


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
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env['PYTHONPATH'] = root + os.pathsep + env.get('PYTHONPATH', '')
    env['FFNUMBA_COMPILE_AHEAD'] = '0'
    try:
        proc = subprocess.Popen([sys.executable, '-c', _CHILD, marker], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                close_fds=True)
    except Exception:   # noqa: BLE001 -- no child: compile here as before
        _LOG.debug('compile-ahead child did not start', exc_info=True)
        return None
    # fed from a thread: a plan larger than the pipe's buffer would otherwise block
    # this process until the child has imported ffnumba and reads it
    threading.Thread(target=_feed, args=(proc.stdin, payload), daemon=True,
                     name='ffnumba-compile-ahead-feed').start()
    return Ahead(proc, marker)


_CHILD = ('import sys; from ffnumba._compile_ahead import main; '
          'main(sys.argv[1], sys.stdin.buffer.read())')


def _feed(pipe, payload):
    try:
        pipe.write(payload)
        pipe.close()
    except OSError:     # the child is gone (stopped early): nothing to feed
        pass


def _zeros(spec):
    import numpy as np
    return [None if s is None else np.zeros(s[0], np.dtype(s[1])) for s in spec]


def main(marker, payload):
    """The child: run the plan's nodes on zeros, last first; write ``marker`` when done.

    ``payload``: the pickled list of :func:`_plan_spec`, in the parent's
    order (forward, then backward). Last first: the parent works from the
    front, so the two meet midway whichever is faster; a backward that needs
    its forward's state runs that forward first.
    """
    try:
        os.nice(10)     # speculative work: yields to the parent (and everything else) on a busy core
    except (AttributeError, OSError):
        pass
    import numpy as np
    from .context import cpu
    from .jit import direct
    from .ops.registry import OpContext, get_op
    np.seterr(all='ignore')
    rng = np.random.default_rng(0)
    for rec in pickle.loads(payload)[::-1]:
        try:
            fwd, bwd = get_op(rec[1]).compute('cpu')
            ctx = OpContext(True, cpu(), {}, rng, rec[1])
            p = rec[2]
            if rec[0] == 'f':
                ins, outs, aux = _zeros(rec[3]), _zeros(rec[4]), _zeros(rec[5])
                direct(fwd, p, ins, outs, aux)(ctx, p, ins, outs, aux)
                continue
            og, ins, outs, ig, aux = (_zeros(rec[3]), _zeros(rec[4]), _zeros(rec[5]),
                                      _zeros(rec[6]), _zeros(rec[8]))
            reqs = rec[7]
            try:
                direct(bwd, p, og, ins, outs, ig, reqs, aux)(ctx, p, og, ins, outs, ig, reqs, aux)
            except Exception:   # noqa: BLE001 -- e.g. state the forward keeps: run it first
                direct(fwd, p, ins, outs, aux)(ctx, p, ins, outs, aux)
                direct(bwd, p, og, ins, outs, ig, reqs, aux)(ctx, p, og, ins, outs, ig, reqs, aux)
        except Exception:   # noqa: BLE001 -- the parent compiles what the child could not
            continue
    _write_marker(marker)


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
