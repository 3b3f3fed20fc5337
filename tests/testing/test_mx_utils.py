"""``ff.testing`` as ``mx.test_utils``: MXNet's names, defaults and behaviour."""
import os

import numpy as np
import pytest

import ffnumba as mx
from ffnumba import testing as tu
from ffnumba.base import FFError


def test_same_name_as_mxnet():
    assert mx.test_utils is mx.testing
    for name in ('assert_almost_equal', 'check_consistency', 'check_numeric_gradient', 'same',
                 'assert_allclose', 'almost_equal', 'rand_shape_nd', 'rand_ndarray',
                 'compare_optimizer', 'assert_exception', 'environment', 'default_context',
                 'set_default_context', 'np_reduce', 'random_arrays', 'verify_generator'):
        assert callable(getattr(tu, name)), name
    ns = {}
    exec('from ffnumba.test_utils import *', ns)   # MXNet's star import hands out np, sys...
    assert ns['np'] is np and 'sys' in ns and 'assert_almost_equal' in ns


def test_assert_almost_equal_dtype_tolerances_and_broadcasting():
    a32 = np.array([1.0, 2.0], dtype=np.float32)
    tu.assert_almost_equal(a32, a32 + 5e-4)               # float32 atol 1e-3
    with pytest.raises(AssertionError, match='rtol'):
        tu.assert_almost_equal(a32.astype(np.float64), a32.astype(np.float64) + 5e-4)
    tu.assert_almost_equal(np.float16(1.0), np.array([1.05], dtype=np.float16))
    tu.assert_almost_equal(mx.nd.ones((2, 3)), np.ones((1, 3)))        # broadcast
    with pytest.raises(AssertionError, match='shape'):
        tu.assert_almost_equal(np.ones((2, 3)), np.ones((1, 3)), use_broadcast=False)
    with pytest.raises(AssertionError, match='broadcast'):
        tu.assert_almost_equal(np.ones((2, 3)), np.ones((4,)))
    with pytest.raises(AssertionError, match=r'index|Location'):
        tu.assert_almost_equal(np.array([1, 2, 3]), np.array([1, 2, 4]))  # ints exact
    tu.assert_almost_equal([np.nan, 1.0], [np.nan, 1.0], equal_nan=True)
    tu.assert_almost_equal(a32, a32 * 1.01, rtol={np.dtype(np.float32): 0.02})
    tu.assert_allclose(np.array([1.0]), np.array([1.0 + 1e-8]))
    assert tu.almost_equal(np.ones(2), np.ones(2) + 1e-4) is False
    assert tu.almost_equal(np.ones(2), np.ones(2) + 1e-4, rtol=1e-3) is True


def test_same_random_helpers_and_reduce():
    assert tu.same(mx.nd.array([1, 2]), np.array([1.0, 2.0]))
    assert not tu.same(np.array([1, 2]), np.array([1, 3]))
    np.random.seed(0)
    s = tu.rand_shape_nd(4, dim=3)
    assert len(s) == 4 and all(1 <= d <= 3 for d in s)
    assert len(tu.rand_shape_2d()) == 2 and len(tu.rand_shape_3d(2, 2, 2)) == 3
    x = tu.rand_ndarray((2, 3), dtype='float64')
    assert x.shape == (2, 3) and x.dtype is np.float64
    with pytest.raises(FFError, match='stype'):
        tu.rand_ndarray((2, 3), stype='csr')
    d = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_allclose(tu.np_reduce(d, (0, 2), True, np.sum),
                               d.sum(axis=(0, 2), keepdims=True))
    assert sorted(tu.random_sample([1, 2, 3, 4], 4)) == [1, 2, 3, 4]
    assert tu.random_arrays((2, 2), (3,))[1].shape == (3,)


def test_assert_exception_retry_environment():
    tu.assert_exception(lambda: 1 / 0, ZeroDivisionError)
    with pytest.raises(AssertionError):
        tu.assert_exception(lambda: 1, ZeroDivisionError)
    calls = []

    @tu.retry(3)
    def flaky():
        calls.append(1)
        assert len(calls) == 2
    flaky()
    assert len(calls) == 2
    os.environ.pop('FF_TU_X', None)
    with tu.environment('FF_TU_X', '7'):
        assert os.environ['FF_TU_X'] == '7'
        with tu.environment({'FF_TU_X': None}):
            assert 'FF_TU_X' not in os.environ
        assert os.environ['FF_TU_X'] == '7'
    assert 'FF_TU_X' not in os.environ


