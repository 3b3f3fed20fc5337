"""SoftmaxOutput: forward softmax, cross-entropy gradient in every mode, MXNet numbers."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba.symbol as sym
from ffnumba.base import FFError, ParamError
from ffnumba.ops.registry import OpContext, get_op
from ffnumba.testing import OpCase, check_symbolic_backward, check_symbolic_forward


def _view(p, shape):
    size = int(np.prod(shape))
    if p.get('multi_output'):
        return shape[0], shape[1], size // (shape[0] * shape[1])
    if p.get('preserve_shape'):
        return size // shape[-1], shape[-1], 1
    return shape[0], size // shape[0], 1


def softmax_ref(p, data):
    n, K, S = _view(p, data.shape)
    x = data.reshape(n, K, S)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(data.shape)


def targets_ref(p, shape, label):
    """MXNet's target tensor t (n, K, S) and the gradient normalizer."""
    n, K, S = _view(p, shape)
    lab = label.reshape(-1)
    ignore = int(p.get('ignore_label', -1))
    alpha = 0.0 if p.get('multi_output') else p.get('smooth_alpha', 0.0)
    t = np.zeros((n, K, S))
    for r in range(n * S):
        i, s = divmod(r, S)
        if p.get('use_ignore') and int(lab[r]) == ignore:
            continue
        if alpha:
            t[i, :, s] = alpha / (K - 1)
        if 0 <= lab[r] < K:
            t[i, int(lab[r]), s] = 1.0 - alpha
    norm = p.get('normalization', 'null')
    if norm == 'batch':
        cnt = n if p.get('multi_output') else lab.size
    elif norm == 'valid':
        cnt = max(1, int(np.sum(lab.astype(int) != ignore)))
    else:
        cnt = 1
    if p.get('multi_output') and norm != 'valid':
        cnt *= S
    return t, cnt


def grad_ref(p, data, label):
    out = softmax_ref(p, data)
    gs = p.get('grad_scale', 1.0)
    if label.shape == data.shape:
        return (out - label) * gs
    t, cnt = targets_ref(p, data.shape, label)
    n, K, S = _view(p, data.shape)
    g = out.reshape(n, K, S) - t
    if p.get('use_ignore'):
        g = g * (t.sum(axis=1, keepdims=True) > 0)
    return (g * gs / cnt).reshape(data.shape)


class _SoftmaxCase(OpCase):
    op = 'SoftmaxOutput'
    grad_nodes = ['data']

    def inputs(self, rng, p, shapes):
        data = rng.uniform(-1, 1, shapes['data'])
        n, K, S = _view(p, shapes['data'])
        low = -1 if p.get('use_ignore') else 0
        label = rng.integers(low, K, shapes['label']).astype(np.float64)
        return {'data': data, 'label': label}

    def reference(self, p, data, label):
        return [softmax_ref(p, data)]

    def loss(self, p, outputs, inputs):
        if outputs is None:
            return 0.0
        out, label = outputs[0], inputs['label']
        t, cnt = targets_ref(p, out.shape, label)
        n, K, S = _view(p, out.shape)
        return -p.get('grad_scale', 1.0) / cnt * np.sum(t * np.log(out.reshape(n, K, S)))


class TestSoftmaxOutput(_SoftmaxCase):
    params = [{}, dict(normalization='batch', grad_scale=2.0),
              dict(normalization='valid', use_ignore=True), dict(smooth_alpha=0.2),
              dict(use_ignore=True, smooth_alpha=0.1, normalization='valid')]
    shapes = [dict(data=(3, 4)), dict(data=(5, 2))]


class TestSoftmaxOutputPreserveShape(_SoftmaxCase):
    params = [dict(preserve_shape=True), dict(preserve_shape=True, normalization='batch')]
    shapes = [dict(data=(2, 3, 4)), dict(data=(3, 2))]


class TestSoftmaxOutputMulti(_SoftmaxCase):
    params = [dict(multi_output=True), dict(multi_output=True, normalization='batch'),
              dict(multi_output=True, normalization='valid', use_ignore=True)]
    shapes = [dict(data=(2, 3, 2)), dict(data=(2, 4, 2, 3))]


def _sin_data(shape):
    return np.sin(np.arange(np.prod(shape)).reshape(shape) * 0.1)


