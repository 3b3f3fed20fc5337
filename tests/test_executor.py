"""Executor: binding, forward/backward, grad_req, head gradients, sharing, reshape."""
import os
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, strategies as st

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'symbol'))
import _sym_testops  # noqa: E402,F401

import ffnumba as ff  # noqa: E402
import ffnumba.ndarray as nd  # noqa: E402
import ffnumba.symbol as sym  # noqa: E402
from ffnumba.base import FFError, ShapeError, ParamError  # noqa: E402
from ffnumba.executor import Executor  # noqa: E402
from ffnumba.name import NameManager  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_names():
    with NameManager():
        yield


def mlp(hidden=4, classes=3):
    data = sym.Variable('data')
    fc1 = sym.FullyConnected(data, num_hidden=hidden, name='fc1')
    act = sym.Activation(fc1, act_type='tanh', name='act')
    fc2 = sym.FullyConnected(act, num_hidden=classes, name='fc2')
    return sym.SoftmaxOutput(fc2, name='softmax')


def np_mlp(a):
    h = np.tanh(a['data'] @ a['fc1_weight'].T + a['fc1_bias'])
    z = h @ a['fc2_weight'].T + a['fc2_bias']
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def init(exe, rng, dtype=np.float64):
    vals = {}
    for k, a in exe.arg_dict.items():
        v = rng.uniform(-1, 1, a.shape).astype(dtype)
        if k == 'softmax_label':
            v = rng.randint(0, 3, a.shape).astype(dtype)
        a[:] = v
        vals[k] = v
    return vals


def test_simple_bind_forward_matches_numpy():
    rng = np.random.RandomState(0)
    exe = mlp().simple_bind(ff.cpu(), data=(5, 6), type_dict={'data': 'float64'})
    assert exe.arg_dict['fc1_weight'].shape == (4, 6)
    assert exe.arg_dict['fc1_weight'].dtype == np.float64
    assert sorted(exe.grad_dict) == sorted(mlp().list_arguments())
    vals = init(exe, rng)
    out = exe.forward()
    assert out is exe.outputs and list(exe.output_dict) == ['softmax_output']
    np.testing.assert_allclose(out[0].asnumpy(), np_mlp(vals), rtol=1e-12)


def test_backward_numeric_gradient_of_weights():
    """Loss sum(log p[label]) gradient equals -(SoftmaxOutput grad)."""
    rng = np.random.RandomState(1)
    exe = mlp().simple_bind(ff.cpu(), data=(3, 4), type_dict={'data': 'float64'})
    vals = init(exe, rng)
    exe.forward(is_train=True)
    exe.backward()
    labels = vals['softmax_label'].astype(int)

    def loss(v):
        p = np_mlp(v)
        return -np.log(p[np.arange(len(labels)), labels]).sum()

    for name in ('fc1_weight', 'fc2_bias', 'data'):
        num = np.zeros_like(vals[name])
        for idx in np.ndindex(num.shape):
            plus = {k: v.copy() for k, v in vals.items()}
            minus = {k: v.copy() for k, v in vals.items()}
            plus[name][idx] += 1e-6
            minus[name][idx] -= 1e-6
            num[idx] = (loss(plus) - loss(minus)) / 2e-6
        np.testing.assert_allclose(exe.grad_dict[name].asnumpy(), num, rtol=1e-5, atol=1e-8)


