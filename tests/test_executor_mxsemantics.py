"""Executor semantics MXNet 1.9.1 code relies on: zero-gradient heads, backward
without a training forward, and memory shared by ``Executor.reshape``."""
import numpy as np
import pytest

import ffnumba as mx


@pytest.mark.parametrize('make', [
    lambda x: mx.sym.shape_array(x),
    lambda x: mx.sym.size_array(x),
    lambda x: mx.sym.argmax(x, axis=1, keepdims=True),
    lambda x: mx.sym.argsort(x, axis=1),
    lambda x: mx.sym.topk(x, k=2, ret_typ='indices'),
    lambda x: x > 1,
    lambda x: mx.sym.broadcast_equal(x, x),
])
def test_zero_gradient_heads_ignore_out_grads(make):
    x = mx.sym.var('x')
    xg = mx.nd.ones((3, 4))
    exe = make(x).bind(mx.cpu(), args={'x': mx.nd.array(np.random.rand(3, 4))},
                       args_grad={'x': xg})
    exe.forward(is_train=True)
    exe.backward([mx.nd.ones((7,))])    # any shape: never read
    np.testing.assert_array_equal(xg.asnumpy(), 0)
    xg[:] = 1
    exe.backward()                      # no head gradient needed
    np.testing.assert_array_equal(xg.asnumpy(), 0)


def test_non_loss_head_still_needs_gradient():
    x = mx.sym.var('x')
    exe = (x * 2).bind(mx.cpu(), args={'x': mx.nd.ones((2,))}, args_grad={'x': mx.nd.ones((2,))})
    exe.forward(is_train=True)
    with pytest.raises(mx.base.FFError, match='head_gradient is required'):
        exe.backward()
    with pytest.raises(mx.base.ShapeError):
        exe.backward([mx.nd.ones((3,))])


def test_backward_without_training_forward():
    data = mx.sym.var('data')
    grad = mx.nd.empty((3, 4))
    exe = mx.sym.repeat(data, repeats=2, axis=0).bind(
        mx.cpu(), args=[mx.nd.ones((3, 4))], args_grad=[grad])
    exe.backward(mx.nd.ones((6, 4)))    # before any forward, as MXNet allows
    np.testing.assert_array_equal(grad.asnumpy(), 2)
    exe.forward(is_train=False)
    exe.backward(mx.nd.ones((6, 4)) * 3)
    np.testing.assert_array_equal(grad.asnumpy(), 6)


def test_reshape_shares_output_memory():
    x = mx.sym.var('x')
    exe = mx.sym.FullyConnected(x, num_hidden=4).simple_bind(mx.cpu(), x=(5, 4),
                                                             grad_req='null')
    exe.arg_arrays[0][:] = 1
    exe.arg_arrays[1][:] = 1
    exe.arg_arrays[2][:] = 0
    small = exe.reshape(x=(3, 4))
    small.forward(is_train=False)
    np.testing.assert_array_equal(small.outputs[0].asnumpy(), 4)
    np.testing.assert_array_equal(exe.outputs[0].asnumpy()[:3], 4)   # the same memory
    np.testing.assert_array_equal(exe.outputs[0].asnumpy()[3:], 0)
    big = exe.reshape(allow_up_sizing=True, x=(6, 4))
    big.arg_arrays[0][:] = 0                     # a larger input is a new array
    np.testing.assert_array_equal(exe.arg_arrays[0].asnumpy(), 1)
    np.testing.assert_array_equal(big.arg_arrays[1].asnumpy(), 1)  # weights shared
    big.forward()
    assert big.outputs[0].shape == (6, 4)


def _two_stage_net():
    with mx.AttrScope(ctx_group='stage1'):
        data = mx.sym.var('data')
        act = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=8, name='fc1'),
                                act_type='relu')
    with mx.AttrScope(ctx_group='stage2'):
        out = mx.sym.FullyConnected(act, num_hidden=3, name='fc2')
    return out


def test_group2ctx_places_arrays_on_the_group_contexts():
    net = _two_stage_net()
    g2c = {'stage1': mx.cpu(1), 'stage2': mx.cpu(2)}
    exe = net.simple_bind(mx.cpu(0), group2ctx=g2c, data=(2, 5))
    want = {'data': 1, 'fc1_weight': 1, 'fc1_bias': 1, 'fc2_weight': 2, 'fc2_bias': 2}
    for name, a, g in zip(net.list_arguments(), exe.arg_arrays, exe.grad_arrays):
        assert a.context == mx.cpu(want[name]) and g.context == a.context
    ref = net.simple_bind(mx.cpu(0), data=(2, 5))
    for e in (exe, ref):
        for name, a in e.arg_dict.items():
            a[:] = np.arange(a.size).reshape(a.shape) % 7 * 0.1
        e.forward(is_train=True)
        e.backward(mx.nd.ones((2, 3)))
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), ref.outputs[0].asnumpy())
    np.testing.assert_allclose(exe.grad_dict['fc1_weight'].asnumpy(),
                               ref.grad_dict['fc1_weight'].asnumpy())
    with pytest.raises(mx.base.FFError, match='across device types'):
        net.simple_bind(mx.cpu(0), group2ctx={'stage1': mx.gpu(0)}, data=(2, 5))


def test_module_group2ctxs_per_device():
    net = _two_stage_net()
    for g2c in ({'stage1': mx.cpu(2), 'stage2': [mx.cpu(3), mx.cpu(4)]},
                [{'stage1': mx.cpu(2), 'stage2': mx.cpu(3)}, {'stage1': mx.cpu(4)}]):
        mod = mx.mod.Module(net, context=[mx.cpu(0), mx.cpu(1)], label_names=None,
                            group2ctxs=g2c)
        mod.bind(data_shapes=[('data', (4, 5))], inputs_need_grad=True)
        mod.init_params()
        mod.forward(mx.io.DataBatch(data=[mx.nd.ones((4, 5))]), is_train=True)
        mod.backward([mx.nd.ones((4, 3))])
        assert mod.get_input_grads()[0].shape == (4, 5)
        execs = mod._exec_group.execs
        assert execs[0].arg_dict['fc1_weight'].context == mx.cpu(2)
    with pytest.raises(mx.base.ParamError, match='2 contexts for 3 devices'):
        mx.mod.Module(net, context=[mx.cpu(0)] * 3, label_names=None,
                      group2ctxs={'stage1': [mx.cpu(1), mx.cpu(2)]}).bind(
                          data_shapes=[('data', (3, 5))])
