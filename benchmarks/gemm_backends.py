"""float32 GEMM backends on the shapes the zoo's convolutions and FullyConnected issue (not a test).

Derives every GEMM a training step (forward, data gradient, weight gradient)
runs on ``resnet18_v1_32``, ``vgg11``, ``inception_bn`` and ``mobilenet_v1``
at batch 32 from the kernels' own planning functions (``_im2col.chunk_size``,
``_winograd.chunk_size``/``stride``, the drivers' operand orientations and
strides, FullyConnected's ``x w^T``, ``og w``, ``og^T x``), then times each
distinct shape in one process, the backends interleaved round by round
(best of the rounds), at 1 and 2 BLAS threads::

    python benchmarks/gemm_backends.py [--nets ...] [--batch 32] [--rounds 5]
        [--threads 1,2] [--top 25]

Backends:

* ``numba``    ``np.dot(a, b, out)`` inside ``@njit``, as the kernels call it
  (scipy's bundled OpenBLAS through ``scipy.linalg.cython_blas``);
* ``openblas`` numpy's bundled OpenBLAS (ILP64 ``scipy_cblas_sgemm64_``)
  called from ``@njit`` through a ctypes pointer;
* ``mkl``      Intel MKL's ``cblas_sgemm_64`` (``libmkl_rt``, the ``mkl``
  wheel) from ``@njit``, when installed;
* ``numpy``    numpy's ``np.dot(a, b, out)`` from Python (reference).

Threads: the convolutions split the batch over the kernel pool and hold BLAS
to one thread, so the 1-thread column is the one their GEMMs run at; the
2-thread column is what one GEMM gets from BLAS's own threads. Per net, the
sum over its GEMMs (each weighted by how often a step issues it) is printed
per backend. The machine may be shared: compare columns of one run only.
"""
import argparse
import ctypes
import glob
import json
import os
import sys
import time

import numpy as np
from numba import njit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ffnumba as mx  # noqa: E402
from ffnumba.ops.nn import _im2col as ic  # noqa: E402
from ffnumba.ops.nn import _winograd as wg  # noqa: E402
from zoo_nets import NETS  # noqa: E402

NO_TRANS, TRANS, ROW_MAJOR = 111, 112, 101


# ------------------------------------------------------------------ GEMM list

def _tuple(s):
    return tuple(int(v) for v in s.strip('()[] ').split(',') if v.strip())


