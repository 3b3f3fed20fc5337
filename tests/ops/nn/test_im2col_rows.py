"""im2col/col2im by row runs, strided ones through column phases, against numpy."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from ffnumba.ops.nn import _im2col as ic, _im2col_rows as rr
from ffnumba.ops.nn.convolution import conv_output_size
from ffnumba.ops.registry import OpContext, get_op

from conv_reference import conv_backward, conv_forward, deconv_forward


@st.composite
def _wide_strided(draw):
    """A 1-3-D geometry taking the column phases: its last output dim at least TABLE_MAX_OW
    wide with stride > 1, or (2-3-D) PHASE_MIN_OW..TABLE_MAX_OW-1 wide with stride 2 and
    a window of at least 16 positions."""
    narrow = draw(st.booleans())
    nd = draw(st.integers(2 if narrow else 1, 3))
    spatial, k, s, p, d = [], [], [], [], []
    for axis in range(nd):
        last = axis == nd - 1
        if narrow and axis == nd - 2:
            kk = draw(st.integers(3, 5))
        elif narrow and last:
            kk = draw(st.integers(-(-16 // k[-1]), 7))
        else:
            kk = draw(st.integers(1, 7 if last else 3))
        dd = draw(st.integers(1, 2))
        ss = 2 if narrow and last else draw(st.integers(2, 4) if last else st.integers(1, 2))
        pp = draw(st.integers(0, (dd * (kk - 1)) // 2 + 1))
        lo = max(1, dd * (kk - 1) + 1 - 2 * pp)
        if last:
            ow = rr.PHASE_MIN_OW if narrow else ic.TABLE_MAX_OW
            lo = max(lo, ss * (ow - 1) + dd * (kk - 1) + 1 - 2 * pp)
        i = draw(st.integers(lo, lo + ((14 if narrow else 9) if last else 3)))
        spatial.append(i)
        k.append(kk)
        s.append(ss)
        p.append(pp)
        d.append(dd)
    return tuple(spatial), tuple(k), tuple(s), tuple(p), tuple(d), draw(st.integers(1, 2))


def _index(shape, k, s, p, d, out):
    """``idx[c, k..., n, o...]``: flat index into the image ``(N, C, *spatial)`` read by
    column row ``(c, k)`` at sample ``n``, output ``o``; -1 in the padding (numpy)."""
    n, c = shape[:2]
    spatial = shape[2:]
    flat = np.arange(int(np.prod(shape))).reshape(shape)
    grids = np.meshgrid(*[np.arange(kk) for kk in k], *[np.arange(o) for o in out],
                        indexing='ij')
    nd = len(k)
    pos = [grids[nd + a] * s[a] - p[a] + grids[a] * d[a] for a in range(nd)]
    ok = np.all([(q >= 0) & (q < spatial[a]) for a, q in enumerate(pos)], axis=0)
    pos = [np.where(ok, q, 0) for q in pos]
    idx = flat[(slice(None), slice(None)) + tuple(pos)]          # (N, C, *k, *o)
    idx = np.where(ok, idx, -1)
    return np.moveaxis(idx, 0, 1 + nd)                             # (C, *k, N, *o)


@given(case=_wide_strided(), nonfinite=st.booleans())
def test_row_runs_match_numpy(case, nonfinite):
    """Row-run im2col (column phases when strided) equals numpy's gather exactly (inf and
    NaN where they are, zeros in the padding, rows outside the chunk untouched); col2im
    equals numpy's scatter-add, bit for bit into a zeroed image (each element's terms in
    ascending column-row order, as numpy adds them), to rounding into one holding values."""
    spatial, k, s, p, d, nb = case
    out = tuple(conv_output_size(*a) for a in zip(spatial, k, s, p, d))
    g = ic.geometry(k, s, p, d, out)
    assert s[-1] > 1 and (out[-1] >= ic.TABLE_MAX_OW or rr.narrow_rows(g))
    rng = np.random.default_rng(sum(spatial) + 7 * sum(k))
    x = rng.uniform(-1, 1, (nb + 1, 3) + spatial)
    if nonfinite:
        x.reshape(-1)[[5, -3]] = np.inf, np.nan
    idx = _index(x.shape, k, s, p, d, out)[1:, ...]                 # channels 1, 2
    idx = idx.reshape((2 * int(np.prod(k)), nb + 1, -1))[:, 1:, :].reshape(-1)
    want = np.where(idx >= 0, x.reshape(-1)[np.maximum(idx, 0)], 0.0)
    got = np.full(idx.size + 5, 7.0)                # a tail the kernel must not touch
    ic.im2col(x.reshape(-1), ic.as5d(x.shape), 1, nb, 1, 2, g, got)
    np.testing.assert_array_equal(got[:idx.size], want)
    np.testing.assert_array_equal(got[idx.size:], 7.0)
    col = rng.uniform(-1, 1, idx.size)
    for start in (np.zeros(x.size), x.reshape(-1).copy()):
        dx_got, dx_want = start.copy(), start.copy()
        ic.col2im(col, ic.as5d(x.shape), 1, nb, 1, 2, g, dx_got)
        if start.any():
            np.add.at(dx_want, idx[idx >= 0], col[idx >= 0])
            np.testing.assert_allclose(dx_got, dx_want, rtol=1e-12, atol=1e-12)
        else:
            terms = np.zeros_like(dx_want)
            for i, v in zip(idx, col):           # column-row order, the kernels' order
                if i >= 0:
                    terms[i] += v
            np.testing.assert_array_equal(dx_got, terms)


@pytest.mark.parametrize('p, data', [
    (dict(kernel=(7, 7), num_filter=4, stride=(2, 2), pad=(3, 3)), (2, 3, 40, 36)),  # stem
    (dict(kernel=(11, 11), num_filter=3, stride=(4, 4), pad=(2, 2)), (2, 3, 70, 67)),
    (dict(kernel=(11, 11), num_filter=3, stride=(4, 4), pad=(2, 2)), (2, 3, 64, 64)),  # 15 wide
    (dict(kernel=(3, 3), num_filter=4, stride=(2, 3), dilate=(1, 2), num_group=2),
     (2, 4, 9, 55)),
    (dict(kernel=(5,), num_filter=2, stride=(3,), pad=(1,)), (3, 2, 60)),
    (dict(kernel=(2, 3, 3), num_filter=2, stride=(1, 2, 2), pad=(0, 1, 1)), (2, 2, 3, 5, 33)),
])
@pytest.mark.parametrize('dtype, req', [('float64', 'write'), ('float64', 'add'),
                                        ('float32', 'write')])
def test_strided_wide_convolution_matches_numpy(p, data, dtype, req):
    """Convolutions that take the phase path, forward and backward (data, weight and bias
    gradients, 'write' and 'add') against the numpy reference."""
    rng = np.random.default_rng(11)
    op = get_op('Convolution')
    params = op.parse_params(p)
    ins, outs, _ = op.infer_shape(params, [data, None, None], [], [None])
    vals = [rng.uniform(-1, 1, sh).astype(dtype) for sh in ins]
    y = np.empty(outs[0], dtype)
    ctx = OpContext(True, None, {}, rng, 'conv')
    op.forward['cpu'](ctx, params, vals, [y], [])
    want = conv_forward(*[v.astype('float64') for v in vals], p['kernel'], p.get('stride', ()),
                        p.get('pad', ()), p.get('dilate', ()), p.get('num_group', 1))
    tol = dict(rtol=1e-10, atol=1e-11) if dtype == 'float64' else dict(rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(y, want, **tol)
    head = rng.uniform(-1, 1, outs[0]).astype(dtype)
    init = [rng.uniform(-1, 1, sh).astype(dtype) for sh in ins]
    grads = [a.copy() for a in init]
    op.backward['cpu'](ctx, params, [head], vals, [y], grads, [req] * 3, [])
    exp = conv_backward(*[v.astype('float64') for v in vals[:2]], head.astype('float64'),
                        p['kernel'], p.get('stride', ()), p.get('pad', ()),
                        p.get('dilate', ()), p.get('num_group', 1))
    for got, start, e in zip(grads, init, exp):
        np.testing.assert_allclose(got, e + (start if req == 'add' else 0), **tol)


@pytest.mark.parametrize('p, data', [
    (dict(kernel=(4, 4), num_filter=3, stride=(2, 2), pad=(1, 1)), (2, 4, 5, 17)),
    (dict(kernel=(8, 8), num_filter=2, stride=(4, 4), pad=(2, 2)), (2, 3, 3, 16)),
    (dict(kernel=(3,), num_filter=2, stride=(3,)), (2, 2, 20)),
])
def test_strided_wide_deconvolution_matches_numpy(p, data):
    """A Deconvolution's forward is a col2im and its data gradient an im2col whose column
    space is the deconvolution's input: strided and at least TABLE_MAX_OW wide, they take
    the row runs through column phases. Forward against numpy; the data and weight
    gradients against the correlation they transpose (<deconv(x, w), dy> = <x, conv(dy, w)>)."""
    rng = np.random.default_rng(12)
    op = get_op('Deconvolution')
    params = op.parse_params(dict(p, no_bias=True))
    ins, outs, _ = op.infer_shape(params, [data, None], [], [None])
    x, w = [rng.uniform(-1, 1, sh) for sh in ins]
    y = np.empty(outs[0])
    ctx = OpContext(True, None, {}, rng, 'deconv')
    op.forward['cpu'](ctx, params, [x, w], [y], [])
    nd = len(p['kernel'])
    stride, pad = p['stride'], p.get('pad', (0,) * nd)
    want = deconv_forward(x, w, None, p['kernel'], stride, pad, (1,) * nd, (0,) * nd, 1)
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-11)
    dy = rng.uniform(-1, 1, outs[0])
    grads = [np.empty_like(x), np.empty_like(w)]
    op.backward['cpu'](ctx, params, [dy], [x, w], [y], grads, ['write', 'write'], [])
    np.testing.assert_allclose(grads[0], conv_forward(dy, w, None, p['kernel'], stride, pad),
                               rtol=1e-10, atol=1e-11)
    dw = conv_backward(dy, w, x, p['kernel'], stride, pad)[1]
    np.testing.assert_allclose(grads[1], dw, rtol=1e-10, atol=1e-11)


@pytest.mark.parametrize('image, column', [('float32', 'float64'), ('float64', 'float32')])
def test_row_runs_with_image_and_columns_of_different_dtypes(image, column):
    """The phases are kept in the image's dtype: an image and a column matrix of different
    float dtypes unroll and add back as numpy does (1-D narrow and 2-D wide windows)."""
    for shape, k, s, p in [((2, 2, 5, 40), (3, 3), (1, 2), (1, 1)),
                           ((2, 3, 50), (17,), (2,), (3,))]:
        out = tuple(conv_output_size(*a) for a in zip(shape[2:], k, s, p, (1,) * len(k)))
        g = ic.geometry(k, s, p, (), out)
        x = np.random.default_rng(5).uniform(-1, 1, shape).astype(image)
        idx = _index(x.shape, k, s, p, (1,) * len(k), out).reshape(-1)
        got = np.empty(idx.size, column)
        ic.im2col(x.reshape(-1), ic.as5d(x.shape), 0, shape[0], 0, shape[1], g, got)
        want = np.where(idx >= 0, x.reshape(-1)[np.maximum(idx, 0)], 0).astype(column)
        np.testing.assert_array_equal(got, want)
        dx = np.zeros(x.size, image)
        ic.col2im(got, ic.as5d(x.shape), 0, shape[0], 0, shape[1], g, dx)
        acc = np.zeros(x.size)
        np.add.at(acc, idx[idx >= 0], got[idx >= 0].astype('float64'))
        np.testing.assert_allclose(dx, acc, rtol=1e-5, atol=1e-5)


def test_float64_gradient_of_a_float32_strided_convolution():
    """A float64 data gradient bound to a float32 strided Convolution (Executor.bind takes
    any float gradient array) is the float32 gradient, as it was before the phase split."""
    import ffnumba as ff
    rng = np.random.default_rng(6)
    net = ff.sym.Convolution(ff.sym.Variable('data'), kernel=(7, 7), num_filter=4,
                             stride=(2, 2), pad=(3, 3), name='c')
    x = rng.uniform(-1, 1, (2, 3, 40, 36)).astype('float32')
    w = rng.uniform(-1, 1, (4, 3, 7, 7)).astype('float32')
    args = {'data': ff.nd.array(x), 'c_weight': ff.nd.array(w), 'c_bias': ff.nd.zeros((4,))}
    grads = {'data': ff.nd.zeros(x.shape, dtype='float64')}
    ex = net.bind(ff.cpu(), args, args_grad=grads)
    ex.forward(is_train=True)
    dy = rng.uniform(-1, 1, ex.outputs[0].shape).astype('float32')
    ex.backward(ff.nd.array(dy))
    assert grads['data'].dtype == np.float64
    want = conv_backward(x.astype('float64'), w.astype('float64'), dy.astype('float64'),
                         (7, 7), (2, 2), (3, 3))[0]
    np.testing.assert_allclose(grads['data'].asnumpy(), want, rtol=1e-4, atol=1e-4)
