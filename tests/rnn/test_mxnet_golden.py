"""Real MXNet 1.9.1 recurrent checkpoints (tools/make_rnn_fixtures.py) load and train the same.

(a) a fused 2-layer bidirectional LSTM saved with ``mx.rnn.save_rnn_checkpoint``
(weights unpacked per gate) loads through ``ff.rnn.load_rnn_checkpoint``;
(b) an Embedding + unrolled LSTMCell/GRUCell stack loads through
``ff.model.load_checkpoint``. Both reproduce MXNet's training outputs, every
gradient, and the parameters after 2 SGD steps of ``Module`` within 1e-4.
"""
import importlib.util
import json
import os

import numpy as np
import pytest

import ffnumba as ff

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, 'tests', 'data')


def _tools():
    spec = importlib.util.spec_from_file_location(
        'make_rnn_fixtures', os.path.join(ROOT, 'tools', 'make_rnn_fixtures.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TOOLS = _tools()


def _load(name):
    prefix = os.path.join(DATA, 'mx_rnn_' + name)
    if name == 'fused':
        _, cell = TOOLS.fused_net(ff)
        sym, arg, aux = ff.rnn.load_rnn_checkpoint(cell, prefix, 0)
    else:
        sym, arg, aux = ff.model.load_checkpoint(prefix, 0)
    return sym, arg, aux, np.load(prefix + '_expected.npz')


def _close(a, b, what):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4, err_msg=what)


@pytest.mark.parametrize('name', ['fused', 'cells'])
def test_checkpoint_reproduces_mxnet_outputs_gradients_and_sgd(name):
    sym, arg, aux, exp = _load(name)
    mod = ff.mod.Module(sym, data_names=['data'], label_names=['softmax_label'],
                        context=ff.cpu())
    mod.bind(data_shapes=[('data', exp['data0'].shape)],
             label_shapes=[('softmax_label', exp['label0'].shape)])
    mod.set_params(arg, aux)
    batch = ff.io.DataBatch([ff.nd.array(exp['data0'])], [ff.nd.array(exp['label0'])])
    mod.forward(batch, is_train=True)
    _close(mod.get_outputs()[0].asnumpy(), exp['output'], 'output')
    mod.backward()
    grads = dict(zip(mod._exec_group.param_names, mod._exec_group.grad_arrays))
    names = [k[5:] for k in exp.files if k.startswith('grad:')]
    assert sorted(names) == sorted(grads)
    for k in names:
        _close(grads[k][0].asnumpy(), exp['grad:' + k], 'grad of ' + k)
    mod.init_optimizer(optimizer='sgd', optimizer_params=dict(
        TOOLS.SGD, rescale_grad=1.0 / exp['label1'].size))
    for i in (1, 2):
        mod.forward_backward(ff.io.DataBatch([ff.nd.array(exp['data%d' % i])],
                                             [ff.nd.array(exp['label%d' % i])]))
        mod.update()
    after, _ = mod.get_params()
    for k in names:
        _close(after[k].asnumpy(), exp['after:' + k], 'after 2 SGD steps: ' + k)


def test_fused_checkpoint_is_saved_unpacked_and_round_trips(tmp_path):
    sym, arg, aux, _ = _load('fused')
    raw = ff.nd.load(os.path.join(DATA, 'mx_rnn_fused-0000.params'))
    assert 'arg:lstm_l0_i2h_i_weight' in raw and 'arg:lstm_r1_h2h_o_bias' in raw
    assert 'arg:lstm_parameters' not in raw
    _, cell = TOOLS.fused_net(ff)
    prefix = str(tmp_path / 'again')
    ff.rnn.save_rnn_checkpoint(cell, prefix, 3, sym, arg, aux)
    again = ff.nd.load(prefix + '-0003.params')
    assert sorted(again) == sorted(raw)
    for k in raw:
        np.testing.assert_array_equal(again[k].asnumpy(), raw[k].asnumpy())


def test_unrolled_graph_names_match_mxnet():
    with open(os.path.join(DATA, 'mx_rnn_names.json')) as fh:
        want = json.load(fh)
    got = json.loads(json.dumps(TOOLS.cell_graphs(ff)))
    assert sorted(got) == sorted(want)
    for k in want:
        for field in ('args', 'outs', 'nodes'):
            assert got[k][field] == want[k][field], (k, field)
