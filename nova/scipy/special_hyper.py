"""The hypergeometric functions of nova.scipy.special: hyp1f1, hyp2f1."""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova.scipy.special_common import _EULER, _float, _fori, _is_int, _safe
from nova.scipy.special_gamma import _gamma_ratio, digamma, gammaln


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