def _grad(label_shape, label, data_shape=(3, 4), **kw):
    s = sym.SoftmaxOutput(sym.Variable('data'), sym.Variable('label'), name='so', **kw)
    loc = dict(data=_sin_data(data_shape), label=np.array(label, float).reshape(label_shape))
    return check_symbolic_backward(s, loc, None, {}, dtype='float64',
                                   grad_req={'data': 'write'})['data']


# Gradients printed by MXNet 1.9.1 for data = sin(0.1 * arange) (tools/make_coreops_numbers.py)
MXNET_CASES = [
    (dict(use_ignore=True, normalization='valid'), (3,), [0, 2, -1], (3, 4),
     [-0.3929, 0.11834, 0.13064, 0.14392, 0.10927, 0.11956, -0.36981, 0.14098, 0, 0, 0, 0]),
    (dict(normalization='valid'), (3,), [0, 2, -1], (3, 4),
     [-0.3929, 0.11834, 0.13064, 0.14392, 0.10927, 0.11956, -0.36981, 0.14098,
      0.11389, 0.12166, 0.12894, 0.13551]),
    (dict(use_ignore=True, normalization='batch', grad_scale=2), (3,), [0, 2, -1], (3, 4),
     [-0.52387, 0.15779, 0.17418, 0.1919, 0.14569, 0.15941, -0.49307, 0.18797, 0, 0, 0, 0]),
    (dict(smooth_alpha=0.3), (3,), [0, 2, 1], (3, 4),
     [-0.4858, 0.13669, 0.16127, 0.18784, 0.11854, 0.13912, -0.43961, 0.18196,
      0.12778, -0.45669, 0.15788, 0.17103]),
    (dict(smooth_alpha=0.3, use_ignore=True, normalization='valid'), (3,), [0, 2, -1], (3, 4),
     [-0.2429, 0.06834, 0.08064, 0.09392, 0.05927, 0.06956, -0.21981, 0.09098, 0, 0, 0, 0]),
    (dict(multi_output=True), (2, 2), [[0, 2], [1, -1]], (2, 3, 2),
     [-0.36471, 0.13595, 0.16502, 0.16533, 0.1997, -0.30128, 0.14352, 0.1458,
      -0.33281, 0.16756, 0.18929, 0.18664]),
    (dict(multi_output=True, normalization='valid', use_ignore=True), (2, 2), [[0, 2], [1, -1]],
     (2, 3, 2), [-0.24314, 0.09063, 0.11001, 0.11022, 0.13313, -0.20086, 0.09568, 0,
                 -0.22187, 0, 0.12619, 0]),
    (dict(multi_output=True, normalization='batch', use_ignore=True), (2, 2), [[0, 2], [1, -1]],
     (2, 3, 2), [-0.18236, 0.06797, 0.08251, 0.08267, 0.09985, -0.15064, 0.07176, 0,
                 -0.1664, 0, 0.09464, 0]),
    (dict(multi_output=True, smooth_alpha=0.3), (2, 2), [[0, 2], [1, 1]], (2, 3, 2),
     [-0.36471, 0.13595, 0.16502, 0.16533, 0.1997, -0.30128, 0.14352, 0.1458,
      -0.33281, -0.33244, 0.18929, 0.18664]),
    (dict(), (2, 3), [[0, 2, 1], [1, 0, 0]], (2, 3, 2),
     [-0.87113, 0.1424, 0.15719, 0.17318, 0.19023, 0.20814, 0.13894, 0.15045,
      -0.83814, 0.1729, 0.18325, 0.1926]),
]


@pytest.mark.parametrize('kw,lshape,label,dshape,expected', MXNET_CASES)
def test_matches_mxnet(kw, lshape, label, dshape, expected):
    got = _grad(lshape, label, dshape, **kw)
    np.testing.assert_allclose(got.ravel(), expected, atol=2e-5)
    np.testing.assert_allclose(got, grad_ref(kw, _sin_data(dshape),
                                             np.array(label, float).reshape(lshape)), atol=1e-12)


