"""Max pooling that keeps the forward's maximum positions (ffnumba/ops/nn/_pool_argmax.py).

The kept-positions backward must give the bits of the scanning backward (the same
first strict maximum, the same order of additions), through the operator and an
executor; positions are dropped by an evaluation forward and never used for other
shapes.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ffnumba as ff
from ffnumba.ops.nn import _pool2d, _pool_argmax as pa
from ffnumba.ops.registry import OpContext, get_op

from test_winograd import _set_threads


def _op_run(p, x, head, req, init, same_ctx, is_train=True):
    """Forward then backward through the op's CPU kernels; ``same_ctx``: one node state
    for both (as an executor), else a fresh one for the backward (it scans)."""
    op = get_op('Pooling')
    params = op.parse_params(p)
    _, outs, _ = op.infer_shape(params, [x.shape], [], [None])
    y = np.empty(outs[0], x.dtype)
    ctx = OpContext(is_train, None, {}, np.random.default_rng(0), 'pool')
    op.forward['cpu'](ctx, params, [x], [y], [])
    kept = pa.STATE_KEY in ctx.state
    bctx = ctx if same_ctx else OpContext(True, None, {}, np.random.default_rng(0), 'pool')
    dx = init.copy()
    op.backward['cpu'](bctx, params, [head], [x], [y], [dx], [req], [])
    return y, dx, kept


class _Spy:
    def __init__(self, monkeypatch):
        self.calls = []
        for mod, name in ((pa, 'scatter_arg'), (pa, 'max_fwd_arg'), (_pool2d, 'max_bwd')):
            real = getattr(mod, name)
            monkeypatch.setattr(mod, name, lambda *a, real=real, name=name:
                                (self.calls.append(name), real(*a))[1])


@st.composite
def _case(draw):
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pad = (draw(st.integers(0, min(1, k[0] - 1))), draw(st.integers(0, min(1, k[1] - 1))))
    h, w = draw(st.integers(k[0], 12)), draw(st.integers(k[1], 12))
    return dict(shape=(draw(st.integers(1, 4)), draw(st.integers(1, 6)), h, w),
                p=dict(kernel=k, stride=s, pad=pad, pool_type='max',
                       pooling_convention=draw(st.sampled_from(['valid', 'full']))),
                req=draw(st.sampled_from(['write', 'add'])),
                threads=draw(st.sampled_from([1, 2])),
                special=draw(st.sampled_from([None, np.nan, -np.inf, 0.0])))


@settings(max_examples=60, deadline=None)
@given(case=_case(), dtype=st.sampled_from(['float32', 'float64']), seed=st.integers(0, 999))
def test_kept_positions_give_the_scanning_results(case, dtype, seed):
    """Small integers (ties everywhere), NaN, -inf or signed zeros planted; every window
    geometry the scanning backward takes, 1 or 2 threads: outputs and gradients (write
    and add) bitwise those of the scanning path."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, case['shape']).astype(dtype)
    if case['special'] is not None:
        x[rng.random(x.shape) < 0.3] = case['special']
        if case['special'] == 0.0:
            x[rng.random(x.shape) < 0.3] = -0.0
    p = case['p']
    op = get_op('Pooling')
    _, outs, _ = op.infer_shape(op.parse_params(p), [x.shape], [], [None])
    head = rng.uniform(-1, 1, outs[0]).astype(dtype)
    init = rng.uniform(-1, 1, x.shape).astype(dtype)
    before = _set_threads(case['threads'])
    try:
        y, dx, kept = _op_run(p, x, head, case['req'], init, True)
        y0, dx0, _ = _op_run(p, x, head, case['req'], init, False)
    finally:
        _set_threads(before)
    same_plane = all(k == 2 * q + 1 for k, q in zip(p['kernel'], p['pad'])) and \
        p['stride'] == (1, 1)
    assert kept == (not same_plane)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(np.signbit(y), np.signbit(y0))
    np.testing.assert_array_equal(dx, dx0)


def test_googlenet_pools_keep_positions(monkeypatch):
    """GoogLeNet's 3x3 stride-2 pools (64x64 input) take the kept positions both ways;
    stride-1 same-plane ones keep their own kernels."""
    spy = _Spy(monkeypatch)
    rng = np.random.default_rng(1)
    for shape, stride in (((2, 8, 32, 32), 2), ((2, 8, 8, 8), 2), ((2, 8, 4, 4), 2),
                          ((2, 8, 4, 4), 1)):
        p = dict(kernel=(3, 3), stride=(stride, stride), pad=(1, 1), pool_type='max')
        x = rng.standard_normal(shape)
        op = get_op('Pooling')
        _, outs, _ = op.infer_shape(op.parse_params(p), [x.shape], [], [None])
        spy.calls.clear()
        _op_run(p, x, np.ones(outs[0]), 'write', np.zeros_like(x), True)
        want = ['max_fwd_arg', 'scatter_arg'] if stride == 2 else []
        assert spy.calls == want, (shape, stride)


