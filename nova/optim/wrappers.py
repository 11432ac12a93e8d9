"""Transformations of transformations (optax's wrappers): masked, multi_transform, named_chain,
flatten, apply_if_finite, conditionally_mask / conditionally_transform and lookahead.

Gradient accumulation (MultiSteps, apply_every) is in `accumulation`, inject_hyperparams in
`inject`. Decisions on traced values (is this step finite? is it the k-th?) are made with
nova.lax.cond or nova.numpy.where, never with Python `if`, so every wrapper traces under
`nova.jit` into one Program.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Hashable, Mapping
from typing import Any, NamedTuple

import numpy as np

import nova.numpy as jnp
from nova import lax
from nova.core.pytree import tree_flatten, tree_leaves, tree_map, tree_unflatten
from nova.optim.base import (
    GradientTransformation,
    check_float,
    check_int,
    check_transformation,
    resolve_mask,
    safe_increment,
    zero_count,
    zeros_like_tree,
)


class MaskedState(NamedTuple):
    """State of masked: the inner transformation's state (built on the masked parameters)."""

    inner_state: Any


class MaskedNode(NamedTuple):
    """What a masked-out leaf becomes before the inner transformation sees the pytree: a node
    without leaves, so the inner transformation neither keeps state for it nor changes it."""


def _mask_out(tree, mask_tree):
    return tree_map(lambda m, x: x if m else MaskedNode(), mask_tree, tree)


def _merge(mask_tree, new_masked, old):
    """old with the leaves that `mask_tree` selects replaced by new_masked's, in order."""
    mask_leaves, treedef = tree_flatten(mask_tree)
    fresh = iter(tree_leaves(new_masked))
    merged = [next(fresh) if m else o for m, o in zip(mask_leaves, tree_leaves(old),
                                                      strict=True)]
    return tree_unflatten(treedef, merged)


def masked(inner: GradientTransformation, mask) -> GradientTransformation:
    """Applies `inner` only to the leaves selected by `mask`; the others pass through unchanged
    (optax.masked). The inner transformation sees the pytree with unselected leaves replaced by
    MaskedNode() (so it keeps no state for them).

    Args:
      inner: the transformation to apply.
      mask: a pytree of bools with the structure of the parameters or a prefix of it (True:
        transform this leaf or subtree), or a callable tree -> such a pytree (called on the
        parameters in init and on the updates in update).

    Returns:
      A GradientTransformation with state MaskedState(inner_state).

    Raises:
      TypeError: inner is not a GradientTransformation, or a mask leaf is not a bool.
      ValueError: the mask is not a prefix of the parameters' structure.
    """
    fn = "masked"
    inner = check_transformation("inner", fn, inner)

    def init(params):
        mask_tree = resolve_mask(mask, params, fn)
        return MaskedState(inner_state=inner.init(_mask_out(params, mask_tree)))

    def update(updates, state, params=None):
        mask_tree = resolve_mask(mask, updates, fn)
        masked_params = None if params is None else _mask_out(params, mask_tree)
        new, inner_state = inner.update(_mask_out(updates, mask_tree), state.inner_state,
                                        masked_params)
        return _merge(mask_tree, new, updates), MaskedState(inner_state=inner_state)

    return GradientTransformation(init, update)


class MultiTransformState(NamedTuple):
    """State of multi_transform: a dict label -> the MaskedState of that label's
    transformation."""

    inner_states: Any


PartitionState = MultiTransformState  # optax's newer name


