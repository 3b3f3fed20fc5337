"""``ff.nd``: arrays on devices, creation functions, the ``.params`` codec and
one imperative function per registered operator (``ff.nd.dot``, ``ff.nd.sum``...)."""
from .ndarray import (NDArray, array, zeros, ones, empty, full, arange, concat, concatenate,
                      waitall, from_numpy, moveaxis)
from .params_io import save, load, dumps, loads
from .params_io import loads as load_frombuffer
from .op import (maximum, minimum, power, add, subtract, multiply, divide, modulo, equal,
                 not_equal, greater, greater_equal, lesser, lesser_equal, hypot,
                 logical_and, logical_or, logical_xor)
from . import random
from .legacy import onehot_encode, histogram
from . import _mixin as _mixin_module, ndarray as _ndarray_module, params_io as _params_io
import sys as _sys

_mixin_module.bind(_sys.modules[__name__], _params_io, _ndarray_module)
from .random import OP_NAMES as _RANDOM_OP_NAMES

globals().update(_RANDOM_OP_NAMES)  # nd.random_uniform, nd.uniform, nd.sample_normal...


#: MXNet's ``nd`` names for operators registered under another name.
_ALIASES = {'crop': 'slice'}


def __getattr__(name):
    """``ff.nd.<Op>``: the imperative function of a registered operator (built on first use)."""
    from ..base import FFError
    from .. import ops  # noqa: F401  (registers every operator)
    from .op import make_function
    try:
        fn = make_function(_ALIASES.get(name, name))
    except FFError:
        raise AttributeError("module 'ffnumba.ndarray' has no attribute %r" % name) from None
    globals()[name] = fn
    return fn
