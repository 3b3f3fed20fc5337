"""The training executor's memory plan: what backward reads is kept, the rest is shared.

Ops declare what their backward reads (``OpDef.backward_reads``) and whether
gradient passes through them (``OpDef.passes_gradient``, False for
``BlockGrad``). Nodes that no gradient reaches run no backward, and their
outputs share buffers as in an inference executor; gradients must not change.
"""
import re

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
    """The bytes the executor's memory plan allocated (``Total N MB allocated``)."""
    return exe._plan.total_bytes


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
    assert get_op('Convolution').backward_reads == ('data', 'weight')
    assert get_op('RNN').backward_reads == ('inputs', 'outputs')   # the default
    assert get_op('exp').backward_reads == ('outputs',)   # from make_unary's grad_uses
    assert get_op('log').backward_reads == ('inputs',)
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


def resnetish():
    """Convolution, BatchNorm, ReLU, a residual add, pooling, a concat, x * x (one value
    twice into one node), Flatten, Dropout and a loss: every kind of sharing at once."""
    data = sym.Variable('data')
    c1 = sym.Convolution(data, num_filter=4, kernel=(3, 3), pad=(1, 1), name='c1')
    b1 = sym.Activation(sym.BatchNorm(c1, fix_gamma=False, name='bn1'), act_type='relu',
                        name='r1')
    c2 = sym.Convolution(b1, num_filter=4, kernel=(3, 3), pad=(1, 1), name='c2')
    res = sym.Activation(c2 + c1, act_type='relu', name='r2')
    sq = sym.elemwise_mul(res, res, name='sq')
    cat = sym.Concat(sym.Pooling(sq, kernel=(2, 2), stride=(2, 2), pool_type='max', name='mp'),
                     sym.Pooling(res, kernel=(2, 2), stride=(2, 2), pool_type='avg', name='ap'),
                     dim=1, name='cat')
    x = sym.Dropout(sym.Flatten(cat, name='fl'), p=0.0, name='drop')
    fc = sym.FullyConnected(sym.tanh(x, name='t'), num_hidden=3, name='fc')
    return sym.SoftmaxOutput(fc, name='sm')


def _train(net, req, env, monkeypatch, monitor=None):
    if env is None:
        monkeypatch.delenv('FFNUMBA_MEMORY_PLAN', raising=False)
    else:
        monkeypatch.setenv('FFNUMBA_MEMORY_PLAN', env)
    exe = net.simple_bind(ff.cpu(), data=(2, 3, 6, 6), sm_label=(2,), grad_req=req,
                          type_dict={'data': 'float64'})
    rng = np.random.RandomState(5)
    for name, a in exe.arg_dict.items():
        a[:] = rng.randint(0, 3, a.shape) if name == 'sm_label' else rng.uniform(-1, 1, a.shape)
    for a in exe.aux_arrays:
        a[:] = 1.0
    seen = {}
    if monitor is not None:
        exe.set_monitor_callback(lambda n, a: seen.setdefault(n, []).append(a.asnumpy().copy()),
                                 monitor_all=monitor)
    init = {k: rng.uniform(-1, 1, g.shape) for k, g in exe.grad_dict.items() if g is not None}
    for k, g in exe.grad_dict.items():
        if g is not None:
            g[:] = init[k]
    for _ in range(2):
        outs = [o.asnumpy().copy() for o in exe.forward(is_train=True)]
        exe.backward()
    grads = {k: g.asnumpy().copy() for k, g in exe.grad_dict.items() if g is not None}
    return exe, outs, grads, seen


@pytest.mark.parametrize('req', ['write', 'add', 'mixed'])
def test_shared_gradient_buffers_give_the_gradients_of_unshared_ones(req, monkeypatch):
    """Intermediate gradients share storages (with each other and with dead forward values)
    and the argument gradients stay exact for 'write', 'add' and 'null'."""
    net = resnetish()
    if req == 'mixed':
        req = {n: ('add' if i % 3 == 0 else 'null' if i % 3 == 1 else 'write')
               for i, n in enumerate(net.list_arguments())}
    planned, outs, grads, _ = _train(net, req, None, monkeypatch)
    plain, outs0, grads0, _ = _train(net, req, '0', monkeypatch)
    for a, b in zip(outs, outs0):
        np.testing.assert_array_equal(a, b)
    assert grads.keys() == grads0.keys() and grads
    for k in grads:
        np.testing.assert_allclose(grads[k], grads0[k], rtol=1e-12, atol=1e-15, err_msg=k)
    assert planned._plan.total_bytes < plain._plan.total_bytes
    assert len(planned._plan.nbytes) < len(plain._plan.nbytes)
    held = [h for h in planned._plan.held if any(k == 'grad' for k, _ in h)]
    assert any(len(h) > 1 for h in held)         # some gradient storage holds several values
    assert all(len(h) == 1 for h in plain._plan.held)


def test_monitor_all_sees_the_values_of_an_unshared_executor(monkeypatch):
    """With monitor_all the backward reports every forward input, so the executor stops
    sharing what a backward does not read; the reports equal those of the unshared plan."""
    net = resnetish()
    _, _, grads, seen = _train(net, 'write', None, monkeypatch, monitor=True)
    _, _, grads0, seen0 = _train(net, 'write', '0', monkeypatch, monitor=True)
    assert seen.keys() == seen0.keys()
    assert any(k.endswith('_backward_input1') for k in seen)
    for k in seen:
        for a, b in zip(seen[k], seen0[k]):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15, err_msg=k)
    for k in grads:
        np.testing.assert_allclose(grads[k], grads0[k], rtol=1e-12, atol=1e-15)


