"""Recurrent cells that build symbols step by step (MXNet ``mx.rnn``).

A cell turns one time step's input and its states into an output and new
states (``output, states = cell(x, states)``); :meth:`BaseRNNCell.unroll`
repeats that over a sequence. Weights are shared across steps through the
cell's :class:`RNNParams`, and every name is MXNet's: a cell with prefix
``'lstm_'`` owns ``lstm_i2h_weight``, ``lstm_i2h_bias``, ``lstm_h2h_weight``,
``lstm_h2h_bias``; its step ``t`` nodes are ``lstm_t{t}_i2h``..., its begin
states ``lstm_begin_state_0``... (from ``sym.zeros(shape=(0, H),
__layout__='NC')``, the batch size left to shape inference).

``pack_weights``/``unpack_weights`` convert between the fused weight of a
cell (``i2h_weight``: all gates stacked) and one array per gate
(``i2h_i_weight``, ``i2h_f_weight``...), the form checkpoints are saved in by
:func:`~ffnumba.rnn.save_rnn_checkpoint`.

Source: MXNet 1.9.1 ``python/mxnet/rnn/rnn_cell.py`` (names, signatures and
semantics); LSTM: Hochreiter & Schmidhuber 1997, forget bias 1.0 after
Jozefowicz et al. 2015; GRU: cuDNN's variant of Cho et al. 2014.
"""
import numpy as np

from .. import initializer as _init
from .. import ndarray as nd
from .. import symbol
from ..base import FFError, ParamError

__all__ = ['RNNParams', 'BaseRNNCell', 'RNNCell', 'LSTMCell', 'GRUCell']


class RNNParams:
    """Container of the weight Variables of cells, for sharing weights between cells.

    Parameters
    ----------
    prefix : str, default ''
        Prepended to the name of every Variable this container makes.
    """

    def __init__(self, prefix=''):
        self._prefix = prefix
        self._params = {}

    def get(self, name, **kwargs):
        """The Variable ``prefix + name``, made on first use with ``kwargs``.

        Parameters
        ----------
        name : str
        **kwargs
            Passed to :func:`ffnumba.sym.Variable` (``init=``, ``shape=``...).

        Returns
        -------
        Symbol
        """
        name = self._prefix + name
        if name not in self._params:
            self._params[name] = symbol.Variable(name, **kwargs)
        return self._params[name]


def _zeros_state(name, **kwargs):
    return symbol.zeros(name=name, **kwargs)


def _to_numpy(a):
    return a.asnumpy() if hasattr(a, 'asnumpy') else np.asarray(a)


def _like(values, ref):
    """``values`` (numpy) as an NDArray on ``ref``'s context and dtype."""
    ctx = getattr(ref, 'context', None)
    return nd.array(values, ctx=ctx, dtype=getattr(ref, 'dtype', values.dtype))


def normalize_sequence(length, inputs, layout, merge, in_layout=None):
    """``inputs`` as a list of per-step symbols (``merge=False``) or one symbol (``True``).

    Parameters
    ----------
    length : int or None
    inputs : Symbol or list of Symbol
        One symbol with a time axis (``layout``'s ``T``) or one symbol per step.
    layout : str
        ``'NTC'`` or ``'TNC'``.
    merge : bool or None
        None leaves ``inputs`` as they are.
    in_layout : str, optional
        Layout of ``inputs`` when it differs from ``layout``.

    Returns
    -------
    (inputs, axis)
        ``axis`` is the time axis of ``layout``.

    Raises
    ------
    ParamError
        For missing inputs, a wrong number of steps, or a layout without ``T``.
    """
    if inputs is None:
        raise ParamError('unroll: `inputs` must be given (a Symbol or a list of Symbols); '
                         'unroll(inputs=None) is deprecated in MXNet too')
    axis = layout.find('T')
    if axis < 0:
        raise ParamError('unroll: `layout` must contain T. Received: layout=%r' % layout)
    in_axis = in_layout.find('T') if in_layout is not None else axis
    if isinstance(inputs, symbol.Symbol):
        if merge is False:
            if len(inputs.list_outputs()) != 1:
                raise ParamError('unroll: a grouped symbol cannot be the input; pass '
                                 'list(inputs) instead')
            inputs = list(symbol.split(inputs, axis=in_axis, num_outputs=length,
                                       squeeze_axis=1))
    else:
        inputs = list(inputs)
        if length is not None and len(inputs) != length:
            raise ParamError('unroll: got %d input steps for length=%d' % (len(inputs), length))
        if merge is True:
            inputs = symbol.Concat(*[symbol.expand_dims(i, axis=axis) for i in inputs],
                                   dim=axis)
            in_axis = axis
    if isinstance(inputs, symbol.Symbol) and axis != in_axis:
        inputs = swap_time_batch(inputs)
    return inputs, axis


