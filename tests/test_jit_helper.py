"""``ffnumba.jit.helper_njit``: helpers that kernels call, compiled without a Python entry."""
import numpy as np
from numba import njit, types
from numba.core.registry import cpu_target

from ffnumba import jit
from ffnumba.ops.nn import _winograd4 as w4


def _wrapper_address(disp, sig):
    cres = disp.overloads[sig]
    return cres.library.get_pointer_to_function(cres.fndesc.llvm_cpython_wrapper_name)


def test_helper_compiles_no_cpython_wrapper_and_keys_its_cache_apart():
    # fresh or from the disk cache, the compiled helper has no CPython entry point (the
    # ~20 ms a helper signature saves); its cache key carries the salt, so a wrapped
    # compile of the same function (its Python twin) never loads it
    sig = (types.float64,) * 4
    w4._a.compile(sig)
    assert _wrapper_address(w4._a, sig) == 0
    plain = njit(**jit.JIT)(w4._a.py_func)
    plain.compile(sig)
    assert _wrapper_address(plain, sig) != 0
    codegen = cpu_target.target_context.codegen()
    assert w4._a._cache._index_key(sig, codegen)[-1] == jit.HELPER_SALT
    assert jit.HELPER_SALT not in plain._cache._index_key(sig, codegen)


def test_helper_called_from_python_runs_its_wrapped_twin():
    # without the twin the call would jump to an entry point that was never compiled
    args = [np.float64(v) for v in (0.5, -1.25, 3.0, 2.0)]
    got = w4._a(*args)
    assert np.allclose(got, w4._a.py_func(*args), rtol=1e-15, atol=0)
    assert w4._a.__dict__['_ff_twin'].py_func is w4._a.py_func
    assert _wrapper_address(w4._a.__dict__['_ff_twin'], (types.float64,) * 4) != 0

