"""ff.rnn cells: fused vs unrolled equivalence, begin states, modifiers, weights, io."""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba.base import FFError, ParamError
from ffnumba.testing import bind_numpy

T, N, C, H = 4, 3, 5, 3


def _run(sym, values, heads_seed=1):
    """Outputs and gradients of ``sym`` (float64) with random head gradients."""
    exe = bind_numpy(sym, values, grad_req='write', dtype='float64')
    exe.forward(is_train=True)
    rng = np.random.default_rng(heads_seed)
    heads = [rng.standard_normal(o.shape) for o in exe.outputs]
    exe.backward([ff.nd.array(h, dtype='float64') for h in heads])
    return ([o.asnumpy() for o in exe.outputs],
            {k: g.asnumpy() for k, g in exe.grad_dict.items() if g is not None})


@pytest.mark.parametrize('mode', ['lstm', 'gru', 'rnn_tanh', 'rnn_relu'])
@pytest.mark.parametrize('layout', ['TNC', 'NTC'])
def test_fused_and_unfused_cells_agree(mode, layout):
    fused = ff.rnn.FusedRNNCell(H, num_layers=2, mode=mode, bidirectional=True, prefix='m_')
    data = ff.sym.var('data')
    kw = dict(dtype='float64')
    f_out, _ = fused.unroll(T, data, layout=layout, merge_outputs=True,
                            begin_state=fused.begin_state(**kw))
    unfused = fused.unfuse()
    u_out, _ = unfused.unroll(T, data, layout=layout, merge_outputs=True,
                              begin_state=unfused.begin_state(**kw))
    dshape = (T, N, C) if layout == 'TNC' else (N, T, C)
    rng = np.random.default_rng(0)
    size = f_out.infer_shape(data=dshape)[0][1][0]
    x = rng.uniform(-1, 1, dshape)
    packed = {'m_parameters': ff.nd.array(rng.uniform(-0.5, 0.5, size), dtype='float64')}
    per_gate = fused.unpack_weights(packed)
    assert 'm_l0_i2h_i_weight' in per_gate or mode != 'lstm'
    u_args = unfused.pack_weights(per_gate)
    assert sorted(u_args) == sorted(u_out.list_arguments()[1:])
    f_res = _run(f_out, {'data': x, 'm_parameters': packed['m_parameters'].asnumpy()})
    u_res = _run(u_out, dict({k: v.asnumpy() for k, v in u_args.items()}, data=x))
    np.testing.assert_allclose(f_res[0][0], u_res[0][0], rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(f_res[1]['data'], u_res[1]['data'], rtol=1e-8, atol=1e-10)
    u_grads = {k: ff.nd.array(v, dtype='float64') for k, v in u_res[1].items() if k != 'data'}
    back = fused.pack_weights(unfused.unpack_weights(u_grads))
    np.testing.assert_allclose(back['m_parameters'].asnumpy(), f_res[1]['m_parameters'],
                               rtol=1e-8, atol=1e-10)


def test_pack_unpack_round_trip_and_names():
    cell = ff.rnn.LSTMCell(2, prefix='lstm_')
    args = {'lstm_i2h_weight': ff.nd.array(np.arange(24.).reshape(8, 3)),
            'lstm_i2h_bias': ff.nd.array(np.arange(8.)),
            'lstm_h2h_weight': ff.nd.array(np.arange(16.).reshape(8, 2)),
            'lstm_h2h_bias': ff.nd.array(np.arange(8.)), 'other': ff.nd.zeros((1,))}
    un = cell.unpack_weights(args)
    assert sorted(un) == sorted(['other'] + ['lstm_%s_%s_%s' % (g, q, k)
                                              for g in ('i2h', 'h2h') for q in 'ifco'
                                              for k in ('weight', 'bias')])
    assert un['lstm_i2h_f_weight'].asnumpy().tolist() == [[6, 7, 8], [9, 10, 11]]
    back = cell.pack_weights(un)
    for k in args:
        np.testing.assert_array_equal(back[k].asnumpy(), args[k].asnumpy())


def test_begin_state_emits_named_zeros_with_unknown_batch():
    cell = ff.rnn.LSTMCell(4, prefix='l_')
    states = cell.begin_state()
    assert [s.name for s in states] == ['l_begin_state_0', 'l_begin_state_1']
    assert states[0].list_attr()['__layout__'] == 'NC'
    assert '"op": "_zeros"' in states[0].tojson()
    out, new = cell(ff.sym.var('x'), states)
    out, new = cell(ff.sym.var('x2'), new)
    args, outs, _ = out.infer_shape(x=(7, 3), x2=(7, 3))
    assert outs == [(7, 4)] and dict(zip(out.list_arguments(), args))['l_h2h_weight'] == (16, 4)
    exe = out.simple_bind(ff.cpu(), x=(7, 3), x2=(7, 3))
    exe.forward()
    assert exe.outputs[0].shape == (7, 4)
    # Variables as begin states: the caller feeds them
    var_states = ff.rnn.GRUCell(3, prefix='g_').begin_state(func=ff.sym.Variable)
    assert var_states[0].name == 'g_begin_state_0'


def test_fused_cell_initializer_sets_forget_bias():
    cell = ff.rnn.FusedRNNCell(2, num_layers=1, mode='lstm', prefix='f_')
    out, _ = cell.unroll(3, ff.sym.var('data'), layout='TNC', merge_outputs=True)
    mod = ff.mod.Module(out, data_names=['data'], label_names=[])
    mod.bind(data_shapes=[('data', (3, 2, 4))], for_training=False)
    mod.init_params(initializer=ff.init.Xavier())
    arg, _ = mod.get_params()
    un = cell.unpack_weights(arg)
    assert np.all(un['f_l0_i2h_f_bias'].asnumpy() == 1.0)
    assert np.all(un['f_l0_h2h_f_bias'].asnumpy() == 1.0)
    assert np.all(un['f_l0_i2h_i_bias'].asnumpy() == 0.0)
    assert np.abs(un['f_l0_i2h_i_weight'].asnumpy()).max() > 0


def test_modifier_and_dropout_cells():
    base = ff.rnn.GRUCell(3, prefix='g_')
    res = ff.rnn.ResidualCell(base)
    outs, _ = res.unroll(2, ff.sym.var('data'), layout='NTC', merge_outputs=True)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (2, 2, 3))
    vals = {n: rng.uniform(-1, 1, s) for n, s in
            zip(outs.list_arguments(), outs.infer_shape(data=(2, 2, 3))[0])}
    vals['data'] = x
    plain, _ = ff.rnn.GRUCell(3, prefix='g_').unroll(2, ff.sym.var('data'), layout='NTC',
                                                     merge_outputs=True)
    a = bind_numpy(outs, vals, grad_req='null', dtype='float32')
    b = bind_numpy(plain, vals, grad_req='null', dtype='float32')
    a.forward()
    b.forward()
    np.testing.assert_allclose(a.outputs[0].asnumpy(), b.outputs[0].asnumpy() + x, rtol=1e-5)
    with pytest.raises(FFError, match='modifier'):
        base.begin_state()
    zone = ff.rnn.ZoneoutCell(ff.rnn.RNNCell(3, prefix='z_'), zoneout_outputs=0.5,
                              zoneout_states=0.5)
    zo, _ = zone.unroll(3, ff.sym.var('data'), layout='NTC', merge_outputs=True)
    shapes = zo.infer_shape(data=(2, 3, 4))[0]
    vals = {n: rng.uniform(-1, 1, s) for n, s in zip(zo.list_arguments(), shapes)}
    exe = bind_numpy(zo, vals, grad_req='null', dtype='float32')
    exe.forward(is_train=False)
    ref, _ = ff.rnn.RNNCell(3, prefix='z_').unroll(3, ff.sym.var('data'), layout='NTC',
                                                   merge_outputs=True)
    r = bind_numpy(ref, vals, grad_req='null', dtype='float32')
    r.forward()
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), r.outputs[0].asnumpy(), rtol=1e-5)
    with pytest.raises(FFError, match='steppable'):
        ff.rnn.ZoneoutCell(ff.rnn.FusedRNNCell(2))
    drop = ff.rnn.DropoutCell(0.5)
    d_out, states = drop.unroll(3, ff.sym.var('data'), layout='NTC', merge_outputs=True)
    assert states == [] and d_out.list_arguments() == ['data']
    with pytest.raises(ParamError):
        ff.rnn.DropoutCell('0.5')


