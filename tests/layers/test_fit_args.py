"""fit/evaluate arguments with Keras' meanings: weights, splits, epochs, several outputs."""
import numpy as np
import pytest

from ffnumba import layers as L
from ffnumba.base import ParamError, ShapeError


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _linear_net(W, b, lr=0.1):
    net = L.Sequential([L.Input(shape=(4,)), L.Dense(3)])
    net.compile(optimizer='sgd', loss='sparse_categorical_crossentropy', learning_rate=lr)
    net.set_weights([W, b])
    return net


def _numpy_sgd(X, y, w, W, b, bs, lr):
    """Keras' weighted loss sum(w_i l_i) / m per batch of m samples; SGD steps in float64."""
    W, b = W.astype(np.float64), b.astype(np.float64)
    losses = []
    for start in range(0, len(X), bs):
        xb, yb, wb = X[start:start + bs], y[start:start + bs], w[start:start + bs]
        p = _softmax(xb @ W.T + b)
        m = len(xb)
        losses.append(-(wb * np.log(p[np.arange(m), yb])).sum())
        g = (p - np.eye(3)[yb]) * wb[:, None] / m
        W, b = W - lr * g.T @ xb, b - lr * g.sum(axis=0)
    return W, b, sum(losses) / len(X)


@pytest.mark.parametrize('n, bs', [(8, 8), (10, 8)])
def test_sample_weight_scales_each_samples_loss_as_keras(n, bs):
    rng = np.random.RandomState(1)
    X = rng.normal(size=(n, 4)).astype(np.float32)
    y = rng.randint(0, 3, n)
    w = rng.uniform(0, 2, n).astype(np.float32)
    W0 = rng.normal(size=(3, 4)).astype(np.float32)
    b0 = rng.normal(size=3).astype(np.float32)
    net = _linear_net(W0, b0)
    h = net.fit(X, y, batch_size=bs, epochs=1, shuffle=False, sample_weight=w, verbose=0)
    W, b, loss = _numpy_sgd(X, y, w, W0, b0, bs, 0.1)
    got = net.get_weights()
    np.testing.assert_allclose(got[0], W, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], b, rtol=1e-5, atol=1e-6)
    assert h.history['loss'][0] == pytest.approx(loss, rel=1e-5)
    # evaluate weighs the same way: sum(w_i l_i) / n over all samples.
    p = _softmax(X.astype(np.float64) @ got[0].T.astype(np.float64) + got[1])
    li = -np.log(p[np.arange(n), y])
    assert net.evaluate(X, y, sample_weight=w, verbose=0) == pytest.approx(
        (w * li).sum() / n, rel=1e-5)
    assert net.evaluate(X, y, verbose=0) == pytest.approx(li.mean(), rel=1e-5)


def test_class_weight_equals_sample_weight_of_the_class():
    rng = np.random.RandomState(2)
    X = rng.normal(size=(12, 4)).astype(np.float32)
    y = rng.randint(0, 3, 12)
    W0, b0 = rng.normal(size=(3, 4)).astype(np.float32), np.zeros(3, np.float32)
    cw = {0: 1.0, 1: 3.0, 2: 0.25}
    a, b = _linear_net(W0, b0), _linear_net(W0, b0)
    ha = a.fit(X, y, batch_size=4, shuffle=False, class_weight=cw, verbose=0)
    hb = b.fit(X, y, batch_size=4, shuffle=False,
               sample_weight=np.array([cw[c] for c in y]), verbose=0)
    assert ha.history['loss'] == hb.history['loss']
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)
    with pytest.raises(ParamError, match='at the same time'):
        a.fit(X, y, class_weight=cw, sample_weight=np.ones(12), verbose=0)
    with pytest.raises(ParamError, match='lacks classes'):
        a.fit(X, y, class_weight={0: 1.0}, verbose=0)


