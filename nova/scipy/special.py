"""nova.scipy.special: special functions built from nova.numpy (their gradients come from it),
as jax.scipy.special / scipy.special.

Algorithms: gammaln by the Lanczos approximation (g = 7, 9 coefficients; Lanczos 1964, the
coefficients of Godfrey's table as in Numerical Recipes 3rd ed. sec. 6.1) with the reflection
formula below 1/2; digamma by the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 6 and the
asymptotic series (Abramowitz & Stegun 6.3.18), reflected below 1/2 (A&S 6.3.7); erfc as
1 - erf below 2 and by its continued fraction (A&S 7.1.14) above; erfinv by Giles' polynomial
approximations (M. Giles, "Approximating the erfinv function", GPU Computing Gems, 2010) then
two Newton steps on erf (float64 accuracy); log_ndtr by the asymptotic series (A&S 26.2.12)
below -5. All take float32 or float64 (ints and bools become float32) and broadcast their
arguments.
"""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova.numpy_impl.util import normalize_axes, promote

__all__ = [
    "betaln",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfinv",
    "expit",
    "factorial",
    "gamma",
    "gammaln",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "multigammaln",
    "ndtr",
    "ndtri",
    "softmax",
    "xlog1py",
    "xlogy",
]


def _float(*args):
    return promote("special", *args, to_inexact=True)


def expit(x):
    """The logistic function 1 / (1 + exp(-x)) (scipy.special.expit), without overflow."""
    from nova import lax

    (x,) = _float(x)
    return lax.logistic(x)


def logit(p):
    """log(p / (1 - p)) (scipy.special.logit): -inf at 0, inf at 1, NaN outside [0, 1]."""
    (p,) = _float(p)
    return jnp.log(p) - jnp.log1p(-p)


def xlogy(x, y):
    """x * log(y), 0 where x == 0 (even for y == 0), as scipy.special.xlogy."""
    x, y = _float(x, y)
    safe = jnp.where(x == 0, jnp.ones_like(y), y)
    return jnp.where(x == 0, jnp.zeros_like(x), x * jnp.log(safe))


def xlog1py(x, y):
    """x * log1p(y), 0 where x == 0 (even for y == -1), as scipy.special.xlog1py."""
    x, y = _float(x, y)
    safe = jnp.where(x == 0, jnp.zeros_like(y), y)
    return jnp.where(x == 0, jnp.zeros_like(x), x * jnp.log1p(safe))


def entr(x):
    """-x log x for x > 0, 0 at 0, -inf for x < 0 (scipy.special.entr)."""
    (x,) = _float(x)
    safe = jnp.where(x > 0, x, jnp.ones_like(x))
    return jnp.where(x > 0, -x * jnp.log(safe),
                     jnp.where(x == 0, jnp.zeros_like(x), jnp.full_like(x, -jnp.inf)))


def erf(x):
    """The error function (scipy.special.erf)."""
    from nova import lax

    (x,) = _float(x)
    return lax.erf(x)


def _erfc_cf_denominator(x, terms: int = 60):
    """t with erfc(x) = exp(-x^2) / (sqrt(pi) t) for x >= 2: A&S 7.1.14's continued fraction
    x + (1/2) / (x + 1 / (x + (3/2) / (x + ...))), evaluated from its tail."""
    t = x
    for k in range(terms, 0, -1):
        t = x + (k / 2.0) / t
    return t


def _erfc_cf(x):
    return jnp.exp(-x * x) / (math.sqrt(math.pi) * _erfc_cf_denominator(x))


def erfc(x):
    """1 - erf(x) without cancellation for large x (scipy.special.erfc): 1 - erf below 2, the
    continued fraction above (relative error ~1e-15 in float64), 2 - erfc(-x) for x < -2."""
    from nova import lax

    (x,) = _float(x)
    a = jnp.abs(x)
    big = jnp.where(a >= 2, a, jnp.full_like(a, 2.0))
    tail = _erfc_cf(big)
    tail = jnp.where(x < 0, 2.0 - tail, tail)
    return jnp.where(a >= 2, tail, 1.0 - lax.erf(x))


def _giles(w):
    """Giles' single-precision erfinv polynomials in w = -log((1 - y)(1 + y)): the central one
    for w < 5, the tail one (in sqrt(w) - 3) above; multiply by y."""
    c = w - 2.5
    p = jnp.full_like(w, 2.81022636e-08)
    for k in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):
        p = k + p * c
    t = jnp.sqrt(jnp.where(w >= 5, w, jnp.full_like(w, 5.0))) - 3.0
    q = jnp.full_like(w, -0.000200214257)
    for k in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):
        q = k + q * t
    return jnp.where(w < 5, p, q)


