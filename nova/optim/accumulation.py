"""Gradient accumulation: MultiSteps (optax.MultiSteps, k micro-batches per optimizer step) and
apply_every, with the skip predicates skip_not_finite and skip_large_updates."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import nova.numpy as jnp
from nova.core.pytree import tree_leaves, tree_map
from nova.optim.base import (
    GradientTransformation,
    check_bool,
    check_float_dtype,
    check_int,
    check_transformation,
    safe_increment,
    zero_count,
    zeros_like_tree,
)


class ApplyEvery(NamedTuple):
    """State of apply_every: the step count modulo k (0-d int32) and the gradient sum."""

    count: Any
    grad_acc: Any


def apply_every(k: int = 1) -> GradientTransformation:
    """Sums the updates of k consecutive steps and emits the sum at every k-th step, zeros at
    the others (optax.apply_every). The inner optimizer's state still advances every step; for
    proper gradient accumulation use MultiSteps.

    Raises:
      TypeError: k is not an int.  ValueError: k < 1.
    """
    k = check_int("k", "apply_every", k, lo=1)

    def init(params):
        return ApplyEvery(count=zero_count(), grad_acc=zeros_like_tree(params))

    def update(updates, state, params=None):
        del params
        c = state.count % k
        keep = c != 0
        grad_acc = tree_map(lambda g, a: jnp.where(keep, a, jnp.zeros_like(a)) + g, updates,
                            state.grad_acc)
        emit = c == k - 1
        out = tree_map(lambda a: jnp.where(emit, a, jnp.zeros_like(a)), grad_acc)
        return out, ApplyEvery(count=safe_increment(state.count) % k, grad_acc=grad_acc)

    return GradientTransformation(init, update)


def skip_not_finite(updates, gradient_step, params):
    """A MultiSteps skip predicate: skip micro-batches whose updates hold a NaN or an infinity.

    Returns (should_skip: 0-d bool, {"should_skip": ..., "num_not_finite": 0-d int32}).
    """
    del gradient_step, params
    count = jnp.zeros((), jnp.int32)
    for x in tree_leaves(updates):
        count = count + jnp.sum(~jnp.isfinite(x)).astype(jnp.int32)
    skip = count > 0
    return skip, {"should_skip": skip, "num_not_finite": count}


def skip_large_updates(updates, gradient_step, params, max_squared_norm: float):
    """A MultiSteps skip predicate (bind max_squared_norm with functools.partial): skip
    micro-batches whose squared global norm is not below max_squared_norm (NaN included).

    Returns (should_skip: 0-d bool, {"should_skip": ..., "norm_squared": 0-d float}).
    """
    del gradient_step, params
    norm_sq = jnp.zeros((), jnp.float32)
    for x in tree_leaves(updates):
        norm_sq = norm_sq + jnp.sum(jnp.square(x))
    skip = ~(norm_sq < max_squared_norm)
    return skip, {"should_skip": skip, "norm_squared": norm_sq}


class MultiStepsState(NamedTuple):
    """State of MultiSteps: the micro-step within the current accumulation (0-d int32), the
    number of optimizer steps taken (0-d int32), the inner optimizer's state, the accumulated
    gradients, and the skip predicate's last extra output."""

    mini_step: Any
    gradient_step: Any
    inner_opt_state: Any
    acc_grads: Any
    skip_state: Any = ()


