"""Every optimizer against its numpy reference, and against real MXNet 1.9.1 trajectories."""
import json
import os
import warnings

import numpy as np
import pytest

import ffnumba as ff
import ffnumba.ndarray as nd
import ffnumba.optimizer as opt
from ffnumba.base import ParamError
from optimizer_reference import REFS, run_reference

DATA = os.path.join(os.path.dirname(__file__), '..', 'data', 'optimizer')
STEPS = 3

#: optimizer -> hyper-parameter variants (beyond the common ones).
VARIANTS = {
    'sgd': [dict(momentum=0.0), dict(momentum=0.9)],
    'ccsgd': [dict(momentum=0.5)],
    'nag': [dict(momentum=0.0), dict(momentum=0.9)],
    'signum': [dict(momentum=0.9, wd_lh=0.01), dict(momentum=0.0)],
    'sgld': [dict(learning_rate=0.01)],
    'dcasgd': [dict(momentum=0.0), dict(momentum=0.9, lamda=0.5)],
    'adam': [dict(), dict(beta1=0.5, beta2=0.9, epsilon=1e-3)],
    'adamax': [dict(), dict(beta1=0.5, beta2=0.9)],
    'nadam': [dict(), dict(beta1=0.5, beta2=0.9, schedule_decay=0.1)],
    'ftml': [dict(), dict(beta1=0.3, beta2=0.9)],
    'adagrad': [dict(), dict(eps=0.1)],
    'rmsprop': [dict(), dict(centered=True, gamma2=0.5), dict(clip_weights=0.5)],
    'adadelta': [dict(), dict(rho=0.5)],
    'ftrl': [dict(), dict(lamda1=0.3, beta=0.5, learning_rate=0.3)],
    'lamb': [dict(), dict(beta1=0.5, beta2=0.9, epsilon=1e-3, bias_correction=False,
                          lower_bound=0.5, upper_bound=1.5)],
    'lars': [dict(momentum=0.0, eta=0.01), dict(momentum=0.9, eta=0.02, eps=1e-3)],
}
#: (wd, rescale_grad, clip_gradient) combinations.
COMMON = [(0.0, 1.0, None), (0.1, 0.5, 0.3)]
CASES = [(name, v, c, dt) for name, vs in sorted(VARIANTS.items()) for v in vs
         for c in COMMON for dt in ('float32', 'float64')]


def _data(dtype, shape=(3, 4), n=2, seed=1):
    rng = np.random.default_rng(seed)
    w0 = [rng.uniform(-1, 1, shape).astype(dtype) for _ in range(n)]
    grads = [[rng.uniform(-2, 2, shape).astype(dtype) for _ in range(n)] for _ in range(STEPS)]
    return w0, grads


def _run(name, kw, w0, grads, dtype):
    updater = opt.get_updater(opt.create(name, **kw))
    ws = [nd.array(w, dtype=dtype) for w in w0]
    for gs in grads:
        for i, g in enumerate(gs):
            updater(i, nd.array(g, dtype=dtype), ws[i])
    return ws, updater


@pytest.mark.parametrize('name,variant,common,dtype', CASES,
                         ids=['%s-%s-%s-%s' % (n, i % 7, c[0], d)
                              for i, (n, v, c, d) in enumerate(CASES)])
def test_matches_numpy_reference(name, variant, common, dtype):
    wd, rescale, clip = common
    kw = dict(variant, wd=wd, rescale_grad=rescale, clip_gradient=clip)
    w0, grads = _data(dtype)
    ff.random.seed(3)
    got, _ = _run(name, kw, w0, grads, dtype)
    want = run_reference(name, kw, w0, grads, dtype, seed=3)
    # MXNet keeps the states of these in float32 even for float64 weights
    f32_state = name in ('adagrad', 'rmsprop', 'adadelta', 'ftrl')
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == 'float32' or f32_state else \
        dict(rtol=1e-10, atol=1e-12)
    for g, w in zip(got, want):
        assert g.dtype is np.dtype(dtype).type
        np.testing.assert_allclose(g.asnumpy(), w, **tol)


@pytest.mark.parametrize('name', sorted(VARIANTS))
def test_float16_multi_precision_keeps_a_float32_master(name):
    kw = dict(VARIANTS[name][-1], wd=0.1, rescale_grad=0.5, multi_precision=True)
    w0, grads = _data('float16')
    ff.random.seed(3)
    got, updater = _run(name, kw, w0, grads, 'float16')
    want = run_reference(name, kw, [w.astype(np.float32) for w in w0], grads, 'float32', seed=3)
    state = updater.states[0]
    master = state[1] if name in ('sgd', 'ccsgd', 'nag', 'lars') else state[0]
    assert master.dtype is np.float32
    np.testing.assert_allclose(master.asnumpy(), want[0], rtol=1e-5, atol=1e-5)
    for g, w in zip(got, want):
        assert g.dtype is np.float16
        np.testing.assert_allclose(g.asnumpy().astype(np.float64), w, rtol=2e-3, atol=2e-3)


def test_float16_without_multi_precision_warns_and_updates():
    w = nd.array([0.5, -0.25], dtype='float16')
    with pytest.warns(UserWarning, match='multi_precision'):
        u = opt.get_updater(opt.SGD(learning_rate=0.5, momentum=0.5))
        u(0, nd.array([1.0, 1.0], dtype='float16'), w)
    assert w.dtype is np.float16 and u.states[0].dtype is np.float16
    np.testing.assert_allclose(w.asnumpy(), [0.0, -0.75])


