"""FullyConnected: table-driven checks plus shape-inference properties and param errors."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba.symbol as sym
from ffnumba.base import ParamError, ShapeError
from ffnumba.ops.registry import OpContext, get_op
from ffnumba.testing import OpCase, check_symbolic_backward


def _fc_reference(p, data, weight, bias=None):
    x = data.reshape(data.shape[0], -1) if p.get('flatten', True) else data
    y = x @ weight.T
    if bias is not None:
        y = y + bias
    return [y]


class TestFullyConnected(OpCase):
    op = 'FullyConnected'
    params = [dict(num_hidden=3), dict(num_hidden=2, no_bias=True),
              dict(num_hidden=4, flatten=False)]
    shapes = [dict(data=(2, 5)), dict(data=(3, 2, 2))]

    def reference(self, p, data, weight, bias=None):
        return _fc_reference(p, data, weight, bias)


def _op_ctx():
    return OpContext(True, None, {}, np.random.default_rng(0), 'fc')


def test_num_hidden_must_be_positive():
    with pytest.raises(ParamError) as e:
        get_op('FullyConnected').parse_params(dict(num_hidden=0))
    assert str(e.value) == ('FullyConnected: `num_hidden` must be an int >= 1. '
                            'Received: num_hidden=0')


def test_missing_num_hidden():
    with pytest.raises(ParamError, match='num_hidden'):
        sym.FullyConnected(sym.Variable('data'), name='fc')


def test_auto_created_arguments():
    fc = sym.FullyConnected(sym.Variable('data'), num_hidden=10, name='fc1')
    assert fc.list_arguments() == ['data', 'fc1_weight', 'fc1_bias']
    fc = sym.FullyConnected(sym.Variable('data'), num_hidden=10, no_bias=True, name='fc2')
    assert fc.list_arguments() == ['data', 'fc2_weight']


@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4),
       num_hidden=st.integers(1, 5), flatten=st.booleans(), no_bias=st.booleans())
def test_infer_shape_property(shape, num_hidden, flatten, no_bias):
    op = get_op('FullyConnected')
    p = op.parse_params(dict(num_hidden=num_hidden, flatten=flatten, no_bias=no_bias))
    n_args = 2 if no_bias else 3
    ins, outs, _ = op.infer_shape(p, [tuple(shape)] + [None] * (n_args - 1), [], [None])
    K = int(np.prod(shape[1:])) if flatten else shape[-1]
    assert ins[1] == (num_hidden, K)
    if not no_bias:
        assert ins[2] == (num_hidden,)
    expected = (shape[0], num_hidden) if flatten else tuple(shape[:-1]) + (num_hidden,)
    assert outs[0] == expected
    # the kernel really produces that shape and the reference values
    rng = np.random.default_rng(0)
    vals = [rng.uniform(-1, 1, s) for s in ins]
    out = np.empty(expected)
    op.forward['cpu'](_op_ctx(), p, vals, [out], [])
    ref = _fc_reference(dict(flatten=flatten), *vals)[0]
    np.testing.assert_allclose(out, ref.reshape(expected), rtol=1e-12, atol=1e-12)


@given(shape=st.lists(st.integers(1, 4), min_size=2, max_size=3), num_hidden=st.integers(1, 4))
def test_wrong_weight_shape_names_both(shape, num_hidden):
    op = get_op('FullyConnected')
    p = op.parse_params(dict(num_hidden=num_hidden))
    K = int(np.prod(shape[1:]))
    bad = (num_hidden, K + 1)
    with pytest.raises(ShapeError) as e:
        op.infer_shape(p, [tuple(shape), bad, None], [], [None])
    msg = str(e.value)
    assert str(list(bad)) in msg and str((num_hidden, K)) in msg


def test_graph_shape_error_names_node():
    fc = sym.FullyConnected(sym.Variable('data'), num_hidden=10, name='fc1')
    with pytest.raises(ShapeError, match='fc1'):
        fc.infer_shape(data=(1, 100), fc1_weight=(9, 7))


def test_batch_inferred_back_from_output():
    op = get_op('FullyConnected')
    p = op.parse_params(dict(num_hidden=3))
    ins, outs, _ = op.infer_shape(p, [None, (3, 6), None], [], out_shapes=[(5, 3)])
    assert ins[0] == (5, 6) and outs[0] == (5, 3)


def test_known_gradients():
    data = np.arange(6.0).reshape(2, 3)
    weight = np.array([[1.0, 0.0, -1.0], [0.5, 0.5, 0.5]])
    bias = np.array([0.1, -0.2])
    og = np.array([[1.0, 2.0], [-1.0, 0.5]])
    fc = sym.FullyConnected(sym.Variable('data'), num_hidden=2, name='fc')
    check_symbolic_backward(fc, dict(data=data, fc_weight=weight, fc_bias=bias), [og],
                            dict(data=og @ weight, fc_weight=og.T @ data, fc_bias=og.sum(0)),
                            rtol=1e-10, atol=1e-12, dtype='float64')


@pytest.mark.parametrize('req', ['write', 'add', 'null'])
def test_float32_kernels_and_req(req):
    op = get_op('FullyConnected')
    p = op.parse_params(dict(num_hidden=4))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 2, 5)).astype(np.float32)
    w = rng.standard_normal((4, 10)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    og = rng.standard_normal((3, 4)).astype(np.float32)
    out = np.empty((3, 4), np.float32)
    ctx = _op_ctx()
    op.forward['cpu'](ctx, p, [x, w, b], [out], [])
    np.testing.assert_allclose(out, x.reshape(3, -1) @ w.T + b, rtol=1e-5, atol=1e-5)
    init = [rng.standard_normal(a.shape).astype(np.float32) for a in (x, w, b)]
    grads = [g.copy() for g in init]
    op.backward['cpu'](ctx, p, [og], [x, w, b], [out], grads, [req] * 3, [])
    expect = [(og @ w).reshape(x.shape), og.T @ x.reshape(3, -1), og.sum(0)]
    for g, i, e in zip(grads, init, expect):
        want = {'write': e, 'add': i + e, 'null': i}[req]
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize('flatten', [True, False])
def test_gpu_kernels_match_cpu(flatten):
    from numba import cuda
    op = get_op('FullyConnected')
    p = op.parse_params(dict(num_hidden=3, flatten=flatten))
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4))
    K = 12 if flatten else 4
    w, b = rng.standard_normal((3, K)), rng.standard_normal(3)
    oshape = (2, 3) if flatten else (2, 3, 3)
    og = rng.standard_normal(oshape)
    cpu_out = np.empty(oshape)
    op.forward['cpu'](_op_ctx(), p, [x, w, b], [cpu_out], [])
    cpu_g = [np.ones_like(a) for a in (x, w, b)]
    op.backward['cpu'](_op_ctx(), p, [og], [x, w, b], [cpu_out], cpu_g, ['add'] * 3, [])
    d = [cuda.to_device(a) for a in (x, w, b)]
    d_out = cuda.to_device(np.zeros(oshape))
    op.forward['gpu'](_op_ctx(), p, d, [d_out], [])
    d_g = [cuda.to_device(np.ones_like(a)) for a in (x, w, b)]
    op.backward['gpu'](_op_ctx(), p, [cuda.to_device(og)], d, [d_out], d_g, ['add'] * 3, [])
    np.testing.assert_allclose(d_out.copy_to_host(), cpu_out, rtol=1e-10, atol=1e-12)
    for g, c in zip(d_g, cpu_g):
        np.testing.assert_allclose(g.copy_to_host(), c, rtol=1e-10, atol=1e-12)


def test_mixed_dtypes_raise_dtype_error():
    from ffnumba.base import DTypeError
    op = get_op('FullyConnected')
    p = op.parse_params(dict(num_hidden=2))
    x = np.zeros((3, 4))
    w, b = np.zeros((2, 4), np.float32), np.zeros(2)
    with pytest.raises(DTypeError, match='weight'):
        op.forward['cpu'](_op_ctx(), p, [x, w, b], [np.empty((3, 2))], [])


@pytest.mark.parametrize('small', [False, True])
@pytest.mark.parametrize('req', ['write', 'add', 'null'])
@pytest.mark.parametrize('shape', [(40, 7, 50), (1, 9, 64), (64, 5, 3)])
def test_thread_split_matches_numpy(req, shape, small, monkeypatch):
    """Products split over pool threads (H ranges for y and dW, M ranges for dx) give numpy's values."""
    from ffnumba.ops.nn import fully_connected as fcm
    M, K, H = shape
    splits = []
    real = fcm.run_split
    monkeypatch.setattr(fcm, 'PAR_MIN_MACS', 1 << 60 if small else 0)
    monkeypatch.setattr(fcm, 'pool_used', lambda name: True)
    monkeypatch.setattr(fcm, 'split_threads', lambda n: max(1, min(3, n)))
    monkeypatch.setattr(fcm, 'run_split', lambda part, nt: (splits.append(nt), real(part, nt)))
    op = get_op('FullyConnected')
    p = op.parse_params(dict(num_hidden=H))
    rng = np.random.default_rng(5)
    x = rng.standard_normal((M, K))
    w = rng.standard_normal((H, K))
    b = rng.standard_normal(H)
    og = rng.standard_normal((M, H))
    out = np.empty((M, H))
    ctx = _op_ctx()
    op.forward['cpu'](ctx, p, [x, w, b], [out], [])
    np.testing.assert_allclose(out, x @ w.T + b, rtol=1e-12, atol=1e-12)
    init = [rng.standard_normal(a.shape) for a in (x, w, b)]
    grads = [g.copy() for g in init]
    op.backward['cpu'](ctx, p, [og], [x, w, b], [out], grads, [req] * 3, [])
    for g, i, e in zip(grads, init, [og @ w, og.T @ x, og.sum(0)]):
        want = {'write': e, 'add': i + e, 'null': i}[req]
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)
    if small:       # below the threshold: one thread, BLAS held to one thread
        assert splits == []
    else:
        assert splits and all(n > 1 for n in splits)
