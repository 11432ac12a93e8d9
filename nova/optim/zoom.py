"""The zoom line search (strong Wolfe conditions), as optax.scale_by_zoom_linesearch."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

import nova
import nova.lax as lax
import nova.numpy as jnp
from nova.core.pytree import tree_map
from nova.optim.base import (
    GradientTransformationExtraArgs,
    check_bool,
    check_float,
    check_int,
    zeros_like_tree,
)
from nova.optim.linesearch import (
    cast_like,
    check_line_search_args,
    split_fn_kwargs,
    tree_add_scale,
    tree_select,
    tree_vdot,
    value_dtype,
)


class ZoomLinesearchInfo(NamedTuple):
    """Diagnostics of a zoom line search: the number of trial steps (0-d int32) and the final
    sufficient-decrease and curvature errors (0-d float; 0 when satisfied)."""

    num_linesearch_steps: Any
    decrease_error: Any
    curvature_error: Any


class ScaleByZoomLinesearchState(NamedTuple):
    """State of scale_by_zoom_linesearch: the accepted learning rate, the objective's value and
    gradient at the accepted point (for value_and_grad_from_state) and the info."""

    learning_rate: Any
    value: Any
    grad: Any
    info: ZoomLinesearchInfo


class _Search(NamedTuple):
    """The carry of the line search's while_loop (all 0-d but the gradients)."""

    count: Any
    stepsize: Any
    value: Any
    grad: Any
    slope: Any
    decrease_error: Any
    curvature_error: Any
    interval_found: Any
    done: Any
    failed: Any
    low: Any  # low/high bracket a valid step, value(low) <= value(high); low may exceed high
    value_low: Any
    slope_low: Any
    high: Any
    value_high: Any
    slope_high: Any
    cubic_ref: Any  # a third point for the cubic interpolation
    value_cubic_ref: Any
    safe_stepsize: Any  # the best step with sufficient decrease seen so far (0: none)
    safe_value: Any
    safe_grad: Any


def _cubic_minimizer(a, fa, fpa, b, fb, c, fc):
    """The critical point of the cubic through (a, fa), (b, fb), (c, fc) with slope fpa at a
    (NaN when there is none; the caller then rejects it). scipy.optimize's _cubicmin."""
    db, dc = b - a, c - a
    rb, rc = fb - fa - fpa * db, fc - fa - fpa * dc
    denom = (db * dc) ** 2 * (db - dc)
    cubic = (dc**2 * rb - db**2 * rc) / denom
    square = (db**3 * rc - dc**3 * rb) / denom
    return a + (-square + jnp.sqrt(square * square - 3.0 * cubic * fpa)) / (3.0 * cubic)


def _quadratic_minimizer(a, fa, fpa, b, fb):
    """The critical point of the parabola through (a, fa), (b, fb) with slope fpa at a."""
    db = b - a
    curvature = (fb - fa - fpa * db) / (db * db)
    return a - fpa / (2.0 * curvature)


def _choose(pred, pairs):
    """[where(pred, new, old) for (new, old) in pairs]."""
    return [jnp.where(pred, new, old) for new, old in pairs]


class _Rules(NamedTuple):
    """The static settings of one zoom line search."""

    max_steps: int
    max_stepsize: float | None
    tol: float
    increase_factor: float
    slope_rtol: float
    curv_rtol: float
    approx_dec_rtol: float | None
    interval_threshold: float


def _errors(rules: _Rules, stepsize, value, slope, value0, slope0):
    """(sufficient-decrease error, curvature error) of a trial step; NaN counts as inf."""
    dec = value - value0 - rules.slope_rtol * stepsize * slope0
    if rules.approx_dec_rtol is not None:  # Hager & Zhang's approximate Wolfe condition
        approx = jnp.maximum(slope - (2.0 * rules.slope_rtol - 1.0) * slope0,
                             value - value0 - rules.approx_dec_rtol * jnp.abs(value0))
        dec = jnp.minimum(approx, dec)
    dec = jnp.where(jnp.isnan(dec), np.inf, jnp.maximum(dec, 0.0))
    curv = jnp.maximum(jnp.abs(slope) - rules.curv_rtol * jnp.abs(slope0), 0.0)
    return dec, jnp.where(jnp.isnan(curv), np.inf, curv)


def _zoom_point(rules: _Rules, s: _Search):
    """The next trial inside the bracket: the cubic's minimizer, else the parabola's, when well
    inside the bracket, else the midpoint (Nocedal & Wright, Alg. 3.6)."""
    delta = jnp.abs(s.high - s.low)
    left, right = jnp.minimum(s.high, s.low), jnp.maximum(s.high, s.low)
    cubic = _cubic_minimizer(s.low, s.value_low, s.slope_low, s.high, s.value_high,
                             s.cubic_ref, s.value_cubic_ref)
    use_cubic = (cubic > left + 0.2 * delta) & (cubic < right - 0.2 * delta)
    quad = _quadratic_minimizer(s.low, s.value_low, s.slope_low, s.high, s.value_high)
    use_quad = (quad > left + 0.1 * delta) & (quad < right - 0.1 * delta)
    return jnp.where(use_cubic, cubic, jnp.where(use_quad, quad, 0.5 * (s.low + s.high)))


