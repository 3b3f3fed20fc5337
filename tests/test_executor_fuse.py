"""Inference fusion (``ffnumba._executor_fuse``): Convolution [-> BatchNorm] [-> relu] as one call.

Fused and unfused outputs must be bit-identical (the epilogue does the unfused
kernels' arithmetic), the fused path must really run where it applies, and
never where a value it skips is observable.
"""
import numpy as np
import pytest

import ffnumba as ff
from bench_modules import benchmark_module
from ffnumba.ops.nn import _conv_epilogue as ep_mod
from ffnumba.ops.nn import convolution as conv_mod

S = ff.sym


@pytest.fixture
def calls(monkeypatch):
    """Counts the fused convolution (their modes) and ``elemwise_add -> relu`` (``'add'``)
    calls of executors bound after it is set up."""
    seen = []
    real = conv_mod.fused_forward_cpu
    real_add = ep_mod.add_relu_forward

    def counting(ctx, p, inputs, y, ep, mode):
        seen.append(mode)
        return real(ctx, p, inputs, y, ep, mode)

    def counting_add(a, b, out):
        seen.append('add')
        return real_add(a, b, out)
    monkeypatch.setattr(conv_mod, 'fused_forward_cpu', counting)
    monkeypatch.setattr(ep_mod, 'add_relu_forward', counting_add)
    return seen


