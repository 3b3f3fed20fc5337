"""The index and shape ops against MXNet 1.9.1 itself (fixture from tools/gen_index_ops_golden.py).

For each case: the symbol JSON MXNet wrote loads here and gives MXNet's outputs
and gradients; the same call through ``ff.sym`` writes the same operator name
and attribute strings into its JSON.
"""
import ast
import json
import os

import numpy as np
import pytest

import ffnumba as ff

DATA = os.path.join(os.path.dirname(__file__), '..', '..', 'data', 'index_ops_mxnet.json')
with open(DATA) as _f:
    GOLDEN = json.load(_f)['cases']


def _id(case):
    return '%s-%s' % (case['op'], '-'.join('%s=%s' % kv for kv in sorted(case['params'].items())))


@pytest.mark.parametrize('case', GOLDEN, ids=[_id(c) for c in GOLDEN])
def test_mxnet_json_loads_and_matches_mxnet_numbers(case):
    s = ff.sym.load_json(case['symbol'])
    dt = case['dtype']
    args = {n: ff.nd.array(np.array(v), dtype=dt) for n, v in case['inputs'].items()}
    grads = {n: ff.nd.zeros(a.shape, dtype=dt) for n, a in args.items()}
    exe = s.bind(ff.cpu(), args=args, args_grad=grads, grad_req='write')
    outs = exe.forward(is_train=True)
    assert len(outs) == len(case['outputs'])
    tol = 1e-12 if dt == 'float64' else 1e-6
    for o, e, t in zip(outs, case['outputs'], case['out_dtypes']):
        assert o.dtype == np.dtype(t), (o.dtype, t)
        np.testing.assert_allclose(o.asnumpy(), np.array(e, dtype=t), rtol=tol, atol=tol)
    exe.backward([ff.nd.array(np.array(h), dtype=o.dtype) for h, o in zip(case['heads'], outs)])
    if case['grads'] is not None:
        for n, g in case['grads'].items():
            np.testing.assert_allclose(exe.grad_dict[n].asnumpy(), np.array(g), rtol=tol,
                                       atol=tol, err_msg='gradient of %s' % n)
    else:      # MXNet has none here; ffnumba's is the math's: 0 for argmax_channel
        if case['op'] == 'argmax_channel':
            assert all((g.asnumpy() == 0).all() for g in exe.grad_dict.values())


@pytest.mark.parametrize('case', GOLDEN, ids=[_id(c) for c in GOLDEN])
def test_ff_sym_writes_mxnet_attrs(case):
    params = {k: ast.literal_eval(v) for k, v in case['params'].items()}
    names = list(case['inputs'])
    s = getattr(ff.sym, case['op'])(*[ff.sym.Variable(n) for n in names], name='op', **params)
    mine = [n for n in json.loads(s.tojson())['nodes'] if n['op'] != 'null'][0]
    theirs = [n for n in json.loads(case['symbol'])['nodes'] if n['op'] != 'null'][0]
    assert mine['op'] == theirs['op']
    assert mine.get('attrs', {}) == theirs.get('attrs', {})
    assert json.loads(s.tojson())['node_row_ptr'] == json.loads(case['symbol'])['node_row_ptr']
