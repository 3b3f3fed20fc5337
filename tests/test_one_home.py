"""Each fact has one home (issue 9): guards that keep it there.

* parameters are initialised once, by ``Module.init_params`` (FeedForward too);
* shapes are inferred once per context before the first batch (FeedForward too);
* every optimizer-state file goes through ``checkpoint.save_states`` /
  ``checkpoint.read_states``;
* every fluent method names a registered operator and resolves to it.

(One ``infer_shape`` signature: ``tests/ops/test_registry.py``.)
"""
import collections
import warnings

import numpy as np
import pytest

import ffnumba as ff
from ffnumba import checkpoint
from ffnumba.symbol import infer as _infer


def _net():
    data = ff.sym.var('data')
    net = ff.sym.FullyConnected(data, num_hidden=4, name='fc1')
    net = ff.sym.BatchNorm(net, name='bn')
    return ff.sym.SoftmaxOutput(net, name='softmax')


def _data():
    rng = np.random.RandomState(0)
    return rng.rand(20, 3).astype('float32'), (np.arange(20) % 4).astype('float32')


class _Counting(ff.init.Uniform):
    """Uniform(0.1) that records how often, and with what, each name is initialised."""

    def __init__(self):
        super().__init__(0.1)
        self.calls = collections.Counter()
        self.kinds = set()

    def __call__(self, desc, arr):
        self.calls[str(desc)] += 1
        self.kinds.add(type(desc))
        return super().__call__(desc, arr)


PARAMS = ['bn_beta', 'bn_gamma', 'bn_moving_mean', 'bn_moving_var', 'fc1_bias', 'fc1_weight']


@pytest.mark.parametrize('nctx', [1, 2])
def test_module_fit_initialises_each_parameter_once(nctx):
    X, y = _data()
    init = _Counting()
    mod = ff.mod.Module(_net(), context=[ff.cpu(i) for i in range(nctx)])
    mod.fit(ff.io.NDArrayIter(X, y, batch_size=10), num_epoch=1, initializer=init)
    assert sorted(init.calls) == PARAMS and set(init.calls.values()) == {1}
    assert init.kinds == {ff.init.InitDesc}


@pytest.mark.parametrize('nctx', [1, 2])
def test_feedforward_fit_initialises_each_parameter_once(nctx):
    X, y = _data()
    init = _Counting()
    given = ff.nd.array(np.full((4, 3), 0.5, 'float32'))
    model = ff.model.FeedForward(_net(), ctx=[ff.cpu(i) for i in range(nctx)], num_epoch=1,
                                 initializer=init, numpy_batch_size=10, learning_rate=0.0,
                                 arg_params={'fc1_weight': given})
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        model.fit(X, y)
    # a given value is copied, never initialised; the rest once each
    assert sorted(init.calls) == [p for p in PARAMS if p != 'fc1_weight']
    assert set(init.calls.values()) == {1}
    # FeedForward keeps MXNet's legacy convention: the initializer gets the plain name
    assert init.kinds == {str}
    np.testing.assert_array_equal(model.arg_params['fc1_weight'].asnumpy(), given.asnumpy())


@pytest.fixture
def shape_passes(monkeypatch):
    count = collections.Counter()
    real = _infer.infer_shapes

    def counting(*args, **kwargs):
        count['passes'] += 1
        return real(*args, **kwargs)
    monkeypatch.setattr(_infer, 'infer_shapes', counting)
    return count


@pytest.mark.parametrize('nctx', [1, 2])
def test_one_shape_pass_per_context_before_training(shape_passes, nctx):
    X, y = _data()
    ctx = [ff.cpu(i) for i in range(nctx)]
    mod = ff.mod.Module(_net(), context=ctx)
    mod.fit(ff.io.NDArrayIter(X, y, batch_size=10), num_epoch=1)
    assert shape_passes['passes'] == nctx
    shape_passes.clear()
    model = ff.model.FeedForward(_net(), ctx=ctx, num_epoch=1, numpy_batch_size=10)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        model.fit(X, y)
    assert shape_passes['passes'] == nctx    # FeedForward infers no shapes of its own


@pytest.fixture
def state_files(monkeypatch):
    seen = collections.defaultdict(list)
    real_save, real_read = checkpoint.save_states, checkpoint.read_states

    def save(fname, payload):
        seen['save'].append(str(fname))
        return real_save(fname, payload)

    def read(fname, *args, **kwargs):
        seen['read'].append(str(fname))
        return real_read(fname, *args, **kwargs)
    monkeypatch.setattr(checkpoint, 'save_states', save)
    monkeypatch.setattr(checkpoint, 'read_states', read)
    return seen


