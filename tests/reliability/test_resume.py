"""2 epochs + checkpoint + a new process + load + 2 epochs == 4 epochs, bit for bit.

With Dropout (executor generators) and a shuffling iterator (the global
generator), on 1 and 2 contexts, for sgd-momentum, adam and rmsprop.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '_resume_script.py')


def _run(mode, prefix, opt, nctx, out):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, SCRIPT, mode, prefix, opt, str(nctx), out], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return dict(np.load(out))


@pytest.mark.parametrize('nctx', [1, 2])
@pytest.mark.parametrize('opt', ['sgd', 'adam', 'rmsprop'])
def test_resume_is_bit_exact(tmp_path, opt, nctx):
    full = _run('full', str(tmp_path / 'a'), opt, nctx, str(tmp_path / 'full.npz'))
    _run('first', str(tmp_path / 'b'), opt, nctx, str(tmp_path / 'first.npz'))
    # the generator states travel inside the .states file: MXNet's file set is unchanged
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith('b-')) == \
        ['b-0002.params', 'b-0002.states', 'b-symbol.json']
    resumed = _run('resume', str(tmp_path / 'b'), opt, nctx, str(tmp_path / 'resumed.npz'))
    assert sorted(full) == sorted(resumed)
    for k in full:
        np.testing.assert_array_equal(resumed[k], full[k], err_msg=k)
