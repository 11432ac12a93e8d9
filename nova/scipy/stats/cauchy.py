"""The Cauchy distribution (scipy.stats.cauchy, jax.scipy.stats.cauchy).

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN for scale <= 0 or NaN input; ShapeError (a ValueError) when shapes do not broadcast.
The CDF is arctan2(1, -z) / pi, which keeps its relative accuracy in both tails (SciPy's
1/2 + arctan(z) / pi cancels in the left one), and the quantile uses -cot(pi q) near 0 and
cot(pi (1 - q)) near 1 for the same reason.
"""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova.scipy.stats import _common as c


def logpdf(x, loc=0, scale=1):
    """-log(pi scale (1 + z^2)); for |z| > 1 as -2 log|z| - log1p(1 / z^2), so z^2 cannot
    overflow."""
    z, scale, ok, _ = c.loc_scale("cauchy.logpdf", x, loc, scale)
    big = jnp.abs(z) > 1
    zb = c.safe(big, z, 2.0)
    zs = jnp.where(big, 0.0, z)
    core = jnp.where(big, -2.0 * jnp.log(jnp.abs(zb)) - jnp.log1p(1.0 / (zb * zb)),
                     -jnp.log1p(zs * zs))
    return c.nan_unless(ok, core - math.log(math.pi) - jnp.log(scale))


def pdf(x, loc=0, scale=1):
    """The Cauchy density 1 / (pi scale (1 + z^2))."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """arctan2(1, -z) / pi (= 1/2 + arctan(z) / pi)."""
    z, _, ok, _ = c.loc_scale("cauchy.cdf", x, loc, scale)
    return c.nan_unless(ok, jnp.arctan2(1.0, -z) / math.pi)


def logcdf(x, loc=0, scale=1):
    """log(cdf): about -log(-pi z) in the far left tail, log1p(-sf) above the median."""
    return c.log_of_complements(cdf(x, loc, scale), sf(x, loc, scale))


def sf(x, loc=0, scale=1):
    """arctan2(1, z) / pi (= 1/2 - arctan(z) / pi)."""
    z, _, ok, _ = c.loc_scale("cauchy.sf", x, loc, scale)
    return c.nan_unless(ok, jnp.arctan2(1.0, z) / math.pi)


def logsf(x, loc=0, scale=1):
    """log(sf): about -log(pi z) in the far right tail, log1p(-cdf) below the median."""
    return c.log_of_complements(sf(x, loc, scale), cdf(x, loc, scale))


def _standard_ppf(q):
    # tan(pi (q - 1/2)); in the outer quarters as -cot(pi q) and cot(pi (1 - q)), exact in q
    mid = jnp.abs(q - 0.5) <= 0.25
    v_mid = jnp.tan(math.pi * (c.safe(mid, q, 0.5) - 0.5))
    lo = c.safe(~mid & (q < 0.5), q, 0.1)
    hi = c.safe(~mid & (q > 0.5), 1.0 - q, 0.1)
    v_tail = jnp.where(q < 0.5, -1.0 / jnp.tan(math.pi * lo), 1.0 / jnp.tan(math.pi * hi))
    return c.nan_unless(c.unit_interval(q), jnp.where(mid, v_mid, v_tail))


def ppf(q, loc=0, scale=1):
    """The quantile loc + scale tan(pi (q - 1/2)): -inf at 0, inf at 1, NaN outside [0, 1]."""
    q, loc, scale = c.promote("cauchy.ppf", q, loc, scale)
    return c.nan_unless(scale > 0, loc + scale * _standard_ppf(q))


def isf(q, loc=0, scale=1):
    """The inverse survival function loc - scale tan(pi (q - 1/2))."""
    q, loc, scale = c.promote("cauchy.isf", q, loc, scale)
    return c.nan_unless(scale > 0, loc - scale * _standard_ppf(q))