def _cbr(x, name, nf, k, s=1, bn=True, relu=True, g=1, **bn_kw):
    x = S.Convolution(x, num_filter=nf, kernel=(k, k), stride=(s, s), pad=(k // 2, k // 2),
                      num_group=g, no_bias=bn, name=name + '_conv')
    if bn:
        kw = dict(fix_gamma=False, eps=2e-5)
        kw.update(bn_kw)
        x = S.BatchNorm(x, name=name + '_bn', **kw)
    if relu:
        x = S.Activation(x, act_type='relu', name=name + '_relu')
    return x


def resnet_like():
    """Stem, a basic residual unit with a projection shortcut (conv+BN without relu), a head."""
    x = _cbr(S.Variable('data'), 'stem', 16, 3)
    y = _cbr(x, 'u_0', 32, 3, s=2)
    y = _cbr(y, 'u_1', 32, 3, relu=False)
    short = _cbr(x, 'u_sc', 32, 1, s=2, relu=False)
    x = S.Activation(S.elemwise_add(y, short, name='u_add'), act_type='relu', name='u_out')
    x = _cbr(x, 'u2_0', 32, 1)                        # pointwise (direct GEMM path)
    return S.Pooling(x, global_pool=True, kernel=(1, 1), pool_type='avg', name='pool')


def inception_like():
    """Four branches from one input (conv inputs with several consumers), a Concat, and
    a GoogLeNet-style conv with bias and relu but no BatchNorm."""
    x = _cbr(S.Variable('data'), 'c1', 24, 3)
    a = _cbr(x, 'a', 8, 1)
    b = _cbr(_cbr(x, 'b_r', 16, 1), 'b', 16, 3)
    c = _cbr(_cbr(x, 'c_r', 8, 1, bn=False), 'c', 8, 5, bn=False)
    d = _cbr(S.Pooling(x, kernel=(3, 3), pad=(1, 1), pool_type='max'), 'd', 8, 1)
    return S.Concat(a, b, c, d, name='cat')


def activations_like():
    """The ``relu`` operator and ``clip`` (relu6) as the chain's activation."""
    x = S.relu(_cbr(S.Variable('data'), 'a', 16, 3, relu=False), name='a_relu')
    x = S.clip(_cbr(x, 'b', 16, 3, relu=False), a_min=0, a_max=6, name='b_relu6')
    x = S.clip(_cbr(x, 'c', 8, 1, relu=False, bn=False), a_min=-0.5, a_max=0.25, name='c_clip')
    return S.Activation(_cbr(x, 'd', 8, 1, relu=False), act_type='tanh', name='d_tanh')


def mobilenet_like():
    x = _cbr(S.Variable('data'), 'c0', 16, 3, s=2)
    x = _cbr(x, 'dw0', 16, 3, g=16)
    x = _cbr(x, 'pw0', 32, 1)
    x = _cbr(x, 'dw1', 32, 3, s=2, g=32)
    return _cbr(x, 'pw1', 32, 1, relu=False)


def _fill(exe, seed=0):
    """He-scaled weights, gammas near 1, positive moving variances: values stay finite
    through deep nets."""
    rng = np.random.default_rng(seed)
    for name, a in exe.arg_dict.items():
        if name.endswith('weight'):
            a[:] = rng.standard_normal(a.shape) * np.sqrt(2.0 / np.prod(a.shape[1:]))
        elif name.endswith('gamma'):
            a[:] = rng.uniform(0.5, 1.5, a.shape)
        else:
            a[:] = rng.standard_normal(a.shape) * (1.0 if name == 'data' else 0.1)
    for name, a in exe.aux_dict.items():
        a[:] = rng.uniform(0.5, 2.0, a.shape) if 'var' in name else \
            rng.standard_normal(a.shape) * 0.1


def _bind(monkeypatch, net, shape, fuse=True, dtype='float32', grad_req='null'):
    """``fuse``: True binds ``FFNUMBA_FUSE=exact`` (bit-identical epilogues), False ``0``,
    a string that value (``'1'``: the default, float32 BatchNorm folded)."""
    monkeypatch.setenv('FFNUMBA_FUSE', {True: 'exact', False: '0'}.get(fuse, fuse))
    exe = net.simple_bind(ff.cpu(), grad_req=grad_req, data=shape, type_dict={'data': dtype})
    monkeypatch.delenv('FFNUMBA_FUSE')
    _fill(exe)
    return exe


def _pair(monkeypatch, net, shape, dtype='float32', fuse=True):
    return (_bind(monkeypatch, net, shape, fuse, dtype),
            _bind(monkeypatch, net, shape, False, dtype))


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('make,shape,chains', [
    (resnet_like, (4, 3, 12, 12), 6),           # 5 convolution chains, one add -> relu
    (resnet_like, (1, 3, 10, 10), 6),           # one sample per GEMM, short rows
    (inception_like, (3, 5, 10, 10), 7),
    (mobilenet_like, (2, 3, 16, 16), 5),
    (activations_like, (2, 3, 9, 9), 4),
])
def test_fused_forward_is_bitwise_the_unfused_one(monkeypatch, calls, make, shape, chains,
                                                  dtype):
    fused, plain = _pair(monkeypatch, make(), shape, dtype)
    assert len(fused.fused_nodes) == chains and plain.fused_nodes == []
    for _ in range(2):
        y = fused.forward(is_train=False)[0].asnumpy()
        ref = plain.forward(is_train=False)[0].asnumpy()
        np.testing.assert_array_equal(y, ref)
    assert len(calls) == 2 * chains
    assert y.dtype == np.dtype(dtype)


def test_chains_found(monkeypatch):
    exe = _bind(monkeypatch, resnet_like(), (2, 3, 8, 8))
    assert sorted(exe.fused_nodes) == sorted([
        ('stem_conv', 'stem_bn', 'stem_relu'), ('u_0_conv', 'u_0_bn', 'u_0_relu'),
        ('u_1_conv', 'u_1_bn'), ('u_sc_conv', 'u_sc_bn'), ('u2_0_conv', 'u2_0_bn', 'u2_0_relu'),
        ('u_add', 'u_out')])
    exe = _bind(monkeypatch, activations_like(), (2, 3, 8, 8))
    assert exe.fused_nodes == [('a_conv', 'a_bn', 'a_relu'), ('b_conv', 'b_bn', 'b_relu6'),
                               ('c_conv', 'c_clip'), ('d_conv', 'd_bn')]
    exe = _bind(monkeypatch, inception_like(), (2, 3, 8, 8))
    assert ('c_conv', 'c_relu') in exe.fused_nodes and ('c_r_conv', 'c_r_relu') in exe.fused_nodes


def test_two_threads_and_wide_planes_match(monkeypatch, calls):
    """Larger planes: im2col row runs, several samples per chunk, the batch split over
    threads (when numba has two), Winograd's output transform."""
    import numba
    net = resnet_like()
    fused, plain = _pair(monkeypatch, net, (8, 3, 40, 40))
    old = numba.get_num_threads()
    try:
        for nt in sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}):
            numba.set_num_threads(nt)
            np.testing.assert_array_equal(fused.forward(is_train=False)[0].asnumpy(),
                                          plain.forward(is_train=False)[0].asnumpy())
    finally:
        numba.set_num_threads(old)
    assert calls


