"""The fast fuzz subset (``python -m tests.fuzz`` runs the same; ``--full`` runs everything).

A fixed-seed sample of every trial family: per registered operator (so ops
added later are sampled too) its seed case and a few mutations, plus a sample
of the public-API trials. Trials run batched in child processes under a time
and memory limit; only a trial that crashes or hangs costs a new child.
"""
import numpy as np

from fuzz.runner import classify, run, summary, LEAK
from fuzz.sample import fast_sample
from fuzz.trials import op_seeds, op_trials


def test_fast_fuzz_subset_is_clean():
    trials = fast_sample()
    counts, findings = run(trials, timeout=120.0)
    print(summary(counts))
    assert counts['trials'] == len(trials)
    assert not findings, '\n'.join('%s %s %s' % (c, t, m[:300]) for c, t, m in findings)


def test_every_registered_op_is_enumerated():
    from ffnumba.ops import list_ops
    names = {n for n in list_ops() if not n.startswith('_test_')}
    assert set(op_seeds()) == names
    kinds = {t['mut'][0] for t in op_trials(['dot'])}
    assert kinds == {'base', 'zeroall', 'zero', 'grow', 'rank', 'dtype', 'value', 'field'}


def test_classification():
    assert classify('ok', '') == 'clean'
    assert classify('fferror', 'ShapeError: dot: shapes (2, 3) and (4,) do not fit') == 'clean'
    assert classify('fferror', 'FFError: x: ValueError: cannot reshape array of size 0') == 'leak'
    assert classify('fferror', 'TypingError: Failed in nopython mode pipeline') == 'leak'
    assert not LEAK.search('ffnumba refuses to unpickle it')
    assert classify('nonff', 'KeyError: 3') == 'nonff'
    assert classify('crash', 'signal 11') == 'crash'


def test_runner_reports_crash_and_hang_and_goes_on():
    """A child that dies or hangs is replaced; the trials after it still run."""
    trials = [{'kind': 'api', 'name': 'misc', 'arg': 'bad_json'},
              {'kind': 'selftest', 'name': 'segfault'},
              {'kind': 'selftest', 'name': 'hang'},
              {'kind': 'selftest', 'name': 'raise'},
              {'kind': 'api', 'name': 'misc', 'arg': 'deep_json'}]
    counts, findings = run(trials, timeout=5.0, workers=1)
    assert counts['trials'] == 5
    assert [c for c, _, _ in findings] == ['crash', 'hang', 'nonff']
    assert counts['clean'] == 2
