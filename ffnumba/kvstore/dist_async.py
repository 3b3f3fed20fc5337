"""``'dist_async'``: a parameter server on a thread of rank 0, MXNet's asynchronous meaning.

MXNet's ``dist_async`` sends each worker's gradient to the servers, which
apply the optimizer at once, without waiting for the other workers; a pull
returns the server's current weights. Here rank 0 runs the server in a
background thread (MPI ``THREAD_MULTIPLE``, which mpi4py asks for by
default) that holds the master weights and the optimizer. Every rank,
rank 0 included, is a worker that sends ``push``/``pull`` messages to it
(point-to-point, tagged, on a private communicator). A push returns as soon as
the message is sent: a slow worker never stalls the others. A worker's pull
comes after its own pushes (MPI keeps the order of one sender's messages), so
it sees at least its own updates, plus whatever the others pushed so far.

Results depend on the arrival order, so they do not repeat bit for bit
(MXNet's do not either); use ``dist_sync`` for that. The learning rate is not
scaled: ``Module`` sets ``rescale_grad = 1/batch_size`` (not divided by the
number of workers), as MXNet does for ``dist_async``. The optimizer states live
on rank 0 (``save_optimizer_states`` on rank 0 saves them).

Errors: a push with an unknown key, another shape or dtype is refused by the
server and raised as an ``FFError`` naming key and rank at that worker's next
pull; a pull that gets no answer within :attr:`~AsyncDistKVStore.timeout`
raises :class:`~ffnumba.kvstore._mpi.DistTimeoutError`.
"""
import atexit
import threading
import time

import numpy as np

from ..base import FFError
from ._mpi import Agreement, DistTimeoutError, check_timeout, get_comm, setup_rank, \
    timeout_from_env
from .base import KVStoreBase, _normalize

__all__ = ['AsyncDistKVStore']

_REQ, _REPLY = 11, 12


def _poll(comm, source, tag, deadline, what):
    """Wait (sleeping up to 1 ms between probes) for a message; then receive it."""
    from mpi4py import MPI
    status = MPI.Status()
    source = MPI.ANY_SOURCE if source is None else source
    delay = 0.0
    while not comm.Iprobe(source=source, tag=tag, status=status):
        if deadline is not None and time.monotonic() > deadline:
            raise DistTimeoutError('dist_async kvstore: %s: no answer from the server (rank 0) '
                                   'in time; it died or hangs' % what)
        delay = min(1e-3, delay * 2 or 2e-5)
        time.sleep(delay)
    return comm.recv(source=status.Get_source(), tag=tag), status.Get_source()


class _Server:
    """The master weights and the updater, served by a thread of rank 0."""

    def __init__(self, comm, size, store):
        self.comm, self.size, self.store = comm, size, store
        self.weights = {}
        self.errors = {}
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.run, name='ffnumba-dist-async-server',
                                       daemon=True)
        self.thread.start()

    def run(self):
        stopped = 0
        while stopped < self.size:
            msg, src = _poll(self.comm, None, _REQ, None, 'server')
            op = msg[0]
            if op == 'stop':
                stopped += 1
            elif op == 'push':
                with self.lock:
                    self._push(src, msg[1])
            elif op == 'pull':
                err = self.errors.pop(src, None)
                if err is not None:
                    reply = ('error', err)
                else:
                    with self.lock:
                        reply = ('ok', [self.weights[k].asnumpy() if k in self.weights
                                        else None for k in msg[1]])
                self.comm.send(reply, dest=src, tag=_REPLY)

    def _push(self, src, items):
        from ..ndarray import array
        for k, grad in items:
            w = self.weights.get(k)
            if w is None:
                self.errors.setdefault(src, 'KVStore.push: key %r has not been initialized '
                                            '(pushed by rank %d)' % (k, src))
                continue
            if grad.shape != w.shape or grad.dtype != w.handle.dtype:
                self.errors.setdefault(src, 'dist_async kvstore: rank %d pushed key %r as %s %s '
                                            'but it is %s %s' % (src, k, grad.dtype, grad.shape,
                                                                 w.handle.dtype, w.shape))
                continue
            upd = self.store._updater
            if upd is None:
                self.errors.setdefault(src, "dist_async kvstore: no optimizer on the store; "
                                            "dist_async applies updates on the server, so keep "
                                            "update_on_kvstore on (MXNET_UPDATE_ON_KVSTORE=1)")
                continue
            upd(k, array(grad, ctx=w.context, dtype=grad.dtype), w)


