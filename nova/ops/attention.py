"""Fused scaled-dot-product attention: flash_attention_fwd and flash_attention_bwd.

Users never call these: the compiler's recognition pass (nova/compiler/attention.py) replaces the
attention subgraph that users write with nova.numpy (Q·Kᵀ, scale, mask, softmax, ·V) and the
backward that the VJP rules of those ops produce by one forward and one backward equation, which
the CPU backend runs as flash-style kernels (FlashAttention-2: T. Dao, "FlashAttention-2: Faster
Attention with Better Parallelism and Work Partitioning", arXiv 2307.08691, Algorithms 1 and 2).

Shapes (any number of leading batch dims `...`, shared by all operands):
    q: (..., Tq, D)   k: (..., Tk, D)   v: (..., Tk, Dv)
    o: (..., Tq, Dv)  lse: (..., Tq)    (float32/float64 like q)
Logits are s = scale * q·kᵀ, then masked by `mask_kind`:
    "none"    no mask;
    "causal"  key j is visible from query i iff j <= i (Tq == Tk), others are -inf;
    "select"  a bool operand `mask` (Tq, Tk): s where mask else `fill` (fill may be -inf);
    "add"     a float operand `mask` (Tq, Tk) added to s (its -inf entries hide keys).
A row whose logits are all -inf (fully masked) gives o = 0 and lse = -inf, not NaN.

The backward takes delta = rowsum(dO ∘ O) - dLSE (FlashAttention-2's D, with the cotangent of lse
folded in) as an operand, so it is one ordinary row reduction before the fused kernel.
"""

from __future__ import annotations

import numpy as np

from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.core.ir import TensorType
from nova.core.primitive import Cost, FusionKind, Primitive, Template, broadcast_batched
from nova.ops import elementwise as ew
from nova.ops import reduction as red
from nova.ops import structural as st
from nova.ops.contraction import dot_general

MASK_KINDS = ("none", "causal", "select", "add")


def _check_params(mask_kind, scale, fill):
    if mask_kind not in MASK_KINDS:
        raise ValueError(f"flash attention: mask_kind must be one of {MASK_KINDS}, "
                         f"got {mask_kind!r}")
    if not np.isfinite(scale):
        raise ValueError(f"flash attention: scale must be finite, got {scale}")
    if np.isnan(fill):
        raise ValueError("flash attention: fill must not be NaN")


