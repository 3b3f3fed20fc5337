"""Learning-rate schedules: MXNet 1.9.1's step sequences, warm-up, errors, state round trip."""
import json
import math
import os

import numpy as np
import pytest
from hypothesis import given, strategies as st

from ffnumba import lr_scheduler as ls
from ffnumba.base import ParamError

with open(os.path.join(os.path.dirname(__file__), 'data', 'optimizer', 'schedulers.json')) as _f:
    MXNET = json.load(_f)

MAKE = {
    'factor': lambda: ls.FactorScheduler(step=2, factor=0.5, base_lr=1.0),
    'factor_stop': lambda: ls.FactorScheduler(step=1, factor=0.1, stop_factor_lr=1e-3,
                                              base_lr=1.0),
    'factor_warm': lambda: ls.FactorScheduler(step=3, factor=0.5, base_lr=0.8, warmup_steps=4,
                                              warmup_begin_lr=0.1),
    'multifactor': lambda: ls.MultiFactorScheduler(step=[2, 4], factor=0.1, base_lr=1.0),
    'multifactor_const': lambda: ls.MultiFactorScheduler(
        step=[5, 7], factor=0.5, base_lr=1.0, warmup_steps=3, warmup_begin_lr=0.2,
        warmup_mode='constant'),
    'poly': lambda: ls.PolyScheduler(max_update=8, base_lr=1.0, pwr=2, final_lr=0.1),
    'poly_warm': lambda: ls.PolyScheduler(max_update=10, base_lr=0.5, pwr=1.5, warmup_steps=3,
                                          warmup_begin_lr=0.05),
    'cosine': lambda: ls.CosineScheduler(max_update=8, base_lr=1.0, final_lr=0.1),
    'cosine_warm': lambda: ls.CosineScheduler(max_update=10, base_lr=0.5, warmup_steps=2,
                                              warmup_begin_lr=0.1),
}


@pytest.mark.parametrize('name', sorted(MAKE))
def test_sequence_matches_mxnet(name):
    sched = MAKE[name]()
    got = [sched(n) for n in range(len(MXNET[name]))]
    np.testing.assert_allclose(got, MXNET[name], rtol=1e-12)
    fresh = [MAKE[name]()(n) for n in range(len(MXNET[name]))]
    np.testing.assert_allclose(fresh, MXNET[name + '_fresh'], rtol=1e-12)


def test_documented_examples():
    f = ls.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    assert [f(n) for n in range(8)] == [1, 1, 1, .5, .5, .25, .25, .125]
    m = ls.MultiFactorScheduler(step=[2, 4], factor=0.1, base_lr=1.0)
    np.testing.assert_allclose([m(n) for n in range(7)], [1, 1, 1, .1, .1, .01, .01])


@given(base=st.floats(0.01, 1.0), begin_frac=st.floats(0.0, 1.0), steps=st.integers(1, 20),
       max_extra=st.integers(1, 30))
def test_warmup_is_linear_then_schedule_reaches_final_lr(base, begin_frac, steps, max_extra):
    begin = base * begin_frac
    for cls in (ls.PolyScheduler, ls.CosineScheduler):
        s = cls(max_update=steps + max_extra, base_lr=base, final_lr=0.0, warmup_steps=steps,
                warmup_begin_lr=begin)
        for n in range(steps):
            assert s(n) == pytest.approx(begin + (base - begin) * n / steps)
        assert s(steps) == pytest.approx(base)
        assert s(steps + max_extra) == pytest.approx(0.0, abs=1e-12)
        assert s(steps + max_extra + 5) == pytest.approx(0.0, abs=1e-12)


def test_cosine_midpoint():
    s = ls.CosineScheduler(max_update=10, base_lr=1.0, final_lr=0.2)
    assert s(5) == pytest.approx(0.2 + 0.8 * (1 + math.cos(math.pi / 2)) / 2)


@pytest.mark.parametrize('make,field', [
    (lambda: ls.FactorScheduler(step=0), 'step'),
    (lambda: ls.FactorScheduler(step=2, factor=1.5), 'factor'),
    (lambda: ls.MultiFactorScheduler(step=[3, 2]), 'step'),
    (lambda: ls.MultiFactorScheduler(step=[0, 2]), 'step'),
    (lambda: ls.MultiFactorScheduler(step=5), 'step'),
    (lambda: ls.PolyScheduler(max_update=0), 'max_update'),
    (lambda: ls.CosineScheduler(max_update=2.5), 'max_update'),
    (lambda: ls.FactorScheduler(step=2, warmup_steps=-1), 'warmup_steps'),
    (lambda: ls.FactorScheduler(step=2, base_lr=0.1, warmup_begin_lr=0.5), 'warmup_begin_lr'),
    (lambda: ls.FactorScheduler(step=2, warmup_mode='cubic'), 'warmup_mode'),
])
def test_bad_arguments_name_the_field(make, field):
    with pytest.raises(ParamError, match=r'`%s` must be .*Received: %s=' % (field, field)):
        make()


def test_config_round_trip_keeps_state():
    s = ls.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    for n in range(6):
        s(n)
    t = ls.from_config(json.loads(json.dumps(s.get_config())))
    assert type(t) is ls.FactorScheduler
    assert [t(n) for n in range(6, 12)] == [s(n) for n in range(6, 12)]
    with pytest.raises(ParamError, match='unknown scheduler'):
        ls.from_config({'type': 'Nope', 'state': {}})


def test_base_class_call_is_abstract():
    with pytest.raises(NotImplementedError):
        ls.LRScheduler()(0)
