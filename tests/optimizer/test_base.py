"""Optimizer base semantics: rates, multipliers, counting, clipping rules, registry."""
import json
import os

import numpy as np
import pytest

import ffnumba as ff
import ffnumba.ndarray as nd
import ffnumba.optimizer as opt
from ffnumba import lr_scheduler
from ffnumba.base import FFError

DATA = os.path.join(os.path.dirname(__file__), '..', 'data', 'optimizer')


class FakeSymbol:
    """Only what the optimizer reads from a Symbol."""

    def __init__(self, attrs, args):
        self._attrs, self._args = attrs, args

    def attr_dict(self):
        return self._attrs

    def list_arguments(self):
        return self._args


def test_default_learning_rate_and_scheduler_precedence():
    assert opt.SGD().learning_rate == 0.01
    assert opt.Adam().learning_rate == 0.001
    sched = lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    o = opt.SGD(lr_scheduler=sched)
    assert o.lr is None and o.learning_rate == 1.0
    sched = lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    with pytest.warns(UserWarning, match='overwritten'):
        o = opt.SGD(learning_rate=0.3, lr_scheduler=sched)
    assert sched.base_lr == 0.3
    with pytest.raises(FFError, match='lr_scheduler'):
        o.set_learning_rate(0.1)
    o2 = opt.SGD()
    o2.set_learning_rate(0.2)
    assert o2.learning_rate == 0.2


def test_learning_rate_overriding_scheduler_matches_mxnet_sequence():
    with open(os.path.join(DATA, 'schedulers.json')) as f:
        want = json.load(f)['sgd_lr_overrides_scheduler']
    sched = lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    with pytest.warns(UserWarning):
        o = opt.SGD(learning_rate=0.3, lr_scheduler=sched)
    u = opt.get_updater(o)
    w = nd.zeros((1,))
    got = []
    for _ in range(len(want)):
        u(0, nd.ones((1,)), w)
        got.append(o.learning_rate)
    np.testing.assert_allclose(got, want)


def test_wd_is_zero_for_names_not_ending_in_weight_or_gamma():
    o = opt.SGD(learning_rate=0.1, wd=0.1,
                param_idx2name={0: 'fc_weight', 1: 'fc_bias', 2: 'bn_gamma', 3: 'bn_beta'})
    assert [o._get_wd(i) for i in range(4)] == [0.1, 0.0, 0.1, 0.0]
    assert opt.SGD(wd=0.1)._get_wd(7) == 0.1  # no names: no rule


def test_symbol_multipliers_then_explicit_ones():
    sym = FakeSymbol({'fc_weight': {'__lr_mult__': '3', '__wd_mult__': '2'},
                      'fc_bias': {'__lr_mult__': '0.5'}}, ['data', 'fc_weight', 'fc_bias'])
    o = opt.SGD(learning_rate=0.1, wd=0.1, sym=sym,
                param_idx2name={0: 'fc_weight', 1: 'fc_bias'})
    assert o._get_lr(0) == pytest.approx(0.3) and o._get_wd(0) == pytest.approx(0.2)
    assert o._get_lr(1) == pytest.approx(0.05) and o._get_wd(1) == 0.0
    o.set_lr_mult({'fc_weight': 10.0, 1: 2.0})
    assert o._get_lr(0) == pytest.approx(1.0) and o._get_lr(1) == pytest.approx(0.2)
    o.set_wd_mult({1: 4.0})
    assert o._get_wd(1) == pytest.approx(0.4) and o._get_wd(0) == pytest.approx(0.2)


def test_param_dict_takes_precedence():
    class P:
        lr_mult, wd_mult = 7.0, 3.0
    o = opt.SGD(learning_rate=0.1, wd=0.1, param_dict={0: P()}, param_idx2name={0: 'x_bias'})
    o.set_lr_mult({0: 2.0})
    assert o._get_lr(0) == pytest.approx(0.7) and o._get_wd(0) == pytest.approx(0.3)


