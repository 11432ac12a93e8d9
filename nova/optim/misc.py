"""Small optax utilities: freeze, selective_transform, scale_gradient, normalize_by_update_norm,
safe_increment, per-example clipping (for DP-SGD), optimistic_adam, the DoG step size and
optax's names for stateless transformations' states."""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import numpy as np

import nova.numpy as jnp
from nova import lax
from nova.core.pytree import tree_flatten, tree_leaves, tree_map, tree_unflatten
from nova.optim.base import (
    EmptyState,
    GradientTransformation,
    chain,
    check_float,
    check_like_state,
    check_transformation,
    init_empty_state,
    require_params,
    set_to_zero,
)
from nova.optim.elementwise import scale_by_optimistic_gradient
from nova.optim.linesearch import tree_vdot
from nova.optim.transform import scale_by_adam, scale_by_learning_rate
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


# --- per-example clipping ------------------------------------------------------------------------


def _batched_leaves(fn: str, grads) -> list:
    """The leaves of grads as arrays, checked to share a leading batch dimension."""
    leaves = [jnp.asarray(g) for g in tree_leaves(grads)]
    if not leaves or any(g.ndim == 0 or g.shape[0] != leaves[0].shape[0] for g in leaves):
        shapes = [tuple(g.shape) for g in leaves]
        raise ValueError(f"{fn}: every leaf of grads needs the same batch dimension on axis 0 "
                         f"(per-example gradients), got shapes {shapes}")
    return leaves


def _as_float(g):
    return g if np.dtype(g.dtype).kind == "f" else g.astype(jnp.float32)


def per_example_global_norm_clip(grads, l2_norm_clip):
    """Clips each example's gradient to global L2 norm l2_norm_clip and sums over the batch
    (optax.per_example_global_norm_clip; Abadi et al. 2016, "Deep Learning with Differential
    Privacy", Algorithm 1).

    Args:
      grads: a pytree of arrays, each with the batch (example) dimension B on axis 0.
      l2_norm_clip: the largest per-example norm (a number or 0-d array; inf: no clipping).

    Returns:
      (the pytree of sums over examples of the clipped gradients, each leaf of shape
      leaf.shape[1:] and a float dtype; the number of clipped examples, 0-d int32).

    Raises:
      ValueError: a leaf has no axis 0 or the leaves' batch sizes differ.
    """
    leaves, treedef = tree_flatten(grads)
    leaves = [_as_float(g) for g in _batched_leaves("per_example_global_norm_clip", leaves)]
    batch = leaves[0].shape[0]
    sq = sum(jnp.sum(jnp.square(g.reshape(batch, -1)), axis=1) for g in leaves)
    # an example of norm 0 (0 / 0 with l2_norm_clip 0) is kept: its multiplier is 1
    multipliers = jnp.nan_to_num(jnp.minimum(l2_norm_clip / jnp.sqrt(sq), 1.0), nan=1.0)
    clipped = jnp.sum(multipliers < 1.0).astype(jnp.int32)
    sums = [jnp.tensordot(multipliers.astype(g.dtype), g, axes=1) for g in leaves]
    return tree_unflatten(treedef, sums), clipped


def per_example_layer_norm_clip(grads, global_l2_norm_clip, uniform: bool = True):
    """Clips each example's gradient layer by layer, then sums over the batch
    (optax.per_example_layer_norm_clip; McMahan et al. 2018, "Learning Differentially Private
    Recurrent Language Models"). With K leaves, leaf i is clipped to C / sqrt(K) (uniform) or
    to C * sqrt(D_i / D) (D_i: the leaf's per-example size, D: their total), C =
    global_l2_norm_clip.

    Returns:
      (the pytree of clipped sums, the pytree of per-leaf clip counts, 0-d int32), both with
      grads' structure.

    Raises:
      ValueError: a leaf has no axis 0 or the leaves' batch sizes differ.
    """
    leaves, treedef = tree_flatten(grads)
    leaves = _batched_leaves("per_example_layer_norm_clip", leaves)
    if uniform:
        clips = [global_l2_norm_clip * (1.0 / len(leaves)) ** 0.5 for _ in leaves]
    else:
        total = sum(int(np.prod(g.shape[1:])) for g in leaves)
        clips = [global_l2_norm_clip * (int(np.prod(g.shape[1:])) / total) ** 0.5
                 for g in leaves]
    pairs = [per_example_global_norm_clip(g, c) for g, c in zip(leaves, clips, strict=True)]
    return (tree_unflatten(treedef, [p[0] for p in pairs]),
            tree_unflatten(treedef, [p[1] for p in pairs]))


