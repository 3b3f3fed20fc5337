"""Automatic naming of symbols (MXNet ``mx.name``).

A :class:`NameManager` turns a missing name into ``{hint}{count}`` with one
counter per hint (``fullyconnected0``, ``fullyconnected1``, ``_plus0``).
The current manager is thread-local and replaced with ``with``::

    with ff.name.Prefix('pre_'):
        fc = ff.sym.FullyConnected(data, num_hidden=3)   # pre_fullyconnected0
"""
import threading

__all__ = ['NameManager', 'Prefix']


class _Current(type):
    """Gives ``NameManager.current`` as a class property (thread-local)."""

    @property
    def current(cls):
        val = getattr(NameManager._local, 'value', None)
        if val is None:
            val = NameManager()
            NameManager._local.value = val
        return val


class NameManager(metaclass=_Current):
    """Assigns default names: one counter per hint.

    Use ``NameManager.current.get(name, hint)``; entering a manager with
    ``with`` makes it current in this thread until the block ends.
    """

    _local = threading.local()

    def __init__(self):
        self._counter = {}
        self._old_manager = None

    def get(self, name, hint):
        """``name`` if given, else ``{hint}{n}`` with this hint's next counter value.

        Parameters
        ----------
        name : str or None
            The user's name; returned unchanged when not None.
        hint : str
            Prefix of the generated name (the lower-cased operator name).

        Returns
        -------
        str
        """
        if name:
            return name
        n = self._counter.get(hint, 0)
        self._counter[hint] = n + 1
        return '%s%d' % (hint, n)

    def __enter__(self):
        self._old_manager = NameManager.current
        NameManager._local.value = self
        return self

    def __exit__(self, *exc):
        NameManager._local.value = self._old_manager


class Prefix(NameManager):
    """A name manager that prepends ``prefix`` to every name it hands out.

    Parameters
    ----------
    prefix : str
        Added in front of both given and generated names, so auto-created
        weights follow (``pre_fullyconnected0_weight``).
    """

    def __init__(self, prefix):
        super().__init__()
        self._prefix = prefix

    def get(self, name, hint):
        return self._prefix + super().get(name, hint)
