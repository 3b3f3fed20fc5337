"""Random-generator state saved with the optimizer states, so a resumed run is bit-exact.

``Module.save_checkpoint(..., save_optimizer_states=True)`` stores, in the
``.states`` file's JSON header (entry ``rng``, covered by its checksum), the
state of the global generator (``ff.random``: shuffling, initializers), of
numpy's legacy generator, and of every executor's own generator (Dropout
masks), in executor order. When such a file is loaded
(``Module.load(..., load_optimizer_states=True)`` or
``load_optimizer_states``), the next ``fit`` restores the generators after
binding and resets ``train_data``, which draws the same shuffle order the
uninterrupted run drew at that epoch's end. So 2 epochs + checkpoint + a new
process + load + 2 epochs trains exactly as 4 epochs (checked bit for bit in
``tests/reliability/test_resume.py``). A ``.states`` file without the entry
resumes as before (generators from the seed).
"""
import numpy as np

from ..base import FFError

__all__ = ['attach', 'restore']

_FORMAT = 'ffnumba.rng_state'


def _updaters(module):
    out = []
    upd = getattr(module, '_updater', None)
    if upd is not None:
        out.append(upd)
    kv = getattr(module, '_kvstore', None)
    upd = getattr(kv, '_updater', None) if kv is not None else None
    if upd is not None and upd not in out:
        out.append(upd)
    return out


def _execs(module):
    group = getattr(module, '_exec_group', None)
    return list(getattr(group, 'execs', None) or [])


def _jsonable(state):
    if isinstance(state, dict):
        return {k: _jsonable(v) for k, v in state.items()}
    if isinstance(state, np.ndarray):
        return {'__array__': state.tolist(), 'dtype': state.dtype.str}
    if isinstance(state, (np.integer,)):
        return int(state)
    if isinstance(state, tuple):
        return [_jsonable(v) for v in state]
    return state


def _from_json(state):
    if isinstance(state, dict):
        if '__array__' in state:
            return np.array(state['__array__'], dtype=state['dtype'])
        return {k: _from_json(v) for k, v in state.items()}
    return state


def attach(module):
    """Give the updaters of ``module`` the generator states to write with the optimizer states."""
    from .. import random as _random
    legacy = np.random.get_state()
    doc = {
        'format': _FORMAT,
        'global': _jsonable(_random.generator().bit_generator.state),
        'legacy': _jsonable({'name': legacy[0], 'keys': legacy[1], 'pos': int(legacy[2]),
                             'has_gauss': int(legacy[3]),
                             'cached_gaussian': float(legacy[4])}),
        'executors': [_jsonable(e._rng.bit_generator.state) for e in _execs(module)],
    }
    for upd in _updaters(module):
        upd.rng_state = doc


def restore(module, train_data):
    """In ``fit``, after ``init_optimizer``: restore generator states loaded with the
    optimizer states, once.

    Raises
    ------
    FFError
        When they were written for another number of executors (contexts).
    """
    doc = None
    for upd in _updaters(module):
        doc = doc or upd.__dict__.get('rng_state')
        upd.rng_state = None        # restored once, after the states were loaded
    if not doc:
        return
    from .. import random as _random
    try:
        execs = _execs(module)
        if doc.get('format') != _FORMAT:
            raise ValueError('not a generator state')
        if len(doc['executors']) != len(execs):
            raise FFError('they hold %d executor generators, this module has %d executors '
                          '(contexts)' % (len(doc['executors']), len(execs)))
        _random.generator().bit_generator.state = _from_json(doc['global'])
        lg = _from_json(doc['legacy'])
        np.random.set_state((lg['name'], lg['keys'], lg['pos'], lg['has_gauss'],
                             lg['cached_gaussian']))
        for e, st in zip(execs, doc['executors']):
            e._rng.bit_generator.state = _from_json(st)
    except FFError as e:
        raise FFError('optimizer states: generator states: %s' % e) from None
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise FFError('optimizer states: generator states are corrupted (%s)'
                      % type(e).__name__) from None
    train_data.reset()      # the shuffle the uninterrupted run drew at this epoch's start
