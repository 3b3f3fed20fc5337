"""The kernels' CPU GEMM (ffnumba.ops._gemm): against numpy, its cache round trip, its fallback."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ffnumba import blas_threads
from ffnumba.ops import _gemm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _operand(rng, rows, cols, dtype, trans, pad):
    """A ``(rows, cols)`` view: row-major with ``pad`` extra columns, or a transposed one."""
    if trans:
        base = rng.standard_normal((cols, rows + pad)).astype(dtype)
        return base[:, :rows].T
    base = rng.standard_normal((rows, cols + pad)).astype(dtype)
    return base[:, :cols]


def _check(m, n, k, dtype, ta, tb, pad, alpha, beta, seed=0, c_layout='c'):
    rng = np.random.default_rng(seed)
    a = _operand(rng, m, k, dtype, ta, pad)
    b = _operand(rng, k, n, dtype, tb, pad)
    c0 = rng.standard_normal((m, n)).astype(dtype)
    if c_layout == 'f':
        c = np.asfortranarray(c0)
    elif c_layout == 'strided':
        c = np.zeros((2 * m, 2 * n), dtype)[::2, ::2]
        c[...] = c0
    else:
        c = c0.copy()
    want = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    if beta != 0:
        want = want + beta * c0
    _gemm.gemm(alpha, a, b, beta, c)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(c, want, rtol=tol, atol=tol * max(1, k))


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('ta', [False, True])
@pytest.mark.parametrize('tb', [False, True])
@pytest.mark.parametrize('pad', [0, 3])
def test_trans_and_leading_dims(dtype, ta, tb, pad):
    _check(13, 9, 21, dtype, ta, tb, pad, 1.0, 0.0)
    _check(13, 9, 21, dtype, ta, tb, pad, -0.5, 2.0, seed=1)


@pytest.mark.parametrize('c_layout', ['f', 'strided'])
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_output_views(c_layout, dtype):
    _check(7, 11, 5, dtype, False, True, 2, 1.5, 0.0, c_layout=c_layout)
    _check(7, 11, 5, dtype, True, False, 0, 1.0, -1.0, c_layout=c_layout)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_operands_without_unit_stride(dtype):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((12, 10)).astype(dtype)[::2, ::2]
    b = rng.standard_normal((10, 14)).astype(dtype)[::2, ::-2]
    c = np.empty((6, 7), dtype)
    _gemm.gemm(1.0, a, b, 0.0, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('m,n,k', [(0, 4, 3), (4, 0, 3), (0, 0, 0), (4, 3, 0), (1, 1, 0)])
def test_zero_sizes(dtype, m, n, k):
    _check(m, n, k, dtype, False, False, 0, 1.0, 0.0)
    _check(m, n, k, dtype, True, True, 1, 2.0, 0.5)


def test_beta_zero_ignores_nan_in_c():
    a = np.ones((3, 4), np.float32)
    c = np.full((3, 2), np.nan, np.float32)
    _gemm.gemm(1.0, a, np.ones((4, 2), np.float32), 0.0, c)
    assert (c == 4).all()


def test_strided_output_runs_the_loops_and_ignores_nan_when_beta_is_zero():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    c = np.full((6, 4), np.nan, np.float32)[::2, ::2]        # no unit stride: the loop path
    assert _gemm.gemm(1.0, a, np.ones((4, 2), np.float32), 0.0, c) == 1
    np.testing.assert_array_equal(c, a.sum(axis=1, keepdims=True).repeat(2, axis=1))
    assert _gemm.gemm(1.0, a, np.ones((4, 2), np.float32), 0.0, np.empty((3, 2), np.float32)) == 0


def test_vectors_and_unit_dims():
    rng = np.random.default_rng(5)
    for shape_a, shape_b in (((1, 6), (6, 1)), ((6, 1), (1, 5)), ((1, 1), (1, 7))):
        a = rng.standard_normal(shape_a[::-1]).T        # transposed unit-dim views
        b = rng.standard_normal(shape_b)
        c = np.empty((shape_a[0], shape_b[1]))
        _gemm.gemm(1.0, a, b, 0.0, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-12, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(m=st.integers(0, 40), n=st.integers(0, 40), k=st.integers(0, 40),
       dtype=st.sampled_from([np.float32, np.float64]), ta=st.booleans(), tb=st.booleans(),
       pad=st.integers(0, 4), alpha=st.sampled_from([1.0, -2.0, 0.25]),
       beta=st.sampled_from([0.0, 1.0, -0.5]), seed=st.integers(0, 100))
def test_against_numpy(m, n, k, dtype, ta, tb, pad, alpha, beta, seed):
    _check(m, n, k, dtype, ta, tb, pad, alpha, beta, seed)


def test_backend_is_known():
    assert _gemm.backend() in _gemm.BACKENDS


def test_single_thread_section_holds_registered_libraries(monkeypatch):
    calls = []
    state = {'n': 4}

    def put(n):
        calls.append(n)
        state['n'] = n
    monkeypatch.setattr(blas_threads, '_REGISTERED', [(lambda: state['n'], put)])
    # no thread cap from an earlier test in this process (a cap would lower the restored count)
    monkeypatch.setattr(blas_threads, '_BLAS_LIMITED', {'threads': None, 'shared': False})
    with blas_threads.numba_blas_single_thread():
        assert state['n'] == 1
    assert state['n'] == 4 and calls == [1, 4]


# ---------------------------------------------------------------- separate processes

_KERNEL = '''
import numpy as np
from numba import njit
from ffnumba.ops._gemm import gemm


@njit(cache=True)
def kernel(a, b, c):
    gemm(1.0, a, b.T, 0.0, c)
    return c.sum()
'''

_CHILD = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from ffnumba.ops import _gemm
if sys.argv[2] == 'missing':          # the chosen library cannot be loaded
    _gemm._openblas = _gemm._mkl = lambda: None
    name = _gemm._choose()
else:
    name = _gemm.backend()
import gemm_kernel
a = np.arange(12, dtype=np.float32).reshape(3, 4)
b = np.arange(8, dtype=np.float32).reshape(2, 4)
c = np.zeros((3, 2), np.float32)
gemm_kernel.kernel(a, b, c)
x = np.arange(6, dtype=np.float64).reshape(2, 3)
d = np.ones((3, 3))
_gemm.gemm(2.0, x.T, x, 1.0, d)
found = {'openblas': _gemm._openblas() is not None, 'mkl': _gemm._mkl() is not None,
         'numba': True}
print(json.dumps({'backend': name, 'found': found,
                  'ok': bool(np.allclose(c, a @ b.T) and np.allclose(d, 2 * x.T @ x + 1)),
                  'hits': sum(gemm_kernel.kernel.stats.cache_hits.values()),
                  'misses': sum(gemm_kernel.kernel.stats.cache_misses.values())}))
'''


def _child(tmp_path, backend, mode='normal'):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / 'cache'), PYTHONPATH=ROOT,
               FFNUMBA_GEMM=backend)
    env.pop('NUMBA_ENABLE_CUDASIM', None)
    proc = subprocess.run([sys.executable, '-c', _CHILD, str(tmp_path), mode], env=env,
                          capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_cached_kernel_loads_in_new_process_with_any_backend(tmp_path):
    (tmp_path / 'gemm_kernel.py').write_text(textwrap.dedent(_KERNEL))
    cold = _child(tmp_path, 'openblas')
    assert cold['ok'] and cold['misses'] == 1 and cold['hits'] == 0
    warm = _child(tmp_path, 'openblas')
    assert warm['ok'] and warm['misses'] == 0 and warm['hits'] == 1
    other = _child(tmp_path, 'numba')          # same cached code, another library bound
    assert other['backend'] == 'numba'
    assert other['ok'] and other['misses'] == 0 and other['hits'] == 1


@pytest.mark.parametrize('name', _gemm.BACKENDS)
def test_each_backend_when_chosen(tmp_path, name):
    """``FFNUMBA_GEMM=name`` binds that library where it loads (else numba's np.dot)."""
    (tmp_path / 'gemm_kernel.py').write_text(textwrap.dedent(_KERNEL))
    out = _child(tmp_path, name)
    assert out['ok']
    assert out['backend'] == (name if out['found'][name] else 'numba')


def test_missing_library_falls_back_to_numba(tmp_path):
    (tmp_path / 'gemm_kernel.py').write_text(textwrap.dedent(_KERNEL))
    out = _child(tmp_path, 'openblas', 'missing')
    assert out['backend'] == 'numba' and out['ok']