def conv_gemms(N, C, H, W, F, k, s, p, g, nt):
    """``[(tag, M, N, K, a, b, c, count)]`` of one Convolution's training step.

    ``a`` / ``b`` / ``c`` describe the operands as the kernels pass them:
    ``('n', ld)`` a row-major view with leading dimension ``ld``, ``('t', ld)``
    the transpose of a row-major ``(K, M)`` (or ``(N, K)``) array.
    """
    OH = (H + 2 * p[0] - k[0]) // s[0] + 1
    OW = (W + 2 * p[1] - k[1]) // s[1] + 1
    if g > 1 and g == C:
        return []                                         # depthwise: direct kernels, no GEMM
    part = -(-N // nt)
    out = []
    if (wg.eligible(k, s, p, (1, 1), g, (N, C, H, W)) and wg.faster((N, C, H, W), (N, F, OH, OW))):
        T = ((OH + 1) // 2) * ((OW + 1) // 2)
        nb = wg.chunk_size(part, C, F, T)
        for L, cnt in ((nb * T, nt * (part // nb)), ((part % nb) * T, nt * (part % nb > 0))):
            if not cnt:
                continue
            n = 16 * cnt
            out.append(('wino fwd  U V', F, L, C, ('n', C), ('n', L), ('n', L), n))
            out.append(('wino dW   M V^T', F, C, L, ('n', L), ('t', L), ('n', C), n))
            out.append(('wino dX   U^T M', C, L, F, ('t', C), ('n', L), ('n', L), n))
        return out
    Cg, Fg = C // g, F // g
    Kv = k[0] * k[1]
    CK, P = Cg * Kv, OH * OW
    pointwise = tuple(k) == (1, 1) and tuple(s) == (1, 1) and tuple(p) == (0, 0)
    nb = ic.chunk_size(part, CK, P, pointwise)
    for nbx, cnt in ((nb, nt * (part // nb) * g), (part % nb, nt * g * (part % nb > 0))):
        if not cnt or not nbx:
            continue
        L = nbx * P
        out.append(('im2col fwd W col', Fg, L, CK, ('n', CK), ('n', L), ('n', L), cnt))
        out.append(('im2col dW  dy col^T', Fg, CK, L, ('n', L), ('t', L), ('n', CK), cnt))
        out.append(('im2col dX  W^T dy', CK, L, Fg, ('t', CK), ('n', L), ('n', L), cnt))
    return out


def fc_gemms(M, K, H):
    return [('fc fwd    x w^T', M, H, K, ('n', K), ('t', K), ('n', H), 1),
            ('fc dX     og w', M, K, H, ('n', H), ('n', K), ('n', K), 1),
            ('fc dW     og^T x', H, K, M, ('t', H), ('n', K), ('n', K), 1)]


def net_gemms(name, batch, nt):
    builder, shape = NETS[name]
    sym = builder(mx.sym)
    internals = sym.get_internals()
    _, outs, _ = internals.infer_shape(data=(batch,) + tuple(shape))
    shapes = dict(zip(internals.list_outputs(), outs))
    nodes = json.loads(sym.tojson())['nodes']
    gemms = []
    for node in nodes:
        if node['op'] not in ('Convolution', 'FullyConnected'):
            continue
        src = nodes[node['inputs'][0][0]]
        key = src['name'] if src['op'] == 'null' else src['name'] + '_output'
        xs = shapes[key]
        a = node['attrs']
        if node['op'] == 'FullyConnected':
            K = int(np.prod(xs[1:]))
            gemms += fc_gemms(xs[0], K, int(a['num_hidden']))
            continue
        k = _tuple(a['kernel'])
        s = _tuple(a.get('stride', '(1, 1)')) or (1, 1)
        p = _tuple(a.get('pad', '(0, 0)')) or (0, 0)
        gemms += conv_gemms(xs[0], xs[1], xs[2], xs[3], int(a['num_filter']), k, s, p,
                            int(a.get('num_group', 1)), nt)
    return gemms


# ------------------------------------------------------------------ operands

def operands(M, N, K, a, b, c, dtype):
    """Views shaped like the kernels': ``op(A) (M, K)``, ``op(B) (K, N)``, ``C (M, N)``."""
    rng = np.random.default_rng(0)

    def view(rows, cols, spec):
        kind, ld = spec
        if kind == 'n':
            base = rng.standard_normal((rows, max(ld, cols))).astype(dtype)
            return base[:, :cols]
        base = rng.standard_normal((cols, max(ld, rows))).astype(dtype)
        return base[:, :rows].T
    return view(M, K, a), view(K, N, b), view(M, N, c)


# ------------------------------------------------------------------ backends

@njit(cache=True, nogil=True)
def _numba_dot(a, b, c, reps):
    for _ in range(reps):
        np.dot(a, b, c)


def _cblas_backend(path, symbol):
    lib = ctypes.CDLL(path)
    fn = getattr(lib, symbol)
    i32, i64, f32, ptr = ctypes.c_int32, ctypes.c_int64, ctypes.c_float, ctypes.c_uint64
    fn.argtypes = [i32, i32, i32, i64, i64, i64, f32, ptr, i64, ptr, i64, f32, ptr, i64]
    fn.restype = None

    @njit(nogil=True)
    def run(ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc, reps):
        for _ in range(reps):
            fn(ROW_MAJOR, ta, tb, m, n, k, np.float32(1.0), pa, lda, pb, ldb,
               np.float32(0.0), pc, ldc)
    return lib, run


def _layout(x):
    """``(trans, ld)`` of a 2-D view with one unit stride."""
    it = x.itemsize
    if x.strides[1] == it:
        return NO_TRANS, x.strides[0] // it
    return TRANS, x.strides[1] // it


def _libpath(pattern):
    hits = sorted(glob.glob(pattern))
    return hits[0] if hits else None


def backends():
    site = os.path.dirname(os.path.dirname(np.__file__))
    out = {'numba': None}
    ob = _libpath(os.path.join(site, 'numpy.libs', 'libscipy_openblas64_*.so'))
    if ob:
        out['openblas'] = _cblas_backend(ob, 'scipy_cblas_sgemm64_')
    mkl = _libpath(os.path.join(sys.prefix, 'lib', 'libmkl_rt.so*'))
    if mkl:
        try:
            out['mkl'] = _cblas_backend(mkl, 'cblas_sgemm_64')
        except OSError as e:
            print('mkl: not loaded (%s)' % e)
    out['numpy'] = None
    return out


def set_threads(n, mkl_lib):
    from threadpoolctl import threadpool_limits
    import scipy.linalg.cython_blas  # noqa: F401  (numba's BLAS: loaded before it is limited)
    threadpool_limits(limits=n, user_api='blas')
    if mkl_lib is not None:
        mkl_lib.MKL_Set_Num_Threads(ctypes.c_int(n))


def time_one(name, be, ops, reps, rounds_inner=1):
    a, b, c = ops
    if name == 'numba':
        fn = lambda r: _numba_dot(a, b, c, r)  # noqa: E731
    elif name == 'numpy':
        def fn(r):
            for _ in range(r):
                np.dot(a, b, c)
    else:
        ta, lda = _layout(a)
        tb, ldb = _layout(b)
        args = (ta, tb, a.shape[0], b.shape[1], a.shape[1], a.ctypes.data, lda,
                b.ctypes.data, ldb, c.ctypes.data, c.strides[0] // c.itemsize)
        fn = lambda r: be[1](*args, r)  # noqa: E731
    fn(1)
    t0 = time.perf_counter()
    fn(reps)
    return (time.perf_counter() - t0) / reps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--nets', default='resnet18_v1_32,vgg11,inception_bn,mobilenet_v1')
    ap.add_argument('--batch', type=int, default=32)
    ap.add_argument('--threads', default='1,2')
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--min-ms', type=float, default=20.0,
                    help='target time of one timed batch of calls')
    ap.add_argument('--top', type=int, default=30, help='shapes listed (by numba time share)')
    args = ap.parse_args()
    bes = backends()
    names = list(bes)
    mkl_lib = bes['mkl'][0] if 'mkl' in bes else None
    nets = args.nets.split(',')
    for nt in [int(t) for t in args.threads.split(',')]:
        set_threads(nt, mkl_lib)
        from threadpoolctl import threadpool_info
        print('BLAS threads:', ', '.join('%s %s %s' % (os.path.basename(i['filepath']),
                                                      i['version'], i['num_threads'])
                                         for i in threadpool_info()))
        # the conv kernels split over nt threads with one BLAS thread each: their GEMMs
        # (per-part shapes) run at 1 BLAS thread; FC runs BLAS's own threads
        per_net = {n: net_gemms(n, args.batch, nt) for n in nets}
        shapes = {}
        for n, gl in per_net.items():
            for (tag, M, N, K, a, b, c, cnt) in gl:
                key = (tag, M, N, K, a, b, c)
                shapes.setdefault(key, {}).setdefault(n, 0)
                shapes[key][n] += cnt
        best = {key: {nm: float('inf') for nm in names} for key in shapes}
        ops = {key: operands(key[1], key[2], key[3], key[4], key[5], key[6], np.float32)
               for key in shapes}
        reps = {}
        for key in shapes:
            t = time_one('numpy', None, ops[key], 1)
            reps[key] = max(1, int(args.min_ms * 1e-3 / max(t, 1e-7)))
        for r in range(args.rounds):
            for key in shapes:
                order = names[r % len(names):] + names[:r % len(names)]
                for nm in order:
                    t = time_one(nm, bes[nm], ops[key], reps[key])
                    best[key][nm] = min(best[key][nm], t)
        print('\n=== BLAS threads %d (float32, best of %d rounds; loaded machine) ===' % (
            nt, args.rounds))
        for n in nets:
            tot = {nm: sum(best[k][nm] * shapes[k].get(n, 0) for k in shapes) for nm in names}
            ref = tot['numba']
            print('%-16s GEMM ms/step: ' % n + '  '.join(
                '%s %.1f (%.2fx)' % (nm, 1e3 * tot[nm], ref / tot[nm]) for nm in names))
        allref = {k: best[k]['numba'] * sum(shapes[k].values()) for k in shapes}
        total = sum(allref.values())
        print('\n%-18s %5s %6s %6s %5s %6s  %s' % ('GEMM', 'M', 'N', 'K', 'count', 'share',
                                                  '  '.join('%-15s' % (nm + ' ms GF/s')
                                                            for nm in names)))
        for key in sorted(shapes, key=lambda k: -allref[k])[:args.top]:
            tag, M, N, K = key[:4]
            fl = 2.0 * M * N * K
            cnt = sum(shapes[key].values())
            print('%-18s %5d %6d %6d %5d %5.1f%%  %s' % (
                tag[:18], M, N, K, cnt, 100 * allref[key] / total,
                '  '.join('%6.3f %6.0f  ' % (1e3 * best[key][nm], fl / best[key][nm] / 1e9)
                          for nm in names)))


if __name__ == '__main__':
    main()
