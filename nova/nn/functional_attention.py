"""nova.nn.functional's attention: scaled_dot_product_attention and dot_product_attention."""

from __future__ import annotations

import math

import numpy as np

import nova.numpy as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.nn.functional_basic import _float_input, _pair, dropout
from nova.nn.functional_softmax import _row_max, softmax
from nova.numpy_impl.util import asarray, where_am_i
from nova.ops import lax
from nova.scipy.special import logsumexp


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
