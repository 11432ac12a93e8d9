"""Neural-network functions as compositions of nova.numpy ops (their gradients come from those).

Each is written in the plain spelling the compiler fuses (elementwise chains, row reductions,
max-subtract / exp / sum / divide for softmax and attention); there is no hand-written backward.
Stability: softmax, log_softmax, cross_entropy and attention subtract the row maximum (for the
first three its floor, through which no gradient flows) before exp, so logits of 1e4 do not
overflow; a row of attention scores that is masked everywhere gives zeros (value and gradient),
not NaN.
"""

from __future__ import annotations

import math
import operator

import numpy as np

import nova.numpy as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.numpy_impl.util import asarray, where_am_i
from nova.ops import lax
from nova.scipy.special import logsumexp

__all__ = [
    "avg_pool2d",
    "conv2d",
    "cross_entropy",
    "dot_product_attention",
    "dropout",
    "gelu",
    "layer_norm",
    "linear_cross_entropy",
    "log_softmax",
    "logsumexp",
    "max_pool2d",
    "one_hot",
    "relu",
    "scaled_dot_product_attention",
    "silu",
    "softmax",
]


def _int_arg(fn: str, name: str, value) -> int:
    """`value` as a Python int (ints and NumPy integers; not bools, floats or strings)."""
    if isinstance(value, bool):
        raise TypeError(f"{fn}: {name} must be an int, got bool {value!r}{where_am_i()}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be an int, got {type(value).__name__} {value!r}"
                        f"{where_am_i()}") from None


def _wide_int(labels: Array) -> Array:
    """Integer labels in a dtype that holds every class index: int32 for narrower ints (uint8
    labels compared against arange(300, uint8) would wrap around), int64 for uint32."""
    if labels.dtype.itemsize < 4:
        return labels.astype(jnp.int32)
    if labels.dtype == np.uint32:
        return labels.astype(jnp.int64)
    return labels


def check_index_range(fn: str, name: str, idx: Array, n: int, ignore: int | None = None) -> None:
    """Raises ValueError when a concrete (not traced) integer array `idx` holds a value outside
    [0, n) other than `ignore`. Under `jit` values are unknown and nothing is checked."""
    from nova.core.trace import Tracer

    if isinstance(idx, Tracer):
        return
    v = np.asarray(idx)
    bad = (v < 0) | (v >= n)
    if ignore is not None:
        bad &= v != ignore
    if bad.any():
        vals = sorted(set(v[bad].tolist()))
        raise ValueError(
            f"{fn}: {name} holds {int(bad.sum())} value(s) outside [0, {n})"
            f"{'' if ignore is None else f' other than ignore_index {ignore}'}: {vals[:8]}"
            f"{' ...' if len(vals) > 8 else ''}{where_am_i()}"
        )


def _float_input(name: str, x) -> Array:
    a = asarray(x)
    if not dtypes.is_float(a.dtype):
        raise TypeError(f"{name}: expected a floating-point array, got {a.dtype}{where_am_i()}")
    return a


def relu(x) -> Array:
    """max(x, 0) elementwise; x a float or integer array of any shape (the result has its
    dtype). NaN stays NaN (as JAX and PyTorch: a diverging model is not hidden); the gradient
    is 0 at 0 and at NaN (as jax.nn.relu). Raises TypeError for a boolean or complex array."""
    a = asarray(x)
    if not (dtypes.is_float(a.dtype) or dtypes.is_int(a.dtype)):
        raise TypeError(f"relu: expected a floating-point or integer array, got "
                        f"{a.dtype}{where_am_i()}")
    y = jnp.where(a > 0, a, 0)
    if dtypes.is_int(a.dtype):
        return y
    # NaN passes through a term without a gradient (x > 0 is false there).
    return y + lax.stop_gradient(jnp.where(jnp.isnan(a), a, 0))


def gelu(x, approximate: bool = False) -> Array:
    """Gaussian error linear unit (Hendrycks & Gimpel, arXiv 1606.08415), elementwise.

    approximate=False: x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) (PyTorch's default);
    approximate=True: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (GPT-2's "gelu_new",
    PyTorch's approximate="tanh", JAX's default). x: float array; result has its shape and dtype.
    """
    x = _float_input("gelu", x)
    if approximate:
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * (x * x * x))
        return 0.5 * x * (1.0 + jnp.tanh(inner))
    return 0.5 * x * (1.0 + lax.erf(x * (1.0 / math.sqrt(2.0))))


