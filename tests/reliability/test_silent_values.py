"""Inputs that used to give wrong numbers without a word."""
import math

import numpy as np
import pytest

import ffnumba as ff
from ffnumba.base import DTypeError, FFError, ParamError

NONFINITE = [float('nan'), float('inf'), float('-inf')]


@pytest.mark.parametrize('v', NONFINITE)
@pytest.mark.parametrize('make', [
    lambda v: ff.sym.BatchNorm(ff.sym.Variable('x'), eps=v),
    lambda v: ff.sym.LRN(ff.sym.Variable('x'), nsize=3, alpha=v),
    lambda v: ff.sym.LRN(ff.sym.Variable('x'), nsize=3, beta=v),
    lambda v: ff.sym.LRN(ff.sym.Variable('x'), nsize=3, knorm=v),
    lambda v: ff.sym.MakeLoss(ff.sym.Variable('x'), grad_scale=v),
    lambda v: ff.sym.SoftmaxOutput(ff.sym.Variable('x'), grad_scale=v),
    lambda v: ff.sym.softmax(ff.sym.Variable('x'), temperature=v),
    lambda v: ff.sym.LeakyReLU(ff.sym.Variable('x'), slope=v),
])
def test_typed_float_fields_refuse_nonfinite(make, v):
    with pytest.raises(ParamError, match='must be a finite float'):
        make(v)


def test_fields_that_opt_in_accept_inf():
    x = ff.nd.array([-3.0, 0.5, 7.0])
    np.testing.assert_array_equal(ff.nd.clip(x, a_min=-np.inf, a_max=1.0).asnumpy(),
                                  [-3.0, 0.5, 1.0])
    assert np.isinf(ff.nd._plus_scalar(x, scalar=np.inf).asnumpy()).all()
    with pytest.raises(ParamError, match='not nan'):
        ff.nd.clip(x, a_min=float('nan'), a_max=1.0)


def test_field_opt_in_flag():
    from ffnumba.ops.params import Field, Params

    class P(Params):
        a = Field(float, 1.0, 'plain', low=0.0)
        b = Field(float, 1.0, 'inf allowed', allow_nonfinite=True)
        n = Field(int, 1, 'an int', low=1)
    assert P.parse('op', {'b': 'inf'}).b == math.inf
    for v in ('nan', 'inf', float('inf')):
        with pytest.raises(ParamError, match='op: `a` must be a finite float'):
            P.parse('op', {'a': v})
    with pytest.raises(ParamError, match='`n`'):
        P.parse('op', {'n': 2 ** 70})       # past int64: kernels and shapes hold int64


@pytest.mark.parametrize('name, field', [
    ('sgd', 'wd'), ('sgd', 'learning_rate'), ('sgd', 'rescale_grad'), ('adam', 'learning_rate'),
    ('adam', 'wd'), ('rmsprop', 'epsilon'), ('adagrad', 'wd'), ('nag', 'rescale_grad'),
    ('adadelta', 'epsilon'), ('ftml', 'epsilon')])
@pytest.mark.parametrize('v', NONFINITE)
def test_optimizer_hyper_parameters_refuse_nonfinite(name, field, v):
    with pytest.raises(ParamError, match=field):
        ff.optimizer.create(name, **{field: v})


def test_clip_gradient_inf_means_no_clipping():
    opt = ff.optimizer.create('sgd', learning_rate=1.0, clip_gradient=float('inf'))
    w = ff.nd.zeros((2,))
    ff.optimizer.get_updater(opt)(0, ff.nd.array([5.0, -7.0]), w)
    np.testing.assert_allclose(w.asnumpy(), [-5.0, 7.0])


@pytest.mark.parametrize('cls, kwargs, field', [
    ('FactorScheduler', dict(step=2, factor=float('nan')), 'factor'),
    ('FactorScheduler', dict(step=float('nan')), 'step'),
    ('FactorScheduler', dict(step=2, base_lr=float('inf')), 'base_lr'),
    ('FactorScheduler', dict(step=2, warmup_steps=2, warmup_begin_lr=float('nan')),
     'warmup_begin_lr'),
    ('MultiFactorScheduler', dict(step=[1, 2], factor=float('inf')), 'factor'),
    ('PolyScheduler', dict(max_update=10, pwr=-1), 'pwr'),
    ('PolyScheduler', dict(max_update=10, pwr=float('nan')), 'pwr'),
    ('PolyScheduler', dict(max_update=10, final_lr=float('inf')), 'final_lr'),
    ('CosineScheduler', dict(max_update=10, warmup_steps=20), 'warmup_steps'),
])
def test_lr_schedulers_refuse_bad_values(cls, kwargs, field):
    with pytest.raises(ParamError, match=field):
        getattr(ff.lr_scheduler, cls)(**kwargs)


def test_poly_scheduler_still_works():
    s = ff.lr_scheduler.PolyScheduler(max_update=10, base_lr=1.0, pwr=2)
    assert [s(n) for n in (0, 5, 10, 20)] == [1.0, 0.25, 0.0, 0.0]


@pytest.mark.parametrize('data', [[1.0, None], [[1.0, 2.0], [None, 3.0]], [None]])
def test_none_in_object_arrays_refused(data):
    arr = np.array(data, dtype=object)
    with pytest.raises(DTypeError, match='None'):
        ff.nd.array(arr)
    with pytest.raises(DTypeError, match='None'):
        ff.io.NDArrayIter(arr.reshape(len(arr), -1), batch_size=1)


def test_numeric_object_arrays_still_convert():
    np.testing.assert_array_equal(ff.nd.array(np.array([1, 2.5], dtype=object)).asnumpy(),
                                  [1, 2.5])


def _mlp():
    data = ff.sym.Variable('data')
    net = ff.sym.FullyConnected(data, num_hidden=3, name='fc')
    return ff.sym.SoftmaxOutput(net, name='softmax')


def test_fit_stops_on_nan_data_before_updating():
    x = np.ones((8, 5), np.float32)
    x[5, 2] = np.nan
    mod = ff.mod.Module(_mlp())
    with pytest.raises(FFError, match=r'epoch 0 batch 1: .*NaN.*data\[0\] at index \(1, 2\)'):
        mod.fit(ff.io.NDArrayIter(x, np.zeros(8), batch_size=4), num_epoch=1)
    w = mod.get_params()[0]['fc_weight'].asnumpy()
    assert np.isfinite(w).all()


def test_fit_nan_check_opt_out(monkeypatch):
    x = np.ones((8, 5), np.float32)
    x[5, 2] = np.nan
    mod = ff.mod.Module(_mlp())
    mod.nan_check = False
    mod.fit(ff.io.NDArrayIter(x, np.zeros(8), batch_size=4), num_epoch=1)
    assert not np.isfinite(mod.get_params()[0]['fc_weight'].asnumpy()).all()
    monkeypatch.setenv('FFNUMBA_NAN_CHECK', '0')
    mod = ff.mod.Module(_mlp())
    mod.fit(ff.io.NDArrayIter(x, np.zeros(8), batch_size=4), num_epoch=1)


def test_max_pooling_window_in_padding_is_minus_inf():
    x = ff.nd.arange(1, 10).reshape((1, 1, 3, 3))
    y = ff.nd.Pooling(x, kernel=(2, 2), pad=(2, 2), stride=(1, 1), pool_type='max').asnumpy()
    assert y.shape == (1, 1, 6, 6)
    assert (y[0, 0, 0] == -np.inf).all() and y[0, 0, 1, 1] == 1.0 and y[0, 0, 3, 3] == 9.0
    assert not (np.abs(y) == np.finfo(np.float32).max).any()
