"""Transformations that act on each leaf (parameter block, layer) as a whole: trust ratios,
block norms and RMS, block clipping, adaptive gradient clipping, gradient centralization and
NovoGrad's layer-wise moments."""

from __future__ import annotations

from typing import Any, NamedTuple

import nova.numpy as jnp
from nova.core.pytree import tree_map
from nova.optim.base import (
    EmptyState,
    GradientTransformation,
    cast_tree,
    check_float,
    check_float_dtype,
    check_like_state,
    require_params,
    safe_increment,
    zero_count,
    zeros_like_tree,
)
from nova.optim.moments import safe_norm, safe_root_mean_squares


def _empty_init(params):
    del params
    return EmptyState()


def centralize() -> GradientTransformation:
    """Gradient centralization (Yong et al. 2020, "Gradient Centralization: A New Optimization
    Technique for Deep Neural Networks"): every leaf with ndim > 1 has its mean over all
    axes but the first subtracted; vectors and scalars are left alone. Stateless."""

    def center(g):
        g = jnp.asarray(g)
        if g.ndim <= 1:
            return g
        return g - jnp.mean(g, axis=tuple(range(1, g.ndim)), keepdims=True)

    def update(updates, state, params=None):
        del params
        return tree_map(center, updates), state

    return GradientTransformation(_empty_init, update)


def scale_by_trust_ratio(min_norm: float = 0.0, trust_coefficient: float = 1.0,
                         eps: float = 0.0) -> GradientTransformation:
    """Scales each leaf's update by its trust ratio trust_coefficient * ||p|| / (||u|| + eps)
    (You et al. 2017, "Large Batch Training of Convolutional Networks" (LARS); You et al. 2020, "Large Batch Optimization for Deep Learning" (LAMB), Algorithm 2), with norms of at
    most min_norm taken as min_norm, and a ratio of 1 where either norm is 0. Stateless; update
    needs params.

    Raises:
      ValueError: a negative argument, or update called without params.
    """
    fn = "scale_by_trust_ratio"
    min_norm = check_float("min_norm", fn, min_norm, lo=0.0)
    trust_coefficient = check_float("trust_coefficient", fn, trust_coefficient, lo=0.0)
    eps = check_float("eps", fn, eps, lo=0.0)

    def scale_leaf(u, p):
        u, p = jnp.asarray(u), jnp.asarray(p)
        p_norm = safe_norm(p, min_norm)
        u_norm = safe_norm(u, min_norm)
        ratio = trust_coefficient * p_norm / (u_norm + eps)
        ratio = jnp.where((p_norm == 0.0) | (u_norm == 0.0), jnp.ones((), p.dtype), ratio)
        return u * ratio

    def update(updates, state, params=None):
        require_params(fn, params)
        return tree_map(scale_leaf, updates, params), state

    return GradientTransformation(_empty_init, update)


def scale_by_param_block_norm(min_scale: float = 1e-3) -> GradientTransformation:
    """Multiplies each leaf's update by the L2 norm of its parameter block, at least min_scale
    (optax.scale_by_param_block_norm; cf. the relative step size of Adafactor, Shazeer & Stern
    2018). Stateless; update needs params.

    Raises:
      ValueError: min_scale negative, or update called without params.
    """
    fn = "scale_by_param_block_norm"
    min_scale = check_float("min_scale", fn, min_scale, lo=0.0)

    def update(updates, state, params=None):
        require_params(fn, params)
        return tree_map(lambda u, p: u * safe_norm(p, min_scale), updates, params), state

    return GradientTransformation(_empty_init, update)


def scale_by_param_block_rms(min_scale: float = 1e-3) -> GradientTransformation:
    """Multiplies each leaf's update by the root mean square of its parameter block, at least
    min_scale (Adafactor's relative step size RMS(X_{t-1}), Shazeer & Stern 2018).
    Stateless; update needs params.

    Raises:
      ValueError: min_scale negative, or update called without params.
    """
    fn = "scale_by_param_block_rms"
    min_scale = check_float("min_scale", fn, min_scale, lo=0.0)

    def update(updates, state, params=None):
        require_params(fn, params)
        return tree_map(lambda u, p: u * safe_root_mean_squares(p, min_scale), updates,
                        params), state

    return GradientTransformation(_empty_init, update)


def clip_by_block_rms(threshold: float) -> GradientTransformation:
    """Clips each leaf to a root mean square of at most threshold: u / max(1, rms(u) / threshold)
    (Adafactor's update clipping, Shazeer & Stern 2018, "Adafactor: Adaptive Learning Rates with
    Sublinear Memory Cost"). Stateless.

    Raises:
      ValueError: threshold is not positive.
    """
    threshold = check_float("threshold", "clip_by_block_rms", threshold, lo=0.0)
    if isinstance(threshold, float) and threshold == 0.0:
        raise ValueError("clip_by_block_rms: threshold must be > 0, got 0.0")

    def clip_leaf(u):
        u = jnp.asarray(u)
        return u / jnp.maximum(1.0, jnp.sqrt(jnp.mean(u * u)) / threshold)

    def update(updates, state, params=None):
        del params
        return tree_map(clip_leaf, updates), state

    return GradientTransformation(_empty_init, update)


