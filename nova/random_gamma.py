"""nova.random's gamma family: gamma, loggamma and the samplers built on them (beta, dirichlet,
chisquare, f, t), plus the parameter handling the other distribution modules share.

Imported by nova.random at its end (and importing its private helpers): import nova.random,
not this module, first.
"""

from __future__ import annotations

import functools

from nova import numpy_api as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.custom_derivatives import custom_jvp
from nova.numpy_impl.util import broadcast_shapes, where_am_i
from nova.ops import lax
from nova.random import (
    _as_array,
    _check_key,
    _float_dtype,
    _param,
    _shape,
    _unstack,
    normal,
    split,
    uniform,
)

__all__ = ["beta", "chisquare", "dirichlet", "f", "gamma", "loggamma", "t"]

# --- parameters -----------------------------------------------------------------------------------


def _real(name, arg, value) -> Array:
    """A distribution parameter as an Array; a TypeError naming it when it is not real (a
    complex parameter has no meaning for these distributions) or Nova cannot hold it."""
    try:
        x = _as_array(value)
    except TypeError as e:
        raise TypeError(f"{name}: {arg}: {e}") from None
    if dtypes.is_complex(x.dtype):
        raise TypeError(f"{name}: {arg} must be real, got dtype {x.dtype}{where_am_i()}")
    return x


def _params(name, shape, dtype, **params):
    """The result shape and the parameters as `dtype` arrays of that shape.

    shape: None for the parameters' broadcast shape, else a shape that contains it (ShapeError
    naming the parameter otherwise), as jax.random's `_check_broadcast_shapes`."""
    arrs = {k: _real(name, k, v) for k, v in params.items()}
    if shape is None:
        shape = broadcast_shapes(*(a.shape for a in arrs.values()), name=name)
    shape = _shape(name, shape)
    return shape, [_param(name, k, a, dtype, shape) for k, a in arrs.items()]


def _const(x, v):
    return lax.full_like(x, v)


# --- Marsaglia-Tsang ------------------------------------------------------------------------------


def _marsaglia_tsang(key, alpha):
    """d * V for every element of alpha (>= 1), V the accepted cube of Marsaglia and Tsang.

    G. Marsaglia, W. W. Tsang, "A simple method for generating gamma variables", ACM TOMS 26(3),
    2000: d = alpha - 1/3, c = 1 / sqrt(9 d), v = (1 + c z)^3 for z normal, accepted when
    u < 1 - 0.0331 z^4 (the squeeze) or log u < z^2 / 2 + d (1 - v + log v). All elements draw
    together in one whole-array loop until each has accepted; an element accepts with
    probability >= 0.95, so the loop runs about log(size) / 3 rounds. Elements with no valid d
    (NaN, or alpha < 1/3 from a bad parameter) are done at once with value NaN.
    Returns (log d + log V, d * V).
    """
    shape, dt = alpha.shape, alpha.dtype
    d = alpha - 1.0 / 3.0
    valid = d > 0
    d = jnp.where(valid, d, _const(d, 1.0))
    c = (1.0 / 3.0) / jnp.sqrt(d)

    def cond(state):
        return jnp.any(jnp.logical_not(state[2]))

    def body(state):
        k, v_out, done = state
        k, kz, ku = _unstack(split(k, 3))
        z = normal(kz, shape, dt)
        u = uniform(ku, shape, dt)
        v = 1.0 + c * z
        v = v * v * v
        positive = v > 0
        v = jnp.where(positive, v, _const(v, 1.0))
        z2 = z * z
        accept = positive & (
            (u < 1.0 - 0.0331 * z2 * z2) | (jnp.log(u) < 0.5 * z2 + d * (1.0 - v + jnp.log(v)))
        )
        fresh = accept & jnp.logical_not(done)
        return k, jnp.where(fresh, v, v_out), done | accept

    init = (key, lax.full(shape, float("nan"), dt), jnp.logical_not(valid))
    _, v, _ = _control_flow().while_loop(cond, body, init)
    return jnp.log(d) + jnp.log(v), d * v


def _control_flow():
    import nova.control_flow as cf  # a layer above ops/; imported on first use

    return cf


def _gamma_impl(key, a, log_space):
    """Gamma(a) samples (their logs if log_space) of a's shape and dtype. a < 1 is boosted:
    Gamma(a) = Gamma(a + 1) * U^(1/a) (Marsaglia and Tsang, section 6), in log space
    log Gamma(a + 1) + log(U) / a so that tiny a keeps its precision."""
    k_mt, k_boost = _unstack(split(key))
    small = a < 1.0
    alpha = jnp.where(small, a + 1.0, a)
    log_g, g = _marsaglia_tsang(k_mt, alpha)
    log_u = jnp.log1p(-uniform(k_boost, a.shape, a.dtype))  # log U for U in (0, 1]
    if log_space:
        keep = jnp.logical_not(small) | (log_u == 0)
        return log_g + jnp.where(keep, _const(a, 0.0), log_u / a)
    return g * jnp.where(small, jnp.exp(log_u / a), _const(a, 1.0))


@functools.partial(custom_jvp, nondiff_argnums=(2,))
def _gamma_sample(key, a, log_space):
    return _gamma_impl(key, a, log_space)


@_gamma_sample.defjvp
def _gamma_sample_jvp(log_space, primals, tangents):
    """Implicit reparameterization (Figurnov, Mohamed, Mnih, "Implicit Reparameterization
    Gradients", NeurIPS 2018): dx/da = -(dF/da)(a, x) / p(x; a) for F Gamma(a)'s CDF; in log
    space d log x / da = (dx/da) / x."""
    key, a = primals
    out = _gamma_sample(key, a, log_space)
    if log_space:
        tiny = float(dtypes.finfo(a.dtype).tiny)
        x = jnp.maximum(jnp.exp(out), _const(out, tiny))
        dx = lax.random_gamma_grad(a, x) / x
    else:
        dx = lax.random_gamma_grad(a, out)
    return out, tangents[1] * dx


