"""CPU matrix products for the kernels: ``C = alpha * A @ B + beta * C`` through one chosen BLAS.

Kernels call :func:`gemm` (``@njit``) instead of ``np.dot``. It takes 2-D
views as the kernels hold them (``w3[j].T``, a row slice of a flat buffer
reshaped, ``dy[n]``) and passes their transposes and leading dimensions to
a row-major, 64-bit-integer CBLAS ``?gemm`` without copying; operands with
no unit stride (or a negative one) are multiplied by plain loops instead.

The library is chosen once per process, at import, by ``FFNUMBA_GEMM``:

* ``openblas``: numpy's bundled OpenBLAS (``numpy.libs/libscipy_openblas64_*``,
  ILP64 ``scipy_cblas_?gemm64_``), a core dependency: the default;
* ``mkl``: Intel MKL's ``cblas_?gemm_64`` (ILP64) from ``libmkl_rt`` of the
  ``mkl`` wheel (``pip install ffnumba[mkl]``), run sequentially (MKL's own
  threads are off, unless ``MKL_THREADING_LAYER`` is set; the kernels split
  their work over ffnumba's pool). Used
  by default when installed (unset ``FFNUMBA_GEMM``): it measured 1.2x the
  float32 GEMM speed of OpenBLAS on one thread (``benchmarks/gemm_backends.py``);
* ``numba``: numba's own ``np.dot`` (scipy's bundled OpenBLAS), the path the
  kernels took before this module; also the fallback when the chosen library
  cannot be loaded (logged once).

Binding survives numba's on-disk cache: the kernels call the external symbols
``ffnumba_sgemm64`` / ``ffnumba_dgemm64`` by name (a
``numba.types.ExternalFunction``), and this module points those names at the
chosen library's functions with ``llvmlite.binding.add_symbol`` when it is
imported, before any kernel is compiled or loaded from the cache. A cached
kernel therefore runs whichever library the new process chose, with no
recompiling; every backend has the same ILP64 CBLAS signature (the ``numba``
one is a ``@cfunc`` with that signature around ``np.dot``).

Threads: :mod:`ffnumba.blas_threads` caps and holds to one thread every
registered library (:func:`ffnumba.blas_threads.register_blas`): numpy's
OpenBLAS is registered here, sequential MKL needs nothing.

Source: the CBLAS interface, "Basic Linear Algebra Subprograms Technical
(BLAST) Forum Standard" (2001), annex B (``cblas_?gemm``; ILP64 names as in
OpenBLAS ``INTERFACE64`` builds and oneMKL's ``_64`` API).
"""
import ctypes
import glob
import logging
import os
import sys

import numpy as np
from llvmlite import binding as llvm
from numba import carray, cfunc, njit, types

from ..blas_threads import register_blas
from ..jit import JIT, helper_njit

__all__ = ['gemm', 'GEMM_ENV', 'BACKENDS', 'backend']

#: Environment variable choosing the GEMM library (read once, at import).
GEMM_ENV = 'FFNUMBA_GEMM'
#: The libraries :data:`GEMM_ENV` may name.
BACKENDS = ('openblas', 'mkl', 'numba')

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
_SYMBOLS = {'f4': 'ffnumba_sgemm64', 'f8': 'ffnumba_dgemm64'}


def _signature(real, ptr):
    i32, i64 = types.int32, types.int64
    return types.void(i32, i32, i32, i64, i64, i64, real, ptr, i64, ptr, i64, real, ptr, i64)


_ext_s = types.ExternalFunction(_SYMBOLS['f4'], _signature(types.float32, types.intp))
_ext_d = types.ExternalFunction(_SYMBOLS['f8'], _signature(types.float64, types.intp))


# ---------------------------------------------------------------- the numba fallback

@njit(**JIT)
def _view(p, trans, rows, cols, ld):
    """The ``(rows, cols)`` operand at ``p`` (row-major, leading dimension ``ld``; transposed)."""
    if trans == TRANS:
        return carray(p, (max(cols, 1), ld))[:cols, :rows].T
    return carray(p, (max(rows, 1), ld))[:rows, :cols]


@njit(**JIT)
def _dot_fallback(ta, tb, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc):
    c = carray(pc, (max(m, 1), ldc))[:m, :n]
    if m == 0 or n == 0:
        return
    if k == 0:
        for i in range(m):
            for j in range(n):
                c[i, j] = beta * c[i, j] if beta != 0 else 0
        return
    a = _view(pa, ta, m, k, lda)
    b = _view(pb, tb, k, n, ldb)
    if alpha == 1 and beta == 0 and ldc == n:
        np.dot(a, b, carray(pc, (m, n)))         # the kernels' calls: no temporary
        return
    t = np.dot(a, b)
    for i in range(m):
        for j in range(n):
            v = alpha * t[i, j]
            c[i, j] = v + beta * c[i, j] if beta != 0 else v


