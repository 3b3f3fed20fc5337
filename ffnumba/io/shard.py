"""Split in-memory data between the workers of a distributed run."""
import numpy as np

from ..base import ParamError, ShapeError

__all__ = ['shard', 'check_parts']


def check_parts(num_parts, part_index, who):
    """Validate ``num_parts >= 1`` and ``0 <= part_index < num_parts``; return ints.

    Raises
    ------
    ParamError
    """
    for name, v in (('num_parts', num_parts), ('part_index', part_index)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ParamError('%s: `%s` must be an int. Received: %s=%r' % (who, name, name, v))
    if num_parts < 1 or not 0 <= part_index < num_parts:
        raise ParamError('%s: need num_parts >= 1 and 0 <= part_index < num_parts. Received: '
                         'num_parts=%r, part_index=%r' % (who, num_parts, part_index))
    return int(num_parts), int(part_index)


def _rows(n, num_parts, part_index, even, who):
    if n < num_parts:
        raise ShapeError('%s: %d samples cannot be split into %d parts' % (who, n, num_parts))
    stop = (n // num_parts) * num_parts if even else n
    return np.arange(part_index, stop, num_parts)


def shard(data, num_parts=1, part_index=0, even=True, axis=0):
    """The part ``part_index`` of ``num_parts`` of each array: samples ``i`` with
    ``i % num_parts == part_index``.

    The parts interleave (as ``tf.data.Dataset.shard`` and torch's
    ``DistributedSampler``), so batch ``k`` of every part together hold the
    samples of batch ``k`` of the whole data with ``num_parts`` times the
    batch size: ``N`` workers with batch size ``b`` see what one process with
    batch size ``N*b`` sees, in the same order.

    Parameters
    ----------
    data : numpy array, NDArray, or a list, tuple or dict of them
        All with the same number of samples along ``axis``.
    num_parts : int, default 1
        Usually ``kv.num_workers``.
    part_index : int, default 0
        Usually ``kv.rank``.
    even : bool, default True
        Drop the last ``n % num_parts`` samples so every part has the same
        length (``n // num_parts``), hence the same number of batches: in a
        ``dist_sync`` run, uneven parts stop training with an FFError at the
        end of the first epoch. False keeps them (parts differ by one sample).
    axis : int, default 0
        The sample axis.

    Returns
    -------
    The same structure with numpy arrays (copies).

    Raises
    ------
    ParamError
        Bad ``num_parts``/``part_index``.
    ShapeError
        Arrays with different sample counts, or fewer samples than parts.

    Examples
    --------
    >>> import numpy as np, ffnumba as ff
    >>> ff.io.shard(np.arange(10), num_parts=3, part_index=1)
    array([1, 4, 7])
    """
    num_parts, part_index = check_parts(num_parts, part_index, 'shard')
    from ..ndarray import NDArray

    def host(a):
        return a.asnumpy() if isinstance(a, NDArray) else np.asarray(a)

    if isinstance(data, dict):
        names, arrays = list(data), [host(v) for v in data.values()]
    elif isinstance(data, (list, tuple)):
        names, arrays = None, [host(v) for v in data]
    else:
        names, arrays = None, [host(data)]
    counts = {a.shape[axis] if a.ndim > axis else None for a in arrays}
    if len(counts) != 1 or None in counts:
        raise ShapeError('shard: every array needs the same number of samples along axis %d. '
                         'Received shapes %s' % (axis, [a.shape for a in arrays]))
    rows = _rows(counts.pop(), num_parts, part_index, even, 'shard')
    out = [np.take(a, rows, axis=axis) for a in arrays]
    if isinstance(data, dict):
        return dict(zip(names, out))
    if isinstance(data, (list, tuple)):
        return type(data)(out)
    return out[0]