def silu(x) -> Array:
    """x * sigmoid(x) (Swish-1; Elfwing et al., arXiv 1702.03118), elementwise; x float."""
    x = _float_input("silu", x)
    return x * lax.logistic(x)


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


def broadcast_where(fn: str, where, shape: tuple):
    """A `where=` mask as a bool Array of `shape` (None stays None): what softmax, log_softmax,
    logmeanexp and standardize take. Raises TypeError for a non-bool mask, ValueError for one
    that does not broadcast to `shape`."""
    if where is None:
        return None
    m = asarray(where)
    if not dtypes.is_bool(m.dtype):
        raise TypeError(f"{fn}: where must be a bool array, got {m.dtype}{where_am_i()}")
    try:
        np.broadcast_shapes(tuple(m.shape), tuple(shape))
    except ValueError:
        raise ValueError(f"{fn}: where of shape {tuple(m.shape)} does not broadcast to x's "
                         f"shape {tuple(shape)}{where_am_i()}") from None
    return jnp.broadcast_to(m, shape)


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


def layer_norm(x, weight=None, bias=None, eps: float = 1e-5) -> Array:
    """Layer normalization over the last axis (Ba, Kiros, Hinton, arXiv 1607.06450).

    (x - mean) / sqrt(var + eps) * weight + bias, with the biased variance computed in two passes.
    x: float (..., D); weight, bias: (D,) or None; eps >= 0. Raises ValueError when weight or bias
    is not of shape (D,) or eps < 0, TypeError for non-float x.
    """
    x = _float_input("layer_norm", x)
    weight = None if weight is None else asarray(weight)
    bias = None if bias is None else asarray(bias)
    if not float(eps) >= 0.0:
        raise ValueError(f"layer_norm: eps must be >= 0, got {eps}{where_am_i()}")
    d = x.shape[-1] if x.ndim else None
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and (x.ndim == 0 or tuple(p.shape) != (d,)):
            raise ValueError(
                f"layer_norm: {name} must have shape ({d},) to match x of shape {x.shape}, got "
                f"{tuple(p.shape)}{where_am_i()}"
            )
    mean = jnp.mean(x, axis=-1, keepdims=True)
    xc = x - mean
    var = jnp.mean(xc * xc, axis=-1, keepdims=True)
    y = xc * lax.rsqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def one_hot(labels, num_classes: int, dtype=jnp.float32) -> Array:
    """labels (...) integer -> (..., num_classes) with 1 at each label and 0 elsewhere.

    A label outside [0, num_classes) gives a row of zeros (as jax.nn.one_hot). Raises TypeError
    for non-integer labels or a num_classes that is not an int, ValueError for num_classes < 1.
    """
    labels = asarray(labels)
    if not dtypes.is_int(labels.dtype):
        raise TypeError(f"one_hot: labels must be integers, got {labels.dtype}{where_am_i()}")
    num_classes = _int_arg("one_hot", "num_classes", num_classes)
    if num_classes < 1:
        raise ValueError(f"one_hot: num_classes must be >= 1, got {num_classes}{where_am_i()}")
    labels = _wide_int(labels)
    classes = jnp.arange(num_classes, dtype=labels.dtype)
    return (labels[..., None] == classes).astype(dtype)


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


def dropout(x, rate: float, key) -> Array:
    """Inverted dropout (Srivastava et al., JMLR 2014): each element zeroed with probability
    `rate`, the kept ones scaled by 1/(1 - rate), so the expectation is x.

    x: float array; rate: Python float in [0, 1); key: a nova.random key (the same key gives the
    same mask). rate == 0 returns x unchanged. Raises ValueError for a rate outside [0, 1) or a
    missing key when rate > 0.
    """
    x = _float_input("dropout", x)
    rate = float(rate)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout: rate must be in [0, 1), got {rate}{where_am_i()}")
    if rate == 0.0:
        return x
    if key is None:
        raise ValueError(f"dropout: rate {rate} > 0 needs a nova.random key{where_am_i()}")
    from nova import random

    keep = random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x * (1.0 / (1.0 - rate)), 0.0)


