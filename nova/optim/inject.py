"""inject_hyperparams: an optimizer's numeric hyperparameters kept in its state (optax's), so a
schedule drives any of them, a user can change them between steps, and they can be
differentiated (meta-gradients)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np

import nova.numpy as jnp
from nova.core.array import Array
from nova.optim.base import (
    GradientTransformation,
    highest_dtype,
    safe_increment,
    traced_hyperparameters,
    zero_count,
)


class InjectHyperparamsState(NamedTuple):
    """State of an inject_hyperparams optimizer: the step count (0-d int32), a dict name ->
    0-d array of the hyperparameters used at the last step (writable: a new value there is used
    at the next step, unless a schedule drives that name), and the inner optimizer's state."""

    count: Any
    hyperparams: Any
    inner_state: Any


def _as_hyperparameter(value, dtype):
    """A numeric hyperparameter as a 0-d array: floats in `dtype`, integers as int32."""
    arr = jnp.asarray(value)
    if np.dtype(arr.dtype).kind == "f" or np.dtype(arr.dtype).name == "bfloat16":
        return arr.astype(dtype)
    return arr


def inject_hyperparams(inner_factory: Callable[..., GradientTransformation],
                       static_args: str | Iterable[str] = (),
                       hyperparam_dtype=None) -> Callable[..., GradientTransformation]:
    """Wraps an optimizer factory so that its numeric hyperparameters live in the optimizer
    state (optax.inject_hyperparams).

    `inject_hyperparams(nova.optim.adam)(learning_rate=schedule, b1=0.9)` builds a
    GradientTransformation whose state is InjectHyperparamsState(count, hyperparams,
    inner_state). Each argument of the factory call is sorted, as optax does:

    - names in static_args, bools, dtypes (jnp.float32 is callable, but no schedule; optax
      would call it) and other non-numeric values (strings, None) are passed to the factory
      unchanged;
    - callables are schedules: evaluated at the step count every step, the value stored in
      hyperparams;
    - numbers and arrays are stored in hyperparams (floats in hyperparam_dtype, by default the
      highest float dtype of the parameters), and read back from there at every step.

    At every update the factory is called again with the current values (traced under jit or
    grad, which the transformations accept here) and its update applied to the inner state.
    Integer hyperparameters that a factory needs as Python ints (adafactor's
    min_dim_size_to_factor) must be listed in static_args; so must callables that are not
    schedules (a weight-decay mask function).

    Raises:
      TypeError: inner_factory is not callable.
      ValueError: static_args names a parameter inner_factory does not have.
    """
    if not callable(inner_factory):
        raise TypeError(f"inject_hyperparams: inner_factory must be callable, got "
                        f"{type(inner_factory).__name__}")
    static = {static_args} if isinstance(static_args, str) else set(static_args)
    signature = inspect.signature(inner_factory)
    unknown = static - set(signature.parameters)
    if unknown:
        raise ValueError(f"inject_hyperparams: static_args {sorted(unknown)} are not parameters "
                         f"of {getattr(inner_factory, '__name__', inner_factory)} (it takes "
                         f"{list(signature.parameters)})")

    @functools.wraps(inner_factory)
    def wrapped(*args, **kwargs) -> GradientTransformation:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        schedules, numeric, other = {}, {}, {}
        for name, value in bound.arguments.items():
            if name in static or isinstance(value, bool | np.bool_ | type | np.dtype):
                other[name] = value
            elif callable(value):
                schedules[name] = value
            elif isinstance(value, int | float | np.number | np.ndarray | Array):
                numeric[name] = value
            else:
                other[name] = value

        def build(hyperparams):
            with traced_hyperparameters():
                return inner_factory(**other, **hyperparams)

        def dtype_for(params):
            return hyperparam_dtype if hyperparam_dtype is not None else highest_dtype(params)

        def init(params):
            dtype = dtype_for(params)
            count = zero_count()
            hp = {k: _as_hyperparameter(v, dtype) for k, v in numeric.items()}
            hp.update({k: _as_hyperparameter(f(count), dtype) for k, f in schedules.items()})
            return InjectHyperparamsState(count=count, hyperparams=hp,
                                          inner_state=build(hp).init(params))

        def update(updates, state, params=None):
            dtype = dtype_for(params)
            hp = {k: _as_hyperparameter(v, dtype) for k, v in state.hyperparams.items()}
            hp.update({k: _as_hyperparameter(f(state.count), dtype)
                       for k, f in schedules.items()})
            updates, inner_state = build(hp).update(updates, state.inner_state, params)
            return updates, InjectHyperparamsState(count=safe_increment(state.count),
                                                   hyperparams=hp, inner_state=inner_state)

        return GradientTransformation(init, update)

    return wrapped


__all__ = ["InjectHyperparamsState", "inject_hyperparams"]
