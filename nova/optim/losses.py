"""Loss functions with optax.losses' names, signatures and semantics, written with nova.numpy ops.

Every loss is elementwise or reduces only the axis it names (no batch mean: the caller reduces,
as in optax), so `nova.grad` differentiates it and `nova.jit` compiles it into the training step.
Log-probabilities come from log-sum-exp with a shifted maximum (nova.nn.functional.log_softmax,
nova.scipy.special.logsumexp), log-sigmoids from logaddexp (nova.nn.activations.log_sigmoid),
so large logits do not overflow.
An optional `where` mask (as jax.numpy's reductions take) leaves entries out of a loss's sum.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import nova.numpy as jnp
from nova import lax
from nova.core import dtypes
from nova.core.array import Array
from nova.nn import functional as F
from nova.nn.activations import log_sigmoid, sparse_plus
from nova.nn.functional import check_index_range
from nova.numpy_impl.util import asarray, normalize_axes, normalize_axis, where_am_i
from nova.scipy.special import logsumexp

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
# --- argument checks and shared pieces ----------------------------------------------------------


def _float_array(fn: str, name: str, x) -> Array:
    a = asarray(x)
    if not dtypes.is_float(a.dtype):
        raise TypeError(f"{fn}: {name} must be a floating-point array, got {a.dtype}"
                        f"{where_am_i()}")
    return a


def _int_array(fn: str, name: str, x) -> Array:
    a = asarray(x)
    if not dtypes.is_int(a.dtype):
        raise TypeError(f"{fn}: {name} must be an integer array, got {a.dtype}{where_am_i()}")
    return a


def _same_shape(fn: str, a_name: str, a: Array, b_name: str, b: Array) -> None:
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{fn}: {a_name} has shape {tuple(a.shape)} but {b_name} has "
                         f"{tuple(b.shape)}; they must be equal{where_am_i()}")


def _mask(where) -> Array | None:
    return None if where is None else asarray(where).astype(jnp.bool_)


def _masked_sum(x, axis, where, keepdims: bool = False):
    """sum(x, axis) over the entries where `where` holds (all when where is None); a select, so
    NaN or inf in a left-out entry neither reaches the sum nor its gradient."""
    if where is not None:
        x = jnp.where(where, x, 0.0)
    return jnp.sum(x, axis=axis, keepdims=keepdims)


def _class_mask(fn: str, where, logits: Array, axis) -> Array | None:
    """`where` with logits' rank: a mask without the class axes gets them as size-1 axes."""
    where = _mask(where)
    if where is None or where.ndim == logits.ndim:
        return where
    if axis is None:
        raise ValueError(f"{fn}: where has shape {tuple(where.shape)} but logits "
                         f"{tuple(logits.shape)}; with axis=None it must have logits' rank"
                         f"{where_am_i()}")
    return jnp.expand_dims(where, axis)


def _log_softmax(x: Array, axis, where) -> Array:
    """log softmax over axis of the entries where `where` holds; -inf at the others."""
    if where is None:
        return F.log_softmax(x, axis=axis)
    masked = jnp.where(where, x, -jnp.inf)
    return jnp.where(where, F.log_softmax(masked, axis=axis), -jnp.inf)


def _softmax(x: Array, axis, where) -> Array:
    """softmax over axis of the entries where `where` holds; 0 at the others."""
    if where is None:
        return F.softmax(x, axis=axis)
    return jnp.where(where, F.softmax(jnp.where(where, x, -jnp.inf), axis=axis), 0.0)


