"""The training executor's memory plan: what backward reads is kept, the rest is shared.

Ops declare what their backward reads (``OpDef.backward_reads``) and whether
gradient passes through them (``OpDef.passes_gradient``, False for
``BlockGrad``). Nodes that no gradient reaches run no backward, and their
outputs share buffers as in an inference executor; gradients must not change.
"""
import numpy as np
import pytest

import ffnumba as ff
import ffnumba.symbol as sym
from ffnumba.base import FFError
from ffnumba.name import NameManager
from ffnumba.ops.registry import OpDef, register_op, get_op


@pytest.fixture(autouse=True)
def _fresh_names():
    with NameManager():
        yield


def tower(x, depth, prefix, width=6):
    for i in range(depth):
        x = sym.Activation(sym.FullyConnected(x, num_hidden=width, name='%sfc%d' % (prefix, i)),
                           act_type='tanh', name='%sact%d' % (prefix, i))
    return x


def blocked_net():
    """A loss behind stop_gradient, plus a second loss on its own branch."""
    data = sym.Variable('data')
    label = sym.Variable('label')
    top = sym.FullyConnected(sym.stop_gradient(tower(data, 3, 'b')), num_hidden=3, name='head')
    loss1 = sym.SoftmaxOutput(top, label, name='sm')
    loss2 = sym.MakeLoss(sym.sum(sym.square(tower(data, 2, 'c'))), name='l2')
    return sym.Group([loss1, loss2])


def internal_bytes(exe):
    bound = {id(a._data) for a in exe.arg_arrays + exe.aux_arrays}
    bound |= {id(g._data) for g in exe.grad_arrays if g is not None}
    seen, total = set(bound), 0
    for a in [x._data for x in exe._nd_of] + [g for g in exe._gbuf if g is not None]:
        if id(a) not in seen:
            seen.add(id(a))
            total += a.nbytes
    return total


def bind(net, req='write', seed=0):
    exe = net.simple_bind(ff.cpu(), data=(5, 4), label=(5,), grad_req=req,
                          type_dict={'data': 'float64', 'label': 'float64'})
    rng = np.random.RandomState(seed)
    for name, a in exe.arg_dict.items():
        a[:] = rng.randint(0, 3, a.shape) if name == 'label' else rng.uniform(-1, 1, a.shape)
    return exe


def loss_parts():
    """Each loss of :func:`blocked_net` alone, the stopped value as a plain input."""
    data, label = sym.Variable('data'), sym.Variable('label')
    with NameManager():
        top = sym.FullyConnected(sym.Variable('stopped'), num_hidden=3, name='head')
        part1 = sym.SoftmaxOutput(top, label, name='sm')
    with NameManager():
        part2 = sym.MakeLoss(sym.sum(sym.square(tower(data, 2, 'c'))), name='l2')
    return part1, part2


def test_nodes_behind_stop_gradient_run_no_backward_and_share_buffers():
    net = blocked_net()
    exe = bind(net)
    text = exe.debug_str()
    assert 'bfc0 (FullyConnected): backward skipped; bfc0_output shared' in text
    assert 'head (FullyConnected): backward runs' in text
    assert 'cfc0 (FullyConnected): backward runs' in text
    assert 'cact0 (Activation): backward runs; cact0_output kept' in text
    assert text.splitlines()[-2].startswith('Total ') and text.endswith(
        'Total 0 TempSpace resource requested\n')
    # the same graph without stop_gradient keeps every value of the b tower
    data, label = sym.Variable('data'), sym.Variable('label')
    with NameManager():
        top = sym.FullyConnected(tower(data, 3, 'b'), num_hidden=3, name='head')
        plain = sym.Group([sym.SoftmaxOutput(top, label, name='sm'),
                           sym.MakeLoss(sym.sum(sym.square(tower(data, 2, 'c'))), name='l2')])
    assert internal_bytes(exe) < internal_bytes(bind(plain))