def _after_search(rules: _Rules, s: _Search, t, value, slope, dec, err, reached):
    """The bracket after an interval-search trial t (Nocedal & Wright, Alg. 3.5)."""
    high_is_new = (dec > 0.0) | ((value >= s.value) & (s.count > 0))
    low_is_new = (slope >= 0.0) & jnp.logical_not(high_is_new)
    old, new = (s.stepsize, s.value, s.slope), (t, value, slope)
    low = _choose(low_is_new, zip(new, old, strict=True))
    high = _choose(low_is_new, zip(old, new, strict=True))
    found = high_is_new | low_is_new | (err <= rules.tol)
    done = (err <= rules.tol) | (reached & jnp.logical_not(found))
    return found, done, low, high, low[:2]


def _after_zoom(rules: _Rules, s: _Search, t, value, slope, dec, err, safe_stepsize):
    """The bracket after a zoom trial t (Nocedal & Wright, Alg. 3.6)."""
    high_is_new = (dec > 0.0) | (value >= s.value_low)
    high_is_low = (slope * (s.high - s.low) >= 0.0) & jnp.logical_not(high_is_new)
    old_low, old_high = (s.low, s.value_low, s.slope_low), (s.high, s.value_high, s.slope_high)
    new = (t, value, slope)
    high = _choose(high_is_new, zip(new, old_high, strict=True))
    high = _choose(high_is_low, zip(old_low, high, strict=True))
    low = _choose(jnp.logical_not(high_is_new), zip(new, old_low, strict=True))
    ref = _choose(high_is_new | high_is_low, zip(old_high[:2], old_low[:2], strict=True))
    too_small = jnp.abs(s.high - s.low) <= rules.interval_threshold
    give_up = (s.count + 1 >= rules.max_steps) | (too_small & (safe_stepsize > 0.0))
    done = err <= rules.tol
    return done, give_up & jnp.logical_not(done), low, high, ref


def _trial(rules: _Rules, s: _Search, guess, line, value0, slope0) -> _Search:
    """One step of the line search: a trial in the interval-search phase or the zoom phase."""
    grown = rules.increase_factor * s.stepsize
    t = jnp.where(s.count == 0, guess, grown)
    reached = jnp.asarray(False)
    if rules.max_stepsize is not None:
        reached = t >= rules.max_stepsize
        t = jnp.minimum(t, rules.max_stepsize)
    t = jnp.where(s.interval_found, _zoom_point(rules, s), t).astype(s.stepsize.dtype)
    value, grad, slope = line(t)
    dec, curv = _errors(rules, t, value, slope, value0, slope0)
    err = jnp.maximum(dec, curv)
    # the search phase keeps the first sufficient-decrease step, the zoom the lowest one
    take_safe = (dec <= rules.tol) & jnp.where(s.interval_found, value < s.safe_value, True)
    safe = _choose(take_safe, [(t, s.safe_stepsize), (value, s.safe_value)])
    safe_grad = tree_select(take_safe, grad, s.safe_grad)
    s_found, s_done, s_low, s_high, s_ref = _after_search(rules, s, t, value, slope, dec, err,
                                                          reached)
    s_failed = (s.count + 1 >= rules.max_steps) & jnp.logical_not(s_done)
    z_done, z_failed, z_low, z_high, z_ref = _after_zoom(rules, s, t, value, slope, dec, err,
                                                         safe[0])
    zoom = s.interval_found
    low = _choose(zoom, zip(z_low, s_low, strict=True))
    high = _choose(zoom, zip(z_high, s_high, strict=True))
    ref = _choose(zoom, zip(z_ref, s_ref, strict=True))
    new = _Search(s.count + 1, t, value, grad, slope, dec, curv,
                  jnp.where(zoom, s.interval_found, s_found), jnp.where(zoom, z_done, s_done),
                  jnp.where(zoom, z_failed, s_failed), *low, *high, *ref, *safe, safe_grad)
    # on failure fall back to the safe step (or to it anyway outside the function's domain)
    use_safe = new.failed & ((new.safe_stepsize > 0.0) | jnp.isinf(dec))
    stepsize, value = _choose(use_safe, [(new.safe_stepsize, t), (new.safe_value, value)])
    new = new._replace(stepsize=stepsize, value=value,
                       grad=tree_select(use_safe, new.safe_grad, grad))
    return cast_like(new, s)


