"""Deconvolution: table-driven checks, output-size properties, adj/target_shape, errors, goldens."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba.symbol as sym
from ffnumba.base import ParamError, ShapeError
from ffnumba.ops.registry import get_op
from ffnumba.testing import OpCase

from conv_reference import conv_backward, conv_forward, deconv_forward
from test_convolution import _run, check_golden


def _pads(p, in_sp):
    """(pad, adj) as the MXNet docs define them, target_shape included."""
    nd = len(p['kernel'])
    k = p['kernel']
    s = p.get('stride') or (1,) * nd
    d = p.get('dilate') or (1,) * nd
    t = p.get('target_shape') or (0,) * nd
    if any(t):
        total = [s[a] * (in_sp[a] - 1) + d[a] * (k[a] - 1) + 1 - t[a] for a in range(nd)]
        return tuple((v + 1) // 2 for v in total), tuple(v % 2 for v in total)
    return tuple(p.get('pad') or (0,) * nd), tuple(p.get('adj') or (0,) * nd)


def _ref(p, data, weight, bias=None):
    nd = len(p['kernel'])
    pad, adj = _pads(p, data.shape[2:])
    return [deconv_forward(data, weight, bias, p['kernel'], p.get('stride') or (1,) * nd, pad,
                           p.get('dilate') or (1,) * nd, adj, p.get('num_group', 1))]


class TestDeconvolution2D(OpCase):
    op = 'Deconvolution'
    params = [dict(kernel=(4, 4), num_filter=3, stride=(2, 2), pad=(1, 1)),
              dict(kernel=(3, 2), num_filter=4, stride=(2, 3), adj=(1, 2), no_bias=False,
                   num_group=2),
              dict(kernel=(3, 3), num_filter=2, stride=(2, 2), dilate=(1, 2), target_shape=(7, 9),
                   no_bias=False)]
    shapes = [dict(data=(2, 2, 3, 4))]

    def reference(self, p, data, weight, bias=None):
        return _ref(p, data, weight, bias)


class TestDeconvolution1D(OpCase):
    op = 'Deconvolution'
    params = [dict(kernel=(3,), num_filter=2, stride=(2,), pad=(1,), dilate=(2,), no_bias=False),
              dict(kernel=(2,), num_filter=3, stride=(3,), adj=(2,), target_shape=(10,))]
    shapes = [dict(data=(2, 3, 4))]

    def reference(self, p, data, weight, bias=None):
        return _ref(p, data, weight, bias)


class TestDeconvolution3D(OpCase):
    op = 'Deconvolution'
    params = [dict(kernel=(2, 2, 2), num_filter=2, stride=(2, 1, 2), pad=(0, 1, 0), no_bias=False)]
    shapes = [dict(data=(1, 2, 2, 3, 2))]

    def reference(self, p, data, weight, bias=None):
        return _ref(p, data, weight, bias)


@st.composite
def _deconv_case(draw):
    nd = draw(st.integers(1, 2))
    i = tuple(draw(st.integers(1, 4)) for _ in range(nd))
    k = tuple(draw(st.integers(1, 4)) for _ in range(nd))
    s = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    q = tuple(draw(st.integers(0, 2)) for _ in range(nd))
    d = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    adj = tuple(draw(st.integers(0, 2)) for _ in range(nd))
    return i, k, s, q, d, adj


@given(case=_deconv_case(), use_target=st.booleans())
def test_output_size_property(case, use_target):
    """Closed-form size, target_shape, forward size and values, or a ShapeError."""
    i, k, s, q, d, adj = case
    full = tuple(ss * (ii - 1) + dd * (kk - 1) + 1 for ii, kk, ss, dd in zip(i, k, s, d))
    p = dict(kernel=k, stride=s, dilate=d, num_filter=2, no_bias=False)
    if use_target:
        target = tuple(max(1, f - qq) for f, qq in zip(full, q))
        p['target_shape'] = target
        pad, adj = _pads(p, i)
    else:
        p.update(pad=q, adj=adj)
        pad = q
    expected = tuple(f - 2 * qq + aa for f, qq, aa in zip(full, pad, adj))
    op = get_op('Deconvolution')
    params = op.parse_params(p)
    data = (2, 3) + i
    if any(aa >= ss for aa, ss in zip(adj, s)) or min(expected) < 1:
        with pytest.raises(ShapeError) as e:
            op.infer_shape(params, [data, None, None], [], [None])
        assert str(data) in str(e.value) or 'adj' in str(e.value)
        return
    ins, outs, _ = op.infer_shape(params, [data, None, None], [], [None])
    assert outs[0] == (2, 2) + expected
    if use_target:
        assert expected == p['target_shape']
    assert ins[1] == (3, 2) + k
    rng = np.random.default_rng(0)
    vals = [rng.uniform(-1, 1, shp) for shp in ins]
    y, _ = _run('Deconvolution', p, vals)
    assert y.shape == outs[0]
    np.testing.assert_allclose(y, _ref(p, *vals)[0], rtol=1e-10, atol=1e-12)


def test_known_shapes_from_mxnet():
    op = get_op('Deconvolution')

    def out(data, **kw):
        p = op.parse_params(kw)
        n = len(op.list_arguments(p))
        return op.infer_shape(p, [data] + [None] * (n - 1), [], [None])

    ins, outs, _ = out((1, 3, 7, 7), kernel=(4, 4), stride=(2, 2), pad=(1, 1), num_filter=4)
    assert outs == [(1, 4, 14, 14)] and ins[1] == (3, 4, 4, 4) and len(ins) == 2
    assert out((1, 3, 7, 7), kernel=(4, 4), stride=(2, 2), num_filter=4,
               target_shape=(14, 15))[1] == [(1, 4, 14, 15)]
    ins, outs, _ = out((1, 4, 7), kernel=(3,), stride=(2,), num_filter=6, num_group=2,
                       no_bias=False)
    assert outs == [(1, 6, 15)] and ins[1:] == [(4, 3, 3), (6,)]
    assert out((1, 4, 7), kernel=(3,), stride=(2,), pad=(1,), num_filter=5,
               target_shape=(0,))[1] == [(1, 5, 13)]


@pytest.mark.parametrize('kw, data, what', [
    (dict(kernel=(3, 3), stride=(1, 1), num_filter=4, target_shape=(8, 8)), (1, 3, 7, 7), 'adj'),
    (dict(kernel=(3, 3), stride=(1, 1), num_filter=4, target_shape=(10, 10)), (1, 3, 7, 7),
     'too big'),
    (dict(kernel=(3, 3), stride=(2, 2), num_filter=4, adj=(2, 2)), (1, 3, 7, 7), 'adj'),
    (dict(kernel=(3,), stride=(2,), num_filter=6, num_group=2), (1, 3, 7), 'num_group'),
    (dict(kernel=(3,), num_filter=6), (1, 3, 7, 7), '3-D'),
])
def test_shape_errors(kw, data, what):
    op = get_op('Deconvolution')
    p = op.parse_params(kw)
    with pytest.raises(ShapeError) as e:
        op.infer_shape(p, [data] + [None] * (len(op.list_arguments(p)) - 1), [], [None])
    assert what in str(e.value)


@pytest.mark.parametrize('kw, field', [
    (dict(kernel=(3,), num_filter=5, num_group=2), 'num_filter'),
    (dict(kernel=(3, 3), num_filter=4, adj=(1,)), 'adj'),
    (dict(kernel=(3, 3), num_filter=4, target_shape=(4, 0)), 'target_shape'),
])
def test_param_errors(kw, field):
    with pytest.raises(ParamError) as e:
        get_op('Deconvolution').parse_params(kw)
    assert 'Deconvolution' in str(e.value) and field in str(e.value)


def test_default_no_bias_and_graph_error():
    d = sym.Deconvolution(sym.Variable('data'), kernel=(2, 2), num_filter=3, name='up')
    assert d.list_arguments() == ['data', 'up_weight']
    with pytest.raises(ShapeError, match='up'):
        d.infer_shape(data=(1, 2, 4, 4), up_weight=(3, 2, 2, 2))


def test_is_transpose_of_convolution():
    """<dy, deconv(x, w)> == <conv(dy, w), x> for the same weight and geometry."""
    rng = np.random.default_rng(5)
    p = dict(kernel=(3, 2), stride=(2, 1), pad=(1, 0), dilate=(1, 2), num_filter=4, num_group=2)
    x, w = rng.uniform(-1, 1, (2, 6, 3, 4)), rng.uniform(-1, 1, (6, 2, 3, 2))
    y, _ = _run('Deconvolution', p, [x, w])
    dy = rng.uniform(-1, 1, y.shape)
    conv = conv_forward(dy, w, None, (3, 2), (2, 1), (1, 0), (1, 2), 2)
    assert conv.shape == x.shape
    np.testing.assert_allclose(np.vdot(dy, y), np.vdot(conv, x), rtol=1e-10)


@pytest.mark.parametrize('dtype', ['float32', 'float16'])
@pytest.mark.parametrize('req', ['write', 'add', 'null'])
def test_kernels_dtype_and_req(dtype, req):
    p = dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), adj=(1, 0), num_filter=4, num_group=2,
             no_bias=False)
    rng = np.random.default_rng(1)
    x, w, b = (rng.uniform(-1, 1, s).astype(dtype) for s in ((2, 4, 3, 4), (4, 2, 3, 3), (4,)))
    op = get_op('Deconvolution')
    params = op.parse_params(p)
    f64 = [a.astype(np.float64) for a in (x, w, b)]
    ref = _ref(p, *f64)[0]
    y = np.empty(ref.shape, dtype)
    ctx = OpCaseCtx()
    op.forward['cpu'](ctx, params, [x, w, b], [y], [])
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == 'float16' else dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y, ref, **tol)
    head = rng.uniform(-1, 1, y.shape).astype(dtype)
    init = [rng.uniform(-1, 1, a.shape).astype(dtype) for a in (x, w, b)]
    grads = [g.copy() for g in init]
    op.backward['cpu'](ctx, params, [head], [x, w, b], [y], grads, [req] * 3, [])
    h64 = head.astype(np.float64)
    exp = [conv_forward(h64, f64[1], None, (3, 3), (2, 2), (1, 1), (1, 1), 2),
           conv_backward(h64, f64[1], f64[0], (3, 3), (2, 2), (1, 1), (1, 1), 2)[1],
           h64.sum(axis=(0, 2, 3))]
    for g, i, e in zip(grads, init, exp):
        want = {'write': e, 'add': i.astype(np.float64) + e, 'null': i}[req]
        np.testing.assert_allclose(g, want, **tol)


def OpCaseCtx():
    from ffnumba.ops.registry import OpContext
    return OpContext(True, None, {}, np.random.default_rng(0), 'deconv')


def test_matches_mxnet_golden():
    check_golden('Deconvolution')


@pytest.mark.gpu
@pytest.mark.parametrize('p, data', [
    (dict(kernel=(3, 2), num_filter=4, stride=(2, 1), pad=(1, 0), adj=(1, 0), dilate=(1, 2),
          num_group=2, no_bias=False), (2, 4, 3, 4)),
    (dict(kernel=(4,), num_filter=2, stride=(2,), target_shape=(8,)), (2, 3, 4)),
])
def test_gpu_kernels_match_cpu(p, data, monkeypatch):
    from test_convolution import gpu_matches_cpu
    gpu_matches_cpu('Deconvolution', p, [data], monkeypatch)
