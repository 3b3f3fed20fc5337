"""LRN: table tests against a numpy reference, nsize checks, MXNet 1.9.1 goldens."""
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ffnumba.symbol as sym
from ffnumba import ndarray as nd
from ffnumba.base import ParamError, ShapeError
from ffnumba.ops.registry import get_op
from ffnumba.testing import OpCase, assert_almost_equal, bind_numpy

from golden import load_golden


def lrn_ref(x, nsize, alpha=1e-4, beta=0.75, knorm=2.0):
    """Plain numpy LRN over axis 1 with the window clipped at the edges."""
    c = x.shape[1]
    h = nsize // 2
    sq = x ** 2
    s = np.empty_like(x)
    for k in range(c):
        s[:, k] = sq[:, max(0, k - h):min(c, k + h + 1)].sum(axis=1)
    return x / (knorm + alpha / nsize * s) ** beta


class TestLRN(OpCase):
    op = 'LRN'
    params = [dict(nsize=3), dict(nsize=3, alpha=0.5, beta=0.75, knorm=1.5),
              dict(nsize=5, alpha=2.0, beta=0.6, knorm=1.0), dict(nsize=1, alpha=1.0)]
    shapes = [dict(data=(2, 5, 2, 2)), dict(data=(1, 3, 4)), dict(data=(2, 4))]

    def inputs(self, rng, p, shapes):
        return {'data': rng.uniform(-2, 2, shapes['data'])}

    def reference(self, p, data):
        return [lrn_ref(data, **p)]


def test_even_nsize_is_refused():
    with pytest.raises(ParamError) as e:
        get_op('LRN').parse_params(dict(nsize=4))
    assert str(e.value) == 'LRN: `nsize` must be an odd int >= 1. Received: nsize=4'
    with pytest.raises(ParamError, match='LRN: required parameter `nsize` is missing'):
        get_op('LRN').parse_params({})
    with pytest.raises(ParamError, match='LRN: `nsize` must be an int >= 1'):
        get_op('LRN').parse_params(dict(nsize=0))


@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4),
       nsize=st.sampled_from([1, 3, 5]))
def test_infer_shape_property(shape, nsize):
    s = sym.LRN(sym.Variable('data'), nsize=nsize, name='lrn')
    if len(shape) < 2:
        with pytest.raises(ShapeError, match='Error in operator lrn'):
            s.infer_shape(data=tuple(shape))
    else:
        args, outs, aux = s.infer_shape(data=tuple(shape))
        assert args == [tuple(shape)] and outs == [tuple(shape)] and aux == []


def test_hidden_output():
    op = get_op('LRN')
    p = op.parse_params(dict(nsize=3))
    assert op.list_outputs(p) == ['output'] and op.hidden_outputs(p) == 1


@pytest.mark.parametrize('case', sorted(load_golden('lrn')))
def test_golden_mxnet(case):
    c = load_golden('lrn')[case]
    p = json.loads(str(c['params']))
    is_train = p.pop('is_train')
    s = sym.LRN(sym.Variable('data'), name='op', **p)
    exe = bind_numpy(s, {'data': c['arg_data']})
    exe.forward(is_train=is_train)
    assert_almost_equal(exe.outputs[0].asnumpy(), c['out0'], 1e-5, 1e-6)
    exe.backward([nd.array(c['head0'])])
    assert_almost_equal(exe.grad_dict['data'].asnumpy(), c['grad_data'], 1e-4, 1e-5)


def lrn_grad_ref(x, g, nsize, alpha=1e-4, beta=0.75, knorm=2.0):
    """Gradient of :func:`lrn_ref` in float64, written from the forward: ``c`` is in the
    (clipped, symmetric) window of ``c'`` exactly when ``c'`` is in the window of ``c``."""
    c = x.shape[1]
    h = nsize // 2
    sq = x ** 2
    s = np.empty_like(x)
    for k in range(c):
        s[:, k] = knorm + alpha / nsize * sq[:, max(0, k - h):min(c, k + h + 1)].sum(axis=1)
    t = g * x * s ** (-beta - 1)
    win = np.empty_like(x)
    for k in range(c):
        win[:, k] = t[:, max(0, k - h):min(c, k + h + 1)].sum(axis=1)
    return g * s ** (-beta) - 2 * alpha * beta / nsize * x * win


