"""Tests of NDArrayIter: MXNet golden batch orders, epoch-coverage properties, naming, errors."""
import json
import os
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba as ff
import ffnumba.ndarray as nd
from ffnumba.base import ParamError, ShapeError
from ffnumba.io import DataDesc, NDArrayIter

GOLDEN = os.path.join(os.path.dirname(__file__), '..', 'data', 'mx_io_golden.json')
with open(GOLDEN) as _f:
    _G = json.load(_f)


def _epoch(it):
    out = []
    for b in it:
        assert b.index is None
        out.append([b.data[0].asnumpy().astype(int).tolist(), b.pad])
        np.testing.assert_array_equal(b.label[0].asnumpy(), b.data[0].asnumpy() * 10)
    return out


@pytest.mark.parametrize('case', _G['ndarray'],
                         ids=lambda c: 'n%d-bs%d-%s' % (c['n'], c['bs'], c['handle']))
def test_batches_match_mxnet(case):
    n, bs = case['n'], case['bs']
    it = NDArrayIter(np.arange(n, dtype='float32'), np.arange(n) * 10., batch_size=bs,
                     last_batch_handle=case['handle'])
    for epoch in case['epochs']:
        assert _epoch(it) == epoch
        it.reset()


def test_documented_example_and_hard_reset():
    data = np.arange(10)
    it = NDArrayIter(data, batch_size=4, last_batch_handle='roll_over')
    assert [b.pad for b in it] == [0, 0]
    it.reset()
    first = next(it)
    assert first.data[0].asnumpy().tolist() == [8, 9, 0, 1] and first.pad == 2
    it.hard_reset()
    assert next(it).data[0].asnumpy().tolist() == [0, 1, 2, 3]
    assert it.provide_label == []
    assert next(it).label == []


def _samples(it):
    seen, pads = [], []
    for b in it:
        vals = b.data[0].asnumpy().astype(int).tolist()
        seen.append(vals[:len(vals) - b.pad] if b.pad else vals)
        pads.append((vals, b.pad))
    return seen, pads


@given(n=st.integers(1, 23), bs=st.integers(1, 9), shuffle=st.booleans())
def test_pad_covers_every_sample_once(n, bs, shuffle):
    it = NDArrayIter(np.arange(n), np.arange(n), batch_size=bs, shuffle=shuffle)
    for _ in range(2):
        seen, pads = _samples(it)
        flat = sum(seen, [])
        assert sorted(flat) == list(range(n))
        assert all(len(v) == bs for v, _ in pads)
        assert sum(p for _, p in pads) == -n % bs
        last, pad = pads[-1]
        if pad:     # the filler wraps to the start of this epoch's order
            assert last[bs - pad:] == [flat[i % n] for i in range(pad)]
        it.reset()


