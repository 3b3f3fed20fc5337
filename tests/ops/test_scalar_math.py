"""The vectorizable float32 tanh stays within a few float32 ulp; float64 is exact."""
import numpy as np
from numba import njit

from ffnumba.ops import scalar_math


@njit
def _apply(x, out):
    for i in range(x.size):
        out[i] = scalar_math.tanh(x[i])


def test_tanh_float32_accuracy():
    x = np.concatenate([np.linspace(-12, 12, 200001), np.linspace(-1e-3, 1e-3, 2001),
                        [0.0, -0.0, 7.9, 8.0, 1e4, -1e4]]).astype(np.float32)
    out = np.empty_like(x)
    _apply(x, out)
    ref = np.tanh(x.astype(np.float64))
    rel = np.abs(out - ref) / np.maximum(np.abs(ref), np.finfo(np.float32).tiny)
    assert rel.max() < 5e-7, (rel.max(), x[np.argmax(rel)])
    assert np.all(np.abs(out) <= 1)
    assert np.isnan(_run(np.array([np.nan], np.float32)))[0]


def _run(x):
    out = np.empty_like(x)
    _apply(x, out)
    return out


def test_tanh_float64_is_exact():
    x = np.linspace(-20, 20, 10001)
    np.testing.assert_allclose(_run(x), np.tanh(x), rtol=5e-16, atol=0)   # 1-2 ulp: libm vs numpy SIMD
