"""The bound call plan (``ffnumba._executor_run``): wrappers resolved at bind, errors still named."""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba.jit import direct
from ffnumba.ops import get_op


def _net():
    x = ff.sym.Variable('data')
    h = ff.sym.Activation(ff.sym.FullyConnected(x, num_hidden=3, name='fc'), act_type='tanh',
                          name='act')
    return ff.sym.sum(h * 2, name='total')


def _bound(dtype):
    exe = _net().simple_bind(ff.cpu(), data=(2, 4), type_dict={'data': dtype})
    rng = np.random.default_rng(0)
    for name, a in exe.arg_dict.items():
        a[:] = rng.uniform(-1, 1, a.shape).astype(dtype)
    return exe


def _reference(exe):
    args = {k: v.asnumpy().astype(np.float64) for k, v in exe.arg_dict.items()}
    h = np.tanh(args['data'] @ args['fc_weight'].T + args['fc_bias'])
    return (h * 2).sum(), 2 * (1 - h * h) @ args['fc_weight']


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'float16'])
def test_forward_backward_match_numpy_for_each_dtype(dtype):
    exe = _bound(dtype)
    total, dx = _reference(exe)
    for _ in range(2):          # the second step runs the plan warm
        out = exe.forward(is_train=True)[0].asnumpy()
        exe.backward(ff.nd.ones(out.shape, dtype=dtype))
    tol = 2e-2 if dtype == 'float16' else 1e-5
    np.testing.assert_allclose(out.astype(np.float64).reshape(()), total, rtol=tol, atol=tol)
    np.testing.assert_allclose(exe.grad_dict['data'].asnumpy().astype(np.float64), dx,
                               rtol=tol, atol=tol)


def test_activation_resolved_to_its_function_at_bind():
    exe = _bound('float32')
    fns = [call[0] for call in exe._calls._fwd]
    act = get_op('Activation')
    assert act.forward['cpu'] not in fns            # no per-step act_type lookup
    assert not any(hasattr(f, '_ff_passthrough') for f in fns)   # no float16/empty wrapper


def test_float16_keeps_its_wrapper():
    op = get_op('Activation')
    p = op.params.parse('Activation', {'act_type': 'relu'})
    x16 = np.zeros((2, 3), np.float16)
    x32 = np.zeros((2, 3), np.float32)
    fwd = op.compute('cpu')[0]
    assert hasattr(direct(fwd, p, [x16], [x16.copy()], []), '_ff_passthrough')
    assert not hasattr(direct(fwd, p, [x32], [x32.copy()], []), '_ff_passthrough')
    empty = np.zeros((0, 3), np.float32)
    assert direct(fwd, p, [empty], [empty.copy()], []) is fwd     # empty outputs stay guarded


def test_kernel_errors_still_name_the_node(monkeypatch):
    exe = _bound('float32')
    exe.forward(is_train=True)
    exe.backward(ff.nd.ones((1,)))

    def boom(*args):
        raise ValueError('kernel exploded')
    # swap the resolved call of the activation node for one that fails
    calls = exe._calls
    k = [i for i, nid in enumerate(calls._fwd_nids) if exe._view.nodes[nid].name == 'act'][0]
    calls._fwd[k] = (boom,) + calls._fwd[k][1:]
    with pytest.raises(ff.base.FFError, match='Error in operator act .*kernel exploded'):
        exe.forward(is_train=True)
    k = [i for i, nid in enumerate(calls._bwd_nids) if exe._view.nodes[nid].name == 'act'][0]
    calls._bwd[k] = (boom,) + calls._bwd[k][1:]
    with pytest.raises(ff.base.FFError, match='Error in operator act .*backward.*kernel exploded'):
        exe.backward(ff.nd.ones((1,)))


def test_is_train_reaches_every_node_when_it_changes():
    x = ff.sym.Variable('data')
    net = ff.sym.Dropout(x, p=0.5, name='drop')
    exe = net.simple_bind(ff.cpu(), data=(200, 50), grad_req='null')
    exe.arg_dict['data'][:] = 1
    a = exe.forward(is_train=False)[0].asnumpy()
    assert (a == 1).all()
    b = exe.forward(is_train=True)[0].asnumpy()
    assert (b == 0).any() and (b == 2).any()
    c = exe.forward(is_train=False)[0].asnumpy()
    assert (c == 1).all()
