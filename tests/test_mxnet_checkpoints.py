"""Checkpoints written by real MXNet 1.9.1 load and reproduce MXNet's numbers.

The files in tests/data/mx_* come from tools/make_mxnet_checkpoints.py (run once with
MXNet 1.9.1, MKL-DNN off). For each network: ``ff.model.load_checkpoint`` reads the symbol
JSON and the .params file; binding it with the saved batch must give MXNet's eval and
training outputs, the gradient of every argument, and (BatchNorm) the moving statistics
after one training forward+backward.
"""
import os

import numpy as np
import pytest

import ffnumba as ff
from ffnumba.testing import assert_almost_equal

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data')
TOL = {'mlp': 1e-5, 'lenet': 1e-4, 'bnnet': 1e-4}


def _bind(name):
    sym, arg, aux = ff.model.load_checkpoint(os.path.join(DATA, 'mx_' + name), 1)
    exp = np.load(os.path.join(DATA, 'mx_%s_expected.npz' % name))
    exe = sym.simple_bind(ff.cpu(), data=exp['data'].shape, grad_req='write')
    exe.copy_params_from(arg, aux)
    exe.arg_dict['data'][:] = exp['data']
    exe.arg_dict['softmax_label'][:] = exp['label']
    return sym, arg, aux, exp, exe


@pytest.mark.parametrize('name', sorted(TOL))
def test_load_checkpoint_matches_mxnet(name):
    sym, arg, aux, exp, exe = _bind(name)
    assert set(arg) | {'data', 'softmax_label'} == set(sym.list_arguments())
    assert set(aux) == set(sym.list_auxiliary_states())
    tol = TOL[name]
    exe.forward(is_train=False)
    assert_almost_equal(exe.outputs[0].asnumpy(), exp['eval_output'], tol, tol,
                        names=('ffnumba eval output', 'MXNet'))
    exe.forward(is_train=True)
    assert_almost_equal(exe.outputs[0].asnumpy(), exp['train_output'], tol, tol,
                        names=('ffnumba train output', 'MXNet'))
    exe.backward()
    for key in exp.files:
        if key.startswith('grad:'):
            n = key[5:]
            assert_almost_equal(exe.grad_dict[n].asnumpy(), exp[key], tol, tol,
                                names=('ffnumba grad of ' + n, 'MXNet'))
        elif key.startswith('aux_after:'):
            n = key[10:]
            assert_almost_equal(exe.aux_dict[n].asnumpy(), exp[key], tol, tol,
                                names=('ffnumba ' + n + ' after a training step', 'MXNet'))
        elif key.startswith('arg_after:') and key[10:] not in ('data', 'softmax_label'):
            n = key[10:]
            assert_almost_equal(exe.arg_dict[n].asnumpy(), exp[key], tol, tol,
                                names=('ffnumba ' + n + ' after a training step', 'MXNet'))


@pytest.mark.parametrize('name', sorted(TOL))
def test_checkpoint_round_trip_is_byte_identical(tmp_path, name):
    sym, arg, aux = ff.model.load_checkpoint(os.path.join(DATA, 'mx_' + name), 1)
    prefix = str(tmp_path / name)
    ff.model.save_checkpoint(prefix, 1, sym, arg, aux)
    with open(os.path.join(DATA, 'mx_%s-0001.params' % name), 'rb') as f:
        theirs = f.read()
    with open(prefix + '-0001.params', 'rb') as f:
        ours = f.read()
    assert ours == theirs
    with open(os.path.join(DATA, 'mx_%s-symbol.json' % name)) as f:
        theirs = f.read()
    with open(prefix + '-symbol.json') as f:
        ours = f.read()
    assert ours == theirs


def test_mxnet_mlp_runs_in_feedforward():
    model = ff.FeedForward.load(os.path.join(DATA, 'mx_mlp'), 1)
    exp = np.load(os.path.join(DATA, 'mx_mlp_expected.npz'))
    prob = model.predict(exp['data'])
    assert_almost_equal(prob, exp['eval_output'], 1e-5, 1e-5, names=('FeedForward.predict', 'MXNet'))
