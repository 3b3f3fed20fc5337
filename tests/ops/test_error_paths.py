"""Bad input to the nn and loss ops through the public API gives an FFError naming the problem.

Every case goes through ``ff.sym`` / ``simple_bind`` / ``forward`` / ``backward``
and checks the error class and that the message names the operator or node,
the argument, and the offending shape or value. A few cases check that
inputs MXNet accepts (zero-size dims, int indices, huge indices) compute.
"""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba.base import DTypeError, ParamError, ShapeError

S = ff.sym
d = S.Variable('data')


def _train_step(sym, values=None, type_dict=None, fwd=None, **shapes):
    exe = sym.simple_bind(ff.cpu(), type_dict=type_dict, **shapes)
    rng = np.random.default_rng(0)
    for name, arr in exe.arg_dict.items():
        arr[:] = rng.uniform(-1, 1, arr.shape)
    for name, v in (values or {}).items():
        exe.arg_dict[name][:] = v
    exe.forward(is_train=True, **(fwd or {}))
    exe.backward([ff.nd.ones(o.shape, dtype=o.dtype) for o in exe.outputs])
    return exe


def _raises(cls, fn, *fragments):
    with pytest.raises(cls) as info:
        fn()
    msg = str(info.value)
    for f in fragments:
        assert f in msg, (f, msg)
    return msg


# ------------------------------------------------------------------ dtypes

_FLOAT_OPS = [
    ('FullyConnected', lambda: S.FullyConnected(d, num_hidden=2, name='fc1'), (2, 3)),
    ('Convolution', lambda: S.Convolution(d, kernel=(2, 2), num_filter=2, name='c1'),
     (1, 1, 3, 3)),
    ('Pooling', lambda: S.Pooling(d, kernel=(2, 2), name='p1'), (1, 1, 3, 3)),
    ('Activation', lambda: S.Activation(d, act_type='relu', name='a1'), (2, 3)),
    ('BatchNorm', lambda: S.BatchNorm(d, name='b1'), (2, 3)),
    ('softmax', lambda: S.softmax(d, name='s1'), (2, 3)),
    ('Dropout', lambda: S.Dropout(d, p=0.5, name='o1'), (2, 3)),
    ('SoftmaxOutput', lambda: S.SoftmaxOutput(d, name='so1'), (2, 3)),
    ('LinearRegressionOutput', lambda: S.LinearRegressionOutput(d, name='r1'), (2, 3)),
    ('MakeLoss', lambda: S.MakeLoss(d, name='m1'), (2, 3)),
]


@pytest.mark.parametrize('dtype', ['int32', 'bool'])
@pytest.mark.parametrize('op,make,shape', _FLOAT_OPS, ids=[c[0] for c in _FLOAT_OPS])
def test_int_and_bool_dtypes_are_refused(op, make, shape, dtype):
    sym = make()
    node = sym.name
    _raises(DTypeError, lambda: sym.simple_bind(ff.cpu(), type_dict={'data': dtype}, data=shape),
            'Error in operator %s' % node, op, '`data`', dtype)


def test_embedding_takes_int_indices_but_not_an_int_weight():
    sym = S.Embedding(d, input_dim=4, output_dim=2, name='e1')
    exe = _train_step(sym, values={'data': np.array([0, 3, 9])}, type_dict={'data': 'int32'},
                      data=(3,))
    w = exe.arg_dict['e1_weight'].asnumpy()
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), w[[0, 3, 3]])
    _raises(DTypeError, lambda: sym.simple_bind(ff.cpu(), type_dict={'e1_weight': 'int64'},
                                                data=(3,)),
            'Error in operator e1', 'Embedding', '`weight`', 'int64')


def test_blockgrad_passes_ints_through():
    exe = _train_step(S.BlockGrad(d, name='bg'), values={'data': np.arange(6).reshape(2, 3)},
                      type_dict={'data': 'int32'}, data=(2, 3))
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(exe.grad_dict['data'].asnumpy(), 0)


# ------------------------------------------------------------------ labels and indices

@pytest.mark.parametrize('label', [np.nan, 5.0, -2.0])
def test_softmax_output_bad_label(label):
    sym = S.SoftmaxOutput(d, name='sm')
    _raises(ParamError, lambda: _train_step(sym, values={'sm_label': np.array([label, 1.0])},
                                            data=(2, 3)),
            'sm', 'label', 'out of range', '[0, 3)', repr(float(label)).replace("'", ''))


def test_softmax_output_label_shape():
    _raises(ShapeError, lambda: _train_step(S.SoftmaxOutput(d, name='sm'), data=(2, 3),
                                            sm_label=(3,)),
            'Error in operator sm', '`label`', '[3]', '(2,)')


def test_embedding_nan_index():
    sym = S.Embedding(d, input_dim=4, output_dim=2, name='e1')
    _raises(ParamError, lambda: _train_step(sym, values={'data': np.array([0, np.nan, 1])},
                                            data=(3,)),
            'Error in operator e1', 'Embedding', '`data`', 'NaN', 'index 1', '(3,)')


def test_embedding_huge_float_indices_clip():
    sym = S.Embedding(d, input_dim=4, output_dim=2, name='e1')
    exe = _train_step(sym, values={'data': np.array([1e30, -1e30, np.inf])}, data=(3,))
    w = exe.arg_dict['e1_weight'].asnumpy()
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), w[[3, 0, 3]])


# ------------------------------------------------------------------ shapes

