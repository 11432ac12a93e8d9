"""Backtracking line search, value_and_grad_from_state and the tree helpers line searches share."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import nova
import nova.lax as lax
import nova.numpy as jnp
from nova.core.pytree import tree_leaves, tree_map
from nova.optim.base import (
    GradientTransformationExtraArgs,
    check_bool,
    check_float,
    check_int,
)

# --- tree helpers --------------------------------------------------------------------------------


def tree_vdot(a, b):
    """sum over leaves of vdot(a_leaf, b_leaf) (complex leaves of a conjugated), a 0-d
    array."""
    pairs = zip(tree_leaves(a), tree_leaves(b), strict=True)
    terms = [jnp.vdot(jnp.asarray(x), jnp.asarray(y)) for x, y in pairs]
    return sum(terms[1:], terms[0]) if terms else jnp.asarray(0.0, dtype=jnp.float32)


def tree_add_scale(a, s, b):
    """a + s * b leaf by leaf, each leaf kept in a's dtype."""
    return tree_map(lambda x, y: (x + s * y).astype(jnp.asarray(x).dtype), a, b)


def tree_select(pred, on_true, on_false):
    """where(pred, on_true, on_false) leaf by leaf for a 0-d bool pred; keeps on_false's dtypes."""
    return tree_map(lambda t, f: jnp.where(pred, t, f).astype(jnp.asarray(f).dtype),
                    on_true, on_false)


def cast_like(tree, like):
    """tree with each leaf cast to the dtype of the matching leaf of `like`."""
    return tree_map(lambda x, y: jnp.asarray(x).astype(jnp.asarray(y).dtype), tree, like)


def value_dtype(params):
    """The dtype of objective values for these params: the first leaf's float dtype."""
    leaves = tree_leaves(params)
    if not leaves:
        raise ValueError("line search: params has no leaves")
    dt = np.dtype(jnp.asarray(leaves[0]).dtype)
    return dt if dt.kind == "f" or dt.name == "bfloat16" else np.dtype(np.float32)


def split_fn_kwargs(fn_name: str, value_fn: Callable, extra_args: dict) -> dict:
    """The extra arguments that `value_fn` takes by name; TypeError naming the others."""
    if not callable(value_fn):
        raise TypeError(f"{fn_name}: value_fn must be callable, got {type(value_fn).__name__}")
    names = set(inspect.signature(value_fn).parameters)
    unused = sorted(k for k in extra_args if k not in names)
    if unused:
        raise TypeError(f"{fn_name}: the extra arguments {unused} are not parameters of "
                        "value_fn; pass only the keyword arguments value_fn takes")
    return {k: v for k, v in extra_args.items() if k in names}


def check_line_search_args(fn_name: str, value, grad, params) -> None:
    """Raises ValueError when the objective's value or gradient do not fit the params."""
    if params is None:
        raise ValueError(f"{fn_name}: update needs params (call update(updates, state, params, "
                         "value=..., grad=..., value_fn=...))")
    if tuple(np.shape(value)) != ():
        raise ValueError(f"{fn_name}: value must be a scalar, got shape {np.shape(value)}")
    shapes = [tuple(np.shape(g)) for g in tree_leaves(grad)]
    want = [tuple(np.shape(p)) for p in tree_leaves(params)]
    if shapes != want:
        raise ValueError(f"{fn_name}: grad's leaf shapes {shapes} differ from the params' {want}")


# --- backtracking --------------------------------------------------------------------------------


class BacktrackingLinesearchInfo(NamedTuple):
    """Diagnostics of a backtracking line search: the number of trial steps (0-d int32) and
    the final sufficient-decrease error (0-d float; 0 when the search succeeded)."""

    num_linesearch_steps: Any
    decrease_error: Any


class ScaleByBacktrackingLinesearchState(NamedTuple):
    """State of scale_by_backtracking_linesearch: the accepted learning rate, the objective's
    value at the accepted point, its gradient there (None unless store_grad) and the info."""

    learning_rate: Any
    value: Any
    grad: Any
    info: BacktrackingLinesearchInfo


