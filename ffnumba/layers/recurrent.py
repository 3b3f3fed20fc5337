"""Keras-style recurrent layers: SimpleRNN, LSTM, GRU and the Bidirectional wrapper.

Each layer is one fused ``ff.sym.RNN`` node (one layer, one or two
directions) over Keras' ``(batch, timesteps, features)`` input: the input is
swapped to the op's time-major layout and back. Weights are one packed vector
``<name>_parameters`` in MXNet's layout (see :func:`ffnumba.sym.RNN`),
initialized gate by gate by ``ff.init.FusedRNN`` (LSTM forget-gate biases 1);
the initial states are zeros.

**Shapes**: data ``(batch, T, C)``; out ``(batch, T, units)`` with
``return_sequences=True``, else the last step ``(batch, units)``
(``2 * units`` for Bidirectional with ``merge_mode='concat'``).

Differences from Keras: the activations are fixed by the cell type (LSTM and
GRU use sigmoid/tanh, GRU is cuDNN's ``reset_after`` variant as MXNet's);
``return_state`` is not supported (a layer has one output here).
"""
from ..rnn.cells import FusedRNN
from .. import symbol as S
from ..base import ParamError
from .base import Layer, _fail, check_choice, check_positive_int

__all__ = ['SimpleRNN', 'LSTM', 'GRU', 'Bidirectional']


def _check_bool(layer, field, value):
    if not isinstance(value, bool):
        _fail(layer, field, 'a bool', value)
    return value


class _Recurrent(Layer):
    mode = None
    arg_suffixes = ('parameters',)

    def __init__(self, units, return_sequences=False, return_state=False, go_backwards=False,
                 dropout=0.0, name=None, input_shape=None):
        super().__init__(name, input_shape)
        cls = type(self).__name__
        self.units = check_positive_int(cls, 'units', units)
        self.return_sequences = _check_bool(cls, 'return_sequences', return_sequences)
        if return_state:
            raise ParamError('%s: `return_state=True` is not supported (a layer has one '
                             'output here); use ff.rnn.FusedRNNCell(get_next_state=True) with '
                             'ff.mod.Module. Received: return_state=%r' % (cls, return_state))
        self.go_backwards = _check_bool(cls, 'go_backwards', go_backwards)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or \
                not 0 <= dropout < 1:
            _fail(cls, 'dropout', 'a float in [0, 1)', dropout)
        self.dropout = float(dropout)

    def _build(self, name, x, bidirectional):
        mode, H = self.mode, self.units
        D = 2 if bidirectional else 1
        params = S.Variable('%s_parameters' % name, init=FusedRNN(
            None, H, 1, mode, bidirectional))
        if self.dropout:
            x = S.Dropout(x, p=self.dropout, name='%s_dropout' % name)
        seq = S.transpose(x, axes=(1, 0, 2), name='%s_tnc' % name)           # (T, N, C)
        if self.go_backwards:
            seq = S.SequenceReverse(seq, axis=0, name='%s_reverse' % name)
        states = {'state': S.zeros(shape=(D, 0, H), name='%s_begin_state_0' % name)}
        if mode == 'lstm':
            states['state_cell'] = S.zeros(shape=(D, 0, H), name='%s_begin_state_1' % name)
        out = S.RNN(seq, params, mode=mode, state_size=H, num_layers=1,
                    bidirectional=bidirectional, name=name, **states)           # (T, N, D*H)
        if self.return_sequences:
            return S.transpose(out, axes=(1, 0, 2), name='%s_ntc' % name)
        if bidirectional:
            # Keras' Bidirectional: the forward direction's last step and the backward
            # direction's last step (time 0), concatenated
            fwd = S.slice_axis(S.SequenceLast(out, axis=0), axis=1, begin=0, end=H)
            bwd = S.slice_axis(S.slice_axis(out, axis=0, begin=0, end=1), axis=2, begin=H,
                               end=2 * H)
            return S.Concat(fwd, S.Reshape(bwd, shape=(-1, H)), dim=1, name='%s_last' % name)
        return S.SequenceLast(out, axis=0, name='%s_last' % name)

    def build_symbol(self, name, inputs):
        return self._build(name, inputs[0], False), None

    def get_config(self):
        return {'units': self.units, 'return_sequences': self.return_sequences,
                'go_backwards': self.go_backwards, 'dropout': self.dropout, 'name': self.name}


class SimpleRNN(_Recurrent):
    """Elman RNN layer: ``h' = activation(W x + U h + b)`` (``RNN`` mode rnn_tanh/rnn_relu).

    Parameters
    ----------
    units : int >= 1
    activation : {'tanh', 'relu'}, default 'tanh'
    return_sequences : bool, default False
        Every step's output ``(batch, T, units)`` instead of the last ``(batch, units)``.
    return_state : bool, default False
        Must be False (not supported).
    go_backwards : bool, default False
        Read the sequence from the end (outputs in the order processed).
    dropout : float in [0, 1), default 0
        Dropout on the inputs (training only).
    name : str, optional

    Raises
    ------
    ParamError
        For a bad argument (``SimpleRNN: `units` must be a positive int. Received: units=0``).
    """

    prefix = 'simple_rnn'

    def __init__(self, units, activation='tanh', return_sequences=False, return_state=False,
                 go_backwards=False, dropout=0.0, name=None, input_shape=None):
        super().__init__(units, return_sequences, return_state, go_backwards, dropout, name,
                         input_shape)
        self.activation = check_choice('SimpleRNN', 'activation', activation, ('tanh', 'relu'))
        self.mode = 'rnn_' + self.activation

    def get_config(self):
        return dict(super().get_config(), activation=self.activation)


class LSTM(_Recurrent):
    """LSTM layer (``RNN`` mode lstm; gates i, f, g, o). Parameters as :class:`SimpleRNN`
    without ``activation``."""

    prefix = 'lstm'
    mode = 'lstm'


class GRU(_Recurrent):
    """GRU layer (``RNN`` mode gru; cuDNN's variant, Keras' ``reset_after=True``).
    Parameters as :class:`SimpleRNN` without ``activation``."""

    prefix = 'gru'
    mode = 'gru'


class Bidirectional(Layer):
    """Run a recurrent layer forward and backward in time; concatenate the two (one fused node).

    Parameters
    ----------
    layer : SimpleRNN, LSTM or GRU
        Its ``go_backwards`` must be False.
    merge_mode : {'concat'}, default 'concat'
        Outputs have ``2 * units`` features.
    name : str, optional
    """

    prefix = 'bidirectional'
    arg_suffixes = ('parameters',)

    def __init__(self, layer, merge_mode='concat', name=None, input_shape=None):
        super().__init__(name, input_shape)
        if not isinstance(layer, _Recurrent):
            raise ParamError('Bidirectional: `layer` must be a SimpleRNN, LSTM or GRU layer. '
                             'Received: layer=%r' % (layer,))
        if layer.go_backwards:
            raise ParamError('Bidirectional: the wrapped layer must have go_backwards=False. '
                             'Received: go_backwards=True')
        self.layer = layer
        self.merge_mode = check_choice('Bidirectional', 'merge_mode', merge_mode, ('concat',))
        if input_shape is None:
            self.input_shape = layer.input_shape

    def build_symbol(self, name, inputs):
        return self.layer._build(name, inputs[0], True), None

    def get_config(self):
        return {'layer': self.layer, 'merge_mode': self.merge_mode, 'name': self.name}
