"""BatchNorm's CPU kernels (per-channel sums in memory order, channels split over
threads) against a numpy reference: training and evaluation forward, backward with
grad_req write/add, use_global_stats, fix_gamma, any axis, one and two threads."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ffnumba.ops.nn import batch_norm as bn
from ffnumba.ops.registry import OpContext, get_op


def _ref(x, gamma, beta, mm, mv, og, ax, eps, fix_gamma, global_stats, train):
    """Output, batch mean/var and (dx, dgamma, dbeta) in float64."""
    red = tuple(i for i in range(x.ndim) if i != ax)
    shape = [1] * x.ndim
    shape[ax] = -1
    if train and not global_stats:
        mean, var = x.mean(red), x.var(red)
    else:
        mean, var = mm, mv
    g = np.ones_like(gamma) if fix_gamma else gamma
    inv = 1 / np.sqrt(var + eps)
    xhat = (x - mean.reshape(shape)) * inv.reshape(shape)
    y = xhat * g.reshape(shape) + beta.reshape(shape)
    dbeta = og.sum(red)
    dgamma = (og * xhat).sum(red)
    k = (g * inv).reshape(shape)
    if global_stats:
        dx = k * og
    else:
        n = x.size // x.shape[ax]
        dx = k * (og - dbeta.reshape(shape) / n - xhat * dgamma.reshape(shape) / n)
    return y, mean, var, dx, (np.zeros_like(dgamma) if fix_gamma else dgamma), dbeta


def _run(p, x, gamma, beta, mm, mv, og, train, reqs, init):
    op = get_op('BatchNorm')
    params = op.parse_params(p)
    ctx = OpContext(train, None, {}, np.random.default_rng(0), 'bn')
    outs = [np.full(x.shape, np.nan), np.full(gamma.shape, np.nan),
            np.full(gamma.shape, np.nan)]
    ins = [x, gamma.copy(), beta]
    aux = [mm.copy(), mv.copy()]
    op.forward['cpu'](ctx, params, ins, outs, aux)
    grads = [v.copy() for v in init]
    op.backward['cpu'](ctx, params, [og], ins, outs, grads, reqs, aux)
    return outs, grads, aux


@st.composite
def _case(draw):
    ndim = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    ax = draw(st.integers(-ndim, ndim - 1))
    p = dict(axis=ax, eps=draw(st.sampled_from([1e-3, 2e-5])),
             fix_gamma=draw(st.booleans()), use_global_stats=draw(st.booleans()),
             momentum=0.7, output_mean_var=True)
    reqs = [draw(st.sampled_from(['write', 'add'])) for _ in range(3)]
    return shape, p, reqs


@pytest.mark.parametrize('threads', [1, 2])
@pytest.mark.parametrize('par_min, block', [(0, bn.BLOCK_ELEMS), (bn.PAR_MIN_ELEMS, 1),
                                            (0, 7)])
@settings(max_examples=20, deadline=None)
@given(case=_case(), seed=st.integers(0, 2 ** 16), train=st.booleans())
def test_kernels_match_numpy(threads, par_min, block, case, seed, train):
    """Also with the channels split over threads for any size (``par_min`` 0) and in
    blocks of one or a few channels."""
    import numba
    if threads > numba.config.NUMBA_NUM_THREADS:
        pytest.skip('numba was started with fewer threads')
    shape, p, reqs = case
    ax = p['axis'] % len(shape)
    c = shape[ax]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 3 + 2
    gamma, beta = rng.uniform(0.5, 2, c), rng.standard_normal(c)
    mm, mv = rng.standard_normal(c), rng.uniform(0.5, 2, c)
    og = rng.standard_normal(shape)
    init = [rng.standard_normal(shape), rng.standard_normal(c), rng.standard_normal(c)]
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(bn, 'PAR_MIN_ELEMS', par_min)
            m.setattr(bn, 'BLOCK_ELEMS', block)
            outs, grads, aux = _run(p, x, gamma, beta, mm, mv, og, train, reqs, init)
    finally:
        numba.set_num_threads(before)
    y, mean, var, dx, dgamma, dbeta = _ref(x, gamma, beta, mm, mv, og, ax, p['eps'],
                                           p['fix_gamma'], p['use_global_stats'], train)
    np.testing.assert_allclose(outs[0], y, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(outs[1], mean, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(outs[2], 1 / np.sqrt(var + p['eps']), rtol=1e-9, atol=1e-10)
    for got, want, start, req in zip(grads, (dx, dgamma, dbeta), init, reqs):
        if req == 'add' and not (want is dgamma and p['fix_gamma']):
            want = want + start
        elif req == 'add':
            want = start
        np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-9)
    batch = train and not p['use_global_stats']
    np.testing.assert_allclose(aux[0], mm * 0.7 + mean * 0.3 if batch else mm, rtol=1e-10)
    np.testing.assert_allclose(aux[1], mv * 0.7 + var * 0.3 if batch else mv, rtol=1e-10)


@pytest.mark.parametrize('threads', [1, 2])
def test_large_offset_small_spread(threads):
    """The one-pass statistics are shifted by each channel's first value: channels at
    1e8 +- 0.01 keep their variance (unshifted, E[x^2] - E[x]^2 cancels to noise)."""
    import numba
    if threads > numba.config.NUMBA_NUM_THREADS:
        pytest.skip('numba was started with fewer threads')
    rng = np.random.default_rng(5)
    x = 1e8 + 0.01 * rng.standard_normal((16, 4, 32, 32))
    c = 4
    ones, zeros = np.ones(c), np.zeros(c)
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        outs, _, _ = _run(dict(fix_gamma=False, eps=1e-12, output_mean_var=True), x, ones,
                          zeros, zeros, ones, np.ones_like(x), True,
                          ['write'] * 3, [np.zeros_like(x), zeros, zeros])
    finally:
        numba.set_num_threads(before)
    np.testing.assert_allclose(outs[1], x.mean((0, 2, 3)), rtol=1e-12)
    np.testing.assert_allclose(outs[2], 1 / np.sqrt(x.var((0, 2, 3)) + 1e-12), rtol=1e-6)


@pytest.mark.parametrize('pos', [(0, 0, 0), (1, 0, 2)])
def test_inf_gives_inf_mean_like_mxnet(pos):
    """An inf in a channel makes its batch mean inf (and its variance NaN), as in
    MXNet 1.9.1, also when it sits where the shifted sums take their shift."""
    import ffnumba as ff
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x[pos] = np.inf
    s = ff.sym.BatchNorm(ff.sym.Variable('data'), name='bn', fix_gamma=False,
                         output_mean_var=True)
    exe = s.simple_bind(ff.cpu(), grad_req='null', data=x.shape)
    exe.arg_dict['data'][:] = x
    exe.arg_dict['bn_gamma'][:] = 1
    exe.arg_dict['bn_beta'][:] = 0
    exe.forward(is_train=True)
    mean, invstd = exe.outputs[1].asnumpy(), exe.outputs[2].asnumpy()
    assert np.isposinf(mean[0]) and np.isnan(invstd[0])
    np.testing.assert_allclose(mean[1:], x[:, 1:].mean((0, 2)), rtol=1e-6)


@pytest.mark.parametrize('dtype, tol', [(np.float64, 1e-9), (np.float32, 2e-5)])
def test_rows_longer_than_one_partial_sum(dtype, tol):
    """Planes of more than ``PART_SUM`` elements are summed in several partial sums (in
    the data's dtype, added in float64): float64 matches numpy to rounding, float32 to
    float32 accuracy, forward and backward."""
    rng = np.random.default_rng(11)
    inner = 2 * bn.PART_SUM + 37
    x = (rng.standard_normal((3, 2, inner)) * 3 + 2).astype(dtype)
    og = rng.standard_normal(x.shape).astype(dtype)
    gamma, beta = rng.uniform(0.5, 2, 2).astype(dtype), rng.standard_normal(2).astype(dtype)
    mm, mv = np.zeros(2, dtype), np.ones(2, dtype)
    init = [np.zeros_like(x), np.zeros(2, dtype), np.zeros(2, dtype)]
    p = dict(fix_gamma=False, eps=1e-3, output_mean_var=True)
    outs, grads, _ = _run(p, x, gamma, beta, mm, mv, og, True, ['write'] * 3, init)
    f64 = [a.astype(np.float64) for a in (x, gamma, beta, mm, mv, og)]
    y, mean, var, dx, dgamma, dbeta = _ref(*f64[:6], 1, 1e-3, False, False, True)
    np.testing.assert_allclose(outs[0], y, rtol=tol, atol=tol)
    np.testing.assert_allclose(outs[1], mean, rtol=tol, atol=tol)
    np.testing.assert_allclose(outs[2], 1 / np.sqrt(var + 1e-3), rtol=tol, atol=tol)
    for got, want in zip(grads, (dx, dgamma, dbeta)):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_small_batch_norms_stay_on_one_thread(threads, monkeypatch):
    """With two threads a BatchNorm splits its channels only from two threads'
    :data:`~ffnumba.ops.nn.batch_norm.PAR_MIN_ELEMS` elements (below, a fork-join costs
    more than the second core saves); split or not, forward and backward give the
    one-thread values bit for bit."""
    import ffnumba as ff
    from ffnumba import thread_pool
    calls = []
    real = thread_pool.run_parallel
    monkeypatch.setattr(thread_pool, 'run_parallel',
                        lambda fn, n, pool='kernel': calls.append(n) or real(fn, n, pool))
    rng = np.random.default_rng(5)
    big = (8, 64, 32, 2 * bn.PAR_MIN_ELEMS // (8 * 64 * 32))    # 2 * PAR_MIN_ELEMS elements
    small = big[:3] + (big[3] - 1,)
    net = ff.sym.BatchNorm(ff.sym.var('data'), fix_gamma=False, name='bn')

    def run(shape):
        ex = net.simple_bind(ff.cpu(), data=shape)
        ex.arg_dict['data'][:] = rng.standard_normal(shape)
        ex.arg_dict['bn_gamma'][:] = rng.uniform(0.5, 2, shape[1])
        ex.arg_dict['bn_beta'][:] = rng.standard_normal(shape[1])
        head = ff.nd.array(rng.standard_normal(shape))
        del calls[:]
        ex.forward(is_train=True)
        ex.backward(head)
        return list(calls), [ex.outputs[0].asnumpy()] + [g.asnumpy() for g in ex.grad_arrays]
    for shape, split in ((small, []), (big, [2, 2])):
        threads(2)
        rng = np.random.default_rng(5)
        seen, two = run(shape)
        assert seen == split
        threads(1)
        rng = np.random.default_rng(5)
        _, one = run(shape)
        for a, b in zip(one, two):
            np.testing.assert_array_equal(a, b)


def test_plain_and_fused_batch_norm_share_one_kernel_pair():
    """BatchNorm alone runs the BatchNorm -> activation kernels in mode ``NONE``: the same
    compiled signature as ``BatchNorm -> relu`` (a cold ResNet-18 compiles one pair)."""
    from ffnumba.ops.nn import _bn_act, _bn_kernels
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, 5, 5)).astype(np.float32)
    gamma, beta = np.ones(3, np.float32), np.zeros(3, np.float32)
    mm, mv = np.zeros(3, np.float32), np.ones(3, np.float32)
    p = dict(axis=1, eps=1e-3, fix_gamma=False, use_global_stats=False, momentum=0.9)
    init = [np.zeros_like(x), np.zeros_like(gamma), np.zeros_like(beta)]
    _run(p, x, gamma, beta, mm, mv, np.ones_like(x), True, ['write'] * 3, init)
    sigs = (list(_bn_kernels._fwd_range.signatures), list(_bn_kernels._bwd_range.signatures))
    params = get_op('BatchNorm').parse_params(p)
    ctx = OpContext(True, None, {}, np.random.default_rng(0), 'bn')
    y, grads = np.empty_like(x), [v.copy() for v in init]
    _bn_act.forward(ctx, params, [x, gamma.copy(), beta], y, [mm.copy(), mv.copy()],
                    _bn_act.RELU, 0.0, 0.0)
    _bn_act.backward(ctx, params, np.ones_like(x), [x, gamma.copy(), beta], grads,
                     ['write'] * 3, [mm.copy(), mv.copy()], _bn_act.RELU, 0.0, 0.0)
    assert sigs[0] and sigs[1]
    assert sigs == (list(_bn_kernels._fwd_range.signatures),
                    list(_bn_kernels._bwd_range.signatures))
    assert bn._fwd_range is _bn_kernels._fwd_range and bn._bwd_range is _bn_kernels._bwd_range