def test_non_finite_data_matches(monkeypatch):
    """An inf or NaN sends Winograd layers to im2col; the fused path follows."""
    fused, plain = _pair(monkeypatch, resnet_like(), (2, 3, 12, 12))
    data = np.random.default_rng(1).standard_normal((2, 3, 12, 12)).astype('f4')
    data[0, 1, 3, 4] = np.nan
    data[1, 0, 5, 5] = np.inf
    y = fused.forward(is_train=False, data=data)[0].asnumpy()
    np.testing.assert_array_equal(y, plain.forward(is_train=False, data=data)[0].asnumpy())
    assert np.isnan(y).any()


def test_fix_gamma_writes_one_into_gamma_as_unfused(monkeypatch, calls):
    net = _cbr(S.Variable('data'), 'a', 8, 3, fix_gamma=True, eps=1e-3)
    fused, plain = _pair(monkeypatch, net, (2, 3, 6, 6))
    y = fused.forward()[0].asnumpy()
    np.testing.assert_array_equal(y, plain.forward()[0].asnumpy())
    assert (y == 0).any() and (y > 0).any()         # the relu epilogue did something
    np.testing.assert_array_equal(fused.arg_dict['a_bn_gamma'].asnumpy(), np.ones(8, 'f4'))
    assert calls == [3]


def test_module_predict_and_feedforward_fuse(monkeypatch, calls):
    net = S.SoftmaxOutput(S.FullyConnected(S.Flatten(resnet_like()), num_hidden=4, name='fc'),
                          name='softmax')
    rng = np.random.default_rng(2)
    X = rng.standard_normal((6, 3, 8, 8)).astype('f4')
    outs, counts, params = [], [], None
    for fuse in ('exact', '0'):
        monkeypatch.setenv('FFNUMBA_FUSE', fuse)
        mod = ff.mod.Module(net, context=ff.cpu())
        mod.bind([('data', (3, 3, 8, 8))], for_training=False)
        if params is None:
            mod.init_params(ff.init.Uniform(0.5))
            arg, aux = mod.get_params()
            aux = {k: ff.nd.array(rng.uniform(0.5, 2, v.shape) if 'var' in k
                                  else rng.standard_normal(v.shape)) for k, v in aux.items()}
            params = arg, aux
        mod.set_params(*params, force_init=True)
        outs.append(mod.predict(ff.io.NDArrayIter(X, batch_size=3)).asnumpy())
        counts.append(len(calls))
        model = ff.model.FeedForward(net, ctx=ff.cpu(), arg_params=arg, aux_params=aux)
        outs.append(model.predict(X))
        counts.append(len(calls))
    assert counts[0] == 2 * 6 and counts[1] > counts[0] and counts[3] == counts[1]
    np.testing.assert_array_equal(outs[0], outs[2])
    np.testing.assert_array_equal(outs[1], outs[3])
    # Module (batch 3) and FeedForward (one batch of 6) chunk their GEMMs differently
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6)