def test_validation_split_takes_the_last_fraction_before_shuffling():
    rng = np.random.RandomState(3)
    X = rng.normal(size=(40, 4)).astype(np.float32)
    y = rng.randint(0, 3, 40)
    net = _linear_net(rng.normal(size=(3, 4)).astype(np.float32), np.zeros(3, np.float32))
    h = net.fit(X, y, batch_size=8, epochs=2, validation_split=0.25, verbose=0)
    assert net.evaluate(X[30:], y[30:], verbose=0) == pytest.approx(h.history['val_loss'][-1],
                                                                   rel=1e-6)
    with pytest.raises(ParamError, match='not sufficient'):
        net.fit(X[:1], y[:1], validation_split=0.1, verbose=0)


def test_epochs_initial_epoch_steps_and_validation_freq():
    rng = np.random.RandomState(4)
    X = rng.normal(size=(40, 4)).astype(np.float32)
    y = rng.randint(0, 3, 40)
    net = _linear_net(rng.normal(size=(3, 4)).astype(np.float32), np.zeros(3, np.float32))
    steps = []
    h = net.fit(X, y, batch_size=8, epochs=5, initial_epoch=2, verbose=0,
                validation_data=(X, y), validation_freq=[3, 5], steps_per_epoch=3,
                callbacks=[L.callbacks.LambdaCallback(
                    on_train_batch_end=lambda b, logs: steps.append(b))])
    assert h.epoch == [2, 3, 4]                   # epochs is the epoch to stop before
    assert steps == [0, 1, 2] * 3
    assert len(h.history['loss']) == 3 and len(h.history['val_loss']) == 2
    with pytest.raises(ParamError, match='verbose'):
        net.fit(X, y, verbose=3)


def test_train_test_predict_on_batch():
    rng = np.random.RandomState(5)
    X = rng.normal(size=(6, 4)).astype(np.float32)
    y = rng.randint(0, 3, 6)
    W0, b0 = rng.normal(size=(3, 4)).astype(np.float32), np.zeros(3, np.float32)
    net = _linear_net(W0, b0)
    before = net.test_on_batch(X, y)
    loss = net.train_on_batch(X, y)
    assert loss == pytest.approx(before, rel=1e-6)   # the loss of the step's forward pass
    W, b, _ = _numpy_sgd(X, y, np.ones(6), W0, b0, 6, 0.1)
    np.testing.assert_allclose(net.get_weights()[0], W, rtol=1e-5, atol=1e-6)
    assert net.test_on_batch(X, y) < before
    prob = net.predict_on_batch(X)
    np.testing.assert_allclose(prob, _softmax(X @ net.get_weights()[0].T + net.get_weights()[1]),
                               rtol=1e-5)
    assert net.train_on_batch(X, y, return_dict=True).keys() == {'loss'}


def test_two_outputs_with_loss_weights_and_metrics_per_output():
    rng = np.random.RandomState(6)
    X = rng.normal(size=(64, 5)).astype(np.float32)
    y_cls = (X[:, 0] > 0).astype(np.int64)
    y_reg = (X[:, 1:3] * 2).astype(np.float32)
    inp = L.Input(shape=(5,))
    h = L.Dense(16, activation='relu')(inp)
    cls = L.Dense(2, activation='softmax', name='cls')(h)
    reg = L.Dense(2, name='reg')(h)
    model = L.Model(inp, [cls, reg])
    model.compile(optimizer='adam', learning_rate=0.02,
                  loss={'cls': 'sparse_categorical_crossentropy', 'reg': 'mse'},
                  loss_weights={'cls': 1.0, 'reg': 0.5}, metrics={'cls': ['accuracy']})
    hist = model.fit(X, {'cls': y_cls, 'reg': y_reg}, batch_size=16, epochs=3, verbose=0,
                     validation_data=(X, [y_cls, y_reg]))
    assert sorted(hist.history) == sorted(
        ['loss', 'cls_loss', 'reg_loss', 'cls_accuracy', 'val_loss', 'val_cls_loss',
         'val_reg_loss', 'val_cls_accuracy'])
    out = model.evaluate(X, [y_cls, y_reg], return_dict=True, verbose=0)
    assert out['loss'] == pytest.approx(out['cls_loss'] + 0.5 * out['reg_loss'], rel=1e-6)
    prob, value = model.predict(X)
    assert prob.shape == (64, 2) and value.shape == (64, 2)
    assert out['reg_loss'] == pytest.approx(np.mean((value - y_reg) ** 2), rel=1e-5)
    assert model.to_symbol().list_outputs() == ['cls_softmax_output', 'reg_lro_output']
    with pytest.raises(ParamError, match='one entry per output'):
        model.compile(loss=['mse'])


