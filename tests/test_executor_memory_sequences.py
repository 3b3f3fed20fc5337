"""The memory plan under call sequences a user makes (adversarial cases of issue 9's plan).

Each case runs the same calls on an executor whose values share storages and
on one with ``FFNUMBA_MEMORY_PLAN=0`` (every value its own buffer) and
compares outputs, gradients and auxiliary states: backward twice, an
inference forward between a training forward and its backward, several
steps, ``grad_req='add'``; multi-output ops with dead outputs, outputs read
by both a head and a consumer, ``output_mean_var``, hidden outputs, repeated
inputs to one node (checked against the closed form), and a reshaped
executor run in between the one it came from.
"""
import numpy as np
import pytest

import ffnumba as ff
import ffnumba.symbol as sym
from ffnumba.name import NameManager


def _nets():
    d = sym.Variable('data')
    with NameManager():
        s = sym.SliceChannel(sym.FullyConnected(d, num_hidden=6, name='fc'), num_outputs=3,
                             name='sl')
        slice_dead = sym.Group([sym.tanh(s[0]) * s[0], sym.exp(s[2])])
    with NameManager():
        bn = sym.BatchNorm(sym.FullyConnected(d, num_hidden=3, name='fc'),
                           output_mean_var=True, fix_gamma=False, name='bn')
        ln = sym.LayerNorm(bn[0], output_mean_var=True, name='ln')
        norms = sym.Group([sym.tanh(ln[0]), bn[1] * 2, bn[2] * 3, ln[1] * 1.5])
    with NameManager():
        f = sym.FullyConnected(d, num_hidden=6, name='fc')
        tk = sym.topk(f, k=2, ret_typ='both', name='tk')
        pr = sym.LeakyReLU(f, act_type='prelu', name='pr')
        heads = sym.Group([f, sym.sin(tk[0]), tk[1], sym.max(sym.exp(pr), axis=1),
                           sym.prod(sym.tanh(f), axis=0)])
    with NameManager():
        c = sym.Convolution(d, num_filter=2, kernel=(3, 3), pad=(1, 1), name='cv')
        pool = sym.Group([sym.tanh(sym.Pooling(c, kernel=(2, 2), pool_type='lp', p_value=3,
                                               name='plp')),
                          sym.SoftmaxOutput(sym.Flatten(sym.Pooling(
                              c, kernel=(2, 2), pool_type='max', name='pmx')), name='sm')])
    return {'slice_dead': (slice_dead, {'data': (4, 5)}), 'norms': (norms, {'data': (5, 4)}),
            'heads': (heads, {'data': (3, 4)}),
            'pool': (pool, {'data': (2, 2, 4, 4), 'sm_label': (2,)})}


NETS = _nets()


def _bind(net, shapes, req, plan, monkeypatch, seed=0):
    monkeypatch.setenv('FFNUMBA_MEMORY_PLAN', '1' if plan else '0')
    exe = net.simple_bind(ff.cpu(), grad_req=req, type_dict={k: 'float64' for k in shapes},
                          **shapes)
    _fill(exe, seed)
    rng = np.random.RandomState(seed + 1)
    for a in exe.aux_arrays:
        a[:] = rng.uniform(0.5, 1.5, a.shape)
    for g in exe.grad_arrays:
        if g is not None:
            g[:] = rng.uniform(-1, 1, g.shape)
    return exe


def _fill(exe, seed):
    """Data from ``seed``; parameters the same for every seed (reshaped executors share them)."""
    for n, a in sorted(exe.arg_dict.items()):
        rng = np.random.RandomState(seed if n in ('data', 'sm_label') else 0)
        a[:] = rng.randint(0, 2, a.shape) if n == 'sm_label' else rng.uniform(-1, 1, a.shape)


def _heads(exe):
    rng = np.random.RandomState(3)
    return [ff.nd.array(rng.standard_normal(o.shape), dtype='float64') for o in exe.outputs]


def _state(exe):
    return ([o.asnumpy().copy() for o in exe.outputs],
            {k: g.asnumpy().copy() for k, g in exe.grad_dict.items() if g is not None},
            [a.asnumpy().copy() for a in exe.aux_arrays])


