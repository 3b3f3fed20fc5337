"""ff.layers graph building: names, shapes, equality with hand-built ff.sym graphs, errors.

Nothing here computes numbers: only symbols and shape inference.
"""
import math
import re

import pytest
from hypothesis import given, strategies as st

import ffnumba as ff
from ffnumba import layers as L
from ffnumba.base import FFError, ParamError, ShapeError


def _lenet(**kw):
    return L.Sequential([
        L.Conv2D(20, kernel_size=5, activation='tanh'), L.MaxPool2D(2),
        L.Conv2D(50, kernel_size=5, activation='tanh'), L.MaxPool2D(2),
        L.Flatten(), L.Dense(500, activation='tanh'), L.Dense(10),
    ], name='lenet', **kw)


def _hand_lenet():
    S = ff.sym
    net = S.Variable('data')
    net = S.Convolution(net, kernel=(5, 5), num_filter=20, name='conv2d0')
    net = S.Activation(net, act_type='tanh', name='conv2d0_tanh')
    net = S.Pooling(net, kernel=(2, 2), stride=(2, 2), pool_type='max', name='maxpool2d0')
    net = S.Convolution(net, kernel=(5, 5), num_filter=50, name='conv2d1')
    net = S.Activation(net, act_type='tanh', name='conv2d1_tanh')
    net = S.Pooling(net, kernel=(2, 2), stride=(2, 2), pool_type='max', name='maxpool2d1')
    net = S.Flatten(net, name='flatten0')
    net = S.FullyConnected(net, num_hidden=500, name='dense0')
    net = S.Activation(net, act_type='tanh', name='dense0_tanh')
    net = S.FullyConnected(net, num_hidden=10, name='dense1')
    return S.SoftmaxOutput(net, name='softmax')


def _same_graph(sym_a, sym_b, **shapes):
    a, b = sym_a, sym_b
    assert a.list_arguments() == b.list_arguments()
    assert a.list_outputs() == b.list_outputs()
    assert a.list_auxiliary_states() == b.list_auxiliary_states()
    assert a.get_internals().list_outputs() == b.get_internals().list_outputs()
    assert a.infer_shape(**shapes) == b.infer_shape(**shapes)


def test_lenet_to_symbol_equals_hand_built_graph():
    net = _lenet()
    net.compile(optimizer='adam', loss='softmax', metrics=['acc'])
    _same_graph(net.to_symbol(), _hand_lenet(), data=(3, 1, 28, 28))
    bare = net.to_symbol(with_loss=False)
    assert bare.list_outputs() == ['dense1_output']
    assert 'softmax_label' not in bare.list_arguments()


def test_auto_names_count_per_class_and_explicit_names_win():
    net = L.Sequential([L.Input(shape=(3, 8, 8)), L.Conv2D(4, 3, name='dense0'),
                        L.BatchNormalization(), L.Flatten(), L.Dense(5), L.Dense(2),
                        L.Dense(2, use_bias=False, name='head')])
    args = net.to_symbol(with_loss=False).list_arguments()
    # 'dense0' is taken explicitly, so the auto counter skips it.
    assert args == ['data', 'dense0_weight', 'dense0_bias', 'batchnorm0_gamma',
                    'batchnorm0_beta', 'dense1_weight', 'dense1_bias', 'dense2_weight',
                    'dense2_bias', 'head_weight']
    aux = net.to_symbol(with_loss=False).list_auxiliary_states()
    assert aux == ['batchnorm0_moving_mean', 'batchnorm0_moving_var']
    # Building twice gives the same names (counters are per model build).
    assert net.to_symbol(with_loss=False).list_arguments() == args


def test_duplicate_explicit_names_raise():
    net = L.Sequential([L.Dense(3, name='fc'), L.Dense(2, name='fc')])
    with pytest.raises(ParamError, match='`name` must be unique'):
        net.to_symbol(with_loss=False)


def test_functional_concatenate_matches_hand_built():
    a = L.Input(shape=(4,), name='a')
    b = L.Input(shape=(6,), name='b')
    ha = L.Dense(3, activation='relu')(a)
    hb = L.Dense(5, activation='relu')(b)
    out = L.Dense(2)(L.Concatenate()([ha, hb]))
    model = L.Model([a, b], out)
    model.compile(loss='softmax')
    S = ff.sym
    x = S.Activation(S.FullyConnected(S.Variable('a'), num_hidden=3, name='dense0'),
                     act_type='relu', name='dense0_relu')
    y = S.Activation(S.FullyConnected(S.Variable('b'), num_hidden=5, name='dense1'),
                     act_type='relu', name='dense1_relu')
    c = S.Concat(x, y, dim=-1, name='concatenate0')
    hand = S.SoftmaxOutput(S.FullyConnected(c, num_hidden=2, name='dense2'), name='softmax')
    _same_graph(model.to_symbol(), hand, a=(7, 4), b=(7, 6))
    assert model.input_names == ['a', 'b']


