"""nova.random's closed-form samplers, multivariate ones and key utilities.

Closed forms transform `uniform` or `normal` draws (bit-exact with JAX) by elementwise maths, and
use the key exactly as jax.random does, so cauchy, laplace, logistic, lognormal, pareto,
rayleigh, maxwell, double_sided_maxwell, weibull_min, wald, triangular, multivariate_normal with
method "cholesky" and orthogonal give JAX's numbers to a few ulps (its log, tan, sqrt, Cholesky
and QR are XLA's own), geometric likewise (up to rare floor boundaries) and rademacher bit for
bit. These match JAX in distribution only: multivariate_normal with "eigh" or "svd" (the factor
is unique only up to column signs and order); generalized_normal and ball (built on gamma); and
gamma, loggamma, beta, dirichlet, chisquare, f, t, poisson, binomial and multinomial
(random_gamma.py, random_discrete.py), whose rejection loops run over the whole array at once
where JAX loops per element, so they consume the key differently.

Imported by nova.random at its end (and importing its private helpers): import nova.random,
not this module, first.
"""

from __future__ import annotations

import operator

from nova import numpy_api as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.core.errors import ShapeError
from nova.numpy_impl.util import broadcast_shapes, where_am_i
from nova.ops import lax
from nova.random import (
    _as_array,
    _check_key,
    _float_dtype,
    _shape,
    _unstack,
    exponential,
    normal,
    split,
    uniform,
)
from nova.random_discrete import rademacher
from nova.random_gamma import _gamma_sample, _params, _real

__all__ = [
    "ball",
    "cauchy",
    "clone",
    "double_sided_maxwell",
    "generalized_normal",
    "key_impl",
    "laplace",
    "logistic",
    "lognormal",
    "maxwell",
    "multivariate_normal",
    "orthogonal",
    "pareto",
    "rayleigh",
    "triangular",
    "wald",
    "weibull_min",
    "wrap_key_data",
]


def _start(name, key, dtype):
    return _check_key(name, key), _float_dtype(name, dtype)


def cauchy(key, shape=(), dtype=None) -> Array:
    """Standard Cauchy floats: tan(pi (u - 1/2)) for u uniform in [eps, 1) (inverse CDF)."""
    k, d = _start("cauchy", key, dtype)
    u = uniform(k, _shape("cauchy", shape), d, float(dtypes.finfo(d).eps), 1.0)
    return jnp.tan(jnp.pi * (u - 0.5))


def laplace(key, shape=(), dtype=None) -> Array:
    """Standard Laplace floats (density e^-|x| / 2): sign(u) log1p(-|u|), u uniform in (-1, 1)."""
    k, d = _start("laplace", key, dtype)
    lo = -1.0 + float(dtypes.finfo(d).epsneg)
    u = uniform(k, _shape("laplace", shape), d, lo, 1.0)
    return jnp.sign(u) * jnp.log1p(-jnp.abs(u))


def logistic(key, shape=(), dtype=None) -> Array:
    """Standard logistic floats: log(u) - log1p(-u), u uniform in [tiny, 1) (the logit)."""
    k, d = _start("logistic", key, dtype)
    u = uniform(k, _shape("logistic", shape), d, float(dtypes.finfo(d).tiny), 1.0)
    return jnp.log(u) - jnp.log1p(-u)


def lognormal(key, sigma=1.0, shape=None, dtype=None) -> Array:
    """Log-normal floats exp(sigma Z), Z standard normal; shape: default sigma's shape."""
    k, d = _start("lognormal", key, dtype)
    shape, (sigma,) = _params("lognormal", shape, d, sigma=sigma)
    return jnp.exp(normal(k, shape, d) * sigma)


def pareto(key, b, shape=None, dtype=None) -> Array:
    """Pareto(b) floats >= 1 (density b / x^(b+1)): exp(E / b), E exponential. b > 0."""
    k, d = _start("pareto", key, dtype)
    shape, (b,) = _params("pareto", shape, d, b=b)
    return jnp.exp(exponential(k, shape, d) / b)


def rayleigh(key, scale, shape=None, dtype=None) -> Array:
    """Rayleigh(scale) floats: scale sqrt(-2 log u) (inverse CDF). scale > 0."""
    k, d = _start("rayleigh", key, dtype)
    shape, (scale,) = _params("rayleigh", shape, d, scale=scale)
    return scale * jnp.sqrt(-2.0 * jnp.log(uniform(k, shape, d)))