def _attention_mask(mask, causal: bool, tq: int, tk: int):
    """(boolean keep-mask or None, additive float mask or None)."""
    keep = None
    additive = None
    if mask is not None:
        mask = asarray(mask)
        if dtypes.is_bool(mask.dtype):
            keep = mask
        elif dtypes.is_float(mask.dtype):
            additive = mask
        else:
            raise TypeError(
                f"scaled_dot_product_attention: mask must be bool (True = attend) or float "
                f"(added to the scores), got {mask.dtype}{where_am_i()}"
            )
    if causal:
        # Top-left aligned lower triangle, as PyTorch's is_causal: query i sees keys j <= i.
        tri = jnp.arange(tq)[:, None] >= jnp.arange(tk)[None, :]
        keep = tri if keep is None else jnp.logical_and(keep, tri)
    return keep, additive


def scaled_dot_product_attention(q, k, v, *, causal: bool = False, mask=None, scale=None,
                                 dropout_p: float = 0.0, key=None) -> Array:
    """softmax(q @ k^T * scale + mask) @ v (Vaswani et al., "Attention is all you need", eq. 1).

    q: (..., Tq, D), k: (..., Tk, D), v: (..., Tk, Dv), one float dtype; batch dimensions
    broadcast. Result: (..., Tq, Dv). scale: defaults to 1/sqrt(D). causal: query i attends to
    keys j <= i (PyTorch's is_causal). mask: broadcastable to (..., Tq, Tk); bool (True = attend)
    or float (added to the scores, PyTorch's attn_mask); combined with `causal` when both are
    given. A query row that may attend to nothing gives zeros and zero gradients.
    dropout_p: probability of zeroing each attention weight (the kept ones scaled by
    1/(1 - dropout_p)); needs `key` (a nova.random key) when > 0.
    Raises ValueError for mismatched shapes, D = 0, a mask that does not broadcast to (Tq, Tk) or
    dropout_p outside [0, 1); TypeError for non-float inputs, q, k, v of different dtypes or a bad
    mask dtype.
    """
    q = _float_input("scaled_dot_product_attention", q)
    k = _float_input("scaled_dot_product_attention", k)
    v = _float_input("scaled_dot_product_attention", v)
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"scaled_dot_product_attention: q, k and v must have one dtype, got "
                        f"{q.dtype}, {k.dtype}, {v.dtype}{where_am_i()}")
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2 or q.shape[-1] != k.shape[-1] \
            or k.shape[-2] != v.shape[-2]:
        raise ValueError(
            "scaled_dot_product_attention: expected q (..., Tq, D), k (..., Tk, D), "
            f"v (..., Tk, Dv); got q {q.shape}, k {k.shape}, v {v.shape}{where_am_i()}"
        )
    if q.shape[-1] == 0:
        raise ValueError(f"scaled_dot_product_attention: the head dimension D of q {q.shape} and "
                         f"k {k.shape} is 0{where_am_i()}")
    if not 0.0 <= float(dropout_p) < 1.0:
        raise ValueError(f"scaled_dot_product_attention: dropout_p must be in [0, 1), got "
                         f"{dropout_p}{where_am_i()}")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    tq, tk = q.shape[-2], k.shape[-2]
    keep, additive = _attention_mask(mask, causal, tq, tk)
    if mask is not None:
        ms = tuple(asarray(mask).shape)
        try:
            np.broadcast_shapes(ms, (tq, tk))
        except ValueError:
            raise ValueError(f"scaled_dot_product_attention: mask of shape {ms} does not "
                             f"broadcast to the scores' (..., Tq, Tk) = (..., {tq}, {tk})"
                             f"{where_am_i()}") from None
    s = (q @ jnp.swapaxes(k, -1, -2)) * scale
    if additive is not None:
        s = s + additive
    if keep is not None:
        s = jnp.where(keep, s, -jnp.inf)
    m = _row_max(s, -1)
    p = jnp.exp(s - m)
    denom = jnp.sum(p, axis=-1, keepdims=True)
    p = p / jnp.where(denom == 0, 1.0, denom)
    if dropout_p > 0.0:
        p = dropout(p, dropout_p, key)
    return p @ v


def _lead4(fn: str, name: str, t) -> Array:
    """t with leading axes of length 1 added up to 4 dimensions; ValueError past 4."""
    t = asarray(t)
    if t.ndim > 4:
        raise ValueError(f"{fn}: {name} must have at most 4 dimensions, got shape {t.shape}"
                         f"{where_am_i()}")
    return jnp.reshape(t, (1,) * (4 - t.ndim) + tuple(t.shape))


