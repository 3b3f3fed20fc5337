"""ff.layers.callbacks against Keras 3's documented semantics, and the hooks fit calls."""
import csv
import os

import numpy as np
import pytest

import ffnumba as ff
from ffnumba import layers as L
from ffnumba.layers import callbacks as C
from ffnumba.base import ParamError


class FakeModel:
    """Stands in for a model: weights are the epoch they were taken at."""

    def __init__(self):
        self.stop_training = False
        self.epoch = 0
        self.restored = None
        self.learning_rate = 0.1

    def get_weights(self):
        return [self.epoch]

    def set_weights(self, w):
        self.restored = w[0]


def _drive(cb, values, key='val_loss'):
    """Run ``cb`` over epochs with ``values``; return the epoch after which training stopped."""
    model = FakeModel()
    cb.set_model(model)
    cb.on_train_begin()
    stopped = None
    for epoch, v in enumerate(values):
        model.epoch = epoch
        cb.on_epoch_begin(epoch)
        cb.on_epoch_end(epoch, {key: v})
        if model.stop_training:
            stopped = epoch
            break
    cb.on_train_end()
    return stopped, model


def test_early_stopping_patience_counts_epochs_without_improvement():
    # best at epoch 1, then 3 worse epochs: patience=2 stops at epoch 3 (wait 1, 2).
    stopped, _ = _drive(C.EarlyStopping(patience=2), [1.0, 0.5, 0.6, 0.7, 0.8, 0.1])
    assert stopped == 3
    # patience=0 stops at the first epoch without improvement (not after epoch 0).
    stopped, _ = _drive(C.EarlyStopping(patience=0), [1.0, 1.5, 0.1])
    assert stopped == 1
    stopped, _ = _drive(C.EarlyStopping(patience=3), [1.0, 0.9, 0.8, 0.7, 0.6])
    assert stopped is None


def test_early_stopping_min_delta_mode_baseline_start_from_epoch():
    # improvements smaller than min_delta do not count.
    stopped, _ = _drive(C.EarlyStopping(patience=1, min_delta=0.1), [1.0, 0.95, 0.92, 0.5])
    assert stopped == 1
    # mode='max' on accuracy; 'auto' picks max for *acc*.
    for mode in ('max', 'auto'):
        stopped, _ = _drive(C.EarlyStopping(monitor='val_accuracy', patience=1, mode=mode),
                            [0.5, 0.6, 0.55, 0.9], key='val_accuracy')
        assert stopped == 2
    # mode='min' with accuracy-like values stops as soon as they go up.
    stopped, _ = _drive(C.EarlyStopping(monitor='val_accuracy', patience=0, mode='min'),
                        [0.5, 0.6], key='val_accuracy')
    assert stopped == 1
    # baseline: wait restarts only when the value also beats the baseline.
    stopped, _ = _drive(C.EarlyStopping(patience=2, baseline=0.1), [1.0, 0.9, 0.95, 0.97])
    assert stopped == 2
    stopped, _ = _drive(C.EarlyStopping(patience=2), [1.0, 0.9, 0.95, 0.97])
    assert stopped == 3
    # start_from_epoch: epochs before it are not monitored.
    stopped, _ = _drive(C.EarlyStopping(patience=0, start_from_epoch=2),
                        [1.0, 2.0, 3.0, 4.0])
    assert stopped == 3
    with pytest.raises(ParamError, match='mode'):
        C.EarlyStopping(mode='up')
    cb = C.EarlyStopping(monitor='val_gizmo')
    with pytest.raises(ParamError, match="mode='min'"):
        _drive(cb, [1.0], key='val_gizmo')


def test_early_stopping_restore_best_weights_even_without_stopping():
    stopped, model = _drive(C.EarlyStopping(patience=1, restore_best_weights=True),
                            [1.0, 0.4, 0.6, 0.7])
    assert stopped == 2 and model.restored == 1
    # Keras 3 restores at train end also when training ran to the end.
    stopped, model = _drive(C.EarlyStopping(patience=5, restore_best_weights=True),
                            [1.0, 0.4, 0.6])
    assert stopped is None and model.restored == 1
    with pytest.warns(UserWarning, match='not available'):
        _drive(C.EarlyStopping(), [1.0], key='loss')


