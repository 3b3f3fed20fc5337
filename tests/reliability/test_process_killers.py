"""Inputs that used to kill the process (segfault, LLVM abort, heap overwrite)."""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba.base import ShapeError


@pytest.mark.parametrize('op, expected', [('sum', 0.0), ('prod', 1.0), ('mean', np.nan)])
def test_reduce_over_zero_length_axis(op, expected):
    x = ff.nd.zeros((2, 0))
    y = getattr(ff.nd, op)(x, axis=1).asnumpy()
    np.testing.assert_array_equal(y, np.full((2,), expected, np.float32))
    # every axis, and a zero-size output
    assert getattr(ff.nd, op)(x).shape == (1,)
    assert getattr(ff.nd, op)(x, axis=0).shape == (0,)


@pytest.mark.parametrize('op', ['max', 'min'])
def test_max_min_over_zero_length_axis_refused(op):
    with pytest.raises(ShapeError, match='zero-length axis'):
        getattr(ff.nd, op)(ff.nd.zeros((2, 0)), axis=1)
    assert getattr(ff.nd, op)(ff.nd.zeros((0, 3)), axis=1).shape == (0,)


def test_reduce_zero_length_backward():
    x = ff.sym.Variable('x')
    ex = ff.sym.sum(x, axis=1).simple_bind(ff.cpu(), x=(2, 0))
    ex.forward(is_train=True)
    ex.backward(ff.nd.ones((2,)))
    assert ex.grad_dict['x'].shape == (2, 0)


@pytest.mark.parametrize('dtype', ['int32', 'int64', 'uint8', 'bool'])
def test_integer_power(dtype):
    a = np.array([2, 3, 0, 1]).astype(dtype)
    b = np.array([2, 1, 3, 0]).astype(dtype)
    want = (a.astype(np.float64) ** b.astype(np.float64)).astype(dtype)
    got = ff.nd.broadcast_power(ff.nd.array(a, dtype=dtype), ff.nd.array(b, dtype=dtype))
    np.testing.assert_array_equal(got.asnumpy(), want)
    got = ff.nd._power(ff.nd.array(a, dtype=dtype), ff.nd.array(b, dtype=dtype))
    np.testing.assert_array_equal(got.asnumpy(), want)
    got = ff.nd._rpower_scalar(ff.nd.array(a, dtype=dtype), scalar=2)
    np.testing.assert_array_equal(got.asnumpy(), (2.0 ** a.astype(np.float64)).astype(dtype))
    got = ff.nd._power_scalar(ff.nd.array(a, dtype=dtype), scalar=2)
    np.testing.assert_array_equal(got.asnumpy(), (a.astype(np.float64) ** 2).astype(dtype))


@pytest.mark.parametrize('name', ['sgd', 'adam', 'rmsprop', 'adagrad'])
def test_updater_reused_with_larger_weight(name):
    opt = ff.optimizer.create(name, momentum=0.9) if name == 'sgd' else \
        ff.optimizer.create(name)
    upd = ff.optimizer.get_updater(opt)
    upd(0, ff.nd.ones((2,)), ff.nd.ones((2,)))
    w = ff.nd.ones((2000,))
    with pytest.raises(ShapeError, match="parameter 0 was first updated"):
        upd(0, ff.nd.ones((2000,)), w)
    np.testing.assert_array_equal(w.asnumpy(), 1.0)
    with pytest.raises(ShapeError, match='gradient'):
        upd(1, ff.nd.ones((3,)), ff.nd.ones((2,)))
    upd(0, ff.nd.ones((2,)), ff.nd.ones((2,)))      # the right shape still works


def test_fused_update_checks_states():
    opt = ff.optimizer.create('adam')
    state = opt.create_state(0, ff.nd.ones((2,)))
    with pytest.raises(ShapeError, match='optimizer state 0 has shape'):
        opt.update(0, ff.nd.ones((50,)), ff.nd.ones((50,)), state)


@pytest.mark.parametrize('dtype', ['int32', 'bool'])
def test_optimizers_refuse_integer_weights(dtype):
    from ffnumba.base import DTypeError
    upd = ff.optimizer.get_updater(ff.optimizer.create('ftrl'))
    w = ff.nd.ones((3,), dtype=dtype)
    with pytest.raises(DTypeError, match='float dtype'):
        upd(0, ff.nd.ones((3,), dtype=dtype), w)
    np.testing.assert_array_equal(w.asnumpy(), np.ones(3, dtype))
