"""The fork-join helper shared by the executor group, the kvstore and the kernels."""
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
    assert get_pool('test-grow', 2) is a
    assert get_pool('test-grow', 5) is not a


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