def test_reduce_lr_on_plateau_patience_cooldown_min_lr():
    cb = C.ReduceLROnPlateau(factor=0.5, patience=2, cooldown=1, min_lr=0.02)
    model = FakeModel()
    cb.set_model(model)
    cb.on_train_begin()
    lrs = []
    for epoch, v in enumerate([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]):
        logs = {'val_loss': v}
        cb.on_epoch_end(epoch, logs)
        lrs.append(model.learning_rate)
        assert logs['learning_rate'] == pytest.approx(lrs[-2] if len(lrs) > 1 else 0.1)
    # reduce after 2 epochs without improvement (epoch 2), cooldown 1 epoch, then 2 more.
    assert lrs == pytest.approx([0.1, 0.1, 0.05, 0.05, 0.025, 0.025, 0.02, 0.02, 0.02])
    with pytest.raises(ParamError, match='factor'):
        C.ReduceLROnPlateau(factor=1.0)


def test_model_checkpoint_template_and_best_only(tmp_path):
    saved = []

    class Saver(FakeModel):
        def save(self, path):
            saved.append(('model', path))

        def save_weights(self, path):
            saved.append(('weights', path))

    cb = C.ModelCheckpoint(str(tmp_path / 'ckpt-{epoch:02d}-{val_loss:.2f}'),
                           save_best_only=True)
    cb.set_model(Saver())
    for epoch, v in enumerate([0.5, 0.7, 0.25]):
        cb.on_epoch_end(epoch, {'val_loss': v})
    assert [os.path.basename(p) for _, p in saved] == ['ckpt-01-0.50', 'ckpt-03-0.25']
    saved.clear()
    cb = C.ModelCheckpoint(str(tmp_path / 'w-{epoch}.params'), save_weights_only=True,
                           monitor='val_accuracy')
    cb.set_model(Saver())
    for epoch in range(2):
        cb.on_epoch_end(epoch, {'val_accuracy': 0.5})
    assert saved == [('weights', str(tmp_path / 'w-1.params')),
                     ('weights', str(tmp_path / 'w-2.params'))]
    saved.clear()
    cb = C.ModelCheckpoint(str(tmp_path / 'a-{epoch}'), monitor='val_accuracy',
                           save_best_only=True, initial_value_threshold=0.6)
    cb.set_model(Saver())
    for epoch, v in enumerate([0.5, 0.7, 0.65, 0.8]):          # 'auto' means max here
        cb.on_epoch_end(epoch, {'val_accuracy': v})
    assert [os.path.basename(p) for _, p in saved] == ['a-2', 'a-4']
    with pytest.warns(UserWarning, match='only with val_accuracy available'):
        cb.on_epoch_end(4, {'loss': 1.0})                    # Keras 3: warn, then save
    assert os.path.basename(saved[-1][1]) == 'a-5'
    cb = C.ModelCheckpoint(str(tmp_path / 'x-{nope}'))
    cb.set_model(Saver())
    with pytest.raises(ParamError, match='nope'):
        cb.on_epoch_end(0, {'loss': 1.0})


def test_terminate_on_nan_and_lambda_and_adapters():
    model = FakeModel()
    cb = C.TerminateOnNaN()
    cb.set_model(model)
    cb.on_train_batch_end(0, {'loss': 1.0})
    assert not model.stop_training
    cb.on_train_batch_end(1, {'loss': float('nan')})
    assert model.stop_training
    seen = []
    lam = C.LambdaCallback(on_epoch_end=lambda e, logs: seen.append(e),
                           on_batch_end=lambda b, logs: seen.append(('b', b)))
    lam.on_train_batch_end(3, {})
    lam.on_epoch_end(1, {})
    assert seen == [('b', 3), 1]
    with pytest.raises(ParamError, match='unknown hook'):
        C.LambdaCallback(on_epoc_end=print)
    assert isinstance(C.adapt(ff.callback.Speedometer(32)), C._MXNetBatchEnd)
    assert isinstance(C.adapt(ff.callback.do_checkpoint('x')), C._MXNetEpochEnd)
    with pytest.raises(ParamError, match='callbacks'):
        C.adapt(3)


