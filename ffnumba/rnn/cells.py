"""Fused, stacked, bidirectional and modifier cells (MXNet ``mx.rnn``).

:class:`FusedRNNCell` unrolls into one fused ``RNN`` node whose weights live
in one vector ``{prefix}parameters`` in MXNet's layout; :meth:`FusedRNNCell.unfuse`
gives the equivalent stack of step cells, and ``unpack_weights`` /
``pack_weights`` convert the vector to and from their per-gate weights
(``lstm_l0_i2h_i_weight``...), so the same numbers run either way.

Source: MXNet 1.9.1 ``python/mxnet/rnn/rnn_cell.py``; Zoneout: Krueger et al.
2016; residual connections: Wu et al. 2016.
"""
import numpy as np

from ..initializer import Initializer, InitDesc, Uniform, _shape, create, register
from .. import symbol
from ..base import FFError, ParamError
from ..ops.nn.rnn import rnn_param_size
from .rnn_cell import (BaseRNNCell, GRUCell, LSTMCell, RNNCell, _like, _to_numpy,
                       normalize_sequence, swap_time_batch)

__all__ = ['FusedRNNCell', 'SequentialRNNCell', 'BidirectionalCell', 'DropoutCell',
           'ModifierCell', 'ZoneoutCell', 'ResidualCell', 'FusedRNN']

_GATE_NAMES = {'rnn_relu': [''], 'rnn_tanh': [''], 'lstm': ['_i', '_f', '_c', '_o'],
               'gru': ['_r', '_z', '_o']}


def _cells_state_info(cells):
    return sum([c.state_info for c in cells], [])


def _cells_begin_state(cells, **kwargs):
    return sum([c.begin_state(**kwargs) for c in cells], [])


def _cells_unpack_weights(cells, args):
    for cell in cells:
        args = cell.unpack_weights(args)
    return args


def _cells_pack_weights(cells, args):
    for cell in cells:
        args = cell.pack_weights(args)
    return args


