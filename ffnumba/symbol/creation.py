"""MXNet's ``mx.sym`` creation functions with their positional signatures.

``zeros(shape)``, ``ones(shape)``, ``full(shape, val)``, ``arange(start, stop)``,
``linspace(start, stop, num)`` and ``eye(N, M, k)`` build the ``_zeros``,
``_ones``, ``_full``, ``_arange``, ``_linspace`` and ``_eye`` nodes of
:mod:`ffnumba.ops.tensor.init_op`. Keyword arguments spelled ``__name__``
(``__layout__='NC'``, as ``BaseRNNCell.begin_state`` passes) become node
attributes, as in MXNet.
"""
from ..ops.registry import get_op
from .compose import make_op_symbol

__all__ = ['zeros', 'ones', 'full', 'arange', 'linspace', 'eye']


def _make(opname, params, name, attr):
    attrs = dict(attr or {})
    for k in [k for k in params if k.startswith('__') and k.endswith('__')]:
        attrs[k] = str(params.pop(k))
    return make_op_symbol(get_op(opname), (), params, name=name, attr=attrs or None,
                          hint=opname)


def zeros(shape, dtype=None, name=None, attr=None, **kwargs):
    """A symbol of zeros (MXNet ``mx.sym.zeros``, node ``_zeros``).

    Parameters
    ----------
    shape : int or tuple of int
        Output shape; a 0 is filled by shape inference from the consumer.
    dtype : str or numpy dtype, optional
        Default float32.
    name : str, optional
    attr : dict of str to str, optional
    **kwargs
        ``ctx`` and attribute keywords such as ``__layout__='NC'``.

    Returns
    -------
    Symbol
    """
    return _make('_zeros', dict(kwargs, shape=shape, dtype=dtype or 'float32'), name, attr)


def ones(shape, dtype=None, name=None, attr=None, **kwargs):
    """A symbol of ones (MXNet ``mx.sym.ones``, node ``_ones``); see :func:`zeros`."""
    return _make('_ones', dict(kwargs, shape=shape, dtype=dtype or 'float32'), name, attr)


def full(shape, val, dtype=None, name=None, attr=None, **kwargs):
    """A symbol filled with ``val`` (MXNet ``mx.sym.full``, node ``_full``); see :func:`zeros`."""
    return _make('_full', dict(kwargs, shape=shape, value=val, dtype=dtype or 'float32'),
                 name, attr)


def arange(start, stop=None, step=1.0, repeat=1, infer_range=False, name=None, dtype=None,
           attr=None, **kwargs):
    """Evenly spaced values in ``[start, stop)`` (MXNet ``mx.sym.arange``, node ``_arange``).

    ``stop=None`` gives ``[0, start)``; each value repeats ``repeat`` times.

    Raises
    ------
    ParamError
        For ``step=0`` or ``infer_range=True``.
    """
    return _make('_arange', dict(kwargs, start=start, stop=stop, step=step, repeat=repeat,
                                 infer_range=infer_range, dtype=dtype or 'float32'), name, attr)


def linspace(start, stop, num, endpoint=True, name=None, dtype=None, attr=None, **kwargs):
    """``num`` evenly spaced values from ``start`` to ``stop`` (MXNet ``mx.sym.linspace``)."""
    return _make('_linspace', dict(kwargs, start=start, stop=stop, num=num, endpoint=endpoint,
                                   dtype=dtype or 'float32'), name, attr)


def eye(N, M=0, k=0, dtype=None, name=None, attr=None, **kwargs):
    """A 2-D ``(N, M or N)`` array with ones on diagonal ``k`` (MXNet ``mx.sym.eye``)."""
    return _make('_eye', dict(kwargs, N=N, M=M, k=k, dtype=dtype or 'float32'), name, attr)