def _assert_same(a, b):
    for x, y in zip(a[0], b[0]):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-14)
    assert a[1].keys() == b[1].keys() and a[1]
    for k in a[1]:
        np.testing.assert_allclose(a[1][k], b[1][k], rtol=1e-12, atol=1e-14, err_msg=k)
    for x, y in zip(a[2], b[2]):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-14)


def _twice(exe):
    exe.forward(is_train=True)
    exe.backward(_heads(exe))
    exe.backward(_heads(exe))


def _inference_between(exe):
    exe.forward(is_train=True)
    exe.forward(is_train=False)
    exe.backward(_heads(exe))


def _steps(exe):
    for _ in range(3):
        exe.forward(is_train=True)
        exe.backward(_heads(exe))


def _outputs_after_next_forward(exe):
    exe.forward(is_train=True)
    exe.backward(_heads(exe))
    first = [o.asnumpy().copy() for o in exe.outputs]
    exe.forward(is_train=True)
    for a, b in zip(first, exe.outputs):     # the same inputs give the same outputs
        np.testing.assert_array_equal(a, b.asnumpy())


@pytest.mark.parametrize('req', ['write', 'add'])
@pytest.mark.parametrize('calls', [_twice, _inference_between, _steps,
                                   _outputs_after_next_forward])
@pytest.mark.parametrize('net', sorted(NETS))
def test_call_sequences_match_an_unshared_executor(net, calls, req, monkeypatch):
    symbol, shapes = NETS[net]
    planned = _bind(symbol, shapes, req, True, monkeypatch)
    plain = _bind(symbol, shapes, req, False, monkeypatch)
    assert any(len(h) > 1 for h in planned._plan.held)     # something really shares
    for exe in (planned, plain):
        calls(exe)
    _assert_same(_state(planned), _state(plain))


def test_outputs_no_gradient_reaches_read_zeros_that_stay_zero():
    """Outputs of running backwards that no gradient reaches share one zero array per
    shape and dtype: no backward kernel may write into it."""
    d = sym.Variable('data')
    f = sym.FullyConnected(d, num_hidden=6, name='fc')
    s1 = sym.SliceChannel(f, num_outputs=3, name='s1')
    s2 = sym.split(sym.exp(f), num_outputs=3, name='s2')
    tk = sym.topk(f, k=2, ret_typ='both', name='tk')
    bn = sym.BatchNorm(f, output_mean_var=True, name='bn')
    rr = sym.LeakyReLU(f, act_type='rrelu', name='rr')
    loss = sym.MakeLoss(sym.sum(s1[0] * s2[1]) + sym.sum(tk[0]) + sym.sum(bn[0])
                        + sym.sum(rr[0]))
    exe = loss.simple_bind(ff.cpu(), data=(4, 5), type_dict={'data': 'float64'})
    _fill(exe, 0)
    for _ in range(2):
        exe.forward(is_train=True)
        exe.backward()
    view = exe._view
    zeros = [e for e in range(view.num_entries) if exe._gbuf[e] is not None
             and e not in exe._plan.grad and e not in exe._var_req]
    names = {view.entry_names()[e] for e in zeros}
    assert {'s1_output1', 's2_output0', 'tk_output1', 'bn_mean', 'rr_mask'} <= names
    for e in zeros:
        assert not np.asarray(exe._gbuf[e]).any(), view.entry_names()[e]


@pytest.mark.parametrize('req', ['write', 'add'])
def test_repeated_inputs_give_the_closed_form_gradient(req):
    """x * x + (x + x) + exp(x) on an argument, and y * y on an intermediate."""
    x = sym.Variable('x')
    net = sym.MakeLoss(sym.sum(sym.elemwise_mul(x, x) + sym.exp(x) + sym.elemwise_add(x, x)))
    exe = net.simple_bind(ff.cpu(), x=(3, 4), grad_req=req, type_dict={'x': 'float64'})
    xv = np.random.RandomState(0).uniform(-1, 1, (3, 4))
    init = np.random.RandomState(1).uniform(-1, 1, (3, 4))
    exe.arg_dict['x'][:] = xv
    exe.grad_dict['x'][:] = init
    for _ in range(2):
        exe.forward(is_train=True)
        exe.backward()
    g = 2 * xv + np.exp(xv) + 2
    np.testing.assert_allclose(exe.grad_dict['x'].asnumpy(), init + 2 * g if req == 'add' else g,
                               rtol=1e-12)
    y = sym.FullyConnected(sym.Variable('data'), num_hidden=3, no_bias=True, name='fc')
    exe = sym.MakeLoss(sym.sum(sym.elemwise_mul(y, y))).simple_bind(
        ff.cpu(), data=(2, 4), grad_req=req, type_dict={'data': 'float64'})
    dv, w = np.random.RandomState(0).uniform(-1, 1, (2, 4)), np.ones((3, 4)) * 0.5
    exe.arg_dict['data'][:] = dv
    exe.arg_dict['fc_weight'][:] = w
    exe.grad_dict['fc_weight'][:] = 1.0
    exe.forward(is_train=True)
    exe.backward()
    expected = 2 * (dv @ w.T).T @ dv + (1.0 if req == 'add' else 0.0)
    np.testing.assert_allclose(exe.grad_dict['fc_weight'].asnumpy(), expected, rtol=1e-12)