class FusedRNNCell(BaseRNNCell):
    """Every layer and time step in one fused ``RNN`` node.

    Parameters
    ----------
    num_hidden : int
    num_layers : int, default 1
    mode : {'rnn_relu', 'rnn_tanh', 'lstm', 'gru'}, default 'lstm'
    bidirectional : bool, default False
        The output has ``2 * num_hidden`` features when True.
    dropout : float, default 0.
        Dropout between layers (training only).
    get_next_state : bool, default False
        Return the final states (``state_outputs`` of the op).
    forget_bias : float, default 1.0
        Initial LSTM forget-gate bias (``init.FusedRNN``).
    prefix : str, optional
        Default ``'{mode}_'``.
    params : RNNParams, optional
    """

    def __init__(self, num_hidden, num_layers=1, mode='lstm', bidirectional=False,
                 dropout=0., get_next_state=False, forget_bias=1.0, prefix=None, params=None):
        if mode not in _GATE_NAMES:
            raise ParamError('FusedRNNCell: `mode` must be one of %s. Received: mode=%r'
                             % (', '.join(_GATE_NAMES), mode))
        if prefix is None:
            prefix = '%s_' % mode
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._num_layers = num_layers
        self._mode = mode
        self._bidirectional = bidirectional
        self._dropout = dropout
        self._get_next_state = get_next_state
        self._directions = ['l', 'r'] if bidirectional else ['l']
        initializer = FusedRNN(None, num_hidden, num_layers, mode, bidirectional,
                                     forget_bias)
        self._parameter = self.params.get('parameters', init=initializer)

    @property
    def state_info(self):
        b = self._bidirectional + 1
        n = (self._mode == 'lstm') + 1
        return [{'shape': (b * self._num_layers, 0, self._num_hidden), '__layout__': 'LNC'}
                for _ in range(n)]

    @property
    def _gate_names(self):
        return _GATE_NAMES[self._mode]

    @property
    def _num_gates(self):
        return len(self._gate_names)

    def _slice_weights(self, arr, li, lh):
        """Views of the flat numpy ``arr``, one per unfused weight name."""
        args, p = {}, 0
        b = len(self._directions)
        for layer in range(self._num_layers):
            for direction in self._directions:
                for gate in self._gate_names:
                    name = '%s%s%d_i2h%s_weight' % (self._prefix, direction, layer, gate)
                    cols = li if layer == 0 else b * lh
                    args[name] = arr[p:p + lh * cols].reshape((lh, cols))
                    p += lh * cols
                for gate in self._gate_names:
                    name = '%s%s%d_h2h%s_weight' % (self._prefix, direction, layer, gate)
                    args[name] = arr[p:p + lh * lh].reshape((lh, lh))
                    p += lh * lh
        for layer in range(self._num_layers):
            for direction in self._directions:
                for group in ['i2h', 'h2h']:
                    for gate in self._gate_names:
                        name = '%s%s%d_%s%s_bias' % (self._prefix, direction, layer, group, gate)
                        args[name] = arr[p:p + lh]
                        p += lh
        if p != arr.size:
            raise FFError('FusedRNNCell %s: the parameter vector has %d values; %d expected'
                          % (self._prefix, arr.size, p))
        return args

    def _num_input(self, size):
        b, m, h = len(self._directions), self._num_gates, self._num_hidden
        return size // b // h // m - (self._num_layers - 1) * (h + b * h + 2) - h - 2

    def unpack_weights(self, args):
        """Split ``{prefix}parameters`` into per-layer, per-direction, per-gate arrays."""
        args = dict(args)
        packed = args.pop(self._parameter.name)
        arr = _to_numpy(packed).reshape(-1)
        num_input = self._num_input(arr.size)
        if rnn_param_size(self._mode, self._num_layers, self._bidirectional, num_input,
                          self._num_hidden) != arr.size:
            raise FFError('FusedRNNCell %s: %d parameters fit no input size for num_hidden=%d, '
                          'num_layers=%d, mode=%s' % (self._prefix, arr.size, self._num_hidden,
                                                      self._num_layers, self._mode))
        for name, view in self._slice_weights(arr, num_input, self._num_hidden).items():
            args[name] = _like(view.copy(), packed)
        return args

    def pack_weights(self, args):
        """Inverse of :meth:`unpack_weights`."""
        args = dict(args)
        c, h = self._gate_names, self._num_hidden
        w0 = args['%sl0_i2h%s_weight' % (self._prefix, c[0])]
        num_input = w0.shape[1]
        total = rnn_param_size(self._mode, self._num_layers, self._bidirectional, num_input, h)
        arr = np.zeros((total,), dtype=np.dtype(getattr(w0, 'dtype', np.float32)))
        for name, view in self._slice_weights(arr, num_input, h).items():
            view[...] = _to_numpy(args.pop(name)).reshape(view.shape)
        args[self._parameter.name] = _like(arr, w0)
        return args

    def __call__(self, inputs, states):
        raise FFError('FusedRNNCell cannot be stepped. Use unroll (or unfuse() for a '
                      'steppable cell)')

    def unroll(self, length, inputs, begin_state=None, layout='NTC', merge_outputs=None):
        self.reset()
        inputs, axis = normalize_sequence(length, inputs, layout, True)
        if axis == 1:
            inputs = swap_time_batch(inputs)
        elif axis != 0:
            raise ParamError('FusedRNNCell: unsupported layout %r (NTC or TNC)' % layout)
        if begin_state is None:
            begin_state = self.begin_state()
        states = {'state': begin_state[0]}
        if self._mode == 'lstm':
            states['state_cell'] = begin_state[1]
        rnn = symbol.RNN(data=inputs, parameters=self._parameter, state_size=self._num_hidden,
                         num_layers=self._num_layers, bidirectional=self._bidirectional,
                         p=self._dropout, state_outputs=self._get_next_state, mode=self._mode,
                         name=self._prefix + 'rnn', **states)
        if not self._get_next_state:
            outputs, states = rnn, []
        elif self._mode == 'lstm':
            outputs, states = rnn[0], [rnn[1], rnn[2]]
        else:
            outputs, states = rnn[0], [rnn[1]]
        if axis == 1:
            outputs = swap_time_batch(outputs)
        outputs, _ = normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def unfuse(self):
        """The same network as a :class:`SequentialRNNCell` of step cells.

        Layer ``i`` gets prefix ``{prefix}l{i}_`` (and ``{prefix}r{i}_`` backward), so
        :meth:`unpack_weights` output loads into it directly.
        """
        make = {'rnn_relu': lambda pre: RNNCell(self._num_hidden, activation='relu', prefix=pre),
                'rnn_tanh': lambda pre: RNNCell(self._num_hidden, activation='tanh', prefix=pre),
                'lstm': lambda pre: LSTMCell(self._num_hidden, prefix=pre),
                'gru': lambda pre: GRUCell(self._num_hidden, prefix=pre)}[self._mode]
        stack = SequentialRNNCell()
        for i in range(self._num_layers):
            if self._bidirectional:
                stack.add(BidirectionalCell(make('%sl%d_' % (self._prefix, i)),
                                            make('%sr%d_' % (self._prefix, i)),
                                            output_prefix='%sbi_l%d_' % (self._prefix, i)))
            else:
                stack.add(make('%sl%d_' % (self._prefix, i)))
            if self._dropout > 0 and i != self._num_layers - 1:
                stack.add(DropoutCell(self._dropout, prefix='%s_dropout%d_' % (self._prefix, i)))
        return stack


