"""Distributed key-value store over MPI: ``'dist_sync'`` (and ``'dist_device_sync'``).

Launch with ``mpirun -np N python -m mpi4py train.py``. Every process is a
worker and keeps a full replica of the store. A push sums the values of the
local devices, then sums across workers with ``MPI.Iallreduce``; every worker
runs the same updater on the same sum, so the replicas stay identical without
a parameter server (and the optimizer is never pickled, unlike MXNet's).

Dependability (see ``docs/guide/distributed.md``):

* every collective first checks that all ranks make the same call with the same
  keys, dtypes and shapes (:class:`~ffnumba.kvstore._mpi.Agreement`); a
  mismatch, a local error on one rank, or an uneven epoch raises the same
  ``FFError`` on every rank, before any data moves;
* waits have a deadline (``kv.timeout``, ``FFNUMBA_DIST_TIMEOUT``), and an
  uncaught exception on any rank aborts the whole job
  (:func:`~ffnumba.kvstore._mpi.install_abort_hook`);
* the gradients of one push are packed into few all-reduces (buckets of
  ``FFNUMBA_DIST_BUCKET_MB`` MB, default 8; 0 sends one key per all-reduce);
* BLAS threads are capped at ``cores // ranks on this node``.

``dist_async`` is :mod:`ffnumba.kvstore.dist_async`. ``mpi4py`` is imported
only when such a store is created.
"""
import logging
import os
import time

import numpy as np

from ..base import FFError, ParamError
from ._mpi import (Agreement, check_timeout, get_comm, setup_rank, timeout_from_env,
                   wait_all, world, DistTimeoutError)
from .base import _normalize
from .local import KVStore, _copy_into

__all__ = ['DistKVStore', 'get_comm', 'check_type', 'is_root', 'DistTimeoutError',
           'BUCKET_ENV', 'LOG_ALL_ENV']

#: Environment variable: all-reduce bucket size in MB (0: one key per all-reduce).
BUCKET_ENV = 'FFNUMBA_DIST_BUCKET_MB'
#: Environment variable: ``1`` keeps INFO log lines of every rank (default rank 0 only).
LOG_ALL_ENV = 'FFNUMBA_DIST_LOG_ALL'

def check_type(kv_type):
    """Raise an FFError for ``'async'`` names: they belong to :mod:`.dist_async`."""
    if 'async' in kv_type.lower():
        raise FFError("DistKVStore is synchronous; for %r use ff.kv.create('dist_async') "
                      "(AsyncDistKVStore)" % (kv_type,))


def is_root():
    """Whether this process writes checkpoints: rank 0 of the last dist store (or no store)."""
    return world['rank'] == 0


class _RankLogger(logging.LoggerAdapter):
    """Prefixes ``[rank r]``; below WARNING, only rank 0 logs unless ``all_ranks``."""

    def __init__(self, logger, rank, all_ranks):
        if logger is logging:       # Module's default logger is the logging module
            logger = logging.getLogger()
        super().__init__(logger, {})
        self.rank = rank
        self.all_ranks = all_ranks

    def isEnabledFor(self, level):
        if self.rank != 0 and not self.all_ranks and level < logging.WARNING:
            return False
        return self.logger.isEnabledFor(level)

    def process(self, msg, kwargs):
        return '[rank %d] %s' % (self.rank, msg), kwargs


