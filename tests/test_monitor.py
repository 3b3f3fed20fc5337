"""Monitor: statistics of executor arrays every `interval` batches."""
import logging

import numpy as np
import pytest

import ffnumba as ff
import ffnumba.ndarray as nd
import ffnumba.symbol as sym
from ffnumba import io
from ffnumba.base import FFError
from ffnumba.module import Module
from ffnumba.monitor import Monitor


def net():
    h = sym.FullyConnected(sym.Variable('data'), num_hidden=4, name='fc1')
    return sym.SoftmaxOutput(sym.Activation(h, act_type='relu', name='relu1'), name='softmax')


def bound():
    mod = Module(net())
    mod.bind(data_shapes=[('data', (5, 3))], label_shapes=[('softmax_label', (5,))])
    mod.init_params(ff.init.Xavier())
    return mod


def test_toc_reports_rms_of_outputs_args_and_respects_interval():
    mod = bound()
    mon = Monitor(2, pattern='fc1_.*|relu1_output', sort=True)
    mod.install_monitor(mon)
    batch = io.DataBatch([nd.ones((5, 3))], [nd.zeros((5,))])
    results = []
    for _ in range(3):
        mon.tic()
        mod.forward(batch, is_train=True)
        results.append(mon.toc())
    assert results[1] == []  # batch 1 is off the interval
    names = [r[1] for r in results[0]]
    assert names == sorted(names)
    assert set(names) == {'fc1_bias', 'fc1_output', 'fc1_weight', 'relu1_output'}
    step, _, stat = [r for r in results[0] if r[1] == 'fc1_weight'][0]
    w = mod.get_params()[0]['fc1_weight'].asnumpy()
    assert step == 1
    assert float(stat) == pytest.approx(np.linalg.norm(w) / np.sqrt(w.size), rel=1e-5)
    assert [r[0] for r in results[2]][0] == 3


def test_fit_with_monitor_logs_batches(caplog):
    rng = np.random.RandomState(0)
    X, y = rng.randn(20, 3).astype('float32'), rng.randint(0, 4, 20).astype('float32')
    mon = Monitor(1, stat_func=lambda a: nd.array([np.abs(a.asnumpy()).max()]),
                  pattern='softmax_output')
    with caplog.at_level(logging.INFO):
        Module(net()).fit(io.NDArrayIter(X, y, batch_size=5), num_epoch=1, monitor=mon)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith('Batch:')]
    assert len(lines) == 4 and 'softmax_output' in lines[0]


def test_interval_must_be_positive():
    with pytest.raises(FFError, match='interval'):
        Monitor(0)


def test_bad_pattern_is_param_error():
    with pytest.raises(ff.base.ParamError, match='pattern'):
        Monitor(1, pattern='(')


def test_monitor_reports_backward_gradients_as_mxnet():
    x = sym.Variable('data')
    x = sym.FullyConnected(x, num_hidden=2, name='fc_0')
    x = sym.Activation(x, act_type='sigmoid', name='act_0')
    x = sym.LinearRegressionOutput(x, name='softmax')
    it = io.NDArrayIter(nd.array([[0.05, 0.10]]), nd.array([[0.01, 0.99]]), batch_size=1)
    mod = Module(x, context=[ff.cpu()])
    mod.bind(it.provide_data, label_shapes=it.provide_label)
    mon = Monitor(1, stat_func=lambda a: nd.array([np.abs(a.asnumpy()).sum()]), sort=True)
    mod.install_monitor(mon)
    mod.init_params(arg_params={'fc_0_weight': nd.array([[.15, .20], [.25, .30]]),
                                'fc_0_bias': nd.array([.35, .35])})
    mon.tic()
    mod.forward_backward(next(iter(it)))
    res = {name: float(s) for _, name, s in mon.toc()}
    assert sorted(res) == ['act_0_backward_output', 'act_0_output', 'data',
                           'fc_0_backward_output0', 'fc_0_backward_output1',
                           'fc_0_backward_output2', 'fc_0_bias', 'fc_0_output',
                           'fc_0_weight', 'softmax_backward_output0', 'softmax_backward_output1',
                           'softmax_label', 'softmax_output']
    act = 1 / (1 + np.exp(-(np.array([0.05, 0.10]) @ np.array([[.15, .20], [.25, .30]]).T
                            + 0.35)))
    d_act = (act - [0.01, 0.99]) / 2   # LinearRegressionOutput: / outputs per sample
    np.testing.assert_allclose(res['softmax_backward_output0'], np.abs(d_act).sum(), rtol=1e-5)
    np.testing.assert_allclose(res['fc_0_backward_output2'],
                               np.abs(d_act * act * (1 - act)).sum(), rtol=1e-5)
    assert res['fc_0_backward_output0'] == 0        # no gradient requested for the data
    mon_all = Monitor(1, pattern='.*backward_input', monitor_all=True)
    mod.install_monitor(mon_all)
    mon_all.tic()
    it.reset()
    mod.forward_backward(next(iter(it)))
    assert {n for _, n, _ in mon_all.toc()} >= {'fc_0_backward_input0', 'act_0_backward_input0'}
