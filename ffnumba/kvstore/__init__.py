"""``ff.kv`` (alias ``ff.kvstore``): key-value stores that reduce gradients.

``create('local')`` and ``create('device')`` work in-process;
``create('dist_sync')`` runs over MPI (mpi4py; ``dist_async`` is refused with
the reason, see :mod:`ffnumba.kvstore.dist`).
"""
from ..base import FFError
from .base import KVStoreBase
from .local import KVStore

__all__ = ['create', 'KVStore', 'KVStoreBase']


def create(name='local'):
    """Create a key-value store (MXNet ``mx.kv.create``).

    Parameters
    ----------
    name : str, default 'local'
        Matched by substring on the lower-cased name as MXNet does: ``'dist'``
        gives an MPI store (``dist_sync``, ``dist_device_sync``; ``dist_async``
        raises);
        ``'device'`` or ``'nccl'`` an in-process store that keeps values on the
        devices; anything else (``'local'``) an in-process CPU store.

    Returns
    -------
    KVStore

    Raises
    ------
    FFError
        If ``name`` is not a str, a dist store is asked for without mpi4py,
        or ``name`` contains ``'async'`` (not supported; the error says why).
    """
    if not isinstance(name, str):
        raise FFError('kvstore.create: `name` must be a str. Received: name=%r' % (name,))
    low = name.lower()
    if 'dist' in low:
        from .dist import DistKVStore, check_type
        check_type(name)
        return DistKVStore(name)
    if 'device' in low or 'nccl' in low:
        return KVStore(name)
    return KVStore(name)
