"""GPU twins of the fused updates equal the CPU kernels (run with NUMBA_ENABLE_CUDASIM=1)."""
import warnings

import numpy as np
import pytest

import ffnumba as ff
import ffnumba.ndarray as nd
import ffnumba.optimizer as opt
from ffnumba import jit

CONFIGS = {
    'sgd': [dict(), dict(momentum=0.9)], 'ccsgd': [dict(momentum=0.5)],
    'nag': [dict(momentum=0.9)], 'signum': [dict(), dict(momentum=0.0)],
    'sgld': [dict()], 'dcasgd': [dict(), dict(momentum=0.5)], 'adam': [dict()],
    'adamax': [dict()], 'nadam': [dict()], 'ftml': [dict()], 'adagrad': [dict()],
    'rmsprop': [dict(clip_weights=0.5), dict(centered=True)], 'adadelta': [dict()],
    'ftrl': [dict()],
}
CASES = [(n, c) for n, cs in sorted(CONFIGS.items()) for c in cs]


def _run(name, kw, ctx, dtype='float32', steps=2):
    rng = np.random.default_rng(0)
    ff.random.seed(4)
    u = opt.get_updater(opt.create(name, wd=0.1, rescale_grad=0.5, clip_gradient=0.7, **kw))
    w = nd.array(rng.uniform(-1, 1, (2, 5)), ctx=ctx, dtype=dtype)
    for _ in range(steps):
        u(0, nd.array(rng.uniform(-2, 2, (2, 5)), ctx=ctx, dtype=dtype), w)
    return w, u


@pytest.mark.gpu
@pytest.mark.parametrize('name,kw', CASES, ids=['%s-%d' % (n, i) for i, (n, _) in
                                                 enumerate(CASES)])
def test_gpu_update_equals_cpu(name, kw, monkeypatch):
    monkeypatch.setattr(jit, 'GPU_THREADS', 4)  # several blocks on 10 elements
    wc, uc = _run(name, kw, ff.cpu())
    wg, ug = _run(name, kw, ff.gpu(0))
    assert wg.context == ff.gpu(0)
    np.testing.assert_allclose(wg.asnumpy(), wc.asnumpy(), rtol=1e-5, atol=1e-6)
    sc, sg = uc.states[0], ug.states[0]
    flat_c = [s for s in (sc if isinstance(sc, tuple) else (sc,)) if s is not None]
    flat_g = [s for s in (sg if isinstance(sg, tuple) else (sg,)) if s is not None]
    for a, b in zip(flat_c, flat_g):
        assert b.context == ff.gpu(0)
        np.testing.assert_allclose(b.asnumpy(), a.asnumpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize('name', ['sgd', 'adam'])
def test_gpu_multi_precision_and_float16(name):
    kw = dict(momentum=0.9) if name == 'sgd' else {}
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for mp in (True, False):
            wc, _ = _run(name, dict(kw, multi_precision=mp), ff.cpu(), 'float16')
            wg, _ = _run(name, dict(kw, multi_precision=mp), ff.gpu(0), 'float16')
            assert wg.dtype is np.float16
            np.testing.assert_array_equal(wg.asnumpy(), wc.asnumpy())


@pytest.mark.gpu
def test_gpu_states_resume_on_the_device():
    w, u = _run('adam', {}, ff.gpu(0))
    v = opt.get_updater(opt.Adam(wd=0.1, rescale_grad=0.5, clip_gradient=0.7))
    v.set_states(u.get_states())
    v(0, nd.ones((2, 5), ctx=ff.gpu(0)), w)
    assert all(s.context == ff.gpu(0) for s in v.states[0])