def scale_by_backtracking_linesearch(
    max_backtracking_steps: int,
    slope_rtol: float = 1e-4,
    decrease_factor: float = 0.8,
    increase_factor: float = 1.5,
    max_learning_rate: float = 1.0,
    atol: float = 0.0,
    rtol: float = 0.0,
    store_grad: bool = False,
    verbose: bool = False,
) -> GradientTransformationExtraArgs:
    """Scales the updates by a step size that gives sufficient decrease (Armijo), found by
    backtracking, as optax.scale_by_backtracking_linesearch.

    Starting from min(increase_factor * previous learning rate, max_learning_rate), the step
    size is multiplied by decrease_factor until

        f(w + eta u) <= (1 + rtol) f(w) + eta * slope_rtol * <u, grad f(w)> + atol

    or max_backtracking_steps trials were made; a step whose value is NaN or infinite is taken
    as eta = 0. The update is called as
    `update(updates, state, params, *, value, grad, value_fn, **fn_kwargs)`: value and grad
    are f and its gradient at params (0-d float; params-shaped), value_fn(params, **fn_kwargs)
    the objective. The trials run in a nova.lax.while_loop, so the update works under
    nova.jit. With store_grad the gradient at the accepted point is kept in the state for
    value_and_grad_from_state. verbose is accepted for optax compatibility and prints nothing.

    Source: Armijo's rule, Nocedal & Wright, Numerical Optimization (1999), Alg. 3.1; the
    increase of the initial guess follows Vaswani et al. 2019, "Painless Stochastic Gradient".

    Raises:
      TypeError: a bad hyperparameter type; an extra argument value_fn does not take.
      ValueError: a hyperparameter out of range; no params; value not a scalar; grad not
        shaped like params.
    """
    fn = "scale_by_backtracking_linesearch"
    max_steps = check_int("max_backtracking_steps", fn, max_backtracking_steps, lo=0)
    slope_rtol = check_float("slope_rtol", fn, slope_rtol, lo=0.0)
    decrease_factor = check_float("decrease_factor", fn, decrease_factor, lo=0.0, hi=1.0)
    increase_factor = check_float("increase_factor", fn, increase_factor, lo=0.0)
    max_learning_rate = check_float("max_learning_rate", fn, max_learning_rate, lo=0.0)
    atol = check_float("atol", fn, atol, lo=0.0)
    rtol = check_float("rtol", fn, rtol, lo=0.0)
    store_grad = check_bool("store_grad", fn, store_grad)
    check_bool("verbose", fn, verbose)

    def init(params):
        dt = value_dtype(params)
        grad = tree_map(lambda p: jnp.zeros_like(jnp.asarray(p)), params) if store_grad else None
        info = BacktrackingLinesearchInfo(jnp.zeros((), jnp.int32), jnp.full((), np.inf, dt))
        return ScaleByBacktrackingLinesearchState(jnp.ones((), dt), jnp.full((), np.inf, dt),
                                                  grad, info)

    def update(updates, state, params=None, *, value, grad, value_fn, **extra_args):
        fn_kwargs = split_fn_kwargs(fn, value_fn, extra_args)
        check_line_search_args(fn, value, grad, params)
        dt = jnp.asarray(state.learning_rate).dtype
        value = jnp.asarray(value).astype(dt)
        slope = tree_vdot(updates, grad).astype(dt)

        def objective(p):
            return jnp.asarray(value_fn(p, **fn_kwargs)).astype(dt)

        def decrease_error(lr, new_value):
            err = new_value - (1.0 + rtol) * value - lr * slope_rtol * slope
            return jnp.maximum(jnp.where(jnp.isnan(err), np.inf, err), 0.0).astype(dt)

        def keep_going(carry):
            _, _, err, k = carry
            return jnp.logical_not(err <= atol) & (k <= max_steps)

        def trial(carry):
            lr, _, _, k = carry
            lr = jnp.where(k > 0, decrease_factor * lr, lr).astype(dt)
            new_value = objective(tree_add_scale(params, lr, updates))
            return lr, new_value, decrease_error(lr, new_value), k + 1

        lr0 = jnp.minimum(increase_factor * state.learning_rate, max_learning_rate).astype(dt)
        start = (lr0, value, jnp.full((), np.inf, dt), jnp.zeros((), jnp.int32))
        lr, new_value, err, steps = lax.while_loop(keep_going, trial, start)
        new_grad = None
        if store_grad:
            new_grad = nova.grad(objective)(tree_add_scale(params, lr, updates))
            new_grad = cast_like(new_grad, state.grad)
        lr_used = jnp.where(jnp.isinf(err), 0.0, lr).astype(dt)
        new_updates = tree_map(lambda u: (lr_used * u).astype(jnp.asarray(u).dtype), updates)
        info = BacktrackingLinesearchInfo(steps, err)
        return new_updates, ScaleByBacktrackingLinesearchState(lr_used, new_value, new_grad, info)

    return GradientTransformationExtraArgs(init, update)


# --- reusing the value and gradient a line search stored -----------------------------------------


def _find_field(tree, key: str, found: list) -> None:
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        for name, child in zip(tree._fields, tree, strict=True):
            if name == key:
                found.append(child)
            else:
                _find_field(child, key, found)
    elif isinstance(tree, tuple | list):
        for child in tree:
            _find_field(child, key, found)
    elif isinstance(tree, dict):
        for child in tree.values():
            _find_field(child, key, found)


def _state_field(state, key: str):
    found: list = []
    _find_field(state, key, found)
    if len(found) != 1:
        raise ValueError(f"value_and_grad_from_state: the optimizer state holds {len(found)} "
                         f"fields named {key!r}, expected exactly one (use a line search that "
                         "stores the value and the gradient, e.g. store_grad=True)")
    if found[0] is None:
        raise ValueError(f"value_and_grad_from_state: the state's {key!r} is None (use "
                         "store_grad=True in scale_by_backtracking_linesearch)")
    return found[0]


def value_and_grad_from_state(value_fn: Callable[..., Any]) -> Callable[..., tuple[Any, Any]]:
    """Like nova.value_and_grad(value_fn), but reuses the value and gradient that a line search
    stored in the optimizer state (optax.value_and_grad_from_state).

    The result is called as `f(params, *args, state=opt_state, **kwargs)` and returns
    (value, grad): the state's `value` and `grad` fields when the value is finite (it is inf
    after init), else value_fn's value and gradient at params, chosen by nova.lax.cond.

    Raises:
      TypeError: value_fn is not callable.
      ValueError: the state has no single `value` and `grad` field, or its grad is None.
    """
    if not callable(value_fn):
        raise TypeError(f"value_and_grad_from_state: value_fn must be callable, got "
                        f"{type(value_fn).__name__}")

    def value_and_grad(params, *fn_args, state, **fn_kwargs):
        value = _state_field(state, "value")
        grad = _state_field(state, "grad")
        value = jnp.asarray(value)

        def compute(p, args, kwargs):
            v, g = nova.value_and_grad(lambda q: value_fn(q, *args, **kwargs))(p)
            return jnp.asarray(v).astype(value.dtype), cast_like(g, grad)

        def stored(p, args, kwargs):
            del p, args, kwargs
            return value, grad

        finite = jnp.logical_not(jnp.isinf(value) | jnp.isnan(value))
        return lax.cond(finite, stored, compute, params, fn_args, fn_kwargs)

    return value_and_grad
