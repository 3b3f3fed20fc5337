"""The fork-join helper shared by the executor group, the kvstore and the kernels."""
import os
import threading
import time

import numpy as np
import pytest

from ffnumba.thread_pool import get_pool, pool_used, run_parallel


def test_runs_every_part_once_with_the_first_on_the_caller():
    seen = {}

    def part(i):
        seen[i] = threading.current_thread().name
    run_parallel(part, 4, 'test')
    assert sorted(seen) == [0, 1, 2, 3]
    me = threading.current_thread().name
    assert seen[0] == me       # the others: a pool thread, or this one if it got there first
    assert all(seen[i] == me or seen[i].startswith('ffnumba-test') for i in (1, 2, 3))


def test_zero_and_one_part():
    calls = []
    run_parallel(calls.append, 0)
    assert calls == []
    run_parallel(calls.append, 1)
    assert calls == [0]


def test_error_raised_after_every_part_finished():
    done = []

    def part(i):
        if i == 1:
            raise ValueError('part one failed')
        time.sleep(0.05)
        done.append(i)
    with pytest.raises(ValueError, match='part one failed'):
        run_parallel(part, 3, 'test')
    assert sorted(done) == [0, 2]


def test_caller_error_wins_and_others_are_awaited():
    done = []

    def part(i):
        if i == 0:
            raise KeyError('caller')
        time.sleep(0.05)
        done.append(i)
    with pytest.raises(KeyError):
        run_parallel(part, 2, 'test')
    assert done == [1]


def test_nested_call_on_the_same_pool_runs_serially_instead_of_deadlocking():
    out = np.zeros(8)

    def inner(i, base):
        out[base + i] = base + i

    def outer(i):
        run_parallel(lambda j: inner(j, 4 * i), 4, 'test-nest')
    get_pool('test-nest', 1)       # one worker: a nested wait on it would hang
    run_parallel(outer, 2, 'test-nest')
    np.testing.assert_array_equal(out, np.arange(8))


def test_pool_grows_never_shrinks():
    a = get_pool('test-grow', 3)
    assert a.size == 3
    assert get_pool('test-grow', 2) is a and a.size == 3
    assert get_pool('test-grow', 5) is a and a.size == 5
    names = {t.name for t in threading.enumerate() if t.name.startswith('ffnumba-test-grow')}
    assert len(names) == 5


def test_pool_used_after_a_split_only():
    run_parallel(lambda i: None, 1, 'test-used')
    assert not pool_used('test-used')
    run_parallel(lambda i: None, 2, 'test-used')
    assert pool_used('test-used')


def _block_all(name, gate):
    """Occupy every worker of pool ``name`` (as large as run_parallel asks) until ``gate``."""
    import os
    k = max(2, os.cpu_count() or 1)
    pool = get_pool(name, k)
    for _ in range(k):
        pool.submit(gate.wait, 5)


def test_parts_no_pool_thread_started_run_on_the_caller():
    """A pool whose threads are all busy (or not scheduled) never holds the caller up."""
    import threading
    gate = threading.Event()
    _block_all('test-steal', gate)
    ran = {}
    tic = time.perf_counter()
    run_parallel(lambda i: ran.setdefault(i, threading.current_thread().name), 3, 'test-steal')
    took = time.perf_counter() - tic
    gate.set()
    assert sorted(ran) == [0, 1, 2]
    assert set(ran.values()) == {threading.current_thread().name}
    assert took < 2.0


def test_error_of_a_stolen_part_is_raised():
    import threading
    gate = threading.Event()
    _block_all('test-steal-err', gate)

    def part(i):
        if i == 2:
            raise RuntimeError('part two')
    try:
        with pytest.raises(RuntimeError, match='part two'):
            run_parallel(part, 3, 'test-steal-err')
    finally:
        gate.set()


@pytest.fixture
def two_threads(threads):
    """numba at 2 threads (what :func:`kernel_threads` reads), through conftest's
    ``threads``."""
    threads(2)


