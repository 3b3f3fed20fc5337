"""``ff.kv`` (alias ``ff.kvstore``): key-value stores that reduce gradients.

``create('local')`` and ``create('device')`` work in-process;
``create('dist_sync')`` (all-reduce, :mod:`ffnumba.kvstore.dist`) and
``create('dist_async')`` (a parameter-server thread on rank 0,
:mod:`ffnumba.kvstore.dist_async`) run over MPI (mpi4py).
"""
import os

import numpy as np

from ..base import FFError, ParamError
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


def _create_kvstore(kvstore, num_device, arg_params):
    """Choose the kvstore and whether the optimizer runs on it (MXNet's ``model._create_kvstore``).

    ``Module.init_optimizer`` and ``ff.model._create_kvstore`` use this one function.

    Parameters
    ----------
    kvstore : KVStore, str or None
    num_device : int
    arg_params : dict of str to NDArray

    Returns
    -------
    (KVStore or None, bool)
        A str with one device and no ``'dist'`` gives no kvstore. For
        ``'local'``, ``update_on_kvstore`` is False when the largest parameter
        has more than 16M elements. It starts from the environment variable
        ``MXNET_UPDATE_ON_KVSTORE`` (default 1) and is False without a kvstore.
    """
    update_on_kvstore = bool(int(os.getenv('MXNET_UPDATE_ON_KVSTORE', '1')))
    if kvstore is None:
        kv = None
    elif isinstance(kvstore, KVStoreBase):
        kv = kvstore
    elif isinstance(kvstore, str):
        if num_device == 1 and 'dist' not in kvstore:
            kv = None
        else:
            kv = create(kvstore)
            if kvstore == 'local' and arg_params:
                max_size = max(int(np.prod(p.shape)) for p in arg_params.values())
                if max_size > 1024 * 1024 * 16:
                    update_on_kvstore = False
    else:
        raise ParamError('kvstore must be a KVStore, a str or None. Received: kvstore=%r'
                         % (kvstore,))
    if kv is None:
        update_on_kvstore = False
    else:
        update_on_kvstore = update_on_kvstore and kv.is_capable(KVStoreBase.OPTIMIZER)
    return kv, update_on_kvstore
