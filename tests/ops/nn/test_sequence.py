"""SequenceMask, SequenceLast, SequenceReverse: OpCase tables (lengths drawn per case)."""
import numpy as np
import pytest
from hypothesis import strategies as st

import ffnumba as ff
from ffnumba.base import FFError
from ffnumba.testing import OpCase


def _tn(p, data):
    """data as (T, N, ...) whatever the axis."""
    return data if p.get('axis', 0) == 0 else np.swapaxes(data, 0, 1)


def _lens(p, data, lens):
    T, N = _tn(p, data).shape[:2]
    return lens.astype(int) if p.get('use_sequence_length') else np.full(N, T)


def ref_mask(p, data, sequence_length=None):
    x = _tn(p, data).copy()
    for n, L in enumerate(_lens(p, data, sequence_length)):
        x[L:, n] = p.get('value', 0.0)
    return [_tn(p, x)]


def ref_last(p, data, sequence_length=None):
    x = _tn(p, data)
    return [np.stack([x[L - 1, n] for n, L in enumerate(_lens(p, data, sequence_length))])]


def ref_reverse(p, data, sequence_length=None):
    x = _tn(p, data).copy()
    for n, L in enumerate(_lens(p, data, sequence_length)):
        x[:L, n] = x[:L, n][::-1].copy()
    return [_tn(p, x)]


PARAMS = [dict(), dict(use_sequence_length=True), dict(use_sequence_length=True, axis=1),
          dict(axis=1)]
SHAPES = [dict(data=(4, 3, 2)), dict(data=(3, 2)), dict(data=(5, 2, 2, 2))]


class _Seq(OpCase):
    params = PARAMS
    shapes = SHAPES
    max_batch = None
    grad_nodes = ['data']

    def inputs(self, rng, p, shapes):
        d = shapes['data']
        out = {'data': rng.uniform(-1, 1, d)}
        if 'sequence_length' in shapes:
            T = d[p.get('axis', 0)]
            out['sequence_length'] = rng.integers(1, T + 1, shapes['sequence_length']).astype(float)
        return out

    def cases(self):
        return st.tuples(st.sampled_from(self.params),
                         st.lists(st.integers(1, 4), min_size=2, max_size=4)).map(
            lambda t: (t[0], dict(data=tuple(t[1]))))


class TestSequenceMask(_Seq):
    op = 'SequenceMask'
    params = PARAMS + [dict(use_sequence_length=True, value=-2.5)]

    def reference(self, p, **kw):
        return ref_mask(p, **kw)


class TestSequenceLast(_Seq):
    op = 'SequenceLast'

    def reference(self, p, **kw):
        return ref_last(p, **kw)


class TestSequenceReverse(_Seq):
    op = 'SequenceReverse'

    def reference(self, p, **kw):
        return ref_reverse(p, **kw)


def test_mxnet_doc_example():
    x = np.arange(1, 19, dtype=np.float32).reshape(3, 2, 3)
    lens = ff.nd.array([1, 3])
    d, sl = ff.sym.var('data'), ff.sym.var('sl')
    out = ff.sym.SequenceMask(d, sl, use_sequence_length=True, value=1)
    exe = out.bind(ff.cpu(), {'data': ff.nd.array(x), 'sl': lens})
    exe.forward()
    got = exe.outputs[0].asnumpy()
    assert got[1, 0].tolist() == [1, 1, 1] and got[1, 1].tolist() == [10, 11, 12]
    last = ff.sym.SequenceLast(d, sl, use_sequence_length=True).bind(
        ff.cpu(), {'data': ff.nd.array(x), 'sl': lens})
    last.forward()
    assert last.outputs[0].asnumpy().tolist() == [[1, 2, 3], [16, 17, 18]]


def test_lengths_out_of_range_raise():
    d, sl = ff.sym.var('data'), ff.sym.var('sl')
    out = ff.sym.SequenceLast(d, sl, use_sequence_length=True, name='last')
    exe = out.bind(ff.cpu(), {'data': ff.nd.zeros((3, 2, 1)), 'sl': ff.nd.array([0, 4])})
    with pytest.raises(FFError, match=r'last.*sequence_length.*\[1, 3\]'):
        exe.forward()


def test_arguments_follow_use_sequence_length():
    d = ff.sym.var('data')
    assert ff.sym.SequenceMask(d).list_arguments() == ['data']
    assert ff.sym.SequenceMask(d, use_sequence_length=True, name='m').list_arguments() == \
        ['data', 'm_sequence_length']
