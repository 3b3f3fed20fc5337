"""Write the symbol/executor golden fixtures in tests/data/ with real MXNet 1.9.1.

Run with the reference install (never imported by the package or the tests)::

    MXNET_MKLDNN_ENABLED=0 /work/mxref/bin/python tools/make_symbol_fixtures.py

Outputs (small text files):

* ``tests/data/symbol_<case>.json``: MXNet's ``tojson()`` of each graph below;
  ffnumba must write the same bytes for the same graph.
* ``tests/data/symbol_facts.json``: per case the argument / output / aux
  names, internals, ``attr_dict`` and inferred shapes and types.
* ``tests/data/symbol_old_style.json``: an old (MXNet 0.x) graph with
  ``param``/``attr`` keys and two-element inputs, hand-written in that
  layout; ``symbol_old_style_upgraded.json`` is what MXNet 1.9.1 writes after
  loading it.
* ``tests/data/symbol_mlp_run.json``: inputs, forward outputs and gradients
  of the ``mlp`` case computed by MXNet.

``tests/symbol/test_fixtures.py`` imports the graph builders from this file
(they take the ``sym`` namespace as an argument) and builds the same graphs
with ffnumba.
"""
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, '..', 'tests', 'data')

XAVIER = '["xavier", {"rnd_type": "uniform", "factor_type": "avg", "magnitude": 3}]'


def mlp(S):
    data = S.Variable('data')
    fc1 = S.FullyConnected(data, num_hidden=8, name='fc1')
    act = S.Activation(fc1, act_type='relu', name='relu1')
    fc2 = S.FullyConnected(act, num_hidden=3, name='fc2')
    return S.SoftmaxOutput(fc2, name='softmax')


def attrs(S, AttrScope, Prefix):
    data = S.Variable('data', shape=(2, 6), lr_mult=2.0, wd_mult=0.5, init=XAVIER, dtype='float32')
    with AttrScope(ctx_group='dev1', lr_mult='0.1'):
        fc = S.FullyConnected(data, num_hidden=4, no_bias=True, flatten=False)
    with Prefix('pre_'):
        bn = S.BatchNorm(fc, fix_gamma=False, momentum=0.8, eps=2e-5)
        act = S.LeakyReLU(bn, act_type='leaky', slope=0.1)
    out = S.Activation(act, act_type='tanh', name='out', attr={'__mirror_stage__': 'True'})
    return S.LinearRegressionOutput(out, name='lro')


def conv(S):
    data = S.Variable('data')
    c = S.Convolution(data, kernel=(3, 3), num_filter=4, pad=(1, 1), stride=(1, 1), name='conv1')
    b = S.BatchNorm(c, name='bn1')
    a = S.Activation(b, act_type='relu')
    p = S.Pooling(a, kernel=(2, 2), stride=(2, 2), pool_type='max', name='pool1')
    f = S.Flatten(p)
    d = S.Dropout(f, p=0.25)
    fc = S.FullyConnected(d, num_hidden=5, name='fc')
    return S.SoftmaxOutput(fc, name='softmax', normalization='batch')


def arith(S):
    x = S.Variable('x')
    y = S.Variable('y')
    return S.Group([x + y, x - 1, 1 - x, -x, x * 2.5, x / y, 2 / x, x ** 2, 2 ** x,
                    x ** y, x > y, x == 1, abs(x), x * y - y / 3.0])


def shared(S):
    x = S.Variable('x')
    h = S.FullyConnected(x, num_hidden=3, name='h')
    t = S.Activation(h, act_type='sigmoid', name='t')
    return S.Group([S.MakeLoss(S.sum(t * h), name='loss'), S.BlockGrad(h, name='blk')])


def concat11(S):
    # more than 10 inputs, arguments and heads: the writer switches to one item per line
    xs = [S.Variable('x%d' % i) for i in range(11)]
    c = S.Concat(*xs, dim=0, name='c')
    return S.Group([c] + [x * 1.0 for x in xs[:10]])


CASES = {'mlp': mlp, 'conv': conv, 'arith': arith, 'shared': shared, 'concat11': concat11}
SHAPES = {'mlp': dict(data=(4, 5)), 'conv': dict(data=(2, 3, 6, 6)),
          'arith': dict(x=(2, 3), y=(2, 3)), 'shared': dict(x=(2, 4)),
          'attrs': dict(data=(2, 6)), 'concat11': {'x%d' % i: (1, 2) for i in range(11)}}


