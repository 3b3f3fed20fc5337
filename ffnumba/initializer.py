"""Weight initializers (MXNet ``mx.init``, 1.9.1 semantics).

An initializer is called as ``init(desc, arr)`` and writes ``arr`` in place
(``arr[:] = values``; ``arr`` is an NDArray or a numpy array).

Dispatch for an :class:`InitDesc` (what ``Module.init_params`` passes):

1. ``desc.attrs['__init__']`` set (a variable's ``init=`` or an operator's
   own choice, such as BatchNorm's moving statistics): ``create(it)`` writes
   the array through its weight rule.
2. Otherwise by name suffix: ``weight`` -> this initializer's scheme,
   ``bias`` -> 0, ``gamma`` -> 1, ``beta`` -> 0, ``min`` -> 0, ``max`` -> 1;
   anything else raises :class:`~ffnumba.base.ParamError`.

A plain ``str`` name takes MXNet's legacy path (``FeedForward``; it warns
with ``DeprecationWarning``), which also knows ``upsampling*`` (bilinear),
``stn_loc*`` and the BatchNorm statistics ``moving_mean``/``moving_var``/
``moving_inv_var``/``moving_avg``.

Random numbers come from :func:`ffnumba.random.generator`, so
``ff.random.seed(n)`` makes initialization repeat exactly.
"""
import json
import logging
import re
import warnings
from math import sqrt

import numpy as np

from . import random as _random
from . import registry
from .base import ParamError, ShapeError

_LOG = logging.getLogger(__name__)

__all__ = ['InitDesc', 'Initializer', 'register', 'alias', 'create', 'Load', 'Mixed', 'Zero',
           'One', 'Constant', 'Uniform', 'Normal', 'Orthogonal', 'Xavier', 'MSRAPrelu',
           'Bilinear', 'LSTMBias']


class InitDesc(str):
    """A parameter name (a ``str``) carrying its attributes and the global initializer.

    Parameters
    ----------
    name : str
    attrs : dict, optional
        The variable's attributes; ``'__init__'`` selects an initializer (JSON).
    global_init : Initializer, optional
        The initializer that handles the parameter when nothing else does.
    """

    def __new__(cls, name, attrs=None, global_init=None):
        ret = super().__new__(cls, name)
        ret.attrs = attrs or {}
        ret.global_init = global_init
        return ret


def _shape(arr):
    return tuple(arr.shape)


