"""Dropout: identity in eval, scaled Bernoulli mask in training, shared masks along axes."""
import numpy as np
import pytest

import ffnumba as ff
import ffnumba.symbol as sym
from ffnumba.base import ParamError
from ffnumba.ops.registry import OpContext, get_op
from ffnumba.testing import OpCase, bind_numpy


class TestDropoutEval(OpCase):
    """Outside training Dropout is the identity (forward and gradient)."""
    op = 'Dropout'
    params = [{}, dict(p=0.3, axes=(1,))]
    shapes = [dict(data=(2, 3)), dict(data=(2, 3, 4))]
    is_train = False

    def reference(self, p, data):
        return [data]


def _run(p_kw, x, is_train=True, rng=0, state=None, og=None, req='write'):
    op = get_op('Dropout')
    p = op.parse_params(p_kw)
    state = {} if state is None else state
    ctx = OpContext(is_train, None, state, np.random.default_rng(rng), 'drop')
    out = np.empty_like(x)
    op.forward['cpu'](ctx, p, [x], [out], [])
    grad = None
    if og is not None:
        grad = [np.ones_like(x)]
        op.backward['cpu'](ctx, p, [og], [x], [out], grad, [req], [])
        grad = grad[0]
    return out, grad, ctx


@pytest.mark.parametrize('p', [0.2, 0.5, 0.8])
def test_training_mask_statistics(p):
    x = np.ones((200, 100))
    out, _, _ = _run(dict(p=p), x)
    kept = out != 0
    assert abs(kept.mean() - (1 - p)) < 0.03
    np.testing.assert_allclose(out[kept], 1 / (1 - p), rtol=1e-6)


@pytest.mark.parametrize('req', ['write', 'add'])
def test_backward_reuses_the_forward_mask(req):
    rng = np.random.default_rng(1)
    x = rng.uniform(0.5, 1.5, (6, 7))
    og = rng.standard_normal(x.shape)
    out, g, _ = _run(dict(p=0.4), x, og=og, req=req)
    mask = out / x
    np.testing.assert_allclose(g, og * mask + (1.0 if req == 'add' else 0.0), rtol=1e-6)


def test_eval_is_identity_unless_always():
    x = np.random.default_rng(2).standard_normal((20, 30))
    out, g, _ = _run(dict(p=0.5), x, is_train=False, og=np.ones_like(x))
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(g, 1.0)
    out, _, _ = _run(dict(p=0.5, mode='always'), x, is_train=False)
    assert 0.3 < np.mean(out == 0) < 0.7


def test_p_zero_is_identity_in_training():
    x = np.random.default_rng(3).standard_normal((4, 5))
    out, _, _ = _run(dict(p=0.0), x)
    np.testing.assert_array_equal(out, x)


def test_axes_share_the_mask():
    out, _, _ = _run(dict(p=0.5, axes=(1,)), np.ones((8, 5, 6)))
    np.testing.assert_array_equal(out, np.broadcast_to(out[:, :1, :], out.shape))
    assert 0 < np.mean(out == 0) < 1
    out, _, _ = _run(dict(p=0.5, axes=(0, 2)), np.ones((4, 50, 3)))
    np.testing.assert_array_equal(out, np.broadcast_to(out[:1, :, :1], out.shape))


def test_mask_buffers_are_reused():
    state = {}
    x = np.ones((10, 10), np.float32)
    _run(dict(p=0.5), x, state=state)
    buf = state['dropout_mask']
    out2, _, _ = _run(dict(p=0.5), x, state=state, rng=5)
    assert state['dropout_mask'] is buf
    assert out2.dtype == np.float32


@pytest.mark.parametrize('bad', [1.0, 1.5, -0.1])
def test_bad_p(bad):
    with pytest.raises(ParamError) as e:
        get_op('Dropout').parse_params(dict(p=bad))
    assert str(e.value).startswith('Dropout: `p` must be')


def test_hidden_mask_output_and_cudnn_off_accepted():
    op = get_op('Dropout')
    p = op.parse_params(dict(p=0.1, cudnn_off=True))
    assert op.list_outputs(p) == ['output'] and op.hidden_outputs(p) == 1


def test_seed_makes_masks_repeat():
    s = sym.Dropout(sym.Variable('data'), p=0.5)
    x = np.ones((8, 8))
    outs = []
    for _ in range(2):
        ff.random.seed(42)
        exe = bind_numpy(s, dict(data=x), grad_req='null')
        exe.forward(is_train=True)
        outs.append(exe.outputs[0].asnumpy())
    np.testing.assert_array_equal(outs[0], outs[1])
    assert 0 < np.mean(outs[0] == 0) < 1


@pytest.mark.gpu
@pytest.mark.parametrize('kw', [dict(p=0.5), dict(p=0.3, axes=(0,))])
def test_gpu_kernels_match_cpu(kw):
    from numba import cuda
    rng = np.random.default_rng(0)
    x, og = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    out, g, _ = _run(kw, x, og=og, req='add')
    op = get_op('Dropout')
    p = op.parse_params(kw)
    ctx = OpContext(True, None, {}, np.random.default_rng(0), 'drop')
    dx, dout = cuda.to_device(x), cuda.to_device(np.zeros_like(x))
    op.forward['gpu'](ctx, p, [dx], [dout], [])
    dg = cuda.to_device(np.ones_like(x))
    op.backward['gpu'](ctx, p, [cuda.to_device(og)], [dx], [dout], [dg], ['add'], [])
    np.testing.assert_allclose(dout.copy_to_host(), out, rtol=1e-6)
    np.testing.assert_allclose(dg.copy_to_host(), g, rtol=1e-6)