OLD_STYLE = {
    "nodes": [
        {"op": "null", "param": {}, "name": "data", "inputs": [], "backward_source_id": -1,
         "attr": {"__shape__": "(0, 5)"}},
        {"op": "null", "param": {}, "name": "fc1_weight", "inputs": [], "backward_source_id": -1,
         "attr": {"lr_mult": "2.0"}},
        {"op": "null", "param": {}, "name": "fc1_bias", "inputs": [], "backward_source_id": -1},
        {"op": "FullyConnected", "param": {"no_bias": "False", "num_hidden": "6"},
         "name": "fc1", "inputs": [[0, 0], [1, 0], [2, 0]], "backward_source_id": -1},
        {"op": "Activation", "param": {"act_type": "tanh"}, "name": "tanh1",
         "inputs": [[3, 0]], "backward_source_id": -1},
        {"op": "null", "param": {}, "name": "fc2_weight", "inputs": [], "backward_source_id": -1},
        {"op": "null", "param": {}, "name": "fc2_bias", "inputs": [], "backward_source_id": -1},
        {"op": "FullyConnected", "param": {"no_bias": "False", "num_hidden": "3"},
         "name": "fc2", "inputs": [[4, 0], [5, 0], [6, 0]], "backward_source_id": -1},
        {"op": "null", "param": {}, "name": "softmax_label", "inputs": [],
         "backward_source_id": -1},
        {"op": "SoftmaxOutput", "param": {"grad_scale": "1", "ignore_label": "-1",
                                          "multi_output": "False", "use_ignore": "False"},
         "name": "softmax", "inputs": [[7, 0], [8, 0]], "backward_source_id": -1}
    ],
    "arg_nodes": [0, 1, 2, 5, 6, 8],
    "heads": [[9, 0]]
}


def facts(sym, shapes):
    arg_s, out_s, aux_s = sym.infer_shape(**shapes)
    arg_t, out_t, aux_t = sym.infer_type(**{k: 'float32' for k in shapes})
    return {
        'arguments': sym.list_arguments(), 'outputs': sym.list_outputs(),
        'aux': sym.list_auxiliary_states(), 'inputs': sym.list_inputs(),
        'internals': sym.get_internals().list_outputs(), 'attr_dict': sym.attr_dict(),
        'arg_shapes': [list(s) for s in arg_s], 'out_shapes': [list(s) for s in out_s],
        'aux_shapes': [list(s) for s in aux_s],
        'arg_types': [np.dtype(t).name for t in arg_t],
        'out_types': [np.dtype(t).name for t in out_t],
        'shapes': {k: list(v) for k, v in shapes.items()},
    }


def write(name, text):
    with open(os.path.join(DATA, name), 'w') as f:
        f.write(text)


def main():
    import mxnet as mx  # only here: tests import the graph builders above without MXNet
    os.makedirs(DATA, exist_ok=True)
    all_facts = {}
    syms = {}
    for k, f in CASES.items():
        with mx.name.NameManager():  # fresh auto-name counters per case
            syms[k] = f(mx.sym)
    with mx.name.NameManager():
        syms['attrs'] = attrs(mx.sym, mx.AttrScope, mx.name.Prefix)
    for name, s in syms.items():
        write('symbol_%s.json' % name, s.tojson())
        all_facts[name] = facts(s, SHAPES[name])
    write('symbol_facts.json', json.dumps(all_facts, indent=1, sort_keys=True))
    old = json.dumps(OLD_STYLE, indent=2)
    write('symbol_old_style.json', old)
    up = mx.sym.load_json(old)
    write('symbol_old_style_upgraded.json', up.tojson())

    # a forward/backward run of the mlp with fixed arrays
    rng = np.random.RandomState(0)
    s = syms['mlp']
    arg_s, _, _ = s.infer_shape(data=(4, 5))
    args = {n: rng.uniform(-1, 1, sh).astype(np.float64)
            for n, sh in zip(s.list_arguments(), arg_s)}
    args['softmax_label'] = np.array([0, 2, 1, 2], dtype=np.float64)
    exe = s.bind(mx.cpu(), {k: mx.nd.array(v, dtype='float64') for k, v in args.items()},
                 args_grad={k: mx.nd.zeros(v.shape, dtype='float64') for k, v in args.items()})
    out = exe.forward(is_train=True)[0].asnumpy()
    exe.backward()
    run = {'args': {k: v.tolist() for k, v in args.items()}, 'output': out.tolist(),
           'grads': {k: v.asnumpy().tolist() for k, v in exe.grad_dict.items()}}
    write('symbol_mlp_run.json', json.dumps(run))
    print('wrote fixtures to', os.path.normpath(DATA))


if __name__ == '__main__':
    main()
