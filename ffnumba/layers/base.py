"""The pieces every Keras-style layer shares: :class:`Layer`, symbolic tensors, :func:`Input`.

A layer only declares its configuration (checked at construction, Keras
style) and, given a name and input symbols, builds ``ff.sym`` operators. It
never computes numbers: training runs through :class:`ffnumba.mod.Module`.

Calling a layer on a :class:`KerasTensor` (the functional form) records a
graph node; :class:`ffnumba.layers.Model` later walks the nodes, gives every
layer its name (``dense0``, ``conv2d1``, ... per class within the model,
an explicit ``name=`` wins) and builds the Symbol.
"""
import itertools
import numbers

from ..base import ParamError

__all__ = ['Layer', 'KerasTensor', 'Input', 'ACTIVATIONS', 'LAYERS']

#: Layer classes by name (filled by subclassing), read by ``from_config``/``load_model``.
LAYERS = {}

_tensor_ids = itertools.count()

#: Activation names accepted by ``activation=`` and :class:`Activation`, mapped to
#: ``(op, params)``; ``None`` and ``'linear'`` mean no operator.
ACTIVATIONS = {
    'relu': ('Activation', {'act_type': 'relu'}),
    'sigmoid': ('Activation', {'act_type': 'sigmoid'}),
    'tanh': ('Activation', {'act_type': 'tanh'}),
    'softrelu': ('Activation', {'act_type': 'softrelu'}),
    'softplus': ('Activation', {'act_type': 'softrelu'}),
    'softsign': ('Activation', {'act_type': 'softsign'}),
    'elu': ('LeakyReLU', {'act_type': 'elu', 'slope': 1.0}),
    'selu': ('LeakyReLU', {'act_type': 'selu'}),
    'gelu': ('LeakyReLU', {'act_type': 'gelu'}),
    'softmax': ('softmax', {'axis': -1}),
}


def _fail(layer, field, rule, value):
    raise ParamError('%s: `%s` must be %s. Received: %s=%r' % (layer, field, rule, field, value))


def check_positive_int(layer, field, value):
    """Return ``value`` if it is an int >= 1, else raise the Keras-style ParamError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        _fail(layer, field, 'a positive int', value)
    return int(value)


def check_tuple(layer, field, value, ndim, minimum=1):
    """An int or a tuple of ``ndim`` ints >= ``minimum``, returned as a tuple."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value_t = (int(value),) * ndim
    elif isinstance(value, (tuple, list)) and len(value) == ndim and all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value):
        value_t = tuple(int(v) for v in value)
    else:
        _fail(layer, field, 'an int or a tuple of %d ints' % ndim, value)
    if any(v < minimum for v in value_t):
        _fail(layer, field, 'made of ints >= %d' % minimum, value)
    return value_t


def check_choice(layer, field, value, choices):
    """``value`` if it is one of ``choices``, else a ParamError listing them."""
    if value not in choices:
        _fail(layer, field, 'one of %s' % ', '.join(repr(c) for c in choices), value)
    return value


def check_activation(layer, value):
    """Normalise ``activation=``: None, 'linear' or a key of :data:`ACTIVATIONS`."""
    if value is None or value == 'linear':
        return None
    if not isinstance(value, str) or value not in ACTIVATIONS:
        _fail(layer, 'activation', 'None, \'linear\' or one of %s'
              % ', '.join(repr(k) for k in sorted(ACTIVATIONS)), value)
    return value


