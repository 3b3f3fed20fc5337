"""Winograd F(2x2, 3x3) convolution (ffnumba/ops/nn/_winograd.py) against im2col and numpy.

float32 tolerance: the Winograd and im2col results are compared with the
float64 numpy reference at ``rtol=1e-4`` and ``atol=1e-5 * sqrt(9 C) * scale``
(a sum of ``9 C`` products of values in [-1, 1]); in float64 at 1e-10.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ffnumba.ops.nn import _winograd as wg
from ffnumba.ops.registry import OpContext, get_op
from ffnumba.testing import OpCase

from conv_reference import assert_same_results, conv_backward, conv_forward


class _Spy:
    """Counts the Winograd drivers' calls; ``force`` makes every eligible layer take them."""

    def __init__(self, monkeypatch, force=True):
        self.calls = []
        fwd, bwd = wg.forward, wg.backward
        monkeypatch.setattr(wg, 'forward', lambda *a: (self.calls.append('f'), fwd(*a))[1])
        monkeypatch.setattr(wg, 'backward', lambda *a: (self.calls.append('b'), bwd(*a))[1])
        if force:
            monkeypatch.setattr(wg, 'faster', lambda *a: True)


def _run(p, vals, head, reqs, init, dtype):
    """Forward and backward through the op's CPU kernels; gradients start at ``init``."""
    op = get_op('Convolution')
    params = op.parse_params(p)
    arrays = [v.astype(dtype) for v in vals]
    ins, outs, _ = op.infer_shape(params, [a.shape for a in arrays], [], [None])
    y = np.empty(outs[0], dtype)
    ctx = OpContext(True, None, {}, np.random.default_rng(0), 'conv')
    op.forward['cpu'](ctx, params, arrays, [y], [])
    grads = [i.astype(dtype) for i in init]
    op.backward['cpu'](ctx, params, [head.astype(dtype)], arrays, [y], grads, reqs, [])
    return y, grads


@st.composite
def _case(draw):
    n = draw(st.integers(1, 5))
    c = draw(st.integers(1, 5))
    f = draw(st.integers(1, 5))
    pad = draw(st.sampled_from([0, 1, 2]))
    lo = max(1, 3 - 2 * pad)
    h = draw(st.integers(lo, 9))
    w = draw(st.integers(lo, 9))
    no_bias = draw(st.booleans())
    reqs = [draw(st.sampled_from(['write', 'add', 'null'])) for _ in range(3)]
    threads = draw(st.sampled_from([1, 2]))
    return n, c, f, h, w, pad, no_bias, reqs, threads


def _set_threads(n):
    import numba
    before = numba.get_num_threads()
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    return before


def assert_table_runs(case, spy):
    """Every (params, shapes) pair of an OpCase table bound, run forward and backward on
    one thread: ``spy.calls`` holds one forward and one backward call each."""
    import ffnumba as ff
    before = _set_threads(1)
    try:
        for p in case.params:
            for s in case.shapes:
                spy.calls.clear()
                ex = case.make_symbol(p).simple_bind(ff.cpu(), grad_req='write', **s)
                ex.forward(is_train=True)
                ex.backward([ff.nd.ones(ex.outputs[0].shape)])
                assert spy.calls == ['f', 'b'], (p, s, spy.calls)
    finally:
        _set_threads(before)


