"""mode, rankdata and sem (scipy.stats', as jax.scipy.stats): the first two sort along the axis
and find the runs of equal values with running maxima and minima of their start and end
indices, so they keep static shapes (they work under jit and vmap)."""

from __future__ import annotations

import math
from typing import NamedTuple

import nova.numpy as jnp
from nova import lax
from nova.core.array import Array
from nova.numpy_impl.util import normalize_axis
from nova.scipy.stats import _common as c

_NAN_POLICIES = ("propagate", "omit", "raise")
_RANK_METHODS = ("average", "min", "max", "dense", "ordinal")


class ModeResult(NamedTuple):
    """mode's result: the modal values and how often each occurs."""

    mode: Array
    count: Array


def _check_nan_policy(name, nan_policy, supported):
    if nan_policy not in _NAN_POLICIES:
        raise ValueError(f"{name}: nan_policy must be one of {_NAN_POLICIES}, got {nan_policy!r}")
    if nan_policy not in supported:
        raise NotImplementedError(f"{name}: nan_policy={nan_policy!r} is not supported (only "
                                  f"{' and '.join(map(repr, supported))}; 'raise' would need "
                                  f"the values, which jit does not have)")


def _axis_last(a, axis):
    """a with `axis` moved to the end (a flattened for axis=None) and the normalised axis."""
    if axis is None:
        return a.reshape(-1), None
    if a.ndim == 0:
        a = a.reshape(1)
    ax = normalize_axis(axis, a.ndim)
    return jnp.moveaxis(a, ax, -1), ax


def _runs(xs):
    """For xs sorted along its last axis: for each position the index of the first and the last
    element of its run of equal values (NaNs count as equal to each other; they sort last), and
    the mask of the runs' first elements."""
    n = xs.shape[-1]
    same = xs[..., 1:] == xs[..., :-1]
    if jnp.issubdtype(xs.dtype, jnp.inexact):
        same = same | (jnp.isnan(xs[..., 1:]) & jnp.isnan(xs[..., :-1]))
    edge = jnp.ones(xs.shape[:-1] + (1,), dtype=bool)
    starts = jnp.concatenate([edge, ~same], axis=-1)
    ends = jnp.concatenate([~same, edge], axis=-1)
    idx = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), xs.shape)
    last_axis = xs.ndim - 1
    first = lax.cummax(jnp.where(starts, idx, 0), axis=last_axis)
    last = lax.cummin(jnp.where(ends, idx, n - 1), axis=last_axis, reverse=True)
    return first, last, starts


def mode(a, axis: int | None = 0, nan_policy: str = "propagate", keepdims: bool = False):
    """The most frequent value along `axis` (scipy.stats.mode): the smallest of them on a tie.

    a: array of any dtype; axis: int, or None for the flattened array. Returns ModeResult(mode,
    count): mode in a's dtype (float NaN for an empty axis), count int32, both with a's shape
    less `axis` (kept as size 1 with keepdims=True; every axis with axis=None). NaNs count as
    one value (larger than every number) under nan_policy='propagate', as SciPy; 'omit' leaves
    them out (mode NaN, count 0 for an all-NaN slice). Raises ValueError for a bad axis or
    nan_policy, NotImplementedError for nan_policy='raise'.
    """
    _check_nan_policy("mode", nan_policy, ("propagate", "omit"))
    a = jnp.asarray(a)
    x, ax = _axis_last(a, axis)
    if x.shape[-1] == 0:
        out = jnp.full(x.shape[:-1], jnp.nan, dtype=c.float_dtype(x))
        count = jnp.zeros(x.shape[:-1], dtype=jnp.int32)
    else:
        xs = jnp.sort(x, axis=-1)
        first, last, _ = _runs(xs)
        counts = last - first + 1
        floating = jnp.issubdtype(xs.dtype, jnp.inexact)
        if nan_policy == "omit" and floating:
            counts = jnp.where(jnp.isnan(xs), 0, counts)
        best = jnp.argmax(counts, axis=-1)
        out = jnp.take_along_axis(xs, best[..., None], axis=-1)[..., 0]
        count = jnp.max(counts, axis=-1).astype(jnp.int32)
        if nan_policy == "omit" and floating:
            out = jnp.where(count == 0, jnp.nan, out)
    if keepdims:
        if ax is None:
            out, count = out.reshape((1,) * a.ndim), count.reshape((1,) * a.ndim)
        else:
            out, count = jnp.expand_dims(out, ax), jnp.expand_dims(count, ax)
    return ModeResult(out, count)


