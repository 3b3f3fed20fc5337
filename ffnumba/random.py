"""Global seeding: ``ff.random.seed(n)`` makes a run repeat exactly.

It seeds the initializers, Dropout masks and data shuffling. Each executor
draws its own generator from the global one when it is bound, so results do
not depend on thread scheduling.
"""
import threading

import numpy as np

__all__ = ['seed', 'generator', 'spawn']

_lock = threading.Lock()
_state = {'rng': np.random.default_rng()}


def seed(seed_state, ctx='all'):
    """Seed every random source of ffnumba (MXNet ``mx.random.seed``).

    Parameters
    ----------
    seed_state : int
        Non-negative seed.
    ctx : Context or 'all', default 'all'
        Accepted for MXNet compatibility; one generator serves every device.
    """
    with _lock:
        _state['rng'] = np.random.default_rng(int(seed_state))
    np.random.seed(int(seed_state) % (2 ** 32))


def generator():
    """The global ``numpy.random.Generator`` (initializers and shuffling use it)."""
    return _state['rng']


def spawn():
    """A new independent generator drawn from the global one (one per executor)."""
    with _lock:
        return np.random.default_rng(_state['rng'].integers(0, 2 ** 63))
