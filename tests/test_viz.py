"""Tests of ff.viz against MXNet 1.9.1's golden output (tools/make_viz_fixtures.py)."""
import json
import os
import re
import sys
import types
import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba as ff
from ffnumba import viz
from ffnumba.base import FFError

try:
    import graphviz
except ImportError:  # optional dependency: the tests below cover both cases
    graphviz = None

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data')
with open(os.path.join(DATA, 'viz_cases.json')) as _f:
    CASES = json.load(_f)


# The same networks as tools/make_viz_fixtures.py, built with ff.
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


def _summary_kwargs(case):
    kw = dict(CASES[case]['summary_kwargs'])
    if 'shape' in kw:
        kw['shape'] = {k: tuple(v) for k, v in kw['shape'].items()}
    return kw


def _plot_kwargs(case):
    kw = dict(CASES[case]['plot_kwargs'])
    if 'shape' in kw:
        kw['shape'] = {k: tuple(v) for k, v in kw['shape'].items()}
    if 'dtype' in kw:
        kw['dtype'] = {k: np.dtype(v).type for k, v in kw['dtype'].items()}
    return kw


def _expected_text(case):
    with open(os.path.join(DATA, 'viz_%s.txt' % case)) as f:
        return f.read()


class _Recorder:
    """Stand-in for graphviz.Digraph that records calls (as the fixture tool does)."""

    def __init__(self, name=None, format=None, **kwargs):  # noqa: A002
        self.record = {'name': name, 'format': format, 'nodes': [], 'edges': []}

    def node(self, name, label=None, **attrs):
        self.record['nodes'].append({'name': name, 'label': label, 'attrs': attrs})

    def edge(self, tail_name, head_name, **attrs):
        self.record['edges'].append({'tail': tail_name, 'head': head_name, 'attrs': attrs})


@pytest.fixture
def recorder(monkeypatch):
    monkeypatch.setitem(sys.modules, 'graphviz', types.SimpleNamespace(Digraph=_Recorder))


@pytest.mark.parametrize('case', sorted(CASES))
def test_print_summary_matches_mxnet(case, capsys):
    sym = BUILDERS[CASES[case]['builder']](ff)
    assert viz.print_summary(sym, **_summary_kwargs(case)) is None
    assert capsys.readouterr().out == _expected_text(case)


@pytest.mark.parametrize('case', sorted(CASES))
def test_print_summary_of_mxnet_json(case, capsys):
    sym = ff.sym.load_json(json.dumps(CASES[case]['symbol_json']))
    viz.print_summary(sym, **_summary_kwargs(case))
    assert capsys.readouterr().out == _expected_text(case)


def test_print_summary_layout_details(capsys):
    viz.print_summary(mlp(ff), shape={'data': (100, 784)})
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line) == 120 for line in lines if not line.startswith('Total'))
    assert lines[1].index('Output Shape') == int(120 * .44)
    assert lines[1].index('Param #') == int(120 * .64)
    assert lines[1].index('Previous Layer') == int(120 * .74)
    assert lines[-2] == 'Total params: %d' % (785 * 128 + 129 * 64 + 65 * 10)
    # the caller's positions list is not changed
    pos = [.5, .6, .7, 1.]
    viz.print_summary(mlp(ff), positions=pos, line_length=60)
    assert pos == [.5, .6, .7, 1.]


@given(st.lists(st.integers(1, 9), min_size=1, max_size=4), st.integers(1, 9),
       st.booleans())
def test_total_params_equals_parameter_sizes_for_mlp(widths, n_in, no_bias):
    import contextlib
    import io
    net = ff.sym.Variable('data')
    for i, w in enumerate(widths):
        net = ff.sym.FullyConnected(net, num_hidden=w, no_bias=no_bias and i % 2 == 0,
                                    name='fc%d' % i)
        net = ff.sym.BatchNorm(net, name='bn%d' % i)
    args, _, _ = net.infer_shape(data=(3, n_in))
    want = sum(int(np.prod(s)) for name, s in zip(net.list_arguments(), args) if name != 'data')
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        viz.print_summary(net, shape={'data': (3, n_in)})
    total = re.search(r'Total params: (\d+)', buf.getvalue()).group(1)
    assert int(total) == want


