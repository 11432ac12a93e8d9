"""Recording measurements of the updates in a chain (optax's snapshot, monitor, measure_with_ema)
and the parameter-averaging helpers incremental_update and periodic_update."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import nova.numpy as jnp
from nova import lax
from nova.core.pytree import tree_map
from nova.optim.base import (
    GradientTransformation,
    GradientTransformationExtraArgs,
    chain,
    stateless,
    with_extra_args_support,
)
from nova.optim.transform import ema


class SnapshotState(NamedTuple):
    """State of snapshot: {measure_name: the measurement of the latest updates}."""

    measurement: dict


class MonitorState(NamedTuple):
    """State of monitor: the latest measurements ({name: value}; empty after init) and the
    state of each measure, in the order of `measures`."""

    measurements: dict
    measure_states: tuple


def _check_measure(fn: str, name: str, measure) -> None:
    if not callable(measure):
        raise TypeError(f"{fn}: {name} must be callable (updates -> measurement), got "
                        f"{type(measure).__name__}")


def snapshot(measure_name: str, measure: Callable[[Any], Any]) -> GradientTransformation:
    """Stores measure(updates) in the state under `measure_name` and passes the updates on
    unchanged (optax.snapshot), to look at intermediate updates inside a chain, e.g.
    chain(sgd(0.1), snapshot("norm", tree_norm), clip_by_global_norm(1.0)); read it back with
    tree_utils.tree_get(state, "norm"). init stores measure(params).

    Raises:
      TypeError: measure_name is not a str, or measure is not callable.
    """
    if not isinstance(measure_name, str):
        raise TypeError(f"snapshot: measure_name must be a str, got {type(measure_name).__name__}")
    _check_measure("snapshot", "measure", measure)

    def init(params):
        return SnapshotState({measure_name: measure(params)})

    def update(updates, state, params=None):
        del state, params
        return updates, SnapshotState({measure_name: measure(updates)})

    return GradientTransformation(init, update)


def monitor(measures: Mapping[str, Any]) -> GradientTransformationExtraArgs:
    """Records several measurements of the updates, some of them stateful, and passes the
    updates on unchanged (optax.monitor).

    Args:
      measures: {name: measure}, where a measure is a callable updates -> measurement, or a
        GradientTransformation whose output "updates" are the measurement (e.g.
        measure_with_ema(tree_norm, 0.9)); its state is kept in MonitorState.measure_states.

    Returns:
      A GradientTransformationExtraArgs with state MonitorState (extra arguments are handed to
      the measures).

    Raises:
      TypeError: measures is not a mapping, or a measure is neither callable nor a
        GradientTransformation.
    """
    if not isinstance(measures, Mapping):
        raise TypeError(f"monitor: measures must be a dict name -> measure, got "
                        f"{type(measures).__name__}")
    txs = {}
    for name, m in measures.items():
        if isinstance(m, GradientTransformation):
            txs[name] = with_extra_args_support(m)
        elif callable(m):
            txs[name] = with_extra_args_support(stateless(lambda u, _, m=m: m(u)))
        else:
            raise TypeError(f"monitor: measure {name!r} must be callable or a "
                            f"GradientTransformation, got {type(m).__name__}")
    names = tuple(txs)

    def init(params):
        return MonitorState({}, tuple(txs[n].init(params) for n in names))

    def update(updates, state, params=None, **extra_args):
        values, states = {}, []
        for n, s in zip(names, state.measure_states, strict=True):
            values[n], s = txs[n].update(updates, s, params, **extra_args)
            states.append(s)
        return updates, MonitorState(values, tuple(states))

    return GradientTransformationExtraArgs(init, update)


def measure_with_ema(measure: Callable[[Any], Any], decay: float, debias: bool = True,
                     accumulator_dtype=None) -> GradientTransformationExtraArgs:
    """A measure for `monitor`: the exponential moving average of measure(updates)
    (optax.measure_with_ema), as chain(stateless measure, ema(decay, debias,
    accumulator_dtype)); the average is shaped like measure(params). Bool measurements are
    averaged as float32 0 / 1 (optax starts their average as bool zeros).

    Raises:
      TypeError: measure is not callable; ValueError / TypeError as ema for decay and debias.
    """
    _check_measure("measure_with_ema", "measure", measure)
    base = ema(decay, debias, accumulator_dtype)

    def measured(tree):  # a bool measurement (e.g. "was it clipped?") is averaged as 0 / 1
        return tree_map(lambda x: jnp.asarray(x, jnp.float32)
                        if jnp.asarray(x).dtype == bool else x, measure(tree))

    # the average is shaped like the measurement, not like the params
    average = GradientTransformation(lambda params: base.init(measured(params)), base.update)
    return chain(stateless(lambda updates, _: measured(updates)), average)


def incremental_update(new_tensors, old_tensors, step_size):
    """Polyak averaging (optax.incremental_update; Polyak & Juditsky 1992): step_size * new +
    (1 - step_size) * old leaf by leaf, None leaves of new_tensors kept None. step_size is a
    number or a 0-d array (it may be traced)."""
    return tree_map(lambda new, old: None if new is None else
                    step_size * new + (1.0 - step_size) * old,
                    new_tensors, old_tensors, is_leaf=lambda x: x is None)


def periodic_update(new_tensors, old_tensors, steps, update_period):
    """new_tensors when steps % update_period == 0, else old_tensors (optax.periodic_update;
    the target network of Mnih et al. 2015), chosen with nova.lax.cond so steps may be traced.
    Both trees must have one structure, shapes and dtypes."""
    pred = jnp.mod(jnp.asarray(steps), update_period) == 0
    return lax.cond(pred, lambda new, old: new, lambda new, old: old, new_tensors, old_tensors)


__all__ = [
    "MonitorState", "SnapshotState", "incremental_update", "measure_with_ema", "monitor",
    "periodic_update", "snapshot",
]