class DistKVStore(KVStore):
    """A replicated store synchronised with MPI all-reduce (``mx.kv.create('dist_sync')``).

    Parameters
    ----------
    kv_type : str
        ``'dist_sync'``, ``'dist_device_sync'`` or ``'dist_sync_device'``.
    comm : mpi4py communicator, optional
        Default ``MPI.COMM_WORLD``.
    timeout : float, optional
        Seconds to wait for the other ranks in a collective (default
        ``FFNUMBA_DIST_TIMEOUT`` or 300).

    Attributes
    ----------
    stats : dict
        ``pushes`` (push calls), ``allreduces`` (data all-reduces),
        ``comm_s`` (seconds in agreement checks and all-reduce waits),
        ``agree_s`` (the part spent in agreement checks, which also absorbs
        waiting for slower ranks), ``bytes`` (payload bytes all-reduced).

    Raises
    ------
    FFError
        For an ``'async'`` name (see :func:`check_type`) or without mpi4py.
    """

    def __init__(self, kv_type='dist_sync', comm=None, timeout=None):
        check_type(kv_type)
        super().__init__(kv_type)
        self._comm = comm if comm is not None else get_comm()
        self._rank, self._size, self._local_rank, self._local_size = setup_rank(self._comm)
        self._agreement = Agreement(self._comm)
        self._data_comm = self._comm.Dup()
        self._timeout = timeout_from_env() if timeout is None else check_timeout(timeout)
        raw = os.environ.get(BUCKET_ENV, '').strip() or '8'
        try:
            self._bucket_bytes = int(float(raw) * 2 ** 20)
        except ValueError:
            raise ParamError('%s must be a number of MB. Received: %r' % (BUCKET_ENV, raw)) \
                from None
        self._fp16 = False
        self._epoch = 0
        self._count = 0
        self._broken = None
        self._plans = {}
        self.stats = {'pushes': 0, 'allreduces': 0, 'comm_s': 0.0, 'agree_s': 0.0, 'bytes': 0}

    # ----------------------------------------------------------- properties
    @property
    def rank(self):
        """This worker's rank in ``[0, num_workers)``."""
        return self._rank

    @property
    def num_workers(self):
        """The number of MPI ranks."""
        return self._size

    @property
    def local_rank(self):
        """This worker's rank among the ranks on the same node (Horovod ``local_rank``)."""
        return self._local_rank

    @property
    def local_size(self):
        """The number of ranks on this node."""
        return self._local_size

    @property
    def timeout(self):
        """Seconds a collective waits for the other ranks before :class:`DistTimeoutError`."""
        return self._timeout

    @timeout.setter
    def timeout(self, value):
        self._timeout = check_timeout(value, 'kv.timeout')

    # ------------------------------------------------------------ protocol
    def _agree(self, op, items=(), error=None, epoch=None, count=None):
        if self._broken:
            raise FFError('dist kvstore: unusable after an earlier failure: %s' % self._broken)
        tic = time.perf_counter()
        try:
            self._agreement.check(op, list(items), self._epoch if epoch is None else epoch,
                                  self._count if count is None else count, self._timeout,
                                  error)
        except DistTimeoutError as e:
            self._broken = str(e)
            raise
        finally:
            took = time.perf_counter() - tic
            self.stats['comm_s'] += took
            self.stats['agree_s'] += took

    def _wait(self, reqs, what):
        tic = time.perf_counter()
        try:
            wait_all(reqs, [None] * len(reqs), self._timeout, what, spin=True)
        except DistTimeoutError as e:
            self._broken = str(e)
            raise
        finally:
            self.stats['comm_s'] += time.perf_counter() - tic

    def barrier(self):
        """Wait until every worker calls ``barrier`` (MXNet ``kv._barrier``).

        Raises
        ------
        FFError
            If another rank makes a different call; :class:`DistTimeoutError`
            if a rank does not arrive within :attr:`timeout`.
        """
        self._agree('barrier')

    _barrier = barrier

    def _end_epoch(self, epoch, nbatch):
        """Check that every rank ends epoch ``epoch`` after ``nbatch`` batches."""
        self._agree('end of epoch', epoch=epoch, count=nbatch)
        self._epoch, self._count = epoch + 1, 0

    def _logger(self, logger):
        return _RankLogger(logger, self._rank, os.environ.get(LOG_ALL_ENV, '') == '1')

    def _metric_name_value(self, metric):
        """``(name, value)`` pairs averaged over ranks, weighted by sample counts.

        Exact for metrics that are a sum over samples (accuracy, MAE, MSE,
        cross-entropy); a count-weighted mean of the per-rank values otherwise.
        """
        leaves = []

        def walk(m):
            children = getattr(m, 'metrics', None)
            if isinstance(children, list):
                for c in children:
                    walk(c)
            else:
                leaves.append(m)
        walk(metric)
        names, vec = [], []
        for m in leaves:
            n = getattr(m, 'global_num_inst', getattr(m, 'num_inst', 0))
            pairs = m.get_global_name_value() if hasattr(m, 'get_global_name_value') \
                else m.get_name_value()
            for name, val in pairs:
                ok = n > 0 and np.isfinite(val)
                names.append(name)
                vec += [float(val) * n if ok else 0.0, float(n) if ok else 0.0]
        self._agree('metric average', [(nm, 'float64', (2,)) for nm in names])
        local = np.asarray(vec, np.float64)
        total = np.empty_like(local)
        if self._size > 1:
            self._wait([self._data_comm.Iallreduce(local, total)], 'metric average')
        else:
            total[...] = local
        return [(nm, total[2 * i] / total[2 * i + 1] if total[2 * i + 1] else float('nan'))
                for i, nm in enumerate(names)]

    # ----------------------------------------------------------------- init
    def init(self, key, value):
        """Initialise keys with rank 0's values (broadcast to every worker).

        Raises
        ------
        FFError
            On every rank, if the ranks give different keys, dtypes or shapes,
            or the call fails on any rank (nothing is registered then).
        """
        error, items = None, []
        try:
            pairs = _normalize(key, value, 'init')
            seen = set()
            for k, vals in pairs:
                self._check_key_kind(k)
                if k in self._store or k in seen:
                    raise FFError('KVStore.init: key %r is already initialized' % (k,))
                seen.add(k)
                items.append((k, np.dtype(vals[0].dtype).name, vals[0].shape))
        except FFError as e:
            error = str(e)
        self._agree('init', items, error)
        super().init(key, value)
        if self._size == 1:
            return
        hosts = [np.ascontiguousarray(self._store[k].asnumpy()) for k, _ in pairs]
        flat = np.concatenate([h.view(np.uint8).ravel() for h in hosts]) if hosts \
            else np.zeros(0, np.uint8)
        self._wait([self._data_comm.Ibcast(flat, root=0)], 'init')
        off = 0
        for (k, _), h in zip(pairs, hosts):
            n = h.nbytes
            self._store[k]._copy_from(flat[off:off + n].view(h.dtype).reshape(h.shape))
            off += n

    # ----------------------------------------------------------------- push
    def _transport(self, dtype):
        if dtype == np.float16 or (self._fp16 and dtype == np.float32):
            return np.float16 if self._fp16 else np.float32
        return dtype

    def _plan(self, items):
        """Buckets ``[(dtype, size, [(index, offset, n)])]`` for this list of keys."""
        sig = tuple(items)
        plan = self._plans.get(sig)
        if plan is not None:
            return plan
        plan = []
        for i, (_, dt, shape) in enumerate(items):
            tdt = np.dtype(self._transport(np.dtype(dt)))
            n = int(np.prod(shape, dtype=np.int64))
            last = plan[-1] if plan else None
            if (last is None or last[0] != tdt or self._bucket_bytes <= 0
                    or (last[1] + n) * tdt.itemsize > self._bucket_bytes):
                last = [tdt, 0, []]
                plan.append(last)
            last[2].append((i, last[1], n))
            last[1] += n
        n_recv = {True: self._size, False: 1}   # float16 travels by all-gather
        plan = [(dt, size, members, np.empty(size, dt),
                 np.empty(size * n_recv[dt == np.float16], dt)) for dt, size, members in plan]
        if len(self._plans) > 64:
            self._plans.clear()
        self._plans[sig] = plan
        return plan

    def push(self, key, value, priority=0):
        """Sum across local devices, then across workers, then update.

        Raises
        ------
        FFError
            On every rank, when the ranks push different keys (or in a
            different order), dtypes or shapes, when the push fails on any
            rank, or when another rank is at the end of its epoch (uneven
            shards). :class:`DistTimeoutError` when a rank does not arrive.
        """
        error, items, pairs = None, [], []
        try:
            pairs = _normalize(key, value, 'push')
            for k, vals in pairs:
                stored = self._stored(k, 'push')
                for v in vals:
                    if v.shape != stored.shape:
                        raise FFError('KVStore.push: key %r has shape %s but a pushed value has '
                                      'shape %s' % (k, stored.shape, v.shape))
                items.append((k, np.dtype(vals[0].dtype).name, stored.shape))
        except FFError as e:
            error = str(e)
        self._count += 1
        self._agree('push', items, error)
        self.stats['pushes'] += 1
        locals_ = [self._reduce(k, vals, self._store[k]) for k, vals in pairs]
        if self._size == 1:
            for (k, _), loc in zip(pairs, locals_):
                self._apply(k, loc)
            return
        plan = self._plan(items)
        reqs = []
        for dt, _, members, send, recv in plan:
            for i, off, n in members:
                src = locals_[i]
                host = src._host()
                np.copyto(send[off:off + n], host.reshape(-1), casting='unsafe')
            if dt == np.float16:     # MPI has no float16 sum: gather, add in float32 below
                reqs.append(self._data_comm.Iallgather(send.view(np.uint16),
                                                       recv.view(np.uint16)))
            else:
                reqs.append(self._data_comm.Iallreduce(send, recv))
            self.stats['allreduces'] += 1
            self.stats['bytes'] += send.nbytes
        for (dt, _, members, _, recv), req in zip(plan, reqs):
            self._wait([req], 'push')   # later buckets travel while this one updates
            if dt == np.float16:         # the same sum, in rank order, on every rank
                recv = recv.reshape(self._size, -1).astype(np.float32).sum(axis=0)
            for i, off, n in members:
                k = pairs[i][0]
                stored = self._store[k]
                total = recv[off:off + n].reshape(stored.shape)
                self._apply(k, self._as_nd(total, stored))

    @staticmethod
    def _as_nd(total, stored):
        return stored._from_host(total, stored.context, stored.handle.dtype)

    def _apply(self, k, merged):
        stored = self._store[k]
        if self._updater is not None:
            self._updater(k, merged, stored)
        else:
            _copy_into(stored, merged)

    # --------------------------------------------------------- compression
    def set_gradient_compression(self, compression_params):
        """Compress what each worker sends.

        Parameters
        ----------
        compression_params : dict
            ``{'type': 'fp16'}``: float32 (and float16) gradients travel as
            float16 (half the bytes; about 3 significant digits per value):
            every rank all-gathers the float16 payloads and adds them in
            float32 in rank order (MPI has no float16 sum). The all-gather
            moves ``(N-1)/2`` float32-sizes per rank against about 2 for an
            all-reduce, so it pays off for 2 to 4 ranks on a slow network,
            not within one machine. ``{'type': '2bit', 'threshold':
            t}``: MXNet's 2-bit quantisation with residual, applied to the
            values each worker contributes.
        """
        params = dict(compression_params or {})
        if params.get('type') == 'fp16':
            self._fp16 = True
            self._plans.clear()
            return
        saved, self._type = self._type, 'device'
        try:
            super().set_gradient_compression(compression_params)
        finally:
            self._type = saved
