"""Winograd F(4x4, 3x3) convolution (ffnumba/ops/nn/_winograd4.py, run by _winograd's drivers).

Each test checks that the F(4x4, 3x3) drivers ran (the tile ``m = 4`` the
spy records), so it fails if the path were not taken. float32 tolerance:
``rtol=1e-4``, ``atol=4e-5 * sqrt(9 C)`` (F(4x4, 3x3)'s float32 error is
3-7x im2col's, see ``_winograd4``); float64 at 1e-10.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ffnumba.ops.nn import _winograd as wg
from ffnumba.ops.nn import _winograd4 as w4

from conv_reference import assert_same_results, conv_backward, conv_forward
from test_winograd import _run, _set_threads, env_case


class _TileSpy:
    """Records the tile ``m`` of every Winograd driver call (``('f', m)`` / ``('b', m)``)."""

    def __init__(self, monkeypatch, force=True):
        self.calls = []
        fwd, bwd = wg.forward, wg.backward

        def f(*a):
            self.calls.append(('f', a[6] if len(a) > 6 else 2))
            return fwd(*a)

        def b(*a):
            self.calls.append(('b', a[9] if len(a) > 9 else 2))
            return bwd(*a)
        monkeypatch.setattr(wg, 'forward', f)
        monkeypatch.setattr(wg, 'backward', b)
        if force:
            monkeypatch.setattr(wg, 'faster', lambda *a: True)


def _check(n, c, f, h, w, pad, no_bias, reqs, dtype, monkeypatch, threads=1, seed=0):
    """F(4x4, 3x3) forced: forward and gradients (write/add/null) against float64 numpy."""
    p = dict(kernel=(3, 3), num_filter=f, pad=(pad, pad), no_bias=no_bias)
    rng = np.random.default_rng(seed)
    vals = [rng.uniform(-1, 1, (n, c, h, w)), rng.uniform(-1, 1, (f, c, 3, 3))]
    if not no_bias:
        vals.append(rng.uniform(-1, 1, (f,)))
    reqs = reqs[:len(vals)]
    head = rng.uniform(-1, 1, (n, f, h + 2 * pad - 2, w + 2 * pad - 2))
    init = [rng.uniform(-1, 1, v.shape) for v in vals]
    spy = _TileSpy(monkeypatch)
    monkeypatch.setenv('FFNUMBA_CONV_WINOGRAD', '4')
    before = _set_threads(threads)
    try:
        y, grads = _run(p, vals, head, reqs, init, dtype)
    finally:
        _set_threads(before)
    want = [('f', 4)] + ([('b', 4)] if {'write', 'add'} & set(reqs[:2]) else [])
    assert spy.calls == want, spy.calls
    scale = np.sqrt(9 * c)
    tol = (dict(rtol=1e-4, atol=4e-5 * scale) if dtype == 'float32'
           else dict(rtol=1e-10, atol=1e-12 * scale))
    ref_y = conv_forward(vals[0], vals[1], None if no_bias else vals[2], (3, 3), (),
                         (pad, pad), (), 1)
    np.testing.assert_allclose(y, ref_y, **tol)
    ref_g = conv_backward(vals[0], vals[1], head, (3, 3), (), (pad, pad), (), 1)
    for i, (g, req) in enumerate(zip(grads, reqs)):
        exp = {'write': ref_g[i], 'add': ref_g[i] + init[i], 'null': init[i]}[req]
        np.testing.assert_allclose(g, exp, **tol, err_msg='grad %d %s' % (i, req))


@pytest.mark.parametrize('n, c, f, h, w, pad', [
    (1, 3, 2, 3, 3, 0),         # one 1x1 output: one partial tile
    (2, 5, 3, 9, 7, 1),         # 9x7 output: partial tiles on both edges
    (3, 4, 4, 11, 6, 0),        # 9x4
    (1, 2, 3, 8, 8, 1),         # whole tiles
    (5, 3, 2, 6, 13, 2),        # pad 2
])
@pytest.mark.parametrize('dtype', ['float64', 'float32'])
def test_f43_matches_reference(monkeypatch, n, c, f, h, w, pad, dtype):
    _check(n, c, f, h, w, pad, False, ['write'] * 3, dtype, monkeypatch)


@pytest.mark.parametrize('reqs', [['add', 'add', 'add'], ['null', 'write', 'add'],
                                  ['write', 'null', 'null'], ['add', 'write', 'write']])
@pytest.mark.parametrize('threads', [1, 2])
def test_f43_grad_req(monkeypatch, reqs, threads):
    _check(4, 3, 5, 7, 10, 1, False, reqs, 'float64', monkeypatch, threads, seed=1)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 4), c=st.integers(1, 4), f=st.integers(1, 4),
       pad=st.sampled_from([0, 1, 2]), h=st.integers(0, 9), w=st.integers(0, 9),
       no_bias=st.booleans(), threads=st.sampled_from([1, 2]),
       reqs=st.lists(st.sampled_from(['write', 'add', 'null']), min_size=3, max_size=3))
def test_f43_drawn_shapes(n, c, f, pad, h, w, no_bias, threads, reqs):
    lo = max(1, 3 - 2 * pad)
    mp = pytest.MonkeyPatch()
    try:
        _check(n, c, f, max(lo, h), max(lo, w), pad, no_bias, reqs, 'float64', mp, threads,
               seed=n * 100 + h * 10 + w)
    finally:
        mp.undo()


@pytest.mark.parametrize('threads', [1, 2])
def test_f43_several_chunks(monkeypatch, threads):
    """Chunks of one sample: dU written by the first chunk, added by the others."""
    monkeypatch.setattr(wg, 'V_CHUNK_ELEMS', 1)
    monkeypatch.setattr(wg, 'MIN_TILES', 1)
    assert wg.chunk_size(5, 3, 2, 4, 36) == 1
    for reqs in (['write', 'write'], ['add', 'add'], ['null', 'write'], ['write', 'null']):
        _check(5, 3, 2, 7, 9, 1, True, reqs, 'float64', monkeypatch, threads, seed=2)
        monkeypatch.undo()
        monkeypatch.setattr(wg, 'V_CHUNK_ELEMS', 1)
        monkeypatch.setattr(wg, 'MIN_TILES', 1)


def test_env_var_picks_the_tile(monkeypatch):
    """FFNUMBA_CONV_WINOGRAD: 2 runs F(2x2, 3x3), 4 runs F(4x4, 3x3), 0 im2col; same numbers."""
    spy = _TileSpy(monkeypatch, force=False)
    p, vals, head, init = env_case()
    out = {}
    for env, want in (('2', [('f', 2), ('b', 2)]), ('4', [('f', 4), ('b', 4)]), ('0', [])):
        spy.calls.clear()
        monkeypatch.setenv('FFNUMBA_CONV_WINOGRAD', env)
        out[env] = _run(p, vals, head, ['write'] * 3, init, 'float64')
        assert spy.calls == want, (env, spy.calls)
    for env in ('2', '4'):
        for a, b in zip([out[env][0]] + out[env][1], [out['0'][0]] + out['0'][1]):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize('where', ['data', 'weight', 'head'])
@pytest.mark.parametrize('value', [np.inf, np.nan])
def test_non_finite_values_as_im2col(monkeypatch, where, value):
    """With F(4x4, 3x3) asked for, an inf or NaN anywhere gives im2col's results (im2col runs)."""
    p = dict(kernel=(3, 3), num_filter=4, pad=(1, 1))
    rng = np.random.default_rng(6)
    vals = [rng.uniform(-1, 1, (2, 16, 8, 8)), rng.uniform(-1, 1, (4, 16, 3, 3)),
            rng.uniform(-1, 1, 4)]
    head = rng.uniform(-1, 1, (2, 4, 8, 8))
    {'data': vals[0][1, 3], 'weight': vals[1][2, 5], 'head': head[0, 1]}[where][1, 1] = value
    init = [np.zeros_like(v) for v in vals]
    spy = _TileSpy(monkeypatch)
    monkeypatch.setenv('FFNUMBA_CONV_WINOGRAD', '4')
    on = _run(p, vals, head, ['write'] * 3, init, 'float32')
    assert ('f', 4) not in spy.calls or where == 'head'
    assert ('b', 4) not in spy.calls
    monkeypatch.setenv('FFNUMBA_CONV_WINOGRAD', '0')
    off = _run(p, vals, head, ['write'] * 3, init, 'float32')
    assert_same_results(on, off)


