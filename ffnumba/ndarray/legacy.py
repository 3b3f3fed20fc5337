"""MXNet's legacy ``mx.nd`` helpers whose call differs from their operator's."""
__all__ = ['onehot_encode', 'histogram']


def onehot_encode(indices, out):
    """One-hot rows into ``out`` (MXNet ``mx.nd.onehot_encode``).

    Parameters
    ----------
    indices : NDArray, shape (N,)
        Column of the 1 in each row (in ``[0, K)``; floats truncate).
    out : NDArray, shape (N, K)
        Written in place: zeros, with ``out[i, indices[i]] = 1``.

    Returns
    -------
    NDArray
        ``out``.

    Raises
    ------
    ParamError
        For an index outside ``[0, K)``.
    ShapeError
        For shapes other than ``(N,)`` and ``(N, K)``.
    """
    from .. import ops  # noqa: F401  (registers every operator)
    from .op import make_function
    return make_function('_onehot_encode')(indices, out, out=out)


def histogram(a, bins=10, range=None):
    """Counts per bin and the bin edges (MXNet ``mx.nd.histogram``, operator ``_histogram``).

    Parameters
    ----------
    a : NDArray
        Values (flattened).
    bins : int or NDArray, default 10
        Number of equal bins over ``range``, or an NDArray of increasing edges.
    range : (float, float), optional
        Interval of the equal bins (default: the data's min and max); only with
        an int ``bins``.

    Returns
    -------
    (NDArray, NDArray)
        ``counts`` (int64, ``(n_bins,)``) and ``bin_edges`` (``(n_bins + 1,)``).

    Raises
    ------
    ParamError
        For a ``range`` with ``lo > hi``, ``range`` with NDArray ``bins``, or
        edges that decrease.
    """
    from .. import ops  # noqa: F401  (registers every operator)
    from .ndarray import NDArray
    from .op import make_function
    fn = make_function('_histogram')
    if isinstance(bins, NDArray):
        if range is not None:
            from ..base import ParamError
            raise ParamError('histogram: `range` cannot be given with NDArray `bins`')
        return tuple(fn(a, bins))
    return tuple(fn(a, bin_cnt=bins, range=range))