def test_default_context_follows_set_default_context():
    assert tu.default_context() == mx.cpu(0)
    try:
        tu.set_default_context(mx.cpu(1))
        assert tu.default_context() == mx.cpu(1)
        assert mx.nd.zeros((1,)).context == mx.cpu(1)
    finally:
        tu.set_default_context(mx.cpu(0))


def test_check_numeric_gradient_dtypes():
    x = mx.sym.Variable('x')
    s = mx.sym.tanh(x) * x
    loc = {'x': np.random.uniform(-1, 1, (3, 4))}
    tu.check_numeric_gradient(s, loc)                     # float64
    tu.check_numeric_gradient(s, loc, dtype=np.float32)
    tu.check_numeric_gradient(s, [loc['x']], use_forward_train=False, dtype='float32')
    with pytest.raises(FFError, match='dtype'):
        tu.check_numeric_gradient(s, loc, dtype=np.int32)
    bad = mx.sym.BlockGrad(x) * x                         # analytic gradient is wrong here
    with pytest.raises(AssertionError, match='gradient check failed'):
        tu.check_numeric_gradient(bad, loc)


def test_check_consistency_mxnet_form():
    s = mx.sym.FullyConnected(mx.sym.Variable('data'), num_hidden=3, name='fc')
    ctx_list = [{'ctx': mx.cpu(0), 'data': (2, 4), 'type_dict': {'data': np.float64}},
                {'ctx': mx.cpu(0), 'data': (2, 4), 'type_dict': {'data': np.float32}}]
    gt = tu.check_consistency(s, ctx_list)
    assert gt['output 0'].shape == (2, 3) and gt['grad of fc_weight'].shape == (3, 4)
    with pytest.raises(AssertionError):
        tu.check_consistency(s, ctx_list, ground_truth={k: v + 1 for k, v in gt.items()})


def test_compare_optimizer():
    tu.compare_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9),
                         mx.optimizer.SGD(learning_rate=0.1, momentum=0.9), (3, 4), 'float32')
    with pytest.raises(AssertionError):
        tu.compare_optimizer(mx.optimizer.SGD(learning_rate=0.1),
                             mx.optimizer.SGD(learning_rate=0.2), (3, 4), 'float32')


def test_verify_generator_and_moment_checks():
    import scipy.stats as ss
    buckets, probs = tu.gen_buckets_probs_with_ppf(lambda q: ss.norm.ppf(q, 0, 1), 5)
    mx.random.seed(1)
    tu.verify_generator(lambda n: mx.random.normal(0, 1, shape=n).asnumpy(), buckets, probs,
                        nsamples=20000, nrepeat=3)
    with pytest.raises(AssertionError, match='Chi-square'):
        tu.verify_generator(lambda n: mx.random.normal(1, 1, shape=n).asnumpy(), buckets,
                            probs, nsamples=20000, nrepeat=3)
    assert tu.mean_check(lambda n: np.random.normal(3, 1, n), 3, 1, nsamples=20000)
    assert tu.var_check(lambda n: np.random.normal(3, 2, n), 2, nsamples=20000)


def test_contrib_svrg_import_path():
    from ffnumba.contrib.svrg_optimization.svrg_module import SVRGModule
    assert SVRGModule is mx.mod.SVRGModule


def test_check_symbolic_backward_ignores_extra_head_gradients():
    x = mx.sym.Variable('x')
    s = x * 2
    loc = {'x': np.ones((2, 2))}
    got = tu.check_symbolic_backward(s, loc, [np.ones((2, 2)), np.ones(7)],
                                     {'x': 2 * np.ones((2, 2))})
    np.testing.assert_allclose(got['x'], 2)
    tu.check_symbolic_backward(s, loc, {s.list_outputs()[0]: np.ones((2, 2))},
                               [2 * np.ones((2, 2))])
    tu.check_symbolic_backward(s, loc, [np.ones((2, 2))], [np.zeros((2, 2))], grad_req='null')
