"""``ffnumba.jit.LazyKernel``: template kernels whose numba dispatcher is built on first call."""
import json
import os
import subprocess
import sys
import threading

import numpy as np

from ffnumba import jit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r'''
import json
from numba.core import dispatcher
made = []
_init = dispatcher.Dispatcher.__init__

def init(self, py_func, *a, **k):
    made.append(py_func.__qualname__)
    _init(self, py_func, *a, **k)

dispatcher.Dispatcher.__init__ = init
import numpy as np
import ffnumba as ff
at_import = list(made)
y = ff.nd.relu(ff.nd.array(np.array([-1.0, 2.0], np.float32))).asnumpy()
w, g = ff.nd.array(np.ones(3, np.float32)), ff.nd.array(np.full(3, 0.5, np.float32))
ff.optimizer.get_updater(ff.optimizer.create('sgd', learning_rate=0.1, momentum=0.9))(0, g, w)
print(json.dumps({'at_import': at_import, 'after': made[len(at_import):],
                  'relu': y.tolist(), 'w': w.asnumpy().tolist()}))
'''


def test_template_kernels_are_built_on_first_call(tmp_path):
    """``import ffnumba`` makes no template kernel; running an op or an update makes
    exactly the kernels it runs, and they compute the right numbers."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    env.pop('NUMBA_ENABLE_CUDASIM', None)
    proc = subprocess.run([sys.executable, '-c', _CHILD], env=env, capture_output=True,
                          text=True, timeout=600, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    lazy = ('make_unary.<locals>', 'make_binary.<locals>', 'make_binary_broadcast.<locals>',
            'make_reduce.<locals>', 'build_cpu_')
    assert not [q for q in out['at_import'] if q.startswith(lazy)]
    assert 'make_unary.<locals>.fwd_cpu' in out['after']
    assert 'build_cpu_1.<locals>.loop_cpu_1' in out['after']
    assert out['relu'] == [0.0, 2.0]
    np.testing.assert_allclose(out['w'], [0.95] * 3)


def test_concurrent_first_calls_build_one_dispatcher():
    builds = []
    barrier = threading.Barrier(4)

    def build():
        builds.append(1)
        return lambda x: x + 1

    k = jit.LazyKernel(build)

    def call(res, i):
        barrier.wait()
        res[i] = k(i)

    res = [None] * 4
    threads = [threading.Thread(target=call, args=(res, i)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert res == [1, 2, 3, 4]
    assert len(builds) == 1
    assert k.kernel is k.kernel
