"""Data descriptions, batches and the iterator base class (MXNet ``mx.io``).

A training loop reads a :class:`DataIter`: ``provide_data``/``provide_label``
describe the arrays (names, batch shapes, dtypes), and each ``next()`` gives a
:class:`DataBatch` whose ``pad`` says how many trailing samples are filler.
"""
from collections import namedtuple

import numpy as np

from ..base import ParamError

__all__ = ['DataDesc', 'DataBatch', 'DataIter']


class DataDesc(namedtuple('DataDesc', ['name', 'shape'])):
    """Name and shape of one data or label array, plus its dtype and layout.

    A namedtuple ``(name, shape)`` (so ``name, shape = desc`` works and two
    descriptions compare equal on name and shape) with extra attributes.

    Parameters
    ----------
    name : str
    shape : tuple of int
        The batch shape (the batch axis holds the batch size).
    dtype : numpy type, default numpy.float32
    layout : str, default 'NCHW'
        Axis letters; ``'N'`` marks the batch axis.
    """

    def __new__(cls, name, shape, dtype=np.float32, layout='NCHW'):
        ret = super().__new__(cls, name, shape)
        ret.dtype = dtype
        ret.layout = layout
        return ret

    def __getnewargs__(self):
        return (self.name, self.shape, self.dtype, self.layout)

    def __repr__(self):
        return 'DataDesc[%s,%s,%s,%s]' % (self.name, self.shape, self.dtype, self.layout)

    @staticmethod
    def get_batch_axis(layout):
        """Index of ``'N'`` in ``layout`` (0 when ``layout`` is None, -1 when absent)."""
        if layout is None:
            return 0
        return layout.find('N')

    @staticmethod
    def get_list(shapes, types):
        """DataDescs from ``[(name, shape)]`` and an optional ``[(name, dtype)]``."""
        if types is not None:
            type_dict = dict(types)
            return [DataDesc(x[0], x[1], type_dict[x[0]]) for x in shapes]
        return [DataDesc(x[0], x[1]) for x in shapes]


class DataBatch:
    """One batch: lists of data and label arrays.

    Parameters
    ----------
    data : list of NDArray
    label : list of NDArray, optional
    pad : int, optional
        Number of trailing samples that are filler (to drop from predictions).
    index : numpy.ndarray, optional
        Sample indices, where the iterator knows them.
    bucket_key : optional
        Bucketing iterators set it.
    provide_data, provide_label : list of DataDesc, optional
        Per-batch descriptions (bucketing iterators).

    Raises
    ------
    ParamError
        If ``data`` or ``label`` is not a list or tuple.
    """

    def __init__(self, data, label=None, pad=None, index=None, bucket_key=None,
                 provide_data=None, provide_label=None):
        if data is not None and not isinstance(data, (list, tuple)):
            raise ParamError('DataBatch: `data` must be a list of NDArrays. Received: %s'
                             % type(data).__name__)
        if label is not None and not isinstance(label, (list, tuple)):
            raise ParamError('DataBatch: `label` must be a list of NDArrays. Received: %s'
                             % type(label).__name__)
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data
        self.provide_label = provide_label

    def __str__(self):
        data_shapes = [d.shape for d in self.data]
        label_shapes = [lb.shape for lb in self.label] if self.label else None
        return '{}: data shapes: {} label shapes: {}'.format(
            type(self).__name__, data_shapes, label_shapes)


class DataIter:
    """Base class of data iterators.

    Subclasses implement ``reset``, ``iter_next``, ``getdata``, ``getlabel``,
    ``getpad`` (and optionally ``getindex``), or override ``next`` directly,
    and set ``provide_data``/``provide_label``.

    Parameters
    ----------
    batch_size : int, default 0
    """

    def __init__(self, batch_size=0):
        self.batch_size = batch_size

    def __iter__(self):
        return self

    def reset(self):
        """Go back to the start of the data."""

    def next(self):
        """The next :class:`DataBatch`; raises ``StopIteration`` at the end of an epoch."""
        if self.iter_next():
            return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(),
                             index=self.getindex())
        raise StopIteration

    def __next__(self):
        return self.next()

    def iter_next(self):
        """Move to the next batch; False at the end of the epoch."""
        return False

    def getdata(self):
        """The data arrays of the current batch."""
        return None

    def getlabel(self):
        """The label arrays of the current batch."""
        return None

    def getindex(self):
        """The sample indices of the current batch (None when unknown)."""
        return None

    def getpad(self):
        """The number of filler samples at the end of the current batch."""
        return None