def swap_time_batch(x):
    """Swap axes 0 and 1 of a 3-D symbol (NTC <-> TNC)."""
    return symbol.transpose(x, axes=(1, 0, 2))


class BaseRNNCell:
    """Base class of recurrent cells.

    Parameters
    ----------
    prefix : str, default ''
        Prefix of node names (and of weight names when ``params`` is None).
    params : RNNParams, optional
        Weights to share; a new container with ``prefix`` when None.
    """

    def __init__(self, prefix='', params=None):
        if params is None:
            params = RNNParams(prefix)
            self._own_params = True
        else:
            self._own_params = False
        self._prefix = prefix
        self._params = params
        self._modified = False
        self.reset()

    def reset(self):
        """Reset the step counters before building another graph."""
        self._init_counter = -1
        self._counter = -1
        for cell in getattr(self, '_cells', []):
            cell.reset()

    def __call__(self, inputs, states):
        """One step: ``(output, new_states)`` from ``inputs (N, C)`` and ``states``."""
        raise NotImplementedError('%s cannot be stepped; use unroll' % type(self).__name__)

    @property
    def params(self):
        """The cell's :class:`RNNParams` (asking for it gives up ownership, as in MXNet)."""
        self._own_params = False
        return self._params

    @property
    def state_info(self):
        """One dict per state: ``{'shape': (0, H), '__layout__': 'NC'}``."""
        raise NotImplementedError()

    @property
    def state_shape(self):
        """Shapes of the states (0: the batch size, unknown until bound)."""
        return [ele['shape'] for ele in self.state_info]

    @property
    def _gate_names(self):
        return ()

    def _check_not_modified(self):
        if self._modified:
            raise FFError('After applying a modifier cell (DropoutCell, ZoneoutCell, '
                          'ResidualCell) call the modifier cell, not the base cell')

    def begin_state(self, func=_zeros_state, **kwargs):
        """Initial states, named ``{prefix}begin_state_{i}``.

        Parameters
        ----------
        func : callable, default ``sym.zeros``
            Called as ``func(name=..., shape=..., __layout__=..., **kwargs)``;
            ``ff.sym.Variable`` makes states the caller feeds.
        **kwargs
            More arguments for ``func`` (``dtype``...).

        Returns
        -------
        list of Symbol
        """
        self._check_not_modified()
        states = []
        for info in self.state_info:
            self._init_counter += 1
            if info is not None:
                kwargs.update(info)
            states.append(func(name='%sbegin_state_%d' % (self._prefix, self._init_counter),
                               **kwargs))
        return states

    def unpack_weights(self, args):
        """Split fused ``i2h``/``h2h`` weights and biases into one array per gate.

        Parameters
        ----------
        args : dict of str to NDArray
            Usually ``Module.get_params()[0]``.

        Returns
        -------
        dict of str to NDArray
            A new dict: ``{prefix}i2h{gate}_weight`` ... replace the fused arrays.
        """
        args = dict(args)
        if not self._gate_names:
            return args
        h = self._num_hidden
        for group in ['i2h', 'h2h']:
            weight = args.pop('%s%s_weight' % (self._prefix, group))
            bias = args.pop('%s%s_bias' % (self._prefix, group))
            w, b = _to_numpy(weight), _to_numpy(bias)
            for j, gate in enumerate(self._gate_names):
                args['%s%s%s_weight' % (self._prefix, group, gate)] = \
                    _like(w[j * h:(j + 1) * h].copy(), weight)
                args['%s%s%s_bias' % (self._prefix, group, gate)] = \
                    _like(b[j * h:(j + 1) * h].copy(), bias)
        return args

    def pack_weights(self, args):
        """Inverse of :meth:`unpack_weights`: stack the per-gate arrays again."""
        args = dict(args)
        if not self._gate_names:
            return args
        for group in ['i2h', 'h2h']:
            weight, bias = [], []
            for gate in self._gate_names:
                weight.append(args.pop('%s%s%s_weight' % (self._prefix, group, gate)))
                bias.append(args.pop('%s%s%s_bias' % (self._prefix, group, gate)))
            args['%s%s_weight' % (self._prefix, group)] = _like(
                np.concatenate([_to_numpy(w) for w in weight]), weight[0])
            args['%s%s_bias' % (self._prefix, group)] = _like(
                np.concatenate([_to_numpy(b) for b in bias]), bias[0])
        return args

    def unroll(self, length, inputs, begin_state=None, layout='NTC', merge_outputs=None):
        """Unroll the cell over ``length`` steps.

        Parameters
        ----------
        length : int
        inputs : Symbol or list of Symbol
            One symbol ``(N, T, ...)`` for ``layout='NTC'`` or ``(T, N, ...)`` for
            ``'TNC'``, or a list of ``length`` symbols ``(N, ...)``.
        begin_state : list of Symbol, optional
            Default :meth:`begin_state`.
        layout : {'NTC', 'TNC'}, default 'NTC'
        merge_outputs : bool, optional
            True: one symbol with a time axis; False: a list of steps; None:
            whichever is natural for the cell.

        Returns
        -------
        (outputs, states)
        """
        self.reset()
        inputs, _ = normalize_sequence(length, inputs, layout, False)
        if begin_state is None:
            begin_state = self.begin_state()
        states = begin_state
        outputs = []
        for i in range(length):
            output, states = self(inputs[i], states)
            outputs.append(output)
        outputs, _ = normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def _get_activation(self, inputs, activation, **kwargs):
        if isinstance(activation, str):
            return symbol.Activation(inputs, act_type=activation, **kwargs)
        return activation(inputs, **kwargs)