@settings(max_examples=25, deadline=None)
@given(case=_case(), dtype=st.sampled_from(['float32', 'float64']))
def test_winograd_matches_im2col_and_reference(case, dtype):
    """Forward, data and weight gradients (write/add/null) and bias of both paths vs numpy."""
    import os
    n, c, f, h, w, pad, no_bias, reqs, threads = case
    p = dict(kernel=(3, 3), num_filter=f, pad=(pad, pad), no_bias=no_bias)
    rng = np.random.default_rng(n * 1000 + c * 100 + h * 10 + w)
    vals = [rng.uniform(-1, 1, (n, c, h, w)), rng.uniform(-1, 1, (f, c, 3, 3))]
    if not no_bias:
        vals.append(rng.uniform(-1, 1, (f,)))
        reqs = reqs[:3]
    else:
        reqs = reqs[:2]
    oh, ow = h + 2 * pad - 2, w + 2 * pad - 2
    head = rng.uniform(-1, 1, (n, f, oh, ow))
    init = [rng.uniform(-1, 1, v.shape) for v in vals]
    ref_y = conv_forward(vals[0], vals[1], vals[2] if not no_bias else None, (3, 3), (),
                         (pad, pad), (), 1)
    ref_g = conv_backward(vals[0], vals[1], head, (3, 3), (), (pad, pad), (), 1)
    scale = np.sqrt(9 * c)
    tol = (dict(rtol=1e-4, atol=1e-5 * scale) if dtype == 'float32'
           else dict(rtol=1e-10, atol=1e-12 * scale))
    mp = pytest.MonkeyPatch()
    before = _set_threads(threads)
    results = {}
    try:
        for path in ('winograd', 'im2col'):
            spy = _Spy(mp)
            mp.setenv('FFNUMBA_CONV_WINOGRAD', '1' if path == 'winograd' else '0')
            results[path] = _run(p, vals, head, reqs, init, dtype)
            want = ['f'] + (['b'] if 'write' in reqs[:2] or 'add' in reqs[:2] else [])
            assert spy.calls == (want if path == 'winograd' else []), (path, spy.calls)
            mp.undo()
    finally:
        mp.undo()
        _set_threads(before)
    assert os.environ.get('FFNUMBA_CONV_WINOGRAD') != '0'
    for path, (y, grads) in results.items():
        np.testing.assert_allclose(y, ref_y, **tol, err_msg=path)
        for i, (g, req) in enumerate(zip(grads, reqs)):
            exp = {'write': ref_g[i], 'add': ref_g[i] + init[i], 'null': init[i]}[req]
            np.testing.assert_allclose(g, exp, **tol, err_msg='%s grad %d %s' % (path, i, req))
    for a, b in zip([results['winograd'][0]] + results['winograd'][1],
                    [results['im2col'][0]] + results['im2col'][1]):
        np.testing.assert_allclose(a, b, **tol)


class TestConvolutionWinograd(OpCase):
    """Public-API checks (float64 directional gradient, grad_req add, GPU twin) on layers
    the dispatch rule sends to Winograd: 16+ channels, outputs of 4x4 and more."""
    op = 'Convolution'
    params = [dict(kernel=(3, 3), num_filter=4, pad=(1, 1)),
              dict(kernel=(3, 3), num_filter=3, no_bias=True, pad=(2, 2)),
              dict(kernel=(3, 3), num_filter=2)]
    shapes = [dict(data=(2, 16, 6, 6)), dict(data=(3, 17, 7, 8))]
    max_batch = 3

    def reference(self, p, data, weight, bias=None):
        return [conv_forward(data, weight, bias, (3, 3), (), p.get('pad', ()), (), 1)]

    def test_rule_takes_winograd(self, monkeypatch):
        """Every table case runs the Winograd drivers through an executor on one thread (on
        two, the backward of a layer padded by 2, mostly padding, splits by taps)."""
        assert_table_runs(self, _Spy(monkeypatch, force=False))


def env_case():
    """A small layer the rule sends to Winograd: ``(params, [data, weight, bias], head, zeros)``."""
    p = dict(kernel=(3, 3), num_filter=4, pad=(1, 1))
    rng = np.random.default_rng(3)
    vals = [rng.uniform(-1, 1, (2, 16, 6, 6)), rng.uniform(-1, 1, (4, 16, 3, 3)),
            rng.uniform(-1, 1, 4)]
    return p, vals, rng.uniform(-1, 1, (2, 4, 6, 6)), [np.zeros_like(v) for v in vals]