@pytest.fixture(scope='module')
def digits():
    X, y, Xt, yt = ff.datasets.load_digits()
    return X[:320], y[:320], Xt[:200], yt[:200]


def _mlp():
    net = L.Sequential([L.Input(shape=(1, 8, 8)), L.Flatten(),
                        L.Dense(16, activation='relu'), L.Dense(10)])
    net.compile(optimizer='adam', loss='softmax', metrics=['acc'], learning_rate=0.01)
    return net


class Recorder(C.Callback):
    def __init__(self):
        super().__init__()
        self.calls = []

    def __getattribute__(self, name):
        if name.startswith('on_') and name not in ('on_batch_begin', 'on_batch_end'):
            calls = object.__getattribute__(self, 'calls')
            return lambda *a: calls.append((name,) + tuple(x for x in a if isinstance(x, int)))
        return object.__getattribute__(self, name)


def test_hook_order_in_fit_evaluate_predict(digits):
    X, y, Xt, yt = digits
    net = _mlp()
    rec = Recorder()
    net.fit(X[:100], y[:100], batch_size=50, epochs=2, verbose=0, validation_data=(Xt, yt),
            validation_freq=2, callbacks=[rec])
    names = [c for c in rec.calls]
    assert names[0] == ('on_train_begin',) and names[-1] == ('on_train_end',)
    assert names[1:6] == [('on_epoch_begin', 0), ('on_train_batch_begin', 0),
                          ('on_train_batch_end', 0), ('on_train_batch_begin', 1),
                          ('on_train_batch_end', 1)]
    assert names[6] == ('on_epoch_end', 0)           # validation_freq=2: none after epoch 1
    assert ('on_test_begin',) in names[7:] and names[-2] == ('on_epoch_end', 1)
    assert rec.model is net and rec.params['steps'] == 2 and rec.params['epochs'] == 2
    rec.calls.clear()
    net.evaluate(Xt, yt, batch_size=100, callbacks=[rec], verbose=0)
    assert rec.calls == [('on_test_begin',), ('on_test_batch_begin', 0),
                         ('on_test_batch_end', 0), ('on_test_batch_begin', 1),
                         ('on_test_batch_end', 1), ('on_test_end',)]
    rec.calls.clear()
    net.predict(Xt[:30], batch_size=20, callbacks=[rec])
    assert [c[0] for c in rec.calls] == ['on_predict_begin', 'on_predict_batch_begin',
                                         'on_predict_batch_end', 'on_predict_batch_begin',
                                         'on_predict_batch_end', 'on_predict_end']


