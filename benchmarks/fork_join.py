"""What one fork-join of the thread pool costs, with and without ``FFNUMBA_POOL_SPIN``.

    python benchmarks/fork_join.py                       # parts of 50 and 200 us, spin 0 and 300
    python benchmarks/fork_join.py --part-us 20,100 --spin-us 0,100,300 --gap-us 0,500

Each configuration splits a ``nogil`` busy loop into two equal parts with
:func:`ffnumba.thread_pool.run_parallel` (one on this thread, one on a pool
thread), after ``--gap-us`` of work on this thread alone (the serial stretch of
a training step between two splits, during which the pool thread waits). Every
spin setting gets its own pool (its threads read ``FFNUMBA_POOL_SPIN`` when they
start), and the settings alternate call by call, so a busy phase of the machine
hits all of them. Prints the median and 90th percentile of the fork-join's
wall time in microseconds, and ``over``: the median minus one part run alone,
what the split costs beyond the work. Prints numbers, asserts nothing; see
``docs/guide/devices.md`` for what the spin costs other processes.
"""
import argparse
import os
import sys
import time

import numpy as np
from numba import njit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ffnumba import thread_pool  # noqa: E402


@njit(nogil=True, cache=True)
def busy(n):
    """``n`` square roots: a loop that holds no GIL and touches no memory."""
    s = 0.0
    for i in range(n):
        s += np.sqrt(i + 1.0)
    return s


def per_us():
    """Iterations of :func:`busy` per microsecond on this machine."""
    busy(10)
    t = time.perf_counter()
    busy(1 << 22)
    return (1 << 22) / ((time.perf_counter() - t) * 1e6)


def measure(part_us, spins, gap_us=0, reps=200):
    """``{spin_us: (median, p90, alone)}`` microseconds of a two-part fork-join.

    ``alone``: one part on this thread (median). Each spin setting runs on the pool
    ``fork_join_spin<us>``, started with ``FFNUMBA_POOL_SPIN`` set to it.
    """
    rate = per_us()
    n, g = int(part_us * rate), int(gap_us * rate)
    before = os.environ.get('FFNUMBA_POOL_SPIN')
    pools = {}
    try:
        for s in spins:
            os.environ['FFNUMBA_POOL_SPIN'] = str(s)
            pools[s] = 'fork_join_spin%s' % s
            thread_pool.get_pool(pools[s], 1)
    finally:
        if before is None:
            os.environ.pop('FFNUMBA_POOL_SPIN', None)
        else:
            os.environ['FFNUMBA_POOL_SPIN'] = before
    times = {s: [] for s in spins}
    alone = []

    def part(_):
        busy(n)
    for _ in range(reps):
        for s in spins:
            busy(g)
            t = time.perf_counter()
            thread_pool.run_parallel(part, 2, pools[s])
            times[s].append(time.perf_counter() - t)
        busy(g)
        t = time.perf_counter()
        part(0)
        alone.append(time.perf_counter() - t)
    a = float(np.median(alone)) * 1e6
    return {s: (float(np.median(v)) * 1e6, float(np.percentile(v, 90)) * 1e6, a)
            for s, v in times.items()}


def _ints(text):
    return [int(v) for v in text.split(',') if v.strip()]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--part-us', default='50,200', help='comma list: microseconds per part')
    p.add_argument('--spin-us', default='0,300', help='comma list of FFNUMBA_POOL_SPIN values')
    p.add_argument('--gap-us', default='0,200', help='comma list: serial work between splits')
    p.add_argument('--reps', type=int, default=300)
    args = p.parse_args()
    print('%8s %8s %8s | %9s %9s %9s' % ('part us', 'gap us', 'spin us', 'median', 'p90',
                                         'over'))
    for part_us in _ints(args.part_us):
        for gap_us in _ints(args.gap_us):
            res = measure(part_us, _ints(args.spin_us), gap_us, args.reps)
            for s, (med, p90, alone) in res.items():
                print('%8d %8d %8d | %9.1f %9.1f %9.1f' % (part_us, gap_us, s, med, p90,
                                                          med - alone))


if __name__ == '__main__':
    main()
