"""GFLOP/s of the tiled shared-memory GPU GEMM (``ffnumba.ops.gemm_cuda``).

Times ``C = A @ B`` (and the transposed variants FullyConnected's backward
uses) against a one-thread-per-output-element kernel (the algorithm the
tiled kernel replaced) and, when PyTorch with CUDA is importable, against
``torch.matmul`` (cuBLAS). Needs a CUDA GPU; ``--sim`` runs tiny sizes under
numba's CUDA simulator to check the script itself (its numbers mean nothing).

Usage::

    python benchmarks/gpu_gemm.py [--sizes 512 1024 2048] [--dtype float32] [--reps 10]
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/gpu_gemm.py --sim
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


cuda = None  # bound by import_cuda(globals()) (the simulator swaps this global)


def _naive_kernel():
    from ffnumba.jit import import_cuda
    import_cuda(globals())

    @cuda.jit
    def k(a, b, c):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        M, N = c.shape
        for t in range(start, M * N, stride):
            i, j = t // N, t % N
            acc = 0.0
            for q in range(a.shape[1]):
                acc += a[i, q] * b[q, j]
            c[i, j] = acc
    return k


def _time(fn, reps):
    fn()
    cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    cuda.synchronize()
    return (time.perf_counter() - t0) / reps


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--sizes', type=int, nargs='+', default=[512, 1024, 2048, 4096])
    ap.add_argument('--dtype', default='float32', choices=['float32', 'float64'])
    ap.add_argument('--reps', type=int, default=10)
    ap.add_argument('--sim', action='store_true', help='tiny sizes under the CUDA simulator')
    args = ap.parse_args(argv)
    if args.sim:
        os.environ['NUMBA_ENABLE_CUDASIM'] = '1'
        args.sizes, args.reps = [17], 1
    from ffnumba.ops import gemm_cuda
    try:
        import torch
        has_torch = torch.cuda.is_available()
    except ImportError:
        has_torch = False
    naive = _naive_kernel()          # binds the global ``cuda``
    rng = np.random.default_rng(0)
    dt = np.dtype(args.dtype)
    print('%-6s %-10s %12s %12s %12s %s' % ('n', 'op', 'tiled GF/s', 'naive GF/s',
                                            'torch GF/s', 'max |err|'))
    for n in args.sizes:
        a = cuda.to_device(rng.standard_normal((n, n)).astype(dt))
        b = cuda.to_device(rng.standard_normal((n, n)).astype(dt))
        c = cuda.device_array((n, n), dt)
        flop = 2.0 * n ** 3
        for name, ta, tb in (('A B', False, False), ('A B^T', False, True),
                             ('A^T B', True, False)):
            t = _time(lambda: gemm_cuda.gemm(a, b, c, 1.0, 0.0, ta, tb), args.reps)
            ah, bh = a.copy_to_host(), b.copy_to_host()
            want = (ah.T if ta else ah).astype(np.float64) @ (bh.T if tb else bh)
            err = float(np.abs(c.copy_to_host() - want).max())
            tn = tt = float('nan')
            if name == 'A B':
                blocks = min((n * n + 255) // 256, 4096)
                tn = _time(lambda: naive[blocks, 256](a, b, c), max(1, args.reps // 5))
            if has_torch and name == 'A B':
                ta_, tb_ = (torch.as_tensor(x.copy_to_host(), device='cuda') for x in (a, b))
                tt = _time(lambda: torch.matmul(ta_, tb_), args.reps)
            print('%-6d %-10s %12.1f %12.1f %12.1f %.2e' % (n, name, flop / t / 1e9,
                                                             flop / tn / 1e9, flop / tt / 1e9,
                                                             err))


if __name__ == '__main__':
    main()
