"""Moment estimates and safe norms over pytrees (optax's update_moment, bias_correction, ...)."""

from __future__ import annotations

import numpy as np

import nova.numpy as jnp
from nova.core.pytree import tree_map


def update_moment(updates, moments, decay, order: int):
    """The exponential moving average of updates**order: (1 - decay) * g**order + decay * m,
    leaf by leaf (optax.update_moment). updates and moments share a structure and shapes."""
    return tree_map(lambda g, t: (1 - decay) * (g**order) + decay * t, updates, moments)


def update_moment_per_elem_norm(updates, moments, decay, order: int):
    """The moving average of the elementwise norm |g|**order (optax.update_moment_per_elem_norm).
    For real leaves, which are all Nova has, optax takes g**order, so this equals
    update_moment."""
    return update_moment(updates, moments, decay, order)


def update_infinity_moment(updates, moments, decay, eps):
    """The infinity-norm moment of Adamax: max(|g| + eps, decay * m), leaf by leaf (Kingma & Ba
    2015, "Adam", section 7.1, with optax's eps inside the maximum)."""
    return tree_map(lambda g, t: jnp.maximum(jnp.abs(g) + eps, decay * t), updates, moments)


def bias_correction(moment, decay, count):
    """moment / (1 - decay**count), leaf by leaf (optax.bias_correction; Kingma & Ba 2015,
    Algorithm 1). count is the int32 step count after this step's increment (>= 1).

    1 - decay**count is computed in float32 (float64 for float64 leaves, as optax with x64) and
    only then cast to the leaf's dtype: in bfloat16 decay**count could round to 1 and divide by
    zero, and a float32 correction of float64 moments errs by ~1e-6 relative.
    """
    count = jnp.asarray(count)
    corrections = {}

    def correct(t):
        t = jnp.asarray(t)
        wide = np.dtype(np.float64 if np.dtype(t.dtype) == np.float64 else np.float32)
        if wide not in corrections:
            corrections[wide] = 1 - decay ** count.astype(wide)
        return t / corrections[wide].astype(t.dtype)

    return tree_map(correct, moment)


def safe_norm(x, min_norm, *, axis=None, keepdims: bool = False):
    """The L2 norm of x (over `axis`, all of it by default), or min_norm where that norm is
    <= min_norm (optax.safe_norm with its default ord, the only one here): x is replaced by ones there before the norm is taken, so the
    gradient stays finite at x = 0."""
    x = jnp.asarray(x)
    norm = jnp.sqrt(jnp.sum(x * x, axis=axis, keepdims=True))
    small = norm <= min_norm
    x = jnp.where(small, jnp.ones_like(x), x)
    safe = jnp.sqrt(jnp.sum(x * x, axis=axis, keepdims=keepdims))
    if not keepdims:
        small = jnp.squeeze(small, axis=axis)
    return jnp.where(small, min_norm, safe).astype(safe.dtype)


def safe_root_mean_squares(x, min_rms):
    """sqrt(mean(x**2)) over all of x, or min_rms where that is <= min_rms
    (optax.safe_root_mean_squares), with x replaced by ones there for a finite gradient."""
    x = jnp.asarray(x)
    rms = jnp.sqrt(jnp.mean(x * x))
    small = rms <= min_rms
    x = jnp.where(small, jnp.ones_like(x), x)
    return jnp.where(small, min_rms, jnp.sqrt(jnp.mean(x * x))).astype(rms.dtype)


__all__ = [
    "bias_correction", "safe_norm", "safe_root_mean_squares", "update_infinity_moment",
    "update_moment", "update_moment_per_elem_norm",
]
