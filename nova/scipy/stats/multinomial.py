"""The multinomial distribution: counts x of K categories in n trials with probabilities p
(scipy.stats.multinomial, jax.scipy.stats.multinomial).

x and p have shape (..., K) (K on the last axis, broadcasting over the leading ones), n the
leading shape (or a scalar); the result has the broadcast leading shape, in the common float
dtype (ints become float32, float64 stays). NaN unless n is a whole number >= 0 and every p is
in [0, 1] (p is used as given: SciPy instead replaces its last entry by 1 - sum of the others),
NaN for NaN input; -inf unless x holds whole numbers >= 0 that sum to n. Raises ValueError for
a 0-d x or p, ShapeError (a ValueError) when shapes do not broadcast.
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.scipy import special
from nova.scipy.stats import _common as c


def logpmf(x, n, p):
    """gammaln(n + 1) + sum_i (x_i log p_i - gammaln(x_i + 1)) (0 log 0 = 0) over the last
    axis."""
    xa, pa = jnp.asarray(x), jnp.asarray(p)
    if xa.ndim == 0 or pa.ndim == 0:
        raise ValueError(f"multinomial.logpmf: x and p need a category axis (shape (..., K)), "
                         f"got shapes {xa.shape} and {pa.shape}")
    n_col = jnp.expand_dims(n, -1) if jnp.ndim(n) else n
    x, p, n = c.promote("multinomial.logpmf", xa, pa, n_col)
    n = n[..., 0]
    good = c.is_integral(n) & (n >= 0) & jnp.all((p >= 0) & (p <= 1), axis=-1)
    ok = good & ~jnp.any(jnp.isnan(x), axis=-1)
    on = jnp.all(c.is_integral(x) & (x >= 0), axis=-1) & (jnp.sum(x, axis=-1) == n)
    xs = jnp.where(jnp.expand_dims(on, -1), x, 0.0)
    v = special.gammaln(jnp.where(on, n, 0.0) + 1.0) + jnp.sum(
        special.xlogy(xs, p) - special.gammaln(xs + 1.0), axis=-1)
    return c.nan_unless(ok, jnp.where(on, v, -jnp.inf))


def pmf(x, n, p):
    """The multinomial pmf exp(logpmf(x, n, p))."""
    return jnp.exp(logpmf(x, n, p))
