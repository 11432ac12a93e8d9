"""Learning-rate schedules: callables step -> value, with optax's names and semantics.

A schedule takes the step count (a Python int or a 0-d int32 array, traced under `nova.jit`) and
returns a 0-d float32 array (constant_schedule returns its value unchanged). They are written with
nova.numpy ops, so a schedule inside an optimizer compiles into the training step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

import nova.numpy as jnp
from nova.optim.base import check_float

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