def _label_mask(fn: str, scores: Array, labels, what: str = "scores") -> Array:
    """labels (...) integer -> boolean one-hot mask (..., C) against scores (..., C); `what`
    names scores in the error.

    Raises ValueError for a shape mismatch, or -- for concrete labels -- a label outside [0, C).
    """
    labels = _int_array(fn, "labels", labels)
    if scores.ndim == 0 or tuple(labels.shape) != tuple(scores.shape[:-1]):
        raise ValueError(f"{fn}: labels of shape {tuple(labels.shape)} do not match {what} of "
                         f"shape {tuple(scores.shape)} (expected {tuple(scores.shape[:-1])})"
                         f"{where_am_i()}")
    classes = scores.shape[-1]
    check_index_range(fn, "labels", labels, classes)
    return labels[..., None] == jnp.arange(classes, dtype=jnp.int32)


def _pick(scores: Array, onehot: Array) -> Array:
    """scores[..., label] through a select (a -inf score elsewhere does not become NaN)."""
    return jnp.sum(jnp.where(onehot, scores, 0.0), axis=-1)


# --- regression ---------------------------------------------------------------------------------


def _errors(fn: str, predictions, targets) -> Array:
    predictions = _float_array(fn, "predictions", predictions)
    if targets is None:
        return predictions
    return predictions - asarray(targets)


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


# --- binary and margin classification ------------------------------------------------------------


def sigmoid_binary_cross_entropy(logits, labels) -> Array:
    """Binary cross-entropy of sigmoid probabilities, elementwise, as
    optax.losses.sigmoid_binary_cross_entropy:
    -labels * log(sigmoid(logits)) - (1 - labels) * log(sigmoid(-logits)).

    logits: float array; labels: probabilities in [0, 1] (any real dtype; cast to logits'
    dtype) broadcasting with logits. The log-sigmoids are logaddexp's, finite for any finite
    logit. Raises TypeError for non-float logits.
    """
    logits = _float_array("sigmoid_binary_cross_entropy", "logits", logits)
    labels = asarray(labels).astype(logits.dtype)
    return -labels * log_sigmoid(logits) - (1.0 - labels) * log_sigmoid(-logits)


def sigmoid_focal_loss(logits, labels, *, alpha: float | None = None,
                       gamma: float = 2.0) -> Array:
    """The focal loss (Lin et al. 2017, "Focal Loss for Dense Object Detection", arXiv
    1708.02002, eq. 5), elementwise, as optax.losses.sigmoid_focal_loss: the binary
    cross-entropy times (1 - p_t) ** gamma, p_t = p * labels + (1 - p) * (1 - labels) and
    p = sigmoid(logits); with alpha, times alpha * labels + (1 - alpha) * (1 - labels).

    log(1 - p_t) is a weighted log-sum-exp of the two log-sigmoids, so the weight stays accurate
    for confident predictions. Shapes and dtypes as sigmoid_binary_cross_entropy.
    """
    logits = _float_array("sigmoid_focal_loss", "logits", logits)
    labels = asarray(labels).astype(logits.dtype)
    ce = sigmoid_binary_cross_entropy(logits, labels)
    labels = jnp.broadcast_to(labels, ce.shape)
    log_pq = jnp.stack(jnp.broadcast_arrays(log_sigmoid(logits), log_sigmoid(-logits)), axis=-1)
    log_one_minus_pt = logsumexp(log_pq, axis=-1, b=jnp.stack([1.0 - labels, labels], axis=-1))
    loss = ce * jnp.exp(gamma * log_one_minus_pt)
    if alpha is None:
        return loss
    return (alpha * labels + (1.0 - alpha) * (1.0 - labels)) * loss


def hinge_loss(predictor_outputs, targets) -> Array:
    """max(0, 1 - predictor_outputs * targets) elementwise (targets in {-1, 1}), as
    optax.losses.hinge_loss."""
    return jnp.maximum(0.0, 1.0 - asarray(predictor_outputs) * asarray(targets))


def perceptron_loss(predictor_outputs, targets) -> Array:
    """max(0, -predictor_outputs * targets) elementwise (targets in {-1, 1}), as
    optax.losses.perceptron_loss. Raises ValueError when the shapes differ."""
    p, t = asarray(predictor_outputs), asarray(targets)
    _same_shape("perceptron_loss", "predictor_outputs", p, "targets", t)
    return jnp.maximum(0.0, -p * t)


