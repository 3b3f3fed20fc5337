"""_histogram (nd.histogram / sym.histogram): OpCase rows, numpy agreement, errors."""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba.base import ParamError, ShapeError
from ffnumba.testing import OpCase, bind_numpy


class _Hist(OpCase):
    op = '_histogram'
    nondifferentiable = True
    max_batch = None

    def test_forward(self):
        # counts are int64 whatever the data dtype, so OpCase's same-dtype check does not fit
        for p, shapes in self._all_cases():
            s, loc, aux, _ = self._setup(p, shapes)
            want = self.reference(p, **loc)
            for dt in self.dtypes:
                exe = bind_numpy(s, loc, aux, grad_req='null', dtype=dt)
                exe.forward(is_train=False)
                counts, edges = (o.asnumpy() for o in exe.outputs)
                assert counts.dtype == np.int64 and edges.dtype == np.dtype(dt)
                np.testing.assert_array_equal(counts, want[0])
                np.testing.assert_allclose(edges, want[1], rtol=1e-6)


class TestHistogramCount(_Hist):
    params = [dict(bin_cnt=4, range=(-1.0, 1.0)), dict(bin_cnt=3)]
    shapes = [dict(data=(3, 5)), dict(data=(7,))]

    def inputs(self, rng, p, shapes):     # away from the edges: float32 and float64 agree
        return {'data': np.round(rng.uniform(-1.3, 1.3, shapes['data']), 2) + 0.003}

    def reference(self, p, data):
        c, e = np.histogram(data, p['bin_cnt'], range=p.get('range'))
        return [c, e]


class TestHistogramEdges(_Hist):
    shapes = [dict(data=(4, 3), bins=(4,))]

    def inputs(self, rng, p, shapes):
        return {'data': np.round(rng.uniform(-2, 3, shapes['data']), 2) + 0.003,
                'bins': np.array([-1.0, 0.5, 2.0, 50.0])}

    def reference(self, p, data, bins):
        c, e = np.histogram(data, bins)
        return [c, e]


def test_mxnet_forms_match_numpy():
    x = np.random.default_rng(0).uniform(-3, 3, (4, 5, 3))
    edges = np.array([-1.0, 0.5, 2.0, 4.5, 50.0])
    c, e = ff.nd.histogram(ff.nd.array(x, dtype='float64'), bins=6, range=(-2.5, 2.5))
    nc, ne = np.histogram(x, 6, range=(-2.5, 2.5))
    np.testing.assert_array_equal(c.asnumpy(), nc)
    np.testing.assert_allclose(e.asnumpy(), ne)
    c, _ = ff.nd.histogram(ff.nd.array(x, dtype='float64'), bins=ff.nd.array(edges))
    np.testing.assert_array_equal(c.asnumpy(), np.histogram(x, edges)[0])
    c, _ = ff.nd.histogram(ff.nd.array(x, dtype='float64'))
    np.testing.assert_array_equal(c.asnumpy(), np.histogram(x)[0])
    s = ff.sym.histogram(a=ff.sym.Variable('data'), bins=ff.sym.Variable('bins'))
    assert [n.split('_', 1)[1] for n in s.list_outputs()] == ['counts', 'bin_edges']
    exe = s.bind(ff.cpu(), args={'data': ff.nd.array(x), 'bins': ff.nd.array(edges)})
    exe.forward()
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), np.histogram(x, edges)[0])


def test_last_edge_counts_and_outside_values_do_not():
    c, _ = ff.nd.histogram(ff.nd.array([0.0, 1.0, 2.0, -5, 7, np.nan]), bins=2, range=(0, 2))
    np.testing.assert_array_equal(c.asnumpy(), [1, 2])


def test_errors():
    with pytest.raises(ParamError, match='range'):
        ff.nd.histogram(ff.nd.ones(3), bins=2, range=(2, 1))
    with pytest.raises(ParamError, match='increase'):
        ff.nd.histogram(ff.nd.ones(3), bins=ff.nd.array([1.0, 0.0, 2.0]))
    with pytest.raises(ShapeError, match='2 edges'):
        ff.nd.histogram(ff.nd.ones(3), bins=ff.nd.array([1.0]))