def test_no_fusion_across_observable_values(monkeypatch, calls):
    # an internal output: the BatchNorm output of 'b' is a graph output
    x = _cbr(S.Variable('data'), 'a', 8, 3)
    bn = S.BatchNorm(S.Convolution(x, num_filter=8, kernel=(1, 1), no_bias=True, name='b_conv'),
                     fix_gamma=False, name='b_bn')
    net = S.Group([S.Activation(bn, act_type='relu', name='b_relu'), bn])
    exe = _bind(monkeypatch, net, (2, 3, 6, 6))
    # the BatchNorm output may end a chain (the fused call writes it), not be skipped
    assert exe.fused_nodes == [('a_conv', 'a_bn', 'a_relu'), ('b_conv', 'b_bn')]
    plain = _bind(monkeypatch, net, (2, 3, 6, 6), fuse=False)
    for a, b in zip(exe.forward(), plain.forward()):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    assert ('b_conv', 'b_bn', 'b_relu') not in exe.fused_nodes
    # a branch consumes the convolution output: no chain starts there
    c = S.Convolution(S.Variable('data'), num_filter=4, kernel=(3, 3), name='c_conv')
    net = S.Activation(c, act_type='relu', name='c_relu') + S.sigmoid(c)
    assert _bind(monkeypatch, net, (2, 3, 6, 6)).fused_nodes == []
    # get_internals outputs
    internals = resnet_like().get_internals()
    net = S.Group([internals['stem_conv_output'], internals['u2_0_relu_output']])
    exe = _bind(monkeypatch, net, (2, 3, 8, 8))
    assert all(chain[0] != 'stem_conv' for chain in exe.fused_nodes)
    # BatchNorm that does not fuse: another axis, output_mean_var; a non-relu activation
    d = S.Convolution(S.Variable('data'), num_filter=4, kernel=(1, 1), no_bias=True, name='d')
    for bn in (S.BatchNorm(d, axis=3, name='bn'), S.BatchNorm(d, output_mean_var=True,
                                                              name='bn')[0]):
        assert _bind(monkeypatch, S.Activation(bn, act_type='relu'), (2, 3, 4, 4)
                     ).fused_nodes == []
    exe = _bind(monkeypatch, S.Activation(S.BatchNorm(d, name='bn'), act_type='tanh'),
                (2, 3, 4, 4))
    assert exe.fused_nodes == [('d', 'bn')]


def test_monitor_runs_unfused(monkeypatch, calls):
    net = resnet_like()
    exe = _bind(monkeypatch, net, (2, 3, 8, 8))
    seen = {}
    exe.set_monitor_callback(lambda name, arr: seen.setdefault(name, arr.asnumpy().copy()))
    y = exe.forward(is_train=False)[0].asnumpy()
    assert calls == [] and 'stem_bn_output' in seen and 'stem_conv_output' in seen
    plain = _bind(monkeypatch, net, (2, 3, 8, 8), fuse=False)
    np.testing.assert_array_equal(y, plain.forward()[0].asnumpy())
    exe.set_monitor_callback(None)
    np.testing.assert_array_equal(exe.forward()[0].asnumpy(), y)
    assert calls


def test_module_install_monitor_runs_unfused(monkeypatch, calls):
    mod = ff.mod.Module(resnet_like(), label_names=None, context=ff.cpu())
    mod.bind([('data', (2, 3, 8, 8))], for_training=False)
    mod.init_params()
    mon = ff.monitor.Monitor(1, pattern='stem_bn_output')
    mod.install_monitor(mon)
    mon.tic()
    mod.forward(ff.io.DataBatch([ff.nd.ones((2, 3, 8, 8))]), is_train=False)
    assert [r[1] for r in mon.toc()] == ['stem_bn_output'] and calls == []