def multi_transform(transforms: Mapping[Hashable, GradientTransformation],
                    param_labels) -> GradientTransformation:
    """Applies a different transformation to each group of parameters (optax.multi_transform,
    also called partition): transforms[label] to the leaves labelled `label`.

    Args:
      transforms: a mapping label -> GradientTransformation.
      param_labels: a pytree of labels with the parameters' structure (or a prefix of it), or a
        callable params -> such a pytree.

    Returns:
      A GradientTransformation with state MultiTransformState({label: MaskedState}).

    Raises:
      TypeError: transforms is not a mapping of GradientTransformations.
      ValueError: a parameter's label has no transformation.
    """
    fn = "multi_transform"
    if not isinstance(transforms, Mapping):
        raise TypeError(f"{fn}: transforms must be a mapping label -> GradientTransformation, "
                        f"got {type(transforms).__name__}")
    for label, tx in transforms.items():
        check_transformation(f"transforms[{label!r}]", fn, tx)

    def labels_of(tree):
        labels = param_labels(tree) if callable(param_labels) else param_labels
        missing = set(tree_leaves(labels)) - set(transforms)
        if missing:
            raise ValueError(f"{fn}: the labels {sorted(missing, key=repr)} have no "
                             f"transformation (transforms has {sorted(transforms, key=repr)})")
        return labels

    def group(labels, label):
        return masked(transforms[label], tree_map(lambda x: x == label, labels))

    def init(params):
        labels = labels_of(params)
        return MultiTransformState({k: group(labels, k).init(params) for k in transforms})

    def update(updates, state, params=None):
        labels = labels_of(updates)
        new_states = {}
        for k in transforms:
            updates, new_states[k] = group(labels, k).update(updates, state.inner_states[k],
                                                             params)
        return updates, MultiTransformState(new_states)

    return GradientTransformation(init, update)


partition = multi_transform  # optax's newer name


def named_chain(*transforms: tuple[str, GradientTransformation]) -> GradientTransformation:
    """chain with named parts (optax.named_chain): the state is an OrderedDict name -> state.

    Raises:
      TypeError: an argument is not a (name, GradientTransformation) pair.
      ValueError: two parts share a name.
    """
    fn = "named_chain"
    for i, pair in enumerate(transforms):
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
            raise TypeError(f"{fn}: argument {i} must be a (name, GradientTransformation) "
                            f"pair, got {type(pair).__name__}")
        check_transformation(f"argument {i}", fn, pair[1])
    names = [name for name, _ in transforms]
    if len(set(names)) != len(names):
        raise ValueError(f"{fn}: the names must be unique, got {names}")

    def init(params):
        return collections.OrderedDict((name, tx.init(params)) for name, tx in transforms)

    def update(updates, state, params=None):
        new_state = collections.OrderedDict()
        for name, tx in transforms:
            updates, new_state[name] = tx.update(updates, state[name], params)
        return updates, new_state

    return GradientTransformation(init, update)


def flatten(inner: GradientTransformation) -> GradientTransformation:
    """Runs `inner` on one vector: every leaf raveled and concatenated in pytree order, the
    updates split and reshaped back afterwards (optax.flatten; fewer, larger kernels for
    pytrees of many small leaves). The state is inner's state for the flat vector.

    Raises:
      TypeError: inner is not a GradientTransformation.
    """
    inner = check_transformation("inner", "flatten", inner)

    def ravel(tree):
        return jnp.concatenate([jnp.reshape(jnp.asarray(x), (-1,)) for x in tree_leaves(tree)])

    def unravel(like, flat):
        leaves, treedef = tree_flatten(like)
        sizes = np.cumsum([int(np.size(x)) for x in leaves])[:-1]
        parts = jnp.split(flat, [int(s) for s in sizes]) if len(leaves) > 1 else [flat]
        return tree_unflatten(treedef, [jnp.reshape(q, np.shape(x))
                                        for q, x in zip(parts, leaves, strict=True)])

    def init(params):
        return inner.init(ravel(params))

    def update(updates, state, params=None):
        flat_params = None if params is None else ravel(params)
        flat, state = inner.update(ravel(updates), state, flat_params)
        return unravel(updates, flat), state

    return GradientTransformation(init, update)


def _all_finite(tree):
    ok = jnp.asarray(True)
    for x in tree_leaves(tree):
        ok = ok & jnp.all(jnp.isfinite(x))
    return ok


class ApplyIfFiniteState(NamedTuple):
    """State of apply_if_finite: consecutive non-finite steps (int32), whether the last step was
    finite (bool), all non-finite steps so far (int32), and the inner state."""

    notfinite_count: Any
    last_finite: Any
    total_notfinite: Any
    inner_state: Any