@pytest.mark.parametrize('size, least, count', [
    (0, 16, 1), (100, 64, 1),          # too small: one call here
    (1000, 64, 8),                      # 4 pieces per thread
    (40, 16, 3),                        # pieces of at least one 16-element line
])
def test_split_range_pieces(two_threads, size, least, count):
    from ffnumba.thread_pool import split_range
    seen, names = [], set()

    def fn(lo, hi):
        seen.append((lo, hi))
        names.add(threading.current_thread().name)
    split_range(fn, size, least)
    seen.sort()
    assert len(seen) == count
    assert seen[0][0] == 0 and seen[-1][1] == size
    assert all(a[1] == b[0] for a, b in zip(seen, seen[1:]))      # contiguous, disjoint
    assert all(lo % 16 == 0 and lo < hi for lo, hi in seen[1:])


def test_split_range_late_thread_leaves_pieces_to_the_caller(two_threads):
    """A pool thread that is not scheduled (here: busy) does not hold the caller up: the
    caller claims every piece it has not started."""
    from ffnumba.thread_pool import get_pool, split_range
    pool = get_pool('kernel', 1)
    gate = threading.Event()
    blockers = [pool.submit(gate.wait) for _ in range(os.cpu_count() or 1)]
    try:
        seen = []
        split_range(lambda lo, hi: seen.append(threading.current_thread().name), 1 << 20, 1 << 16)
        assert len(seen) == 8 and set(seen) == {threading.current_thread().name}
    finally:
        gate.set()
        for b in blockers:
            b.result()


def test_split_range_on_one_thread_is_one_call():
    import numba
    from ffnumba.thread_pool import split_range
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        seen = []
        split_range(lambda lo, hi: seen.append((lo, hi)), 1 << 20, 16)
    finally:
        numba.set_num_threads(before)
    assert seen == [(0, 1 << 20)]


