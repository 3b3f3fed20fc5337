"""``ff.sym.random``: sampling symbols (MXNet ``mx.sym.random``).

``uniform(low, high, shape)`` and ``normal(loc, scale, shape)`` build the
zero-input ``_random_uniform`` / ``_random_normal`` nodes;
``multinomial(data, shape)`` builds ``_sample_multinomial`` and
``shuffle(data)`` builds ``_shuffle`` (see :mod:`ffnumba.ops.tensor.sampling`).
The draws come from the global generator at forward time, so
``ff.random.seed(n)`` before a forward repeats it. Symbol parameters
(MXNet's ``_sample_uniform`` with Symbol ``low``/``high``) are not supported:
they raise ``ParamError``.
"""
from ..base import ParamError, _Null
from ..ops.registry import get_op
from .compose import make_op_symbol
from .symbol import Symbol

__all__ = ['uniform', 'normal', 'multinomial', 'shuffle']


def _make(opname, inputs, params, name, attr):
    for k, v in params.items():
        if isinstance(v, Symbol):
            raise ParamError('%s: `%s` must be a number; Symbol parameters are not supported'
                             % (opname, k))
    params = {k: v for k, v in params.items() if v is not None and v is not _Null}
    return make_op_symbol(get_op(opname), tuple(inputs), params, name=name, attr=attr,
                          hint=opname)


def uniform(low=0, high=1, shape=_Null, dtype=_Null, ctx=None, name=None, attr=None, **kwargs):
    """Uniform draws on ``[low, high)`` (MXNet ``mx.sym.random.uniform``).

    Parameters
    ----------
    low, high : float, default 0, 1
    shape : int or tuple of int, default ()
    dtype : str, default 'float32'
    ctx : Context, optional
        Ignored (the executor's context decides), as MXNet's symbols do.
    name, attr : optional

    Returns
    -------
    Symbol
        A ``_random_uniform`` node without inputs.
    """
    return _make('_random_uniform', (), dict(kwargs, low=low, high=high, shape=shape,
                                             dtype=dtype), name, attr)


def normal(loc=0, scale=1, shape=_Null, dtype=_Null, ctx=None, name=None, attr=None, **kwargs):
    """Normal draws of mean ``loc`` and standard deviation ``scale``
    (MXNet ``mx.sym.random.normal``); see :func:`uniform`."""
    return _make('_random_normal', (), dict(kwargs, loc=loc, scale=scale, shape=shape,
                                            dtype=dtype), name, attr)


def multinomial(data, shape=_Null, get_prob=False, dtype='int32', name=None, attr=None,
                **kwargs):
    """Category indices drawn from the distributions on ``data``'s last axis
    (MXNet ``mx.sym.random.multinomial``).

    Output shape ``data.shape[:-1] + shape``; ``get_prob=True`` raises
    ``ParamError`` (MXNet's log-probability output is for autograd, not ported).
    """
    return _make('_sample_multinomial', (data,), dict(kwargs, shape=shape, get_prob=get_prob,
                                                      dtype=dtype), name, attr)


def shuffle(data, name=None, attr=None, **kwargs):
    """``data`` with its first axis randomly permuted (MXNet ``mx.sym.random.shuffle``)."""
    return _make('_shuffle', (data,), dict(kwargs), name, attr)