def rankdata(a, method: str = "average", *, axis: int | None = None,
             nan_policy: str = "propagate"):
    """Ranks of the values of a, 1 for the smallest (scipy.stats.rankdata).

    method: how ties are ranked: 'average' (their mean rank), 'min', 'max', 'dense' (ranks of
    the distinct values, no gaps) or 'ordinal' (by position: a stable sort). axis: rank along
    this axis, or over the flattened array for None (the result then has shape (a.size,)).
    Returns float ('average': float64 for float64 input, else float32) or int32 (the other
    methods) ranks of a's shape. A NaN makes its whole slice NaN for 'average' (SciPy's
    'propagate'); the integer methods cannot hold NaN and rank NaNs above every number, as
    JAX. Raises ValueError for an unknown method, axis or nan_policy, NotImplementedError for
    nan_policy 'omit' or 'raise'.
    """
    if method not in _RANK_METHODS:
        raise ValueError(f"rankdata: method must be one of {_RANK_METHODS}, got {method!r}")
    _check_nan_policy("rankdata", nan_policy, ("propagate",))
    a = jnp.asarray(a)
    x, ax = _axis_last(a, axis)
    out_dtype = c.float_dtype(x) if method == "average" else jnp.int32
    if x.shape[-1] == 0:
        return jnp.zeros(a.shape if ax is not None else (0,), dtype=out_dtype)
    perm = jnp.argsort(x, axis=-1, stable=True)
    inverse = jnp.argsort(perm, axis=-1, stable=True)
    if method == "ordinal":
        ranks = (inverse + 1).astype(jnp.int32)
    else:
        first, last, starts = _runs(jnp.take_along_axis(x, perm, axis=-1))
        if method == "average":
            sorted_ranks = (first + last + 2).astype(out_dtype) * 0.5
        elif method == "min":
            sorted_ranks = first + 1
        elif method == "max":
            sorted_ranks = last + 1
        else:
            sorted_ranks = jnp.cumsum(starts.astype(jnp.int32), axis=-1)
        ranks = jnp.take_along_axis(sorted_ranks.astype(out_dtype), inverse, axis=-1)
    if method == "average" and jnp.issubdtype(x.dtype, jnp.inexact):
        ranks = jnp.where(jnp.any(jnp.isnan(x), axis=-1, keepdims=True), jnp.nan, ranks)
    return ranks if ax is None else jnp.moveaxis(ranks, -1, ax)


def sem(a, axis: int | None = 0, ddof: int = 1, nan_policy: str = "propagate", *,
        keepdims: bool = False):
    """The standard error of the mean, std(a, ddof) / sqrt(n), along `axis` (scipy.stats.sem).

    a: array (ints and bools become float32, float64 stays); axis: int, or None for the
    flattened array; ddof: the delta degrees of freedom of the std (1: the unbiased variance).
    nan_policy 'propagate' (NaN in gives NaN out) or 'omit' (NaNs left out of both the std and
    n). Returns a's shape less `axis` (kept as size 1 with keepdims); NaN when n <= ddof.
    Raises ValueError for a bad axis or nan_policy, NotImplementedError for 'raise'.
    """
    _check_nan_policy("sem", nan_policy, ("propagate", "omit"))
    (a,) = c.promote("sem", a)
    if axis is not None and a.ndim == 0:
        a = a.reshape(1)
    if axis is not None:
        axis = normalize_axis(axis, a.ndim)
    if nan_policy == "omit":
        n = jnp.sum(~jnp.isnan(a), axis=axis, keepdims=keepdims).astype(a.dtype)
        return jnp.nanstd(a, axis=axis, ddof=ddof, keepdims=keepdims) / jnp.sqrt(n)
    n = a.size if axis is None else a.shape[axis]
    return jnp.std(a, axis=axis, ddof=ddof, keepdims=keepdims) / math.sqrt(n)