def test_unnamed_inputs_get_data_names():
    x0, x1 = L.Input(shape=(2,)), L.Input(shape=(3,))
    model = L.Model([x0, x1], L.Concatenate(axis=1)([x0, x1]))
    assert model.input_names == ['data0', 'data1']
    assert L.Model(x0, L.Dense(1)(x0)).input_names == ['data']


def _summary_total(text):
    return int(re.search(r'Total params: (\d+)', text).group(1))


def test_summary_counts_equal_the_inferred_parameter_sizes():
    net = L.Sequential([L.Input(shape=(1, 8, 8)), L.Conv2D(4, 3, padding='same'),
                        L.BatchNormalization(), L.Activation('relu'), L.MaxPool2D(2),
                        L.Conv2DTranspose(3, 3, strides=2, padding='same'), L.Flatten(),
                        L.Dropout(0.5), L.Dense(7), L.Dense(3, use_bias=False)])
    text = net.summary(print_fn=None)
    sym = net.to_symbol(with_loss=False)
    arg_shapes, out_shapes, aux_shapes = sym.infer_shape(data=(2, 1, 8, 8))
    sizes = [math.prod(s) for n, s in zip(sym.list_arguments(), arg_shapes) if n != 'data']
    sizes += [math.prod(s) for s in aux_shapes]
    assert _summary_total(text) == sum(sizes) == net.count_params()
    assert 'Non-trainable params: 8' in text          # BatchNorm moving mean/var of 4 channels
    assert 'conv2dtranspose0 (Conv2DTranspose)  (None, 3, 8, 8)' in text
    assert 'batchnorm0 (BatchNormalization)' in text
    assert out_shapes == [(2, 3)]


def test_summary_needs_a_shape():
    net = L.Sequential([L.Dense(3)])
    with pytest.raises(ShapeError, match='shape of input data is unknown'):
        net.summary(print_fn=None)
    assert 'dense0 (Dense)' in net.summary(input_shape=(5,), print_fn=None)
    first = L.Sequential([L.Dense(3, input_shape=(5,))])
    assert _summary_total(first.summary(print_fn=None)) == 18


def _out_shape(layer, shape):
    x = L.Input(shape=shape)
    sym = L.Model(x, layer(x)).to_symbol(with_loss=False)
    return sym.infer_shape(data=(2,) + shape)[1][0][1:]


@given(n=st.integers(5, 12), k=st.integers(1, 4), s=st.integers(1, 3), d=st.integers(1, 2))
def test_conv_valid_output_size(n, k, s, d):
    if d * (k - 1) + 1 > n:
        return
    want = (n - d * (k - 1) - 1) // s + 1
    assert _out_shape(L.Conv2D(3, k, strides=s, dilation_rate=d), (2, n, n)) == (3, want, want)
    assert _out_shape(L.Conv1D(3, k, strides=s, dilation_rate=d), (2, n)) == (3, want)


