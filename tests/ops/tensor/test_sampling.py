"""Sampling ops (_random_uniform, _random_normal, _sample_multinomial, _shuffle) and
ff.sym.random: degenerate draws as OpCase rows, statistics, seeded repeats, errors."""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba.base import ParamError, ShapeError
from ffnumba.testing import OpCase


class _Draw(OpCase):
    shapes = [{}]
    dtypes = ('float32',)
    nondifferentiable = True
    max_batch = None


class TestUniformDegenerate(_Draw):
    """low == high: every draw is low (the only deterministic uniform)."""
    op = '_random_uniform'
    params = [dict(low=2.5, high=2.5, shape=(2, 3)), dict(low=-1, high=-1, shape=(4,))]

    def reference(self, p):
        return [np.full(p['shape'], p['low'])]


class TestNormalDegenerate(_Draw):
    """scale == 0: every draw is loc."""
    op = '_random_normal'
    params = [dict(loc=1.5, scale=0.0, shape=(3, 2))]

    def reference(self, p):
        return [np.full(p['shape'], p['loc'])]


class TestMultinomialOneHot(OpCase):
    """One-hot rows: every draw is the hot category."""
    op = '_sample_multinomial'
    params = [dict(shape=(4,), dtype='float32'), dict(shape=(), dtype='float32')]
    shapes = [dict(data=(3, 5)), dict(data=(2, 2, 3))]
    dtypes = ('float32',)
    nondifferentiable = True
    max_batch = None

    def inputs(self, rng, p, shapes):
        d = shapes['data']
        hot = rng.integers(0, d[-1], d[:-1])
        return {'data': (np.arange(d[-1]) == hot[..., None]).astype(np.float64)}

    def reference(self, p, data):
        idx = np.argmax(data, axis=-1).astype(np.float64)
        return [np.broadcast_to(idx.reshape(idx.shape + (1,) * len(p['shape'])),
                                idx.shape + tuple(p['shape']))]


class TestShuffleSingleRow(OpCase):
    """A first axis of length 1 has one permutation: the identity."""
    op = '_shuffle'
    shapes = [dict(data=(1, 4)), dict(data=(1,)), dict(data=(1, 2, 3))]
    nondifferentiable = True
    max_batch = None

    def reference(self, p, data):
        return [data]


def test_uniform_normal_statistics_and_dtypes():
    ff.random.seed(0)
    u = ff.sym.random.uniform(-1.5, 3.0, shape=(200, 100), dtype='float64').eval()[0].asnumpy()
    assert u.dtype == np.float64 and u.min() >= -1.5 and u.max() < 3.0
    assert abs(u.mean() - 0.75) < 0.05
    n = ff.sym.random.normal(2.0, 0.5, shape=(200, 100), dtype='float16').eval()[0].asnumpy()
    assert n.dtype == np.float16
    assert abs(n.mean() - 2.0) < 0.02 and abs(n.std() - 0.5) < 0.02


def test_seed_before_forward_repeats_for_a_bound_executor():
    x = ff.sym.Variable('x')
    y = ff.sym.random.uniform(shape=(5, 4)) + x
    exe = y.bind(ff.cpu(), {'x': ff.nd.zeros((5, 4))}, {'x': ff.nd.zeros((5, 4))})
    ff.random.seed(7)
    exe.forward(is_train=True)
    exe.backward(exe.outputs[0])
    a = exe.outputs[0].asnumpy()
    exe.forward()
    assert not np.array_equal(a, exe.outputs[0].asnumpy())
    ff.random.seed(7)
    exe.forward()
    np.testing.assert_array_equal(a, exe.outputs[0].asnumpy())
    np.testing.assert_array_equal(exe.grad_dict['x'].asnumpy(), a)   # d(u + x)/dx = 1


def test_multinomial_frequencies_and_shape():
    probs = np.array([[0.1, 0.6, 0.3], [0.5, 0.0, 0.5]])
    ff.random.seed(3)
    s = ff.sym.random.multinomial(ff.sym.Variable('p'), shape=(20000,))
    out = s.eval(p=ff.nd.array(probs))[0].asnumpy()
    assert out.shape == (2, 20000) and out.dtype == np.int32
    for row, want in zip(out, probs):
        np.testing.assert_allclose(np.bincount(row, minlength=3) / row.size, want, atol=0.015)


def test_shuffle_permutes_rows_only():
    data = ff.nd.arange(0, 18).reshape((6, 3))
    c = ff.sym.random.shuffle(data=ff.sym.random.shuffle(ff.sym.Variable('a')), name='c')
    assert c.name == 'c'
    ff.random.seed(5)
    out = c.eval(a=data)[0].asnumpy()
    assert sorted(map(tuple, out)) == sorted(map(tuple, data.asnumpy()))
    assert not np.array_equal(out, data.asnumpy())


def test_bad_params_raise():
    with pytest.raises(ParamError, match='low'):
        ff.sym.random.uniform(2, 1, shape=(2,)).eval()
    with pytest.raises(ParamError, match='scale'):
        ff.sym.random.normal(0, -1, shape=(2,)).eval()
    with pytest.raises(ParamError, match='dtype'):
        ff.sym.random.uniform(shape=(2,), dtype='int32').eval()
    with pytest.raises(ParamError, match='get_prob'):
        ff.sym.random.multinomial(ff.sym.Variable('p'), get_prob=True)
    with pytest.raises(ParamError, match='Symbol'):
        ff.sym.random.uniform(ff.sym.Variable('lo'), 1.0)
    with pytest.raises(ShapeError, match='at least 1'):
        ff.sym.random.multinomial(ff.sym.Variable('p')).infer_shape(p=())
    with pytest.raises(ParamError, match='probabilities'):
        ff.sym.random.multinomial(ff.sym.Variable('p')).eval(p=ff.nd.array([0.5, -0.5]))


def test_mxnet_aliases_and_positional_params():
    assert ff.sym.uniform(2.0, 2.0, shape=(2,)).eval()[0].asnumpy().tolist() == [2.0, 2.0]
    assert ff.sym.random_normal(1.0, 0.0, (3,)).eval()[0].asnumpy().tolist() == [1.0] * 3
    s = ff.sym.shuffle(ff.sym.Variable('a'))
    assert s.eval(a=ff.nd.array([[1.0, 2.0]]))[0].asnumpy().tolist() == [[1.0, 2.0]]
    out = ff.nd.shuffle(ff.nd.arange(0, 6))
    assert sorted(out.asnumpy().tolist()) == list(range(6))
    p = ff.sym.sample_multinomial(ff.sym.Variable('p'), shape=(3,))
    assert p.eval(p=ff.nd.array([[0.0, 1.0]]))[0].asnumpy().tolist() == [[1, 1, 1]]