def test_grad_req_write_add_null():
    x = sym.Variable('x')
    w = sym.Variable('w')
    s = sym._test_wmul(x, w, name='m')
    xv, wv = nd.array([1., 2.]), nd.array([3., 4.])
    gx, gw = nd.ones((2,)), nd.ones((2,))
    exe = s.bind(ff.cpu(), {'x': xv, 'w': wv}, args_grad={'x': gx, 'w': gw},
                 grad_req={'x': 'add'})
    assert exe.grad_req == {'x': 'add', 'w': 'null'}
    exe.forward(is_train=True)
    exe.backward(nd.ones((2,)))
    exe.backward(nd.ones((2,)))
    np.testing.assert_allclose(gx.asnumpy(), [7., 9.])          # 1 + 2 * w
    np.testing.assert_allclose(gw.asnumpy(), [1., 1.])          # untouched
    assert exe.grad_dict['w'] is gw          # MXNet keeps given arrays even for 'null'
    assert exe.grad_arrays[1] is gw
    exe2 = s.bind(ff.cpu(), [xv, wv], args_grad=[gx, gw], grad_req=['write', 'write'])
    exe2.forward(is_train=True)
    exe2.backward([nd.array([2., 2.])])
    np.testing.assert_allclose(gx.asnumpy(), [6., 8.])
    np.testing.assert_allclose(gw.asnumpy(), [2., 4.])
    with pytest.raises(ParamError, match='grad_req'):
        s.bind(ff.cpu(), [xv, wv], args_grad=[gx, gw], grad_req='sometimes')


def test_output_consumed_twice_sums_gradients():
    x = sym.Variable('x')
    h = x * 3.0
    s = sym._test_wmul(h, h, name='sq') + h         # 9x^2 + 3x -> grad 18x + 3
    exe = s.simple_bind(ff.cpu(), x=(3,), type_dict={'x': 'float64'})
    exe.arg_dict['x'][:] = np.array([1., -2., 0.5])
    exe.forward(is_train=True)
    exe.backward(nd.ones((3,), dtype='float64'))
    np.testing.assert_allclose(exe.grad_dict['x'].asnumpy(), 18 * np.array([1., -2., .5]) + 3)


def test_variable_used_twice_with_add_req():
    x = sym.Variable('x')
    s = sym._test_wmul(x, x, name='sq')              # x^2 -> 2x per backward
    gx = nd.array([10., 10.])
    exe = s.bind(ff.cpu(), {'x': nd.array([1., 2.])}, args_grad={'x': gx}, grad_req='add')
    exe.forward(is_train=True)
    exe.backward(nd.ones((2,)))
    np.testing.assert_allclose(gx.asnumpy(), [12., 14.])


def test_head_gradient_rules():
    x = sym.Variable('x')
    s = x * 2.0
    exe = s.simple_bind(ff.cpu(), x=(2,))
    exe.forward(is_train=True)
    with pytest.raises(FFError, match='head_gradient is required'):
        exe.backward()
    exe.backward({'_mulscalar0_output': nd.ones((2,))})
    np.testing.assert_allclose(exe.grad_dict['x'].asnumpy(), [2., 2.])
    with pytest.raises(ShapeError, match='shape'):
        exe.backward(nd.ones((3,)))
    loss = sym._test_sumloss(s)
    exe = loss.simple_bind(ff.cpu(), x=(2,))
    exe.forward(is_train=True)
    exe.backward()                                   # a loss head needs no out_grads
    np.testing.assert_allclose(exe.grad_dict['x'].asnumpy(), [2., 2.])
    exe.backward(nd.ones((2,)) * 100)                # and ignores them
    np.testing.assert_allclose(exe.grad_dict['x'].asnumpy(), [2., 2.])


def test_group_with_loss_and_internal_head():
    x = sym.Variable('x')
    h = x * 2.0
    g = sym.Group([sym._test_sumloss(h), h])
    exe = g.simple_bind(ff.cpu(), x=(2,))
    exe.forward(is_train=True)
    with pytest.raises(FFError, match='head_gradient'):
        exe.backward()
    exe.backward([None, nd.ones((2,))])
    np.testing.assert_allclose(exe.grad_dict['x'].asnumpy(), [4., 4.])


def test_multi_output_op_unused_output_gets_zero_grad():
    t = sym._test_twoout(sym.Variable('x'))
    exe = t[1].simple_bind(ff.cpu(), x=(2,))
    exe.forward(is_train=True, x=nd.array([1., 2.]))
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), [3., 6.])
    exe.backward(nd.ones((2,)))
    np.testing.assert_allclose(exe.grad_dict['x'].asnumpy(), [3., 3.])