def multiclass_hinge_loss(scores, labels) -> Array:
    """The multiclass hinge loss (Crammer & Singer 2001), as optax.losses.multiclass_hinge_loss:
    max_j (scores_j + [j != label]) - scores_label.

    scores: float (..., C); labels: integer (...). Returns (...).

    Raises:
      TypeError: non-integer labels.
      ValueError: labels.shape != scores.shape[:-1], or (concrete labels) a label outside
        [0, C).
    """
    scores = asarray(scores)
    onehot = _label_mask("multiclass_hinge_loss", scores, labels)
    return jnp.max(scores + 1.0 - onehot.astype(scores.dtype), axis=-1) - _pick(scores, onehot)


def multiclass_perceptron_loss(scores, labels) -> Array:
    """max_j scores_j - scores_label, as optax.losses.multiclass_perceptron_loss.
    Shapes and errors as multiclass_hinge_loss."""
    scores = asarray(scores)
    onehot = _label_mask("multiclass_perceptron_loss", scores, labels)
    return jnp.max(scores, axis=-1) - _pick(scores, onehot)


def sparsemax_loss(logits, labels) -> Array:
    """The binary sparsemax loss (Martins & Astudillo 2016, "From Softmax to Sparsemax",
    arXiv 1602.02068), elementwise, as optax.losses.sparsemax_loss: sparse_plus(-logits) where
    labels is nonzero, sparse_plus(logits) elsewhere, with sparse_plus(x) = 0 for x <= -1,
    (x + 1)**2 / 4 on (-1, 1), x for x >= 1."""
    logits = asarray(logits)
    return sparse_plus(jnp.where(asarray(labels) != 0, -logits, logits))


def _sparsemax(scores: Array) -> Array:
    """Euclidean projection of each row (last axis) onto the probability simplex (Martins &
    Astudillo 2016, Algorithm 1): max(z - tau, 0) with tau from the sorted scores."""
    u = jnp.flip(jnp.sort(scores, axis=-1), axis=-1)
    cumsum = jnp.cumsum(u, axis=-1)
    k = jnp.arange(1, scores.shape[-1] + 1, dtype=jnp.int32)
    support = jnp.sum((1.0 + k * u - cumsum > 0).astype(jnp.int32), axis=-1, keepdims=True)
    tau = (jnp.sum(jnp.where(k == support, cumsum, 0.0), axis=-1, keepdims=True) - 1.0) / support
    return jnp.maximum(scores - tau, 0.0)


def multiclass_sparsemax_loss(scores, labels) -> Array:
    """The multiclass sparsemax loss (Martins & Astudillo 2016, eq. 18), as
    optax.losses.multiclass_sparsemax_loss: with p = sparsemax(scores),
    <p, scores - scores_label> + (1 - |p|^2) / 2 >= 0.

    scores: float (..., C); labels: integer (...). Returns (...). The gradient is
    p - onehot(label) (the Fenchel-Young identity), so p enters without a derivative of the
    projection. Errors as multiclass_hinge_loss.
    """
    fn = "multiclass_sparsemax_loss"
    scores = _float_array(fn, "scores", scores)
    onehot = _label_mask(fn, scores, labels)
    p = lax.stop_gradient(_sparsemax(scores))
    margins = scores - _pick(scores, onehot)[..., None]
    return jnp.sum(p * margins, axis=-1) + 0.5 * (1.0 - jnp.sum(p * p, axis=-1))


# --- softmax classification ----------------------------------------------------------------------


