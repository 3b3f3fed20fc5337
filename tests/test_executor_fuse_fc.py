"""Inference fusion of ``FullyConnected -> relu`` (``ffnumba._executor_fuse``) and the
swapped FullyConnected product (``fully_connected.swap_product``).

The fused call must really run where it applies, give the unfused nodes' outputs
bit for bit, and agree with a numpy reference.
"""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba.ops.nn import fully_connected as fc_mod

S = ff.sym


@pytest.fixture
def fc_calls(monkeypatch):
    """Counts the fused FullyConnected -> relu calls of executors bound after set-up."""
    seen = []
    real = fc_mod.fused_relu_forward_cpu

    def counting(ctx, p, inputs, y):
        seen.append(y.shape)
        return real(ctx, p, inputs, y)
    monkeypatch.setattr(fc_mod, 'fused_relu_forward_cpu', counting)
    return seen


def mlp(no_bias=False, flatten=True):
    x = S.Variable('data')
    x = S.Activation(S.FullyConnected(x, num_hidden=128, name='fc1', no_bias=no_bias,
                                      flatten=flatten), act_type='relu', name='r1')
    x = S.relu(S.FullyConnected(x, num_hidden=64, name='fc2', flatten=flatten), name='r2')
    x = S.Activation(S.FullyConnected(x, num_hidden=10, name='fc3', flatten=flatten),
                     act_type='tanh', name='t3')
    return x


def _bind(monkeypatch, net, shape, fuse, dtype='float32'):
    monkeypatch.setenv('FFNUMBA_FUSE', '1' if fuse else '0')
    exe = net.simple_bind(ff.cpu(), grad_req='null', data=shape, type_dict={'data': dtype})
    monkeypatch.delenv('FFNUMBA_FUSE')
    rng = np.random.default_rng(0)
    for name, a in exe.arg_dict.items():
        a[:] = rng.standard_normal(a.shape) * (0.1 if name.endswith('weight') else 1.0)
    return exe


def _reference(exe):
    """The MLP in numpy (float64)."""
    a = {k: v.asnumpy().astype(np.float64) for k, v in exe.arg_dict.items()}
    x = a['data'].reshape(a['data'].shape[0], -1) if a['data'].ndim == 4 else a['data']
    for i, act in ((1, 'relu'), (2, 'relu'), (3, 'tanh')):
        x = x @ a['fc%d_weight' % i].T + a.get('fc%d_bias' % i, 0.0)
        x = np.maximum(x, 0) if act == 'relu' else np.tanh(x)
    return x


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('shape,no_bias,flatten', [
    ((32, 1, 8, 8), False, True),      # 32 rows against 128 and 64 units: swapped products
    ((3, 1, 8, 8), True, True),        # few rows: straight products
    ((2, 20, 30), False, False),       # flatten=False: 40 rows, products over the last axis
])
def test_fc_relu_fused_bitwise_and_right(monkeypatch, fc_calls, dtype, shape, no_bias,
                                         flatten):
    net = mlp(no_bias, flatten)
    fused, plain = _bind(monkeypatch, net, shape, True, dtype), \
        _bind(monkeypatch, net, shape, False, dtype)
    assert fused.fused_nodes == [('fc1', 'r1'), ('fc2', 'r2')] and plain.fused_nodes == []
    for _ in range(2):
        y = fused.forward(is_train=False)[0].asnumpy()
        ref = plain.forward(is_train=False)[0].asnumpy()
        np.testing.assert_array_equal(y, ref)
    assert len(fc_calls) == 4
    assert y.dtype == np.dtype(dtype)
    tol = 1e-5 if dtype == 'float32' else 1e-12
    np.testing.assert_allclose(y, _reference(fused), rtol=tol, atol=tol)