def test_forward_kwargs_checks():
    exe = mlp().simple_bind(ff.cpu(), data=(3, 4))
    with pytest.raises(ShapeError, match=r'Shape not match! Argument data, need: \(3, 4\), '
                                         r'received: \(2, 4\)'):
        exe.forward(data=nd.zeros((2, 4)))
    with pytest.raises(FFError, match='Unknown argument'):
        exe.forward(nope=nd.zeros((2, 4)))
    exe.forward(data=np.ones((3, 4)))
    assert exe.arg_dict['data'].asnumpy().sum() == 12


def test_aux_states_update_and_state_persists():
    c = sym._test_count(sym.Variable('x'), name='c')
    assert c.list_auxiliary_states() == ['c_counter']
    with pytest.raises(ValueError, match='aux_states'):
        c.bind(ff.cpu(), {'x': nd.zeros((2,))})
    cnt = nd.zeros((1,))
    exe = c.bind(ff.cpu(), {'x': nd.zeros((2,))}, aux_states=[cnt])
    exe.forward(is_train=True)
    exe.forward(is_train=True)
    exe.forward(is_train=False)
    assert cnt.asnumpy()[0] == 2 and exe.aux_dict['c_counter'] is cnt
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), [2., 2.])
    assert exe._fwd_plan[0].ctx.state['calls'] == 3


def test_bind_argument_errors():
    s = mlp()
    with pytest.raises(ValueError, match='Length of args does not match the number of arguments'):
        s.bind(ff.cpu(), [nd.zeros((2, 2))])
    with pytest.raises(ValueError, match='key `fc1_bias` is missing'):
        s.bind(ff.cpu(), {'data': nd.zeros((2, 3)), 'fc1_weight': nd.zeros((4, 3))})
    with pytest.raises(TypeError):
        s.bind(ff.cpu(), 'nope')
    with pytest.raises(FFError, match='CUDA|GPU'):
        s.simple_bind(ff.gpu(7), data=(2, 3))
    with pytest.raises(ShapeError, match='cannot infer'):
        s.simple_bind(ff.cpu())


def test_bind_without_grads_and_eval():
    s = sym.Variable('x') * 2.0 + 1.0
    exe = s.bind(ff.cpu(), {'x': nd.array([1., 2.])})
    assert exe.grad_arrays == [None]
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), [3., 5.])
    exe.backward(nd.ones((2,)))             # nothing to compute, no error
    out = s.eval(ctx=ff.cpu(), x=nd.array([0., 1.]))
    np.testing.assert_allclose(out[0].asnumpy(), [1., 3.])


def test_copy_params_from_casts_and_checks():
    exe = mlp().simple_bind(ff.cpu(), data=(2, 3))
    exe.copy_params_from({'fc1_bias': nd.array([1, 2, 3, 4], dtype='float64')})
    assert exe.arg_dict['fc1_bias'].dtype == np.float32
    np.testing.assert_allclose(exe.arg_dict['fc1_bias'].asnumpy(), [1, 2, 3, 4])
    with pytest.raises(ValueError, match='Find name "foo" that is not in the arguments'):
        exe.copy_params_from({'foo': nd.zeros((1,))})
    exe.copy_params_from({'foo': nd.zeros((1,))}, allow_extra_params=True)
    bn = sym.BatchNorm(sym.Variable('x'), name='bn')
    e2 = bn.simple_bind(ff.cpu(), x=(2, 3))
    e2.copy_params_from({}, {'bn_moving_var': nd.ones((3,))})
    np.testing.assert_allclose(e2.aux_dict['bn_moving_var'].asnumpy(), 1)
    with pytest.raises(ValueError, match='not in the auxiliary states'):
        e2.copy_params_from({}, {'zz': nd.ones((3,))})


