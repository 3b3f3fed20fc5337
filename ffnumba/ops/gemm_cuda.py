"""A tiled shared-memory GEMM for the GPU, shared by FullyConnected and convolution.

Math
----
A strided-batched GEMM with broadcasting over the batch and an optional sum
over batch entries::

    C[z] = alpha * sum_{r < R} op(A[(r*Bc + z) % Ba]) @ op(B[r*Bc + z]) + beta * C[z]

for ``z < Bc``, where ``op(X)`` is ``X`` or ``X^T`` (the ``trans_a`` /
``trans_b`` flags), ``Ba``, ``Bb``, ``Bc`` are the batch sizes of ``A``, ``B``,
``C`` and ``R = Bb / Bc``. The cases the ops need:

==========================  =======================  ========================  ==============
use                         A                        B                         C
==========================  =======================  ========================  ==============
FullyConnected forward      x ``(1, M, K)``          W ``(1, H, K)``, trans    ``(1, M, H)``
FullyConnected d data       dy ``(1, M, H)``         W ``(1, H, K)``           ``(1, M, K)``
FullyConnected d weight     dy ``(1, M, H)``, trans  x ``(1, M, K)``           ``(1, H, K)``
conv forward (per group)    W ``(G, F, CK)``         col ``(nG, CK, P)``       ``(nG, F, P)``
conv d col                  W ``(G, F, CK)``, trans  dy ``(nG, F, P)``         ``(nG, CK, P)``
conv d weight (sum over n)  dy ``(nG, F, P)``        col ``(nG, CK, P)``, trans ``(G, F, CK)``
==========================  =======================  ========================  ==============

``beta = 0`` never reads ``C`` (it may hold garbage, as in BLAS); ``beta = 1``
is ``grad_req='add'``.

Kernel
------
Each ``TILE x TILE`` thread block computes one ``TILE x TILE`` tile of ``C``
and walks ``K`` in steps of ``TILE``: both operand tiles are staged in
``cuda.shared.array`` (one padded column against bank conflicts), with a
``cuda.syncthreads()`` after the load and after the multiply. Loads are
coalesced for every transpose combination (consecutive ``threadIdx.x`` read
consecutive addresses; a transposed operand is written transposed into shared
memory). Edges of sizes that are not multiples of ``TILE`` load zeros and
skip the store. float32 (and float16) accumulate in float32, float64 in
float64. Blocks loop over row tiles and batch entries beyond the grid limits
(65535 in y and z).

No cuBLAS path: no maintained binding that takes numba device arrays could be
tested on this project's machines (CPU only, CUDA simulator).

Source: the shared-memory tiling of Kirk & Hwu, "Programming Massively
Parallel Processors", ch. 5 (tiled matrix multiplication).
"""
import numpy as np

from numba import njit

from ..base import ShapeError
from ..jit import LazyCudaKernel, gpu_body, import_cuda

__all__ = ['TILE', 'gemm', 'gemm_kernel', 'bias_fill']

cuda = None  # bound by import_cuda(globals()) on first GPU use

#: Tile edge (threads per block are ``TILE * TILE``).
TILE = 16
#: CUDA's limit on ``gridDim.y`` and ``gridDim.z``.
_GRID_YZ = 65535

_KERNELS = {}


def _acc_dtype(dtype):
    """The accumulator dtype: float64 for float64, float32 for float32/float16."""
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def gemm_kernel(dtype, tile=TILE):
    """The compiled kernel for one accumulator dtype and tile edge (built once, cached).

    Parameters
    ----------
    dtype : numpy dtype
        The operands' dtype (float16, float32 or float64).
    tile : int, default :data:`TILE`
        Tile edge; blocks are ``(tile, tile)`` threads.

    Returns
    -------
    numba CUDA kernel
        ``k(a, b, c, alpha, beta, trans_a, trans_b)`` on 3-D arrays, launched
        by :func:`gemm`.
    """
    acc = _acc_dtype(dtype)
    key = (acc, tile)
    if key not in _KERNELS:
        _KERNELS[key] = _build(acc, tile)
    return _KERNELS[key]


@njit
def _load(tile, ti, tj, x, z, i, j):
    """``tile[ti, tj] = x[z, i, j]``, or 0 outside ``x`` (a device function)."""
    if i < x.shape[1] and j < x.shape[2]:
        tile[ti, tj] = x[z, i, j]
    else:
        tile[ti, tj] = 0


