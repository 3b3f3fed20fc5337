"""Small-plane convolutions by taps (ffnumba/ops/nn/_conv_taps.py) against numpy and im2col.

float32 tolerance: compared with the float64 numpy reference at ``rtol=1e-4`` and
``atol=1e-5 * sqrt(K C)`` (a sum of ``K C`` products of values in [-1, 1]); float64 at
1e-10.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ffnumba as ff
from ffnumba.ops.nn import _conv_taps as tp
from ffnumba.ops.registry import get_op
from ffnumba.testing import OpCase

from conv_reference import assert_same_results, conv_backward, conv_forward
from test_winograd import _run, _set_threads, assert_table_runs


class _Spy:
    """Counts the tap drivers' calls; ``force`` sends every stride-1 layer to them."""

    def __init__(self, monkeypatch, force=True):
        self.calls = []
        fwd, bwd = tp.forward, tp.backward
        monkeypatch.setattr(tp, 'forward', lambda *a: (self.calls.append('f'), fwd(*a))[1])
        monkeypatch.setattr(tp, 'backward', lambda *a: (self.calls.append('b'), bwd(*a))[1])
        if force:
            monkeypatch.setattr(tp, 'applies', lambda *a: True)
            monkeypatch.setattr(tp, 'split_forward', lambda *a: True)
            monkeypatch.setenv('FFNUMBA_CONV_WINOGRAD', '0')


@pytest.fixture
def one_thread():
    """numba on one thread: the calls do not split, so the rule sends them to the taps."""
    before = _set_threads(1)
    yield
    _set_threads(before)


def _tol(dtype, k, c):
    scale = np.sqrt(k * c)
    return (dict(rtol=1e-4, atol=1e-5 * scale) if dtype == 'float32'
            else dict(rtol=1e-10, atol=1e-12 * scale))


@st.composite
def _case(draw):
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    ph, pw = draw(st.integers(0, kh)), draw(st.integers(0, kw))
    h = draw(st.integers(max(1, kh - 2 * ph), 6))
    w = draw(st.integers(max(1, kw - 2 * pw), 6))
    return dict(n=draw(st.integers(1, 5)), c=draw(st.integers(1, 5)), f=draw(st.integers(1, 5)),
                h=h, w=w, kernel=(kh, kw), pad=(ph, pw), no_bias=draw(st.booleans()),
                reqs=[draw(st.sampled_from(['write', 'add', 'null'])) for _ in range(3)],
                threads=draw(st.sampled_from([1, 2])), chunk=draw(st.sampled_from([1, 1 << 20])))


@settings(max_examples=40, deadline=None)
@given(case=_case(), dtype=st.sampled_from(['float32', 'float64']))
def test_taps_match_numpy(case, dtype):
    """Forward, data and weight gradients (write/add/null) and bias by taps against numpy,
    over kernels of 1-5 by 1-5 with any padding up to the kernel (taps that reach no
    input at all, rectangles of whole rows and of parts of rows), chunks of one sample
    or the whole batch, on one thread or two splitting the taps."""
    c = case
    kernel, pad = c['kernel'], c['pad']
    p = dict(kernel=kernel, num_filter=c['f'], pad=pad, no_bias=c['no_bias'])
    rng = np.random.default_rng(c['n'] * 1000 + c['c'] * 100 + c['h'] * 10 + c['w'])
    vals = [rng.uniform(-1, 1, (c['n'], c['c'], c['h'], c['w'])),
            rng.uniform(-1, 1, (c['f'], c['c']) + kernel)]
    reqs = c['reqs'][:2] if c['no_bias'] else c['reqs']
    if not c['no_bias']:
        vals.append(rng.uniform(-1, 1, (c['f'],)))
    oh, ow = c['h'] + 2 * pad[0] - kernel[0] + 1, c['w'] + 2 * pad[1] - kernel[1] + 1
    head = rng.uniform(-1, 1, (c['n'], c['f'], oh, ow))
    init = [rng.uniform(-1, 1, v.shape) for v in vals]
    mp = pytest.MonkeyPatch()
    before = _set_threads(c['threads'])
    try:
        spy = _Spy(mp)
        mp.setattr(tp, 'CHUNK_ELEMS', c['chunk'])
        y, grads = _run(p, vals, head, reqs, init, dtype)
    finally:
        mp.undo()
        _set_threads(before)
    assert spy.calls == ['f'] + (['b'] if set(reqs[:2]) - {'null'} else [])
    tol = _tol(dtype, kernel[0] * kernel[1], c['c'])
    np.testing.assert_allclose(y, conv_forward(vals[0], vals[1], vals[2] if len(vals) > 2
                                               else None, kernel, (), pad, (), 1), **tol)
    ref = conv_backward(vals[0], vals[1], head, kernel, (), pad, (), 1)
    for i, (g, req) in enumerate(zip(grads, reqs)):
        want = {'write': ref[i], 'add': ref[i] + init[i], 'null': init[i]}[req]
        np.testing.assert_allclose(g, want, **tol, err_msg='grad %d %s' % (i, req))