class AsyncDistKVStore(KVStoreBase):
    """``mx.kv.create('dist_async')`` over MPI: a parameter-server thread on rank 0.

    Parameters
    ----------
    kv_type : str
        ``'dist_async'``.
    timeout : float, optional
        Seconds a pull or barrier waits (default ``FFNUMBA_DIST_TIMEOUT`` or 300).

    Raises
    ------
    FFError
        Without mpi4py, or when the MPI library was not initialised with
        ``MPI_THREAD_MULTIPLE``.
    """

    def __init__(self, kv_type='dist_async', timeout=None):
        super().__init__(kv_type)
        from mpi4py import MPI
        comm = get_comm()
        if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            raise FFError("KVStore 'dist_async' needs MPI_THREAD_MULTIPLE (its server runs in "
                          "a thread of rank 0); this MPI was initialised with level %d. Leave "
                          "mpi4py.rc.thread_level at its default 'multiple', or use "
                          "kvstore='dist_sync'." % MPI.Query_thread())
        self._rank, self._size, self._local_rank, self._local_size = setup_rank(comm)
        self._agreement = Agreement(comm)
        self._comm = comm.Dup()
        self._timeout = timeout_from_env() if timeout is None else check_timeout(timeout)
        self._meta = {}
        self._closed = False
        self._server = _Server(self._comm, self._size, self) if self._rank == 0 else None
        atexit.register(self.close)

    rank = property(lambda self: self._rank, doc="This worker's rank.")
    num_workers = property(lambda self: self._size, doc='The number of MPI ranks.')
    local_rank = property(lambda self: self._local_rank, doc='Rank among the ranks of this node.')

    @property
    def timeout(self):
        """Seconds a pull or barrier waits before :class:`DistTimeoutError`."""
        return self._timeout

    @timeout.setter
    def timeout(self, value):
        self._timeout = check_timeout(value, 'kv.timeout')

    def _logger(self, logger):
        import os
        from .dist import LOG_ALL_ENV, _RankLogger
        return _RankLogger(logger, self._rank, os.environ.get(LOG_ALL_ENV, '') == '1')

    def _check_open(self):
        if self._closed:
            raise FFError('dist_async kvstore: the store is closed')

    def init(self, key, value):
        """Initialise keys on the server with rank 0's values (a collective call).

        Raises
        ------
        FFError
            On every rank if the ranks give different keys, dtypes or shapes.
        """
        self._check_open()
        error, items = None, []
        try:
            pairs = _normalize(key, value, 'init')
            for k, vals in pairs:
                self._check_key_kind(k)
                if k in self._meta:
                    raise FFError('KVStore.init: key %r is already initialized' % (k,))
                items.append((k, np.dtype(vals[0].dtype).name, vals[0].shape))
        except FFError as e:
            error = str(e)
        self._agreement.check('init', items, 0, 0, self._timeout, error)
        from ..context import Context
        from ..ndarray import array
        for k, vals in pairs:
            self._meta[k] = (np.dtype(vals[0].dtype), vals[0].shape)
            if self._server is not None:
                with self._server.lock:
                    self._server.weights[k] = array(vals[0], ctx=Context('cpu', 0),
                                                    dtype=vals[0].dtype)
        self._agreement.check('barrier', [], 0, 0, self._timeout)   # registered before use

    def push(self, key, value, priority=0):
        """Send the device sum of ``value`` to the server and return at once."""
        self._check_open()
        items = []
        for k, vals in _normalize(key, value, 'push'):
            if k not in self._meta:
                raise FFError('KVStore.push: key %r has not been initialized; call init first'
                              % (k,))
            dtype, shape = self._meta[k]
            for v in vals:
                if v.shape != shape or np.dtype(v.dtype) != dtype:
                    raise FFError('KVStore.push: key %r is %s %s but a pushed value is %s %s'
                                  % (k, dtype.name, shape, np.dtype(v.dtype).name, v.shape))
            total = vals[0].asnumpy()
            for v in vals[1:]:
                total = total + v.asnumpy()
            items.append((k, total))
        self._comm.send(('push', items), dest=0, tag=_REQ)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Copy the server's current value of ``key`` into every array of ``out``.

        Raises
        ------
        FFError
            When the server refused one of this worker's earlier pushes.
        """
        self._check_open()
        if out is None:
            raise FFError('KVStore.pull: `out` is required')
        pairs = _normalize(key, out, 'pull')
        self._comm.send(('pull', [k for k, _ in pairs]), dest=0, tag=_REQ)
        (status, payload), _ = _poll(self._comm, 0, _REPLY,
                                     time.monotonic() + self._timeout, 'pull')
        if status == 'error':
            raise FFError(payload)
        for (k, outs), host in zip(pairs, payload):
            if host is None:
                raise FFError('KVStore.pull: key %r has not been initialized' % (k,))
            for o in outs:
                o._copy_from(host)

    def pushpull(self, key, value, out=None, priority=0):
        """``push(key, value)`` then ``pull(key, out)`` (into ``value`` if ``out`` is None)."""
        self.push(key, value, priority)
        self.pull(key, value if out is None else out, priority)

    def broadcast(self, key, value, out, priority=0):
        """``init(key, value)`` then ``pull(key, out)``."""
        self.init(key, value)
        self.pull(key, out, priority)

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        """Pull every row (dense storage)."""
        self.pull(key, out, priority)

    def barrier(self):
        """Wait for every worker (a collective; pushes sent before it are applied after it)."""
        self._check_open()
        if self._size > 1:
            self._agreement.check('barrier', [], 0, 0, self._timeout)
        # a pull round trip: the server has applied this rank's pushes
        self._comm.send(('pull', []), dest=0, tag=_REQ)
        (status, payload), _ = _poll(self._comm, 0, _REPLY,
                                     time.monotonic() + self._timeout, 'barrier')
        if status == 'error':
            raise FFError(payload)
        if self._size > 1:
            self._agreement.check('barrier', [], 0, 0, self._timeout)

    _barrier = barrier

    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Save the server's optimizer states (call it on rank 0, where they live)."""
        if self._server is None:
            raise FFError('dist_async kvstore: the optimizer states live on rank 0; save them '
                          'there (`if kv.rank == 0`)')
        with self._server.lock:
            super().save_optimizer_states(fname, dump_optimizer)

    def load_optimizer_states(self, fname):
        """Load optimizer states into the server (on rank 0; a no-op elsewhere)."""
        if self._server is not None:
            with self._server.lock:
                super().load_optimizer_states(fname)

    def set_gradient_compression(self, compression_params):
        raise FFError("Gradient compression is not supported for 'dist_async'")

    def close(self):
        """Tell the server this worker is done; on rank 0, wait for every worker.

        Runs at interpreter exit (before MPI finalises); calling it earlier is
        allowed, after which the store refuses calls.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self._comm.send(('stop',), dest=0, tag=_REQ)
            if self._server is not None:
                self._server.thread.join()
        except Exception:   # MPI already finalised or aborted: nothing left to stop
            pass
