"""Write small recurrent-network checkpoints and facts with real MXNet 1.9.1.

Run once with MXNet's own interpreter (never a dependency of ffnumba or CI)::

    /path/to/mxref/bin/python tools/make_rnn_fixtures.py

oneDNN stays ON here: with ``MXNET_MKLDNN_ENABLED=0`` MXNet 1.9.1's reference
CPU ``RNN`` backward fails for LSTM (``Check failed: in_data.size() ==
num_inputs (4 vs. 3)``), so the fused fixtures come from the oneDNN kernels.

Writes into tests/data/:

``mx_rnn_fused-symbol.json``, ``mx_rnn_fused-0000.params``
    (a) a fused 2-layer bidirectional LSTM (``FusedRNNCell``) + FullyConnected
    + SoftmaxOutput, saved with ``mx.rnn.save_rnn_checkpoint`` (weights unpacked
    per gate, ``lstm_l0_i2h_i_weight``...).
``mx_rnn_cells-symbol.json``, ``mx_rnn_cells-0000.params``
    (b) Embedding + unrolled ``LSTMCell``/``GRUCell`` stack + FullyConnected +
    SoftmaxOutput, saved with ``mx.model.save_checkpoint``.
``mx_rnn_<name>_expected.npz``
    the batches, the outputs and every gradient of a training forward/backward
    from the checkpoint, and every parameter after 2 SGD steps of ``Module``
    (lr 0.1, momentum 0.9, wd 1e-3).
``mx_rnn_names.json``
    argument, output and node names of several unrolled cell graphs
    (:func:`cell_graphs`, which the tests run with ffnumba too).
"""
import json
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'data')

FUSED = dict(T=4, N=3, C=5, H=4, K=3)
CELLS = dict(T=4, N=3, V=12, E=5, H=6)
SGD = dict(learning_rate=0.1, momentum=0.9, wd=1e-3)


def fused_net(m):
    """(a): data (T, N, C) -> bidirectional 2-layer LSTM -> FC -> SoftmaxOutput."""
    f = FUSED
    cell = m.rnn.FusedRNNCell(f['H'], num_layers=2, mode='lstm', bidirectional=True,
                              prefix='lstm_')
    out, _ = cell.unroll(f['T'], m.sym.var('data'), layout='TNC', merge_outputs=True)
    net = m.sym.Reshape(out, shape=(-1, 2 * f['H']))
    net = m.sym.FullyConnected(net, num_hidden=f['K'], name='fc')
    label = m.sym.Reshape(m.sym.var('softmax_label'), shape=(-1,))
    return m.sym.SoftmaxOutput(net, label, name='softmax'), cell


def cells_net(m):
    """(b): tokens (N, T) -> Embedding -> LSTMCell, GRUCell unrolled -> FC -> SoftmaxOutput."""
    c = CELLS
    emb = m.sym.Embedding(m.sym.var('data'), input_dim=c['V'], output_dim=c['E'], name='embed')
    stack = m.rnn.SequentialRNNCell()
    stack.add(m.rnn.LSTMCell(c['H'], prefix='lstm_l0_'))
    stack.add(m.rnn.GRUCell(c['H'], prefix='gru_l1_'))
    out, _ = stack.unroll(c['T'], emb, layout='NTC', merge_outputs=True)
    net = m.sym.Reshape(out, shape=(-1, c['H']))
    net = m.sym.FullyConnected(net, num_hidden=c['V'], name='pred')
    label = m.sym.Reshape(m.sym.var('softmax_label'), shape=(-1,))
    return m.sym.SoftmaxOutput(net, label, name='softmax'), stack


def batches(name, seed):
    """Three (data, label) batches: one for gradients, two for SGD steps."""
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(3):
        if name == 'fused':
            f = FUSED
            data = rng.uniform(-1, 1, (f['T'], f['N'], f['C'])).astype(np.float32)
            label = rng.randint(0, f['K'], (f['T'], f['N'])).astype(np.float32)
        else:
            c = CELLS
            data = rng.randint(0, c['V'], (c['N'], c['T'])).astype(np.float32)
            label = rng.randint(0, c['V'], (c['N'], c['T'])).astype(np.float32)
        out.append((data, label))
    return out