def test_update_counting_and_begin_num_update():
    seen = []

    class Record(lr_scheduler.LRScheduler):
        def __call__(self, n):
            seen.append(n)
            return 0.1
    o = opt.SGD(lr_scheduler=Record(), begin_num_update=5)
    u = opt.get_updater(o)
    w, g = nd.zeros((2,)), nd.ones((2,))
    u(0, g, w)
    u(1, g, w)
    u(0, g, w)
    assert o._index_update_count == {0: 7, 1: 6} and o.num_update == 7
    assert seen == [6, 6, 7]  # the rate is read after the count is incremented


def test_counters_are_kept_per_device():
    o = opt.Adam()
    u = opt.get_updater(o)
    u(0, nd.ones((2,)), nd.zeros((2,)))
    u(0, nd.ones((2,), ctx=ff.cpu(1)), nd.zeros((2,), ctx=ff.cpu(1)))
    assert o._all_index_update_counts == {0: {0: 1}, 1: {0: 1}}


def test_clip_rules_follow_mxnet():
    # fused MXNet updates clip only when clip_gradient is truthy: 0 means no clipping
    w = nd.array([0.0])
    opt.SGD(learning_rate=1.0, clip_gradient=0).update(0, w, nd.array([5.0]), None)
    assert w.asscalar() == -5.0
    # MXNet's Python-written rules clip whenever it is not None: 0 zeroes the gradient
    w = nd.array([1.0])
    opt.AdaGrad(learning_rate=1.0, clip_gradient=0, wd=0.5).update(
        0, w, nd.array([5.0]), nd.zeros((1,)))
    assert w.asscalar() == 0.5


def test_list_update_through_updater():
    u = opt.get_updater(opt.SGD(learning_rate=1.0))
    ws = [nd.zeros((2,)), nd.zeros((3,))]
    u([0, 1], [nd.ones((2,)), nd.ones((3,))], ws)
    assert ws[0].asnumpy().tolist() == [-1, -1] and ws[1].asnumpy().tolist() == [-1, -1, -1]


def test_create_by_name_instance_and_json():
    assert isinstance(opt.create('ADAM'), opt.Adam)
    assert isinstance(opt.create('Sgd', momentum=0.9), opt.SGD)
    inst = opt.NAG()
    assert opt.create(inst) is inst
    o = opt.create('["rmsprop", {"centered": true}]')
    assert isinstance(o, opt.RMSProp) and o.centered
    with pytest.raises(ff.base.ParamError, match='already an instance'):
        opt.create(inst, momentum=0.1)


def test_register_custom_optimizer():
    @opt.register
    class MyTestOpt(opt.Optimizer):
        def update(self, index, weight, grad, state):
            weight[:] = weight.asnumpy() + grad.asnumpy()
    try:
        o = opt.create('mytestopt')
        w = nd.zeros((2,))
        opt.get_updater(o)(0, nd.ones((2,)), w)
        assert w.asnumpy().tolist() == [1, 1]
    finally:
        from ffnumba.registry import _REGISTRIES
        _REGISTRIES[opt.Optimizer].pop('mytestopt')


def test_bad_hyper_parameter_names_and_types_are_param_errors():
    with pytest.raises(ff.base.ParamError, match="'sgd'.*unexpected keyword argument 'foo'"):
        opt.create('sgd', foo=1)
    with pytest.raises(ff.base.ParamError, match='lr_scheduler'):
        opt.create('sgd', lr_scheduler=5)
    o = opt.create('sgd')
    with pytest.raises(ff.base.ParamError, match='args_lr_mult'):
        o.set_lr_mult('x')
    with pytest.raises(ff.base.ParamError, match='args_wd_mult'):
        o.set_wd_mult({'w': 'big'})
    o.set_lr_mult({'w': 2})
    assert o.lr_mult == {'w': 2.0}