def test_reshape_shares_params():
    exe = mlp().simple_bind(ff.cpu(), data=(8, 3))
    exe.arg_dict['fc1_weight'][:] = 0.5
    small = exe.reshape(data=(4, 3), softmax_label=(4,))
    assert small.arg_dict['fc1_weight'] is exe.arg_dict['fc1_weight']
    assert small.grad_dict['fc1_weight'] is exe.grad_dict['fc1_weight']
    assert small.arg_dict['data'].shape == (4, 3)
    assert np.shares_memory(small.arg_dict['data']._data, exe.arg_dict['data']._data)
    assert small.outputs[0].shape == (4, 3)
    with pytest.raises(ShapeError, match='larger than original'):
        exe.reshape(data=(16, 3), softmax_label=(16,))
    big = exe.reshape(allow_up_sizing=True, data=(16, 3), softmax_label=(16,))
    assert big.outputs[0].shape == (16, 3)
    with pytest.raises(ShapeError, match='partial_shaping'):
        exe.reshape(data=(4, 5), softmax_label=(4,))
    wide = exe.reshape(partial_shaping=True, data=(4, 2), softmax_label=(4,))
    assert wide.arg_dict['fc1_weight'].shape == (4, 2)


def test_monitor_callback():
    seen = []
    exe = mlp().simple_bind(ff.cpu(), data=(2, 3))
    exe.set_monitor_callback(lambda name, arr: seen.append((name, arr.shape)))
    exe.forward()
    assert seen == [('fc1_output', (2, 4)), ('act_output', (2, 4)), ('fc2_output', (2, 3)),
                    ('softmax_output', (2, 3))]
    seen.clear()
    exe.set_monitor_callback(lambda name, arr: seen.append(name), monitor_all=True)
    exe.forward()
    assert 'fc1_weight' in seen and 'fc1_output' in seen


def test_simple_bind_shared_exec_and_buffer():
    s = mlp()
    buf = {}
    names = [n for n in s.list_arguments() if n not in ('data', 'softmax_label')]
    a = s.simple_bind(ff.cpu(), shared_arg_names=names, shared_buffer=buf, data=(8, 3))
    assert set(buf) == {'data', 'softmax_label', 'grad of data', 'grad of softmax_label'}
    b = s.simple_bind(ff.cpu(), shared_exec=a, shared_arg_names=names, shared_buffer=buf,
                      data=(4, 3))
    for n in names:
        assert b.arg_dict[n] is a.arg_dict[n] and b.grad_dict[n] is a.grad_dict[n]
    assert np.shares_memory(b.arg_dict['data']._data, buf['data']._data)
    c = s.simple_bind(ff.cpu(), shared_exec=a, data=(4, 3))      # no shared names: fresh
    assert c.arg_dict['fc1_weight'] is not a.arg_dict['fc1_weight']
    bn = sym.BatchNorm(sym.Variable('x'), name='bn')
    e1 = bn.simple_bind(ff.cpu(), x=(4, 3))
    e2 = bn.simple_bind(ff.cpu(), shared_exec=e1, x=(2, 3))
    assert e2.aux_dict['bn_moving_mean'] is e1.aux_dict['bn_moving_mean']


def test_float16_type_dict_propagates():
    exe = mlp().simple_bind(ff.cpu(), data=(2, 3), type_dict={'data': 'float16'},
                            grad_req='null')
    assert exe.arg_dict['fc1_weight'].dtype == np.float16
    assert all(g is None for g in exe.grad_arrays)


