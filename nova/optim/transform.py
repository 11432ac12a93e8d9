"""Gradient transformations (optax's semantics, written with nova.numpy ops).

scale, scale_by_schedule, scale_by_learning_rate, trace (momentum), ema, scale_by_adam,
add_decayed_weights (with a mask or a schedule), clip_by_global_norm, and the GPT-2 weight-decay
mask.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import nova.numpy as jnp
from nova.core.pytree import tree_map
from nova.optim.base import (
    EmptyState,
    GradientTransformation,
    cast_tree,
    check_bool,
    check_float,
    check_float_dtype,
    check_like_state,
    global_norm,
    identity,
    resolve_mask,
    safe_increment,
    zero_count,
    zeros_like_tree,
)
from nova.optim.moments import (
    bias_correction,
    update_moment,
    update_moment_per_elem_norm,
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
      learning_rate: a float, a schedule callable(step: int32 array) -> scalar, or None (the
        identity, as optax).

    Raises:
      TypeError: learning_rate is neither a real number nor callable.
      ValueError: a constant learning_rate is negative or not finite.
    """
    if learning_rate is None:
        return identity()
    m = -1.0 if flip_sign else 1.0
    if callable(learning_rate):
        return scale_by_schedule(lambda count: m * learning_rate(count))
    lr = check_float("learning_rate", "scale_by_learning_rate", learning_rate, lo=0.0)
    return scale(m * lr)


def trace(decay: float, nesterov: bool = False, accumulator_dtype=None) -> GradientTransformation:
    """Momentum: trace_t = g_t + decay * trace_{t-1}; the update is trace_t, or with Nesterov
    momentum g_t + decay * trace_t (Sutskever et al. 2013, "On the importance of initialization and
    momentum in deep learning", eq. 3-4, in optax's form).

    Args:
      decay: the momentum, in [0, 1].
      nesterov: use Nesterov momentum.
      accumulator_dtype: the dtype of the trace buffer (None: the parameters').

    Raises:
      ValueError: decay is outside [0, 1]; (update) updates not shaped like the parameters.
      TypeError: nesterov is not a bool.
    """
    decay = check_float("decay", "trace", decay, lo=0.0, hi=1.0)
    nesterov = check_bool("nesterov", "trace", nesterov)
    acc_dtype = check_float_dtype("accumulator_dtype", "trace", accumulator_dtype)

    def init(params):
        return TraceState(trace=zeros_like_tree(params, acc_dtype))

    def update(updates, state, params=None):
        del params
        check_like_state("trace.update", updates, state.trace, "trace")
        new_trace = tree_map(lambda g, t: g + decay * t, updates, state.trace)
        if nesterov:
            updates = tree_map(lambda g, t: g + decay * t, updates, new_trace)
        else:
            updates = new_trace
        return updates, TraceState(trace=cast_tree(new_trace, acc_dtype))

    return GradientTransformation(init, update)


class EmaState(NamedTuple):
    """State of ema: step count (0-d int32) and the moving average, shaped like the params."""

    count: Any
    ema: Any


def ema(decay: float, debias: bool = True, accumulator_dtype=None) -> GradientTransformation:
    """An exponential moving average of the updates (optax.ema):

        ema_t = (1 - decay) * g_t + decay * ema_{t-1}      (ema_0 = 0)

    and the update is ema_t, or with debias ema_t / (1 - decay**t) (the bias correction of Adam,
    Kingma & Ba 2015, section 3).

    Raises:
      ValueError: decay outside [0, 1] (outside [0, 1) with debias).
      TypeError: debias is not a bool.
    """
    debias = check_bool("debias", "ema", debias)
    decay = check_float("decay", "ema", decay, lo=0.0, hi=1.0, hi_open=debias)
    acc_dtype = check_float_dtype("accumulator_dtype", "ema", accumulator_dtype)

    def init(params):
        return EmaState(count=zero_count(), ema=zeros_like_tree(params, acc_dtype))

    def update(updates, state, params=None):
        del params
        check_like_state("ema.update", updates, state.ema, "ema")
        new_ema = update_moment(updates, state.ema, decay, 1)
        count = safe_increment(state.count)
        updates = bias_correction(new_ema, decay, count) if debias else new_ema
        return updates, EmaState(count=count, ema=cast_tree(new_ema, acc_dtype))

    return GradientTransformation(init, update)


def nesterov_moment(mu, updates, b1, count):
    """The Nesterov-accelerated bias-corrected first moment of NAdam (Dozat 2016,
    "Incorporating Nesterov Momentum into Adam", Algorithm 2, in optax's form):
    b1 * mu_t / (1 - b1**(t+1)) + (1 - b1) * g_t / (1 - b1**t)."""
    return tree_map(lambda m, g: b1 * m + (1 - b1) * g,
                    bias_correction(mu, b1, safe_increment(count)),
                    bias_correction(updates, b1, count))


