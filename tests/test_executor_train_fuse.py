"""Training fusion (``ffnumba._executor_train_fuse``): BatchNorm -> relu | clip as one call
forward and one backward.

Several SGD steps of a fused executor must give the bits of the unfused one
(``FFNUMBA_FUSE=0``): parameters, gradients (``'write'`` and ``'add'``), moving
statistics and outputs; the fused calls must really run where they apply and
never where the BatchNorm output is observable.
"""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba import _executor_train_fuse as tf_mod
from ffnumba.ops.nn import _bn_act
from ffnumba.ops.nn import batch_norm as bn_mod

S = ff.sym


@pytest.fixture
def calls(monkeypatch):
    """Counts the fused forward (``'f'``) and backward (``'b'``) calls of executors bound
    after it is set up."""
    seen = []
    real_f, real_b = _bn_act.forward, _bn_act.backward
    real_af, real_ab = tf_mod.add_relu_forward, _bn_act.relu_add_backward

    def counting(key, real):
        def call(*a):
            seen.append(key)
            return real(*a)
        return call
    monkeypatch.setattr(_bn_act, 'forward', counting('f', real_f))
    monkeypatch.setattr(_bn_act, 'backward', counting('b', real_b))
    monkeypatch.setattr(tf_mod, 'add_relu_forward', counting('af', real_af))
    monkeypatch.setattr(_bn_act, 'relu_add_backward', counting('ab', real_ab))
    return seen