def test_stop_training_within_epoch_and_history(digits):
    X, y, _, _ = digits
    net = _mlp()

    class StopAt(C.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:
                self.model.stop_training = True

    steps = []
    history = net.fit(X, y, batch_size=32, epochs=5, verbose=0,
                      callbacks=[StopAt(), C.LambdaCallback(
                          on_train_batch_end=lambda b, logs: steps.append(b))])
    assert steps == [0, 1, 2] and history.epoch == [0] and net.history is history


def test_fit_with_keras_callbacks_end_to_end(digits, tmp_path):
    X, y, Xt, yt = digits
    net = _mlp()
    csv_path = tmp_path / 'log.csv'
    ckpt = str(tmp_path / 'best-{epoch:02d}')
    stopper = C.EarlyStopping(monitor='val_loss', patience=1, restore_best_weights=True)
    best = C.ModelCheckpoint(ckpt, save_best_only=True)
    sched = C.LearningRateScheduler(lambda epoch, lr: 0.01 * 0.5 ** epoch)
    history = net.fit(X, y, batch_size=32, epochs=4, verbose=0, validation_split=0.25,
                      callbacks=[stopper, best, sched, C.CSVLogger(str(csv_path)),
                                 C.TerminateOnNaN()])
    h = history.history
    assert h['learning_rate'] == pytest.approx([0.01 * 0.5 ** e for e in history.epoch])
    rows = list(csv.reader(open(csv_path)))
    assert rows[0] == ['epoch'] + sorted(h)
    assert [int(r[0]) for r in rows[1:]] == history.epoch
    assert float(rows[1][rows[0].index('val_loss')]) == pytest.approx(h['val_loss'][0])
    # the best checkpoint holds the weights the callback restored
    best_epoch = int(np.argmin(h['val_loss']))
    assert best.last_saved == ckpt.format(epoch=best_epoch + 1)
    again = L.load_model(best.last_saved)
    X_val, y_val = X[240:], y[240:]       # the last 25 %, before shuffling
    assert again.evaluate(X_val, y_val, verbose=0)[0] == pytest.approx(
        h['val_loss'][best_epoch], rel=1e-5)
    assert net.evaluate(X_val, y_val, verbose=0)[0] == pytest.approx(
        h['val_loss'][best_epoch], rel=1e-5)


def test_mxnet_callables_in_the_same_list(digits, tmp_path, caplog):
    X, y, _, _ = digits
    net = _mlp()
    prefix = str(tmp_path / 'mx')
    import logging
    with caplog.at_level(logging.INFO):
        net.fit(X, y, batch_size=32, epochs=2, verbose=0,
                callbacks=[ff.callback.Speedometer(32, frequent=5),
                           ff.callback.do_checkpoint(prefix)])
    assert os.path.exists(prefix + '-0002.params') and os.path.exists(prefix + '-symbol.json')
    assert any('samples/sec' in r.getMessage() and 'accuracy' in r.getMessage()
               for r in caplog.records)
    mod = ff.mod.Module.load(prefix, 2)
    assert 'softmax_output' in mod.symbol.list_outputs()
    mx_history = ff.callback.History()
    keras_history = net.fit(X, y, batch_size=32, epochs=2, verbose=0, callbacks=[mx_history])
    assert mx_history.epoch == [0, 1]
    assert mx_history.history['accuracy'] == pytest.approx(keras_history.history['accuracy'])


def test_progress_line_is_one_based(digits, capsys):
    X, y, _, _ = digits
    net = _mlp()
    net.fit(X[:64], y[:64], batch_size=32, epochs=2, verbose=2)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith('Epoch 1/2 - loss: ') and out[1].startswith('Epoch 2/2 - loss: ')
    assert '2 steps' in out[0]


class FakeTerminal:
    """A stdout that says it is a terminal, so verbose=1 draws the tqdm bar."""

    def __init__(self):
        self.parts = []

    def write(self, text):
        self.parts.append(text)

    def flush(self):
        pass

    def isatty(self):
        return True


def test_verbose_1_draws_a_live_tqdm_bar_on_a_terminal(digits, monkeypatch):
    X, y, _, _ = digits
    net = _mlp()
    term = FakeTerminal()
    monkeypatch.setattr('sys.stdout', term)
    net.fit(X[:96], y[:96], batch_size=32, epochs=2, verbose=1, validation_split=0.25)
    text = ''.join(term.parts)
    assert 'Epoch 1/2' in text and 'Epoch 2/2' in text and 'Epoch 0/' not in text
    assert '3/3' in text and 'step/s' in text       # step k/N and the rate
    assert 'val_loss: ' in text                     # the epoch's values end the bar
    assert '<' in text                              # tqdm's elapsed<remaining (ETA)


def test_model_checkpoint_every_n_batches(digits, tmp_path):
    X, y, _, _ = digits
    net = _mlp()
    cb = C.ModelCheckpoint(str(tmp_path / 'w-{epoch}-{loss:.3f}.params'),
                           save_weights_only=True, save_freq=4)
    net.fit(X[:192], y[:192], batch_size=32, epochs=2, verbose=0, callbacks=[cb])
    files = sorted(os.listdir(tmp_path))
    assert len(files) == 3 and all(f.endswith('.params') for f in files)   # 12 batches / 4
    weights = ff.nd.load(str(tmp_path / files[-1]))
    assert sorted(weights) == ['arg:dense0_bias', 'arg:dense0_weight', 'arg:dense1_bias',
                               'arg:dense1_weight']
