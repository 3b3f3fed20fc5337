"""FeedForward (MXNet 1.x legacy API), checkpoints and the kvstore choice."""
import logging
import os
from types import SimpleNamespace

import numpy as np
import pytest

import ffnumba as ff
import ffnumba.ndarray as nd
import ffnumba.symbol as sym
from ffnumba import kvstore as kvs
from ffnumba.base import FFError
from ffnumba.model import (FeedForward, _create_kvstore, load_checkpoint, save_checkpoint,
                           BatchEndParam)


def mlp(hidden=32):
    net = sym.Flatten(sym.Variable('data'))
    net = sym.FullyConnected(net, num_hidden=hidden, name='fc1')
    net = sym.Activation(net, act_type='relu', name='relu1')
    net = sym.FullyConnected(net, num_hidden=10, name='fc2')
    return sym.SoftmaxOutput(net, name='softmax')


@pytest.fixture(scope='module')
def digits():
    X, y, Xt, yt = ff.datasets.load_digits()
    return X[:600], y[:600], Xt[:200], yt[:200]


def make(ctx, **kw):
    kw.setdefault('num_epoch', 1)
    return FeedForward(mlp(), ctx=ctx, optimizer='sgd', learning_rate=0.1, momentum=0.9,
                       initializer=ff.init.Xavier(), numpy_batch_size=50, **kw)


def test_fit_predict_score_save_load_roundtrip(digits, tmp_path, caplog):
    X, y, Xt, yt = digits
    model = make([ff.cpu(0)], num_epoch=4)
    with caplog.at_level(logging.INFO):
        model.fit(X, y, eval_data=(Xt, yt))
    assert 'Epoch[3] Time cost=' in caplog.text
    assert 'Epoch[3] Validation-accuracy=' in caplog.text
    assert 'Train-accuracy' not in caplog.text  # FeedForward does not log it
    prob = model.predict(Xt)
    assert prob.shape == (200, 10) and isinstance(prob, np.ndarray)
    np.testing.assert_allclose(prob.sum(axis=1), 1, rtol=1e-5)
    acc = model.score(Xt, yt)
    assert acc == pytest.approx((prob.argmax(1) == yt).mean())
    assert acc > 0.8
    prefix = str(tmp_path / 'mlp')
    model.save(prefix)
    assert sorted(os.listdir(tmp_path)) == ['mlp-0004.params', 'mlp-symbol.json']
    again = FeedForward.load(prefix, 4)
    assert again.begin_epoch == 4
    np.testing.assert_allclose(again.predict(Xt), prob, rtol=1e-5, atol=1e-7)
    out, data, label = again.predict(Xt, return_data=True)
    np.testing.assert_array_equal(data, Xt)
    np.testing.assert_array_equal(label, 0)  # no labels given: zeros, as MXNet
    assert again.score(ff.io.NDArrayIter(Xt, yt, 50), 'acc') == pytest.approx(acc)
    assert again.predict(Xt, num_batch=1).shape == (128, 10)  # numpy_batch_size=128


def test_two_cpu_contexts_equal_one_after_an_epoch(digits):
    X, y, _, _ = digits
    ff.random.seed(7)
    one = make([ff.cpu(0)]).fit(X, y)
    ff.random.seed(7)
    two = make([ff.cpu(0), ff.cpu(1)]).fit(X, y)
    for k, v in one.arg_params.items():
        np.testing.assert_allclose(v.asnumpy(), two.arg_params[k].asnumpy(), rtol=1e-5,
                                   atol=1e-5, err_msg=k)


def test_batch_callbacks_count_from_one_and_epoch_size(digits, caplog):
    X, y, _, _ = digits
    seen = []
    model = make([ff.cpu(0)], num_epoch=2, epoch_size=15)  # 12 batches per pass
    with caplog.at_level(logging.INFO):
        model.fit(X, y, batch_end_callback=lambda p: seen.append((p.epoch, p.nbatch)),
                  epoch_end_callback=lambda e, s, a, x: seen.append(('end', e)))
    assert seen[0] == (0, 1) and seen[14] == (0, 15) and seen[15] == ('end', 0)
    assert seen[16] == (1, 1) and len(seen) == 32
    assert 'Epoch[0] Resetting Data Iterator' in caplog.text


def test_fit_log_lines_in_mxnet_order(digits, caplog):
    X, y, Xt, yt = digits
    model = make([ff.cpu(0)], num_epoch=2)
    with caplog.at_level(logging.INFO):
        model.fit(ff.io.NDArrayIter(X[:100], y[:100], batch_size=50),
                  eval_data=ff.io.NDArrayIter(Xt[:50], yt[:50], batch_size=50))
    lines = [r.getMessage().split('=')[0] for r in caplog.records]
    assert lines == ['Start training with [cpu(0)]',        # as MXNet 1.9.1 logs them
                     'Epoch[0] Resetting Data Iterator', 'Epoch[0] Time cost',
                     'Epoch[0] Validation-accuracy',
                     'Epoch[1] Resetting Data Iterator', 'Epoch[1] Time cost',
                     'Epoch[1] Validation-accuracy']


