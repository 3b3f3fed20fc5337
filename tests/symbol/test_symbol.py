"""Symbol construction: variables, composition, names, attributes, overloads."""
import copy
import inspect
import pickle

import numpy as np
import pytest
from hypothesis import given, strategies as st

import _sym_testops  # noqa: F401  (registers the _test_* ops)
import ffnumba.ndarray as nd
import ffnumba.symbol as sym
from ffnumba.attribute import AttrScope
from ffnumba.base import FFError, ParamError
from ffnumba.name import NameManager, Prefix


@pytest.fixture(autouse=True)
def _fresh_names():
    with NameManager():
        yield


def mlp():
    data = sym.Variable('data')
    fc = sym.FullyConnected(data, num_hidden=3, name='fc1')
    act = sym.Activation(fc, act_type='relu', name='relu1')
    return sym.SoftmaxOutput(act, name='softmax')


def test_variable_attrs_follow_mxnet():
    v = sym.Variable('v', shape=(3, 4), lr_mult=2.0, wd_mult=0.5, dtype='float16', init='zeros',
                     stype='default', __layout__='NCHW')
    assert v.list_attr() == {'__shape__': '(3, 4)', '__lr_mult__': '2.0', 'lr_mult': '2.0',
                             '__wd_mult__': '0.5', 'wd_mult': '0.5', '__dtype__': '2',
                             '__init__': 'zeros', '__storage_type__': '0',
                             '__layout__': 'NCHW'}
    assert v.attr('lr_mult') == '2.0' and v.attr('__lr_mult__') == '2.0'
    assert v.attr('nope') is None
    assert sym.var is sym.Variable


def test_variable_init_uses_dumps():
    class Init:
        def dumps(self):
            return '["xavier", {}]'
    assert sym.Variable('w', init=Init()).attr('__init__') == '["xavier", {}]'


def test_variable_rejects_bad_names_and_attrs():
    with pytest.raises(TypeError, match='string'):
        sym.Variable(3)
    with pytest.raises(ValueError, match='double underscores'):
        sym.Variable('a', foo='bar')


def test_auto_created_inputs_copy_op_attrs():
    data = sym.Variable('data')
    with AttrScope(ctx_group='dev1'):
        fc = sym.FullyConnected(data, num_hidden=3, name='fc1')
    assert fc.list_arguments() == ['data', 'fc1_weight', 'fc1_bias']
    d = fc.attr_dict()
    assert d['fc1_weight'] == {'num_hidden': '3', '__ctx_group__': 'dev1', 'ctx_group': 'dev1'}
    assert d['fc1'] == d['fc1_weight']
    assert 'data' not in d
    nb = sym.FullyConnected(data, num_hidden=2, no_bias=True)
    assert nb.list_arguments() == ['data', 'fullyconnected0_weight']


def test_input_attrs_hook_and_bn_defaults():
    w = sym._test_wmul(sym.Variable('x'), name='m')
    assert w.attr_dict()['m_weight'] == {'__init__': '["one", {}]'}
    bn = sym.BatchNorm(sym.Variable('x'), name='bn')
    d = bn.attr_dict()
    assert d['bn_moving_mean']['__init__'] == '["zero", {}]'
    assert d['bn_moving_var']['__init__'] == '["one", {}]'
    assert bn.list_arguments() == ['x', 'bn_gamma', 'bn_beta']
    assert bn.list_auxiliary_states() == ['bn_moving_mean', 'bn_moving_var']
    assert bn.list_inputs() == ['x', 'bn_gamma', 'bn_beta', 'bn_moving_mean', 'bn_moving_var']


def test_list_outputs_and_internals():
    s = mlp()
    assert s.list_outputs() == ['softmax_output']
    internals = s.get_internals()
    assert internals.list_outputs() == ['data', 'fc1_weight', 'fc1_bias', 'fc1_output',
                                        'relu1_output', 'softmax_label', 'softmax_output']
    fc = internals['fc1_output']
    assert fc.name == 'fc1' and fc.list_arguments() == ['data', 'fc1_weight', 'fc1_bias']
    assert [c.name for c in s.get_children()] == ['relu1', 'softmax_label']
    assert sym.Variable('x').get_children() is None
    assert s.name == 'softmax' and repr(s) == '<Symbol softmax>'


def test_multi_output_indexing():
    t = sym._test_twoout(sym.Variable('x'))
    assert t.list_outputs() == ['_test_twoout0_output0', '_test_twoout0_output1']
    assert len(t) == 2
    assert t[1].list_outputs() == ['_test_twoout0_output1']
    assert t['_test_twoout0_output0'].list_outputs() == ['_test_twoout0_output0']
    assert t[-1].list_outputs() == t[1].list_outputs()
    assert [o.list_outputs()[0] for o in t] == t.list_outputs()
    with pytest.raises(IndexError):
        t[2]
    with pytest.raises(ValueError, match='Cannot find'):
        t['nope']
    with pytest.raises(ParamError, match='one output'):
        sym.Activation(t, act_type='relu')
    g = sym.Group([t[0], sym.Variable('y')])
    assert g.name is None and repr(g) == '<Symbol group [_test_twoout0, y]>'
    with pytest.raises(TypeError):
        sym.Group([t, 3])


