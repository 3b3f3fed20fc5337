"""MPI plumbing of the distributed stores: fail-fast hook, timed waits, agreement checks.

Every collective of a :class:`~ffnumba.kvstore.dist.DistKVStore` starts with
:meth:`Agreement.check`: each rank sends a fixed 8-integer header (operation,
number of keys, a digest of the keys' names, dtypes and shapes, epoch, step
counter, local-error flag) to every other rank with non-blocking point-to-point
messages on a private communicator. When the headers differ, every rank has
seen the same table, so every rank takes the same error path: one more
(pickled) all-gather of the full descriptions, then an ``FFError`` naming the
keys and ranks, raised on every rank. Nothing has been exchanged or updated at
that point, so the store stays usable. The waits poll with a deadline
(``FFNUMBA_DIST_TIMEOUT`` seconds, default 300): a peer that died or hangs
gives a :class:`DistTimeoutError` naming the ranks that did not answer.

``mpi4py`` is imported inside functions only, never by ``import ffnumba``.
"""
import hashlib
import os
import sys
import threading
import time
import traceback

import numpy as np

from ..base import FFError

__all__ = ['get_comm', 'install_abort_hook', 'DistTimeoutError', 'TIMEOUT_ENV',
           'DEFAULT_TIMEOUT', 'world']

#: Environment variable: seconds a rank waits for its peers before giving up.
TIMEOUT_ENV = 'FFNUMBA_DIST_TIMEOUT'
DEFAULT_TIMEOUT = 300.0

#: ``rank``/``size``/``local_rank``/``local_size`` of the last distributed store
#: created in this process (all 0/1 before): read by the checkpoint callbacks.
world = {'rank': 0, 'size': 1, 'local_rank': 0, 'local_size': 1}

_OPS = {1: 'init', 2: 'push', 3: 'barrier', 4: 'end of epoch', 5: 'metric average'}
_OP_CODES = {v: k for k, v in _OPS.items()}
_HEADER = 8
_TAG = 7315
_HOOK = {'installed': False}


class DistTimeoutError(FFError):
    """A peer did not reach the same collective within the timeout.

    The collective cannot be cancelled, so the store refuses further calls;
    left uncaught, the abort hook ends the whole job.
    """


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
        raise FFError("KVStore 'dist_sync' needs mpi4py, which is not installed (%s). Install "
                      "it with `pip install ffnumba[dist]` (brings mpi4py and the MPICH "
                      "library) and launch the script with `mpirun -np N python -m mpi4py "
                      "train.py`." % e) from None
    return MPI.COMM_WORLD


def install_abort_hook(comm=None):
    """Make an uncaught exception on any rank end the whole MPI job.

    Installs a ``sys.excepthook`` (and ``threading.excepthook``) that prints
    the traceback prefixed with ``[rank r]`` and calls ``comm.Abort(1)``, so
    the other ranks do not wait forever in their next collective (MPI gives no
    other way out of a blocking collective). Called by every distributed store
    with more than one worker; ``python -m mpi4py script.py`` gives the same
    behaviour for exceptions raised before the store exists. Idempotent.
    """
    if _HOOK['installed']:
        return
    comm = comm if comm is not None else get_comm()
    rank = comm.Get_rank()
    prev = sys.excepthook

    def _abort(exc_type, exc, tb):
        try:
            text = ''.join(traceback.format_exception(exc_type, exc, tb))
            sys.stderr.write(''.join('[rank %d] %s\n' % (rank, line)
                                     for line in text.rstrip('\n').split('\n')))
            sys.stderr.write('[rank %d] ffnumba: aborting the MPI job (uncaught exception)\n'
                             % rank)
            sys.stderr.flush()
            # mpiexec forwards each rank's output through a pipe; Abort kills the job at once,
            # and under load the launcher could drop the traceback still in flight.
            time.sleep(0.5)
        finally:
            if exc_type is KeyboardInterrupt:
                prev(exc_type, exc, tb)
            comm.Abort(1)

    def _thread_abort(args):
        if args.exc_type is SystemExit:
            return
        _abort(args.exc_type, args.exc_value, args.exc_traceback)

    sys.excepthook = _abort
    threading.excepthook = _thread_abort
    _HOOK['installed'] = True


