"""NDArrayIter: batches from in-memory arrays (MXNet ``mx.io.NDArrayIter``).

Batching rule for ``n`` samples and batch size ``bs`` (MXNet 1.9.1):

* ``'pad'``: every batch is full; the last one wraps to the start of the data
  and ``pad`` counts the wrapped samples (10 samples, bs 4: [0-3], [4-7],
  [8, 9, 0, 1] with pad 2).
* ``'discard'``: the incomplete last batch is dropped (``n // bs`` batches).
* ``'roll_over'``: the incomplete last batch is kept in a cache and becomes
  the head of the first batch of the next epoch (its ``pad`` is the cached
  count); ``hard_reset()`` empties the cache.

``shuffle=True`` draws a new permutation on every ``reset()`` (and once at
construction) from :func:`ffnumba.random.generator`, so ``ff.random.seed(n)``
makes the order repeat.
"""
from collections import OrderedDict

import numpy as np

from ..base import FFError, ParamError, ShapeError
from ..context import cpu
from .. import random as _random
from .base import DataBatch, DataDesc, DataIter
from .shard import _rows, check_parts

__all__ = ['NDArrayIter']

_HANDLES = ('pad', 'discard', 'roll_over')


def _host_array(value, name):
    """A CPU numpy copy: an NDArray keeps its dtype, anything else becomes float32."""
    from ..ndarray import NDArray
    from ..ndarray._objects import check_numeric
    if isinstance(value, NDArray):
        return value.asnumpy()
    if isinstance(value, (np.ndarray, list, tuple)):
        try:
            check_numeric(np.asarray(value), 'NDArrayIter: %r' % name)  # None would become NaN
        except (TypeError, ValueError) as e:
            if isinstance(e, FFError):
                raise
    try:
        return np.array(value, dtype=np.float32, order='C')   # a copy, as MXNet makes
    except (TypeError, ValueError):
        raise ParamError('NDArrayIter: invalid type %s for %r; expected an NDArray, a numpy '
                         'array, a list of them or a dict of them' % (type(value).__name__,
                                                                      name)) from None


def _init_data(data, allow_empty, default_name):
    """Normalise the inputs to a sorted list of ``(name, numpy array)``."""
    if data is None:
        if not allow_empty:
            raise ParamError('NDArrayIter: `data` must be given. Received: data=None')
        data = []
    if not isinstance(data, (list, tuple, dict)):
        data = [data]
    if isinstance(data, (list, tuple)):
        if not data and not allow_empty:
            raise ParamError('NDArrayIter: `data` must hold at least one array. Received: []')
        if len(data) == 1:
            data = OrderedDict([(default_name, data[0])])
        else:
            data = OrderedDict([('_%d_%s' % (i, default_name), d) for i, d in enumerate(data)])
    for k in data:
        if not isinstance(k, str):
            raise ParamError('NDArrayIter: array names must be str. Received: %r' % (k,))
    out = []
    for k, v in sorted(data.items()):
        arr = _host_array(v, k)
        if arr.ndim == 0:
            raise ShapeError('NDArrayIter: %r must have a batch axis. Received: a scalar' % k)
        out.append((k, arr))
    return out


