"""Tests of ffnumba.callback: MXNet log formats, checkpoint periods, ProgressBar, History."""
import logging
import os
import re
import sys
import types

import numpy as np
import pytest

from ffnumba import callback, metric
from ffnumba.callback import BatchEndParam


def _param(epoch, nbatch, m):
    return BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=m, locals=None)


def _acc(correct, total):
    m = metric.Accuracy()
    m.update([np.ones(total)], [np.r_[np.ones(correct), np.zeros(total - correct)]])
    return m


def test_batch_end_param_is_mxnets_namedtuple():
    p = _param(1, 2, None)
    assert type(p).__name__ == 'BatchEndParams'
    assert p._fields == ('epoch', 'nbatch', 'eval_metric', 'locals')


def test_speedometer_lines(caplog):
    caplog.set_level(logging.INFO)
    m = metric.CompositeEvalMetric(['acc', 'ce'])
    m.update([np.array([0, 1])], [np.array([[0.9, 0.1], [0.8, 0.2]])])
    sp = callback.Speedometer(batch_size=32, frequent=2)
    for nbatch in range(5):
        sp(_param(0, nbatch, m))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    pat = (r'^Epoch\[0\] Batch \[0-2\]\tSpeed: \S+ samples/sec\taccuracy=0\.500000'
           r'\tcross-entropy=0\.857399$')
    assert re.match(pat, lines[0]), lines[0]
    # auto_reset cleared the local counters: the second line shows nan
    assert lines[1].startswith('Epoch[0] Batch [2-4]\tSpeed: ')
    assert lines[1].endswith('\taccuracy=nan\tcross-entropy=nan')
    assert m.get_global()[1][0] == 0.5          # global counters kept


def test_speedometer_no_reset_and_no_metric(caplog):
    caplog.set_level(logging.INFO)
    m = _acc(3, 4)
    sp = callback.Speedometer(8, frequent=3, auto_reset=False)
    for nbatch in range(7):
        sp(_param(2, nbatch, m))
    lines = [r.getMessage() for r in caplog.records]
    assert [re.sub(r'Speed: \S+', 'Speed: X', s) for s in lines] == [
        'Epoch[2] Batch [0-3]\tSpeed: X samples/sec\taccuracy=0.750000',
        'Epoch[2] Batch [0-6]\tSpeed: X samples/sec\taccuracy=0.750000']
    caplog.clear()
    sp = callback.Speedometer(8, frequent=1)
    sp(_param(0, 0, None))
    sp(_param(0, 1, None))
    sp(_param(1, 0, None))      # a new epoch restarts the timer without logging
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 1 and re.match(r'^Iter\[0\] Batch \[1\]\tSpeed: \S+ samples/sec$',
                                       msgs[0])


def test_log_train_metric_and_validation(caplog):
    caplog.set_level(logging.INFO)
    m = _acc(1, 4)
    cb = callback.log_train_metric(2, auto_reset=True)
    cb(_param(0, 1, m))
    cb(_param(0, 2, m))
    callback.LogValidationMetricsCallback()(_param(3, 0, _acc(2, 4)))
    callback.LogValidationMetricsCallback()(_param(3, 0, None))
    assert [r.getMessage() for r in caplog.records] == [
        'Iter[0] Batch[2] Train-accuracy=0.250000', 'Epoch[3] Validation-accuracy=0.500000']
    assert m.num_inst == 0 and m.global_num_inst == 4


def test_do_checkpoint_uses_checkpoint_save(monkeypatch):
    calls = []
    fake = types.ModuleType('ffnumba.checkpoint')
    fake.save_checkpoint = lambda *a: calls.append(a)
    monkeypatch.setitem(sys.modules, 'ffnumba.checkpoint', fake)
    cb = callback.do_checkpoint('pre', period=2)
    for epoch in range(4):
        cb(epoch, 'sym', {'w': 1}, {})
    assert calls == [('pre', 2, 'sym', {'w': 1}, {}), ('pre', 4, 'sym', {'w': 1}, {})]
    calls.clear()
    cb = callback.do_checkpoint('p', period=0)      # below 1 counts as 1
    cb(0, 's', {}, {})
    assert calls == [('p', 1, 's', {}, {})]


def test_module_checkpoint():
    class Mod:
        def __init__(self):
            self.saved = []

        def save_checkpoint(self, prefix, epoch, states):
            self.saved.append((prefix, epoch, states))
    mod = Mod()
    cb = callback.module_checkpoint(mod, 'pre', period=3, save_optimizer_states=True)
    for epoch in range(6):
        cb(epoch)
    assert mod.saved == [('pre', 3, True), ('pre', 6, True)]


