"""Tests of ResizeIter and PrefetchingIter."""
import numpy as np
import pytest

from ffnumba.base import FFError, ParamError
from ffnumba.io import DataIter, NDArrayIter, PrefetchingIter, ResizeIter


def _firsts(it):
    return [b.data[0].asnumpy()[0] for b in it]


def test_resize_iter_wraps_and_resets():
    inner = NDArrayIter(np.arange(10), batch_size=4)        # 3 batches per epoch
    it = ResizeIter(inner, 5)
    assert it.batch_size == 4 and it.provide_data == inner.provide_data
    assert _firsts(it) == [0, 4, 8, 0, 4]
    it.reset()                                             # resets the inner iterator
    assert _firsts(it) == [0, 4, 8, 0, 4]
    it = ResizeIter(NDArrayIter(np.arange(10), batch_size=4), 2, reset_internal=False)
    assert _firsts(it) == [0, 4]
    it.reset()
    assert _firsts(it) == [8, 0]
    b = ResizeIter(NDArrayIter(np.arange(10), batch_size=4), 3)
    pads = [x.pad for x in b]
    assert pads == [0, 0, 2]
    with pytest.raises(ParamError, match='size'):
        ResizeIter(inner, -1)


def test_prefetching_joins_iterators():
    a = NDArrayIter(np.arange(10), np.arange(10), batch_size=4)
    b = NDArrayIter(np.arange(10) * 2, batch_size=4, data_name='x')
    it = PrefetchingIter([a, b], rename_data=[{'data': 'd0'}, {'x': 'd1'}])
    assert [d.name for d in it.provide_data] == ['d0', 'd1']
    assert it.batch_size == 4
    for epoch in range(2):
        batches = list(it)
        assert len(batches) == 3
        for k, batch in enumerate(batches):
            assert len(batch.data) == 2 and len(batch.label) == 1
            np.testing.assert_array_equal(batch.data[1].asnumpy(), batch.data[0].asnumpy() * 2)
        assert batches[-1].pad == 2
        it.reset()
    it.close()
    single = PrefetchingIter(NDArrayIter(np.arange(4), batch_size=2))
    assert _firsts(single) == [0, 2]
    single.close()


def test_prefetching_mismatch_and_errors():
    it = PrefetchingIter([NDArrayIter(np.arange(8), batch_size=4),
                          NDArrayIter(np.arange(12), batch_size=4)])
    next(it)
    next(it)
    with pytest.raises(FFError, match='different numbers of batches'):
        next(it)
    it.close()

    class Broken(DataIter):
        provide_data = [('data', (2,))]
        provide_label = []

        def next(self):
            raise RuntimeError('disk on fire')
    it = PrefetchingIter(Broken())
    with pytest.raises(FFError, match='disk on fire'):
        next(it)
    it.close()


def test_prefetch_rejects_non_iterators():
    with pytest.raises(ParamError, match='must be DataIters'):
        PrefetchingIter(5)
