"""The Laplace (double exponential) distribution (scipy.stats.laplace, jax.scipy.stats.laplace).

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN for scale <= 0 or NaN input; ShapeError (a ValueError) when shapes do not broadcast.
"""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova.scipy.stats import _common as c


def logpdf(x, loc=0, scale=1):
    """-|z| - log(2 scale), z = (x - loc) / scale."""
    z, scale, ok, _ = c.loc_scale("laplace.logpdf", x, loc, scale)
    return c.nan_unless(ok, -jnp.abs(z) - jnp.log(scale) - math.log(2.0))


def pdf(x, loc=0, scale=1):
    """The Laplace density exp(-|z|) / (2 scale)."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """exp(z) / 2 for z < 0, 1 - exp(-z) / 2 above (each side without cancellation)."""
    z, _, ok, _ = c.loc_scale("laplace.cdf", x, loc, scale)
    half_tail = 0.5 * jnp.exp(-jnp.abs(z))
    return c.nan_unless(ok, jnp.where(z < 0, half_tail, 1.0 - half_tail))
