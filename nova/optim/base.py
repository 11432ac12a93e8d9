"""The GradientTransformation interface (as optax's), chain, apply_updates and tree helpers."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import nova.numpy as jnp
from nova.core.pytree import (
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_structure,
    tree_unflatten,
)

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


def init_empty_state(params: Params) -> EmptyState:
    """The init function of a stateless transformation (optax.init_empty_state): EmptyState()."""
    del params
    return EmptyState()


def identity() -> GradientTransformation:
    """The transformation that returns its updates unchanged; its state is EmptyState()."""

    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        del params
        return updates, state

    return GradientTransformation(init, update)


def set_to_zero() -> GradientTransformation:
    """The transformation whose updates are zeros shaped like its input (optax.set_to_zero):
    with `masked` or `multi_transform` it freezes part of the parameters. Stateless."""

    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        del params
        return tree_map(lambda g: jnp.zeros_like(jnp.asarray(g)), updates), state

    return GradientTransformation(init, update)


def stateless(f: Callable[[Updates, Params | None], Updates]) -> GradientTransformation:
    """A stateless transformation from `f(updates, params) -> updates` (optax.stateless); params
    is None when update is called without them. The state is EmptyState().

    Raises:
      TypeError: f is not callable.
    """
    if not callable(f):
        raise TypeError(f"stateless: f must be callable, got {type(f).__name__}")

    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        del state
        return f(updates, params), EmptyState()

    return GradientTransformation(init, update)


def stateless_with_tree_map(f: Callable[[Any, Any], Any]) -> GradientTransformation:
    """A stateless transformation applying `f(update_leaf, param_leaf) -> update_leaf` to every
    leaf (optax.stateless_with_tree_map); param_leaf is None when update gets no params.

    Raises:
      TypeError: f is not callable.
    """
    if not callable(f):
        raise TypeError(f"stateless_with_tree_map: f must be callable, got {type(f).__name__}")

    def update_fn(updates, params):
        if params is None:
            return tree_map(lambda u: f(u, None), updates)
        return tree_map(f, updates, params)

    return stateless(update_fn)


class GradientTransformationExtraArgs(GradientTransformation):
    """A GradientTransformation whose update takes extra keyword arguments, as
    optax.GradientTransformationExtraArgs: `update(updates, state, params=None, **extra_args)`.

    The line searches read `value`, `grad` and `value_fn` from the extra arguments, polyak_sgd
    reads `value`. `chain` hands its extra arguments only to the transformations of this type.
    """


def with_extra_args_support(tx: GradientTransformation) -> GradientTransformationExtraArgs:
    """`tx` as a GradientTransformationExtraArgs whose update accepts and ignores extra keyword
    arguments (optax.with_extra_args_support); `tx` itself when it already takes them.

    Raises:
      TypeError: tx is not a GradientTransformation.
    """
    check_transformation("tx", "with_extra_args_support", tx)
    if isinstance(tx, GradientTransformationExtraArgs):
        return tx

    def update(updates, state, params=None, **extra_args):
        del extra_args
        return tx.update(updates, state, params)

    return GradientTransformationExtraArgs(tx.init, update)


def chain(*transforms: GradientTransformation) -> GradientTransformationExtraArgs:
    """Applies `transforms` in order, feeding each one's updates to the next (optax.chain).

    The state is a tuple with one state per transformation, in order. The result takes extra
    keyword arguments (`update(updates, state, params=None, **extra_args)`) and passes them to
    the transformations that are GradientTransformationExtraArgs, as optax does.

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

    def update(updates, state, params=None, **extra_args):
        if not isinstance(state, tuple) or len(state) != len(transforms):
            raise ValueError(
                f"chain: expected a state tuple of {len(transforms)} states (one per "
                f"transformation), got {type(state).__name__} of length "
                f"{len(state) if isinstance(state, tuple) else 'n/a'}"
            )
        new_states = []
        for t, s in zip(transforms, state, strict=True):
            if isinstance(t, GradientTransformationExtraArgs):
                updates, s = t.update(updates, s, params, **extra_args)
            else:
                updates, s = t.update(updates, s, params)
            new_states.append(s)
        return updates, tuple(new_states)

    return GradientTransformationExtraArgs(init, update)


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


# Set while inject_hyperparams builds its inner transformation: hyperparameters read from the
# optimizer state are traced under jit (or under grad, for meta-gradients), and are then taken
# as they are instead of being turned into Python floats.
_TRACED_HYPERPARAMETERS = contextvars.ContextVar("nova_optim_traced_hyperparameters",
                                                 default=False)


@contextlib.contextmanager
def traced_hyperparameters():
    """Within this context `check_float` passes a traced 0-d hyperparameter through unchecked
    (inject_hyperparams builds its inner transformation here)."""
    token = _TRACED_HYPERPARAMETERS.set(True)
    try:
        yield
    finally:
        _TRACED_HYPERPARAMETERS.reset(token)


