"""The NDArray device primitives (ndarray/_device.py): same values on the CPU and a GPU.

The GPU half runs under the CUDA simulator:
``NUMBA_ENABLE_CUDASIM=1 python -m pytest -m gpu tests/ndarray/test_device_primitives.py``.
"""
import numpy as np
import pytest

import ffnumba as ff
from ffnumba.ndarray._device import host_compute, same_memory

CTXS = [pytest.param('cpu', id='cpu'), pytest.param('gpu', id='gpu', marks=pytest.mark.gpu)]


def _ctx(kind):
    return ff.cpu() if kind == 'cpu' else ff.gpu(0)


def _nd(values, kind, dtype='float32'):
    return ff.nd.array(np.asarray(values), ctx=_ctx(kind), dtype=dtype)


@pytest.mark.parametrize('kind', CTXS)
def test_copy_from_ndarray_host_broadcast_and_cast(kind):
    a = _nd(np.zeros((2, 3)), kind)
    a._copy_from(_nd(np.arange(6).reshape(2, 3), kind, 'float64'))      # cast
    np.testing.assert_array_equal(a.asnumpy(), np.arange(6).reshape(2, 3))
    a._copy_from(np.array([1.0, 2.0, 3.0]))                               # host, broadcast
    np.testing.assert_array_equal(a.asnumpy(), [[1, 2, 3], [1, 2, 3]])
    a._copy_from(_nd(np.full((2, 3), 7.0), kind))                         # same device
    np.testing.assert_array_equal(a.asnumpy(), np.full((2, 3), 7.0))
    assert a._copy_from(a) is a
    assert a.dtype is np.float32 and a.context == _ctx(kind)


@pytest.mark.parametrize('kind', CTXS)
def test_add_from_and_fill(kind):
    a = _nd([[1.0, 2.0], [3.0, 4.0]], kind)
    a._add_from(_nd([[1.0, 1.0], [1.0, 1.0]], kind))
    np.testing.assert_array_equal(a.asnumpy(), [[2, 3], [4, 5]])
    a._add_from(np.array([1.0, 2.0]), sign=-1)                            # host, broadcast
    np.testing.assert_array_equal(a.asnumpy(), [[1, 1], [3, 3]])
    a._fill(0.5)
    np.testing.assert_array_equal(a.asnumpy(), np.full((2, 2), 0.5))


@pytest.mark.parametrize('kind', CTXS)
def test_host_slice_and_host(kind):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    a = _nd(x, kind)
    np.testing.assert_array_equal(a._host(), x)
    s0 = a._host_slice(0, slice(1, 3))
    s1 = a._host_slice(1, slice(2, 5))
    np.testing.assert_array_equal(s0.asnumpy(), x[1:3])
    np.testing.assert_array_equal(s1.asnumpy(), x[:, 2:5])
    assert s0.context.device_type == 'cpu' and s1.handle.flags.c_contiguous


@pytest.mark.parametrize('kind', CTXS)
def test_from_host_values_on_the_context(kind):
    h = np.arange(6, dtype=np.float64).reshape(2, 3)
    a = ff.nd.NDArray._from_host(h, _ctx(kind), np.float32)
    assert a.context == _ctx(kind) and a.dtype is np.float32
    np.testing.assert_array_equal(a.asnumpy(), h)


def test_cpu_primitives_share_memory_and_do_not_copy():
    a = ff.nd.array(np.arange(12).reshape(3, 4))
    assert a._host() is a.handle                                   # read-back: no copy
    assert np.shares_memory(a._host_slice(0, slice(0, 2)).handle, a.handle)
    view = a._prefix_view((2, 3))
    assert np.shares_memory(view.handle, a.handle) and view.shape == (2, 3)
    assert a._prefix_view((5, 5)) is None                          # too big: no view
    strided = ff.nd.NDArray(np.arange(12.0).reshape(3, 4)[:, ::2])
    assert strided._prefix_view((2,)) is None                      # numpy would copy: no view
    h = np.ones((2, 2), np.float32)
    assert ff.nd.NDArray._from_host(h, ff.cpu()).handle is h       # right dtype: wrapped
    before = a.handle
    a._copy_from(ff.nd.ones((3, 4)))
    a._add_from(ff.nd.ones((3, 4)))
    assert a.handle is before and a._shares_memory(ff.nd.NDArray(before))


@pytest.mark.gpu
def test_gpu_arrays_do_not_share_views():
    a = ff.nd.zeros((3, 4), ctx=ff.gpu(0))
    assert a._prefix_view((2, 3)) is None
    assert a._is_contiguous()
    assert a._shares_memory(a) and not a._shares_memory(ff.nd.zeros((3, 4), ctx=ff.gpu(0)))


def test_which_contexts_share_memory():
    assert same_memory(ff.cpu(0), ff.cpu(3)) and same_memory(ff.cpu(), ff.cpu_pinned())
    assert same_memory(ff.gpu(1), ff.gpu(1))
    assert not same_memory(ff.cpu(), ff.gpu(0)) and not same_memory(ff.gpu(0), ff.gpu(1))
    assert host_compute(ff.cpu()) and not host_compute(ff.gpu(0))
    a = ff.nd.zeros((2,))
    assert a._usable_on(ff.cpu(2)) and not a._usable_on(ff.gpu(0))
    assert a._is_contiguous()


@pytest.mark.parametrize('kind', CTXS)
@pytest.mark.parametrize('shape', [(4, 4, 1, 1), (1,), (1, 1), (3, 1, 2), (1, 5), (0, 3)])
def test_copy_and_assign_with_unit_axes(kind, shape):
    # a 1x1 convolution's weight (F, C, 1, 1): the CUDA simulator once refused this copy
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    a = ff.nd.zeros(shape, ctx=_ctx(kind))
    a[:] = ff.nd.array(x)
    np.testing.assert_array_equal(a.asnumpy(), x)
    a._copy_from(x + 1)
    np.testing.assert_array_equal(a.asnumpy(), x + 1)
    a[:] = 2.5
    np.testing.assert_array_equal(a.asnumpy(), np.full(shape, 2.5, np.float32))