@pytest.mark.parametrize('kvstore', [None, 'local'])
def test_module_state_files_go_through_checkpoint(state_files, tmp_path, kvstore):
    X, y = _data()
    mod = ff.mod.Module(_net())
    mod.fit(ff.io.NDArrayIter(X, y, batch_size=10), num_epoch=1, kvstore=kvstore,
            optimizer='adam')
    fname = str(tmp_path / 'm.states')
    mod.save_optimizer_states(fname)
    mod.load_optimizer_states(fname)
    assert state_files == {'save': [fname], 'read': [fname]}


def test_layers_state_files_go_through_checkpoint(state_files, tmp_path):
    L = ff.layers
    net = L.Sequential([L.Input(shape=(3,)), L.Dense(4, activation='softmax')])
    net.compile(optimizer='adam', loss='sparse_categorical_crossentropy')
    X, y = _data()
    net.fit(X, y, batch_size=10, epochs=1, verbose=0)
    path = str(tmp_path / 'net.ffmodel')
    net.save(path)
    L.load_model(path)
    assert [f.rsplit('/', 1)[-1] for f in state_files['save']] == ['optimizer.states']
    assert state_files['read'] == [path + '/optimizer.states']


def test_every_fluent_method_resolves_to_a_registered_op():
    from ffnumba.ndarray._mixin import FLUENT
    from ffnumba.symbol._fluent import _FLUENT
    from ffnumba.ops.registry import get_op, list_ops
    ops = set(list_ops(include_aliases=True))
    assert not sorted(set(FLUENT) - ops), 'NDArray fluent names without an operator'
    assert not sorted(set(_FLUENT) - ops), 'Symbol fluent names without an operator'
    x = ff.nd.ones((2, 3))
    for name in sorted(FLUENT):
        # resolved from the registry, not shadowed by a hand-written method of another home
        assert not hasattr(type(x), name), name
        method = getattr(x, name)
        assert method.func is getattr(ff.nd, name) and method.args == (x,), name
        assert name in dir(x)
    s = ff.sym.var('x')
    for name in sorted(set(FLUENT) | set(_FLUENT)):
        op = get_op(name)
        try:
            out = getattr(s, name)()
        except ff.base.ParamError as e:   # resolved: the op's own params want a value
            assert str(e).startswith(op.name + ':'), (name, e)
            continue
        assert out._outputs[0][0].op is op and out.list_arguments()[0] == 'x', name


def test_op_params_are_validated_whichever_way_they_come():
    """``OpDef.parse_params`` is the one way to build op params: keyword, positional,
    fluent, imperative and JSON input all reach its checks."""
    x = ff.sym.var('x')
    msg = r'Dropout: `p` must be a float >= 0.0 <= 1.0. Received: p='
    ways = [lambda: ff.sym.Dropout(x, p=1.5), lambda: ff.sym.Dropout(x, 1.5),
            lambda: ff.nd.Dropout(ff.nd.ones((2,)), p=1.5)]
    for make in ways:
        with pytest.raises(ff.base.ParamError, match=msg):
            make()
    for arr in (x, ff.nd.ones((2, 3))):
        with pytest.raises(ff.base.ParamError, match='clip: `a_min` must be a float'):
            arr.clip(a_min='z', a_max=1)
    doc = ff.sym.Dropout(x, p=0.5, name='d').tojson().replace('"p": "0.5"', '"p": "1.5"')
    assert '"p": "1.5"' in doc
    with pytest.raises(ff.base.FFError, match="node 'd': " + msg):
        ff.sym.load_json(doc)