class MultiSteps:
    """Gradient accumulation (optax.MultiSteps): the inner optimizer takes one step per k
    micro-batch gradients, fed their mean (or sum); the other micro-steps return zero updates
    and leave the inner state alone.

    Args:
      opt: the inner GradientTransformation.
      every_k_schedule: k, an int >= 1, or a callable gradient_step -> k.
      use_grad_mean: accumulate the running mean of the gradients (True) or their sum.
      should_skip_update_fn: None, or fn(updates, gradient_step, params) -> (0-d bool,
        extra pytree) marking micro-batches to ignore (see skip_not_finite).
      accumulator_dtype: the dtype of the accumulated gradients (float32).

    `init(params)` and `update(updates, state, params)` make it usable as a transformation;
    `gradient_transformation()` wraps them in a GradientTransformation, `has_updated(state)`
    says whether the last update was an inner step.

    Raises:
      TypeError, ValueError: a bad argument (an int k < 1, a non-callable schedule or skip
        function, a non-float accumulator_dtype); at update, a skip function that does not
        return a 0-d bool.
    """

    def __init__(self, opt: GradientTransformation,
                 every_k_schedule: int | Callable[[Any], Any],
                 use_grad_mean: bool = True,
                 should_skip_update_fn: Callable | None = None,
                 accumulator_dtype=jnp.float32):
        fn = "MultiSteps"
        self._opt = check_transformation("opt", fn, opt)
        if callable(every_k_schedule):
            self._every_k = every_k_schedule
        else:
            k = check_int("every_k_schedule", fn, every_k_schedule, lo=1)
            self._every_k = lambda step: k
        self._use_grad_mean = check_bool("use_grad_mean", fn, use_grad_mean)
        if should_skip_update_fn is not None and not callable(should_skip_update_fn):
            raise TypeError(f"{fn}: should_skip_update_fn must be callable or None, got "
                            f"{type(should_skip_update_fn).__name__}")
        self._should_skip = should_skip_update_fn
        self._acc_dtype = check_float_dtype("accumulator_dtype", fn, accumulator_dtype)

    @property
    def inner_opt(self) -> GradientTransformation:
        """The wrapped optimizer."""
        return self._opt

    def init(self, params) -> MultiStepsState:
        """The initial state: counters 0, zero accumulators, the inner optimizer's init."""
        gradient_step = zero_count()
        skip_state = ()
        if self._should_skip is not None:
            _, skip_state = self._should_skip(zeros_like_tree(params), gradient_step, params)
        return MultiStepsState(mini_step=zero_count(), gradient_step=gradient_step,
                               inner_opt_state=self._opt.init(params),
                               acc_grads=zeros_like_tree(params, self._acc_dtype),
                               skip_state=skip_state)

    def _accumulate(self, g, acc, n):
        if self._use_grad_mean:
            return acc + (g - acc) / (n + 1).astype(acc.dtype)
        return acc + g

    def _step(self, updates, state, params, skip_state):
        k = self._every_k(state.gradient_step)
        acc = tree_map(lambda g, a: self._accumulate(g, a, state.mini_step), updates,
                       state.acc_grads)
        as_updates = tree_map(lambda a, g: a.astype(jnp.asarray(g).dtype), acc, updates)
        inner_updates, inner_state = self._opt.update(as_updates, state.inner_opt_state, params)
        emit = state.mini_step == k - 1
        new_state = MultiStepsState(
            mini_step=(safe_increment(state.mini_step) % k).astype(jnp.int32),
            gradient_step=jnp.where(emit, safe_increment(state.gradient_step),
                                    state.gradient_step),
            inner_opt_state=tree_map(
                lambda old, new: jnp.where(emit, new, old).astype(jnp.asarray(old).dtype),
                state.inner_opt_state, inner_state),
            acc_grads=tree_map(lambda a: jnp.where(emit, jnp.zeros_like(a), a)
                               .astype(self._acc_dtype), acc),
            skip_state=skip_state)
        out = tree_map(lambda u: jnp.where(emit, u, jnp.zeros_like(u)), inner_updates)
        return out, new_state

    def update(self, updates, state: MultiStepsState, params=None):
        """One micro-step: accumulate `updates`; at the k-th, step the inner optimizer.

        Returns (updates, state): the inner optimizer's updates at the k-th micro-step, zeros
        otherwise (and at skipped micro-steps, which change nothing but skip_state).
        """
        if self._should_skip is None:
            return self._step(updates, state, params, state.skip_state)
        skip, skip_state = self._should_skip(updates, state.gradient_step, params)
        skip = jnp.asarray(skip)
        if skip.shape != () or skip.dtype != np.bool_:
            raise ValueError(f"MultiSteps: should_skip_update_fn must return a 0-d bool first, "
                             f"got shape {tuple(skip.shape)} and dtype {skip.dtype}")

        # Both outcomes are computed and selected elementwise: a skipped micro-batch may hold
        # NaNs, which `where` does not carry into the kept values.
        out, stepped = self._step(updates, state, params, skip_state)
        kept = state._replace(skip_state=skip_state)
        new_state = tree_map(lambda old, new: jnp.where(skip, old, new), kept, stepped)
        return tree_map(lambda u: jnp.where(skip, jnp.zeros_like(u), u), out), new_state

    def has_updated(self, state: MultiStepsState):
        """0-d bool: whether the last update was an inner optimizer step."""
        return (state.mini_step == 0) & (state.gradient_step > 0)

    def gradient_transformation(self) -> GradientTransformation:
        """This accumulator as a GradientTransformation(init, update)."""
        return GradientTransformation(init=self.init, update=self.update)


__all__ = [
    "ApplyEvery", "MultiSteps", "MultiStepsState", "apply_every", "skip_large_updates",
    "skip_not_finite",
]
