"""``ff.io``: data iterators (MXNet ``mx.io``).

``DataDesc``/``DataBatch``/``DataIter`` describe and deliver batches;
``NDArrayIter`` batches in-memory arrays, ``CSVIter`` CSV files,
``shard`` splits arrays between distributed workers, ``ResizeIter`` fixes the number of batches per epoch and ``PrefetchingIter``
reads ahead in threads.
"""
from .base import DataDesc, DataBatch, DataIter
from .ndarray_iter import NDArrayIter
from .csv_iter import CSVIter
from .prefetch import ResizeIter, PrefetchingIter
from .shard import shard

__all__ = ['DataDesc', 'DataBatch', 'DataIter', 'NDArrayIter', 'CSVIter', 'ResizeIter',
           'PrefetchingIter', 'shard']
