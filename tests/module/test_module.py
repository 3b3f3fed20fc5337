"""Module: data parallelism, checkpoints with optimizer states, the fit loop, errors."""
import logging
import os

import numpy as np
import pytest

import ffnumba as ff
import ffnumba.ndarray as nd
import ffnumba.symbol as sym
from ffnumba import io
from ffnumba.base import FFError
from ffnumba.module import Module

HERE = os.path.dirname(__file__)


def mlp(bn=False):
    data = sym.Variable('data')
    h = sym.FullyConnected(data, num_hidden=8, name='fc1')
    if bn:
        h = sym.BatchNorm(h, fix_gamma=False, name='bn1')
    h = sym.Activation(h, act_type='relu', name='relu1')
    h = sym.FullyConnected(h, num_hidden=3, name='fc2')
    return sym.SoftmaxOutput(h, name='softmax')


def toy_data(n=48, d=6, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d).astype('float32')
    y = (np.abs(X[:, 0]) + X[:, 1] > 0.5).astype('float32') + (X[:, 2] > 1)
    return X, y


def fresh_params(net, data_shape, seed=1):
    rng = np.random.RandomState(seed)
    arg_shapes, _, aux_shapes = net.infer_shape(data=data_shape)
    arg = {n: nd.array(rng.uniform(-0.5, 0.5, s)) for n, s in
           zip(net.list_arguments(), arg_shapes) if n not in ('data', 'softmax_label')}
    aux = {}
    for n, s in zip(net.list_auxiliary_states(), aux_shapes):
        aux[n] = nd.ones(s) if 'var' in n else nd.zeros(s)
    return arg, aux


def train(ctx, epochs=1, work_load_list=None, bn=False, kvstore='local', momentum=0.9,
          batch_size=12):
    X, y = toy_data()
    net = mlp(bn)
    arg, aux = fresh_params(net, (batch_size, X.shape[1]))
    it = io.NDArrayIter(X, y, batch_size=batch_size)
    mod = Module(net, context=ctx, work_load_list=work_load_list)
    mod.fit(it, num_epoch=epochs, arg_params=arg, aux_params=aux, kvstore=kvstore,
            optimizer_params={'learning_rate': 0.1, 'momentum': momentum})
    return mod


def assert_params_close(a, b, tol=1e-5):
    for d1, d2 in zip(a, b):
        assert sorted(d1) == sorted(d2)
        for k in d1:
            np.testing.assert_allclose(d1[k].asnumpy(), d2[k].asnumpy(), rtol=tol, atol=tol,
                                       err_msg=k)


def test_two_devices_with_workload_equal_one_device():
    one = train([ff.cpu(0)]).get_params()
    two = train([ff.cpu(0), ff.cpu(1)], work_load_list=[1, 3]).get_params()
    assert_params_close(one, two)


def test_local_updater_per_device_equals_one_device(monkeypatch):
    monkeypatch.setenv('MXNET_UPDATE_ON_KVSTORE', '0')
    one = train([ff.cpu(0)]).get_params()
    mod = train([ff.cpu(0), ff.cpu(1)], work_load_list=[1, 3])
    assert mod._update_on_kvstore is False and mod._kvstore is not None
    assert_params_close(one, mod.get_params())


def test_batchnorm_two_devices_match_mxnet_per_device_statistics():
    fx = nd.load(os.path.join(HERE, '..', 'data', 'mx_module_bn_2dev.params'))
    X, y = fx['X'].asnumpy(), fx['y'].asnumpy()
    pick = lambda p: {k.split(':', 1)[1]: v for k, v in fx.items() if k.startswith(p)}
    it = io.NDArrayIter(X, y, batch_size=8)
    net = sym.SoftmaxOutput(sym.FullyConnected(sym.Activation(sym.BatchNorm(
        sym.FullyConnected(sym.Variable('data'), num_hidden=6, name='fc1'), fix_gamma=False,
        name='bn1'), act_type='relu', name='relu1'), num_hidden=3, name='fc2'), name='softmax')
    mod = Module(net, context=[ff.cpu(0), ff.cpu(1)], work_load_list=[1, 3])
    mod.fit(it, num_epoch=1, arg_params=pick('init_arg:'), aux_params=pick('init_aux:'),
            optimizer_params={'learning_rate': 0.1, 'momentum': 0.9})
    assert_params_close(mod.get_params(), (pick('final_arg:'), pick('final_aux:')))