def check_float(name: str, fn: str, value, *, lo=None, hi=None, hi_open=False):
    """Validates a scalar hyperparameter: a real number (Python, NumPy scalar, 0-d NumPy array
    or 0-d concrete nova Array, as optax takes jax arrays) in [lo, hi] (or [lo, hi) with
    hi_open), returned as a Python float. A traced value (inside jit) raises TypeError saying to
    pass it concrete or as a schedule, except within `traced_hyperparameters()`, where a 0-d
    traced number is returned unchanged (its range cannot be checked)."""
    from nova.core.array import Array
    from nova.core.trace import Tracer

    if isinstance(value, Tracer):
        if _TRACED_HYPERPARAMETERS.get():
            if value.ndim != 0 or np.dtype(value.dtype).kind not in "iuf":
                raise TypeError(f"{fn}: {name} must be a real scalar, got a traced array of "
                                f"shape {tuple(value.shape)} and dtype {value.dtype}")
            return value
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


def check_int(name: str, fn: str, value, *, lo: int | None = None) -> int:
    """Validates a static integer argument (a Python or NumPy int, not a bool) >= lo."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise TypeError(f"{fn}: {name} must be an int, got {type(value).__name__} {value!r}")
    if lo is not None and value < lo:
        raise ValueError(f"{fn}: {name} must be >= {lo}, got {value}")
    return int(value)


def check_transformation(name: str, fn: str, value) -> GradientTransformation:
    """Validates an argument that must be a GradientTransformation (or optax-like init/update
    pair with the same two fields)."""
    if not isinstance(value, GradientTransformation):
        raise TypeError(f"{fn}: {name} must be a GradientTransformation, got "
                        f"{type(value).__name__}")
    return value


def _mask_leaf(m, fn: str) -> bool:
    if isinstance(m, np.ndarray) and m.shape == () and m.dtype == np.bool_:
        m = m[()]  # a 0-d NumPy bool (np.array(True)), as optax takes
    if isinstance(m, bool | np.bool_):
        return bool(m)
    raise TypeError(
        f"{fn}: mask leaves must be Python bools (the mask is static, not traced), got "
        f"{type(m).__name__}"
    )


def resolve_mask(mask, tree, fn: str):
    """The mask for `tree` as a pytree of Python bools with tree's structure.

    mask: a pytree of bools with the structure of `tree` or a prefix of it (a bool standing
    for a whole subtree, as optax's masks), or a callable tree -> such a pytree.

    Raises:
      ValueError: the mask is not a prefix of tree's structure.
      TypeError: a mask leaf is not a bool.
    """
    mask_tree = mask(tree) if callable(mask) else mask

    def expand(prefix, full):
        p_kids, p_def = tree_flatten(prefix, is_leaf=lambda y: y is not prefix)
        if p_def.kind == "leaf":
            b = _mask_leaf(prefix, fn)
            return tree_map(lambda _: b, full)
        f_kids, f_def = tree_flatten(full, is_leaf=lambda y: y is not full)
        if f_def != p_def:
            raise ValueError(
                f"{fn}: the mask's structure {tree_structure(mask_tree)} differs from the "
                f"parameters' {tree_structure(tree)} (it must be their structure or a prefix "
                "of it)"
            )
        return tree_unflatten(p_def, [expand(p, f) for p, f in zip(p_kids, f_kids, strict=True)])

    return expand(mask_tree, tree)


def highest_dtype(tree, default=np.float32) -> np.dtype:
    """The dtype every float leaf of `tree` promotes to (float32 for a tree without float
    leaves), as optax.tree.dtype(tree, "highest") for float trees."""
    out = None
    for x in tree_leaves(tree):
        dt = np.dtype(jnp.asarray(x).dtype)
        if dt.kind == "f" or dt.name == "bfloat16":
            out = dt if out is None else np.dtype(jnp.promote_types(out, dt))
    return np.dtype(default) if out is None else out


def check_float_dtype(name: str, fn: str, dtype):
    """Validates an optional accumulator dtype: None (keep the parameters' dtypes) or a float
    dtype; returned as a NumPy dtype or None."""
    if dtype is None:
        return None
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be a dtype or None, got {dtype!r}") from None
    if dt.kind != "f" and dt.name != "bfloat16":
        raise ValueError(f"{fn}: {name} must be a float dtype, got {dt}")
    return dt


def require_params(fn: str, params) -> None:
    """Raises ValueError when a transformation that reads the parameters got none."""
    if params is None:
        raise ValueError(f"{fn}: update needs params (call update(updates, state, params))")


def zeros_like_tree(params, dtype=None):
    """Zeros shaped like every leaf of params (in `dtype` when given, else each leaf's)."""
    return tree_map(lambda p: jnp.zeros_like(jnp.asarray(p), dtype=dtype), params)


def full_like_tree(params, value):
    """`value` shaped like every leaf of params, in each leaf's dtype."""
    return tree_map(lambda p: jnp.full_like(jnp.asarray(p), value), params)


def cast_tree(tree, dtype):
    """tree with every leaf cast to dtype; tree itself for dtype None."""
    return tree if dtype is None else tree_map(lambda t: t.astype(dtype), tree)
