"""Convolution and pooling layers (channels first, MXNet layout ``NCW`` / ``NCHW``).

``data_format='channels_last'`` (Keras' default layout ``NWC`` / ``NHWC``)
is accepted by every layer here: the layer transposes its input to
channels first, runs the MXNet operator and transposes the result back
(``<name>_to_cf`` / ``<name>_to_cl`` nodes). Weights keep MXNet's layout
(``(filters, C, kh, kw)``), so files are the same in both formats.

``padding='valid'`` pads nothing. ``padding='same'`` pads ``d * (k - 1) / 2``
on each side, which keeps the spatial size at stride 1; it needs an odd
effective kernel (``d * (k - 1)`` even), since MXNet pads symmetrically.
An int or tuple ``padding`` is passed to the operator's ``pad`` as is.

Output sizes (per spatial axis; ``k`` kernel, ``s`` stride, ``p`` pad, ``d`` dilation):

- convolution: ``floor((n + 2p - d(k-1) - 1) / s) + 1``
- transposed convolution: ``(n - 1) s - 2p + d(k-1) + 1 + output_padding``
- pooling (``'valid'``): ``floor((n - k) / s) + 1``; (``'same'``, only with
  ``strides == pool_size``): ``ceil(n / s)``.
"""
from .. import symbol as S
from .base import Layer, _fail, apply_activation, check_activation, check_positive_int, \
    check_tuple
from .core import _act_logits, _check_bool

__all__ = ['Conv1D', 'Conv2D', 'Conv1DTranspose', 'Conv2DTranspose', 'MaxPool1D', 'AvgPool1D',
           'MaxPool2D', 'AvgPool2D', 'GlobalAvgPool2D', 'GlobalMaxPool2D']

_FORMATS = ('channels_first', 'channels_last')


def check_format(layer, value):
    """``data_format``: 'channels_first' (MXNet, the default here) or 'channels_last'."""
    if value not in _FORMATS:
        _fail(layer, 'data_format', "'channels_first' or 'channels_last'", value)
    return value


def to_channels_first(sym, fmt, ndim, name):
    """``sym`` transposed from channels last to first when ``fmt`` is 'channels_last'."""
    if fmt != 'channels_last':
        return sym
    return S.transpose(sym, axes=(0, ndim + 1) + tuple(range(1, ndim + 1)), name=name + '_to_cf')


def to_channels_last(sym, fmt, ndim, name):
    """The inverse of :func:`to_channels_first`."""
    if fmt != 'channels_last':
        return sym
    return S.transpose(sym, axes=(0,) + tuple(range(2, ndim + 2)) + (1,), name=name + '_to_cl')


