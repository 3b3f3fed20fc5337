"""Template kernels over scalar bodies from code run by ``exec`` (a made-up ``__name__``).

numba pickles such a body under the module ``<dynamic>``; a kernel cached with a key
that the next process computes again would be loaded there and fail
(``ModuleNotFoundError: No module named '<dynamic>'``, found running
``docs/guide/operators.md`` twice). Those kernels keep numba's per-process key
(``ffnumba._jit_cache.importable``): every process compiles them and runs.
"""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_USER_CODE = textwrap.dedent('''
    import numpy as np
    from numba import njit
    import ffnumba as ff
    from ffnumba.ops.templates import make_unary

    @njit
    def _twice(x, a, b):
        return a * x

    @njit
    def _twice_grad(x, a, b):
        return a

    fwd, bwd = make_unary(_twice, _twice_grad, grad_uses='input',
                          scalars=lambda p: (2.0, 0.0))
    x = np.array([1.0, -3.0])
    y = np.empty_like(x)
    fwd['cpu'](None, None, [x], [y], [])
    print('result', y.tolist())
''')

_RUNNER = textwrap.dedent('''
    import sys
    ns = {'__name__': '__user_cell__'}
    exec(compile(sys.argv[1], '<cell>', 'exec'), ns)
''')


def test_exec_bodies_run_again_with_a_filled_cache(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / 'cache'),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
    for run in range(2):
        proc = subprocess.run([sys.executable, '-c', _RUNNER, _USER_CODE], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (run, proc.stderr[-3000:])
        assert 'result [2.0, -6.0]' in proc.stdout, (run, proc.stdout, proc.stderr[-3000:])


def test_importable():
    from ffnumba._jit_cache import importable
    from ffnumba.ops.nn.activation import relu
    assert importable(relu)
    ns = {'__name__': '__user_cell__'}
    exec('def f(x):\n    return x\n', ns)
    assert not importable(ns['f'])
