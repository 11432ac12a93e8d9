"""nova.nn.functional's softmax, log_softmax, cross_entropy and the chunked linear_cross_entropy."""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.nn.functional_basic import (
    _float_input,
    _int_arg,
    _wide_int,
    broadcast_where,
    check_index_range,
)
from nova.numpy_impl.util import asarray, where_am_i


def _row_max(x, axis):
    """The maximum over `axis` (keepdims), with 0 in place of a non-finite maximum so that a row of
    all -inf gives exp(-inf - 0) = 0 instead of exp(nan)."""
    m = jnp.max(x, axis=axis, keepdims=True)
    return jnp.where(jnp.isfinite(m), m, 0.0)


def _row_shift(x, axis):
    """A stabilizing shift for exp over `axis`: floor of the (guarded) row maximum.

    exp(x - shift) <= e, so nothing overflows. floor has a zero derivative, so no cotangent flows
    into the maximum: its backward (which would need a second pass over the row to find and
    count the argmax) vanishes, and the gradient is the exact softmax one. The mathematics is
    unchanged since the shift cancels. (nova.scipy.special.logsumexp uses the same shift.)
    """
    return jnp.floor(_row_max(x, axis))


def softmax(x, axis=-1, where=None) -> Array:
    """exp(x) / sum(exp(x)) over `axis` (int or tuple), computed as exp(x - s) / sum with
    s = floor(max(x)) (see `_row_shift`).

    x: float array; result has its shape and dtype. where: optional bool mask broadcastable to
    x; only its elements take part, the others give 0 (as jax.nn.softmax). A slice that is -inf
    (or masked) everywhere gives zeros (JAX and PyTorch give NaN for -inf). Raises TypeError for
    non-float input.
    """
    x = _float_input("softmax", x)
    mask = broadcast_where("softmax", where, x.shape)
    if mask is not None:
        x = jnp.where(mask, x, -jnp.inf)
    e = jnp.exp(x - _row_shift(x, axis))
    s = jnp.sum(e, axis=axis, keepdims=True)
    p = e / jnp.where(s == 0, 1.0, s)
    return p if mask is None else jnp.where(mask, p, 0.0)


def log_softmax(x, axis=-1, where=None) -> Array:
    """x - logsumexp(x) over `axis`, computed as (x - s) - log(sum(exp(x - s))) with
    s = floor(max(x)).

    x: float array; result has its shape and dtype. where: optional bool mask broadcastable to
    x; only its elements take part, the others give -inf (as jax.nn.log_softmax). A slice that
    is -inf everywhere gives NaN (as JAX and PyTorch). Raises TypeError for non-float input.
    """
    x = _float_input("log_softmax", x)
    mask = broadcast_where("log_softmax", where, x.shape)
    if mask is not None:
        x = jnp.where(mask, x, -jnp.inf)
    shifted = x - _row_shift(x, axis)
    out = shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=axis, keepdims=True))
    return out if mask is None else jnp.where(mask, out, -jnp.inf)


def cross_entropy(logits, labels, ignore_index: int = -100, reduction: str = "mean") -> Array:
    """Softmax cross-entropy of integer labels: -log softmax(logits)[label].

    logits: float (..., C), classes on the last axis (JAX/optax layout; PyTorch's (N, C) is the
    2-d case). labels: integer (...), logits.shape[:-1]. Positions whose label equals
    `ignore_index` contribute 0 and are not counted. reduction: "mean" (over counted positions;
    0 when none is counted), "sum", or "none" (per position, shape labels.shape).
    Labels of any integer dtype index all C classes (uint8 labels with C > 256 included).

    Raises TypeError for non-float logits, non-integer labels or a non-int ignore_index;
    ValueError for mismatched shapes, an unknown reduction, or -- when labels is a concrete array
    (not traced) -- a label outside [0, C) other than ignore_index. Under `jit` labels cannot be
    checked: such a label is counted and contributes logsumexp(logits) (its picked logit is 0).
    """
    logits = _float_input("cross_entropy", logits)
    labels = asarray(labels)
    if not dtypes.is_int(labels.dtype):
        raise TypeError(f"cross_entropy: labels must be integers, got {labels.dtype}{where_am_i()}")
    ignore_index = _int_arg("cross_entropy", "ignore_index", ignore_index)
    if logits.ndim == 0 or tuple(labels.shape) != tuple(logits.shape[:-1]):
        raise ValueError(
            f"cross_entropy: labels of shape {labels.shape} do not match logits of shape "
            f"{logits.shape} (expected labels.shape == logits.shape[:-1]){where_am_i()}"
        )
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(
            f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}"
            f"{where_am_i()}"
        )
    check_index_range("cross_entropy", "labels", labels, logits.shape[-1], ignore_index)
    labels = _wide_int(labels)
    # nll = logsumexp(logits) - logits[label]. Spelled this way (not through log_softmax) the
    # backward is one elementwise pass, softmax * ct - onehot * ct, over the forward's row sums.
    shift = _row_shift(logits, -1)
    lse = jnp.log(jnp.sum(jnp.exp(logits - shift), axis=-1)) + shift[..., 0]
    classes = jnp.arange(logits.shape[-1], dtype=labels.dtype)
    picked = jnp.sum(jnp.where(labels[..., None] == classes, logits, 0.0), axis=-1)
    valid = labels != ignore_index
    nll = jnp.where(valid, lse - picked, 0.0)
    if reduction == "none":
        return nll
    total = jnp.sum(nll)
    if reduction == "sum":
        return total
    count = jnp.sum(valid.astype(logits.dtype))
    return total / jnp.maximum(count, 1.0)