def maxwell(key, shape=(), dtype=None) -> Array:
    """Maxwell floats (chi with 3 degrees of freedom): the norm of 3 standard normals."""
    k, d = _start("maxwell", key, dtype)
    z = normal(k, _shape("maxwell", shape) + (3,), d)
    return jnp.sqrt(jnp.sum(z * z, axis=-1))


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None) -> Array:
    """loc + scale * S * M for M Maxwell and S a random sign (density ∝ z^2 e^(-z^2/2)).

    Result shape: shape + broadcast(loc.shape, scale.shape), as JAX documents (JAX itself
    doubles the parameter shape when `shape` is empty; Nova does not).
    """
    k, d = _start("double_sided_maxwell", key, dtype)
    loc, scale = _real("double_sided_maxwell", "loc", loc), _real("double_sided_maxwell",
                                                                 "scale", scale)
    params = broadcast_shapes(loc.shape, scale.shape, name="double_sided_maxwell")
    full = _shape("double_sided_maxwell", shape) + params
    k_m, k_s = _unstack(split(k))
    signed = rademacher(k_s, full, d) * maxwell(k_m, full, d)
    return signed * scale.astype(d) + loc.astype(d)


def weibull_min(key, scale, concentration, shape=(), dtype=None) -> Array:
    """Weibull floats scale * (-log1p(-u))^(1 / concentration) (inverse CDF), u of `shape`;
    the result broadcasts `shape` with the parameters' shapes, as JAX."""
    k, d = _start("weibull_min", key, dtype)
    sc = _real("weibull_min", "scale", scale).astype(d)
    c = _real("weibull_min", "concentration", concentration).astype(d)
    u = uniform(k, _shape("weibull_min", shape), d)
    return jnp.power(-jnp.log1p(-u), 1.0 / c) * sc


def wald(key, mean, shape=None, dtype=None) -> Array:
    """Wald (inverse Gaussian with unit shape) floats of the given mean > 0: Michael, Schucany
    and Haas, "Generating random variates using transformations with multiple roots", The
    American Statistician 30 (1976)."""
    k, d = _start("wald", key, dtype)
    shape, (mu,) = _params("wald", shape, d, mean=mean)
    k1, k2 = _unstack(split(k))
    v = normal(k1, shape, d)
    z = uniform(k2, shape, d)
    y = v * v
    x = mu + mu * mu * y / 2.0 - mu / 2.0 * jnp.sqrt(4.0 * mu * y + mu * mu * y * y)
    return jnp.where(z <= mu / (mu + x), x, mu * mu / x)


def triangular(key, left, mode, right, shape=None, dtype=None) -> Array:
    """Triangular(left, mode, right) floats by the two-branch inverse CDF; shape: default the
    parameters' broadcast shape."""
    k, d = _start("triangular", key, dtype)
    shape, (lo, mo, hi) = _params("triangular", shape, d, left=left, mode=mode, right=right)
    u = uniform(k, shape, d)
    below = lo + jnp.sqrt(u * (hi - lo) * (mo - lo))
    above = hi - jnp.sqrt((1.0 - u) * (hi - lo) * (hi - mo))
    return jnp.where(u < (mo - lo) / (hi - lo), below, above)


def generalized_normal(key, p, shape=(), dtype=None) -> Array:
    """Generalized normal floats with density ∝ exp(-|x|^p): S * G^(1/p), G ~ Gamma(1/p) and S
    a random sign. p > 0: a float or an array broadcasting to shape. Same distribution as JAX,
    not the same numbers."""
    k, d = _start("generalized_normal", key, dtype)
    shape, (p,) = _params("generalized_normal", shape, d, p=p)  # (p may be traced, an array)
    k_g, k_s = _unstack(split(k))
    g = _gamma_sample(k_g, 1.0 / p, False)
    return rademacher(k_s, shape, d) * jnp.power(g, 1.0 / p)


def ball(key, d, p=2, shape=(), dtype=None) -> Array:
    """Points uniform in the unit p-norm ball of R^d, shape + (d,): G / (sum |G|^p + E)^(1/p),
    G generalized normal and E exponential (Barthe, Guédon, Mendelson, Naor, "A probabilistic
    approach to the geometry of the l_p^n-ball", Ann. Probab. 33 (2005)). Raises TypeError for a
    non-integer d."""
    k, dt = _start("ball", key, dtype)
    d = _static_int("ball", "d", d)
    shape = _shape("ball", shape)
    k1, k2 = _unstack(split(k))
    g = generalized_normal(k1, p, shape + (d,), dt)
    e = exponential(k2, shape, dt)
    r = jnp.power(jnp.sum(jnp.power(jnp.abs(g), p), axis=-1) + e, 1.0 / p)
    return g / r[..., None]