def test_progress_bar_plain(caplog):
    caplog.set_level(logging.INFO)
    bar = callback.ProgressBar(total=4, length=8, use_tqdm=False)
    bar(_param(0, 1, None))
    bar(_param(0, 4, None))
    assert [r.getMessage() for r in caplog.records] == ['[==------] 25%\r', '[========] 100%\r']


def test_progress_bar_tqdm(monkeypatch):
    events = []

    class FakeTqdm:
        def __init__(self, total, desc, leave, file):
            self.n = 0
            events.append(('open', total, desc))

        def update(self, k):
            self.n += k
            events.append(('update', self.n))

        def close(self):
            events.append(('close',))
    fake = types.ModuleType('tqdm')
    fake.tqdm = FakeTqdm
    monkeypatch.setitem(sys.modules, 'tqdm', fake)
    bar = callback.ProgressBar(total=3)
    for epoch in range(2):
        for nbatch in range(3):
            bar(_param(epoch, nbatch, None))
    assert events[:5] == [('open', 3, 'Epoch 0'), ('update', 1), ('update', 2), ('update', 3),
                          ('close',)]
    assert events[5] == ('open', 3, 'Epoch 1')
    monkeypatch.setitem(sys.modules, 'tqdm', None)          # tqdm not importable
    assert callback.ProgressBar(total=3)._tqdm_cls is None
    with pytest.raises(Exception, match='pip install ffnumba\\[progress\\]'):
        callback.ProgressBar(total=3, use_tqdm=True)


def test_history_records_train_and_validation():
    h = callback.History()
    for epoch in range(2):
        m = _acc(epoch + 1, 4)
        h.batch_end_callback(_param(epoch, 0, m))
        h.epoch_end_callback(epoch, None, {}, {})
        h.eval_end_callback(_param(epoch, 0, _acc(3, 4)))
    assert h.epoch == [0, 1]
    assert h.history == {'accuracy': [0.25, 0.5], 'val_accuracy': [0.75, 0.75]}
    h.record(2, [('loss', 0.1)])
    assert h.epoch == [0, 1, 2] and h.history['loss'] == [0.1]
    assert 'History(epochs=3' in repr(h)


def test_do_checkpoint_writes_real_files(tmp_path):
    import ffnumba as ff
    net = ff.sym.FullyConnected(ff.sym.Variable('data'), num_hidden=2, name='fc')
    args = {'fc_weight': ff.nd.ones((2, 3)), 'fc_bias': ff.nd.zeros((2,))}
    prefix = str(tmp_path / 'net')
    callback.do_checkpoint(prefix)(0, net, args, {})
    assert sorted(os.listdir(tmp_path)) == ['net-0001.params', 'net-symbol.json']
    sym, arg, aux = ff.model.load_checkpoint(prefix, 1)
    assert sym.list_arguments() == ['data', 'fc_weight', 'fc_bias'] and aux == {}
    np.testing.assert_array_equal(arg['fc_weight'].asnumpy(), np.ones((2, 3)))


def test_history_and_speedometer_in_module_fit(caplog):
    import ffnumba as ff
    caplog.set_level(logging.INFO)
    X, y, Xt, yt = ff.datasets.load_digits()
    train = ff.io.NDArrayIter(X.reshape(len(X), -1), y, batch_size=100, shuffle=True)
    val = ff.io.NDArrayIter(Xt.reshape(len(Xt), -1), yt, batch_size=100)
    fc = ff.sym.FullyConnected(ff.sym.Variable('data'), num_hidden=10, name='fc')
    mod = ff.mod.Module(ff.sym.SoftmaxOutput(fc, name='softmax'))
    hist = callback.History()
    mod.fit(train, eval_data=val, eval_metric='acc', optimizer_params={'learning_rate': 0.5},
            num_epoch=2, initializer=ff.init.Xavier(),
            batch_end_callback=[callback.Speedometer(100, 5), hist.batch_end_callback],
            epoch_end_callback=hist.epoch_end_callback, eval_end_callback=hist.eval_end_callback)
    assert hist.epoch == [0, 1] and sorted(hist.history) == ['accuracy', 'val_accuracy']
    logged = [float(r.getMessage().split('=')[1]) for r in caplog.records
              if 'Train-accuracy' in r.getMessage()]
    assert hist.history['accuracy'] == pytest.approx(logged, abs=1e-6)
    assert hist.history['val_accuracy'][-1] > 0.5
    assert sum('Speed: ' in r.getMessage() for r in caplog.records) == 4   # nbatch 5, 10