def test_frozen_layer_keeps_its_weights_and_layer_access():
    rng = np.random.RandomState(7)
    X = rng.normal(size=(32, 4)).astype(np.float32)
    y = rng.randint(0, 3, 32)
    net = L.Sequential([L.Input(shape=(4,)), L.Dense(8, activation='relu', name='body'),
                        L.Dense(3, name='head')])
    net.compile(optimizer='sgd', loss='softmax', learning_rate=0.5)
    net.fit(X, y, epochs=1, verbose=0)
    body = net.get_layer('body')
    assert net.layers[0] is body and net.get_layer(index=-1).name == 'head'
    assert body.weight_names == ['body_weight', 'body_bias']
    frozen = [w.copy() for w in body.get_weights()]
    head = [w.copy() for w in net.get_layer('head').get_weights()]
    body.trainable = False
    net.fit(X, y, epochs=2, verbose=0)
    for a, b in zip(body.get_weights(), frozen):
        np.testing.assert_array_equal(a, b)
    assert not np.allclose(net.get_layer('head').get_weights()[0], head[0])
    assert net._module._exec_group.grad_req['body_weight'] == 'null'
    text = net.summary(print_fn=None)
    assert 'Trainable params: 27' in text and 'Non-trainable params: 40' in text
    assert net.count_params() == 67
    with pytest.raises(ParamError, match='no layer named'):
        net.get_layer('nope')
    body.set_weights([np.zeros((8, 4)), np.ones(8)])
    np.testing.assert_array_equal(net.get_weights()[1], np.ones(8))


def test_data_checked_against_declared_input_and_onehot_hint():
    net = L.Sequential([L.Input(shape=(1, 8, 8)), L.Flatten(), L.Dense(10)])
    net.compile(optimizer='sgd', loss='sparse_categorical_crossentropy')
    X = np.zeros((4, 8, 8, 1), np.float32)
    with pytest.raises(ShapeError, match='channels-last.*transpose'):
        net.fit(X, np.zeros(4), verbose=0)
    with pytest.raises(ParamError, match="categorical_crossentropy"):
        net.fit(np.zeros((4, 1, 8, 8)), np.eye(10)[[1, 2, 3, 4]], verbose=0)


def test_regression_metrics_average_over_samples_like_keras():
    rng = np.random.RandomState(8)
    X = rng.normal(size=(10, 3)).astype(np.float32)
    y = rng.normal(size=(10, 2)).astype(np.float32)
    net = L.Sequential([L.Input(shape=(3,)), L.Dense(2)])
    net.compile(optimizer='sgd', loss='mse', metrics=['mae', 'rmse'], learning_rate=0.0)
    h = net.fit(X, y, batch_size=4, epochs=1, verbose=0)      # batches of 4, 4, 2; no update
    d = net.predict(X).astype(np.float64) - y
    assert h.history['mae'][0] == pytest.approx(np.abs(d).mean(), rel=1e-5)
    assert h.history['rmse'][0] == pytest.approx(np.sqrt((d ** 2).mean()), rel=1e-5)
    assert h.history['loss'][0] == pytest.approx((d ** 2).mean(), rel=1e-5)
