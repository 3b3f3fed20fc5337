"""ResizeIter and PrefetchingIter (MXNet ``mx.io.ResizeIter``/``PrefetchingIter``)."""
import threading
import weakref

from ..base import FFError, ParamError
from .base import DataBatch, DataDesc, DataIter

__all__ = ['ResizeIter', 'PrefetchingIter']


class _BatchViews(DataIter):
    """``getdata``/``getlabel``/``getindex``/``getpad`` read from ``self.current_batch``."""

    def getdata(self):
        """The data arrays of the current batch."""
        return self.current_batch.data

    def getlabel(self):
        """The label arrays of the current batch."""
        return self.current_batch.label

    def getindex(self):
        """The sample indices of the current batch (None when unknown)."""
        return self.current_batch.index

    def getpad(self):
        """The number of filler samples at the end of the current batch."""
        return self.current_batch.pad


class ResizeIter(_BatchViews):
    """Give exactly ``size`` batches per epoch from another iterator.

    When the inner iterator runs out it is reset and read on; with
    ``reset_internal=True`` (default) ``reset()`` also resets it.

    Parameters
    ----------
    data_iter : DataIter
    size : int, >= 0
        Batches per epoch.
    reset_internal : bool, default True
    """

    def __init__(self, data_iter, size, reset_internal=True):
        super().__init__()
        if int(size) < 0:
            raise ParamError('ResizeIter: `size` must be a non-negative int. Received: size=%r'
                             % (size,))
        self.data_iter = data_iter
        self.size = int(size)
        self.reset_internal = reset_internal
        self.cur = 0
        self.current_batch = None
        self.provide_data = data_iter.provide_data
        self.provide_label = data_iter.provide_label
        self.batch_size = data_iter.batch_size
        if hasattr(data_iter, 'default_bucket_key'):
            self.default_bucket_key = data_iter.default_bucket_key

    def reset(self):
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self):
        if self.cur == self.size:
            return False
        try:
            self.current_batch = self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            try:
                self.current_batch = self.data_iter.next()
            except StopIteration:
                raise FFError('ResizeIter: the inner iterator gives no batch even after '
                              'reset()') from None
        self.cur += 1
        return True


class _Worker:
    """State shared with one prefetch thread (holds no reference to the PrefetchingIter)."""

    def __init__(self, it):
        self.it = it
        self.ready = threading.Event()
        self.taken = threading.Event()
        self.taken.set()
        self.running = True
        self.batch = None
        self.error = None
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            self.taken.wait()
            if not self.running:
                return
            try:
                self.batch, self.error = self.it.next(), None
            except StopIteration:
                self.batch, self.error = None, None
            except BaseException as e:  # handed to the consumer, never swallowed
                self.batch, self.error = None, e
            self.taken.clear()
            self.ready.set()

    def stop(self):
        self.running = False
        self.taken.set()


def _stop_all(workers):
    for w in workers:
        w.stop()


class PrefetchingIter(_BatchViews):
    """Read the next batches of one or more iterators in background threads.

    One thread per iterator fetches the next batch while the current one is
    used; each batch joins the iterators' data and label lists in order.

    Parameters
    ----------
    iters : DataIter or list of DataIter
    rename_data : list of dict, optional
        One ``{old_name: new_name}`` per iterator for ``provide_data``.
    rename_label : list of dict, optional
        The same for ``provide_label``.

    Raises
    ------
    FFError
        If the iterators disagree in length or pad, or an inner iterator fails
        (its error is chained).
    """

    def __init__(self, iters, rename_data=None, rename_label=None):
        super().__init__()
        if not isinstance(iters, (list, tuple)):
            iters = [iters]
        if not iters:
            raise ParamError('PrefetchingIter: `iters` must hold at least one iterator')
        for it in iters:
            if not all(hasattr(it, a) for a in ('provide_data', 'provide_label', 'reset')):
                raise ParamError('PrefetchingIter: `iters` must be DataIters. Received: %s'
                                 % type(it).__name__)
        self.iters = list(iters)
        self.n_iter = len(self.iters)
        self.rename_data = rename_data
        self.rename_label = rename_label
        self.batch_size = self.provide_data[0][1][0]
        self.current_batch = None
        self._workers = [_Worker(it) for it in self.iters]
        self._finalizer = weakref.finalize(self, _stop_all, self._workers)

    def close(self):
        """Stop the prefetch threads (also done when the iterator is collected)."""
        self._finalizer()

    @staticmethod
    def _renamed(descs, renames, iters):
        if renames is None:
            return sum([it_descs for it_descs in descs], [])
        out = []
        for r, it_descs in zip(renames, descs):
            for x in it_descs:
                if isinstance(x, DataDesc):
                    out.append(DataDesc(r.get(x.name, x.name), x.shape, x.dtype, x.layout))
                else:
                    out.append(DataDesc(r.get(x[0], x[0]), x[1]))
        return out

    @property
    def provide_data(self):
        return self._renamed([i.provide_data for i in self.iters], self.rename_data, self.iters)

    @property
    def provide_label(self):
        return self._renamed([i.provide_label for i in self.iters], self.rename_label,
                             self.iters)

    def _wait(self):
        for w in self._workers:
            w.ready.wait()
        for w in self._workers:
            if w.error is not None:
                err, w.error = w.error, None
                raise FFError('PrefetchingIter: an inner iterator failed: %s: %s'
                              % (type(err).__name__, err)) from err

    def reset(self):
        for w in self._workers:
            w.ready.wait()
        for it in self.iters:
            it.reset()
        for w in self._workers:
            w.error = None
            w.ready.clear()
            w.taken.set()

    def iter_next(self):
        self._wait()
        batches = [w.batch for w in self._workers]
        if batches[0] is None:
            if any(b is not None for b in batches):
                raise FFError('PrefetchingIter: the iterators give different numbers of '
                              'batches')
            return False
        if any(b is None or b.pad != batches[0].pad for b in batches):
            raise FFError('PrefetchingIter: the iterators disagree in batch count or pad '
                          '(pads %s)' % [None if b is None else b.pad for b in batches])
        self.current_batch = DataBatch(
            sum([list(b.data) for b in batches], []),
            sum([list(b.label or []) for b in batches], []),
            batches[0].pad, batches[0].index,
            provide_data=self.provide_data, provide_label=self.provide_label)
        for w in self._workers:
            w.ready.clear()
            w.taken.set()
        return True

    def next(self):
        if self.iter_next():
            return self.current_batch
        raise StopIteration