def apply_if_finite(inner: GradientTransformation, max_consecutive_errors: int
                    ) -> GradientTransformation:
    """Skips steps whose updates hold a NaN or an infinity (optax.apply_if_finite): such a step
    returns zero updates and leaves the inner state alone, and is counted. After more than
    max_consecutive_errors non-finite steps in a row the step is applied anyway (so that a
    training run that has gone bad shows it).

    Returns:
      A GradientTransformation with state ApplyIfFiniteState.

    Raises:
      TypeError: inner is not a GradientTransformation, max_consecutive_errors not an int.
      ValueError: max_consecutive_errors is negative.
    """
    fn = "apply_if_finite"
    inner = check_transformation("inner", fn, inner)
    max_errors = check_int("max_consecutive_errors", fn, max_consecutive_errors, lo=0)

    def init(params):
        return ApplyIfFiniteState(notfinite_count=zero_count(), last_finite=jnp.asarray(True),
                                  total_notfinite=zero_count(), inner_state=inner.init(params))

    def update(updates, state, params=None):
        finite = _all_finite(updates)
        notfinite = jnp.where(finite, zero_count(), safe_increment(state.notfinite_count))
        apply = finite | (notfinite > max_errors)
        new_updates, inner_state = lax.cond(
            apply,
            lambda u, s, p: inner.update(u, s, p),
            lambda u, s, p: (zeros_like_tree(u), s),
            updates, state.inner_state, params)
        total = jnp.where(finite, state.total_notfinite, safe_increment(state.total_notfinite))
        return new_updates, ApplyIfFiniteState(notfinite_count=notfinite, last_finite=finite,
                                               total_notfinite=total, inner_state=inner_state)

    return GradientTransformation(init, update)


class ConditionallyTransformState(NamedTuple):
    """State of conditionally_transform: the inner state and the step count (0-d int32)."""

    inner_state: Any
    step: Any


class ConditionallyMaskState(NamedTuple):
    """State of conditionally_mask: the step count (0-d int32) and the inner state."""

    step: Any
    inner_state: Any


def _conditional(fn: str, inner, should_transform_fn, rejected):
    inner = check_transformation("inner", fn, inner)
    if not callable(should_transform_fn):
        raise TypeError(f"{fn}: should_transform_fn must be callable (step -> bool), got "
                        f"{type(should_transform_fn).__name__}")

    def step_update(updates, inner_state, step, params):
        return lax.cond(
            should_transform_fn(step),
            lambda u, s, p: inner.update(u, s, p),
            lambda u, s, p: (rejected(u), s),
            updates, inner_state, params)

    return inner, step_update


def conditionally_transform(inner: GradientTransformation,
                            should_transform_fn: Callable[[Any], Any]) -> GradientTransformation:
    """Applies `inner` at the steps where should_transform_fn(step) is true (step = 0, 1, ...);
    at the others the updates pass through unchanged and the inner state is kept
    (optax.conditionally_transform).

    Raises:
      TypeError: inner is not a GradientTransformation or should_transform_fn not callable.
    """
    inner, step_update = _conditional("conditionally_transform", inner, should_transform_fn,
                                      lambda u: u)

    def init(params):
        return ConditionallyTransformState(inner_state=inner.init(params), step=zero_count())

    def update(updates, state, params=None):
        updates, inner_state = step_update(updates, state.inner_state, state.step, params)
        return updates, ConditionallyTransformState(inner_state, safe_increment(state.step))

    return GradientTransformation(init, update)


def conditionally_mask(inner: GradientTransformation,
                       should_transform_fn: Callable[[Any], Any]) -> GradientTransformation:
    """Applies `inner` at the steps where should_transform_fn(step) is true; at the others the
    updates are zeros and the inner state is kept (optax.conditionally_mask).

    Raises:
      TypeError: inner is not a GradientTransformation or should_transform_fn not callable.
    """
    inner, step_update = _conditional("conditionally_mask", inner, should_transform_fn,
                                      zeros_like_tree)

    def init(params):
        return ConditionallyMaskState(step=zero_count(), inner_state=inner.init(params))

    def update(updates, state, params=None):
        updates, inner_state = step_update(updates, state.inner_state, state.step, params)
        return updates, ConditionallyMaskState(safe_increment(state.step), inner_state)

    return GradientTransformation(init, update)


