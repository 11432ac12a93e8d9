"""Learning-rate schedules: callables step -> value, with optax's names and semantics.

A schedule takes the step count (a Python int or a 0-d int32 array, traced under `nova.jit`) and
returns a 0-d float32 array (constant_schedule, and a schedule whose settings make it constant,
return the Python float). They are written with nova.numpy ops and select between regimes with
`where`, never a Python branch on the count, so a schedule inside an optimizer compiles into the
training step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

import nova.numpy as jnp
from nova.optim.base import check_bool, check_float

Schedule = Callable


def _check_steps(name: str, fn: str, value, *, positive: bool) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{fn}: {name} must be an int, got {type(value).__name__}")
    value = int(value)
    if value < 0 or (positive and value == 0):
        raise ValueError(f"{fn}: {name} must be {'> 0' if positive else '>= 0'}, got {value}")
    return value


def constant_schedule(value: float) -> Schedule:
    """The schedule step -> value (optax.constant_schedule): the same Python float at every step.

    Raises TypeError when value is not a real number, ValueError when it is not finite.
    """
    value = check_float("value", "constant_schedule", value)
    return lambda count: value


def polynomial_schedule(
    init_value: float, end_value: float, power: float, transition_steps: int,
    transition_begin: int = 0,
) -> Schedule:
    """Polynomial decay from init_value to end_value (optax.polynomial_schedule):

        s = clip(step - transition_begin, 0, transition_steps)
        value = (init_value - end_value) * (1 - s / transition_steps) ** power + end_value

    so the value is init_value until transition_begin and end_value from
    transition_begin + transition_steps on. transition_steps = 0 gives the constant init_value.

    Raises:
      TypeError, ValueError: a non-integer or negative step count, or a non-finite value.
    """
    fn = "polynomial_schedule"
    init_value = check_float("init_value", fn, init_value)
    end_value = check_float("end_value", fn, end_value)
    power = check_float("power", fn, power)
    transition_steps = _check_steps("transition_steps", fn, transition_steps, positive=False)
    transition_begin = _check_steps("transition_begin", fn, transition_begin, positive=False)
    if transition_steps == 0:
        return lambda count: init_value

    def schedule(count):
        count = jnp.clip(jnp.asarray(count) - transition_begin, 0, transition_steps)
        frac = 1 - count / transition_steps
        return (init_value - end_value) * (frac**power) + end_value

    return schedule


def linear_schedule(
    init_value: float, end_value: float, transition_steps: int, transition_begin: int = 0
) -> Schedule:
    """Linear interpolation from init_value (at step transition_begin) to end_value (at step
    transition_begin + transition_steps), constant outside: polynomial_schedule with power 1."""
    return polynomial_schedule(init_value, end_value, 1, transition_steps, transition_begin)


def cosine_decay_schedule(
    init_value: float, decay_steps: int, alpha: float = 0.0, exponent: float = 1.0
) -> Schedule:
    """Cosine decay (Loshchilov & Hutter 2017, "SGDR: Stochastic Gradient Descent with Warm
    Restarts", eq. 5, one cycle), as optax.cosine_decay_schedule:

        c = min(step, decay_steps)
        value = init_value * ((1 - alpha) * (0.5 * (1 + cos(pi * c / decay_steps))) ** exponent
                              + alpha)

    so it falls from init_value to alpha * init_value at decay_steps and stays there.

    Raises:
      ValueError: decay_steps is not positive.
    """
    fn = "cosine_decay_schedule"
    init_value = check_float("init_value", fn, init_value)
    alpha = check_float("alpha", fn, alpha)
    exponent = check_float("exponent", fn, exponent)
    decay_steps = float(_check_steps("decay_steps", fn, decay_steps, positive=True))

    def schedule(count):
        count = jnp.minimum(jnp.asarray(count), decay_steps)
        cosine_decay = 0.5 * (1 + jnp.cos(jnp.pi * count / decay_steps))
        return init_value * ((1 - alpha) * cosine_decay**exponent + alpha)

    return schedule


def join_schedules(schedules: Sequence[Schedule], boundaries: Sequence[int]) -> Schedule:
    """Runs schedules[0] until boundaries[0], then schedules[1] (fed step - boundaries[0]), ...

    Raises:
      ValueError: len(boundaries) != len(schedules) - 1.
    """
    if len(boundaries) != len(schedules) - 1:
        raise ValueError(
            f"join_schedules: got {len(schedules)} schedules and {len(boundaries)} boundaries; "
            "expected one boundary fewer than schedules"
        )

    def schedule(step):
        step = jnp.asarray(step)
        out = jnp.asarray(schedules[0](step), dtype=jnp.float32)
        for boundary, s in zip(boundaries, schedules[1:], strict=True):
            out = jnp.where(step < boundary, out, s(step - boundary))
        return out

    return schedule


def warmup_cosine_decay_schedule(
    init_value: float, peak_value: float, warmup_steps: int, decay_steps: int,
    end_value: float = 0.0, exponent: float = 1.0,
) -> Schedule:
    """Linear warmup from init_value to peak_value over warmup_steps, then cosine decay to
    end_value at step decay_steps (which counts the warmup), as
    optax.warmup_cosine_decay_schedule (the schedule of GPT-2/GPT-3 style training).

    Raises:
      ValueError: decay_steps <= warmup_steps, or a negative step count.
    """
    fn = "warmup_cosine_decay_schedule"
    warmup_steps = _check_steps("warmup_steps", fn, warmup_steps, positive=False)
    decay_steps = _check_steps("decay_steps", fn, decay_steps, positive=True)
    if decay_steps <= warmup_steps:
        raise ValueError(
            f"{fn}: decay_steps ({decay_steps}) must exceed warmup_steps ({warmup_steps}); "
            "decay_steps counts the warmup"
        )
    peak_value = check_float("peak_value", fn, peak_value)
    end_value = check_float("end_value", fn, end_value)
    alpha = 0.0 if peak_value == 0.0 else end_value / peak_value
    return join_schedules(
        [
            linear_schedule(init_value, peak_value, warmup_steps),
            cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent),
        ],
        [warmup_steps],
    )


def exponential_decay(
    init_value: float, transition_steps: int, decay_rate: float, transition_begin: int = 0,
    staircase: bool = False, end_value: float | None = None,
) -> Schedule:
    """Exponential decay, as optax.exponential_decay:

        p = (step - transition_begin) / transition_steps   (floored when staircase=True)
        value = init_value * decay_rate ** p                for step > transition_begin

    and init_value up to transition_begin. end_value, when given, bounds the value: from below
    when decay_rate < 1, from above when decay_rate > 1 (a growing schedule).
    transition_steps = 0 or decay_rate = 0 gives the constant init_value (as optax).

    Raises:
      TypeError, ValueError: a non-integer or negative step count, a non-bool staircase, or a
        non-finite value.
    """
    fn = "exponential_decay"
    init_value = check_float("init_value", fn, init_value)
    decay_rate = check_float("decay_rate", fn, decay_rate)
    transition_steps = _check_steps("transition_steps", fn, transition_steps, positive=False)
    transition_begin = _check_steps("transition_begin", fn, transition_begin, positive=False)
    staircase = check_bool("staircase", fn, staircase)
    if end_value is not None:
        end_value = check_float("end_value", fn, end_value)
    if transition_steps == 0 or decay_rate == 0.0:
        return lambda count: init_value
    bound = jnp.maximum if decay_rate < 1.0 else jnp.minimum

    def schedule(count):
        steps_in = jnp.asarray(count) - transition_begin
        p = steps_in / transition_steps
        if staircase:
            p = jnp.floor(p)
        value = jnp.where(steps_in <= 0, init_value, init_value * jnp.power(decay_rate, p))
        return value if end_value is None else bound(value, end_value)

    return schedule


def _check_boundaries(fn: str, boundaries_and_scales) -> tuple[tuple[int, ...], tuple]:
    """The {step: scale} dict as (sorted steps, their scales); steps non-negative ints, scales
    non-negative real numbers."""
    if boundaries_and_scales is None:
        return (), ()
    if not isinstance(boundaries_and_scales, dict):
        raise TypeError(f"{fn}: boundaries_and_scales must be a dict {{step: scale}} or None, "
                        f"got {type(boundaries_and_scales).__name__}")
    steps, scales = [], []
    for step, scale in sorted(boundaries_and_scales.items()):
        steps.append(_check_steps("a boundary step", fn, step, positive=False))
        scales.append(check_float(f"the scale at step {step}", fn, scale, lo=0.0))
    return tuple(steps), tuple(scales)


def piecewise_constant_schedule(
    init_value: float, boundaries_and_scales: dict[int, float] | None = None
) -> Schedule:
    """init_value times the product of the scales of every boundary reached, as
    optax.piecewise_constant_schedule: with {100: 0.1, 200: 0.5} the value is init_value up to
    step 99, 0.1 * init_value for steps 100..199 and 0.05 * init_value from step 200 on.

    Raises:
      TypeError: boundaries_and_scales is not a dict; a step is not an int.
      ValueError: a negative step or scale, or a non-finite value.
    """
    fn = "piecewise_constant_schedule"
    init_value = check_float("init_value", fn, init_value)
    steps, scales = _check_boundaries(fn, boundaries_and_scales)

    def schedule(count):
        count = jnp.asarray(count)
        value = jnp.full(count.shape, init_value, dtype=jnp.float32)
        for step, scale in zip(steps, scales, strict=True):
            value = jnp.where(count < step, value, value * scale)
        return value

    return schedule


def _linear_interpolate(start, end, pct):
    return start + (end - start) * pct


def _cosine_interpolate(start, end, pct):
    """Half a cosine from start (pct = 0) to end (pct = 1)."""
    return end + (start - end) / 2.0 * (jnp.cos(jnp.pi * pct) + 1)


_INTERPOLATORS = {"linear": _linear_interpolate, "cosine": _cosine_interpolate}


def piecewise_interpolate_schedule(
    interpolate_type: str, init_value: float,
    boundaries_and_scales: dict[int, float] | None = None,
) -> Schedule:
    """Interpolation between accumulated values at boundaries, as
    optax.piecewise_interpolate_schedule.

    With boundaries b_1 < ... < b_n and scales s_1..s_n, the value at b_i is
    v_i = init_value * s_1 * ... * s_i (v_0 = init_value at step 0); between b_i and b_(i+1) the
    value moves from v_i to v_(i+1), along a line (interpolate_type "linear") or half a cosine
    ("cosine"); from b_n on it is v_n. A negative step gives 0 (as optax).

    Raises:
      ValueError: interpolate_type is neither "linear" nor "cosine"; a negative step or scale.
      TypeError: boundaries_and_scales is not a dict; a step is not an int.
    """
    fn = "piecewise_interpolate_schedule"
    if interpolate_type not in _INTERPOLATORS:
        raise ValueError(f"{fn}: interpolate_type must be 'linear' or 'cosine', got "
                         f"{interpolate_type!r}")
    interpolate = _INTERPOLATORS[interpolate_type]
    init_value = check_float("init_value", fn, init_value)
    steps, scales = _check_boundaries(fn, boundaries_and_scales)
    bounds = (0, *steps)
    # The accumulated values in float32, multiplied in order (as the reference does on device).
    values = [float(v) for v in np.cumprod(np.array((init_value, *scales), dtype=np.float32))]

    def schedule(count):
        count = jnp.asarray(count)
        value = jnp.where(count >= bounds[-1], values[-1], 0.0).astype(jnp.float32)
        for i in range(len(steps)):
            lo, hi = bounds[i], bounds[i + 1]
            pct = (count - lo) / max(hi - lo, 1)
            inside = (count >= lo) & (count < hi)
            value = jnp.where(inside, interpolate(values[i], values[i + 1], pct), value)
        return value

    return schedule


def _check_onecycle(fn: str, transition_steps, peak_value, pct_start, div_factor,
                    final_div_factor):
    transition_steps = _check_steps("transition_steps", fn, transition_steps, positive=True)
    peak_value = check_float("peak_value", fn, peak_value)
    pct_start = check_float("pct_start", fn, pct_start, lo=0.0, hi=1.0)
    div_factor = check_float("div_factor", fn, div_factor)
    final_div_factor = check_float("final_div_factor", fn, final_div_factor)
    for name, v in (("div_factor", div_factor), ("final_div_factor", final_div_factor)):
        if v == 0.0:
            raise ValueError(f"{fn}: {name} must be nonzero (the schedule divides by it)")
    return transition_steps, peak_value, pct_start, div_factor, final_div_factor


def cosine_onecycle_schedule(
    transition_steps: int, peak_value: float, pct_start: float = 0.3,
    div_factor: float = 25.0, final_div_factor: float = 1e4,
) -> Schedule:
    """The one-cycle schedule with cosine phases (Smith & Topin 2017, "Super-Convergence: Very
    Fast Training of Neural Networks Using Large Learning Rates", arXiv 1708.07120), as
    optax.cosine_onecycle_schedule: from peak_value / div_factor up to peak_value at step
    int(pct_start * transition_steps), then down to peak_value / (div_factor *
    final_div_factor) at transition_steps, each phase half a cosine; constant after.

    Raises:
      ValueError: transition_steps <= 0, pct_start outside [0, 1], a zero divisor.
    """
    steps, peak, pct_start, div, final_div = _check_onecycle(
        "cosine_onecycle_schedule", transition_steps, peak_value, pct_start, div_factor,
        final_div_factor)
    return piecewise_interpolate_schedule(
        "cosine", peak / div, {int(pct_start * steps): div, steps: 1.0 / (div * final_div)})


def linear_onecycle_schedule(
    transition_steps: int, peak_value: float, pct_start: float = 0.3, pct_final: float = 0.85,
    div_factor: float = 25.0, final_div_factor: float = 1e4,
) -> Schedule:
    """The one-cycle schedule with three linear phases (Smith & Topin 2017, arXiv 1708.07120),
    as optax.linear_onecycle_schedule: from init = peak_value / div_factor up to peak_value at
    step int(pct_start * transition_steps), back down to init at int(pct_final *
    transition_steps), then to init / final_div_factor at transition_steps; constant after.

    Raises:
      ValueError: transition_steps <= 0, pct_start outside [0, 1], pct_final outside
        [pct_start, 1], a zero divisor.
    """
    fn = "linear_onecycle_schedule"
    steps, peak, pct_start, div, final_div = _check_onecycle(
        fn, transition_steps, peak_value, pct_start, div_factor, final_div_factor)
    pct_final = check_float("pct_final", fn, pct_final, lo=pct_start, hi=1.0)
    return piecewise_interpolate_schedule(
        "linear", peak / div,
        {int(pct_start * steps): div, int(pct_final * steps): 1.0 / div, steps: 1.0 / final_div})


def warmup_constant_schedule(init_value: float, peak_value: float, warmup_steps: int) -> Schedule:
    """Linear warmup from init_value to peak_value over warmup_steps, then peak_value, as
    optax.warmup_constant_schedule."""
    return linear_schedule(init_value, peak_value, warmup_steps)


def warmup_exponential_decay_schedule(
    init_value: float, peak_value: float, warmup_steps: int, transition_steps: int,
    decay_rate: float, transition_begin: int = 0, staircase: bool = False,
    end_value: float | None = None,
) -> Schedule:
    """Linear warmup from init_value to peak_value over warmup_steps, then
    exponential_decay(peak_value, transition_steps, decay_rate, transition_begin, staircase,
    end_value) counted from the end of the warmup, as optax.warmup_exponential_decay_schedule.

    Raises:
      TypeError, ValueError: as linear_schedule and exponential_decay.
    """
    return join_schedules(
        [
            linear_schedule(init_value, peak_value, warmup_steps),
            exponential_decay(peak_value, transition_steps, decay_rate, transition_begin,
                              staircase, end_value),
        ],
        [warmup_steps],
    )


def sgdr_schedule(cosine_kwargs) -> Schedule:
    """Stochastic gradient descent with warm restarts (Loshchilov & Hutter 2017, "SGDR", arXiv
    1608.03983), as optax.sgdr_schedule: cycles of warmup_cosine_decay_schedule run one after
    another, cycle i built from the keyword arguments cosine_kwargs[i] (init_value, peak_value,
    warmup_steps, decay_steps, and optionally end_value, exponent) and lasting its decay_steps.

    Raises:
      ValueError: cosine_kwargs is empty.
      TypeError: an element is not a dict, or lacks decay_steps.
    """
    cycles = list(cosine_kwargs)
    if not cycles:
        raise ValueError("sgdr_schedule: cosine_kwargs is empty; give at least one cycle")
    schedules, boundaries, step = [], [], 0
    for i, kwargs in enumerate(cycles):
        if not isinstance(kwargs, dict) or "decay_steps" not in kwargs:
            raise TypeError(f"sgdr_schedule: cycle {i} must be a dict of "
                            f"warmup_cosine_decay_schedule's arguments with decay_steps, got "
                            f"{kwargs!r}")
        schedules.append(warmup_cosine_decay_schedule(**kwargs))
        step += kwargs["decay_steps"]
        boundaries.append(step)
    return join_schedules(schedules, boundaries[:-1])
