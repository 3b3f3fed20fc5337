"""float16 on the CPU: template ops and the GEMM ops compute in float32 and cast at the edges.

Each case binds the same symbol twice (``type_dict`` float16 and float32) on the
same float16-representable inputs, runs forward and backward, and compares the
float16 outputs and gradients with the float32 ones within float16 tolerance.
"""
import numpy as np
import pytest

import ffnumba as ff

RTOL, ATOL = 2e-2, 2e-2


def _run(sym, dtype, shapes, values, head):
    exe = sym.simple_bind(ff.cpu(), type_dict={n: dtype for n in shapes}, **shapes)
    for name, arr in exe.arg_dict.items():
        arr[:] = values[name]
    exe.forward(is_train=True)
    exe.backward([ff.nd.array(head, dtype=dtype)])
    grads = {n: g.asnumpy() for n, g in exe.grad_dict.items()}
    return exe.outputs[0].asnumpy(), grads


def _compare(sym, shapes, positive=False):
    rng = np.random.default_rng(0)
    exe = sym.simple_bind(ff.cpu(), **shapes)      # float32, for the inferred shapes
    values = {}
    for name, arr in exe.arg_dict.items():
        v = rng.uniform(0.5 if positive else -1.0, 1.0, arr.shape)
        values[name] = v.astype(np.float16)
    head = rng.uniform(-1, 1, exe.outputs[0].shape).astype(np.float16)
    out16, g16 = _run(sym, 'float16', shapes, values, head)
    out32, g32 = _run(sym, 'float32', shapes, values, head)
    assert out16.dtype == np.float16
    np.testing.assert_allclose(out16.astype(np.float32), out32, rtol=RTOL, atol=ATOL)
    for name in g32:
        assert g16[name].dtype == np.float16, name
        np.testing.assert_allclose(g16[name].astype(np.float32), g32[name],
                                   rtol=RTOL, atol=ATOL, err_msg=name)


d = ff.sym.Variable('data')


@pytest.mark.parametrize('act_type', ['tanh', 'softsign'])   # grad from output / from input
def test_make_unary_float16(act_type):
    _compare(ff.sym.Activation(d, act_type=act_type, name='a'), {'data': (3, 4)})


def test_make_unary_scalar_float16():
    _compare(ff.sym._mul_scalar(d, scalar=1.5, name='m'), {'data': (2, 5)})


def test_make_binary_float16():
    lhs, rhs = ff.sym.Variable('lhs'), ff.sym.Variable('rhs')
    _compare(ff.sym.elemwise_mul(lhs, rhs, name='m'), {'lhs': (2, 3), 'rhs': (2, 3)})


@pytest.mark.parametrize('flatten', [True, False])
def test_fully_connected_float16(flatten):
    sym = ff.sym.FullyConnected(d, num_hidden=3, flatten=flatten, name='fc')
    _compare(sym, {'data': (2, 2, 4), 'fc_weight': (3, 8 if flatten else 4)})


def test_convolution_float16():
    sym = ff.sym.Convolution(d, kernel=(2, 2), num_filter=4, num_group=2, pad=(1, 0), name='c')
    _compare(sym, {'data': (2, 2, 4, 4)})


def test_deconvolution_float16():
    sym = ff.sym.Deconvolution(d, kernel=(2, 2), num_filter=2, stride=(2, 2), no_bias=False,
                               name='c')
    _compare(sym, {'data': (1, 2, 3, 3)})


def test_regression_output_float16():
    sym = ff.sym.LinearRegressionOutput(d, name='r')
    shapes = {'data': (3, 2), 'r_label': (3, 2)}
    _compare(sym, shapes)


def test_grad_req_add_float16_accumulates():
    """'add' sums in float32 and rounds once into the float16 gradient."""
    sym = ff.sym.FullyConnected(d, num_hidden=2, name='fc')
    exe = sym.simple_bind(ff.cpu(), grad_req='add', type_dict={'data': 'float16'}, data=(2, 3))
    for arr in exe.arg_arrays:
        arr[:] = 0.5
    for g in exe.grad_arrays:
        g[:] = 1.0
    exe.forward(is_train=True)
    exe.backward([ff.nd.ones((2, 2), dtype='float16')])
    # d weight = og^T x = 2 * 0.5 = 1 per entry, plus the 1 already there
    np.testing.assert_array_equal(exe.grad_dict['fc_weight'].asnumpy(), np.full((2, 3), 2.0))
    np.testing.assert_array_equal(exe.grad_dict['fc_bias'].asnumpy(), np.full(2, 3.0))
