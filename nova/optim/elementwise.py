"""Elementwise transformations: clip, scale_by_sign, zero_nans, keep_params_nonnegative,
annealed gradient noise (add_noise), Rprop and the optimistic gradient."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

import nova.numpy as jnp
from nova.core.pytree import tree_leaves, tree_map, tree_structure, tree_unflatten
from nova.optim.base import (
    EmptyState,
    GradientTransformation,
    check_float,
    check_like_state,
    require_params,
    safe_increment,
    zero_count,
)


class AddNoiseState(NamedTuple):
    """State of add_noise: step count (0-d int32) and the PRNG key (uint32, shape (2,))."""

    count: Any
    rng_key: Any


def add_noise(eta: float, gamma: float, key=None, *, seed: int | None = None
              ) -> GradientTransformation:
    """Adds annealed Gaussian noise to the updates (Neelakantan et al. 2015, "Adding Gradient
    Noise Improves Learning for Very Deep Networks"): at step t = 1, 2, ...

        update = g_t + sqrt(eta / t**gamma) * N(0, 1)

    with fresh noise for every leaf, drawn as optax does (the state's key is split into the next
    key and a sample key; the sample key into one key per leaf), so the noise equals optax's bit
    for bit with nova.random's Threefry.

    Args:
      eta: the noise variance at step 1 (>= 0).
      gamma: the annealing exponent (>= 0).
      key: an int seed or a nova.random key (uint32, shape (2,)); None means 0.
      seed: the deprecated spelling of an int key (optax's); at most one of key and seed.

    Raises:
      ValueError: eta or gamma negative, or both key and seed given.
    """
    import nova.random as nrandom

    eta = check_float("eta", "add_noise", eta, lo=0.0)
    gamma = check_float("gamma", "add_noise", gamma, lo=0.0)
    if seed is not None:
        if key is not None:
            raise ValueError("add_noise: give key or seed, not both")
        key = seed
    if key is None:
        key = 0
    rng_key = nrandom.key(key) if isinstance(key, int | np.integer) else nrandom.key_data(key)

    def init(params):
        del params
        return AddNoiseState(count=zero_count(), rng_key=rng_key)

    def update(updates, state, params=None):
        del params
        count = safe_increment(state.count)
        std = jnp.sqrt(eta / count.astype(jnp.float32) ** gamma)
        next_key, sample_key = nrandom.split(state.rng_key)
        leaves = tree_leaves(updates)
        keys = nrandom.split(sample_key, len(leaves))
        noisy = [g + std.astype(jnp.asarray(g).dtype) * nrandom.normal(
            keys[i], np.shape(g), jnp.asarray(g).dtype) for i, g in enumerate(leaves)]
        return (tree_unflatten(tree_structure(updates), noisy),
                AddNoiseState(count=count, rng_key=next_key))

    return GradientTransformation(init, update)


def _empty_init(params):
    del params
    return EmptyState()


def clip(max_delta: float) -> GradientTransformation:
    """Clips every update element to [-max_delta, max_delta] (optax.clip). Stateless.

    Raises:
      ValueError: max_delta is negative.
    """
    max_delta = check_float("max_delta", "clip", max_delta, lo=0.0)

    def update(updates, state, params=None):
        del params
        return tree_map(lambda g: jnp.clip(g, -max_delta, max_delta), updates), state

    return GradientTransformation(_empty_init, update)


def scale_by_sign() -> GradientTransformation:
    """Replaces every update by its sign, -1, 0 or 1 (signSGD, Bernstein et al. 2018, "signSGD:
    Compressed Optimisation for Non-Convex Problems", Algorithm 1). Stateless."""

    def update(updates, state, params=None):
        del params
        return tree_map(jnp.sign, updates), state

    return GradientTransformation(_empty_init, update)


class ZeroNansState(NamedTuple):
    """State of zero_nans: per leaf, a 0-d bool saying whether the last updates had a NaN."""

    found_nan: Any


def zero_nans() -> GradientTransformation:
    """Replaces NaNs in the updates by zeros (infinities are kept), recording per leaf whether
    there was one (optax.zero_nans)."""

    def init(params):
        return ZeroNansState(found_nan=tree_map(lambda _: jnp.asarray(False), params))

    def update(updates, state, params=None):
        del params, state
        found = tree_map(lambda g: jnp.any(jnp.isnan(g)), updates)
        zeroed = tree_map(lambda g: jnp.where(jnp.isnan(g), jnp.zeros_like(g), g), updates)
        return zeroed, ZeroNansState(found_nan=found)

    return GradientTransformation(init, update)


def keep_params_nonnegative() -> GradientTransformation:
    """Changes the updates so that params + updates stays >= 0: where p + u < 0 the update
    becomes -p, so that parameter lands on 0 (optax.keep_params_nonnegative; the parameters
    should start non-negative). Stateless; update needs params.

    Raises:
      ValueError: update called without params.
    """

    def update(updates, state, params=None):
        require_params("keep_params_nonnegative", params)
        return tree_map(lambda u, p: jnp.where(p + u < 0.0, -p, u), updates, params), state

    return GradientTransformation(_empty_init, update)




class ScaleByRpropState(NamedTuple):
    """State of scale_by_rprop: per-element step sizes and the last signed steps."""

    step_sizes: Any
    prev_updates: Any


def scale_by_rprop(learning_rate: float, eta_minus: float = 0.5, eta_plus: float = 1.2,
                   min_step_size: float = 1e-6, max_step_size: float = 50.0
                   ) -> GradientTransformation:
    """Rprop's rescaling (Riedmiller & Braun 1993, "A Direct Adaptive Method for Faster
    Backpropagation Learning: The RPROP Algorithm"; the iRprop- variant of Igel & Huesken 2000),
    exactly as optax computes it. Per element, with s = g_t * p_{t-1} (p the stored signed step):

        step_t = step_{t-1} if s == 0, else clip(step_{t-1} * (eta_plus if s > 0 else
                 eta_minus), min_step_size, max_step_size)
        p_t = 0 if s < 0 else step_t * sign(g_t)
        update = 0 if s < 0 else p_{t-1}

    Note the update is the signed step stored at the previous call (so the first one is 0), as
    optax 0.2.8 returns it; chain with scale(-1) (the `rprop` alias does) to descend. Steps
    start at learning_rate.

    Raises:
      ValueError: learning_rate or a step bound negative, or min_step_size > max_step_size.
    """
    fn = "scale_by_rprop"
    lr = check_float("learning_rate", fn, learning_rate, lo=0.0)
    eta_minus = check_float("eta_minus", fn, eta_minus, lo=0.0)
    eta_plus = check_float("eta_plus", fn, eta_plus, lo=0.0)
    lo = check_float("min_step_size", fn, min_step_size, lo=0.0)
    hi = check_float("max_step_size", fn, max_step_size, lo=0.0)
    if isinstance(lo, float) and isinstance(hi, float) and lo > hi:
        raise ValueError(f"{fn}: min_step_size ({lo}) exceeds max_step_size ({hi})")

    def init(params):
        return ScaleByRpropState(
            step_sizes=tree_map(lambda p: jnp.full_like(jnp.asarray(p), lr), params),
            prev_updates=tree_map(lambda p: jnp.zeros_like(jnp.asarray(p)), params))

    def update(updates, state, params=None):
        del params
        check_like_state(f"{fn}.update", updates, state.step_sizes, "step_sizes")
        sign = tree_map(lambda g, p: g * p, updates, state.prev_updates)
        steps = tree_map(lambda s, st: jnp.where(
            s == 0, st, jnp.clip(st * jnp.where(s > 0, eta_plus, eta_minus), lo, hi)),
            sign, state.step_sizes)
        signed = tree_map(lambda s, g, st: jnp.where(s < 0, jnp.zeros_like(g), st * jnp.sign(g)),
                          sign, updates, steps)
        out = tree_map(lambda s, p: jnp.where(s < 0, jnp.zeros_like(p), p), sign,
                       state.prev_updates)
        return out, ScaleByRpropState(step_sizes=steps, prev_updates=signed)

    return GradientTransformation(init, update)


class ScaleByOptimisticGradientState(NamedTuple):
    """State of scale_by_optimistic_gradient: whether the next step is the first (0-d bool) and
    the previous gradient."""

    is_initial_step: Any
    previous_gradient: Any


def scale_by_optimistic_gradient(alpha: float = 1.0, beta: float = 1.0
                                 ) -> GradientTransformation:
    """The optimistic gradient (Daskalakis et al. 2018, "Training GANs with Optimism";
    Mokhtari, Ozdaglar & Pattathil 2020, "A Unified Analysis of Extra-gradient and Optimistic
    Gradient Methods"): update = (alpha + beta) g_t - beta g_{t-1}, with g_0 = g_1.

    Raises:
      ValueError: alpha or beta is not finite.
    """
    fn = "scale_by_optimistic_gradient"
    alpha = check_float("alpha", fn, alpha)
    beta = check_float("beta", fn, beta)

    def init(params):
        return ScaleByOptimisticGradientState(
            is_initial_step=jnp.asarray(True),
            previous_gradient=tree_map(lambda p: jnp.zeros_like(jnp.asarray(p)), params))

    def update(updates, state, params=None):
        del params
        check_like_state(f"{fn}.update", updates, state.previous_gradient, "previous_gradient")
        first = state.is_initial_step

        def step(g, prev):
            prev = jnp.where(first, g, prev)
            return (alpha + beta) * g - beta * prev

        out = tree_map(step, updates, state.previous_gradient)
        return out, ScaleByOptimisticGradientState(is_initial_step=jnp.asarray(False),
                                                   previous_gradient=updates)

    return GradientTransformation(init, update)


__all__ = [
    "AddNoiseState", "ScaleByOptimisticGradientState", "ScaleByRpropState", "ZeroNansState",
    "add_noise", "clip", "keep_params_nonnegative", "scale_by_optimistic_gradient",
    "scale_by_rprop", "scale_by_sign", "zero_nans",
]