def erfinv(y):
    """The inverse of erf on (-1, 1) (scipy.special.erfinv): +-inf at +-1, NaN outside. Giles'
    approximation refined by two Newton steps on erf, so float64 results are accurate to a
    few ulp away from the tails (|y| < 1 - 1e-12)."""
    from nova import lax

    (y,) = _float(y)
    inside = jnp.abs(y) < 1
    ys = jnp.where(inside, y, jnp.zeros_like(y))
    w = -jnp.log((1.0 - ys) * (1.0 + ys))
    x = _giles(w) * ys
    for _ in range(2):  # Newton: erf(x) - y = 0, erf' = 2 / sqrt(pi) exp(-x^2)
        x = x - (lax.erf(x) - ys) / ((2.0 / math.sqrt(math.pi)) * jnp.exp(-x * x))
    edge = jnp.where(jnp.abs(y) == 1, jnp.sign(y) * jnp.inf, jnp.full_like(y, jnp.nan))
    return jnp.where(inside, x, edge)


def ndtr(x):
    """The standard normal CDF (scipy.special.ndtr): erfc(-x / sqrt(2)) / 2."""
    (x,) = _float(x)
    return 0.5 * erfc(-x / math.sqrt(2.0))


def ndtri(p):
    """The inverse of ndtr on (0, 1) (scipy.special.ndtri): -inf at 0, inf at 1."""
    (p,) = _float(p)
    return math.sqrt(2.0) * erfinv(2.0 * p - 1.0)


def log_ndtr(x):
    """log(ndtr(x)) without underflow for very negative x (scipy.special.log_ndtr): below
    -2 sqrt(2) the log of erfc's continued fraction, -z^2 - log(2 sqrt(pi) t) with
    z = -x / sqrt(2) (no exp to underflow); log1p(-ndtr(-x)) above 0 (no cancellation where
    ndtr nears 1); log(ndtr(x)) between."""
    (x,) = _float(x)
    cut = -2.0 * math.sqrt(2.0)
    z = jnp.where(x < cut, -x, jnp.full_like(x, -cut)) / math.sqrt(2.0)
    tail = -z * z - jnp.log(2.0 * math.sqrt(math.pi) * _erfc_cf_denominator(z))
    hi = jnp.where(x > 0, x, jnp.zeros_like(x))
    mid = jnp.where((x >= cut) & (x <= 0), x, jnp.zeros_like(x))
    return jnp.where(x < cut, tail, jnp.where(x > 0, jnp.log1p(-ndtr(-hi)), jnp.log(ndtr(mid))))


_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012,
            9.9843695780195716e-6, 1.5056327351493116e-7)


def _lgamma_right(x):
    """log|Gamma(x)| for x >= 1/2 (Lanczos)."""
    z = x - 1.0
    a = jnp.full_like(z, _LANCZOS[0])
    for k, c in enumerate(_LANCZOS[1:], start=1):
        a = a + c / (z + k)
    t = z + _LANCZOS_G + 0.5
    return 0.5 * math.log(2 * math.pi) + (z + 0.5) * jnp.log(t) - t + jnp.log(a)


def gammaln(x):
    """log|Gamma(x)| (scipy.special.gammaln, jax.lax.lgamma): inf at 0 and the negative
    integers. Lanczos for x >= 1/2, the reflection log(pi / |sin(pi x)|) - gammaln(1 - x)
    below."""
    (x,) = _float(x)
    right = jnp.where(x >= 0.5, x, 1.0 - x)
    lg = _lgamma_right(right)
    # sin(pi x) for the reflection, exact at integers (0 there -> inf)
    frac = x - jnp.floor(x)
    s = jnp.abs(jnp.sin(math.pi * frac))
    left = math.log(math.pi) - jnp.log(s) - lg
    return jnp.where(x >= 0.5, lg, left)


def gamma(x):
    """The gamma function (scipy.special.gamma): exp(gammaln(x)) with Gamma's sign (negative
    between -2k-1 and -2k); inf at the poles 0, -1, -2, ..."""
    (x,) = _float(x)
    sign = jnp.where((x < 0) & (jnp.floor(x) % 2 == 1), -1.0, 1.0)
    return sign * jnp.exp(gammaln(x))


def factorial(n, exact: bool = False):
    """n! as Gamma(n + 1) (scipy.special.factorial with exact=False); 0 for negative n.
    Raises NotImplementedError for exact=True (as jax.scipy.special.factorial)."""
    if exact:
        raise NotImplementedError("factorial: exact=True is not supported (values are floats)")
    (n,) = _float(n)
    return jnp.where(n < 0, jnp.zeros_like(n), gamma(n + 1.0))


