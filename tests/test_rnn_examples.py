"""The recurrent examples run from a fresh process; with their defaults they reach the issue's targets.

Quick runs (short settings) always run; the full runs are marked slow.
``lstm_bucketing.py`` needs the Debian package ``fortunes`` (its corpus); the
tests skip with that reason when it is absent.
"""
import os
import re
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'examples')
needs_fortunes = pytest.mark.skipif(not os.path.isdir('/usr/share/games/fortunes'),
                                    reason='corpus missing: apt-get install fortunes')


def run(tmp_path, script, *args):
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, script)] + list(args),
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=1500)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    return out


def accuracy(out):
    return float(re.search(r'final test accuracy: ([0-9.]+)', out).group(1))


def perplexities(out):
    m = re.search(r'final validation perplexity: ([0-9.]+) vs unigram ([0-9.]+)', out)
    return float(m.group(1)), float(m.group(2))


def test_rnn_mnist_quick(tmp_path):
    out = run(tmp_path, 'rnn_mnist.py', '--epochs', '1', '--num-hidden', '16',
              '--bidirectional', '0', '--max-shift', '0')
    assert accuracy(out) > 0.5, out[-2000:]
    assert 'Epoch[0] Validation-accuracy=' in out


@needs_fortunes
def test_lstm_bucketing_quick(tmp_path):
    out = run(tmp_path, 'lstm_bucketing.py', '--epochs', '1', '--max-lines', '1500',
              '--num-hidden', '32', '--lr', '0.02')
    ppl, uni = perplexities(out)
    assert ppl < uni, out[-2000:]
    assert re.search(r'epoch 0: validation perplexity [0-9.]+', out)


@pytest.mark.slow
def test_rnn_mnist_reaches_target(tmp_path):
    assert accuracy(run(tmp_path, 'rnn_mnist.py')) >= 0.95


@pytest.mark.slow
@needs_fortunes
def test_lstm_bucketing_falls_well_below_unigram(tmp_path):
    ppl, uni = perplexities(run(tmp_path, 'lstm_bucketing.py'))
    assert ppl < 0.6 * uni


@needs_fortunes
def test_lstm_bucketing_with_unrolled_cells_quick(tmp_path):
    out = run(tmp_path, 'lstm_bucketing.py', '--stack', 'cells', '--epochs', '1',
              '--max-lines', '600', '--num-hidden', '16', '--batch-size', '8')
    ppl, uni = perplexities(out)
    assert ppl < uni, out[-2000:]