def setup_rank(comm):
    """Per-process setup of a distributed store; returns ``(rank, size, local_rank, local_size)``.

    Finds the ranks on this node (``MPI.COMM_TYPE_SHARED``), records them in
    :data:`world`, installs the abort hook when there are several ranks, and
    caps BLAS at ``cores // local_size`` threads (``FFNUMBA_BLAS_THREADS``
    overrides; see :mod:`ffnumba.blas_threads`).
    """
    from mpi4py import MPI
    rank, size = int(comm.Get_rank()), int(comm.Get_size())
    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
    local_rank, local_size = int(local.Get_rank()), int(local.Get_size())
    local.Free()
    world.update(rank=rank, size=size, local_rank=local_rank, local_size=local_size)
    if size > 1:
        install_abort_hook(comm)
    if local_size > 1:
        from ..blas_threads import _blas_thread_cap, _limit_blas_threads
        cap = _blas_thread_cap(local_size)
        if cap:
            _limit_blas_threads(cap)
    return rank, size, local_rank, local_size


def timeout_from_env():
    """The timeout in seconds from ``FFNUMBA_DIST_TIMEOUT`` (default 300)."""
    raw = os.environ.get(TIMEOUT_ENV, '').strip()
    if not raw:
        return DEFAULT_TIMEOUT
    return check_timeout(raw, TIMEOUT_ENV)


def check_timeout(value, what='timeout'):
    try:
        t = float(value)
    except (TypeError, ValueError):
        t = -1.0
    if not t > 0:
        raise FFError('%s must be a positive number of seconds. Received: %r' % (what, value))
    return t


def wait_all(reqs, peers, timeout, what, spin=False):
    """Complete ``reqs`` (MPI requests) or raise :class:`DistTimeoutError`.

    Polls with ``Testall``, spinning shortly then sleeping up to 1 ms between
    polls (oversubscribed ranks then leave the cores to the working ones).
    ``spin=True`` never sleeps: for data transfers, which MPICH moves through
    shared memory in chunks that each need a progress call on both sides
    (sleeping made a 2.7 MB all-reduce take ~50 ms instead of a few).
    ``peers[i]`` is the rank request ``i`` waits for (None for sends).
    """
    from mpi4py import MPI
    if MPI.Request.Testall(reqs):
        return
    start = time.monotonic()
    delay = 0.0
    while not MPI.Request.Testall(reqs):
        waited = time.monotonic() - start
        if waited > timeout:
            missing = sorted({p for q, p in zip(reqs, peers)
                              if p is not None and q != MPI.REQUEST_NULL and not q.Test()})
            raise DistTimeoutError(
                'dist kvstore: %s: no answer from rank(s) %s within %.1f s: a peer died, '
                'hangs, or skipped this call. The job cannot continue; set the timeout with '
                'kv.timeout or the %s environment variable.'
                % (what, missing or 'unknown', timeout, TIMEOUT_ENV))
        if waited > 2e-4 and not spin:
            delay = min(1e-3, delay * 2 or 5e-5)
            time.sleep(delay)


def _digest(items):
    h = hashlib.blake2b(repr(items).encode(), digest_size=16).digest()
    return np.frombuffer(h, np.int64)


def _describe(info):
    op, items, epoch, count, err = info
    if err:
        return 'failed: %s' % err
    if op == 'end of epoch':
        return 'end of epoch %d after %d batches' % (epoch, count)
    if op in ('push', 'init'):
        keys = ', '.join('%r %s%s' % (k, d, tuple(s)) for k, d, s in items[:4])
        more = ' ...' if len(items) > 4 else ''
        return '%s #%d of epoch %d with %d key(s): %s%s' % (op, count, epoch, len(items),
                                                            keys, more)
    return op