def _grouped(fn: str, name: str, t: Array, full: tuple, k: int) -> Array:
    """A bias or mask (B|1, N|1, T|1, S|1) as (B|1, K|1, G|1, T|1, S|1) for heads grouped
    (K, G), G = N // K; ValueError when it does not broadcast to full = (B, N, T, S)."""
    try:
        np.broadcast_shapes(tuple(t.shape), full)
    except ValueError:
        raise ValueError(f"{fn}: {name} of shape {tuple(t.shape)} does not broadcast to the "
                         f"logits' (B, N, T, S) = {full}{where_am_i()}") from None
    b, n, tq, s = t.shape
    if n == 1:
        return jnp.reshape(t, (b, 1, 1, tq, s))
    return jnp.reshape(t, (b, k, n // k, tq, s))


def _seq_lengths(fn: str, name: str, lengths, batch: int):
    if lengths is None:
        return None
    lengths = asarray(lengths)
    if not dtypes.is_int(lengths.dtype) or tuple(lengths.shape) != (batch,):
        raise ValueError(f"{fn}: {name} must be an integer array of shape ({batch},), got "
                         f"{lengths.dtype} of shape {tuple(lengths.shape)}{where_am_i()}")
    return lengths


def _window(fn: str, local_window_size):
    """local_window_size as (left, right), two ints >= 0."""
    if isinstance(local_window_size, int | np.integer):
        local_window_size = (local_window_size, local_window_size)
    return _pair(f"{fn}: local_window_size", local_window_size, low=0)


def _keep_mask(mask, is_causal, window, q_len, kv_len, t, s):
    """Which logits take part (bool, broadcastable to (B, K, G, T, S)) or None: the
    intersection of the (grouped) mask, the causal triangle, the local window and the
    padding."""
    parts = [] if mask is None else [mask]
    qi = jnp.arange(t)[:, None]
    kj = jnp.arange(s)[None, :]
    if is_causal:
        parts.append(qi >= kj)  # top-left aligned: query i sees keys j <= i
    if window is not None:
        left, right = window
        parts.append((kj >= qi - left) & (kj <= qi + right))
    if q_len is not None:
        parts.append((jnp.arange(t)[None, :, None] < q_len[:, None, None])[:, None, None])
    if kv_len is not None:
        parts.append((jnp.arange(s)[None, None, :] < kv_len[:, None, None])[:, None, None])
    keep = None
    for p in parts:
        keep = p if keep is None else jnp.logical_and(keep, p)
    return keep


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal: bool = False, query_seq_lengths=None,
                          key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual: bool = False):
    """softmax(Q K^T * scale + bias) V per head, in jax.nn.dot_product_attention's layout
    (Vaswani et al., "Attention is all you need", eq. 1; grouped-query attention, Ainslie et
    al., arXiv 2305.13245).

    query: (B, T, N, H) or (T, N, H); key, value: (B, S, K, H) or (S, K, H), one float dtype,
    with K dividing N: query head n reads key/value head n // (N / K) (K = N is multi-head, K = 1
    multi-query attention). bias: float, added to the logits; mask: bool, True = attend; both of
    at most 4 dimensions (leading ones added) broadcastable to (B, N, T, S). scale: defaults to
    1 / sqrt(H). is_causal: query i attends to keys j <= i. query_seq_lengths,
    key_value_seq_lengths: integer (B,), the valid prefix of each batch row's queries / keys
    (output rows past a query length are 0). local_window_size: int w or (left, right): query
    i attends to keys i - left ... i + right. Logits are computed and normalized in float32 at
    least (bfloat16 and float16 inputs too); masked logits take a large finite negative value,
    so a query that may attend to nothing averages the values uniformly, as JAX's does.
    implementation: None or "xla" (both run Nova's kernels).

    Returns query's shape and dtype; with return_residual, also the logsumexp of each row of
    logits, (B, T, N) or (T, N), without a gradient (FlashAttention-2, Dao, arXiv 2307.08691,
    sec. 3.1.1). Raises ValueError for mismatched shapes, N not a multiple of K, H = 0, bad
    sequence lengths or window, or an unknown implementation; NotImplementedError for "cudnn"
    (Nova generates its own kernels); TypeError for non-float inputs, inputs of different
    dtypes or a non-bool mask.
    """
    fn = "dot_product_attention"
    if implementation == "cudnn":
        raise NotImplementedError(f"{fn}: implementation='cudnn' is not available: Nova runs "
                                  f"its own generated kernels; use None or 'xla'{where_am_i()}")
    if implementation not in (None, "xla"):
        raise ValueError(f"{fn}: implementation must be None or 'xla', got "
                         f"{implementation!r}{where_am_i()}")
    q, k, v = (_float_input(fn, t) for t in (query, key, value))
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"{fn}: query, key and value must have one dtype, got {q.dtype}, "
                        f"{k.dtype}, {v.dtype}{where_am_i()}")
    out_shape = tuple(q.shape)
    if not (3 <= q.ndim <= 4 and 3 <= k.ndim <= 4 and v.ndim == k.ndim):
        raise ValueError(f"{fn}: expected query (B, T, N, H) and key, value (B, S, K, H) "
                         f"(or without B); got {q.shape}, {k.shape}, {v.shape}{where_am_i()}")
    q, k, v = (_lead4(fn, name, t) for name, t in (("query", q), ("key", k), ("value", v)))
    b, s, kh, h = k.shape
    _, t, n, _ = q.shape
    if tuple(v.shape) != tuple(k.shape) or q.shape[0] != b or q.shape[3] != h:
        raise ValueError(f"{fn}: expected query (B, T, N, H) and key, value (B, S, K, H) with "
                         f"one B and H; got {out_shape}, {k.shape}, {v.shape}{where_am_i()}")
    if h == 0 or n % kh:
        raise ValueError(f"{fn}: the head size H must be > 0 and the query heads N a multiple "
                         f"of the key/value heads K; got H = {h}, N = {n}, K = {kh}"
                         f"{where_am_i()}")
    full = (b, n, t, s)
    if bias is not None:
        bias = _grouped(fn, "bias", _lead4(fn, "bias", _float_input(fn, bias)), full, kh)
    if mask is not None:
        mask = asarray(mask)
        if not dtypes.is_bool(mask.dtype):
            raise TypeError(f"{fn}: mask must be bool (True = attend), got {mask.dtype}; pass "
                            f"an additive mask as bias{where_am_i()}")
        mask = _grouped(fn, "mask", _lead4(fn, "mask", mask), full, kh)
    q_len = _seq_lengths(fn, "query_seq_lengths", query_seq_lengths, b)
    kv_len = _seq_lengths(fn, "key_value_seq_lengths", key_value_seq_lengths, b)
    window = None if local_window_size is None else _window(fn, local_window_size)
    scale = 1.0 / math.sqrt(h) if scale is None else scale

    acc = dtypes.result_type(q.dtype, jnp.float32)
    qg = jnp.reshape(q, (b, t, kh, n // kh, h)).astype(acc)
    logits = jnp.einsum("btkgh,bskh->bkgts", qg, k.astype(acc)) * scale
    if bias is not None:
        logits = (logits + bias).astype(acc)
    keep = _keep_mask(mask, is_causal, window, q_len, kv_len, t, s)
    if keep is not None:
        # A finite stand-in for -inf (within float32's range), as JAX's.
        logits = jnp.where(keep, logits, -0.7 * float(np.finfo(np.float32).max))
    probs = softmax(logits, axis=-1).astype(k.dtype)
    out = jnp.reshape(jnp.einsum("bkgts,bskh->btkgh", probs, v), (b, t, n, h))
    if q_len is not None:
        valid = jnp.arange(t)[None, :] < q_len[:, None]
        out = out * valid[:, :, None, None].astype(out.dtype)
    out = jnp.reshape(out, out_shape)
    if not return_residual:
        return out
    lse = jnp.transpose(logsumexp(logits, axis=-1), (0, 3, 1, 2)).astype(k.dtype)
    return out, lax.stop_gradient(jnp.reshape(lse, out_shape[:-1]))


# --- convolutions and pooling (PyTorch's torch.nn.functional names and layouts) -----------------


def _pair(name: str, v, n: int = 2, low: int = 1) -> tuple:
    """v (an int or n ints, each >= low) as n ints; ValueError otherwise."""
    vals = (v,) * n if isinstance(v, int | np.integer) else tuple(v)
    if len(vals) != n or any(not isinstance(k, int | np.integer) or isinstance(k, bool)
                             or k < low for k in vals):
        kind = "positive" if low == 1 else "non-negative"
        raise ValueError(f"{name} must be an int or {n} {kind} ints, got {v!r}"
                         f"{where_am_i()}")
    return tuple(int(k) for k in vals)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Array:
    """2-d convolution (cross-correlation), as torch.nn.functional.conv2d: x (N, C, H, W) or
    (C, H, W), weight (O, C / groups, kH, kW), bias (O,) or None -> (N, O, H', W'). stride,
    padding (ints, pairs, or "same" / "valid") and dilation per spatial axis. Runs
    lax.conv_general_dilated (im2col + Nova's GEMM). Raises ValueError / ShapeError for
    mismatched shapes or bad settings."""
    x, w = asarray(x), asarray(weight)
    unbatched = x.ndim == 3
    if unbatched:
        x = jnp.expand_dims(x, 0)
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"conv2d: x must be (N, C, H, W) or (C, H, W) and weight (O, C/groups, "
                         f"kH, kW); got {x.shape} and {w.shape}{where_am_i()}")
    s = _pair("conv2d: stride", stride)
    d = _pair("conv2d: dilation", dilation)
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"conv2d: padding must be 'same', 'valid', an int or a pair, got "
                             f"{padding!r}{where_am_i()}")
        pad = padding.upper()
    else:
        pad = [(p, p) for p in _pair("conv2d: padding", padding, low=0)]
    y = lax.conv_general_dilated(x, w, s, pad, rhs_dilation=d, feature_group_count=groups)
    if bias is not None:
        b = asarray(bias)
        if b.shape != (w.shape[0],):
            raise ValueError(f"conv2d: bias of shape {b.shape} for {w.shape[0]} output "
                             f"channels{where_am_i()}")
        y = y + jnp.reshape(b, (1, -1, 1, 1))
    return y[0] if unbatched else y


