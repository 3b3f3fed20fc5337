"""Key-value store base: key/value normalisation shared by every store type.

A KVStore keeps one value per key. ``push`` sums the values given for a key
(one per device) and either stores the sum or, with an updater installed,
calls ``updater(key, summed_grad, stored_weight)``; ``pull`` copies the stored
value into each output. This is MXNet's ``mx.kv.KVStore`` contract
(reference ``mxnet_api.md`` section 13).
"""
import numpy as np

from ..base import FFError

__all__ = ['KVStoreBase']


def _is_nd(x):
    from ..ndarray import NDArray
    return isinstance(x, NDArray)


def _normalize(key, value, what):
    """Turn ``(key, value)`` into a list of ``(key, [NDArray, ...])`` pairs.

    ``key`` is an int, a str, or a list of them; ``value`` an NDArray, a list
    of NDArrays (one key, several devices) or a list of those (several keys).
    """
    if isinstance(key, (list, tuple)):
        keys = list(key)
        if value is None:
            return [(k, None) for k in keys]
        if not isinstance(value, (list, tuple)) or len(value) != len(keys):
            raise FFError('KVStore.%s: %d keys need a list of %d values, got %r'
                          % (what, len(keys), len(keys), type(value).__name__))
        out = []
        for k, v in zip(keys, value):
            out.extend(_normalize(k, v, what))
        return out
    if not isinstance(key, (int, np.integer, str)):
        raise FFError('KVStore.%s: a key must be an int or a str. Received: key=%r' % (what, key))
    key = int(key) if isinstance(key, np.integer) else key
    if value is None:
        return [(key, None)]
    vals = list(value) if isinstance(value, (list, tuple)) else [value]
    for v in vals:
        if not _is_nd(v):
            raise FFError('KVStore.%s: values must be NDArrays. Received for key %r: %s'
                          % (what, key, type(v).__name__))
    return [(key, vals)]


class KVStoreBase:
    """Common part of every key-value store.

    Attributes
    ----------
    OPTIMIZER : str
        Capability name for :meth:`is_capable` (the store can run the optimizer).
    """

    OPTIMIZER = 'optimizer'

    def __init__(self, kv_type):
        self._type = kv_type
        self._updater = None
        self._key_kind = None  # int or str, fixed by the first init

    # ----------------------------------------------------------- properties
    @property
    def type(self):
        """The store type given to :func:`create` (``'local'``, ``'device'``, ...)."""
        return self._type

    @property
    def rank(self):
        """This worker's rank (0 in-process)."""
        return 0

    @property
    def num_workers(self):
        """Number of worker processes (1 in-process)."""
        return 1

    def is_capable(self, capability):
        """Whether the store supports ``capability`` (only ``OPTIMIZER`` exists)."""
        if capability == self.OPTIMIZER:
            return True
        raise FFError('KVStore.is_capable: unknown capability %r' % (capability,))

    def _check_key_kind(self, key):
        kind = str if isinstance(key, str) else int
        if self._key_kind is None:
            self._key_kind = kind
        elif self._key_kind is not kind:
            raise FFError('KVStore: keys must be all int or all str, not mixed. Received key %r '
                          'after %s keys' % (key, self._key_kind.__name__))

    # ------------------------------------------------------------ optimizer
    def set_optimizer(self, optimizer):
        """Run ``optimizer`` on every push (through ``optimizer.get_updater``)."""
        from .. import optimizer as opt
        self._set_updater(opt.get_updater(optimizer))

    def _set_updater(self, updater):
        """Install ``updater(key, grad, weight)`` called on every push."""
        self._updater = updater

    def _require_updater(self, what):
        if self._updater is None:
            raise FFError('KVStore.%s: no optimizer is set on this kvstore; call '
                          'set_optimizer first' % what)
        return self._updater

    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Write the updater's states to ``fname`` (safe format, atomic write).

        Raises
        ------
        FFError
            If no optimizer was set.
        """
        from ..module.base_module import _atomic_write
        upd = self._require_updater('save_optimizer_states')
        _atomic_write(fname, upd.get_states(dump_optimizer))

    def load_optimizer_states(self, fname):
        """Load updater states written by :meth:`save_optimizer_states`."""
        upd = self._require_updater('load_optimizer_states')
        upd.load_states_file(fname)     # errors name the file

    def set_gradient_compression(self, compression_params):
        """Gradient compression: not supported by the ``local`` store (MXNet's rule)."""
        raise FFError('Gradient compression is not supported for this type of kvstore (%s)'
                      % self._type)

    def _barrier(self):
        """Wait for every worker (a no-op in-process)."""

    def __repr__(self):
        return '<KVStore type=%s rank=%d num_workers=%d>' % (self._type, self.rank,
                                                             self.num_workers)
