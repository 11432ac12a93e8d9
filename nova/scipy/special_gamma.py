"""Gamma and beta functions for nova.scipy.special: logs, signs, digamma and incomplete forms."""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova.core import dtypes
from nova.scipy.special_common import _float, _fori, _inexact, _is_int, _safe, _tiny
from nova.scipy.special_complex import gamma_complex, loggamma_complex

_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012,
            9.9843695780195716e-6, 1.5056327351493116e-7)


def _lgamma_right(x):
    """log|Gamma(x)| for x >= 1/2 (Lanczos); log Gamma(x) for complex x with Re x >= 1/2."""
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
    between -2k-1 and -2k); inf at the poles 0, -1, -2, ... Complex x (complex64 /
    complex128) gives exp(loggamma(x)), NaN + NaN i at the poles (as SciPy)."""
    (x,) = _inexact(x)
    if dtypes.is_complex(x.dtype):
        return gamma_complex(x)
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
    """The principal branch of log Gamma(x) (scipy.special.loggamma).

    Real x: gammaln for x > 0, NaN for x < 0 (where the log is complex), inf at 0. Complex x
    (complex64 / complex128): the branch analytic off the non-positive real axis, with
    loggamma(x + 1) = loggamma(x) + log(x) (so its imaginary part is not confined to
    (-pi, pi]), NaN at the poles 0, -1, -2, ...; Lanczos with the reflection formula
    (special_complex.loggamma_complex). The result has x's shape and dtype.
    """
    (x,) = _inexact(x)
    if dtypes.is_complex(x.dtype):
        return loggamma_complex(x)
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
    if a.dtype.itemsize < 4:
        # float16 / bfloat16: the loops run in float32 (their carries would not keep the narrow
        # dtype, and 1000 narrow terms lose the sum), the result is cast back, as JAX does
        p, q = _gammainc_pq(a.astype(jnp.float32), x.astype(jnp.float32))
        return p.astype(a.dtype), q.astype(a.dtype)
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