def test_training_runs_unfused(monkeypatch, calls):
    net = resnet_like()
    train = _bind(monkeypatch, net, (2, 3, 8, 8), grad_req='write')
    assert train.fused_nodes == []
    infer = _bind(monkeypatch, net, (2, 3, 8, 8))
    np.testing.assert_array_equal(train.forward(is_train=False)[0].asnumpy(),
                                  infer.forward(is_train=False)[0].asnumpy())
    calls.clear()
    # a training forward on the inference executor (batch statistics) is unfused
    np.testing.assert_array_equal(train.forward(is_train=True)[0].asnumpy(),
                                  infer.forward(is_train=True)[0].asnumpy())
    assert calls == []
    np.testing.assert_array_equal(train.forward(is_train=False)[0].asnumpy(),
                                  infer.forward(is_train=False)[0].asnumpy())
    assert calls


def test_grad_req_add_unaffected(monkeypatch, calls):
    net = S.sum(resnet_like())
    exe = _bind(monkeypatch, net, (2, 3, 8, 8), grad_req='add')
    ref = _bind(monkeypatch, net, (2, 3, 8, 8), grad_req='add', fuse=False)
    assert exe.fused_nodes == []
    for e in (exe, ref):
        for _ in range(2):
            e.forward(is_train=True)
            e.backward(ff.nd.ones((1,)))
    for k in exe.grad_dict:
        np.testing.assert_array_equal(exe.grad_dict[k].asnumpy(), ref.grad_dict[k].asnumpy())
    assert calls == []


def test_fuse_switch_off(monkeypatch, calls):
    exe = _bind(monkeypatch, resnet_like(), (2, 3, 8, 8), fuse=False)
    exe.forward()
    assert exe.fused_nodes == [] and calls == []


def test_reshape_keeps_fusion_and_results(monkeypatch):
    net = inception_like()
    fused, plain = _pair(monkeypatch, net, (4, 3, 10, 10))
    monkeypatch.setenv('FFNUMBA_FUSE', 'exact')     # read again at the reshape's bind
    f2, p2 = fused.reshape(data=(2, 3, 10, 10)), plain.reshape(data=(2, 3, 10, 10))
    assert f2.fused_nodes == fused.fused_nodes and p2.fused_nodes == []
    data = np.random.default_rng(4).standard_normal((2, 3, 10, 10))
    np.testing.assert_array_equal(f2.forward(data=data)[0].asnumpy(),
                                  p2.forward(data=data)[0].asnumpy())


def test_float16_runs_unfused(monkeypatch):
    exe = _bind(monkeypatch, resnet_like(), (2, 3, 8, 8), dtype='float16')
    assert exe.fused_nodes == []


def _zoo():
    return benchmark_module('zoo_nets').NETS


@pytest.mark.parametrize('name', ['resnet18_v1_32', 'inception_bn', 'mobilenet_v1',
                                  'mobilenet_v2', 'googlenet', 'vgg11_bn', 'resnet50_v1_32'])
def test_zoo_inference_outputs_bitwise(monkeypatch, calls, name):
    from ffnumba.ops.nn import fully_connected as fc_mod
    fc_calls = []
    real = fc_mod.fused_relu_forward_cpu
    monkeypatch.setattr(fc_mod, 'fused_relu_forward_cpu',
                        lambda *a: fc_calls.append(1) or real(*a))
    build, shape = _zoo()[name]
    net = build(S)
    fused, plain = _pair(monkeypatch, net, (2,) + shape)
    assert fused.fused_nodes
    ys = fused.forward(is_train=False)
    refs = plain.forward(is_train=False)
    for y, ref in zip(ys, refs):
        np.testing.assert_array_equal(y.asnumpy(), ref.asnumpy())
        assert np.isfinite(y.asnumpy()).all()
    assert len(calls) + len(fc_calls) == len(fused.fused_nodes)
    assert len(fc_calls) == (2 if name == 'vgg11_bn' else 0)     # its FullyConnected -> relu


