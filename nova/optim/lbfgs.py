"""L-BFGS (scale_by_lbfgs, lbfgs) and the Polyak step size (scale_by_polyak, polyak_sgd)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

import nova.lax as lax
import nova.numpy as jnp
from nova.core.pytree import tree_leaves, tree_map
from nova.optim.base import (
    GradientTransformation,
    GradientTransformationExtraArgs,
    chain,
    check_bool,
    check_float,
    check_int,
    check_like_state,
    identity,
    init_empty_state,
    require_params,
    safe_increment,
    zero_count,
    zeros_like_tree,
)
from nova.optim.linesearch import tree_add_scale, tree_vdot
from nova.optim.transform import scale, scale_by_learning_rate
from nova.optim.zoom import scale_by_zoom_linesearch


class ScaleByLBFGSState(NamedTuple):
    """State of scale_by_lbfgs: step count (0-d int32), the previous params and updates, the
    last memory_size parameter and update differences (each leaf stacked on a leading axis of
    size memory_size, a ring buffer) and their weights 1/<du, dw> ((memory_size,), in the
    parameters' promoted float dtype: float64 for float64 parameters, as optax under x64)."""

    count: Any
    params: Any
    updates: Any
    diff_params_memory: Any
    diff_updates_memory: Any
    weights_memory: Any


def _row(tree, i):
    return tree_map(lambda x: lax.dynamic_index_in_dim(x, i, 0, keepdims=False), tree)


def _two_loop(updates, dw, du, rho, gamma, newest):
    """H u for the L-BFGS inverse-Hessian approximation H stored in (dw, du, rho), by the
    two-loop recursion (Nocedal & Wright, Alg. 7.4); `newest` is the slot after the newest
    pair, so the slots from oldest to newest are newest, newest + 1, ... (mod memory_size)."""
    m = rho.shape[0]
    slots = (newest + jnp.arange(m, dtype=jnp.int32)) % m

    def backward(vec, i):
        alpha = rho[i] * tree_vdot(_row(dw, i), vec)
        return tree_add_scale(vec, -alpha, _row(du, i)), alpha

    vec, alphas = lax.scan(backward, updates, slots, reverse=True)
    vec = tree_map(lambda v: (gamma * v).astype(v.dtype), vec)

    def forward(vec, slot_alpha):
        i, alpha = slot_alpha
        beta = rho[i] * tree_vdot(_row(du, i), vec)
        return tree_add_scale(vec, alpha - beta, _row(dw, i)), None

    vec, _ = lax.scan(forward, vec, (slots, alphas))
    return vec


def _weights_dtype(params):
    kinds = [jnp.asarray(p).dtype for p in tree_leaves(params)]
    floats = [d for d in kinds if jnp.issubdtype(d, jnp.floating)]
    return jnp.result_type(*floats) if floats else jnp.float32


def scale_by_lbfgs(memory_size: int = 10, scale_init_precond: bool = True
                   ) -> GradientTransformation:
    """Multiplies the updates by the L-BFGS approximation of the inverse Hessian, built from
    the last memory_size differences of parameters and updates (optax.scale_by_lbfgs).

    The initial approximation is gamma * I with gamma = <du, dw> / <du, du> of the newest pair
    (with scale_init_precond; 1 otherwise), and gamma = min(1, 1/||u||) at the first step.
    Chain it with a line search (see lbfgs). update needs params.

    Source: Nocedal & Wright, Numerical Optimization (1999), Algorithms 7.4 and 7.5; Liu &
    Nocedal (1989), "On the limited memory BFGS method for large scale optimization".

    Raises:
      TypeError: memory_size not an int, scale_init_precond not a bool.
      ValueError: memory_size < 1; update without params or with updates unlike the state's.
    """
    fn = "scale_by_lbfgs"
    m = check_int("memory_size", fn, memory_size, lo=1)
    scale_init_precond = check_bool("scale_init_precond", fn, scale_init_precond)

    def init(params):
        stacked = tree_map(lambda p: jnp.zeros((m, *jnp.shape(p)), jnp.asarray(p).dtype), params)
        return ScaleByLBFGSState(zero_count(), zeros_like_tree(params), zeros_like_tree(params),
                                 stacked, stacked, jnp.zeros((m,), _weights_dtype(params)))

    def update(updates, state, params=None):
        require_params(fn, params)
        check_like_state(fn, updates, state.updates, "updates")
        started = state.count > 0
        dw = tree_map(lambda p, q: jnp.where(started, p - q, 0.0).astype(p.dtype),
                      params, state.params)
        du = tree_map(lambda u, v: jnp.where(started, u - v, 0.0).astype(u.dtype),
                      updates, state.updates)
        curvature = tree_vdot(du, dw)
        weight = jnp.where(curvature == 0.0, 0.0, 1.0 / curvature)
        weight = jnp.where(started, weight, 0.0).astype(state.weights_memory.dtype)
        slot = (state.count - 1) % m

        def put(stack, x):
            return lax.dynamic_update_index_in_dim(stack, x.astype(stack.dtype), slot, 0)

        dw_mem = tree_map(put, state.diff_params_memory, dw)
        du_mem = tree_map(put, state.diff_updates_memory, du)
        rho = put(state.weights_memory, weight)
        gamma = jnp.ones((), state.weights_memory.dtype)
        if scale_init_precond:
            du_sq = tree_vdot(du, du)
            gamma = jnp.where(du_sq > 0.0, curvature / du_sq, 1.0)
            first = jnp.minimum(1.0, 1.0 / jnp.sqrt(tree_vdot(updates, updates)))
            gamma = jnp.where(started, gamma, first)
        out = _two_loop(updates, dw_mem, du_mem, rho, gamma, state.count % m)
        return out, ScaleByLBFGSState(safe_increment(state.count), params, updates, dw_mem,
                                      du_mem, rho)

    return GradientTransformation(init, update)


def lbfgs(
    learning_rate=None,
    memory_size: int = 10,
    scale_init_precond: bool = True,
    linesearch: GradientTransformation | None = scale_by_zoom_linesearch(
        max_linesearch_steps=20, initial_guess_strategy="one"),
) -> GradientTransformationExtraArgs:
    """The L-BFGS optimizer (optax.lbfgs): scale_by_lbfgs, then -learning_rate (-1 for None),
    then the line search (identity for None). With the default zoom line search the update
    is called as `update(grads, state, params, value=f(params), grad=grads, value_fn=f)`; the
    line search evaluates f and its gradient in a nova.lax.while_loop, so a whole step traces
    under nova.jit. value_and_grad_from_state(f) reuses the line search's last evaluation.

    Source: Nocedal & Wright, Numerical Optimization (1999), Algorithms 7.4, 7.5, 3.5, 3.6.

    Raises:
      TypeError: linesearch is not a GradientTransformation (or None); bad arguments of
        scale_by_lbfgs or scale_by_learning_rate.
      ValueError: memory_size < 1.
    """
    if linesearch is not None and not isinstance(linesearch, GradientTransformation):
        raise TypeError(f"lbfgs: linesearch must be a GradientTransformation or None, got "
                        f"{type(linesearch).__name__}")
    step = scale(-1.0) if learning_rate is None else scale_by_learning_rate(learning_rate)
    return chain(scale_by_lbfgs(memory_size, scale_init_precond), step,
                 identity() if linesearch is None else linesearch)


def scale_by_polyak(f_min: float = 0.0, max_learning_rate: float = 1.0, eps: float = 0.0,
                    variant: str = "sps") -> GradientTransformationExtraArgs:
    """Scales the updates by the Polyak step size (optax.scale_by_polyak):

        step = min((f(w) - f_min) / (||g||**2 + eps), max_learning_rate)

    with f(w) - f_min clipped at 0 for variant "sps+", and step = 0 where ||g||**2 + eps is
    at most float64's machine epsilon. update takes the objective's value as the keyword
    argument `value` (a 0-d float); the state is EmptyState().

    Source: Loizou et al. 2021, "Stochastic Polyak Step-size for SGD" (SPS_max); Garrigos et
    al. 2023 for SPS+.

    Raises:
      TypeError: a hyperparameter is not a real number.
      ValueError: variant is not "sps" or "sps+"; value is not a scalar.
    """
    fn = "scale_by_polyak"
    f_min = check_float("f_min", fn, f_min)
    max_learning_rate = check_float("max_learning_rate", fn, max_learning_rate, lo=0.0)
    eps = check_float("eps", fn, eps, lo=0.0)
    if variant not in ("sps", "sps+"):
        raise ValueError(f"{fn}: variant must be 'sps' or 'sps+', got {variant!r}")

    def update(updates, state, params=None, *, value, **extra_args):
        del params, extra_args
        if tuple(np.shape(value)) != ():
            raise ValueError(f"{fn}: value must be a scalar, got shape {np.shape(value)}")
        sq = tree_vdot(updates, updates)
        gap = (jnp.asarray(value) - f_min).astype(sq.dtype)
        if variant == "sps+":
            gap = jnp.maximum(gap, 0.0)
        denom = sq + eps
        step = jnp.where(denom <= np.finfo(np.float64).eps, 0.0,
                         jnp.minimum(gap / denom, max_learning_rate))
        return tree_map(lambda u: (step * u).astype(jnp.asarray(u).dtype), updates), state

    return GradientTransformationExtraArgs(init_empty_state, update)


def polyak_sgd(max_learning_rate: float = 1.0, scaling=1.0, f_min: float = 0.0,
               eps: float = 0.0, variant: str = "sps") -> GradientTransformationExtraArgs:
    """SGD with the Polyak step size (optax.polyak_sgd): -scaling, then scale_by_polyak.
    update takes the objective's value as the keyword argument `value`; see scale_by_polyak.

    Raises:
      TypeError, ValueError: as scale_by_polyak and scale_by_learning_rate.
    """
    return chain(scale_by_learning_rate(scaling),
                 scale_by_polyak(f_min, max_learning_rate, eps, variant))


__all__ = ["ScaleByLBFGSState", "lbfgs", "polyak_sgd", "scale_by_lbfgs",
           "scale_by_polyak"]
