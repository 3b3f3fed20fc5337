"""Keras-style SimpleRNN, LSTM, GRU, Bidirectional: shapes, names, errors, training on digits rows."""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba import layers as L
from ffnumba.base import ParamError


@pytest.mark.parametrize('layer, seq, units', [
    (L.LSTM(5), False, 5), (L.GRU(4, return_sequences=True), True, 4),
    (L.SimpleRNN(3, activation='relu', go_backwards=True), False, 3),
    (L.Bidirectional(L.LSTM(3)), False, 6), (L.Bidirectional(L.GRU(2, return_sequences=True)),
                                             True, 4)])
def test_output_shapes_and_weight_names(layer, seq, units):
    net = L.Sequential([layer], name='m')
    sym = net.to_symbol(with_loss=False)
    args, outs, _ = sym.infer_shape(data=(2, 7, 3))
    assert outs == [(2, 7, units) if seq else (2, units)]
    names = [a for a in sym.list_arguments() if a != 'data']
    assert len(names) == 1 and names[0].endswith('_parameters'), names


def test_bidirectional_last_step_is_forward_end_and_backward_start():
    net = L.Sequential([L.Bidirectional(L.LSTM(3))], name='m')
    sym = net.to_symbol(with_loss=False)
    seq_net = L.Sequential([L.Bidirectional(L.LSTM(3, return_sequences=True))], name='m')
    seq_sym = seq_net.to_symbol(with_loss=False)
    rng = np.random.default_rng(0)
    args = dict(zip(sym.list_arguments(), sym.infer_shape(data=(2, 5, 4))[0]))
    vals = {k: ff.nd.array(rng.uniform(-1, 1, s)) for k, s in args.items()}
    pname = [k for k in vals if k != 'data'][0]
    seq_vals = {'data': vals['data'], seq_sym.list_arguments()[1]: vals[pname]}
    a = sym.bind(ff.cpu(), vals)
    b = seq_sym.bind(ff.cpu(), seq_vals)
    a.forward()
    b.forward()
    last, full = a.outputs[0].asnumpy(), b.outputs[0].asnumpy()
    np.testing.assert_allclose(last[:, :3], full[:, -1, :3], rtol=1e-6)
    np.testing.assert_allclose(last[:, 3:], full[:, 0, 3:], rtol=1e-6)


def test_bad_arguments():
    with pytest.raises(ParamError, match=r'LSTM: `units` must be a positive int'):
        L.LSTM(0)
    with pytest.raises(ParamError, match='return_state'):
        L.GRU(3, return_state=1)
    with pytest.raises(ParamError, match='Sequential.*return_state'):
        L.Sequential([L.LSTM(3, return_state=True)])
    x = L.Input((4, 2))
    with pytest.raises(ParamError, match=r'LSTM: `initial_state` must be a list of 2'):
        L.LSTM(3)(x, initial_state=[L.Input((3,))])
    with pytest.raises(ParamError, match=r'Bidirectional: `initial_state` must be a list of 2'):
        L.Bidirectional(L.GRU(3))(x, initial_state=[L.Input((3,))])
    with pytest.raises(ParamError, match='activation'):
        L.SimpleRNN(3, activation='sigmoid')
    with pytest.raises(ParamError, match='go_backwards'):
        L.Bidirectional(L.LSTM(2, go_backwards=True))
    with pytest.raises(ParamError, match='layer'):
        L.Bidirectional(L.Dense(2))


def test_lstm_classifier_learns_digit_rows():
    X, y, Xt, yt = ff.datasets.load_digits()
    X, Xt = X.reshape(-1, 8, 8), Xt.reshape(-1, 8, 8)
    ff.random.seed(0)
    net = L.Sequential([L.LSTM(32, input_shape=(8, 8)), L.Dense(10)], name='rows')
    net.compile(optimizer='adam', loss='softmax', metrics=['acc'], learning_rate=0.02)
    history = net.fit(X, y, batch_size=50, epochs=6, validation_data=(Xt, yt), verbose=0)
    assert history.history['val_accuracy'][-1] > 0.85, history.history


