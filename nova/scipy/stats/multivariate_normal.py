"""The multivariate normal distribution N(mean, cov) (scipy.stats.multivariate_normal,
jax.scipy.stats.multivariate_normal).

Shapes: x (..., n) and mean (..., n) broadcast over their leading axes; cov is (..., n, n), or
a scalar (cov * identity), or (n,) (a diagonal, as SciPy). A 0-d mean is the univariate case
(x, mean, cov broadcast elementwise). The result has the broadcast leading shape, in the common
float dtype (ints become float32, float64 stays). A cov that is not positive definite gives NaN
(its Cholesky factor is NaN, as in JAX). Raises ValueError for incompatible shapes and
NotImplementedError for allow_singular=True.
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.numpy_impl.util import broadcast_shapes
from nova.scipy import linalg
from nova.scipy.stats import _common as c


def logpdf(x, mean, cov, allow_singular=None):
    """-1/2 (x - mean)^T cov^-1 (x - mean) - n/2 log(2 pi) - 1/2 log det cov, through the
    Cholesky factor L of cov: one triangular solve L y = x - mean, and log det cov =
    2 sum log diag L."""
    if allow_singular:
        raise NotImplementedError("multivariate_normal.logpdf: allow_singular=True is not "
                                  "supported (a singular cov gives NaN)")
    name = "multivariate_normal.logpdf"
    if jnp.ndim(mean) == 0:
        x, mean, cov = c.promote(name, x, mean, cov)
        d = x - mean
        return -0.5 * d * d / cov - 0.5 * (c.LOG_2PI + jnp.log(cov))
    x_shape, mean_shape, cov_shape = jnp.shape(x), jnp.shape(mean), jnp.shape(cov)
    n = mean_shape[-1]
    if not x_shape or x_shape[-1] != n:
        raise ValueError(f"{name}: x must have shape (..., {n}) for mean of shape {mean_shape}, "
                         f"got {x_shape}")
    if len(cov_shape) == 1 and cov_shape != (n,) or \
            len(cov_shape) >= 2 and cov_shape[-2:] != (n, n):
        raise ValueError(f"{name}: cov must be a scalar, ({n},) or (..., {n}, {n}) for mean of "
                         f"shape {mean_shape}, got {cov_shape}")
    dtype = c.float_dtype(x, mean, cov)
    x, mean = c.promote(name, jnp.asarray(x, dtype=dtype), jnp.asarray(mean, dtype=dtype))
    cov = jnp.asarray(cov, dtype=dtype)
    d = x - mean
    if cov.ndim <= 1:
        # cov * I or diag(cov): the quadratic form and log det need no factorisation
        var = jnp.broadcast_to(cov, (n,))
        maha = jnp.sum(d * d / var, axis=-1)
        return -0.5 * maha - 0.5 * n * c.LOG_2PI - 0.5 * jnp.sum(jnp.log(var))
    chol = jnp.linalg.cholesky(cov)
    log_det = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    if cov.ndim == 2:
        # one factor for every point: solve for all of them as the columns of one matrix
        flat = d.reshape((-1, n)).T
        y = linalg.solve_triangular(chol, flat, lower=True)
        maha = jnp.sum(y * y, axis=0).reshape(d.shape[:-1])
    else:
        batch = broadcast_shapes(d.shape[:-1], cov.shape[:-2], name=name)
        chol = jnp.broadcast_to(chol, batch + (n, n))
        rhs = jnp.broadcast_to(d, batch + (n,))[..., None]
        y = linalg.solve_triangular(chol, rhs, lower=True)[..., 0]
        maha = jnp.sum(y * y, axis=-1)
    return -0.5 * maha - 0.5 * n * c.LOG_2PI - 0.5 * log_det


def pdf(x, mean, cov):
    """The multivariate normal density exp(logpdf(x, mean, cov))."""
    return jnp.exp(logpdf(x, mean, cov))