def test_threads_run_separate_executors():
    """One executor per thread, run concurrently, gives the single-thread results."""
    rng = np.random.RandomState(3)
    s = mlp()
    exes = [s.simple_bind(ff.cpu(i), data=(4, 3), type_dict={'data': 'float64'})
            for i in range(3)]
    vals = [init(e, rng) for e in exes]
    expect = [np_mlp(v) for v in vals]
    errors = []

    def work(e, want):
        try:
            for _ in range(20):
                e.forward(is_train=True)
                e.backward()
                np.testing.assert_allclose(e.outputs[0].asnumpy(), want, rtol=1e-12)
        except Exception as err:  # collected and re-raised in the main thread
            errors.append(err)

    threads = [threading.Thread(target=work, args=(e, w)) for e, w in zip(exes, expect)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_debug_str_reports_memory():
    exe = mlp().simple_bind(ff.cpu(), data=(2, 3))
    lines = exe.debug_str().splitlines()
    assert lines[-2].startswith('Total') and lines[-2].endswith('MB allocated')
    assert lines[-1] == 'Total 0 TempSpace resource requested'
    assert isinstance(exe, Executor) and 'Executor' in repr(exe)


def test_inference_executor_reuses_buffers_and_stays_correct():
    rng = np.random.RandomState(4)
    data = sym.Variable('data')
    s = data
    for i in range(4):
        s = sym.Activation(sym.FullyConnected(s, num_hidden=5, name='fc%d' % i),
                           act_type='tanh', name='a%d' % i)
    exe = s.simple_bind(ff.cpu(), grad_req='null', data=(3, 5), type_dict={'data': 'float64'})
    train = s.simple_bind(ff.cpu(), data=(3, 5), type_dict={'data': 'float64'})
    for k, a in exe.arg_dict.items():
        a[:] = rng.uniform(-1, 1, a.shape)
        train.arg_dict[k][:] = a.asnumpy()
    # fewer storages for the forward values than the training executor (which keeps the
    # activations its backward reads)
    assert len(set(exe._plan.fwd.values())) < len(set(train._plan.fwd.values()))
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), train.forward()[0].asnumpy(),
                               rtol=1e-12)
    inner = s.get_internals()
    g = sym.Group([inner['fc1_output'], s])             # an internal head is never reused
    e2 = g.simple_bind(ff.cpu(), grad_req='null', data=(3, 5))
    assert not np.shares_memory(e2.outputs[0]._data, e2.outputs[1]._data)


def test_simple_bind_ignores_unknown_names_like_mxnet():
    exe = mlp().simple_bind(ff.cpu(), data=(2, 3), other_label=(2,),
                            grad_req={'data': 'write', 'ghost': 'write'})
    assert exe.grad_req['data'] == 'write' and exe.grad_req['fc1_weight'] == 'null'


@pytest.mark.gpu
def test_gpu_executor_matches_cpu():
    """Forward and backward on gpu(0) (the CUDA simulator in CI) equal the CPU run."""
    rng = np.random.RandomState(5)
    s = mlp(hidden=3, classes=2)
    cpu = s.simple_bind(ff.cpu(), data=(2, 3))
    gpu = s.simple_bind(ff.gpu(0), data=(2, 3))
    for k, a in cpu.arg_dict.items():
        v = rng.randint(0, 2, a.shape) if k == 'softmax_label' else rng.uniform(-1, 1, a.shape)
        a[:] = v
        gpu.arg_dict[k][:] = v
    assert gpu.outputs[0].context == ff.gpu(0)
    for e in (cpu, gpu):
        e.forward(is_train=True)
        e.backward()
    np.testing.assert_allclose(gpu.outputs[0].asnumpy(), cpu.outputs[0].asnumpy(), rtol=1e-5)
    for k in ('fc1_weight', 'fc2_bias', 'data'):
        np.testing.assert_allclose(gpu.grad_dict[k].asnumpy(), cpu.grad_dict[k].asnumpy(),
                                   rtol=1e-4, atol=1e-6)
    x = sym.Variable('x')
    two = sym.Group([x * 2.0, x * 2.0 + x])            # head copies and a consumed-twice input
    e = two.simple_bind(ff.gpu(0), x=(3,))
    e.arg_dict['x'][:] = np.array([1., 2., 3.])
    e.forward(is_train=True)
    e.backward([nd.ones((3,), ctx=ff.gpu(0)), nd.ones((3,), ctx=ff.gpu(0))])
    np.testing.assert_allclose(e.grad_dict['x'].asnumpy(), [5., 5., 5.])


@given(st.lists(st.tuples(st.sampled_from(['add', 'mul', 'sub', 'scal', 'tanh', 'wmul']),
                          st.integers(0, 50), st.integers(0, 50)), min_size=1, max_size=7),
       st.sampled_from(['write', 'add']))
