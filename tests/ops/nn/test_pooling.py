"""Pooling: table-driven checks per type and convention, size properties, errors, goldens."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ffnumba.symbol as sym
from ffnumba.base import ParamError, ShapeError
from ffnumba.ops.registry import OpContext, get_op
from ffnumba.testing import OpCase

from conv_reference import pool_forward_backward
from test_convolution import check_golden


def _ref(p, data, head=None):
    cip = p.get('count_include_pad')
    return pool_forward_backward(data, head, p.get('kernel', ()), p.get('pool_type', 'max'),
                                 p.get('stride', ()), p.get('pad', ()),
                                 p.get('pooling_convention', 'valid'),
                                 True if cip is None else cip, p.get('p_value', 1),
                                 p.get('global_pool', False))


class TestMaxPooling(OpCase):
    op = 'Pooling'
    params = [dict(kernel=(2, 2), stride=(2, 2)),
              dict(kernel=(3, 2), stride=(2, 1), pad=(1, 1), pooling_convention='full'),
              dict(kernel=(2, 2), global_pool=True),
              dict(kernel=(3, 3), pad=(1, 1))]       # _pool2d.max_same_fwd / _bwd
    shapes = [dict(data=(2, 2, 5, 6))]

    def reference(self, p, data):
        return [_ref(p, data)[0]]


class TestAvgSumPooling(OpCase):
    op = 'Pooling'
    params = [dict(kernel=(3, 2), stride=(2, 2), pad=(1, 1), pool_type='avg'),
              dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='avg',
                   pooling_convention='full'),
              dict(kernel=(3, 3), stride=(2, 1), pad=(1, 1), pool_type='avg',
                   count_include_pad=False, pooling_convention='full'),
              dict(kernel=(2, 3), stride=(1, 2), pool_type='sum', pooling_convention='full'),
              dict(pool_type='avg', global_pool=True),
              dict(kernel=(3, 3), pad=(1, 1), pool_type='avg'),           # _pool2d.avg_fwd
              dict(kernel=(3, 1), pad=(1, 0), pool_type='sum', count_include_pad=False)]
    shapes = [dict(data=(2, 2, 5, 6))]

    def reference(self, p, data):
        return [_ref(p, data)[0]]


class TestWholePlanePooling(OpCase):
    """Windows that are each whole plane (global pooling): the flat ``_global_pool`` kernels."""
    op = 'Pooling'
    params = [dict(pool_type='sum', global_pool=True),
              dict(pool_type='max', global_pool=True),
              dict(kernel=(3, 4), pool_type='avg', count_include_pad=False),
              dict(kernel=(4, 5), stride=(4, 4), pool_type='avg', pooling_convention='same')]
    shapes = [dict(data=(2, 3, 3, 4))]

    def reference(self, p, data):
        return [_ref(p, data)[0]]


class TestLpPooling(OpCase):
    op = 'Pooling'
    params = [dict(kernel=(2, 2), pool_type='lp', p_value=1),
              dict(kernel=(2, 2), stride=(2, 1), pool_type='lp', p_value=2),
              dict(kernel=(2, 2), pool_type='lp', p_value=3)]
    shapes = [dict(data=(2, 2, 4, 5))]
    grad_rtol = 1e-3   # p=2, 3 divide by the output, which may come close to 0

    def inputs(self, rng, p, shapes):
        # keep window sums away from 0 so (x / out) stays well conditioned
        return {n: rng.uniform(0.5, 1.5, s) for n, s in shapes.items()}

    def reference(self, p, data):
        return [_ref(p, data)[0]]


class TestPooling1D3D(OpCase):
    op = 'Pooling'
    params = [dict(kernel=(2,), stride=(2,), pad=(1,), pool_type='avg', pooling_convention='full'),
              dict(kernel=(3,), pool_type='max', pad=(1,))]
    shapes = [dict(data=(2, 3, 7))]

    def reference(self, p, data):
        return [_ref(p, data)[0]]


class TestPooling3D(OpCase):
    op = 'Pooling'
    params = [dict(kernel=(2, 2, 2), stride=(2, 1, 2), pad=(1, 0, 1), pool_type='avg',
                   count_include_pad=False),
              dict(kernel=(2, 2, 2), stride=(1, 2, 2), pool_type='max')]
    shapes = [dict(data=(1, 2, 3, 4, 5))]

    def reference(self, p, data):
        return [_ref(p, data)[0]]


def _ctx():
    return OpContext(True, None, {}, np.random.default_rng(0), 'pool')


def _run(p, x, head=None, req='write', init=None):
    op = get_op('Pooling')
    params = op.parse_params(p)
    _, outs, _ = op.infer_shape(params, [x.shape], [], [None])
    y = np.empty(outs[0], x.dtype)
    op.forward['cpu'](_ctx(), params, [x], [y], [])
    if head is None:
        return y, None
    dx = np.zeros_like(x) if init is None else init.copy()
    op.backward['cpu'](_ctx(), params, [head], [x], [y], [dx], [req], [])
    return y, dx


@given(i=st.integers(1, 8), k=st.integers(1, 4), s=st.integers(1, 3), q=st.integers(0, 2),
       conv=st.sampled_from(['valid', 'full']), pool_type=st.sampled_from(['max', 'avg', 'sum']),
       two_d=st.booleans())
def test_output_size_property(i, k, s, q, conv, pool_type, two_d):
    """Closed-form size, real forward size and values, or a ShapeError naming the shapes."""
    nd = 2 if two_d else 1
    p = dict(kernel=(k,) * nd, stride=(s,) * nd, pad=(q,) * nd, pooling_convention=conv,
             pool_type=pool_type)
    data = (2, 2) + (i,) * nd
    op = get_op('Pooling')
    params = op.parse_params(p)
    if k > i + 2 * q:
        with pytest.raises(ShapeError) as e:
            op.infer_shape(params, [data], [], [None])
        assert str(data) in str(e.value) and str((k,) * nd) in str(e.value)
        return
    _, outs, _ = op.infer_shape(params, [data], [], [None])
    num = i + 2 * q - k
    o = (int(np.ceil(num / s)) if conv == 'full' else num // s) + 1
    assert outs[0] == (2, 2) + (o,) * nd
    x = np.random.default_rng(0).uniform(-1, 1, data)
    y, _ = _run(p, x)
    assert y.shape == outs[0]
    np.testing.assert_allclose(y, _ref(p, x)[0], rtol=1e-12, atol=1e-12)


class TestSamePooling(OpCase):
    op = 'Pooling'
    params = [dict(kernel=(3,), stride=(2,), pooling_convention='same'),
              dict(kernel=(4,), stride=(1,), pool_type='avg', pooling_convention='same'),
              dict(kernel=(2,), stride=(3,), pool_type='sum', pooling_convention='same')]
    shapes = [dict(data=(2, 3, 7)), dict(data=(1, 2, 5))]

    def reference(self, p, data):
        return [_ref(p, data)[0]]


class TestSamePooling2D(OpCase):
    op = 'Pooling'
    params = [dict(kernel=(3, 2), stride=(2, 2), pooling_convention='same'),
              dict(kernel=(2, 3), stride=(1, 2), pool_type='avg', pooling_convention='same')]
    shapes = [dict(data=(2, 2, 5, 4))]

    def reference(self, p, data):
        return [_ref(p, data)[0]]


@given(i=st.integers(1, 9), k=st.integers(1, 5), s=st.integers(1, 3),
       pool_type=st.sampled_from(['max', 'avg', 'sum']), two_d=st.booleans())
def test_same_output_size_property(i, k, s, pool_type, two_d):
    """'same': ceil(i / s) outputs whatever the kernel (even one larger than the input)."""
    nd = 2 if two_d else 1
    p = dict(kernel=(k,) * nd, stride=(s,) * nd, pooling_convention='same', pool_type=pool_type)
    x = np.random.default_rng(1).uniform(-1, 1, (1, 2) + (i,) * nd)
    y, _ = _run(p, x)
    assert y.shape == (1, 2) + (-(-i // s),) * nd
    np.testing.assert_allclose(y, _ref(p, x)[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('kw, want', [
    # MXNet 1.9.1 on arange(7) (1-D; MXNet needs pad=(0, 0, 0) to run 'same' imperatively)
    (dict(kernel=(3,), stride=(2,)), [2, 4, 6, 6]),
    (dict(kernel=(3,), stride=(2,), pool_type='avg'), [1, 3, 5, 6]),
    (dict(kernel=(3,), stride=(2,), pool_type='sum'), [3, 9, 15, 6]),
    (dict(kernel=(4,), stride=(1,), pool_type='avg'), [1.5, 2.5, 3.5, 4.5, 5, 5.5, 6]),
    (dict(kernel=(2,), stride=(3,), pool_type='sum'), [1, 7, 6]),
])
def test_same_convention_matches_mxnet(kw, want):
    x = np.arange(7.).reshape(1, 1, 7)
    y, _ = _run(dict(kw, pooling_convention='same'), x)
    np.testing.assert_allclose(y[0, 0], want)


def test_known_values_from_mxnet():
    """Values printed by MXNet 1.9.1 (non-MKLDNN) for a tiny 1-D input."""
    x = np.arange(1.0, 6.0).reshape(1, 1, 5)
    ones = np.ones((1, 1, 4))
    full = dict(kernel=(2,), stride=(2,), pad=(1,), pooling_convention='full')
    y, dx = _run(dict(full, pool_type='max'), x.astype(np.float32), ones.astype(np.float32))
    # MXNet prints -FLT_MAX for the window wholly in the padding; the max over an empty
    # set is -inf (ffnumba follows the math, see ops/nn/pooling.py)
    np.testing.assert_array_equal(y[0, 0], [1, 3, 5, -np.inf])
    np.testing.assert_array_equal(dx[0, 0], [1, 0, 1, 0, 1])
    y, dx = _run(dict(full, pool_type='avg'), x, ones)
    np.testing.assert_allclose(y[0, 0], [0.5, 2.5, 4.5, 0.0])
    np.testing.assert_allclose(dx[0, 0], [0.5] * 5)
    y, dx = _run(dict(full, pool_type='avg', count_include_pad=False), x, ones)
    np.testing.assert_allclose(y[0, 0], [1.0, 2.5, 4.5, 0.0])
    np.testing.assert_allclose(dx[0, 0], [1.0, 0.5, 0.5, 0.5, 0.5])
    y, _ = _run(dict(kernel=(2,), stride=(1,), pad=(3,), pool_type='avg',
                     count_include_pad=False), x)
    np.testing.assert_allclose(y[0, 0], [0, 0, 1, 1.5, 2.5, 3.5, 4.5, 5, 0, 0])
    y, dx = _run(dict(kernel=(2,), pool_type='lp', p_value=3), x - 3, ones)
    np.testing.assert_allclose(y[0, 0], [-np.cbrt(9), -1, 1, np.cbrt(9)])
    y, dx = _run(dict(kernel=(2,), pool_type='lp', p_value=2), np.zeros((1, 1, 4)),
                 np.ones((1, 1, 3)))
    np.testing.assert_array_equal(dx, 0)          # 0 / 0 gives 0, not NaN
    y, dx = _run(dict(kernel=(2,), pool_type='max'), np.ones((1, 1, 4)), np.ones((1, 1, 3)))
    np.testing.assert_array_equal(dx[0, 0], [1, 1, 1, 0])   # ties: first max in the window


@pytest.mark.parametrize('pool_type', ['max', 'avg', 'sum', 'lp'])
@pytest.mark.parametrize('req', ['write', 'add', 'null'])
@pytest.mark.parametrize('dtype', ['float32', 'float16'])
def test_kernels_dtype_and_req(pool_type, req, dtype):
    p = dict(kernel=(3, 2), stride=(2, 2), pad=(1, 1), pool_type=pool_type,
             pooling_convention='full', p_value=2)
    rng = np.random.default_rng(3)
    x = rng.uniform(0.2, 1, (2, 3, 5, 6)).astype(dtype)
    ref_y, _ = _ref(p, x.astype(np.float64))
    head = rng.uniform(-1, 1, ref_y.shape).astype(dtype)
    init = rng.uniform(-1, 1, x.shape).astype(dtype)
    y, dx = _run(p, x, head, req, init)
    _, ref_dx = _ref(p, x.astype(np.float64), head.astype(np.float64))
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == 'float16' else dict(rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y, ref_y, **tol)
    want = {'write': ref_dx, 'add': init.astype(np.float64) + ref_dx, 'null': init}[req]
    np.testing.assert_allclose(dx, want, **tol)


@pytest.mark.parametrize('kw, field', [
    (dict(pool_type='max'), 'kernel'),
    (dict(kernel=(2, 2), stride=(2,)), 'stride'),
    (dict(kernel=(2, 2), pad=(1, 1, 1, 1)), 'pad'),
    (dict(kernel=(2, 2), stride=(0, 1)), 'stride'),
    (dict(kernel=(2,), pad=(1,), pooling_convention='same'), 'pad'),
    (dict(kernel=(2, 2), pool_type='lp'), 'p_value'),
    (dict(kernel=(2, 2), pool_type='lp', p_value=4), 'p_value'),
    (dict(kernel=(2, 2), pool_type='median'), 'pool_type'),
    (dict(kernel=(2, 2), layout='NHWC'), 'layout'),
])
def test_param_errors(kw, field):
    with pytest.raises(ParamError) as e:
        get_op('Pooling').parse_params(kw)
    assert 'Pooling' in str(e.value) and field in str(e.value)


@pytest.mark.parametrize('kw, data, what', [
    (dict(kernel=(2,)), (1, 1, 5, 5), '3-D'),
    (dict(kernel=(6, 6)), (1, 1, 5, 5), 'exceeds'),
    (dict(global_pool=True), (1, 5), 'global'),
])
def test_shape_errors(kw, data, what):
    op = get_op('Pooling')
    with pytest.raises(ShapeError) as e:
        op.infer_shape(op.parse_params(kw), [data], [], [None])
    assert what in str(e.value) and str(data) in str(e.value)


def test_graph_error_names_node_and_default_stride():
    s = sym.Pooling(sym.Variable('data'), kernel=(3, 3), name='pool1')
    assert s.infer_shape(data=(1, 2, 7, 7))[1] == [(1, 2, 5, 5)]   # stride defaults to 1
    with pytest.raises(ShapeError, match='pool1'):
        s.infer_shape(data=(1, 2, 2, 2))
    g = sym.Pooling(sym.Variable('data'), kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                    global_pool=True, pool_type='avg', name='gp')
    assert g.infer_shape(data=(2, 3, 4, 5))[1] == [(2, 3, 1, 1)]


def test_matches_mxnet_golden():
    check_golden('Pooling')


@pytest.mark.gpu
@pytest.mark.parametrize('p', [
    dict(kernel=(3, 2), stride=(2, 1), pad=(1, 1), pool_type='max', pooling_convention='full'),
    dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='avg', pooling_convention='full'),
    dict(kernel=(2, 3), stride=(1, 2), pad=(1, 1), pool_type='avg', count_include_pad=False),
    dict(kernel=(2, 2), pool_type='sum'),
    dict(kernel=(2, 2), stride=(2, 1), pool_type='lp', p_value=2),
    dict(kernel=(2, 2), pool_type='lp', p_value=3),
])
def test_gpu_kernels_match_cpu(p, monkeypatch):
    from test_convolution import gpu_matches_cpu
    gpu_matches_cpu('Pooling', p, [(2, 2, 5, 6)], monkeypatch)


def test_pad_and_stride_longer_than_kernel_use_leading_entries():
    # MXNet 1.9.1 ignores entries beyond the kernel's: pad=(1, 0, 0) on a 1-D kernel is pad 1
    import ffnumba as ff
    x = ff.nd.array(np.arange(10.).reshape(1, 1, 10))
    out = ff.nd.Pooling(x, kernel=2, stride=(2, 2, 2), pad=(0, 0, 0), pool_type='max',
                        pooling_convention='same')
    np.testing.assert_array_equal(out.asnumpy(), [[[1, 3, 5, 7, 9]]])
    out = ff.nd.Pooling(x, kernel=2, stride=2, pad=(1, 0, 0), pool_type='max')
    np.testing.assert_array_equal(out.asnumpy(), [[[0, 2, 4, 6, 8, 9]]])
    with pytest.raises(ParamError, match='pad'):
        ff.nd.Pooling(x, kernel=2, stride=2, pad=(0, 0, 0, 0), pool_type='max')
    with pytest.raises(ParamError):
        ff.nd.Pooling(x, kernel=2, stride=2, pad=(1, 1, 1), pool_type='max',
                      pooling_convention='same')


@given(spatial=st.lists(st.integers(1, 7), min_size=1, max_size=3), k=st.integers(1, 3),
       s=st.integers(1, 3), q=st.integers(0, 2), conv=st.sampled_from(['valid', 'full']),
       ties=st.booleans())
def test_max_table_forward_matches_row_sweeps(spatial, k, s, q, conv, ties):
    """Narrow outputs max-pool forward through an offset table; it equals the row sweeps."""
    from ffnumba.ops.nn import pooling as pl
    nd = len(spatial)
    k = min(k, min(spatial) + 2 * q)
    p = dict(kernel=(k,) * nd, stride=(s,) * nd, pad=(q,) * nd, pooling_convention=conv)
    params = get_op('Pooling').parse_params(p)
    data = (2, 3) + tuple(spatial)
    _, outs, _ = get_op("Pooling").infer_shape(params, [data], [], [None])
    rng = np.random.default_rng(5)
    x = rng.integers(0, 3, data).astype(float) if ties else rng.uniform(-1, 1, data)
    x.flat[0] = np.nan
    g = pl._geom(params, data, outs[0])
    dims = pl.as5d(data)
    want, got = np.empty(outs[0]), np.empty(outs[0])
    pl._pool_fwd(x.reshape(-1), want.reshape(-1), dims, g, 0, True, 1, -np.inf)
    pl._max_fwd_table(x.reshape(-1), got.reshape(-1), dims, pl._table_geom(g), -np.inf)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize('data', [(2, 3, 20, 35), (2, 3, 6, 5),
                                  (4, 8, 32, 33), (16, 16, 16, 9)])   # >= 2^15: split
@pytest.mark.parametrize('pool_type', ['max', 'avg'])
def test_pooling_wide_narrow_and_split_match_reference(data, pool_type, monkeypatch):
    """Row sweeps (wide outputs), the max table (narrow), serial and plane-split, vs numpy."""
    from ffnumba.ops.nn import pooling as pl
    monkeypatch.setattr(pl, 'PAR_MIN_SIZE', 1 << 15)
    monkeypatch.setattr(pl, 'PAR_MIN_SIZE_BWD', 1 << 15)
    p = dict(kernel=(3, 3), stride=(1, 1), pad=(1, 1), pool_type=pool_type)
    x = np.random.default_rng(6).uniform(-1, 1, data)
    head = np.random.default_rng(7).uniform(-1, 1, data)
    y, dx = _run(p, x, head)
    ry, rdx = _ref(p, x, head)
    np.testing.assert_allclose(y, ry, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dx, rdx, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('pool_type', ['max', 'avg', 'lp'])
@pytest.mark.parametrize('data', [(3, 5, 6, 7), (2, 3, 20, 18)])
@pytest.mark.parametrize('write', [True, False])
def test_plane_split_kernels_match_serial(pool_type, data, write):
    """The kernels on nt ranges of the N*C planes (prange) equal one serial pass."""
    from ffnumba.ops.nn import pooling as pl
    p = dict(kernel=(3, 3), stride=(2, 1), pad=(1, 1), pool_type=pool_type, p_value=2)
    params = get_op('Pooling').parse_params(p)
    _, outs, _ = get_op("Pooling").infer_shape(params, [data], [], [None])
    rng = np.random.default_rng(10)
    x, dy = rng.uniform(-1, 1, data), rng.uniform(-1, 1, outs[0])
    g, dims = pl._geom(params, data, outs[0]), pl.as5d(data)
    mode, include, pv = pl._modes(params)
    y1, y3 = np.empty(outs[0]), np.empty(outs[0])
    pl._pool_fwd(x.reshape(-1), y1.reshape(-1), dims, g, mode, include, pv, -np.inf)
    pl._pool_fwd_par(x.reshape(-1), y3.reshape(-1), dims, g, mode, include, pv, -np.inf, 3)
    np.testing.assert_array_equal(y1, y3)
    if mode == 0:
        pl._max_fwd_table_par(x.reshape(-1), y3.reshape(-1), dims, pl._table_geom(g),
                              -np.inf, 3)
        np.testing.assert_array_equal(y1, y3)
    dx1, dx3 = np.ones(data), np.ones(data)
    if mode == 0:
        pl._max_bwd(x.reshape(-1), dy.reshape(-1), dx1.reshape(-1), dims, g, write)
        pl._max_bwd_par(x.reshape(-1), dy.reshape(-1), dx3.reshape(-1), dims, g, write, 3)
    else:
        args = (x.reshape(-1), y1.reshape(-1), dy.reshape(-1))
        pl._pool_bwd(*args, dx1.reshape(-1), dims, g, mode, include, pv, write)
        pl._pool_bwd_par(*args, dx3.reshape(-1), dims, g, mode, include, pv, write, 3)
    np.testing.assert_allclose(dx1, dx3, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize('data', [(2, 3, 4, 5), (2, 3, 7), (1, 2, 2, 3, 2),
                                  (8, 64, 9, 8)])   # the last >= PAR_MIN_SIZE: plane split
@pytest.mark.parametrize('pool_type', ['max', 'avg', 'sum'])
@pytest.mark.parametrize('req', ['write', 'add'])
def test_whole_plane_pooling_matches_reference(data, pool_type, req):
    """global_pool (and a kernel covering the input) through the flat whole-plane kernels,
    serial and split over threads, against numpy for forward and both grad_req."""
    rng = np.random.default_rng(11)
    x = rng.integers(-2, 3, data).astype(np.float32)       # ties: the first maximum wins
    head = rng.uniform(-1, 1, data[:2] + (1,) * (len(data) - 2)).astype(np.float32)
    init = rng.uniform(-1, 1, data).astype(np.float32)
    for p in (dict(global_pool=True, pool_type=pool_type),
              dict(kernel=data[2:], pool_type=pool_type)):
        y, dx = _run(p, x, head, req, init)
        ry, rdx = _ref(p, x.astype(np.float64), head.astype(np.float64))
        np.testing.assert_allclose(y, ry, rtol=1e-6, atol=1e-6)
        want = rdx + (init if req == 'add' else 0)
        np.testing.assert_allclose(dx, want, rtol=1e-6, atol=1e-6)


def test_whole_plane_max_nan_and_empty_planes():
    """A plane of NaN or -inf gives -inf and routes no gradient; NaN elsewhere is skipped."""
    x = np.array([[[np.nan, np.nan], [-np.inf, -np.inf], [np.nan, 2.0]]])   # (1, 3, 2)
    y, dx = _run(dict(global_pool=True), x, np.ones((1, 3, 1)), 'write', np.full(x.shape, 5.))
    np.testing.assert_array_equal(y[0, :, 0], [-np.inf, -np.inf, 2.0])
    np.testing.assert_array_equal(dx[0], [[0, 0], [0, 0], [0, 1]])


def test_whole_plane_split_matches_serial():
    """The plane-split whole-plane kernels equal one serial pass, bit for bit."""
    from ffnumba.ops.nn import _global_pool as gp
    rng = np.random.default_rng(12)
    dims = (5, 7, 1, 3, 4)
    x, dy = rng.uniform(-1, 1, 5 * 7 * 12), rng.uniform(-1, 1, 35)
    for mode in (0, 1, 2):
        y1, y3 = np.empty(35), np.empty(35)
        gp.global_forward(x, y1, dims, mode, -np.inf, 1)
        gp.global_forward(x, y3, dims, mode, -np.inf, 3)
        np.testing.assert_array_equal(y1, y3)
        for write in (True, False):
            dx1, dx3 = np.ones(x.size), np.ones(x.size)
            gp.global_backward(x, dy, dx1, dims, mode, write, 1)
            gp.global_backward(x, dy, dx3, dims, mode, write, 3)
            np.testing.assert_array_equal(dx1, dx3)


@given(h=st.integers(1, 9), w=st.integers(1, 9), kh=st.integers(2, 3), kw=st.integers(2, 3),
       sh=st.integers(1, 2), sw=st.integers(1, 2), ph=st.integers(0, 1), pw=st.integers(0, 1),
       conv=st.sampled_from(['valid', 'full']), seed=st.integers(0, 2 ** 16))
@settings(max_examples=25, deadline=None)
def test_separable_max_forward_matches_row_sweeps(h, w, kh, kw, sh, sw, ph, pw, conv, seed):
    """The separable 2-D max forward and the 3x3-row backward (serial and split over 2
    threads, grad_req write and add) equal the general kernels bit for bit: ties, -0.0
    vs 0.0 (the first in window order wins), NaN (never wins), -inf and windows reaching
    into the padding on every border."""
    from ffnumba.ops.nn import _pool2d, pooling as pl
    kh, kw = min(kh, h + 2 * ph), min(kw, w + 2 * pw)
    p = dict(kernel=(kh, kw), stride=(sh, sw), pad=(ph, pw), pooling_convention=conv)
    params = get_op('Pooling').parse_params(p)
    data = (2, 3, h, w)
    _, outs, _ = get_op('Pooling').infer_shape(params, [data], [], [None])
    rng = np.random.default_rng(seed)
    x = rng.choice([-0.0, 0.0, 1.0, -1.0, np.nan, -np.inf, 1.0], size=data)
    g, dims = pl._geom(params, data, outs[0]), pl.as5d(data)
    want = np.empty(outs[0])
    pl._pool_fwd(x.reshape(-1), want.reshape(-1), dims, g, 0, True, 1, -np.inf)
    dy = rng.integers(1, 9, outs[0]).astype(float) * 2.0 ** -rng.integers(0, 30, outs[0])
    init = rng.uniform(-1, 1, data)
    for nt in (1, 2):
        got = np.full(outs[0], 7.0)
        _pool2d.forward(x.reshape(-1), got.reshape(-1), dims, g, nt, {})
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
        for write in (True, False):      # grad_req write / add
            dx_want, dx_got = init.copy(), init.copy()
            pl._max_bwd(x.reshape(-1), dy.reshape(-1), dx_want.reshape(-1), dims, g, write)
            _pool2d.backward(x.reshape(-1), dy.reshape(-1), dx_got.reshape(-1), dims, g, write,
                             nt)
            np.testing.assert_array_equal(dx_got, dx_want)


@pytest.mark.parametrize('dtype', ['float16', 'float32', 'float64'])
@pytest.mark.parametrize('p', [dict(kernel=(3, 3), stride=(1, 1), pad=(1, 1)),
                               dict(kernel=(3, 3), stride=(2, 2), pooling_convention='full'),
                               dict(kernel=(2, 3), stride=(2, 1), pad=(1, 0))])
def test_separable_max_path_through_the_op(p, dtype, monkeypatch):
    """Through the operator: the _pool2d kernels are taken and give what the general
    kernels give (forward, backward with grad_req='add'), for every float dtype."""
    from ffnumba.ops.nn import _pool2d, _pool_argmax
    rng = np.random.default_rng(13)
    x = rng.integers(-3, 4, (2, 3, 33, 20)).astype(dtype)      # ties everywhere
    x[0, 0, 0, :3] = np.nan
    head = rng.uniform(-1, 1, (2, 3) + _run(p, x)[0].shape[2:]).astype(dtype)
    calls = []
    for mod, name in ((_pool2d, 'max_fwd'), (_pool2d, 'max_bwd'), (_pool2d, 'max_same_bwd'),
                      (_pool_argmax, 'max_fwd_arg')):  # p0: same-plane; p1, p2 keep argmax
        real = getattr(mod, name)
        monkeypatch.setattr(mod, name, lambda *a, real=real: calls.append(1) or real(*a))
    y, dx = _run(p, x, head, 'add', np.ones_like(x))
    assert len(calls) == 2
    monkeypatch.setattr(_pool2d, 'ENABLED', False)
    want, dx_want = _run(p, x, head, 'add', np.ones_like(x))
    assert len(calls) == 2
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(dx, dx_want)
    ry = _ref(p, np.nan_to_num(x.astype(np.float64), nan=-np.inf))[0]
    np.testing.assert_array_equal(y, ry.astype(dtype))


@given(h=st.integers(1, 9), w=st.integers(1, 9), kh=st.sampled_from([1, 3, 5]),
       kw=st.sampled_from([1, 3, 5]), mode=st.sampled_from([1, 2]), include=st.booleans(),
       same=st.booleans(), n=st.integers(1, 40), seed=st.integers(0, 2 ** 16))
@settings(max_examples=25, deadline=None)
def test_same_plane_avg_matches_row_sweeps(h, w, kh, kw, mode, include, same, n, seed):
    """Stride-1 avg/sum pooling that keeps the plane (``(2p+1)``-wide windows padded by
    ``p``, or pooling_convention='same'): the flat shifted-pass kernels of ``_pool2d``
    (serial and split over 2 threads, grad_req write and add, blocks of many planes)
    equal the general kernels bit for bit, with inf, NaN and -0.0 in the data."""
    from ffnumba.ops.nn import _pool2d, pooling as pl
    p = dict(kernel=(kh, kw), stride=(1, 1), pool_type=['avg', 'sum'][mode - 1],
             count_include_pad=include)
    p.update(pooling_convention='same') if same else p.update(pad=(kh // 2, kw // 2))
    params = get_op('Pooling').parse_params(p)
    data = (n, 2, h, w)
    _, outs, _ = get_op('Pooling').infer_shape(params, [data], [], [None])
    g, dims = pl._geom(params, data, outs[0]), pl.as5d(data)
    assert _pool2d.applies(g, dims, mode) and _pool2d.applies(g, dims, mode, True)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-4, 4, data).astype(np.float32)
    x.reshape(-1)[rng.integers(0, x.size, 3)] = [np.inf, np.nan, -0.0]
    want = np.empty(outs[0], np.float32)
    pl._pool_fwd(x.reshape(-1), want.reshape(-1), dims, g, mode, include, 1, -np.inf)
    dy = rng.uniform(-1, 1, outs[0]).astype(np.float32)
    dy.reshape(-1)[0] = -0.0
    init = rng.uniform(-1, 1, data).astype(np.float32)
    init.reshape(-1)[-1] = -0.0
    for nt in (1, 2):
        got = np.full(outs[0], 7.0, np.float32)
        _pool2d.forward(x.reshape(-1), got.reshape(-1), dims, g, nt, {}, mode, include)
        np.testing.assert_array_equal(got, want)
        for write in (True, False):      # grad_req write / add
            dx_want, dx_got = init.copy(), init.copy()
            pl._pool_bwd(x.reshape(-1), want.reshape(-1), dy.reshape(-1), dx_want.reshape(-1),
                         dims, g, mode, include, 1, write)
            _pool2d.backward(x.reshape(-1), dy.reshape(-1), dx_got.reshape(-1), dims, g, write,
                             nt, mode, include, {})
            np.testing.assert_array_equal(dx_got, dx_want)
            np.testing.assert_array_equal(np.signbit(dx_got), np.signbit(dx_want))


@pytest.mark.parametrize('dtype', ['float16', 'float32', 'float64'])
@pytest.mark.parametrize('p', [dict(kernel=(3, 3), stride=(1, 1), pad=(1, 1), pool_type='avg'),
                               dict(kernel=(3, 5), pad=(1, 2), pool_type='avg',
                                    count_include_pad=False),
                               dict(kernel=(3, 3), pad=(1, 1), pool_type='sum')])
def test_same_plane_avg_path_through_the_op(p, dtype, monkeypatch):
    """Through the operator (Inception's 3x3 pad-1 branch pooling among them): the
    ``_pool2d`` avg kernels are taken and give the general kernels' results (forward,
    backward with grad_req='add') and the numpy reference's, for every float dtype."""
    from ffnumba.ops.nn import _pool2d
    rng = np.random.default_rng(5)
    x = rng.uniform(-2, 2, (3, 5, 4, 7)).astype(dtype)
    head = rng.uniform(-1, 1, x.shape).astype(dtype)
    calls = []
    for name in ('avg_fwd', 'avg_bwd'):
        real = getattr(_pool2d, name)
        monkeypatch.setattr(_pool2d, name, lambda *a, real=real: calls.append(1) or real(*a))
    y, dx = _run(p, x, head, 'add', np.ones_like(x))
    assert len(calls) == 2
    monkeypatch.setattr(_pool2d, 'ENABLED', False)
    want, dx_want = _run(p, x, head, 'add', np.ones_like(x))
    assert len(calls) == 2
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(dx, dx_want)
    ry, rdx = _ref(p, x.astype(np.float64), head.astype(np.float64))
    tol = 2e-3 if dtype == 'float16' else 1e-5
    np.testing.assert_allclose(y, ry, rtol=tol, atol=tol)
    np.testing.assert_allclose(dx, rdx + 1, rtol=tol, atol=tol)


