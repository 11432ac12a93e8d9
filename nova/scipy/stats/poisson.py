"""The Poisson distribution with mean mu (scipy.stats.poisson, jax.scipy.stats.poisson).

Arguments broadcast to one shape, in their common float dtype (ints become float32, float64
stays); NaN for mu < 0 or NaN input (mu = 0 puts all mass on 0); ShapeError (a ValueError) when
shapes do not broadcast. The pmf is 0 off the whole numbers >= 0.
"""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova.scipy import special
from nova.scipy.stats import _common as c

# entropy: exact sums below _ASYMPTOTIC over _WINDOW points around the mean (+-12 standard
# deviations and more at mu < 200, where the omitted pmf is below 1e-30), the asymptotic series
# above (4 terms: the next is O(mu^-5), < 1e-12 relative at mu = 200)
_ASYMPTOTIC = 200.0
_WINDOW = 400


def logpmf(k, mu, loc=0):
    """k log(mu) - mu - gammaln(k + 1) at k - loc in {0, 1, ...} (0 log 0 = 0 at mu = 0)."""
    k, ok, (mu,) = c.lattice("poisson.logpmf", k, loc, mu)
    good = mu >= 0
    mu = c.safe(good, mu, 1.0)
    off = c.off_support(k, 0.0)
    ks = jnp.where(off, 0.0, k)
    v = special.xlogy(ks, mu) - mu - special.gammaln(ks + 1.0)
    return c.nan_unless(ok & good, jnp.where(off, -jnp.inf, v))


def pmf(k, mu, loc=0):
    """The Poisson pmf mu^k exp(-mu) / k!."""
    return jnp.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0):
    """P(K <= k - loc) = Q(floor(k - loc) + 1, mu) (gammaincc), 0 below 0, 1 at +inf."""
    k, ok, (mu,) = c.lattice("poisson.cdf", k, loc, mu)
    good = mu >= 0
    mu = c.safe(good, mu, 1.0)
    kf = jnp.floor(k)
    body = (kf >= 0) & jnp.isfinite(kf)
    v = special.gammaincc(c.safe(body, kf, 0.0) + 1.0, mu)
    v = jnp.where(body, v, jnp.where(kf < 0, 0.0, jnp.ones_like(v)))
    return c.nan_unless(ok & good, v)


def entropy(mu, loc=0):
    """The Shannon entropy -sum_k pmf(k) log pmf(k) in nats (loc does not change it): the sum
    over a window of 400 points around the mean for mu < 200, else the asymptotic series
    1/2 log(2 pi e mu) - 1/(12 mu) - 1/(24 mu^2) - 19/(360 mu^3) - 9/(80 mu^4) (R. J. Evans,
    J. Boersma, N. M. Blachman, A. A. Jagers, "The entropy of a Poisson distribution", SIAM
    Review 30, 1988). 0 at mu = 0, NaN for mu < 0 (SciPy's generic sum stops converging above
    ~1e5; this does not)."""
    mu, loc = c.promote("poisson.entropy", mu, loc)
    good = mu >= 0
    small = mu < _ASYMPTOTIC
    ms = c.safe(small & good, mu, 1.0)
    start = jnp.maximum(jnp.floor(ms - 12.0 * jnp.sqrt(ms) - 10.0), 0.0)
    k = jnp.expand_dims(start, -1) + jnp.arange(_WINDOW, dtype=mu.dtype)
    m = jnp.expand_dims(ms, -1)
    log_p = special.xlogy(k, m) - m - special.gammaln(k + 1.0)
    p = jnp.exp(log_p)
    summed = jnp.sum(jnp.where(p > 0, -p * log_p, 0.0), axis=-1)
    ml = jnp.where(small, 1e3, mu)
    inv = 1.0 / ml
    series = 0.5 * (math.log(2.0 * math.pi) + 1.0 + jnp.log(ml)) - inv * (
        1.0 / 12 + inv * (1.0 / 24 + inv * (19.0 / 360 + inv * (9.0 / 80))))
    v = jnp.where(small, summed, series)
    v = jnp.where(mu == 0, 0.0, v)
    return c.nan_unless(good, v)