def softmax_cross_entropy(logits, labels, axis=-1, where=None) -> Array:
    """-sum(labels * log_softmax(logits)) over axis, as optax.losses.softmax_cross_entropy.

    logits: float array; labels: class probabilities broadcasting with it; axis: int, tuple or
    None; where: a mask of logits' shape (or of the batch shape, then it covers whole rows);
    left-out classes are not in the softmax nor in the sum. Returns logits' shape less axis.
    A -inf logit with label 0 gives NaN, as optax (safe_softmax_cross_entropy gives 0).

    Raises:
      TypeError: logits is not floating-point.
    """
    fn = "softmax_cross_entropy"
    logits = _float_array(fn, "logits", logits)
    where = _class_mask(fn, where, logits, axis)
    return -_masked_sum(asarray(labels) * _log_softmax(logits, axis, where), axis, where)


def safe_softmax_cross_entropy(logits, labels) -> Array:
    """softmax_cross_entropy over the last axis that leaves out classes of label 0, as
    optax.losses.safe_softmax_cross_entropy: a -inf logit of a zero-probability class (a
    masked class) gives a finite loss and gradient instead of NaN. Raises TypeError for
    non-float logits."""
    logits = _float_array("safe_softmax_cross_entropy", "logits", logits)
    labels = asarray(labels)
    log_probs = F.log_softmax(logits, axis=-1)
    return -jnp.sum(labels * jnp.where(labels != 0, log_probs, 0.0), axis=-1)


def _classes_last(fn: str, logits: Array, where, axis):
    """(logits, where) with the class axes moved to the end and flattened into one, in the
    order `axis` names them (as optax); where, if given, has logits' shape."""
    if isinstance(axis, bool) or not isinstance(axis, int | tuple):
        raise TypeError(f"{fn}: axis must be an int or a tuple of ints, got "
                        f"{type(axis).__name__} {axis!r}{where_am_i()}")
    axes = (axis,) if isinstance(axis, int) else axis
    axes = tuple(normalize_axis(a, logits.ndim) for a in axes)
    normalize_axes(axes, logits.ndim)  # raises for a repeated axis
    batch = tuple(a for a in range(logits.ndim) if a not in axes)
    shape = tuple(logits.shape[a] for a in batch) + (-1,)
    logits = jnp.transpose(logits, batch + axes).reshape(shape)
    if where is not None:
        where = jnp.transpose(where, batch + axes).reshape(shape)
    return logits, where


def softmax_cross_entropy_with_integer_labels(logits, labels, axis=-1, where=None) -> Array:
    """-log_softmax(logits)[label] = logsumexp(logits) - logits[label] over the class axis, as
    optax.losses.softmax_cross_entropy_with_integer_labels.

    logits: float array; labels: integer array of logits' shape less axis; axis: int, or a
    tuple of class axes (flattened in that order; a label indexes the flattened classes);
    where: a mask of logits' shape (or of labels', covering whole rows) -- left-out classes are
    not in the log-sum-exp, and a row with none left is 0. Returns labels' shape.

    Raises:
      TypeError: non-float logits, non-integer labels, an axis that is not an int or tuple.
      ValueError: labels' shape is not logits' less axis, or (concrete labels) a label outside
        [0, number of classes).
    """
    fn = "softmax_cross_entropy_with_integer_labels"
    logits = _float_array(fn, "logits", logits)
    labels = _int_array(fn, "labels", labels)
    where = _class_mask(fn, where, logits, axis)
    if where is not None:
        where = jnp.broadcast_to(where, logits.shape)
    logits, where = _classes_last(fn, logits, where, axis)
    onehot = _label_mask(fn, logits, labels, "logits with the class axes flattened last")
    masked = logits if where is None else jnp.where(where, logits, -jnp.inf)
    out = logsumexp(masked, axis=-1) - _pick(logits, onehot)
    if where is None:
        return out
    return jnp.where(jnp.any(where, axis=-1), out, 0.0)


