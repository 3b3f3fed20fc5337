"""Training fusion of ``Convolution -> relu`` forwards (``ffnumba._executor_train_fuse``).

A fused executor's SGD steps must give the bits of the unfused one (``FFNUMBA_FUSE=0``):
outputs, parameters and gradients (``'write'`` and ``'add'``); the fused call must run
where it applies and never where the convolution's output is observable or its data
might not outlive the relu's place.
"""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba import _compile_ahead
from ffnumba.ops.nn import convolution as conv_mod

S = ff.sym


@pytest.fixture
def calls(monkeypatch):
    """Names of the convolutions whose forward ran fused with a relu (executors bound
    after it is set up)."""
    seen = []
    real = conv_mod.fused_forward_cpu

    def counting(ctx, p, inputs, y, ep, mode):
        seen.append(ctx.node_name)
        return real(ctx, p, inputs, y, ep, mode)
    monkeypatch.setattr(conv_mod, 'fused_forward_cpu', counting)
    return seen


def _conv(x, name, nf, k=3, **kw):
    return S.Convolution(x, num_filter=nf, kernel=(k, k), pad=(k // 2, k // 2), name=name,
                         **kw)


def inception_like():
    """Two towers of convolution -> relu (Activation and the ``relu`` op), a 5x5 on a
    small plane (the taps), a convolution read by its relu and by a second node, one
    followed by a sigmoid, and a relu'd convolution that is also a graph output."""
    x = S.Variable('data')
    a = S.Activation(_conv(x, 'a', 6), act_type='relu', name='a_relu')            # fused
    b = S.relu(_conv(x, 'b', 6, k=1), name='b_relu')                              # fused
    c = S.Activation(_conv(S.concat(a, b, dim=1), 'c', 16, k=5, no_bias=True),
                     act_type='relu', name='c_relu')                               # fused
    d = _conv(c, 'd', 4)
    twice = S.elemwise_add(S.relu(d, name='d_relu'), d, name='twice')   # two readers
    s = S.Activation(_conv(c, 's', 4), act_type='sigmoid', name='s_sig')           # sigmoid
    y = S.Pooling(S.concat(twice, s, dim=1), global_pool=True, kernel=(1, 1),
                  pool_type='avg', name='pool')
    y = S.SoftmaxOutput(S.FullyConnected(S.flatten(y), num_hidden=3, name='fc'),
                        name='softmax')
    e = _conv(c, 'e', 4)
    return S.Group([y, e, S.relu(e, name='e_relu')])         # e is a graph output


FUSED = ['a', 'b', 'c']


def _fill(exe, seed=0):
    rng = np.random.default_rng(seed)
    for name, a in exe.arg_dict.items():
        if name == 'softmax_label':
            a[:] = rng.integers(0, 3, a.shape)
        else:
            a[:] = rng.standard_normal(a.shape) * (1.0 if name == 'data' else 0.3)


def _train(monkeypatch, fuse, dtype, grad_req='write', steps=3):
    monkeypatch.setenv('FFNUMBA_FUSE', '1' if fuse else '0')
    exe = inception_like().simple_bind(ff.cpu(), grad_req=grad_req, data=(3, 16, 4, 4),
                                       type_dict={'data': dtype})
    monkeypatch.delenv('FFNUMBA_FUSE')
    _fill(exe)
    record = []
    for step in range(steps):
        outs = exe.forward(is_train=step != 1)
        exe.backward([ff.nd.ones(o.shape, dtype=o.dtype) for o in outs])
        record += [o.asnumpy() for o in outs]
        for name, a in exe.arg_dict.items():
            g = exe.grad_dict.get(name)
            if g is not None and name != 'data':
                a[:] = a.asnumpy() - 0.05 * g.asnumpy()
    record += [a.asnumpy() for a in exe.arg_arrays]
    record += [g.asnumpy() for g in exe.grad_arrays if g is not None]
    return record


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('grad_req', ['write', 'add'])
def test_training_steps_bitwise_the_unfused_ones(monkeypatch, calls, dtype, grad_req):
    got = _train(monkeypatch, True, dtype, grad_req)
    assert sorted(set(calls)) == FUSED and len(calls) == 3 * len(FUSED)
    del calls[:]
    ref = _train(monkeypatch, False, dtype, grad_req)
    assert not calls
    assert len(got) == len(ref)
    for k, (x, y) in enumerate(zip(got, ref)):
        assert x.dtype == y.dtype and np.array_equal(x, y), k


def test_no_fusion_without_the_convolution_backward(monkeypatch, calls):
    """A branch whose convolution runs no backward (fixed weights, no data gradient
    through it) beside a trained one: its data could be freed before the relu's place,
    so only the trained branch fuses; with a data gradient both do."""
    monkeypatch.setenv('FFNUMBA_FUSE', '1')
    x = S.Variable('data')
    q = S.Activation(_conv(S.Activation(_conv(x, 'p', 4), act_type='sigmoid'), 'q', 4),
                     act_type='relu')
    r = S.Activation(_conv(x, 'r', 4), act_type='relu')
    net = S.MakeLoss(S.sum(S.concat(q, r, dim=1)))
    req = {'data': 'null', 'p_weight': 'null', 'p_bias': 'null', 'q_weight': 'null',
           'q_bias': 'null', 'r_weight': 'write', 'r_bias': 'write'}
    for data_req, want in (('null', ['r']), ('write', ['q', 'r'])):
        req['data'] = data_req
        del calls[:]
        exe = net.simple_bind(ff.cpu(), grad_req=req, data=(2, 3, 5, 5))
        _fill(exe)
        exe.forward(is_train=True)
        exe.backward()
        assert sorted(calls) == want, data_req


def test_compile_ahead_child_runs_the_fused_forward(monkeypatch):
    """The cold start's child gets the fused forwards (``'convrelu'``) and runs them."""
    monkeypatch.setenv('FFNUMBA_FUSE', '1')
    exe = inception_like().simple_bind(ff.cpu(), data=(2, 16, 4, 4))
    spec = _compile_ahead._plan_spec(*_compile_ahead.named(exe._view.nodes, exe._runs))
    fused = [rec for rec in spec if isinstance(rec[1], tuple)]
    assert [rec[1] for rec in fused] == [('convrelu',)] * len(FUSED)
    assert sum(rec[1] == 'Convolution' for rec in spec if rec[0] == 'b') == 6
    rng = np.random.default_rng(0)
    for rec in fused:
        _compile_ahead._run_node(rec, rng)


def test_no_fusion_when_the_relu_backward_reads_its_input(monkeypatch, calls):
    """The fused forward never writes the relu's input: an activation whose backward
    read it would see garbage, so such a pair stays unfused."""
    from ffnumba.ops.registry import get_op
    monkeypatch.setattr(get_op('Activation'), 'backward_reads', ('inputs', 'outputs'))
    monkeypatch.setenv('FFNUMBA_FUSE', '1')
    net = S.MakeLoss(S.sum(S.Activation(_conv(S.Variable('data'), 'r', 4), act_type='relu')))
    exe = net.simple_bind(ff.cpu(), data=(2, 3, 5, 5))
    _fill(exe)
    exe.forward(is_train=True)
    assert calls == []