class NDArrayIter(DataIter):
    """Iterate over numpy arrays or NDArrays in batches.

    Parameters
    ----------
    data : array, list of arrays or dict name -> array
        A list is named ``_0_data, _1_data, ...`` (one array: ``data_name``);
        a dict is ordered by key.
    label : same kinds as ``data``, optional
        No label gives ``provide_label == []``.
    batch_size : int, >= 1, default 1
    shuffle : bool, default False
        Reshuffle on every ``reset()``.
    last_batch_handle : {'pad', 'discard', 'roll_over'}, default 'pad'
    data_name : str, default 'data'
    label_name : str, default 'softmax_label'
    layout : str, default 'NCHW'
        Position of ``'N'`` is the batch axis.
    num_parts : int, default 1
        Split the samples into this many parts (one per worker of a
        distributed run, ``kv.num_workers``) and iterate over one of them.
    part_index : int, default 0
        The part to iterate over (``kv.rank``). Samples ``i`` with
        ``i % num_parts == part_index`` are kept and the last ``n % num_parts``
        samples are dropped so every part has the same number of batches
        (see :func:`ffnumba.io.shard`). MXNet has these two arguments on its
        file iterators (``MNISTIter``, ``ImageRecordIter``), not on
        ``NDArrayIter``.

    Batches hold CPU NDArrays; numpy input becomes float32 (MXNet's rule,
    labels included), an NDArray input keeps its dtype.

    Raises
    ------
    ParamError
        Bad ``batch_size``, ``last_batch_handle``, layout or input type;
        names that are not str or repeat between ``data`` and ``label``.
    ShapeError
        Arrays with different numbers of samples (names both), or none.
    """

    def __init__(self, data, label=None, batch_size=1, shuffle=False, last_batch_handle='pad',
                 data_name='data', label_name='softmax_label', layout='NCHW', num_parts=1,
                 part_index=0):
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
                or batch_size <= 0:
            raise ParamError('NDArrayIter: `batch_size` must be a positive int. '
                             'Received: batch_size=%r' % (batch_size,))
        if last_batch_handle not in _HANDLES:
            raise ParamError("NDArrayIter: `last_batch_handle` must be one of 'pad', "
                             "'discard', 'roll_over'. Received: last_batch_handle=%r"
                             % (last_batch_handle,))
        axis = DataDesc.get_batch_axis(layout)
        if axis < 0:
            raise ParamError("NDArrayIter: `layout` must contain 'N' (the batch axis). "
                             "Received: layout=%r" % (layout,))
        super().__init__(int(batch_size))
        self.layout = layout
        self._axis = axis
        self._data = _init_data(data, False, data_name)
        self._label = _init_data(label, True, label_name)
        self._check_counts()
        num_parts, part_index = check_parts(num_parts, part_index, 'NDArrayIter')
        if num_parts > 1:
            rows = _rows(self._data[0][1].shape[axis], num_parts, part_index, True,
                         'NDArrayIter')
            self._data = [(k, np.take(a, rows, axis=axis)) for k, a in self._data]
            self._label = [(k, np.take(a, rows, axis=axis)) for k, a in self._label]
        self.num_parts, self.part_index = num_parts, part_index
        self.shuffle = shuffle
        self.last_batch_handle = last_batch_handle
        self.num_data = self._data[0][1].shape[axis]
        self.idx = np.arange(self.num_data)
        self.num_source = len(self._data) + len(self._label)
        self.cursor = -self.batch_size
        self._cache_data = None
        self._cache_label = None
        self.reset()

    def _check_counts(self):
        first_name, first = self._data[0]
        names = [name for name, _ in self._data + self._label]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ParamError('NDArrayIter: data and label names must be distinct. Received %s '
                             'more than once' % dup)
        for name, arr in self._data + self._label:
            if arr.ndim <= self._axis:
                raise ShapeError('NDArrayIter: %r of shape %s has no batch axis %d (layout %r)'
                                 % (name, arr.shape, self._axis, self.layout))
            if arr.shape[self._axis] != first.shape[self._axis]:
                raise ShapeError(
                    'NDArrayIter: all inputs must have the same number of samples; %r has %d '
                    'but %r has %d' % (first_name, first.shape[self._axis], name,
                                       arr.shape[self._axis]))
        if first.shape[self._axis] == 0:
            raise ShapeError('NDArrayIter: %r has no samples (shape %s)'
                             % (first_name, first.shape))

    # ------------------------------------------------------------------ views
    @staticmethod
    def _wrap(arr):
        from ..ndarray import NDArray
        return NDArray(np.ascontiguousarray(arr), cpu(0))

    @property
    def data(self):
        """``[(name, NDArray)]`` of the data sources in the current (shuffled) order."""
        return self._sources(self._data)

    @property
    def label(self):
        """``[(name, NDArray)]`` of the label sources in the current (shuffled) order."""
        return self._sources(self._label)

    def _sources(self, sources):
        if not self.shuffle:
            return [(k, self._wrap(v)) for k, v in sources]
        return [(k, self._wrap(np.take(v, self.idx, axis=self._axis))) for k, v in sources]

    def _descs(self, sources):
        out = []
        for k, v in sources:
            shape = v.shape[:self._axis] + (self.batch_size,) + v.shape[self._axis + 1:]
            out.append(DataDesc(k, shape, v.dtype.type, layout=self.layout))
        return out

    @property
    def provide_data(self):
        """``[DataDesc]`` of the data, batch axis = ``batch_size``."""
        return self._descs(self._data)

    @property
    def provide_label(self):
        """``[DataDesc]`` of the labels (``[]`` without labels)."""
        return self._descs(self._label)

    # ------------------------------------------------------------ iteration
    def hard_reset(self):
        """Go back to the start and drop any roll-over cache."""
        if self.shuffle:
            self._shuffle_data()
        self.cursor = -self.batch_size
        self._cache_data = None
        self._cache_label = None

    def reset(self):
        """Go back to the start (keeping the roll-over cache); reshuffle if asked."""
        if self.shuffle:
            self._shuffle_data()
        if self.last_batch_handle == 'roll_over' and \
                self.num_data - self.batch_size < self.cursor < self.num_data:
            self.cursor = self.cursor - self.num_data - self.batch_size
        else:
            self.cursor = -self.batch_size

    def iter_next(self):
        self.cursor += self.batch_size
        return self.cursor < self.num_data

    def next(self):
        if not self.iter_next():
            raise StopIteration
        data = self.getdata()
        label = self.getlabel()
        if data[0].shape[self._axis] != self.batch_size:
            # incomplete last batch: keep it for the next epoch ('roll_over')
            self._cache_data = data
            self._cache_label = label
            raise StopIteration
        return DataBatch(data=data, label=label, pad=self.getpad(), index=None)

    def _positions(self):
        """Sample positions (into the current order) of the batch at the cursor."""
        c, bs, n = self.cursor, self.batch_size, self.num_data
        if self.last_batch_handle == 'pad' and c + bs > n:
            pad = c + bs - n
            return np.concatenate([np.arange(c, n), np.arange(pad) % n])
        return np.arange(max(c, 0), min(c + bs, n))

    def _take(self, sources, positions):
        return [self._wrap(np.take(arr, self.idx[positions], axis=self._axis))
                for _, arr in sources]

    def _batchify(self, sources, cache_attr):
        if self.cursor >= self.num_data:
            raise ParamError('NDArrayIter: the epoch is over; call reset() first')
        if self.last_batch_handle == 'roll_over' and -self.batch_size < self.cursor < 0:
            cached = getattr(self, cache_attr)
            fresh = self._take(sources, self._positions())
            setattr(self, cache_attr, None)
            if not cached:
                return fresh
            from ..ndarray import concatenate
            return [concatenate([a, b], axis=self._axis) for a, b in zip(cached, fresh)]
        return self._take(sources, self._positions())

    def getdata(self):
        return self._batchify(self._data, '_cache_data')

    def getlabel(self):
        return self._batchify(self._label, '_cache_label')

    def getpad(self):
        c, bs, n = self.cursor, self.batch_size, self.num_data
        if self.last_batch_handle == 'pad' and c + bs > n:
            return c + bs - n
        if self.last_batch_handle == 'roll_over' and -bs < c < 0:
            return -c
        return 0

    def _shuffle_data(self):
        self.idx = _random.generator().permutation(self.num_data)