def poly_loss_cross_entropy(logits, labels, *, epsilon: float = 2.0, axis=-1,
                            where=None) -> Array:
    """The Poly-1 loss (Leng et al. 2022, "PolyLoss", arXiv 2204.12511, eq. 3), as
    optax.losses.poly_loss_cross_entropy: softmax_cross_entropy + epsilon * sum(labels *
    (1 - softmax(logits))) over axis. Shapes and `where` as softmax_cross_entropy.

    Raises:
      TypeError: logits or labels is not floating-point.
    """
    fn = "poly_loss_cross_entropy"
    logits = _float_array(fn, "logits", logits)
    labels = _float_array(fn, "labels", labels)
    mask = _class_mask(fn, where, logits, axis)
    one_minus_pt = _masked_sum(labels * (1.0 - _softmax(logits, axis, mask)), axis, mask)
    return softmax_cross_entropy(logits, labels, axis, where) + epsilon * one_minus_pt


def smooth_labels(labels, alpha: float, *, axis=-1, where=None) -> Array:
    """Label smoothing (Szegedy et al. 2016, "Rethinking the Inception Architecture", sec. 7),
    as optax.losses.smooth_labels: (1 - alpha) * labels + alpha / K, with K the number of
    classes along axis (int, tuple or None: all) or, with where, the number of classes left in.

    labels: float array; the result has its shape. Raises TypeError for non-float labels.
    """
    fn = "smooth_labels"
    labels = _float_array(fn, "labels", labels)
    where = _mask(where)
    if where is None:
        classes = math.prod(labels.shape[a] for a in normalize_axes(axis, labels.ndim))
    else:
        classes = jnp.sum(where.astype(jnp.int32), axis=axis, keepdims=True)
    return (1.0 - alpha) * labels + alpha / classes


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


# --- connectionist temporal classification -----------------------------------------------------


def _ctc_emissions(logprobs: Array, labels: Array, blank_id: int) -> Array:
    """Per-frame log-probabilities of the extended label sequence (blank, l_1, blank, ...,
    l_N, blank): (B, T, K) log-probabilities and (B, N) labels -> (T, B, 2N + 1)."""
    b, t, k = logprobs.shape
    n = labels.shape[1]
    onehot = (labels[..., None] == jnp.arange(k, dtype=jnp.int32)).astype(logprobs.dtype)
    emit = jnp.einsum("btk,bnk->btn", logprobs, onehot)
    blank = logprobs[:, :, blank_id]
    pairs = jnp.stack([jnp.broadcast_to(blank[..., None], emit.shape), emit], axis=-1)
    extended = jnp.concatenate([pairs.reshape(b, t, 2 * n), blank[..., None]], axis=-1)
    return jnp.transpose(extended, (1, 0, 2))


def _ctc_skips(labels: Array) -> Array:
    """(B, 2N + 1) bool: extended state s may be entered from s - 2 (over a blank), which holds
    for a label that differs from the label before it."""
    b, n = labels.shape
    differs = jnp.concatenate([jnp.zeros((b, 1), dtype=jnp.bool_),
                               labels[:, 1:] != labels[:, :-1]], axis=1)
    pairs = jnp.stack([jnp.zeros_like(differs), differs], axis=-1).reshape(b, 2 * n)
    return jnp.concatenate([pairs, jnp.zeros((b, 1), dtype=jnp.bool_)], axis=1)