class Initializer:
    """Base class: dispatches on the parameter name; subclasses define ``_init_weight``."""

    def __init__(self, **kwargs):
        self._kwargs = kwargs
        self._verbose = False
        self._print_func = None

    def set_verbosity(self, verbose=False, print_func=None):
        """Log each initialized array with ``print_func(arr)`` (default: norm / sqrt(size))."""
        self._verbose = verbose
        if print_func is None:
            def print_func(x):
                x = np.asarray(x, dtype=np.float64)
                return str(np.linalg.norm(x) / sqrt(max(x.size, 1)))
        self._print_func = print_func
        return self

    def _verbose_print(self, desc, init, arr):
        if self._verbose and self._print_func:
            _LOG.info('Initialized %s as %s: %s', desc, init, self._print_func(arr))

    def dumps(self):
        """``'["name", {kwargs}]'``, the JSON that :func:`create` reads back."""
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])

    def __repr__(self):
        return '%s(%s)' % (type(self).__name__,
                           ', '.join('%s=%r' % kv for kv in sorted(self._kwargs.items())))

    def __eq__(self, other):
        if not isinstance(other, Initializer):
            return NotImplemented
        return type(self) is type(other) and self._kwargs == other._kwargs

    __hash__ = object.__hash__

    def __call__(self, desc, arr):
        """Initialize ``arr`` in place for the parameter ``desc``.

        Parameters
        ----------
        desc : InitDesc or str
        arr : NDArray or numpy.ndarray

        Raises
        ------
        ParamError
            For a name no rule covers, or an ``arr`` that is not an array.
        """
        if not hasattr(arr, 'shape') or not hasattr(arr, '__setitem__'):
            raise ParamError('%s: `arr` must be an NDArray or a numpy array. Received: %s'
                             % (type(self).__name__, type(arr).__name__))
        if not isinstance(desc, InitDesc):
            self._legacy_init(desc, arr)
            return
        if desc.global_init is None:
            desc.global_init = self
        init = desc.attrs.get('__init__', '')
        if init:
            create(init)._init_weight(desc, arr)
            self._verbose_print(desc, init, arr)
            return
        for suffix, method in (('weight', self._init_weight), ('bias', self._init_bias),
                               ('gamma', self._init_gamma), ('beta', self._init_beta),
                               ('min', self._init_zero), ('max', self._init_one)):
            if desc.endswith(suffix):
                method(desc, arr)
                self._verbose_print(desc, suffix, arr)
                return
        self._init_default(desc, arr)

    def _legacy_init(self, name, arr):
        warnings.warn('Calling an initializer with init(str, NDArray) is deprecated; '
                      'use init(ff.init.InitDesc(...), NDArray)', DeprecationWarning,
                      stacklevel=3)
        if not isinstance(name, str):
            raise ParamError('Initializer: `name` must be a str. Received: %r' % (name,))
        if name.startswith('upsampling'):
            self._init_bilinear(name, arr)
        elif name.startswith('stn_loc') and name.endswith('weight'):
            self._init_zero(name, arr)
        elif name.startswith('stn_loc') and name.endswith('bias'):
            self._init_loc_bias(name, arr)
        elif name.endswith('bias'):
            self._init_bias(name, arr)
        elif name.endswith('gamma'):
            self._init_gamma(name, arr)
        elif name.endswith('beta'):
            self._init_beta(name, arr)
        elif name.endswith('weight'):
            self._init_weight(name, arr)
        elif name.endswith('moving_mean'):
            self._init_zero(name, arr)
        elif name.endswith('moving_var'):
            self._init_one(name, arr)
        elif name.endswith('moving_inv_var') or name.endswith('moving_avg'):
            self._init_zero(name, arr)
        elif name.endswith('min'):
            self._init_zero(name, arr)
        elif name.endswith('max'):
            self._init_one(name, arr)
        else:
            self._init_default(name, arr)

    @staticmethod
    def _init_bilinear(_, arr):
        arr[:] = _bilinear(_shape(arr))

    @staticmethod
    def _init_loc_bias(name, arr):
        if _shape(arr)[0] != 6:
            raise ShapeError('Initializer: %s must have 6 entries (an affine transform). '
                             'Received: shape=%s' % (name, _shape(arr)))
        arr[:] = np.array([1.0, 0, 0, 0, 1.0, 0])

    @staticmethod
    def _init_zero(_, arr):
        arr[:] = 0.0

    @staticmethod
    def _init_one(_, arr):
        arr[:] = 1.0

    _init_bias = _init_zero
    _init_beta = _init_zero
    _init_gamma = _init_one

    def _init_weight(self, name, arr):
        raise NotImplementedError('Must override it')

    def _init_default(self, name, _):
        raise ParamError(
            'Unknown initialization pattern for %s. Default initialization is limited to '
            '"weight", "bias", "gamma" (1.0) and "beta" (0.0); use '
            'ff.sym.Variable(init=ff.init.*) to choose one' % name)


register = registry.get_register_func(Initializer, 'initializer')
_alias = registry.get_alias_func(Initializer, 'initializer')


def alias(*aliases):
    """Class decorator: register an :class:`Initializer` under extra names.

    Parameters
    ----------
    *aliases : str
        Names (any case) that :func:`create` will also accept.

    Returns
    -------
    callable
        The decorator; it returns the class unchanged.
    """
    return _alias(*aliases)
create = registry.get_create_func(Initializer, 'initializer')


def _bilinear(shape):
    """Bilinear upsampling kernel of a 4-D ``shape`` (same weights for every channel)."""
    if len(shape) != 4:
        raise ShapeError('Bilinear: the weight must be 4-D (out, in, kh, kw). Received: '
                         'shape=%s' % (shape,))
    f = np.ceil(shape[3] / 2.)
    c = (2 * f - 1 - f % 2) / (2. * f)
    x = np.arange(shape[3])
    y = np.arange(shape[2])
    kernel = np.outer(1 - np.abs(y / f - c), 1 - np.abs(x / f - c)).astype(np.float32)
    return np.broadcast_to(kernel, shape)