@given(data=st.data(),
       mode=st.sampled_from(['plain', 'preserve_shape', 'multi_output']),
       normalization=st.sampled_from(['null', 'batch', 'valid']),
       use_ignore=st.booleans(), grad_scale=st.sampled_from([1.0, 0.5, 3.0]),
       smooth_alpha=st.sampled_from([0.0, 0.2]), req=st.sampled_from(['write', 'add']))
def test_gradient_matches_numpy_reference(data, mode, normalization, use_ignore, grad_scale,
                                          smooth_alpha, req):
    """Every mode/normalization/ignore combination against the numpy reference."""
    kw = dict(normalization=normalization, use_ignore=use_ignore, grad_scale=grad_scale,
              smooth_alpha=smooth_alpha)
    if mode != 'plain':
        kw[mode] = True
    ndim = 2 if mode == 'plain' else data.draw(st.integers(2, 4))
    shape = data.draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    axis = -1 if mode == 'preserve_shape' else 1     # the class axis: at least 2 classes
    shape[axis] = max(shape[axis], 2)
    shape = tuple(shape)
    op = get_op('SoftmaxOutput')
    p = op.parse_params(kw)
    lshape = op.infer_shape(p, [shape, None], [], [None])[0][1]
    n, K, S = _view(kw, shape)
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    x = rng.standard_normal(shape)
    label = rng.integers(-1, K, lshape).astype(np.float64)   # -1 is ignore_label
    ctx = OpContext(True, None, {}, None, 'sm')
    out = np.empty_like(x)
    op.forward['cpu'](ctx, p, [x, label], [out], [])
    np.testing.assert_allclose(out, softmax_ref(kw, x), rtol=1e-12, atol=1e-14)
    init = rng.standard_normal(shape)
    g = [init.copy(), None]
    op.backward['cpu'](ctx, p, None, [x, label], [out], g, [req, 'null'], [])
    expect = grad_ref(kw, x, label) + (init if req == 'add' else 0.0)
    np.testing.assert_allclose(g[0], expect, rtol=1e-10, atol=1e-12)


def test_probability_labels_ignore_normalization():
    # MXNet 1.9.1: label.shape == data.shape gives (p - label) * grad_scale, batch ignored
    label = np.random.RandomState(0).rand(3, 4)
    got = _grad((3, 4), label, normalization='batch', grad_scale=3)
    np.testing.assert_allclose(got.ravel()[:4], [-1.00385, -1.43551, -1.02447, -0.77112], atol=2e-5)
    np.testing.assert_allclose(got, (softmax_ref({}, _sin_data((3, 4))) - label) * 3, atol=1e-12)


def test_label_shape_inference():
    d = sym.Variable('data')
    args, _, _ = sym.SoftmaxOutput(d, name='a').infer_shape(data=(4, 10))
    assert args == [(4, 10), (4,)]
    args, _, _ = sym.SoftmaxOutput(d, name='b', multi_output=True).infer_shape(data=(2, 5, 3, 3))
    assert args[1] == (2, 9)
    args, _, _ = sym.SoftmaxOutput(d, name='c', preserve_shape=True).infer_shape(data=(2, 5, 3))
    assert args[1] == (2, 5)
    assert sym.SoftmaxOutput(d, name='e').list_arguments() == ['data', 'e_label']
    op = get_op('SoftmaxOutput')
    p = op.parse_params(dict(multi_output=True))
    for lab in [(2, 9), (2, 3, 3), (2, 1, 3, 3)]:
        assert op.infer_shape(p, [(2, 5, 3, 3), lab], [], [None])[0][1] == lab


def test_label_out_of_range_raises_naming_node():
    s = sym.SoftmaxOutput(sym.Variable('data'), sym.Variable('label'), name='softmax')
    with pytest.raises(ParamError) as e:
        _ = check_symbolic_backward(s, dict(data=np.zeros((3, 4)), label=np.array([0.0, 5.0, 1.0])),
                                    None, {}, grad_req={'data': 'write'}, dtype='float64')
    msg = str(e.value)
    assert 'softmax' in msg and '5.0' in msg and '[0, 4)' in msg
    assert isinstance(e.value, (FFError, ValueError))


