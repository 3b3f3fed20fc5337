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

**States** (functional form, as Keras): ``layer(x, initial_state=[...])``
starts from given states instead of zeros, each ``(batch, units)`` (LSTM:
``[h, c]``; GRU, SimpleRNN: ``[h]``; Bidirectional: the forward layer's
states then the backward layer's). With ``return_state=True`` a call returns
a list: the output, then the final states in the same order (the fused op's
``state_outputs``), e.g. ``out, h, c = L.LSTM(8, return_state=True)(x)`` or
``out, fh, fc, bh, bc = L.Bidirectional(L.LSTM(8, return_state=True))(x)``.

Differences from Keras: the activations are fixed by the cell type (LSTM and
GRU use sigmoid/tanh, GRU is cuDNN's ``reset_after`` variant as MXNet's).
"""
from ..rnn.cells import FusedRNN
from .. import symbol as S
from ..base import ParamError
from .base import KerasTensor, Layer, _fail, check_choice, check_positive_int

__all__ = ['SimpleRNN', 'LSTM', 'GRU', 'Bidirectional']


def _check_bool(layer, field, value):
    if not isinstance(value, bool):
        _fail(layer, field, 'a bool', value)
    return value



def _outputs(layer, node, states):
    """The recorded call ``node`` with the ``initial_state`` tensors appended to its inputs:
    itself for one output, else one KerasTensor per output (``return_state=True``)."""
    node.inputs += states
    if layer.num_outputs == 1:
        return node
    return [KerasTensor(layer=layer, inputs=[node], output_index=i)
            for i in range(layer.num_outputs)]

class _Recurrent(Layer):
    mode = None
    arg_suffixes = ('parameters',)

    def __init__(self, units, return_sequences=False, return_state=False, go_backwards=False,
                 dropout=0.0, name=None, input_shape=None):
        super().__init__(name, input_shape)
        cls = type(self).__name__
        self.units = check_positive_int(cls, 'units', units)
        self.return_sequences = _check_bool(cls, 'return_sequences', return_sequences)
        self.return_state = _check_bool(cls, 'return_state', return_state)
        self.go_backwards = _check_bool(cls, 'go_backwards', go_backwards)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or \
                not 0 <= dropout < 1:
            _fail(cls, 'dropout', 'a float in [0, 1)', dropout)
        self.dropout = float(dropout)

    def _states_per_dir(self):
        return 2 if self.mode == 'lstm' else 1

    def _build(self, name, inputs, bidirectional):
        mode, H = self.mode, self.units
        D = 2 if bidirectional else 1
        x, init = inputs[0], list(inputs[1:])
        k = self._states_per_dir()
        params = S.Variable('%s_parameters' % name, init=FusedRNN(
            None, H, 1, mode, bidirectional))
        if self.dropout:
            x = S.Dropout(x, p=self.dropout, name='%s_dropout' % name)
        seq = S.transpose(x, axes=(1, 0, 2), name='%s_tnc' % name)           # (T, N, C)
        if self.go_backwards:
            seq = S.SequenceReverse(seq, axis=0, name='%s_reverse' % name)
        states = {}
        for i, key in enumerate(['state', 'state_cell'][:k]):
            if init:    # Keras order: every state of the forward layer, then the backward's
                parts = [S.expand_dims(init[d * k + i], axis=0) for d in range(D)]
                states[key] = parts[0] if D == 1 else S.Concat(*parts, dim=0,
                                                               name='%s_init_%d' % (name, i))
            else:
                states[key] = S.zeros(shape=(D, 0, H), name='%s_begin_state_%d' % (name, i))
        res = S.RNN(seq, params, mode=mode, state_size=H, num_layers=1,
                    bidirectional=bidirectional, state_outputs=self.return_state, name=name,
                    **states)
        out = res[0] if self.return_state else res                            # (T, N, D*H)
        if self.return_sequences:
            out = S.transpose(out, axes=(1, 0, 2), name='%s_ntc' % name)
        elif bidirectional:
            # Keras' Bidirectional: the forward direction's last step and the backward
            # direction's last step (time 0), concatenated
            fwd = S.slice_axis(S.SequenceLast(out, axis=0), axis=1, begin=0, end=H)
            bwd = S.slice_axis(S.slice_axis(out, axis=0, begin=0, end=1), axis=2, begin=H,
                               end=2 * H)
            out = S.Concat(fwd, S.Reshape(bwd, shape=(-1, H)), dim=1, name='%s_last' % name)
        else:
            out = S.SequenceLast(out, axis=0, name='%s_last' % name)
        if not self.return_state:
            return out
        finals = [out]
        for d in range(D):          # (D, N, H) state outputs -> (N, H) each, Keras' order
            for i in range(k):
                finals.append(S.Reshape(S.slice_axis(res[1 + i], axis=0, begin=d, end=d + 1),
                                        shape=(-1, H), name='%s_state_%d_%d' % (name, d, i)))
        return S.Group(finals)

    def _check_initial_state(self, initial_state, D):
        cls = type(self).__name__ if D == 1 else 'Bidirectional'
        want = self._states_per_dir() * D
        states = [] if initial_state is None else (
            list(initial_state) if isinstance(initial_state, (list, tuple)) else [initial_state])
        if initial_state is not None and (len(states) != want or not all(
                isinstance(t, KerasTensor) for t in states)):
            raise ParamError('%s: `initial_state` must be a list of %d tensors (batch, units) '
                             '(%s). Received: initial_state=%r'
                             % (cls, want, 'h, c per direction' if self.mode == 'lstm'
                                else 'h per direction', initial_state))
        return states

    @property
    def num_outputs(self):
        """Tensors a call returns: 1, or with ``return_state`` 1 + the states."""
        return 1 + self._states_per_dir() if self.return_state else 1

    def _call_node(self, x, states):
        """The call's own tensor (its symbol the Group of every output)."""
        return KerasTensor(layer=self, inputs=[x] + list(states))

    def __call__(self, inputs, initial_state=None):
        """Record a call (functional form); see the module docstring for the states.

        Returns
        -------
        KerasTensor, or with ``return_state=True`` a list ``[output, *states]``.
        """
        return _outputs(self, super().__call__(inputs),
                        self._check_initial_state(initial_state, 1))

    def build_symbol(self, name, inputs):
        return self._build(name, inputs, False), None

    def get_config(self):
        return {'units': self.units, 'return_sequences': self.return_sequences,
                'return_state': self.return_state, 'go_backwards': self.go_backwards,
                'dropout': self.dropout, 'name': self.name}


class SimpleRNN(_Recurrent):
    """Elman RNN layer: ``h' = activation(W x + U h + b)`` (``RNN`` mode rnn_tanh/rnn_relu).

    Parameters
    ----------
    units : int >= 1
    activation : {'tanh', 'relu'}, default 'tanh'
    return_sequences : bool, default False
        Every step's output ``(batch, T, units)`` instead of the last ``(batch, units)``.
    return_state : bool, default False
        A call returns ``[output, h]`` (LSTM: ``[output, h, c]``), the final
        states ``(batch, units)``; functional form only.
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
        Its ``go_backwards`` must be False. With its ``return_state=True`` a
        call returns ``[output, forward states..., backward states...]``
        (Keras' order); ``initial_state`` takes the same order.
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

    @property
    def num_outputs(self):
        """1, or with the wrapped layer's ``return_state`` 1 + both directions' states."""
        return 1 + 2 * self.layer._states_per_dir() if self.layer.return_state else 1

    def _call_node(self, x, states):
        return KerasTensor(layer=self, inputs=[x] + list(states))

    def __call__(self, inputs, initial_state=None):
        """Record a call: the wrapped layer's ``initial_state`` / ``return_state`` rules,
        forward direction's states first."""
        return _outputs(self, super().__call__(inputs),
                        self.layer._check_initial_state(initial_state, 2))

    def build_symbol(self, name, inputs):
        return self.layer._build(name, inputs, True), None

    def get_config(self):
        return {'layer': self.layer, 'merge_mode': self.merge_mode, 'name': self.name}
