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
        L.GRU(3, return_state=True)
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
