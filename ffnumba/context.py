"""Device contexts: where arrays live and kernels run (MXNet ``mx.context``).

``cpu(i)`` is a CPU context for any ``i``; several CPU contexts split a batch
across threads. ``gpu(i)`` is CUDA device ``i`` through numba; using one on a
machine without CUDA raises :class:`~ffnumba.base.FFError` at bind time.
"""
import threading

import numpy as np

from .base import FFError, ParamError

__all__ = ['Context', 'cpu', 'gpu', 'cpu_pinned', 'current_context', 'num_gpus']


class Context:
    """A device: type ``'cpu'``, ``'gpu'`` or ``'cpu_pinned'`` and an id.

    Parameters
    ----------
    device_type : str or Context
        ``'cpu'``, ``'gpu'``, ``'cpu_pinned'`` or ``'cpu_shared'``.
    device_id : int, default 0
        Device index.

    Used as a context manager, it sets the default context of
    :func:`current_context` inside the block.

    Raises
    ------
    FFError
        For an unknown device type.
    """

    devtype2str = {1: 'cpu', 2: 'gpu', 3: 'cpu_pinned', 5: 'cpu_shared'}
    devstr2type = {v: k for k, v in devtype2str.items()}
    _default = threading.local()

    def __init__(self, device_type, device_id=0):
        if isinstance(device_type, Context):
            device_type, device_id = device_type.device_type, device_type.device_id
        if device_type not in self.devstr2type:
            raise FFError('Context: unknown device_type %r; expected one of %s'
                          % (device_type, sorted(self.devstr2type)))
        if isinstance(device_id, bool) or not isinstance(device_id, (int, np.integer)) \
                or device_id < 0:
            raise ParamError('Context: `device_id` must be an int >= 0. Received: %r'
                             % (device_id,))
        self.device_type = device_type
        self.device_id = int(device_id)
        self._old = None

    @property
    def device_typeid(self):
        """MXNet's integer code of the device type (1 cpu, 2 gpu, 3 cpu_pinned)."""
        return self.devstr2type[self.device_type]

    @property
    def is_gpu(self):
        return self.device_type == 'gpu'

    def __eq__(self, other):
        return (isinstance(other, Context) and self.device_type == other.device_type
                and self.device_id == other.device_id)

    def __hash__(self):
        return hash((self.device_type, self.device_id))

    def __repr__(self):
        return '%s(%d)' % (self.device_type, self.device_id)

    __str__ = __repr__

    def __enter__(self):
        self._old = getattr(Context._default, 'value', None)
        Context._default.value = self
        return self

    def __exit__(self, *exc):
        Context._default.value = self._old

    def empty_cache(self):
        """Release cached device memory (a no-op on the CPU)."""


def cpu(device_id=0):
    """A CPU context. ``device_id`` only names a worker: any value is valid."""
    return Context('cpu', device_id)


def cpu_pinned(device_id=0):
    """A pinned-memory CPU context (treated as ``cpu`` here)."""
    return Context('cpu_pinned', device_id)


def gpu(device_id=0):
    """CUDA device ``device_id``. Checked when arrays are put on it, not here."""
    return Context('gpu', device_id)


def current_context():
    """The default context: ``cpu(0)`` unless set by ``with ctx:``."""
    return getattr(Context._default, 'value', None) or Context('cpu', 0)


def num_gpus():
    """Number of CUDA devices numba can see (0 without numba-cuda or a driver)."""
    try:
        from numba import cuda
        if not cuda.is_available():
            return 0
        return len(cuda.gpus)
    except Exception:  # numba-cuda missing or no driver: no GPUs
        return 0


def check_device(ctx):
    """Raise :class:`FFError` if ``ctx`` is a GPU context that cannot be used here."""
    if ctx.device_type == 'gpu':
        n = num_gpus()
        if ctx.device_id >= n:
            raise FFError('Context %s: no such CUDA device (this machine has %d usable GPU%s; '
                          'install numba-cuda with a CUDA driver, or use ff.cpu())'
                          % (ctx, n, '' if n == 1 else 's'))
