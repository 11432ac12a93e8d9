"""The uniform distribution on [loc, loc + scale] (scipy.stats.uniform, jax.scipy.stats.uniform).

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN for scale <= 0 or NaN input; ShapeError (a ValueError) when shapes do not broadcast.
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.scipy.stats import _common as c


def logpdf(x, loc=0, scale=1):
    """-log(scale) on [loc, loc + scale] (both ends included, as SciPy), -inf outside."""
    z, scale, ok, _ = c.loc_scale("uniform.logpdf", x, loc, scale)
    inside = (z >= 0) & (z <= 1)
    return c.nan_unless(ok, jnp.where(inside, -jnp.log(scale), -jnp.inf))


def pdf(x, loc=0, scale=1):
    """1 / scale on [loc, loc + scale], 0 outside."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """(x - loc) / scale clipped to [0, 1]."""
    z, _, ok, _ = c.loc_scale("uniform.cdf", x, loc, scale)
    return c.nan_unless(ok, jnp.clip(z, 0.0, 1.0))


def ppf(q, loc=0, scale=1):
    """The quantile loc + q * scale for q in [0, 1], NaN outside."""
    q, loc, scale = c.promote("uniform.ppf", q, loc, scale)
    return c.nan_unless(c.unit_interval(q) & (scale > 0), loc + q * scale)