def _static_int(name, arg, v) -> int:
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{name}: {arg} must be a Python int, got {v!r}{where_am_i()}") from None


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky") -> Array:
    """Normal vectors with mean (..., n) and covariance cov (..., n, n): mean + A z, A A^T = cov.

    shape: the batch shape (default the broadcast of mean.shape[:-1] and cov.shape[:-2];
    otherwise it must contain both); result shape shape + (n,); dtype: default mean's float dtype.
    method: "cholesky" (A lower-triangular), "eigh" (A = V sqrt(w)) or "svd" (A = U sqrt(s)); the
    last two accept singular cov. Raises ValueError for a bad method, a 0-d mean, or cov not of
    shape (..., n, n); ShapeError (a ValueError) when the batch shapes do not fit `shape`.
    """
    k = _check_key("multivariate_normal", key)
    if method not in ("cholesky", "eigh", "svd"):
        raise ValueError(
            f"multivariate_normal: method must be 'cholesky', 'eigh' or 'svd', got {method!r}"
            f"{where_am_i()}"
        )
    mu = _real("multivariate_normal", "mean", mean)
    cv = _real("multivariate_normal", "cov", cov)
    fd = jnp.result_type(mu.dtype, cv.dtype)  # JAX's promote_dtypes_inexact
    fd = fd if dtypes.is_float(fd) else dtypes.default_float
    d = _float_dtype("multivariate_normal", fd if dtype is None else dtype)
    if mu.ndim < 1 or cv.ndim < 2 or cv.shape[-2:] != mu.shape[-1:] * 2:
        raise ValueError(
            f"multivariate_normal: mean must be (..., n) and cov (..., n, n), got mean "
            f"{mu.shape} and cov {cv.shape}{where_am_i()}"
        )
    batch = broadcast_shapes(mu.shape[:-1], cv.shape[:-2], name="multivariate_normal")
    if shape is not None:
        shape = _shape("multivariate_normal", shape)
        try:
            fits = broadcast_shapes(shape, batch, name="multivariate_normal") == shape
        except ShapeError:
            fits = False
        if not fits:
            raise ShapeError(
                f"multivariate_normal: the batch shapes of mean {mu.shape} and cov {cv.shape} "
                f"do not broadcast to the shape argument {shape}{where_am_i()}"
            )
        batch = shape
    mu, cv = mu.astype(d), cv.astype(d)
    if method == "cholesky":
        factor = jnp.linalg.cholesky(cv)
    elif method == "eigh":
        w, v = jnp.linalg.eigh(cv)
        factor = v * jnp.sqrt(w)[..., None, :]
    else:
        u, s, _ = jnp.linalg.svd(cv)
        factor = u * jnp.sqrt(s)[..., None, :]
    z = normal(k, batch + mu.shape[-1:], d)
    return mu + jnp.matmul(factor, z[..., None])[..., 0]


def orthogonal(key, n, shape=(), dtype=None, m=None) -> Array:
    """Haar-random matrices of shape shape + (n, m) (m defaults to n) with orthonormal columns
    (n >= m) or rows (n < m): Q of a Gaussian matrix's QR with Q's columns multiplied by the signs
    of R's diagonal (Mezzadri, "How to generate random matrices from the classical compact
    groups", Notices of the AMS 54 (2007)). Raises TypeError for non-integer n or m."""
    k, d = _start("orthogonal", key, dtype)
    n = _static_int("orthogonal", "n", n)
    m = n if m is None else _static_int("orthogonal", "m", m)
    shape = _shape("orthogonal", shape)
    z = normal(k, shape + (max(n, m), min(n, m)), d)
    q, r = jnp.linalg.qr(z)
    signs = jnp.sign(jnp.diagonal(r, axis1=-2, axis2=-1))
    x = q * signs[..., None, :]
    return jnp.swapaxes(x, -1, -2) if n < m else x


# --- keys -----------------------------------------------------------------------------------------


def clone(key) -> Array:
    """The key itself (jax.random.clone; Nova has no key-reuse checker to inform)."""
    return _check_key("clone", key)


def key_impl(keys) -> str:
    """The name of the generator of `keys` (a key or an array of keys, uint32 of shape (..., 2)):
    always "threefry2x32", Nova's only one. Raises TypeError for a non-key array."""
    k = _as_array(keys)
    if k.dtype != dtypes.uint32 or k.ndim < 1 or k.shape[-1] != 2:
        raise TypeError(
            f"key_impl: expected keys, a uint32 array of shape (..., 2); got a {k.dtype} array "
            f"of shape {k.shape}{where_am_i()}"
        )
    return "threefry2x32"


def wrap_key_data(key_bits_array, *, impl=None) -> Array:
    """A key from its uint32 words: the array itself, checked (Nova's keys are raw). impl: None
    or "threefry2x32"; raises ValueError for another generator, TypeError for a non-key."""
    if impl not in (None, "threefry2x32"):
        raise ValueError(
            f"wrap_key_data: impl must be None or 'threefry2x32', got {impl!r}{where_am_i()}"
        )
    return _check_key("wrap_key_data", key_bits_array)
