"""BatchNorm: table tests, moving statistics, fix_gamma, inference, MXNet 1.9.1 goldens."""
import json

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ffnumba.symbol as sym
from ffnumba import ndarray as nd
from ffnumba.base import ParamError, ShapeError
from ffnumba.ops.registry import OpContext, get_op
from ffnumba.testing import OpCase, assert_almost_equal, bind_numpy

from golden import load_golden


def _moving(c):
    """Deterministic moving statistics for a channel count (the reference recomputes them)."""
    return np.linspace(-0.5, 0.5, c), np.linspace(0.5, 1.5, c)


def _bn_ref(p, data, gamma, beta, train):
    ax = p.get('axis', 1) % data.ndim
    red = tuple(i for i in range(data.ndim) if i != ax)
    shape = [1] * data.ndim
    shape[ax] = -1
    if train and not p.get('use_global_stats', False):
        mean, var = data.mean(red), data.var(red)
    else:
        mean, var = _moving(data.shape[ax])
    g = np.ones_like(gamma) if p.get('fix_gamma', True) else gamma
    eps = p.get('eps', 1e-3)
    return ((data - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
            * g.reshape(shape) + beta.reshape(shape)), mean, var


class TestBatchNorm(OpCase):
    op = 'BatchNorm'
    params = [dict(), dict(fix_gamma=False), dict(fix_gamma=False, axis=-1),
              dict(fix_gamma=False, use_global_stats=True, eps=1e-2),
              dict(fix_gamma=False, axis=0, momentum=0.5)]
    shapes = [dict(data=(4, 3, 2)), dict(data=(3, 2, 2, 2))]

    def aux_inputs(self, rng, p, shapes):
        mean, var = _moving(shapes['op_moving_mean'][0])
        return {'op_moving_mean': mean, 'op_moving_var': var}

    def reference(self, p, data, gamma, beta):
        # the generated forward test runs in evaluation mode: moving statistics
        return [_bn_ref(p, data, gamma, beta, train=False)[0]]


def _bind(p, x, gamma, beta, mean, var, grad_req='write'):
    s = sym.BatchNorm(sym.Variable('data'), name='bn', **p)
    return bind_numpy(s, {'data': x, 'bn_gamma': gamma, 'bn_beta': beta},
                      {'bn_moving_mean': mean, 'bn_moving_var': var}, grad_req=grad_req)


@pytest.mark.parametrize('p', [dict(fix_gamma=False, momentum=0.8),
                               dict(axis=-1, momentum=0.6),
                               dict(fix_gamma=False, use_global_stats=True)])
def test_training_step_moving_stats_and_grads(p):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 3, 4)) * 2 + 1
    ax = p.get('axis', 1) % 3
    c = x.shape[ax]
    gamma, beta = rng.uniform(0.5, 2, c), rng.standard_normal(c)
    mean0, var0 = _moving(c)
    exe = _bind(p, x, gamma, beta, mean0, var0)
    exe.forward(is_train=True)
    out, bmean, bvar = _bn_ref(p, x, gamma, beta, train=True)
    assert_almost_equal(exe.outputs[0].asnumpy(), out, 1e-10, 1e-10)
    # MXNet 1.9.1 (CPU): a training forward alone leaves the moving statistics alone
    assert_almost_equal(exe.aux_dict['bn_moving_mean'].asnumpy(), mean0, 0, 0)
    og = rng.standard_normal(x.shape)
    exe.backward([nd.array(og, dtype='float64')])
    if p.get('use_global_stats'):
        new_mean, new_var = mean0, var0
    else:
        m = p['momentum']
        new_mean, new_var = mean0 * m + bmean * (1 - m), var0 * m + bvar * (1 - m)
    assert_almost_equal(exe.aux_dict['bn_moving_mean'].asnumpy(), new_mean, 1e-12, 1e-12)
    assert_almost_equal(exe.aux_dict['bn_moving_var'].asnumpy(), new_var, 1e-12, 1e-12)
    red = tuple(i for i in range(3) if i != ax)
    assert_almost_equal(exe.grad_dict['bn_beta'].asnumpy(), og.sum(red), 1e-10, 1e-10)
    # an evaluation forward uses the updated moving statistics
    exe.forward(is_train=False)
    shape = [1, 1, 1]
    shape[ax] = -1
    g = gamma if not p.get('fix_gamma', True) else np.ones(c)
    ev = (x - new_mean.reshape(shape)) / np.sqrt(new_var.reshape(shape) + 1e-3) \
        * g.reshape(shape) + beta.reshape(shape)
    assert_almost_equal(exe.outputs[0].asnumpy(), ev, 1e-10, 1e-10)


