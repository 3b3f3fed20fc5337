"""Say when numba is compiling kernels, so a cold first batch is never a silent wait.

numba compiles each kernel on its first call in a process, or loads it from its
on-disk cache (``cache=True``). A cold first training batch of LeNet spends tens of
seconds compiling. The executor wraps the first run of each pass in
:func:`first_run`: when that run takes longer than :data:`NOTICE_AFTER` seconds, one
INFO record on the ``ffnumba.compile_notice`` logger says which operators are being
compiled and where numba caches them, and a second says how long it took::

    compiling numba kernels for Convolution, Pooling, FullyConnected (first run only;
    cached in /path/to/ffnumba/**/__pycache__)...
    kernels ready in 12.3 s

Runs that finish sooner (a warm cache) say nothing. Records go wherever the
application sends ``ffnumba`` logs (``logging.basicConfig(level=logging.INFO)``).
"""
import logging
import os
import threading
import time
from contextlib import contextmanager

__all__ = ['first_run', 'cache_location', 'NOTICE_AFTER']

_LOG = logging.getLogger(__name__)

#: Seconds a first run may take before the notice is logged.
NOTICE_AFTER = 1.0

_lock = threading.Lock()
_seen = set()        # (op name, pass) pairs that have run once in this process


def cache_location():
    """Where numba's on-disk cache for ffnumba's kernels lives.

    ``NUMBA_CACHE_DIR`` when set (numba's documented override); otherwise
    the ``__pycache__`` folders beside ffnumba's sources (numba falls back to a
    per-user folder when those are not writable).

    Returns
    -------
    str
    """
    env = os.environ.get('NUMBA_CACHE_DIR')
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), '**', '__pycache__')


@contextmanager
def first_run(op_names, what):
    """Wrap a pass over ``op_names``; log a notice if it is a slow first run.

    Parameters
    ----------
    op_names : iterable of str
        Operator names the pass runs (e.g. ``['FullyConnected', 'Activation']``).
    what : str
        ``'forward'`` or ``'backward'``.
    """
    with _lock:
        new = [n for n in dict.fromkeys(op_names) if (n, what) not in _seen]
        _seen.update((n, what) for n in new)
    if not new:
        yield
        return
    tic = time.perf_counter()
    said = []

    def say():
        said.append(True)
        _LOG.info('compiling numba kernels for %s (%s; first run only; cached in %s)...',
                  ', '.join(new), what, cache_location())

    timer = threading.Timer(NOTICE_AFTER, say)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        if said:
            _LOG.info('kernels ready in %.1f s', time.perf_counter() - tic)