def test_env_var_turns_winograd_off(monkeypatch):
    """FFNUMBA_CONV_WINOGRAD=0 runs im2col (same numbers); unset or 1 runs Winograd."""
    spy = _Spy(monkeypatch, force=False)
    p, vals, head, init = env_case()
    monkeypatch.delenv('FFNUMBA_CONV_WINOGRAD', raising=False)
    on = _run(p, vals, head, ['write'] * 3, init, 'float64')
    assert spy.calls == ['f', 'b']
    spy.calls.clear()
    monkeypatch.setenv('FFNUMBA_CONV_WINOGRAD', '0')
    off = _run(p, vals, head, ['write'] * 3, init, 'float64')
    assert spy.calls == []
    for a, b in zip([on[0]] + on[1], [off[0]] + off[1]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize('xshape, yshape, expect', [
    ((32, 64, 32, 32), (32, 64, 32, 32), True),      # ResNet-18 stage 0
    ((32, 512, 4, 4), (32, 512, 4, 4), True),
    ((32, 3, 32, 32), (32, 64, 32, 32), False),      # 3-channel stem: im2col
    ((32, 512, 2, 2), (32, 512, 2, 2), False),       # one tile per sample: im2col
])
def test_dispatch_rule(xshape, yshape, expect):
    assert wg.faster(xshape, yshape) is expect


@pytest.mark.parametrize('n, c, f, t, a2, expect', [
    (16, 64, 192, 16, 36, 4),    # GoogLeNet 64 -> 192 on 16x16, F(4x4): 64 tiles, in cache
    (16, 64, 64, 64, 36, 1),     # ResNet 64 channels on 32x32, F(4x4): one sample is 64 tiles
    (32, 128, 256, 4, 36, 16),   # 32K-element weight: the 64 tiles of 16 samples
    (16, 256, 512, 4, 16, 16),   # 128K-element weight: 128 tiles, capped by the batch
    (64, 256, 512, 4, 16, 32),   # ... 128 tiles = 32 samples of 4
    (64, 512, 512, 4, 16, 64),   # 256K-element weight: 256 tiles (the cap)
    (64, 1024, 1024, 4, 16, 64),  # 1M-element weight: still at most 256 tiles
    (2048, 16, 16, 1, 16, 1024),  # tiny layer: 2^18 elements of V before 64 tiles
])
def test_chunk_size_rule(n, c, f, t, a2, expect):
    """Chunks hold about V_CHUNK_ELEMS elements of the larger of V and M and at least
    F * C / 1024 tiles, kept within MIN_TILES..MAX_TILES, never more than the batch."""
    assert wg.chunk_size(n, c, f, t, a2) == expect


def test_float32_error_like_im2col():
    """On a real layer size (ResNet stage 0, 64 channels at 32x32) F(2x2, 3x3) in float32 is
    within 2x of im2col's float32 error against float64."""
    import os
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 64, 16, 16))
    w = rng.standard_normal((32, 64, 3, 3)) / 24
    y64 = np.empty((2, 32, 16, 16))
    wg.forward(None, x, w, None, y64, (1, 1))
    errs = {}
    for path in ('winograd', 'im2col'):
        old = os.environ.get('FFNUMBA_CONV_WINOGRAD')
        os.environ['FFNUMBA_CONV_WINOGRAD'] = '2' if path == 'winograd' else '0'
        try:
            y, _ = _run(dict(kernel=(3, 3), num_filter=32, pad=(1, 1), no_bias=True),
                        [x, w], np.zeros(y64.shape), ['null', 'null'], [x, w], 'float32')
        finally:
            if old is None:
                del os.environ['FFNUMBA_CONV_WINOGRAD']
            else:
                os.environ['FFNUMBA_CONV_WINOGRAD'] = old
        errs[path] = np.abs(y - y64).max() / np.abs(y64).max()
    assert errs['winograd'] < max(2 * errs['im2col'], 1e-6), errs


