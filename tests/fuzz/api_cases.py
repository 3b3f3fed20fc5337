"""Public-API trials: files (truncated, byte-flipped, pickles), typed hyper-parameters, odd data.

Each case is a function ``case(arg) -> (status, message)`` (``'ok'`` or
``'wrong'``) that may raise; :func:`api_trials` lists ``(name, arg)`` pairs.
"""
import json
import os
import pickle
import tempfile

import numpy as np

_TMP = None
CUTS = 10           # truncate at every tenth of a file
FLIPS = 12          # byte-flip positions per file


def _tmp():
    global _TMP
    if _TMP is None:
        _TMP = tempfile.mkdtemp(prefix='fffuzz-')
    return _TMP


def _net():
    import ffnumba as ff
    data = ff.sym.Variable('data')
    net = ff.sym.FullyConnected(data, num_hidden=3, name='fc')
    return ff.sym.SoftmaxOutput(net, name='softmax')


def _module(optimizer='adam'):
    import ffnumba as ff
    mod = ff.mod.Module(_net(), context=ff.cpu())
    mod.bind([('data', (4, 5))], [('softmax_label', (4,))])
    mod.init_params()
    mod.init_optimizer(optimizer=optimizer)
    batch = ff.io.DataBatch([ff.nd.ones((4, 5))], [ff.nd.array([0, 1, 2, 0])])
    mod.forward_backward(batch)
    mod.update()
    return mod


_FILES = {}


def _file(kind):
    """Path of a valid file of ``kind``: params, symbol, states, ckpt (a params checkpoint)."""
    if kind in _FILES:
        return _FILES[kind]
    import ffnumba as ff
    d = _tmp()
    if kind == 'params':
        path = os.path.join(d, 'x.params')
        ff.nd.save(path, {'arg:w': ff.nd.array(np.arange(12.).reshape(3, 4)),
                          'aux:m': ff.nd.ones((5,), dtype='float64')})
    elif kind == 'list':
        path = os.path.join(d, 'x.nd')
        ff.nd.save(path, [ff.nd.ones((2, 3)), ff.nd.zeros((4,), dtype='int32')])
    elif kind == 'symbol':
        path = os.path.join(d, 'x-symbol.json')
        _net().save(path)
    elif kind == 'states':
        path = os.path.join(d, 'x.states')
        _module().save_optimizer_states(path)
    else:
        raise KeyError(kind)
    _FILES[kind] = path
    return path