def _fallbacks():
    """``{dtype char: address}`` of the ``@cfunc`` CBLAS-signature wrappers of ``np.dot``."""
    import warnings
    from numba.core.errors import NumbaPerformanceWarning
    out = {}
    for ch, real in (('f4', types.float32), ('f8', types.float64)):
        sig = _signature(real, types.CPointer(real))

        def body(order, ta, tb, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc):
            _dot_fallback(ta, tb, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc)
        with warnings.catch_warnings():      # np.dot on strided views: copies when it must
            warnings.simplefilter('ignore', NumbaPerformanceWarning)
            out[ch] = cfunc(sig, cache=True)(body).address
    return out


# ---------------------------------------------------------------- libraries

def _site():
    return os.path.dirname(os.path.dirname(np.__file__))


def _openblas():
    """``(lib, {dtype char: address})`` of numpy's ILP64 OpenBLAS, or None."""
    for pattern, stem in (('numpy.libs/libscipy_openblas64_*.so*', 'scipy_cblas_%sgemm64_'),
                          ('numpy.libs/libopenblas64_*.so*', 'cblas_%sgemm64_'),
                          ('numpy/.dylibs/libscipy_openblas64_*.dylib', 'scipy_cblas_%sgemm64_')):
        for path in sorted(glob.glob(os.path.join(_site(), pattern))):
            try:
                lib = ctypes.CDLL(path)
                addr = {ch: ctypes.cast(getattr(lib, stem % p), ctypes.c_void_p).value
                        for ch, p in (('f4', 's'), ('f8', 'd'))}
            except (OSError, AttributeError):
                continue
            return lib, addr
    return None


def _openblas_threads(lib):
    for stem in ('scipy_openblas_%s_num_threads64_', 'openblas_%s_num_threads64_'):
        get = getattr(lib, stem % 'get', None)
        put = getattr(lib, stem % 'set', None)
        if get is not None and put is not None:
            get.restype = ctypes.c_int
            register_blas(get, lambda n, put=put: put(ctypes.c_int(n)))
            return


def _mkl():
    """``(lib, {dtype char: address})`` of MKL's ILP64 CBLAS, set sequential, or None."""
    paths = sorted(glob.glob(os.path.join(sys.prefix, 'lib', 'libmkl_rt.so*')))
    paths += sorted(glob.glob(os.path.join(sys.prefix, 'Library', 'bin', 'mkl_rt*.dll')))
    for path in paths + ['libmkl_rt.so.2', 'libmkl_rt.so']:
        try:
            lib = ctypes.CDLL(path)
            addr = {ch: ctypes.cast(getattr(lib, 'cblas_%sgemm_64' % p), ctypes.c_void_p).value
                    for ch, p in (('f4', 's'), ('f8', 'd'))}
        except (OSError, AttributeError):
            continue
        if not os.environ.get('MKL_THREADING_LAYER'):
            lib.MKL_Set_Threading_Layer(ctypes.c_int(1))       # MKL_THREADING_SEQUENTIAL
        return lib, addr
    return None


def _choose():
    """Bind the external GEMM symbols; return the backend's name."""
    log = logging.getLogger(__name__)
    raw = os.environ.get(GEMM_ENV, '').strip().lower()
    if raw and raw not in BACKENDS:
        log.warning('%s=%r is not one of %s; choosing the default', GEMM_ENV, raw,
                    ', '.join(BACKENDS))
        raw = ''
    order = [raw] if raw else ['mkl', 'openblas']
    found = None
    for name in order:
        if name == 'numba':
            break
        found = (_mkl if name == 'mkl' else _openblas)()
        if found is not None:
            if name == 'openblas':
                _openblas_threads(found[0])
            elif os.environ.get('MKL_THREADING_LAYER'):    # the user's MKL threads: managed
                lib = found[0]
                lib.MKL_Get_Max_Threads.restype = ctypes.c_int
                register_blas(lib.MKL_Get_Max_Threads,
                              lambda n, lib=lib: lib.MKL_Set_Num_Threads(ctypes.c_int(n)))
            break
        if raw:
            log.warning('%s=%s: the library was not found; GEMMs use numba\'s np.dot',
                        GEMM_ENV, raw)
    if found is None:
        name, addr = 'numba', _fallbacks()
    else:
        addr = found[1]
    for ch, sym in _SYMBOLS.items():
        llvm.add_symbol(sym, addr[ch])
    return name


_BACKEND = _choose()


def backend():
    """The GEMM library of this process: ``'openblas'``, ``'mkl'`` or ``'numba'``."""
    return _BACKEND


