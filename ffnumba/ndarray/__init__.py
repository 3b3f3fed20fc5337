"""``ff.nd``: arrays on devices, creation functions and the ``.params`` codec."""
from .ndarray import (NDArray, array, zeros, ones, empty, full, arange, concat, concatenate,
                      waitall, from_numpy)
from .params_io import save, load, dumps, loads
