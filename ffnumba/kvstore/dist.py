"""Distributed key-value stores over MPI: ``'dist_sync'`` and ``'dist_async'``.

Launch with ``mpirun -np N python train.py``. Every process is a worker and
keeps a full replica of the store. A push sums the values of the local
devices, then sums across workers with ``MPI.Allreduce``; every worker runs
the same updater on the same sum, so the replicas stay identical without a
parameter server (and the optimizer is never pickled, unlike MXNet's servers).

``dist_async`` is accepted for MXNet compatibility and runs with the same
synchronous all-reduce: the results are those of ``dist_sync``.
``mpi4py`` is imported only when such a store is created.
"""
import numpy as np

from ..base import FFError
from .local import KVStore, _copy_into
from .base import _normalize

__all__ = ['DistKVStore', 'get_comm']


def get_comm():
    """``mpi4py.MPI.COMM_WORLD``.

    Raises
    ------
    FFError
        If mpi4py is missing, with the install and launch instructions.
    """
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise FFError("KVStore 'dist_sync'/'dist_async' needs mpi4py, which is not installed "
                      "(%s). Install it with `pip install ffnumba[dist]` (needs an MPI library "
                      "such as OpenMPI) and launch the script with `mpirun -np N python "
                      "train.py`." % e) from None
    return MPI.COMM_WORLD


class DistKVStore(KVStore):
    """A replicated store synchronised with MPI all-reduce.

    Parameters
    ----------
    kv_type : str
        ``'dist_sync'``, ``'dist_async'`` or ``'dist_device_sync'``.
    comm : communicator, optional
        An object with ``Get_rank()``, ``Get_size()``, ``Allreduce(send, recv)``,
        ``Bcast(buf, root)`` and ``Barrier()``; default ``MPI.COMM_WORLD``.
    """

    def __init__(self, kv_type='dist_sync', comm=None):
        super().__init__(kv_type)
        self._comm = comm if comm is not None else get_comm()

    @property
    def rank(self):
        return int(self._comm.Get_rank())

    @property
    def num_workers(self):
        return int(self._comm.Get_size())

    def init(self, key, value):
        """Initialise keys with rank 0's values (broadcast to every worker)."""
        super().init(key, value)
        for k, _ in _normalize(key, value, 'init'):
            stored = self._store[k]
            host = np.ascontiguousarray(stored.asnumpy())
            self._comm.Bcast(host, root=0)
            stored._set(host)

    def push(self, key, value, priority=0):
        """Sum across local devices, then across workers, then update."""
        from ..ndarray import array
        for k, vals in _normalize(key, value, 'push'):
            stored = self._stored(k, 'push')
            local = np.ascontiguousarray(self._reduce(k, vals, stored).asnumpy())
            total = np.empty_like(local)
            self._comm.Allreduce(local, total)
            merged = array(total, ctx=stored.context, dtype=total.dtype)
            if self._updater is not None:
                self._updater(k, merged, stored)
            else:
                _copy_into(stored, merged)

    def set_gradient_compression(self, compression_params):
        """2-bit compression of the values each worker contributes."""
        saved, self._type = self._type, 'device'
        try:
            super().set_gradient_compression(compression_params)
        finally:
            self._type = saved

    def _barrier(self):
        """Wait for every worker."""
        self._comm.Barrier()
