"""Tests of CSVIter against MXNet 1.9.1 batch orders, shapes, dtypes and errors."""
import json
import os

import numpy as np
import pytest

from ffnumba.base import FFError, ParamError, ShapeError
from ffnumba.io import CSVIter

GOLDEN = os.path.join(os.path.dirname(__file__), '..', 'data', 'mx_io_golden.json')
with open(GOLDEN) as _f:
    _G = json.load(_f)


@pytest.mark.parametrize('case', _G['csv'],
                         ids=lambda c: 'n%d-bs%d-rb%s' % (c['n'], c['bs'], c['round_batch']))
def test_batches_match_mxnet(case, tmp_path):
    n, bs, rb = case['n'], case['bs'], case['round_batch']
    path = tmp_path / 'd.csv'
    np.savetxt(path, np.arange(n * 2).reshape(n, 2), delimiter=',', fmt='%d')
    it = CSVIter(data_csv=str(path), data_shape=(2,), batch_size=bs, round_batch=rb)
    for epoch in case['epochs']:
        got = []
        for b in it:
            rows = (b.data[0].asnumpy()[:, 0] / 2).astype(int).tolist()
            keep = bs if rb else bs - b.pad
            got.append([rows[:keep], b.pad])
            assert b.index[:keep].tolist() == rows[:keep]
        assert got == epoch
        it.reset()


def test_labels_shapes_and_dtype(tmp_path):
    d, lab = tmp_path / 'd.csv', tmp_path / 'l.csv'
    np.savetxt(d, np.arange(24).reshape(4, 6), delimiter=',', fmt='%d')
    np.savetxt(lab, np.arange(4) * 10, delimiter=',', fmt='%d')
    it = CSVIter(str(d), data_shape=(2, 3), label_csv=str(lab), batch_size=2)
    assert it.provide_data == [('data', (2, 2, 3))]
    assert it.provide_label == [('softmax_label', (2,))]
    b = next(it)
    assert b.data[0].dtype is np.float32
    np.testing.assert_array_equal(b.data[0].asnumpy(), np.arange(12).reshape(2, 2, 3))
    np.testing.assert_array_equal(b.label[0].asnumpy(), [0, 10])
    it = CSVIter(str(d), data_shape=(6,), batch_size=3, dtype='int32')
    b = next(it)
    assert b.data[0].dtype is np.int32 and b.label[0].asnumpy().tolist() == [0, 0, 0]
    np.savetxt(lab, np.arange(8).reshape(4, 2), delimiter=',', fmt='%d')
    it = CSVIter(str(d), data_shape=(6,), label_csv=str(lab), label_shape=(2,), batch_size=2)
    assert it.provide_label[0].shape == (2, 2)


def test_errors(tmp_path):
    d = tmp_path / 'd.csv'
    np.savetxt(d, np.arange(12).reshape(4, 3), delimiter=',', fmt='%d')
    with pytest.raises(ShapeError, match='hold 3 values but data_shape=\\(4,\\) needs 4'):
        CSVIter(str(d), data_shape=(4,), batch_size=2)
    with pytest.raises(FFError, match='does not exist'):
        CSVIter(str(tmp_path / 'missing.csv'), data_shape=(3,), batch_size=2)
    with pytest.raises(ParamError, match='batch_size'):
        CSVIter(str(d), data_shape=(3,), batch_size=0)
    lab = tmp_path / 'l.csv'
    np.savetxt(lab, np.arange(3), delimiter=',', fmt='%d')
    with pytest.raises(ShapeError, match='4 rows'):
        CSVIter(str(d), data_shape=(3,), label_csv=str(lab), batch_size=2)
    with pytest.raises(ParamError, match='data_shape'):
        CSVIter(str(d), data_shape=(0,), batch_size=2)
