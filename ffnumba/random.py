"""Global seeding: ``ff.random.seed(n)`` makes a run repeat exactly.

It seeds the initializers, Dropout masks and data shuffling. Each executor
draws its own generator from the global one when it is bound, so results do
not depend on thread scheduling.
"""
import threading

import numpy as np

__all__ = ['seed', 'generator', 'spawn', 'uniform', 'normal', 'randn', 'randint', 'gamma',
           'exponential', 'poisson', 'negative_binomial', 'generalized_negative_binomial',
           'multinomial', 'shuffle']

_SAMPLERS = frozenset(__all__[3:])


def __getattr__(name):
    """``ff.random.uniform`` etc.: MXNet's top-level aliases of ``ff.nd.random.*``."""
    if name in _SAMPLERS:
        from .ndarray import random as _nd_random
        return getattr(_nd_random, name)
    raise AttributeError("module 'ffnumba.random' has no attribute %r" % name)

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
    ValueError
        If ``seed_state`` is not an integer (MXNet's error type).
    """
    if isinstance(seed_state, bool) or not isinstance(seed_state, (int, np.integer)):
        raise ValueError('seed_state must be an integer. Received: %r' % (seed_state,))
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