@pytest.mark.gpu
def test_gpu_executor_runs_unfused_and_matches_cpu(monkeypatch, calls):
    """A GPU executor (the CUDA simulator in CI) never fuses; its inference equals the
    fused CPU run up to the GPU kernels' rounding."""
    net = _cbr(_cbr(S.Variable('data'), 'a', 4, 3), 'b', 4, 3, relu=False)
    cpu = _bind(monkeypatch, net, (2, 3, 5, 5))
    gpu = net.simple_bind(ff.gpu(0), grad_req='null', data=(2, 3, 5, 5))
    gpu.copy_params_from({k: v for k, v in cpu.arg_dict.items()}, cpu.aux_dict)
    assert gpu.fused_nodes == [] and len(cpu.fused_nodes) == 2
    np.testing.assert_allclose(gpu.forward(is_train=False)[0].asnumpy(),
                               cpu.forward(is_train=False)[0].asnumpy(), rtol=1e-5, atol=1e-5)
    assert len(calls) == 2


@pytest.fixture
def ep_dtypes(monkeypatch):
    """The epilogue dtypes of the fused convolution calls of executors bound after it."""
    seen = []
    real = conv_mod.fused_forward_cpu

    def spy(ctx, p, inputs, y, ep, mode):
        seen.append((mode & 1, ep.dtype))
        return real(ctx, p, inputs, y, ep, mode)
    monkeypatch.setattr(conv_mod, 'fused_forward_cpu', spy)
    return seen


@pytest.mark.parametrize('make,shape', [
    (resnet_like, (4, 3, 12, 12)), (inception_like, (3, 5, 10, 10)),
    (mobilenet_like, (2, 3, 16, 16)), (activations_like, (2, 3, 9, 9))])
def test_default_float32_folds_batchnorm_within_rounding(monkeypatch, ep_dtypes, make, shape):
    """``FFNUMBA_FUSE`` unset (or ``1``): float32 BatchNorm chains run their map in
    float32 (a float32 epilogue array), within float32 rounding of the unfused
    operators; relu/clip-only chains keep the float64 array and stay bit-identical."""
    fused, plain = _pair(monkeypatch, make(), shape, fuse='1')
    y = fused.forward(is_train=False)[0].asnumpy()
    ref = plain.forward(is_train=False)[0].asnumpy()
    assert ep_dtypes and {dt for bn, dt in ep_dtypes if bn} == {np.dtype('float32')}
    assert {dt for bn, dt in ep_dtypes if not bn} <= {np.dtype('float64')}
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    # FFNUMBA_FUSE=exact keeps the float64 map: bit-identical
    exact = _bind(monkeypatch, make(), shape, True).forward(is_train=False)[0].asnumpy()
    np.testing.assert_array_equal(exact, ref)


def test_folded_batchnorm_follows_new_statistics(monkeypatch, ep_dtypes):
    """The folded float32 map is recomputed from the BatchNorm's current parameters and
    moving statistics at every forward (``set_params`` after bind is seen)."""
    fused, plain = _pair(monkeypatch, mobilenet_like(), (2, 3, 16, 16), fuse='1')
    for exe in (fused, plain):
        exe.aux_dict['dw0_bn_moving_var'][:] = 4.0
        exe.arg_dict['pw0_bn_beta'][:] = 0.5
    y = fused.forward(is_train=False)[0].asnumpy()
    ref = plain.forward(is_train=False)[0].asnumpy()
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


def test_default_float64_stays_bitwise(monkeypatch, ep_dtypes):
    fused, plain = _pair(monkeypatch, mobilenet_like(), (2, 3, 16, 16), 'float64', fuse='1')
    np.testing.assert_array_equal(fused.forward(is_train=False)[0].asnumpy(),
                                  plain.forward(is_train=False)[0].asnumpy())
    assert {dt for _, dt in ep_dtypes} == {np.dtype('float64')}