# Rows of x per chunk of linear_cross_entropy: a chunk's logits hold at most this many
# elements (256 MiB in float32); GPT-2's 50,257 classes give 1,024-row chunks.
_LCE_CHUNK_ELEMENTS = 1 << 26


_LCE_MAX_CHUNKS = 64


def _lce_chunk_rows(n: int, classes: int) -> int:
    """The default chunk of linear_cross_entropy: the largest power of two of rows whose logits
    fit _LCE_CHUNK_ELEMENTS (at least 1), or all n rows when they fit."""
    rows = max(1, _LCE_CHUNK_ELEMENTS // max(classes, 1))
    if rows >= n:
        return n
    return 1 << (rows.bit_length() - 1)


def _linear_ce_value(x, weight, bias, labels, ignore_index, reduction, chunk):
    logits = jnp.matmul(x, weight.T)
    if bias is not None:
        logits = logits + bias
    return cross_entropy(logits, labels, ignore_index=ignore_index, reduction=reduction)


def _pairwise_sum(parts: list):
    """The sum of `parts` as a balanced tree of adds: log2(n) deep (a chain of n adds fused
    into one kernel recursed n deep in codegen; 400 chunks overflowed Python's stack) and
    with the rounding of pairwise summation."""
    while len(parts) > 1:
        parts = [parts[i] + parts[i + 1] if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return parts[0]


def _linear_ce_fwd(x, weight, bias, labels, ignore_index, reduction, chunk):
    """The loss and, as residuals, its gradients for a cotangent of 1, chunk by chunk: each
    chunk's logits give its loss rows and d loss / d logits = (softmax - onehot) * scale, which
    its two GEMMs turn into the chunk's rows of dx and a term of dW (and db) at once; the
    chunk's logits are dead after that. The weight gradient is a running sum, one GEMM
    epilogue per chunk (the fusion keeps such chains: fuse._sums_matmuls); the loss and db
    parts are summed pairwise. Sums over chunks are float32 for narrower inputs."""
    n = x.shape[0]
    acc = jnp.float32 if x.dtype.itemsize < 4 else x.dtype
    valid = labels != ignore_index
    if reduction == "mean":
        scale = 1.0 / jnp.maximum(jnp.sum(valid.astype(acc)), 1.0)
    else:
        scale = jnp.asarray(1.0, acc)
    parts, dxs, dw, dbs = [], [], None, []
    for lo in range(0, n, chunk):
        hi = min(lo + chunk, n)
        xs, ls, vs = x[lo:hi], labels[lo:hi], valid[lo:hi]
        logits = jnp.matmul(xs, weight.T)
        if bias is not None:
            logits = logits + bias
        shift = _row_shift(logits, -1)
        e = jnp.exp(logits - shift)
        z = jnp.sum(e, axis=-1, keepdims=True)
        lse = jnp.log(z[:, 0]) + shift[:, 0]
        hot = ls[:, None] == jnp.arange(logits.shape[-1], dtype=ls.dtype)
        picked = jnp.sum(jnp.where(hot, logits, 0.0), axis=-1)
        parts.append(jnp.sum(jnp.where(vs, lse - picked, 0.0).astype(acc)))
        row_scale = jnp.where(vs, scale, 0.0).astype(x.dtype)[:, None]
        g = (e / z - hot.astype(e.dtype)) * row_scale
        dxs.append(jnp.matmul(g, weight))
        term = jnp.matmul(g.T, xs).astype(acc)
        dw = term if dw is None else dw + term
        if bias is not None:
            dbs.append(jnp.sum(g.astype(acc), axis=0))
    total = _pairwise_sum(parts)
    loss = (total * scale if reduction == "mean" else total).astype(x.dtype)
    dx = dxs[0] if len(dxs) == 1 else jnp.concatenate(dxs, axis=0)
    db = _pairwise_sum(dbs).astype(x.dtype) if dbs else None
    return loss, (dx, dw.astype(x.dtype), db)


def _linear_ce_bwd(ignore_index, reduction, chunk, res, ct):
    dx, dw, db = res
    return (dx * ct, dw * ct, None if db is None else db * ct, None)


def _make_linear_ce():
    from nova.custom_derivatives import custom_vjp

    f = custom_vjp(_linear_ce_value, nondiff_argnums=(4, 5, 6))
    f.defvjp(_linear_ce_fwd, _linear_ce_bwd)
    return f


_linear_ce = _make_linear_ce()


def linear_cross_entropy(x, weight, labels, bias=None, *, ignore_index: int = -100,
                         reduction: str = "mean", chunk_size: int | None = None) -> Array:
    """cross_entropy(x @ weight.T + bias, labels) without holding the whole logits.

    The fused linear cross-entropy of Liger Kernel (Hsu et al., arXiv 2410.10989, sec. 3.3): the
    rows of x are taken `chunk_size` at a time; each chunk's logits give its part of the loss
    and, in the same pass, its part of the gradients (d loss / d logits = softmax - onehot,
    times the reduction's scale), after which they are dead. The gradients are the residuals of
    a `nova.custom_vjp` whose bwd only scales them by the loss's cotangent, so a training step
    holds one chunk of logits instead of N x V of them and of their gradient (GPT-2 124M at
    8 x 1024 tokens: 1.65 GB each). Without a derivative (eval under jit) the gradient work is
    dead code and is removed.

    x: float (..., C); weight: (V, C), the layout of a Linear's weight in PyTorch (GPT-2's tied
    embedding); bias: (V,) or None; labels: integer x.shape[:-1]. ignore_index, reduction: as
    `cross_entropy`; reduction "none" (a cotangent per position) is the plain composition, with
    the logits whole. chunk_size: rows per chunk, default the largest power of two whose logits
    hold at most 2^26 elements (all rows when they fit); at most 64 chunks are made (a larger
    chunk is taken when more would be needed). Returns a scalar of x's dtype ("mean",
    "sum") or per-position losses (labels.shape).

    Raises TypeError for non-float x or weight, non-integer labels, a non-int ignore_index or
    chunk_size; ValueError for mismatched shapes, an unknown reduction, chunk_size < 1, or --
    when labels is concrete -- a label outside [0, V) other than ignore_index.
    """
    x = _float_input("linear_cross_entropy", x)
    weight = _float_input("linear_cross_entropy", weight)
    labels = asarray(labels)
    if not dtypes.is_int(labels.dtype):
        raise TypeError(f"linear_cross_entropy: labels must be integers, got {labels.dtype}"
                        f"{where_am_i()}")
    ignore_index = _int_arg("linear_cross_entropy", "ignore_index", ignore_index)
    if x.ndim == 0 or weight.ndim != 2 or weight.shape[1] != x.shape[-1]:
        raise ValueError(f"linear_cross_entropy: weight of shape {weight.shape} does not match "
                         f"x of shape {x.shape} (expected (V, {x.shape[-1] if x.ndim else 'C'})"
                         f"){where_am_i()}")
    if tuple(labels.shape) != tuple(x.shape[:-1]):
        raise ValueError(f"linear_cross_entropy: labels of shape {labels.shape} do not match x "
                         f"of shape {x.shape} (expected labels.shape == x.shape[:-1])"
                         f"{where_am_i()}")
    classes = weight.shape[0]
    if bias is not None:
        bias = _float_input("linear_cross_entropy", bias)
        if tuple(bias.shape) != (classes,):
            raise ValueError(f"linear_cross_entropy: bias of shape {bias.shape} does not match "
                             f"weight of shape {weight.shape} (expected ({classes},))"
                             f"{where_am_i()}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"linear_cross_entropy: reduction must be 'mean', 'sum' or 'none', got "
                         f"{reduction!r}{where_am_i()}")
    check_index_range("linear_cross_entropy", "labels", labels, classes, ignore_index)
    n = math.prod(x.shape[:-1])
    if reduction == "none" or n == 0:
        logits = jnp.matmul(x, weight.T)
        return cross_entropy(logits if bias is None else logits + bias, labels,
                             ignore_index=ignore_index, reduction=reduction)
    if chunk_size is None:
        chunk = _lce_chunk_rows(n, classes)
    else:
        chunk = _int_arg("linear_cross_entropy", "chunk_size", chunk_size)
        if chunk < 1:
            raise ValueError(f"linear_cross_entropy: chunk_size must be >= 1, got {chunk}"
                             f"{where_am_i()}")
        chunk = min(chunk, max(n, 1))
    # Every chunk is unrolled into the program, and the kernels that join the chunks (dx's
    # rows, the loss's parts) read one buffer per chunk: at most _LCE_MAX_CHUNKS of them.
    chunk = max(chunk, -(-n // _LCE_MAX_CHUNKS))
    dtype = dtypes.result_type(x.dtype, weight.dtype)
    x2 = x.reshape(n, x.shape[-1]).astype(dtype)
    return _linear_ce(x2, weight.astype(dtype), None if bias is None else bias.astype(dtype),
                      _wide_int(labels).reshape(n), ignore_index, reduction, chunk)
