"""Scalar special functions for kernel bodies: floor/round family, digamma, erfinv.

Plain ``@njit`` functions without signatures, so both the CPU template loops
and the ``@cuda.jit`` twins call them (STYLE.md). They return floats for
every input, inf and nan included (``math.floor`` in numba returns an int and
fails on inf/nan), and never raise: under the CUDA simulator the Python
``math`` module runs, which raises ``ValueError`` outside a domain, so every
body checks its domain before calling into ``math``.

Sources
-------
* digamma: the recurrence ``psi(x) = psi(x + 1) - 1/x`` up to ``x >= 6``, then
  the asymptotic series ``ln x - 1/(2x) - sum B_2k / (2k x^2k)``; reflection
  ``psi(x) = psi(1 - x) - pi / tan(pi x)`` for ``x < 0`` (Abramowitz & Stegun
  6.3.5, 6.3.7, 6.3.18).
* erfinv: M. Giles, "Approximating the erfinv function", GPU Computing Gems
  (2011), single-precision polynomial as the start, then two Newton steps on
  ``erf(y) = x`` in float64 (each roughly doubles the correct digits).
"""
import math

from numba import njit

__all__ = ['ffloor', 'fceil', 'ftrunc', 'fround', 'frint', 'digamma', 'erfinv', 'lgamma',
           'gamma']

_body = njit(error_model='numpy')

#: 2**52: every float at or above it is already an integer.
_BIG = 4503599627370496.0


@_body
def ffloor(q):
    """floor(q) as a float; keeps inf, nan and -0.0."""
    if not abs(q) < _BIG:
        return q
    t = float(int(q))
    if t > q:
        return t - 1.0
    if t == 0.0:
        return q * 0.0           # -0.0 stays -0.0
    return t


@_body
def fceil(q):
    """ceil(q) as a float (``-floor(-q)``)."""
    return -ffloor(-q)


@_body
def ftrunc(q):
    """Round toward zero (MXNet ``trunc`` and ``fix``)."""
    return ffloor(q) if q >= 0 else -ffloor(-q)


@_body
def fround(q):
    """Round half away from zero (MXNet ``round``: 2.5 -> 3, -2.5 -> -3)."""
    if q >= 0:
        f = ffloor(q)
        return f + 1.0 if q - f >= 0.5 else f
    f = ffloor(-q)
    return -(f + 1.0) if -q - f >= 0.5 else -f


@_body
def frint(q):
    """MXNet ``rint``: nearest integer, a tie goes down (1.5 -> 1, -1.5 -> -2).

    MXNet 1.9.1 picks ``floor`` when ``|x - floor| <= |x - ceil|`` (checked:
    ``rint([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5]) = [-3, -2, -1, 0, 1, 2]``);
    numpy's ``rint`` rounds ties to even instead.
    """
    f = ffloor(q)
    return f if q - f <= 0.5 else f + 1.0


@_body
def _is_pole(x):
    """x is 0 or a negative integer (a pole of gamma and digamma)."""
    return x <= 0 and ffloor(x) == x


@_body
def gamma(x):
    """Gamma function; nan at the poles (0, -1, -2, ...), inf past overflow."""
    if x != x:
        return x
    if _is_pole(x):
        return math.nan
    if x > 171.7:
        return math.inf
    return math.gamma(x)


@_body
def lgamma(x):
    """ln |Gamma(x)|; inf at the poles."""
    if x != x:
        return x
    if _is_pole(x) or abs(x) == math.inf:
        return math.inf
    return math.lgamma(x)


@_body
def digamma(x):
    """psi(x) = d ln|Gamma(x)| / dx; nan at the poles (see the module docstring)."""
    if x != x or _is_pole(x):
        return math.nan
    if x == math.inf:
        return x
    adj = 0.0
    if x < 0:
        adj = -math.pi / math.tan(math.pi * x)
        x = 1.0 - x
    r = 0.0
    while x < 6.0:
        r -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    t = f * (-1.0 / 12 + f * (1.0 / 120 + f * (-1.0 / 252 + f * (1.0 / 240
                                                                 + f * (-1.0 / 132)))))
    return adj + r + math.log(x) - 0.5 / x + t


@_body
def erfinv(x):
    """Inverse error function on [-1, 1]; +-inf at +-1, nan outside."""
    if x != x or x < -1.0 or x > 1.0:
        return math.nan
    if x == 1.0:
        return math.inf
    if x == -1.0:
        return -math.inf
    x = float(x)
    w = -math.log((1.0 - x) * (1.0 + x))
    if w < 5.0:
        w = w - 2.5
        p = 2.81022636e-08
        p = 3.43273939e-07 + p * w
        p = -3.5233877e-06 + p * w
        p = -4.39150654e-06 + p * w
        p = 0.00021858087 + p * w
        p = -0.00125372503 + p * w
        p = -0.00417768164 + p * w
        p = 0.246640727 + p * w
        p = 1.50140941 + p * w
    else:
        w = math.sqrt(w) - 3.0
        p = -0.000200214257
        p = 0.000100950558 + p * w
        p = 0.00134934322 + p * w
        p = -0.00367342844 + p * w
        p = 0.00573950773 + p * w
        p = -0.0076224613 + p * w
        p = 0.00943887047 + p * w
        p = 1.00167406 + p * w
        p = 2.83297682 + p * w
    y = p * x
    for _ in range(2):      # Newton on erf(y) - x = 0; erf'(y) = 2/sqrt(pi) exp(-y^2)
        d = 1.1283791670955126 * math.exp(-y * y)
        if d > 0:
            y -= (math.erf(y) - x) / d
    return y