def test_gradients_unchanged_by_the_plan():
    net = blocked_net()
    exe = bind(net)
    outs = [o.asnumpy().copy() for o in exe.forward(is_train=True)]
    exe.backward()
    grads = {k: v.asnumpy().copy() for k, v in exe.grad_dict.items() if v is not None}
    # behind stop_gradient only: zero ('write')
    for k in ('bfc0_weight', 'bfc1_bias', 'bfc2_weight'):
        assert not grads[k].any(), k
    # the head's gradient: the same head on the stopped value given as an input
    part1, part2 = loss_parts()
    feat = tower(sym.Variable('data'), 3, 'b')
    with NameManager():
        fexe = feat.simple_bind(ff.cpu(), grad_req='null', data=(5, 4),
                                type_dict={'data': 'float64'})
    for k, a in fexe.arg_dict.items():
        a[:] = exe.arg_dict[k].asnumpy()
    value = fexe.forward()[0].asnumpy()
    e1 = part1.simple_bind(ff.cpu(), grad_req='write', stopped=(5, 6), label=(5,),
                           type_dict={'stopped': 'float64', 'label': 'float64'})
    e1.arg_dict['stopped'][:] = value
    for k in ('head_weight', 'head_bias', 'label'):
        e1.arg_dict[k][:] = exe.arg_dict[k].asnumpy()
    np.testing.assert_allclose(e1.forward(is_train=True)[0].asnumpy(), outs[0], rtol=1e-12)
    e1.backward()
    for k in ('head_weight', 'head_bias'):
        np.testing.assert_allclose(grads[k], e1.grad_dict[k].asnumpy(), rtol=1e-12)
    # the second loss's branch and the data gradient come from it alone
    e2 = part2.simple_bind(ff.cpu(), grad_req='write', data=(5, 4),
                           type_dict={'data': 'float64'})
    for k, a in e2.arg_dict.items():
        a[:] = exe.arg_dict[k].asnumpy()
    np.testing.assert_allclose(e2.forward(is_train=True)[0].asnumpy(), outs[1], rtol=1e-12)
    e2.backward()
    for k in ('cfc0_weight', 'cfc1_bias', 'data'):
        np.testing.assert_allclose(grads[k], e2.grad_dict[k].asnumpy(), rtol=1e-12, err_msg=k)


def test_add_leaves_unreached_gradients_alone_and_write_zeroes_them_every_time():
    exe = bind(blocked_net(), req='add')
    exe.grad_dict['bfc0_weight'][:] = 7.0
    for _ in range(2):
        exe.forward(is_train=True)
        exe.backward()
    assert (exe.grad_dict['bfc0_weight'].asnumpy() == 7.0).all()
    w = bind(blocked_net(), req='write')
    w.grad_dict['bfc0_weight'][:] = 7.0
    w.forward(is_train=True)
    w.backward()
    assert not w.grad_dict['bfc0_weight'].asnumpy().any()


def test_repeated_steps_stay_equal_to_a_fresh_executor():
    """Shared buffers carry nothing from one batch to the next."""
    net = blocked_net()
    a = bind(net, seed=1)
    for _ in range(3):
        a.forward(is_train=True)
        a.backward()
    b = bind(net, seed=1)
    b.forward(is_train=True)
    b.backward()
    for k, g in a.grad_dict.items():
        if g is not None:
            np.testing.assert_allclose(g.asnumpy(), b.grad_dict[k].asnumpy(), rtol=1e-12)


def test_blockgrad_declares_it_and_registration_checks_backward_reads():
    op = get_op('stop_gradient')
    assert op.passes_gradient is False and op.backward_reads == ()
    assert get_op('FullyConnected').backward_reads == ('inputs',)
    assert get_op('Convolution').backward_reads == ('inputs', 'outputs')   # the default
    fc = get_op('FullyConnected')
    bad = OpDef(name='_test_bad_reads', arguments=['data'], infer_shape=fc.infer_shape,
                forward=fc.forward, backward=fc.backward, backward_reads=('grads',))
    with pytest.raises(FFError, match='backward_reads'):
        register_op(bad)


@pytest.mark.parametrize('act', ['relu', 'tanh', 'softsign'])
def test_mlp_shares_what_backward_does_not_read_and_gradients_check(act):
    """FullyConnected's backward reads its inputs, Activation its output (softsign: its
    input): in an MLP the other values share buffers, and gradients still check."""
    data = sym.Variable('data')
    x = data
    for i in range(4):
        x = sym.Activation(sym.FullyConnected(x, num_hidden=5, name='fc%d' % i), act_type=act,
                           name='act%d' % i)
    exe = x.simple_bind(ff.cpu(), data=(3, 4), type_dict={'data': 'float64'})
    text = exe.debug_str()
    if act == 'softsign':
        assert 'fc1 (FullyConnected): backward runs; fc1_output kept' in text
        assert 'act1 (Activation): backward runs; act1_output kept' in text  # read by fc2
    else:
        assert 'fc1 (FullyConnected): backward runs; fc1_output shared' in text
        assert 'act1 (Activation): backward runs; act1_output kept' in text
    rng = np.random.RandomState(3)
    loc = {n: rng.uniform(0.2, 1, s) for n, s in zip(x.list_arguments(),
                                                       x.infer_shape(data=(3, 4))[0])}
    ff.testing.check_numeric_gradient(x, loc, rtol=1e-5, atol=1e-7)
