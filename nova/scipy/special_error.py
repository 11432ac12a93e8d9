"""The error-function family of nova.scipy.special: erf, ndtr and kin, owens_t, dawsn, fresnel."""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova.core import dtypes
from nova.scipy.special_common import _float, _fori, _inexact, _safe
from nova.scipy.special_complex import erfcx_complex


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


_LOG_2PI = math.log(2.0 * math.pi)


def _ndtri_lower(r):
    """ndtri(r) for 0 < r <= 1/2, to a few ulp of float64 even for r ~ 1e-300: Newton's method
    on log_ndtr(x) = log(r), whose error stays relative in the tail (the erfinv form
    sqrt(2) erfinv(2r - 1) loses the digits of r in 2r - 1). Start: that erfinv form above
    1e-3, below it the asymptotic root x^2 = -2 log r - log(-2 log r) - log(2 pi) of the
    Mills-ratio expansion (A&S 26.2.12; within 1% at 1e-3, closer below); 4 Newton steps
    square the error each time."""
    tiny = r < 1e-3
    t = -2.0 * jnp.log(_safe(tiny, r, 1e-4))
    x_asym = -jnp.sqrt(t - jnp.log(t) - _LOG_2PI)
    x_central = math.sqrt(2.0) * erfinv(2.0 * _safe(~tiny, r, 0.25) - 1.0)
    x = jnp.where(tiny, x_asym, x_central)
    log_r = jnp.log(r)
    for _ in range(4):
        log_cdf = log_ndtr(x)
        log_density = -0.5 * x * x - 0.5 * _LOG_2PI
        x = x - (log_cdf - log_r) * jnp.exp(log_cdf - log_density)
    return x


def ndtri(p):
    """The inverse of ndtr (scipy.special.ndtri): the standard normal quantile.

    p: float32 or float64 array (ints become float32); the result has its shape and dtype.
    -inf at 0, inf at 1, NaN outside [0, 1] and for NaN. Accurate to a few ulp in both tails
    (ndtri(1e-300) = -37.047... in float64): the lower half by _ndtri_lower's Newton steps
    on log_ndtr, the upper by ndtri(p) = -ndtri(1 - p) (1 - p is exact for p >= 1/2).
    Differentiable (the derivative 1 / ndtr'(x) comes through the Newton steps).
    nova.scipy.stats.norm.ppf and isf use it.
    """
    (p,) = _float(p)
    lower = p < 0.5
    r = jnp.where(lower, p, 1.0 - p)
    valid = (p >= 0) & (p <= 1)
    inner = valid & (r > 0)
    x = _ndtri_lower(_safe(inner, r, 0.25))
    x = jnp.where(lower, x, 0.0 - x)  # 0 - x: +0 at p = 1/2, as SciPy
    edge = jnp.where(p == 0, jnp.full_like(p, -jnp.inf), jnp.full_like(p, jnp.inf))
    return jnp.where(valid, jnp.where(inner, x, edge), jnp.full_like(p, jnp.nan))


def log_ndtr(x):
    """log(ndtr(x)) without underflow for very negative x (scipy.special.log_ndtr): below
    -2 sqrt(2) the log of erfc's continued fraction, -z^2 - log(2 sqrt(pi) t) with
    z = -x / sqrt(2) (no exp to underflow); log1p(-ndtr(-x)) above 0 (no cancellation where
    ndtr nears 1); log(ndtr(x)) between; NaN for NaN."""
    (x,) = _float(x)
    cut = -2.0 * math.sqrt(2.0)
    z = jnp.where(x < cut, -x, jnp.full_like(x, -cut)) / math.sqrt(2.0)
    tail = -z * z - jnp.log(2.0 * math.sqrt(math.pi) * _erfc_cf_denominator(z))
    hi = jnp.where(x > 0, x, jnp.zeros_like(x))
    mid = jnp.where((x >= cut) & (x <= 0), x, jnp.zeros_like(x))
    out = jnp.where(x < cut, tail, jnp.where(x > 0, jnp.log1p(-ndtr(-hi)), jnp.log(ndtr(mid))))
    return jnp.where(jnp.isnan(x), x, out)  # NaN fails every branch test above


def erfcx(x):
    """The scaled complementary error function exp(x^2) erfc(x) (scipy.special.erfcx): by
    erfc's continued fraction above 2 (no overflow or underflow: erfcx(1e10) is ~5.6e-11),
    exp(x^2) erfc(x) below, 2 exp(x^2) - erfcx(-x) for x < -2 (inf below ~ -26.6 in float64).
    Complex x (complex64 / complex128) gives wofz(i x) (A&S 7.1.3), as jax does."""
    (x,) = _inexact(x)
    if dtypes.is_complex(x.dtype):
        return erfcx_complex(x)
    a = jnp.abs(x)
    big = a >= 2
    ab = _safe(big, a, 2.0)
    tail = 1.0 / (math.sqrt(math.pi) * _erfc_cf_denominator(ab))  # erfcx(|x|), |x| >= 2
    xs = _safe(~big, x, 0.0)
    near = jnp.exp(xs * xs) * erfc(xs)
    xb = _safe(big, x, 2.0)
    neg_tail = 2.0 * jnp.exp(xb * xb) - tail
    return jnp.where(big, jnp.where(x > 0, tail, neg_tail), near)


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
    (1 - i) sqrt(pi) x / 2 (Numerical Recipes 3rd ed. sec. 6.8, 40 levels from the tail, in
    complex arithmetic), their leading asymptotic terms 1 / (pi x), 1 / (pi^2 x^3) past 1e4 (A&S 7.3.27-28);
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
    # g + i f = x / (b0 + a1 / (b1 + ...)), b_j = 1 - i pi x^2 + 4 j, a_j = -(2j - 1) 2j
    b0 = 1.0 - (1j * math.pi) * (xm * xm)
    depth = 40

    def level(k, t):  # level j = depth - k: b_{j-1} + a_j / (level j + 1)
        j = (depth - k).astype(xm.dtype)
        return (b0 + 4.0 * (j - 1.0)) - ((2.0 * j - 1.0) * (2.0 * j)) / t

    t = _fori(depth, level, b0 + 4.0 * depth)
    h = xm / t
    g_mid, f_mid = jnp.real(h), jnp.imag(h)
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
