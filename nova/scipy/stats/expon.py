"""The exponential distribution on [loc, inf) with mean loc + scale (scipy.stats.expon,
jax.scipy.stats.expon).

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN for scale <= 0 or NaN input; ShapeError (a ValueError) when shapes do not broadcast.
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.scipy.stats import _common as c


def logpdf(x, loc=0, scale=1):
    """-z - log(scale) for z = (x - loc) / scale >= 0, -inf below the support."""
    z, scale, ok, _ = c.loc_scale("expon.logpdf", x, loc, scale)
    return c.nan_unless(ok, jnp.where(z < 0, -jnp.inf, -z - jnp.log(scale)))


def pdf(x, loc=0, scale=1):
    """The exponential density exp(logpdf(x, loc, scale))."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """1 - exp(-z) as -expm1(-z) (accurate for small z), 0 below the support."""
    z, _, ok, _ = c.loc_scale("expon.cdf", x, loc, scale)
    return c.nan_unless(ok, -jnp.expm1(-jnp.maximum(z, 0.0)))


def logcdf(x, loc=0, scale=1):
    """log(1 - exp(-z)) by log1mexp (log(z) for tiny z, -exp(-z) for large z); -inf for z <= 0."""
    z, _, ok, _ = c.loc_scale("expon.logcdf", x, loc, scale)
    pos = z > 0
    return c.nan_unless(ok, jnp.where(pos, c.log1mexp(-c.safe(pos, z, 1.0)), -jnp.inf))


def sf(x, loc=0, scale=1):
    """exp(-z), 1 below the support."""
    z, _, ok, _ = c.loc_scale("expon.sf", x, loc, scale)
    return c.nan_unless(ok, jnp.exp(-jnp.maximum(z, 0.0)))


def logsf(x, loc=0, scale=1):
    """-z, 0 below the support."""
    z, _, ok, _ = c.loc_scale("expon.logsf", x, loc, scale)
    return c.nan_unless(ok, -jnp.maximum(z, 0.0))


def ppf(q, loc=0, scale=1):
    """The quantile loc - scale * log1p(-q): loc at q = 0, inf at 1, NaN outside [0, 1]."""
    q, loc, scale = c.promote("expon.ppf", q, loc, scale)
    inside = c.unit_interval(q)
    v = loc - scale * jnp.log1p(-c.safe(inside, q, 0.0))
    return c.nan_unless(inside & (scale > 0), v)
