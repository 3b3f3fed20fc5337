"""Kernels call ``helper_njit(by_reference=True)`` helpers instead of linking copies in
(:mod:`ffnumba._jit_link`): fresh, from the disk cache in a new process, and when a
cached kernel's helper has changed since (a cache miss, never a call into nothing)."""
import json
import os
import subprocess
import sys

import pytest

from ffnumba import jit as ffjit

_HELPER = '''
import numpy as np
from ffnumba.jit import helper_njit

@helper_njit(by_reference={flag})
def scaled_sum(x, k):
    s = 0.0
    for v in x:
        s += v * k
    return {ret}
'''

_KERNEL = '''
from numba import njit
from ffnumba.jit import JIT
import refhelp

@njit(**JIT)
def total(x):
    return refhelp.scaled_sum(x, 2.0) + refhelp.scaled_sum(x, 3.0)


@njit(**JIT)
def outer(x):
    return total(x) + 1.0      # the helper reached through a kernel linked in as a copy
'''

_RUN = '''
import json, sys
import numpy as np
import refkern, refhelp
from ffnumba import _jit_link
x = np.arange(10, dtype=np.float64)
kernel = getattr(refkern, sys.argv[1])
r = kernel(x)
sig = kernel.signatures[0]
lib = kernel.overloads[sig].library
print(json.dumps({'result': float(r), 'deps': sorted(getattr(lib, '_ff_deps', {}) or {}),
                  'kernel': [kernel.stats.cache_hits.get(sig, 0),
                             kernel.stats.cache_misses.get(sig, 0)],
                  'total_loaded': bool(refkern.total.overloads),
                  'helper_hits': sum(refhelp.scaled_sum.stats.cache_hits.values())}))
'''


def _write(folder, flag=True, ret='s'):
    (folder / 'refhelp.py').write_text(_HELPER.format(flag=flag, ret=ret))
    (folder / 'refkern.py').write_text(_KERNEL)
    (folder / 'run.py').write_text(_RUN)


def _run(folder, kernel='total'):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(folder / 'cache'), FFNUMBA_COMPILE_AHEAD='0',
               PYTHONPATH=str(folder) + os.pathsep + os.environ.get('PYTHONPATH', ''))
    out = subprocess.run([sys.executable, str(folder / 'run.py'), kernel], env=env, cwd=str(folder),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_fresh_then_cached_kernel_calls_its_helper_by_reference(tmp_path):
    _write(tmp_path)
    fresh = _run(tmp_path)
    assert fresh['result'] == 225.0                     # 45 * 2 + 45 * 3
    assert len(fresh['deps']) == 1 and fresh['deps'][0].startswith('ffnumba.ref.scaled_sum.')
    assert fresh['kernel'] == [0, 1]                    # compiled
    cached = _run(tmp_path)
    assert cached['result'] == 225.0 and cached['deps'] == fresh['deps']
    assert cached['kernel'] == [1, 0]                   # loaded from the cache...
    assert cached['helper_hits'] == 1                   # ...its helper loaded first


def test_helper_reached_through_a_copied_kernel_is_loaded_with_the_cached_caller(tmp_path):
    _write(tmp_path)
    fresh = _run(tmp_path, 'outer')
    assert fresh['result'] == 226.0 and fresh['kernel'] == [0, 1]
    assert len(fresh['deps']) == 1      # total's helper, though outer does not call it itself
    cached = _run(tmp_path, 'outer')    # a new process that loads only outer from the cache
    assert cached['result'] == 226.0 and cached['kernel'] == [1, 0]
    assert not cached['total_loaded'] and cached['helper_hits'] == 1


@pytest.mark.parametrize('change', ['copied', 'returns int'])
def test_cached_kernel_whose_helper_changed_is_compiled_again(tmp_path, change):
    _write(tmp_path)
    assert _run(tmp_path)['kernel'] == [0, 1]
    # the helper's file changes (the kernel's does not: its cache entry stays valid to numba)
    if change == 'copied':
        _write(tmp_path, flag=False)
    else:
        _write(tmp_path, ret='int(s)')
    again = _run(tmp_path)
    assert again['kernel'] == [0, 1]                    # a miss: compiled again
    assert again['result'] == 225.0
    assert len(again['deps']) == (0 if change == 'copied' else 1)


def test_kernel_code_holds_no_copy_of_the_helper():
    from ffnumba.ops.nn import _im2col, _winograd4
    from numba import njit
    import numba

    @njit(**dict(ffjit.JIT, cache=False))
    def twice(padf, row, TH, TW, v, base, CL):
        _winograd4.input_tf(padf, row, TH, TW, v, base, CL)
        _winograd4.input_tf(padf, row, TH, TW, v, base, CL)

    f32 = numba.float32[::1]
    sig = (f32, numba.int64, numba.int64, numba.int64, f32, numba.int64, numba.int64)
    twice.compile(sig)
    llvm = twice.inspect_llvm(sig)
    lib = twice.overloads[sig].library
    (name,) = [n for n in lib._ff_deps if '.input_tf.' in n]
    assert name in llvm      # called through its stable name, no copy defined here
    assert not [ln for ln in llvm.splitlines() if ln.startswith('define') and 'input_tf' in ln]
    assert _im2col._im2col_rows._ff_by_reference and not _im2col._valid._ff_by_reference


def test_by_reference_needs_a_module_level_function():
    def local(x):
        return x
    with pytest.raises(ValueError, match='module-level'):
        ffjit.helper_njit(by_reference=True)(local)


def test_stale_reference_is_a_cache_miss_not_a_crash():
    from ffnumba import _jit_link
    import numba
    spec = ('ffnumba.ref.gone.0', 'ffnumba.ops.nn._im2col', 'no_such_helper', (numba.int64,),
            numba.int64)
    with pytest.raises(_jit_link.StaleReference, match='no_such_helper'):
        _jit_link._load(spec)


def _double(x):
    return 2.0 * x


def test_a_name_bound_to_other_code_is_never_rebound():
    import numba
    first = ffjit.helper_njit(by_reference=True)(_double)
    second = ffjit.helper_njit(by_reference=True)(_double)    # same name, other code
    first.compile((numba.float64,))
    second.compile((numba.float64,))
    lib1 = first.overloads[(numba.float64,)].library
    lib2 = second.overloads[(numba.float64,)].library
    assert lib1._ff_ref[1][0].startswith('ffnumba.ref._double.')
    assert getattr(lib2, '_ff_ref', None) is None       # linked in as a copy instead

    @numba.njit(**dict(ffjit.JIT, cache=False))
    def both(x):
        return first(x) + second(x)
    assert both(1.5) == 6.0
    assert list(both.overloads[(numba.float64,)].library._ff_deps) == [lib1._ff_ref[1][0]]
