"""In-process key-value stores: ``'local'`` and ``'device'``.

``local`` keeps each value on the CPU; ``device`` keeps it on the context of
the first value given for the key (MXNet reduces and updates on the GPU
there). Both sum the per-device values of a push in a fixed order, so a run
repeats bit for bit.
"""
import numpy as np

from ..base import FFError, ParamError
from ..context import Context
from ..optimizer import _deferred
from ..thread_pool import split_range
from .base import KVStoreBase, _normalize

__all__ = ['KVStore']

#: Dtypes whose keys :meth:`KVStore.pushpull` may chain (float16 updates go through a
#: float32 master copy, which they read back at once).
_CHAIN_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _flat_hosts(*arrays):
    """Flat views of NDArrays whose values are contiguous host arrays of one dtype, or None."""
    from ..ndarray._device import host_compute
    if not all(host_compute(a.context) for a in arrays):
        return None
    hosts = [a._host() for a in arrays]
    if any(h.dtype != hosts[0].dtype or not h.flags.c_contiguous for h in hosts):
        return None
    return [h.reshape(-1) for h in hosts]


def _split_add(out, a, b):
    """``out = a + b`` on flat host arrays, in pieces over the kernel threads (or as a
    step of the open :func:`ffnumba.optimizer._deferred.chain`).

    numpy's add releases the GIL and is elementwise, so the pieces run at once
    and the sum is the one-call sum bit for bit, however it is split.
    """
    _deferred.step(np.add, [a, b, out])


def _copy_into(dst, src):
    """``dst[:] = src`` for NDArrays, without a temporary on the CPU.

    Host arrays of one dtype are copied in pieces over the kernel threads
    (:func:`ffnumba.thread_pool.split_range`): the store's weights go back to
    every device after each update.
    """
    if dst is src:
        return
    if dst.shape != src.shape:
        raise FFError('KVStore: shape mismatch, stored value %s, output %s'
                      % (src.shape, dst.shape))
    flat = _flat_hosts(dst, src)
    if flat is None:
        dst._copy_from(src)
        return
    _deferred.step(np.copyto, flat)