def _nc_state(num_hidden):
    return {'shape': (0, num_hidden), '__layout__': 'NC'}


class RNNCell(BaseRNNCell):
    """Elman cell: ``h' = act(W_i x + b_i + W_h h + b_h)``.

    Parameters
    ----------
    num_hidden : int
        Units H.
    activation : str or callable, default 'tanh'
        An Activation ``act_type`` or a function of a symbol.
    prefix : str, default 'rnn_'
    params : RNNParams, optional
    """

    def __init__(self, num_hidden, activation='tanh', prefix='rnn_', params=None):
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._activation = activation
        self._iW = self.params.get('i2h_weight')
        self._iB = self.params.get('i2h_bias')
        self._hW = self.params.get('h2h_weight')
        self._hB = self.params.get('h2h_bias')

    @property
    def state_info(self):
        return [_nc_state(self._num_hidden)]

    @property
    def _gate_names(self):
        return ('',)

    def __call__(self, inputs, states):
        self._counter += 1
        name = '%st%d_' % (self._prefix, self._counter)
        i2h = symbol.FullyConnected(data=inputs, weight=self._iW, bias=self._iB,
                                    num_hidden=self._num_hidden, name='%si2h' % name)
        h2h = symbol.FullyConnected(data=states[0], weight=self._hW, bias=self._hB,
                                    num_hidden=self._num_hidden, name='%sh2h' % name)
        output = self._get_activation(i2h + h2h, self._activation, name='%sout' % name)
        return output, [output]


