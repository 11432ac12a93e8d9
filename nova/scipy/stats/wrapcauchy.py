"""The wrapped Cauchy distribution on [0, 2 pi] with shape c (scipy.stats.wrapcauchy,
jax.scipy.stats.wrapcauchy): density (1 - c^2) / (2 pi (1 + c^2 - 2 c cos x)).

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN unless 0 < c < 1, NaN for NaN input; -inf outside [0, 2 pi]; ShapeError (a
ValueError) when shapes do not broadcast.
"""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova.scipy.stats import _common as common


def logpdf(x, c):
    """log((1 - c)(1 + c)) - log(2 pi) - log((1 - c)^2 + 4 c sin^2(x / 2)): both written so that
    they do not cancel for c near 1 (and x near 0)."""
    x, c = common.promote("wrapcauchy.logpdf", x, c)
    good = (c > 0) & (c < 1)
    ok = good & ~jnp.isnan(x)
    cs = common.safe(good, c, 0.5)
    s = jnp.sin(0.5 * x)
    v = (jnp.log1p(-cs) + jnp.log1p(cs) - common.LOG_2PI
         - jnp.log((1.0 - cs) * (1.0 - cs) + 4.0 * cs * s * s))
    inside = (x >= 0) & (x <= 2.0 * math.pi)
    return common.nan_unless(ok, jnp.where(inside, v, -jnp.inf))


def pdf(x, c):
    """The wrapped Cauchy density exp(logpdf(x, c))."""
    return jnp.exp(logpdf(x, c))