class KVStore(KVStoreBase):
    """A single-process key-value store (MXNet ``kv.create('local')``).

    Parameters
    ----------
    kv_type : str, default 'local'
        ``'local'`` (values kept on the CPU) or ``'device'`` (values kept on the
        device of the first pushed value; gradient compression allowed).

    Examples
    --------
    >>> import ffnumba as ff
    >>> kv = ff.kv.create('local')
    >>> kv.init(3, ff.nd.ones((2, 3)))
    >>> kv.push(3, [ff.nd.ones((2, 3)), ff.nd.ones((2, 3))])
    >>> out = ff.nd.zeros((2, 3)); kv.pull(3, out=out); float(out.asnumpy()[0, 0])
    2.0
    """

    def __init__(self, kv_type='local'):
        super().__init__(kv_type)
        self._store = {}
        self._buf = {}
        self._compression = None
        self._residual = {}

    # ----------------------------------------------------------------- init
    def init(self, key, value):
        """Initialise ``key`` (int or str, or a list of them) with a copy of ``value``.

        Raises
        ------
        FFError
            For a key initialised twice or int and str keys mixed.
        """
        from ..ndarray import array
        for k, vals in _normalize(key, value, 'init'):
            self._check_key_kind(k)
            if k in self._store:
                raise FFError('KVStore.init: key %r is already initialized' % (k,))
            src = vals[0]
            ctx = src.context if self._type != 'local' else Context('cpu', 0)
            self._store[k] = array(src, ctx=ctx, dtype=src.dtype)

    def _stored(self, k, what):
        try:
            return self._store[k]
        except KeyError:
            raise FFError('KVStore.%s: key %r has not been initialized; call init first'
                          % (what, k)) from None

    # ------------------------------------------------------------ push/pull
    def _reduce(self, k, vals, stored):
        """Sum ``vals`` into an NDArray on the store's context.

        The sum goes into one buffer per key, reused by every push (no
        allocation per push on the CPU); a single value already in the
        store's memory is handed to the updater as it is.
        """
        from ..ndarray import zeros
        if self._compression is not None:
            vals = [self._compress(k, i, v) for i, v in enumerate(vals)]
        for v in vals:
            if v.shape != stored.shape:
                raise FFError('KVStore.push: key %r has shape %s but a pushed value has '
                              'shape %s' % (k, stored.shape, v.shape))
        if len(vals) == 1 and self._updater is not None and vals[0]._usable_on(stored.context):
            return vals[0]
        buf = self._buf.get(k)
        if buf is None or buf.shape != stored.shape or buf.dtype != stored.dtype:
            buf = zeros(stored.shape, stored.context, stored.dtype)
            self._buf[k] = buf
        rest = vals[1:]
        flat = _flat_hosts(buf, *vals[:2]) if len(vals) >= 2 else None
        if flat is not None:
            _split_add(*flat)                   # one pass: (v0 + v1), as below
            rest = vals[2:]
        else:
            buf._copy_from(vals[0])
        for v in rest:
            buf._add_from(v)
        return buf

    def push(self, key, value, priority=0):
        """Sum ``value`` (one NDArray per device) into ``key``.

        With an updater set, ``updater(key, sum, stored)`` runs; otherwise the
        sum replaces the stored value. ``priority`` is accepted and ignored
        (pushes run in call order).
        """
        for k, vals in _normalize(key, value, 'push'):
            self._push_key(k, vals)

    def _push_key(self, k, vals):
        stored = self._stored(k, 'push')
        merged = self._reduce(k, vals, stored)
        if self._updater is not None:
            self._updater(k, merged, stored)
        else:
            _copy_into(stored, merged)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Copy the stored value of ``key`` into every array of ``out``."""
        if out is None:
            raise FFError('KVStore.pull: `out` is required')
        for k, outs in _normalize(key, out, 'pull'):
            self._pull_key(k, outs)

    def _pull_key(self, k, outs):
        stored = self._stored(k, 'pull')
        outs = [o for o in outs if o is not stored]
        flat = _flat_hosts(stored, *outs) if len(outs) > 1 else None
        if flat is None or any(o.shape != stored.shape for o in outs):
            for o in outs:
                _copy_into(o, stored)
            return
        src, dsts = flat[0], flat[1:]
        if _deferred.chaining():
            for d in dsts:                      # each piece of ``src`` read from cache
                _deferred.step(np.copyto, [d, src])
            return

        def piece(lo, hi):
            for d in dsts:                      # the piece of ``src`` is read from cache
                d[lo:hi] = src[lo:hi]
        split_range(piece, src.size)

    def pushpull(self, key, value, out=None, priority=0):
        """``push(key, value)`` then ``pull(key, out)`` (into ``value`` if ``out`` is None).

        On host arrays (float32/float64, no gradient compression) with no updater or
        one whose optimizer defers its kernels
        (:func:`ffnumba.optimizer.updater.defers`), each key is one pass of the
        update kernel's reducing twin (the values summed in order, the update, the
        new weight written to every output), or without an updater its sum and
        copies as one chain of steps, and all keys' passes run together, cut into
        pieces over the kernel threads in one fork-join
        (:mod:`ffnumba.optimizer._deferred`; at once on one thread: the same values).
        The values are those of ``push`` then ``pull``; for AdaGrad, Adam and Ftrl
        up to the last bit (fastmath contracts the sum into the update's arithmetic).
        """
        outs = value if out is None else out
        pushes = _normalize(key, value, 'push')
        pulls = _normalize(key, outs, 'pull')
        if not self._chains(pushes, pulls):
            self.push(key, value, priority)
            self.pull(key, outs, priority)
            return
        with _deferred.deferred():
            for (k, vals), (_, dsts) in zip(pushes, pulls):
                self._chain_key(k, vals, dsts)

    def _chain_key(self, k, vals, dsts):
        """One key of a chained :meth:`pushpull`: with an updater, one pass of its
        reducing kernel (sum of ``vals``, update, new weight into ``dsts``); else the
        sum, the store and the copies as steps of one chain."""
        stored = self._stored(k, 'push')
        outs = [o for o in dsts if o is not stored]
        flat = None
        if self._updater is not None and all(a.shape == stored.shape for a in vals + outs):
            flat = _flat_hosts(stored, *vals, *outs)
        spec = (flat[1:1 + len(vals)], flat[1 + len(vals):]) if flat else ()
        with _deferred.chain(*spec) as ch:
            if not flat:
                self._push_key(k, vals)
                self._pull_key(k, dsts)
                return
            self._updater(k, vals[0], stored)     # its kernel reads the sum (ch.sources)
            if not ch.fused:
                raise FFError('KVStore.pushpull: key %r: the update kernel ran before the '
                              'gradients were summed (internal error)' % (k,))

    def chainable(self):
        """Whether this store may chain :meth:`pushpull`'s keys: an in-process store
        without gradient compression, whose updater (if any) defers its kernels."""
        from ..optimizer.updater import Updater, defers
        if type(self) is not KVStore or self._compression is not None:
            return False
        return self._updater is None or (isinstance(self._updater, Updater)
                                         and defers(self._updater.optimizer))

    def _chains(self, pushes, pulls):
        """Whether :meth:`pushpull` may run these keys as deferred chains."""
        from ..ndarray._device import host_compute
        if not self.chainable():
            return False
        if len(pushes) != len(pulls) or any(a[0] != b[0] for a, b in zip(pushes, pulls)):
            return False
        for k, vals in pushes:
            stored = self._store.get(k)
            if stored is None or stored.dtype not in _CHAIN_DTYPES:
                return False
            for v in vals:
                if not host_compute(v.context) or v.dtype != stored.dtype:
                    return False
        return all(host_compute(o.context) for _, outs in pulls for o in outs)

    def broadcast(self, key, value, out, priority=0):
        """``init(key, value)`` then ``pull(key, out)``."""
        self.init(key, value)
        self.pull(key, out, priority)

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        """Pull the rows ``row_ids`` (dense storage: every row is copied)."""
        self.pull(key, out, priority)

    # --------------------------------------------------------- compression
    def set_gradient_compression(self, compression_params):
        """Enable 2-bit gradient compression (``'device'`` stores only).

        Parameters
        ----------
        compression_params : dict
            ``{'type': '2bit', 'threshold': t}`` with ``t > 0`` (default 0.5).
            Each pushed value ``g`` becomes ``q = t*sign(r+g)`` where
            ``|r+g| >= t`` and 0 elsewhere; the residual ``r <- r+g-q`` is kept
            per key and device (Seide et al. 2014, 1-bit SGD; MXNet 2bit).
        """
        if self._type == 'local':
            return super().set_gradient_compression(compression_params)
        params = dict(compression_params or {})
        if params.get('type') != '2bit':
            raise ParamError("KVStore: `type` must be '2bit'. Received: type=%r"
                             % (params.get('type'),))
        t = float(params.get('threshold', 0.5))
        if not t > 0:
            raise ParamError('KVStore: `threshold` must be > 0. Received: threshold=%r' % t)
        self._compression = t

    def _compress(self, k, i, v):
        from ..ndarray import array
        t = self._compression
        g = v.asnumpy()
        r = self._residual.get((k, i))
        if r is None:
            r = np.zeros_like(g)
        acc = r + g
        q = np.where(acc >= t, t, np.where(acc <= -t, -t, 0)).astype(g.dtype)
        self._residual[(k, i)] = acc - q
        return array(q, ctx=v.context, dtype=g.dtype)
