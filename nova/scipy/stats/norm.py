"""The normal distribution N(loc, scale^2) (scipy.stats.norm, jax.scipy.stats.norm).

Every function broadcasts its arguments to one shape and returns that shape, in their common
float dtype (ints become float32, float64 stays float64); NaN for scale <= 0 or NaN input;
ShapeError (a ValueError) when the shapes do not broadcast. The log functions stay finite far in
the tails: logcdf is log_ndtr (no underflow of the CDF), logsf is log_ndtr(-z).
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.scipy import special
from nova.scipy.stats import _common as c


def logpdf(x, loc=0, scale=1):
    """log of the normal density: -z^2 / 2 - log(scale) - log(2 pi) / 2, z = (x - loc) / scale."""
    z, scale, ok, _ = c.loc_scale("norm.logpdf", x, loc, scale)
    return c.nan_unless(ok, -0.5 * z * z - jnp.log(scale) - 0.5 * c.LOG_2PI)


def pdf(x, loc=0, scale=1):
    """The normal density exp(logpdf(x, loc, scale))."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """The normal CDF ndtr((x - loc) / scale)."""
    z, _, ok, _ = c.loc_scale("norm.cdf", x, loc, scale)
    return c.nan_unless(ok, special.ndtr(z))


def logcdf(x, loc=0, scale=1):
    """log CDF by log_ndtr: finite to z ~ -1e154 (e.g. -5e19 at z = -1e10)."""
    z, _, ok, _ = c.loc_scale("norm.logcdf", x, loc, scale)
    return c.nan_unless(ok, special.log_ndtr(z))


def sf(x, loc=0, scale=1):
    """The survival function 1 - cdf, computed as ndtr(-z) (no cancellation in the right tail)."""
    z, _, ok, _ = c.loc_scale("norm.sf", x, loc, scale)
    return c.nan_unless(ok, special.ndtr(-z))


def logsf(x, loc=0, scale=1):
    """log of the survival function, log_ndtr(-z)."""
    z, _, ok, _ = c.loc_scale("norm.logsf", x, loc, scale)
    return c.nan_unless(ok, special.log_ndtr(-z))


def ppf(q, loc=0, scale=1):
    """The quantile function loc + scale * ndtri(q): loc -+ inf*scale at q = 0 / 1, NaN outside
    [0, 1]. Accurate to a few ulp in both tails (q = 1e-300 gives -37.047...; see special.ndtri)."""
    q, loc, scale = c.promote("norm.ppf", q, loc, scale)
    return c.nan_unless(scale > 0, loc + scale * special.ndtri(q))


def isf(q, loc=0, scale=1):
    """The inverse survival function loc - scale * ndtri(q) (accurate for tiny q)."""
    q, loc, scale = c.promote("norm.isf", q, loc, scale)
    return c.nan_unless(scale > 0, loc - scale * special.ndtri(q))