def test_auto_names_per_hint_and_prefix():
    x = sym.Variable('x')
    a = sym.FullyConnected(x, num_hidden=2)
    b = sym.FullyConnected(x, num_hidden=2)
    c = sym.Activation(a, act_type='relu')
    assert (a.name, b.name, c.name) == ('fullyconnected0', 'fullyconnected1', 'activation0')
    with Prefix('pre_'):
        d = sym.FullyConnected(x, num_hidden=2)
        v = sym.Variable('vv')
    assert d.list_arguments() == ['x', 'pre_fullyconnected0_weight', 'pre_fullyconnected0_bias']
    assert v.name == 'vv'
    # aliases use their own lower-cased name as the hint
    assert sym.make_loss(x).name == 'make_loss0'


def test_inputs_by_keyword_position_and_errors():
    x, w = sym.Variable('x'), sym.Variable('w')
    fc = sym.FullyConnected(data=x, weight=w, num_hidden=2, name='f')
    assert fc.list_arguments() == ['x', 'w', 'f_bias']
    with pytest.raises(ParamError, match='unknown input `wieght`'):
        sym.FullyConnected(x, wieght=w, num_hidden=2)
    with pytest.raises(ParamError, match='given twice'):
        sym.FullyConnected(x, data=x, num_hidden=2)
    with pytest.raises(ParamError, match='at most 3 inputs'):
        sym.FullyConnected(x, w, w, w, num_hidden=2)
    with pytest.raises(ParamError, match='num_hidden'):
        sym.FullyConnected(x)
    with pytest.raises(ParamError, match='must be a Symbol'):
        sym.FullyConnected(3, num_hidden=2)


def test_variadic_sets_count():
    a, b, c = sym.Variable('a'), sym.Variable('b'), sym.Variable('c')
    s = sym._test_cat(a, b, c, dim=0)
    assert s.list_arguments() == ['a', 'b', 'c']
    assert s.attr('num_args') == '3'
    assert sym._test_concat(a, b).name == '_test_concat0'


def test_call_composes_and_renames():
    fc = sym.FullyConnected(name='fc3', num_hidden=10)
    assert fc.list_arguments() == ['fc3_data', 'fc3_weight', 'fc3_bias']
    x = sym.Variable('x')
    net = fc(fc3_data=x, name='composed')
    assert net.list_arguments() == ['x', 'fc3_weight', 'fc3_bias'] and net.name == 'composed'
    assert fc.name == 'fc3' and fc.list_arguments()[0] == 'fc3_data'   # original untouched
    pos = fc(x)
    assert pos.list_arguments() == ['x', 'fc3_weight', 'fc3_bias']
    with pytest.raises(FFError, match='not an input'):
        fc(nope=x)


def test_copy_is_deep_and_pickle_round_trips():
    s = mlp()
    c = copy.copy(s)
    c._set_attr(__mirror_stage__='True')
    assert s.attr('__mirror_stage__') is None and c.attr('mirror_stage') == 'True'
    d = copy.deepcopy(s)
    assert d.tojson() == s.tojson()
    p = pickle.loads(pickle.dumps(s))
    assert p.tojson() == s.tojson()


def test_set_attr_rules():
    s = sym.Activation(sym.Variable('x'), act_type='relu', name='a')
    s._set_attr(lr_mult='0.5', act_type='tanh')
    assert s.attr('__lr_mult__') == '0.5'
    assert s.attr('act_type') == 'tanh'
    with pytest.raises(ValueError, match='string'):
        s._set_attr(foo=1)


def test_attr_scope_nesting_and_values():
    with AttrScope(ctx_group='a'):
        with AttrScope(lr_mult='0.1'):
            v = sym.Variable('v')
        w = sym.Variable('w')
    assert v.list_attr() == {'__ctx_group__': 'a', 'ctx_group': 'a', '__lr_mult__': '0.1',
                             'lr_mult': '0.1'}
    assert w.list_attr() == {'__ctx_group__': 'a', 'ctx_group': 'a'}
    assert sym.Variable('z').list_attr() == {}
    with pytest.raises(ValueError):
        AttrScope(ctx_group=1)


