"""``Symbol._gen_atomic_symbol``: the head operator on fresh inputs (MXNet 1.9.1)."""
import pytest

import ffnumba as mx
from ffnumba.base import FFError


def test_gen_atomic_symbol_keeps_op_params_and_outputs():
    data, p = mx.sym.Variable('data'), mx.sym.Variable('param')
    h0, h1 = mx.sym.Variable('h0'), mx.sym.Variable('h1')
    s = mx.sym.RNN(data, p, h0, h1, state_size=10, num_layers=2, bidirectional=True,
                   state_outputs=True, mode='lstm', name='rnn')
    a = s._gen_atomic_symbol()
    assert a.list_outputs() == s.list_outputs()
    assert a.list_arguments() == ['rnn_data', 'rnn_parameters', 'rnn_state', 'rnn_state_cell']
    assert a.attr_dict()['rnn']['state_size'] == '10'
    fc = mx.sym.FullyConnected(data, num_hidden=3, name='fc', attr={'__lr_mult__': '2'})
    af = fc._gen_atomic_symbol()
    assert af.list_arguments() == ['fc_data', 'fc_weight', 'fc_bias']
    assert af.infer_shape(fc_data=(2, 5))[1] == [(2, 3)]
    with pytest.raises(FFError):
        data._gen_atomic_symbol()
