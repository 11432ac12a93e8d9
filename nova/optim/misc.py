"""Small optax utilities: freeze, selective_transform, scale_gradient, normalize_by_update_norm,
safe_increment and optax's names for stateless transformations' states."""

from __future__ import annotations

import numpy as np

import nova.lax as lax
import nova.numpy as jnp
from nova.core.pytree import tree_map
from nova.optim.base import (
    EmptyState,
    GradientTransformation,
    check_float,
    check_transformation,
    init_empty_state,
    set_to_zero,
)
from nova.optim.linesearch import tree_vdot
from nova.optim.wrappers import masked, multi_transform

# optax's state names of transformations whose state is empty
ClipState = EmptyState
ClipByGlobalNormState = EmptyState
ScaleState = EmptyState
ScaleByTrustRatioState = EmptyState
NonNegativeParamsState = EmptyState
AdaptiveGradClipState = EmptyState


def freeze(mask) -> GradientTransformation:
    """Zeroes the updates of the leaves where `mask` is True (optax.freeze): masked(set_to_zero(),
    mask). mask: a pytree of bools with the params' structure or a prefix of it, or a callable
    params -> such a pytree. Raises as masked does for a mask of another structure."""
    return masked(set_to_zero(), mask)


def selective_transform(optimizer: GradientTransformation, *, freeze_mask
                        ) -> GradientTransformation:
    """Applies `optimizer` to the leaves where freeze_mask is False and zeroes the others'
    updates (optax.selective_transform), as a multi_transform with labels "train" and
    "freeze"; freeze_mask is a pytree of bools with the params' structure.

    Raises:
      TypeError: optimizer is not a GradientTransformation.
    """
    check_transformation("optimizer", "selective_transform", optimizer)

    def labels(params):
        del params
        return tree_map(lambda m: "freeze" if m else "train", freeze_mask)

    return multi_transform({"train": optimizer, "freeze": set_to_zero()}, labels)


def scale_gradient(inputs, scale: float):
    """`inputs` unchanged in the forward pass, with gradients multiplied by `scale` in the
    backward pass (optax.scale_gradient): stop_gradient(x) + scale * (x - stop_gradient(x))
    for every leaf, so the value is x exactly. scale 0 is stop_gradient."""
    scale = check_float("scale", "scale_gradient", scale)

    def leaf(x):
        x = jnp.asarray(x)
        frozen = lax.stop_gradient(x)
        return frozen if scale == 0.0 else frozen + scale * (x - frozen)

    return tree_map(leaf, inputs)


def normalize_by_update_norm(scale_factor: float = 1.0, eps: float = 1e-6
                             ) -> GradientTransformation:
    """Divides the updates by their global norm: u * scale_factor / (||u|| + eps)
    (optax.normalize_by_update_norm). Stateless.

    Raises:
      TypeError: scale_factor or eps not a real number.
      ValueError: scale_factor is 0 or eps is negative.
    """
    fn = "normalize_by_update_norm"
    scale_factor = check_float("scale_factor", fn, scale_factor)
    if scale_factor == 0.0:
        raise ValueError(f"{fn}: scale_factor must be nonzero, got 0.0")
    eps = check_float("eps", fn, eps, lo=0.0)

    def update(updates, state, params=None):
        del params
        divisor = (jnp.sqrt(tree_vdot(updates, updates)) + eps) / scale_factor
        return tree_map(lambda u: (u / divisor).astype(jnp.asarray(u).dtype), updates), state

    return GradientTransformation(init_empty_state, update)


def safe_increment(count):
    """count + 1, saturating at the largest value of count's dtype (integer or float) instead
    of overflowing (optax.safe_increment); the result has count's dtype.

    Raises:
      ValueError: count's dtype is neither integer nor float.
    """
    count = jnp.asarray(count)
    dt = np.dtype(count.dtype)
    if dt.kind in "iu":
        top = np.iinfo(dt).max
    elif dt.kind == "f":
        top = np.finfo(dt).max
    else:
        raise ValueError(f"safe_increment: count must have an integer or float dtype, got {dt}")
    return jnp.where(count < top, count + 1, top).astype(dt)


safe_int32_increment = safe_increment