def test_float16_computes_in_float32(monkeypatch):
    """float16 data runs the Winograd kernels in float32 (cast at the edges) like im2col."""
    spy = _Spy(monkeypatch, force=False)
    p = dict(kernel=(3, 3), num_filter=4, pad=(1, 1))
    rng = np.random.default_rng(4)
    vals = [rng.uniform(-1, 1, (2, 16, 5, 4)), rng.uniform(-1, 1, (4, 16, 3, 3)),
            rng.uniform(-1, 1, 4)]
    vals = [v.astype(np.float16).astype(np.float64) for v in vals]
    head = rng.uniform(-1, 1, (2, 4, 5, 4)).astype(np.float16).astype(np.float64)
    y, grads = _run(p, vals, head, ['write'] * 3, [np.zeros_like(v) for v in vals], 'float16')
    assert spy.calls == ['f', 'b'] and y.dtype == np.float16
    np.testing.assert_allclose(y, conv_forward(vals[0], vals[1], vals[2], (3, 3), (), (1, 1),
                                               (), 1), rtol=1e-2, atol=2e-2)
    exp = conv_backward(vals[0], vals[1], head, (3, 3), (), (1, 1), (), 1)
    for g, e in zip(grads, exp):
        np.testing.assert_allclose(g, e, rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize('where', ['data', 'weight', 'head'])
@pytest.mark.parametrize('value', [np.inf, -np.inf, np.nan])
def test_non_finite_values_as_im2col(monkeypatch, where, value):
    """An inf or NaN in the data, the weight or the head gradient gives the output and
    gradients im2col gives, value for value: the transforms would turn ``inf - inf``
    into NaN and spread one value over a whole tile, so such calls run im2col."""
    p = dict(kernel=(3, 3), num_filter=4, pad=(1, 1))
    rng = np.random.default_rng(6)
    vals = [rng.uniform(-1, 1, (2, 16, 8, 8)), rng.uniform(-1, 1, (4, 16, 3, 3)),
            rng.uniform(-1, 1, 4)]
    head = rng.uniform(-1, 1, (2, 4, 8, 8))
    if where == 'data':
        vals[0][1, 3, 4, 4] = value
    elif where == 'weight':
        vals[1][2, 5, 0, 1] = value
    else:
        head[0, 1, 3, 3] = value
    init = [np.zeros_like(v) for v in vals]
    monkeypatch.setenv('FFNUMBA_CONV_WINOGRAD', '1')
    on = _run(p, vals, head, ['write'] * 3, init, 'float32')
    monkeypatch.setenv('FFNUMBA_CONV_WINOGRAD', '0')
    off = _run(p, vals, head, ['write'] * 3, init, 'float32')
    assert_same_results(on, off)


def test_finite_inputs_keep_winograd(monkeypatch):
    """Finite data of any size (including float32's largest values) still takes Winograd."""
    spy = _Spy(monkeypatch, force=False)
    big = np.full((2, 16, 6, 6), np.finfo(np.float32).max, np.float32)
    assert wg.all_finite(big, big[:, :1]) and not wg.all_finite(big, np.array([np.nan]))
    p = dict(kernel=(3, 3), num_filter=4, pad=(1, 1))
    vals = [np.ones((2, 16, 6, 6)), np.ones((4, 16, 3, 3)), np.ones(4)]
    _run(p, vals, np.ones((2, 4, 6, 6)), ['write'] * 3, [np.zeros_like(v) for v in vals],
         'float32')
    assert spy.calls == ['f', 'b']


@pytest.mark.parametrize('threads', [1, 2])
@pytest.mark.parametrize('reqs', [['write', 'write'], ['add', 'add'], ['null', 'write'],
                                  ['write', 'null'], ['add', 'write']])
def test_several_chunks_per_thread(monkeypatch, threads, reqs):
    """Chunks of one sample (five per call, split over threads): the weight gradient
    written by the first chunk and added by the others, the padded plane re-zeroed
    between chunks, against the numpy reference in float64."""
    monkeypatch.setattr(wg, 'V_CHUNK_ELEMS', 1)
    monkeypatch.setattr(wg, 'MIN_TILES', 1)
    spy = _Spy(monkeypatch)
    assert wg.chunk_size(5, 3, 2, 9) == 1
    rng = np.random.default_rng(9)
    vals = [rng.uniform(-1, 1, (5, 3, 5, 6)), rng.uniform(-1, 1, (2, 3, 3, 3))]
    head = rng.uniform(-1, 1, (5, 2, 5, 6))
    init = [rng.uniform(-1, 1, v.shape) for v in vals]
    before = _set_threads(threads)
    try:
        y, grads = _run(dict(kernel=(3, 3), num_filter=2, pad=(1, 1), no_bias=True), vals,
                        head, reqs, init, 'float64')
    finally:
        _set_threads(before)
    assert spy.calls == ['f', 'b']
    np.testing.assert_allclose(y, conv_forward(vals[0], vals[1], None, (3, 3), (), (1, 1),
                                               (), 1), rtol=1e-10, atol=1e-12)
    ref = conv_backward(vals[0], vals[1], head, (3, 3), (), (1, 1), (), 1)
    for g, r, i0, req in zip(grads, ref, init, reqs):
        want = {'write': r, 'add': r + i0, 'null': i0}[req]
        np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-12)
