"""Loss functions with optax.losses' names, signatures and semantics, written with nova.numpy ops.

Every loss is elementwise or reduces only the axis it names (no batch mean: the caller reduces,
as in optax), so `nova.grad` differentiates it and `nova.jit` compiles it into the training step.
Log-probabilities come from log-sum-exp with a shifted maximum (nova.nn.functional.log_softmax,
nova.scipy.special.logsumexp), log-sigmoids from logaddexp (nova.nn.activations.log_sigmoid),
so large logits do not overflow.
An optional `where` mask (as jax.numpy's reductions take) leaves entries out of a loss's sum.

Layout: the regression losses and divergences live here; losses_classification.py holds the
binary, margin and softmax classification losses, losses_ctc.py the CTC losses, losses_ranking.py
the self-supervised, ranking and Fenchel-Young ones, and losses_common.py the argument checks they
share. Every name is re-exported here.
"""

from __future__ import annotations

import math
import warnings

import nova.numpy as jnp
from nova.core.array import Array
from nova.numpy_impl.util import asarray
from nova.optim.losses_classification import (
    hinge_loss,
    multiclass_hinge_loss,
    multiclass_perceptron_loss,
    multiclass_sparsemax_loss,
    perceptron_loss,
    poly_loss_cross_entropy,
    safe_softmax_cross_entropy,
    sigmoid_binary_cross_entropy,
    sigmoid_focal_loss,
    smooth_labels,
    softmax_cross_entropy,
    softmax_cross_entropy_with_integer_labels,
    sparsemax_loss,
)
from nova.optim.losses_common import _errors, _float_array, _mask, _masked_sum, _same_shape
from nova.optim.losses_ctc import ctc_loss, ctc_loss_with_forward_probs
from nova.optim.losses_ranking import (
    make_fenchel_young_loss,
    ntxent,
    ranking_softmax_loss,
    triplet_margin_loss,
)

__all__ = [
    "convex_kl_divergence", "cosine_distance", "cosine_similarity", "ctc_loss",
    "ctc_loss_with_forward_probs", "generalized_kl_divergence", "hinge_loss", "huber_loss",
    "kl_divergence", "kl_divergence_with_log_targets", "l2_loss", "log_cosh",
    "make_fenchel_young_loss", "multiclass_hinge_loss", "multiclass_perceptron_loss",
    "multiclass_sparsemax_loss", "ntxent", "perceptron_loss", "poly_loss_cross_entropy",
    "ranking_softmax_loss", "safe_softmax_cross_entropy", "sigmoid_binary_cross_entropy",
    "sigmoid_focal_loss", "smooth_labels", "softmax_cross_entropy",
    "softmax_cross_entropy_with_integer_labels", "sparsemax_loss", "squared_error",
    "triplet_margin_loss",
]
# --- regression ---------------------------------------------------------------------------------


def squared_error(predictions, targets=None) -> Array:
    """(predictions - targets) ** 2 elementwise (predictions ** 2 when targets is None), as
    optax.losses.squared_error.

    predictions: float array; targets: array of the same shape. The result has their shape.

    Raises:
      TypeError: predictions is not floating-point.
      ValueError: targets has another shape.
    """
    fn = "squared_error"
    if targets is not None:
        _same_shape(fn, "predictions", asarray(predictions), "targets", asarray(targets))
    return jnp.square(_errors(fn, predictions, targets))


def l2_loss(predictions, targets=None) -> Array:
    """0.5 * squared_error(predictions, targets), as optax.losses.l2_loss (the half makes the
    gradient the plain error)."""
    return 0.5 * squared_error(predictions, targets)


def huber_loss(predictions, targets=None, *, delta: float = 1.0) -> Array:
    """The Huber loss (Huber 1964, "Robust Estimation of a Location Parameter"), elementwise, as
    optax.losses.huber_loss: with e = |predictions - targets|, 0.5 e**2 for e <= delta and
    0.5 delta**2 + delta (e - delta) beyond.

    predictions: float array; targets broadcasts with it. Raises TypeError for non-float
    predictions.
    """
    err = jnp.abs(_errors("huber_loss", predictions, targets))
    quadratic = jnp.minimum(err, delta)
    return 0.5 * quadratic * quadratic + delta * (err - quadratic)


