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
from test_winograd import _run, _set_threads


class _Spy:
    """Counts the tap drivers' calls; ``force`` sends every stride-1 layer to them."""

    def __init__(self, monkeypatch, force=True):
        self.calls = []
        fwd, bwd = tp.forward, tp.backward
        monkeypatch.setattr(tp, 'forward', lambda *a: (self.calls.append('f'), fwd(*a))[1])
        monkeypatch.setattr(tp, 'backward', lambda *a: (self.calls.append('b'), bwd(*a))[1])
        if force:
            monkeypatch.setattr(tp, 'applies', lambda *a: True)
            monkeypatch.setenv('FFNUMBA_CONV_WINOGRAD', '0')
            monkeypatch.setenv('FFNUMBA_CONV_TAPS', '2')      # split calls too


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
                threads=draw(st.sampled_from([1, 2])), chunk=draw(st.sampled_from([1, 1 << 20])),
                width=draw(st.sampled_from([1, 1 << 20])))


@settings(max_examples=40, deadline=None)
@given(case=_case(), dtype=st.sampled_from(['float32', 'float64']))
def test_taps_match_numpy(case, dtype):
    """Forward, data and weight gradients (write/add/null) and bias by taps against numpy,
    over kernels of 1-5 by 1-5 with any padding up to the kernel (taps that reach no
    input at all, rectangles of whole rows and of parts of rows), chunks of one sample
    or the whole batch, one or two threads splitting samples or filters and channels."""
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
        mp.setattr(tp, 'SPLIT_MIN_WIDTH', c['width'])    # 1: two threads split filters
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

    def test_rule_takes_taps(self, monkeypatch, one_thread):
        """Every table case runs the tap drivers through an executor."""
        spy = _Spy(monkeypatch, force=False)
        for p in self.params:
            for s in self.shapes:
                spy.calls.clear()
                ex = self.make_symbol(p).simple_bind(ff.cpu(), grad_req='write', **s)
                ex.forward(is_train=True)
                ex.backward([ff.nd.ones(ex.outputs[0].shape)])
                assert spy.calls == ['f', 'b'], (p, s, spy.calls)


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
    the taps with the epilogue, bit for bit the unfused chain; on two threads
    (``FFNUMBA_CONV_TAPS=2``) each thread's filters with their own BatchNorm rows."""
    spy = _Spy(monkeypatch, force=False)
    if threads == 2:
        monkeypatch.setenv('FFNUMBA_CONV_TAPS', '2')
        monkeypatch.setattr(tp, 'SPLIT_MIN_WIDTH', 1)
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


def test_split_calls_run_im2col_unless_asked(monkeypatch):
    """A call that splits over two threads runs im2col by default and the taps with
    ``FFNUMBA_CONV_TAPS=2``; a call on one thread runs the taps either way."""
    from ffnumba.ops.nn import convolution as conv_mod
    p, vals, head, init = _layer()
    params = get_op('Convolution').parse_params(p)
    shapes = (vals[0].shape, head.shape, (vals[0], vals[1]))
    for nt in (1, 2):
        monkeypatch.setattr(conv_mod.cp, 'split_threads', lambda n, nt=nt: nt)
        for env, want in (('1', nt == 1), ('2', True), ('0', False)):
            monkeypatch.setenv('FFNUMBA_CONV_TAPS', env)
            assert conv_mod._use_taps(params, *shapes) is want, (nt, env)


@pytest.mark.parametrize('width', [1, 1 << 20])
@pytest.mark.parametrize('kernel, pad, hw', [((5, 5), (2, 2), 4), ((3, 3), (1, 1), 2),
                                             ((5, 3), (2, 1), 3)])
@pytest.mark.parametrize('req', ['write', 'add'])
def test_two_threads_on_real_sizes(monkeypatch, kernel, pad, hw, width, req):
    """Layers large enough for the two threads' pieces to sit side by side in memory
    (12 samples, 40 -> 48 channels), split by samples (``width`` large) or by filters and
    channels (``width`` 1), against numpy in float64: a thread writing another's scratch,
    rows or columns shows up here."""
    monkeypatch.setenv('FFNUMBA_CONV_TAPS', '2')
    monkeypatch.setattr(tp, 'SPLIT_MIN_WIDTH', width)
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


def test_by_channels_threshold():
    """Two threads split filters and channels from 64 of each (32 per thread)."""
    assert tp.by_channels(64, 64, 2) and tp.by_channels(512, 384, 2)
    assert not tp.by_channels(63, 64, 2) and not tp.by_channels(64, 63, 2)
    assert not tp.by_channels(512, 512, 1) and tp.by_channels(96, 96, 3)
