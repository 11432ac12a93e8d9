"""nova.scipy.special: special functions built from nova.numpy (their gradients come from it),
as jax.scipy.special / scipy.special.

Algorithms: gammaln by the Lanczos approximation (g = 7, 9 coefficients; Lanczos 1964, the
coefficients of Godfrey's table as in Numerical Recipes 3rd ed. sec. 6.1) with the reflection
formula below 1/2; digamma by the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10 and the
asymptotic series (Abramowitz & Stegun 6.3.18), reflected below 1/2 (A&S 6.3.7); erfc as
1 - erf below 2 and by its continued fraction (A&S 7.1.14) above; erfinv by Giles' polynomial
approximations (M. Giles, "Approximating the erfinv function", GPU Computing Gems, 2010) then
two Newton steps on erf (float64 accuracy); log_ndtr by the asymptotic series (A&S 26.2.12)
below -5. All take float32 or float64 (ints and bools become float32) and broadcast their
arguments.

The second group: the regularized incomplete gamma functions by their series below a + 1 and
Legendre's continued fraction above (Numerical Recipes 3rd ed. sec. 6.2, Lentz's method), the
regularized incomplete beta by its continued fraction (NR sec. 6.4) with the symmetry
I_x(a, b) = 1 - I_{1-x}(b, a) above the mean; the Hurwitz zeta function by Euler-Maclaurin
summation (9 terms, then 12 Bernoulli corrections; as Cephes' zeta.c) and polygamma from it;
E1 by its power series up to 1 and its continued fraction beyond (A&S 5.1.11, 5.1.22); Ei by
its series below 40 and the asymptotic series above; erfcx from erfc's continued fraction;
i0 / i0e from Cephes' Chebyshev expansions (nova.numpy.i0), i1 / i1e by the power series
up to 8 and as i0e's derivative beyond.

The third group (each function's docstring names its sources): expn by its series and
continued fraction (A&S 5.1.12, 5.1.22), dawsn by Rybicki's sampling formula, fresnel and sici
by their series and the continued fractions of erfc / E1 at complex arguments (carried as pairs
of reals: Nova has no complex dtype, so the complex-valued sph_harm_y and wofz are left out),
spence by the Bernoulli series of the dilogarithm, owens_t by Gauss-Legendre quadrature, hyp1f1
and hyp2f1 by their series with the Kummer, Pfaff, Euler and 1 - x transformations, bessel_jn
by Miller's backward recurrence.
"""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova.numpy_impl.util import normalize_axes, promote

