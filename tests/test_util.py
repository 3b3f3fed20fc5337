"""``ff.util``: MXNet's environment helpers and the NumPy-shape switches (off only)."""
import os

import pytest

import ffnumba as mx
from ffnumba.base import FFError


def test_env_helpers():
    mx.util.setenv('FF_UTIL_T', 5)
    assert mx.util.getenv('FF_UTIL_T') == '5' == os.environ['FF_UTIL_T']
    mx.util.setenv('FF_UTIL_T', None)
    assert mx.util.getenv('FF_UTIL_T') is None


def test_np_shape_switches_are_off_and_refuse_on():
    assert mx.util.is_np_shape() is False
    assert mx.util.set_np_shape(False) is False
    with mx.util.np_shape(False):
        pass
    with pytest.raises(FFError, match='NumPy shape'):
        mx.util.set_np_shape(True)
    with pytest.raises(FFError, match='NumPy shape'):
        with mx.util.np_shape():
            pass

    @mx.use_np_shape
    def f():
        return 1
    with pytest.raises(FFError, match='f: NumPy shape'):
        f()