def log_cosh(predictions, targets=None) -> Array:
    """log(cosh(predictions - targets)) elementwise, as optax.losses.log_cosh: about e**2 / 2
    for small errors e, |e| - log 2 for large ones. Computed as logaddexp(e, -e) - log 2, which
    does not overflow. Raises TypeError for non-float predictions."""
    err = _errors("log_cosh", predictions, targets)
    return jnp.logaddexp(err, -err) - math.log(2.0)


def cosine_similarity(predictions, targets, *, epsilon: float = 0.0, axis=-1,
                      where=None) -> Array:
    """Cosine of the angle between predictions and targets along axis, as
    optax.losses.cosine_similarity: sum(a * b) / (|a| |b|), each squared norm floored at
    epsilon (so a zero vector with epsilon > 0 gives 0, not NaN).

    predictions, targets: float arrays that broadcast; axis: int, tuple or None; where: a mask
    that leaves entries out of the sums. The result has the broadcast shape less axis.

    Raises:
      TypeError: an input is not floating-point.
    """
    fn = "cosine_similarity"
    a = _float_array(fn, "predictions", predictions)
    b = _float_array(fn, "targets", targets)
    where = _mask(where)
    a_norm = jnp.sqrt(jnp.maximum(_masked_sum(a * a, axis, where, keepdims=True), epsilon))
    b_norm = jnp.sqrt(jnp.maximum(_masked_sum(b * b, axis, where, keepdims=True), epsilon))
    return _masked_sum((a / a_norm) * (b / b_norm), axis, where)


def cosine_distance(predictions, targets, *, epsilon: float = 0.0, axis=-1,
                    where=None) -> Array:
    """1 - cosine_similarity(predictions, targets, ...), as optax.losses.cosine_distance: in
    [0, 2], 0 for vectors pointing the same way."""
    return 1.0 - cosine_similarity(predictions, targets, epsilon=epsilon, axis=axis,
                                   where=where)


# --- divergences ---------------------------------------------------------------------------------


def kl_divergence(log_predictions, targets, axis=-1, where=None) -> Array:
    """Kullback-Leibler divergence KL(targets || predictions) = sum(targets * (log targets -
    log_predictions)) over axis, with 0 log 0 = 0, as optax.losses.kl_divergence.

    log_predictions: float log-probabilities; targets: float probabilities, broadcasting;
    axis: int, tuple or None; where: a mask leaving entries out of the sum. A zero target also
    has a finite gradient (the log is taken of 1 there).

    Raises:
      TypeError: an input is not floating-point.
    """
    fn = "kl_divergence"
    log_p = _float_array(fn, "log_predictions", log_predictions)
    t = _float_array(fn, "targets", targets)
    log_t = jnp.where(t == 0, 0.0, jnp.log(jnp.where(t == 0, 1.0, t)))
    return _masked_sum(t * (log_t - log_p), axis, _mask(where))


def kl_divergence_with_log_targets(log_predictions, log_targets, axis=-1, where=None) -> Array:
    """KL(targets || predictions) from log-probabilities of both: sum(exp(log_targets) *
    (log_targets - log_predictions)) over axis, as optax.losses.kl_divergence_with_log_targets.
    Shapes, `where` and errors as kl_divergence."""
    fn = "kl_divergence_with_log_targets"
    log_p = _float_array(fn, "log_predictions", log_predictions)
    log_t = _float_array(fn, "log_targets", log_targets)
    return _masked_sum(jnp.exp(log_t) * (log_t - log_p), axis, _mask(where))


def generalized_kl_divergence(log_predictions, targets, axis=-1, where=None) -> Array:
    """The generalized KL divergence of unnormalized measures, kl_divergence + sum(predictions -
    targets) over axis (convex in the predictions), as optax.losses.generalized_kl_divergence.
    Shapes, `where` and errors as kl_divergence."""
    mask = _mask(where)
    spread = _masked_sum(jnp.exp(asarray(log_predictions)) - asarray(targets), axis, mask)
    return kl_divergence(log_predictions, targets, axis, where) + spread


def convex_kl_divergence(log_predictions, targets, axis=-1, where=None) -> Array:
    """The former name of generalized_kl_divergence (deprecated in optax; warns
    DeprecationWarning)."""
    warnings.warn("convex_kl_divergence is deprecated; use generalized_kl_divergence",
                  DeprecationWarning, stacklevel=2)
    return generalized_kl_divergence(log_predictions, targets, axis, where)