class LSTMCell(BaseRNNCell):
    """LSTM cell (gates i, f, c, o stacked in ``i2h``/``h2h``, MXNet's order).

    ``c' = sigmoid(f) c + sigmoid(i) tanh(g)``, ``h' = sigmoid(o) tanh(c')``.

    Parameters
    ----------
    num_hidden : int
    prefix : str, default 'lstm_'
    params : RNNParams, optional
    forget_bias : float, default 1.0
        Initial value of the forget-gate part of ``i2h_bias`` (``init.LSTMBias``).
    """

    def __init__(self, num_hidden, prefix='lstm_', params=None, forget_bias=1.0):
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._iW = self.params.get('i2h_weight')
        self._hW = self.params.get('h2h_weight')
        self._iB = self.params.get('i2h_bias', init=_init.LSTMBias(forget_bias=forget_bias))
        self._hB = self.params.get('h2h_bias')

    @property
    def state_info(self):
        return [_nc_state(self._num_hidden), _nc_state(self._num_hidden)]

    @property
    def _gate_names(self):
        return ['_i', '_f', '_c', '_o']

    def __call__(self, inputs, states):
        self._counter += 1
        name = '%st%d_' % (self._prefix, self._counter)
        H = self._num_hidden
        i2h = symbol.FullyConnected(data=inputs, weight=self._iW, bias=self._iB,
                                    num_hidden=H * 4, name='%si2h' % name)
        h2h = symbol.FullyConnected(data=states[0], weight=self._hW, bias=self._hB,
                                    num_hidden=H * 4, name='%sh2h' % name)
        gates = symbol.SliceChannel(i2h + h2h, num_outputs=4, name='%sslice' % name)
        in_gate = symbol.Activation(gates[0], act_type='sigmoid', name='%si' % name)
        forget_gate = symbol.Activation(gates[1], act_type='sigmoid', name='%sf' % name)
        in_transform = symbol.Activation(gates[2], act_type='tanh', name='%sc' % name)
        out_gate = symbol.Activation(gates[3], act_type='sigmoid', name='%so' % name)
        next_c = symbol._plus(forget_gate * states[1], in_gate * in_transform,
                              name='%sstate' % name)
        next_h = symbol._mul(out_gate, symbol.Activation(next_c, act_type='tanh'),
                             name='%sout' % name)
        return next_h, [next_h, next_c]


class GRUCell(BaseRNNCell):
    """GRU cell, cuDNN's variant (gates r, z, o stacked, MXNet's order).

    ``r, z = sigmoid(.)``, ``n = tanh(W_in x + b_in + r (W_hn h + b_hn))``,
    ``h' = (1 - z) n + z h``.

    Parameters
    ----------
    num_hidden : int
    prefix : str, default 'gru_'
    params : RNNParams, optional
    """

    def __init__(self, num_hidden, prefix='gru_', params=None):
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._iW = self.params.get('i2h_weight')
        self._iB = self.params.get('i2h_bias')
        self._hW = self.params.get('h2h_weight')
        self._hB = self.params.get('h2h_bias')

    @property
    def state_info(self):
        return [_nc_state(self._num_hidden)]

    @property
    def _gate_names(self):
        return ['_r', '_z', '_o']

    def __call__(self, inputs, states):
        self._counter += 1
        name = '%st%d_' % (self._prefix, self._counter)
        H = self._num_hidden
        prev = states[0]
        i2h = symbol.FullyConnected(data=inputs, weight=self._iW, bias=self._iB,
                                    num_hidden=H * 3, name='%s_i2h' % name)
        h2h = symbol.FullyConnected(data=prev, weight=self._hW, bias=self._hB,
                                    num_hidden=H * 3, name='%s_h2h' % name)
        i2h_r, i2h_z, i2h = symbol.SliceChannel(i2h, num_outputs=3, name='%s_i2h_slice' % name)
        h2h_r, h2h_z, h2h = symbol.SliceChannel(h2h, num_outputs=3, name='%s_h2h_slice' % name)
        reset_gate = symbol.Activation(i2h_r + h2h_r, act_type='sigmoid',
                                       name='%s_r_act' % name)
        update_gate = symbol.Activation(i2h_z + h2h_z, act_type='sigmoid',
                                        name='%s_z_act' % name)
        next_h_tmp = symbol.Activation(i2h + reset_gate * h2h, act_type='tanh',
                                       name='%s_h_act' % name)
        next_h = symbol._plus((1. - update_gate) * next_h_tmp, update_gate * prev,
                              name='%sout' % name)
        return next_h, [next_h]
