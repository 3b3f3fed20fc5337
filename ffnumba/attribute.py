"""Attribute scopes (MXNet ``mx.AttrScope``).

``with ff.AttrScope(ctx_group='dev1', lr_mult='0.1'):`` attaches the string
attributes to every symbol created in the block, auto-created weights
included. The MXNet "hidden" keys (``ctx_group``, ``lr_mult``, ``wd_mult``,
``force_mirroring``, ``mirror_stage``, ``profiler_scope``) are stored in
their ``__key__`` form, as MXNet does.
"""
import threading

__all__ = ['AttrScope', 'HIDDEN_KEYS', 'normalize_key']

#: Keys MXNet stores as ``__key__`` and reports under both spellings.
HIDDEN_KEYS = ('ctx_group', 'lr_mult', 'wd_mult', 'force_mirroring', 'mirror_stage',
               'profiler_scope')


def normalize_key(key):
    """``'lr_mult'`` -> ``'__lr_mult__'``; other keys unchanged."""
    return '__%s__' % key if key in HIDDEN_KEYS else key


class _Current(type):
    @property
    def current(cls):
        val = getattr(AttrScope._local, 'value', None)
        if val is None:
            val = AttrScope()
            AttrScope._local.value = val
        return val


class AttrScope(metaclass=_Current):
    """Attributes attached to every symbol created inside a ``with`` block.

    Parameters
    ----------
    **kwargs : str
        Attribute names and string values.

    Raises
    ------
    ValueError
        If a value is not a string (MXNet's rule).
    """

    _local = threading.local()

    def __init__(self, **kwargs):
        for value in kwargs.values():
            if not isinstance(value, str):
                raise ValueError('Attributes need to be string')
        self._attr = kwargs
        self._old_scope = None

    def get(self, attr):
        """The scope's attributes updated with ``attr`` (a dict or None)."""
        if self._attr:
            ret = dict(self._attr)
            if attr:
                ret.update(attr)
            return ret
        return dict(attr) if attr else {}

    def __enter__(self):
        old = AttrScope.current
        # nested scopes accumulate
        merged = dict(old._attr)
        merged.update(self._attr)
        self._attr = merged
        self._old_scope = old
        AttrScope._local.value = self
        return self

    def __exit__(self, *exc):
        AttrScope._local.value = self._old_scope