def scale_by_zoom_linesearch(
    max_linesearch_steps: int,
    max_learning_rate: float | None = None,
    tol: float = 0.0,
    increase_factor: float = 2.0,
    slope_rtol: float = 1e-4,
    curv_rtol: float = 0.9,
    approx_dec_rtol: float | None = 1e-6,
    stepsize_precision: float = 1e-5,
    initial_guess_strategy: str = "keep",
    verbose: bool = False,
) -> GradientTransformationExtraArgs:
    """Scales the updates by a step size satisfying the strong Wolfe conditions, found by the
    zoom line search, as optax.scale_by_zoom_linesearch.

    A step eta along u from w is accepted when (up to tol)
      sufficient decrease: f(w + eta u) <= f(w) + slope_rtol * eta * <u, grad f(w)>, or the
        approximate condition of Hager & Zhang (when approx_dec_rtol is not None);
      small curvature: |<u, grad f(w + eta u)>| <= curv_rtol * |<u, grad f(w)>|.
    The search grows the step by increase_factor (from 1.0 for initial_guess_strategy "one",
    from the previous learning rate for "keep") until it brackets a valid step, then narrows
    the bracket by cubic or quadratic interpolation or bisection; after
    max_linesearch_steps trials it takes the best step with sufficient decrease found, if any.
    The trials run in one nova.lax.while_loop, so the update works under nova.jit. The update
    is called as `update(updates, state, params, *, value, grad, value_fn, **fn_kwargs)`; the
    value and gradient at the accepted point are kept in the state. verbose is accepted for
    optax compatibility and prints nothing. Values and step sizes are 0-d arrays in the dtype
    of the first parameter leaf.

    Source: Nocedal & Wright, Numerical Optimization (1999), Algorithms 3.5 and 3.6; Hager &
    Zhang (2006), "Algorithm 851: CG_DESCENT" for the approximate Wolfe condition.

    Raises:
      TypeError: a bad hyperparameter type; an extra argument value_fn does not take.
      ValueError: a hyperparameter out of range or an unknown initial_guess_strategy; no
        params; value not a scalar; grad not shaped like params.
    """
    fn = "scale_by_zoom_linesearch"
    if initial_guess_strategy not in ("one", "keep"):
        raise ValueError(f"{fn}: initial_guess_strategy must be 'one' or 'keep', got "
                         f"{initial_guess_strategy!r}")
    check_bool("verbose", fn, verbose)
    rules = _Rules(
        check_int("max_linesearch_steps", fn, max_linesearch_steps, lo=1),
        None if max_learning_rate is None
        else check_float("max_learning_rate", fn, max_learning_rate, lo=0.0),
        check_float("tol", fn, tol, lo=0.0),
        check_float("increase_factor", fn, increase_factor, lo=1.0),
        check_float("slope_rtol", fn, slope_rtol, lo=0.0),
        np.inf if curv_rtol == np.inf else check_float("curv_rtol", fn, curv_rtol, lo=0.0),
        None if approx_dec_rtol is None
        else check_float("approx_dec_rtol", fn, approx_dec_rtol, lo=0.0),
        check_float("stepsize_precision", fn, stepsize_precision, lo=0.0))

    def init(params):
        dt = value_dtype(params)
        info = ZoomLinesearchInfo(jnp.zeros((), jnp.int32), jnp.full((), np.inf, dt),
                                  jnp.full((), np.inf, dt))
        return ScaleByZoomLinesearchState(jnp.ones((), dt), jnp.full((), np.inf, dt),
                                          zeros_like_tree(params), info)

    def update(updates, state, params=None, *, value, grad, value_fn, **extra_args):
        fn_kwargs = split_fn_kwargs(fn, value_fn, extra_args)
        check_line_search_args(fn, value, grad, params)
        dt = jnp.asarray(state.learning_rate).dtype
        value0 = jnp.asarray(value).astype(dt)
        grad = cast_like(grad, state.grad)
        slope0 = tree_vdot(updates, grad).astype(dt)
        objective = nova.value_and_grad(lambda p: jnp.asarray(value_fn(p, **fn_kwargs)))

        def line(t):
            v, g = objective(tree_add_scale(params, t, updates))
            return v.astype(dt), g, tree_vdot(g, updates).astype(dt)

        guess = jnp.ones((), dt) if initial_guess_strategy == "one" else state.learning_rate
        zero, inf, no = jnp.zeros((), dt), jnp.full((), np.inf, dt), jnp.asarray(False)
        start = _Search(jnp.zeros((), jnp.int32), zero, value0, grad, slope0, inf, inf, no, no,
                        no, zero, value0, slope0, zero, value0, slope0, zero, value0, zero,
                        value0, grad)
        end = lax.while_loop(lambda s: jnp.logical_not(s.done | s.failed),
                             lambda s: _trial(rules, s, guess, line, value0, slope0), start)
        new_updates = tree_map(lambda u: (end.stepsize * u).astype(jnp.asarray(u).dtype), updates)
        info = ZoomLinesearchInfo(end.count, end.decrease_error, end.curvature_error)
        return new_updates, ScaleByZoomLinesearchState(end.stepsize, end.value, end.grad, info)

    return GradientTransformationExtraArgs(init, update)