def test_op_params_records_are_made_only_by_params_parse():
    """The docs' record of defaults (generated docstrings, signatures, positional-input
    mapping) comes from ``Params.parse(partial=True)`` too: required params are None,
    cross-field checks are skipped, a given value is still checked, and no module but
    ``ops/params.py`` builds a record by hand."""
    import pathlib
    from ffnumba.ops.doc import _default_params
    from ffnumba.ops.registry import get_op
    conv = get_op('Convolution')
    p = _default_params(conv)
    assert type(p) is conv.params and p.num_filter is None and p.kernel is None
    assert p.no_bias is False and conv.list_arguments(p) == ['data', 'weight', 'bias']
    assert list(get_op('Deconvolution').list_arguments(_default_params(get_op('Deconvolution')))) \
        == ['data', 'weight']       # no_bias defaults to True (MXNet)
    with pytest.raises(ff.base.ParamError, match='Convolution: `num_filter` must be'):
        conv.params.parse('Convolution', {'num_filter': 0}, partial=True)
    with pytest.raises(ff.base.ParamError, match='required parameter `kernel`'):
        conv.params.parse('Convolution', {})
    root = pathlib.Path(ff.__file__).parent
    hand_made = [str(f.relative_to(root)) for f in root.rglob('*.py')
                 if 'object.__new__(' in f.read_text() and f.name != 'params.py']
    assert hand_made == []



def _named_strings(path, names):
    """``(line, string)`` of each string literal in a module's code (docstrings left out)
    that is among ``names`` and is compared (``==``, ``in``) or held in a list, tuple, set
    or dict literal, plus each one that spells a family of op names (``'_scalar'``,
    ``'broadcast_'``) wherever it stands."""
    import ast
    tree = ast.parse(open(path).read())
    docs, held = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
        if isinstance(node, (ast.Compare, ast.List, ast.Tuple, ast.Set, ast.Dict)):
            held.update(id(n) for n in ast.walk(node))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
            and ((n.value in names and id(n) in held)
                 or '_scalar' in n.value or 'broadcast_' in n.value)]


@pytest.mark.parametrize('module', ['_memory_plan', '_executor_bind', '_executor_run',
                                    'executor'])
def test_executor_keeps_no_list_of_operators(module):
    """What an operator's backward reads and whether its gradient is zero are declared on
    its ``OpDef`` (``backward_reads``, ``passes_gradient``, ``zero_gradient``): the memory
    plan and the executor compare against no operator name, nor a param name that such a
    declaration depends on (``topk``'s ``ret_typ``), and keep no list of them."""
    import importlib
    from ffnumba.ops.registry import get_op, list_ops
    ops = set(list_ops(include_aliases=True))
    # the params that a declaration depends on (those of callable declarations)
    names = ops | {f for n in ops for f in get_op(n).params._fields
                   if callable(get_op(n).zero_gradient) or callable(get_op(n).backward_reads)}
    path = importlib.import_module('ffnumba.' + module).__file__
    found = _named_strings(path, names)
    assert not found, '%s names operators or their params: %s' % (module, found)


def test_memory_plan_reads_zero_gradient_from_the_registry():
    """``_memory_plan.zero_gradient`` follows each op's ``OpDef.zero_gradient``, a callable
    of the params included, and the executor then ignores such a head's gradient."""
    from ffnumba._memory_plan import zero_gradient
    from ffnumba.ops.registry import OpDef, register_op, same_shape, list_ops
    from ffnumba.ops.params import Field, Params
    from ffnumba.symbol.graph import Node

    class FlagParam(Params):
        flag = Field(bool, False, 'Zero gradient.')

    def fwd(ctx, p, ins, outs, aux):
        outs[0][...] = 0

    def bwd(ctx, p, og, ins, outs, ig, req, aux):
        if req[0] == 'write':
            ig[0][...] = 0 if p.flag else og[0]

    if '_test_zg_home' not in list_ops():
        register_op(OpDef(name='_test_zg_home', arguments=['data'], infer_shape=same_shape,
                          forward={'cpu': fwd}, backward={'cpu': bwd}, params=FlagParam,
                          zero_gradient=lambda p: p.flag))
    op = ff.ops.get_op('_test_zg_home')
    assert [zero_gradient(Node(op, 'n', op.parse_params(dict(flag=f))))
            for f in (True, False)] == [True, False]
    for flag in (True, False):
        s = ff.sym._test_zg_home(ff.sym.var('data'), flag=flag)
        exe = s.simple_bind(ff.cpu(), data=(2, 3))
        exe.forward(is_train=True)
        if flag:                          # no head gradient needed; a wrong shape is ignored
            exe.backward()
            exe.backward(ff.nd.ones((7,)))
            assert exe.grad_dict['data'].asnumpy().tolist() == [[0] * 3] * 2
        else:
            with pytest.raises(ff.base.FFError):
                exe.backward()
            exe.backward(ff.nd.ones((2, 3)))
            assert exe.grad_dict['data'].asnumpy().tolist() == [[1] * 3] * 2
