"""CSVIter: batches from CSV files (MXNet ``mx.io.CSVIter``).

Each row of ``data_csv`` holds one sample, flattened: it is reshaped to
``data_shape``. ``label_csv`` (optional) holds one label row per sample,
reshaped to ``label_shape``; without it every label is 0.

Last-batch rule (checked against MXNet 1.9.1):

* ``round_batch=True``: the last batch is completed with samples from the
  start of the file (``pad`` counts them), and the next epoch begins after
  the samples already used for padding (10 rows, bs 3: epoch 0 ends with
  [9, 0, 1] pad 2, epoch 1 starts at row 2).
* ``round_batch=False``: the last batch keeps whatever the buffer held
  before in the padded slots (``pad`` counts them); every epoch starts at row 0.
"""
import os

import numpy as np

from ..base import FFError, ParamError, ShapeError
from ..context import cpu
from ..dtype import np_dtype
from .base import DataBatch, DataDesc, DataIter

__all__ = ['CSVIter']


def _shape_tuple(shape, what):
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        shape = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise ParamError('CSVIter: `%s` must be a tuple of positive ints. Received: %s=%r'
                         % (what, what, shape)) from None
    if not shape or any(s <= 0 for s in shape):
        raise ParamError('CSVIter: `%s` must be a tuple of positive ints. Received: %s=%r'
                         % (what, what, shape))
    return shape


def _read_csv(path, shape, dtype, what):
    if not os.path.isfile(path):
        raise FFError('CSVIter: %s file %r does not exist' % (what, path))
    try:
        rows = np.loadtxt(path, delimiter=',', dtype=np.float64, ndmin=2)
    except ValueError as e:
        raise FFError('CSVIter: cannot parse %s file %r: %s' % (what, path, e)) from None
    size = int(np.prod(shape))
    if rows.shape[0] and rows.shape[1] != size:
        raise ShapeError('CSVIter: the rows of %r hold %d values but %s_shape=%s needs %d'
                         % (path, rows.shape[1], what, shape, size))
    return rows.astype(dtype).reshape((rows.shape[0],) + shape)


class CSVIter(DataIter):
    """Iterate over a CSV file of samples (and an optional CSV file of labels).

    Parameters
    ----------
    data_csv : str
        Path of the data file (comma separated, one sample per row).
    data_shape : tuple of int
        Shape of one sample; ``prod(data_shape)`` must equal the row length.
    label_csv : str, optional
        Path of the label file; ``None`` or ``'NULL'`` gives zero labels.
    label_shape : tuple of int, default (1,)
        Shape of one label; a single value gives labels of shape ``(batch,)``.
    batch_size : int, >= 1
    round_batch : bool, default True
        See the module docstring.
    prefetch_buffer, ctx : accepted for MXNet compatibility (unused).
    dtype : str, optional
        Element type of data and labels (default float32).
    data_name, label_name : str
        Names in ``provide_data``/``provide_label``.

    Raises
    ------
    FFError
        Missing or unparsable file.
    ShapeError
        Row length that does not fit the shape, or data/label row counts that differ.
    """

    def __init__(self, data_csv, data_shape, label_csv=None, label_shape=(1,), batch_size=1,
                 round_batch=True, prefetch_buffer=4, ctx='gpu', dtype=None,
                 data_name='data', label_name='softmax_label', **kwargs):
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
                or batch_size <= 0:
            raise ParamError('CSVIter: `batch_size` must be a positive int. '
                             'Received: batch_size=%r' % (batch_size,))
        super().__init__(int(batch_size))
        dt = np_dtype(dtype if dtype is not None else 'float32', 'CSVIter dtype')
        self._data_shape = _shape_tuple(data_shape, 'data_shape')
        self._label_shape = _shape_tuple(label_shape, 'label_shape')
        self._x = _read_csv(data_csv, self._data_shape, dt, 'data')
        n = self._x.shape[0]
        if n == 0:
            raise FFError('CSVIter: data file %r holds no rows' % (data_csv,))
        lshape = () if int(np.prod(self._label_shape)) == 1 else self._label_shape
        if label_csv is None or label_csv == 'NULL':
            self._y = np.zeros((n,) + lshape, dtype=dt)
        else:
            self._y = _read_csv(label_csv, self._label_shape, dt, 'label').reshape((-1,) + lshape)
            if self._y.shape[0] != n:
                raise ShapeError('CSVIter: %r has %d rows but %r has %d rows'
                                 % (data_csv, n, label_csv, self._y.shape[0]))
        self.round_batch = bool(round_batch)
        self.num_data = n
        self._data_name, self._label_name = data_name, label_name
        self._start = 0          # first row of the current epoch
        self._offset = 0         # rows of the epoch already served
        self._next_start = 0
        self._buf_x = np.zeros((self.batch_size,) + self._x.shape[1:], dt)
        self._buf_y = np.zeros((self.batch_size,) + self._y.shape[1:], dt)
        self._buf_i = np.zeros(self.batch_size, np.uint64)
        self._batch = None

    @property
    def provide_data(self):
        return [DataDesc(self._data_name, (self.batch_size,) + self._x.shape[1:],
                         self._x.dtype.type)]

    @property
    def provide_label(self):
        return [DataDesc(self._label_name, (self.batch_size,) + self._y.shape[1:],
                         self._y.dtype.type)]

    def reset(self):
        self._start = self._next_start if self.round_batch else 0
        self._offset = 0
        self._next_start = self._start
        self._batch = None

    def iter_next(self):
        n, bs = self.num_data, self.batch_size
        remaining = n - self._start - self._offset
        if remaining <= 0:
            return False
        first = self._start + self._offset
        take = min(bs, remaining)
        pos = np.arange(first, first + take)
        pad = bs - take
        if first + take == n:     # the epoch ends with this batch
            self._next_start = pad % n if self.round_batch else 0
        if pad and self.round_batch:
            pos = np.concatenate([pos, np.arange(pad) % n])
        if pad and not self.round_batch:
            self._buf_x[:take] = self._x[pos]
            self._buf_y[:take] = self._y[pos]
            self._buf_i[:take] = pos
        else:
            self._buf_x[:] = self._x[pos]
            self._buf_y[:] = self._y[pos]
            self._buf_i[:] = pos
        self._offset += take
        self._batch = (self._buf_x.copy(), self._buf_y.copy(), pad, self._buf_i.copy())
        return True

    def _current(self):
        if self._batch is None:
            raise ParamError('CSVIter: no current batch; call iter_next() or next() first')
        return self._batch

    def getdata(self):
        """The current batch's data: one NDArray (MXNet's C++ iterators return one)."""
        from ..ndarray import from_numpy
        return from_numpy(self._current()[0], zero_copy=False, ctx=cpu(0))

    def getlabel(self):
        """The current batch's label: one NDArray."""
        from ..ndarray import from_numpy
        return from_numpy(self._current()[1], zero_copy=False, ctx=cpu(0))

    def getpad(self):
        return self._current()[2]

    def getindex(self):
        return self._current()[3]

    def next(self):
        if not self.iter_next():
            raise StopIteration
        return DataBatch(data=[self.getdata()], label=[self.getlabel()], pad=self.getpad(),
                         index=self.getindex())
