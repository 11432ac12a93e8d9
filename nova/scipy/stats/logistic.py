"""The logistic distribution (scipy.stats.logistic, jax.scipy.stats.logistic).

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN for scale <= 0 or NaN input; ShapeError (a ValueError) when shapes do not broadcast.
As in JAX, ppf and isf name their probability argument x.
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.scipy import special
from nova.scipy.stats import _common as c


def logpdf(x, loc=0, scale=1):
    """-|z| - 2 log1p(exp(-|z|)) - log(scale): the density exp(-z) / (1 + exp(-z))^2 written
    in |z|, so nothing overflows."""
    z, scale, ok, _ = c.loc_scale("logistic.logpdf", x, loc, scale)
    a = jnp.abs(z)
    return c.nan_unless(ok, -a - 2.0 * jnp.log1p(jnp.exp(-a)) - jnp.log(scale))


def pdf(x, loc=0, scale=1):
    """The logistic density exp(logpdf(x, loc, scale))."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """expit(z) = 1 / (1 + exp(-z))."""
    z, _, ok, _ = c.loc_scale("logistic.cdf", x, loc, scale)
    return c.nan_unless(ok, special.expit(z))


def sf(x, loc=0, scale=1):
    """expit(-z) (no cancellation in the right tail)."""
    z, _, ok, _ = c.loc_scale("logistic.sf", x, loc, scale)
    return c.nan_unless(ok, special.expit(-z))


def ppf(x, loc=0, scale=1):
    """The quantile loc + scale * logit(x): -inf at 0, inf at 1, NaN outside [0, 1]."""
    x, loc, scale = c.promote("logistic.ppf", x, loc, scale)
    return c.nan_unless(c.unit_interval(x) & (scale > 0), loc + scale * special.logit(x))


def isf(x, loc=0, scale=1):
    """The inverse survival function loc - scale * logit(x)."""
    x, loc, scale = c.promote("logistic.isf", x, loc, scale)
    return c.nan_unless(c.unit_interval(x) & (scale > 0), loc - scale * special.logit(x))
