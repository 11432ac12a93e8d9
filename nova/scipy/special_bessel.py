"""The Bessel functions of nova.scipy.special: i0, i0e, i1, i1e, bessel_jn."""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova.scipy.special_common import _float, _safe


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