def test_fix_gamma_writes_one_and_zero_grad():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 2, 3))
    exe = _bind(dict(fix_gamma=True), x, np.array([3.0, -2.0]), np.zeros(2), *_moving(2))
    exe.forward(is_train=True)
    assert_almost_equal(exe.arg_dict['bn_gamma'].asnumpy(), np.ones(2), 0, 0)
    exe.backward([nd.array(rng.standard_normal(x.shape), dtype='float64')])
    assert_almost_equal(exe.grad_dict['bn_gamma'].asnumpy(), np.zeros(2), 0, 0)
    # with fix_gamma=False the gradient is sum(og * xhat) != 0
    exe = _bind(dict(fix_gamma=False), x, np.array([3.0, -2.0]), np.zeros(2), *_moving(2))
    exe.forward(is_train=True)
    exe.backward([nd.array(rng.standard_normal(x.shape), dtype='float64')])
    assert np.all(np.abs(exe.grad_dict['bn_gamma'].asnumpy()) > 0)
    assert_almost_equal(exe.arg_dict['bn_gamma'].asnumpy(), [3.0, -2.0], 0, 0)


@pytest.mark.parametrize('train', [True, False])
def test_output_mean_var(train):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 3))
    mean0, var0 = _moving(3)
    p = dict(output_mean_var=True, fix_gamma=False)
    s = sym.BatchNorm(sym.Variable('data'), name='bn', **p)
    assert s.list_outputs() == ['bn_output', 'bn_mean', 'bn_var']
    exe = _bind(p, x, np.ones(3), np.zeros(3), mean0, var0)
    exe.forward(is_train=train)
    mean, var = (x.mean(0), x.var(0)) if train else (mean0, var0)
    assert_almost_equal(exe.outputs[1].asnumpy(), mean, 1e-12, 1e-12)
    # MXNet's CPU operator outputs the inverse standard deviation as `var`
    assert_almost_equal(exe.outputs[2].asnumpy(), 1 / np.sqrt(var + 1e-3), 1e-12, 1e-12)


def test_declaration():
    op = get_op('BatchNorm')
    p = op.parse_params({})
    assert (p.eps, p.momentum, p.fix_gamma, p.use_global_stats, p.axis) == (1e-3, 0.9, True,
                                                                            False, 1)
    assert op.list_aux(p) == ['moving_mean', 'moving_var']
    assert op.hidden_outputs(p) == 2
    assert op.hidden_outputs(op.parse_params(dict(output_mean_var=True))) == 0
    s = sym.BatchNorm(sym.Variable('data'), name='bn')
    assert s.list_arguments() == ['data', 'bn_gamma', 'bn_beta']
    assert s.list_auxiliary_states() == ['bn_moving_mean', 'bn_moving_var']


def test_bad_params():
    with pytest.raises(ParamError) as e:
        get_op('BatchNorm').parse_params(dict(momentum=1.5))
    assert str(e.value) == ('BatchNorm: `momentum` must be a float >= 0.0 <= 1.0. '
                            'Received: momentum=1.5')
    with pytest.raises(ParamError, match='BatchNorm: unknown parameter `moment`'):
        get_op('BatchNorm').parse_params(dict(moment=0.5))


@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data())
def test_infer_shape_property(shape, data):
    nd_ = len(shape)
    axis = data.draw(st.integers(-nd_, nd_ - 1))
    s = sym.BatchNorm(sym.Variable('data'), axis=axis, name='bn')
    args, outs, aux = s.infer_shape(data=tuple(shape))
    c = (shape[axis],)
    assert args == [tuple(shape), c, c] and outs == [tuple(shape)] and aux == [c, c]


def test_infer_shape_errors():
    s = sym.BatchNorm(sym.Variable('data'), axis=3, name='bn')
    with pytest.raises(ShapeError, match='axis'):
        s.infer_shape(data=(2, 3, 4))
    s = sym.BatchNorm(sym.Variable('data'), name='bn')
    with pytest.raises(ShapeError, match='Error in operator bn'):
        s.infer_shape(data=(2, 3, 4), bn_gamma=(4,))


def test_infer_type_float16_params_float32():
    s = sym.BatchNorm(sym.Variable('data'), name='bn')
    args, outs, aux = s.infer_type(data='float16')
    assert [np.dtype(t) for t in args] == [np.float16, np.float32, np.float32]
    assert [np.dtype(t) for t in aux] == [np.float32, np.float32]
    assert np.dtype(outs[0]) == np.float16


