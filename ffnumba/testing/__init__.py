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
from . import strategies


def __getattr__(name):
    # OpCase needs pytest; import it only when asked for.
    if name == 'OpCase':
        from .op_case import OpCase
        return OpCase
    raise AttributeError(name)