def _damaged(kind, how, k):
    src = _file(kind)
    data = open(src, 'rb').read()
    if how == 'cut':
        data = data[:len(data) * k // CUTS]
    else:
        pos = (len(data) - 1) * k // (FLIPS - 1)
        data = data[:pos] + bytes([data[pos] ^ 0xFF]) + data[pos + 1:]
    path = os.path.join(_tmp(), 'damaged-%s-%s-%d%s' % (kind, how, k, os.path.splitext(src)[1]))
    with open(path, 'wb') as f:
        f.write(data)
    return path, data


def load_damaged(arg):
    """Load a truncated or byte-flipped file with the loader of its kind."""
    import ffnumba as ff
    kind, how, k = arg
    path, data = _damaged(kind, how, k)
    if kind in ('params', 'list'):
        out = ff.nd.load(path)
        if how == 'cut' and k < CUTS:
            return 'wrong', 'a truncated file loaded: %r' % (type(out),)
    elif kind == 'symbol':
        s = ff.sym.load(path)
        s.list_arguments()
        s.infer_shape(data=(4, 5))
    elif kind == 'states':
        mod = _module()
        mod.load_optimizer_states(path)
        if how == 'flip' or k < CUTS:
            return 'wrong', 'a damaged .states file loaded'
    return 'ok', ''


_PWNED = 'pwned-marker'


class _Evil:
    def __reduce__(self):
        return (os.system, ('touch %s' % os.path.join(_tmp(), _PWNED),))


def load_pickle(arg):
    """A malicious pickle (protocol ``arg[1]``) through each loader of ``arg[0]``."""
    import ffnumba as ff
    where, proto = arg
    marker = os.path.join(_tmp(), _PWNED)
    if os.path.exists(marker):
        os.remove(marker)
    blob = pickle.dumps({0: _Evil()}, protocol=proto)
    path = os.path.join(_tmp(), 'evil-%d.states' % proto)
    with open(path, 'wb') as f:
        f.write(blob)
    try:
        if where == 'set_states':
            ff.optimizer.get_updater(ff.optimizer.create('sgd')).set_states(blob)
        elif where == 'module':
            _module().load_optimizer_states(path)
        elif where == 'nd.load':
            ff.nd.load(path)
        elif where == 'import_mxnet_states':
            from ffnumba.optimizer import updater
            updater.import_mxnet_states(blob) if hasattr(updater, 'import_mxnet_states') else None
    finally:
        if os.path.exists(marker):
            return 'wrong', 'the pickle ran code'
    return 'wrong', 'a pickle was accepted'


def module_states_error_names_file(arg):
    """Errors of a bad optimizer-state file loaded through a Module name the file."""
    path, _ = _damaged('states', 'cut', arg)
    try:
        _module().load_optimizer_states(path)
    except Exception as e:
        if path not in str(e) and os.path.basename(path) not in str(e):
            return 'wrong', 'the error does not name the file: %s' % e
        raise
    return 'ok', ''


def nd_array_objects(arg):
    import ffnumba as ff
    data = np.array(arg, dtype=object)
    ff.nd.array(data)
    return 'wrong', 'an object array holding %r was accepted' % (arg,)


def iter_objects(arg):
    import ffnumba as ff
    data = np.array([[1.0, None], [2.0, 3.0]], dtype=object)
    if arg == 'data':
        ff.io.NDArrayIter(data, np.array([0, 1]), batch_size=1)
    else:
        ff.io.NDArrayIter(np.ones((2, 2)), np.array([0, None], dtype=object), batch_size=1)
    return 'wrong', 'an object array holding None was accepted'


_OPT_FIELDS = ('learning_rate', 'wd', 'rescale_grad', 'clip_gradient', 'momentum', 'beta1',
               'beta2', 'epsilon', 'gamma1', 'gamma2', 'lamda1', 'rho', 'beta', 'lazy_update')


def optimizer_field(arg):
    """An optimizer built with a bad hyper-parameter must refuse it or stay finite."""
    import ffnumba as ff
    name, field, value = arg
    try:
        opt = ff.optimizer.create(name, **{field: value})
    except TypeError as e:
        if 'unexpected keyword' in str(e):
            return 'ok', 'no such field'
        raise
    upd = ff.optimizer.get_updater(opt)
    w = ff.nd.ones((3,))
    for _ in range(2):
        upd(0, ff.nd.array([0.5, -0.5, 0.1]), w)
    if not np.isfinite(w.asnumpy()).all():
        return 'wrong', '%s(%s=%r) accepted and gave weights %s' % (name, field, value,
                                                                   w.asnumpy())
    return 'ok', ''


def lr_scheduler_case(arg):
    import ffnumba as ff
    cls, kwargs = arg
    sched = getattr(ff.lr_scheduler, cls)(**kwargs)
    vals = [sched(n) for n in (0, 1, 5, 50, 10 ** 6)]
    if not all(np.isfinite(v) for v in vals):
        return 'wrong', '%s(%s) gave learning rates %s' % (cls, kwargs, vals)
    return 'ok', ''


def misc(arg):
    import ffnumba as ff
    if arg == 'deep_json':
        ff.sym.load_json('[' * 100000 + ']' * 100000)
    elif arg == 'deep_json_obj':
        ff.sym.load_json('{"nodes": ' + '[' * 50000 + ']' * 50000 + '}')
    elif arg == 'bad_json':
        ff.sym.load_json('{"nodes": [{"op": "null"}], "heads": [[5, 0, 0]]}')
    elif arg == 'sym_save_missing_dir':
        ff.sym.Variable('x').save(os.path.join(_tmp(), 'no', 'such', 'dir', 'a.json'))
    elif arg == 'nd_save_missing_dir':
        ff.nd.save(os.path.join(_tmp(), 'no', 'such', 'a.params'), {'a': ff.nd.ones((1,))})
    elif arg == 'nd_load_dev_zero':
        ff.nd.load('/dev/zero')
    elif arg == 'nd_load_missing':
        ff.nd.load(os.path.join(_tmp(), 'missing.params'))
    elif arg == 'nd_load_dir':
        ff.nd.load(_tmp())
    elif arg.startswith('shape_attr:'):
        x = ff.sym.Variable('x', attr={'__shape__': arg.split(':', 1)[1]})
        ff.sym.FullyConnected(x, num_hidden=2).infer_shape()
    elif arg == 'init_bogus':
        mod = ff.mod.Module(_net())
        mod.bind([('data', (4, 5))], [('softmax_label', (4,))])
        mod.init_params(initializer='bogus')
    elif arg == 'num_args_huge':
        ff.sym.Concat(ff.sym.Variable('a'), num_args=10 ** 12)
    elif arg == 'num_args_huge_nd':
        ff.nd.concat(ff.nd.ones((2,)), num_args=10 ** 12)
    elif arg == 'predict_0_rows':
        mod = _module()
        out = mod.predict(ff.io.NDArrayIter(np.zeros((0, 5)), batch_size=4))
        return ('ok', '') if out.shape[0] == 0 else ('wrong', 'predict on 0 rows: %s'
                                                      % (out.shape,))
    elif arg == 'fit_nan':
        mod = ff.mod.Module(_net())
        x = np.ones((8, 5))
        x[5, 2] = np.nan
        mod.fit(ff.io.NDArrayIter(x, np.zeros(8), batch_size=4), num_epoch=1)
        w = mod.get_params()[0]['fc_weight'].asnumpy()
        if not np.isfinite(w).all():
            return 'wrong', 'fit on NaN data gave NaN weights without an error'
    elif arg == 'fit_none':
        mod = ff.mod.Module(_net())
        x = np.ones((8, 5)).astype(object)
        x[1, 1] = None
        mod.fit(ff.io.NDArrayIter(x, np.zeros(8), batch_size=4), num_epoch=1)
        return 'wrong', 'fit accepted None in the data'
    elif arg == 'pooling_all_pad':
        x = ff.nd.arange(1, 10).reshape((1, 1, 3, 3))
        y = ff.nd.Pooling(x, kernel=(2, 2), pad=(2, 2), stride=(1, 1), pool_type='max')
        if (np.abs(y.asnumpy()) == np.finfo(np.float32).max).any():
            return 'wrong', 'max pooling gave -FLT_MAX for windows in the padding'
    else:
        raise KeyError(arg)
    return 'ok', ''


def code(arg):
    """A one-line call of the public API with a bad argument (may also just work)."""
    import ffnumba as ff
    from ffnumba.base import FFError
    env = {'ff': ff, 'np': np, 'nan': float('nan'), 'inf': float('inf')}
    exec(compile(arg, '<fuzz>', 'exec'), env)
    return 'ok', ''


_CODE = [
    "ff.nd.zeros(-1)", "ff.nd.zeros((2, -3))", "ff.nd.ones('abc')", "ff.nd.full((2,), 'x')",
    "ff.nd.zeros((2,), dtype='bogus')", "ff.nd.zeros((2,), dtype=object)",
    "ff.nd.array([[1, 2], [3]])", "ff.nd.array('abc')", "ff.nd.array({'a': 1})",
    "ff.nd.array(np.zeros((2, 3), dtype=complex))", "ff.nd.array(np.zeros((2,), 'U3'))",
    "ff.nd.ones((2, 3)).reshape((4, 4))", "ff.nd.ones((2, 3)).reshape((-1, -1))",
    "ff.nd.ones((2, 3)).reshape((0, -4, 1, 2))", "ff.nd.ones((2, 3))[5]",
    "ff.nd.ones((2, 3))[:, 7]", "ff.nd.ones((2, 3))['a']", "ff.nd.ones((2, 3))[0, 0, 0]",
    "x = ff.nd.ones((2, 3)); x[:] = ff.nd.ones((4,))", "x = ff.nd.ones((2, 3)); x[0] = 'a'",
    "ff.nd.ones((2, 3)) + ff.nd.ones((4, 5))",
    "ff.nd.ones((2, 3)) + 'a'", "ff.nd.ones((2, 3)).astype('bogus')",
    "ff.nd.ones((2, 3)).T.T.sum(axis=5)",
    "ff.nd.ones((2, 3)).asscalar()", "ff.nd.ones((0,)).asscalar()",
    "ff.nd.ones((2, 3)).as_in_context('cpu')", "ff.nd.ones((2, 3)).copyto(ff.nd.ones((3,)))",
    "ff.nd.concat(ff.nd.ones((2, 3)), ff.nd.ones((4, 5)))", "ff.nd.concatenate([])",
    "ff.nd.concatenate([ff.nd.ones((2, 3))], axis=7)", "ff.nd.save('/dev/null/x', [])",
    "ff.nd.save('/tmp/x.params', {'a': 3})", "ff.nd.save('/tmp/x.params', {1: ff.nd.ones(1)})",
    "ff.nd.load(None)", "ff.nd.load(3)", "ff.sym.load('/nonexistent.json')",
    "ff.sym.load_json('')", "ff.sym.load_json('null')", "ff.sym.load_json('{}')",
    "ff.sym.load_json('{\"nodes\": [], \"heads\": []}')",
    "ff.sym.load_json('{\"nodes\": [{\"op\": \"Bogus\", \"name\": \"x\", "
    "\"inputs\": []}], \"heads\": [[0, 0, 0]]}')",
    "ff.sym.load_json('{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", "
    "\"inputs\": [[0, 0, 0]]}], \"heads\": [[0, 0, 0]]}')",
    "ff.sym.load_json('{\"nodes\": [{\"op\": \"FullyConnected\", \"name\": \"x\", "
    "\"attrs\": {\"num_hidden\": \"nan\"}, \"inputs\": []}], \"heads\": [[0, 0, 0]]}')",
    "ff.sym.Variable(3)", "ff.sym.Variable('x', shape=(-2, 3))", "ff.sym.Variable('x', dtype='bogus')",
    "ff.sym.Variable('x', lr_mult='a')", "ff.sym.Group([])", "ff.sym.Group([3])",
    "ff.sym.FullyConnected(ff.sym.Variable('x'), num_hidden=2).infer_shape(x=(2, -1))",
    "ff.sym.FullyConnected(ff.sym.Variable('x'), num_hidden=2).infer_shape(x='ab')",
    "ff.sym.FullyConnected(ff.sym.Variable('x'), num_hidden=2).infer_shape(y=(2, 3))",
    "ff.sym.FullyConnected(ff.sym.Variable('x'), num_hidden=2).simple_bind(ff.cpu(), x=(0, 3))"
    ".forward()",
    "ff.sym.FullyConnected(ff.sym.Variable('x'), num_hidden=2).simple_bind(ff.cpu(), x=(2, 3), "
    "grad_req='bogus')",
    "ff.sym.FullyConnected(ff.sym.Variable('x'), num_hidden=2).simple_bind(ff.cpu(), x=(2, 3), "
    "type_dict={'x': 'bogus'})",
    "e = ff.sym.FullyConnected(ff.sym.Variable('x'), num_hidden=2).simple_bind(ff.cpu(), "
    "x=(2, 3)); e.forward(x=ff.nd.ones((5, 5)))",
    "e = ff.sym.FullyConnected(ff.sym.Variable('x'), num_hidden=2).simple_bind(ff.cpu(), "
    "x=(2, 3)); e.backward(ff.nd.ones((2, 2)))",
    "e = ff.sym.FullyConnected(ff.sym.Variable('x'), num_hidden=2).simple_bind(ff.cpu(), "
    "x=(2, 3)); e.forward(); e.backward([ff.nd.ones((3, 3))])",
    "e = ff.sym.FullyConnected(ff.sym.Variable('x'), num_hidden=2).simple_bind(ff.cpu(), "
    "x=(2, 3)); e.reshape(x=(0, 3)).forward()",
    "ff.init.Xavier(magnitude=nan)", "ff.init.Xavier(rnd_type='bogus')",
    "ff.init.Normal(sigma=-1)", "ff.init.Uniform(scale=inf)", "ff.init.Constant('a')",
    "ff.init.Orthogonal(scale=nan)", "i = ff.init.Xavier(); i(ff.init.InitDesc('w'), "
    "ff.nd.zeros((0, 3)))",
    "i = ff.init.Xavier(); i('fc_weight', ff.nd.zeros((3,)))",
    "i = ff.init.Orthogonal(); i('fc_weight', ff.nd.zeros((0, 3)))",
    "ff.metric.create('bogus')", "m = ff.metric.Accuracy(); m.update([ff.nd.ones((2,))], "
    "[ff.nd.ones((3, 2))])", "m = ff.metric.MSE(); m.update([ff.nd.ones((2,))], [ff.nd.ones((3,))])",
    "m = ff.metric.Accuracy(); m.update([ff.nd.ones((0,))], [ff.nd.ones((0, 2))]); m.get()",
    "m = ff.metric.TopKAccuracy(top_k=0)", "m = ff.metric.F1(); m.update([ff.nd.array([nan])], "
    "[ff.nd.ones((1, 2))])",
    "m = ff.metric.CrossEntropy(); m.update([ff.nd.array([5.0])], [ff.nd.ones((1, 2))])",
    "ff.io.NDArrayIter(np.ones((4, 2)), batch_size=0)",
    "ff.io.NDArrayIter(np.ones((4, 2)), batch_size=-1)",
    "ff.io.NDArrayIter(np.ones((4, 2)), np.ones(3), batch_size=2)",
    "ff.io.NDArrayIter(np.ones((4, 2)), batch_size=2, last_batch_handle='bogus')",
    "ff.io.NDArrayIter(np.full((4, 2), nan), batch_size=10 ** 12)",
    "ff.io.CSVIter(data_csv='/nonexistent.csv', data_shape=(3,), batch_size=2)",
    "ff.io.CSVIter(data_csv='/dev/zero', data_shape=(3,), batch_size=2)",
    "ff.optimizer.create('bogus')", "ff.optimizer.create('sgd', momentum=2.0)",
    "ff.optimizer.create('sgd', bogus=1)", "ff.optimizer.create('adam', beta1=nan)",
    "ff.optimizer.get_updater(3)", "u = ff.optimizer.get_updater(ff.optimizer.create('sgd')); "
    "u(0, ff.nd.ones((2,)), 'w')",
    "u = ff.optimizer.get_updater(ff.optimizer.create('sgd')); u.set_states(b'')",
    "u = ff.optimizer.get_updater(ff.optimizer.create('sgd')); u.set_states(b'\\x12' * 100)",
    "u = ff.optimizer.get_updater(ff.optimizer.create('sgd')); u.set_states(3)",
    "u = ff.optimizer.get_updater(ff.optimizer.create('ftrl')); "
    "u(0, ff.nd.ones((3,), dtype='int32'), ff.nd.ones((3,), dtype='int32'))",
    "u = ff.optimizer.get_updater(ff.optimizer.create('sgd')); "
    "u(0, ff.nd.ones((3,), dtype='bool'), ff.nd.ones((3,), dtype='bool'))",
    "ff.kv.create('bogus')", "kv = ff.kv.create('local'); kv.init(3, ff.nd.ones((2,))); "
    "kv.push(3, ff.nd.ones((5,)))",
    "kv = ff.kv.create('local'); kv.pull(3, out=ff.nd.ones((2,)))",
    "kv = ff.kv.create('local'); kv.init('a', ff.nd.ones((2,))); kv.pull('a', out=ff.nd.ones((3,)))",
    "ff.mod.Module(3)", "ff.mod.Module(ff.sym.Variable('x'), data_names=['y'])",
    "m = ff.mod.Module(ff.sym.FullyConnected(ff.sym.Variable('data'), num_hidden=2)); m.forward(None)",
    "m = ff.mod.Module(ff.sym.FullyConnected(ff.sym.Variable('data'), num_hidden=2)); "
    "m.bind([('data', (2, -3))])",
    "m = ff.mod.Module(ff.sym.FullyConnected(ff.sym.Variable('data'), num_hidden=2)); "
    "m.bind([('data', 'ab')])",
    "m = ff.mod.Module(ff.sym.FullyConnected(ff.sym.Variable('data'), num_hidden=2)); "
    "m.bind([('data', (2, 3))], for_training=False); m.init_params(); "
    "m.set_params({'fc_weight': ff.nd.ones((9, 9))}, {}, allow_missing=True)",
    "m = ff.mod.Module(ff.sym.FullyConnected(ff.sym.Variable('data'), num_hidden=2)); "
    "m.bind([('data', (2, 3))], for_training=False); m.init_params(); "
    "m.forward(ff.io.DataBatch([ff.nd.ones((5, 7))]))",
    "m = ff.mod.Module(ff.sym.FullyConnected(ff.sym.Variable('data'), num_hidden=2)); "
    "m.bind([('data', (2, 3))], for_training=False); m.init_params(); "
    "m.forward(ff.io.DataBatch([ff.nd.ones((2, 3), dtype='int32')]))",
    "m = ff.mod.Module(ff.sym.FullyConnected(ff.sym.Variable('data'), num_hidden=2)); "
    "m.bind([('data', (2, 3))], for_training=False); m.init_params(); m.predict('abc')",
    "ff.model.load_checkpoint('/nonexistent/prefix', 3)",
    "ff.mod.Module.load('/nonexistent/prefix', 3)",
    "ff.lr_scheduler.FactorScheduler(step='a')", "ff.lr_scheduler.MultiFactorScheduler(step=[nan])",
    "ff.random.seed('a')", "ff.random.seed(-1)", "ff.random.seed(2 ** 80)",
    "ff.nd.random.uniform(low=nan, high=1, shape=(2,))", "ff.nd.random.normal(scale=-1, shape=(2,))",
    "ff.nd.random.uniform(shape=(-1,))", "ff.nd.random.normal(shape=(2,), dtype='int32')",
    "ff.cpu(-1)", "ff.gpu('a')", "ff.Context('bogus')",
    "ff.viz.print_summary(ff.sym.Variable('x'), shape={'x': (-1,)})",
    "ff.viz.plot_network(3)",
    "ff.callback.Speedometer(batch_size=0)", "ff.callback.do_checkpoint('/nonexistent/x', period=0)",
    "ff.layers.Dense(-1)", "ff.layers.Dense(nan)", "ff.layers.Dropout(nan)",
    "ff.layers.Conv2D(4, kernel_size=0)", "ff.layers.Conv2D(4, kernel_size=(3, 3), strides=-1)",
    "ff.layers.Activation('bogus')",
]


CASES = {f.__name__: f for f in (load_damaged, load_pickle, module_states_error_names_file,
                                 nd_array_objects, iter_objects, optimizer_field,
                                 lr_scheduler_case, misc, code)}

_MISC = ['deep_json', 'deep_json_obj', 'bad_json', 'sym_save_missing_dir',
         'nd_save_missing_dir', 'nd_load_dev_zero', 'nd_load_missing', 'nd_load_dir',
         'shape_attr:bogus', 'shape_attr:(2,-5)', 'shape_attr:(2, 1e400)', 'shape_attr:(',
         'shape_attr:' + '(' * 5000, 'shape_attr:(10**30,)', 'init_bogus', 'num_args_huge',
         'num_args_huge_nd', 'predict_0_rows', 'fit_nan', 'fit_none', 'pooling_all_pad']

_SCHED = [
    ('FactorScheduler', dict(step=0)), ('FactorScheduler', dict(step=-1)),
    ('FactorScheduler', dict(step=2, factor=float('nan'))),
    ('FactorScheduler', dict(step=2, factor=2.0)),
    ('FactorScheduler', dict(step=2, base_lr=float('inf'))),
    ('FactorScheduler', dict(step=float('nan'))),
    ('MultiFactorScheduler', dict(step=[3, 2])), ('MultiFactorScheduler', dict(step=[])),
    ('MultiFactorScheduler', dict(step=[1, 2], factor=float('inf'))),
    ('PolyScheduler', dict(max_update=10, pwr=-1)),
    ('PolyScheduler', dict(max_update=0)), ('PolyScheduler', dict(max_update=10, pwr=float('nan'))),
    ('PolyScheduler', dict(max_update=10, base_lr=float('nan'))),
    ('PolyScheduler', dict(max_update=10, final_lr=float('inf'))),
    ('CosineScheduler', dict(max_update=0)),
    ('CosineScheduler', dict(max_update=10, base_lr=float('-inf'))),
    ('CosineScheduler', dict(max_update=10, warmup_steps=20)),
    ('CosineScheduler', dict(max_update=10, warmup_steps=-1)),
    ('FactorScheduler', dict(step=2, warmup_steps=2, warmup_begin_lr=float('nan'))),
    ('FactorScheduler', dict(step=2, warmup_mode='bogus', warmup_steps=2)),
]


def api_trials():
    """Every public-API trial."""
    from ffnumba.optimizer import Optimizer
    from ffnumba.registry import get_registry
    trials = []
    for kind in ('params', 'list', 'symbol', 'states'):
        for k in range(CUTS + 1):
            trials.append(('load_damaged', [kind, 'cut', k]))
        for k in range(FLIPS):
            trials.append(('load_damaged', [kind, 'flip', k]))
    for where in ('set_states', 'module', 'nd.load'):
        for proto in (0, 1, 2, 4, 5):
            trials.append(('load_pickle', [where, proto]))
    for k in (0, 3, 7):
        trials.append(('module_states_error_names_file', k))
    for v in ([1.0, None], [[1.0, 2.0], [None, 3.0]], ['a', 1.0], [None]):
        trials.append(('nd_array_objects', v))
    trials += [('iter_objects', 'data'), ('iter_objects', 'label')]
    try:
        names = sorted(get_registry(Optimizer).keys())
    except Exception:
        names = ['sgd', 'adam', 'rmsprop', 'adagrad', 'adadelta', 'nag', 'ftrl', 'signum']
    for name in names:
        for field in _OPT_FIELDS:
            for v in (float('nan'), float('inf'), float('-inf'), -1.0):
                trials.append(('optimizer_field', [name, field, v]))
    trials += [('lr_scheduler_case', list(a)) for a in _SCHED]
    trials += [('misc', m) for m in _MISC]
    trials += [('code', c) for c in _CODE]
    return [{'kind': 'api', 'name': n, 'arg': a} for n, a in trials]


def run_api(trial):
    return CASES[trial['name']](trial['arg'])
