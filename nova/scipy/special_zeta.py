"""Bernoulli numbers and the sums they give for nova.scipy.special: zeta, polygamma, spence."""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova.scipy.special_common import _float, _safe
from nova.scipy.special_gamma import digamma, gammaln


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
