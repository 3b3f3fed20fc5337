"""``ffnumba.jit.gpu_body``: one @njit body with array arguments, called by CPU and GPU kernels."""
import numpy as np
import pytest
from numba import njit

from ffnumba import jit


@njit
def _row_scale(x, y, r, s):
    """``y[r] = s * x[r] / sum(x[r])`` (writes through an array argument)."""
    t = 0.0
    for j in range(x.shape[1]):
        t += x[r, j]
    for j in range(x.shape[1]):
        y[r, j] = s * x[r, j] / t


@njit
def _cpu(x, y, s):
    for r in range(x.shape[0]):
        _row_scale(x, y, r, s)


cuda = None


def _gpu_kernel():
    jit.import_cuda(globals())
    body = jit.gpu_body(_row_scale)

    @cuda.jit
    def k(x, y, s):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for r in range(start, x.shape[0], stride):
            body(x, y, r, s)
    return k


def test_cpu_kernel_calls_the_body():
    x = np.arange(1.0, 7.0).reshape(2, 3)
    y = np.empty_like(x)
    _cpu(x, y, 2.0)
    np.testing.assert_allclose(y, 2.0 * x / x.sum(1, keepdims=True))


def test_outside_the_simulator_the_dispatcher_itself_is_returned(monkeypatch):
    from numba.core import config
    monkeypatch.setattr(config, 'ENABLE_CUDASIM', 0)
    assert jit.gpu_body(_row_scale) is _row_scale


@pytest.mark.gpu
def test_gpu_kernel_calls_the_same_body():
    from numba import cuda as _cuda
    x = np.random.default_rng(0).uniform(1, 2, (5, 4))
    y = np.empty_like(x)
    _cpu(x, y, 3.0)
    dy = _cuda.to_device(np.zeros_like(x))
    jit.launch_1d(_gpu_kernel(), x.shape[0], _cuda.to_device(x), dy, 3.0)
    np.testing.assert_allclose(dy.copy_to_host(), y, rtol=1e-12)
