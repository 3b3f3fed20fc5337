"""MXNet's ``mx.sym`` Python helpers whose call differs from their operator's."""
from ..ops.registry import get_op
from .compose import make_op_symbol
from .symbol import Symbol

__all__ = ['histogram']


def histogram(a, bins=10, range=None, name=None, attr=None, **kwargs):
    """Counts per bin and bin edges (MXNet ``mx.sym.histogram``, node ``_histogram``).

    Parameters
    ----------
    a : Symbol
        Values (flattened).
    bins : int or Symbol, default 10
        Number of equal bins over ``range``, or a Symbol of increasing edges.
    range : (float, float), optional
        Interval of the equal bins (default: the data's min and max).

    Returns
    -------
    Symbol
        Two outputs: ``counts`` (int64) and ``bin_edges``.
    """
    op = get_op('_histogram')
    if isinstance(bins, Symbol):
        return make_op_symbol(op, (a, bins), dict(kwargs), name=name, attr=attr,
                              hint='histogram')
    return make_op_symbol(op, (a,), dict(kwargs, bin_cnt=bins, range=range), name=name,
                          attr=attr, hint='histogram')
