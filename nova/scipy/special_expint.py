"""The exponential and trigonometric integrals of nova.scipy.special: exp1, expi, expn, sici."""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova.scipy.special_common import _EULER, _float, _fori, _is_int, _safe
from nova.scipy.special_gamma import digamma, gammaln


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


def sici(x):
    """The sine and cosine integrals (Si(x), Ci(x)) (scipy.special.sici): Si(x) = int_0^x
    sin t / t dt (odd), Ci(x) = gamma + ln|x| + int_0^|x| (cos t - 1) / t dt (for x < 0 the
    real part, Ci(|x|), as SciPy); Si(+-inf) = +-pi/2, Ci(0) = -inf, Ci(inf) = 0,
    Ci(-inf) = NaN.

    x: float32 or float64 array (ints become float32); returns two arrays of x's shape. For
    |x| <= 4 the power series A&S 5.2.14 / 5.2.16 (40 terms); beyond, E1(i x) = -Ci(x) +
    i (Si(x) - pi / 2) (A&S 5.2.23) by its continued fraction (Numerical Recipes 3rd ed. sec.
    6.8, 40 levels from the tail, in complex arithmetic): ~1e-15 in float64 (absolute near Ci's
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

    ixl = 1j * xl

    def level(k, t):  # level j = depth - k: b_{j-1} + a_j / (level j + 1)
        j = (depth - k).astype(xl.dtype)
        return (1.0 + 2.0 * (j - 1.0) + ixl) - (j * j) / t

    t = _fori(depth, level, (1.0 + 2.0 * depth) + ixl)
    h = jnp.exp(-ixl) / t
    hr, hi = jnp.real(h), jnp.imag(h)
    si_big, ci_big = 0.5 * math.pi + hi, -hr
    si = jnp.where(small, si, jnp.where(big, si_big, jnp.full_like(a, 0.5 * math.pi)))
    ci = jnp.where(small, ci_small, jnp.where(big, ci_big, jnp.zeros_like(a)))
    si = jnp.where(x < 0, -si, jnp.where(x == 0, jnp.zeros_like(si), si))
    nan = jnp.isnan(x)
    ci = jnp.where(x == 0, -jnp.inf, jnp.where((x == -jnp.inf) | nan, jnp.nan, ci))
    return jnp.where(nan, jnp.nan, si), ci
