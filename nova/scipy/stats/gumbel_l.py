"""The left-skewed Gumbel (type I extreme value, minimum) distribution (scipy.stats.gumbel_l,
jax.scipy.stats.gumbel_l): cdf 1 - exp(-exp(z)), the mirror image of gumbel_r.

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN for scale <= 0 or NaN input; ShapeError (a ValueError) when shapes do not broadcast.
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.scipy.stats import _common as c


def logpdf(x, loc=0, scale=1):
    """z - exp(z) - log(scale), z = (x - loc) / scale."""
    z, scale, ok, _ = c.loc_scale("gumbel_l.logpdf", x, loc, scale)
    return c.nan_unless(ok, z - jnp.exp(z) - jnp.log(scale))


def pdf(x, loc=0, scale=1):
    """The density exp(logpdf(x, loc, scale))."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """1 - exp(-exp(z)) as -expm1(-exp(z)) (accurate in the left tail)."""
    z, _, ok, _ = c.loc_scale("gumbel_l.cdf", x, loc, scale)
    return c.nan_unless(ok, -jnp.expm1(-jnp.exp(z)))


def logcdf(x, loc=0, scale=1):
    """log(1 - exp(-exp(z))): about z in the left tail, finite after exp(z) underflows."""
    z, _, ok, _ = c.loc_scale("gumbel_l.logcdf", x, loc, scale)
    return c.nan_unless(ok, c.log1mexp_of_exp(z))


def sf(x, loc=0, scale=1):
    """exp(-exp(z))."""
    z, _, ok, _ = c.loc_scale("gumbel_l.sf", x, loc, scale)
    return c.nan_unless(ok, jnp.exp(-jnp.exp(z)))


def logsf(x, loc=0, scale=1):
    """-exp(z)."""
    z, _, ok, _ = c.loc_scale("gumbel_l.logsf", x, loc, scale)
    return c.nan_unless(ok, -jnp.exp(z))


def ppf(p, loc=0, scale=1):
    """The quantile loc + scale log(-log1p(-p)): -inf at 0, inf at 1, NaN outside [0, 1]."""
    p, loc, scale = c.promote("gumbel_l.ppf", p, loc, scale)
    v = loc + scale * jnp.log(-jnp.log1p(-p))
    return c.nan_unless(c.unit_interval(p) & (scale > 0), v)
