"""Hypothesis strategies for shapes, arrays and params, for users' property tests.

>>> from hypothesis import given
>>> from ffnumba.testing import strategies as fst
>>> @given(fst.shapes(min_dims=2, max_dims=4))       # doctest: +SKIP
... def test_something(shape): ...
"""
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

__all__ = ['shapes', 'arrays', 'batch_shapes', 'conv_geometry', 'dtypes', 'float_dtypes']


def shapes(min_dims=1, max_dims=4, min_side=1, max_side=5):
    """Tuples of ints: array shapes with ``min_dims..max_dims`` axes of size ``min_side..max_side``."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def batch_shapes(max_batch=4, min_features=1, max_features=6, extra_dims=2):
    """Shapes ``(N, C, ...)`` with up to ``extra_dims`` trailing axes."""
    return st.tuples(st.integers(1, max_batch), st.integers(min_features, max_features)).flatmap(
        lambda nc: st.lists(st.integers(1, 4), max_size=extra_dims).map(lambda r: nc + tuple(r)))


float_dtypes = st.sampled_from(['float32', 'float64'])
dtypes = st.sampled_from(['float32', 'float64', 'float16', 'int32', 'int64', 'uint8', 'int8'])


def arrays(dtype='float64', shape=None, low=-1.0, high=1.0):
    """Arrays of ``dtype`` with finite values in ``[low, high]`` (shape drawn if None)."""
    shape = shape if shape is not None else shapes()
    dt = np.dtype(dtype)
    if dt.kind == 'f':
        elements = st.floats(low, high, allow_nan=False, allow_infinity=False,
                             width=min(64, dt.itemsize * 8))
    elif dt.kind == 'b':
        elements = st.booleans()
    else:
        info = np.iinfo(dt)
        elements = st.integers(max(info.min, int(low) * 100), min(info.max, int(high) * 100))
    return hnp.arrays(dt, shape, elements=elements)


@st.composite
def conv_geometry(draw, max_input=9, max_kernel=4, max_stride=3, max_pad=2, max_dilate=2):
    """``(input, kernel, stride, pad, dilate)`` for one spatial axis, valid or not."""
    return (draw(st.integers(1, max_input)), draw(st.integers(1, max_kernel)),
            draw(st.integers(1, max_stride)), draw(st.integers(0, max_pad)),
            draw(st.integers(1, max_dilate)))