def test_print_summary_errors():
    with pytest.raises(FFError) as err:
        viz.print_summary('not a symbol')
    assert isinstance(err.value, TypeError)
    assert 'symbol' in str(err.value)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        with pytest.raises(FFError) as err:
            viz.print_summary(mlp(ff), shape={'softmax_label': (4,)})
    assert isinstance(err.value, ValueError)
    assert 'incomplete' in str(err.value)


@pytest.mark.parametrize('case', sorted(CASES))
def test_plot_network_structure_matches_mxnet(case, recorder):
    sym = BUILDERS[CASES[case]['builder']](ff)
    dot = viz.plot_network(sym, **_plot_kwargs(case))
    assert json.loads(json.dumps(dot.record)) == CASES[case]['plot']


def test_plot_network_labels_and_hiding(recorder):
    rec = viz.plot_network(convbn(ff), shape={'data': (2, 3, 16, 16)}).record
    nodes = {n['name']: n for n in rec['nodes']}
    assert 'conv1_weight' not in nodes and 'bn1_moving_mean' not in nodes
    assert nodes['data']['attrs']['shape'] == 'oval'
    assert nodes['conv1']['label'] == 'Convolution\n3x3/1, 8'
    assert nodes['conv2']['label'] == 'Convolution\n3x3/2x2, 6'
    assert nodes['pool1']['label'] == 'Pooling\nmax, 2x2/2x2'
    assert nodes['lrelu2']['label'] == 'LeakyReLU\nleaky'
    assert nodes['fc_out']['label'] == 'FullyConnected\n10'
    edges = {(e['tail'], e['head']): e['attrs'] for e in rec['edges']}
    assert edges[('conv1', 'data')] == {'dir': 'back', 'arrowtail': 'open', 'label': '3x16x16'}
    assert edges[('bn1', 'conv1')]['label'] == '8x16x16'
    assert ('softmax', 'softmax_label') in edges
    assert not any(h.endswith(('_weight', '_bias', '_gamma', '_beta')) for _, h in edges)
    shown = viz.plot_network(convbn(ff), hide_weights=False).record
    heads = {e['head'] for e in shown['edges']}
    assert {'conv1_weight', 'bn1_gamma', 'bn1_moving_var'} <= heads
    assert 'conv1_weight' not in {n['name'] for n in shown['nodes']}


def test_plot_network_duplicate_names_warn(recorder):
    a = ff.sym.Variable('x')
    net = ff.sym.FullyConnected(a, num_hidden=2, name='x')
    with pytest.warns(RuntimeWarning, match='Repeated names: x'):
        viz.plot_network(net)


def test_plot_network_without_graphviz(monkeypatch):
    monkeypatch.setitem(sys.modules, 'graphviz', None)  # makes `import graphviz` fail
    with pytest.raises(FFError, match='pip install graphviz') as err:
        viz.plot_network(mlp(ff))
    assert isinstance(err.value, ImportError)


def test_plot_network_with_real_graphviz_or_clear_error():
    """graphviz is optional: with it a real Digraph comes back; without, an FFError."""
    net = mlp(ff)
    if graphviz is None:
        with pytest.raises(FFError, match='pip install graphviz'):
            viz.plot_network(net, shape={'data': (100, 784)})
        return
    dot = viz.plot_network(net, title='mlp', save_format='png', shape={'data': (100, 784)},
                           node_attrs={'fixedsize': 'false'})
    assert isinstance(dot, graphviz.Digraph)
    assert dot.name == 'mlp' and dot.format == 'png'
    src = dot.source
    assert re.search(r'\bfc1 \[label="FullyConnected\n128"[^\]]*fillcolor="#fb8072"', src)
    assert 'fixedsize=false' in src
    assert re.search(r'\bdata \[label=data[^\]]*shape=oval', src)
    assert re.search(r'\bfc1 -> data \[label=784 arrowtail=open dir=back\]', src)
    assert re.search(r'\bfc2 -> relu1 \[label=128 ', src)
    # one edge per operator input that is not a weight: 5 chain links, data, softmax_label
    assert src.count('->') == 7
    assert re.search(r'\bsoftmax -> softmax_label \[label="" ', src)
    assert 'fc1_weight' not in src