OVERLOADS = [
    (lambda x, y: x + y, 'elemwise_add', '_plus0', None),
    (lambda x, y: x - y, 'elemwise_sub', '_minus0', None),
    (lambda x, y: x * y, 'elemwise_mul', '_mul0', None),
    (lambda x, y: x / y, 'elemwise_div', '_div0', None),
    (lambda x, y: x ** y, '_power', '_power0', None),
    (lambda x, y: x % y, '_mod', '_mod0', None),
    (lambda x, y: x + 1, '_plus_scalar', '_plusscalar0', '1'),
    (lambda x, y: 1 + x, '_plus_scalar', '_plusscalar0', '1'),
    (lambda x, y: x - 1.5, '_minus_scalar', '_minusscalar0', '1.5'),
    (lambda x, y: 1 - x, '_rminus_scalar', '_rminusscalar0', '1'),
    (lambda x, y: x * 2, '_mul_scalar', '_mulscalar0', '2'),
    (lambda x, y: -x, '_mul_scalar', '_mulscalar0', '-1.0'),
    (lambda x, y: x / 2, '_div_scalar', '_divscalar0', '2'),
    (lambda x, y: 2 / x, '_rdiv_scalar', '_rdivscalar0', '2'),
    (lambda x, y: x ** 2, '_power_scalar', '_powerscalar0', '2'),
    (lambda x, y: 2 ** x, '_rpower_scalar', '_rpower_scalar0', '2'),
    (lambda x, y: x > y, '_greater', '_greater0', None),
    (lambda x, y: x >= 1, '_greater_equal_scalar', '_greater_equal_scalar0', '1'),
    (lambda x, y: x < y, '_lesser', '_lesser0', None),
    (lambda x, y: x == 1, '_equal_scalar', '_equal_scalar0', '1'),
    (lambda x, y: x != y, '_not_equal', '_not_equal0', None),
    (lambda x, y: abs(x), 'abs', 'abs0', None),
]


@pytest.mark.parametrize('fn,op,name,scalar', OVERLOADS)
def test_operator_overloads(fn, op, name, scalar):
    s = fn(sym.Variable('x'), sym.Variable('y'))
    node = s._outputs[0][0]
    assert node.op.name == op and s.name == name
    assert s.attr('scalar') == scalar


def test_overload_rejects_other_types():
    with pytest.raises(TypeError):
        sym.Variable('x') + 'a'


def test_generated_function_signature_and_doc():
    sig = inspect.signature(sym.FullyConnected)
    params = list(sig.parameters)
    assert params[:3] == ['data', 'weight', 'bias']
    assert sig.parameters['num_hidden'].default is inspect.Parameter.empty
    assert sig.parameters['no_bias'].default is False
    assert 'name' in params and 'attr' in params
    doc = sym.FullyConnected.__doc__
    assert 'Parameters\n----------' in doc and 'num_hidden : int, required' in doc
    assert 'Returns\n-------' in doc
    csig = inspect.signature(sym._test_cat)
    assert list(csig.parameters)[0] == 'data'
    assert csig.parameters['data'].kind is inspect.Parameter.VAR_POSITIONAL
    assert 'num_args' not in csig.parameters


def test_every_registered_op_has_a_function():
    from ffnumba.ops import list_ops
    for name in list_ops(include_aliases=True):
        fn = getattr(sym, name)
        assert callable(fn) and fn.__doc__
    with pytest.raises(AttributeError):
        sym.NoSuchOperator


def test_debug_str_lists_nodes():
    s = mlp()
    text = s.debug_str()
    assert text.startswith('Symbol Outputs:\n\toutput[0]=softmax(0)\n')
    assert 'Variable:data' in text and 'Op:FullyConnected, Name=fc1' in text
    assert '\tnum_hidden=3' in text


@given(st.lists(st.sampled_from(['fullyconnected', 'activation', 'conv']), min_size=1,
                max_size=12))
def test_name_manager_counts_per_hint(hints):
    with NameManager() as nm:
        got = [nm.get(None, h) for h in hints]
    seen = {}
    for h, g in zip(hints, got):
        assert g == '%s%d' % (h, seen.get(h, 0))
        seen[h] = seen.get(h, 0) + 1
    assert len(set(got)) == len(got)


def test_deep_graph_no_recursion_limit():
    x = sym.Variable('x')
    s = x
    for _ in range(3000):
        s = s * 1.0
    assert s.list_arguments() == ['x']
    assert s.infer_shape(x=(2,))[1] == [(2,)]
    assert np.asarray(s.eval(x=nd.ones((2,)))[0]).tolist() == [1.0, 1.0]


def test_fluent_methods():
    x = sym.Variable('x')
    s = x.sum(axis=1, name='total')
    assert s.name == 'total' and s._outputs[0][0].op.name == 'sum'
    assert x.relu().name == 'relu0'
    assert x.exp().infer_shape(x=(2, 3))[1] == [(2, 3)]
