"""The GradientTransformation interface (as optax's), chain, apply_updates and tree helpers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import nova.numpy as jnp
from nova.core.pytree import tree_leaves, tree_map

Params = Any  # a pytree of arrays
Updates = Any  # a pytree of arrays with the structure of Params
OptState = Any  # a pytree (NamedTuples of pytrees and int32 step counts)


class GradientTransformation(NamedTuple):
    """A pair of pure functions, as optax.GradientTransformation.

    init(params) -> state: the initial optimizer state for a pytree of parameters.
    update(updates, state, params=None) -> (updates, state): transforms a pytree of gradients
    (or of updates from an earlier transformation) into updates, and returns the next state.

    Both are written with nova.numpy ops, so inside `nova.jit` the update is traced into the same
    Program as the forward and backward pass and compiles with them. The final updates are added to
    the parameters with `apply_updates` (so the learning rate carries a minus sign).
    """

    init: Callable[[Params], OptState]
    update: Callable[..., tuple[Updates, OptState]]


class EmptyState(NamedTuple):
    """The state of a stateless transformation (no leaves)."""


def identity() -> GradientTransformation:
    """The transformation that returns its updates unchanged; its state is EmptyState()."""

    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        del params
        return updates, state

    return GradientTransformation(init, update)


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Applies `transforms` in order, feeding each one's updates to the next (optax.chain).

    The state is a tuple with one state per transformation, in order.

    Raises:
      TypeError: an argument is not a GradientTransformation.
    """
    for i, t in enumerate(transforms):
        if not isinstance(t, GradientTransformation):
            raise TypeError(
                f"chain: argument {i} is a {type(t).__name__}, expected a GradientTransformation"
            )

    def init(params):
        return tuple(t.init(params) for t in transforms)

    def update(updates, state, params=None):
        if not isinstance(state, tuple) or len(state) != len(transforms):
            raise ValueError(
                f"chain: expected a state tuple of {len(transforms)} states (one per "
                f"transformation), got {type(state).__name__} of length "
                f"{len(state) if isinstance(state, tuple) else 'n/a'}"
            )
        new_states = []
        for t, s in zip(transforms, state, strict=True):
            updates, s = t.update(updates, s, params)
            new_states.append(s)
        return updates, tuple(new_states)

    return GradientTransformation(init, update)


def apply_updates(params: Params, updates: Updates) -> Params:
    """Returns params + updates leaf by leaf, each result cast to its parameter's dtype.

    Args:
      params: a pytree of arrays.
      updates: a pytree of arrays with the same structure and shapes (e.g. from an optimizer's
        update; a learning-rate transformation already carries the minus sign).

    Raises:
      ValueError: the two pytrees have different structures, or a leaf's shapes differ.
    """

    def add(p, u):
        p = jnp.asarray(p)
        u = jnp.asarray(u)
        if p.shape != u.shape:
            raise ValueError(
                f"apply_updates: a parameter of shape {p.shape} ({p.dtype}) got an update of "
                f"shape {u.shape} ({u.dtype})"
            )
        return (p + u).astype(p.dtype)

    return tree_map(add, params, updates)


def global_norm(updates: Updates):
    """The L2 norm of all leaves together, sqrt(sum over leaves of sum(x**2)); a 0-d array.

    An empty pytree has norm 0.
    """
    leaves = tree_leaves(updates)
    if not leaves:
        return jnp.asarray(0.0, dtype=jnp.float32)
    total = jnp.sum(jnp.square(jnp.asarray(leaves[0])))
    for x in leaves[1:]:
        total = total + jnp.sum(jnp.square(jnp.asarray(x)))
    return jnp.sqrt(total)


def zero_count():
    """A fresh step counter: a 0-d int32 array holding 0."""
    return jnp.zeros((), dtype=jnp.int32)


def safe_increment(count):
    """count + 1 for an int32 counter, saturating at the largest int32 (never wraps)."""
    top = np.iinfo(np.int32).max
    return jnp.where(count < top, count + 1, top).astype(jnp.int32)


def check_like_state(fn: str, updates, state_tree, what: str) -> None:
    """Raises ValueError when `updates` (gradients) and a params-shaped part of an optimizer state
    (`what`, e.g. "mu") differ in structure or in a leaf's shape, naming the leaf's position and
    both shapes (they would otherwise fail inside an add with an unrelated message)."""
    from nova.core.pytree import tree_flatten

    g_leaves, g_def = tree_flatten(updates)
    s_leaves, s_def = tree_flatten(state_tree)
    if g_def != s_def:
        raise ValueError(f"{fn}: the updates' structure {g_def} differs from the state's {what} "
                         f"{s_def} (was the state made by init on other parameters?)")
    for i, (g, t) in enumerate(zip(g_leaves, s_leaves, strict=True)):
        if tuple(np.shape(g)) != tuple(np.shape(t)):
            raise ValueError(f"{fn}: update leaf {i} has shape {tuple(np.shape(g))} but the "
                             f"state's {what} has {tuple(np.shape(t))} there")


def check_bool(name: str, fn: str, value) -> bool:
    """Validates a flag: a Python or NumPy bool (a string such as "no" is not taken as True)."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{fn}: {name} must be a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def check_float(name: str, fn: str, value, *, lo=None, hi=None, hi_open=False) -> float:
    """Validates a scalar hyperparameter: a real number (Python, NumPy scalar, 0-d NumPy array
    or 0-d concrete nova Array, as optax takes jax arrays) in [lo, hi] (or [lo, hi) with
    hi_open). A traced value (inside jit) raises TypeError saying to pass it concrete or as a
    schedule."""
    from nova.core.array import Array
    from nova.core.trace import Tracer

    if isinstance(value, Tracer):
        raise TypeError(f"{fn}: {name} is a traced value; hyperparameters are fixed when the "
                        "optimizer is built: pass a number, or a schedule (a function of the step "
                        "count) for one that changes")
    if isinstance(value, Array) and value.ndim == 0:
        value = np.asarray(value)
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value[()]
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{fn}: {name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not np.isfinite(v):
        raise ValueError(f"{fn}: {name} must be finite, got {value!r}")
    too_low = lo is not None and v < lo
    too_high = hi is not None and (v > hi or (hi_open and v == hi))
    if too_low or too_high:
        low = f"[{lo}" if lo is not None else "(-inf"
        high = f"{hi}{')' if hi_open else ']'}" if hi is not None else "inf)"
        raise ValueError(f"{fn}: {name} must be in {low}, {high}, got {value!r}")
    return v