@pytest.mark.parametrize('ctx', [[ff.cpu(0)], [ff.cpu(0), ff.cpu(1)]])
def test_checkpoint_with_optimizer_states_resumes_exactly(tmp_path, ctx):
    X, y = toy_data()
    net = mlp()
    arg, aux = fresh_params(net, (12, 6))
    opt = {'learning_rate': 0.1, 'momentum': 0.9, 'wd': 1e-3}

    def run(mod, begin, end, **kw):
        mod.fit(io.NDArrayIter(X, y, batch_size=12), begin_epoch=begin, num_epoch=end,
                optimizer_params=opt, **kw)

    full = Module(net, context=ctx)
    run(full, 0, 5, arg_params=arg, aux_params=aux)
    first = Module(net, context=ctx)
    run(first, 0, 3, arg_params=arg, aux_params=aux)
    prefix = str(tmp_path / 'mlp')
    first.save_checkpoint(prefix, 3, save_optimizer_states=True)
    assert sorted(os.listdir(tmp_path)) == ['mlp-0003.params', 'mlp-0003.states',
                                           'mlp-symbol.json']
    again = Module.load(prefix, 3, load_optimizer_states=True, context=ctx)
    with pytest.warns(UserWarning, match='already initialized'):  # as MXNet: params loaded
        run(again, 3, 5)
    for a, b in zip(full.get_params(), again.get_params()):
        for k in a:
            np.testing.assert_array_equal(a[k].asnumpy(), b[k].asnumpy(), err_msg=k)
    # without the states the momentum restarts and the result differs
    cold = Module.load(prefix, 3, context=ctx)
    with pytest.warns(UserWarning, match='already initialized'):
        run(cold, 3, 5)
    assert not np.array_equal(cold.get_params()[0]['fc1_weight'].asnumpy(),
                              full.get_params()[0]['fc1_weight'].asnumpy())


def test_fit_logs_and_callbacks(caplog):
    X, y = toy_data()
    it = io.NDArrayIter(X, y, batch_size=12)
    seen, epochs = [], []
    mod = Module(mlp(), logger=logging.getLogger('modtest'))
    with caplog.at_level(logging.INFO, logger='modtest'):
        mod.fit(it, eval_data=it, num_epoch=2, batch_end_callback=lambda p: seen.append(
            (p.epoch, p.nbatch, p.eval_metric.get()[0])),
            epoch_end_callback=lambda e, s, a, x: epochs.append((e, s is mod.symbol,
                                                                 sorted(a), sorted(x))))
    text = caplog.text
    for line in ('Epoch[0] Train-accuracy=', 'Epoch[0] Time cost=',
                 'Epoch[1] Validation-accuracy='):
        assert line in text
    assert seen[:4] == [(0, 0, 'accuracy'), (0, 1, 'accuracy'), (0, 2, 'accuracy'),
                        (0, 3, 'accuracy')]
    assert len(seen) == 8
    assert epochs[0] == (0, True, ['fc1_bias', 'fc1_weight', 'fc2_bias', 'fc2_weight'], [])


def test_fit_requires_num_epoch():
    X, y = toy_data()
    with pytest.raises(FFError, match='num_epoch'):
        Module(mlp()).fit(io.NDArrayIter(X, y, batch_size=12))


def test_predict_removes_padding_and_reshapes_for_small_batches():
    X, y = toy_data(n=10)
    mod = train([ff.cpu(0), ff.cpu(1)], batch_size=4)
    it = io.NDArrayIter(X, y, batch_size=4)  # last batch padded by 2
    out = mod.predict(it)
    assert out.shape == (10, 3)
    ref = np.concatenate([mod.predict(nd.array(X[i:i + 2])).asnumpy() for i in range(0, 10, 2)])
    np.testing.assert_allclose(out.asnumpy(), ref, rtol=1e-5, atol=1e-6)
    parts = mod.predict(it, merge_batches=False)
    assert [p[0].shape[0] for p in parts] == [4, 4, 2]
    assert isinstance(mod.predict(it, always_output_list=True), list)
    got = [(o[0].shape[0], n) for o, n, _ in mod.iter_predict(it)]
    assert got == [(4, 0), (4, 1), (2, 2)]
    assert len(mod.predict(it, num_batch=1)) == 4
    name, acc = mod.score(it, 'acc')[0]
    assert name == 'accuracy' and 0 <= acc <= 1


