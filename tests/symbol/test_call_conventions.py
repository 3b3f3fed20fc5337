"""MXNet's operator call conventions and symbol details (checked against MXNet 1.9.1):
params by position, ``None`` inputs, attribute keywords, partial shapes,
``get_children``, ``bool(symbol)``, PReLU's initial slope."""
import json
from collections import namedtuple

import numpy as np
import pytest

import ffnumba as mx
from ffnumba.base import NotImplementedForSymbol, ParamError, ShapeError

sym = mx.sym


def test_params_by_position_after_the_inputs():
    x = sym.Variable('x')
    assert sym.Dropout(x, 0.5).list_attr() == {'p': '0.5'}
    c = sym.clip(x, 0, 1)
    assert c.list_attr() == {'a_min': '0', 'a_max': '1'}
    assert x.reshape((2, 3)).infer_shape(x=(3, 2))[1] == [(2, 3)]
    with pytest.raises(ParamError, match='both by position and by keyword'):
        sym.Dropout(x, 0.5, p=0.2)
    with pytest.raises(ParamError, match='must be a Symbol'):
        sym.FullyConnected(3, num_hidden=2)
    with pytest.raises(ParamError, match='at most'):
        sym.Dropout(x, 0.5, 'training', (1,), False, 7)


def test_none_positional_input():
    x, w = sym.Variable('x'), sym.Variable('w')
    c = sym.Convolution(x, w, None, no_bias=True, kernel=(3, 3), num_filter=4, name='c')
    assert c.list_arguments() == ['x', 'w']
    fc = sym.FullyConnected(x, None, None, num_hidden=3, name='fc')
    assert fc.list_arguments() == ['x', 'fc_weight', 'fc_bias']


def test_attribute_keywords_and_lr_mult_reaching_the_optimizer():
    x = sym.Variable('x')
    c = sym.Convolution(x, kernel=(1, 1), num_filter=2, __layout__='NCHW', name='c')
    assert c.attr('__layout__') == 'NCHW'
    fc = sym.FullyConnected(x, num_hidden=3, lr_mult=2, wd_mult=0, ctx_group='dev1',
                            name='fc')
    attrs = fc.attr_dict()
    for n in ('fc', 'fc_weight', 'fc_bias'):
        assert attrs[n]['__lr_mult__'] == '2' and attrs[n]['__wd_mult__'] == '0'
        assert attrs[n]['__ctx_group__'] == 'dev1'
    saved = json.loads(fc.tojson())
    assert any(n['name'] == 'fc_weight' and n.get('attrs', {}).get('__lr_mult__') == '2'
               for n in saved['nodes'])
    opt = mx.optimizer.SGD(learning_rate=0.1, sym=fc,
                           param_idx2name={0: 'fc_weight', 1: 'fc_bias'})
    assert opt._get_lr(0) == pytest.approx(0.2)
    assert opt._get_wd(0) == 0


def test_params_are_always_validated():
    x = sym.Variable('x')
    with pytest.raises(ParamError, match='p'):
        sym.Dropout(x, 'half')
    with pytest.raises(ParamError, match='unknown parameter'):
        sym.Dropout(x, q=0.5)


def test_partial_shapes_zero_means_unknown():
    a = sym.Variable('a', shape=(0, 10))
    b = sym.Variable('b', shape=(12, 0))
    assert (a + b).infer_shape() == ([(12, 10), (12, 10)], [(12, 10)], [])
    assert (a + b).infer_shape_partial() == ([(12, 10), (12, 10)], [(12, 10)], [])
    c = sym.Variable('c')
    assert (a + c).infer_shape_partial() == ([(0, 10), (0, 10)], [(0, 10)], [])   # as MXNet
    with pytest.warns(UserWarning):
        assert (a + c).infer_shape() == (None, None, None)
    assert (a * c).infer_shape(c=(4, 10))[1] == [(4, 10)]
    with pytest.raises(ShapeError, match='inconsistent'):
        (a + c).infer_shape(c=(4, 11))
    d = sym.Variable('d', shape=(3, 0))      # partial shapes that cannot agree stay unknown
    with pytest.warns(UserWarning):
        assert (b + d).infer_shape() == (None, None, None)
    e, f = sym.Variable('e', shape=(0, 10)), sym.Variable('f', shape=(0, 5))
    cat = sym.Concat(e, f, dim=1)                  # partial shapes flow through, as MXNet
    assert cat.infer_shape_partial() == ([(0, 10), (0, 5)], [(0, 15)], [])
    assert cat.infer_shape(e=(2, 10), f=(2, 5))[1] == [(2, 15)]   # given shapes win