@pytest.mark.parametrize('name', ['mobilenet_v2', 'inception_bn', 'resnet50_v1_32'])
def test_zoo_default_fold_within_rounding(monkeypatch, name):
    """Deep float32 nets with the default folded BatchNorm stay within float32 rounding
    of the unfused forward (the relative error does not grow with depth)."""
    build, shape = _zoo()[name]
    fused, plain = _pair(monkeypatch, build(S), (2,) + shape, fuse='1')
    ys, refs = fused.forward(is_train=False), plain.forward(is_train=False)
    for y, ref in zip(ys, refs):
        np.testing.assert_allclose(y.asnumpy(), ref.asnumpy(), rtol=1e-4, atol=1e-6)


def test_add_relu_pairs_fuse_bitwise(monkeypatch, calls):
    """``elemwise_add -> relu`` runs as one pass, bit-identical (NaN kept, both threads on
    a large sum); an add whose sum is read elsewhere, or with no relu after it, stays
    unfused."""
    import numba
    a, b = S.Variable('a'), S.Variable('b')
    net = S.relu(S.elemwise_add(a, b, name='s'), name='r')
    shape = (4, 8, 40, 40)
    rng = np.random.default_rng(3)
    va, vb = rng.standard_normal(shape), rng.standard_normal(shape)
    va[0, 0, 0, :3] = (np.nan, np.inf, -np.inf)
    for dtype in ('float32', 'float64'):
        exes = []
        for fuse in ('1', '0'):
            monkeypatch.setenv('FFNUMBA_FUSE', fuse)
            exes.append(net.simple_bind(ff.cpu(), grad_req='null', a=shape, b=shape,
                                        type_dict={'a': dtype, 'b': dtype}))
        assert exes[0].fused_nodes == [('s', 'r')] and exes[1].fused_nodes == []
        old = numba.get_num_threads()
        try:
            for nt in sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}):
                numba.set_num_threads(nt)
                y, ref = (e.forward(is_train=False, a=va, b=vb)[0].asnumpy() for e in exes)
                np.testing.assert_array_equal(y, ref)
        finally:
            numba.set_num_threads(old)
        assert np.isnan(y[0, 0, 0, 0]) and y[0, 0, 0, 1] == np.inf and np.nanmin(y) == 0
    assert 'add' in calls
    monkeypatch.setenv('FFNUMBA_FUSE', '1')
    s = S.elemwise_add(a, b, name='s')
    for other in (S.Group([S.relu(s, name='r'), s]), S.relu(s, name='r') * s, s + 1):
        assert other.simple_bind(ff.cpu(), grad_req='null', a=(2, 3), b=(2, 3)).fused_nodes == []


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_add_relu_writes_over_a_dying_summand(monkeypatch, calls, dtype):
    """The fused ``elemwise_add -> relu`` of an inference plan writes its sum over a
    summand whose storage the plan frees there (``_executor_fuse.in_place``). The results
    stay the unfused ones bit for bit: on repeated runs, and when the same plan runs
    unfused (a monitor; ``is_train=True``, which reads the summands with BatchNorm's
    batch statistics)."""
    aliased, real = [], ep_mod.add_relu_forward

    def spy(a, b, out):
        aliased.append(np.shares_memory(out, a) or np.shares_memory(out, b))
        return real(a, b, out)
    monkeypatch.setattr(ep_mod, 'add_relu_forward', spy)
    fused, plain = _pair(monkeypatch, resnet_like(), (4, 3, 12, 12), dtype)
    ent = {n: e for e, n in enumerate(fused._view.entry_names())}
    out, summands = ent['u_out_output'], (ent['u_1_bn_output'], ent['u_sc_bn_output'])
    assert fused._plan.fwd[out] in [fused._plan.fwd[e] for e in summands]
    want = plain.forward(is_train=False)[0].asnumpy()
    for _ in range(2):
        np.testing.assert_array_equal(fused.forward(is_train=False)[0].asnumpy(), want)
    assert aliased == [True, True] and calls.count('add') == 2
    np.testing.assert_array_equal(fused.forward(is_train=True)[0].asnumpy(),
                                  plain.forward(is_train=True)[0].asnumpy())
    seen = []
    fused.set_monitor_callback(lambda name, arr: seen.append(name))
    np.testing.assert_array_equal(fused.forward(is_train=False)[0].asnumpy(), want)
    assert seen and calls.count('add') == 2          # the monitor's forward ran unfused


