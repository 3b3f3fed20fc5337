"""Padding, cropping, upsampling, axis moves, merges and layer normalization.

Every layer here is composed from existing ``ff.sym`` operators (no new
kernel): ``ZeroPadding2D`` concatenates zero blocks (``zeros_like`` of a
slice) to the sides, ``Cropping2D`` is two ``slice_axis``, ``UpSampling2D``
repeats rows and columns with ``expand_dims`` + ``Concat`` + ``Reshape``,
``Permute`` is ``transpose``, ``RepeatVector`` is ``expand_dims`` +
``Concat``, ``Add``/``Multiply``/``Average`` chain elementwise operators and
``LayerNormalization`` is written with ``mean``, broadcast operators and
``rsqrt`` (Ba, Kiros & Hinton 2016).
"""
import numbers

from .. import symbol as S
from .base import Layer, _fail, check_positive_int, check_tuple
from .conv import check_format, to_channels_first, to_channels_last
from .core import _check_bool, _check_float

__all__ = ['ZeroPadding2D', 'Cropping2D', 'UpSampling2D', 'Permute', 'RepeatVector', 'Add',
           'Multiply', 'Average', 'LayerNormalization']


def _pairs(layer, field, value):
    """Keras' int / (sym_h, sym_w) / ((top, bottom), (left, right)) as ((t, b), (l, r))."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value, value)
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value):
        value = ((value[0], value[0]), (value[1], value[1]))
    ok = isinstance(value, (tuple, list)) and len(value) == 2 and all(
        isinstance(p, (tuple, list)) and len(p) == 2 and all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0 for v in p)
        for p in value)
    if not ok:
        _fail(layer, field, 'an int, a pair of ints or a pair of pairs of ints >= 0', value)
    return tuple(tuple(int(v) for v in p) for p in value)


class ZeroPadding2D(Layer):
    """Add rows and columns of zeros: ``(N, C, H, W) -> (N, C, H + t + b, W + l + r)``.

    Parameters
    ----------
    padding : int, (int, int) or ((top, bottom), (left, right)), default 1
    data_format : 'channels_first' or 'channels_last', default 'channels_first'
    name : str, optional
    """

    prefix = 'zeropadding2d'

    def __init__(self, padding=1, data_format='channels_first', name=None, input_shape=None):
        super().__init__(name, input_shape)
        self.padding = _pairs('ZeroPadding2D', 'padding', padding)
        self.data_format = check_format('ZeroPadding2D', data_format)

    def build_symbol(self, name, inputs):
        x = to_channels_first(inputs[0], self.data_format, 2, name)
        for axis, (before, after) in zip((2, 3), self.padding):
            if before == after == 0:
                continue
            zero = S.zeros_like(S.slice_axis(x, axis=axis, begin=0, end=1),
                                name='%s_zero%d' % (name, axis))
            x = S.Concat(*([zero] * before + [x] + [zero] * after), dim=axis,
                         name='%s_pad%d' % (name, axis))
        return to_channels_last(x, self.data_format, 2, name), None

    def _own_config(self):
        return {'padding': self.padding, 'data_format': self.data_format}


class Cropping2D(Layer):
    """Remove rows and columns at the sides: ``(N, C, H, W) -> (N, C, H - t - b, W - l - r)``.

    Parameters
    ----------
    cropping : int, (int, int) or ((top, bottom), (left, right)), default 0
    data_format : 'channels_first' or 'channels_last', default 'channels_first'
    name : str, optional
    """

    prefix = 'cropping2d'

    def __init__(self, cropping=0, data_format='channels_first', name=None, input_shape=None):
        super().__init__(name, input_shape)
        self.cropping = _pairs('Cropping2D', 'cropping', cropping)
        self.data_format = check_format('Cropping2D', data_format)

    def build_symbol(self, name, inputs):
        x = to_channels_first(inputs[0], self.data_format, 2, name)
        for axis, (before, after) in zip((2, 3), self.cropping):
            if before or after:
                x = S.slice_axis(x, axis=axis, begin=before, end=-after if after else None,
                                 name='%s_crop%d' % (name, axis))
        return to_channels_last(x, self.data_format, 2, name), None

    def _own_config(self):
        return {'cropping': self.cropping, 'data_format': self.data_format}


class UpSampling2D(Layer):
    """Repeat rows ``size[0]`` and columns ``size[1]`` times (nearest neighbour).

    **Shapes**: ``(N, C, H, W) -> (N, C, H * size[0], W * size[1])``.

    Parameters
    ----------
    size : int or (int, int), default (2, 2)
    data_format : 'channels_first' or 'channels_last', default 'channels_first'
    interpolation : 'nearest'
        Keras' 'bilinear' is not available.
    name : str, optional
    """

    prefix = 'upsampling2d'

    def __init__(self, size=(2, 2), data_format='channels_first', interpolation='nearest',
                 name=None, input_shape=None):
        super().__init__(name, input_shape)
        self.size = check_tuple('UpSampling2D', 'size', size, 2)
        self.data_format = check_format('UpSampling2D', data_format)
        if interpolation != 'nearest':
            _fail('UpSampling2D', 'interpolation', "'nearest'", interpolation)
        self.interpolation = interpolation

    def build_symbol(self, name, inputs):
        x = to_channels_first(inputs[0], self.data_format, 2, name)
        for axis, times in zip((2, 3), self.size):
            if times == 1:
                continue
            e = S.expand_dims(x, axis=axis + 1, name='%s_expand%d' % (name, axis))
            r = S.Concat(*([e] * times), dim=axis + 1, name='%s_repeat%d' % (name, axis))
            shape = (0, 0, -3, 0) if axis == 2 else (0, 0, 0, -3)   # merge the repeat axis
            x = S.Reshape(r, shape=shape, name='%s_merge%d' % (name, axis))
        return to_channels_last(x, self.data_format, 2, name), None

    def _own_config(self):
        return {'size': self.size, 'data_format': self.data_format,
                'interpolation': self.interpolation}


class Permute(Layer):
    """Reorder the sample axes: ``dims`` is a permutation of ``1..rank`` (Keras, 1-based).

    Example: ``Permute((2, 1))`` turns ``(N, a, b)`` into ``(N, b, a)``.
    """

    prefix = 'permute'

    def __init__(self, dims, name=None, input_shape=None):
        super().__init__(name, input_shape)
        if not isinstance(dims, (tuple, list)) or sorted(dims) != list(range(1, len(dims) + 1)):
            _fail('Permute', 'dims', 'a permutation of 1..rank (1-based, no batch axis)', dims)
        self.dims = tuple(int(d) for d in dims)

    def build_symbol(self, name, inputs):
        return S.transpose(inputs[0], axes=(0,) + self.dims, name=name), None

    def _own_config(self):
        return {'dims': self.dims}


class RepeatVector(Layer):
    """Repeat a vector ``n`` times: ``(N, F) -> (N, n, F)``."""

    prefix = 'repeatvector'

    def __init__(self, n, name=None, input_shape=None):
        super().__init__(name, input_shape)
        self.n = check_positive_int('RepeatVector', 'n', n)

    def build_symbol(self, name, inputs):
        e = S.expand_dims(inputs[0], axis=1, name=name + '_expand')
        if self.n == 1:
            return e, None
        return S.Concat(*([e] * self.n), dim=1, name=name), None

    def _own_config(self):
        return {'n': self.n}


class _Merge(Layer):
    num_inputs = None
    op = 'elemwise_add'

    def __init__(self, name=None):
        super().__init__(name)

    def build_symbol(self, name, inputs):
        out = inputs[0]
        for k, other in enumerate(inputs[1:]):
            last = k == len(inputs) - 2 and type(self) is not Average
            out = getattr(S, self.op)(out, other, name=name if last else '%s_%d' % (name, k))
        if type(self) is Average:
            out = S._div_scalar(out, scalar=float(len(inputs)), name=name)
        return out, None


class Add(_Merge):
    """Elementwise sum of a list of tensors of one shape (functional form)."""

    prefix = 'add'


class Multiply(_Merge):
    """Elementwise product of a list of tensors of one shape (functional form)."""

    prefix = 'multiply'
    op = 'elemwise_mul'


class Average(_Merge):
    """Elementwise mean of a list of tensors of one shape (functional form)."""

    prefix = 'average'


class LayerNormalization(Layer):
    """Normalize each sample over its last axis (Ba, Kiros & Hinton 2016).

    ``out = gamma * (x - mean) / sqrt(var + epsilon) + beta`` with the mean
    and (biased) variance over the last axis; ``gamma`` starts at 1 and
    ``beta`` at 0 (weights ``<name>_gamma``, ``<name>_beta``, shape ``(C,)``).
    Runs the ``LayerNorm`` operator (axis -1).

    Parameters
    ----------
    axis : -1
        Only the last axis (Keras' default) is supported.
    epsilon : float > 0, default 1e-3
    center, scale : bool, default True
    name : str, optional
    """

    prefix = 'layernorm'

    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True, name=None,
                 input_shape=None):
        super().__init__(name, input_shape)
        if axis != -1:
            _fail('LayerNormalization', 'axis', '-1 (the last axis)', axis)
        self.axis = -1
        self.epsilon = _check_float('LayerNormalization', 'epsilon', epsilon,
                                    lambda v: v > 0, lambda v: True, 'a float > 0')
        self.center = _check_bool('LayerNormalization', 'center', center)
        self.scale = _check_bool('LayerNormalization', 'scale', scale)

    def build_symbol(self, name, inputs):
        # The LayerNorm operator (axis -1) infers gamma/beta's size from the data; a
        # disabled scale or center is a constant 1 or 0 whose size is inferred the same way.
        gamma = (S.Variable(name + '_gamma') if self.scale
                 else S.ones(shape=(0,), name=name + '_unit_gamma'))
        beta = (S.Variable(name + '_beta') if self.center
                else S.zeros(shape=(0,), name=name + '_zero_beta'))
        return S.LayerNorm(inputs[0], gamma, beta, axis=-1, eps=self.epsilon, name=name), None

    def _own_config(self):
        return {'axis': self.axis, 'epsilon': self.epsilon, 'center': self.center,
                'scale': self.scale}