def _gamma(name, key, a, shape, dtype, log_space):
    k = _check_key(name, key)
    d = _float_dtype(name, dtype)
    shape, (a,) = _params(name, shape, d, a=a)
    return _gamma_sample(k, a, log_space)


def gamma(key, a, shape=None, dtype=None) -> Array:
    """Standard Gamma(a) floats (density x^(a-1) e^-x / Gamma(a), unit scale), as jax.random.gamma.

    a: a positive float or array; shape: the result shape (default a's shape; otherwise it must
    contain a's shape); dtype: a float dtype (float32 by default). Marsaglia and Tsang's
    rejection method (see `_marsaglia_tsang`), with the boost U^(1/a) for a < 1. Differentiable
    in `a` by implicit reparameterization (`lax.random_gamma_grad`), as JAX. Same distribution
    as JAX, not the same numbers. Raises TypeError for a bad key or a complex `a`, ValueError for
    a non-float dtype, ShapeError when a does not broadcast to `shape`.
    """
    return _gamma("gamma", key, a, shape, dtype, log_space=False)


def loggamma(key, a, shape=None, dtype=None) -> Array:
    """log of Gamma(a) samples, accurate where a << 1 makes gamma's samples underflow.

    exp(loggamma(key, a)) equals gamma(key, a) to rounding (the same draws). Arguments, errors
    and the gradient in `a` as `gamma`.
    """
    return _gamma("loggamma", key, a, shape, dtype, log_space=True)


# --- built on gamma -------------------------------------------------------------------------------


def beta(key, a, b, shape=None, dtype=None) -> Array:
    """Beta(a, b) floats in [0, 1]: G_a / (G_a + G_b) for independent Gamma draws.

    a, b: positive floats or arrays; shape: default their broadcast shape. The ratio is formed
    from log-gamma samples shifted by their maximum, so tiny a and b do not give 0 / 0.
    Differentiable in a and b. Errors as `gamma`.
    """
    k = _check_key("beta", key)
    d = _float_dtype("beta", dtype)
    shape, (a, b) = _params("beta", shape, d, a=a, b=b)
    ka, kb = _unstack(split(k))
    la, lb = _gamma_sample(ka, a, True), _gamma_sample(kb, b, True)
    top = jnp.maximum(la, lb)
    ga, gb = jnp.exp(la - top), jnp.exp(lb - top)
    return ga / (ga + gb)


def dirichlet(key, alpha, shape=None, dtype=None) -> Array:
    """Dirichlet(alpha) vectors along the last axis: softmax of log-gamma samples.

    alpha: an array of shape (..., n), n >= 1, positive; shape: the batch shape (default
    alpha.shape[:-1], otherwise it must contain it); result shape shape + (n,). Raises ValueError
    for a 0-d alpha, otherwise as `gamma`.
    """
    k = _check_key("dirichlet", key)
    d = _float_dtype("dirichlet", dtype)
    al = _real("dirichlet", "alpha", alpha)
    if al.ndim < 1:
        raise ValueError(
            f"dirichlet: alpha must have ndim >= 1 (shape (..., n)), got shape {al.shape}"
            f"{where_am_i()}"
        )
    batch = al.shape[:-1] if shape is None else _shape("dirichlet", shape)
    full = batch + al.shape[-1:]
    logs = _gamma_sample(k, _param("dirichlet", "alpha", al, d, full), True)
    logs = logs - jnp.max(logs, axis=-1, keepdims=True)
    e = jnp.exp(logs)
    return e / jnp.sum(e, axis=-1, keepdims=True)


def chisquare(key, df, shape=None, dtype=None) -> Array:
    """Chi-square(df) floats: 2 * Gamma(df / 2), computed as 2 exp(loggamma). df > 0; shape,
    dtype and errors as `gamma`."""
    k = _check_key("chisquare", key)
    d = _float_dtype("chisquare", dtype)
    shape, (df,) = _params("chisquare", shape, d, df=df)
    return 2.0 * jnp.exp(_gamma_sample(k, df / 2.0, True))


def f(key, dfnum, dfden, shape=None, dtype=None) -> Array:
    """F(dfnum, dfden) floats: (X1 / dfnum) / (X2 / dfden) for independent chi-squares.
    dfnum, dfden > 0; shape defaults to their broadcast shape; errors as `gamma`."""
    k = _check_key("f", key)
    d = _float_dtype("f", dtype)
    shape, (dn, dd) = _params("f", shape, d, dfnum=dfnum, dfden=dfden)
    k_den, k_num = _unstack(split(k))
    num = 2.0 * jnp.exp(_gamma_sample(k_num, dn / 2.0, True)) / dn
    den = 2.0 * jnp.exp(_gamma_sample(k_den, dd / 2.0, True)) / dd
    return num / den


def t(key, df, shape=None, dtype=None) -> Array:
    """Student's t(df) floats: Z * sqrt((df / 2) / G) for Z normal and G ~ Gamma(df / 2).
    df > 0; shape, dtype and errors as `gamma`."""
    k = _check_key("t", key)
    d = _float_dtype("t", dtype)
    shape, (df,) = _params("t", shape, d, df=df)
    k_n, k_g = _unstack(split(k))
    half = df / 2.0
    return normal(k_n, shape, d) * jnp.sqrt(half / _gamma_sample(k_g, half, False))