def test_debug_str_lists_backward_nodes_and_storages_like_mxnet():
    exe = resnetish().simple_bind(ff.cpu(), data=(2, 3, 6, 6), sm_label=(2,),
                                  grad_req={'c1_weight': 'write', 'fc_weight': 'write'})
    text = exe.debug_str()
    assert text.startswith(exe._symbol.debug_str())
    block = text.split('Op:_backward_Convolution, Name=c2_backward\n')[1].split('---')[0]
    lines = block.splitlines()
    assert lines[0] == 'Inputs:'
    # dy of c2 (written by the residual add's backward), then the values conv reads
    assert lines[1].startswith('\targ[0]=_plus0_backward(1) [s') or \
        lines[1].startswith('\targ[0]=') and '_backward(' in lines[1]
    assert lines[2] == '\targ[1]=r1(0)' and lines[3] == '\targ[2]=c2_weight(0) version=0'
    assert 'Control deps:\n\tcdep[0]=c2' in block
    assert 'Op:_backward_SoftmaxOutput, Name=sm_backward\nInputs:\n\targ[0]=sm_label(0) ' \
           'version=0\n\targ[1]=sm(0)' in text
    assert '\tfl (Flatten): backward runs; fl_output shared [s' in text
    assert '\tr1 (Activation): backward runs; r1_output kept [s' in text
    mb = exe._plan.total_bytes >> 20
    assert text.endswith('Total %d MB allocated\nTotal 0 TempSpace resource requested\n' % mb)
    assert len(re.findall(r'^\ts\d+: ', text, re.M)) == len(exe._plan.nbytes)


@pytest.mark.parametrize('op_name, wrong', [('Convolution', ('weight',)),
                                            ('SoftmaxOutput', ('output',)),
                                            ('Pooling', ())])
def test_a_wrong_backward_reads_declaration_is_caught(op_name, wrong, monkeypatch):
    """check_backward_reads (OpCase.test_backward_reads) fails for a declaration that leaves
    out a value the backward reads."""
    from ffnumba.testing.reads import check_backward_reads
    data = sym.Variable('data')
    if op_name == 'Convolution':
        net = sym.Convolution(data, num_filter=2, kernel=(2, 2), name='op')
        loc = {'data': np.random.RandomState(0).uniform(-1, 1, (2, 3, 4, 4))}
    elif op_name == 'Pooling':     # a 4x4 window: smaller 2-D max windows keep the forward's
        # maximum positions, and their training backward reads no data
        net = sym.Pooling(data, kernel=(4, 4), pool_type='max', name='op')
        loc = {'data': np.random.RandomState(0).uniform(-1, 1, (2, 3, 8, 8))}
    else:
        net = sym.SoftmaxOutput(data, sym.Variable('label'), name='op')
        loc = {'data': np.random.RandomState(0).uniform(-1, 1, (4, 3)),
               'label': np.array([0., 2., 1., 1.])}
    for n, s in zip(net.list_arguments(), net.infer_shape(data=loc['data'].shape)[0]):
        loc.setdefault(n, np.random.RandomState(1).uniform(-1, 1, s))
    head = op_name != 'SoftmaxOutput'
    check_backward_reads(net, loc, op_name=op_name, head_grads=head)     # the real one holds
    monkeypatch.setattr(get_op(op_name), 'backward_reads', wrong)
    with pytest.raises(AssertionError, match='declares backward_reads'):
        check_backward_reads(net, loc, op_name=op_name, head_grads=head)


@pytest.mark.gpu
def test_gpu_plan_shares_equal_shapes_and_matches_cpu():
    """On a GPU values share storages of equal shape and dtype; gradients equal the CPU's."""
    net = resnetish()
    grads = []
    for ctx in (ff.cpu(), ff.gpu(0)):
        exe = net.simple_bind(ctx, data=(2, 3, 6, 6), sm_label=(2,),
                              type_dict={'data': 'float64'})
        rng = np.random.RandomState(5)
        for name, a in exe.arg_dict.items():
            a[:] = rng.randint(0, 3, a.shape) if name == 'sm_label' \
                else rng.uniform(-1, 1, a.shape)
        for _ in range(2):
            exe.forward(is_train=True)
            exe.backward()
        grads.append({k: g.asnumpy() for k, g in exe.grad_dict.items() if g is not None})
        if ctx.device_type == 'gpu':
            assert any(len(h) > 1 for h in exe._plan.held)
    for k in grads[0]:
        np.testing.assert_allclose(grads[1][k], grads[0][k], rtol=1e-10, atol=1e-12, err_msg=k)


def test_reshaped_executor_plans_its_gradients_and_matches_a_fresh_one():
    """Executor.reshape: forward values are views of the old executor's storages, the
    intermediate gradients get a plan of their own; gradients equal a fresh bind's."""
    net = resnetish()
    big = net.simple_bind(ff.cpu(), data=(4, 3, 6, 6), sm_label=(4,),
                          type_dict={'data': 'float64'})
    small = big.reshape(data=(2, 3, 6, 6), sm_label=(2,))
    fresh = net.simple_bind(ff.cpu(), data=(2, 3, 6, 6), sm_label=(2,),
                            type_dict={'data': 'float64'})
    rng = np.random.RandomState(2)
    for name, a in fresh.arg_dict.items():
        a[:] = rng.randint(0, 3, a.shape) if name == 'sm_label' else rng.uniform(-1, 1, a.shape)
        small.arg_dict[name][:] = a.asnumpy()
    big.forward(is_train=True)
    big.backward()
    for exe in (small, fresh):
        exe.forward(is_train=True)
        exe.backward()
    assert small._plan.grad and not small._plan.fwd
    for k, g in fresh.grad_dict.items():
        np.testing.assert_allclose(small.grad_dict[k].asnumpy(), g.asnumpy(), rtol=1e-12,
                                   atol=1e-15, err_msg=k)