def test_random_graph_gradients_property(steps, req):
    """Gradients of random DAGs (shared sub-expressions included) match finite differences."""
    with NameManager():
        x, y = sym.Variable('x'), sym.Variable('y')
        pool = [x, y]
        fns = [lambda v: v['x'], lambda v: v['y']]
        for kind, i, j in steps:
            a, b = pool[i % len(pool)], pool[j % len(pool)]
            fa, fb = fns[i % len(fns)], fns[j % len(fns)]
            if kind == 'add':
                s, f = a + b, (lambda v, fa=fa, fb=fb: fa(v) + fb(v))
            elif kind == 'mul':
                s, f = a * b, (lambda v, fa=fa, fb=fb: fa(v) * fb(v))
            elif kind == 'sub':
                s, f = a - b, (lambda v, fa=fa, fb=fb: fa(v) - fb(v))
            elif kind == 'scal':
                s, f = 0.5 - a * 1.5, (lambda v, fa=fa: 0.5 - fa(v) * 1.5)
            elif kind == 'tanh':
                s, f = sym.Activation(a, act_type='tanh'), (lambda v, fa=fa: np.tanh(fa(v)))
            else:
                s, f = sym._test_wmul(a, b), (lambda v, fa=fa, fb=fb: fa(v) * fb(v))
            pool.append(s)
            fns.append(f)
        out, fout = pool[-1], fns[-1]
        if 'x' not in out.list_arguments() or 'y' not in out.list_arguments():
            out = out + (x + y) * 0.0
            fout = (lambda v, g=fout: g(v) + (v['x'] + v['y']) * 0.0)
    rng = np.random.RandomState(len(steps))
    vals = {'x': rng.uniform(-1, 1, (3,)), 'y': rng.uniform(-1, 1, (3,))}
    head = rng.uniform(-1, 1, (3,))
    grads = {k: nd.array(np.full(3, 0.25), dtype='float64') for k in vals}
    exe = out.bind(ff.cpu(), {k: nd.array(v, dtype='float64') for k, v in vals.items()},
                   args_grad=grads, grad_req=req)
    np.testing.assert_allclose(exe.forward(is_train=True)[0].asnumpy(), fout(vals), rtol=1e-12)
    exe.backward(nd.array(head, dtype='float64'))
    for k in vals:
        num = np.zeros(3)
        for idx in range(3):
            p = {kk: vv.copy() for kk, vv in vals.items()}
            m = {kk: vv.copy() for kk, vv in vals.items()}
            p[k][idx] += 1e-6
            m[k][idx] -= 1e-6
            num[idx] = ((fout(p) - fout(m)) * head).sum() / 2e-6
        base = 0.25 if req == 'add' else 0.0
        np.testing.assert_allclose(grads[k].asnumpy(), num + base, rtol=1e-5, atol=1e-7)


def test_kernel_errors_name_the_node():
    from ffnumba.ops.registry import OpDef, register_op, list_ops

    def bad_fwd(ctx, p, ins, outs, aux):
        raise ZeroDivisionError('boom')

    def bad_bwd(ctx, p, og, ins, outs, ig, req, aux):
        raise ParamError('bad value')

    if '_test_fails' not in list_ops():
        register_op(OpDef(name='_test_fails', arguments=['data'],
                          infer_shape=lambda p, i, a, o: (list(i), [i[0]], []),
                          forward={'cpu': bad_fwd}, backward={'cpu': bad_bwd}))
    exe = sym._test_fails(sym.Variable('x'), name='f').simple_bind(ff.cpu(), x=(2,))
    with pytest.raises(FFError, match=r'Error in operator f \(_test_fails forward\): '
                                      r'ZeroDivisionError: boom'):
        exe.forward()
    with pytest.raises(ParamError, match='^Error in operator f: bad value'):
        exe.backward(nd.ones((2,)))


def _fc_exec():
    net = sym.FullyConnected(sym.Variable('data'), num_hidden=2, name='fc')
    return net.simple_bind(ff.cpu(), data=(3, 4))