def betaln(a, b):
    """log|B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b) (scipy.special.betaln)."""
    a, b = _float(a, b)
    return gammaln(a) + gammaln(b) - gammaln(a + b)


def multigammaln(a, d: int):
    """The log of the multivariate gamma function of dimension d (scipy.special.multigammaln):
    d (d - 1) / 4 log(pi) + sum_j gammaln(a - j / 2). Raises ValueError for d < 1."""
    d = int(d)
    if d < 1:
        raise ValueError(f"multigammaln: d must be a positive int, got {d}")
    (a,) = _float(a)
    out = jnp.full_like(a, d * (d - 1) / 4.0 * math.log(math.pi))
    for j in range(d):
        out = out + gammaln(a - j / 2.0)
    return out


def digamma(x):
    """psi(x) = d/dx log Gamma(x) (scipy.special.digamma, jax.lax.digamma): -inf at 0 and NaN
    at the negative integers, as SciPy. Recurrence to x >= 6, then A&S 6.3.18; reflection
    below 1/2."""
    (x,) = _float(x)
    r = jnp.where(x >= 0.5, x, 1.0 - x)
    acc = jnp.zeros_like(r)
    for _ in range(6):
        small = r < 6
        acc = acc - jnp.where(small, 1.0 / r, jnp.zeros_like(r))
        r = jnp.where(small, r + 1.0, r)
    z2 = 1.0 / (r * r)
    series = z2 * (1.0 / 12 - z2 * (1.0 / 120 - z2 * (1.0 / 252 - z2 * (
        1.0 / 240 - z2 * (1.0 / 132 - z2 * (691.0 / 32760 - z2 / 12.0))))))
    right = acc + jnp.log(r) - 0.5 / r - series
    frac = x - jnp.floor(x)
    tan = jnp.tan(math.pi * frac)
    left = right - math.pi / tan
    out = jnp.where(x >= 0.5, right, left)
    pole = (x <= 0) & (frac == 0)
    return jnp.where(pole, jnp.where(x == 0, -jnp.inf, jnp.nan), out)


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along axis (scipy.special.softmax; nova.nn.functional.softmax)."""
    from nova.nn import functional as F

    (x,) = _float(x)
    return F.softmax(x, axis=axis)


def log_softmax(x, axis=-1):
    """x - logsumexp(x) along axis (scipy.special.log_softmax)."""
    from nova.nn import functional as F

    (x,) = _float(x)
    return F.log_softmax(x, axis=axis)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """log(sum(b * exp(a))) over `axis`, computed stably (scipy.special.logsumexp).

    a: array (int and bool become float32); axis None, int or tuple (negative counts from the
    end); b: weights broadcastable with a (where b == 0 the term is left out even if a is inf);
    keepdims keeps the reduced axes as size 1. Returns the result with a's shape less `axis`, or
    `(log|s|, sign(s))` when return_sign=True (sign 0 for an empty or all -inf sum); without it a
    negative weighted sum gives NaN, as SciPy.

    Stability: exp runs on a shifted by (about) the maximum, so nothing overflows; a row of all
    -inf gives -inf, a +inf entry gives +inf. The shift is floor(max), which is exact enough for
    stability and not differentiable, so the gradient is exactly softmax(a) * b (no cotangent
    reaches the argmax) and stays finite for rows that hold -inf entries besides finite ones.
    Raises ValueError for an axis out of range, ShapeError when a and b do not broadcast.
    """
    if b is None:
        (x,) = promote("logsumexp", a, to_inexact=True)
    else:
        x, w = promote("logsumexp", a, b, to_inexact=True)
        # SciPy's rule: a zero weight removes its term, whatever a holds there.
        x = jnp.where(w != 0, x, -jnp.inf)
    axes = normalize_axes(axis, x.ndim)
    m = jnp.max(x, axis=axes, keepdims=True, initial=-jnp.inf)
    shift = jnp.floor(m)  # floor is not differentiable: no cotangent flows into the max
    shift = jnp.where(jnp.isfinite(shift), shift, jnp.zeros_like(shift))
    e = jnp.exp(x - shift)
    if b is not None:
        e = w * e
    s = jnp.sum(e, axis=axes, keepdims=True)
    if return_sign:
        sign = jnp.sign(s)
        s = jnp.abs(s)
    out = jnp.log(s) + shift
    if not keepdims:
        out = jnp.squeeze(out, axis=axes) if axes else out
        if return_sign:
            sign = jnp.squeeze(sign, axis=axes) if axes else sign
    return (out, sign) if return_sign else out