@pytest.mark.parametrize('net', sorted(NETS))
def test_reshaped_executor_run_in_between_changes_nothing(net, monkeypatch):
    """A reshaped executor shares the old one's storages (MXNet); each forward recomputes
    what it reads, so interleaved runs of both equal fresh unshared executors."""
    symbol, shapes = NETS[net]
    big_shapes = {k: (2 * v[0],) + tuple(v[1:]) for k, v in shapes.items()}
    big = _bind(symbol, big_shapes, 'write', True, monkeypatch, seed=1)
    small = big.reshape(**shapes)
    runs = []
    for exe, seed in ((small, 2), (big, 1), (small, 2)):
        _fill(exe, seed)              # the small data is a view of the big one's
        for a in exe.aux_arrays:
            a[:] = 1.0
        exe.forward(is_train=True)
        exe.backward(_heads(exe))
        runs.append(_state(exe))
    for shp, seed, got in ((shapes, 2, runs[0]), (big_shapes, 1, runs[1]),
                           (shapes, 2, runs[2])):
        fresh = _bind(symbol, shp, 'write', False, monkeypatch, seed=seed)
        for a in fresh.aux_arrays:
            a[:] = 1.0
        fresh.forward(is_train=True)
        fresh.backward(_heads(fresh))
        _assert_same(got, _state(fresh))


def test_installing_a_monitor_all_keeps_the_random_stream():
    """monitor_all makes a new memory plan; Dropout's masks must not change with it."""
    x = sym.Variable('data')
    net = sym.MakeLoss(sym.sum(sym.Dropout(sym.FullyConnected(x, num_hidden=8, name='fc'),
                                           p=0.5, name='dr')))
    grads, seen = [], []
    for monitor in (False, True):
        ff.random.seed(0)
        exe = net.simple_bind(ff.cpu(), data=(4, 3))
        for a in exe.arg_arrays:
            a[:] = 1.0
        if monitor:
            exe.set_monitor_callback(lambda n, a: seen.append(n), monitor_all=True)
        exe.forward(is_train=True)
        exe.backward()
        grads.append(exe.grad_dict['fc_weight'].asnumpy().copy())
    assert seen and len(np.unique(grads[0])) > 1      # masks at work
    np.testing.assert_array_equal(grads[0], grads[1])


def test_a_value_listed_twice_as_a_head_sums_both_head_gradients():
    """Group([y, y, sin(y)]): both head gradients of y and sin's add up; debug_str names
    each head gradient by its output index."""
    x = sym.Variable('x')
    y = sym.exp(x, name='e')
    exe = sym.Group([y, y, sym.sin(y, name='s')]).simple_bind(ff.cpu(), x=(2, 3),
                                                              type_dict={'x': 'float64'})
    xv = np.random.RandomState(0).uniform(-1, 1, (2, 3))
    exe.arg_dict['x'][:] = xv
    gs = [np.random.RandomState(i).standard_normal((2, 3)) for i in range(3)]
    exe.forward(is_train=True)
    exe.backward([ff.nd.array(g, dtype='float64') for g in gs])
    ev = np.exp(xv)
    np.testing.assert_allclose(exe.grad_dict['x'].asnumpy(),
                               ev * (gs[0] + gs[1] + np.cos(ev) * gs[2]), rtol=1e-12)
    assert '\targ[0]=head_grad0+head_grad1+s_backward(0) [s' in exe.debug_str()