def check_shape(layer, field, value, allow_minus_one=False):
    """A tuple of positive ints (``-1`` allowed once when ``allow_minus_one``)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value,)
    ok = isinstance(value, (tuple, list)) and len(value) >= 1 and all(
        isinstance(v, numbers.Integral) and not isinstance(v, bool)
        and (v >= 1 or (allow_minus_one and v == -1)) for v in value)
    if ok and allow_minus_one:
        ok = sum(1 for v in value if v == -1) <= 1
    if not ok:
        rule = 'a tuple of positive ints (one -1 allowed)' if allow_minus_one else \
            'a tuple of positive ints (without the batch axis)'
        _fail(layer, field, rule, value)
    return tuple(int(v) for v in value)


def check_name(layer, name):
    """None or a non-empty str."""
    if name is not None and (not isinstance(name, str) or not name):
        _fail(layer, 'name', 'None or a non-empty str', name)
    return name


def apply_activation(sym, activation, name):
    """``activation`` (a key of :data:`ACTIVATIONS` or None) applied to ``sym`` as node ``name``."""
    from .. import symbol as S
    if activation is None:
        return sym
    op, params = ACTIVATIONS[activation]
    return getattr(S, op)(sym, name=name, **params)


class KerasTensor:
    """A symbolic value in the functional form: an input, or a layer called on tensors.

    Attributes
    ----------
    layer : Layer or None
        The layer that produced it (None for an :func:`Input`).
    inputs : list of KerasTensor
    shape : tuple or None
        Shape without the batch axis (known for inputs only).
    name : str or None
        The input's data name (inputs only).
    output_index : int or None
        For one of several outputs of a layer call (a recurrent layer with
        ``return_state=True``): the output's index; ``inputs`` is then the
        call's own tensor, whose symbol is the Group of all outputs.
    """

    def __init__(self, layer=None, inputs=(), shape=None, name=None, dtype='float32',
                 output_index=None):
        self.layer = layer
        self.output_index = output_index
        self.inputs = list(inputs)
        self.shape = shape
        self.name = name
        self.dtype = dtype
        self.uid = next(_tensor_ids)

    @property
    def is_input(self):
        return self.layer is None

    def __repr__(self):
        if self.is_input:
            return 'KerasTensor(input, name=%r, shape=%r)' % (self.name, self.shape)
        if self.output_index is not None:
            return 'KerasTensor(%s, output %d)' % (type(self.layer).__name__, self.output_index)
        return 'KerasTensor(%s)' % type(self.layer).__name__


def Input(shape, name=None, dtype='float32'):  # noqa: N802 (Keras spelling)
    """A model input (functional form): ``x = L.Input(shape=(1, 28, 28))``.

    Parameters
    ----------
    shape : tuple of positive int
        Shape of one sample, without the batch axis (channels first).
    name : str, optional
        The data name the Module sees. Default: ``'data'`` for a model with one
        input, ``'data0'``, ``'data1'``, ... in input order otherwise.
    dtype : str, default 'float32'

    Returns
    -------
    KerasTensor

    Raises
    ------
    ParamError
        For a shape that is not a tuple of positive ints.
    """
    shape = check_shape('Input', 'shape', shape)
    check_name('Input', name)
    return KerasTensor(shape=shape, name=name, dtype=dtype)


class Layer:
    """Base class of the Keras-style layers.

    Subclasses set ``prefix`` (the auto-name stem: ``'dense'`` gives
    ``dense0``), check their arguments in ``__init__`` and implement
    :meth:`build_symbol`.

    Parameters
    ----------
    name : str, optional
        The node name (weights become ``<name>_weight``, ...). Default: the
        prefix plus a per-class counter within the model.
    input_shape : tuple, optional
        Sample shape (no batch axis), used when the layer starts a Sequential.
    """

    prefix = 'layer'
    #: Number of input tensors (None: a list of at least two).
    num_inputs = 1

    def __init__(self, name=None, input_shape=None):
        self.name = check_name(type(self).__name__, name)
        self.input_shape = None if input_shape is None else \
            check_shape(type(self).__name__, 'input_shape', input_shape)

    def __call__(self, inputs):
        """Record a call on a tensor (a list for Concatenate); return the output tensor."""
        cls = type(self).__name__
        if self.num_inputs is None:
            if not isinstance(inputs, (list, tuple)) or len(inputs) < 2 or not all(
                    isinstance(t, KerasTensor) for t in inputs):
                raise ParamError('%s: must be called on a list of at least two tensors. '
                                 'Received: %r' % (cls, inputs))
            inputs = list(inputs)
        else:
            if not isinstance(inputs, KerasTensor):
                raise ParamError('%s: must be called on a tensor from L.Input or another '
                                 'layer. Received: %r' % (cls, inputs))
            inputs = [inputs]
        return KerasTensor(layer=self, inputs=inputs)

    def param_names(self, name):
        """``(arg_names, aux_names)`` of the weights this layer creates under ``name``.

        Read from the layer's own graph on placeholder inputs, so the names are
        the ones its operators declare in the registry (``dense0_weight``,
        ``batchnorm0_moving_mean``...), never a second copy kept here.
        """
        from .. import symbol as S
        count = 2 if self.num_inputs is None else self.num_inputs
        inputs = [S.Variable('%s__input%d' % (name, i)) for i in range(count)]
        out, _ = self.build_symbol(name, inputs)
        placeholders = {i.name for i in inputs}
        return ([a for a in out.list_arguments() if a not in placeholders],
                list(out.list_auxiliary_states()))

    def build_symbol(self, name, inputs):
        """Build the operators for node ``name`` on input symbols; return the output Symbol.

        Returns
        -------
        out : Symbol
        logits : (str, Symbol) or None
            ``(activation, value before it)`` for a final softmax/sigmoid
            activation (a loss head that applies it itself uses the value).
        """
        raise NotImplementedError

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith('_'):
            LAYERS[cls.__name__] = cls

    @property
    def trainable(self):
        """False freezes the layer's weights (``grad_req='null'``; takes effect at the next fit)."""
        return getattr(self, '_trainable', True)

    @trainable.setter
    def trainable(self, value):
        if not isinstance(value, bool):
            _fail(type(self).__name__, 'trainable', 'a bool', value)
        self._trainable = value

    def _own_config(self):
        """The layer's own constructor arguments (subclasses extend it)."""
        return {}

    def get_config(self):
        """The constructor arguments, Keras style: ``type(layer).from_config(cfg)`` rebuilds it.

        Holds ``name``, the layer's arguments, ``input_shape`` when given and
        ``trainable`` when False.
        """
        cfg = dict(self._own_config())
        cfg['name'] = self.name
        if self.input_shape is not None:
            cfg['input_shape'] = tuple(self.input_shape)
        if not self.trainable:
            cfg['trainable'] = False
        return cfg

    @classmethod
    def from_config(cls, config):
        """A new layer from :meth:`get_config`'s dict (lists read from JSON become tuples)."""
        config = {k: tuple(v) if isinstance(v, list) else v for k, v in dict(config).items()}
        trainable = config.pop('trainable', True)
        layer = cls(**config)
        layer.trainable = trainable
        return layer

    # ------------------------------------------------------------ weights
    def _weight_owner(self, what):
        owner = getattr(self, '_owner', None)
        if owner is None:
            from ..base import FFError
            raise FFError('%s: %s needs the layer to be part of a built model.'
                          % (type(self).__name__, what))
        return owner

    @property
    def weight_names(self):
        """Names of this layer's weights in its model (arguments, then auxiliary states)."""
        owner = self._weight_owner('weight_names')
        name = dict((id(la), n) for la, n in owner._named_layers())[id(self)]
        args, aux = self.param_names(name)
        return args + aux

    def get_weights(self):
        """This layer's weights as a list of numpy arrays (order of :attr:`weight_names`)."""
        weights = self._weight_owner('get_weights')._weight_dict('get_weights')
        return [weights[n] for n in self.weight_names]

    def count_params(self):
        """Number of values in this layer's weights (arguments and auxiliary states)."""
        return int(sum(w.size for w in self.get_weights()))

    def set_weights(self, weights):
        """Set this layer's weights from a list in :attr:`weight_names` order."""
        owner = self._weight_owner('set_weights')
        names = self.weight_names
        if len(weights) != len(names):
            raise ParamError('%s: set_weights needs %d arrays (%s). Received: %d'
                             % (type(self).__name__, len(names), ', '.join(names),
                                len(weights)))
        owner._assign_weights(dict(zip(names, weights)))

    def __repr__(self):
        cfg = ', '.join('%s=%r' % kv for kv in self._own_config().items())
        return '%s(%s)' % (type(self).__name__, cfg)