__all__ = [
    "bernoulli",
    "bessel_jn",
    "beta",
    "betainc",
    "betaln",
    "boxcox",
    "boxcox1p",
    "comb",
    "dawsn",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfcx",
    "erfinv",
    "exp1",
    "expi",
    "expit",
    "expn",
    "factorial",
    "fresnel",
    "gamma",
    "gammainc",
    "gammaincc",
    "gammaln",
    "gammasgn",
    "hyp1f1",
    "hyp2f1",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "kl_div",
    "log_ndtr",
    "log_softmax",
    "loggamma",
    "logit",
    "logsumexp",
    "multigammaln",
    "ndtr",
    "ndtri",
    "owens_t",
    "poch",
    "polygamma",
    "rel_entr",
    "sici",
    "softmax",
    "spence",
    "xlog1py",
    "xlogy",
    "zeta",
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
    at the negative integers, as SciPy. Recurrence to x >= 10, then A&S 6.3.18 (float64 to
    ~1e-15); reflection below 1/2."""
    (x,) = _float(x)
    r = jnp.where(x >= 0.5, x, 1.0 - x)
    acc = jnp.zeros_like(r)
    for _ in range(10):  # to x >= 10: the series' first omitted term is ~0.44 / x^16
        small = r < 10
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


# --- second group ---------------------------------------------------------------------------


def _lax():
    from nova import lax

    return lax


def _safe(cond, x, fill):
    """x where cond, else `fill`: the input of a branch that select() later discards, kept in
    that branch's domain so its value and derivative stay finite."""
    return jnp.where(cond, x, jnp.full_like(x, fill))


def gammasgn(x):
    """The sign of Gamma(x) (scipy.special.gammasgn): 1 for x > 0, (-1)^ceil(-x) between the
    negative integers, NaN at the poles 0 (-0.0 included: -1, as SciPy), -1, -2, ...
    (scipy returns 1 at +0)."""
    (x,) = _float(x)
    neg = x < 0
    odd = jnp.floor(-x) % 2 == 0  # x in (-1, 0), (-3, -2), ...: Gamma < 0
    out = jnp.where(neg & odd, -1.0, 1.0).astype(x.dtype)
    pole = neg & (x == jnp.floor(x))
    return jnp.where(pole, jnp.nan, out)


def loggamma(x):
    """log Gamma(x) for real x (scipy.special.loggamma on reals): gammaln for x > 0, NaN for
    x < 0 (where the principal log is complex), inf at 0."""
    (x,) = _float(x)
    return jnp.where(x < 0, jnp.nan, gammaln(x))


def beta(a, b):
    """The beta function B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b) (scipy.special.beta), with
    the signs of the three gammas for negative arguments."""
    a, b = _float(a, b)
    sign = gammasgn(a) * gammasgn(b) * gammasgn(a + b)
    return sign * jnp.exp(gammaln(a) + gammaln(b) - gammaln(a + b))


def poch(z, m):
    """The Pochhammer symbol (z)_m = Gamma(z + m) / Gamma(z) (scipy.special.poch), by
    gammaln with the gammas' signs."""
    z, m = _float(z, m)
    sign = gammasgn(z + m) * gammasgn(z)
    out = sign * jnp.exp(gammaln(z + m) - gammaln(z))
    # z = -n at a pole of Gamma with integer m: the finite product (-1)^m n! / (n - m)! (0 once
    # m > n; for m < 0, 1 / ((z + m) ... (z - 1)))
    pole = (z <= 0) & (z == jnp.floor(z)) & (m == jnp.floor(m))
    n = _safe(pole, -z, 0.0)
    mm = _safe(pole, m, 0.0)
    finite = jnp.where(mm % 2 == 0, 1.0, -1.0) * jnp.exp(gammaln(n + 1.0) - gammaln(n - mm + 1.0))
    finite = jnp.where(n - mm + 1.0 <= 0, jnp.zeros_like(finite), finite)
    out = jnp.where(pole, finite, out)
    return jnp.where(m == 0, jnp.ones_like(z), out)


def comb(N, k, *, exact=False, repetition=False):
    """The number of combinations of N things taken k at a time (scipy.special.comb with
    exact=False): exp(gammaln(N + 1) - gammaln(k + 1) - gammaln(N - k + 1)), rounded when N and
    k are integers; 0 when k > N, k < 0 or N < 0. repetition=True counts multisets,
    comb(N + k - 1, k). Raises NotImplementedError for exact=True."""
    if exact:
        raise NotImplementedError("comb: exact=True is not supported (values are floats)")
    N, k = _float(N, k)
    if repetition:
        # multisets: comb(N + k - 1, k), which is 1 for k = 0 whatever N >= 0 (SciPy's)
        empty = (k == 0) & (N >= 0)
        return jnp.where(empty, jnp.ones_like(N), comb(N + k - 1, k))
    ok = (k >= 0) & (N >= 0) & (k <= N)
    Ns = jnp.where(ok, N, jnp.ones_like(N))
    ks = jnp.where(ok, k, jnp.zeros_like(k))
    v = jnp.exp(gammaln(Ns + 1) - gammaln(ks + 1) - gammaln(Ns - ks + 1))
    integral = (jnp.floor(N) == N) & (jnp.floor(k) == k)
    v = jnp.where(integral, jnp.round(v), v)
    return jnp.where(ok, v, jnp.zeros_like(v))


def rel_entr(x, y):
    """x log(x / y) elementwise (scipy.special.rel_entr): 0 where x = 0 and y >= 0, inf where
    x < 0 or y <= 0 otherwise."""
    x, y = _float(x, y)
    pos = (x > 0) & (y > 0)
    v = x * jnp.log(_safe(pos, x, 1.0) / _safe(pos, y, 1.0))
    zero = (x == 0) & (y >= 0)
    return jnp.where(pos, v, jnp.where(zero, jnp.zeros_like(x), jnp.full_like(x, jnp.inf)))


def kl_div(x, y):
    """x log(x / y) - x + y elementwise (scipy.special.kl_div): y where x = 0 and y >= 0, inf
    where x < 0 or y <= 0 otherwise."""
    x, y = _float(x, y)
    pos = (x > 0) & (y > 0)
    xs, ys = _safe(pos, x, 1.0), _safe(pos, y, 1.0)
    v = xs * jnp.log(xs / ys) - xs + ys
    zero = (x == 0) & (y >= 0)
    return jnp.where(pos, v, jnp.where(zero, y, jnp.full_like(x, jnp.inf)))


def boxcox(x, lmbda):
    """The Box-Cox transform (scipy.special.boxcox): (x^lmbda - 1) / lmbda, log(x) at
    lmbda = 0; computed as expm1(lmbda log x) / lmbda (no cancellation for small lmbda)."""
    x, lm = _float(x, lmbda)
    lx = jnp.log(x)
    zero = lm == 0
    return jnp.where(zero, lx, jnp.expm1(lm * lx) / _safe(~zero, lm, 1.0))


def boxcox1p(x, lmbda):
    """boxcox(1 + x, lmbda) accurate for small x (scipy.special.boxcox1p): via log1p(x)."""
    x, lm = _float(x, lmbda)
    lx = jnp.log1p(x)
    zero = lm == 0
    return jnp.where(zero, lx, jnp.expm1(lm * lx) / _safe(~zero, lm, 1.0))


def erfcx(x):
    """The scaled complementary error function exp(x^2) erfc(x) (scipy.special.erfcx): by
    erfc's continued fraction above 2 (no overflow or underflow: erfcx(1e10) is ~5.6e-11),
    exp(x^2) erfc(x) below, 2 exp(x^2) - erfcx(-x) for x < -2 (inf below ~ -26.6 in float64)."""
    (x,) = _float(x)
    a = jnp.abs(x)
    big = a >= 2
    ab = _safe(big, a, 2.0)
    tail = 1.0 / (math.sqrt(math.pi) * _erfc_cf_denominator(ab))  # erfcx(|x|), |x| >= 2
    xs = _safe(~big, x, 0.0)
    near = jnp.exp(xs * xs) * erfc(xs)
    xb = _safe(big, x, 2.0)
    neg_tail = 2.0 * jnp.exp(xb * xb) - tail
    return jnp.where(big, jnp.where(x > 0, tail, neg_tail), near)


def _i0e(x):
    from nova.numpy_impl.arrayapi import _i0e as i0e_of_abs

    return i0e_of_abs(jnp.abs(x))


def i0e(x):
    """exp(-|x|) I0(x), the exponentially scaled modified Bessel function of order 0
    (scipy.special.i0e): Cephes' Chebyshev expansions, no overflow for large |x|."""
    (x,) = _float(x)
    return _i0e(x)


def i0(x):
    """The modified Bessel function of the first kind of order 0 (scipy.special.i0)."""
    return jnp.i0(x)


def i1e(x):
    """exp(-|x|) I1(x) (scipy.special.i1e); odd in x. For |x| <= 8 the power series
    (x/2) sum (x^2/4)^k / (k! (k+1)!) (A&S 9.6.10, 30 terms); beyond, I1 = I0' (A&S 9.6.27), so
    i1e = i0e' + sign(x) i0e, the derivative of i0e's Chebyshev expansion taken by forward
    mode (the two terms do not cancel there)."""
    import nova

    (x,) = _float(x)
    small = jnp.abs(x) <= 8.0
    xs = _safe(small, x, 1.0)
    q = xs * xs * 0.25
    term = 0.5 * xs
    acc = term
    for k in range(1, 30):
        term = term * q / (k * (k + 1))
        acc = acc + term
    series = acc * jnp.exp(-jnp.abs(xs))
    xl = _safe(~small, x, 9.0)
    e, de = nova.jvp(_i0e, (xl,), (jnp.ones_like(xl),))
    return jnp.where(small, series, de + jnp.sign(xl) * e)


def i1(x):
    """The modified Bessel function of the first kind of order 1 (scipy.special.i1):
    exp(|x|) i1e(x)."""
    (x,) = _float(x)
    return jnp.exp(jnp.abs(x)) * i1e(x)


def _fori(n, body, init):
    return _lax().fori_loop(0, n, body, init)


def _tiny(x):
    return float(jnp.finfo(x.dtype).tiny) * 1e3


def _gamma_series(a, x, terms=1000):
    # P(a, x) = exp(-x) x^a / Gamma(a + 1) * sum_n x^n / ((a + 1)...(a + n))
    def body(_, c):
        ap, term, total = c
        ap = ap + 1.0
        term = term * x / ap
        return ap, term, total + term

    init = (a, jnp.ones_like(a) / a, jnp.ones_like(a) / a)
    _, _, total = _fori(terms, body, init)
    return total * jnp.exp(-x + a * jnp.log(x) - gammaln(a))


def _gamma_cf(a, x, terms=1000):
    # Q(a, x) = exp(-x) x^a / Gamma(a) * 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - ...)), Lentz
    tiny = _tiny(x)
    b = x + 1.0 - a
    c = jnp.full_like(x, 1.0 / tiny)
    d = 1.0 / b
    h = d

    def body(i, s):
        b, c, d, h = s
        an = -(i + 1.0) * ((i + 1.0) - a)
        b = b + 2.0
        d = an * d + b
        d = jnp.where(jnp.abs(d) < tiny, jnp.full_like(d, tiny), d)
        c = b + an / c
        c = jnp.where(jnp.abs(c) < tiny, jnp.full_like(c, tiny), c)
        d = 1.0 / d
        return b, c, d, h * d * c

    _, _, _, h = _fori(terms, body, (b, c, d, h))
    return jnp.exp(-x + a * jnp.log(x) - gammaln(a)) * h


def _gammainc_pq(a, x):
    a, x = _float(a, x)
    series = x < a + 1.0
    xs, as_ = _safe(series, x, 0.5), _safe(series, a, 1.0)
    xc, ac = _safe(~series, x, 2.0), _safe(~series, a, 1.0)
    p_series = _gamma_series(as_, jnp.maximum(xs, jnp.zeros_like(xs)))
    q_cf = _gamma_cf(ac, xc)
    p = jnp.where(series, p_series, 1.0 - q_cf)
    q = jnp.where(series, 1.0 - p_series, q_cf)
    bad = (a <= 0) | (x < 0) | jnp.isnan(a) | jnp.isnan(x)
    zero = x == 0
    p = jnp.where(zero, jnp.zeros_like(p), p)
    q = jnp.where(zero, jnp.ones_like(q), q)
    inf = jnp.isinf(x) & (x > 0)
    p = jnp.where(inf, jnp.ones_like(p), p)
    q = jnp.where(inf, jnp.zeros_like(q), q)
    return jnp.where(bad, jnp.nan, p), jnp.where(bad, jnp.nan, q)


def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x) = gamma(a, x) / Gamma(a)
    (scipy.special.gammainc), a > 0, x >= 0 (NaN otherwise): its series below a + 1, 1 - the
    continued fraction of Q above (NR 3rd ed. 6.2; 1000 terms: both need ~sqrt(a) of them near
    x = a, so float64 to ~1e-13 at a = 1e3, ~5e-12 at 1e4, less beyond). Differentiable in x
    (and, through the loops, in a)."""
    return _gammainc_pq(a, x)[0]


def gammaincc(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)
    (scipy.special.gammaincc), computed directly in each branch (no cancellation in the
    tail)."""
    return _gammainc_pq(a, x)[1]


