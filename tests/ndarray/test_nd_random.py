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
    with pytest.raises(ParamError, match='numbers'):
        nd.random.uniform(nd.zeros((2,)), 1)