# ---------------------------------------------------------------- njit entry point

@helper_njit
def _layout(x):
    """``(trans, ld)`` of a 2-D view for a row-major CBLAS call; ``trans = 0`` if it has none."""
    r, c = x.shape
    it = x.itemsize
    s0, s1 = x.strides
    if (s1 == it or c <= 1) and (r <= 1 or (s0 > 0 and s0 % it == 0 and s0 // it >= c)):
        return NO_TRANS, s0 // it if r > 1 else max(1, c)
    if (s0 == it or r <= 1) and (c <= 1 or (s1 > 0 and s1 % it == 0 and s1 // it >= r)):
        return TRANS, s1 // it if c > 1 else max(1, r)
    return 0, 0


# The front end is inlined into each caller at numba-IR level; it turns the three operands
# into any-layout ('A') views (a full 2-D slice), so the body below compiles once per dtype
# whatever the callers' layouts: C and F (transposed) operands compiled it three times
# before, its rarely run fallback included (about 2 s of a cold ResNet-18).
@njit(inline='always', **JIT)
def gemm(alpha, a, b, beta, c):
    """``c = alpha * a @ b + beta * c`` (``c`` not read when ``beta == 0``), inside ``@njit``.

    Parameters
    ----------
    alpha, beta : float
    a : 2-D float32 or float64 array ``(m, k)``, any strides (a transposed
        view is passed as a transpose; no unit stride: plain loops)
    b : 2-D array ``(k, n)``, same dtype
    c : 2-D array ``(m, n)``, same dtype, written in place (row- or
        column-major views are written directly; others by the loops)

    Returns
    -------
    int
        Unused by callers (0; 1 when the loops of :func:`_gemm_loops` ran).

    The caller checks shapes and dtypes (kernels do, before calling). The
    usual path works on strides and pointers only and allocates nothing (a
    column-major ``c`` is computed as ``c^T = b^T a^T`` by swapping flags), and
    every layout compiles the same function (see :func:`_gemm_any`).
    """
    return _gemm_any(alpha, a[:, :], b[:, :], beta, c[:, :])


@helper_njit(by_reference=True)
def _gemm_any(alpha, a, b, beta, c):
    """:func:`gemm` on any-layout views: one compiled function per dtype."""
    m, n = c.shape
    k = a.shape[1]
    if m == 0 or n == 0:
        return 0
    ta, lda = _layout(a)
    tb, ldb = _layout(b)
    tc, ldc = _layout(c)
    if ta == 0 or tb == 0 or tc == 0:   # no unit stride (never the kernels' own views)
        return _gemm_loops(alpha, a, b, beta, c)
    _rows_or_cols(ta, lda, tb, ldb, tc, ldc, m, n, k, alpha, a.ctypes.data, b.ctypes.data,
                  beta, c.ctypes.data, c.itemsize)
    return 0


@helper_njit
def _gemm_loops(alpha, a, b, beta, c):
    """:func:`gemm` by plain loops, summing in float64: operands with no unit stride.

    Never the kernels' own views (only a direct call with, e.g., a negative or
    non-unit-step slice gets here). Loops compile in a fraction of the time a
    copy of each operand into a library call took (about 0.5 s of every cold
    start, as every kernel that multiplies compiles this path).
    """
    m, n = c.shape
    k = a.shape[1]
    for i in range(m):
        for j in range(n):
            acc = 0.0
            for q in range(k):
                acc += a[i, q] * b[q, j]
            v = alpha * acc
            c[i, j] = v + beta * c[i, j] if beta != 0 else v
    return 1


@helper_njit
def _rows_or_cols(ta, lda, tb, ldb, tc, ldc, m, n, k, alpha, pa, pb, beta, pc, itemsize):
    """One library call for a row-major ``c``; a column-major one as ``c^T = b^T a^T``."""
    if tc == NO_TRANS:
        _call(ta, tb, m, n, k, alpha, pa, max(1, lda), pb, max(1, ldb), beta, pc, max(1, ldc),
              itemsize)
    else:
        _call(TRANS + NO_TRANS - tb, TRANS + NO_TRANS - ta, n, m, k, alpha, pb, max(1, ldb),
              pa, max(1, lda), beta, pc, max(1, ldc), itemsize)


@helper_njit
def _call(ta, tb, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc, itemsize):
    if itemsize == 4:
        _ext_s(ROW_MAJOR, ta, tb, m, n, k, np.float32(alpha), pa, lda, pb, ldb,
               np.float32(beta), pc, ldc)
    else:
        _ext_d(ROW_MAJOR, ta, tb, m, n, k, np.float64(alpha), pa, lda, pb, ldb,
               np.float64(beta), pc, ldc)