@pytest.mark.parametrize('xshape, nf, expect', [
    ((32, 64, 32, 32), 8, [('f', 4), ('b', 4)]),     # ResNet-18 stage 0: F(4x4, 3x3) both ways
    ((4, 128, 16, 16), 8, [('f', 4), ('b', 4)]),     # stage 1
    ((4, 16, 8, 8), 256, [('f', 4), ('b', 4)]),      # 256 output channels: still F(4x4, 3x3)
    ((4, 16, 8, 8), 264, [('f', 4), ('b', 2)]),      # more: the backward's error rule
    ((4, 256, 8, 8), 8, [('f', 2), ('b', 2)]),       # 256 input channels: the forward error rule
    ((4, 16, 8, 8), 8, [('f', 4), ('b', 4)]),        # 8x8 output, <= 128 channels: F(4x4)
    ((4, 16, 4, 4), 8, [('f', 2), ('b', 2)]),        # 4x4 output: not faster
    ((4, 3, 32, 32), 8, []),                         # 3-channel stem: im2col
])
def test_dispatch_rule(monkeypatch, xshape, nf, expect):
    """With the variable unset, the rule's tiles run through an executor (forward, backward)
    on one thread (on two, the 4x4 output's backward splits by taps)."""
    import ffnumba as ff
    monkeypatch.delenv('FFNUMBA_CONV_WINOGRAD', raising=False)
    spy = _TileSpy(monkeypatch, force=False)
    sym = ff.sym.Convolution(ff.sym.Variable('data'), kernel=(3, 3), num_filter=nf,
                             pad=(1, 1), name='c')
    before = _set_threads(1)
    try:
        ex = sym.simple_bind(ff.cpu(), grad_req='write', data=xshape)
        for a in ex.arg_arrays:
            a[:] = 0.5
        ex.forward(is_train=True)
        ex.backward([ff.nd.ones(ex.outputs[0].shape)])
    finally:
        _set_threads(before)
    assert spy.calls == expect, spy.calls
    yshape = xshape[:1] + (nf,) + xshape[2:]
    on = wg.faster(xshape, yshape)
    assert (on and w4.faster(xshape, yshape)) is (('f', 4) in expect)
    assert (on and w4.faster(xshape, yshape, backward=True)) is (('b', 4) in expect)


