"""nova.optim: optimizers with optax's GradientTransformation interface, written with Nova ops.

An optimizer is a `GradientTransformation(init, update)`: `state = opt.init(params)`, then
`updates, state = opt.update(grads, state, params)` and `params = apply_updates(params, updates)`.
States are NamedTuples of pytrees with int32 step counts, so a whole training step --
`nova.value_and_grad(loss)` plus the update -- traces under `nova.jit` into one Program::

    opt = nova.optim.adamw(nova.optim.warmup_cosine_decay_schedule(0.0, 3e-4, 100, 1000),
                           weight_decay=0.1, mask=nova.optim.weight_decay_mask)
    opt = nova.optim.chain(nova.optim.clip_by_global_norm(1.0), opt)

    @functools.partial(nova.jit, donate_argnums=(0, 1))
    def step(params, opt_state, x, y):
        loss, grads = nova.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return nova.optim.apply_updates(params, updates), opt_state, loss

The results match optax's (tests/test_optim.py checks them against optax on the same gradients).
"""

from nova.optim.alias import adam, adamw, sgd
from nova.optim.base import (
    EmptyState,
    GradientTransformation,
    apply_updates,
    chain,
    global_norm,
    identity,
)
from nova.optim.schedule import (
    constant_schedule,
    cosine_decay_schedule,
    join_schedules,
    linear_schedule,
    polynomial_schedule,
    warmup_cosine_decay_schedule,
)
from nova.optim.transform import (
    AddDecayedWeightsState,
    ScaleByAdamState,
    ScaleByScheduleState,
    TraceState,
    add_decayed_weights,
    clip_by_global_norm,
    scale,
    scale_by_adam,
    scale_by_learning_rate,
    scale_by_schedule,
    trace,
    weight_decay_mask,
)

__all__ = [
    "AddDecayedWeightsState", "EmptyState", "GradientTransformation", "ScaleByAdamState",
    "ScaleByScheduleState", "TraceState", "adam", "adamw", "add_decayed_weights",
    "apply_updates", "chain", "clip_by_global_norm", "constant_schedule",
    "cosine_decay_schedule", "global_norm", "identity", "join_schedules", "linear_schedule",
    "polynomial_schedule", "scale", "scale_by_adam", "scale_by_learning_rate",
    "scale_by_schedule", "sgd", "trace", "warmup_cosine_decay_schedule", "weight_decay_mask",
]