def test_plain_add_writes_over_a_dying_summand_in_inference_only(monkeypatch):
    """An inference executor's ``elemwise_add`` with no relu after it (ResNet v2,
    MobileNet v2) writes its sum over the summand the plan frees there; a training
    executor and ``FFNUMBA_FUSE=0`` keep their own storages, and a summand read later is
    never written over. The results are the same bits either way."""
    x = _cbr(S.Variable('data'), 'a', 8, 3)
    y = S.elemwise_add(_cbr(x, 'b', 8, 3, relu=False), _cbr(x, 'c', 8, 1, relu=False),
                       name='s')
    net = _cbr(y, 'd', 8, 1)
    shape = (2, 3, 9, 9)
    fused, plain = _pair(monkeypatch, net, shape, 'float32')
    train = _bind(monkeypatch, net, shape, grad_req='write')

    def aliased(exe):
        ent = {n: e for e, n in enumerate(exe._view.entry_names())}
        fwd = exe._plan.fwd
        return fwd[ent['s_output']] in (fwd[ent['b_bn_output']], fwd[ent['c_bn_output']])
    assert aliased(fused) and not aliased(plain) and not aliased(train)
    np.testing.assert_array_equal(fused.forward(is_train=False)[0].asnumpy(),
                                  plain.forward(is_train=False)[0].asnumpy())
    b = _cbr(x, 'b', 8, 3, relu=False)
    later = S.elemwise_add(S.elemwise_add(b, x, name='s'), b, name='t')   # b read again
    fused, plain = _pair(monkeypatch, later, shape, 'float32')
    ent = {n: e for e, n in enumerate(fused._view.entry_names())}
    fwd = fused._plan.fwd
    assert fwd[ent['s_output']] != fwd[ent['b_bn_output']]
    assert fwd[ent['t_output']] in (fwd[ent['s_output']], fwd[ent['b_bn_output']])
    np.testing.assert_array_equal(fused.forward(is_train=False)[0].asnumpy(),
                                  plain.forward(is_train=False)[0].asnumpy())


@pytest.mark.parametrize('fuse', ['1', '0'])
def test_monitor_all_sees_the_summands_before_an_in_place_sum(monkeypatch, fuse):
    """A sum written over a summand it frees: ``monitor_all`` reports the inputs before
    the node runs (as MXNet), so the summand shows its own values, not the sum."""
    monkeypatch.setenv('FFNUMBA_FUSE', fuse)
    x = S.Variable('data')
    s = S.elemwise_add(S.FullyConnected(x, num_hidden=4, name='fa'),
                       S.FullyConnected(x, num_hidden=4, name='fb'), name='add')
    exe = S.FullyConnected(s, num_hidden=2, name='out').simple_bind(
        ff.cpu(), grad_req='null', data=(2, 3))
    _fill(exe)
    seen = {}
    exe.set_monitor_callback(lambda n, a: seen.__setitem__(n, a.asnumpy().copy()),
                             monitor_all=True)
    exe.forward(is_train=False)
    np.testing.assert_array_equal(seen['add_lhs'], seen['fa_output'])
    np.testing.assert_array_equal(seen['add_rhs'], seen['fb_output'])
    np.testing.assert_array_equal(seen['add_output'], seen['fa_output'] + seen['fb_output'])