class TestConvolutionTaps(OpCase):
    """Public-API checks (float64 directional gradient, grad_req add, GPU twin) on layers
    the dispatch rule sends to the taps: 16+ channels on planes mostly padding."""
    op = 'Convolution'
    params = [dict(kernel=(3, 3), num_filter=4, pad=(1, 1)),
              dict(kernel=(5, 5), num_filter=3, no_bias=True, pad=(2, 2)),
              dict(kernel=(5, 3), num_filter=2, pad=(2, 1))]
    shapes = [dict(data=(2, 16, 2, 2)), dict(data=(3, 17, 2, 3))]
    max_batch = 3

    def reference(self, p, data, weight, bias=None):
        return [conv_forward(data, weight, bias, p['kernel'], (), p['pad'], (), 1)]

    def test_rule_takes_taps(self, monkeypatch):
        """Every table case runs the tap drivers through an executor."""
        assert_table_runs(self, _Spy(monkeypatch, force=False))


@pytest.mark.parametrize('kernel, pad, xshape, yshape, expect', [
    ((5, 5), (2, 2), (32, 32, 4, 4), (32, 128, 4, 4), True),      # GoogLeNet 4x 5x5: 0.49
    ((5, 5), (2, 2), (32, 48, 2, 2), (32, 128, 2, 2), True),      # 5b 5x5: 0.16
    ((3, 3), (1, 1), (32, 512, 2, 2), (32, 512, 2, 2), True),     # ResNet-18 (64x64) stage 4
    ((3, 3), (1, 1), (32, 160, 4, 4), (32, 320, 4, 4), True),     # 0.69 (Winograd's first)
    ((5, 5), (2, 2), (32, 32, 8, 8), (32, 96, 8, 8), False),      # 0.72: im2col
    ((3, 3), (1, 1), (32, 256, 8, 8), (32, 256, 8, 8), False),    # 0.84
    ((3, 3), (1, 1), (32, 8, 2, 2), (32, 64, 2, 2), False),       # 8 channels: im2col
    ((3, 3), (0, 0), (32, 64, 4, 4), (32, 64, 2, 2), False),      # no padding: every pair
])
def test_dispatch_rule(kernel, pad, xshape, yshape, expect):
    assert tp.applies(kernel, (1, 1), pad, (1, 1), 1, xshape, yshape) is expect
    assert not tp.applies(kernel, (2, 2), pad, (1, 1), 1, xshape, yshape)
    assert not tp.applies(kernel, (1, 1), pad, (1, 1), 2, xshape, yshape)


def test_reach_counts_pairs():
    """``reach`` against a count of every (tap, output) pair inside the input."""
    for i in range(1, 7):
        for k in range(1, 6):
            for p in range(k + 1):
                o = i + 2 * p - k + 1
                if o < 1:
                    continue
                want = sum(0 <= a - p + t < i for a in range(o) for t in range(k))
                assert tp.reach(i, o, k, p) == want, (i, k, p)


def _layer():
    p = dict(kernel=(5, 5), num_filter=6, pad=(2, 2))
    rng = np.random.default_rng(3)
    vals = [rng.uniform(-1, 1, (3, 16, 4, 4)), rng.uniform(-1, 1, (6, 16, 5, 5)),
            rng.uniform(-1, 1, 6)]
    return p, vals, rng.uniform(-1, 1, (3, 6, 4, 4)), [np.zeros_like(v) for v in vals]


