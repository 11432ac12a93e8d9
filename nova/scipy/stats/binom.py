"""The binomial distribution: successes in n trials of probability p (scipy.stats.binom,
jax.scipy.stats.binom).

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN unless n is a whole number >= 0 and 0 <= p <= 1, NaN for NaN input; ShapeError (a
ValueError) when shapes do not broadcast. The pmf is 0 off {0, ..., n}.
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.scipy import special
from nova.scipy.stats import _common as c


def logpmf(k, n, p, loc=0):
    """log C(n, k) + k log(p) + (n - k) log1p(-p) (0 log 0 = 0) at k - loc in {0, ..., n}."""
    k, ok, (n, p) = c.lattice("binom.logpmf", k, loc, n, p)
    good = c.is_integral(n) & (n >= 0) & (p >= 0) & (p <= 1)
    n = c.safe(good, n, 1.0)
    off = c.off_support(k, 0.0, n)
    ks = jnp.where(off, 0.0, k)
    v = c.log_comb(n, ks) + special.xlogy(ks, p) + special.xlog1py(n - ks, -p)
    return c.nan_unless(ok & good, jnp.where(off, -jnp.inf, v))


def pmf(k, n, p, loc=0):
    """The binomial pmf exp(logpmf(k, n, p, loc))."""
    return jnp.exp(logpmf(k, n, p, loc))
