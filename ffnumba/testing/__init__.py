"""``ff.testing``: checks and hypothesis strategies for operator and model tests.

The same tools ffnumba's own suite uses: :func:`check_numeric_gradient`
(float64, directional), :func:`check_symbolic_forward`,
:func:`check_symbolic_backward`, :func:`check_consistency`,
:func:`assert_almost_equal`, the table-driven :class:`OpCase`, and
:mod:`ffnumba.testing.strategies`.
"""
from .gradcheck import (assert_almost_equal, check_numeric_gradient, check_symbolic_forward,
                        check_symbolic_backward, check_consistency, default_context, bind_numpy)

# Only the core dependencies are imported with ffnumba: ``strategies`` needs hypothesis and
# ``OpCase`` needs pytest and hypothesis (the ``test`` extra). They load when first used.
_LAZY = {'strategies': ('.strategies', None), 'OpCase': ('.op_case', 'OpCase')}


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