def test_elementwise_ops_split_over_two_threads(two_threads, monkeypatch):
    """Activation, an elementwise binary op and the SGD-momentum update on arrays large
    enough to split: two pieces, and the values of one thread bit for bit."""
    import numba
    import ffnumba as ff
    from ffnumba import thread_pool
    from ffnumba.ops import templates
    from ffnumba.optimizer import kernels
    calls = []
    real = thread_pool.run_parallel
    monkeypatch.setattr(thread_pool, 'run_parallel',
                        lambda fn, n, pool='kernel': calls.append(n) or real(fn, n, pool))
    rng = np.random.default_rng(0)
    n = 3 * max(templates.ELEMWISE_MIN_ELEMS, kernels.UPDATE_MIN_ELEMS) + 5
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    w, g, m = (rng.standard_normal(n).astype(np.float32) for _ in range(3))

    def run():
        out = [ff.nd.Activation(ff.nd.array(x), act_type='tanh').asnumpy(),
               ff.nd.elemwise_mul(ff.nd.array(x), ff.nd.array(y)).asnumpy()]
        wa, ga, ma = ff.nd.array(w), ff.nd.array(g), ff.nd.array(m)
        ff.nd.sgd_mom_update(wa, ga, ma, lr=0.1, momentum=0.9, wd=1e-4, out=wa)
        return out + [wa.asnumpy(), ma.asnumpy()]
    two = run()
    assert calls and all(c == 2 for c in calls) and len(calls) >= 3
    numba.set_num_threads(1)
    one = run()
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(two[0], np.tanh(x), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(two[1], x * y)


def test_small_elementwise_passes_stay_on_one_thread(two_threads, monkeypatch):
    """Below two threads' worth of :data:`~ffnumba.ops.templates.ELEMWISE_MIN_ELEMS` an
    activation and an elementwise binary op (forward and backward), and below two
    threads' :data:`~ffnumba.optimizer.kernels.UPDATE_MIN_ELEMS` an SGD-momentum update,
    run as one call on the calling thread (a fork-join costs more than the second core
    saves there); at those sizes they split."""
    import ffnumba as ff
    from ffnumba import thread_pool
    from ffnumba.ops import templates
    from ffnumba.optimizer import kernels
    calls = []
    real = thread_pool.run_parallel
    monkeypatch.setattr(thread_pool, 'run_parallel',
                        lambda fn, n, pool='kernel': calls.append(n) or real(fn, n, pool))
    rng = np.random.default_rng(2)

    def run(n):
        x = ff.sym.var('x')
        y = ff.sym.var('y')
        net = ff.sym.Activation(x, act_type='relu') * y
        ex = net.simple_bind(ff.cpu(), x=(n,), y=(n,))
        ex.arg_dict['x'][:] = rng.standard_normal(n)
        ex.arg_dict['y'][:] = rng.standard_normal(n)
        del calls[:]
        ex.forward(is_train=True)
        ex.backward(ff.nd.ones((n,)))
        return list(calls)
    assert run(2 * templates.ELEMWISE_MIN_ELEMS - 16) == []
    assert run(2 * templates.ELEMWISE_MIN_ELEMS) == [2, 2, 2, 2]

    def update(n):
        w, g, m = (ff.nd.array(rng.standard_normal(n).astype(np.float32)) for _ in range(3))
        del calls[:]
        ff.nd.sgd_mom_update(w, g, m, lr=0.1, momentum=0.9, out=w)
        return list(calls)
    assert update(2 * kernels.UPDATE_MIN_ELEMS - 16) == []
    assert update(2 * kernels.UPDATE_MIN_ELEMS) == [2]


def test_concat_splits_over_two_threads(two_threads, monkeypatch):
    """Concat's copies cut by samples over the pool: np.concatenate's values, and the
    gradient slices (write and add) back."""
    from ffnumba import thread_pool
    from ffnumba.ops.registry import get_op
    calls = []
    real = thread_pool.run_parallel
    monkeypatch.setattr(thread_pool, 'run_parallel',
                        lambda fn, n, pool='kernel': calls.append(n) or real(fn, n, pool))
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((64, c, 33, 17)).astype(np.float32) for c in (3, 5, 2)]
    op = get_op('Concat')
    p = op.parse_params({'num_args': 3, 'dim': 1})
    out = np.empty((64, 10, 33, 17), np.float32)
    op.forward['cpu'](None, p, xs, [out], [])
    np.testing.assert_array_equal(out, np.concatenate(xs, axis=1))
    head = rng.standard_normal(out.shape).astype(np.float32)
    grads = [np.ones_like(x) for x in xs]
    op.backward['cpu'](None, p, [head], xs, [out], grads, ['write', 'null', 'add'], [])
    np.testing.assert_array_equal(grads[0], head[:, :3])
    np.testing.assert_array_equal(grads[1], np.ones_like(xs[1]))
    np.testing.assert_array_equal(grads[2], head[:, 8:] + 1)
    assert calls == [2, 2]


@pytest.mark.skipif(not hasattr(os, 'fork'), reason='needs os.fork')
def test_forked_child_starts_its_own_pool_threads():
    """The parent's pool threads do not exist in a forked child: a split there starts
    new ones, and a pool thread runs part 1 while part 0 waits for it (with the
    parent's dead workers part 1 would wait for the caller, after part 0 timed out)."""
    run_parallel(lambda i: None, 2, 'test-fork')          # the parent's workers exist
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                          # child
        try:
            seen, second = [], threading.Event()

            def part(i):
                if i == 0:
                    second.wait(10)          # part 1 can only start on a pool thread
                else:
                    second.set()
                seen.append(threading.current_thread().name)
            run_parallel(part, 2, 'test-fork')
            ok = len(seen) == 2 and any(s.startswith('ffnumba-test-fork') for s in seen)
            os.write(w, b'ok' if ok else b'no')
        finally:
            os._exit(0)
    os.close(w)
    try:
        got = os.read(r, 2)
    finally:
        os.waitpid(pid, 0)
    assert got == b'ok'