def scale_by_adam(
    b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, eps_root: float = 0.0,
    mu_dtype=None, *, nesterov: bool = False,
) -> GradientTransformation:
    """Rescales updates by Adam's rule (Kingma & Ba 2015, "Adam: A Method for Stochastic
    Optimization", Algorithm 1):

        m_t = b1 m_{t-1} + (1 - b1) g_t          v_t = b2 v_{t-1} + (1 - b2) g_t^2
        m^_t = m_t / (1 - b1^t)                  v^_t = v_t / (1 - b2^t)
        update = m^_t / (sqrt(v^_t + eps_root) + eps)

    With nesterov, m^_t is NAdam's b1 m_t / (1 - b1^(t+1)) + (1 - b1) g_t / (1 - b1^t) (Dozat
    2016). The state holds t (0-d int32) and m, v shaped like the parameters (zeros at init; m in
    mu_dtype when given).

    Raises:
      ValueError: b1 or b2 outside [0, 1), eps or eps_root negative; (update) updates not shaped
        like the parameters given to init.
      TypeError: nesterov is not a bool, mu_dtype is not a float dtype.
    """
    fn = "scale_by_adam"
    b1 = check_float("b1", fn, b1, lo=0.0, hi=1.0, hi_open=True)
    b2 = check_float("b2", fn, b2, lo=0.0, hi=1.0, hi_open=True)
    eps = check_float("eps", fn, eps, lo=0.0)
    eps_root = check_float("eps_root", fn, eps_root, lo=0.0)
    mu_dtype = check_float_dtype("mu_dtype", fn, mu_dtype)
    nesterov = check_bool("nesterov", fn, nesterov)

    def init(params):
        return ScaleByAdamState(count=zero_count(), mu=zeros_like_tree(params, mu_dtype),
                                nu=zeros_like_tree(params))

    def update(updates, state, params=None):
        del params
        check_like_state("scale_by_adam.update", updates, state.mu, "mu")
        mu = update_moment(updates, state.mu, b1, 1)
        nu = update_moment_per_elem_norm(updates, state.nu, b2, 2)
        count = safe_increment(state.count)
        if nesterov:
            mu_hat = nesterov_moment(mu, updates, b1, count)
        else:
            mu_hat = bias_correction(mu, b1, count)
        nu_hat = bias_correction(nu, b2, count)
        updates = tree_map(lambda m, v: m / (jnp.sqrt(v + eps_root) + eps), mu_hat, nu_hat)
        return updates, ScaleByAdamState(count=count, mu=cast_tree(mu, mu_dtype), nu=nu)

    return GradientTransformation(init, update)


class WeightDecaySchedule(NamedTuple):
    """State of add_decayed_weights with a scheduled decay: the step count (0-d int32)."""

    count: Any


def add_decayed_weights(weight_decay=0.0, mask=None) -> GradientTransformation:
    """Adds weight_decay * params to the updates: decoupled weight decay (Loshchilov & Hutter
    2019, "Decoupled Weight Decay Regularization", Algorithm 2, line 12) when placed after Adam's
    rescaling and before the learning rate, as in adamw.

    Args:
      weight_decay: the decay rate (any real number, as optax: fromage uses a negative one), or
        a schedule step -> rate (the state then counts steps, WeightDecaySchedule).
      mask: None (decay every leaf), a pytree of bools with the parameters' structure or a
        prefix of it (True = decay this leaf or subtree), or a callable params -> such a pytree
        (see `weight_decay_mask`).

    Raises:
      ValueError: update called without params, or the mask is not a prefix of their structure.
      TypeError: a mask leaf is not a bool.
    """
    fn = "add_decayed_weights"
    scheduled = callable(weight_decay)
    wd = weight_decay if scheduled else check_float("weight_decay", fn, weight_decay)

    def init(params):
        if mask is not None:
            resolve_mask(mask, params, fn)
        return WeightDecaySchedule(count=zero_count()) if scheduled else AddDecayedWeightsState()

    def update(updates, state, params=None):
        if params is None:
            raise ValueError(f"{fn}: update needs params (call update(updates, state, params))")
        if scheduled:
            rate = wd(state.count)
            state = WeightDecaySchedule(count=safe_increment(state.count))
        elif isinstance(wd, float) and wd == 0.0:
            return updates, state
        else:
            rate = wd
        mask_tree = tree_map(lambda _: True, params) if mask is None else resolve_mask(
            mask, params, fn)
        decayed = tree_map(lambda g, p, m: g + rate * p if m else g, updates, params, mask_tree)
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
    if isinstance(max_norm, float) and max_norm == 0.0:
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
    "AddDecayedWeightsState", "EmaState", "ScaleByAdamState", "ScaleByScheduleState",
    "TraceState", "WeightDecaySchedule", "add_decayed_weights", "clip_by_global_norm", "ema",
    "nesterov_moment", "scale", "scale_by_adam", "scale_by_learning_rate", "scale_by_schedule",
    "trace", "weight_decay_mask",
]
