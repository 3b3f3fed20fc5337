"""Convolution: table-driven checks, shape-inference properties, errors, MXNet goldens."""
import json
import os

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba.symbol as sym
from ffnumba.base import ParamError, ShapeError
from ffnumba.ops.registry import OpContext, get_op
from ffnumba.testing import OpCase, strategies as fst

from conv_reference import conv_backward, conv_forward

GOLDEN = os.path.join(os.path.dirname(__file__), '..', '..', 'data', 'conv_golden.npz')


def _ref(p, data, weight, bias=None):
    return [conv_forward(data, weight, bias, p['kernel'], p.get('stride', ()), p.get('pad', ()),
                         p.get('dilate', ()), p.get('num_group', 1))]


class TestConvolution2D(OpCase):
    op = 'Convolution'
    params = [dict(kernel=(3, 3), num_filter=4),
              dict(kernel=(3, 2), num_filter=2, stride=(2, 1), pad=(1, 2), dilate=(2, 1)),
              dict(kernel=(2, 2), num_filter=4, num_group=2, no_bias=True, pad=(1, 0))]
    shapes = [dict(data=(2, 2, 5, 6)), dict(data=(1, 4, 6, 5))]

    def reference(self, p, data, weight, bias=None):
        return _ref(p, data, weight, bias)


class TestConvolution1D(OpCase):
    op = 'Convolution'
    params = [dict(kernel=(3,), num_filter=3, stride=(2,), pad=(1,)),
              dict(kernel=(2,), num_filter=4, dilate=(3,), num_group=2)]
    shapes = [dict(data=(2, 2, 9))]

    def reference(self, p, data, weight, bias=None):
        return _ref(p, data, weight, bias)


class TestConvolution3D(OpCase):
    op = 'Convolution'
    params = [dict(kernel=(2, 2, 2), num_filter=2, stride=(1, 2, 1), pad=(1, 0, 1))]
    shapes = [dict(data=(2, 2, 3, 4, 3))]

    def reference(self, p, data, weight, bias=None):
        return _ref(p, data, weight, bias)


class TestConvolutionDepthwise2D(OpCase):
    """num_group == channels (num_filter a multiple): the direct depthwise kernels
    (_depthwise.py)."""
    op = 'Convolution'
    params = [dict(kernel=(3, 3), num_filter=3, num_group=3, pad=(1, 1), stride=(2, 1)),
              dict(kernel=(2, 3), num_filter=3, num_group=3, dilate=(2, 1), no_bias=True),
              dict(kernel=(3, 3), num_filter=3, num_group=3, pad=(2, 2)),
              # channel multiplier 2, 5x5 stride 2 (the phase-major plane kernel)
              dict(kernel=(5, 5), num_filter=6, num_group=3, pad=(2, 1), stride=(2, 2))]
    shapes = [dict(data=(2, 3, 6, 5))]

    def reference(self, p, data, weight, bias=None):
        return _ref(p, data, weight, bias)


class TestConvolutionDepthwise3D(OpCase):
    op = 'Convolution'
    params = [dict(kernel=(2, 2, 2), num_filter=2, num_group=2, stride=(1, 2, 1),
                   pad=(1, 0, 1))]
    shapes = [dict(data=(2, 2, 3, 4, 3))]

    def reference(self, p, data, weight, bias=None):
        return _ref(p, data, weight, bias)


class TestConvolutionDepthwise1D(OpCase):
    op = 'Convolution'
    params = [dict(kernel=(3,), num_filter=4, num_group=4, stride=(2,), pad=(1,))]
    shapes = [dict(data=(2, 4, 9))]

    def reference(self, p, data, weight, bias=None):
        return _ref(p, data, weight, bias)


def _ctx():
    return OpContext(True, None, {}, np.random.default_rng(0), 'conv')


def _run(op_name, p, arrays, head=None, req='write'):
    """Forward (and backward) through the registry's CPU kernels."""
    op = get_op(op_name)
    params = op.parse_params(p)
    ins, outs, _ = op.infer_shape(params, [a.shape for a in arrays], [], [None])
    y = np.empty(outs[0], arrays[0].dtype)
    ctx = _ctx()
    op.forward['cpu'](ctx, params, arrays, [y], [])
    if head is None:
        return y, None
    grads = [np.zeros_like(a) for a in arrays]
    op.backward['cpu'](ctx, params, [head], arrays, [y], grads, [req] * len(arrays), [])
    return y, grads