def test_fc_relu_nan_and_changed_weights(monkeypatch, fc_calls):
    """NaN passes relu as unfused; weights written between forwards are used."""
    net = mlp()
    fused, plain = _bind(monkeypatch, net, (16, 1, 8, 8), True), \
        _bind(monkeypatch, net, (16, 1, 8, 8), False)
    for exe in (fused, plain):
        exe.arg_dict['data'][0, 0, 0, :] = np.nan
    np.testing.assert_array_equal(fused.forward(is_train=False)[0].asnumpy(),
                                  plain.forward(is_train=False)[0].asnumpy())
    w = np.random.default_rng(3).standard_normal((128, 64))
    for exe in (fused, plain):
        exe.arg_dict['fc1_weight'][:] = w
    y = fused.forward(is_train=False)[0].asnumpy()
    np.testing.assert_array_equal(y, plain.forward(is_train=False)[0].asnumpy())
    assert np.isnan(y[0]).all() and np.isfinite(y[1:]).all()
    np.testing.assert_allclose(y[1:], _reference(fused)[1:], rtol=1e-5, atol=1e-5)


def test_fc_no_fusion_when_observable(monkeypatch, fc_calls):
    """An FC output that is a graph output, or read twice, is not fused; nor a training
    executor, nor a relu on a non-data input."""
    fc = S.FullyConnected(S.Variable('data'), num_hidden=16, name='fc')
    r = S.relu(fc, name='r')
    exe = _bind(monkeypatch, S.Group([r, fc]), (4, 5), True)
    assert exe.fused_nodes == []
    exe = _bind(monkeypatch, S.relu(fc, name='r') + fc, (4, 5), True)
    assert exe.fused_nodes == []
    exe = r.simple_bind(ff.cpu(), data=(4, 5))
    assert exe.fused_nodes == []
    lrelu = S.LeakyReLU(fc, act_type='leaky', name='lr')
    assert _bind(monkeypatch, lrelu, (4, 5), True).fused_nodes == []
    exe.forward(is_train=False)
    assert fc_calls == []


@pytest.mark.parametrize('M,H,swap', [(32, 128, True), (8, 16, True), (7, 128, False),
                                      (64, 100, False), (1, 10, False)])
@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_swapped_product_matches_numpy(M, H, swap, dtype):
    """The FullyConnected forward through both products (the swapped one where chosen)."""
    assert fc_mod.swap_product(M, H) is swap
    rng = np.random.default_rng(M * H)
    x, w, b = (rng.standard_normal(s).astype(dtype) for s in ((M, 33), (H, 33), (H,)))
    y = ff.nd.FullyConnected(ff.nd.array(x, dtype=dtype), ff.nd.array(w, dtype=dtype),
                             ff.nd.array(b, dtype=dtype), num_hidden=H).asnumpy()
    tol = 1e-5 if dtype == 'float32' else 1e-12
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.T + b, rtol=tol, atol=tol)
    y = ff.nd.FullyConnected(ff.nd.array(x, dtype=dtype), ff.nd.array(w, dtype=dtype),
                             num_hidden=H, no_bias=True).asnumpy()
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.T, rtol=tol, atol=tol)


def test_fc_relu_fused_split_over_threads(monkeypatch, fc_calls):
    """A product large enough to split over the kernel pool (here: every product, two
    parts whatever the thread caps an earlier test left) gets its relu after the
    split, as the unfused nodes."""
    monkeypatch.setattr(fc_mod, 'PAR_MIN_MACS', 1)
    monkeypatch.setattr(fc_mod, 'split_threads', lambda n: max(1, min(2, n)))
    assert fc_mod._fc_threads(64, 64, 128, 128) == 2
    net = mlp()
    fused, plain = _bind(monkeypatch, net, (64, 1, 8, 8), True), \
        _bind(monkeypatch, net, (64, 1, 8, 8), False)
    y = fused.forward(is_train=False)[0].asnumpy()
    np.testing.assert_array_equal(y, plain.forward(is_train=False)[0].asnumpy())
    assert len(fc_calls) == 2
    np.testing.assert_allclose(y, _reference(fused), rtol=1e-5, atol=1e-5)
