"""``ff.kv`` (alias ``ff.kvstore``): key-value stores that reduce gradients.

``create('local')`` and ``create('device')`` work in-process;
``create('dist_sync')``/``create('dist_async')`` run over MPI (mpi4py).
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
        gives an MPI store (``dist_sync``, ``dist_async``, ``dist_device_sync``);
        ``'device'`` or ``'nccl'`` an in-process store that keeps values on the
        devices; anything else (``'local'``) an in-process CPU store.

    Returns
    -------
    KVStore

    Raises
    ------
    FFError
        If ``name`` is not a str, or a dist store is asked for without mpi4py.
    """
    if not isinstance(name, str):
        raise FFError('kvstore.create: `name` must be a str. Received: name=%r' % (name,))
    low = name.lower()
    if 'dist' in low:
        from .dist import DistKVStore
        return DistKVStore(name)
    if 'device' in low or 'nccl' in low:
        return KVStore(name)
    return KVStore(name)
