"""Depthwise convolution kernels (_depthwise.py) against the generic grouped im2col path.

Each case runs the Convolution op twice on the same float64 data: once through the
direct depthwise kernels and once with ``cpu_depthwise`` switched off (im2col + one
GEMM per group), and compares the output and the data, weight and bias gradients
under grad_req write, add and null, on one and two numba threads.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ffnumba.ops.nn import _depthwise as dwc
from ffnumba.ops.nn import _depthwise_flat as dfl
from ffnumba.ops.registry import OpContext, get_op

from conv_reference import conv_backward, conv_forward


def _conv(p, vals, head, reqs, init):
    op = get_op('Convolution')
    params = op.parse_params(p)
    ins, outs, _ = op.infer_shape(params, [v.shape for v in vals], [], [None])
    y = np.full(outs[0], np.nan)
    ctx = OpContext(True, None, {}, np.random.default_rng(0), 'dw')
    op.forward['cpu'](ctx, params, vals, [y], [])
    grads = [g.copy() for g in init]
    op.backward['cpu'](ctx, params, [head], vals, [y], grads, reqs, [])
    return y, grads


def _both(p, vals, head, reqs, init):
    """``(direct, generic)`` results; checks that the direct kernels really ran."""
    calls = []
    real = dwc.forward

    def spy(*a):
        calls.append(1)
        return real(*a)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(dwc, 'forward', spy)
        direct = _conv(p, vals, head, reqs, init)
    assert calls, 'the depthwise kernels did not run'
    with pytest.MonkeyPatch.context() as m:
        m.setattr(dwc, 'cpu_depthwise', lambda p, shape: False)
        generic = _conv(p, vals, head, reqs, init)
    return direct, generic


@st.composite
def _case(draw):
    nd = draw(st.sampled_from([1, 2, 2, 2]))
    k = draw(st.sampled_from([3, 5]))
    stride = draw(st.sampled_from([1, 2]))
    pad = draw(st.integers(0, k // 2 + 1))
    dil = draw(st.sampled_from([1, 1, 2]))
    span = dil * (k - 1) + 1
    spatial = tuple(draw(st.integers(max(1, span - 2 * pad), span + 8)) for _ in range(nd))
    c = draw(st.integers(2, 5))     # one channel is an ordinary convolution
    mult = draw(st.sampled_from([1, 1, 2]))
    n = draw(st.integers(1, 5))
    p = dict(kernel=(k,) * nd, stride=(stride,) * nd, pad=(pad,) * nd, dilate=(dil,) * nd,
             num_filter=c * mult, num_group=c, no_bias=draw(st.booleans()))
    reqs = [draw(st.sampled_from(['write', 'add', 'null'])) for _ in range(3)]
    return p, (n, c) + spatial, reqs


def _check(p, dshape, reqs, seed):
    rng = np.random.default_rng(seed)
    op = get_op('Convolution')
    params = op.parse_params(p)
    n_args = len(op.list_arguments(params))
    ins, outs, _ = op.infer_shape(params, [dshape] + [None] * (n_args - 1), [], [None])
    vals = [rng.uniform(-1, 1, s) for s in ins]
    head = rng.uniform(-1, 1, outs[0])
    init = [rng.uniform(-1, 1, s) for s in ins]
    (y, g), (y0, g0) = _both(p, vals, head, reqs[:n_args], init)
    np.testing.assert_allclose(y, y0, rtol=1e-11, atol=1e-12)
    for a, b in zip(g, g0):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize('threads', [1, 2])
@pytest.mark.parametrize('cl_max', [dwc.CL_MAX_POSITIONS, 0, 10 ** 6])
@settings(max_examples=20, deadline=None)
@given(case=_case(), seed=st.integers(0, 2 ** 16))
def test_depthwise_matches_grouped_im2col(threads, cl_max, case, seed):
    """Both direct kernels (channels-last for small planes, phase-major planes), on
    hypothesis-drawn shapes, strides 1/2, pads, kernels 3 and 5, multipliers 1 and 2,
    batch sizes not divisible by the thread count, grad_req write/add/null."""
    import numba
    if threads > numba.config.NUMBA_NUM_THREADS:
        pytest.skip('numba was started with fewer threads')
    p, dshape, reqs = case
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(dwc, 'CL_MAX_POSITIONS', cl_max)
            _check(p, dshape, reqs, seed)
    finally:
        numba.set_num_threads(before)


@pytest.mark.parametrize('threads', [1, 2])
@pytest.mark.parametrize('dshape, p', [
    ((5, 32, 12, 12), dict(kernel=(3, 3), pad=(1, 1), stride=(1, 1))),
    ((5, 24, 11, 12), dict(kernel=(3, 3), pad=(1, 1), stride=(2, 2))),
    ((3, 40, 4, 4), dict(kernel=(3, 3), pad=(1, 1), stride=(1, 1))),
    ((3, 16, 2, 2), dict(kernel=(3, 3), pad=(1, 1), stride=(1, 1))),
    ((3, 8, 9, 9), dict(kernel=(5, 5), pad=(2, 2), stride=(2, 2))),
    # channels-last with tiled transposes: 40 channels (32 + 8), 225 input positions
    ((2, 40, 15, 15), dict(kernel=(3, 3), pad=(1, 1), stride=(2, 2))),
    # phase-major planes at stride 2 on even widths (columns split in one pass), pads 1, 2
    ((2, 8, 18, 20), dict(kernel=(3, 3), pad=(1, 1), stride=(2, 2))),
    ((2, 6, 20, 22), dict(kernel=(5, 5), pad=(2, 2), stride=(2, 2))),
    # 3x3 data gradients at stride 2 row by row (_dx_s2): MobileNet's 32x32, pad 0 on odd
    # widths (no column split), pad 2
    ((2, 8, 32, 32), dict(kernel=(3, 3), pad=(1, 1), stride=(2, 2))),
    ((2, 4, 19, 21), dict(kernel=(3, 3), pad=(0, 0), stride=(2, 2))),
    ((2, 4, 20, 17), dict(kernel=(3, 3), pad=(2, 2), stride=(2, 2))),
    # flat stride-1 kernel (_depthwise_flat): 8x8, 4x4 and a non-square 4x6 plane
    ((3, 24, 8, 8), dict(kernel=(3, 3), pad=(1, 1), stride=(1, 1))),
    ((2, 5, 4, 6), dict(kernel=(3, 3), pad=(1, 1), stride=(1, 1))),
])
def test_mobilenet_shapes_against_numpy(threads, dshape, p):
    """MobileNet-like layers (the kinds ``_kind`` picks for them) against the numpy
    reference of conv_reference.py, forward and every gradient."""
    import numba
    if threads > numba.config.NUMBA_NUM_THREADS:
        pytest.skip('numba was started with fewer threads')
    c = dshape[1]
    p = dict(p, num_filter=c, num_group=c)
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, dshape)
    w = rng.uniform(-1, 1, (c, 1) + p['kernel'])
    b = rng.uniform(-1, 1, c)
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        op = get_op('Convolution')
        params = op.parse_params(p)
        out = op.infer_shape(params, [x.shape, None, None], [], [None])[1][0]
        head = rng.uniform(-1, 1, out)
        y, g = _conv(p, [x, w, b], head, ['write'] * 3, [np.zeros_like(v) for v in (x, w, b)])
    finally:
        numba.set_num_threads(before)
    ref = conv_forward(x, w, b, p['kernel'], p['stride'], p['pad'], (), c)
    np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-12)
    exp = conv_backward(x, w, head, p['kernel'], p['stride'], p['pad'], (), c)
    for got, want in zip(g, exp):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-11)


def test_float32_close_to_float64():
    """float32 runs accumulate in float32 rows; they stay within float32 rounding."""
    p = dict(kernel=(3, 3), pad=(1, 1), num_filter=16, num_group=16)
    rng = np.random.default_rng(2)
    vals = [rng.uniform(-1, 1, s) for s in ((4, 16, 20, 20), (16, 1, 3, 3), (16,))]
    head = rng.uniform(-1, 1, (4, 16, 20, 20))
    y64, g64 = _conv(p, vals, head, ['write'] * 3, [np.zeros_like(v) for v in vals])
    v32 = [v.astype(np.float32) for v in vals]
    y32, g32 = _conv(p, v32, head.astype(np.float32), ['write'] * 3,
                     [np.zeros_like(v) for v in v32])
    np.testing.assert_allclose(y32, y64, rtol=1e-4, atol=1e-5)
    for a, b in zip(g32, g64):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-4)


@pytest.mark.parametrize('dshape', [(2, 4, 4, 4), (2, 4, 12, 12), (2, 4, 3, 4, 4), (2, 4, 9)])
@pytest.mark.parametrize('value', [np.nan, np.inf, -np.inf])
def test_non_finite_data_as_im2col(dshape, value):
    """A NaN or inf in the data reaches the same outputs and gradients as through
    im2col (channels-last, planes, 3-D and 1-D kernels)."""
    rng = np.random.default_rng(2)
    nd = len(dshape) - 2
    x = rng.uniform(-1, 1, dshape)
    x[(1, 2) + (1,) * nd] = value
    w = rng.uniform(-1, 1, (4, 1) + (3,) * nd)
    p = dict(kernel=(3,) * nd, pad=(1,) * nd, num_filter=4, num_group=4, no_bias=True)
    (y, g), (y0, g0) = _both(p, [x, w], rng.uniform(-1, 1, dshape), ['write', 'write'],
                             [np.zeros_like(x), np.zeros_like(w)])
    for a, b in zip([y] + g, [y0] + g0):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        np.testing.assert_array_equal(np.isinf(a), np.isinf(b))
        ok = np.isfinite(b)
        np.testing.assert_allclose(a[ok], b[ok], rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize('dshape, dilate, pad, stride', [
    ((3, 24, 8, 8), 1, 1, 1), ((2, 5, 4, 6), 1, 1, 1), ((2, 7, 6, 6), 2, 2, 1),
    ((2, 3, 5, 5), 1, 1, 1),
    # stride 2 on even planes: the four phase planes
    ((3, 24, 16, 16), 1, 1, 2), ((2, 5, 8, 12), 1, 1, 2), ((2, 4, 6, 6), 1, 1, 2)])
def test_flat_kernel_runs_and_matches_numpy(dshape, dilate, pad, stride):
    """The flat 3x3 forward (``_depthwise_flat.flat_fwd``) really runs on output planes
    of 16..64 positions (stride 1 'same', also dilated, and stride 2 pad 1 on even
    planes) and matches the numpy reference, with a NaN in the data reaching only the
    outputs whose window holds it (as im2col)."""
    c = dshape[1]
    p = dict(kernel=(3, 3), pad=(pad, pad), stride=(stride, stride), dilate=(dilate, dilate),
             num_filter=c, num_group=c)
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, dshape)
    x[0, 1, 2, 3] = np.nan
    w = rng.uniform(-1, 1, (c, 1, 3, 3))
    b = rng.uniform(-1, 1, c)
    calls = []
    real = dfl.flat_fwd

    def spy(*a):
        calls.append(1)
        return real(*a)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(dfl, 'flat_fwd', spy)
        y, _ = _conv(p, [x, w, b], np.zeros(ref_shape(dshape, stride)), ['null'] * 3,
                     [np.zeros_like(v) for v in (x, w, b)])
    assert bool(calls) == (dshape[2] * dshape[3] >= dfl.FLAT_MIN_POSITIONS * stride ** 2)
    ref = conv_forward(x, w, b, (3, 3), (stride, stride), (pad, pad), (dilate, dilate), c)
    np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-12)
    assert np.array_equal(np.isnan(y), np.isnan(ref))


def ref_shape(dshape, stride):
    """The output shape of a 3x3 pad-1 (or 'same' dilated) layer of ``stride``."""
    return dshape[:2] + tuple(-(-d // stride) for d in dshape[2:])


@pytest.mark.parametrize('dshape, stride', [((3, 37, 2, 2), 1), ((2, 19, 4, 4), 2)])
@pytest.mark.parametrize('bias', [True, False])
def test_tiny_kernel_runs_and_matches_numpy(dshape, stride, bias):
    """2x2 outputs of 2x2 (stride 1) and 4x4 (stride 2) planes run
    ``_depthwise_flat.tiny_fwd`` and match the numpy reference."""
    c = dshape[1]
    p = dict(kernel=(3, 3), pad=(1, 1), stride=(stride, stride), num_filter=c, num_group=c,
             no_bias=not bias)
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, dshape)
    w = rng.uniform(-1, 1, (c, 1, 3, 3))
    b = rng.uniform(-1, 1, c)
    vals = [x, w, b] if bias else [x, w]
    calls = []
    real = dfl.tiny_fwd

    def spy(*a):
        calls.append(1)
        return real(*a)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(dfl, 'tiny_fwd', spy)
        y, _ = _conv(p, vals, np.zeros(dshape[:2] + (2, 2)), ['null'] * len(vals),
                     [np.zeros_like(v) for v in vals])
    assert calls
    ref = conv_forward(x, w, b if bias else None, (3, 3), (stride, stride), (1, 1), (), c)
    np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-12)
