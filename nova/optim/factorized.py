"""Second-moment estimates in sublinear memory: Adafactor's factored RMS (scale_by_factored_rms)
and SM3's cover-set accumulators (scale_by_sm3), with optax's states and numerics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import nova.numpy as jnp
from nova import lax
from nova.core.pytree import tree_flatten, tree_map, tree_unflatten
from nova.optim.base import (
    GradientTransformation,
    check_bool,
    check_float,
    check_int,
    check_like_state,
    require_params,
    safe_increment,
    zero_count,
    zeros_like_tree,
)
from nova.optim.moments import update_moment


def _decay_rate_pow(i, exponent: float = 0.8):
    """Adafactor's second-moment decay 1 - (i + 1)**(-exponent) at step i (Shazeer & Stern
    2018, beta2_t = 1 - t**(-0.8))."""
    t = jnp.asarray(i + 1).astype(jnp.float32)
    return 1.0 - t ** (-exponent)


def _factored_dims(shape, factored: bool, min_dim_size_to_factor: int):
    """The (second largest, largest) axes of `shape` when it is factored, else None: a leaf is
    factored when it has ndim >= 2 and its second largest axis is >= min_dim_size_to_factor."""
    if not factored or len(shape) < 2:
        return None
    order = np.argsort(shape)
    if shape[order[-2]] < min_dim_size_to_factor:
        return None
    return int(order[-2]), int(order[-1])


class FactoredState(NamedTuple):
    """State of scale_by_factored_rms: step count (0-d int32) and, per leaf, the row and column
    averages v_row, v_col of a factored leaf (shape (1,) placeholders otherwise) and the full
    average v of an unfactored one (shape (1,) for a factored leaf)."""

    count: Any
    v_row: Any
    v_col: Any
    v: Any


def scale_by_factored_rms(
    factored: bool = True, decay_rate: float = 0.8, step_offset: int = 0,
    min_dim_size_to_factor: int = 128, epsilon: float = 1e-30,
    decay_rate_fn: Callable = _decay_rate_pow,
) -> GradientTransformation:
    """Adafactor's rescaling (Shazeer & Stern 2018, "Adafactor: Adaptive Learning Rates with
    Sublinear Memory Cost", Algorithms 4 and 5), as optax. At step t (from 0), with
    beta_t = decay_rate_fn(t - step_offset, decay_rate) and G = g^2 + epsilon:

    - a factored leaf (see below), d0 its largest axis and d1 the second largest:
      R_t = beta_t R + (1 - beta_t) mean(G, d0), C_t = beta_t C + (1 - beta_t) mean(G, d1),
      update = g * (R_t / mean(R_t))^(-1/2) * C_t^(-1/2), broadcast back along d0 and d1;
    - any other leaf: v_t = beta_t v + (1 - beta_t) G, update = g * v_t^(-1/2).

    A leaf is factored when `factored`, ndim >= 2 and its second largest axis has at least
    min_dim_size_to_factor entries. Update needs params (for their shapes).

    Raises:
      ValueError: a negative epsilon or min_dim_size_to_factor; update called without params.
      TypeError: factored is not a bool, decay_rate_fn not callable.
    """
    fn = "scale_by_factored_rms"
    factored = check_bool("factored", fn, factored)
    decay_rate = check_float("decay_rate", fn, decay_rate)
    step_offset = check_float("step_offset", fn, step_offset)
    min_dim = check_int("min_dim_size_to_factor", fn, min_dim_size_to_factor, lo=0)
    epsilon = check_float("epsilon", fn, epsilon, lo=0.0)
    if not callable(decay_rate_fn):
        raise TypeError(f"{fn}: decay_rate_fn must be callable, got "
                        f"{type(decay_rate_fn).__name__}")

    def init_leaf(p):
        p = jnp.asarray(p)
        dims = _factored_dims(p.shape, factored, min_dim)
        one = jnp.zeros((1,), p.dtype)
        if dims is None:
            return one, one, jnp.zeros_like(p)
        d1, d0 = dims
        row = jnp.zeros(tuple(n for i, n in enumerate(p.shape) if i != d0), p.dtype)
        col = jnp.zeros(tuple(n for i, n in enumerate(p.shape) if i != d1), p.dtype)
        return row, col, one

    def update_leaf(g, v_row, v_col, v, p, beta):
        p = jnp.asarray(p)
        dims = _factored_dims(p.shape, factored, min_dim)
        g_sq = g * g + epsilon
        one = jnp.zeros((1,), p.dtype)
        if dims is None:
            new_v = (beta * v + (1.0 - beta) * g_sq).astype(p.dtype)
            return g * new_v ** (-0.5), one, one, new_v
        d1, d0 = dims
        new_row = (beta * v_row + (1.0 - beta) * jnp.mean(g_sq, axis=d0)).astype(p.dtype)
        new_col = (beta * v_col + (1.0 - beta) * jnp.mean(g_sq, axis=d1)).astype(p.dtype)
        row_axis = d1 - 1 if d1 > d0 else d1  # d1 in v_row, which lacks axis d0
        row_factor = (new_row / jnp.mean(new_row, axis=row_axis, keepdims=True)) ** (-0.5)
        col_factor = new_col ** (-0.5)
        out = g * jnp.expand_dims(row_factor, d0) * jnp.expand_dims(col_factor, d1)
        return out, new_row, new_col, one

    def init(params):
        leaves, treedef = tree_flatten(params)
        parts = [init_leaf(p) for p in leaves]
        rows, cols, vs = ([q[k] for q in parts] for k in range(3))
        return FactoredState(count=zero_count(), v_row=tree_unflatten(treedef, rows),
                             v_col=tree_unflatten(treedef, cols), v=tree_unflatten(treedef, vs))

    def update(updates, state, params=None):
        require_params(fn, params)
        check_like_state(f"{fn}.update", updates, params, "params")
        beta = decay_rate_fn(state.count - step_offset, decay_rate)
        g_leaves, treedef = tree_flatten(updates)
        columns = [tree_flatten(t)[0] for t in (state.v_row, state.v_col, state.v, params)]
        parts = [update_leaf(g, *rest, beta) for g, *rest in zip(g_leaves, *columns, strict=True)]
        out, rows, cols, vs = ([q[k] for q in parts] for k in range(4))
        unflat = lambda xs: tree_unflatten(treedef, xs)
        return unflat(out), FactoredState(count=safe_increment(state.count), v_row=unflat(rows),
                                          v_col=unflat(cols), v=unflat(vs))

    return GradientTransformation(init, update)


class ScaleBySM3State(NamedTuple):
    """State of scale_by_sm3: mu, per leaf a list of ndim accumulators (the maxima of the
    squared-gradient sums over each axis' slices, accumulator i of shape (shape[i],)), and nu,
    the momentum of the rescaled updates."""

    mu: Any
    nu: Any


def scale_by_sm3(b1: float = 0.9, b2: float = 1.0, eps: float = 1e-8) -> GradientTransformation:
    """SM3's rescaling (Anil, Gupta, Koren & Singer 2019, "Memory-Efficient Adaptive
    Optimization", Algorithm SM3-II, with the rows and columns of each tensor as the cover), as
    optax. Per leaf of ndim >= 2, with accumulators mu_i of every axis i:

        nu'_t = c0 g^2 + c1 min_i mu_i (broadcast)   (c0 = 1 - b2, or 1 for b2 = 1; c1 = b2)
        u_t = g / sqrt(nu'_t + eps)   (0 where nu'_t = 0),   mu_i = max of nu'_t over the others
        update = m_t = b1 m_{t-1} + (1 - b1) u_t

    A vector keeps its full accumulator (AdaGrad). The update is the momentum itself.

    Raises:
      ValueError: b1 or b2 outside [0, 1], eps negative; (init) a 0-d parameter (optax has no
        accumulator for a scalar either).
    """
    fn = "scale_by_sm3"
    b1 = check_float("b1", fn, b1, lo=0.0, hi=1.0)
    b2 = check_float("b2", fn, b2, lo=0.0, hi=1.0)
    eps = check_float("eps", fn, eps, lo=0.0)
    c0 = 1.0 - b2 if not (isinstance(b2, float) and b2 == 1.0) else 1.0

    def accumulators(p):
        p = jnp.asarray(p)
        if p.ndim == 0:
            raise ValueError(f"{fn}: parameters must have ndim >= 1, got a 0-d leaf of dtype "
                             f"{p.dtype}")
        return [jnp.zeros((n,), p.dtype) for n in p.shape]

    def init(params):
        return ScaleBySM3State(mu=tree_map(accumulators, params), nu=zeros_like_tree(params))

    def accumulate(g, mus):
        if g.ndim < 2:
            return c0 * (g * g) + b2 * mus[0]
        expanded = [jnp.reshape(m, tuple(n if j == i else 1 for j, n in enumerate(g.shape)))
                    for i, m in enumerate(mus)]
        low = expanded[0]
        for e in expanded[1:]:
            low = jnp.minimum(low, e)
        return c0 * (g * g) + b2 * low

    def new_mus(acc):
        if acc.ndim < 2:
            return [acc]
        return [jnp.max(acc, axis=tuple(j for j in range(acc.ndim) if j != i))
                for i in range(acc.ndim)]

    def update(updates, state, params=None):
        del params
        check_like_state(f"{fn}.update", updates, state.nu, "nu")
        g_leaves, treedef = tree_flatten(updates)
        g_leaves = [jnp.asarray(g) for g in g_leaves]
        # state.mu flattens to each leaf's ndim accumulators in turn
        flat_mu, start, accs = tree_flatten(state.mu)[0], 0, []
        for g in g_leaves:
            accs.append(accumulate(g, flat_mu[start:start + g.ndim]))
            start += g.ndim
        scaled = [g * jnp.where(a > 0, lax.rsqrt(a + eps), 0.0)
                  for g, a in zip(g_leaves, accs, strict=True)]
        nu = update_moment(tree_unflatten(treedef, scaled), state.nu, b1, 1)
        mu = tree_unflatten(treedef, [new_mus(a) for a in accs])
        return nu, ScaleBySM3State(mu=mu, nu=nu)

    return GradientTransformation(init, update)


__all__ = ["FactoredState", "ScaleBySM3State", "scale_by_factored_rms", "scale_by_sm3"]