@given(n=st.integers(1, 23), bs=st.integers(1, 9), shuffle=st.booleans())
def test_discard_gives_full_distinct_batches(n, bs, shuffle):
    it = NDArrayIter(np.arange(n), batch_size=bs, shuffle=shuffle, last_batch_handle='discard')
    flat = sum(_samples(it)[0], [])
    assert len(flat) == (n // bs) * bs == len(set(flat))


@given(n=st.integers(2, 23), bs=st.integers(1, 9), shuffle=st.booleans())
def test_roll_over_two_epochs_cover_everything(n, bs, shuffle):
    if bs > n:
        bs = n
    it = NDArrayIter(np.arange(n), batch_size=bs, shuffle=shuffle, last_batch_handle='roll_over')
    counts = Counter()
    epochs = []
    for epoch in range(2):
        epochs.append([b.data[0].asnumpy().astype(int).tolist() for b in it])
        assert all(len(v) == bs for v in epochs[-1])
        for v in epochs[-1]:
            counts.update(v)
        it.reset()
    left = n % bs
    if left:    # epoch 1 opens with exactly the samples epoch 0 left over
        unseen = set(range(n)) - set(sum(epochs[0], []))
        assert set(epochs[1][0][:left]) == unseen and len(unseen) == left
    assert set(counts) == set(range(n))
    # two epochs served every sample, the leftovers of epoch 1 wait in the cache
    assert sum(counts.values()) == (2 * n // bs) * bs


def test_shuffle_repeats_with_seed():
    def order():
        ff.random.seed(7)
        it = NDArrayIter(np.arange(12), np.arange(12), batch_size=4, shuffle=True)
        first = [b.data[0].asnumpy().tolist() for b in it]
        it.reset()
        second = [b.data[0].asnumpy().tolist() for b in it]
        return first, second
    a, b = order(), order()
    assert a == b
    assert a[0] != a[1]          # reshuffled on reset
    it = NDArrayIter(np.arange(12), np.arange(12) * 2, batch_size=4, shuffle=True)
    for batch in it:             # data and labels stay aligned
        np.testing.assert_array_equal(batch.label[0].asnumpy(), batch.data[0].asnumpy() * 2)
    (_, d), = it.data
    (_, lab), = it.label
    np.testing.assert_array_equal(lab.asnumpy(), d.asnumpy() * 2)
    assert sorted(d.asnumpy().tolist()) == list(range(12))
    assert NDArrayIter(np.arange(3)).data[0][1].asnumpy().tolist() == [0, 1, 2]


def test_naming_list_and_dict():
    it = NDArrayIter([np.zeros((5, 2)), np.ones((5, 3))], [np.zeros(5), np.ones(5)], batch_size=2)
    assert [d.name for d in it.provide_data] == ['_0_data', '_1_data']
    assert [d.name for d in it.provide_label] == ['_0_softmax_label', '_1_softmax_label']
    it = NDArrayIter({'b': np.zeros((5, 2)), 'a': np.ones((5, 3))}, batch_size=2,
                     label_name='y', data_name='x')
    assert it.provide_data == [('a', (2, 3)), ('b', (2, 2))]
    batch = next(it)
    assert batch.data[0].asnumpy().tolist() == [[1, 1, 1]] * 2
    it = NDArrayIter(np.zeros((5, 2)), np.zeros(5), batch_size=2, data_name='x', label_name='y')
    assert it.provide_data[0].name == 'x' and it.provide_label[0].name == 'y'
    assert repr(it.provide_data[0]) == "DataDesc[x,(2, 2),<class 'numpy.float32'>,NCHW]"


def test_dtypes_follow_mxnet():
    # numpy input (labels included) becomes float32; an NDArray keeps its dtype
    it = NDArrayIter(np.arange(6, dtype=np.float64).reshape(3, 2), np.arange(3), batch_size=2)
    b = next(it)
    assert b.data[0].dtype is np.float32 and b.label[0].dtype is np.float32
    assert it.provide_data[0].dtype is np.float32 and it.provide_label[0].dtype is np.float32
    it = NDArrayIter(nd.array(np.arange(6).reshape(3, 2), dtype='int32'),
                     nd.array(np.arange(3), dtype='float64'), batch_size=2)
    b = next(it)
    assert b.data[0].dtype is np.int32 and b.label[0].dtype is np.float64
    assert b.data[0].context == ff.cpu(0)
    assert it.provide_data[0].dtype is np.int32
    src = np.zeros((4, 2), dtype=np.float32)
    it = NDArrayIter(src, batch_size=2)
    src[:] = 5                     # the iterator holds its own copy (as MXNet)
    b = next(it)
    assert (b.data[0].asnumpy() == 0).all()
    b.data[0][:] = 7               # and batches are copies too
    it.reset()
    assert (next(it).data[0].asnumpy() == 0).all()


def test_layout_batch_axis():
    data = np.arange(24).reshape(2, 6, 2)         # (T, N, C)
    it = NDArrayIter(data, batch_size=4, layout='TNC')
    assert it.provide_data[0].shape == (2, 4, 2)
    assert it.provide_data[0].layout == 'TNC'
    batches = list(it)
    assert [b.data[0].shape for b in batches] == [(2, 4, 2), (2, 4, 2)]
    np.testing.assert_array_equal(batches[1].data[0].asnumpy()[:, :2], data[:, 4:])
    assert DataDesc.get_batch_axis('TNC') == 1 and DataDesc.get_batch_axis(None) == 0


def test_bad_inputs():
    with pytest.raises(ShapeError, match=r"'data' has 5 but 'softmax_label' has 4"):
        NDArrayIter(np.zeros((5, 2)), np.zeros(4))
    with pytest.raises(ShapeError, match='_0_data'):
        NDArrayIter([np.zeros((5, 2)), np.zeros((3, 2))])
    with pytest.raises(ParamError, match='batch_size'):
        NDArrayIter(np.zeros((5, 2)), batch_size=0)
    with pytest.raises(ParamError, match='last_batch_handle'):
        NDArrayIter(np.zeros((5, 2)), last_batch_handle='wrap')
    with pytest.raises(ParamError, match='data'):
        NDArrayIter(None)
    with pytest.raises(ParamError, match='layout'):
        NDArrayIter(np.zeros((5, 2)), layout='CHW')
    with pytest.raises(ParamError, match='invalid type'):
        NDArrayIter({'a': object()})
    it = NDArrayIter(np.zeros((2, 2)), batch_size=2)
    list(it)
    with pytest.raises(ParamError, match='reset'):
        it.getdata()


def test_bad_names_and_empty_data_are_named():
    X = np.zeros((4, 2))
    with pytest.raises(ParamError, match='names must be str'):
        NDArrayIter({1: X}, batch_size=2)
    with pytest.raises(ParamError, match=r"distinct.*\['data'\]"):
        NDArrayIter({'data': X}, {'data': X[:, 0]}, batch_size=2)
    with pytest.raises(ShapeError, match='no samples'):
        NDArrayIter(np.zeros((0, 3)), batch_size=2)
    with pytest.raises(ShapeError, match='batch axis'):
        NDArrayIter(np.zeros(4), batch_size=2, layout='CN')
