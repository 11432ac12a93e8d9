"""Self-supervised, ranking and Fenchel-Young losses of nova.optim.losses."""

from __future__ import annotations

from collections.abc import Callable

import nova.numpy as jnp
from nova import lax
from nova.core import dtypes
from nova.core.array import Array
from nova.nn import functional as F
from nova.numpy_impl.util import asarray, where_am_i
from nova.optim.losses_common import _float_array, _mask, _masked_sum


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