def _padding(layer, padding, kernel, dilation, ndim):
    """The operator's ``pad`` tuple for Keras ``padding``."""
    if padding == 'valid':
        return (0,) * ndim
    if padding == 'same':
        span = [d * (k - 1) for k, d in zip(kernel, dilation)]
        if any(v % 2 for v in span):
            _fail(layer, 'padding', "'valid' or an explicit pad for an even kernel_size "
                  "(MXNet pads symmetrically, so 'same' needs an odd kernel)", padding)
        return tuple(v // 2 for v in span)
    if isinstance(padding, str):
        _fail(layer, 'padding', "'valid', 'same', an int or a tuple", padding)
    return check_tuple(layer, 'padding', padding, ndim, minimum=0)


class _Conv(Layer):
    ndim = 2
    transpose = False

    def __init__(self, filters, kernel_size, strides=1, padding='valid', dilation_rate=1,
                 groups=1, activation=None, use_bias=True, name=None, input_shape=None,
                 output_padding=None, data_format='channels_first'):
        super().__init__(name, input_shape)
        cls = type(self).__name__
        self.data_format = check_format(cls, data_format)
        self.filters = check_positive_int(cls, 'filters', filters)
        self.kernel_size = check_tuple(cls, 'kernel_size', kernel_size, self.ndim)
        self.strides = check_tuple(cls, 'strides', strides, self.ndim)
        self.dilation_rate = check_tuple(cls, 'dilation_rate', dilation_rate, self.ndim)
        self.groups = check_positive_int(cls, 'groups', groups)
        if self.filters % self.groups:
            _fail(cls, 'groups', 'a divisor of filters=%d' % self.filters, groups)
        self.padding = padding
        self.pad = _padding(cls, padding, self.kernel_size, self.dilation_rate, self.ndim)
        self.activation = check_activation(cls, activation)
        self.use_bias = _check_bool(cls, 'use_bias', use_bias)
        self.output_padding = (0,) * self.ndim
        if output_padding is not None:
            self.output_padding = check_tuple(cls, 'output_padding', output_padding,
                                              self.ndim, minimum=0)
            if any(a >= s for a, s in zip(self.output_padding, self.strides)):
                _fail(cls, 'output_padding', 'smaller than strides=%r' % (self.strides,),
                      output_padding)

    def build_symbol(self, name, inputs):
        kw = dict(kernel=self.kernel_size, stride=self.strides, dilate=self.dilation_rate,
                  pad=self.pad, num_filter=self.filters, num_group=self.groups,
                  no_bias=not self.use_bias, name=name)
        if self.transpose:
            adj = self.output_padding
            if self.padding == 'same':
                # Keras 'same' gives n * s; symmetric pad gives (n - 1) s + 1 before adj.
                adj = tuple(max(a, s - 1) for a, s in zip(adj, self.strides))
        data = to_channels_first(inputs[0], self.data_format, self.ndim, name)
        if self.transpose:
            pre = S.Deconvolution(data, adj=adj, **kw)
        else:
            pre = S.Convolution(data, **kw)
        pre = to_channels_last(pre, self.data_format, self.ndim, name)
        out = apply_activation(pre, self.activation, '%s_%s' % (name, self.activation))
        return out, _act_logits(pre, self.activation)

    def _own_config(self):
        cfg = {'filters': self.filters, 'kernel_size': self.kernel_size,
                'strides': self.strides, 'padding': self.padding,
                'dilation_rate': self.dilation_rate, 'groups': self.groups,
                'activation': self.activation, 'use_bias': self.use_bias,
                'data_format': self.data_format}
        if self.transpose:
            cfg['output_padding'] = self.output_padding
        return cfg


class Conv1D(_Conv):
    """1-D convolution over ``(batch, channels, width)`` (``ff.sym.Convolution``).

    **Shapes**: data ``(N, C, W)``, weight ``(filters, C / groups, k)``, bias
    ``(filters,)``, out ``(N, filters, W_out)`` (module docstring).

    Parameters
    ----------
    filters : int >= 1
    kernel_size : int or (int,)
    strides : int, default 1
    padding : 'valid', 'same', int or tuple, default 'valid'
    dilation_rate : int, default 1
    groups : int >= 1 dividing filters, default 1
    activation : str or None, default None
    use_bias : bool, default True
    name : str, optional
    """

    prefix = 'conv1d'
    ndim = 1


class Conv2D(_Conv):
    """2-D convolution over ``(batch, channels, height, width)`` (``ff.sym.Convolution``).

    **Shapes**: data ``(N, C, H, W)``, weight ``(filters, C / groups, kh, kw)``,
    bias ``(filters,)``, out ``(N, filters, H_out, W_out)`` (module docstring).

    Parameters
    ----------
    filters : int >= 1
    kernel_size : int or (int, int)
    strides : int or (int, int), default 1
    padding : 'valid', 'same', int or tuple, default 'valid'
    dilation_rate : int or (int, int), default 1
    groups : int >= 1 dividing filters, default 1
    activation : str or None, default None
    use_bias : bool, default True
    data_format : 'channels_first' or 'channels_last', default 'channels_first'
        'channels_last' takes and gives ``(N, H, W, C)`` (transposed at the edges).
    name : str, optional

    Raises
    ------
    ParamError
        ``Conv2D: `filters` must be a positive int. Received: filters=0``, ...
    """

    prefix = 'conv2d'


class Conv1DTranspose(_Conv):
    """Transposed 1-D convolution (``ff.sym.Deconvolution``) over ``(N, C, W)``.

    ``W_out = (W - 1) s - 2p + d(k - 1) + 1 + output_padding``; parameters as
    :class:`Conv2DTranspose` with ints for the sizes.
    """

    prefix = 'conv1dtranspose'
    ndim = 1
    transpose = True


class Conv2DTranspose(_Conv):
    """Transposed 2-D convolution (``ff.sym.Deconvolution``), the gradient of Conv2D.

    **Shapes**: data ``(N, C, H, W)``, weight ``(C, filters / groups, kh, kw)``,
    bias ``(filters,)``, out ``(N, filters, H_out, W_out)`` with
    ``H_out = (H - 1) s - 2p + d(k - 1) + 1 + output_padding``; ``'same'``
    gives ``H * s`` for an odd kernel.

    Parameters
    ----------
    filters, kernel_size, strides, padding, dilation_rate, groups, activation, use_bias, name
        As :class:`Conv2D`.
    output_padding : int or (int, int), optional
        Extra rows/columns at the end (MXNet ``adj``), each smaller than the stride.
    """

    prefix = 'conv2dtranspose'
    transpose = True


class _Pool2D(Layer):
    pool_type = 'max'
    ndim = 2

    def __init__(self, pool_size=2, strides=None, padding='valid', name=None,
                 input_shape=None, data_format='channels_first'):
        super().__init__(name, input_shape)
        cls = type(self).__name__
        self.pool_size = check_tuple(cls, 'pool_size', pool_size, self.ndim)
        self.strides = self.pool_size if strides is None else \
            check_tuple(cls, 'strides', strides, self.ndim)
        if padding not in ('valid', 'same'):
            _fail(cls, 'padding', "'valid' or 'same'", padding)
        if padding == 'same' and self.strides != self.pool_size:
            _fail(cls, 'padding', "'valid' when strides != pool_size ('same' is only exact "
                  "for strides == pool_size)", padding)
        self.padding = padding
        self.data_format = check_format(cls, data_format)

    def build_symbol(self, name, inputs):
        convention = 'full' if self.padding == 'same' else 'valid'
        data = to_channels_first(inputs[0], self.data_format, self.ndim, name)
        out = S.Pooling(data, kernel=self.pool_size, stride=self.strides,
                        pool_type=self.pool_type, pooling_convention=convention, name=name)
        return to_channels_last(out, self.data_format, self.ndim, name), None

    def _own_config(self):
        return {'pool_size': self.pool_size, 'strides': self.strides, 'padding': self.padding,
                'data_format': self.data_format}


class MaxPool1D(_Pool2D):
    """1-D max pooling over ``(N, C, W)`` (``ff.sym.Pooling(pool_type='max')``).

    Parameters
    ----------
    pool_size : int, default 2
    strides : int, optional
        Default: ``pool_size``.
    padding : 'valid' or 'same', default 'valid'
    data_format : 'channels_first' or 'channels_last', default 'channels_first'
    name : str, optional
    """

    prefix = 'maxpool1d'
    ndim = 1


class AvgPool1D(MaxPool1D):
    """1-D average pooling over ``(N, C, W)``; parameters of :class:`MaxPool1D`."""

    prefix = 'avgpool1d'
    pool_type = 'avg'


class MaxPool2D(_Pool2D):
    """2-D max pooling (``ff.sym.Pooling(pool_type='max')``).

    Parameters
    ----------
    pool_size : int or (int, int), default 2
    strides : int or (int, int), optional
        Default: ``pool_size``.
    padding : 'valid' or 'same', default 'valid'
        'same' (output ``ceil(n / s)``) needs ``strides == pool_size``.
    data_format : 'channels_first' or 'channels_last', default 'channels_first'
    name : str, optional
    """

    prefix = 'maxpool2d'


class AvgPool2D(_Pool2D):
    """2-D average pooling (``ff.sym.Pooling(pool_type='avg')``).

    Parameters are those of :class:`MaxPool2D`.
    """

    prefix = 'avgpool2d'
    pool_type = 'avg'


class GlobalAvgPool2D(Layer):
    """Mean over the spatial axes: ``(N, C, H, W) -> (N, C)`` (global Pooling, then Flatten).

    Parameters
    ----------
    data_format : 'channels_first' or 'channels_last', default 'channels_first'
        With 'channels_last' the input is ``(N, H, W, C)``.
    name : str, optional
    """

    prefix = 'globalavgpool2d'
    pool_type = 'avg'

    def __init__(self, data_format='channels_first', name=None, input_shape=None):
        super().__init__(name, input_shape)
        self.data_format = check_format(type(self).__name__, data_format)

    def build_symbol(self, name, inputs):
        data = to_channels_first(inputs[0], self.data_format, 2, name)
        pooled = S.Pooling(data, kernel=(1, 1), global_pool=True, pool_type=self.pool_type,
                           name=name)
        return S.Flatten(pooled, name=name + '_flatten'), None

    def _own_config(self):
        return {'data_format': self.data_format}


class GlobalMaxPool2D(GlobalAvgPool2D):
    """Maximum over the spatial axes: ``(N, C, H, W) -> (N, C)``; see :class:`GlobalAvgPool2D`."""

    prefix = 'globalmaxpool2d'
    pool_type = 'max'
