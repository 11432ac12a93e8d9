"""Gradient transformations (optax's semantics, written with nova.numpy ops).

scale, scale_by_schedule, scale_by_learning_rate, trace (momentum), scale_by_adam,
add_decayed_weights (with a mask), clip_by_global_norm, and the GPT-2 weight-decay mask.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import nova.numpy as jnp
from nova.core.pytree import tree_map, tree_structure
from nova.optim.base import (
    EmptyState,
    GradientTransformation,
    check_bool,
    check_float,
    check_like_state,
    global_norm,
    safe_increment,
    zero_count,
)

Schedule = Callable[[Any], Any]  # step count (int32 array) -> scalar


class ScaleByScheduleState(NamedTuple):
    """State of scale_by_schedule: how many updates were made (0-d int32)."""

    count: Any


class TraceState(NamedTuple):
    """State of trace: the momentum buffer, a pytree shaped like the parameters."""

    trace: Any


class ScaleByAdamState(NamedTuple):
    """State of scale_by_adam: step count (0-d int32), first moment mu, second moment nu."""

    count: Any
    mu: Any
    nu: Any


class AddDecayedWeightsState(NamedTuple):
    """State of add_decayed_weights: none (kept as a named type for checkpoint readability)."""


def scale(step_size: float) -> GradientTransformation:
    """Multiplies every update by the constant `step_size`.

    Raises:
      TypeError: step_size is not a real number.
    """
    step_size = check_float("step_size", "scale", step_size)

    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        del params
        return tree_map(lambda g: step_size * jnp.asarray(g), updates), state

    return GradientTransformation(init, update)


def scale_by_schedule(step_size_fn: Schedule) -> GradientTransformation:
    """Multiplies the updates of step t (t = 0, 1, ...) by step_size_fn(t), as optax.

    The factor is computed from the int32 count held in the state, so under `nova.jit` the
    schedule is part of the compiled step (no retracing as t changes). The factor is cast to each
    update's dtype before multiplying.

    Raises:
      TypeError: step_size_fn is not callable.
    """
    if not callable(step_size_fn):
        raise TypeError(
            f"scale_by_schedule: step_size_fn must be callable (step -> scalar), got "
            f"{type(step_size_fn).__name__}"
        )

    def init(params):
        del params
        return ScaleByScheduleState(count=zero_count())

    def update(updates, state, params=None):
        del params
        step_size = step_size_fn(state.count)
        updates = tree_map(
            lambda g: jnp.asarray(step_size, dtype=jnp.asarray(g).dtype) * g, updates
        )
        return updates, ScaleByScheduleState(count=safe_increment(state.count))

    return GradientTransformation(init, update)


def scale_by_learning_rate(learning_rate, *, flip_sign: bool = True) -> GradientTransformation:
    """Scales updates by -learning_rate (by +learning_rate with flip_sign=False).

    Args:
      learning_rate: a float, or a schedule callable(step: int32 array) -> scalar.

    Raises:
      TypeError: learning_rate is neither a real number nor callable.
      ValueError: a constant learning_rate is negative or not finite.
    """
    m = -1.0 if flip_sign else 1.0
    if callable(learning_rate):
        return scale_by_schedule(lambda count: m * learning_rate(count))
    lr = check_float("learning_rate", "scale_by_learning_rate", learning_rate, lo=0.0)
    return scale(m * lr)


def trace(decay: float, nesterov: bool = False) -> GradientTransformation:
    """Momentum: trace_t = g_t + decay * trace_{t-1}; the update is trace_t, or with Nesterov
    momentum g_t + decay * trace_t (Sutskever et al. 2013, "On the importance of initialization and
    momentum in deep learning", eq. 3-4, in optax's form).

    Raises:
      ValueError: decay is outside [0, 1]; (update) updates not shaped like the parameters.
      TypeError: nesterov is not a bool.
    """
    decay = check_float("decay", "trace", decay, lo=0.0, hi=1.0)
    nesterov = check_bool("nesterov", "trace", nesterov)

    def init(params):
        return TraceState(trace=tree_map(lambda p: jnp.zeros_like(jnp.asarray(p)), params))

    def update(updates, state, params=None):
        del params
        check_like_state("trace.update", updates, state.trace, "trace")
        new_trace = tree_map(lambda g, t: g + decay * t, updates, state.trace)
        if nesterov:
            updates = tree_map(lambda g, t: g + decay * t, updates, new_trace)
        else:
            updates = new_trace
        return updates, TraceState(trace=new_trace)

    return GradientTransformation(init, update)


def _bias_correction(moment, decay: float, count):
    # 1 - decay**count is computed in float32 before the division (as optax), in float64 for
    # float64 moments (as optax with x64): in lower precision decay**count could round to 1 and
    # divide by zero, and a float32 correction of float64 moments errs by ~1e-6 relative.
    corrections = {}

    def correct(t):
        wide = np.dtype(np.float64 if np.dtype(t.dtype) == np.float64 else np.float32)
        if wide not in corrections:
            corrections[wide] = 1 - decay ** count.astype(wide)
        return t / corrections[wide].astype(t.dtype)

    return tree_map(correct, moment)


def scale_by_adam(
    b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, eps_root: float = 0.0
) -> GradientTransformation:
    """Rescales updates by Adam's rule (Kingma & Ba 2015, "Adam: A Method for Stochastic
    Optimization", Algorithm 1):

        m_t = b1 m_{t-1} + (1 - b1) g_t          v_t = b2 v_{t-1} + (1 - b2) g_t^2
        m^_t = m_t / (1 - b1^t)                  v^_t = v_t / (1 - b2^t)
        update = m^_t / (sqrt(v^_t + eps_root) + eps)

    The state holds t (0-d int32) and m, v shaped like the parameters (zeros at init).

    Raises:
      ValueError: b1 or b2 outside [0, 1), eps or eps_root negative; (update) updates not shaped
        like the parameters given to init.
    """
    b1 = check_float("b1", "scale_by_adam", b1, lo=0.0, hi=1.0, hi_open=True)
    b2 = check_float("b2", "scale_by_adam", b2, lo=0.0, hi=1.0, hi_open=True)
    eps = check_float("eps", "scale_by_adam", eps, lo=0.0)
    eps_root = check_float("eps_root", "scale_by_adam", eps_root, lo=0.0)

    def init(params):
        zeros = lambda p: jnp.zeros_like(jnp.asarray(p))  # noqa: E731
        return ScaleByAdamState(
            count=zero_count(), mu=tree_map(zeros, params), nu=tree_map(zeros, params)
        )

    def update(updates, state, params=None):
        del params
        check_like_state("scale_by_adam.update", updates, state.mu, "mu")
        mu = tree_map(lambda g, m: (1 - b1) * g + b1 * m, updates, state.mu)
        nu = tree_map(lambda g, v: (1 - b2) * (g * g) + b2 * v, updates, state.nu)
        count = safe_increment(state.count)
        mu_hat = _bias_correction(mu, b1, count)
        nu_hat = _bias_correction(nu, b2, count)
        updates = tree_map(lambda m, v: m / (jnp.sqrt(v + eps_root) + eps), mu_hat, nu_hat)
        return updates, ScaleByAdamState(count=count, mu=mu, nu=nu)

    return GradientTransformation(init, update)


def _resolve_mask(mask, tree, fn: str):
    """The mask as a pytree of Python bools with the structure of `tree`."""
    mask_tree = mask(tree) if callable(mask) else mask
    want, got = tree_structure(tree), tree_structure(mask_tree)
    if want != got:
        raise ValueError(f"{fn}: the mask's structure {got} differs from the parameters' {want}")
    return mask_tree


def _as_bool(m, fn: str) -> bool:
    if isinstance(m, np.ndarray) and m.shape == () and m.dtype == np.bool_:
        m = m[()]  # a 0-d NumPy bool (np.array(True)), as optax takes
    if isinstance(m, bool | np.bool_):
        return bool(m)
    raise TypeError(
        f"{fn}: mask leaves must be Python bools (the mask is static, not traced), got "
        f"{type(m).__name__}"
    )


def add_decayed_weights(weight_decay: float = 0.0, mask=None) -> GradientTransformation:
    """Adds weight_decay * params to the updates: decoupled weight decay (Loshchilov & Hutter
    2019, "Decoupled Weight Decay Regularization", Algorithm 2, line 12) when placed after Adam's
    rescaling and before the learning rate, as in adamw.

    Args:
      weight_decay: the decay rate (>= 0).
      mask: None (decay every leaf), a pytree of bools with the parameters' structure (True =
        decay this leaf), or a callable params -> such a pytree (see `weight_decay_mask`).

    Raises:
      ValueError: update called without params, or the mask's structure differs from theirs.
      TypeError: a mask leaf is not a bool.
    """
    wd = check_float("weight_decay", "add_decayed_weights", weight_decay, lo=0.0)
    fn = "add_decayed_weights"

    def init(params):
        if mask is not None:
            _resolve_mask(mask, params, fn)
        return AddDecayedWeightsState()

    def update(updates, state, params=None):
        if params is None:
            raise ValueError(f"{fn}: update needs params (call update(updates, state, params))")
        if mask is None:
            return tree_map(lambda g, p: g + wd * p, updates, params), state
        mask_tree = _resolve_mask(mask, params, fn)
        decayed = tree_map(
            lambda g, p, m: g + wd * p if _as_bool(m, fn) else g, updates, params, mask_tree
        )
        return decayed, state

    return GradientTransformation(init, update)


def clip_by_global_norm(max_norm: float) -> GradientTransformation:
    """Rescales all updates together so their global L2 norm is at most max_norm (Pascanu et al.
    2013, "On the difficulty of training recurrent neural networks", Algorithm 1): with
    n = sqrt(sum of squares of every leaf), updates are left unchanged when n < max_norm and
    replaced by u / n * max_norm otherwise. Stateless (EmptyState).

    Raises:
      ValueError: max_norm is not positive.
    """
    max_norm = check_float("max_norm", "clip_by_global_norm", max_norm, lo=0.0)
    if max_norm == 0.0:
        raise ValueError("clip_by_global_norm: max_norm must be > 0, got 0.0")

    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        del params
        g_norm = global_norm(updates)
        keep = g_norm < max_norm

        def clip(t):
            t = jnp.asarray(t)
            return jnp.where(keep, t, (t / g_norm.astype(t.dtype)) * max_norm)

        return tree_map(clip, updates), state

    return GradientTransformation(init, update)


def weight_decay_mask(params):
    """GPT-2's weight-decay mask: True for leaves with ndim >= 2 (the matrices of Linear layers and
    the embeddings), False for biases and LayerNorm scales and offsets (ndim 1) and scalars.

    Args:
      params: a pytree of arrays (e.g. a nova.nn model).

    Returns:
      A pytree of Python bools with the structure of params, usable as adamw's `mask`.
    """
    return tree_map(lambda p: bool(len(np.shape(p)) >= 2), params)


__all__ = [
    "AddDecayedWeightsState", "ScaleByAdamState", "ScaleByScheduleState", "TraceState",
    "add_decayed_weights", "clip_by_global_norm", "scale", "scale_by_adam",
    "scale_by_learning_rate", "scale_by_schedule", "trace", "weight_decay_mask",
]
