"""Creation ops (_zeros, _ones, _full, _arange, _linspace, _eye) and stack."""
import numpy as np
import pytest

import ffnumba as ff
import ffnumba.symbol as sym
from ffnumba.base import ParamError, ShapeError
from ffnumba.testing import OpCase


class _Creation(OpCase):
    shapes = [{}]
    dtypes = ('float32',)
    nondifferentiable = True
    max_batch = None


class TestZeros(_Creation):
    op = '_zeros'
    params = [dict(shape=(2, 3)), dict(shape=(4,))]

    def reference(self, p):
        return [np.zeros(p['shape'])]


class TestOnes(_Creation):
    op = '_ones'
    params = [dict(shape=(2, 3)), dict(shape=(1, 2, 2))]

    def reference(self, p):
        return [np.ones(p['shape'])]


class TestFull(_Creation):
    op = '_full'
    params = [dict(shape=(2, 3), value=2.5), dict(shape=(3,), value=-1)]

    def reference(self, p):
        return [np.full(p['shape'], p['value'])]


class TestArange(_Creation):
    op = '_arange'
    params = [dict(start=2, stop=8, step=2, repeat=2), dict(start=5), dict(start=1, stop=-2, step=-0.5)]

    def reference(self, p):
        lo, hi = (0, p['start']) if p.get('stop') is None else (p['start'], p['stop'])
        return [np.repeat(np.arange(lo, hi, p.get('step', 1.0)), p.get('repeat', 1))]


class TestLinspace(_Creation):
    op = '_linspace'
    params = [dict(start=0, stop=1, num=5), dict(start=-1, stop=3, num=4, endpoint=False)]

    def reference(self, p):
        return [np.linspace(p['start'], p['stop'], p['num'], endpoint=p.get('endpoint', True))]


class TestEye(_Creation):
    op = '_eye'
    params = [dict(N=3), dict(N=3, M=5, k=2), dict(N=4, M=2, k=-1)]

    def reference(self, p):
        return [np.eye(p['N'], p.get('M') or None, p.get('k', 0))]


class TestStack(OpCase):
    op = 'stack'
    params = [dict(axis=0), dict(axis=1), dict(axis=-1)]
    shapes = [dict(arg0=(2, 3), arg1=(2, 3), arg2=(2, 3))]
    batch_inputs = ('arg0', 'arg1', 'arg2')

    def make_symbol(self, p):
        return sym.stack(*[sym.Variable('arg%d' % i) for i in range(3)], name='op', **p)

    def reference(self, p, **xs):
        return [np.stack([xs['arg%d' % i] for i in range(3)], axis=p['axis'])]


def test_mxnet_signatures_and_values():
    assert ff.sym.arange(2, 8, 2, repeat=2).eval()[0].asnumpy().tolist() == [2, 2, 4, 4, 6, 6]
    assert ff.sym.arange(3).eval()[0].asnumpy().tolist() == [0, 1, 2]
    assert ff.sym.full((2,), 7, dtype='int32').eval()[0].asnumpy().dtype == np.int32
    np.testing.assert_allclose(ff.sym.linspace(0, 1, 3).eval()[0].asnumpy(), [0, .5, 1])
    assert ff.sym.eye(2, 3, 1).eval()[0].asnumpy().tolist() == [[0, 1, 0], [0, 0, 1]]


def test_zeros_unknown_dims_come_from_the_consumer():
    z = ff.sym.zeros(shape=(0, 3), __layout__='NC', name='state')
    assert z.list_attr()['__layout__'] == 'NC'
    out = ff.sym.FullyConnected(ff.sym.var('data'), num_hidden=3, name='fc') + z
    _, outs, _ = out.infer_shape(data=(4, 5))
    assert outs == [(4, 3)]
    exe = out.simple_bind(ff.cpu(), data=(4, 5))
    exe.forward()
    assert exe.outputs[0].shape == (4, 3)
    bad = ff.sym.FullyConnected(ff.sym.var('data'), num_hidden=4) + z
    exe = bad.simple_bind(ff.cpu(), data=(4, 5))
    with pytest.raises(ShapeError, match='state'):
        exe.forward()


def test_json_round_trip_uses_mxnet_names():
    z = ff.sym.zeros(shape=(0, 3), name='s0')
    js = z.tojson()
    assert '"op": "_zeros"' in js
    back = ff.sym.load_json(js)
    assert back.list_attr()['shape'] == '(0, 3)'


def test_bad_params():
    with pytest.raises(ParamError, match='step'):
        ff.sym.arange(0, 3, 0)
    with pytest.raises(ShapeError, match='empty'):
        ff.sym.arange(3, 1).infer_shape()
    with pytest.raises(ShapeError, match='same shape'):
        ff.sym.stack(ff.sym.var('a'), ff.sym.var('b')).infer_shape(a=(2, 3), b=(3, 2))
