"""nova.optim.schedules: the schedules under the module name optax uses (optax.schedules).

The schedules live in nova/optim/schedule.py; this module re-exports them with
inject_hyperparams, as optax.schedules does.
"""

from nova.optim.inject import InjectHyperparamsState, inject_hyperparams
from nova.optim.schedule import (
    Schedule,
    constant_schedule,
    cosine_decay_schedule,
    cosine_onecycle_schedule,
    exponential_decay,
    join_schedules,
    linear_onecycle_schedule,
    linear_schedule,
    piecewise_constant_schedule,
    piecewise_interpolate_schedule,
    polynomial_schedule,
    sgdr_schedule,
    warmup_constant_schedule,
    warmup_cosine_decay_schedule,
    warmup_exponential_decay_schedule,
)

__all__ = [
    "InjectHyperparamsState", "Schedule", "constant_schedule", "cosine_decay_schedule",
    "cosine_onecycle_schedule", "exponential_decay", "inject_hyperparams", "join_schedules",
    "linear_onecycle_schedule", "linear_schedule", "piecewise_constant_schedule",
    "piecewise_interpolate_schedule", "polynomial_schedule", "sgdr_schedule",
    "warmup_constant_schedule", "warmup_cosine_decay_schedule",
    "warmup_exponential_decay_schedule",
]