def test_every_registered_optimizer_has_a_reference_test():
    registered = set(opt.get_registry_names())
    assert registered == set(VARIANTS), registered ^ set(VARIANTS)
    assert registered == set(REFS)


# ------------------------------------------------------------ MXNet goldens
with open(os.path.join(DATA, 'cases.json')) as _f:
    GOLDEN_CASES = json.load(_f)
GOLDEN = dict(np.load(os.path.join(DATA, 'golden.npz')))


@pytest.mark.parametrize('case', sorted(GOLDEN_CASES))
def test_matches_mxnet_trajectory(case):
    name, kw, dtype = GOLDEN_CASES[case]
    o = opt.create(name, param_idx2name={0: 'a_weight', 1: 'b_weight'}, **kw)
    u = opt.get_updater(o)
    ws = [nd.array(w, dtype=dtype) for w in GOLDEN[case + '|w0']]
    step = 0
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        while case + '|g%d' % step in GOLDEN:
            for i, g in enumerate(GOLDEN[case + '|g%d' % step]):
                u(i, nd.array(g, dtype=dtype), ws[i])
            step += 1
            want = GOLDEN[case + '|w%d' % step].astype(np.float64)
            got = np.stack([w.asnumpy() for w in ws]).astype(np.float64)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 if dtype == 'float32'
                                       else 1e-3, err_msg='step %d' % step)
    assert step >= 3


# ------------------------------------------------------------ quirks
def test_adadelta_ignores_lr_and_scales_grad_in_place():
    w1, w2 = nd.array([0.3, -0.2]), nd.array([0.3, -0.2])
    g1, g2 = nd.array([1.0, 2.0]), nd.array([1.0, 2.0])
    opt.AdaDelta(learning_rate=5.0, rescale_grad=0.5).update(0, w1, g1, (
        nd.zeros((2,)), nd.zeros((2,))))
    opt.AdaDelta(learning_rate=0.001, rescale_grad=0.5).update(0, w2, g2, (
        nd.zeros((2,)), nd.zeros((2,))))
    np.testing.assert_array_equal(w1.asnumpy(), w2.asnumpy())
    np.testing.assert_array_equal(g1.asnumpy(), [0.5, 1.0])


def test_nadam_schedule_is_shared_across_parameters():
    o = opt.Nadam()
    u = opt.get_updater(o)
    for i in range(3):
        u(i, nd.ones((2,)), nd.ones((2,)))
    mu1 = 0.9 * (1 - 0.5 * 0.96 ** 0.004)
    assert o.m_schedule == pytest.approx(mu1 ** 3)


def test_states_dtypes_follow_mxnet():
    w64 = nd.zeros((2,), dtype='float64')
    assert opt.AdaGrad().create_state(0, w64).dtype is np.float32
    assert all(s.dtype is np.float32 for s in opt.RMSProp(centered=True).create_state(0, w64))
    assert all(s.dtype is np.float64 for s in opt.Adam().create_state(0, w64))
    assert opt.SGD().create_state(0, w64) is None
    mom, prev = opt.DCASGD().create_state(0, nd.array([1.0, 2.0]))
    assert mom is None and prev.asnumpy().tolist() == [1.0, 2.0]
    st = opt.SGD(momentum=0.9, multi_precision=True).create_state_multi_precision(
        0, nd.zeros((2,), dtype='float16'))
    assert st[0].dtype is np.float32 and st[1].dtype is np.float32
    st = opt.Adam(multi_precision=True).create_state_multi_precision(
        0, nd.zeros((2,), dtype='float16'))
    assert st[0].dtype is np.float32 and len(st[1]) == 2


def test_numpy_arrays_update_in_place():
    w = np.array([1.0, 2.0], np.float32)
    opt.SGD(learning_rate=0.5).update(0, w, np.array([1.0, 1.0], np.float32), None)
    np.testing.assert_allclose(w, [0.5, 1.5])


def test_gradient_shape_mismatch_is_shape_error():
    with pytest.raises(ff.base.ShapeError, match=r'SGD.*\(3,\).*\(2,\)'):
        opt.SGD().update(0, nd.zeros((2,)), nd.zeros((3,)), None)


@pytest.mark.parametrize('name,kw,field', [
    ('sgd', dict(learning_rate=-0.1), 'learning_rate'),
    ('sgd', dict(momentum=1.0), 'momentum'),
    ('nag', dict(momentum=-0.1), 'momentum'),
    ('signum', dict(momentum=1.5), 'momentum'),
    ('adam', dict(beta1=1.0), 'beta1'),
    ('adam', dict(beta2=-0.5), 'beta2'),
    ('nadam', dict(beta1=2), 'beta1'),
    ('ftml', dict(beta2=1.0), 'beta2'),
    ('adamax', dict(beta1=float('nan')), 'beta1'),
    ('rmsprop', dict(gamma1=1.0), 'gamma1'),
    ('adadelta', dict(rho=1.0), 'rho'),
    ('adagrad', dict(eps=-1), 'eps'),
    ('ftrl', dict(learning_rate=-1), 'learning_rate'),
    ('sgd', dict(clip_gradient=-1.0), 'clip_gradient'),
    ('sgd', dict(rescale_grad='x'), 'rescale_grad'),
    ('dcasgd', dict(lamda=-0.1), 'lamda'),
])
def test_bad_hyper_parameters_name_the_value(name, kw, field):
    with pytest.raises(ParamError, match=r'`%s` must be .*Received: %s=' % (field, field)):
        opt.create(name, **kw)


def test_unknown_optimizer_name():
    with pytest.raises(ParamError, match="'adamw'.*adam"):
        opt.create('adamw')
