"""Classification losses of nova.optim.losses: binary, margin, sparsemax, softmax cross-entropy."""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova import lax
from nova.core.array import Array
from nova.nn import functional as F
from nova.nn.activations import log_sigmoid, sparse_plus
from nova.numpy_impl.util import asarray, normalize_axes, normalize_axis, where_am_i
from nova.optim.losses_common import (
    _class_mask,
    _float_array,
    _int_array,
    _label_mask,
    _log_softmax,
    _mask,
    _masked_sum,
    _pick,
    _same_shape,
    _softmax,
)
from nova.scipy.special import logsumexp


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
