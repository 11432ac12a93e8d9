"""The connectionist temporal classification (CTC) losses of nova.optim.losses."""

from __future__ import annotations

import nova.numpy as jnp
from nova import lax
from nova.core.array import Array
from nova.nn import functional as F
from nova.nn.functional import check_index_range
from nova.numpy_impl.util import asarray, where_am_i
from nova.optim.losses_common import _float_array, _int_array, _same_shape


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
