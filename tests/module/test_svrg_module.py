"""SVRGModule: the variance-reduced gradient rule on a small least-squares problem."""
import numpy as np
import pytest

import ffnumba as ff
import ffnumba.ndarray as nd
import ffnumba.symbol as sym
from ffnumba import io
from ffnumba.base import FFError
from ffnumba.module import Module, SVRGModule

N, D = 200, 8


@pytest.fixture(scope='module')
def problem():
    rng = np.random.RandomState(0)
    X = rng.randn(N, D).astype('float32')
    y = (X @ rng.randn(D)).astype('float32') + rng.randn(N).astype('float32')
    A = np.c_[X, np.ones(N)]
    best = ((A @ np.linalg.lstsq(A, y, rcond=None)[0] - y) ** 2).mean()
    return X, y, best


def net():
    fc = sym.FullyConnected(sym.Variable('data'), num_hidden=1, name='fc')
    return sym.LinearRegressionOutput(fc, sym.Variable('lin_reg_label'), name='lro')


def it(X, y):
    return io.NDArrayIter(X, y, batch_size=10, label_name='lin_reg_label')


def train(cls, X, y, ctx=None, epochs=10, **kw):
    mod = cls(net(), label_names=['lin_reg_label'], context=ctx or [ff.cpu(0)], **kw)
    mod.fit(it(X, y), num_epoch=epochs, eval_metric='mse',
            arg_params={'fc_weight': nd.zeros((1, D)), 'fc_bias': nd.zeros((1,))},
            optimizer_params={'learning_rate': 0.1})
    return mod, dict(mod.score(it(X, y), 'mse'))['mse']


def test_svrg_reaches_lower_loss_than_sgd(problem):
    X, y, best = problem
    _, sgd = train(Module, X, y)
    _, svrg = train(SVRGModule, X, y, update_freq=2)
    assert svrg < sgd
    assert svrg == pytest.approx(best, rel=1e-4)  # SVRG converges; SGD stalls at its noise
    assert sgd > best * 1.005


def test_svrg_two_devices_equal_one(problem):
    X, y, _ = problem
    one, _ = train(SVRGModule, X, y, epochs=3, update_freq=2)
    two, _ = train(SVRGModule, X, y, ctx=[ff.cpu(0), ff.cpu(1)], epochs=3, update_freq=2,
                   work_load_list=[2, 3])
    for k, v in one.get_params()[0].items():
        np.testing.assert_allclose(v.asnumpy(), two.get_params()[0][k].asnumpy(), rtol=1e-5,
                                   atol=1e-5)
    mu = sum(two._param_dict[k]['fc_weight'].asnumpy() for k in range(2))
    np.testing.assert_allclose(mu, one._param_dict[0]['fc_weight'].asnumpy(), rtol=1e-4,
                               atol=1e-5)


def test_full_gradient_is_mean_batch_gradient(problem):
    X, y, _ = problem
    mod, _ = train(SVRGModule, X, y, epochs=1, update_freq=1)
    mod.update_full_grads(it(X, y))
    w = mod.get_params()[0]['fc_weight'].asnumpy().ravel()
    b = mod.get_params()[0]['fc_bias'].asnumpy()
    resid = X @ w + b - y
    np.testing.assert_allclose(mod._param_dict[0]['fc_weight'].asnumpy().ravel(),
                               (resid @ X) / (N / 10), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('freq', [None, 0, -1, 1.5, True])
def test_update_freq_must_be_positive_int(freq):
    with pytest.raises(FFError, match='update_freq'):
        SVRGModule(net(), label_names=['lin_reg_label'], update_freq=freq)