def test_forward_with_a_wrong_shape():
    exe = S.FullyConnected(d, num_hidden=2, name='fc1').simple_bind(ff.cpu(), data=(2, 3))
    _raises(ShapeError, lambda: exe.forward(data=ff.nd.ones((4, 3))), 'data', '(2, 3)', '(4, 3)')


@pytest.mark.parametrize('make', [
    lambda: S.FullyConnected(d, num_hidden=2, name='z'),
    lambda: S.Convolution(d, kernel=(2, 2), num_filter=2, name='z'),
    lambda: S.Deconvolution(d, kernel=(2, 2), num_filter=2, no_bias=False, name='z'),
], ids=['FullyConnected', 'Convolution', 'Deconvolution'])
@pytest.mark.parametrize('shape', [(0, 2, 3, 3), (2, 0, 3, 3)], ids=['batch0', 'channels0'])
def test_zero_size_dims_compute(make, shape):
    exe = _train_step(make(), data=shape)
    out = exe.outputs[0].asnumpy()
    bias = exe.arg_dict['z_bias'].asnumpy()
    if out.size:      # no input channels: the output is the bias alone
        np.testing.assert_allclose(out, np.broadcast_to(
            bias.reshape((1, -1) + (1,) * (out.ndim - 2)), out.shape), rtol=1e-6)
    np.testing.assert_allclose(exe.grad_dict['z_bias'].asnumpy(),
                               out.size // max(out.shape[1], 1) * np.ones_like(bias)
                               if out.size else 0)


def test_num_filter_not_divisible_by_num_group():
    _raises(ParamError, lambda: S.Convolution(d, kernel=(2, 2), num_filter=3, num_group=2),
            'Convolution', '`num_filter`', 'num_group', 'num_filter=3')


def test_channels_not_divisible_by_num_group():
    sym = S.Convolution(d, kernel=(2, 2), num_filter=4, num_group=2, name='c1')
    _raises(ShapeError, lambda: sym.simple_bind(ff.cpu(), data=(1, 3, 4, 4)),
            'Error in operator c1', 'num_group=2', '(1, 3, 4, 4)')


@pytest.mark.parametrize('op', ['Convolution', 'Pooling'])
def test_kernel_larger_than_padded_input(op):
    sym = (S.Convolution(d, kernel=(5, 5), num_filter=2, name='k1') if op == 'Convolution'
           else S.Pooling(d, kernel=(5, 5), name='k1'))
    _raises(ShapeError, lambda: sym.simple_bind(ff.cpu(), data=(1, 1, 4, 4)),
            'Error in operator k1', op, 'kernel', '(1, 1, 4, 4)')


def test_deconvolution_pad_leaves_no_output():
    sym = S.Deconvolution(d, kernel=(2, 2), pad=(10 ** 6, 10 ** 6), num_filter=2, name='dc')
    _raises(ShapeError, lambda: sym.simple_bind(ff.cpu(), data=(1, 1, 4, 4)),
            'Error in operator dc', 'Deconvolution', 'empty output', '(1, 1, 4, 4)')


@pytest.mark.parametrize('make,fragments', [
    (lambda: S.Convolution(d, kernel=(2, 2), stride=(-1, 1), num_filter=2),
     ('Convolution', '`stride`', 'stride=(-1, 1)')),
    (lambda: S.Convolution(d, kernel=(0, 2), num_filter=2), ('`kernel`', 'kernel=(0, 2)')),
    (lambda: S.FullyConnected(d, num_hidden=0), ('FullyConnected', '`num_hidden`', '=0')),
    (lambda: S.Pooling(d, kernel=(2, 2), stride=(0, 1)), ('Pooling', '`stride`')),
    (lambda: S.Dropout(d, p=1.0), ('Dropout', '`p`', 'p=1.0')),
    (lambda: S.LRN(d, nsize=2), ('LRN', '`nsize`', 'nsize=2')),
    (lambda: S.BatchNorm(d, eps=-1.0), ('BatchNorm', '`eps`', 'eps=-1.0')),
    (lambda: S.UpSampling(d, scale=0, sample_type='nearest'), ('UpSampling', '`scale`')),
    (lambda: S.Embedding(d, input_dim=0, output_dim=2), ('Embedding', '`input_dim`')),
    (lambda: S.LeakyReLU(d, act_type='rrelu', lower_bound=0.5, upper_bound=0.1),
     ('LeakyReLU', '`upper_bound`', '0.1')),
    # found by the full fuzz run: numpy's TypeError from inside the kernel, not an FFError
    (lambda: S.norm(d, out_dtype='object'), ('norm', '`out_dtype`', "'object'", 'float')),
    (lambda: S.Cast(d, dtype='complex64'), ('Cast', '`dtype`', "'complex64'")),
], ids=['conv-stride', 'conv-kernel', 'fc-hidden', 'pool-stride', 'dropout-p', 'lrn-nsize',
        'bn-eps', 'up-scale', 'emb-dim', 'rrelu-bounds', 'norm-object-dtype', 'cast-complex'])
def test_bad_params(make, fragments):
    _raises(ParamError, make, *fragments)


@pytest.mark.parametrize('gamma', [(5,), (3, 1)])
def test_prelu_wrong_gamma_shape(gamma):
    sym = S.LeakyReLU(d, act_type='prelu', name='pr')
    _raises(ShapeError, lambda: sym.simple_bind(ff.cpu(), data=(2, 3, 4), pr_gamma=gamma),
            'Error in operator pr', '`gamma`', str(list(gamma)), '(3,)')

