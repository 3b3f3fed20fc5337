"""Shared pytest setup: hypothesis profiles and deterministic seeding."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# No compile-ahead child per test process (ffnumba._compile_ahead): the suite binds
# hundreds of executors; tests/test_compile_ahead.py turns it on where it tests it.
os.environ.setdefault('FFNUMBA_COMPILE_AHEAD', '0')
# Where the optional MKL is installed (the `mkl` extra), bit-for-bit comparisons of two
# paths need MKL's run-to-run reproducible mode: by default it may change its thread
# count per call on a loaded machine, and with it a float64 GEMM's summation order.
os.environ.setdefault('MKL_DYNAMIC', 'FALSE')
os.environ.setdefault('MKL_CBWR', 'AUTO,STRICT')

settings.register_profile(
    'ci', max_examples=25, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile(
    'dev', max_examples=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get('HYPOTHESIS_PROFILE', 'ci'))

SIMULATOR_TEST = 'test_gpu_kernels_under_cuda_simulator'


def pytest_collection_finish(session):
    """Start the CUDA-simulator child of ``tests/test_cuda_simulator.py`` right after
    collection when its test is selected, so it runs beside the rest of the suite."""
    if os.environ.get('NUMBA_ENABLE_CUDASIM') == '1':
        return
    for item in session.items:
        if item.name == SIMULATOR_TEST:
            item.module.start()
            return


def pytest_sessionfinish(session):
    for item in session.items:
        if item.name == SIMULATOR_TEST:
            item.module.stop()
            return


if os.environ.get('NUMBA_ENABLE_CUDASIM') == '1':
    # Tiny blocks, so simulated kernels cross block edges even on tiny arrays.
    from ffnumba import jit
    jit.GPU_THREADS = 4


@pytest.fixture(autouse=True)
def _seed():
    import ffnumba as ff
    ff.random.seed(0)
    np.random.seed(0)
    yield


@pytest.fixture(autouse=True)
def _split_small_convolutions(monkeypatch):
    """The tests' layers are small: they split over threads as large ones do, so that the
    split kernels are what they test. The one-thread rule for small layers has its own
    tests (``tests/ops/nn/test_conv_threads.py``), which set its threshold back."""
    from ffnumba.ops.nn import convolution
    monkeypatch.setattr(convolution, 'SPLIT_MIN_FLOPS', 0)


@pytest.fixture
def threads(monkeypatch):
    """``threads(n)`` sets numba's thread count (restored afterwards), with no
    multi-context BLAS cap left by an earlier test (it is process-wide)."""
    import numba
    from ffnumba import blas_threads
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip('numba was started with one thread')
    monkeypatch.setitem(blas_threads._BLAS_LIMITED, 'shared', False)
    before = numba.get_num_threads()
    yield numba.set_num_threads
    numba.set_num_threads(before)
