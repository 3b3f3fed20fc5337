"""MXNet's legacy ``mx.nd`` helpers whose call differs from their operator's."""
__all__ = ['onehot_encode']


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
