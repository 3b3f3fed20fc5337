"""Kernels give the same bits whatever the process ran or cached before (``_own_copies``,
in :mod:`ffnumba._jit_cache`).

numba links a callee into each caller as weak copies; without ``_own_copies``
a caller compiled in this process called the standalone callee, while the
same caller loaded from the disk cache called its own copy unless the
standalone one had been loaded first, and the two, compiled in different
contexts under fastmath reassociation, rounded BatchNorm's backward
differently (a fresh process and a cached one disagreed in the last bits).
"""
import os
import subprocess
import sys

_SCRIPT = r'''
import hashlib, sys
import numpy as np
from ffnumba.ops.nn import _bn_kernels as bn    # BatchNorm's CPU kernels (mode NONE: alone)
rng = np.random.default_rng(0)
O, C, I = 8, 16, 81
xf = rng.standard_normal(O * C * I).astype(np.float32)
gf = rng.standard_normal(O * C * I).astype(np.float32)
mean = (rng.standard_normal(C) * 0.05).astype(np.float32)
var = rng.uniform(0.9, 1.1, C).astype(np.float32)
gamma = np.full(C, 1.3, np.float32)
beta = np.zeros(C, np.float32)
def args():
    return [xf, gf, O, C, I, mean, var, gamma, beta, 1e-3, True, 1, np.zeros((2, C), np.float32),
            np.zeros(O * C * I, np.float32), np.zeros((3, C)), np.zeros((2, C))]
if sys.argv[1] == 'callee-first':       # the standalone callee loaded before its caller
    bn._bwd_block(*args(), np.zeros(I, np.float32), bn.NONE, 0.0, 0.0, 0, 0)
a = args()
bn._bwd_range(*a, bn.NONE, 0.0, 0.0, 262144, 0, C)
print(hashlib.sha256(a[13].tobytes() + a[12].tobytes()).hexdigest())
'''


def test_fresh_cached_and_preloaded_processes_agree(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / 'cache'), FFNUMBA_COMPILE_AHEAD='0')
    script = tmp_path / 'bwd.py'
    script.write_text(_SCRIPT)
    digests = [subprocess.run([sys.executable, str(script), order], env=env, check=True,
                              capture_output=True, text=True).stdout.split()[-1]
               for order in ('caller-only', 'caller-only', 'callee-first')]
    # compiled fresh, loaded from the cache, loaded with the standalone callee already there
    assert len(digests) == 3 and len(set(digests)) == 1, digests