def _betacf(a, b, x, terms=300):
    # NR 3rd ed. 6.4's continued fraction for I_x(a, b), Lentz's method
    tiny = _tiny(x)
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = jnp.ones_like(x)
    d = 1.0 - qab * x / qap
    d = jnp.where(jnp.abs(d) < tiny, jnp.full_like(d, tiny), d)
    d = 1.0 / d
    h = d

    def clamp(v):
        return jnp.where(jnp.abs(v) < tiny, jnp.full_like(v, tiny), v)

    def body(i, s):
        c, d, h = s
        m = i + 1.0
        m2 = 2.0 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 / clamp(1.0 + aa * d)
        c = clamp(1.0 + aa / c)
        h = h * d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 / clamp(1.0 + aa * d)
        c = clamp(1.0 + aa / c)
        return c, d, h * d * c

    _, _, h = _fori(terms, body, (c, d, h))
    return h


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b) (scipy.special.betainc), a, b > 0,
    0 <= x <= 1 (NaN otherwise): the continued fraction (NR 3rd ed. 6.4) for
    x < (a + 1) / (a + b + 2), else 1 - I_{1-x}(b, a)."""
    a, b, x = _float(a, b, x)
    inside = (x > 0) & (x < 1)
    xs = _safe(inside, x, 0.5)
    front = jnp.exp(gammaln(a + b) - gammaln(a) - gammaln(b) + a * jnp.log(xs)
                    + b * jnp.log1p(-xs))
    direct = xs < (a + 1.0) / (a + b + 2.0)
    xd, xr = _safe(direct, xs, 0.25), _safe(~direct, xs, 0.75)
    v_direct = front * _betacf(a, b, xd) / a
    v_reflect = 1.0 - front * _betacf(b, a, 1.0 - xr) / b
    v = jnp.where(direct, v_direct, v_reflect)
    v = jnp.where(x == 0, jnp.zeros_like(v), jnp.where(x == 1, jnp.ones_like(v), v))
    bad = (a <= 0) | (b <= 0) | (x < 0) | (x > 1) | jnp.isnan(x)
    return jnp.where(bad, jnp.nan, v)


def _bernoulli_fractions(n):
    from fractions import Fraction

    # Akiyama-Tanigawa: B_0..B_n with B_1 = +1/2; SciPy's convention is B_1 = -1/2
    out = []
    a = [Fraction(0)] * (n + 1)
    for m in range(n + 1):
        a[m] = Fraction(1, m + 1)
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
        out.append(a[0])
    if n >= 1:
        out[1] = -out[1]
    return out


def bernoulli(n):
    """The Bernoulli numbers B_0 ... B_n (scipy.special.bernoulli: B_1 = -1/2), exact
    fractions rounded to float64 (Akiyama-Tanigawa). n: a non-negative Python int."""
    import operator

    n = operator.index(n)
    if n < 0:
        raise ValueError(f"bernoulli: n must be non-negative, got {n}")
    return jnp.asarray([float(b) for b in _bernoulli_fractions(n)], dtype=jnp.float64)


_ZETA_N = 9
_ZETA_TERMS = [float(b / math.factorial(j))  # B_2j / (2j)!, j = 1..12
               for j, b in enumerate(_bernoulli_fractions(24)) if j % 2 == 0 and j > 0]


def _hurwitz_em(xs, qs):
    # Euler-Maclaurin, for s > 1 (and Riemann's s >= 0, where it is the analytic continuation;
    # for negative s the corrections stop shrinking fast enough, so zeta reflects instead)
    total = jnp.zeros_like(xs)
    for k in range(_ZETA_N):
        total = total + jnp.exp(-xs * jnp.log(qs + k))
    w = qs + _ZETA_N
    lw = jnp.log(w)
    total = total + jnp.exp((1.0 - xs) * lw) / (xs - 1.0) + 0.5 * jnp.exp(-xs * lw)
    # + sum_j B_2j / (2j)! * x (x + 1) ... (x + 2j - 2) * w^(-x - 2j + 1)
    fact = xs
    wpow = jnp.exp((-xs - 1.0) * lw)
    inv_w2 = 1.0 / (w * w)
    for j, c in enumerate(_ZETA_TERMS, start=1):
        total = total + c * fact * wpow
        fact = fact * (xs + 2 * j - 1) * (xs + 2 * j)
        wpow = wpow * inv_w2
    return total


def zeta(x, q=None):
    """The Hurwitz zeta function sum_k (k + q)^-x (scipy.special.zeta); q=None gives
    Riemann's zeta (q = 1). Hurwitz: x > 1 and q > 0 (NaN otherwise; inf at x = 1), as SciPy.
    Riemann's is defined for every x != 1: Euler-Maclaurin for x >= 0 (zeta(0) = -1/2), the
    functional equation zeta(x) = 2^x pi^(x-1) sin(pi x / 2) Gamma(1 - x) zeta(1 - x) below
    (zeta(-1) = -1/12; exact zeros at the negative even integers; inf/NaN once Gamma(1 - x)
    overflows, x < ~-170). Euler-Maclaurin:
    the first 9 terms, the integral of the tail, and 12 Bernoulli corrections (Cephes zeta.c's
    scheme), ~1e-15 relative in float64."""
    riemann = q is None
    if riemann:
        q = 1.0
    x, q = _float(x, q)
    if not riemann:
        ok = (x > 1) & (q > 0)
        xs, qs = _safe(ok, x, 2.0), _safe(ok, q, 1.0)
        out = jnp.where(ok, _hurwitz_em(xs, qs), jnp.nan)
        return jnp.where(x == 1, jnp.inf, out)
    direct = x >= 0.0
    xd = _safe(direct & (x != 1), x, 2.0)
    v_direct = _hurwitz_em(xd, jnp.ones_like(xd))
    xr = _safe(~direct, x, -1.0)
    one_minus = 1.0 - xr
    reflected = (jnp.exp2(xr) * jnp.exp((xr - 1.0) * math.log(math.pi))
                 * jnp.sin(0.5 * math.pi * xr) * jnp.exp(gammaln(one_minus))
                 * _hurwitz_em(one_minus, jnp.ones_like(xr)))
    even = (xr == jnp.floor(xr)) & (xr % 2 == 0)
    reflected = jnp.where(even, jnp.zeros_like(reflected), reflected)
    out = jnp.where(direct, v_direct, reflected)
    return jnp.where(x == 1, jnp.inf, jnp.where(jnp.isnan(x), jnp.nan, out))


def polygamma(n, x):
    """The n-th derivative of digamma (scipy.special.polygamma): digamma for n = 0, else
    (-1)^(n+1) n! zeta(n + 1, x). n: non-negative integers (an int or an integer array,
    broadcast with x). For n >= 1, x must be positive (NaN otherwise, from zeta; SciPy
    reflects to negative x)."""
    nn = jnp.asarray(n)
    if not (jnp.issubdtype(nn.dtype, jnp.integer) or nn.dtype == jnp.bool_) and \
            jnp.any(nn != jnp.floor(nn)):
        raise ValueError(f"polygamma: n must be non-negative integers, got {n!r}")
    nf, x = _float(nn, x)
    sign = jnp.where(nf % 2 == 0, -1.0, 1.0)
    fact = jnp.exp(gammaln(nf + 1.0))
    high = sign * fact * zeta(jnp.maximum(nf, jnp.ones_like(nf)) + 1.0, x)
    return jnp.where(nf == 0, digamma(x), jnp.where(nf < 0, jnp.nan, high))


_EULER = 0.5772156649015329


def exp1(x):
    """The exponential integral E1(x) = int_x^inf exp(-t) / t dt (scipy.special.exp1) for
    x > 0 (inf at 0, NaN below): the series -gamma - ln x - sum (-x)^k / (k k!) up to 1
    (A&S 5.1.11), the continued fraction beyond (A&S 5.1.22, 60 levels from the tail)."""
    (x,) = _float(x)
    small = x <= 1.0
    xs = _safe(small & (x > 0), x, 0.5)
    term = jnp.ones_like(xs)
    acc = jnp.zeros_like(xs)
    for k in range(1, 30):
        term = term * (-xs) / k
        acc = acc + term / k
    e_small = -_EULER - jnp.log(xs) - acc
    xl = _safe(~small, x, 2.0)
    # E1(x) = exp(-x) / (x + 1 / (1 + 1 / (x + 2 / (1 + 2 / (x + ...)))))
    t = xl
    for k in range(60, 0, -1):
        t = xl + k / (1.0 + k / t)
    e_large = jnp.exp(-xl) / t
    out = jnp.where(small, e_small, e_large)
    out = jnp.where(x == 0, jnp.inf, out)
    return jnp.where(x < 0, jnp.nan, out)


def expi(x):
    """The exponential integral Ei(x) = -PV int_-x^inf exp(-t) / t dt (scipy.special.expi):
    -E1(-x) for x < 0; for 0 < x < 40 the series gamma + ln x + sum x^k / (k k!) (A&S 5.1.10),
    above the asymptotic series exp(x) / x sum k! / x^k; -inf at 0."""
    (x,) = _float(x)
    neg = x < 0
    e_neg = -exp1(_safe(neg, -x, 1.0))
    mid = (x > 0) & (x < 40.0)
    xm = _safe(mid, x, 1.0)
    term = jnp.ones_like(xm)
    acc = jnp.zeros_like(xm)
    for k in range(1, 120):
        term = term * xm / k
        acc = acc + term / k
    e_mid = _EULER + jnp.log(xm) + acc
    xl = _safe(x >= 40.0, x, 40.0)
    term = jnp.ones_like(xl)
    acc = jnp.ones_like(xl)
    for k in range(1, 25):
        term = term * k / xl
        acc = acc + term
    e_large = jnp.exp(xl) / xl * acc
    out = jnp.where(neg, e_neg, jnp.where(mid, e_mid, e_large))
    out = jnp.where(jnp.isinf(x) & (x > 0), jnp.inf, out)
    return jnp.where(x == 0, -jnp.inf, jnp.where(jnp.isnan(x), jnp.nan, out))


# --- third group ----------------------------------------------------------------------------


def _cdiv(ar, ai, br, bi):
    """(ar + i ai) / (br + i bi) on pairs of reals (Nova has no complex dtype), with b scaled by
    max(|br|, |bi|) first so that |b|^2 cannot overflow."""
    s = jnp.maximum(jnp.abs(br), jnp.abs(bi))
    cr, ci = br / s, bi / s
    den = br * cr + bi * ci
    return (ar * cr + ai * ci) / den, (ai * cr - ar * ci) / den


def _is_int(x):
    return x == jnp.floor(x)


def _gamma_ratio(num, den):
    """prod Gamma(num) / prod Gamma(den), through gammaln (no overflow of the single gammas):
    0 where a denominator argument is a pole, the numerators assumed finite."""
    lg = jnp.zeros_like(num[0])
    sign = jnp.ones_like(num[0])
    zero = jnp.zeros(num[0].shape, dtype=jnp.bool_)
    for v in num:
        lg = lg + gammaln(v)
        sign = sign * gammasgn(v)
    for v in den:
        pole = (v <= 0) & _is_int(v)
        vs = _safe(~pole, v, 1.0)
        lg = lg - gammaln(vs)
        sign = sign * gammasgn(vs)
        zero = zero | pole
    return jnp.where(zero, jnp.zeros_like(lg), sign * jnp.exp(lg))


def expn(n, x):
    """The generalized exponential integral E_n(x) = int_1^inf exp(-x t) / t^n dt
    (scipy.special.expn), elementwise over the broadcast of n and x.

    n: non-negative integers (an int or float array; a non-integer n gives NaN, as JAX's, where
    SciPy truncates it); x >= 0. E_n(0) is 1 / (n - 1) for n >= 2 and inf for n <= 1; NaN for
    n < 0 or x < 0. Float32 or float64 (ints become float32). For 0 < x <= 1 the power series
    A&S 5.1.12 (25 terms), beyond the continued fraction A&S 5.1.22 evaluated from its tail
    (100 levels, Cephes expn.c's form): ~1e-15 relative in float64. Differentiable in x
    (d/dx E_n = -E_{n-1}, by differentiating the expansions).
    """
    n, x = _float(n, x)
    ok = (n >= 0) & _is_int(n) & (x >= 0)
    pos = ok & (x > 0) & (x < jnp.inf)
    ser = pos & (x <= 1.0) & (n >= 1)
    ns, xs = _safe(ser, n, 1.0), _safe(ser, x, 0.5)
    # E_n(x) = (-x)^(n-1) / (n-1)! (psi(n) - ln x) - sum_{k != n-1} (-x)^k / ((k - n + 1) k!)
    term = jnp.ones_like(xs)
    acc = jnp.zeros_like(xs)
    for k in range(25):
        if k:
            term = term * (-xs) / k
        d = k + 1.0 - ns
        acc = acc + jnp.where(d == 0, jnp.zeros_like(d), term / _safe(d != 0, d, 1.0))
    lx = jnp.log(xs)
    sign = jnp.where(jnp.fmod(ns - 1.0, 2.0) == 0, 1.0, -1.0)
    lead = sign * jnp.exp((ns - 1.0) * lx - gammaln(ns)) * (digamma(ns) - lx)
    v_ser = lead - acc
    # E_n(x) = exp(-x) / (x + n - 1 n / (x + n + 2 - 2 (n + 1) / (x + n + 4 - ...))), from the
    # tail: level i holds x + n + 2 (i - 1) - i (n + i - 1) / (level i + 1)
    cf = pos & ~ser
    nc, xc = _safe(cf, n, 1.0), _safe(cf, x, 3.0)
    depth = 100

    def level(j, t):
        i = (depth - j).astype(xc.dtype)
        return xc + nc + 2.0 * (i - 1.0) - i * (nc + i - 1.0) / t

    t = _fori(depth, level, xc + nc + 2.0 * depth)
    v_cf = jnp.exp(-xc) / t
    at0 = jnp.where(n > 1, 1.0 / _safe(n > 1, n - 1.0, 1.0), jnp.full_like(n, jnp.inf))
    out = jnp.where(ser, v_ser, jnp.where(x == 0, at0, jnp.where(x == jnp.inf,
                                                                  jnp.zeros_like(x), v_cf)))
    return jnp.where(ok, out, jnp.nan)


def dawsn(x):
    """Dawson's integral F(x) = exp(-x^2) int_0^x exp(t^2) dt (scipy.special.dawsn), odd in x.

    x: float32 or float64 array (ints become float32). The series sum (-2x^2)^k x / (2k+1)!!
    for |x| < 0.2 (A&S 7.1.4 with erf of an imaginary argument), Rybicki's sampling formula
    F(x) ~ pi^-1/2 sum_{n odd} exp(-(x - n h)^2) / n with h = 1/4 and 12 terms either side of
    the nearest even sample (G. Rybicki, Computers in Physics 3, 1989; Numerical Recipes 3rd ed.
    sec. 6.9) up to 50, the asymptotic series 1/(2x) sum (2k-1)!! / (2x^2)^k (A&S 7.1.23)
    beyond: ~1e-15 relative in float64. Differentiable (F' = 1 - 2 x F).
    """
    (x,) = _float(x)
    a = jnp.abs(x)
    small = a < 0.2
    xs = _safe(small, x, 0.1)
    term = xs
    acc = xs
    for k in range(1, 10):
        term = term * (-2.0 * xs * xs) / (2 * k + 1)
        acc = acc + term
    mid = ~small & (a <= 50.0)
    am = _safe(mid, a, 1.0)
    h = 0.25
    n0 = 2.0 * jnp.round(am * (0.5 / h))  # the even sample nearest x / h
    xp = am - n0 * h  # exact: h is a power of 2
    total = jnp.zeros_like(am)
    for j in range(12):
        n = 2 * j + 1
        e = jnp.exp(2.0 * n * h * xp)
        total = total + math.exp(-(n * h) ** 2) * (e / (n0 + n) + 1.0 / (e * (n0 - n)))
    v_mid = jnp.exp(-xp * xp) * total / math.sqrt(math.pi)
    big = a > 50.0
    xl = _safe(big, a, 100.0)
    u = 0.5 / (xl * xl)
    term = jnp.ones_like(xl)
    acc_l = jnp.ones_like(xl)
    for k in range(1, 9):
        term = term * (2 * k - 1) * u
        acc_l = acc_l + term
    v_big = acc_l * 0.5 / xl
    side = jnp.where(big, v_big, v_mid)
    out = jnp.where(small, acc, jnp.where(x < 0, -side, side))
    return jnp.where(jnp.isnan(x), jnp.nan, out)


def _fresnel_phase(a):
    """cos and sin of pi a^2 / 2 for a >= 0, with a^2 reduced modulo 4 without rounding: a
    splits into a high part of half the significand (its square exact) and the rest (Dekker's
    splitting), so the phase stays accurate where pi a^2 / 2 itself is off by whole periods."""
    bits = jnp.finfo(a.dtype).nmant + 1
    # beyond 2^bits, a is an even integer and a^2 = 0 modulo 4
    xs = _safe(a < 2.0 ** bits, a, 0.0)
    c = xs * (2.0 ** ((bits + 1) // 2) + 1.0)
    hi = c - (c - xs)
    lo = xs - hi

    def mod4(v):
        return v - 4.0 * jnp.floor(v * 0.25)

    r = mod4(hi * hi) + mod4(2.0 * hi * lo) + lo * lo
    phase = (0.5 * math.pi) * r
    return jnp.cos(phase), jnp.sin(phase)


def fresnel(x):
    """The Fresnel integrals (S(x), C(x)) = (int_0^x sin(pi t^2 / 2) dt, int_0^x cos(pi t^2 / 2)
    dt) (scipy.special.fresnel: S first), odd in x; +-0.5 at +-inf.

    x: float32 or float64 array (ints become float32); returns two arrays of x's shape and
    dtype. For |x| <= 1.6 the power series A&S 7.3.11 / 7.3.13 (30 terms); beyond, the
    auxiliary functions f, g of A&S 7.3.9-10 from the continued fraction of erfc at
    (1 - i) sqrt(pi) x / 2 (Numerical Recipes 3rd ed. sec. 6.8, 40 levels from the tail, in real
    pairs), their leading asymptotic terms 1 / (pi x), 1 / (pi^2 x^3) past 1e4 (A&S 7.3.27-28);
    the phase pi x^2 / 2 reduced exactly. ~1e-15 relative in float64. Differentiable
    (S' = sin(pi x^2 / 2), C' = cos(pi x^2 / 2)).
    """
    (x,) = _float(x)
    a = jnp.abs(x)
    small = a <= 1.6
    xs = _safe(small, a, 1.0)
    t = (0.5 * math.pi) * xs * xs
    term = jnp.ones_like(xs)  # t^m / m!
    s_acc = jnp.zeros_like(xs)
    c_acc = jnp.ones_like(xs)
    for m in range(1, 30):
        term = term * t / m
        sign = -1.0 if (m // 2) % 2 else 1.0
        if m % 2:
            s_acc = s_acc + sign * term / (2 * m + 1)
        else:
            c_acc = c_acc + sign * term / (2 * m + 1)
    s_small, c_small = xs * s_acc, xs * c_acc
    mid = ~small & (a <= 1e4)
    xm = _safe(mid, a, 2.0)
    # h = (1 - i) x / (b0 + a1 / (b1 + ...)), b_j = 1 - i pi x^2 + 4 j, a_j = -(2j - 1) 2j
    b0i = -math.pi * xm * xm
    depth = 40

    def level(k, t):  # level j = depth - k: b_{j-1} + a_j / (level j + 1)
        j = (depth - k).astype(xm.dtype)
        qr, qi = _cdiv(-(2.0 * j - 1.0) * (2.0 * j), 0.0, *t)
        return 1.0 + 4.0 * (j - 1.0) + qr, b0i + qi

    tr, ti = _fori(depth, level, (jnp.full_like(xm, 1.0 + 4.0 * depth), b0i))
    hr, hi = _cdiv(xm, -xm, tr, ti)
    g_mid, f_mid = 0.5 * (hr - hi), 0.5 * (hr + hi)  # g + i f = (1 + i) h / 2
    xl = _safe(~small & ~mid, a, 2e4)
    f_big = 1.0 / (math.pi * xl)
    g_big = f_big / (math.pi * xl * xl)
    f, g = jnp.where(mid, f_mid, f_big), jnp.where(mid, g_mid, g_big)
    cos, sin = _fresnel_phase(_safe(~small, a, 0.0))
    s_big = 0.5 - f * cos - g * sin
    c_big = 0.5 + f * sin - g * cos
    s = jnp.where(small, s_small, s_big)
    c = jnp.where(small, c_small, c_big)
    neg = x < 0
    return jnp.where(neg, -s, s), jnp.where(neg, -c, c)


def sici(x):
    """The sine and cosine integrals (Si(x), Ci(x)) (scipy.special.sici): Si(x) = int_0^x
    sin t / t dt (odd), Ci(x) = gamma + ln|x| + int_0^|x| (cos t - 1) / t dt (for x < 0 the
    real part, Ci(|x|), as SciPy); Si(+-inf) = +-pi/2, Ci(0) = -inf, Ci(inf) = 0,
    Ci(-inf) = NaN.

    x: float32 or float64 array (ints become float32); returns two arrays of x's shape. For
    |x| <= 4 the power series A&S 5.2.14 / 5.2.16 (40 terms); beyond, E1(i x) = -Ci(x) +
    i (Si(x) - pi / 2) (A&S 5.2.23) by its continued fraction (Numerical Recipes 3rd ed. sec.
    6.8, 40 levels from the tail, in real pairs): ~1e-15 in float64 (absolute near Ci's
    zeros). Differentiable (Si' = sin x / x, Ci' = cos x / x).
    """
    (x,) = _float(x)
    a = jnp.abs(x)
    small = a <= 4.0
    xs = _safe(small & (a > 0), a, 1.0)
    term = jnp.ones_like(xs)  # x^m / m!
    si = jnp.zeros_like(xs)
    cs = jnp.zeros_like(xs)
    for m in range(1, 40):
        term = term * xs / m
        if m % 2:
            si = si + (-1.0 if (m // 2) % 2 else 1.0) * term / m
        else:
            cs = cs + (-1.0 if (m // 2) % 2 else 1.0) * term / m
    ci_small = _EULER + jnp.log(xs) + cs
    big = ~small & (a < jnp.inf)
    xl = _safe(big, a, 5.0)
    # E1(i x) exp(i x) = 1 / (b0 + a1 / (b1 + ...)), b_j = 1 + 2 j + i x, a_j = -j^2
    depth = 40

    def level(k, t):  # level j = depth - k: b_{j-1} + a_j / (level j + 1)
        j = (depth - k).astype(xl.dtype)
        qr, qi = _cdiv(-j * j, 0.0, *t)
        return 1.0 + 2.0 * (j - 1.0) + qr, xl + qi

    tr, ti = _fori(depth, level, (jnp.full_like(xl, 1.0 + 2.0 * depth), xl))
    hr, hi = _cdiv(jnp.cos(xl), -jnp.sin(xl), tr, ti)
    si_big, ci_big = 0.5 * math.pi + hi, -hr
    si = jnp.where(small, si, jnp.where(big, si_big, jnp.full_like(a, 0.5 * math.pi)))
    ci = jnp.where(small, ci_small, jnp.where(big, ci_big, jnp.zeros_like(a)))
    si = jnp.where(x < 0, -si, jnp.where(x == 0, jnp.zeros_like(si), si))
    nan = jnp.isnan(x)
    ci = jnp.where(x == 0, -jnp.inf, jnp.where((x == -jnp.inf) | nan, jnp.nan, ci))
    return jnp.where(nan, jnp.nan, si), ci


_SPENCE_TERMS = [float(b / math.factorial(j + 1))  # B_2k / (2k + 1)!, k = 1..8
                 for j, b in enumerate(_bernoulli_fractions(16)) if j % 2 == 0 and j > 0]


def _li2_debye(u):
    """Li2(1 - exp(-u)) = sum_n B_n u^(n+1) / (n+1)! (B_1 = -1/2), for |u| <= ln 2 (terms fall
    by (u / 2 pi)^2 each)."""
    u2 = u * u
    p = u * u2
    acc = u - 0.25 * u2
    for c in _SPENCE_TERMS:
        acc = acc + c * p
        p = p * u2
    return acc


def spence(x):
    """Spence's function int_1^x ln t / (1 - t) dt = Li2(1 - x) (scipy.special.spence) for
    x >= 0 (NaN below, and at inf, as SciPy and JAX); spence(0) = pi^2 / 6, spence(1) = 0.

    x: float32 or float64 array (ints become float32). The Bernoulli series of the dilogarithm
    in u = -ln(1 - z) (Li2(z) = sum B_n u^(n+1) / (n+1)!) on 1/2 <= x <= 2, the reflection
    Li2(z) + Li2(1 - z) = pi^2/6 - ln z ln(1 - z) below 1/2 and the inversion
    spence(x) = -ln(x)^2 / 2 - spence(1 / x) above 2 (L. Lewin, Polylogarithms and associated
    functions, 1981, eqs. 1.11-1.12): ~1e-15 relative in float64. Differentiable
    (spence' = ln x / (1 - x)).
    """
    (x,) = _float(x)
    pi26 = math.pi ** 2 / 6.0

    def below_half(y):  # 0 <= y <= 1/2: pi^2/6 - ln y ln(1 - y) - Li2(y)
        pos = y > 0
        lnln = jnp.where(pos, jnp.log(_safe(pos, y, 0.5)) * jnp.log1p(-y), jnp.zeros_like(y))
        return pi26 - lnln - _li2_debye(-jnp.log1p(-y))

    mid = (x >= 0.5) & (x <= 2.0)
    v_mid = _li2_debye(-jnp.log(_safe(mid, x, 1.0)))
    lo = (x >= 0) & (x < 0.5)
    v_lo = below_half(_safe(lo, x, 0.25))
    hi = (x > 2.0) & (x < jnp.inf)
    xh = _safe(hi, x, 4.0)
    v_hi = -0.5 * jnp.log(xh) ** 2 - below_half(1.0 / xh)
    out = jnp.where(mid, v_mid, jnp.where(lo, v_lo, v_hi))
    return jnp.where(mid | lo | hi, out, jnp.nan)


def _owens_t_nodes():
    import numpy as np

    return np.polynomial.legendre.leggauss(24)


_OWENS_T_X, _OWENS_T_W = _owens_t_nodes()


def _owens_t_le1(h, a):
    """T(h, a) for h >= 0, 0 <= a <= 1: 24-point Gauss-Legendre on [0, min(a, 9 / h)] (past
    9 / h the integrand is below exp(-40) of its value at 0)."""
    pos = h > 0
    reach = jnp.where(pos, 9.0 / _safe(pos, h, 1.0), jnp.full_like(h, jnp.inf))
    b = jnp.minimum(a, reach)
    # the nodes along a new last axis: one small program rather than 24 copies of the integrand
    nodes = jnp.asarray(0.5 * (_OWENS_T_X + 1.0), dtype=h.dtype)
    weights = jnp.asarray(_OWENS_T_W, dtype=h.dtype)
    u = b[..., None] * nodes
    q = 1.0 + u * u
    acc = jnp.sum(weights * jnp.exp((-0.5 * h * h)[..., None] * q) / q, axis=-1)
    return acc * b / (4.0 * math.pi)


def owens_t(h, a):
    """Owen's T function T(h, a) = 1/(2 pi) int_0^a exp(-h^2 (1 + x^2) / 2) / (1 + x^2) dx
    (scipy.special.owens_t), elementwise over the broadcast of h and a: even in h, odd in a;
    T(h, inf) = ndtr(-|h|) / 2.

    h, a: float32 or float64 arrays (ints become float32). For |a| <= 1 Gauss-Legendre
    quadrature of the integral (24 points, over [0, min(|a|, 9 / |h|)]); for |a| > 1 the
    identity T(h, a) = (Q(h) + Q(a h)) / 2 - Q(h) Q(a h) - T(a h, 1 / a) with Q(h) = ndtr(-h)
    (Owen 1956, eq. 2.3; Patefield & Tandy, J. Stat. Software 5(5), 2000). ~1e-14 relative in
    float64. Differentiable in h and a.
    """
    h, a = _float(h, a)
    ha, aa = jnp.abs(h), jnp.abs(a)
    le1 = aa <= 1.0
    v_le1 = _owens_t_le1(ha, _safe(le1, aa, 0.5))
    gt1 = ~le1 & (aa < jnp.inf)
    al = _safe(gt1, aa, 2.0)
    q_h, q_ah = ndtr(-ha), ndtr(-al * ha)
    v_gt1 = 0.5 * (q_h + q_ah) - q_h * q_ah - _owens_t_le1(al * ha, 1.0 / al)
    out = jnp.where(le1, v_le1, jnp.where(gt1, v_gt1, 0.5 * q_h))
    return jnp.where(jnp.isnan(a), jnp.nan, jnp.where(a < 0, -out, out))


def _scaled_series(ratio, shape_like, terms):
    """sum_k t_k with t_0 = 1 and t_{k+1} = t_k * ratio(k) (k a float scalar), over `terms`
    terms, as (total, count): the true sum is total * big^count, big = sqrt(finfo.max), so
    that sums past the float range (e^|x| in hyp1f1's Kummer transform) stay finite."""
    big = float(jnp.finfo(shape_like.dtype).max) ** 0.5

    def body(k, c):
        term, total, count = c
        term = term * ratio(k.astype(shape_like.dtype))
        total = total + term
        over = jnp.abs(total) > big
        scale = jnp.where(over, jnp.full_like(total, 1.0 / big), jnp.ones_like(total))
        return term * scale, total * scale, count + over.astype(count.dtype)

    one = jnp.ones_like(shape_like)
    _, total, count = _fori(terms, body, (one, one, jnp.zeros_like(shape_like)))
    return total, count


def _hyp1f1_positive(a, b, y):
    """M(a, b, y) for y >= 0 as exp(log_scale) * value: the series A&S 13.1.2 up to y = 500
    (1000 terms, rescaled), A&S 13.5.1's leading asymptotic series beyond (40 terms), where it
    is exp(y) y^(a - b) Gamma(b) / Gamma(a) (1 + O(1 / y))."""
    poly = (a <= 0) & _is_int(a)  # a terminating series: exact at any y
    near = (y <= 500.0) | poly
    yn = _safe(near, y, 1.0)
    total, count = _scaled_series(lambda k: (a + k) / (b + k) * yn / (k + 1.0), yn, 1000)
    log_big = 0.5 * math.log(float(jnp.finfo(y.dtype).max))
    yf = _safe(~near, y, 1e3)
    af = _safe(~near, a, 1.0)
    term = jnp.ones_like(yf)
    acc = jnp.ones_like(yf)
    for s in range(40):
        term = term * (b - af + s) * (1.0 - af + s) / ((s + 1.0) * yf)
        acc = acc + term
    lead = _gamma_ratio([b], [af])
    far_value = lead * acc
    far_log = yf + (af - b) * jnp.log(yf)
    return (jnp.where(near, total, far_value), jnp.where(near, count * log_big, far_log))


def hyp1f1(a, b, x):
    """Kummer's confluent hypergeometric function 1F1(a; b; x) = sum_k (a)_k / (b)_k x^k / k!
    (scipy.special.hyp1f1), elementwise over the broadcast of a, b and x.

    a, b, x: float32 or float64 arrays (ints become float32). 1 where a = 0 (a = b = 0
    included, JAX's convention), exp(x) where a = b, inf where b is 0 or a negative integer.
    For x < 0 Kummer's transformation 1F1(a; b; x) = exp(x) 1F1(b - a; b; -x) (A&S 13.1.27)
    makes the series' terms positive; the series A&S 13.1.2 (1000 terms, kept in range by
    rescaling) up to |x| = 500, A&S 13.5.1's asymptotic series beyond. Accurate to a few ulp
    for moderate positive a and b (JAX's domain); large |a|, |b| with large |x| lose accuracy
    as the asymptotic series does, as JAX's. Differentiable in a, b and x.
    """
    a, b, x = _float(a, b, x)
    neg = x < 0
    y = jnp.abs(x)
    ak = jnp.where(neg, b - a, a)
    b_pole = (b <= 0) & _is_int(b)
    bs = _safe(~b_pole, b, 1.0)
    value, log_scale = _hyp1f1_positive(ak, bs, y)
    log_scale = jnp.where(neg, log_scale - y, log_scale)
    out = value * jnp.exp(log_scale)
    out = jnp.where(a == b, jnp.exp(x), out)
    out = jnp.where(b_pole, jnp.inf, out)
    return jnp.where(a == 0, jnp.ones_like(out), out)


def _hyp2f1_series(a, b, c, z, terms):
    """sum_{k < terms} (a)_k (b)_k / ((c)_k k!) z^k (A&S 15.1.1)."""
    def body(k, carry):
        term, total = carry
        kf = k.astype(z.dtype)
        term = term * ((a + kf) * (b + kf) / ((c + kf) * (kf + 1.0)) * z)
        return term, total + term

    one = jnp.ones_like(z)
    return _fori(terms, body, (one, one))[1]


def _hyp2f1_near_one(a, b, c, w):
    """2F1(a, b; c; 1 - w) for 0 < w < 0.025 and d = c - a - b not an integer: A&S 15.3.6, two
    series in w (100 terms)."""
    d = c - a - b
    first = _gamma_ratio([c, d], [c - a, c - b]) * _hyp2f1_series(a, b, 1.0 - d, w, 100)
    second = (_gamma_ratio([c, -d], [a, b]) * jnp.exp(d * jnp.log(w))
              * _hyp2f1_series(c - a, c - b, d + 1.0, w, 100))
    return first + second


def _hyp2f1_near_one_int(a, b, m, w):
    """2F1(a, b; a + b + m; 1 - w) for an integer m >= 0 and 0 < w < 0.025: A&S 15.3.10-11,
    the finite sum (m < 100) and the series with digamma terms (their recurrences
    psi(x + 1) = psi(x) + 1/x carried along; 100 terms)."""
    c = a + b + m
    dt = w.dtype

    def finite(k, carry):  # sum_{n < m} (a)_n (b)_n / (n! (1 - m)_n) w^n
        term, total = carry
        n = k.astype(dt)
        total = total + jnp.where(n < m, term, jnp.zeros_like(term))
        den = (n + 1.0) * (n + 1.0 - m)
        term = term * ((a + n) * (b + n) * w / _safe(den != 0, den, 1.0))
        return term, total

    one = jnp.ones_like(w)
    fin = _fori(100, finite, (one, jnp.zeros_like(w)))[1]
    pos_m = m > 0
    first = _gamma_ratio([_safe(pos_m, m, 1.0), c], [a + m, b + m])
    first = jnp.where(pos_m, first * fin, jnp.zeros_like(fin))
    am, bm = a + m, b + m
    am_pole, bm_pole = (am <= 0) & _is_int(am), (bm <= 0) & _is_int(bm)
    ams, bms = _safe(~am_pole, am, 1.0), _safe(~bm_pole, bm, 1.0)
    lw = jnp.log(w)

    def series(k, carry):
        # term (a+m)_n (b+m)_n / (n! (n+m)!) w^n; p1..p4 = psi(n+1), psi(n+m+1), psi(a+n+m),
        # psi(b+n+m)
        term, total, p1, p2, p3, p4 = carry
        n = k.astype(dt)
        total = total + term * (lw - p1 - p2 + p3 + p4)
        term = term * ((ams + n) * (bms + n) * w / ((n + 1.0) * (n + m + 1.0)))
        return (term, total, p1 + 1.0 / (n + 1.0), p2 + 1.0 / (n + m + 1.0),
                p3 + 1.0 / (ams + n), p4 + 1.0 / (bms + n))

    init = (jnp.exp(-gammaln(m + 1.0)), jnp.zeros_like(w), jnp.full_like(w, -_EULER),
            digamma(m + 1.0), digamma(ams), digamma(bms))
    tail = _fori(100, series, init)[1]
    sign = jnp.where(jnp.fmod(m, 2.0) == 0, jnp.ones_like(w), -jnp.ones_like(w))
    second = sign * jnp.exp(m * lw) * _gamma_ratio([c], [a, b]) * tail
    return first - second


def hyp2f1(a, b, c, x):
    """Gauss's hypergeometric function 2F1(a, b; c; x) = sum_k (a)_k (b)_k / (c)_k x^k / k!
    (scipy.special.hyp2f1), elementwise over the broadcast of a, b, c and x <= 1.

    a, b, c, x: float32 or float64 arrays (ints become float32). 1 where x = 0 or a = 0 or
    b = 0; inf where c is 0 or a negative integer, and for x > 1 (as JAX's); at x = 1 Gauss's
    sum Gamma(c) Gamma(c-a-b) / (Gamma(c-a) Gamma(c-b)) when c - a - b > 0, else inf.
    x < 0 goes to z = x / (x - 1) in (0, 1) by Pfaff's transformation (A&S 15.3.4); z <= 0.975
    sums the series (1500 terms; with Euler's transformation A&S 15.3.3 first when
    c - a - b < 0); z > 0.975 uses the 1 - z transformations A&S 15.3.6 (c - a - b not an
    integer) or 15.3.10-11 (an integer, after Euler's transformation if negative). Accurate
    to ~1e-13 in float64 for moderate parameters; where c - a - b (after Pfaff's
    transformation, b - a) is within ~1e-3 of an integer, z > 0.975 loses digits (the two
    terms of 15.3.6 cancel), as Cephes' does. Differentiable in
    every argument (through the series).
    """
    a, b, c, x = _float(a, b, c, x)
    dt = x.dtype
    c_pole = (c <= 0) & _is_int(c)
    cs = _safe(~c_pole, c, 1.0)
    # Pfaff: 2F1(a, b; c; x) = (1 - x)^-a 2F1(a, c - b; c; x / (x - 1)) for x < 0
    neg = x < 0
    xn = _safe(neg, x, -1.0)
    pre = jnp.where(neg, jnp.exp(-a * jnp.log1p(-xn)), jnp.ones_like(x))
    bb = jnp.where(neg, cs - b, b)
    z = jnp.where(neg, xn / (xn - 1.0), _safe((x >= 0) & (x <= 1), x, 0.5))
    d = cs - a - bb
    # z <= 0.975: the series, of 2F1(c - a, c - b; c; z) (1 - z)^d when d < 0 (Euler)
    direct = z <= 0.975
    zd = _safe(direct, z, 0.5)
    euler = d < 0
    a1, b1 = jnp.where(euler, cs - a, a), jnp.where(euler, cs - bb, bb)
    v_direct = _hyp2f1_series(a1, b1, cs, zd, 1500) * jnp.where(
        euler, jnp.exp(d * jnp.log1p(-zd)), jnp.ones_like(zd))
    # z > 0.975: in w = 1 - z
    w = 1.0 - _safe(~direct & (z < 1), z, 0.99)
    m = jnp.round(d)
    integral = jnp.abs(d - m) <= 50.0 * float(jnp.finfo(dt).eps) * jnp.maximum(1.0, jnp.abs(d))
    v_frac = _hyp2f1_near_one(a, bb, _safe(~integral, cs, a + bb + 0.5), w)
    # integer d < 0: Euler first, then d -> -d
    ai, bi = jnp.where(m < 0, cs - a, a), jnp.where(m < 0, cs - bb, bb)
    v_int = _hyp2f1_near_one_int(ai, bi, jnp.abs(m), w)
    v_int = v_int * jnp.where(m < 0, jnp.exp(m * jnp.log(w)), jnp.ones_like(w))
    v_near = jnp.where(integral, v_int, v_frac)
    v = pre * jnp.where(direct, v_direct, v_near)
    # z = 1: Gauss's sum (x = 1, or x -> -inf's limit)
    gauss = jnp.where(d > 0, _gamma_ratio([cs, _safe(d > 0, d, 1.0)], [cs - a, cs - bb]),
                      jnp.full_like(d, jnp.inf))
    v = jnp.where(z == 1, pre * gauss, v)
    v = jnp.where((x > 1) | c_pole, jnp.inf, v)
    one = (x == 0) | (a == 0) | (b == 0)
    return jnp.where(one & ~c_pole, jnp.ones_like(v), jnp.where(jnp.isnan(x), jnp.nan, v))


def bessel_jn(z, *, v: int, n_iter: int = 50):
    """The Bessel functions of the first kind J_0(z) ... J_v(z) of integer order
    (jax.scipy.special.bessel_jn): an array of shape (v + 1, *z.shape), row k holding J_k(z).

    z: float32 or float64 array (ints become float32); v: a non-negative Python int;
    n_iter: the order the recurrence starts from (n_iter + 1), at least v. Miller's algorithm:
    the recurrence J_{k-1} = (2k / z) J_k - J_{k+1} run downward from J_{n_iter+2} = 0,
    J_{n_iter+1} = 1, normalized by J_0 + 2 sum_k J_2k = 1 (A&S 9.1.27, 9.1.46; Zhang & Jin,
    Computation of Special Functions, 1996, BJNDD), rescaled whenever a value passes
    sqrt(finfo.max); the power series A&S 9.1.10 below |z| = 1e-3. Accurate (~1e-15 in
    float64) while n_iter is well past |z| (n_iter = 50: |z| up to ~25). Differentiable in
    z. Raises TypeError for a v or n_iter that is not an int, ValueError for v < 0 or
    v > n_iter.
    """
    import operator

    from nova import lax

    try:
        v, n_iter = operator.index(v), operator.index(n_iter)
    except TypeError:
        raise TypeError(f"bessel_jn: v and n_iter must be ints, got {type(v).__name__} and "
                        f"{type(n_iter).__name__}") from None
    if v < 0 or v > n_iter:
        raise ValueError(f"bessel_jn: v must be in [0, n_iter], got v={v}, n_iter={n_iter}")
    (z,) = _float(z)
    tiny = jnp.abs(z) < 1e-3
    zs = _safe(~tiny, z, 1.0)
    big = float(jnp.finfo(z.dtype).max) ** 0.5

    def step(carry, k):
        f_above, f, total, count = carry  # J_{k+2}, J_{k+1} (unnormalized), sum 2 J_2j, scale
        kf = k.astype(z.dtype)
        fk = 2.0 * (kf + 1.0) / zs * f - f_above
        total = total + jnp.where(k % 2 == 0, 2.0 * fk, jnp.zeros_like(fk))
        over = jnp.abs(fk) > big
        scale = jnp.where(over, jnp.full_like(fk, 1.0 / big), jnp.ones_like(fk))
        count = count + over.astype(count.dtype)
        fk = fk * scale
        return (f * scale, fk, total * scale, count), (fk, count)

    init = (jnp.zeros_like(zs), jnp.ones_like(zs), jnp.zeros_like(zs), jnp.zeros_like(zs))
    (_, j0, total, count), (rows, counts) = lax.scan(
        step, init, jnp.arange(n_iter + 1, dtype=jnp.int32), reverse=True)
    rows, counts = rows[:v + 1], counts[:v + 1]
    # a row computed before later rescalings is too large by big^(count - its count)
    out = rows * jnp.exp((counts - count) * math.log(big)) / (total - j0)
    # |z| < 1e-3 (where 2k / z could overflow in one step): the power series A&S 9.1.10 to
    # its third term, (z/2)^k / k! (1 - q / (k + 1) + q^2 / (2 (k + 1) (k + 2))), q = z^2 / 4
    zt = _safe(tiny, z, 0.0)
    q = 0.25 * zt * zt
    lead = jnp.ones_like(zt)
    small = []
    for k in range(v + 1):
        small.append(lead * (1.0 - q / (k + 1) + q * q / (2.0 * (k + 1) * (k + 2))))
        lead = lead * (0.5 * zt) / (k + 1)
    return jnp.where(tiny, jnp.stack(small), out)
