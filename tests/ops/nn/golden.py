"""Shared loader of the MXNet golden fixtures of the nn op tests."""
import os

import numpy as np

DATA = os.path.join(os.path.dirname(__file__), '..', '..', 'data')


def load_golden(name):
    """Cases of ``tests/data/<name>_golden.npz`` (see tools/make_nn_fixtures.py).

    Returns ``{case: {key: array}}`` from the ``case__key`` entries of the file.
    """
    z = np.load(os.path.join(DATA, name + '_golden.npz'))
    cases = {}
    for k in z.files:
        case, key = k.split('__', 1)
        cases.setdefault(case, {})[key] = z[k]
    return cases