# ------------------------------------------------------------------ hyper-parameter records
def test_fused_update_reads_hyper_parameters_by_name():
    from ffnumba.base import FFError
    from ffnumba.optimizer import adam, sgd
    w, g = ff.nd.ones((3,)), ff.nd.ones((3,))
    sgd._SGD(w, g, (), lr=0.5, wd=0.0, rescale_grad=1.0, clip_gradient=-1.0)
    np.testing.assert_allclose(w.asnumpy(), 0.5)
    with pytest.raises(FFError, match=r'SGD update: missing hyper-parameter `clip_gradient`'):
        sgd._SGD(w, g, (), lr=0.5, wd=0.0, rescale_grad=1.0)
    with pytest.raises(FFError, match=r'Adam update: missing hyper-parameter `beta2`; unknown hyper-parameter `beta3`'):
        adam._ADAM(w, g, (ff.nd.zeros((3,)), ff.nd.zeros((3,))), lr=0.1, wd=0.0,
                   rescale_grad=1.0, clip_gradient=-1.0, beta1=0.9, beta3=0.9, epsilon=1e-8)
    with pytest.raises(FFError, match=r'SGD update: hyper-parameter `lr` must be a real'):
        sgd._SGD(w, g, (), lr='fast', wd=0.0, rescale_grad=1.0, clip_gradient=-1.0)
    with pytest.raises(FFError, match=r'SGD update: hyper-parameter `wd` must be a real'):
        sgd._SGD(w, g, (), lr=0.5, wd=None, rescale_grad=1.0, clip_gradient=-1.0)  # not NaN
    np.testing.assert_allclose(w.asnumpy(), 0.5)        # no failed call touched the weight


def test_hyper_parameter_records_are_named_tuples_in_the_compute_dtype():
    from ffnumba.optimizer import adam
    rec = adam._ADAM.hp(np.float16, dict(lr=0.1, wd=0.0, rescale_grad=1.0, clip_gradient=-1.0,
                                         beta1=0.9, beta2=0.999, epsilon=1e-8))
    assert type(rec) is adam.AdamHP and rec.beta2 == np.float32(0.999)
    assert all(type(v) is np.float32 for v in rec)
    assert type(adam._ADAM.hp(np.float64, rec._asdict()).lr) is np.float64


def test_hyper_parameter_records_are_reused_and_still_checked(monkeypatch):
    from ffnumba.base import FFError
    from ffnumba.optimizer import kernels, sgd
    values = dict(lr=0.5, wd=0.0, rescale_grad=1.0, clip_gradient=-1.0)
    rec = sgd._SGD.hp(np.float32, values)
    assert sgd._SGD.hp(np.float32, dict(values)) is rec
    assert type(sgd._SGD.hp(np.float64, values).lr) is np.float64     # kept per dtype
    assert sgd._SGD.hp(np.float32, dict(values, lr=0.25)).lr == np.float32(0.25)
    with pytest.raises(FFError, match=r'hyper-parameter `lr` must be a real'):
        sgd._SGD.hp(np.float32, dict(values, lr=[0.5]))               # unhashable: checked
    with pytest.raises(FFError, match=r'hyper-parameter `wd` must be a real'):
        sgd._SGD.hp(np.float32, dict(values, wd=None))
    monkeypatch.setattr(kernels, 'RECORDS_KEPT', 2)
    for lr in (0.1, 0.2, 0.3):
        assert sgd._SGD.hp(np.float32, dict(values, lr=lr)).lr == np.float32(lr)
    assert len(sgd._SGD._records) <= 2


def test_one_loop_template_for_every_state_count():
    from ffnumba.optimizer import kernels
    assert kernels._BODY.count('step(') == 1          # the loop body is written once
    for n in range(kernels.MAX_STATES + 1):
        for target in ('cpu', 'gpu'):
            loop = kernels._loop_builder(target, n)[1](kernels.clip)
            names = loop.__code__.co_varnames[:loop.__code__.co_argcount]
            assert names == ('w', 'g') + tuple('s%d' % k for k in range(n)) + ('hp', 'wg')


@pytest.mark.parametrize('value', [None, float('nan'), 'x'])
def test_signum_checks_wd_lh(value):
    """wd_lh reaches the kernel: None failed in float(), NaN silently made NaN weights."""
    with pytest.raises(ff.base.ParamError, match='Signum: `wd_lh` must be a real number'):
        ff.optimizer.Signum(wd_lh=value)
