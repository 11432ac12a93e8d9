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

The modules, by what they hold: base (the interface, chain, stateless helpers), transform
(scale, momentum, ema, Adam, weight decay, global-norm clipping), adaptive (the Adam family of
rescalings), rms (AdaGrad, RMSProp, AdaDelta), factorized (Adafactor, SM3), layerwise (trust
ratios, block norms and clipping, NovoGrad), elementwise (clip, sign, NaN handling, noise, Rprop,
optimistic gradient), moments (moving averages, bias correction, safe norms), wrappers (masked,
multi_transform, named_chain, flatten, apply_if_finite, conditional application, lookahead),
accumulation (MultiSteps, apply_every), inject (inject_hyperparams), alias (the optimizers),
schedule, misc (freeze, per-example clipping, DoG, ...), monitoring (snapshot, monitor,
Polyak averaging), linear_algebra (power iteration, matrix inverse p-th roots), and the
submodules tree_utils (optax.tree_utils) and assignment (the Hungarian method).

The results match optax's (tests/test_optim.py and tests/test_optim_more.py check them against
optax on the same gradients, eagerly and under nova.jit). optax's extra update arguments are
supported: a GradientTransformationExtraArgs takes `update(updates, state, params, **extra)`
and `chain` forwards them; linesearch (backtracking, value_and_grad_from_state) and zoom hold
the line searches, lbfgs L-BFGS and the Polyak step size (tests/test_optim_extra_args.py).
`nova.optim.losses` and `nova.optim.schedules` are the modules optax calls optax.losses and
optax.schedules; optax's top-level aliases of their functions are here too.
"""

from collections.abc import Callable as _Callable

from nova.optim import assignment, losses, schedules, tree_utils
from nova.optim.accumulation import (
    ApplyEvery,
    MultiSteps,
    MultiStepsState,
    apply_every,
    skip_large_updates,
    skip_not_finite,
)
from nova.optim.adaptive import (
    ScaleByAdanState,
    ScaleByAmsgradState,
    ScaleByBeliefState,
    ScaleByLionState,
    scale_by_adamax,
    scale_by_adan,
    scale_by_amsgrad,
    scale_by_belief,
    scale_by_lion,
    scale_by_radam,
    scale_by_yogi,
)
from nova.optim.alias import (
    adabelief,
    adadelta,
    adafactor,
    adagrad,
    adam,
    adamax,
    adamaxw,
    adamw,
    adan,
    amsgrad,
    fromage,
    lamb,
    lars,
    lion,
    nadam,
    nadamw,
    noisy_sgd,
    novograd,
    optimistic_adam_v2,
    optimistic_gradient_descent,
    radam,
    rmsprop,
    rprop,
    sgd,
    sign_sgd,
    signum,
    sm3,
    yogi,
)
from nova.optim.base import (
    EmptyState,
    GradientTransformation,
    GradientTransformationExtraArgs,
    OptState,
    Params,
    Updates,
    apply_updates,
    chain,
    global_norm,
    identity,
    init_empty_state,
    set_to_zero,
    stateless,
    stateless_with_tree_map,
    with_extra_args_support,
)
from nova.optim.elementwise import (
    AddNoiseState,
    ScaleByOptimisticGradientState,
    ScaleByRpropState,
    ZeroNansState,
    add_noise,
    clip,
    keep_params_nonnegative,
    scale_by_optimistic_gradient,
    scale_by_rprop,
    scale_by_sign,
    zero_nans,
)
from nova.optim.factorized import (
    FactoredState,
    ScaleBySM3State,
    scale_by_factored_rms,
    scale_by_sm3,
)
from nova.optim.inject import InjectHyperparamsState, inject_hyperparams
from nova.optim.layerwise import (
    ScaleByNovogradState,
    adaptive_grad_clip,
    centralize,
    clip_by_block_rms,
    scale_by_novograd,
    scale_by_param_block_norm,
    scale_by_param_block_rms,
    scale_by_trust_ratio,
    unitwise_norm,
)
from nova.optim.lbfgs import (
    ScaleByLBFGSState,
    lbfgs,
    polyak_sgd,
    scale_by_lbfgs,
    scale_by_polyak,
)
from nova.optim.linear_algebra import matrix_inverse_pth_root, power_iteration
from nova.optim.linesearch import (
    BacktrackingLinesearchInfo,
    ScaleByBacktrackingLinesearchState,
    scale_by_backtracking_linesearch,
    value_and_grad_from_state,
)
from nova.optim.losses import (
    convex_kl_divergence,
    cosine_distance,
    cosine_similarity,
    ctc_loss,
    ctc_loss_with_forward_probs,
    generalized_kl_divergence,
    hinge_loss,
    huber_loss,
    kl_divergence,
    l2_loss,
    log_cosh,
    ntxent,
    safe_softmax_cross_entropy,
    sigmoid_binary_cross_entropy,
    sigmoid_focal_loss,
    smooth_labels,
    softmax_cross_entropy,
    softmax_cross_entropy_with_integer_labels,
    squared_error,
)
from nova.optim.misc import (
    AdaptiveGradClipState,
    ClipByGlobalNormState,
    ClipState,
    NonNegativeParamsState,
    ScaleByDistanceOverGradientsState,
    ScaleByTrustRatioState,
    ScaleState,
    freeze,
    normalize_by_update_norm,
    optimistic_adam,
    per_example_global_norm_clip,
    per_example_layer_norm_clip,
    safe_increment,
    safe_int32_increment,
    scale_by_distance_over_gradients,
    scale_gradient,
    selective_transform,
)
from nova.optim.moments import (
    bias_correction,
    safe_norm,
    safe_root_mean_squares,
    update_infinity_moment,
    update_moment,
    update_moment_per_elem_norm,
)
from nova.optim.monitoring import (
    MonitorState,
    SnapshotState,
    incremental_update,
    measure_with_ema,
    monitor,
    periodic_update,
    snapshot,
)
from nova.optim.rms import (
    ScaleByAdaDeltaState,
    ScaleByRmsState,
    ScaleByRmsWithCountState,
    ScaleByRssState,
    ScaleByRStdDevState,
    ScaleByRStdDevWithCountState,
    scale_by_adadelta,
    scale_by_rms,
    scale_by_rss,
    scale_by_stddev,
)
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
from nova.optim.transform import (
    AddDecayedWeightsState,
    EmaState,
    ScaleByAdamState,
    ScaleByScheduleState,
    TraceState,
    WeightDecaySchedule,
    add_decayed_weights,
    clip_by_global_norm,
    ema,
    scale,
    scale_by_adam,
    scale_by_learning_rate,
    scale_by_schedule,
    trace,
    weight_decay_mask,
)
from nova.optim.tree_utils import tree_map_params
from nova.optim.wrappers import (
    ApplyIfFiniteState,
    ConditionallyMaskState,
    ConditionallyTransformState,
    LookaheadParams,
    LookaheadState,
    MaskedNode,
    MaskedState,
    MultiTransformState,
    PartitionState,
    apply_if_finite,
    conditionally_mask,
    conditionally_transform,
    flatten,
    lookahead,
    masked,
    multi_transform,
    named_chain,
    partition,
)
from nova.optim.zoom import (
    ScaleByZoomLinesearchState,
    ZoomLinesearchInfo,
    scale_by_zoom_linesearch,
)

# optax's type names: a float or a schedule; the init and update function types
ScalarOrSchedule = float | _Callable
TransformInitFn = _Callable
TransformUpdateFn = _Callable
TransformUpdateExtraArgsFn = _Callable

__all__ = [
    "AdaptiveGradClipState", "ClipByGlobalNormState", "ClipState", "NonNegativeParamsState",
    "ScaleByTrustRatioState", "ScaleState", "freeze", "normalize_by_update_norm",
    "safe_increment", "safe_int32_increment", "scale_gradient", "selective_transform",
    "BacktrackingLinesearchInfo", "GradientTransformationExtraArgs", "OptState", "Params",
    "ScalarOrSchedule", "ScaleByBacktrackingLinesearchState", "ScaleByLBFGSState",
    "ScaleByZoomLinesearchState", "Schedule", "TransformInitFn", "TransformUpdateExtraArgsFn",
    "TransformUpdateFn", "Updates", "ZoomLinesearchInfo", "convex_kl_divergence",
    "cosine_distance", "cosine_onecycle_schedule", "cosine_similarity", "ctc_loss",
    "ctc_loss_with_forward_probs", "exponential_decay", "generalized_kl_divergence",
    "hinge_loss", "huber_loss", "init_empty_state", "kl_divergence", "l2_loss", "lbfgs",
    "linear_onecycle_schedule", "log_cosh", "losses", "ntxent", "piecewise_constant_schedule",
    "piecewise_interpolate_schedule", "polyak_sgd", "safe_softmax_cross_entropy",
    "scale_by_backtracking_linesearch", "scale_by_lbfgs", "scale_by_polyak",
    "scale_by_zoom_linesearch", "schedules", "sgdr_schedule", "sigmoid_binary_cross_entropy",
    "sigmoid_focal_loss", "smooth_labels", "softmax_cross_entropy",
    "softmax_cross_entropy_with_integer_labels", "squared_error", "value_and_grad_from_state",
    "warmup_constant_schedule", "warmup_exponential_decay_schedule", "with_extra_args_support",
]

__all__ += [
    "MonitorState", "ScaleByDistanceOverGradientsState", "SnapshotState", "assignment",
    "incremental_update", "matrix_inverse_pth_root", "measure_with_ema", "monitor",
    "optimistic_adam", "per_example_global_norm_clip", "per_example_layer_norm_clip",
    "periodic_update", "power_iteration", "scale_by_distance_over_gradients", "snapshot",
    "tree_map_params", "tree_utils",
]

__all__ += [
    "AddDecayedWeightsState", "AddNoiseState", "ApplyEvery", "ApplyIfFiniteState",
    "ConditionallyMaskState", "ConditionallyTransformState", "EmaState", "EmptyState",
    "FactoredState", "GradientTransformation", "InjectHyperparamsState", "LookaheadParams",
    "LookaheadState", "MaskedNode", "MaskedState", "MultiSteps", "MultiStepsState",
    "MultiTransformState", "PartitionState", "ScaleByAdaDeltaState", "ScaleByAdamState",
    "ScaleByAdanState", "ScaleByAmsgradState", "ScaleByBeliefState", "ScaleByLionState",
    "ScaleByNovogradState", "ScaleByOptimisticGradientState", "ScaleByRStdDevState",
    "ScaleByRStdDevWithCountState", "ScaleByRmsState", "ScaleByRmsWithCountState",
    "ScaleByRpropState", "ScaleByRssState", "ScaleBySM3State", "ScaleByScheduleState",
    "TraceState", "WeightDecaySchedule", "ZeroNansState", "adabelief", "adadelta", "adafactor",
    "adagrad", "adam", "adamax", "adamaxw", "adamw", "adan", "adaptive_grad_clip",
    "add_decayed_weights", "add_noise", "amsgrad", "apply_every", "apply_if_finite",
    "apply_updates", "bias_correction", "centralize", "chain", "clip", "clip_by_block_rms",
    "clip_by_global_norm", "conditionally_mask", "conditionally_transform", "constant_schedule",
    "cosine_decay_schedule", "ema", "flatten", "fromage", "global_norm", "identity",
    "inject_hyperparams", "join_schedules", "keep_params_nonnegative", "lamb", "lars",
    "linear_schedule", "lion", "lookahead", "masked", "multi_transform", "nadam", "nadamw",
    "named_chain", "noisy_sgd", "novograd", "optimistic_adam_v2", "optimistic_gradient_descent",
    "partition", "polynomial_schedule", "radam", "rmsprop", "rprop", "safe_norm",
    "safe_root_mean_squares", "scale", "scale_by_adadelta", "scale_by_adam", "scale_by_adamax",
    "scale_by_adan", "scale_by_amsgrad", "scale_by_belief", "scale_by_factored_rms",
    "scale_by_learning_rate", "scale_by_lion", "scale_by_novograd", "scale_by_optimistic_gradient",
    "scale_by_param_block_norm", "scale_by_param_block_rms", "scale_by_radam", "scale_by_rms",
    "scale_by_rprop", "scale_by_rss", "scale_by_schedule", "scale_by_sign", "scale_by_sm3",
    "scale_by_stddev", "scale_by_trust_ratio", "scale_by_yogi", "set_to_zero", "sgd", "sign_sgd",
    "signum", "skip_large_updates", "skip_not_finite", "sm3", "stateless",
    "stateless_with_tree_map", "trace", "unitwise_norm", "update_infinity_moment", "update_moment",
    "update_moment_per_elem_norm", "warmup_cosine_decay_schedule", "weight_decay_mask", "yogi",
    "zero_nans",
]
