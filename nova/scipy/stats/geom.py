"""The geometric distribution: the trial of the first success, probability p each
(scipy.stats.geom, jax.scipy.stats.geom; support 1, 2, ...).

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN unless 0 < p <= 1, NaN for NaN input; ShapeError (a ValueError) when shapes do not
broadcast. The pmf is 0 off the whole numbers >= 1.
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.scipy import special
from nova.scipy.stats import _common as c


def logpmf(k, p, loc=0):
    """(k - 1) log1p(-p) + log(p) at k - loc in {1, 2, ...} (0 log 0 = 0 at p = 1)."""
    k, ok, (p,) = c.lattice("geom.logpmf", k, loc, p)
    good = (p > 0) & (p <= 1)
    p = c.safe(good, p, 0.5)
    off = c.off_support(k, 1.0)
    ks = jnp.where(off, 1.0, k)
    v = special.xlog1py(ks - 1.0, -p) + jnp.log(p)
    return c.nan_unless(ok & good, jnp.where(off, -jnp.inf, v))


def pmf(k, p, loc=0):
    """The geometric pmf (1 - p)^(k - 1) p."""
    return jnp.exp(logpmf(k, p, loc))
