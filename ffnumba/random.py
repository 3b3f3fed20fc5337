"""Global seeding: ``ff.random.seed(n)`` makes a run repeat exactly.

It seeds the initializers, Dropout masks and data shuffling. Each executor
draws its own generator from the global one when it is bound, so results do
not depend on thread scheduling.
"""
import threading

import numpy as np

from .base import ParamError

__all__ = ['seed', 'generator', 'spawn']

_lock = threading.Lock()
# Two streams: one for initializers and shuffling, one that only hands out executor
# generators, so the number of executors bound never shifts the initializers' draws.
_state = {'rng': np.random.default_rng(), 'spawner': np.random.SeedSequence()}


def seed(seed_state, ctx='all'):
    """Seed every random source of ffnumba (MXNet ``mx.random.seed``).

    Parameters
    ----------
    seed_state : int
        Non-negative seed.
    ctx : Context or 'all', default 'all'
        Accepted for MXNet compatibility; one generator serves every device.
    """
    if isinstance(seed_state, bool) or not isinstance(seed_state, (int, np.integer)) \
            or not 0 <= seed_state < 2 ** 64:
        raise ParamError('seed: `seed_state` must be an int in [0, 2**64). Received: %r'
                         % (seed_state,))
    with _lock:
        _state['rng'] = np.random.default_rng(int(seed_state))
        _state['spawner'] = np.random.SeedSequence([int(seed_state), 0x5EED])
    np.random.seed(int(seed_state) % (2 ** 32))


def generator():
    """The global ``numpy.random.Generator`` (initializers and shuffling use it)."""
    return _state['rng']


def spawn():
    """A new independent generator for one executor (Dropout masks).

    It comes from a seed sequence of its own, so binding one or several
    executors leaves the global generator (initializers, shuffling) untouched.
    """
    with _lock:
        return np.random.default_rng(_state['spawner'].spawn(1)[0])
