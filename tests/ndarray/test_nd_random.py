"""``ff.nd.random`` (MXNet ``mx.nd.random.uniform/normal``, ``mx.nd.random_uniform``)."""
import numpy as np
import pytest

import ffnumba as ff
import ffnumba.ndarray as nd
from ffnumba.base import ParamError


def test_seeded_draws_repeat_and_have_mxnet_defaults():
    ff.random.seed(3)
    a = nd.random.uniform(-1, 2, shape=(50, 4))
    ff.random.seed(3)
    b = nd.random_uniform(low=-1, high=2, shape=(50, 4))
    np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    assert a.dtype is np.float32 and a.shape == (50, 4)
    assert -1 <= a.asnumpy().min() and a.asnumpy().max() < 2
    assert nd.random.uniform().shape == (1,)               # MXNet: shape (1,)
    assert nd.random.normal(0, 1, shape=4).shape == (4,)
    n = nd.random_normal(loc=5, scale=0.01, shape=(100,)).asnumpy()
    assert abs(n.mean() - 5) < 0.01


def test_out_sets_shape_and_dtype():
    o = nd.zeros((3, 2), dtype='float64')
    assert nd.random.normal(out=o) is o
    assert o.dtype is np.float64 and (o.asnumpy() != 0).all()


def test_bad_parameters():
    with pytest.raises(ParamError, match='scale'):
        nd.random.normal(0, -1, shape=(2,))
    with pytest.raises(ParamError, match='dtype'):
        nd.random.uniform(shape=(2,), dtype='int32')
    with pytest.raises(ParamError, match='high'):
        nd.random.randint(3, 3, shape=(2,))
    with pytest.raises(ParamError, match='alpha'):
        nd.random.gamma(-1, 1, shape=(2,))
    with pytest.raises(ParamError, match='p'):
        nd.random.negative_binomial(2, 1.5)
    with pytest.raises(ParamError, match='positive sum'):
        nd.random.multinomial(nd.zeros((2, 3)))
    with pytest.raises(ValueError):
        ff.random.seed(1.5)


def test_every_sampler_repeats_under_a_seed_including_negative_seeds():
    probs = nd.array([[0.2, 0.8], [1.0, 0.0]])
    draws = [
        lambda: ff.random.uniform(-1, 1, shape=(3,)),
        lambda: ff.random.normal(2, 3, shape=(3,)),
        lambda: nd.random.randn(2, 2),
        lambda: ff.random.randint(-5, 5, shape=(4,)),
        lambda: ff.random.gamma(2.0, 0.5, shape=(3,)),
        lambda: ff.random.exponential(2.0, shape=(3,)),
        lambda: ff.random.poisson(4.0, shape=(3,)),
        lambda: ff.random.negative_binomial(3, 0.4, shape=(3,)),
        lambda: ff.random.generalized_negative_binomial(2.0, 0.3, shape=(3,)),
        lambda: ff.random.multinomial(probs, shape=4),
        lambda: ff.random.shuffle(nd.arange(6)),
    ]
    for seed in (7, -7):
        ff.random.seed(seed)
        first = [d().asnumpy() for d in draws]
        ff.random.seed(seed)
        second = [d().asnumpy() for d in draws]
        for a, b in zip(first, second):
            np.testing.assert_array_equal(a, b)
    ff.random.seed(-7)
    neg = ff.random.uniform(shape=(5,)).asnumpy()
    ff.random.seed(7)
    assert not np.array_equal(neg, ff.random.uniform(shape=(5,)).asnumpy())


def test_distribution_moments_and_shapes():
    ff.random.seed(0)
    n = 20000
    assert ff.random.randint(0, 4, shape=(n,)).dtype is np.int32
    assert abs(ff.random.gamma(2.0, 3.0, shape=(n,)).asnumpy().mean() - 6.0) < 0.2
    assert abs(ff.random.exponential(2.0, shape=(n,)).asnumpy().mean() - 2.0) < 0.1
    assert abs(ff.random.poisson(4.0, shape=(n,)).asnumpy().mean() - 4.0) < 0.1
    nb = ff.random.negative_binomial(3, 0.4, shape=(n,)).asnumpy()
    assert abs(nb.mean() - 3 * 0.6 / 0.4) < 0.15          # k (1 - p) / p
    g = ff.random.generalized_negative_binomial(2.0, 0.5, shape=(n,)).asnumpy()
    assert abs(g.mean() - 2.0) < 0.1 and abs(g.var() - (2.0 + 0.5 * 4.0)) < 0.4
    # NDArray parameters: one set of draws per element, shape param.shape + shape
    s = ff.random.normal(nd.array([0.0, 100.0]), nd.array([1.0, 1.0]), shape=(n,))
    assert s.shape == (2, n)
    np.testing.assert_allclose(s.asnumpy().mean(1), [0, 100], atol=0.1)
    m, logp = ff.random.multinomial(nd.array([[0.25, 0.75]]), shape=n, get_prob=True)
    assert m.shape == (1, n) and m.dtype is np.int32
    assert abs(m.asnumpy().mean() - 0.75) < 0.02
    np.testing.assert_allclose(np.exp(logp.asnumpy()), np.where(m.asnumpy() == 1, .75, .25),
                               rtol=1e-6)
    sh = ff.random.shuffle(nd.arange(10)).asnumpy()
    assert sorted(sh.tolist()) == list(range(10))


def test_mxnet_operator_names():
    ff.random.seed(2)
    s = nd.sample_normal(mu=nd.array([10.0]), sigma=nd.array([0.5]))
    assert s.shape == (1,)
    assert nd.sample_normal(mu=nd.array([10.0]), sigma=nd.array([0.5]), shape=1).shape == (1, 1)
    assert nd.uniform(0, 1, shape=(2,)).shape == (2,) and nd.normal(shape=3).shape == (3,)
    assert abs(nd.random_exponential(lam=4.0, shape=(20000,)).asnumpy().mean() - 0.25) < 0.01
    assert nd.random_randint(0, 3, shape=(5,)).dtype is np.int32
    with pytest.raises(ParamError, match='unknown parameter'):
        nd.random.normal(mu=1.0)
    with pytest.raises(ParamError, match='unknown parameter'):
        nd.sample_normal(mu=nd.array([1.0]), sd=nd.array([1.0]))
