"""``ff.nd.random``: arrays of random numbers (MXNet ``mx.nd.random``).

Draws come from the global generator of :mod:`ffnumba.random`, so
``ff.random.seed(n)`` makes them repeat. The numbers differ from MXNet's
for the same seed (another generator); the distributions are the same.
"""
import numpy as np

from ..base import ParamError, _Null
from .. import random as _random
from .ndarray import NDArray, array

__all__ = ['uniform', 'normal']


def _draw(what, sample, shape, dtype, ctx, out):
    for v in sample.args:
        if isinstance(v, NDArray):
            raise ParamError('%s: distribution parameters must be numbers (per-element '
                             'NDArray parameters are not supported)' % what)
        if not isinstance(v, (int, float, np.integer, np.floating)) or isinstance(v, bool) \
                or not np.isfinite(v):
            raise ParamError('%s: distribution parameters must be finite numbers. Received: %r'
                             % (what, sample.args))
    if out is not None:
        shape = out.shape if shape is _Null else shape
        dtype = out.dtype if dtype is _Null else dtype
        ctx = out.context if ctx is None else ctx
    shape = () if shape is _Null or shape is None else shape
    try:
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        shape = None
    if shape is None or any(s < 0 for s in shape):
        raise ParamError('%s: `shape` must be an int or a tuple of ints >= 0' % what)
    dtype = np.float32 if dtype is _Null or dtype is None else np.dtype(dtype)
    if not np.issubdtype(dtype, np.floating):
        raise ParamError('%s: `dtype` must be a float type. Received: dtype=%r' % (what, dtype))
    try:
        host = np.asarray(sample(_random.generator(), shape or (1,))).astype(dtype)
    except (ValueError, OverflowError):     # numpy: scale < 0, high - low overflows
        raise ParamError('%s: invalid distribution parameters %r' % (what, sample.args)) \
            from None
    if out is not None:
        out[:] = host
        return out
    return array(host, ctx=ctx, dtype=dtype)


class _Sample:
    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __call__(self, rng, shape):
        return self.fn(rng, shape, *self.args)


def uniform(low=0, high=1, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Uniform draws on ``[low, high)``.

    Parameters
    ----------
    low, high : float, default 0, 1
    shape : int or tuple of int, default (1,)
    dtype : float dtype, default float32
    ctx : Context, optional
    out : NDArray, optional
        Filled in place (its shape and dtype are the defaults).

    Returns
    -------
    NDArray
    """
    return _draw('uniform', _Sample(lambda r, s, lo, hi: r.uniform(lo, hi, s), low, high),
                 shape, dtype, ctx, out)


def normal(loc=0, scale=1, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Normal draws with mean ``loc`` and standard deviation ``scale``.

    Parameters and returns as :func:`uniform`.
    """
    if not isinstance(scale, NDArray) and scale < 0:
        raise ParamError('normal: `scale` must be >= 0. Received: scale=%r' % (scale,))
    return _draw('normal', _Sample(lambda r, s, m, sd: r.normal(m, sd, s), loc, scale),
                 shape, dtype, ctx, out)
