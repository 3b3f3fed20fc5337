"""Global seeding: ``ff.random.seed(n)`` makes a run repeat exactly.

It seeds the initializers, Dropout masks and data shuffling. Each executor
draws its own generator from the global one when it is bound, so results do
not depend on thread scheduling.
"""
import threading

import numpy as np

from .base import ParamError

__all__ = ['seed', 'generator', 'spawn', 'uniform', 'normal', 'randn', 'randint', 'gamma',
           'exponential', 'poisson', 'negative_binomial', 'generalized_negative_binomial',
           'multinomial', 'shuffle']

#: MXNet's top-level sampler names (``mx.random.uniform``...): the functions of
#: ``ff.nd.random``, put here by the package (``ffnumba/__init__.py``) so this
#: foundation module imports nothing above it.
SAMPLERS = tuple(__all__[3:])

_lock = threading.Lock()
# Two streams: one for initializers and shuffling, one that only hands out executor
# generators, so the number of executors bound never shifts the initializers' draws.
_state = {'rng': np.random.default_rng(), 'spawner': np.random.SeedSequence()}


def seed(seed_state, ctx='all'):
    """Seed every random source of ffnumba (MXNet ``mx.random.seed``).

    Parameters
    ----------
    seed_state : int
        Any integer; negative seeds are accepted as MXNet does (each integer
        gives its own stream).
    ctx : Context or 'all', default 'all'
        Accepted for MXNet compatibility; one generator serves every device.

    Raises
    ------
    ParamError
        (a ValueError, MXNet's error type) if ``seed_state`` is not an integer.
    """
    if isinstance(seed_state, bool) or not isinstance(seed_state, (int, np.integer)):
        raise ParamError('seed: `seed_state` must be an integer. Received: %r'
                         % (seed_state,))   # a ValueError too, as MXNet raises
    s = int(seed_state)
    words = [s] if s >= 0 else [-s, 1]  # SeedSequence takes non-negative words
    with _lock:
        _state['rng'] = np.random.default_rng(words[0] if s >= 0 else words)
        _state['spawner'] = np.random.SeedSequence(words + [0x5EED] if s < 0 else
                                                   [s, 0x5EED])
    np.random.seed(s % (2 ** 32))


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
