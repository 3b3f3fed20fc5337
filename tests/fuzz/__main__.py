"""``python -m tests.fuzz [--full] [--ops NAME ...] [--api] [-v]``: run the fuzz suite, print counts.

Without ``--full`` a fixed-seed sample (the one the test suite runs) is used.
Exit status 1 when any trial crashed, hung, leaked internals or gave a wrong result.
"""
import argparse
import sys
import time

from .runner import run, summary
from .sample import fast_sample


def main(argv=None):
    ap = argparse.ArgumentParser(prog='python -m tests.fuzz', description=__doc__)
    ap.add_argument('--full', action='store_true', help='every trial (several minutes)')
    ap.add_argument('--ops', nargs='*', help='only these operators')
    ap.add_argument('--api', action='store_true', help='only the public-API trials')
    ap.add_argument('--timeout', type=float, default=60.0, help='seconds per trial')
    ap.add_argument('--mem', type=float, default=6.0, help='GiB of address space per child')
    ap.add_argument('-j', '--workers', type=int, default=2, help='child processes at once')
    ap.add_argument('-v', '--verbose', action='store_true', help='print every finding')
    a = ap.parse_args(argv)
    from .trials import all_trials, op_trials
    from .api_cases import api_trials
    if a.ops:
        trials = op_trials(a.ops)
    elif a.api:
        trials = api_trials()
    elif a.full:
        trials = all_trials()
    else:
        trials = fast_sample()
    t0 = time.time()
    counts, findings = run(trials, timeout=a.timeout, mem=int(a.mem * (1 << 30)),
                           verbose=a.verbose, workers=a.workers)
    if findings and not a.verbose:
        for c, t, m in findings:
            print('%-6s %s  %s' % (c, t, m[:300]))
    print(summary(counts, time.time() - t0))
    return 1 if findings else 0


if __name__ == '__main__':
    sys.exit(main())
