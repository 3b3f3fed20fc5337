"""``mx.test_utils`` names: tolerances, random inputs, comparisons, environment.

MXNet's test helpers as its users call them (``from mxnet.test_utils import *``
keeps working after ``import ffnumba as mx``). The tolerances are MXNet's
per-dtype defaults (``test_utils.default_rtols``/``default_atols`` in MXNet
1.9.1): float16 1e-2/1e-1, float32 1e-4/1e-3, float64 1e-5/1e-20, integers
and bool exact.
"""
import contextlib
import numbers
import os
import sys

import numpy as np

from ..base import FFError
from ..context import Context, current_context
from .. import ndarray as nd

__all__ = ['default_context', 'set_default_context', 'default_dtype', 'default_rtols',
           'default_atols', 'default_numeric_eps', 'get_tolerance', 'get_tols', 'get_rtol',
           'get_atol', 'get_etol', 'random_arrays', 'random_uniform_arrays', 'random_sample',
           'rand_ndarray', 'rand_shape_2d', 'rand_shape_3d', 'rand_shape_nd', 'np_reduce',
           'same', 'almost_equal', 'assert_almost_equal', 'assert_allclose',
           'assert_exception', 'retry', 'simple_forward', 'discard_stderr', 'environment',
           'use_np', 'compare_ndarray_tuple', 'compare_optimizer', 'same_symbol_structure',
           'gen_buckets_probs_with_ppf', 'mean_check', 'var_check', 'chi_square_check',
           'verify_generator', 'list_gpus', 'same_array']

_INT_TYPES = ('bool', 'int8', 'uint8', 'int16', 'int32', 'uint32', 'int64', 'uint64')


def default_context():
    """The context tests run on: the current context (``cpu(0)`` unless changed)."""
    return current_context()


def set_default_context(ctx):
    """Make ``ctx`` the context :func:`default_context` and array creation use."""
    Context._default.value = ctx


def default_dtype():
    """``numpy.float32``, the dtype MXNet's checks default to."""
    return np.float32


def default_rtols():
    """Relative tolerance per dtype (MXNet's defaults)."""
    tols = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-4,
            np.dtype(np.float64): 1e-5}
    tols.update({np.dtype(t): 0 for t in _INT_TYPES})
    return tols


def default_atols():
    """Absolute tolerance per dtype (MXNet's defaults)."""
    tols = {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 1e-3,
            np.dtype(np.float64): 1e-20}
    tols.update({np.dtype(t): 0 for t in _INT_TYPES})
    return tols


def default_numeric_eps():
    """Finite-difference step per float dtype (powers of two: 2**-6, 2**-9, 2**-14)."""
    return {np.dtype(np.float16): 2.0 ** -6, np.dtype(np.float32): 2.0 ** -9,
            np.dtype(np.float64): 2.0 ** -14}


def get_tolerance(dat, tol, default_tol):
    """``tol`` if it is a number, else its (or ``default_tol``'s) entry for ``dat``'s dtype."""
    if isinstance(tol, numbers.Number):
        return tol
    dtype = np.dtype(getattr(dat, 'dtype', np.float64))
    tol = tol or {}
    return tol.get(dtype, default_tol.get(dtype, 0))


def get_tols(x, y, rtol, atol):
    """``(rtol, atol)`` for comparing ``x`` and ``y``: the looser default of the two dtypes."""
    x = np.array(x) if isinstance(x, numbers.Number) else x
    y = np.array(y) if isinstance(y, numbers.Number) else y
    return (max(get_tolerance(x, rtol, default_rtols()), get_tolerance(y, rtol, default_rtols())),
            max(get_tolerance(x, atol, default_atols()), get_tolerance(y, atol, default_atols())))


def get_rtol(rtol=None, dtype=np.dtype(np.float64)):
    """``rtol``, or the default relative tolerance of ``dtype``."""
    return default_rtols()[np.dtype(dtype)] if rtol is None else rtol


