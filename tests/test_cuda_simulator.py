"""Runs every ``gpu``-marked test under numba's CUDA simulator in its own process.

Needs numba-cuda (the ``cuda`` extra, which the README's test command installs).

The simulator must be switched on before numba is imported, so it cannot
share this pytest process. On a machine with a real GPU run
``python -m pytest -m gpu`` directly instead.
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_gpu_kernels_under_cuda_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM='1')
    proc = subprocess.run(
        [sys.executable, '-m', 'pytest', '-m', 'gpu', '-q', '-p', 'no:cacheprovider',
         os.path.join(ROOT, 'tests')],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    tail = (proc.stdout + proc.stderr)[-6000:]
    assert proc.returncode == 0, tail
    assert ' passed' in proc.stdout, tail
