"""ff.layers training: compile/fit/evaluate/predict through Module, History, weights files."""
import os

import numpy as np
import pytest

import ffnumba as ff
from ffnumba import layers as L
from ffnumba.base import FFError, ParamError


@pytest.fixture(scope='module')
def digits():
    return ff.datasets.load_digits()


def _mlp(**kw):
    return L.Sequential([L.Flatten(), L.Dense(32, activation='relu'), L.Dense(10)], **kw)


def test_fit_on_digits_history_evaluate_predict(digits):
    X, y, Xt, yt = digits
    net = _mlp()
    net.compile(optimizer='adam', loss='softmax', metrics=['acc'], learning_rate=0.01)
    seen = []

    class Recorder:
        def on_epoch_end(self, epoch, logs):
            seen.append((epoch, dict(logs)))

    batches = []
    history = net.fit(X, y, batch_size=64, epochs=3, validation_data=(Xt, yt), verbose=0,
                      callbacks=[Recorder(), lambda p: batches.append(p.nbatch)])
    h = history.history
    assert sorted(h) == ['accuracy', 'loss', 'val_accuracy', 'val_loss']
    assert all(len(v) == 3 for v in h.values()) and history.epoch == [0, 1, 2]
    assert h['loss'][-1] < h['loss'][0]
    assert h['val_accuracy'][-1] > 0.85
    assert [e for e, _ in seen] == [0, 1, 2] and seen[-1][1]['val_loss'] == h['val_loss'][-1]
    assert batches.count(0) == 3 and max(batches) == -(-len(y) // 64) - 1
    assert net.metrics_names == ['loss', 'accuracy']
    # evaluate with the final weights equals the last validation values, computed unpadded.
    loss, acc = net.evaluate(Xt, yt, batch_size=100)
    assert loss == pytest.approx(h['val_loss'][-1], rel=1e-5)
    assert acc == pytest.approx(h['val_accuracy'][-1])
    prob = net.predict(Xt, batch_size=100)
    assert prob.shape == (len(yt), 10)
    np.testing.assert_allclose(prob.sum(axis=1), 1, rtol=1e-5)
    assert acc == pytest.approx(np.mean(prob.argmax(axis=1) == yt))
    manual = -np.mean(np.log(np.clip(prob[np.arange(len(yt)), yt], 1e-7, 1)))
    assert loss == pytest.approx(manual, rel=1e-4)
    assert net.evaluate(Xt, yt, return_dict=True) == pytest.approx(
        {'loss': loss, 'accuracy': acc}, rel=1e-5)
    # Fitting again continues from the trained weights.
    again = net.fit(X, y, batch_size=64, epochs=1, verbose=0)
    assert again.history['loss'][0] < h['loss'][0]


def test_two_cpu_contexts_match_one(digits, tmp_path):
    X, y = digits[0][:256], digits[1][:256]
    start = _mlp()
    start.compile(optimizer='sgd', loss='softmax')
    start.fit(X[:64], y[:64], batch_size=64, epochs=1, verbose=0)
    prefix = str(tmp_path / 'start')
    start.save_weights(prefix)
    weights = []
    for ctx in ([ff.cpu(0)], [ff.cpu(0), ff.cpu(1)]):
        net = _mlp()
        net.compile(optimizer='sgd', loss='softmax', ctx=ctx, learning_rate=0.1, momentum=0.9)
        net.load_weights(prefix)          # same start on both (fit then starts from them)
        net.fit(X, y, batch_size=64, epochs=1, shuffle=False, verbose=0)
        weights.append(dict(zip(net.weight_names, net.get_weights())))
    assert sorted(weights[0]) == ['dense0_bias', 'dense0_weight', 'dense1_bias',
                                  'dense1_weight']
    before = dict(zip(start.weight_names, start.get_weights()))
    for k in weights[0]:
        assert not np.allclose(weights[0][k], before[k])
        np.testing.assert_allclose(weights[0][k], weights[1][k], rtol=1e-4, atol=1e-6)


def test_small_convnet_summary_matches_trained_weights(digits):
    X, y = digits[0][:200], digits[1][:200]
    net = L.Sequential([L.Conv2D(4, 3, padding='same', activation='relu'),
                        L.BatchNormalization(), L.MaxPool2D(2), L.Conv2D(6, 3),
                        L.GlobalAvgPool2D(), L.Dropout(0.1), L.Dense(10)])
    net.compile(optimizer='adam', loss='softmax', metrics=['acc', 'ce'])
    history = net.fit(X, y, batch_size=50, epochs=1, verbose=2)
    assert sorted(history.history) == ['accuracy', 'cross-entropy', 'loss']
    weights = dict(zip(net.weight_names, net.get_weights()))
    assert 'batchnorm0_moving_mean' in weights
    text = net.summary(print_fn=None)   # shapes known from fit
    assert int(text.split('Total params: ')[1].split()[0]) == \
        sum(w.size for w in weights.values())


def test_functional_model_with_concatenate_trains(digits):
    X, y, Xt, yt = digits
    flat = X.reshape(len(X), 64)
    left, right = L.Input(shape=(32,)), L.Input(shape=(32,), name='right')
    h = L.Concatenate()([L.Dense(16, activation='tanh')(left),
                         L.Dense(16, activation='tanh')(right)])
    out = L.Dense(10, activation='softmax')(L.Dense(32, activation='relu')(h))
    model = L.Model([left, right], out, name='two_halves')
    model.compile(optimizer='adam', loss='sparse_categorical_crossentropy',
                  metrics=['accuracy'], learning_rate=0.01)
    model.fit([flat[:, :32], flat[:, 32:]], y, batch_size=32, epochs=3, verbose=0)
    ft = Xt.reshape(len(Xt), 64)
    _, acc = model.evaluate({'data0': ft[:, :32], 'right': ft[:, 32:]}, yt)
    assert acc > 0.8
    assert 'Model: "two_halves"' in model.summary(print_fn=None)
    with pytest.raises(ParamError, match='must hold 2 arrays'):
        model.predict(ft)


@pytest.mark.parametrize('loss, activation, kind', [('mse', None, 'mse'),
                                                    ('mae', None, 'mae'),
                                                    ('binary_crossentropy', 'sigmoid', 'bce')])
def test_regression_and_logistic_losses(loss, activation, kind):
    rng = np.random.RandomState(0)
    X = rng.uniform(-1, 1, (240, 5)).astype(np.float32)
    w = rng.normal(size=5)
    target = X @ w
    y = (target > 0).astype(np.float32) if kind == 'bce' else target
    net = L.Sequential([L.Dense(1, activation=activation)])
    net.compile(optimizer='adam', loss=loss, metrics=['mae'], learning_rate=0.05)
    history = net.fit(X, y, batch_size=40, epochs=3, verbose=0)
    assert history.history['loss'][-1] < history.history['loss'][0]
    pred = net.predict(X)
    assert pred.shape == (240, 1)
    got_loss, got_mae = net.evaluate(X, y)
    d = pred[:, 0].astype(np.float64) - y
    if kind == 'mse':
        want = np.mean(d ** 2)
    elif kind == 'mae':
        want = np.mean(np.abs(d))
    else:
        assert pred.min() >= 0 and pred.max() <= 1
        p = np.clip(pred[:, 0].astype(np.float64), 1e-7, 1 - 1e-7)
        want = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
    assert got_loss == pytest.approx(want, rel=1e-4)
    assert got_mae == pytest.approx(np.mean(np.abs(d)), rel=1e-4)
    with pytest.raises(ParamError, match='`y` must match the output shape'):
        net.fit(X, np.zeros((240, 2)), verbose=0)


def test_save_and_load_weights_round_trip(tmp_path, digits, capsys):
    X, y = digits[0][:128], digits[1][:128]
    net = _mlp()
    net.compile(optimizer='adam', loss='softmax')
    net.fit(X, y, batch_size=32, epochs=1, verbose=1)     # progress bar + epoch line
    assert capsys.readouterr().out.startswith('Epoch 1/1 - loss: ')
    prefix = str(tmp_path / 'mlp')
    net.save_weights(prefix, epoch=2)
    assert os.path.exists(prefix + '-symbol.json') and os.path.exists(prefix + '-0002.params')
    sym, arg, aux = ff.model.load_checkpoint(prefix, 2)
    assert sym.list_arguments() == net.to_symbol().list_arguments()
    assert sorted(arg) == sorted(n for n in net.weight_names if n in arg)
    # A fresh model of the same architecture predicts the same after load_weights.
    other = _mlp()
    other.compile(optimizer='adam', loss='softmax')
    other.load_weights(prefix, epoch=2)
    np.testing.assert_allclose(other.predict(X), net.predict(X), rtol=1e-6)
    # Uncompiled: the bare network (logits) with the same weights.
    bare = _mlp()
    bare.load_weights(prefix, epoch=2)
    logits = bare.predict(X)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(e / e.sum(axis=1, keepdims=True), net.predict(X), rtol=1e-4,
                               atol=1e-6)
    # The file is a normal Module checkpoint.
    mod = ff.mod.Module.load(prefix, 2)
    assert mod.symbol.list_outputs() == ['softmax_output']
    wrong = L.Sequential([L.Flatten(), L.Dense(32, name='fc'), L.Dense(10)])
    with pytest.raises(ParamError, match='lacks fc_weight'):
        wrong.load_weights(prefix, epoch=2)


def test_predict_needs_weights_and_categorical_labels_are_argmaxed(digits):
    X, y = digits[0][:96], digits[1][:96]
    net = _mlp()
    with pytest.raises(FFError, match='no weights yet'):
        net.predict(X)
    net.compile(optimizer='adam', loss='categorical_crossentropy', metrics=['acc'])
    onehot = np.eye(10, dtype=np.float32)[y]
    net.fit(X, onehot, batch_size=32, epochs=1, verbose=0)
    loss_a, acc_a = net.evaluate(X, onehot)
    loss_b, acc_b = net.evaluate(X, y)
    assert (loss_a, acc_a) == (loss_b, acc_b)
    with pytest.raises(ParamError, match='`batch_size` must be a positive int'):
        net.fit(X, y, batch_size=0)


def test_every_layer_kind_trains_in_one_functional_model():
    rng = np.random.RandomState(0)
    x = L.Input(shape=(6,), name='tokens')
    h = L.Embedding(20, 4)(x)                                           # (N, 6, 4)
    h = L.Conv1D(3, 3, padding='same', activation='relu')(h)            # (N, 3, 4)
    h = L.Reshape((3, 2, 2))(h)
    h = L.Conv2DTranspose(2, 3, strides=2, padding='same', activation='elu')(h)  # (N, 2, 4, 4)
    h = L.AvgPool2D(2, padding='same')(h)
    h = L.LeakyReLU(0.1)(h)
    h = L.BatchNormalization(scale=False)(h)
    h = L.Activation('softsign')(L.GlobalAvgPool2D()(h))
    out = L.Dense(3, activation='softmax')(L.Dropout(0.2)(h))
    model = L.Model(x, out)
    model.compile(optimizer='sgd', loss='softmax', metrics=['acc'])
    X = rng.randint(0, 20, (40, 6)).astype(np.float32)
    y = rng.randint(0, 3, 40)
    history = model.fit(X, y, batch_size=8, epochs=2, verbose=0)
    assert np.isfinite(history.history['loss']).all()
    prob = model.predict(X[:5], batch_size=8)
    assert prob.shape == (5, 3)
    np.testing.assert_allclose(prob.sum(axis=1), 1, rtol=1e-5)
    text = model.summary(print_fn=None)
    weights = dict(zip(model.weight_names, model.get_weights()))
    assert int(text.split('Total params: ')[1].split()[0]) == \
        sum(w.size for w in weights.values())
    assert 'Non-trainable params: 4' in text