def _bind(sym, vals):
    shapes = dict(zip(sym.list_arguments(), sym.infer_shape(
        **{k: v.shape for k, v in vals.items()})[0]))
    rng = np.random.default_rng(1)
    full = {k: ff.nd.array(vals[k] if k in vals else rng.uniform(-0.5, 0.5, s))
            for k, s in shapes.items()}
    exe = sym.bind(ff.cpu(), full)
    exe.forward()
    return [o.asnumpy() for o in exe.outputs], full


@pytest.mark.parametrize('cls', [L.LSTM, L.GRU, L.SimpleRNN])
def test_return_state_then_initial_state_continues_the_sequence(cls):
    """Run on x[:, :3], feed the returned states as initial_state on x[:, 3:] with the same
    weights: the last output is the full sequence's last output and the states agree."""
    k = 2 if cls is L.LSTM else 1
    x = L.Input((7, 3), name='x')
    outs = cls(4, return_state=True, name='r')(x)
    assert len(outs) == 1 + k
    full_sym = L.Model(x, outs).to_symbol(with_loss=False)
    data = np.random.default_rng(0).uniform(-1, 1, (2, 7, 3))
    full, args = _bind(full_sym, {'x': data})
    np.testing.assert_allclose(full[0], full[1], rtol=1e-6)      # last output == h
    head_x = L.Input((3, 3), name='x')
    head = L.Model(head_x, cls(4, return_state=True, name='r')(head_x)).to_symbol(
        with_loss=False)
    first, _ = _bind(head, {'x': data[:, :3], 'r_parameters': args['r_parameters'].asnumpy()})
    tail_x = L.Input((4, 3), name='x')
    init = [L.Input((4,), name='s%d' % i) for i in range(k)]
    tail_out = cls(4, return_state=True, name='r')(tail_x, initial_state=init)
    tail = L.Model([tail_x] + init, tail_out).to_symbol(with_loss=False)
    feed = {'x': data[:, 3:], 'r_parameters': args['r_parameters'].asnumpy()}
    feed.update({'s%d' % i: first[1 + i] for i in range(k)})
    second, _ = _bind(tail, feed)
    for a, b in zip(second, full):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_bidirectional_return_state_order_is_keras():
    x = L.Input((5, 3))
    outs = L.Bidirectional(L.LSTM(2, return_sequences=True, return_state=True))(x)
    assert len(outs) == 5
    model = L.Model(x, outs)
    got, _ = _bind(model.to_symbol(with_loss=False),
                   {'data': np.random.default_rng(2).uniform(-1, 1, (3, 5, 3))})
    seq, fh, fc, bh, bc = got
    np.testing.assert_allclose(fh, seq[:, -1, :2], rtol=1e-6)   # forward ends at T-1
    np.testing.assert_allclose(bh, seq[:, 0, 2:], rtol=1e-6)    # backward ends at 0
    assert fc.shape == bc.shape == (3, 2) and not np.allclose(fc, bc)
    again = L.Model.from_config(model.get_config()['config'])
    assert again.to_symbol(with_loss=False).infer_shape(data=(3, 5, 3))[1] == \
        [(3, 5, 4)] + [(3, 2)] * 4


def test_encoder_states_feed_the_decoder():
    """The label is only in the encoder's input; the decoder reads noise and can only
    classify through the initial state it gets from the encoder."""
    rng = np.random.default_rng(0)
    n = 600
    enc = rng.uniform(-1, 1, (n, 6, 2))
    label = (enc[:, :, 0].sum(1) > enc[:, :, 1].sum(1)).astype(float)
    dec = rng.uniform(-1, 1, (n, 4, 2))
    ff.random.seed(0)
    ein, din = L.Input((6, 2), name='enc'), L.Input((4, 2), name='dec')
    _, h, c = L.LSTM(16, return_state=True)(ein)
    y = L.LSTM(16)(din, initial_state=[h, c])
    model = L.Model([ein, din], L.Dense(2)(y))
    model.compile(optimizer='adam', loss='softmax', metrics=['acc'], learning_rate=0.02)
    hist = model.fit({'enc': enc[:500], 'dec': dec[:500]}, label[:500], batch_size=50,
                     epochs=15, verbose=0,
                     validation_data=({'enc': enc[500:], 'dec': dec[500:]}, label[500:]))
    assert hist.history['val_accuracy'][-1] > 0.9, hist.history