def test_forward_accepts_array_likes_and_names_bad_values():
    exe = _fc_exec()
    exe.copy_params_from({'fc_weight': np.ones((2, 4)), 'fc_bias': np.zeros(2)})
    out = exe.forward(data=[[1.0] * 4] * 3)[0].asnumpy()
    np.testing.assert_allclose(out, np.full((3, 2), 4.0))
    with pytest.raises(ff.executor.ArgumentError, match='argument data must be'):
        exe.forward(data='abcd')
    with pytest.raises(ff.executor.ArgumentError, match='Unknown argument foo'):
        exe.forward(foo=nd.zeros((3, 4)))


def test_backward_misuse_is_named():
    exe = _fc_exec()
    exe.backward(nd.ones((3, 2)))  # before any forward, as MXNet allows
    exe.forward(is_train=True)
    with pytest.raises(ShapeError, match='2 out_grads for 1 outputs'):
        exe.backward([nd.ones((3, 2)), nd.ones((3, 2))])
    with pytest.raises(ShapeError, match=r'has shape \(3, 3\)'):
        exe.backward(nd.ones((3, 3)))
    exe.backward([np.ones((3, 2))])  # numpy head gradients are accepted
    np.testing.assert_allclose(exe.grad_dict['fc_bias'].asnumpy(), [3, 3])


def test_copy_params_from_and_bind_argument_errors():
    exe = _fc_exec()
    with pytest.raises(ParamError, match='`arg_params` must be a dict'):
        exe.copy_params_from([nd.zeros((2, 4))])
    with pytest.raises(ShapeError, match=r'fc_weight has shape \(5, 5\)'):
        exe.copy_params_from({'fc_weight': nd.zeros((5, 5))})
    with pytest.raises(ff.executor.ArgumentError, match='fc_weight'):
        exe.copy_params_from({'fc_weight': 'x'})
    net = sym.FullyConnected(sym.Variable('data'), num_hidden=2, name='fc')
    with pytest.raises(ParamError, match='fc_weight` is missing'):
        net.bind(ff.cpu(), {'data': nd.zeros((3, 4))})
    with pytest.raises(ff.executor.ArgumentError, match='must be an NDArray'):
        net.bind(ff.cpu(), {'data': np.zeros((3, 4)), 'fc_weight': nd.zeros((2, 4)),
                            'fc_bias': nd.zeros(2)})


@pytest.mark.parametrize('shape, match', [(3, 'tuple of ints'), ('ab', 'tuple of ints'),
                                          ((3, -4), '>= 0'), ((3, 2.5), 'tuple of ints')])
def test_bad_input_shapes_are_shape_errors(shape, match):
    net = sym.FullyConnected(sym.Variable('data'), num_hidden=2, name='fc')
    with pytest.raises(ShapeError, match=match):
        net.simple_bind(ff.cpu(), data=shape)
    with pytest.raises(ShapeError, match=match):
        net.infer_shape(data=shape)
    with pytest.raises(ShapeError, match=match):
        _fc_exec().reshape(data=shape)


def test_bind_keeps_null_req_grad_arrays_for_manual_sgd_loops():
    # MXNet tutorials zip(arg_arrays, grad_arrays) and update every pair; an
    # argument with grad_req 'null' keeps the caller's (never written) array.
    x = sym.Variable('x')
    w = sym.Variable('w')
    s = sym._test_wmul(x, w, name='m')
    gx, gw = nd.zeros((2,)), nd.zeros((2,))
    exe = s.bind(ff.cpu(), [nd.array([1., 2.]), nd.array([3., 4.])], args_grad=[gx, gw],
                 grad_req=['null', 'write'])
    assert exe.grad_arrays[0] is gx and exe.grad_arrays[1] is gw
    assert exe.grad_req == {'x': 'null', 'w': 'write'}
    exe.forward(is_train=True)
    exe.backward(nd.ones((2,)))
    for a, g in zip(exe.arg_arrays, exe.grad_arrays):
        a[:] = a - 0.5 * g
    np.testing.assert_allclose(gx.asnumpy(), [0., 0.])
    np.testing.assert_allclose(gw.asnumpy(), [1., 2.])
    np.testing.assert_allclose(exe.arg_dict['x'].asnumpy(), [1., 2.])
    np.testing.assert_allclose(exe.arg_dict['w'].asnumpy(), [2.5, 3.])
