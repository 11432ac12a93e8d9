"""The negative binomial distribution: failures before the n-th success, probability p each
(scipy.stats.nbinom, jax.scipy.stats.nbinom; n may be any positive real).

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN unless n > 0 and 0 < p <= 1, NaN for NaN input; ShapeError (a ValueError) when
shapes do not broadcast. The pmf is 0 off the whole numbers >= 0.
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.scipy import special
from nova.scipy.stats import _common as c


def logpmf(k, n, p, loc=0):
    """gammaln(n + k) - gammaln(n) - gammaln(k + 1) + n log(p) + k log1p(-p) at k - loc in
    {0, 1, ...}."""
    k, ok, (n, p) = c.lattice("nbinom.logpmf", k, loc, n, p)
    good = (n > 0) & (p > 0) & (p <= 1)
    n, p = c.safe(good, n, 1.0), c.safe(good, p, 0.5)
    off = c.off_support(k, 0.0)
    ks = jnp.where(off, 0.0, k)
    v = (special.gammaln(n + ks) - special.gammaln(n) - special.gammaln(ks + 1.0)
         + n * jnp.log(p) + special.xlog1py(ks, -p))
    return c.nan_unless(ok & good, jnp.where(off, -jnp.inf, v))


def pmf(k, n, p, loc=0):
    """The negative binomial pmf exp(logpmf(k, n, p, loc))."""
    return jnp.exp(logpmf(k, n, p, loc))
