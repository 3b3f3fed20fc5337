"""Core Keras-style layers: Dense, Activation, LeakyReLU, Dropout, Flatten, Reshape,
Embedding, BatchNormalization, Concatenate.

Each maps onto one ``ff.sym`` operator (plus an optional activation node
named ``<name>_<activation>``). Layouts are MXNet's: channels first.
"""
import numbers

from .. import symbol as S
from .base import (ACTIVATIONS, Layer, _fail, apply_activation, check_activation,
                   check_positive_int, check_shape)

__all__ = ['Dense', 'Activation', 'LeakyReLU', 'Dropout', 'Flatten', 'Reshape', 'Embedding',
           'BatchNormalization', 'Concatenate']


def _check_bool(layer, field, value):
    if not isinstance(value, bool):
        _fail(layer, field, 'a bool', value)
    return value


def _check_float(layer, field, value, low, high, rule):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not low(float(value)) or not high(float(value)):
        _fail(layer, field, rule, value)
    return float(value)


def _act_logits(pre, activation):
    """``(activation, logits)`` a loss head may use instead of a final softmax/sigmoid."""
    return (activation, pre) if activation in ('softmax', 'sigmoid') else None


class Dense(Layer):
    """Fully connected layer: ``out = activation(data @ W.T + b)`` (``ff.sym.FullyConnected``).

    **Shapes** (Keras): data ``(batch, ..., K)``, weight ``(units, K)``, bias
    ``(units,)``, out ``(batch, ..., units)``: on input of rank > 2 the layer
    applies to the last axis, as Keras' Dense does.

    **Where MXNet differs**: MXNet's ``FullyConnected`` (and Gluon's
    ``Dense``) flatten by default: ``(batch, d1, d2, ...)`` becomes ``(batch,
    d1*d2*...)`` and the out is ``(batch, units)``. ``flatten=True`` gives
    MXNet's behaviour; the default ``flatten=False`` gives Keras'. On 2-D
    input both are the same.

    Parameters
    ----------
    units : int >= 1
    activation : str or None, default None
        A name of :data:`ffnumba.layers.ACTIVATIONS` (or 'linear').
    use_bias : bool, default True
    flatten : bool, default False
        True flattens every axis after the batch axis first (MXNet's
        ``FullyConnected`` default).
    name : str, optional

    Raises
    ------
    ParamError
        ``Dense: `units` must be a positive int. Received: units=0``.
    """

    prefix = 'dense'

    def __init__(self, units, activation=None, use_bias=True, flatten=False, name=None,
                 input_shape=None):
        super().__init__(name, input_shape)
        self.units = check_positive_int('Dense', 'units', units)
        self.activation = check_activation('Dense', activation)
        self.use_bias = _check_bool('Dense', 'use_bias', use_bias)
        self.flatten = _check_bool('Dense', 'flatten', flatten)

    def build_symbol(self, name, inputs):
        pre = S.FullyConnected(inputs[0], num_hidden=self.units, no_bias=not self.use_bias,
                               flatten=self.flatten, name=name)
        out = apply_activation(pre, self.activation, '%s_%s' % (name, self.activation))
        return out, _act_logits(pre, self.activation)

    def _own_config(self):
        return {'units': self.units, 'activation': self.activation, 'use_bias': self.use_bias,
                'flatten': self.flatten}


class Activation(Layer):
    """An elementwise activation (``ff.sym.Activation``, ``LeakyReLU`` or ``softmax``).

    Parameters
    ----------
    activation : str
        One of :data:`ffnumba.layers.ACTIVATIONS` or 'linear' (identity).
    name : str, optional
    """

    prefix = 'activation'

    def __init__(self, activation, name=None, input_shape=None):
        super().__init__(name, input_shape)
        if activation is None:
            _fail('Activation', 'activation', 'one of %s' % ', '.join(
                repr(k) for k in sorted(ACTIVATIONS)), activation)
        self.activation = check_activation('Activation', activation)

    def build_symbol(self, name, inputs):
        if self.activation is None:
            return inputs[0], None
        out = apply_activation(inputs[0], self.activation, name)
        return out, _act_logits(inputs[0], self.activation)

    def _own_config(self):
        return {'activation': self.activation}


class LeakyReLU(Layer):
    """Leaky rectifier ``out = x if x > 0 else negative_slope * x`` (``ff.sym.LeakyReLU``).

    Parameters
    ----------
    negative_slope : float >= 0, default 0.3
        Keras 3's default (MXNet's op default is 0.25).
    name : str, optional
    """

    prefix = 'leakyrelu'

    def __init__(self, negative_slope=0.3, name=None, input_shape=None):
        super().__init__(name, input_shape)
        self.negative_slope = _check_float('LeakyReLU', 'negative_slope', negative_slope,
                                           lambda v: v >= 0, lambda v: True, 'a float >= 0')

    def build_symbol(self, name, inputs):
        return S.LeakyReLU(inputs[0], act_type='leaky', slope=self.negative_slope,
                           name=name), None

    def _own_config(self):
        return {'negative_slope': self.negative_slope}