def get_atol(atol=None, dtype=np.dtype(np.float64)):
    """``atol``, or the default absolute tolerance of ``dtype``."""
    return default_atols()[np.dtype(dtype)] if atol is None else atol


def get_etol(etol=None):
    """The tolerated fraction of mismatching elements (default 0)."""
    return 0 if etol is None else etol


def random_arrays(*shapes):
    """Standard-normal float32 numpy arrays, one per shape (one array for one shape)."""
    arrays = [np.array(np.random.randn(), dtype=np.float32) if len(s) == 0
              else np.random.randn(*s).astype(np.float32) for s in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def random_uniform_arrays(*shapes, low=0.0, high=1.0, dtype=np.float32):
    """Uniform numpy arrays on ``[low, high)``, one per shape (always a list)."""
    return [np.random.uniform(low, high, size=s).astype(dtype) for s in shapes]


def random_sample(population, k):
    """``k`` distinct elements of the list ``population`` in random order."""
    if not 0 <= k <= len(population):
        raise FFError('random_sample: k=%d is not in [0, %d]' % (k, len(population)))
    pop = list(population)
    np.random.shuffle(pop)
    return pop[:k]


def rand_ndarray(shape, stype='default', density=None, dtype=None, modifier_func=None,
                 shuffle_csr_indices=False, distribution=None, ctx=None):
    """A standard-normal NDArray (dense storage only: ffnumba has no sparse arrays).

    Raises
    ------
    FFError
        For ``stype`` other than ``'default'``.
    """
    if stype != 'default':
        raise FFError("rand_ndarray: stype %r is not supported (ffnumba has dense arrays "
                      "only)" % (stype,))
    return nd.array(random_arrays(tuple(shape)), ctx=ctx or default_context(),
                    dtype=dtype if dtype is not None else 'float32')


def rand_shape_2d(dim0=10, dim1=10, allow_zero_size=False):
    """A random 2-D shape with sides in ``[1, dim]`` (``[0, dim]`` if ``allow_zero_size``)."""
    low = 0 if allow_zero_size else 1
    return np.random.randint(low, dim0 + 1), np.random.randint(low, dim1 + 1)


def rand_shape_3d(dim0=10, dim1=10, dim2=10, allow_zero_size=False):
    """A random 3-D shape (see :func:`rand_shape_2d`)."""
    low = 0 if allow_zero_size else 1
    return (np.random.randint(low, dim0 + 1), np.random.randint(low, dim1 + 1),
            np.random.randint(low, dim2 + 1))


def rand_shape_nd(num_dim, dim=10, allow_zero_size=False):
    """A random ``num_dim``-D shape with sides in ``[1, dim]``."""
    low = 0 if allow_zero_size else 1
    return tuple(np.random.randint(low, dim + 1, size=num_dim))


def np_reduce(dat, axis, keepdims, numpy_reduce_func):
    """Reduce ``dat`` one axis at a time with ``numpy_reduce_func`` (``np.sum``...)."""
    axes = [axis] if isinstance(axis, int) else (list(axis) if axis is not None
                                                 else list(range(dat.ndim)))
    ret = dat
    for i in sorted(axes, reverse=True):
        ret = numpy_reduce_func(ret, axis=i)
    if keepdims:
        shape = list(dat.shape)
        for i in axes:
            shape[i] = 1
        ret = np.reshape(ret, shape)
    return ret


def _host(a):
    return a.asnumpy() if isinstance(a, nd.NDArray) else a


def same(a, b):
    """True when ``a`` and ``b`` have equal shapes and elements."""
    return np.array_equal(_host(a), _host(b))


def same_array(array1, array2):
    """True when two NDArrays share memory (a write to one shows in the other)."""
    return array1._shares_memory(array2)


def almost_equal(a, b, rtol=None, atol=None, equal_nan=False, use_broadcast=True):
    """``numpy.allclose`` with MXNet's float64 defaults (rtol 1e-5, atol 1e-20)."""
    a, b = _host(a), _host(b)
    if not use_broadcast and np.shape(a) != np.shape(b):
        return False
    return bool(np.allclose(a, b, rtol=get_rtol(rtol), atol=get_atol(atol), equal_nan=equal_nan))


def assert_almost_equal(a, b, rtol=None, atol=None, names=('a', 'b'), equal_nan=False,
                        use_broadcast=True, mismatches=(10, 10)):
    """Assert ``|a - b| <= atol + rtol * |b|`` elementwise (MXNet ``assert_almost_equal``).

    Parameters
    ----------
    a, b : NDArray, numpy array or number
        Broadcast against each other unless ``use_broadcast=False``.
    rtol, atol : float or dict of dtype to float, optional
        Default: the looser of the two dtypes' defaults (:func:`default_rtols`).
    names : (str, str)
        How the message calls the two sides.
    equal_nan : bool, default False
    use_broadcast : bool, default True
        False: the shapes must be equal.
    mismatches : (int, int)
        At most ``mismatches[0]`` mismatching elements are listed.

    Raises
    ------
    AssertionError
        With the worst element, its index, both values and the mismatch count.
    """
    rtol, atol = get_tols(a, b, rtol, atol)
    a = np.asarray(_host(a))
    b = np.asarray(_host(b))
    if not use_broadcast and a.shape != b.shape:
        raise AssertionError('shape mismatch: %s.shape = %s and %s.shape = %s are not equal'
                             % (names[0], a.shape, names[1], b.shape))
    if a.dtype == np.bool_ and b.dtype == np.bool_:
        np.testing.assert_equal(a, b)
        return
    try:
        a, b = np.broadcast_arrays(a, b)
    except ValueError:
        raise AssertionError('shapes %s %s and %s %s do not broadcast'
                             % (names[0], a.shape, names[1], b.shape)) from None
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if np.allclose(a64, b64, rtol=rtol, atol=atol, equal_nan=equal_nan):
        return
    diff = np.where(a64 == b64, 0.0, np.abs(a64 - b64))
    if equal_nan:
        diff = np.where(np.isnan(a64) & np.isnan(b64), 0.0, diff)
    viol = diff / (atol + rtol * np.abs(b64) + 1e-20)
    viol = np.where(np.isnan(viol), np.inf, viol)
    bad = np.argwhere(viol > 1)
    worst = np.unravel_index(int(np.argmax(viol)), viol.shape) if viol.ndim else ()
    shown = ', '.join('%s: %s=%r, %s=%r' % (tuple(i), names[0], a[tuple(i)], names[1],
                                            b[tuple(i)]) for i in bad[:mismatches[0]])
    raise AssertionError(
        'Error %f exceeds tolerance rtol=%e, atol=%e (mismatch %f%%). Location of maximum '
        'error: %s, %s=%r, %s=%r. Mismatches: %s'
        % (float(viol[worst]), rtol, atol, 100.0 * len(bad) / max(a.size, 1), worst,
           names[0], a[worst], names[1], b[worst], shown))


def assert_allclose(a, b, rtol=1e-07, atol=0, equal_nan=True):
    """:func:`assert_almost_equal` with numpy's ``assert_allclose`` defaults."""
    assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def assert_exception(f, exception_type, *args, **kwargs):
    """Assert ``f(*args, **kwargs)`` raises ``exception_type``."""
    try:
        f(*args, **kwargs)
    except exception_type:
        return
    raise AssertionError('%s did not raise %s' % (getattr(f, '__name__', f),
                                                   getattr(exception_type, '__name__',
                                                           exception_type)))


def retry(n):
    """Decorator: run a stochastic test up to ``n`` times until it passes."""
    if n <= 0:
        raise FFError('retry: n must be positive. Received: n=%r' % (n,))

    def decorate(f):
        def wrapper(*args, **kwargs):
            for i in range(n):
                try:
                    return f(*args, **kwargs)
                except AssertionError:
                    if i == n - 1:
                        raise
        wrapper.__name__ = f.__name__
        wrapper.__doc__ = f.__doc__
        return wrapper
    return decorate


def simple_forward(sym, ctx=None, is_train=False, **inputs):
    """Forward ``sym`` on numpy ``inputs``; the output (or list of outputs) as numpy."""
    ctx = ctx or default_context()
    exe = sym.bind(ctx, args={k: nd.array(v, ctx=ctx) for k, v in inputs.items()})
    exe.forward(is_train=is_train)
    outs = [o.asnumpy() for o in exe.outputs]
    return outs[0] if len(outs) == 1 else outs


@contextlib.contextmanager
def discard_stderr():
    """Silence file descriptor 2 inside the ``with`` block."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        yield
        return
    saved = os.dup(fd)
    with open(os.devnull, 'w') as sink:
        os.dup2(sink.fileno(), fd)
        try:
            yield
        finally:
            os.dup2(saved, fd)
            os.close(saved)


@contextlib.contextmanager
def environment(*args):
    """Set environment variables inside a ``with`` block, restoring them after.

    ``environment('NAME', 'value')`` or ``environment({'A': '1', 'B': None})``;
    ``None`` unsets a variable.
    """
    if len(args) == 1 and isinstance(args[0], dict):
        pairs = dict(args[0])
    elif len(args) == 2:
        pairs = {args[0]: args[1]}
    else:
        raise FFError('environment: expected (name, value) or one dict. Received: %r' % (args,))
    saved = {k: os.environ.get(k) for k in pairs}

    def apply(d):
        for k, v in d.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = str(v)
    apply(pairs)
    try:
        yield
    finally:
        nd.waitall()
        apply(saved)


def use_np(func):
    """MXNet's ``mx.np`` switch. ffnumba has no ``mx.np``: the decorated function
    raises :class:`~ffnumba.base.FFError` when called."""
    def wrapper(*args, **kwargs):
        raise FFError('%s needs mx.np (numpy-compatible arrays), which ffnumba does not '
                      'provide' % getattr(func, '__name__', func))
    wrapper.__name__ = getattr(func, '__name__', 'use_np')
    return wrapper


def list_gpus():
    """Indices of the visible GPUs."""
    from ..context import num_gpus
    return list(range(num_gpus()))


def compare_ndarray_tuple(t1, t2, rtol=None, atol=None):
    """Compare two (nested tuples of) NDArrays; ``None`` on either side skips."""
    if t1 is None or t2 is None:
        return
    if isinstance(t1, (tuple, list)):
        for s1, s2 in zip(t1, t2):
            compare_ndarray_tuple(s1, s2, rtol, atol)
    else:
        assert_almost_equal(t1, t2, rtol=rtol, atol=atol)


def compare_optimizer(opt1, opt2, shape, dtype, w_stype='default', g_stype='default',
                      rtol=1e-4, atol=1e-5, compare_states=True, ntensors=1):
    """One update of ``opt1`` and ``opt2`` from the same random weight and gradient;
    states and weights must agree (MXNet ``compare_optimizer``, dense storage only)."""
    if w_stype != 'default' or g_stype != 'default':
        raise FFError('compare_optimizer: only dense storage is supported. Received: '
                      'w_stype=%r, g_stype=%r' % (w_stype, g_stype))
    from .. import random as _random
    shapes = shape if isinstance(shape, list) else [shape]
    ctx = default_context()
    for i, s in enumerate(shapes[:max(ntensors, 1)]):
        w2 = _random.uniform(shape=s, ctx=ctx, dtype=dtype)
        g2 = _random.uniform(shape=s, ctx=ctx, dtype=dtype)
        w1, g1 = w2.copy(), g2.copy()
        st1 = opt1.create_state_multi_precision(i, w1)
        st2 = opt2.create_state_multi_precision(i, w2)
        if compare_states:
            compare_ndarray_tuple(st1, st2)
        opt1.update_multi_precision(i, w1, g1, st1)
        opt2.update_multi_precision(i, w2, g2, st2)
        if compare_states:
            compare_ndarray_tuple(st1, st2, rtol=rtol, atol=atol)
        assert_almost_equal(w1, w2, rtol=rtol, atol=atol)


def same_symbol_structure(sym1, sym2):
    """True when the two graphs have the same operator at every node position."""
    import json
    n1 = json.loads(sym1.tojson())['nodes']
    n2 = json.loads(sym2.tojson())['nodes']
    return all(a['op'] == b['op'] for a, b in zip(n1, n2))


def gen_buckets_probs_with_ppf(ppf, nbuckets):
    """``nbuckets`` equal-probability buckets from a quantile function ``ppf``."""
    if nbuckets <= 0:
        raise FFError('gen_buckets_probs_with_ppf: nbuckets must be positive')
    probs = [1.0 / nbuckets] * nbuckets
    buckets = [(ppf(i / float(nbuckets)), ppf((i + 1) / float(nbuckets)))
               for i in range(nbuckets)]
    return buckets, probs


def mean_check(generator, mu, sigma, nsamples=1000000):
    """True when the sample mean of ``generator(nsamples)`` is within 3 standard errors of mu."""
    m = np.asarray(_host(generator(nsamples))).mean()
    half = 3 * sigma / np.sqrt(nsamples)
    return bool(mu - half < m < mu + half)


def var_check(generator, sigma, nsamples=1000000):
    """True when the sample variance is within 3 standard errors of ``sigma**2``
    (the error of a normal sample's variance, ``sigma**2 * sqrt(2 / (n - 1))``)."""
    v = np.asarray(_host(generator(nsamples))).var(ddof=1)
    half = 3 * sigma ** 2 * np.sqrt(2.0 / (nsamples - 1))
    return bool(sigma ** 2 - half < v < sigma ** 2 + half)


def chi_square_check(generator, buckets, probs, nsamples=1000000):
    """Pearson's chi-square test of ``generator(nsamples)`` against bucket probabilities.

    ``buckets``: ``(low, high)`` ranges (continuous) or the values (discrete).
    Needs scipy. Returns ``(p_value, observed, expected)``.
    """
    import scipy.stats as ss
    samples = np.asarray(_host(generator(nsamples))).reshape(-1)
    if len(probs) != len(buckets):
        raise FFError('chi_square_check: %d buckets but %d probabilities'
                      % (len(buckets), len(probs)))
    expected = (nsamples * np.asarray(probs, dtype=np.float32)).astype(np.int64)
    obs = np.zeros(len(buckets), dtype=np.int64)
    if isinstance(buckets[0], (list, tuple)):
        edges = np.asarray([e for b in buckets for e in b], dtype=np.float32)
        ids = np.searchsorted(edges, samples, side='right') // 2
        for i in range(len(buckets)):
            obs[i] = np.sum(ids == i)
    else:
        for i, v in enumerate(buckets):
            obs[i] = np.sum(samples == v)
    _, p = ss.chisquare(f_obs=obs, f_exp=expected * (obs.sum() / max(expected.sum(), 1)))
    return p, obs, expected


def verify_generator(generator, buckets, probs, nsamples=1000000, nrepeat=5, success_rate=0.2,
                     alpha=0.05):
    """Repeat :func:`chi_square_check`; at least ``success_rate`` of the runs need p > alpha.

    Raises
    ------
    AssertionError
        With the p values and frequencies.
    """
    runs = [chi_square_check(generator, buckets, probs, nsamples) for _ in range(nrepeat)]
    ps = [r[0] for r in runs]
    if (np.asarray(ps) > alpha).sum() < nrepeat * success_rate:
        raise AssertionError('Generator test fails, Chi-square p=%s, obs_freq=%s, '
                             'expected_freq=%s, buckets=%s, probs=%s'
                             % (ps, [r[1] for r in runs], [r[2] for r in runs], buckets, probs))
    return ps