def _pool2d(name, x, kernel_size, stride, padding, computation, init):
    x = asarray(x)
    if x.ndim not in (3, 4):
        raise ValueError(f"{name}: x must be (N, C, H, W) or (C, H, W), got {x.shape}"
                         f"{where_am_i()}")
    k = _pair(f"{name}: kernel_size", kernel_size)
    s = k if stride is None else _pair(f"{name}: stride", stride)
    p = _pair(f"{name}: padding", padding, low=0)
    if any(2 * pp > kk for pp, kk in zip(p, k, strict=True)):
        raise ValueError(f"{name}: padding {p} must be at most half the kernel {k}"
                         f"{where_am_i()}")
    lead = x.ndim - 2
    return lax.reduce_window(x, init, computation, (1,) * lead + k, (1,) * lead + s,
                             [(0, 0)] * lead + [(q, q) for q in p])


def max_pool2d(x, kernel_size, stride=None, padding=0) -> Array:
    """The maximum over each kH x kW window, as torch.nn.functional.max_pool2d: x (N, C, H, W)
    or (C, H, W); stride defaults to the kernel size; padding (at most half the kernel) counts
    as -inf. The gradient goes to each window's maximum (the first one among ties, as PyTorch).
    Raises ValueError for bad sizes."""
    x = asarray(x)
    return _pool2d("max_pool2d", x, kernel_size, stride, padding, lax.max,
                   -np.inf if dtypes.is_float(x.dtype) else np.iinfo(x.dtype).min)


def avg_pool2d(x, kernel_size, stride=None, padding=0, count_include_pad: bool = True) -> Array:
    """The mean over each kH x kW window, as torch.nn.functional.avg_pool2d (zero padding
    counted in the mean unless count_include_pad=False). Raises ValueError for bad sizes."""
    x = asarray(x)
    if not dtypes.is_float(x.dtype):
        raise TypeError(f"avg_pool2d: x must be a float array, got {x.dtype}{where_am_i()}")
    k = _pair("avg_pool2d: kernel_size", kernel_size)
    total = _pool2d("avg_pool2d", x, kernel_size, stride, padding, lax.add, 0.0)
    if count_include_pad or _pair("avg_pool2d: padding", padding, low=0) == (0, 0):
        return total / float(k[0] * k[1])
    ones = jnp.ones((1, *x.shape[-2:]), x.dtype)
    count = _pool2d("avg_pool2d", ones, kernel_size, stride, padding, lax.add, 0.0)
    return total / count
