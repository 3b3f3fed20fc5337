"""The tiled shared-memory GPU GEMM (``ffnumba.ops.gemm_cuda``) against numpy.

Marked ``gpu``: runs under numba's CUDA simulator (tests/test_cuda_simulator.py)
or on a real GPU. Shapes are small because the simulator runs every thread in
Python; they still cover 1, tile - 1, tile, tile + 1 and non-square sizes.
"""
import itertools

import numpy as np
import pytest

from ffnumba.base import ShapeError
from ffnumba.ops import gemm_cuda

pytestmark = pytest.mark.gpu


def _ref(a, b, c, alpha, beta, ta, tb):
    a3 = a if a.ndim == 3 else a[None]
    b3 = b if b.ndim == 3 else b[None]
    c3 = c if c.ndim == 3 else c[None]
    a3 = a3.transpose(0, 2, 1) if ta else a3
    b3 = b3.transpose(0, 2, 1) if tb else b3
    Bc = c3.shape[0]
    out = np.zeros(c3.shape, np.float64)
    for zb in range(b3.shape[0]):
        out[zb % Bc] += a3[zb % a3.shape[0]].astype(np.float64) @ b3[zb].astype(np.float64)
    return (alpha * out + beta * c3.astype(np.float64)).reshape(c.shape)


def _run(shape_a, shape_b, shape_c, dtype, alpha, beta, ta, tb, tile, seed=0):
    from numba import cuda
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape_a).astype(dtype)
    b = rng.standard_normal(shape_b).astype(dtype)
    c = rng.standard_normal(shape_c).astype(dtype)
    dc = cuda.to_device(c)
    gemm_cuda.gemm(cuda.to_device(a), cuda.to_device(b), dc, alpha, beta, ta, tb, tile=tile)
    got = dc.copy_to_host()
    want = _ref(a, b, c, alpha, beta, ta, tb)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, want, **tol)
    return got


def _shapes(M, N, K, ta, tb):
    return (K, M) if ta else (M, K), (N, K) if tb else (K, N), (M, N)


@pytest.mark.parametrize('ta,tb', list(itertools.product([False, True], repeat=2)))
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_small_tile_edges_every_transpose(ta, tb, dtype):
    """Tile 4: sizes 1, 3, 4, 5 and non-square, every transpose combination."""
    for M, N, K in [(1, 1, 1), (3, 5, 4), (5, 3, 9), (4, 4, 4), (1, 7, 3), (6, 1, 5)]:
        sa, sb, sc = _shapes(M, N, K, ta, tb)
        _run(sa, sb, sc, dtype, 1.0, 0.0, ta, tb, tile=4)


@pytest.mark.parametrize('ta,tb', list(itertools.product([False, True], repeat=2)))
def test_production_tile_edges(ta, tb):
    """The default tile (16): tile - 1, tile + 1 and 1 in one non-square product."""
    T = gemm_cuda.TILE
    sa, sb, sc = _shapes(T + 1, T - 1, T + 1, ta, tb)
    _run(sa, sb, sc, np.float32, 1.0, 0.0, ta, tb, tile=T)
    sa, sb, sc = _shapes(1, T + 1, 2, ta, tb)
    _run(sa, sb, sc, np.float64, 0.5, 1.0, ta, tb, tile=T)


@pytest.mark.parametrize('alpha,beta', [(1.0, 1.0), (2.0, -0.5), (0.0, 1.0), (-1.0, 0.0)])
def test_alpha_beta(alpha, beta):
    _run((5, 6), (3, 6), (5, 3), np.float64, alpha, beta, False, True, tile=4)
    _run((6, 5), (6, 3), (5, 3), np.float32, alpha, beta, True, False, tile=4)


def test_beta_zero_never_reads_c():
    from numba import cuda
    a = np.ones((3, 2), np.float32)
    b = np.ones((2, 5), np.float32)
    dc = cuda.to_device(np.full((3, 5), np.nan, np.float32))
    gemm_cuda.gemm(cuda.to_device(a), cuda.to_device(b), dc, tile=4)
    np.testing.assert_array_equal(dc.copy_to_host(), np.full((3, 5), 2.0, np.float32))


@pytest.mark.parametrize('tb', [False, True])
def test_batched_broadcast_and_batch_sum(tb):
    """Shared A across the batch (conv forward) and a sum over batch entries (conv dW)."""
    G, n, F, CK, P = 2, 3, 3, 5, 6
    # C[z] = A[z % G] @ B[z]
    _run((G, F, CK), (n * G, P, CK) if tb else (n * G, CK, P), (n * G, F, P), np.float64,
         1.0, 1.0, False, tb, tile=4)
    # C[g] = sum_r A[r*G + g] @ B[r*G + g]^T
    _run((n * G, F, P), (n * G, CK, P), (G, F, CK), np.float32, 1.0, 0.0, False, True, tile=4)


def test_float32_accumulates_in_float32_and_float64_in_float64():
    """1 + 2^-30 summed in float32 rounds away; float64 keeps it."""
    a = np.array([[1.0, 2.0 ** -30, 2.0 ** -30]])
    b = np.ones((3, 1))
    for dtype, want in ((np.float64, 1.0 + 2.0 ** -29), (np.float32, 1.0)):
        from numba import cuda
        dc = cuda.to_device(np.zeros((1, 1), dtype))
        gemm_cuda.gemm(cuda.to_device(a.astype(dtype)), cuda.to_device(b.astype(dtype)), dc,
                       tile=4)
        assert dc.copy_to_host()[0, 0] == dtype(want)


def test_shapes_that_do_not_chain_raise():
    from numba import cuda
    a, b, c = (cuda.to_device(np.zeros(s)) for s in ((2, 3), (4, 5), (2, 5)))
    with pytest.raises(ShapeError, match='do not chain'):
        gemm_cuda.gemm(a, b, c)


def test_empty_operands():
    """No rows, an empty batch, or an empty sum (K = 0: C = beta * C)."""
    _run((0, 3), (3, 4), (0, 4), np.float64, 1.0, 0.0, False, False, tile=4)
    _run((0, 2, 3), (0, 3, 4), (0, 2, 4), np.float64, 1.0, 0.0, False, False, tile=4)
    got = _run((2, 0), (0, 3), (2, 3), np.float32, 1.0, 0.0, False, False, tile=4)
    assert not got.any()
    _run((2, 0), (0, 3), (2, 3), np.float64, 1.0, 1.0, False, False, tile=4)