def ctc_loss_with_forward_probs(logits, logit_paddings, labels, label_paddings, *,
                                blank_id: int = 0, log_epsilon: float = -1e5):
    """Connectionist temporal classification loss and its forward variables (Graves et al.
    2006, "Connectionist Temporal Classification", ICML, sec. 4.1), as
    optax.losses.ctc_loss_with_forward_probs.

    The forward algorithm runs in log space over the extended sequence blank, l_1, blank, ...,
    l_N, blank (one `nova.lax.scan` over the frames, differentiable): state s at frame t is
    reached from s, s - 1, or s - 2 when s is a label that differs from the label two states
    back. log_epsilon stands for log 0 (finite, so no inf - inf appears in the gradient).

    Args:
      logits: float (B, T, K) unnormalized log-probabilities of K classes at T frames.
      logit_paddings: (B, T), 1 at padded frames (at the end), 0 elsewhere; a padded frame
        leaves the forward variables unchanged.
      labels: integer (B, N) label sequences; label_paddings: (B, N), 1 at padding (at the
        end); a sequence's length is N minus its padding.
      blank_id: the class index of the blank.
      log_epsilon: the log-probability taken for an impossible state.

    Returns:
      (per_seq_loss, logalpha_phi, logalpha_emit): the (B,) negative log-likelihoods;
      (T, B, N + 1) log forward probabilities of having emitted n labels and sitting on a blank
      (the last frame holds the total for n labels, blank or not, from which the loss is read);
      (T, B, N) those of sitting on label n. Entries of impossible states are about
      log_epsilon, but not bitwise optax's; a label sequence longer than its frames allow gives
      a loss of order -log_epsilon.

    Raises:
      TypeError: non-float logits or non-integer labels, a non-int blank_id.
      ValueError: ranks or shapes that do not fit, T = 0, blank_id outside [0, K), or
        (concrete labels) an unpadded label outside [0, K).
    """
    fn = "ctc_loss_with_forward_probs"
    logits = _float_array(fn, "logits", logits)
    labels = _int_array(fn, "labels", labels)
    logit_paddings, label_paddings = asarray(logit_paddings), asarray(label_paddings)
    if logits.ndim != 3 or labels.ndim != 2:
        raise ValueError(f"{fn}: expected logits (B, T, K) and labels (B, N), got shapes "
                         f"{tuple(logits.shape)} and {tuple(labels.shape)}{where_am_i()}")
    b, t, k = logits.shape
    _same_shape(fn, "label_paddings", label_paddings, "labels", labels)
    if labels.shape[0] != b or tuple(logit_paddings.shape) != (b, t) or t == 0:
        raise ValueError(f"{fn}: logits {tuple(logits.shape)} need labels (B={b}, N) and "
                         f"logit_paddings ({b}, {t}) with T >= 1, got labels "
                         f"{tuple(labels.shape)} and logit_paddings "
                         f"{tuple(logit_paddings.shape)}{where_am_i()}")
    blank_id = F._int_arg(fn, "blank_id", blank_id)
    if not 0 <= blank_id < k:
        raise ValueError(f"{fn}: blank_id {blank_id} is not a class of logits with K={k}"
                         f"{where_am_i()}")
    check_index_range(fn, "labels", jnp.where(label_paddings != 0, 0, labels), k)
    n = labels.shape[1]
    emissions = _ctc_emissions(F.log_softmax(logits, axis=-1), labels, blank_id)
    skips = _ctc_skips(labels)
    floor = jnp.full((b, 2), log_epsilon, dtype=logits.dtype)

    def frame(alpha, x):
        emission, padded = x
        behind = jnp.concatenate([floor, alpha], axis=1)  # behind[:, s + 2] = alpha[:, s]
        into = jnp.logaddexp(alpha, behind[:, 1:-1])
        into = jnp.logaddexp(into, jnp.where(skips, behind[:, :-2], log_epsilon))
        alpha = jnp.where(padded[:, None], alpha, into + emission)
        return alpha, alpha

    # Before the first frame all the probability sits on a virtual state left of state 0.
    start = jnp.concatenate([jnp.zeros((b, 1), dtype=logits.dtype),
                             jnp.full((b, 2 * n), log_epsilon, dtype=logits.dtype)], axis=1)
    _, alphas = lax.scan(frame, start, (emissions, jnp.transpose(logit_paddings != 0)))
    pairs = alphas[:, :, : 2 * n].reshape(t, b, n, 2)
    logalpha_emit = pairs[..., 1]
    logalpha_phi = jnp.concatenate([pairs[..., 0], alphas[:, :, 2 * n:]], axis=-1)
    final = logalpha_phi[-1]
    ended = jnp.concatenate([final[:, :1], jnp.logaddexp(final[:, 1:], logalpha_emit[-1])],
                            axis=1)
    lengths = n - jnp.sum(label_paddings, axis=1).astype(jnp.int32)
    at_length = lengths[:, None] == jnp.arange(n + 1, dtype=jnp.int32)
    per_seq_loss = -jnp.sum(jnp.where(at_length, ended, 0.0), axis=1)
    logalpha_phi = jnp.concatenate([logalpha_phi[:-1], ended[None]], axis=0)
    return per_seq_loss, logalpha_phi, logalpha_emit


