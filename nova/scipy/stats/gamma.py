"""The gamma distribution with shape a (scipy.stats.gamma, jax.scipy.stats.gamma): density
y^(a-1) exp(-y) / Gamma(a) / scale for y = (x - loc) / scale >= 0.

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN for a <= 0, scale <= 0 or NaN input; ShapeError (a ValueError) when shapes do not
broadcast. The CDF and SF are the regularized incomplete gamma functions P(a, y) and Q(a, y) of
nova.scipy.special, each computed directly (no 1 - P in the right tail).
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.scipy import special
from nova.scipy.stats import _common as c


def _prepare(name, x, a, loc, scale):
    y, scale, ok, (a,) = c.loc_scale(name, x, loc, scale, a)
    ok = ok & (a > 0)
    return y, c.safe(a > 0, a, 1.0), scale, ok


def logpdf(x, a, loc=0, scale=1):
    """(a - 1) log(y) - y - gammaln(a) - log(scale) for y >= 0 (inf at y = 0 when a < 1), -inf
    below the support."""
    y, a, scale, ok = _prepare("gamma.logpdf", x, a, loc, scale)
    inside = y >= 0
    ys = c.safe(inside, y, 1.0)
    v = special.xlogy(a - 1.0, ys) - ys - special.gammaln(a) - jnp.log(scale)
    return c.nan_unless(ok, jnp.where(inside, v, -jnp.inf))


def pdf(x, a, loc=0, scale=1):
    """The gamma density exp(logpdf(x, a, loc, scale))."""
    return jnp.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0, scale=1):
    """P(a, y) = gammainc(a, y), 0 below the support."""
    y, a, _, ok = _prepare("gamma.cdf", x, a, loc, scale)
    return c.nan_unless(ok, special.gammainc(a, jnp.maximum(y, 0.0)))


def logcdf(x, a, loc=0, scale=1):
    """log P(a, y), as log1p(-Q(a, y)) where P > 1/2 (so the right tail is not rounded to 0)."""
    return c.log_of_complements(cdf(x, a, loc, scale), sf(x, a, loc, scale))


def sf(x, a, loc=0, scale=1):
    """Q(a, y) = gammaincc(a, y), 1 below the support."""
    y, a, _, ok = _prepare("gamma.sf", x, a, loc, scale)
    return c.nan_unless(ok, special.gammaincc(a, jnp.maximum(y, 0.0)))


def logsf(x, a, loc=0, scale=1):
    """log Q(a, y), as log1p(-P(a, y)) where Q > 1/2."""
    return c.log_of_complements(sf(x, a, loc, scale), cdf(x, a, loc, scale))
