"""``ff.testing``: checks and hypothesis strategies for operator and model tests.

The same tools ffnumba's own suite uses: :func:`check_numeric_gradient`
(float64, directional), :func:`check_symbolic_forward`,
:func:`check_symbolic_backward`, :func:`check_consistency`,
:func:`assert_almost_equal`, the table-driven :class:`OpCase`, and
:mod:`ffnumba.testing.strategies`; and the rest of MXNet's ``mx.test_utils``
(``same``, ``almost_equal``, ``rand_ndarray``, ``rand_shape_nd``,
``environment``, ``compare_optimizer``, ``verify_generator``...), so
``from mxnet.test_utils import *`` ports (see :mod:`ffnumba.testing.mx_utils`).
"""
from .gradcheck import (check_numeric_gradient, check_symbolic_forward,
                        check_symbolic_backward, check_consistency, bind_numpy)
from .mx_utils import *  # noqa: F401,F403  (MXNet's mx.test_utils names)
from .mx_utils import __all__ as _mx_all

# Only the core dependencies are imported with ffnumba: ``strategies`` needs hypothesis and
# ``OpCase`` needs pytest and hypothesis (the ``test`` extra). They load when first used.
_LAZY = {'strategies': ('.strategies', None), 'OpCase': ('.op_case', 'OpCase')}

# ``from mxnet.test_utils import *`` hands tests these modules too (MXNet's module has
# no __all__); code written against it uses them unqualified.
import json, logging, numbers, os, platform, sys, time  # noqa: E401,F401,E402
import numpy as np  # noqa: F401,E402
import numpy.random as rnd  # noqa: F401,E402
import numpy.testing as npt  # noqa: F401,E402
from ..context import Context, current_context  # noqa: F401,E402
from ..ndarray import array  # noqa: F401,E402
from ..symbol import Symbol  # noqa: F401,E402


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError('module %r has no attribute %r' % (__name__, name))
    import importlib
    module_name, attr = _LAZY[name]
    try:
        module = importlib.import_module(module_name, __name__)
    except ImportError as e:
        missing = getattr(e, 'name', None) or str(e)
        raise ImportError('ffnumba.testing.%s needs %s, which the test extra installs: '
                          "pip install 'ffnumba[test]'" % (name, missing)) from e
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value
