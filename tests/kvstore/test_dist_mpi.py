"""dist_sync under a real MPI: ``mpirun -np 2`` / ``-np 3`` on loopback (MPICH from pip).

Each test launches tests/kvstore/dist_worker.py as a subprocess with a timeout,
so a hang fails the test instead of blocking the suite. Needs the ``test``
extra (mpi4py and the ``mpich`` wheel, whose ``mpiexec`` sits beside the
Python executable).
"""
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import ffnumba as ff
from ffnumba.base import FFError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER = os.path.join(ROOT, 'tests', 'kvstore', 'dist_worker.py')


def _mpiexec():
    here = os.path.join(os.path.dirname(sys.executable), 'mpiexec')
    found = here if os.path.exists(here) else shutil.which('mpiexec')
    assert found, ('mpiexec not found: install the test extra (`pip install .[test]` brings '
                   'mpi4py and the mpich wheel)')
    return found


def _launch(np_, args, timeout=60, module=True, **env_extra):
    env = dict(os.environ, PYTHONPATH=ROOT, FFNUMBA_DIST_TIMEOUT='30', **env_extra)
    cmd = [_mpiexec(), '-np', str(np_), sys.executable]
    cmd += ['-m', 'mpi4py'] if module else []
    cmd += [WORKER] + list(args)
    tic = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                         cwd=ROOT)
    out = res.stdout + res.stderr
    return res.returncode, out, time.monotonic() - tic


def _checks(out):
    return re.findall(r'CHECK (rank=\d+ [^\n]*)', out)


@pytest.mark.parametrize('np_', [2, 3])
def test_ranks_identical_and_equal_to_one_process(np_):
    rc, out, _ = _launch(np_, ['equiv'], timeout=120)
    assert rc == 0, out
    lines = [c for c in _checks(out) if 'kind=' in c]
    # module/feedforward x 1/2 contexts per rank, and Module with update_on_kvstore=False
    assert len(lines) == np_ * 5, out
    assert sum('update_on_kvstore=0' in c for c in lines) == np_
    for line in lines:
        assert 'identical=True' in line, line
        err = float(re.search(r'maxerr=(\S+)', line).group(1))
        moved = float(re.search(r'moved=(\S+)', line).group(1))
        assert err <= 1e-6 and moved > 0.1, line   # trained, and equal to one process


@pytest.mark.slow
def test_gpu_contexts_under_cuda_simulator():
    rc, out, _ = _launch(2, ['gpu'], timeout=180, NUMBA_ENABLE_CUDASIM='1')
    assert rc == 0, out
    checks = _checks(out)
    assert sum('kind=gpu identical=True' in c for c in checks) == 2, out
    assert all(float(re.search(r'maxerr=(\S+)', c).group(1)) <= 1e-6
               for c in checks if 'kind=gpu' in c), out
    assert sum('on_gpu=True sum_ok=True' in c for c in checks) == 2, out


def test_mismatches_raise_on_every_rank_and_store_recovers():
    rc, out, _ = _launch(2, ['errors'], timeout=90)
    assert rc == 0, out
    checks = _checks(out)
    for rank in (0, 1):
        mine = {re.search(r'case=(\S+)', c).group(1): c for c in checks
                if c.startswith('rank=%d ' % rank) and 'case=' in c}
        assert 'different keys' in mine['order'] and "'p'" in mine['order'] \
            and "'q'" in mine['order'], mine['order']
        assert "key 's' has a different shape" in mine['shape'], mine['shape']
        assert "key 'd' has a different dtype" in mine['dtype'] and 'float16' in mine['dtype']
        assert 'failed on rank(s) [1]' in mine['local'], mine['local']
        assert 'different operations' in mine['one-sided'] and 'barrier' in mine['one-sided']
        assert 'ok=True' in mine['float16'] and 'ok=True' in mine['fp16']
        assert mine['metric'].endswith('value=0.4'), mine['metric']   # 2 of 5, not (1+0)/2
        assert 'uneven epochs' in mine['uneven'] and '[5] batches' in mine['uneven']
        assert 'done' in mine


@pytest.mark.parametrize('module', [True, False], ids=['python-m-mpi4py', 'plain-python'])
def test_exception_on_one_rank_ends_the_job(module):
    rc, out, took = _launch(2, ['crash'], timeout=30, module=module)
    assert rc != 0, out
    assert took < 10, took
    assert 'worker 1 failed on purpose' in out and '[rank 1]' in out
    assert 'rank=0 finished' not in out