def _build(acc_np, T):
    import_cuda(globals())
    load = gpu_body(_load)
    from numba import from_dtype
    acc_t = from_dtype(np.dtype(acc_np))
    T1 = T + 1          # shared-array shapes must be compile-time constants

    @cuda.jit
    def k(a, b, c, alpha, beta, trans_a, trans_b):
        sa = cuda.shared.array((T, T1), acc_t)    # sa[i, j] = op(A)[row0 + i, k0 + j]
        sb = cuda.shared.array((T, T1), acc_t)    # sb[i, j] = op(B)[k0 + i, col0 + j]
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        Bc, M, N = c.shape[0], c.shape[1], c.shape[2]
        K = a.shape[1] if trans_a else a.shape[2]
        Ba = a.shape[0]
        R = b.shape[0] // Bc
        al = acc_t(alpha)
        be = acc_t(beta)
        col0 = cuda.blockIdx.x * T
        col = col0 + tx
        row_tiles = (M + T - 1) // T
        for z in range(cuda.blockIdx.z, Bc, cuda.gridDim.z):
            for rt in range(cuda.blockIdx.y, row_tiles, cuda.gridDim.y):
                row0 = rt * T
                row = row0 + ty
                s = acc_t(0)
                for r in range(R):
                    zb = r * Bc + z
                    za = zb % Ba
                    for k0 in range(0, K, T):
                        # consecutive tx read consecutive addresses; a transposed
                        # operand lands transposed in shared memory
                        if trans_a:      # A is (K, M)
                            load(sa, tx, ty, a, za, k0 + ty, row0 + tx)
                        else:            # A is (M, K)
                            load(sa, ty, tx, a, za, row, k0 + tx)
                        if trans_b:      # B is (N, K)
                            load(sb, tx, ty, b, zb, col0 + ty, k0 + tx)
                        else:            # B is (K, N)
                            load(sb, ty, tx, b, zb, k0 + ty, col)
                        cuda.syncthreads()
                        for j in range(T):
                            s += sa[ty, j] * sb[j, tx]
                        cuda.syncthreads()
                if row < M and col < N:
                    v = al * s
                    if beta != 0:
                        v += be * c[z, row, col]
                    c[z, row, col] = v
    return k


def _as3d(x):
    return x.reshape(1, *x.shape) if len(x.shape) == 2 else x


def gemm(a, b, c, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, tile=TILE):
    """``C = alpha * op(A) @ op(B) + beta * C`` on the GPU (batched, see the module doc).

    Parameters
    ----------
    a, b, c : numba device arrays, 2-D or 3-D, C-contiguous, one float dtype
        2-D arrays are a batch of one. ``c`` is ``(Bc, M, N)``; ``a`` is
        ``(Ba, M, K)`` (``(Ba, K, M)`` with ``trans_a``) where ``Ba`` divides
        the batch of ``b``; ``b`` is ``(R*Bc, K, N)`` (``(R*Bc, N, K)`` with
        ``trans_b``); the ``R`` products of each ``C`` entry are summed.
    alpha, beta : float
        Scales of the product and of the old ``C`` (``beta=0`` never reads ``C``).
    trans_a, trans_b : bool
        Use ``A^T`` / ``B^T`` (the arrays as stored are transposed, no copy).
    tile : int, default :data:`TILE`

    Raises
    ------
    ShapeError
        Shapes that do not chain (a bug in the calling op: ops check user
        shapes before kernels run).
    """
    a, b, c = _as3d(a), _as3d(b), _as3d(c)
    Bc, M, N = c.shape
    am, ak = (a.shape[2], a.shape[1]) if trans_a else (a.shape[1], a.shape[2])
    bk, bn = (b.shape[2], b.shape[1]) if trans_b else (b.shape[1], b.shape[2])
    bad = (am, bn) != (M, N) or ak != bk
    if Bc and not bad:
        bad = b.shape[0] % Bc or a.shape[0] == 0 or b.shape[0] % a.shape[0]
    if bad:
        raise ShapeError('gemm: shapes do not chain: a %s%s, b %s%s, c %s'
                         % (tuple(a.shape), '^T' if trans_a else '', tuple(b.shape),
                            '^T' if trans_b else '', tuple(c.shape)))
    if c.size == 0:
        return
    grid = ((N + tile - 1) // tile, min((M + tile - 1) // tile, _GRID_YZ), min(Bc, _GRID_YZ))
    gemm_kernel(c.dtype, tile)[grid, (tile, tile)](a, b, c, float(alpha), float(beta),
                                                   bool(trans_a), bool(trans_b))


def _build_bias():
    import_cuda(globals())

    @cuda.jit
    def k(out, b, add):
        _, J, L = out.shape
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for t in range(start, out.size, stride):
            r = t // L
            i = r // J
            j = r - i * J
            q = t - r * L
            if add:
                out[i, j, q] += b[j]
            else:
                out[i, j, q] = b[j]
    return k


_bias = LazyCudaKernel(_build_bias)


def bias_fill(out, b, add):
    """``out[i, j, q] (+)= b[j]`` on a 3-D device array: the GEMM ops' bias epilogue.

    A FullyConnected output ``(M, H)`` is passed as ``(M, H, 1)``, a convolution
    output ``(N, F, P)`` as it is; with ``add=False`` the bias is written and the
    GEMM then accumulates onto it (``beta=1``).
    """
    if out.size:
        _bias.launch(out.size, out, b, add)
