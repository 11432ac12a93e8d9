"""The Dirichlet distribution on the probability simplex (scipy.stats.dirichlet,
jax.scipy.stats.dirichlet).

alpha has shape (K,); x has shape (K, ...) or (K - 1, ...), the components on the first axis
(SciPy's layout; with K - 1 of them the last is 1 minus their sum); the result has shape
x.shape[1:], in the common float dtype (ints become float32, float64 stays). NaN unless every
alpha is > 0, NaN for NaN input; -inf off the simplex (a negative component, or a sum further
than 1e-9 from 1 in float64, ~1e-5 in float32: SciPy raises there instead). Raises ValueError
for an alpha that is not 1-d or an x whose first axis is neither K nor K - 1.
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.scipy import special
from nova.scipy.stats import _common as c


def logpdf(x, alpha):
    """sum_i (alpha_i - 1) log x_i - (sum_i gammaln(alpha_i) - gammaln(sum_i alpha_i))."""
    x, alpha = jnp.asarray(x), jnp.asarray(alpha)
    if alpha.ndim != 1:
        raise ValueError(f"dirichlet.logpdf: alpha must be 1-d (K,), got shape {alpha.shape}")
    k = alpha.shape[0]
    if x.ndim == 0 or x.shape[0] not in (k, k - 1):
        raise ValueError(f"dirichlet.logpdf: x must have shape ({k}, ...) or ({k - 1}, ...) for "
                         f"alpha of shape {alpha.shape}, got {x.shape}")
    (x,) = c.promote("dirichlet.logpdf", x)
    if x.shape[0] == k - 1:
        x = jnp.concatenate([x, 1.0 - jnp.sum(x, axis=0, keepdims=True)], axis=0)
    x, alpha = c.promote("dirichlet.logpdf", x, alpha.reshape((k,) + (1,) * (x.ndim - 1)))
    good = jnp.all(alpha > 0, axis=0)
    a = c.safe(good, alpha, 1.0)
    tol = max(1e-9, 100 * float(jnp.finfo(x.dtype).eps))
    on = jnp.all(x >= 0, axis=0) & (jnp.abs(jnp.sum(x, axis=0) - 1.0) <= tol)
    xs = jnp.where(on, x, 1.0 / k)
    log_norm = jnp.sum(special.gammaln(a), axis=0) - special.gammaln(jnp.sum(a, axis=0))
    v = jnp.sum(special.xlogy(a - 1.0, xs), axis=0) - log_norm
    ok = good & ~jnp.any(jnp.isnan(x), axis=0)
    return c.nan_unless(ok, jnp.where(on, v, -jnp.inf))


def pdf(x, alpha):
    """The Dirichlet density exp(logpdf(x, alpha))."""
    return jnp.exp(logpdf(x, alpha))