def test_get_children_of_multi_output_nodes():
    data = sym.Variable('data')
    sliced = sym.SliceChannel(data, num_outputs=3, name='slice')
    assert sliced.get_children().list_outputs() == ['data']
    concat = sym.Concat(*list(sliced))
    assert concat.get_children().list_outputs() == ['slice_output0', 'slice_output1',
                                                   'slice_output2']
    assert data.get_children() is None


def test_bool_of_a_symbol_raises():
    with pytest.raises(NotImplementedForSymbol, match='only available in NDArray'):
        bool(sym.Variable('x'))


def test_prelu_slope_starts_at_quarter():
    s = sym.LeakyReLU(sym.Variable('x'), act_type='prelu', name='p')
    assert s.attr_dict()['p_gamma']['__init__'] == '["Constant", {"value": 0.25}]'
    assert '__init__' not in sym.LeakyReLU(sym.Variable('x'), name='q').attr_dict().get(
        'q', {})
    m = mx.mod.Module(s, data_names=['x'], label_names=None)
    m.bind([('x', (2, 3))])
    m.init_params(mx.init.Xavier())
    np.testing.assert_array_equal(m.get_params()[0]['p_gamma'].asnumpy(), [0.25] * 3)


def test_module_forward_takes_duck_typed_batches():
    Batch = namedtuple('Batch', ['data'])
    net = sym.SoftmaxOutput(sym.FullyConnected(sym.Variable('data'), num_hidden=2),
                            name='softmax')
    m = mx.mod.Module(net)
    m.bind([('data', (2, 3))], [('softmax_label', (2,))], for_training=False)
    m.init_params()
    m.forward(Batch([mx.nd.ones((2, 3))]))
    assert m.get_outputs()[0].shape == (2, 2)
    m.forward(Batch([mx.nd.ones((5, 3))]))
    assert m.get_outputs()[0].shape == (5, 2)


def test_csv_iter_getdata_is_one_ndarray(tmp_path):
    path = tmp_path / 'd.csv'
    np.savetxt(path, np.arange(12.0).reshape(4, 3), delimiter=',')
    it = mx.io.CSVIter(data_csv=str(path), data_shape=(3,), batch_size=2)
    it.reset()
    assert it.iter_next()
    d = it.getdata()
    assert isinstance(d, mx.nd.NDArray) and d.shape == (2, 3)
    assert isinstance(it.getlabel(), mx.nd.NDArray)
    batch = next(iter(it))
    assert isinstance(batch.data, list) and batch.data[0].shape == (2, 3)


def test_fluent_methods_resolve_from_the_registry():
    x = sym.Variable('x')
    assert x.exp().infer_shape(x=(2, 3))[1] == [(2, 3)]
    assert x.sum(axis=1).infer_shape(x=(2, 3))[1] == [(2,)]
    assert x.reshape((3, 2)).infer_shape(x=(2, 3))[1] == [(3, 2)]
    for name in ('arccosh', 'degrees', 'sin'):
        try:
            mx.ops.registry.get_op(name)
        except mx.base.FFError:
            with pytest.raises(AttributeError):   # listed by MXNet, not registered (yet)
                getattr(x, name)
    with pytest.raises(AttributeError):
        x.not_a_method


def test_bad_data_descriptions_are_type_errors():
    net = sym.FullyConnected(sym.Variable('data'), num_hidden=1)
    mod = mx.mod.Module(net, label_names=None)
    with pytest.raises(TypeError):
        mod.bind(data_shapes=['data', mx.nd.zeros((2, 1))])
    with pytest.raises(TypeError):
        mod.bind(data_shapes=[('data', mx.nd.array([10, 10]))])
    assert not mod.binded
    mod.bind(data_shapes=[('data', (2, 1))])
    assert mod.binded