def ctc_loss(logits, logit_paddings, labels, label_paddings, *, blank_id: int = 0,
             log_epsilon: float = -1e5) -> Array:
    """The (B,) CTC negative log-likelihoods -log p(labels | logits) (Graves et al. 2006), as
    optax.losses.ctc_loss; arguments and errors as ctc_loss_with_forward_probs."""
    per_seq_loss, _, _ = ctc_loss_with_forward_probs(
        logits, logit_paddings, labels, label_paddings, blank_id=blank_id,
        log_epsilon=log_epsilon)
    return per_seq_loss


# --- self-supervised and ranking -----------------------------------------------------------------


def triplet_margin_loss(anchors, positives, negatives, axis: int = -1, norm_degree=2,
                        margin: float = 1.0, eps: float = 1e-6) -> Array:
    """The triplet margin loss (Schroff et al. 2015, "FaceNet", arXiv 1503.03832, eq. 1 with
    p-norm distances), as optax.losses.triplet_margin_loss:
    max(d(anchor, positive) - d(anchor, negative) + margin, 0), with
    d(a, b) = (sum((a - b) ** norm_degree, axis) + eps) ** (1 / norm_degree).

    anchors, positives, negatives: float arrays that broadcast; returns their shape less axis.

    Raises:
      TypeError: an input is not floating-point.
    """
    fn = "triplet_margin_loss"
    a = _float_array(fn, "anchors", anchors)
    p = _float_array(fn, "positives", positives)
    n = _float_array(fn, "negatives", negatives)

    def distance(b):
        return jnp.power(jnp.sum(jnp.power(a - b, norm_degree), axis=axis) + eps,
                         1.0 / norm_degree)

    return jnp.maximum(distance(p) - distance(n) + margin, 0.0)


def ntxent(embeddings, labels, temperature: float = 0.07) -> Array:
    """The normalized temperature-scaled cross-entropy loss (Chen et al. 2020, "SimCLR", arXiv
    2002.05709, eq. 1), as optax.losses.ntxent; a 0-d array.

    embeddings: float (N, D); labels: (N,) -- rows with equal labels are positive pairs. With
    s_ij the cosine similarity / temperature, each positive pair (i, j), i != j, scores
    -log(exp(s_ij) / (exp(s_ij) + sum over k of other labels exp(s_ik))); the loss is their mean
    (NaN when there is no positive pair, as optax). Each row is shifted by its largest
    similarity to another row, through which no gradient flows.

    Raises:
      TypeError: embeddings is not floating-point.
      ValueError: embeddings is not 2-d, or labels' leading axis differs.
    """
    fn = "ntxent"
    e = _float_array(fn, "embeddings", embeddings)
    labels = asarray(labels)
    if e.ndim != 2 or labels.ndim == 0 or labels.shape[0] != e.shape[0]:
        raise ValueError(f"ntxent: expected embeddings (N, D) and labels (N,), got "
                         f"{tuple(e.shape)} and {tuple(labels.shape)}{where_am_i()}")
    eps = float(dtypes.finfo(e.dtype).eps)
    unit = e / jnp.sqrt(jnp.maximum(jnp.sum(e * e, axis=-1, keepdims=True), eps))
    s = (unit @ unit.T) / temperature
    same = labels[:, None] == labels[None, :]
    others = ~jnp.eye(e.shape[0], dtype=jnp.bool_)
    positive, negative = same & others, ~same
    shift = jnp.max(jnp.where(others, s, -jnp.inf), axis=1, keepdims=True)
    shift = lax.stop_gradient(jnp.where(jnp.isfinite(shift), shift, 0.0))
    z = jnp.where(others, s - shift, 0.0)  # the diagonal never reaches exp's gradient
    negatives = jnp.sum(jnp.where(negative, jnp.exp(z), 0.0), axis=1, keepdims=True)
    log_prob = z - jnp.log(jnp.exp(z) + negatives)
    count = jnp.sum(positive.astype(e.dtype))
    return -jnp.sum(jnp.where(positive, log_prob, 0.0)) / count


