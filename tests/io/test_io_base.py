"""Tests of DataDesc, DataBatch and the DataIter protocol."""
import pickle

import numpy as np
import pytest

import ffnumba.ndarray as nd
from ffnumba.base import ParamError
from ffnumba.io import DataBatch, DataDesc, DataIter


def test_datadesc_is_a_namedtuple_with_extras():
    d = DataDesc('data', (10, 4))
    name, shape = d
    assert (name, shape) == ('data', (10, 4))
    assert d.dtype is np.float32 and d.layout == 'NCHW'
    assert repr(d) == "DataDesc[data,(10, 4),<class 'numpy.float32'>,NCHW]"
    assert d == ('data', (10, 4))
    d2 = DataDesc('x', (3,), np.int32, 'NC')
    back = pickle.loads(pickle.dumps(d2))
    assert back == d2 and back.dtype is np.int32 and back.layout == 'NC'
    descs = DataDesc.get_list([('a', (1,)), ('b', (2,))], [('a', np.int64), ('b', np.float64)])
    assert [x.dtype for x in descs] == [np.int64, np.float64]
    assert DataDesc.get_list([('a', (1,))], None)[0].dtype is np.float32
    assert DataDesc.get_batch_axis('NCHW') == 0 and DataDesc.get_batch_axis('TNC') == 1


def test_databatch():
    b = DataBatch([nd.zeros((2, 3))], [nd.zeros((2,))], pad=1)
    assert str(b) == 'DataBatch: data shapes: [(2, 3)] label shapes: [(2,)]'
    assert b.pad == 1 and b.index is None and b.bucket_key is None
    assert str(DataBatch([nd.zeros((1,))])) == 'DataBatch: data shapes: [(1,)] label shapes: None'
    with pytest.raises(ParamError, match='list'):
        DataBatch(nd.zeros((2,)))
    with pytest.raises(ParamError, match='label'):
        DataBatch([nd.zeros((2,))], label=nd.zeros((2,)))


class _Count(DataIter):
    """Three batches through the iter_next/getdata protocol."""

    def __init__(self):
        super().__init__(batch_size=2)
        self.i = 0

    def reset(self):
        self.i = 0

    def iter_next(self):
        self.i += 1
        return self.i <= 3

    def getdata(self):
        return [nd.full((2,), self.i)]

    def getlabel(self):
        return [nd.zeros((2,))]

    def getpad(self):
        return 0


def test_dataiter_protocol():
    it = _Count()
    assert iter(it) is it
    vals = [b.data[0].asnumpy()[0] for b in it]
    assert vals == [1, 2, 3]
    with pytest.raises(StopIteration):
        it.next()
    it.reset()
    assert next(it).index is None
    base = DataIter()
    assert base.batch_size == 0 and list(base) == []
