"""LAMB and LARS: MXNet 1.9.1 trajectories, norms over whole tensors, LARS's name rules.

The numpy-reference rows (``lamb``, ``lars`` in ``optimizer_reference.REFS``)
run in ``test_optimizers.py`` with every other optimizer.
"""
import json
import os

import numpy as np
import pytest

import ffnumba as ff
import ffnumba.ndarray as nd
import ffnumba.optimizer as opt
from ffnumba.base import ParamError

DATA = os.path.join(os.path.dirname(__file__), '..', 'data', 'optimizer',
                    'lamb_lars_golden.npz')
GOLDEN = dict(np.load(DATA))
CASES = json.loads(str(GOLDEN['cases']))
IDX2NAME = {0: 'fc_weight', 1: 'fc_bias'}


@pytest.mark.parametrize('case', sorted(CASES))
def test_matches_mxnet_trajectory(case):
    name, kw = CASES[case]
    kw = dict(kw)
    sched = kw.pop('sched', None)
    if sched:
        kw['lr_scheduler'] = ff.lr_scheduler.FactorScheduler(step=1, factor=sched,
                                                             base_lr=kw['learning_rate'])
    u = opt.get_updater(opt.create(name, param_idx2name=IDX2NAME, **kw))
    flat = GOLDEN[case + '|w0']
    ws = [nd.array(flat[:12].reshape(3, 4)), nd.array(flat[12:])]
    k = 0
    while '%s|g%d' % (case, k) in GOLDEN:
        g = GOLDEN['%s|g%d' % (case, k)]
        u([0, 1], [nd.array(g[:12].reshape(3, 4)), nd.array(g[12:])], ws)
        k += 1
        got = np.concatenate([w.asnumpy().ravel() for w in ws])
        np.testing.assert_allclose(got, GOLDEN['%s|w%d' % (case, k)], rtol=2e-5, atol=2e-6,
                                   err_msg='%s step %d' % (case, k))
    assert k == 4


def test_lamb_trust_ratio_uses_whole_tensor_norms():
    # one step from zero states with bias correction: d = sign-like Adam step + wd w,
    # w' = w - lr ||w|| / ||d|| d
    w0 = np.array([[3.0, 0.0], [0.0, 4.0]])
    g = np.array([[1.0, -2.0], [0.5, 0.0]])
    w = nd.array(w0, dtype='float64')
    o = opt.LAMB(learning_rate=0.1, wd=0.0)
    o.update(0, w, nd.array(g, dtype='float64'), o.create_state(0, w))
    d = g / (np.abs(g) + 1e-6)
    want = w0 - 0.1 * 5.0 / np.linalg.norm(d) * d
    np.testing.assert_allclose(w.asnumpy(), want, rtol=1e-12)


def test_lars_skips_bias_and_zeroes_its_weight_decay():
    o = opt.LARS(learning_rate=0.5, wd=0.1, eta=0.01,
                 param_idx2name={0: 'fc_weight', 1: 'fc_bias', 2: 'bn_gamma'})
    assert o._get_wd(1) == 0.0 and o._get_wd(2) == 0.0 and o._get_wd(0) == 0.1
    b = nd.array([1.0, 2.0], dtype='float64')
    o.update(1, b, nd.array([1.0, 1.0], dtype='float64'), None)
    np.testing.assert_allclose(b.asnumpy(), [0.5, 1.5])     # plain SGD at lr, no decay


def test_float16_multi_precision_masters():
    for name in ('lamb', 'lars'):
        u = opt.get_updater(opt.create(name, learning_rate=0.1, multi_precision=True,
                                       momentum=0.9) if name == 'lars' else
                            opt.create(name, learning_rate=0.1, multi_precision=True))
        w = nd.array([[0.5, -1.0]], dtype='float16')
        u(0, nd.array([[0.25, 0.5]], dtype='float16'), w)
        st = u.states[0]
        master = st[1] if name == 'lars' else st[0]
        assert master.dtype is np.float32 and w.dtype is np.float16
        np.testing.assert_allclose(w.asnumpy().astype(np.float32), master.asnumpy(), atol=1e-3)


@pytest.mark.parametrize('name, kw, field', [
    ('lamb', dict(beta1=1.0), 'beta1'), ('lamb', dict(epsilon=-1), 'epsilon'),
    ('lamb', dict(lower_bound=float('nan')), 'lower_bound'),
    ('lars', dict(eta=-0.1), 'eta'), ('lars', dict(momentum=1.5), 'momentum'),
])
def test_bad_hyper_parameters(name, kw, field):
    with pytest.raises(ParamError, match=field):
        opt.create(name, **kw)


@pytest.mark.gpu
@pytest.mark.parametrize('name, kw', [('lamb', dict(wd=0.1, clip_gradient=0.7)),
                                      ('lars', dict(momentum=0.9, wd=0.1, eta=0.02))])
def test_gpu_update_equals_cpu(name, kw):
    def run(ctx):
        rng = np.random.default_rng(0)
        u = opt.get_updater(opt.create(name, learning_rate=0.1, **kw))
        w = nd.array(rng.uniform(-1, 1, (2, 5)), ctx=ctx)
        for _ in range(2):
            u(0, nd.array(rng.uniform(-2, 2, (2, 5)), ctx=ctx), w)
        return w
    np.testing.assert_allclose(run(ff.gpu(0)).asnumpy(), run(ff.cpu()).asnumpy(),
                               rtol=1e-5, atol=1e-6)