def test_spin_kernel_stores_the_ticket_and_sees_the_flag():
    from ffnumba.thread_pool import _spin
    flag = np.zeros(2, np.int64)
    assert not _spin(flag, 0, 1, 7, 1000)          # nobody set flag[0]: gives up
    assert flag[1] == 7                            # the finished job's ticket, published
    flag[0] = 1
    assert _spin(flag, 0, 1, 8, 1 << 30)           # returns at once, not after 2^30 reads
    assert flag[1] == 8
    assert _spin(flag, 1, 8, 0, 10) and _spin(flag, 1, 7, 0, 10)   # that job or a later
    assert not _spin(flag, 1, 9, 0, 10)
    assert flag[1] == 8                            # done = 0 stores nothing


def test_spin_iterations_follow_the_variable(monkeypatch, caplog):
    from ffnumba.thread_pool import spin_iterations
    monkeypatch.delenv('FFNUMBA_POOL_SPIN', raising=False)
    assert spin_iterations() == 0
    for off in ('0', '', ' '):
        monkeypatch.setenv('FFNUMBA_POOL_SPIN', off)
        assert spin_iterations() == 0
    monkeypatch.setenv('FFNUMBA_POOL_SPIN', 'fast')
    with caplog.at_level('WARNING', logger='ffnumba.thread_pool'):
        assert spin_iterations() == 0
    assert "FFNUMBA_POOL_SPIN='fast' is not a number" in caplog.text
    monkeypatch.setenv('FFNUMBA_POOL_SPIN', '50')
    n50 = spin_iterations()
    monkeypatch.setenv('FFNUMBA_POOL_SPIN', '500')
    assert 0 < n50 < spin_iterations()


def test_spinning_pool_splits_correctly_many_times(monkeypatch):
    """FFNUMBA_POOL_SPIN: workers spin after each job and the caller before it sleeps; every
    fork-join still runs each part once, on the pool too, and raises the first error."""
    monkeypatch.setenv('FFNUMBA_POOL_SPIN', '200')
    pool = get_pool('test_spin', 3)
    assert all(w.spins > 0 for w in pool.idle)
    names = set()
    for rep in range(300):
        seen = np.zeros(4, np.int64)

        def part(i):
            seen[i] += 1
            names.add(threading.current_thread().name)
            if rep % 50 == 0:
                time.sleep(0.002)                 # longer than the spin: the lock path
        run_parallel(part, 4, 'test_spin')
        assert seen.tolist() == [1, 1, 1, 1]
    assert any(n.startswith('ffnumba-test_spin') for n in names)

    def bad(i):
        if i == 2:
            raise KeyError('two')
    with pytest.raises(KeyError, match='two'):
        run_parallel(bad, 3, 'test_spin')
    end = time.monotonic() + 5
    def settled():                                # back on the idle list, ticket published
        return len(pool.idle) == pool.size and all(w.flag[1] == w.ticket for w in pool.idle)
    while not settled() and time.monotonic() < end:
        time.sleep(0.001)
    assert settled()


def test_fork_join_benchmark_measures_each_spin_setting(monkeypatch):
    from bench_modules import benchmark_module
    monkeypatch.setenv('FFNUMBA_POOL_SPIN', '7')
    fj = benchmark_module('fork_join')
    res = fj.measure(5, [0, 40], gap_us=2, reps=5)
    assert sorted(res) == [0, 40]
    for med, p90, alone in res.values():
        assert 0 < alone and 0 < med <= p90
    assert os.environ['FFNUMBA_POOL_SPIN'] == '7'            # the caller's value, restored
    for name, spinning in (('fork_join_spin40', True), ('fork_join_spin0', False)):
        pool = get_pool(name, 1)
        end = time.monotonic() + 5
        while not pool.idle and time.monotonic() < end:
            time.sleep(0.001)                     # its worker returns to the idle list
        assert (pool.idle[0].spins > 0) == spinning