def test_create_is_ctor_plus_fit(digits):
    X, y, Xt, yt = digits
    model = FeedForward.create(mlp(), X, y, num_epoch=2, learning_rate=0.1, momentum=0.9,
                               initializer=ff.init.Xavier(), numpy_batch_size=50)
    assert model.score(Xt, yt) > 0.5


def test_bad_inputs_raise_errors_that_name_the_problem(digits):
    X, y, _, _ = digits
    model = make([ff.cpu(0)])
    with pytest.raises(FFError, match=r'X has 600 samples .* y has 599'):
        model.fit(X, y[:599])
    with pytest.raises(FFError, match=r'shape \(n,\) or \(n, 1\)'):
        model.fit(X, np.zeros((600, 2)))
    with pytest.raises(FFError, match=r'looks one-hot encoded.*y.argmax\(axis=1\)'):
        model.fit(X, np.eye(10)[y])
    with pytest.raises(FFError, match='`y` must be given'):
        model.fit(X)
    bad = y.copy()
    bad[3] = 42
    with pytest.raises(FFError, match='(?i)label'):
        model.fit(X, bad)
    with pytest.raises(FFError, match='num_epoch'):
        FeedForward(mlp()).fit(X, y)
    with pytest.raises(FFError, match='predict|fit'):
        FeedForward(mlp()).predict(X)
    if ff.num_gpus() == 0:
        with pytest.raises(FFError, match='CUDA'):
            FeedForward(mlp(), ctx=ff.gpu(0), num_epoch=1)


def test_checkpoint_files(tmp_path):
    net = mlp()
    arg = {'fc1_weight': nd.ones((4, 3)), 'fc1_bias': nd.zeros((4,))}
    aux = {'bn_moving_var': nd.ones((2,))}
    prefix = str(tmp_path / 'ck')
    save_checkpoint(prefix, 12, net, arg, aux)
    assert sorted(os.listdir(tmp_path)) == ['ck-0012.params', 'ck-symbol.json']
    s, a, x = load_checkpoint(prefix, 12)
    assert s.tojson() == net.tojson()
    assert sorted(a) == ['fc1_bias', 'fc1_weight'] and sorted(x) == ['bn_moving_var']
    assert sorted(nd.load(prefix + '-0012.params')) == ['arg:fc1_bias', 'arg:fc1_weight',
                                                        'aux:bn_moving_var']
    with open(prefix + '-0012.params', 'r+b') as f:
        f.truncate(40)
    with pytest.raises(FFError):
        load_checkpoint(prefix, 12)
    with pytest.raises(FFError, match='does not exist'):
        load_checkpoint(str(tmp_path / 'nothing'), 1)
    assert BatchEndParam(1, 2, None, None).nbatch == 2


def test_save_checkpoint_logs_like_mxnet(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    prefix = str(tmp_path / 'ck')
    save_checkpoint(prefix, 3, mlp(), {'fc1_bias': nd.zeros((4,))}, {})
    assert [r.getMessage() for r in caplog.records] == ['Saved checkpoint to "%s-0003.params"'
                                                       % prefix]


def test_create_kvstore_rules(monkeypatch):
    small = {'w': SimpleNamespace(shape=(10, 10))}
    assert _create_kvstore(None, 2, small) == (None, False)
    assert _create_kvstore('local', 1, small) == (None, False)
    kv, upd = _create_kvstore('local', 2, small)
    assert kv.type == 'local' and upd is True
    kv, upd = _create_kvstore('device', 1, small)
    assert kv is None and upd is False
    big = {'w': SimpleNamespace(shape=(4097, 4097))}
    kv, upd = _create_kvstore('local', 2, big)
    assert kv is not None and upd is False
    mine = kvs.create('device')
    assert _create_kvstore(mine, 1, small) == (mine, True)
    monkeypatch.setenv('MXNET_UPDATE_ON_KVSTORE', '0')
    assert _create_kvstore('local', 2, small)[1] is False
    with pytest.raises(FFError):
        _create_kvstore(3, 2, small)


def test_mnist_mlp_two_contexts_equal_one_after_an_epoch():
    """Issue 2's network and settings: [cpu(0), cpu(1)] == cpu(0) within 1e-5 after an epoch."""
    X, y, _, _ = ff.datasets.load_mnist()
    X, y = X[:1000], y[:1000]

    def mlp():
        net = ff.sym.Flatten(ff.sym.Variable('data'))
        net = ff.sym.FullyConnected(net, num_hidden=128, name='fc1')
        net = ff.sym.Activation(net, act_type='relu', name='relu1')
        net = ff.sym.FullyConnected(net, num_hidden=10, name='fc2')
        return ff.sym.SoftmaxOutput(net, name='softmax')

    params = []
    for ctx in ([ff.cpu(0)], [ff.cpu(0), ff.cpu(1)]):
        ff.random.seed(11)
        model = ff.FeedForward(mlp(), ctx=ctx, num_epoch=1, optimizer='sgd', learning_rate=0.1,
                               momentum=0.9, initializer=ff.init.Xavier(), numpy_batch_size=100)
        model.fit(X, y)
        params.append(model.arg_params)
    for k, v in params[0].items():
        np.testing.assert_allclose(params[1][k].asnumpy(), v.asnumpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=k)
        assert not np.allclose(v.asnumpy(), 0)
