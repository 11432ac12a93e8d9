"""The Bernoulli distribution: 1 with probability p, else 0 (scipy.stats.bernoulli,
jax.scipy.stats.bernoulli).

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN unless 0 <= p <= 1, NaN for NaN input; ShapeError (a ValueError) when shapes do not
broadcast. The pmf is 0 off {0, 1} (non-integers included), as SciPy.
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.scipy import special
from nova.scipy.stats import _common as c


def logpmf(k, p, loc=0):
    """k log(p) + (1 - k) log1p(-p) at k - loc in {0, 1} (0 log 0 = 0), -inf elsewhere."""
    k, ok, (p,) = c.lattice("bernoulli.logpmf", k, loc, p)
    good = (p >= 0) & (p <= 1)
    off = c.off_support(k, 0.0, 1.0)
    ks = jnp.where(off, 0.0, k)
    v = special.xlogy(ks, p) + special.xlog1py(1.0 - ks, -p)
    return c.nan_unless(ok & good, jnp.where(off, -jnp.inf, v))


def pmf(k, p, loc=0):
    """p at k - loc = 1, 1 - p at 0, 0 elsewhere."""
    return jnp.exp(logpmf(k, p, loc))


def cdf(k, p):
    """0 below 0, 1 - p on [0, 1), 1 from 1 on."""
    k, p = c.promote("bernoulli.cdf", k, p)
    ok = (p >= 0) & (p <= 1) & ~jnp.isnan(k)
    v = jnp.where(k < 0, 0.0, jnp.where(k < 1, 1.0 - p, 1.0))
    return c.nan_unless(ok, v)


def ppf(q, p):
    """The smallest k with cdf(k) >= q: -1 at q = 0 (SciPy's convention for the point below
    the support), 0 for q <= 1 - p, 1 above; NaN for q outside [0, 1]."""
    q, p = c.promote("bernoulli.ppf", q, p)
    ok = (p >= 0) & (p <= 1) & c.unit_interval(q)
    v = jnp.where(q == 0, -1.0, jnp.where((q <= 1.0 - p) & (q < 1), 0.0, jnp.ones_like(q)))
    return c.nan_unless(ok, v)
