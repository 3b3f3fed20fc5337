"""``ff.testing``: checks and hypothesis strategies for operator and model tests.

The same tools ffnumba's own suite uses: :func:`check_numeric_gradient`
(float64, directional), :func:`check_symbolic_forward`,
:func:`check_symbolic_backward`, :func:`check_consistency`,
:func:`assert_almost_equal`, the table-driven :class:`OpCase`, and
:mod:`ffnumba.testing.strategies`.
"""
from .gradcheck import (assert_almost_equal, check_numeric_gradient, check_symbolic_forward,
                        check_symbolic_backward, check_consistency, default_context, bind_numpy)
from . import strategies


def __getattr__(name):
    # OpCase needs pytest; import it only when asked for.
    if name == 'OpCase':
        from .op_case import OpCase
        return OpCase
    raise AttributeError(name)
