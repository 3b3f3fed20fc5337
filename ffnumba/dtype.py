"""MXNet's dtype codes and conversions between names, numpy dtypes and codes."""
import numpy as np

from .base import DTypeError

__all__ = ['np_dtype', 'dtype_code', 'code_dtype', 'DTYPE_CODES']

#: mshadow type flag -> numpy dtype (MXNet ``_DTYPE_MX_TO_NP``; bf16 has no numpy twin).
DTYPE_CODES = {
    0: np.dtype('float32'), 1: np.dtype('float64'), 2: np.dtype('float16'),
    3: np.dtype('uint8'), 4: np.dtype('int32'), 5: np.dtype('int8'),
    6: np.dtype('int64'), 7: np.dtype('bool'),
}
_CODE_OF = {v: k for k, v in DTYPE_CODES.items()}


def np_dtype(dtype, what='dtype'):
    """Normalise a dtype given as a name, numpy type, numpy dtype or MXNet code.

    Raises
    ------
    DTypeError
        If the dtype is not one MXNet supports.
    """
    if dtype is None:
        return np.dtype('float32')
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        if int(dtype) in DTYPE_CODES:
            return DTYPE_CODES[int(dtype)]
        raise DTypeError('%s: unknown MXNet dtype code %r' % (what, dtype))
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise DTypeError('%s: unknown dtype %r' % (what, dtype)) from None
    if dt not in _CODE_OF:
        raise DTypeError('%s: unsupported dtype %s; supported: %s'
                         % (what, dt, ', '.join(str(d) for d in DTYPE_CODES.values())))
    return dt


def dtype_code(dtype):
    """MXNet's integer code for a dtype (float32 -> 0)."""
    return _CODE_OF[np_dtype(dtype)]


def code_dtype(code):
    """The numpy dtype for an MXNet dtype code."""
    return np_dtype(int(code))