class SequentialRNNCell(BaseRNNCell):
    """A stack of cells; each cell's output is the next cell's input.

    Parameters
    ----------
    params : RNNParams, optional
        Shared weights for every child (then children must own their params).
    """

    def __init__(self, params=None):
        super().__init__(prefix='', params=params)
        self._override_cell_params = params is not None
        self._cells = []

    def add(self, cell):
        """Append ``cell`` to the stack."""
        self._cells.append(cell)
        if self._override_cell_params:
            if not cell._own_params:
                raise FFError('SequentialRNNCell: give params to the SequentialRNNCell or to '
                              'its cells, not both')
            cell.params._params.update(self.params._params)
        self.params._params.update(cell.params._params)

    @property
    def state_info(self):
        return _cells_state_info(self._cells)

    def begin_state(self, **kwargs):
        self._check_not_modified()
        return _cells_begin_state(self._cells, **kwargs)

    def unpack_weights(self, args):
        return _cells_unpack_weights(self._cells, args)

    def pack_weights(self, args):
        return _cells_pack_weights(self._cells, args)

    def __call__(self, inputs, states):
        self._counter += 1
        next_states, p = [], 0
        for cell in self._cells:
            if isinstance(cell, BidirectionalCell):
                raise FFError('SequentialRNNCell with a BidirectionalCell cannot be stepped; '
                              'use unroll')
            n = len(cell.state_info)
            inputs, state = cell(inputs, states[p:p + n])
            p += n
            next_states.append(state)
        return inputs, sum(next_states, [])

    def unroll(self, length, inputs, begin_state=None, layout='NTC', merge_outputs=None):
        self.reset()
        num_cells = len(self._cells)
        if begin_state is None:
            begin_state = self.begin_state()
        p, next_states = 0, []
        for i, cell in enumerate(self._cells):
            n = len(cell.state_info)
            states = begin_state[p:p + n]
            p += n
            inputs, states = cell.unroll(length, inputs=inputs, begin_state=states, layout=layout,
                                         merge_outputs=None if i < num_cells - 1
                                         else merge_outputs)
            next_states.extend(states)
        return inputs, next_states


class DropoutCell(BaseRNNCell):
    """Dropout on the input of each step (no states).

    Parameters
    ----------
    dropout : float
        Fraction dropped in training.
    prefix : str, default 'dropout_'
    params : RNNParams, optional
    """

    def __init__(self, dropout, prefix='dropout_', params=None):
        super().__init__(prefix, params)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
            raise ParamError('DropoutCell: `dropout` must be a number. Received: dropout=%r'
                             % (dropout,))
        self.dropout = dropout

    @property
    def state_info(self):
        return []

    def __call__(self, inputs, states):
        if self.dropout > 0:
            inputs = symbol.Dropout(data=inputs, p=self.dropout)
        return inputs, states

    def unroll(self, length, inputs, begin_state=None, layout='NTC', merge_outputs=None):
        self.reset()
        inputs, _ = normalize_sequence(length, inputs, layout, merge_outputs)
        if isinstance(inputs, symbol.Symbol):
            return self(inputs, [])
        return super().unroll(length, inputs, begin_state=begin_state, layout=layout,
                              merge_outputs=merge_outputs)


class ModifierCell(BaseRNNCell):
    """Base of cells that wrap another cell (``base_cell``) and change what it does.

    After wrapping, call the modifier, not the base cell.
    """

    def __init__(self, base_cell):
        super().__init__()
        base_cell._modified = True
        self.base_cell = base_cell

    @property
    def params(self):
        self._own_params = False
        return self.base_cell.params

    @property
    def state_info(self):
        return self.base_cell.state_info

    def begin_state(self, init_sym=None, **kwargs):
        self._check_not_modified()
        self.base_cell._modified = False
        try:
            if init_sym is None:
                begin = self.base_cell.begin_state(**kwargs)
            else:
                begin = self.base_cell.begin_state(init_sym, **kwargs)
        finally:
            self.base_cell._modified = True
        return begin

    def unpack_weights(self, args):
        return self.base_cell.unpack_weights(args)

    def pack_weights(self, args):
        return self.base_cell.pack_weights(args)

    def __call__(self, inputs, states):
        raise NotImplementedError


