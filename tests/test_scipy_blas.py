"""numba's BLAS module loaded without scipy.linalg (ffnumba._scipy_blas), in fresh processes."""
import json
import subprocess
import sys

_CHILD = r'''
import json, sys, time
import numpy as np
tic = time.perf_counter()
import ffnumba
from numba import njit

@njit
def dot(a, b):
    return np.dot(a, b)

x = np.arange(12.0).reshape(3, 4)
ok = bool(np.allclose(dot(x, x.T), x @ x.T))
out = {'preloaded': 'scipy.linalg.cython_blas' in sys.modules,
       'package_before': 'scipy.linalg' in sys.modules, 'numba_dot': ok}
import scipy.linalg
a = np.random.default_rng(0).uniform(1, 2, (4, 4)) + 4 * np.eye(4)
out['attribute'] = scipy.linalg.cython_blas is sys.modules['scipy.linalg.cython_blas']
from scipy.linalg import cython_blas
out['from_import'] = cython_blas is sys.modules['scipy.linalg.cython_blas']
out['linalg_works'] = bool(np.allclose(scipy.linalg.inv(a) @ a, np.eye(4)))
out['blas_works'] = bool(np.allclose(scipy.linalg.blas.dgemm(1.0, a, a), a @ a))
print(json.dumps(out))
'''


def _run(code):
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_numba_dot_runs_without_importing_scipy_linalg_and_a_later_import_is_whole():
    out = _run(_CHILD)
    assert out == {'preloaded': True, 'package_before': False, 'numba_dot': True,
                   'attribute': True, 'from_import': True, 'linalg_works': True,
                   'blas_works': True}


def test_nothing_done_when_scipy_linalg_came_first():
    out = _run('import json, sys, scipy.linalg\n'
               'mod = sys.modules["scipy.linalg.cython_blas"]\n'
               'from ffnumba import _scipy_blas\n'
               'print(json.dumps([_scipy_blas.preload(), '
               'sys.modules["scipy.linalg.cython_blas"] is mod, len(sys.meta_path)]))')
    base = _run('import json, sys, scipy.linalg\nprint(json.dumps(len(sys.meta_path)))')
    assert out[:2] == [False, True]
    assert out[2] == base
