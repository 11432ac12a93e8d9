"""The Pareto distribution with shape b on [loc + scale, inf) (scipy.stats.pareto,
jax.scipy.stats.pareto): sf y^-b for y = (x - loc) / scale >= 1.

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN for b <= 0, scale <= 0 or NaN input; ShapeError (a ValueError) when shapes do not
broadcast.
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.scipy.stats import _common as c


def _prepare(name, x, b, loc, scale):
    y, scale, ok, (b,) = c.loc_scale(name, x, loc, scale, b)
    ok = ok & (b > 0)
    b = c.safe(b > 0, b, 1.0)
    inside = y >= 1
    return jnp.log(c.safe(inside, y, 1.0)), inside, b, scale, ok


def logpdf(x, b, loc=0, scale=1):
    """log(b) - (b + 1) log(y) - log(scale) for y >= 1, -inf below."""
    log_y, inside, b, scale, ok = _prepare("pareto.logpdf", x, b, loc, scale)
    v = jnp.log(b) - (b + 1.0) * log_y - jnp.log(scale)
    return c.nan_unless(ok, jnp.where(inside, v, -jnp.inf))


def pdf(x, b, loc=0, scale=1):
    """The density b / y^(b + 1) / scale."""
    return jnp.exp(logpdf(x, b, loc, scale))


def cdf(x, b, loc=0, scale=1):
    """1 - y^-b as -expm1(-b log y) (accurate near y = 1), 0 below the support."""
    log_y, _, b, _, ok = _prepare("pareto.cdf", x, b, loc, scale)
    return c.nan_unless(ok, -jnp.expm1(-b * log_y))


def logcdf(x, b, loc=0, scale=1):
    """log(1 - y^-b) by log1mexp; -inf at and below y = 1."""
    log_y, _, b, _, ok = _prepare("pareto.logcdf", x, b, loc, scale)
    return c.nan_unless(ok, c.log1mexp(-b * log_y))


def sf(x, b, loc=0, scale=1):
    """y^-b, 1 below the support."""
    log_y, _, b, _, ok = _prepare("pareto.sf", x, b, loc, scale)
    return c.nan_unless(ok, jnp.exp(-b * log_y))


def logsf(x, b, loc=0, scale=1):
    """-b log(y), 0 below the support."""
    log_y, _, b, _, ok = _prepare("pareto.logsf", x, b, loc, scale)
    return c.nan_unless(ok, -b * log_y)


def ppf(q, b, loc=0, scale=1):
    """The quantile loc + scale (1 - q)^(-1/b): loc + scale at q = 0, inf at 1, NaN outside
    [0, 1]."""
    q, b, loc, scale = c.promote("pareto.ppf", q, b, loc, scale)
    ok = c.unit_interval(q) & (b > 0) & (scale > 0)
    return c.nan_unless(ok, loc + scale * jnp.exp(-jnp.log1p(-q) / b))