# --- optimizers ----------------------------------------------------------------------------------


def optimistic_adam(learning_rate: float, optimism: float | None = None, b1: float = 0.9,
                    b2: float = 0.999, eps: float = 1e-8, eps_root: float = 0.0, mu_dtype=None,
                    *, nesterov: bool = True) -> GradientTransformation:
    """Optimistic Adam (Daskalakis et al. 2018, "Training GANs with Optimism"), optax's
    deprecated first interface (optax.optimistic_adam): Adam's update r_t, then
    -(learning_rate r_t + optimism (r_t - r_{t-1})), as chain(scale_by_adam,
    scale_by_optimistic_gradient(alpha=learning_rate, beta=optimism), scale(-1)). optimism
    None means learning_rate. Prefer optimistic_adam_v2 (which takes schedules).

    Warns:
      DeprecationWarning: always, as optax.

    Raises:
      ValueError: learning_rate is a schedule (callable).
    """
    warnings.warn("optimistic_adam is deprecated, use optimistic_adam_v2", DeprecationWarning,
                  stacklevel=2)
    if callable(learning_rate):  # optax raises ValueError here
        raise ValueError(  # noqa: TRY004
            "optimistic_adam: learning_rate must be a number (this version takes "
            "no schedules; optimistic_adam_v2 does)")
    optimism = learning_rate if optimism is None else optimism
    return chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 scale_by_optimistic_gradient(alpha=learning_rate, beta=optimism),
                 scale_by_learning_rate(1.0))


class ScaleByDistanceOverGradientsState(NamedTuple):
    """State of scale_by_distance_over_gradients: per leaf, the largest distance from the
    initial parameters seen (0-d), the running sum of squared gradient entries (shape (1,)),
    and the initial parameters (in param_dtype)."""

    max_dist: Any
    grad_sum_of_squares: Any
    init_params: Any


def _l2(x, y=0.0):
    return jnp.sqrt(jnp.sum(jnp.square(jnp.asarray(x) - y)))


def scale_by_distance_over_gradients(reps_rel: float = 1e-6, eps: float = 1e-8,
                                     param_dtype=jnp.float32, global_scale: float = 1.0
                                     ) -> GradientTransformation:
    """The layer-wise DoG step size (Ivgi, Hinder & Carmon 2023, "DoG is SGD's Best Friend",
    LDoG; optax.scale_by_distance_over_gradients): for each leaf,

        r_t = max(r_{t-1}, ||x_t - x_0||)  (r_0 = reps_rel (1 + ||x_0||)),
        G_t = G_{t-1} + ||g_t||^2,           update = global_scale * r_t / sqrt(G_t + eps) g_t.

    No learning rate: chain it with scale(-1.0) (global_scale=-1.0 does the same). Updates keep
    their leaf's shape (optax turns a 0-d leaf's update into shape (1,)).

    Raises:
      TypeError / ValueError: a hyperparameter is not a finite real number, reps_rel or eps is
        negative; (update) no params, or updates not shaped like the state.
    """
    fn = "scale_by_distance_over_gradients"
    reps_rel = check_float("reps_rel", fn, reps_rel, lo=0.0)
    eps = check_float("eps", fn, eps, lo=0.0)
    global_scale = check_float("global_scale", fn, global_scale)

    def init(params):
        return ScaleByDistanceOverGradientsState(
            max_dist=tree_map(lambda x: reps_rel * (1.0 + _l2(x)), params),
            grad_sum_of_squares=tree_map(lambda _: jnp.zeros(1, jnp.float32), params),
            init_params=tree_map(lambda x: jnp.asarray(x).astype(param_dtype), params))

    def update(updates, state, params=None):
        require_params(fn, params)
        check_like_state(f"{fn}.update", updates, state.init_params, "init_params")
        dist = tree_map(lambda d, x, x0: jnp.maximum(d, _l2(x, x0)), state.max_dist, params,
                        state.init_params)
        sos = tree_map(lambda s, g: s + jnp.sum(jnp.square(g)), state.grad_sum_of_squares,
                       updates)

        def step(g, d, s):
            eta = global_scale * (d / jnp.sqrt(s + eps))
            return jnp.reshape(eta, ()) * g

        out = tree_map(step, updates, dist, sos)
        return out, ScaleByDistanceOverGradientsState(dist, sos, state.init_params)

    return GradientTransformation(init, update)