def ranking_softmax_loss(logits, labels, *, where=None, weights=None,
                         reduce_fn: Callable | None = jnp.mean) -> Array:
    """The listwise softmax ranking loss (Cao et al. 2007, "ListNet"; Bruch et al. 2019), as
    optax.losses.ranking_softmax_loss: per list, -sum(labels * log_softmax(logits)) over the
    last axis, then reduce_fn over the lists.

    logits: float (..., L) scores of L items; labels: relevance (..., L), cast to logits'
    dtype; where: a mask of valid items (a list with none is left out of the reduction);
    weights: per-item weights multiplying labels; reduce_fn: nova.numpy.mean (default; 0 when
    every list is masked), nova.numpy.sum, None (per-list losses, (...), 0 for masked lists),
    or any callable taking (losses, where=mask).

    Raises:
      TypeError: logits is not floating-point.
    """
    fn = "ranking_softmax_loss"
    logits = _float_array(fn, "logits", logits)
    labels = asarray(labels).astype(logits.dtype)
    where = _mask(where)
    if where is not None:
        labels = jnp.where(where, labels, 0.0)
        logits = jnp.where(where, logits, -jnp.inf)
    if weights is not None:
        labels = labels * asarray(weights)
    loss = -_masked_sum(labels * F.log_softmax(logits, axis=-1), -1, where)
    lists = None if where is None else jnp.any(where, axis=-1)
    if reduce_fn is None:
        return loss if lists is None else jnp.where(lists, loss, 0.0)
    if reduce_fn is jnp.mean and lists is not None:
        count = jnp.sum(lists.astype(loss.dtype))
        mean = _masked_sum(loss, None, lists) / count
        return jnp.where((count == 0) & ~jnp.any(jnp.isnan(loss)), 0.0, mean)
    if reduce_fn is jnp.sum and lists is not None:
        return _masked_sum(loss, None, lists)
    return reduce_fn(loss) if lists is None else reduce_fn(loss, where=lists)


def make_fenchel_young_loss(max_fun: Callable) -> Callable:
    """The Fenchel-Young loss of a regularized max function (Blondel et al. 2020, "Learning with
    Fenchel-Young Losses", JMLR 21, eq. 8), as optax.losses.make_fenchel_young_loss: returns
    loss(scores, targets, *args, **kwargs) = max_fun(scores, *args, **kwargs) -
    sum(targets * scores) over the last axis, max_fun applied to each row of scores (..., n).
    With nova.scipy.special.logsumexp as max_fun it is the softmax cross-entropy.

    Raises:
      TypeError: max_fun is not callable.
    """
    if not callable(max_fun):
        raise TypeError(f"make_fenchel_young_loss: max_fun must be callable, got "
                        f"{type(max_fun).__name__}")

    def fenchel_young_loss(scores, targets, *args, **kwargs):
        scores = asarray(scores)
        row_max = jnp.vectorize(lambda row: max_fun(row, *args, **kwargs), signature="(n)->()")
        return row_max(scores) - jnp.sum(asarray(targets) * scores, axis=-1)

    return fenchel_young_loss