def test_fixed_params_do_not_change():
    X, y = toy_data()
    net = mlp()
    arg, aux = fresh_params(net, (12, 6))
    before = arg['fc1_weight'].asnumpy().copy()
    mod = Module(net, fixed_param_names=['fc1_weight'])
    mod.fit(io.NDArrayIter(X, y, batch_size=12), num_epoch=1, arg_params=arg, aux_params=aux)
    np.testing.assert_array_equal(mod.get_params()[0]['fc1_weight'].asnumpy(), before)
    assert not np.array_equal(mod.get_params()[0]['fc2_weight'].asnumpy(),
                              arg['fc2_weight'].asnumpy())


def test_intermediate_api_and_input_grads():
    X, y = toy_data(n=12)
    mod = Module(mlp(), context=[ff.cpu(0), ff.cpu(1)])
    mod.bind(data_shapes=[('data', (12, 6))], label_shapes=[('softmax_label', (12,))],
             inputs_need_grad=True)
    mod.init_params(ff.init.Xavier())
    mod.init_optimizer(optimizer='sgd', optimizer_params={'learning_rate': 0.1})
    assert mod._optimizer.rescale_grad == pytest.approx(1 / 12)
    batch = io.DataBatch([nd.array(X)], [nd.array(y)])
    mod.forward(batch, is_train=True)
    mod.backward()
    g = mod.get_input_grads()[0]
    assert g.shape == (12, 6) and np.abs(g.asnumpy()).sum() > 0
    w0 = mod.get_params()[0]['fc2_weight'].asnumpy().copy()
    mod.update()
    assert not np.array_equal(mod.get_params()[0]['fc2_weight'].asnumpy(), w0)
    metric = ff.metric.create('acc')
    mod.update_metric(metric, batch.label)
    assert metric.num_inst == 12
    assert mod.output_shapes == [('softmax_output', (12, 3))]


def test_states_get_and_set():
    data, state = sym.Variable('data'), sym.Variable('s')
    net = sym.elemwise_add(sym.FullyConnected(data, num_hidden=2, name='fc'), state)
    mod = Module(net, label_names=None, state_names=['s'])
    mod.bind(data_shapes=[('data', (3, 4))], for_training=False)
    mod.init_params()
    mod.set_states(value=1.5)
    x = nd.ones((3, 4))
    mod.forward(io.DataBatch([x]))
    a = mod.get_outputs()[0].asnumpy()
    mod.set_states(states=[[nd.zeros((3, 2))]])
    mod.forward(io.DataBatch([x]))
    np.testing.assert_allclose(a - mod.get_outputs()[0].asnumpy(), 1.5, rtol=1e-6)
    np.testing.assert_array_equal(mod.get_states()[0].asnumpy(), 0)


def test_shared_module_shares_parameters():
    a = Module(mlp())
    a.bind(data_shapes=[('data', (8, 6))], label_shapes=[('softmax_label', (8,))])
    a.init_params()
    b = Module(mlp())
    b.bind(data_shapes=[('data', (4, 6))], label_shapes=[('softmax_label', (4,))],
           shared_module=a)
    assert b.params_initialized
    assert b._exec_group.execs[0].arg_dict['fc1_weight'] is \
        a._exec_group.execs[0].arg_dict['fc1_weight']


def test_save_and_load_params(tmp_path):
    mod = train([ff.cpu(0)])
    f = str(tmp_path / 'p.params')
    mod.save_params(f)
    other = Module(mlp())
    other.bind(data_shapes=[('data', (12, 6))], label_shapes=[('softmax_label', (12,))])
    other.load_params(f)
    assert_params_close(mod.get_params(), other.get_params(), tol=0)
    nd.save(f, {'weird': nd.zeros((1,))})
    with pytest.raises(FFError, match='Invalid param file'):
        other.load_params(f)