def _cba(x, name, nf, act='relu', k=3, g=1, **bn_kw):
    x = S.Convolution(x, num_filter=nf, kernel=(k, k), pad=(k // 2, k // 2), num_group=g,
                      no_bias=True, name=name + '_conv')
    kw = dict(fix_gamma=False, eps=2e-5, momentum=0.8)
    kw.update(bn_kw)
    x = S.BatchNorm(x, name=name + '_bn', **kw)
    if act == 'relu':
        return S.Activation(x, act_type='relu', name=name + '_relu')
    if act == 'relu_op':
        return S.relu(x, name=name + '_relu')
    if act == 'relu6':
        return S.clip(x, a_min=0, a_max=6, name=name + '_relu6')
    if act == 'clip':
        return S.clip(x, a_min=-0.3, a_max=0.4, name=name + '_clip')
    return x


def _head(x):
    x = S.Pooling(x, global_pool=True, kernel=(1, 1), pool_type='avg', name='pool')
    x = S.FullyConnected(S.flatten(x), num_hidden=4, name='fc')
    return S.SoftmaxOutput(x, name='softmax')


def mobilenet_like():
    """Every activation kind; a depthwise layer; fix_gamma on and off."""
    x = _cba(S.Variable('data'), 'c0', 8)
    x = _cba(x, 'dw', 8, act='relu6', g=8)
    x = _cba(x, 'pw', 12, act='relu_op', k=1, fix_gamma=True)
    x = _cba(x, 'c1', 12, act='clip')
    return _head(x)


def preact_like():
    """A pre-activation unit (ResNet v2): the BatchNorm's data is also the shortcut, so
    its gradient is added; a BatchNorm with two readers and one that is a head stay
    unfused."""
    x = _cba(S.Variable('data'), 'c0', 8, act=None)
    y = S.Activation(S.BatchNorm(x, fix_gamma=False, name='u_bn1'), act_type='relu',
                     name='u_relu1')
    y = _cba(y, 'u_c1', 8)                                 # fused
    y = S.Convolution(y, num_filter=8, kernel=(3, 3), pad=(1, 1), name='u_c2')
    x = S.elemwise_add(x, y, name='u_add')
    b = S.BatchNorm(x, fix_gamma=False, name='two_bn')     # two readers: unfused
    x = S.elemwise_add(S.relu(b, name='two_relu'), b, name='two_add')
    return _head(x)


def resnet_like():
    """Two basic residual units (v1): ``elemwise_add -> relu`` after a BatchNorm without relu;
    the second unit's sum is read by its relu only, the first's shortcut is the data of
    the next unit and its shortcut (its gradient added); a sum of one value with itself
    (a repeated input) stays unfused."""
    x = _cba(S.Variable('data'), 'c0', 8)
    for u in range(2):
        y = _cba(_cba(x, 'u%d_a' % u, 8), 'u%d_b' % u, 8, act=None)
        x = S.Activation(S.elemwise_add(y, x, name='u%d_add' % u), act_type='relu',
                         name='u%d_relu' % u)
    x = S.relu(x + x, name='twice_relu')
    return _head(x)


def head_like():
    """The BatchNorm output is also a graph output: unfused."""
    x = S.BatchNorm(S.Convolution(S.Variable('data'), num_filter=6, kernel=(3, 3),
                                  name='c'), name='bn')
    return S.Group([_head(S.Activation(x, act_type='relu', name='r')), x])


def _fill(exe, seed=0):
    rng = np.random.default_rng(seed)
    for name, a in exe.arg_dict.items():
        if name == 'softmax_label':
            a[:] = rng.integers(0, 4, a.shape)
        elif name.endswith('gamma'):
            a[:] = rng.uniform(0.5, 1.5, a.shape)
        else:
            a[:] = rng.standard_normal(a.shape) * (1.0 if name == 'data' else 0.4)
    for name, a in exe.aux_dict.items():
        a[:] = rng.uniform(0.5, 2.0, a.shape) if 'var' in name else \
            rng.standard_normal(a.shape) * 0.1


def _train(monkeypatch, make, shape, fuse, dtype, grad_req='write', steps=3, is_train=True,
           backward_first=False):
    """Outputs, arguments, gradients and aux states after ``steps`` SGD steps."""
    monkeypatch.setenv('FFNUMBA_FUSE', '1' if fuse else '0')
    net = make()
    exe = net.simple_bind(ff.cpu(), grad_req=grad_req, data=shape, type_dict={'data': dtype})
    monkeypatch.delenv('FFNUMBA_FUSE')
    _fill(exe)
    record = []
    if backward_first:
        exe.backward([np.ones(o.shape) for o in exe.outputs][:len(exe.outputs)]
                     if len(exe.outputs) > 1 else None)
        record += [g.asnumpy() for g in exe.grad_arrays if g is not None]
    for step in range(steps):
        outs = exe.forward(is_train=is_train if step else True)
        heads = [np.ones(o.shape) for o in outs] if len(outs) > 1 else None
        exe.backward(heads)
        record += [o.asnumpy() for o in outs]
        for name, a in exe.arg_dict.items():
            g = exe.grad_dict.get(name)
            if g is not None and name != 'data':
                a[:] = a.asnumpy() - 0.05 * g.asnumpy()
    record += [a.asnumpy() for a in exe.arg_arrays + exe.aux_arrays]
    record += [g.asnumpy() for g in exe.grad_arrays if g is not None]
    return record


def _same(a, b):
    assert len(a) == len(b)
    for k, (x, y) in enumerate(zip(a, b)):
        assert x.dtype == y.dtype
        assert np.array_equal(x, y, equal_nan=True), \
            'array %d differs by %g' % (k, np.max(np.abs(x - y)))


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('grad_req', ['write', 'add'])
@pytest.mark.parametrize('make,shape,fused', [
    (mobilenet_like, (3, 3, 9, 9), 4),
    (preact_like, (2, 3, 8, 8), 2),
    (head_like, (2, 3, 9, 9), 0),
    (resnet_like, (2, 3, 8, 8), 3),
    (mobilenet_like, (2, 3, 4, 4), 0),          # planes under MIN_INNER: unfused
])
def test_training_steps_bitwise_the_unfused_ones(monkeypatch, calls, make, shape, fused,
                                                 dtype, grad_req):
    got = _train(monkeypatch, make, shape, True, dtype, grad_req)
    assert calls.count('f') == calls.count('b') == 3 * fused
    adds = 6 if make is resnet_like else 0
    assert calls.count('af') == calls.count('ab') == adds
    del calls[:]
    ref = _train(monkeypatch, make, shape, False, dtype, grad_req)
    assert not calls
    _same(got, ref)


def test_global_stats_axis_and_evaluation_forward(monkeypatch, calls):
    """use_global_stats, a channels-last BatchNorm (axis=-1), and a backward after an
    evaluation forward of a training executor (moving statistics, no update)."""
    monkeypatch.setattr(tf_mod, 'MIN_INNER', 1)         # fuse the channels-last one too
    def net():
        x = S.Convolution(S.Variable('data'), num_filter=6, kernel=(3, 3), name='c')
        x = S.clip(S.BatchNorm(x, use_global_stats=True, fix_gamma=False, name='g_bn'),
                   a_min=0, a_max=6)
        x = S.transpose(x, axes=(0, 2, 3, 1))
        x = S.relu(S.BatchNorm(x, axis=-1, fix_gamma=False, name='l_bn'))
        return _head(S.transpose(x, axes=(0, 3, 1, 2)))
    for dtype in ('float32', 'float64'):
        got = _train(monkeypatch, net, (2, 3, 7, 7), True, dtype, is_train=False)
        assert calls.count('b') == 6
        ref = _train(monkeypatch, net, (2, 3, 7, 7), False, dtype, is_train=False)
        _same(got, ref)
        del calls[:]


def test_backward_before_forward_runs_the_unfused_pair(monkeypatch, calls):
    got = _train(monkeypatch, mobilenet_like, (2, 3, 6, 6), True, 'float64',
                 backward_first=True, steps=1)
    ref = _train(monkeypatch, mobilenet_like, (2, 3, 6, 6), False, 'float64',
                 backward_first=True, steps=1)
    _same(got, ref)


def test_gradient_mask_at_the_clip_bounds(monkeypatch, calls):
    """BatchNorm outputs exactly at clip's bounds (gamma 0, beta on the bound): the
    closed-interval gradient passes there; relu's gradient at 0 does not."""
    monkeypatch.setattr(tf_mod, 'MIN_INNER', 1)
    def net(act):
        x = S.BatchNorm(S.Variable('data'), fix_gamma=False, name='bn')
        x = S.clip(x, a_min=0, a_max=6) if act == 'relu6' else S.relu(x)
        return S.MakeLoss(S.sum(x * S.Variable('w')))
    w = 1.0 + np.arange(24.0).reshape(2, 3, 4) % 5
    for act, passes in (('relu6', True), ('relu', False)):
        got = []
        for fuse in (True, False):
            monkeypatch.setenv('FFNUMBA_FUSE', '1' if fuse else '0')
            exe = net(act).simple_bind(ff.cpu(), data=(2, 3, 4), w=(2, 3, 4),
                                       type_dict={'data': 'float64', 'w': 'float64'})
            exe.arg_dict['data'][:] = np.arange(24.0).reshape(2, 3, 4)
            exe.arg_dict['w'][:] = w
            exe.arg_dict['bn_gamma'][:] = [0.0, 0.0, 1.0]
            exe.arg_dict['bn_beta'][:] = [0.0, 6.0, 0.0]
            exe.forward(is_train=True)
            exe.backward()
            got.append(exe.grad_dict['bn_beta'].asnumpy())
        _same(got[:1], got[1:])
        whole = w.sum(axis=(0, 2))
        assert got[0][0] == (whole[0] if passes else 0.0)
        assert got[0][1] == whole[1]          # 6 > 0 for relu, the upper bound for relu6
    assert calls == ['f', 'b', 'f', 'b']


def test_two_threads_split_the_channels(monkeypatch, calls, threads):
    """With two threads the fused kernels split the channels (as BatchNorm's do) and still
    give the unfused bits."""
    threads(2)
    monkeypatch.setattr(bn_mod, 'PAR_MIN_ELEMS', 16)
    got = _train(monkeypatch, mobilenet_like, (3, 3, 9, 9), True, 'float32')
    ref = _train(monkeypatch, mobilenet_like, (3, 3, 9, 9), False, 'float32')
    _same(got, ref)
    assert calls.count('b') == 12


def test_monitor_runs_unfused(monkeypatch, calls):
    monkeypatch.setenv('FFNUMBA_FUSE', '1')
    exe = mobilenet_like().simple_bind(ff.cpu(), data=(2, 3, 6, 6))
    _fill(exe)
    names = []
    exe.set_monitor_callback(lambda name, arr: names.append(name))
    exe.forward(is_train=True)
    exe.backward()
    assert not calls
    assert 'c0_bn_output' in names


def test_compile_ahead_child_runs_the_fused_calls(monkeypatch):
    """The cold start's child gets the fused calls (their ``ahead`` keys) and runs them on
    zeros, so it compiles their kernels (:mod:`ffnumba._compile_ahead`)."""
    from ffnumba import _compile_ahead
    monkeypatch.setenv('FFNUMBA_FUSE', '1')
    exe = resnet_like().simple_bind(ff.cpu(), data=(2, 3, 8, 8))
    spec = _compile_ahead._plan_spec(*_compile_ahead.named(exe._view.nodes, exe._runs))
    fused = [rec for rec in spec if isinstance(rec[1], tuple)]
    assert sorted(set(rec[1][0] for rec in fused)) == ['addrelu', 'bnact']
    assert len(fused) == 2 * 5       # 3 BatchNorm -> relu and 2 sums -> relu, both passes
    rng = np.random.default_rng(0)
    for rec in fused:
        _compile_ahead._run_node(rec, rng)


@pytest.mark.parametrize('fuse', ['1', '0'])
def test_monitor_installed_between_forward_and_backward(monkeypatch, fuse):
    """A fused forward never writes the BatchNorm output; a monitor installed before the
    backward must not make clip's unfused backward read that buffer (relu6's mask)."""
    monkeypatch.setenv('FFNUMBA_FUSE', fuse)
    exe = mobilenet_like().simple_bind(ff.cpu(), data=(2, 3, 6, 6), type_dict={'data': 'float64'})
    _fill(exe)
    exe.forward(is_train=True)
    names = []
    exe.set_monitor_callback(lambda name, arr: names.append(name))
    exe.backward()
    grads = {k: v.asnumpy().copy() for k, v in exe.grad_dict.items() if v is not None}
    monkeypatch.setenv('FFNUMBA_FUSE', '0')
    ref = mobilenet_like().simple_bind(ff.cpu(), data=(2, 3, 6, 6), type_dict={'data': 'float64'})
    _fill(ref)
    ref.forward(is_train=True)
    ref.backward()
    for k, g in grads.items():
        np.testing.assert_array_equal(g, ref.grad_dict[k].asnumpy(), err_msg=k)
    assert any("_backward_output" in n for n in names)