def test_dist_async_does_not_wait_for_slow_workers():
    rc, out, _ = _launch(2, ['async'], timeout=60)
    assert rc == 0, out
    checks = _checks(out)
    alone = [c for c in checks if 'case=async-alone' in c][0]
    # rank 1 sleeps 2 s: rank 0's 20 updates land meanwhile, applied at once
    assert float(re.search(r'seconds=(\S+)', alone).group(1)) < 1.5, alone
    assert alone.endswith('value=-10.0'), alone
    assert sum('case=async-final ok=True' in c for c in checks) == 2, out
    assert any("case=async-shape raised: KVStore.push: key 'w' is float32 (4,)" in c
               for c in checks), out
    assert all(float(re.search(r'moved=(\S+)', c).group(1)) > 0.1
               for c in checks if 'case=async-fit' in c), out
    assert sum('case=async-fit' in c for c in checks) == 2, out


def test_killed_peer_ends_the_job():
    rc, out, took = _launch(2, ['die'], timeout=30)
    assert rc != 0 and took < 10, (took, out)
    assert 'rank=0 finished' not in out


def test_stuck_peer_times_out():
    rc, out, took = _launch(2, ['hang', '2'], timeout=30)
    assert rc != 0, out
    assert took < 10, took
    assert 'no answer from rank(s) [1] within 2.0 s' in out, out


def test_uneven_shards_raise_not_hang():
    rc, out, took = _launch(3, ['uneven'], timeout=30)
    assert rc != 0 and took < 20, (took, out)
    assert 'uneven epochs' in out and 'ended epoch 0 after' in out, out


# ------------------------------------------------------- one process, no mpirun
def test_single_rank_store_and_async_refused():
    kv = ff.kv.create('dist_sync')
    assert (kv.rank, kv.num_workers, kv.local_rank) == (0, 1, 0)
    kv.init(['a', 'b'], [ff.nd.ones((2,)), ff.nd.ones((3,), dtype='float16')])
    out = [ff.nd.zeros((2,)), ff.nd.zeros((3,), dtype='float16')]
    kv.pushpull(['a', 'b'], [[ff.nd.ones((2,)), ff.nd.ones((2,))], [ff.nd.ones((3,),
                                                                              dtype='float16')]],
                out=out)
    np.testing.assert_array_equal(out[0].asnumpy(), 2)
    np.testing.assert_array_equal(out[1].asnumpy(), 1)
    kv.barrier()
    with pytest.raises(FFError, match='already initialized'):
        kv.init('a', ff.nd.ones((2,)))
    with pytest.raises(FFError, match='timeout'):
        kv.timeout = 0
    from ffnumba.kvstore.dist import DistKVStore
    with pytest.raises(FFError, match="create\\('dist_async'\\)"):
        DistKVStore('dist_async')


def test_shard_interleaves_and_evens():
    x = np.arange(20).reshape(10, 2)
    parts = [ff.io.shard({'x': x, 'y': np.arange(10)}, 3, r) for r in range(3)]
    assert all(len(p['y']) == 3 for p in parts)
    np.testing.assert_array_equal(parts[1]['y'], [1, 4, 7])
    np.testing.assert_array_equal(parts[1]['x'], x[[1, 4, 7]])
    assert len(ff.io.shard(np.arange(10), 3, 0, even=False)) == 4
    it = ff.io.NDArrayIter(x, np.arange(10), batch_size=3, num_parts=3, part_index=2)
    assert [b.label[0].asnumpy().tolist() for b in it] == [[2, 5, 8]]
    with pytest.raises(ff.base.ParamError, match='part_index'):
        ff.io.NDArrayIter(x, batch_size=2, num_parts=2, part_index=2)
    with pytest.raises(ff.base.ShapeError, match='cannot be split'):
        ff.io.shard(np.arange(2), 3, 0)


def test_import_does_not_load_mpi4py():
    code = 'import sys, ffnumba; assert "mpi4py" not in sys.modules'
    subprocess.run([sys.executable, '-c', code], check=True, env=dict(os.environ,
                                                                   PYTHONPATH=ROOT))


@pytest.mark.slow
def test_dist_example_trains_mnist(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    cmd = [_mpiexec(), '-np', '2', sys.executable, '-m', 'mpi4py',
           os.path.join(ROOT, 'examples', 'dist_train.py'), '--epochs', '1',
           '--out', str(tmp_path / 'run')]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env,
                         cwd=str(tmp_path))
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert float(re.search(r'final test accuracy: ([0-9.]+)', out).group(1)) >= 0.8, out
    assert (tmp_path / 'run' / 'mlp-0001.params').exists()
    assert '[rank 0] Epoch[0] Train-accuracy=' in out
    assert '[rank 1] Epoch[0] Train-accuracy' not in out      # rank 0 logs the epoch lines