class ZoneoutCell(ModifierCell):
    """Zoneout: in training, each unit keeps its previous value with some probability.

    Parameters
    ----------
    base_cell : BaseRNNCell
        A steppable cell (not fused, not bidirectional).
    zoneout_outputs : float, default 0.
    zoneout_states : float, default 0.
    """

    def __init__(self, base_cell, zoneout_outputs=0., zoneout_states=0.):
        if isinstance(base_cell, (FusedRNNCell, BidirectionalCell)):
            raise FFError('ZoneoutCell needs a steppable cell; %s is not one (unfuse it, or put '
                          'ZoneoutCell on the cells underneath)' % type(base_cell).__name__)
        super().__init__(base_cell)
        self.zoneout_outputs = zoneout_outputs
        self.zoneout_states = zoneout_states
        self.prev_output = None

    def reset(self):
        super().reset()
        self.prev_output = None

    def __call__(self, inputs, states):
        cell, p_out, p_st = self.base_cell, self.zoneout_outputs, self.zoneout_states
        next_output, next_states = cell(inputs, states)

        def mask(p, like):
            return symbol.Dropout(symbol.ones_like(like), p=p)

        prev = self.prev_output if self.prev_output is not None else symbol.zeros((0, 0))
        output = (symbol.where(mask(p_out, next_output), next_output, prev)
                  if p_out != 0. else next_output)
        states = ([symbol.where(mask(p_st, new), new, old)
                   for new, old in zip(next_states, states)] if p_st != 0. else next_states)
        self.prev_output = output
        return output, states


class ResidualCell(ModifierCell):
    """Adds the input to the base cell's output (Wu et al. 2016)."""

    def __call__(self, inputs, states):
        output, states = self.base_cell(inputs, states)
        output = symbol.elemwise_add(output, inputs, name='%s_plus_residual' % output.name)
        return output, states

    def unroll(self, length, inputs, begin_state=None, layout='NTC', merge_outputs=None):
        self.reset()
        self.base_cell._modified = False
        try:
            outputs, states = self.base_cell.unroll(length, inputs=inputs,
                                                    begin_state=begin_state, layout=layout,
                                                    merge_outputs=merge_outputs)
        finally:
            self.base_cell._modified = True
        if merge_outputs is None:
            merge_outputs = isinstance(outputs, symbol.Symbol)
        inputs, _ = normalize_sequence(length, inputs, layout, merge_outputs)
        if merge_outputs:
            outputs = symbol.elemwise_add(outputs, inputs, name='%s_plus_residual' % outputs.name)
        else:
            outputs = [symbol.elemwise_add(o, i, name='%s_plus_residual' % o.name)
                       for o, i in zip(outputs, inputs)]
        return outputs, states


