"""``ff.nd.random``: arrays of random numbers (MXNet ``mx.nd.random``).

Every sampler draws from the global generator of :mod:`ffnumba.random`, so
``ff.random.seed(n)`` makes a sequence of draws repeat exactly. The numbers
differ from MXNet's for the same seed (another generator); the
distributions and the parameterisations are MXNet's:

===============================  ==============================================
``uniform(low, high)``           on ``[low, high)``
``normal(loc, scale)``           mean ``loc``, standard deviation ``scale``
``randn(*shape, loc, scale)``    normal with the shape given by position
``randint(low, high)``           integers in ``[low, high)``, int32 by default
``gamma(alpha, beta)``           shape ``alpha``, scale ``beta``
``exponential(scale)``           mean ``scale`` (rate ``1 / scale``)
``poisson(lam)``                 mean ``lam``
``negative_binomial(k, p)``      failures before ``k`` successes of chance ``p``
``generalized_negative_binomial  Poisson with a Gamma(1/alpha, alpha*mu) rate:
(mu, alpha)``                    mean ``mu``, variance ``mu + alpha*mu**2``
``multinomial(data, shape)``     category indices drawn from the last axis
``shuffle(data)``                a copy with the first axis permuted
===============================  ==============================================

A parameter may be an NDArray: then one set of ``shape`` draws is made per
element and the result has shape ``param.shape + shape`` (MXNet's
``_sample_*`` operators). Without ``shape`` a draw of scalar parameters has
shape ``(1,)``. Source of the parameterisations: MXNet 1.9.1
``python/mxnet/ndarray/random.py`` documentation.
"""
import numpy as np

from ..base import FFError, ParamError, ShapeError, _Null
from .. import random as _random
from .ndarray import NDArray, array

__all__ = ['uniform', 'normal', 'randn', 'randint', 'gamma', 'exponential', 'poisson',
           'negative_binomial', 'generalized_negative_binomial', 'multinomial', 'shuffle']


def _shape(shape):
    if shape is _Null or shape is None:
        return None
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def _draw(what, sample, params, shape, dtype, ctx, out, kinds='float'):
    """Draw ``sample(rng, *params, size)``; NDArray params give per-element draws."""
    nd_params = [p for p in params if isinstance(p, NDArray)]
    if out is not None:
        if shape is _Null or shape is None:
            shape = out.shape[nd_params[0].ndim:] if nd_params else out.shape
        dtype = out.dtype if dtype is _Null or dtype is None else dtype
        ctx = out.context if ctx is None else ctx
    shape = _shape(shape)
    if ctx is None:
        ctx = nd_params[0].context if nd_params else None
    default = np.float32 if kinds == 'float' else np.int32
    dtype = np.dtype(default if dtype is _Null or dtype is None else dtype)
    if kinds == 'float' and not np.issubdtype(dtype, np.floating):
        raise ParamError('%s: `dtype` must be a float type. Received: dtype=%r' % (what, dtype))
    if kinds == 'int' and not np.issubdtype(dtype, np.integer):
        raise ParamError('%s: `dtype` must be an integer type. Received: dtype=%r'
                         % (what, dtype))
    if nd_params:
        pshape = nd_params[0].shape
        if any(p.shape != pshape for p in nd_params):
            raise ShapeError('%s: NDArray parameters must share one shape. Received: %s'
                             % (what, [p.shape for p in nd_params]))
        host = [p.asnumpy().reshape(pshape + (1,) * len(shape or ())) if isinstance(p, NDArray)
                else p for p in params]
        size = pshape + (shape or ())
    else:
        host = list(params)
        size = shape or (1,)
    if any(int(d) < 0 for d in size):
        raise ParamError('%s: `shape` must hold sizes >= 0. Received: shape=%s' % (what, shape))
    for p in host:
        if not isinstance(p, np.ndarray) and isinstance(p, (int, float, np.number)) \
                and not np.isfinite(p):
            raise ParamError('%s: distribution parameters must be finite. Received: %r'
                             % (what, params))
    try:
        values = np.asarray(sample(_random.generator(), *host, size))
        values = np.broadcast_to(values, size).astype(dtype)
    except (ValueError, OverflowError):     # numpy: scale < 0, high - low overflows...
        raise ParamError('%s: invalid distribution parameters %r for shape %s'
                         % (what, params, size)) from None
    except MemoryError:
        raise FFError('%s: cannot allocate a draw of shape %s: out of memory'
                      % (what, size)) from None
    if out is not None:
        if out.shape != values.shape:
            raise ShapeError('%s: `out` has shape %s; the draw has %s'
                             % (what, out.shape, values.shape))
        out[:] = values
        return out
    return array(values, ctx=ctx, dtype=dtype)


def _no_extra(what, kwargs):
    extra = sorted(k for k in kwargs if k != 'name')
    if extra:
        raise ParamError('%s: unknown parameter(s) %s' % (what, ', '.join(extra)))


