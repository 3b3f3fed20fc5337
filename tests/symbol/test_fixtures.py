"""Golden files written by MXNet 1.9.1 (tools/make_symbol_fixtures.py).

The same graphs built with ffnumba must serialise to the same bytes, list
the same names, infer the same shapes and types, and (the mlp) compute the
same forward outputs and gradients.
"""
import importlib.util
import json
import os

import numpy as np
import pytest

import ffnumba as ff
import ffnumba.ndarray as nd
import ffnumba.symbol as sym
from ffnumba.attribute import AttrScope
from ffnumba.name import NameManager, Prefix

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, '..', 'data')
_spec = importlib.util.spec_from_file_location(
    'make_symbol_fixtures', os.path.join(HERE, '..', '..', 'tools', 'make_symbol_fixtures.py'))
fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fixtures)

with open(os.path.join(DATA, 'symbol_facts.json')) as _f:
    FACTS = json.load(_f)


def build(case):
    with NameManager():
        if case == 'attrs':
            return fixtures.attrs(sym, AttrScope, Prefix)
        return fixtures.CASES[case](sym)


def read(name):
    with open(os.path.join(DATA, name)) as f:
        return f.read()


@pytest.mark.parametrize('case', sorted(FACTS))
def test_json_bytes(case):
    assert build(case).tojson() == read('symbol_%s.json' % case)


@pytest.mark.parametrize('case', sorted(FACTS))
def test_load_mxnet_json_round_trip(case):
    text = read('symbol_%s.json' % case)
    assert sym.load_json(text).tojson() == text


@pytest.mark.parametrize('case', sorted(FACTS))
def test_names_attrs_and_inference(case):
    s = sym.load_json(read('symbol_%s.json' % case))
    f = FACTS[case]
    assert s.list_arguments() == f['arguments']
    assert s.list_outputs() == f['outputs']
    assert s.list_auxiliary_states() == f['aux']
    assert s.list_inputs() == f['inputs']
    assert s.get_internals().list_outputs() == f['internals']
    assert s.attr_dict() == f['attr_dict']
    shapes = {k: tuple(v) for k, v in f['shapes'].items()}
    arg, out, aux = s.infer_shape(**shapes)
    assert [list(x) for x in arg] == f['arg_shapes']
    assert [list(x) for x in out] == f['out_shapes']
    assert [list(x) for x in aux] == f['aux_shapes']
    arg_t, out_t, _ = s.infer_type(**{k: 'float32' for k in shapes})
    assert [np.dtype(t).name for t in arg_t] == f['arg_types']
    assert [np.dtype(t).name for t in out_t] == f['out_types']


def test_old_style_json_upgrades_like_mxnet(tmp_path):
    s = sym.load(os.path.join(DATA, 'symbol_old_style.json'))
    assert s.tojson() == read('symbol_old_style_upgraded.json')
    assert s.list_arguments() == ['data', 'fc1_weight', 'fc1_bias', 'fc2_weight', 'fc2_bias',
                                  'softmax_label']
    assert s.infer_shape(data=(2, 5))[1] == [(2, 3)]


def test_mlp_forward_backward_matches_mxnet():
    run = json.loads(read('symbol_mlp_run.json'))
    s = sym.load_json(read('symbol_mlp.json'))
    args = {k: nd.array(np.array(v), dtype='float64') for k, v in run['args'].items()}
    grads = {k: nd.zeros(a.shape, dtype='float64') for k, a in args.items()}
    exe = s.bind(ff.cpu(), args, args_grad=grads)
    out = exe.forward(is_train=True)[0].asnumpy()
    np.testing.assert_allclose(out, np.array(run['output']), rtol=1e-10, atol=1e-12)
    exe.backward()
    for k, g in run['grads'].items():
        np.testing.assert_allclose(exe.grad_dict[k].asnumpy(), np.array(g), rtol=1e-9,
                                   atol=1e-12, err_msg=k)


def test_old_style_json_runs():
    s = sym.load(os.path.join(DATA, 'symbol_old_style.json'))
    exe = s.simple_bind(ff.cpu(), data=(2, 5))
    assert exe.arg_dict['fc1_weight'].shape == (6, 5)
    for k, a in exe.arg_dict.items():
        a[:] = np.random.RandomState(0).uniform(-1, 1, a.shape)
    out = exe.forward(is_train=True)[0].asnumpy()
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)
    exe.backward()
    assert np.abs(exe.grad_dict['fc1_weight'].asnumpy()).sum() > 0
    assert s.attr_dict()['fc1_weight']['lr_mult'] == '2.0'