@given(n=st.integers(3, 9), k=st.sampled_from([1, 3, 5]), s=st.integers(1, 3))
def test_same_padding_sizes(n, k, s):
    assert _out_shape(L.Conv2D(2, k, padding='same'), (1, n, n)) == (2, n, n)
    assert _out_shape(L.Conv2DTranspose(2, k, strides=s, padding='same'),
                      (1, n, n)) == (2, n * s, n * s)
    assert _out_shape(L.MaxPool2D(s, padding='same'), (1, n, n)) == \
        (1, -(-n // s), -(-n // s))


def test_other_layer_shapes():
    assert _out_shape(L.GlobalAvgPool2D(), (4, 5, 6)) == (4,)
    assert _out_shape(L.AvgPool2D(2, strides=1), (4, 5, 6)) == (4, 4, 5)
    assert _out_shape(L.Reshape((3, -1)), (4, 6)) == (3, 8)
    assert _out_shape(L.Embedding(20, 4), (6,)) == (6, 4)
    assert _out_shape(L.Dense(3, flatten=False), (5, 4)) == (5, 3)
    assert _out_shape(L.LeakyReLU(0.1), (5,)) == (5,)


def test_final_activation_dropped_under_a_head_that_applies_it():
    x = L.Input(shape=(4,))
    model = L.Model(x, L.Dense(3, activation='softmax')(x))
    assert 'dense0_softmax_output' in model.to_symbol(with_loss=False).get_internals() \
        .list_outputs()
    model.compile(loss='sparse_categorical_crossentropy')
    internals = model.to_symbol().get_internals().list_outputs()
    assert 'dense0_softmax_output' not in internals and 'softmax_output' in internals
    model.compile(loss='mse')       # a regression head keeps the softmax
    assert 'dense0_softmax_output' in model.to_symbol().get_internals().list_outputs()
    y = L.Input(shape=(4,))
    binary = L.Model(y, L.Dense(1, activation='sigmoid')(y))
    binary.compile(loss='binary_crossentropy')
    sym = binary.to_symbol()
    assert sym.list_arguments() == ['data', 'dense0_weight', 'dense0_bias', 'logistic_label']
    assert 'dense0_sigmoid_output' not in sym.get_internals().list_outputs()


BAD_ARGS = [
    (lambda: L.Dense(0), 'Dense: `units` must be a positive int. Received: units=0'),
    (lambda: L.Dense(2.5), 'Dense: `units` must be a positive int. Received: units=2.5'),
    (lambda: L.Dense(3, activation='swish'), 'Dense: `activation` must be None'),
    (lambda: L.Dense(3, use_bias=1), 'Dense: `use_bias` must be a bool. Received: use_bias=1'),
    (lambda: L.Conv2D(0, 3), 'Conv2D: `filters` must be a positive int. Received: filters=0'),
    (lambda: L.Conv2D(4, (3,)), 'Conv2D: `kernel_size` must be an int or a tuple of 2 ints'),
    (lambda: L.Conv2D(4, 2, padding='same'), "Conv2D: `padding` must be 'valid' or"),
    (lambda: L.Conv2D(4, 3, padding='full'), "Conv2D: `padding` must be 'valid', 'same'"),
    (lambda: L.Conv2D(4, 3, groups=3), 'Conv2D: `groups` must be a divisor of filters=4'),
    (lambda: L.Conv1D(4, 3, strides=0), 'Conv1D: `strides` must be made of ints >= 1'),
    (lambda: L.Conv2DTranspose(4, 3, strides=2, output_padding=2),
     'Conv2DTranspose: `output_padding` must be smaller than strides'),
    (lambda: L.MaxPool2D(3, strides=2, padding='same'), 'MaxPool2D: `padding` must be'),
    (lambda: L.Dropout(1.0), 'Dropout: `rate` must be a float in [0, 1). Received: rate=1.0'),
    (lambda: L.BatchNormalization(momentum=1.5), 'BatchNormalization: `momentum` must be'),
    (lambda: L.BatchNormalization(center=False), 'BatchNormalization: `center` must be True'),
    (lambda: L.Embedding(0, 3), 'Embedding: `input_dim` must be a positive int'),
    (lambda: L.Reshape((-1, -1)), 'Reshape: `target_shape` must be a tuple of positive ints'),
    (lambda: L.LeakyReLU(-1), 'LeakyReLU: `negative_slope` must be a float >= 0'),
    (lambda: L.Activation(None), 'Activation: `activation` must be one of'),
    (lambda: L.Input(shape=(0, 3)), 'Input: `shape` must be a tuple of positive ints'),
    (lambda: L.Concatenate()(L.Input(shape=(2,))), 'Concatenate: must be called on a list'),
    (lambda: L.Dense(2)([L.Input(shape=(2,))]), 'Dense: must be called on a tensor'),
    (lambda: L.Sequential([L.Dense(2), 'relu']), 'Sequential: `layers` must hold Layer'),
    (lambda: L.Sequential([L.Concatenate()]), 'Sequential: Concatenate takes several'),
    (lambda: L.Model(L.Input(shape=(2,)), 3), 'Model: `outputs` must be a tensor'),
]


@pytest.mark.parametrize('make, message', BAD_ARGS)
def test_bad_arguments_raise_keras_style_param_errors(make, message):
    with pytest.raises(ParamError) as info:
        make()
    assert str(info.value).startswith(message)
    assert isinstance(info.value, ValueError)


def test_weight_sharing_and_foreign_inputs_are_refused():
    x = L.Input(shape=(3,))
    dense = L.Dense(3)
    with pytest.raises(ParamError, match='weight sharing is not supported'):
        L.Model(x, dense(dense(x))).to_symbol(with_loss=False)
    other = L.Input(shape=(3,))
    with pytest.raises(ParamError, match='not in `inputs`'):
        L.Model(x, L.Concatenate()([x, other])).to_symbol(with_loss=False)
    layer = L.Dense(2)
    with pytest.raises(ParamError, match='added only once'):
        L.Sequential([layer, layer])
    assert 'weight sharing' in L.UNSUPPORTED


def test_compile_errors():
    net = L.Sequential([L.Dense(2)])
    with pytest.raises(FFError, match='needs compile'):
        net.to_symbol()
    with pytest.raises(ParamError, match='`loss` must be one of'):
        net.compile(loss='hinge')
    with pytest.raises(ParamError, match='`metrics` entries must be one of'):
        net.compile(loss='softmax', metrics=['auc'])
    with pytest.raises(ParamError):
        net.compile(optimizer='no-such-optimizer', loss='softmax')
    with pytest.raises(ParamError, match='`optimizer` must be a name or an Optimizer'):
        net.compile(optimizer=3, loss='softmax')
    with pytest.raises(FFError, match='needs compile'):
        net.fit([[1.0, 2.0]], [0])