def unitwise_norm(x, axis=None):
    """The L2 norm of x per output unit, broadcast back to x's shape (optax.unitwise_norm; Brock
    et al. 2021, "High-Performance Large-Scale Image Recognition Without Normalization"): over
    `axis` when given; otherwise over all of x for (squeezed) vectors and scalars, over axis 0
    for ndim 2 and 3 (dense and 1-d conv kernels, HWIO-style layouts), over axes (0, 1, 2) for
    ndim 4 and (0, 1, 2, 3) for ndim 5.

    Raises:
      ValueError: axis is None and x has more than 5 dimensions.
    """
    x = jnp.asarray(x)
    if axis is not None:
        sq = jnp.sum(x * x, axis=axis, keepdims=True)
    elif sum(d != 1 for d in x.shape) <= 1:
        sq = jnp.sum(x * x, keepdims=True)
    elif x.ndim in (2, 3):
        sq = jnp.sum(x * x, axis=0, keepdims=True)
    elif x.ndim in (4, 5):
        sq = jnp.sum(x * x, axis=tuple(range(x.ndim - 1)), keepdims=True)
    else:
        raise ValueError(f"unitwise_norm: expected a parameter with 1 to 5 dimensions, got shape "
                         f"{tuple(x.shape)}; pass axis= for other shapes")
    return jnp.broadcast_to(jnp.sqrt(sq), x.shape)


def adaptive_grad_clip(clipping: float, eps: float = 1e-3, axis=None) -> GradientTransformation:
    """Adaptive gradient clipping (Brock et al. 2021, "High-Performance Large-Scale Image
    Recognition Without Normalization"): per unit (see `unitwise_norm`), with
    max = clipping * max(||W||, eps), the gradient is kept where ||G|| < max and scaled to
    G * max / max(||G||, 1e-6) elsewhere. Stateless; update needs params.

    Raises:
      ValueError: clipping or eps negative, update called without params, or a leaf of more than
        5 dimensions without axis.
    """
    fn = "adaptive_grad_clip"
    clipping = check_float("clipping", fn, clipping, lo=0.0)
    eps = check_float("eps", fn, eps, lo=0.0)

    def clip_leaf(g, p):
        g = jnp.asarray(g)
        g_norm = unitwise_norm(g, axis)
        max_norm = clipping * jnp.maximum(unitwise_norm(p, axis), eps)
        clipped = g * (max_norm / jnp.maximum(g_norm, 1e-6))
        return jnp.where(g_norm < max_norm, g, clipped)

    def update(updates, state, params=None):
        require_params(fn, params)
        return tree_map(clip_leaf, updates, params), state

    return GradientTransformation(_empty_init, update)


class ScaleByNovogradState(NamedTuple):
    """State of scale_by_novograd: step count (0-d int32), the first moment mu shaped like the
    params, and nu, one 0-d second moment per leaf (layer)."""

    count: Any
    mu: Any
    nu: Any


def scale_by_novograd(b1: float = 0.9, b2: float = 0.25, eps: float = 1e-8,
                      eps_root: float = 0.0, weight_decay: float = 0.0, mu_dtype=None
                      ) -> GradientTransformation:
    """NovoGrad's rescaling (Ginsburg et al. 2019, "Stochastic Gradient Methods with Layer-wise
    Adaptive Moments for Training of Deep Networks", Algorithm 1), per leaf (layer) l:

        v_t = ||g_t||^2 at t = 1, else b2 v_{t-1} + (1 - b2) ||g_t||^2
        q_t = g_t / (sqrt(v_t + eps_root) + eps) + weight_decay * p
        m_t = q_t at t = 1, else b1 m_{t-1} + q_t;   update = m_t

    Update needs params.

    Raises:
      ValueError: b1 or b2 outside [0, 1], a negative eps, eps_root or weight_decay; update
        called without params.
      TypeError: mu_dtype is not a float dtype.
    """
    fn = "scale_by_novograd"
    b1 = check_float("b1", fn, b1, lo=0.0, hi=1.0)
    b2 = check_float("b2", fn, b2, lo=0.0, hi=1.0)
    eps = check_float("eps", fn, eps, lo=0.0)
    eps_root = check_float("eps_root", fn, eps_root, lo=0.0)
    weight_decay = check_float("weight_decay", fn, weight_decay, lo=0.0)
    mu_dtype = check_float_dtype("mu_dtype", fn, mu_dtype)

    def init(params):
        return ScaleByNovogradState(
            count=zero_count(), mu=zeros_like_tree(params, mu_dtype),
            nu=tree_map(lambda p: jnp.zeros((), jnp.asarray(p).dtype), params))

    def update(updates, state, params=None):
        require_params(fn, params)
        check_like_state(f"{fn}.update", updates, state.mu, "mu")
        count = safe_increment(state.count)
        first = count == 1

        def second(g, v):
            sq = jnp.sum(g * g).astype(v.dtype)
            return jnp.where(first, sq, b2 * v + (1 - b2) * sq).astype(v.dtype)

        nu = tree_map(second, updates, state.nu)

        def first_moment(g, p, m, v):
            q = g / (jnp.sqrt(v + eps_root) + eps) + weight_decay * p
            return jnp.where(first, q, b1 * m + q)

        mu = cast_tree(tree_map(first_moment, updates, params, state.mu, nu), mu_dtype)
        return mu, ScaleByNovogradState(count=count, mu=mu, nu=nu)

    return GradientTransformation(init, update)


__all__ = [
    "ScaleByNovogradState", "adaptive_grad_clip", "centralize", "clip_by_block_rms",
    "scale_by_novograd", "scale_by_param_block_norm", "scale_by_param_block_rms",
    "scale_by_trust_ratio", "unitwise_norm",
]
