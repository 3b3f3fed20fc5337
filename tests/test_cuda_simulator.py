"""Runs every ``gpu``-marked test under numba's CUDA simulator in its own process.

Needs numba-cuda (the ``cuda`` extra, which the README's test command installs).

The simulator must be switched on before numba is imported, so it cannot
share this pytest process. The child starts as soon as the suite is collected
(``tests/conftest.py``'s ``pytest_collection_finish`` calls :func:`start`), so
its run (about 7 minutes, one core) overlaps the rest of the suite on the
second core; :func:`test_gpu_kernels_under_cuda_simulator` then waits for it.
On a machine with a real GPU run ``python -m pytest -m gpu`` directly instead.
"""
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Seconds the child may run, from its start.
TIMEOUT = 1500
_child = {}


def start():
    """Start the simulator's pytest child (once); its output goes to a temporary file."""
    if _child:
        return
    out = tempfile.TemporaryFile(mode='w+')
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM='1')
    proc = subprocess.Popen(
        [sys.executable, '-m', 'pytest', '-m', 'gpu', '-q', '-p', 'no:cacheprovider',
         os.path.join(ROOT, 'tests')],
        env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True)
    _child.update(proc=proc, out=out, started=time.monotonic())


def stop():
    """Kill a child still running (the session ended without waiting for it); close its
    output file."""
    proc = _child.get('proc')
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
    if _child.get('out') is not None and not _child['out'].closed:
        _child['out'].close()


def test_gpu_kernels_under_cuda_simulator():
    start()
    proc, out = _child['proc'], _child['out']
    left = TIMEOUT - (time.monotonic() - _child['started'])
    try:
        proc.wait(timeout=max(left, 1))
    except subprocess.TimeoutExpired:
        stop()
    out.seek(0)
    text = out.read()
    out.close()
    tail = text[-6000:]
    assert proc.returncode == 0, tail
    assert ' passed' in text, tail