def test_errors_name_what_is_wrong():
    with pytest.raises(ValueError, match="input with name 'img' is not found.*Did you mean"):
        Module(mlp(), data_names=['img'])
    with pytest.raises(FFError, match='work_load_list'):
        Module(mlp(), context=[ff.cpu(0), ff.cpu(1)], work_load_list=[1])
    mod = Module(mlp())
    with pytest.raises(FFError, match='bind'):
        mod.forward(io.DataBatch([nd.zeros((2, 6))]))
    mod.bind(data_shapes=[('data', (4, 6))], label_shapes=[('softmax_label', (4,))])
    with pytest.raises(RuntimeError, match='fc1_bias is not presented'):
        mod.init_params(arg_params={'fc1_weight': nd.zeros((8, 6))})
    with pytest.raises(ValueError, match="don't match names"):
        Module(mlp()).bind(data_shapes=[('x', (4, 6))])
    if ff.num_gpus() == 0:
        with pytest.raises(FFError, match='CUDA'):
            Module(mlp(), context=ff.gpu(0)).bind(data_shapes=[('data', (4, 6))])


def test_save_checkpoint_logs_like_mxnet(tmp_path, caplog):
    X, y = toy_data()
    m = Module(mlp())
    m.bind(data_shapes=[('data', (8, 6))], label_shapes=[('softmax_label', (8,))])
    m.init_params()
    m.init_optimizer()
    prefix = str(tmp_path / 'm')
    caplog.set_level(logging.INFO)
    m.save_checkpoint(prefix, 2, save_optimizer_states=True)
    assert [r.getMessage() for r in caplog.records] == [
        'Saved checkpoint to "%s-0002.params"' % prefix,
        'Saved optimizer state to "%s-0002.states"' % prefix]


@pytest.mark.parametrize('on_kvstore', ['1', '0'])
def test_two_devices_parallel_reduce_and_update_equal_serial_bit_for_bit(on_kvstore, threads,
                                                                         monkeypatch):
    """The kvstore reduce (and update on the store) per parameter group on threads, and as
    chains of all keys split over the threads: the serial bits."""
    from ffnumba.kvstore import updates
    from ffnumba.kvstore.local import KVStore
    from ffnumba.optimizer import _deferred
    import ffnumba.thread_pool as tp
    monkeypatch.setenv('MXNET_UPDATE_ON_KVSTORE', on_kvstore)
    threads(1)
    serial = train([ff.cpu(0), ff.cpu(1)], epochs=2, bn=True).get_params()
    threads(2)
    calls, chained = [], []
    real = tp.run_parallel
    monkeypatch.setattr(_deferred, 'DEFER_MIN_ELEMS', 1)      # the toy net's few elements
    monkeypatch.setattr(_deferred, 'run_parallel', lambda fn, n, pool: (chained.append(n),
                                                                        real(fn, n, pool)))
    par = [train([ff.cpu(0), ff.cpu(1)], epochs=2, bn=True).get_params()]
    assert chained and all(n == 2 for n in chained)
    monkeypatch.setattr(KVStore, 'chainable', lambda self: False)     # groups on threads
    monkeypatch.setattr(updates, "PAR_MIN_ELEMS", 0)
    monkeypatch.setattr(updates, "MAX_GROUP_SHARE", 1.0)
    monkeypatch.setattr(updates, 'run_parallel', lambda fn, n, pool: (calls.append(n),
                                                                      real(fn, n, pool)))
    par.append(train([ff.cpu(0), ff.cpu(1)], epochs=2, bn=True).get_params())
    assert calls and all(n == 2 for n in calls)
    for run in par:
        for d1, d2 in zip(serial, run):
            assert sorted(d1) == sorted(d2)
            for k in d1:
                np.testing.assert_array_equal(d1[k].asnumpy(), d2[k].asnumpy(), err_msg=k)


def test_parameter_groups_balance_sizes_and_keep_index_order():
    from ffnumba.kvstore.updates import _groups
    grads = [[np.zeros(s)] for s in (100, 10, 60, 50, 5)]
    groups = _groups([0, 1, 2, 3, 4], grads, 2)
    assert groups == [[0, 1, 4], [2, 3]]      # 115 and 110 elements
    assert _groups([1, 3], grads, 3) == [[3], [1]]


def test_one_dominant_parameter_is_reduced_on_one_thread(monkeypatch):
    from ffnumba.kvstore import updates
    calls = []
    monkeypatch.setattr(updates, 'PAR_MIN_ELEMS', 0)
    monkeypatch.setattr(updates, 'run_parallel', lambda *a: calls.append(a))
    grads = [[nd.zeros(s), nd.zeros(s)] for s in ((1000,), (10,), (10,))]
    seen = []
    updates._grouped(ff.kv.create('local'), [0, 1, 2], grads, seen.append)
    assert seen == [[0, 1, 2]] and not calls