def _mismatch_message(infos):
    """The error text for differing headers; ``infos[r]`` is rank r's description."""
    errs = [(r, i[4]) for r, i in enumerate(infos) if i[4]]
    if errs:
        return ('dist kvstore: the call failed on rank(s) %s; every rank stops here. %s'
                % ([r for r, _ in errs], '; '.join('rank %d: %s' % e for e in errs)))
    ops = [i[0] for i in infos]
    if 'end of epoch' in ops and len(set(ops)) > 1:
        ends = [(r, i[3]) for r, i in enumerate(infos) if i[0] == 'end of epoch']
        busy = [(r, i[3]) for r, i in enumerate(infos) if i[0] != 'end of epoch']
        return ('dist kvstore: uneven epochs: rank(s) %s ended epoch %d after %s batches '
                'while rank(s) %s still train (%s). Give every rank the same number of '
                'batches: shard with ff.io.shard or NDArrayIter(num_parts=kv.num_workers, '
                'part_index=kv.rank), or fix the batches per epoch with FeedForward\'s '
                '`epoch_size` / ff.io.ResizeIter.'
                % ([r for r, _ in ends], infos[ends[0][0]][2], [c for _, c in ends],
                   [r for r, _ in busy], '; '.join('rank %d: %s' % (r, _describe(infos[r]))
                                                   for r, _ in busy)))
    if len(set(ops)) > 1:
        return ('dist kvstore: ranks call different operations (the same calls must run in '
                'the same order on every rank): %s'
                % '; '.join('rank %d: %s' % (r, _describe(i)) for r, i in enumerate(infos)))
    items = [i[1] for i in infos]
    n = max(len(x) for x in items)
    for pos in range(n):
        col = [x[pos] if pos < len(x) else None for x in items]
        if all(c == col[0] for c in col):
            continue
        names = [c[0] if c else None for c in col]
        if all(nm == names[0] for nm in names):
            what = 'dtype' if len({c[1] for c in col}) > 1 else 'shape'
            return ('dist kvstore: %s: key %r has a different %s on different ranks: %s'
                    % (ops[0], names[0], what, '; '.join(
                        'rank %d: %s %s' % (r, c[1], tuple(c[2])) for r, c in enumerate(col))))
        return ('dist kvstore: %s: ranks push different keys at position %d of the call '
                '(keys must be pushed in the same order on every rank): %s'
                % (ops[0], pos, '; '.join('rank %d: %s' % (r, 'no key' if c is None else
                                                           '%r %s %s' % (c[0], c[1], tuple(c[2])))
                                          for r, c in enumerate(col))))
    return ('dist kvstore: ranks disagree on %s: %s' % (ops[0], '; '.join(
        'rank %d: %s' % (r, _describe(i)) for r, i in enumerate(infos))))


class Agreement:
    """The per-collective header exchange over a private duplicate of ``comm``."""

    def __init__(self, comm):
        self.comm = comm.Dup()
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()

    def check(self, op, items, epoch, count, timeout, error=None):
        """Exchange headers; raise the same FFError on every rank when they differ.

        ``items`` is a list of ``(key, dtype str, shape tuple)``; ``error`` a
        local error message (the call failed on this rank before any traffic),
        which every rank then raises.
        """
        header = np.zeros(_HEADER, np.int64)
        header[0] = _OP_CODES[op]
        header[1] = len(items)
        header[2:4] = _digest(items)
        if op == 'end of epoch':    # elsewhere epoch and step only describe the call
            header[4], header[5] = epoch, count
        header[6] = 1 if error else 0
        if self.size == 1:
            table = header[None, :]
        else:
            table = np.empty((self.size, _HEADER), np.int64)
            table[self.rank] = header
            reqs, peers = [], []
            for p in range(self.size):
                if p != self.rank:
                    reqs.append(self.comm.Irecv(table[p], source=p, tag=_TAG))
                    peers.append(p)
            for p in range(self.size):
                if p != self.rank:
                    reqs.append(self.comm.Isend(header, dest=p, tag=_TAG))
                    peers.append(None)
            wait_all(reqs, peers, timeout, op)
        if (table == table[0]).all() and not error:
            return
        if (table == table[0]).all() and self.size == 1:
            raise FFError(error)
        info = (op, [(k, d, tuple(s)) for k, d, s in items], int(epoch), int(count), error)
        infos = self.comm.allgather(info) if self.size > 1 else [info]
        raise FFError(_mismatch_message(infos))