class Dropout(Layer):
    """Dropout (``ff.sym.Dropout``): in training, zero with probability ``rate``, scale 1/(1-rate).

    Parameters
    ----------
    rate : float in [0, 1), default required
    name : str, optional
    """

    prefix = 'dropout'

    def __init__(self, rate, name=None, input_shape=None):
        super().__init__(name, input_shape)
        self.rate = _check_float('Dropout', 'rate', rate, lambda v: v >= 0, lambda v: v < 1,
                                 'a float in [0, 1)')

    def build_symbol(self, name, inputs):
        return S.Dropout(inputs[0], p=self.rate, name=name), None

    def _own_config(self):
        return {'rate': self.rate}


class Flatten(Layer):
    """Collapse every axis but the batch axis: ``(batch, d1, d2, ...) -> (batch, d1*d2*...)``."""

    prefix = 'flatten'

    def build_symbol(self, name, inputs):
        return S.Flatten(inputs[0], name=name), None


class Reshape(Layer):
    """Reshape each sample to ``target_shape`` (``ff.sym.Reshape(shape=(0,) + target_shape)``).

    Parameters
    ----------
    target_shape : tuple of int
        Without the batch axis; one entry may be -1 (inferred).
    name : str, optional
    """

    prefix = 'reshape'

    def __init__(self, target_shape, name=None, input_shape=None):
        super().__init__(name, input_shape)
        self.target_shape = check_shape('Reshape', 'target_shape', target_shape,
                                        allow_minus_one=True)

    def build_symbol(self, name, inputs):
        return S.Reshape(inputs[0], shape=(0,) + self.target_shape, name=name), None

    def _own_config(self):
        return {'target_shape': self.target_shape}


class Embedding(Layer):
    """Look up rows of a ``(input_dim, output_dim)`` table (``ff.sym.Embedding``).

    **Shapes**: data ``(batch, ...)`` of integer indices (given as floats),
    out ``(batch, ..., output_dim)``.

    Parameters
    ----------
    input_dim : int >= 1
        Vocabulary size.
    output_dim : int >= 1
    name : str, optional
    """

    prefix = 'embedding'

    def __init__(self, input_dim, output_dim, name=None, input_shape=None):
        super().__init__(name, input_shape)
        self.input_dim = check_positive_int('Embedding', 'input_dim', input_dim)
        self.output_dim = check_positive_int('Embedding', 'output_dim', output_dim)

    def build_symbol(self, name, inputs):
        return S.Embedding(inputs[0], input_dim=self.input_dim, output_dim=self.output_dim,
                           name=name), None

    def _own_config(self):
        return {'input_dim': self.input_dim, 'output_dim': self.output_dim}


class BatchNormalization(Layer):
    """Batch normalization over ``axis`` (``ff.sym.BatchNorm``).

    ``out = gamma * (x - mean) / sqrt(var + epsilon) + beta``; batch statistics
    in training, moving averages (``moving = momentum * moving + (1 -
    momentum) * batch``) in inference (Ioffe & Szegedy 2015).

    Parameters
    ----------
    axis : int, default 1
        The channel axis (channels first).
    momentum : float in [0, 1), default 0.99
        Keras's default (MXNet's op default is 0.9).
    epsilon : float > 0, default 1e-3
    scale : bool, default True
        False fixes gamma at 1 (MXNet's ``fix_gamma=True``).
    name : str, optional

    Notes
    -----
    ``center=False`` is not available: MXNet's BatchNorm always learns beta.
    """

    prefix = 'batchnorm'

    def __init__(self, axis=1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                 name=None, input_shape=None):
        super().__init__(name, input_shape)
        if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
            _fail('BatchNormalization', 'axis', 'an int', axis)
        self.axis = int(axis)
        self.momentum = _check_float('BatchNormalization', 'momentum', momentum,
                                     lambda v: v >= 0, lambda v: v < 1, 'a float in [0, 1)')
        self.epsilon = _check_float('BatchNormalization', 'epsilon', epsilon,
                                    lambda v: v > 0, lambda v: True, 'a float > 0')
        if center is not True:
            _fail('BatchNormalization', 'center', 'True (BatchNorm always learns beta)', center)
        self.scale = _check_bool('BatchNormalization', 'scale', scale)

    def build_symbol(self, name, inputs):
        return S.BatchNorm(inputs[0], axis=self.axis, momentum=self.momentum, eps=self.epsilon,
                           fix_gamma=not self.scale, name=name), None

    def _own_config(self):
        return {'axis': self.axis, 'momentum': self.momentum, 'epsilon': self.epsilon,
                'scale': self.scale}


class Concatenate(Layer):
    """Join a list of tensors along ``axis`` (``ff.sym.Concat``); functional form only.

    Parameters
    ----------
    axis : int, default -1
        Negative values count from the end (``axis=1`` joins channels).
    name : str, optional
    """

    prefix = 'concatenate'
    num_inputs = None

    def __init__(self, axis=-1, name=None):
        super().__init__(name)
        if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
            _fail('Concatenate', 'axis', 'an int', axis)
        self.axis = int(axis)

    def build_symbol(self, name, inputs):
        return S.Concat(*inputs, dim=self.axis, name=name), None

    def _own_config(self):
        return {'axis': self.axis}
