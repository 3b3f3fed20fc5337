"""Generate golden output of MXNet 1.9.1's ``mx.viz`` for ``tests/test_viz.py``.

Run with the reference install (never imported by the package or the tests)::

    MXNET_MKLDNN_ENABLED=0 /work/mxref/bin/python tools/make_viz_fixtures.py

For every case it writes ``tests/data/viz_<case>.txt``: the exact text that
``mx.viz.print_summary`` prints. ``tests/data/viz_cases.json`` holds, per
case, MXNet's symbol JSON and the arguments used, and the node/edge calls
that ``mx.viz.plot_network`` makes on a ``graphviz.Digraph`` (recorded with a
stand-in ``graphviz`` module, since the reference install has none).

The network builders below are repeated in ``tests/test_viz.py`` (with
``ff`` in place of ``mx``); keep both in step.
"""
import contextlib
import io
import json
import os
import sys
import types

import mxnet as mx
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, '..', 'tests', 'data')


def mlp(m):
    net = m.sym.Variable('data')
    net = m.sym.FullyConnected(net, num_hidden=128, name='fc1')
    net = m.sym.Activation(net, act_type='relu', name='relu1')
    net = m.sym.FullyConnected(net, num_hidden=64, name='fc2')
    net = m.sym.Activation(net, act_type='tanh', name='tanh2')
    net = m.sym.FullyConnected(net, num_hidden=10, name='fc3')
    return m.sym.SoftmaxOutput(net, name='softmax')


def convbn(m):
    net = m.sym.Variable('data')
    net = m.sym.Convolution(net, kernel=(3, 3), pad=(1, 1), num_filter=8, name='conv1')
    net = m.sym.BatchNorm(net, fix_gamma=False, name='bn1')
    net = m.sym.Activation(net, act_type='relu', name='relu1')
    net = m.sym.Pooling(net, kernel=(2, 2), stride=(2, 2), pool_type='max', name='pool1')
    net = m.sym.Convolution(net, kernel=(3, 3), stride=(2, 2), num_filter=6, num_group=2,
                            no_bias=True, name='conv2')
    net = m.sym.BatchNorm(net, name='bn2')
    net = m.sym.LeakyReLU(net, act_type='leaky', slope=0.1, name='lrelu2')
    net = m.sym.Pooling(net, global_pool=True, kernel=(1, 1), pool_type='avg', name='gpool')
    fc_4d = m.sym.FullyConnected(net, num_hidden=5, name='fc_on_4d')
    flat = m.sym.Flatten(fc_4d, name='flat')
    net = m.sym.FullyConnected(flat, num_hidden=10, no_bias=True, name='fc_out')
    return m.sym.SoftmaxOutput(net, name='softmax')


def branchy(m):
    data = m.sym.Variable('data')
    emb = m.sym.Embedding(data, input_dim=20, output_dim=6, name='embed')
    fa = m.sym.FullyConnected(emb, num_hidden=8, name='fc_a')
    fb = m.sym.FullyConnected(emb, num_hidden=8, name='a_very_long_layer_name_to_be_cut')
    cat = m.sym.Concat(fa, fb, dim=1, name='concat')
    parts = m.sym.SliceChannel(cat, num_outputs=2, name='split')
    add = m.sym.elemwise_add(parts[0], parts[1], name='add')
    act = m.sym.Activation(add, act_type='sigmoid', name='sig')
    out = m.sym.FullyConnected(act, num_hidden=3, no_bias=True, name='fc_out')
    return m.sym.LinearRegressionOutput(out, name='lro')


BUILDERS = {'mlp': mlp, 'convbn': convbn, 'branchy': branchy}

# case name -> (builder, print_summary kwargs, plot_network kwargs)
CASES = {
    'mlp': ('mlp', dict(shape={'data': (100, 784)}),
            dict(shape={'data': (100, 784)}, dtype={'data': 'float32'})),
    'mlp_noshape': ('mlp', dict(), dict(hide_weights=False, title='mlp')),
    'convbn': ('convbn', dict(shape={'data': (2, 3, 16, 16)}),
               dict(shape={'data': (2, 3, 16, 16)}, node_attrs={'shape': 'oval'})),
    'branchy': ('branchy', dict(shape={'data': (4, 5)}, line_length=80,
                                positions=[30, 50, 60, 80]),
                dict(shape={'data': (4, 5)})),
    'branchy_narrow': ('branchy', dict(shape={'data': (4, 5)}, line_length=70,
                                       positions=[.3, .6, .7, 1.]),
                       dict()),
}


class _Recorder:
    """Stand-in for ``graphviz.Digraph`` that records the calls made on it."""

    def __init__(self, name=None, format=None, **kwargs):  # noqa: A002
        self.record = {'name': name, 'format': format, 'nodes': [], 'edges': []}

    def node(self, name, label=None, **attrs):
        self.record['nodes'].append({'name': name, 'label': label, 'attrs': attrs})

    def edge(self, tail_name, head_name, **attrs):
        self.record['edges'].append({'tail': tail_name, 'head': head_name, 'attrs': attrs})


def main():
    sys.modules['graphviz'] = types.SimpleNamespace(Digraph=_Recorder)
    meta = {}
    for case, (builder, summary_kw, plot_kw) in CASES.items():
        sym = BUILDERS[builder](mx)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            ret = mx.viz.print_summary(sym, **summary_kw)
        assert ret is None
        with open(os.path.join(OUT, 'viz_%s.txt' % case), 'w') as f:
            f.write(buf.getvalue())
        kw = dict(plot_kw)
        if 'dtype' in kw:
            kw['dtype'] = {k: np.dtype(v).type for k, v in kw['dtype'].items()}
        dot = mx.viz.plot_network(sym, **kw)
        meta[case] = {'builder': builder, 'symbol_json': json.loads(sym.tojson()),
                      'summary_kwargs': summary_kw, 'plot_kwargs': plot_kw,
                      'plot': dot.record}
    with open(os.path.join(OUT, 'viz_cases.json'), 'w') as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write('\n')


if __name__ == '__main__':
    main()