class BidirectionalCell(BaseRNNCell):
    """Runs ``l_cell`` forward and ``r_cell`` backward in time; outputs are concatenated.

    Parameters
    ----------
    l_cell, r_cell : BaseRNNCell
    params : RNNParams, optional
    output_prefix : str, default 'bi_'
        Names of the concatenated outputs (``bi_t0``..., or ``bi_out`` merged).
    """

    def __init__(self, l_cell, r_cell, params=None, output_prefix='bi_'):
        super().__init__('', params=params)
        self._output_prefix = output_prefix
        self._override_cell_params = params is not None
        if self._override_cell_params:
            if not (l_cell._own_params and r_cell._own_params):
                raise FFError('BidirectionalCell: give params to the BidirectionalCell or to '
                              'its cells, not both')
            l_cell.params._params.update(self.params._params)
            r_cell.params._params.update(self.params._params)
        self.params._params.update(l_cell.params._params)
        self.params._params.update(r_cell.params._params)
        self._cells = [l_cell, r_cell]

    def unpack_weights(self, args):
        return _cells_unpack_weights(self._cells, args)

    def pack_weights(self, args):
        return _cells_pack_weights(self._cells, args)

    def __call__(self, inputs, states):
        raise FFError('BidirectionalCell cannot be stepped. Use unroll')

    @property
    def state_info(self):
        return _cells_state_info(self._cells)

    def begin_state(self, **kwargs):
        self._check_not_modified()
        return _cells_begin_state(self._cells, **kwargs)

    def unroll(self, length, inputs, begin_state=None, layout='NTC', merge_outputs=None):
        self.reset()
        inputs, axis = normalize_sequence(length, inputs, layout, False)
        if begin_state is None:
            begin_state = self.begin_state()
        l_cell, r_cell = self._cells
        n_l = len(l_cell.state_info)
        l_outputs, l_states = l_cell.unroll(length, inputs=inputs, begin_state=begin_state[:n_l],
                                            layout=layout, merge_outputs=merge_outputs)
        r_outputs, r_states = r_cell.unroll(length, inputs=list(reversed(inputs)),
                                            begin_state=begin_state[n_l:], layout=layout,
                                            merge_outputs=merge_outputs)
        if merge_outputs is None:
            merge_outputs = (isinstance(l_outputs, symbol.Symbol)
                             and isinstance(r_outputs, symbol.Symbol))
            if not merge_outputs:
                if isinstance(l_outputs, symbol.Symbol):
                    l_outputs = list(symbol.SliceChannel(l_outputs, axis=axis, num_outputs=length,
                                                         squeeze_axis=1))
                if isinstance(r_outputs, symbol.Symbol):
                    r_outputs = list(symbol.SliceChannel(r_outputs, axis=axis, num_outputs=length,
                                                         squeeze_axis=1))
        if merge_outputs:
            l_outputs = [l_outputs]
            # MXNet uses `reverse` along the time axis: the same as SequenceReverse
            # without lengths
            r_outputs = [symbol.SequenceReverse(r_outputs, axis=axis)]
        else:
            r_outputs = list(reversed(r_outputs))
        outputs = [symbol.Concat(l_o, r_o, dim=1 + merge_outputs,
                                 name=('%sout' % self._output_prefix if merge_outputs
                                       else '%st%d' % (self._output_prefix, i)))
                   for i, (l_o, r_o) in enumerate(zip(l_outputs, r_outputs))]
        if merge_outputs:
            outputs = outputs[0]
        return outputs, [l_states, r_states]


# ``ff.init.FusedRNN`` lives here, beside the weight layout it needs; ffnumba/__init__.py
# wires it into ``ff.init`` so the initializer module stays below ``ff.rnn``.
@register
class FusedRNN(Initializer):
    """Initialize the packed parameter vector of a fused ``RNN`` node gate by gate.

    The vector is split into its per-layer, per-direction, per-gate weights and
    biases (as :meth:`ffnumba.rnn.FusedRNNCell.unpack_weights` names them);
    each is initialized by ``init`` (or the global initializer when None), LSTM
    forget-gate biases get ``forget_bias`` (both ``i2h`` and ``h2h``, as MXNet does,
    so the gate starts at ``2 * forget_bias``), and the pieces are packed back.

    Parameters
    ----------
    init : Initializer, str (JSON) or None
    num_hidden, num_layers : int
    mode : {'rnn_relu', 'rnn_tanh', 'lstm', 'gru'}
    bidirectional : bool, default False
    forget_bias : float, default 1.0

    Source: MXNet 1.9.1 ``mx.init.FusedRNN``.
    """

    def __init__(self, init, num_hidden, num_layers, mode, bidirectional=False,
                 forget_bias=1.0):
        if isinstance(init, str):
            init = create(init)
        super().__init__(init=init.dumps() if init is not None else None,
                         num_hidden=num_hidden, num_layers=num_layers, mode=mode,
                         bidirectional=bidirectional, forget_bias=forget_bias)
        self._init = init
        self._num_hidden = num_hidden
        self._num_layers = num_layers
        self._mode = mode
        self._bidirectional = bidirectional
        self._forget_bias = forget_bias

    def _init_weight(self, desc, arr):
        cell = FusedRNNCell(self._num_hidden, self._num_layers, self._mode,
                            self._bidirectional, forget_bias=self._forget_bias, prefix='')
        flat = np.array(arr.asnumpy() if hasattr(arr, 'asnumpy') else arr).reshape(-1)
        pieces = cell._slice_weights(flat, cell._num_input(flat.size), self._num_hidden)
        global_init = getattr(desc, 'global_init', None) or Uniform()
        for name, view in pieces.items():
            if self._mode == 'lstm' and name.endswith('_f_bias'):   # i2h and h2h, as MXNet
                view[...] = self._forget_bias
            else:
                (self._init or global_init)(InitDesc(name, global_init=global_init), view)
        arr[:] = flat.reshape(_shape(arr))