def test_env_var_turns_taps_off(monkeypatch, one_thread):
    """FFNUMBA_CONV_TAPS=0 runs im2col (the same numbers); unset runs the taps."""
    spy = _Spy(monkeypatch, force=False)
    p, vals, head, init = _layer()
    monkeypatch.delenv('FFNUMBA_CONV_TAPS', raising=False)
    on = _run(p, vals, head, ['write'] * 3, init, 'float64')
    assert spy.calls == ['f', 'b']
    spy.calls.clear()
    monkeypatch.setenv('FFNUMBA_CONV_TAPS', '0')
    off = _run(p, vals, head, ['write'] * 3, init, 'float64')
    assert spy.calls == []
    for a, b in zip([on[0]] + on[1], [off[0]] + off[1]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize('where', ['data', 'weight', 'head'])
@pytest.mark.parametrize('value', [np.inf, np.nan])
def test_non_finite_values_as_im2col(monkeypatch, one_thread, where, value):
    """An inf or NaN anywhere gives im2col's output and gradients, NaN for NaN: im2col's
    padded ``0 * inf`` is NaN where the taps would skip the pair, so such calls run it."""
    spy = _Spy(monkeypatch, force=False)
    p, vals, head, init = _layer()
    {'data': vals[0], 'weight': vals[1], 'head': head}[where][1, 2, 0, 0] = value
    on = _run(p, vals, head, ['write'] * 3, init, 'float32')
    assert spy.calls == (['f'] if where == 'head' else [])
    monkeypatch.setenv('FFNUMBA_CONV_TAPS', '0')
    off = _run(p, vals, head, ['write'] * 3, init, 'float32')
    assert_same_results(on, off)


def test_float64_gradients_of_a_float32_layer(monkeypatch, one_thread):
    """float64 gradient arrays bound to a float32 tap layer (Executor.bind takes any float
    gradient array) hold the float32 gradients."""
    spy = _Spy(monkeypatch, force=False)
    rng = np.random.default_rng(6)
    net = ff.sym.Convolution(ff.sym.Variable('data'), kernel=(3, 3), num_filter=4,
                             pad=(1, 1), name='c')
    x = rng.uniform(-1, 1, (2, 16, 2, 2)).astype('float32')
    w = rng.uniform(-1, 1, (4, 16, 3, 3)).astype('float32')
    args = {'data': ff.nd.array(x), 'c_weight': ff.nd.array(w), 'c_bias': ff.nd.zeros((4,))}
    grads = {'data': ff.nd.zeros(x.shape, dtype='float64'),
             'c_weight': ff.nd.zeros(w.shape, dtype='float64')}
    ex = net.bind(ff.cpu(), args, args_grad=grads)
    ex.forward(is_train=True)
    dy = rng.uniform(-1, 1, ex.outputs[0].shape).astype('float32')
    ex.backward(ff.nd.array(dy))
    want = conv_backward(x.astype('float64'), w.astype('float64'), dy.astype('float64'),
                         (3, 3), (), (1, 1))
    assert spy.calls == ['f', 'b']
    for name, i in (('data', 0), ('c_weight', 1)):
        assert grads[name].dtype == np.float64
        np.testing.assert_allclose(grads[name].asnumpy(), want[i], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('threads', [1, 2])
@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_fused_inference_is_bitwise_the_unfused_one(monkeypatch, dtype, threads):
    """Convolution -> BatchNorm -> relu bound for inference (``FFNUMBA_FUSE=exact``) runs
    the taps with the epilogue, bit for bit the unfused chain; on two threads the
    epilogue runs on the sum of the threads' taps."""
    spy = _Spy(monkeypatch, force=False)
    monkeypatch.setattr(tp, 'SPLIT_MIN_REUSE', 1)     # 5 samples of 2x2: split forward too
    before = _set_threads(threads)
    monkeypatch.setattr(tp, 'split_threads', lambda n, t=threads: min(n, t))
    try:
        _fused_pair(monkeypatch, spy, dtype)
    finally:
        _set_threads(before)


def _fused_pair(monkeypatch, spy, dtype):
    x = ff.sym.Variable('data')
    net = ff.sym.Activation(ff.sym.BatchNorm(ff.sym.Convolution(
        x, kernel=(3, 3), num_filter=24, pad=(1, 1), name='c'), name='bn'), act_type='relu')
    outs = []
    for fuse in ('exact', '0'):
        monkeypatch.setenv('FFNUMBA_FUSE', fuse)
        ex = net.simple_bind(ff.cpu(), grad_req='null', data=(5, 32, 2, 2),
                             type_dict={'data': dtype})
        rng = np.random.default_rng(2)
        for name, a in sorted(ex.arg_dict.items()) + sorted(ex.aux_dict.items()):
            a[:] = rng.uniform(0.5, 1.5, a.shape) if 'var' in name else \
                rng.uniform(-1, 1, a.shape)
        assert bool(ex.fused_nodes) == (fuse == 'exact')
        outs.append(ex.forward(is_train=False)[0].asnumpy())
    assert spy.calls == ['f', 'f']
    np.testing.assert_array_equal(outs[0], outs[1])
    assert outs[0].dtype == np.dtype(dtype) and (outs[0] == 0).any() and (outs[0] > 0).any()


def test_relayout_puts_taps_first():
    w = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
    wt = np.empty((20, 2, 3))
    tp.relayout(w.reshape(2, 3, 20), wt, 0, 2)
    np.testing.assert_array_equal(wt, w.reshape(2, 3, 20).transpose(2, 0, 1))


def test_rule_on_split_calls(monkeypatch):
    """Calls split over two threads take the taps as calls on one thread do, forwards only
    where each weight element is used at least SPLIT_MIN_REUSE times (batch 32: GoogLeNet's
    5x5 on 4x4, 251 uses; not 3x3 on 2x2, 57); a split backward takes them on Winograd's
    4x4 layers too (their forward, and everything on one thread, stays Winograd's).
    ``FFNUMBA_CONV_TAPS=0`` runs none."""
    from ffnumba.ops.nn import convolution as conv_mod
    op = get_op('Convolution')
    five = op.parse_params(dict(kernel=(5, 5), num_filter=64, pad=(2, 2)))
    three = op.parse_params(dict(kernel=(3, 3), num_filter=512, pad=(1, 1)))
    layers = [(five, (32, 32, 4, 4), (32, 64, 4, 4), 'taps'),
              (three, (32, 512, 2, 2), (32, 512, 2, 2), 'few uses'),
              (three, (32, 512, 4, 4), (32, 512, 4, 4), 'winograd')]
    monkeypatch.delenv('FFNUMBA_CONV_WINOGRAD', raising=False)
    for nt in (1, 2):
        monkeypatch.setattr(conv_mod.cp, 'split_threads', lambda n, nt=nt: nt)
        for env in ('1', '0'):
            monkeypatch.setenv('FFNUMBA_CONV_TAPS', env)
            for params, xs, ys, kind in layers:
                arrays = (np.zeros(xs, np.float32), np.zeros((ys[1], xs[1], 3, 3), np.float32))
                for backward in (False, True):
                    want = env == '1' and {
                        'taps': True, 'few uses': backward or nt == 1,
                        'winograd': backward and nt == 2}[kind]
                    got = conv_mod._use_taps(params, xs, ys, arrays, backward)
                    assert got is want, (nt, env, kind, backward)
    assert tp.split_forward((5, 5), (2, 2), (32, 32, 4, 4), (32, 64, 4, 4))
    assert not tp.split_forward((5, 5), (2, 2), (16, 32, 4, 4), (16, 64, 4, 4))     # 125


@pytest.mark.parametrize('kernel, pad, hw', [((5, 5), (2, 2), 4), ((3, 3), (1, 1), 2),
                                             ((5, 3), (2, 1), 3)])
@pytest.mark.parametrize('req', ['write', 'add'])
def test_two_threads_on_real_sizes(monkeypatch, kernel, pad, hw, req):
    """Layers large enough for the two threads' pieces to sit side by side in memory
    (12 samples, 40 -> 48 channels), the taps split over two threads, in chunks of 5
    samples, against numpy in float64: a thread writing another's scratch, rows or
    columns shows up here."""
    monkeypatch.setattr(tp, 'CHUNK_ELEMS', 5 * 40 * hw * hw + 5 * 48 * hw * hw)
    monkeypatch.setattr(tp, 'SPLIT_MIN_REUSE', 1)     # 12 samples: split forward too
    monkeypatch.setattr(tp, 'split_threads', lambda n: min(n, 2))
    spy = _Spy(monkeypatch, force=False)
    rng = np.random.default_rng(11)
    vals = [rng.uniform(-1, 1, (12, 40, hw, hw)), rng.uniform(-1, 1, (48, 40) + kernel),
            rng.uniform(-1, 1, 48)]
    oh, ow = hw + 2 * pad[0] - kernel[0] + 1, hw + 2 * pad[1] - kernel[1] + 1
    head = rng.uniform(-1, 1, (12, 48, oh, ow))
    init = [rng.uniform(-1, 1, v.shape) for v in vals]
    before = _set_threads(2)
    try:
        y, grads = _run(dict(kernel=kernel, num_filter=48, pad=pad), vals, head, [req] * 3,
                        init, 'float64')
    finally:
        _set_threads(before)
    assert spy.calls == ['f', 'b']
    np.testing.assert_allclose(y, conv_forward(vals[0], vals[1], vals[2], kernel, (), pad, (),
                                               1), rtol=1e-10, atol=1e-10)
    ref = conv_backward(vals[0], vals[1], head, kernel, (), pad, (), 1)
    for g, r, i0 in zip(grads, ref, init):
        np.testing.assert_allclose(g, r + (i0 if req == 'add' else 0), rtol=1e-10, atol=1e-10)


def test_tap_sets():
    """Every tap that reaches an output goes to exactly one thread, the costliest first to
    the least loaded: 3x3 on 4x4 over two threads 46:54 pairs; taps that reach nothing
    (a 5x5 kernel padded by 4 on a 1x1 plane reaches with its centre alone) go nowhere;
    more threads than taps give fewer sets."""
    geo = (4, 4, 4, 4, 3, 3, 1, 1)
    sets = tp.tap_sets(geo, 2)
    assert sorted(np.concatenate(sets).tolist()) == list(range(9))
    cost = [9, 12, 9, 12, 16, 12, 9, 12, 9]
    assert sorted(sum(cost[k] for k in s) for s in sets) == [46, 54]
    assert all(s.dtype == np.int64 and list(s) == sorted(s) for s in sets)
    assert [list(s) for s in tp.tap_sets(geo, 1)] == [list(range(9))]
    assert tp.tap_sets(geo, 2) is sets          # cached per layer
    assert [list(s) for s in tp.tap_sets((1, 1, 1, 1, 5, 5, 2, 2), 2)] == [[12]]
    assert len(tp.tap_sets((2, 2, 2, 2, 3, 3, 1, 1), 16)) == 9


def test_weight_gradient_of_split_taps_is_bitwise_one_threads(monkeypatch):
    """Each tap's weight gradient is one thread's, in the same GEMMs: two threads give one
    thread's weight gradient bit for bit, over several chunks; the forward and data
    gradient sum the threads' parts, equal to rounding."""
    rng = np.random.default_rng(5)
    vals = [rng.uniform(-1, 1, (9, 24, 4, 4)).astype(np.float32),
            rng.uniform(-1, 1, (20, 24, 3, 3)).astype(np.float32),
            rng.uniform(-1, 1, 20).astype(np.float32)]
    head = rng.uniform(-1, 1, (9, 20, 4, 4)).astype(np.float32)
    monkeypatch.setattr(tp, 'CHUNK_ELEMS', 4 * (24 + 20) * 16)        # chunks of 4, 4, 1
    monkeypatch.setattr(tp, 'SPLIT_MIN_REUSE', 1)     # 9 samples: split forward too
    monkeypatch.setenv('FFNUMBA_CONV_WINOGRAD', '0')
    spy = _Spy(monkeypatch, force=False)
    out = {}
    for n in (1, 2):
        monkeypatch.setattr(tp, 'split_threads', lambda m, n=n: min(m, n))
        before = _set_threads(n)
        try:
            out[n] = _run(dict(kernel=(3, 3), num_filter=20, pad=(1, 1)), vals, head,
                          ['write'] * 3, [np.zeros_like(v) for v in vals], 'float32')
        finally:
            _set_threads(before)
    assert spy.calls == ['f', 'b'] * 2
    np.testing.assert_array_equal(out[1][1][1], out[2][1][1])
    np.testing.assert_allclose(out[1][0], out[2][0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[1][1][0], out[2][1][0], rtol=1e-5, atol=1e-5)
