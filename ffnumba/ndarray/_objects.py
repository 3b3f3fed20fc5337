"""Refuse object arrays holding values that are not numbers (None, strings).

numpy turns ``None`` into NaN when it casts an object array to float
(``np.array([1, None], object).astype('float32')`` is ``[1, nan]``), so a
missing value would silently become a NaN in training data. Every entry
point that takes user data (``nd.array``, ``NDArrayIter``, ``fit``) calls
:func:`check_numeric` first.
"""
import numbers

import numpy as np

from ..base import DTypeError

__all__ = ['check_numeric']


def check_numeric(host, what):
    """Raise DTypeError if the object array ``host`` holds a non-number.

    Parameters
    ----------
    host : numpy.ndarray
        Checked only when its dtype is ``object``.
    what : str
        The caller and argument, for the message (``'array'``, ``'NDArrayIter: data'``).

    Raises
    ------
    DTypeError
        Naming the index and the value of the first bad element.
    """
    if host.dtype != object:
        return
    for idx, v in np.ndenumerate(host):
        if isinstance(v, (numbers.Number, np.number, np.bool_)) and not isinstance(v, complex):
            continue
        kind = 'None (a missing value)' if v is None else '%r (%s)' % (v, type(v).__name__)
        raise DTypeError('%s: element %s of an object array is %s, not a number; fill missing '
                         'values (e.g. with numpy.nan explicitly) before passing the data'
                         % (what, idx if host.ndim != 1 else idx[0], kind))
