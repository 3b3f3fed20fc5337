"""``ff.kv`` (alias ``ff.kvstore``): key-value stores that reduce gradients.

``create('local')`` and ``create('device')`` work in-process;
``create('dist_sync')`` (all-reduce, :mod:`ffnumba.kvstore.dist`) and
``create('dist_async')`` (a parameter-server thread on rank 0,
:mod:`ffnumba.kvstore.dist_async`) run over MPI (mpi4py).
"""
from ..base import FFError
from .base import KVStoreBase
from .local import KVStore
from ._mpi import get_comm

__all__ = ['create', 'KVStore', 'KVStoreBase']


def create(name='local'):
    """Create a key-value store (MXNet ``mx.kv.create``).

    Parameters
    ----------
    name : str, default 'local'
        Matched by substring on the lower-cased name as MXNet does: ``'dist'``
        gives an MPI store (``dist_sync``, ``dist_device_sync``; with
        ``'async'``, the asynchronous parameter-server store);
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
        get_comm()      # the FFError with install instructions when mpi4py is missing
        if 'async' in low:
            from .dist_async import AsyncDistKVStore
            return AsyncDistKVStore(name)
        from .dist import DistKVStore
        return DistKVStore(name)
    if 'device' in low or 'nccl' in low:
        return KVStore(name)
    return KVStore(name)
