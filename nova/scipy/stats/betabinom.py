"""The beta-binomial distribution: binomial with n trials and a Beta(a, b) success
probability (scipy.stats.betabinom, jax.scipy.stats.betabinom).

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN unless n is a whole number >= 0, a > 0 and b > 0, NaN for NaN input; ShapeError (a
ValueError) when shapes do not broadcast. The pmf is 0 off {0, ..., n}.
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.scipy import special
from nova.scipy.stats import _common as c


def logpmf(k, n, a, b, loc=0):
    """log C(n, k) + betaln(k + a, n - k + b) - betaln(a, b) at k - loc in {0, ..., n}."""
    k, ok, (n, a, b) = c.lattice("betabinom.logpmf", k, loc, n, a, b)
    good = c.is_integral(n) & (n >= 0) & (a > 0) & (b > 0)
    n, a, b = c.safe(good, n, 1.0), c.safe(good, a, 1.0), c.safe(good, b, 1.0)
    off = c.off_support(k, 0.0, n)
    ks = jnp.where(off, 0.0, k)
    v = c.log_comb(n, ks) + special.betaln(ks + a, n - ks + b) - special.betaln(a, b)
    return c.nan_unless(ok & good, jnp.where(off, -jnp.inf, v))


def pmf(k, n, a, b, loc=0):
    """The beta-binomial pmf exp(logpmf(k, n, a, b, loc))."""
    return jnp.exp(logpmf(k, n, a, b, loc))