@st.composite
def _conv_case(draw):
    nd = draw(st.integers(1, 2))
    geo = [draw(fst.conv_geometry(max_input=7, max_kernel=4, max_stride=3, max_pad=2,
                                  max_dilate=2)) for _ in range(nd)]
    groups = draw(st.integers(1, 2))
    cin = groups * draw(st.integers(1, 2))
    nf = groups * draw(st.integers(1, 2))
    return nd, geo, groups, cin, nf


@given(case=_conv_case())
def test_output_size_property(case):
    """Closed-form size, real forward size and values, or a ShapeError naming the shapes."""
    nd, geo, groups, cin, nf = case
    i, k, s, q, d = (tuple(g[j] for g in geo) for j in range(5))
    p = dict(kernel=k, stride=s, pad=q, dilate=d, num_filter=nf, num_group=groups)
    op = get_op('Convolution')
    params = op.parse_params(p)
    data = (2, cin) + i
    fits = all(dd * (kk - 1) + 1 <= ii + 2 * qq for ii, kk, qq, dd in zip(i, k, q, d))
    if not fits:
        with pytest.raises(ShapeError) as e:
            op.infer_shape(params, [data, None, None], [], [None])
        assert str(data) in str(e.value) and str(k) in str(e.value)
        return
    ins, outs, _ = op.infer_shape(params, [data, None, None], [], [None])
    expected = tuple((ii + 2 * qq - dd * (kk - 1) - 1) // ss + 1
                     for ii, kk, ss, qq, dd in zip(i, k, s, q, d))
    assert outs[0] == (2, nf) + expected
    assert ins[1] == (nf, cin // groups) + k and ins[2] == (nf,)
    rng = np.random.default_rng(0)
    vals = [rng.uniform(-1, 1, shp) for shp in ins]
    y, _ = _run('Convolution', p, vals)
    assert y.shape == outs[0]
    np.testing.assert_allclose(y, _ref(p, *vals)[0], rtol=1e-10, atol=1e-12)


@given(case=_conv_case(), extra=st.integers(1, 2))
def test_wrong_weight_shape_names_both(case, extra):
    nd, geo, groups, cin, nf = case
    k = tuple(g[1] for g in geo)
    op = get_op('Convolution')
    params = op.parse_params(dict(kernel=k, num_filter=nf, num_group=groups, pad=(2,) * nd))
    data = (1, cin) + tuple(g[0] + 4 for g in geo)
    bad = (nf + extra, cin // groups) + k
    with pytest.raises(ShapeError) as e:
        op.infer_shape(params, [data, bad, None], [], [None])
    assert str(list(bad)) in str(e.value) and str((nf, cin // groups) + k) in str(e.value)


def test_graph_errors_name_node():
    c = sym.Convolution(sym.Variable('data'), kernel=(5, 5), num_filter=4, name='conv1')
    with pytest.raises(ShapeError, match='conv1') as e:
        c.infer_shape(data=(1, 3, 3, 3))
    assert '(1, 3, 3, 3)' in str(e.value)
    with pytest.raises(ShapeError, match='conv1'):
        c.infer_shape(data=(1, 3, 8, 8), conv1_weight=(4, 2, 5, 5))


@pytest.mark.parametrize('kw, data, what', [
    (dict(kernel=(3, 3), num_filter=4, num_group=2), (1, 3, 7, 7), 'num_group'),
    (dict(kernel=(3, 3), num_filter=4), (1, 4, 7), '4-D'),
    (dict(kernel=(3,), num_filter=4), (1, 4, 7, 7), '3-D'),
    (dict(kernel=(3, 3), dilate=(4, 4), num_filter=4), (1, 3, 7, 7), 'exceeds'),
])
def test_shape_errors(kw, data, what):
    op = get_op('Convolution')
    with pytest.raises(ShapeError) as e:
        op.infer_shape(op.parse_params(kw), [data, None, None], [], [None])
    assert what in str(e.value) and str(data) in str(e.value)


@pytest.mark.parametrize('kw, field', [
    (dict(kernel=(3, 3), num_filter=3, num_group=2), 'num_filter'),
    (dict(kernel=(3, 3), num_filter=4, stride=(2,)), 'stride'),
    (dict(kernel=(3, 3), num_filter=4, stride=(0, 1)), 'stride'),
    (dict(kernel=(3, 3), num_filter=0), 'num_filter'),
    (dict(kernel=(1, 1, 1, 1), num_filter=2), 'kernel'),
    (dict(kernel=(3, 3), num_filter=4, layout='NHWC'), 'layout'),
    (dict(num_filter=4), 'kernel'),
])
def test_param_errors(kw, field):
    with pytest.raises(ParamError) as e:
        get_op('Convolution').parse_params(kw)
    assert 'Convolution' in str(e.value) and field in str(e.value)


def test_ignored_params_are_accepted():
    p = get_op('Convolution').parse_params(dict(kernel=(3, 3), num_filter=2, workspace=512,
                                                cudnn_tune='off', cudnn_off=True))
    assert p.to_attrs()['workspace'] == '512'


@pytest.mark.parametrize('dtype', ['float32', 'float16'])
@pytest.mark.parametrize('req', ['write', 'add', 'null'])
def test_kernels_dtype_and_req(dtype, req):
    p = dict(kernel=(3, 3), num_filter=4, num_group=2, stride=(2, 1), pad=(1, 1))
    rng = np.random.default_rng(1)
    x, w, b = (rng.uniform(-1, 1, s).astype(dtype) for s in ((3, 4, 6, 5), (4, 2, 3, 3), (4,)))
    op = get_op('Convolution')
    params = op.parse_params(p)
    y = np.empty((3, 4, 3, 5), dtype)
    ctx = _ctx()
    op.forward['cpu'](ctx, params, [x, w, b], [y], [])
    f64 = [a.astype(np.float64) for a in (x, w, b)]
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == 'float16' else dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y, _ref(p, *f64)[0], **tol)
    head = rng.uniform(-1, 1, y.shape).astype(dtype)
    init = [rng.uniform(-1, 1, a.shape).astype(dtype) for a in (x, w, b)]
    grads = [g.copy() for g in init]
    op.backward['cpu'](ctx, params, [head], [x, w, b], [y], grads, [req] * 3, [])
    exp = conv_backward(f64[0], f64[1], head.astype(np.float64), (3, 3), (2, 1), (1, 1), (1, 1), 2)
    for g, i, e in zip(grads, init, exp):
        want = {'write': e, 'add': i.astype(np.float64) + e, 'null': i}[req]
        np.testing.assert_allclose(g, want, **tol)


@pytest.mark.parametrize('req', ['write', 'add'])
@pytest.mark.parametrize('kernel, pad', [((3, 3), (1, 1)), ((1, 1), (0, 0))])
@pytest.mark.parametrize('per_chunk', [1, 2])
def test_chunked_batch_matches_reference(per_chunk, kernel, pad, req, monkeypatch):
    """Batches split into im2col chunks (one sample each, or two with a ragged last one):
    the weight gradient written (or added) by the first chunk and added by the others in
    the GEMM, a pointwise kernel's data gradient stored (added) chunk by chunk."""
    from ffnumba.ops.nn import _im2col
    rows = 2 * kernel[0] * kernel[1]
    monkeypatch.setattr(_im2col, 'COL_CHUNK_ELEMS', per_chunk * rows * 16)
    monkeypatch.setattr(_im2col, 'MIN_GEMM_COLS', 1)
    assert _im2col.chunk_size(5, rows, 16, kernel == (1, 1)) == per_chunk
    p = dict(kernel=kernel, num_filter=3, pad=pad)
    rng = np.random.default_rng(2)
    vals = [rng.uniform(-1, 1, s) for s in ((5, 2, 4, 4), (3, 2) + kernel, (3,))]
    head = rng.uniform(-1, 1, (5, 3, 4, 4))
    init = [rng.uniform(-1, 1, v.shape) for v in vals]
    op = get_op('Convolution')
    params = op.parse_params(p)
    y = np.empty(head.shape)
    op.forward['cpu'](_ctx(), params, vals, [y], [])
    np.testing.assert_allclose(y, _ref(p, *vals)[0], rtol=1e-10, atol=1e-12)
    grads = [i.copy() for i in init]
    op.backward['cpu'](_ctx(), params, [head], vals, [y], grads, [req] * 3, [])
    exp = conv_backward(vals[0], vals[1], head, kernel, (), pad, (), 1)
    for g, e, i0 in zip(grads, exp, init):
        np.testing.assert_allclose(g, e + (i0 if req == 'add' else 0), rtol=1e-10, atol=1e-12)


def _golden_cases(op_name):
    z = np.load(GOLDEN)
    n = len({k.split('/')[0] for k in z.files})
    return [(z, i) for i in range(n) if str(z['%d/op' % i]) == op_name]


def check_golden(op_name):
    """Forward and write-gradients equal real MXNet 1.9.1 (non-MKLDNN) on the stored cases."""
    cases = _golden_cases(op_name)
    assert cases
    for z, i in cases:
        p = json.loads(str(z['%d/params' % i]))
        p = {k: tuple(v) if isinstance(v, list) else v for k, v in p.items()}
        op = get_op(op_name)
        names = op.list_arguments(op.parse_params(p))
        vals = [z['%d/in/%s' % (i, n)] for n in names]
        y, grads = _run(op_name, p, vals, z['%d/head' % i])
        np.testing.assert_allclose(y, z['%d/out' % i], rtol=1e-5, atol=1e-5, err_msg=str(p))
        for n, g in zip(names, grads):
            np.testing.assert_allclose(g, z['%d/grad/%s' % (i, n)], rtol=1e-5, atol=1e-5,
                                       err_msg='%s grad of %s' % (p, n))


def test_matches_mxnet_golden():
    check_golden('Convolution')


def gpu_matches_cpu(op_name, p, shapes, monkeypatch, head_seed=7):
    """Forward and backward (write, then add) of the GPU kernels equal the CPU ones.

    Runs under numba's CUDA simulator in the ``-m gpu`` process; few threads per
    block so the grid-stride loops wrap.
    """
    from numba import cuda
    from ffnumba import jit
    monkeypatch.setattr(jit, 'GPU_THREADS', 16)
    op = get_op(op_name)
    params = op.parse_params(p)
    names = op.list_arguments(params)
    ins, outs, _ = op.infer_shape(params, list(shapes) + [None] * (len(names) - len(shapes)), [], [None])
    rng = np.random.default_rng(head_seed)
    vals = [rng.uniform(-1, 1, s) for s in ins]
    head = rng.uniform(-1, 1, outs[0])
    y = np.empty(outs[0])
    op.forward['cpu'](_ctx(), params, vals, [y], [])
    init = [rng.uniform(-1, 1, s) for s in ins]
    for req in ('write', 'add'):
        cpu_g = [g.copy() for g in init]
        op.backward['cpu'](_ctx(), params, [head], vals, [y], cpu_g, [req] * len(ins), [])
        d_in = [cuda.to_device(v) for v in vals]
        d_y = cuda.to_device(np.zeros(outs[0]))
        op.forward['gpu'](_ctx(), params, d_in, [d_y], [])
        np.testing.assert_allclose(d_y.copy_to_host(), y, rtol=1e-10, atol=1e-12)
        d_g = [cuda.to_device(g) for g in init]
        op.backward['gpu'](_ctx(), params, [cuda.to_device(head)], d_in, [d_y], d_g,
                           [req] * len(ins), [])
        for n, g, c in zip(names, d_g, cpu_g):
            np.testing.assert_allclose(g.copy_to_host(), c, rtol=1e-10, atol=1e-12,
                                       err_msg='%s %s grad of %s' % (p, req, n))


@pytest.mark.gpu
@pytest.mark.parametrize('p, data', [
    (dict(kernel=(3, 2), num_filter=4, stride=(2, 1), pad=(1, 1), dilate=(1, 2), num_group=2),
     (2, 4, 5, 6)),
    (dict(kernel=(3,), num_filter=2, stride=(2,), pad=(1,), no_bias=True), (2, 3, 7)),
])
def test_gpu_kernels_match_cpu(p, data, monkeypatch):
    gpu_matches_cpu('Convolution', p, [data], monkeypatch)


@st.composite
def _col_case(draw):
    """A valid 1-3-D conv geometry for the im2col/col2im path comparison."""
    nd = draw(st.integers(1, 3))
    spatial, k, s, p, d = [], [], [], [], []
    for _ in range(nd):
        i, kk, ss, pp, dd = draw(fst.conv_geometry(max_input=7, max_kernel=3, max_pad=2))
        if dd * (kk - 1) + 1 > i + 2 * pp:
            kk, dd = 1, 1
        spatial.append(i)
        k.append(kk)
        s.append(ss)
        p.append(pp)
        d.append(dd)
    return tuple(spatial), tuple(k), tuple(s), tuple(p), tuple(d), draw(st.integers(1, 3))


@given(case=_col_case())
def test_im2col_table_path_matches_row_path(case):
    """Narrow outputs gather through an offset table; it equals the per-row-run kernels."""
    from ffnumba.ops.nn.convolution import conv_output_size
    from ffnumba.ops.nn import _im2col as ic
    spatial, k, s, p, d, nb = case
    out = tuple(conv_output_size(*a) for a in zip(spatial, k, s, p, d))
    g = ic.geometry(k, s, p, d, out)
    x = np.random.default_rng(3).uniform(-1, 1, (nb + 1, 3) + spatial)
    dims = ic.as5d(x.shape)
    rows = 2 * int(np.prod(k)) * nb * int(np.prod(out))
    got, want = np.full(rows, 7.0), np.full(rows, 9.0)
    ic.im2col(x.reshape(-1), dims, 1, nb, 1, 2, g, got)
    ic._im2col_rows(x.reshape(-1), dims, 1, nb, 1, 2, g, want)
    np.testing.assert_array_equal(got, want)
    dx_got, dx_want = np.ones(x.size), np.ones(x.size)
    ic.col2im(want, dims, 1, nb, 1, 2, g, dx_got)
    ic._col2im_rows(want, dims, 1, nb, 1, 2, g, dx_want)
    np.testing.assert_allclose(dx_got, dx_want, rtol=1e-13, atol=1e-13)


@given(h=st.integers(1, 9), w=st.integers(1, 9), kh=st.sampled_from([1, 3, 5]),
       kw=st.sampled_from([1, 3, 5]), dh=st.integers(1, 2), dw=st.integers(1, 2),
       nb=st.integers(1, 3))
def test_im2col_flat_shift_matches_row_path(h, w, kh, kw, dh, dw, nb):
    """Stride-1 kernels whose output plane is the input plane (of at least FLAT_MIN_COLS
    positions, narrower than TABLE_MAX_OW) unroll by flat shifted copies: im2col equals
    the per-row-run kernel exactly (inf and NaN copied where they are, zeros in the
    padding) and col2im adds the same values in the same order."""
    from ffnumba.ops.nn import _im2col as ic, _im2col_flat as flat
    if h * w < flat.FLAT_MIN_COLS:
        h, w = 4, max(w, 4)
    k, p, d = (kh, kw), (dh * (kh // 2), dw * (kw // 2)), (dh, dw)
    g = ic.geometry(k, (1, 1), p, d, (h, w))
    rng = np.random.default_rng(h * 100 + w)
    x = rng.uniform(-1, 1, (nb + 1, 3, h, w))
    x[1, 1, 0, 0], x[-1, -1, -1, -1] = np.inf, np.nan
    dims = ic.as5d(x.shape)
    assert flat._flat_shift(dims, g)
    rows = 2 * kh * kw * nb * h * w
    got, want = np.full(rows, 7.0), np.full(rows, 9.0)
    ic.im2col(x.reshape(-1), dims, 1, nb, 1, 2, g, got)
    ic._im2col_rows(x.reshape(-1), dims, 1, nb, 1, 2, g, want)
    np.testing.assert_array_equal(got, want)
    col = rng.uniform(-1, 1, rows)
    dx_got, dx_want = x.reshape(-1).copy(), x.reshape(-1).copy()
    ic.col2im(col, dims, 1, nb, 1, 2, g, dx_got)
    ic._col2im_rows(col, dims, 1, nb, 1, 2, g, dx_want)
    np.testing.assert_array_equal(dx_got, dx_want)


@pytest.mark.parametrize('p, data', [
    (dict(kernel=(3, 3), num_filter=3, pad=(1, 1), stride=(1, 2)), (3, 2, 5, 37)),  # row runs
    (dict(kernel=(1, 1), num_filter=3), (3, 4, 16, 17)),          # pointwise, one GEMM a sample
    (dict(kernel=(1, 1), num_filter=4, num_group=2, no_bias=True), (3, 4, 16, 16)),
    (dict(kernel=(1, 1), num_filter=3), (5, 4, 3, 3)),            # pointwise, gathered chunk
    (dict(kernel=(1,), num_filter=2, stride=(2,)), (2, 3, 9)),    # strided 1x1: table
    (dict(kernel=(3, 3), num_filter=64, pad=(1, 1)), (3, 128, 4, 4)),   # large dw, chunks
    (dict(kernel=(5, 5), num_filter=4, pad=(2, 2)), (3, 3, 8, 8)),      # flat shifted copies
    (dict(kernel=(3, 5), num_filter=2, pad=(1, 2), num_group=2), (2, 4, 4, 6)),
])
@pytest.mark.parametrize('req', ['write', 'add'])
def test_wide_and_pointwise_paths_match_reference(p, data, req):
    """Wide planes (row runs), 1x1 kernels (no im2col) and same-plane stride-1 kernels
    (flat shifted copies) against the numpy reference."""
    rng = np.random.default_rng(4)
    op = get_op('Convolution')
    params = op.parse_params(p)
    ins, outs, _ = op.infer_shape(params, [data] + [None] * (1 if p.get('no_bias') else 2), [], [None])
    vals = [rng.uniform(-1, 1, s) for s in ins]
    head = rng.uniform(-1, 1, outs[0])
    y = np.empty(outs[0])
    op.forward['cpu'](_ctx(), params, vals, [y], [])
    np.testing.assert_allclose(y, _ref(p, *vals)[0], rtol=1e-10, atol=1e-12)
    init = [rng.uniform(-1, 1, s) for s in ins]
    grads = [a.copy() for a in init]
    op.backward['cpu'](_ctx(), params, [head], vals, [y], grads, [req] * len(ins), [])
    exp = conv_backward(vals[0], vals[1], head, p['kernel'], p.get('stride', ()),
                        p.get('pad', ()), (), p.get('num_group', 1))
    for g, i, e in zip(grads, init, exp):
        np.testing.assert_allclose(g, e + (i if req == 'add' else 0), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize('kernel, pad, groups, data', [
    ((3, 3), (1, 1), 1, (5, 4, 6, 5)),
    ((1, 1), (0, 0), 2, (4, 4, 16, 16)),     # pointwise: GEMMs on the planes themselves
    ((2,), (1,), 2, (7, 4, 9)),
])
@pytest.mark.parametrize('nt', [2, 3])
def test_parallel_drivers_match_serial(kernel, pad, groups, data, nt):
    """The batch split over nt threads (each with its own scratch and partial dw) = serial."""
    from ffnumba.ops.nn import _conv_par as cp, _im2col as ic
    from ffnumba.ops.nn.convolution import conv_output_size, conv_plan
    rng = np.random.default_rng(8)
    F, C = 4, data[1]
    out = tuple(conv_output_size(i, k, 1, q, 1) for i, k, q in zip(data[2:], kernel, pad))
    g = ic.geometry(kernel, (), pad, (), out)
    x5 = ic.as5d(data)
    x = rng.uniform(-1, 1, data)
    w3 = rng.uniform(-1, 1, (groups, F // groups, C // groups * int(np.prod(kernel))))
    b = rng.uniform(-1, 1, F)
    dy = rng.uniform(-1, 1, (data[0], F, int(np.prod(out))))
    nb, col, tmp, dwt = conv_plan({}, x5, F, groups, g, x.dtype, nt)
    nb1, col1, tmp1, dwt1 = conv_plan({}, x5, F, groups, g, x.dtype)
    y_par, y_ser = np.empty(dy.shape), np.empty(dy.shape)
    cp.conv_forward_par(x.reshape(-1), x5, w3, y_par, False, b, True, col, tmp, nb, g, nt)
    ic.conv_forward(x.reshape(-1), x5, w3, y_ser, False, b, True, col1, tmp1, nb1, g)
    np.testing.assert_allclose(y_par, y_ser, rtol=1e-12, atol=1e-12)
    for mode in (1, 2):
        init_x, init_w = rng.uniform(-1, 1, x.size), rng.uniform(-1, 1, w3.shape)
        dx_par, dw_par, dx_ser, dw_ser = init_x.copy(), init_w.copy(), init_x.copy(), init_w.copy()
        parts = np.full((nt,) + w3.shape, np.nan)
        cp.conv_backward_par(x.reshape(-1), x5, w3, dy, dx_par, dw_par, mode, mode, col, tmp,
                             dwt, parts, nb, g, nt)
        ic.conv_backward(x.reshape(-1), x5, w3, dy, dx_ser, dw_ser, mode, mode, col1, tmp1,
                         dwt1, nb1, g)
        np.testing.assert_allclose(dx_par, dx_ser, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(dw_par, dw_ser, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('threads', [1, 2])
def test_one_and_two_numba_threads_match_reference(threads):
    """The op's serial (one thread) and batch-split (two threads) paths against numpy."""
    import numba
    if threads > numba.config.NUMBA_NUM_THREADS:
        pytest.skip('numba was started with fewer threads')
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        p = dict(kernel=(3, 3), num_filter=3, pad=(1, 1), stride=(2, 1))
        rng = np.random.default_rng(9)
        vals = [rng.uniform(-1, 1, s) for s in ((5, 2, 7, 6), (3, 2, 3, 3), (3,))]
        head = rng.uniform(-1, 1, (5, 3, 4, 6))
        y, grads = _run('Convolution', p, vals, head)
    finally:
        numba.set_num_threads(before)
    np.testing.assert_allclose(y, _ref(p, *vals)[0], rtol=1e-10, atol=1e-12)
    exp = conv_backward(vals[0], vals[1], head, (3, 3), (2, 1), (1, 1), (), 1)
    for g, e in zip(grads, exp):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)


def test_scratch_is_shared_per_thread():
    """:func:`_im2col.buffer`: one array per name and dtype in a thread, another in each thread."""
    import threading
    from ffnumba.ops.nn._im2col import buffer
    a = buffer({}, 'test_scratch', 100, np.float32)
    b = buffer({}, 'test_scratch', 40, np.float32)
    assert a.size == 100 and b.size == 40 and np.shares_memory(a, b)
    assert not np.shares_memory(a, buffer({}, 'test_scratch_other', 100, np.float32))
    assert buffer({}, 'test_scratch', 10, np.float64).dtype == np.float64
    grown = buffer({}, 'test_scratch', 1000, np.float32)
    assert grown.size == 1000 and not np.shares_memory(a, grown)
    seen = []
    t = threading.Thread(target=lambda: seen.append(buffer(None, 'test_scratch', 1000,
                                                             np.float32)))
    t.start()
    t.join()
    assert not np.shares_memory(grown, seen[0])


def test_network_of_convolutions_sharing_scratch_matches_reference():
    """Three im2col and Winograd layers of different sizes in one training executor (their
    scratch arrays shared, the smaller ones prefixes of the larger) give every gradient of
    the float64 reference chain."""
    import ffnumba as ff
    ps = [dict(kernel=(5, 5), num_filter=16, pad=(2, 2)),
          dict(kernel=(3, 3), num_filter=17, pad=(1, 1)),
          dict(kernel=(3, 3), num_filter=3, stride=(2, 2))]
    x = sym.Variable('data')
    for i, p in enumerate(ps):
        x = sym.Convolution(x, name='c%d' % i, **p)
    rng = np.random.default_rng(5)
    data = rng.uniform(-1, 1, (3, 5, 9, 9))
    exe = x.simple_bind(ff.cpu(), data=data.shape, type_dict={'data': 'float64'})
    for k, v in exe.arg_dict.items():
        v[:] = data if k == 'data' else rng.uniform(-1, 1, v.shape)
    args = {k: v.asnumpy() for k, v in exe.arg_dict.items()}
    head = rng.uniform(-1, 1, exe.outputs[0].shape)
    for _ in range(2):                     # the second step reuses the grown scratch
        exe.forward(is_train=True)
        exe.backward([ff.nd.array(head, dtype='float64')])
    acts = [data]
    for i, p in enumerate(ps):
        acts.append(_ref(p, acts[-1], args['c%d_weight' % i], args['c%d_bias' % i])[0])
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), acts[-1], rtol=1e-9, atol=1e-10)
    g = head
    for i in reversed(range(len(ps))):
        p = ps[i]
        gx, gw, gb = conv_backward(acts[i], args['c%d_weight' % i], g, p['kernel'],
                                   p.get('stride', ()), p['pad'] if 'pad' in p else (), (), 1)
        np.testing.assert_allclose(exe.grad_dict['c%d_weight' % i].asnumpy(), gw, rtol=1e-9,
                                   atol=1e-10)
        np.testing.assert_allclose(exe.grad_dict['c%d_bias' % i].asnumpy(), gb, rtol=1e-9,
                                   atol=1e-10)
        g = gx
    np.testing.assert_allclose(exe.grad_dict['data'].asnumpy(), g, rtol=1e-9, atol=1e-10)