@pytest.mark.parametrize('bad', [-3.0, 4.0, np.nan])
def test_kernel_never_reads_out_of_bounds(bad):
    op = get_op('SoftmaxOutput')
    p = op.parse_params(dict(use_ignore=True))
    data = np.zeros((2, 4))
    out = np.empty_like(data)
    ctx = OpContext(True, None, {}, None, 'sm')
    op.forward['cpu'](ctx, p, [data, np.array([0.0, bad])], [out], [])
    with pytest.raises(ParamError, match='out of range'):
        op.backward['cpu'](ctx, p, None, [data, np.array([0.0, bad])], [out],
                           [np.empty_like(data), None], ['write', 'null'], [])


def test_label_gets_zero_gradient_and_head_grad_ignored():
    op = get_op('SoftmaxOutput')
    p = op.parse_params({})
    data = _sin_data((3, 4))
    label = np.array([1.0, 0.0, 3.0])
    ctx = OpContext(True, None, {}, None, 'sm')
    out = np.empty_like(data)
    op.forward['cpu'](ctx, p, [data, label], [out], [])
    g = [np.full_like(data, 9.0), np.full_like(label, 9.0)]
    op.backward['cpu'](ctx, p, [np.full_like(data, 5.0)], [data, label], [out], g,
                       ['write', 'write'], [])
    np.testing.assert_array_equal(g[1], 0)
    np.testing.assert_allclose(g[0], grad_ref({}, data, label), atol=1e-12)


def test_out_grad_multiplies_head_gradient():
    op = get_op('SoftmaxOutput')
    p = op.parse_params(dict(out_grad=True))
    data, label = _sin_data((3, 4)), np.array([1.0, 0.0, 3.0])
    ctx = OpContext(True, None, {}, None, 'sm')
    out = np.empty_like(data)
    op.forward['cpu'](ctx, p, [data, label], [out], [])
    head = np.arange(12.0).reshape(3, 4)
    g = [np.zeros_like(data), None]
    op.backward['cpu'](ctx, p, [head], [data, label], [out], g, ['write', 'null'], [])
    np.testing.assert_allclose(g[0], grad_ref({}, data, label) * head, atol=1e-12)


def test_forward_is_stable_for_large_logits():
    s = sym.SoftmaxOutput(sym.Variable('data'), name='sm')
    x = np.array([[1000.0, 0.0, -1000.0]])
    outs = check_symbolic_forward(s, dict(data=x, sm_label=np.zeros(1)), [np.array([[1.0, 0, 0]])],
                                  dtype='float64')
    assert np.all(np.isfinite(outs[0]))


def test_bad_params():
    op = get_op('SoftmaxOutput')
    with pytest.raises(ParamError, match='normalization'):
        op.parse_params(dict(normalization='sum'))
    with pytest.raises(ParamError, match='smooth_alpha'):
        op.parse_params(dict(smooth_alpha=1.5))
    assert get_op('Softmax') is op


@pytest.mark.gpu
@pytest.mark.parametrize('kw,lshape,label,dshape,expected', MXNET_CASES[:6:2] + MXNET_CASES[6:7])
def test_gpu_kernels_match_cpu(kw, lshape, label, dshape, expected):
    from numba import cuda
    op = get_op('SoftmaxOutput')
    p = op.parse_params(kw)
    data, lab = _sin_data(dshape), np.array(label, float).reshape(lshape)
    ctx = OpContext(True, None, {}, None, 'sm')
    out = np.empty_like(data)
    op.forward['cpu'](ctx, p, [data, lab], [out], [])
    g = [np.ones_like(data), np.ones_like(lab)]
    op.backward['cpu'](ctx, p, None, [data, lab], [out], g, ['add', 'write'], [])
    dd, dl = cuda.to_device(data), cuda.to_device(lab)
    dout = cuda.to_device(np.zeros_like(data))
    op.forward['gpu'](ctx, p, [dd, dl], [dout], [])
    dg = [cuda.to_device(np.ones_like(data)), cuda.to_device(np.ones_like(lab))]
    op.backward['gpu'](ctx, p, None, [dd, dl], [dout], dg, ['add', 'write'], [])
    np.testing.assert_allclose(dout.copy_to_host(), out, atol=1e-12)
    np.testing.assert_allclose(dg[0].copy_to_host(), g[0], atol=1e-12)
    np.testing.assert_array_equal(dg[1].copy_to_host(), 0)