@pytest.fixture(params=[1, 2], ids=['1thread', '2threads'])
def split_everything(request, monkeypatch):
    """Run LRN on 1 or 2 numba threads with the batch split even for tiny inputs."""
    import numba
    from ffnumba.ops.nn import lrn
    if request.param > numba.config.NUMBA_NUM_THREADS:
        pytest.skip('numba was started with fewer threads')
    monkeypatch.setattr(lrn, 'PAR_MIN_SIZE', 0)
    monkeypatch.setattr(lrn, 'PAR_MIN_SIZE_BWD', 0)
    before = numba.get_num_threads()
    numba.set_num_threads(request.param)
    yield request.param
    numba.set_num_threads(before)


# the fixture only sets the thread count and threshold: nothing to reset between examples
@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 5), c=st.integers(1, 11), rest=st.lists(st.integers(1, 5), max_size=2),
       nsize=st.sampled_from([1, 3, 5, 7]), beta=st.sampled_from([0.75, 0.6]),
       req=st.sampled_from(['write', 'add']), seed=st.integers(0, 2 ** 16))
def test_row_kernels_match_numpy(split_everything, n, c, rest, nsize, beta, req, seed):
    """Forward and backward of the row kernels (serial, and the batch split over two
    threads with batches that do not divide evenly) against numpy, with C below and
    above nsize (every channel's window clipped at one or both edges), for the sqrt
    path (beta=0.75) and the pow path, with grad_req write and add."""
    shape = (n, c) + tuple(rest)
    rng = np.random.default_rng(seed)
    p = dict(nsize=nsize, alpha=0.7, beta=beta, knorm=1.3)
    # channel magnitudes spanning 1e-3..10 so a wrong window edge changes the result
    x = rng.uniform(-1, 1, shape) * 10.0 ** rng.uniform(-3, 1, (1, c) + (1,) * len(rest))
    head = rng.uniform(-1, 1, shape)
    init = rng.uniform(-1, 1, shape)
    s = sym.LRN(sym.Variable('data'), name='lrn', **p)
    exe = bind_numpy(s, {'data': x}, grad_req=req, grads={'data': init.copy()})
    exe.forward(is_train=True)
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), lrn_ref(x, **p), rtol=1e-12, atol=0)
    exe.backward([nd.array(head, dtype='float64')])
    exp = lrn_grad_ref(x, head, **p) + (init if req == 'add' else 0)
    np.testing.assert_allclose(exe.grad_dict['data'].asnumpy(), exp, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize('dtype', ['float16', 'float32'])
def test_row_kernels_low_precision(split_everything, dtype):
    """float16 (computed in float32) and float32 forward/backward against float64 numpy."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 2, (3, 9, 4, 5)).astype(dtype)
    head = rng.uniform(-1, 1, x.shape).astype(dtype)
    p = dict(nsize=5, alpha=0.5, beta=0.75, knorm=1.0)
    exe = bind_numpy(sym.LRN(sym.Variable('data'), **p), {'data': x})
    exe.forward(is_train=True)
    y = exe.outputs[0].asnumpy()
    tol = 2e-3 if dtype == 'float16' else 1e-5
    assert y.dtype == np.dtype(dtype)
    xd, hd = x.astype(np.float64), head.astype(np.float64)
    np.testing.assert_allclose(y, lrn_ref(xd, **p), rtol=tol, atol=tol)
    exe.backward([nd.array(head, dtype=dtype)])
    np.testing.assert_allclose(exe.grad_dict['data'].asnumpy(), lrn_grad_ref(xd, hd, **p),
                               rtol=tol, atol=tol)