def _check(what, name, value, ok, rule):
    v = value.asnumpy() if isinstance(value, NDArray) else np.asarray(value)
    if not np.all(ok(v)):
        raise ParamError('%s: `%s` must be %s. Received: %s=%r' % (what, name, rule, name,
                                                                   value))


def uniform(low=0, high=1, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Uniform draws on ``[low, high)``.

    Parameters
    ----------
    low, high : float or NDArray, default 0, 1
    shape : int or tuple of int, optional
        Default ``(1,)`` (scalar parameters) or ``()`` per element.
    dtype : float dtype, default float32
    ctx : Context, optional
    out : NDArray, optional
        Filled in place (its shape and dtype are the defaults).

    Returns
    -------
    NDArray

    Raises
    ------
    ParamError
        For a non-float ``dtype``.
    """
    _no_extra('uniform', kwargs)
    return _draw('uniform', lambda r, lo, hi, s: r.uniform(lo, hi, s), (low, high), shape,
                 dtype, ctx, out)


def normal(loc=0, scale=1, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Normal draws with mean ``loc`` and standard deviation ``scale`` (>= 0).

    Parameters and returns as :func:`uniform`.
    """
    _no_extra('normal', kwargs)
    _check('normal', 'scale', scale, lambda v: v >= 0, '>= 0')
    return _draw('normal', lambda r, m, sd, s: r.normal(m, sd, s), (loc, scale), shape,
                 dtype, ctx, out)


def randn(*shape, loc=0, scale=1, dtype=_Null, ctx=None, out=None, **kwargs):
    """Normal draws with the shape given by position: ``randn(2, 3)``."""
    return normal(loc, scale, shape=shape or _Null, dtype=dtype, ctx=ctx, out=out)


def randint(low, high, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Uniform integers in ``[low, high)``; dtype int32 (default) or int64.

    Raises
    ------
    ParamError
        When ``high <= low`` or ``dtype`` is not an integer type.
    """
    _no_extra('randint', kwargs)
    if not isinstance(low, NDArray) and not isinstance(high, NDArray) and high <= low:
        raise ParamError('randint: `high` must be > `low`. Received: low=%r, high=%r'
                         % (low, high))
    return _draw('randint', lambda r, lo, hi, s: r.integers(lo, hi, s), (low, high), shape,
                 dtype, ctx, out, kinds='int')


def gamma(alpha=1, beta=1, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Gamma draws with shape ``alpha`` (> 0) and scale ``beta`` (> 0); mean ``alpha*beta``."""
    _no_extra('gamma', kwargs)
    _check('gamma', 'alpha', alpha, lambda v: v > 0, '> 0')
    _check('gamma', 'beta', beta, lambda v: v > 0, '> 0')
    return _draw('gamma', lambda r, a, b, s: r.gamma(a, b, s), (alpha, beta), shape, dtype,
                 ctx, out)


def exponential(scale=1, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Exponential draws with mean ``scale`` (> 0)."""
    _no_extra('exponential', kwargs)
    _check('exponential', 'scale', scale, lambda v: v > 0, '> 0')
    return _draw('exponential', lambda r, b, s: r.exponential(b, s), (scale,), shape, dtype,
                 ctx, out)


def poisson(lam=1, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Poisson draws with mean ``lam`` (>= 0), stored as floats (MXNet's default)."""
    _no_extra('poisson', kwargs)
    _check('poisson', 'lam', lam, lambda v: v >= 0, '>= 0')
    return _draw('poisson', lambda r, lm, s: r.poisson(lm, s), (lam,), shape, dtype, ctx, out)


def negative_binomial(k=1, p=1, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Failures before ``k`` (> 0) successes of chance ``p`` (in (0, 1])."""
    _no_extra('negative_binomial', kwargs)
    _check('negative_binomial', 'k', k, lambda v: v > 0, '> 0')
    _check('negative_binomial', 'p', p, lambda v: (v > 0) & (v <= 1), 'in (0, 1]')
    return _draw('negative_binomial', lambda r, kk, pp, s: r.negative_binomial(kk, pp, s),
                 (k, p), shape, dtype, ctx, out)


def _gen_neg_binomial(r, mu, alpha, s):
    mu = np.array(np.broadcast_to(np.asarray(mu, np.float64), s))
    alpha = np.broadcast_to(np.asarray(alpha, np.float64), s)
    lam = mu.copy()
    pos = alpha > 0
    lam[pos] = r.gamma(1.0 / alpha[pos], alpha[pos] * mu[pos])
    return r.poisson(lam)


def generalized_negative_binomial(mu=1, alpha=1, shape=_Null, dtype=_Null, ctx=None, out=None,
                                  **kwargs):
    """Poisson draws whose rate is Gamma(1/alpha, alpha*mu): mean ``mu`` (>= 0), variance
    ``mu + alpha*mu**2``; ``alpha`` (>= 0) 0 gives Poisson(mu)."""
    _no_extra('generalized_negative_binomial', kwargs)
    _check('generalized_negative_binomial', 'mu', mu, lambda v: v >= 0, '>= 0')
    _check('generalized_negative_binomial', 'alpha', alpha, lambda v: v >= 0, '>= 0')
    return _draw('generalized_negative_binomial', _gen_neg_binomial, (mu, alpha), shape,
                 dtype, ctx, out)


def multinomial(data, shape=_Null, get_prob=False, out=None, dtype='int32', **kwargs):
    """Category indices drawn from the probabilities on ``data``'s last axis.

    Parameters
    ----------
    data : NDArray, shape ``(..., k)``
        Probabilities (each row should sum to 1; as MXNet, a row is used as
        given after division by its sum, which is not checked against 1).
    shape : int or tuple, optional
        Draws per distribution; the result has shape ``data.shape[:-1] + shape``
        (``data.shape[:-1]`` without it).
    get_prob : bool, default False
        Return ``[samples, log_probabilities]`` (same shape; ``data``'s dtype).
    dtype : str, default 'int32'

    Raises
    ------
    ParamError
        When a row has a negative entry or sums to 0, or ``data`` is not an NDArray.
    """
    _no_extra('multinomial', kwargs)
    if not isinstance(data, NDArray):
        raise ParamError('multinomial: `data` must be an NDArray of probabilities')
    probs = data.asnumpy().astype(np.float64)
    if probs.ndim == 0 or probs.shape[-1] == 0:
        raise ShapeError('multinomial: `data` needs a non-empty last axis. Received: shape %s'
                         % (data.shape,))
    if (probs < 0).any() or not (probs.sum(-1) > 0).all():
        raise ParamError('multinomial: every row of `data` must be non-negative with a '
                         'positive sum')
    extra = _shape(shape) or ()
    rows = probs.reshape(-1, probs.shape[-1])
    cdf = np.cumsum(rows, axis=1)
    cdf /= cdf[:, -1:]
    n = int(np.prod(extra, dtype=np.int64)) if extra else 1
    u = _random.generator().random((rows.shape[0], n))
    idx = np.stack([np.searchsorted(c, ui, side='right') for c, ui in zip(cdf, u)])
    idx = np.minimum(idx, rows.shape[1] - 1)
    res_shape = data.shape[:-1] + extra
    samples = array(idx.reshape(res_shape), ctx=data.context, dtype=dtype)
    if out is not None:
        out[:] = samples
        samples = out
    if not get_prob:
        return samples
    logp = np.log(np.take_along_axis(rows / rows.sum(1, keepdims=True), idx, axis=1))
    return [samples, array(logp.reshape(res_shape), ctx=data.context, dtype=data.dtype)]


def shuffle(data, **kwargs):
    """A copy of ``data`` with its first axis randomly permuted.

    Returns
    -------
    NDArray
        Same shape, dtype and context.
    """
    _no_extra('shuffle', kwargs)
    if not isinstance(data, NDArray):
        raise ParamError('shuffle: `data` must be an NDArray')
    host = data.asnumpy()
    if host.ndim:
        host = host[_random.generator().permutation(host.shape[0])]
    return array(host, ctx=data.context, dtype=data.dtype)


# ---------------------------------------------------------------- MXNet's operator names
# ``mx.nd.random_uniform``/``mx.nd.uniform`` and friends are MXNet's ``_random_*``
# operators (scalar parameters) and ``mx.nd.sample_*`` its ``_sample_*`` operators
# (NDArray parameters); both parameterise the exponential by its rate ``lam``.

def _exponential_rate(lam=1, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Exponential draws with rate ``lam`` (> 0): mean ``1 / lam`` (MXNet's operator form)."""
    _check('exponential', 'lam', lam, lambda v: v > 0, '> 0')
    scale = 1.0 / lam.asnumpy() if isinstance(lam, NDArray) else 1.0 / lam
    if isinstance(lam, NDArray):
        scale = array(scale, ctx=lam.context, dtype=lam.dtype)
    return exponential(scale, shape=shape, dtype=dtype, ctx=ctx, out=out)


def _sample(fn, names):
    """``fn`` called with MXNet's ``_sample_*`` parameter names (``mu``, ``sigma``...)."""
    def call(*args, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
        kw = {ours: kwargs.pop(theirs) for theirs, ours in names if theirs in kwargs}
        _no_extra('sample', kwargs)
        return fn(*args, shape=shape, dtype=dtype, ctx=ctx, out=out, **kw)
    return call


OP_NAMES = {
    'random_uniform': uniform, 'uniform': uniform, 'random_normal': normal, 'normal': normal,
    'random_randint': randint, 'random_gamma': gamma, 'random_exponential': _exponential_rate,
    'random_poisson': poisson, 'random_negative_binomial': negative_binomial,
    'random_generalized_negative_binomial': generalized_negative_binomial,
    'sample_uniform': uniform, 'sample_normal': _sample(normal, [('mu', 'loc'),
                                                                 ('sigma', 'scale')]),
    'sample_gamma': gamma, 'sample_exponential': _exponential_rate, 'sample_poisson': poisson,
    'sample_negative_binomial': negative_binomial,
    'sample_generalized_negative_binomial': generalized_negative_binomial,
    'sample_multinomial': multinomial,
}