def test_float32_gradient_error_within_the_forwards(monkeypatch):
    """On a layer the rule gives F(4x4, 3x3) both ways (64 -> 128 channels, 16x16), the
    float32 data and weight gradients' errors against float64 stay within the F(4x4, 3x3)
    forward error the rule accepts (2.6e-6 relative, about 22 float32 ulps of the largest
    value: ``_winograd4.faster``'s table), within 2x this layer's own forward error (1.2-1.5x
    measured, by CPU), and within 10x im2col's; F(2x2, 3x3) would have run before this rule."""
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (4, 64, 16, 16))
    w = rng.uniform(-1, 1, (128, 64, 3, 3))
    head = rng.uniform(-1, 1, (4, 128, 16, 16))
    ref_y = conv_forward(x, w, None, (3, 3), (), (1, 1), (), 1)
    ref_dx, ref_dw = conv_backward(x, w, head, (3, 3), (), (1, 1), (), 1)[:2]
    p = dict(kernel=(3, 3), num_filter=128, pad=(1, 1), no_bias=True)
    spy = _TileSpy(monkeypatch, force=False)
    errs = {}
    for env in ('1', '0'):
        monkeypatch.setenv('FFNUMBA_CONV_WINOGRAD', env)
        y, (dx, dw) = _run(p, [x, w], head, ['write', 'write'], [x, w], 'float32')
        errs[env] = [np.abs(a - r).max() / np.abs(r).max()
                     for a, r in ((y, ref_y), (dx, ref_dx), (dw, ref_dw))]
    assert spy.calls == [('f', 4), ('b', 4)], spy.calls
    ey, edx, edw = errs['1']
    assert max(edx, edw) < 2.6e-6 and max(edx, edw) < 2 * ey, errs
    assert edx < 10 * errs['0'][1] and edw < 10 * errs['0'][2], errs


def test_float32_forward_error_within_4x_im2col(monkeypatch):
    """On a layer the rule gives F(4x4, 3x3) (64 channels, 16x16), its float32 output is
    within 4x of im2col's error against float64."""
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (4, 64, 16, 16))
    w = rng.uniform(-1, 1, (32, 64, 3, 3))
    ref = conv_forward(x, w, None, (3, 3), (), (1, 1), (), 1)
    p = dict(kernel=(3, 3), num_filter=32, pad=(1, 1), no_bias=True)
    errs = {}
    spy = _TileSpy(monkeypatch, force=False)
    for env in ('1', '0'):
        monkeypatch.setenv('FFNUMBA_CONV_WINOGRAD', env)
        y, _ = _run(p, [x, w], np.zeros(ref.shape), ['null', 'null'], [x, w], 'float32')
        errs[env] = np.abs(y - ref).max() / np.abs(ref).max()
    assert spy.calls == [('f', 4)]
    assert errs['1'] < 4 * errs['0'], errs


@pytest.mark.parametrize('m', [2, 4])
@pytest.mark.parametrize('h, w', [(1, 1), (3, 2), (5, 9), (8, 8)])
def test_input_transform_is_bt_d_b_per_tile(m, h, w):
    """Each tile's ``B^T d B`` as the definition has it, whatever the tile row's length: the
    input transforms carry the two columns a tile shares with the next one along the row."""
    rng = np.random.default_rng(m * 100 + h * 10 + w)
    a = m + 2
    bt1 = w4._bt.py_func if m == 4 else wg._bt4.py_func
    BT = np.array([bt1(*e) for e in np.eye(a)]).T        # column k = B^T of unit vector k
    th, tw = wg.tiles(h, w, m)
    row = m * tw + 2
    x = rng.uniform(-1, 1, (1, 1, h, w))
    pad = np.zeros((m * th + 2) * row)
    wg._load_plane(x.reshape(-1), 0, h, w, 1, 1, pad, row)
    T = th * tw
    v = np.full(a * a * T, np.nan)
    tf = w4.input_tf if m == 4 else wg._input_tf
    tf(pad, row, th, tw, v, 0, T)
    p2 = pad.reshape(m * th + 2, row)
    for i in range(th):
        for j in range(tw):
            d = p2[m * i:m * i + a, m * j:m * j + a]
            got = v.reshape(a * a, T)[:, i * tw + j].reshape(a, a)
            np.testing.assert_allclose(got, BT @ d @ BT.T, rtol=1e-12, atol=1e-12)