def _check_qkv(q, k, v, mask, mask_kind, name):
    for t, arg in ((q, "q"), (k, "k"), (v, "v")):
        if t.dtype not in (dtypes.float32, dtypes.float64):
            raise TypeError(f"{name}: {arg} must be float32 or float64, got {t.dtype}")
        if t.ndim < 2:
            raise ShapeError(f"{name}: {arg} must have at least 2 dims (T, D), got {t.shape}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"{name}: q, k, v dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.ndim == k.ndim == v.ndim) or not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ShapeError(f"{name}: q, k, v batch dims differ: {q.shape}, {k.shape}, {v.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ShapeError(f"{name}: q and k head dims differ: {q.shape} and {k.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ShapeError(f"{name}: k and v sequence lengths differ: {k.shape} and {v.shape}")
    tq, tk = q.shape[-2], k.shape[-2]
    if mask_kind == "causal" and tq != tk:
        raise ShapeError(f"{name}: a causal mask needs Tq == Tk, got q {q.shape} and k {k.shape}")
    if mask_kind in ("select", "add"):
        if mask is None:
            raise TypeError(f"{name}: mask_kind {mask_kind!r} needs a mask operand")
        want = dtypes.bool_ if mask_kind == "select" else q.dtype
        if mask.shape != (tq, tk) or mask.dtype != want:
            raise ShapeError(f"{name}: mask must be {want} of shape {(tq, tk)}, got "
                             f"{mask.dtype} {mask.shape}")
    elif mask is not None:
        raise TypeError(f"{name}: mask_kind {mask_kind!r} takes no mask operand")


def _fwd_rule(q, k, v, *mask, scale, mask_kind, fill):
    _check_params(mask_kind, scale, fill)
    _check_qkv(q, k, v, mask[0] if mask else None, mask_kind, "flash_attention_fwd")
    return (TensorType(q.shape[:-1] + v.shape[-1:], q.dtype), TensorType(q.shape[:-1], q.dtype))


def _bwd_rule(q, k, v, lse, do, delta, *mask, scale, mask_kind, fill):
    _check_params(mask_kind, scale, fill)
    _check_qkv(q, k, v, mask[0] if mask else None, mask_kind, "flash_attention_bwd")
    o_shape = q.shape[:-1] + v.shape[-1:]
    for t, arg, shape in ((lse, "lse", q.shape[:-1]), (do, "do", o_shape),
                          (delta, "delta", q.shape[:-1])):
        if t.shape != shape or t.dtype != q.dtype:
            raise ShapeError(f"flash_attention_bwd: {arg} must be {q.dtype} of shape {shape}, "
                             f"got {t.dtype} {t.shape}")
    return (q, k, v)


# --- NumPy reference (the oracle; float64 inside, one rounding at the end) -----------------------


def _logits(q, k, mask, scale, mask_kind, fill):
    s = scale * np.einsum("...id,...jd->...ij", q.astype(np.float64), k.astype(np.float64))
    tq, tk = s.shape[-2:]
    if mask_kind == "causal":
        s = np.where(np.tril(np.ones((tq, tk), bool)), s, -np.inf)
    elif mask_kind == "select":
        s = np.where(mask, s, fill)
    elif mask_kind == "add":
        s = s + mask.astype(np.float64)
    return s


def _probs(s, lse):
    """exp(s - lse) with the rows of lse = -inf (fully masked) all zero."""
    dead = np.isneginf(lse)[..., None]
    with np.errstate(invalid="ignore"):
        return np.where(dead, 0.0, np.exp(s - np.where(dead, 0.0, lse[..., None])))


def _fwd_impl(q, k, v, *mask, scale, mask_kind, fill):
    s = _logits(q, k, mask[0] if mask else None, scale, mask_kind, fill)
    m = s.max(-1, keepdims=True, initial=-np.inf)
    m_safe = np.where(np.isneginf(m), 0.0, m)
    e = np.exp(s - m_safe)
    l_ = e.sum(-1, keepdims=True)
    # Only a fully masked row (a sum of exactly 0) gives zeros; a NaN row stays NaN, as in
    # the compiled kernels and eagerly (`l_ > 0` also zeroed NaN rows: found by review).
    live = l_ != 0
    with np.errstate(divide="ignore", invalid="ignore"):
        o = np.where(live, (e @ v.astype(np.float64)) / np.where(live, l_, 1.0), 0.0)
        lse = np.where(live[..., 0], m_safe[..., 0] + np.log(l_[..., 0]), -np.inf)
    return o.astype(q.dtype), lse.astype(q.dtype)


def _bwd_impl(q, k, v, lse, do, delta, *mask, scale, mask_kind, fill):
    s = _logits(q, k, mask[0] if mask else None, scale, mask_kind, fill)
    p = _probs(s, lse.astype(np.float64))
    do64 = do.astype(np.float64)
    dv = np.swapaxes(p, -1, -2) @ do64
    dp = do64 @ np.swapaxes(v.astype(np.float64), -1, -2)
    ds = p * (dp - delta.astype(np.float64)[..., None])
    if mask_kind == "select":  # a filled logit does not depend on q or k
        ds = np.where(mask[0], ds, 0.0)
    dq = scale * (ds @ k.astype(np.float64))
    dk = scale * (np.swapaxes(ds, -1, -2) @ q.astype(np.float64))
    return dq.astype(q.dtype), dk.astype(q.dtype), dv.astype(q.dtype)


# --- the same computation with Nova ops (T x T values; only for derivatives of the fused ops) ----


def _bt(x, y):
    """x @ yᵀ over the last two dims, batched over the leading ones."""
    nb = x.ndim - 2
    b = tuple(range(nb))
    return dot_general(x, y, (((nb + 1,), (nb + 1,)), (b, b)))


def _tb(x, y):
    """xᵀ @ y over the last two dims."""
    nb = x.ndim - 2
    b = tuple(range(nb))
    return dot_general(x, y, (((nb,), (nb,)), (b, b)))


def _mm(x, y):
    nb = x.ndim - 2
    b = tuple(range(nb))
    return dot_general(x, y, (((nb + 1,), (nb,)), (b, b)))


def _rows(x, like):
    """A per-row value (..., T) broadcast along the last axis of `like` (..., T, T')."""
    return st.broadcast_in_dim(x, like.shape, tuple(range(x.ndim)))


def _splat(value, like):
    return st.full(like.shape, value, like.dtype)


def _nova_probs(q, k, lse, mask, scale, mask_kind, fill):
    """(P, keep): P = exp(s - lse) with Nova ops (0 where lse is -inf); keep is the bool
    (..., Tq, Tk) select mask for mask_kind "select" (filled logits depend on neither q nor k),
    else None."""
    s = _bt(q, k)
    s = ew.mul(s, _splat(scale, s))
    shape = s.shape
    keep = None
    if mask_kind in ("causal", "select"):
        if mask_kind == "causal":
            nb = len(shape) - 2
            keep = ew.ge(st.iota(dtypes.int32, shape, nb), st.iota(dtypes.int32, shape, nb + 1))
            fill_v = -np.inf
        else:
            keep = st.broadcast_in_dim(mask, shape, (len(shape) - 2, len(shape) - 1))
            fill_v = fill
        s = ew.select(keep, s, _splat(fill_v, s))
    elif mask_kind == "add":
        s = ew.add(s, st.broadcast_in_dim(mask, shape, (len(shape) - 2, len(shape) - 1)))
    dead = _rows(ew.isinf(lse), s)  # lse is never +inf: isinf marks the fully masked rows
    safe_lse = ew.select(ew.isinf(lse), _splat(0.0, lse), lse)
    p = ew.exp(ew.sub(s, _rows(safe_lse, s)))
    return ew.select(dead, _splat(0.0, s), p), (keep if mask_kind == "select" else None)


def _kept(x, keep):
    return x if keep is None else ew.select(keep, x, _splat(0.0, x))


def _fwd_vjp(cts, q, k, v, *mask, out, scale, mask_kind, fill):
    """Through flash_attention_bwd: delta = rowsum(dO ∘ O) - dLSE (d lse / d s = P folds the
    cotangent of lse into FlashAttention-2's D)."""
    do, dlse = cts
    o, lse = out
    delta = ew.sub(red.reduce_sum(ew.mul(do, o), (o.ndim - 1,)), dlse)
    dq, dk, dv = flash_attention_bwd_p.bind(q, k, v, lse, do, delta, *mask, scale=scale,
                                            mask_kind=mask_kind, fill=fill)
    if mask_kind != "add":
        return (dq, dk, dv) + (None,) * len(mask)
    # An additive mask's cotangent is dS summed over the batch (one T x T value per batch
    # element: only direct calls with a differentiated mask get here, never recognized code).
    p, _ = _nova_probs(q, k, lse, mask[0], scale, mask_kind, fill)
    dp = _bt(do, v)
    ds = ew.mul(p, ew.sub(dp, _rows(delta, dp)))
    return dq, dk, dv, red.reduce_sum(ds, tuple(range(ds.ndim - 2)))


def _bwd_vjp(cts, q, k, v, lse, do, delta, *mask, out, scale, mask_kind, fill):
    """Reverse mode through the backward's formulas, treating lse, do and delta as independent:
    P = exp(s - lse), dP = dO vᵀ, dS = P ∘ (dP - delta), dQ = c dS k, dK = c dSᵀ q,
    dV = Pᵀ dO."""
    gq, gk, gv = cts
    m = mask[0] if mask else None
    c = scale
    p, keep = _nova_probs(q, k, lse, m, scale, mask_kind, fill)
    dp = _bt(do, v)
    dp_minus = ew.sub(dp, _rows(delta, dp))
    ds = _kept(ew.mul(p, dp_minus), keep)
    g_ds = _kept(ew.mul(ew.add(_bt(gq, k), _bt(q, gk)), _splat(c, p)), keep)  # dQ and dK
    g_q = ew.mul(_mm(ds, gk), _splat(c, q))
    g_k = ew.mul(_tb(ds, gq), _splat(c, k))
    g_p = ew.add(_bt(do, gv), ew.mul(g_ds, dp_minus))  # from dV and dS
    g_do = _mm(p, gv)
    g_dp = ew.mul(g_ds, p)
    last = (p.ndim - 1,)
    g_delta = ew.neg(red.reduce_sum(g_dp, last))
    g_do = ew.add(g_do, _mm(g_dp, v))
    g_v = _tb(g_dp, do)
    g_s = ew.mul(g_p, p)  # P = exp(s - lse): d/ds = P, d/dlse = -P
    g_lse = ew.neg(red.reduce_sum(g_s, last))
    g_s = _kept(g_s, keep)
    g_q = ew.add(g_q, ew.mul(_mm(g_s, k), _splat(c, q)))
    g_k = ew.add(g_k, ew.mul(_tb(g_s, q), _splat(c, k)))
    if mask_kind == "add":  # s = c q·kᵀ + mask: the mask's cotangent is g_s summed over batch
        g_mask = red.reduce_sum(g_s, tuple(range(g_s.ndim - 2)))
        return g_q, g_k, g_v, g_lse, g_do, g_delta, g_mask
    return (g_q, g_k, g_v, g_lse, g_do, g_delta) + (None,) * len(mask)


# --- cost ---------------------------------------------------------------------------------------


def _pairs(q, k, mask_kind):
    """Visible (query, key) pairs per batch element (the causal kernels skip the rest)."""
    tq, tk = q.shape[-2], k.shape[-2]
    return tq * (tq + 1) // 2 if mask_kind == "causal" else tq * tk


def _batch(q):
    return int(np.prod(q.shape[:-2], dtype=np.int64))


def _fwd_cost(in_types, out_types, *, scale, mask_kind, fill):
    q, k, v = in_types[:3]
    pairs = _batch(q) * _pairs(q, k, mask_kind)
    flops = pairs * (2 * q.shape[-1] + 2 * v.shape[-1] + 4)  # q·k, p·v, scale/exp/sum
    return Cost(flops, sum(t.nbytes for t in in_types) + sum(t.nbytes for t in out_types))


def _bwd_cost(in_types, out_types, *, scale, mask_kind, fill):
    q, k, v = in_types[:3]
    pairs = _batch(q) * _pairs(q, k, mask_kind)
    flops = pairs * (6 * q.shape[-1] + 4 * v.shape[-1] + 6)  # s, dK, dQ; dP, dV; p, ds
    return Cost(flops, sum(t.nbytes for t in in_types) + sum(t.nbytes for t in out_types))


_PARAMS = {"scale": float, "mask_kind": str, "fill": float}


def _attention_batch(prim, n_main):
    """vmap of the flash kernels: the mapped axis is one more leading batch dimension of q, k,
    v (and lse, do, delta). The (Tq, Tk) mask is shared by a call's batch elements, so a mask
    mapped per example gives one call per example, the results stacked."""

    def batch(args, batched, **params):
        args = list(args)
        size = next(a.shape[0] for a, m in zip(args, batched, strict=True) if m)
        main = broadcast_batched(args[:n_main], list(batched[:n_main]), size)
        if not any(batched[n_main:]):
            return prim.bind(*main, *args[n_main:], **params)
        mask = broadcast_batched(args[n_main:], list(batched[n_main:]), size)
        outs = [prim.bind(*(_example(x, b) for x in main + mask), **params)
                for b in range(size)]
        from nova.ops.slicing import concatenate

        return tuple(concatenate([st.reshape(o[i], (1, *o[i].shape)) for o in outs], 0)
                     for i in range(len(outs[0])))

    return batch


def _example(x, b):
    """Example b of a value mapped along its first axis."""
    from nova.ops.slicing import slice as slice_

    part = slice_(x, (b,) + (0,) * (x.ndim - 1), (b + 1, *x.shape[1:]))
    return st.reshape(part, x.shape[1:])


flash_attention_fwd_p = Primitive(
    "flash_attention_fwd",
    shape_rule=_fwd_rule,
    impl=_fwd_impl,
    vjp=_fwd_vjp,
    jvp=None,
    fusion=FusionKind.OPAQUE,
    kernel=Template("attention"),
    cost=_fwd_cost,
    multiple_results=True,
    param_types=_PARAMS,
    batch=lambda args, batched, **params: _attention_batch(flash_attention_fwd_p, 3)(
        args, batched, **params),
)

flash_attention_bwd_p = Primitive(
    "flash_attention_bwd",
    shape_rule=_bwd_rule,
    impl=_bwd_impl,
    vjp=_bwd_vjp,
    jvp=None,
    fusion=FusionKind.OPAQUE,
    kernel=Template("attention"),
    cost=_bwd_cost,
    multiple_results=True,
    param_types=_PARAMS,
    batch=lambda args, batched, **params: _attention_batch(flash_attention_bwd_p, 6)(
        args, batched, **params),
)


def flash_attention(q, k, v, mask=None, *, scale, mask_kind="none", fill=float("-inf")):
    """(o, lse) of fused attention (see the module docstring for shapes and masks)."""
    args = (q, k, v) if mask is None else (q, k, v, mask)
    return tuple(flash_attention_fwd_p.bind(*args, scale=float(scale), mask_kind=mask_kind,
                                            fill=float(fill)))