def test_bidirectional_step_cells_unmerged_outputs():
    bi = ff.rnn.BidirectionalCell(ff.rnn.LSTMCell(2, prefix='l_'), ff.rnn.LSTMCell(2, prefix='r_'))
    outs, states = bi.unroll(3, ff.sym.var('data'), layout='NTC', merge_outputs=False)
    assert [o.name for o in outs] == ['bi_t0', 'bi_t1', 'bi_t2']
    assert len(states) == 2 and len(states[0]) == 2
    assert ff.sym.Group(outs).infer_shape(data=(5, 3, 4))[1] == [(5, 4)] * 3
    with pytest.raises(FFError, match='cannot be stepped'):
        bi(ff.sym.var('x'), [])


def test_encode_sentences_and_bucket_iter():
    sents = [['a', 'b', 'c'], ['b', 'c'], ['c', 'a', 'a', 'b'], ['a'], ['b', 'b']]
    coded, vocab = ff.rnn.encode_sentences(sents, invalid_label=0, start_label=1)
    assert vocab == {'\n': 0, 'a': 1, 'b': 2, 'c': 3}
    assert coded[2] == [3, 1, 1, 2]
    with pytest.raises(FFError, match='unknown token'):
        ff.rnn.encode_sentences([['z']], vocab=dict(vocab))
    more, v2 = ff.rnn.encode_sentences([['z', 'a']], vocab=dict(vocab), unknown_token='<unk>')
    assert more == [[v2['<unk>'], 1]]
    ff.random.seed(3)
    it = ff.rnn.BucketSentenceIter(coded, 2, buckets=[2, 4], invalid_label=0)
    assert it.default_bucket_key == 4
    assert it.provide_data[0].shape == (2, 4)
    seen = []
    for batch in it:
        d, lab = batch.data[0].asnumpy(), batch.label[0].asnumpy()
        assert d.shape == (2, batch.bucket_key)
        np.testing.assert_array_equal(lab[:, :-1], d[:, 1:])
        assert np.all(lab[:, -1] == 0)
        seen.append(batch.bucket_key)
    assert sorted(seen) == [2, 2, 4] or sorted(seen) == [2, 4]
    tn = ff.rnn.BucketSentenceIter(coded, 2, buckets=[2, 4], invalid_label=0, layout='TN')
    assert tn.next().data[0].shape[1] == 2
    with pytest.raises(ParamError):
        ff.rnn.BucketSentenceIter(coded, 2, layout='NTC')


def test_rnn_checkpoint_callback(tmp_path):
    cell = ff.rnn.LSTMCell(2, prefix='lstm_')
    out, _ = cell.unroll(2, ff.sym.var('data'), layout='NTC', merge_outputs=True)
    args = {'lstm_i2h_weight': ff.nd.ones((8, 3)), 'lstm_i2h_bias': ff.nd.zeros((8,)),
            'lstm_h2h_weight': ff.nd.ones((8, 2)), 'lstm_h2h_bias': ff.nd.zeros((8,))}
    cb = ff.rnn.do_rnn_checkpoint(cell, str(tmp_path / 'ck'), period=2)
    cb(0, out, args, {})
    assert not (tmp_path / 'ck-0001.params').exists()
    cb(1, out, args, {})
    raw = ff.nd.load(str(tmp_path / 'ck-0002.params'))
    assert 'arg:lstm_i2h_f_weight' in raw
    _, arg, _ = ff.rnn.load_rnn_checkpoint(cell, str(tmp_path / 'ck'), 2)
    np.testing.assert_array_equal(arg['lstm_i2h_weight'].asnumpy(), np.ones((8, 3)))