def test_float16_forward_runs_in_float32():
    op = get_op('BatchNorm')
    p = op.parse_params(dict(fix_gamma=False))
    x = np.random.default_rng(0).standard_normal((8, 2)).astype(np.float16)
    out = np.empty_like(x)
    aux = [np.zeros(2, np.float32), np.ones(2, np.float32)]
    op.forward['cpu'](OpContext(True, None, {}, None, 'bn'), p,
                      [x, np.ones(2, np.float32), np.zeros(2, np.float32)], [out], aux)
    xf = x.astype(np.float64)
    ref = (xf - xf.mean(0)) / np.sqrt(xf.var(0) + 1e-3)
    assert out.dtype == np.float16
    assert_almost_equal(out, ref, 2e-3, 2e-3)


@pytest.mark.parametrize('case', sorted(load_golden('batchnorm')))
def test_golden_mxnet(case):
    """One forward + backward against MXNet 1.9.1 (MXNET_MKLDNN_ENABLED=0): outputs,
    gradients, gamma after the step and the moving statistics, within 1e-4."""
    c = load_golden('batchnorm')[case]
    p = json.loads(str(c['params']))
    is_train = p.pop('is_train')
    s = sym.BatchNorm(sym.Variable('data'), sym.Variable('op_gamma'), sym.Variable('op_beta'),
                      name='op', **p)
    loc = {n: c['arg_' + n] for n in s.list_arguments()}
    aux = {n: c['aux_' + n[3:]] for n in s.list_auxiliary_states()}
    exe = bind_numpy(s, loc, aux)
    exe.forward(is_train=is_train)
    for i, o in enumerate(exe.outputs):
        assert_almost_equal(o.asnumpy(), c['out%d' % i], 1e-4, 1e-4,
                            names=('output %d' % i, 'mxnet'))
    exe.backward([nd.array(c['head%d' % i]) for i in range(len(exe.outputs))])
    for n in s.list_arguments():
        assert_almost_equal(exe.grad_dict[n].asnumpy(), c['grad_' + n], 1e-4, 1e-4,
                            names=('grad ' + n, 'mxnet'))
        assert_almost_equal(exe.arg_dict[n].asnumpy(), c['argafter_' + n], 0, 0)
    for n in s.list_auxiliary_states():
        assert_almost_equal(exe.aux_dict[n].asnumpy(), c['auxafter_' + n[3:]], 1e-4, 1e-4,
                            names=(n + ' after the step', 'mxnet'))


@pytest.mark.gpu
@pytest.mark.parametrize('p, shape', [(dict(fix_gamma=False, momentum=0.7), (70, 2, 2)),
                                      (dict(axis=-1), (2, 3, 4)),
                                      (dict(fix_gamma=False, use_global_stats=True), (3, 2)),
                                      (dict(fix_gamma=False, output_mean_var=True), (4, 3))])
def test_gpu_training_step_matches_cpu(p, shape, monkeypatch):
    """A training forward + backward on the (simulated) GPU equals the CPU kernels:
    outputs, gradients, gamma and the updated moving statistics."""
    from ffnumba.context import cpu, gpu
    from ffnumba import jit
    monkeypatch.setattr(jit, 'GPU_THREADS', 32)   # several blocks: exercise the edges
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape)
    c = shape[p.get('axis', 1)]
    s = sym.BatchNorm(sym.Variable('data'), name='bn', **p)
    loc = {'data': x, 'bn_gamma': rng.uniform(0.5, 2, c), 'bn_beta': rng.standard_normal(c)}
    mean0, var0 = _moving(c)
    results = []
    for ctx in (cpu(0), gpu(0)):
        exe = bind_numpy(s, loc, {'bn_moving_mean': mean0, 'bn_moving_var': var0}, ctx=ctx)
        exe.forward(is_train=True)
        heads = [0.5 + np.arange(o.size).reshape(o.shape) % 3 for o in exe.outputs]
        exe.backward([nd.array(h, ctx=ctx, dtype='float64') for h in heads])
        results.append([o.asnumpy() for o in exe.outputs] +
                       [exe.grad_dict[n].asnumpy() for n in s.list_arguments()] +
                       [exe.arg_dict['bn_gamma'].asnumpy()] +
                       [exe.aux_dict[n].asnumpy() for n in s.list_auxiliary_states()])
    for a, b in zip(*results):
        assert_almost_equal(a, b, 1e-10, 1e-10, names=('gpu', 'cpu'))
