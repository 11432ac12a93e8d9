"""The generalized normal (exponential power) distribution with shape beta
(scipy.stats.gennorm, jax.scipy.stats.gennorm): density beta / (2 Gamma(1/beta)) exp(-|x|^beta);
beta = 1 is the Laplace, beta = 2 a normal with variance 1/2. Standard form only, as JAX.

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN for beta <= 0 or NaN input; ShapeError (a ValueError) when shapes do not broadcast.
"""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova.scipy import special
from nova.scipy.stats import _common as c


def _prepare(name, x, beta):
    x, beta = c.promote(name, x, beta)
    ok = (beta > 0) & ~jnp.isnan(x)
    return x, c.safe(beta > 0, beta, 1.0), ok


def logpdf(x, beta):
    """log(beta) - log(2) - gammaln(1 / beta) - |x|^beta."""
    x, beta, ok = _prepare("gennorm.logpdf", x, beta)
    v = jnp.log(beta) - math.log(2.0) - special.gammaln(1.0 / beta) - jnp.abs(x) ** beta
    return c.nan_unless(ok, v)


def pdf(x, beta):
    """The density exp(logpdf(x, beta))."""
    return jnp.exp(logpdf(x, beta))


def cdf(x, beta):
    """1/2 Q(1/beta, |x|^beta) for x < 0 and 1 - that above (Q = gammaincc), so the left tail
    keeps its relative accuracy."""
    x, beta, ok = _prepare("gennorm.cdf", x, beta)
    tail = 0.5 * special.gammaincc(1.0 / beta, jnp.abs(x) ** beta)
    return c.nan_unless(ok, jnp.where(x < 0, tail, 1.0 - tail))