class Load:
    """Initialize from saved arrays; names missing there go to ``default_init``.

    Parameters
    ----------
    param : str or dict of name -> NDArray
        A ``.params`` file name or a loaded dict; ``arg:``/``aux:`` prefixes are dropped.
    default_init : Initializer, optional
    verbose : bool, default False
        Log where each parameter came from.

    Raises
    ------
    ShapeError
        Loaded shape differs from the target shape.
    ParamError
        A name absent from ``param`` with no ``default_init``.
    """

    def __init__(self, param, default_init=None, verbose=False):
        if isinstance(param, str):
            from .ndarray import load
            param = load(param)
        if not isinstance(param, dict):
            raise ParamError('Load: `param` must be a dict of name -> array or a file name '
                             'holding one. Received: %s' % type(param).__name__)
        self.param = {}
        for name, arr in param.items():
            key = name[4:] if name.startswith(('arg:', 'aux:')) else name
            self.param[key] = arr
        self.default_init = default_init
        self.verbose = verbose

    def __call__(self, name, arr):
        """Copy the loaded value of ``name`` into ``arr``, or use ``default_init``.

        Parameters
        ----------
        name : str or InitDesc
        arr : NDArray or numpy.ndarray
            Filled in place.

        Raises
        ------
        ShapeError
            The loaded array's shape differs from ``arr.shape``.
        ParamError
            ``name`` was not loaded and there is no ``default_init``.
        """
        if name in self.param:
            src = self.param[name]
            if tuple(src.shape) != _shape(arr):
                raise ShapeError('Parameter %s cannot be initialized from loading. Shape '
                                 'mismatch, target %s vs loaded %s'
                                 % (name, _shape(arr), tuple(src.shape)))
            arr[:] = np.asarray(src)
            if self.verbose:
                _LOG.info('Initialized %s by loading', name)
        else:
            if self.default_init is None:
                raise ParamError('Cannot initialize %s: not found in the loaded params and '
                                 'no default initializer given' % name)
            self.default_init(name, arr)
            if self.verbose:
                _LOG.info('Initialized %s by default', name)


class Mixed:
    """Pick an initializer by regular expression; the first ``re.match`` wins.

    Parameters
    ----------
    patterns : list of str
    initializers : list of Initializer
        Same length as ``patterns``.
    """

    def __init__(self, patterns, initializers):
        if len(patterns) != len(initializers):
            raise ParamError('Mixed: %d patterns but %d initializers'
                             % (len(patterns), len(initializers)))
        self.map = list(zip([re.compile(p) for p in patterns], initializers))

    def __call__(self, name, arr):
        """Initialise ``arr`` with the first initializer whose pattern matches ``name``.

        Parameters
        ----------
        name : str or InitDesc
        arr : NDArray or numpy.ndarray
            Filled in place.

        Raises
        ------
        ParamError
            No pattern matches ``name``.
        """
        for prog, init in self.map:
            if prog.match(name):
                init(name, arr)
                return
        raise ParamError('Parameter name %s did not match any pattern. Consider adding a '
                         '".*" pattern at the end with a default initializer.' % name)


@register
@alias('zeros')
class Zero(Initializer):
    """Fill with 0."""

    def __init__(self):
        super().__init__()

    def _init_weight(self, _, arr):
        arr[:] = 0


@register
@alias('ones')
class One(Initializer):
    """Fill with 1."""

    def __init__(self):
        super().__init__()

    def _init_weight(self, _, arr):
        arr[:] = 1


@register
class Constant(Initializer):
    """Fill with ``value`` (a scalar or an array that broadcasts to the weight)."""

    def __init__(self, value):
        # MXNet keeps an array value as a nested list in _kwargs (so it dumps as JSON)
        super().__init__(value=value if np.isscalar(value) else np.asarray(value).tolist())
        self.value = value

    def _init_weight(self, _, arr):
        arr[:] = np.asarray(self.value)

    def dumps(self):
        val = self._kwargs['value']
        if not np.isscalar(val):
            val = np.asarray(val).tolist()
        return json.dumps([self.__class__.__name__.lower(), dict(self._kwargs, value=val)])


@register
class Uniform(Initializer):
    """Draw from ``U(-scale, scale)``.

    Parameters
    ----------
    scale : float, default 0.07
    """

    def __init__(self, scale=0.07):
        super().__init__(scale=scale)
        self.scale = scale

    def _init_weight(self, _, arr):
        arr[:] = _random.generator().uniform(-self.scale, self.scale, _shape(arr))


@register
class Normal(Initializer):
    """Draw from ``N(0, sigma^2)``.

    Parameters
    ----------
    sigma : float, default 0.01
        Standard deviation.
    """

    def __init__(self, sigma=0.01):
        super().__init__(sigma=sigma)
        self.sigma = sigma

    def _init_weight(self, _, arr):
        arr[:] = _random.generator().normal(0.0, self.sigma, _shape(arr))