def cell_graphs(m):
    """Unrolled graphs of several cell stacks; ``m`` is mxnet or ffnumba.

    Built under a fresh NameManager, so auto-names do not depend on what ran before.
    """
    with m.name.NameManager():
        return _cell_graphs(m)


def _cell_graphs(m):
    data = m.sym.var('data')
    out = {}
    c = m.rnn.SequentialRNNCell()
    c.add(m.rnn.LSTMCell(4, prefix='lstm_l0_'))
    c.add(m.rnn.GRUCell(3, prefix='gru_l1_'))
    c.add(m.rnn.RNNCell(2, prefix='rnn_l2_', activation='relu'))
    o, s = c.unroll(3, data, layout='NTC', merge_outputs=True)
    out['seq'] = o
    o, s = c.unroll(3, data, layout='TNC', merge_outputs=False)
    out['seq_tnc_list'] = m.sym.Group(o + s)
    f = m.rnn.FusedRNNCell(4, num_layers=2, mode='gru', bidirectional=True, get_next_state=True,
                           prefix='f_')
    o, s = f.unroll(3, data, layout='TNC', merge_outputs=True)
    out['fused'] = m.sym.Group([o] + s)
    o, s = f.unfuse().unroll(3, data, layout='TNC', merge_outputs=False)
    out['unfused'] = m.sym.Group(o)
    r = m.rnn.ResidualCell(m.rnn.GRUCell(6, prefix='res_'))
    o, s = r.unroll(3, data, layout='NTC', merge_outputs=False)
    out['residual'] = m.sym.Group(o)
    z = m.rnn.ZoneoutCell(m.rnn.RNNCell(3, prefix='z_'), zoneout_outputs=0.3, zoneout_states=0.2)
    o, s = z.unroll(2, data, layout='NTC', merge_outputs=False)
    out['zoneout'] = m.sym.Group(o)
    return {k: {'args': v.list_arguments(), 'outs': v.list_outputs(),
                'nodes': [[n['op'], n['name']] for n in json.loads(v.tojson())['nodes']]}
            for k, v in out.items()}


def make(mx, name, build, seed):
    sym, cell = build(mx)
    (d0, l0), (d1, l1), (d2, l2) = batches(name, seed)
    mod = mx.mod.Module(sym, data_names=['data'], label_names=['softmax_label'],
                        context=mx.cpu())
    mod.bind(data_shapes=[('data', d0.shape)], label_shapes=[('softmax_label', l0.shape)])
    mx.random.seed(seed)
    mod.init_params(initializer=mx.init.Xavier(magnitude=2.5))
    arg, aux = mod.get_params()
    prefix = os.path.join(OUT, 'mx_rnn_' + name)
    if name == 'fused':
        mx.rnn.save_rnn_checkpoint(cell, prefix, 0, sym, arg, aux)
    else:
        mx.model.save_checkpoint(prefix, 0, sym, arg, aux)
    res = {'data0': d0, 'label0': l0, 'data1': d1, 'label1': l1, 'data2': d2, 'label2': l2}
    batch = mx.io.DataBatch([mx.nd.array(d0)], [mx.nd.array(l0)])
    mod.forward(batch, is_train=True)
    res['output'] = mod.get_outputs()[0].asnumpy()
    mod.backward()
    for k, g in zip(mod._exec_group.param_names, mod._exec_group.grad_arrays):
        res['grad:' + k] = g[0].asnumpy()
    mod.init_optimizer(optimizer='sgd', optimizer_params=dict(SGD, rescale_grad=1.0 / l1.size))
    for d, l in [(d1, l1), (d2, l2)]:
        mod.forward_backward(mx.io.DataBatch([mx.nd.array(d)], [mx.nd.array(l)]))
        mod.update()
    arg2, _ = mod.get_params()
    for k, v in arg2.items():
        res['after:' + k] = v.asnumpy()
    np.savez(prefix + '_expected.npz', **res)
    print(name, sorted(res))


if __name__ == '__main__':
    import mxnet as mx
    make(mx, 'fused', fused_net, 11)
    make(mx, 'cells', cells_net, 12)
    with open(os.path.join(OUT, 'mx_rnn_names.json'), 'w') as fh:
        json.dump(cell_graphs(mx), fh, indent=0, sort_keys=True)
