"""The fast subset the normal test suite runs: a fixed-seed sample of every trial family."""
import random

from .api_cases import api_trials
from .trials import op_trials

#: op mutations per operator in the fast sample (plus its 'base' trial).
PER_OP = 2
#: public-API trials in the fast sample.
API = 50


def fast_sample(seed=12):
    rng = random.Random(seed)
    by_op = {}
    for t in op_trials():
        by_op.setdefault(t['op'], []).append(t)
    out = []
    for name in sorted(by_op):
        ts = by_op[name]
        out.append(ts[0])
        out += rng.sample(ts[1:], min(PER_OP, len(ts) - 1))
    api = api_trials()
    out += rng.sample(api, min(API, len(api)))
    return out