@register
class Orthogonal(Initializer):
    """Orthogonal matrix from the SVD of a random ``(out, prod(rest))`` matrix, times ``scale``.

    Saxe et al., "Exact solutions to the nonlinear dynamics of learning in deep
    linear neural networks", 2014.

    Parameters
    ----------
    scale : float, default 1.414
    rand_type : {'uniform', 'normal'}, default 'uniform'
    """

    def __init__(self, scale=1.414, rand_type='uniform'):
        if rand_type not in ('uniform', 'normal'):
            raise ParamError("Orthogonal: `rand_type` must be 'uniform' or 'normal'. "
                             "Received: rand_type=%r" % (rand_type,))
        super().__init__(scale=scale, rand_type=rand_type)
        self.scale = scale
        self.rand_type = rand_type

    def _init_weight(self, _, arr):
        shape = _shape(arr)
        nout, nin = shape[0], int(np.prod(shape[1:]))
        rng = _random.generator()
        if self.rand_type == 'uniform':
            tmp = rng.uniform(-1.0, 1.0, (nout, nin))
        else:
            tmp = rng.normal(0.0, 1.0, (nout, nin))
        u, _s, v = np.linalg.svd(tmp, full_matrices=False)
        res = u if u.shape == tmp.shape else v
        arr[:] = self.scale * res.reshape(shape)


@register
class Xavier(Initializer):
    """Glorot/Xavier initialization, scale ``sqrt(magnitude / factor)``.

    ``hw = prod(shape[2:])``, ``fan_in = shape[1] * hw``,
    ``fan_out = shape[0] * hw``; ``factor`` is their mean (``'avg'``),
    ``fan_in`` (``'in'``) or ``fan_out`` (``'out'``). Values are
    ``U(-s, s)`` (``'uniform'``) or ``N(0, s^2)`` (``'gaussian'``).
    Glorot & Bengio, AISTATS 2010.

    Parameters
    ----------
    rnd_type : {'uniform', 'gaussian'}, default 'uniform'
    factor_type : {'avg', 'in', 'out'}, default 'avg'
    magnitude : float, default 3

    Raises
    ------
    ShapeError
        For a weight with fewer than 2 dimensions (names the parameter).
    """

    def __init__(self, rnd_type='uniform', factor_type='avg', magnitude=3):
        if rnd_type not in ('uniform', 'gaussian'):
            raise ParamError("Xavier: `rnd_type` must be 'uniform' or 'gaussian'. "
                             "Received: rnd_type=%r" % (rnd_type,))
        if factor_type not in ('avg', 'in', 'out'):
            raise ParamError("Xavier: `factor_type` must be 'avg', 'in' or 'out'. "
                             "Received: factor_type=%r" % (factor_type,))
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        self.rnd_type = rnd_type
        self.factor_type = factor_type
        self.magnitude = float(magnitude)

    def _init_weight(self, name, arr):
        shape = _shape(arr)
        if len(shape) < 2:
            raise ShapeError('Xavier initializer cannot be applied to vector %s. It requires '
                             'at least 2D. Received: shape=%s' % (name, shape))
        hw_scale = float(np.prod(shape[2:])) if len(shape) > 2 else 1.
        fan_in, fan_out = shape[1] * hw_scale, shape[0] * hw_scale
        factor = {'avg': (fan_in + fan_out) / 2.0, 'in': fan_in,
                  'out': fan_out}[self.factor_type]
        scale = np.sqrt(self.magnitude / factor)
        rng = _random.generator()
        if self.rnd_type == 'uniform':
            arr[:] = rng.uniform(-scale, scale, shape)
        else:
            arr[:] = rng.normal(0.0, scale, shape)


@register
class MSRAPrelu(Xavier):
    """He et al. 2015 ("Delving deep into rectifiers"): Xavier gaussian, magnitude 2/(1+slope^2).

    Parameters
    ----------
    factor_type : {'avg', 'in', 'out'}, default 'avg'
    slope : float, default 0.25
        Negative slope of the PReLU that follows.
    """

    def __init__(self, factor_type='avg', slope=0.25):
        super().__init__('gaussian', factor_type, 2. / (1 + slope ** 2))
        self._kwargs = {'factor_type': factor_type, 'slope': slope}


@register
class Bilinear(Initializer):
    """Bilinear upsampling kernel for a 4-D Deconvolution weight (FCN-style)."""

    def __init__(self):
        super().__init__()

    def _init_weight(self, _, arr):
        arr[:] = _bilinear(_shape(arr))


@register
class LSTMBias(Initializer):
    """LSTM bias: 0 everywhere except ``forget_bias`` on the forget gate (2nd quarter).

    Parameters
    ----------
    forget_bias : float, default 1.0
    """

    def __init__(self, forget_bias=1.0):
        super().__init__(forget_bias=forget_bias)
        self.forget_bias = forget_bias

    def _init_weight(self, name, arr):
        n = _shape(arr)[0]
        if n % 4:
            raise ShapeError('LSTMBias: %s must hold 4 gates (size divisible by 4). '
                             'Received: shape=%s' % (name, _shape(arr)))
        values = np.zeros(_shape(arr))
        values[n // 4:n // 2] = self.forget_bias
        arr[:] = values