@given(h=st.integers(1, 9), w=st.integers(1, 9), kh=st.sampled_from([1, 3, 5]),
       kw=st.sampled_from([1, 3, 5]), same=st.booleans(), n=st.integers(1, 40),
       seed=st.integers(0, 2 ** 16))
@settings(max_examples=25, deadline=None)
def test_same_plane_max_matches_general_kernels(h, w, kh, kw, same, n, seed):
    """Stride-1 same-plane max pooling through the flat kernels of ``_pool2d`` (serial and
    split over 2 threads, grad_req write and add) equals the general kernels bit for bit:
    ties, -0.0 vs 0.0 (the first in window order wins), NaN (never wins), -inf-only
    windows (route nothing) and windows reaching into the padding on every border."""
    from ffnumba.ops.nn import _pool2d, pooling as pl
    p = dict(kernel=(kh, kw), stride=(1, 1))
    p.update(pooling_convention='same') if same else p.update(pad=(kh // 2, kw // 2))
    params = get_op('Pooling').parse_params(p)
    data = (n, 2, h, w)
    _, outs, _ = get_op('Pooling').infer_shape(params, [data], [], [None])
    g, dims = pl._geom(params, data, outs[0]), pl.as5d(data)
    assert _pool2d._flat_max(g, dims, 0, False) and _pool2d.applies(g, dims, 0, True)
    rng = np.random.default_rng(seed)
    x = rng.choice([-0.0, 0.0, 1.0, -1.0, np.nan, -np.inf, 1.0], size=data).astype(np.float32)
    want = np.empty(outs[0], np.float32)
    pl._pool_fwd(x.reshape(-1), want.reshape(-1), dims, g, 0, True, 1, -np.inf)
    dy = (rng.integers(1, 9, outs[0]) * 2.0 ** -rng.integers(0, 30, outs[0])).astype(np.float32)
    init = rng.uniform(-1, 1, data).astype(np.float32)
    for nt in (1, 2):
        got = np.full(outs[0], 7.0, np.float32)
        _pool2d.forward(x.reshape(-1), got.reshape(-1), dims, g, nt, {})
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
        for write in (True, False):      # grad_req write / add
            dx_want, dx_got = init.copy(), init.copy()
            pl._max_bwd(x.reshape(-1), dy.reshape(-1), dx_want.reshape(-1), dims, g, write)
            _pool2d.backward(x.reshape(-1), dy.reshape(-1), dx_got.reshape(-1), dims, g, write,
                             nt, 0, True, {})
            np.testing.assert_array_equal(dx_got, dx_want)


@pytest.mark.parametrize('dtype', ['float16', 'float32', 'float64'])
def test_same_plane_max_path_through_the_op(dtype, monkeypatch):
    """GoogLeNet's 3x3 pad-1 branch max pooling through the operator takes the flat
    kernels and gives the general kernels' results (grad_req='add')."""
    from ffnumba.ops.nn import _pool2d
    p = dict(kernel=(3, 3), pad=(1, 1))
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 4, (3, 5, 4, 4)).astype(dtype)      # ties everywhere
    x[0, 0, 0, :3] = np.nan
    head = rng.uniform(-1, 1, x.shape).astype(dtype)
    calls = []
    for name in ('max_same_fwd', 'max_same_bwd'):
        real = getattr(_pool2d, name)
        monkeypatch.setattr(_pool2d, name, lambda *a, real=real: calls.append(1) or real(*a))
    y, dx = _run(p, x, head, 'add', np.ones_like(x))
    assert len(calls) == 2
    monkeypatch.setattr(_pool2d, 'ENABLED', False)
    want, dx_want = _run(p, x, head, 'add', np.ones_like(x))
    assert len(calls) == 2
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(dx, dx_want)


@pytest.mark.parametrize('h, w, s, q, conv', [(33, 20, 1, 1, 'valid'), (32, 32, 2, 1, 'valid'),
                                              (17, 31, 2, 1, 'full'), (16, 9, 2, 0, 'full'),
                                              (12, 11, 1, 0, 'valid'), (3, 25, 2, 1, 'valid'),
                                              (2, 2, 2, 1, 'full')])
def test_max_3x3_fused_forward_matches_general_kernel(h, w, s, q, conv):
    """3x3 max windows (the separable kernel's fused ``_max_fwd3``: whole windows in
    registers, clipped ones scanned) equal the general kernel bit for bit on wide planes,
    with ties, -0.0 vs 0.0, NaN and -inf; serial and split over 2 threads."""
    from ffnumba.ops.nn import _pool2d, pooling as pl
    p = dict(kernel=(3, 3), stride=(s, s), pad=(q, q), pooling_convention=conv)
    params = get_op('Pooling').parse_params(p)
    data = (2, 3, h, w)
    _, outs, _ = get_op('Pooling').infer_shape(params, [data], [], [None])
    g, dims = pl._geom(params, data, outs[0]), pl.as5d(data)
    rng = np.random.default_rng(h * w)
    x = rng.choice([-0.0, 0.0, 1.0, -1.0, np.nan, -np.inf, 1.0], size=data).astype(np.float32)
    want = np.empty(outs[0], np.float32)
    pl._pool_fwd(x.reshape(-1), want.reshape(-1), dims, g, 0, True, 1, -np.inf)
    for nt in (1, 2):
        got = np.full(outs[0], 7.0, np.float32)
        _pool2d.max_fwd(x.reshape(-1), got.reshape(-1), dims, g, np.empty(h * g[11], np.float32))
        np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
        got[...] = 7.0
        _pool2d.forward(x.reshape(-1), got.reshape(-1), dims, g, nt, {})
        np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('pool_type, include', [('max', True), ('avg', True), ('avg', False),
                                                ('sum', True)])
@pytest.mark.parametrize('h, w, kernel, pad', [(8, 8, (3, 3), (1, 1)), (4, 4, (3, 3), (1, 1)),
                                               (2, 2, (3, 3), (1, 1)), (1, 1, (3, 3), (1, 1)),
                                               (5, 11, (1, 9), (0, 4)), (9, 3, (9, 1), (4, 0))])
def test_nine_offset_one_pass_forward_matches_offset_passes(h, w, kernel, pad, pool_type,
                                                            include, dtype):
    """Windows of nine offsets (3x3, 1x9, 9x1) run the one-pass kernels of ``_pool_same3``
    (register loop inside, masked reads at the ends of the array, many blocks): they equal
    the general kernels bit for bit (NaN compared as NaN: its sign is not kept by any
    kernel), -0.0 vs 0.0 included, serial and split over 2 threads."""
    from ffnumba.ops.nn import _pool2d, _pool_same3, pooling as pl
    mode = {'max': 0, 'avg': 1, 'sum': 2}[pool_type]
    params = get_op('Pooling').parse_params(dict(kernel=kernel, pad=pad, pool_type=pool_type,
                                                 count_include_pad=include))
    data = (7, 37, h, w)                       # 259 planes: several blocks, ragged last one
    _, outs, _ = get_op('Pooling').infer_shape(params, [data], [], [None])
    g, dims = pl._geom(params, data, outs[0]), pl.as5d(data)
    assert _pool2d.applies(g, dims, mode) and _pool2d.avg_plan(g, dims, include)[0].size == 9
    rng = np.random.default_rng(h * w + mode)
    x = rng.choice([-0.0, 0.0, 1.0, -1.0, 0.3, 2.5, np.nan, -np.inf, np.inf], size=data,
                   p=[.2, .2, .15, .15, .1, .1, .03, .04, .03]).astype(dtype)
    x[-1, -1] = -0.0                           # a window of only -0.0 at the array's end
    want = np.empty(outs[0], dtype)
    pl._pool_fwd(x.reshape(-1), want.reshape(-1), dims, g, mode, include, 1, -np.inf)
    for nt in (1, 2):
        got = np.full(outs[0], 7.0, dtype)
        _pool2d.forward(x.reshape(-1), got.reshape(-1), dims, g, nt, {}, mode, include)
        np.testing.assert_array_equal(got, want)
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got)[~nan], np.signbit(want)[~nan])
    # and the kernels themselves against the offset-by-offset passes they replace
    offs, fmask, _, size, block = _pool2d.avg_plan(g, dims, include)
    xf, one = x.reshape(-1), np.empty(x.size, dtype)
    if mode == 0:
        _pool_same3.max3_fwd(xf, one, offs, fmask, None)
    else:
        _pool_same3.avg3_fwd(xf, one, offs, fmask, size, mode == 1, None)
    np.testing.assert_array_equal(one.reshape(outs[0]), want)