class LookaheadState(NamedTuple):
    """State of lookahead: the fast optimizer's state and the steps since the last sync
    (0-d int32)."""

    fast_state: Any
    steps_since_sync: Any


class LookaheadParams(NamedTuple):
    """The parameters lookahead works on: the fast weights (which the loss is evaluated at) and
    the slow weights."""

    fast: Any
    slow: Any

    @classmethod
    def init_synced(cls, params) -> LookaheadParams:
        """Fast and slow weights both equal to params."""
        return cls(fast=params, slow=params)


def lookahead(fast_optimizer: GradientTransformation, sync_period: int, slow_step_size: float,
              reset_state: bool = False) -> GradientTransformation:
    """The Lookahead optimizer (Zhang, Lucas, Hinton & Ba 2019, "Lookahead Optimizer: k steps
    forward, 1 step back", Algorithm 1), as optax.lookahead: the fast weights take
    fast_optimizer's steps; every sync_period steps the slow weights move slow_step_size of the
    way to the fast ones, and the fast weights are reset to the slow ones.

    Params and updates are LookaheadParams(fast, slow) (start with LookaheadParams.init_synced);
    gradients are those at the fast weights, shaped like one of them. With reset_state the fast
    optimizer's state is re-initialised at each sync.

    Raises:
      TypeError: fast_optimizer is not a GradientTransformation, sync_period not an int.
      ValueError: sync_period < 1 or slow_step_size outside [0, 1].
      TypeError: (update) params are not LookaheadParams.
    """
    fn = "lookahead"
    fast_optimizer = check_transformation("fast_optimizer", fn, fast_optimizer)
    sync_period = check_int("sync_period", fn, sync_period, lo=1)
    slow_step_size = check_float("slow_step_size", fn, slow_step_size, lo=0.0, hi=1.0)

    def init(params):
        if isinstance(params, LookaheadParams):
            fast = params.fast
        else:
            logging.getLogger(__name__).warning(
                "lookahead.init: params are not LookaheadParams; taking them as the fast "
                "parameters")
            fast = params
        return LookaheadState(fast_state=fast_optimizer.init(fast),
                              steps_since_sync=zero_count())

    def update(updates, state, params=None):
        if not isinstance(params, LookaheadParams):
            raise TypeError(f"{fn}: update needs params as LookaheadParams(fast, slow), got "
                             f"{type(params).__name__}")
        updates, fast_state = fast_optimizer.update(updates, state.fast_state, params.fast)
        sync = state.steps_since_sync == sync_period - 1
        diff = tree_map(lambda f, u, s: f + u - s, params.fast, updates, params.slow)
        slow_updates = tree_map(
            lambda d: jnp.where(sync, slow_step_size * d, jnp.zeros_like(d)), diff)
        fast_updates = tree_map(
            lambda u, d: jnp.where(sync, u - (1 - slow_step_size) * d, u), updates, diff)
        if reset_state:
            fresh = fast_optimizer.init(params.fast)
            fast_state = tree_map(lambda cur, new: jnp.where(sync, new, cur), fast_state, fresh)
        steps = (state.steps_since_sync + 1) % sync_period
        return (LookaheadParams(fast=fast_updates, slow=slow_updates),
                LookaheadState(fast_state, steps))

    return GradientTransformation(init, update)


__all__ = [
    "ApplyIfFiniteState", "ConditionallyMaskState", "ConditionallyTransformState",
    "LookaheadParams", "LookaheadState", "MaskedNode", "MaskedState", "MultiTransformState",
    "PartitionState", "apply_if_finite", "conditionally_mask", "conditionally_transform",
    "flatten", "lookahead", "masked", "multi_transform", "named_chain", "partition",
]
