"""Imperative operator functions ``ff.nd.<Op>`` (values checked against MXNet 1.9.1)."""
import numpy as np
import pytest

import ffnumba as ff
import ffnumba.ndarray as nd
from ffnumba.base import ParamError, ShapeError


A = np.array([[1., 2., 3.], [4., 5., 6.]], dtype=np.float32)


def test_reductions_and_linear_algebra():
    a = nd.array(A)
    np.testing.assert_allclose(nd.sum(a, axis=0).asnumpy(), [5, 7, 9])
    np.testing.assert_allclose(nd.mean(a, axis=1, keepdims=True).asnumpy(), [[2], [5]])
    np.testing.assert_allclose(nd.dot(a, a, transpose_b=True).asnumpy(), A @ A.T)
    np.testing.assert_allclose(nd.exp(a).asnumpy(), np.exp(A), rtol=1e-6)
    np.testing.assert_allclose(nd.softmax(a).asnumpy()[0], [0.09003057, 0.24472848, 0.66524094],
                               rtol=1e-6)
    assert nd.transpose(nd.zeros((2, 3, 4)), axes=(2, 0, 1)).shape == (4, 2, 3)


def test_params_by_position_like_mxnet():
    a = nd.array(A)
    np.testing.assert_allclose(nd.clip(a, 2, 4).asnumpy(), np.clip(A, 2, 4))
    with pytest.raises(ParamError, match='both by position and by keyword'):
        nd.clip(a, 2, a_min=1, a_max=3)


def test_inputs_by_keyword_multiple_outputs_and_out():
    a = nd.array(A)
    y = nd.FullyConnected(data=a, weight=nd.ones((4, 3)), no_bias=True, num_hidden=4)
    np.testing.assert_allclose(y.asnumpy(), np.tile(A.sum(1, keepdims=True), (1, 4)))
    parts = nd.split(a, num_outputs=3, axis=1)
    assert isinstance(parts, list) and [p.shape for p in parts] == [(2, 1)] * 3
    o = nd.zeros((2, 3))
    assert nd.sqrt(a, out=o) is o
    np.testing.assert_allclose(o.asnumpy(), np.sqrt(A), rtol=1e-6)
    with pytest.raises(ParamError, match='missing NDArray input'):
        nd.FullyConnected(a, num_hidden=3)
    with pytest.raises(AttributeError):
        nd.not_an_operator


def test_elementwise_helpers_with_arrays_and_scalars():
    a, b = nd.array(A), nd.array([[10.], [20.]])
    np.testing.assert_allclose(nd.maximum(a, 3).asnumpy(), np.maximum(A, 3))
    np.testing.assert_allclose(nd.minimum(2, a).asnumpy(), np.minimum(A, 2))
    np.testing.assert_allclose(nd.add(a, b).asnumpy(), A + [[10], [20]])
    np.testing.assert_allclose(nd.subtract(1, a).asnumpy(), 1 - A)
    np.testing.assert_allclose(nd.divide(6, a).asnumpy(), 6 / A, rtol=1e-6)
    np.testing.assert_allclose(nd.power(2, a).asnumpy(), 2 ** A)
    np.testing.assert_allclose(nd.greater(a, 3).asnumpy(), (A > 3).astype('f'))
    np.testing.assert_allclose(nd.lesser(3, a).asnumpy(), (3 < A).astype('f'))
    assert nd.maximum(2, 5) == 5


def test_imperative_calls_leave_auto_names_alone():
    from ffnumba.name import NameManager
    with NameManager():
        nd.sum(nd.ones((2,)))
        assert ff.sym.FullyConnected(ff.sym.var('x'), num_hidden=2).name == 'fullyconnected0'


def test_calls_run_kernels_without_building_an_executor(monkeypatch):
    import ffnumba.symbol.symbol as symmod
    import ffnumba.executor as exemod

    def boom(*a, **k):
        raise AssertionError('an imperative call built an executor')
    monkeypatch.setattr(symmod.Symbol, 'bind', boom)
    monkeypatch.setattr(exemod.Executor, '__init__', boom)
    a = nd.array(A)
    y = nd.FullyConnected(a, nd.ones((4, 3)), nd.zeros((4,)), num_hidden=4)
    np.testing.assert_allclose(y.asnumpy(), np.tile(A.sum(1, keepdims=True), (1, 4)))
    np.testing.assert_allclose(nd.sum(a, axis=1).asnumpy(), A.sum(1), rtol=1e-6)
    parts = nd.SliceChannel(a, num_outputs=3, axis=1)
    assert len(parts) == 3


def test_imperative_errors_name_the_operator():
    a = nd.array(A)
    with pytest.raises(ParamError, match='FullyConnected'):
        nd.FullyConnected(a, nd.ones((4, 3)), num_hidden='many', no_bias=True)
    with pytest.raises(ShapeError, match='weight'):
        nd.FullyConnected(a, nd.ones((4, 2)), num_hidden=4, no_bias=True)
    with pytest.raises(ShapeError, match='out'):
        nd.sqrt(a, out=nd.zeros((3, 3)))
    with pytest.raises(ParamError, match='unknown input'):
        nd.FullyConnected(a, wieght=nd.ones((4, 3)), num_hidden=4, no_bias=True)


def test_multiple_outputs_into_out_list():
    a = nd.array(A)
    outs = [nd.zeros((2, 1)) for _ in range(3)]
    assert nd.split(a, num_outputs=3, axis=1, out=outs) is outs
    np.testing.assert_allclose(outs[2].asnumpy(), A[:, 2:3])