def test_evaluation_forward_drops_the_positions(monkeypatch):
    """An ``is_train=False`` forward keeps nothing, and drops what a training forward
    kept: a backward after it scans."""
    spy = _Spy(monkeypatch)
    p = dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='max')
    params = get_op('Pooling').parse_params(p)
    x = np.random.default_rng(2).standard_normal((2, 3, 8, 8))
    y, dx = np.empty((2, 3, 4, 4)), np.zeros_like(x)
    ctx = OpContext(True, None, {}, None, 'pool')
    fwd, bwd = get_op('Pooling').compute('cpu')
    fwd(ctx, params, [x], [y], [])
    assert pa.STATE_KEY in ctx.state
    ctx.is_train = False
    fwd(ctx, params, [x], [y], [])
    assert pa.STATE_KEY not in ctx.state
    spy.calls.clear()
    bwd(ctx, params, [np.ones_like(y)], [x], [y], [dx], ['write'], [])
    assert spy.calls == ['max_bwd']


def test_other_shapes_never_use_the_positions(monkeypatch):
    """Positions kept for one input shape are not used for another (a backward called
    with other arrays than the forward's): it scans."""
    spy = _Spy(monkeypatch)
    p = dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='max')
    params = get_op('Pooling').parse_params(p)
    fwd, bwd = get_op('Pooling').compute('cpu')
    ctx = OpContext(True, None, {}, None, 'pool')
    x = np.random.default_rng(3).standard_normal((2, 3, 8, 8))
    fwd(ctx, params, [x], [np.empty((2, 3, 4, 4))], [])
    x2 = np.random.default_rng(4).standard_normal((2, 3, 10, 10))
    y2 = np.empty((2, 3, 5, 5))
    fwd(OpContext(True, None, {}, None, 'p'), params, [x2], [y2], [])
    spy.calls.clear()
    dx2 = np.zeros_like(x2)
    bwd(ctx, params, [np.ones_like(y2)], [x2], [y2], [dx2], ['write'], [])
    assert spy.calls == ['max_bwd']
    assert dx2.sum() == y2.size


@pytest.mark.parametrize('threads', [1, 2])
def test_executor_training_steps(monkeypatch, threads):
    """Three SGD steps of a conv -> 3x3/2 max pool net: bitwise the general kernels'
    (``_pool2d.ENABLED = False``: no kept positions, the offset-table forward and the
    scanning backward), on one and two threads."""
    x = ff.sym.Variable('data')
    net = ff.sym.Pooling(ff.sym.Convolution(x, kernel=(3, 3), num_filter=4, pad=(1, 1),
                                            name='c'),
                         kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='max')
    net = ff.sym.MakeLoss(ff.sym.sum(net * net))
    results = []
    before = _set_threads(threads)
    try:
        for enabled in (True, False):
            monkeypatch.setattr(_pool2d, 'ENABLED', enabled)
            ex = net.simple_bind(ff.cpu(), data=(3, 2, 9, 9))
            rng = np.random.default_rng(5)
            for a in ex.arg_arrays:
                a[:] = rng.integers(-2, 3, a.shape)      # ties in the pooled values
            rec = []
            for _ in range(3):
                ex.forward(is_train=True)
                ex.backward()
                rec += [g.asnumpy().copy() for g in ex.grad_arrays]
                for name in ('c_weight', 'c_bias'):
                    ex.arg_dict[name][:] = ex.arg_dict[name].asnumpy() - \
                        0.01 * ex.grad_dict[name].asnumpy()
            results.append(rec)
    finally:
        _set_threads(before)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_compile_ahead_child_compiles_the_kept_positions_backward(monkeypatch):
    """The cold start's child runs a Pooling forward before its backward record, so it
    compiles the backward the parent runs (the scatter), not the scan."""
    from ffnumba import _compile_ahead
    spy = _Spy(monkeypatch)
    p = get_op('Pooling').parse_params(dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                                            pool_type='max'))
    f32 = np.dtype('float32').str
    x, y = [((2, 3, 8, 8), f32)], [((2, 3, 4, 4), f32)]
    _compile_ahead._run_node(('b', 'Pooling', p, y, x, y, x, ['write'], []),
                             np.random.default_rng(0))
    assert spy.calls == ['max_fwd_arg', 'scatter_arg']
