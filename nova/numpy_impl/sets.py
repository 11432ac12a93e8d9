"""Set operations, histograms and data-dependent selection of nova.numpy, as NumPy's and
jax.numpy's: unique (and the array API's unique_values / unique_counts / unique_inverse /
unique_all), union1d, intersect1d, setdiff1d, setxor1d, histogram, histogram_bin_edges,
histogram2d, histogramdd, lexsort, partition, argpartition, delete, insert, compress, extract,
choose, resize, trim_zeros.

Shapes that depend on values. NumPy's result length for unique, the set functions, compress and
extract is the number of values found. Eagerly (and under nova.grad) that number is read from the
concrete values. Under nova.jit or nova.vmap the values are traced: pass a static `size=`, as in
jax.numpy. The result then has exactly `size` entries: the first `size` results (truncated when
there are more), padded with `fill_value` when there are fewer. Without `size` a traced input
raises ConcretizationTypeError naming the function. trim_zeros has no `size` and always needs
concrete input.

Algorithms use static shapes only: a stable sort (lax.sort with several operands, NaN last as
NumPy), adjacent comparisons for a mask of first occurrences, a stable sort of that mask to
compact the hits to the front (the `_compact` helper), and gathers or drop-out-of-range
scatters. Index results are int32 (NumPy's int64).
"""

from __future__ import annotations

import builtins
import math
from typing import NamedTuple

import numpy as np

# nova.numpy is only partly initialized while it imports this module; it is complete by the time
# any function here runs.
from nova import numpy_api as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.core.errors import ConcretizationTypeError, ShapeError
from nova.core.trace import current_trace
from nova.numpy_impl.families_common import _concrete, _filled, _int
from nova.numpy_impl.util import (
    asarray,
    broadcast_shapes,
    broadcast_to,
    normalize_axes,
    normalize_axis,
    where_am_i,
)
from nova.ops import lax

__all__ = [
    "argpartition",
    "choose",
    "compress",
    "delete",
    "extract",
    "histogram",
    "histogram2d",
    "histogram_bin_edges",
    "histogramdd",
    "insert",
    "intersect1d",
    "lexsort",
    "partition",
    "resize",
    "setdiff1d",
    "setxor1d",
    "trim_zeros",
    "union1d",
    "unique",
    "unique_all",
    "unique_counts",
    "unique_inverse",
    "unique_values",
]

_I32 = dtypes.int32


# --- helpers --------------------------------------------------------------------------------


def _iota(n):
    # Eagerly a NumPy arange (lax.iota would compile a kernel per length); traced, one iota.
    if current_trace() is None:
        return asarray(np.arange(n, dtype=np.int32))
    return lax.iota(_I32, (n,), 0)


def _size_arg(name, size):
    """The validated static `size` (None stays None)."""
    if size is None:
        return None
    if isinstance(size, Array) and _concrete(size) is None:
        raise ConcretizationTypeError(f"{name}: size must be a static Python int, got a traced "
                                      f"value{where_am_i()}")
    size = _int(name, "size", size)
    if size < 0:
        raise ValueError(f"{name}: size must be non-negative, got {size}{where_am_i()}")
    return size


def _size_error(name, what):
    return ConcretizationTypeError(
        f"{name}: the length of the result depends on the values of {what}, which are traced "
        f"here (inside jit or vmap); pass a static `size=` argument (and optionally "
        f"`fill_value=`), as jax.numpy.{name}{where_am_i()}")


def _static_count(name, what, count):
    """The Python int value of the 0-d `count`, or ConcretizationTypeError when it is traced."""
    c = _concrete(count)
    if c is None:
        raise _size_error(name, what)
    return int(c)


def _compact(mask, size):
    """The first `size` True positions of the 1-d bool `mask`, in order.

    Returns (pos, valid, count): pos int32 (size,), padded with 0; valid bool (size,), whether
    pos[i] is a hit; count the int32 0-d number of True entries. A stable sort of ~mask with an
    iota puts the hits first in their order.
    """
    n = mask.shape[0]
    count = jnp.sum(mask, dtype=_I32)
    valid = lax.lt(_iota(size), broadcast_to(count, (size,)))
    if n == 0 or size == 0:
        return _filled((size,), 0, _I32), valid, count
    order = lax.sort([lax.bitwise_not(mask), _iota(n)], 0, num_keys=1)[1]
    pos = order[:size] if size <= n else jnp.concatenate([order, _filled((size - n,), 0, _I32)])
    return lax.select(valid, pos, _filled((size,), 0, _I32)), valid, count


def _take0(x, pos):
    """x[pos] along axis 0 for in-range dynamic positions; zeros when x has no rows."""
    if x.shape[0] == 0:
        return _filled(pos.shape + x.shape[1:], 0, x.dtype)
    return jnp.take(x, pos, axis=0)


def _fill_array(name, fill_value, dtype, row_shape):
    f = asarray(fill_value, dtype)
    try:
        if broadcast_shapes(f.shape, row_shape) != tuple(row_shape):
            raise ShapeError
    except ShapeError:
        raise ShapeError(f"{name}: fill_value of shape {f.shape} does not broadcast to the shape "
                         f"{tuple(row_shape)} of one result entry{where_am_i()}") from None
    return f


def _pad(vals, valid, fill):
    """vals where valid (along axis 0), else fill (broadcast)."""
    v = lax.broadcast_in_dim(valid, vals.shape, (0,)) if vals.ndim > 1 else valid
    f = broadcast_to(lax.convert_element_type(fill, vals.dtype), vals.shape)
    return lax.select(v, vals, f)


def _first_or_zero(vals, count):
    """The default fill of the sorted set results: the smallest result, 0 when there is none."""
    if vals.shape[0] == 0:
        return _filled((), 0, vals.dtype)
    return lax.select(lax.gt(count, _filled((), 0, _I32)), vals[0], _filled((), 0, vals.dtype))


def _promote_1d(name, ar1, ar2):
    a, b = asarray(ar1), asarray(ar2)
    dt = dtypes.result_type(a, b)
    return (jnp.ravel(lax.convert_element_type(a, dt)),
            jnp.ravel(lax.convert_element_type(b, dt)))


# --- unique ---------------------------------------------------------------------------------


class UniqueAllResult(NamedTuple):
    """The result of unique_all (numpy.unique_all / the array API)."""
    values: Array
    indices: Array
    inverse_indices: Array
    counts: Array


class UniqueCountsResult(NamedTuple):
    """The result of unique_counts."""
    values: Array
    counts: Array


class UniqueInverseResult(NamedTuple):
    """The result of unique_inverse."""
    values: Array
    inverse_indices: Array


class _Unique(NamedTuple):
    values: Array  # (size, *rest)
    index: Array  # (size,) int32
    inverse: Array  # (n,) int32
    counts: Array  # (size,) int32
    valid: Array  # (size,) bool
    count: Array  # 0-d int32: the true number of unique rows


def _unique_rows(name, x, equal_nan, size, fill_value):
    """Unique rows of x (n, *rest) along axis 0, sorted lexicographically.

    One stable multi-key sort of (column_0, ..., column_{m-1}, iota) gives the sorted rows and
    the permutation; a row is new where it differs from the one before (NaN equal to NaN when
    equal_nan); the new rows are compacted to the front. inverse is cumsum(new) - 1 scattered
    back through the permutation; counts a drop-out-of-range scatter-add of ones at inverse.
    """
    n, rest = x.shape[0], x.shape[1:]
    m = math.prod(rest)
    if n == 0:
        if size and fill_value is None:
            raise ValueError(f"{name}: for an input with no elements along the axis and "
                             f"size={size} > 0, fill_value must be given{where_am_i()}")
        size = 0 if size is None else size
        fill = 0 if fill_value is None else fill_value
        f = _fill_array(name, fill, x.dtype, rest)
        return _Unique(broadcast_to(f, (size,) + rest), _filled((size,), 0, _I32),
                       _filled((0,), 0, _I32), _filled((size,), 0, _I32),
                       _filled((size,), False, dtypes.bool_), _filled((), 0, _I32))
    iota = _iota(n)
    if m == 0:  # every row is empty, hence equal: one unique row
        aux, perm = x, iota
        new = lax.lt(iota, _filled((n,), 1, _I32))
    else:
        if x.ndim == 1:
            aux, perm = lax.sort([x, iota], 0, num_keys=1)
        else:
            flat = lax.reshape(x, (n, m))
            cols = [lax.reshape(lax.slice(flat, (0, j), (n, j + 1)), (n,)) for j in range(m)]
            perm = lax.sort(cols + [iota], 0, num_keys=m)[-1]
            aux = jnp.take(x, perm, axis=0)
        a, b = aux[1:], aux[:-1]
        ne = lax.ne(a, b)
        if equal_nan and dtypes.is_float(aux.dtype):
            ne = lax.bitwise_and(ne, lax.bitwise_not(lax.bitwise_and(lax.isnan(a), lax.isnan(b))))
        if ne.ndim > 1:
            ne = jnp.any(ne, axis=tuple(range(1, ne.ndim)))
        new = jnp.concatenate([_filled((1,), True, dtypes.bool_), ne])
    if size is None:
        size = _static_count(name, "its input", jnp.sum(new, dtype=_I32))
    pos, valid, count = _compact(new, size)
    values = _take0(aux, pos)
    if fill_value is not None:
        values = _pad(values, valid, _fill_array(name, fill_value, x.dtype, rest))
    index = jnp.take(perm, pos)
    group = lax.sub(jnp.cumsum(new, dtype=_I32), _filled((n,), 1, _I32))
    inverse = _filled((n,), 0, _I32).at[perm].set(group)
    counts = _filled((size,), 0, _I32).at[group].add(_filled((n,), 1, _I32))
    return _Unique(values, index, inverse, counts, valid, count)


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, size=None, fill_value=None, sorted=True):
    """The sorted unique elements of `ar` (numpy.unique, with jax.numpy's size/fill_value).

    axis None: unique elements of the flattened array, shape (U,); an int axis: the unique
    slices along it (compared lexicographically), shape ar.shape with U at `axis`. dtype: ar's.
    equal_nan: NaNs count as one value (else each NaN is unique; NaN sorts last, as NumPy).
    Optional extra results, in this order (int32):
      return_index: (U,) the index of each value's first occurrence (along axis);
      return_inverse: indices into the unique values rebuilding ar: ar's shape for axis None,
        else (ar.shape[axis],);
      return_counts: (U,) the number of occurrences of each.
    size: U is exactly `size`: the first `size` sorted values, padded with fill_value (default:
    the smallest value; index pads with its first index, counts with 0). Needed under jit; for
    an input empty along the axis and size > 0 fill_value is required (ValueError). Inverse
    entries of values truncated away are >= size. sorted: accepted for NumPy 2.3
    compatibility; the result is always sorted.
    Algorithm: one stable sort of (keys..., iota), a first-occurrence mask from adjacent
    comparisons, a stable sort of that mask to compact the unique rows. Raises
    ConcretizationTypeError for traced ar without size, ValueError for an axis out of range or
    a negative size, ShapeError for a fill_value that does not broadcast to one entry.
    """
    del sorted
    size = _size_arg("unique", size)
    x = asarray(ar)
    shape = x.shape
    if axis is None:
        ax, rows = None, lax.reshape(x, (x.size,))
    else:
        ax = normalize_axis(axis, x.ndim)
        rows = jnp.moveaxis(x, ax, 0)
    u = _unique_rows("unique", rows, equal_nan, size, fill_value)
    values = u.values if ax is None else jnp.moveaxis(u.values, 0, ax)
    out = [values]
    if return_index:
        out.append(u.index)
    if return_inverse:
        out.append(lax.reshape(u.inverse, shape) if ax is None else u.inverse)
    if return_counts:
        out.append(u.counts)
    return out[0] if len(out) == 1 else tuple(out)


def unique_values(x, /, *, size=None, fill_value=None):
    """The sorted unique values of x flattened (numpy.unique_values): unique with
    equal_nan=False (each NaN is its own value, as the array API). size/fill_value as unique.
    NumPy 2.3+ may return them unsorted; nova's are sorted, as jax.numpy's."""
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


def unique_counts(x, /, *, size=None, fill_value=None):
    """UniqueCountsResult(values, counts) of x flattened (numpy.unique_counts): unique with
    return_counts and equal_nan=False; counts int32 (U,). size/fill_value as unique."""
    v, c = unique(x, return_counts=True, equal_nan=False, size=size, fill_value=fill_value)
    return UniqueCountsResult(v, c)


def unique_inverse(x, /, *, size=None, fill_value=None):
    """UniqueInverseResult(values, inverse_indices) (numpy.unique_inverse): unique with
    return_inverse and equal_nan=False; inverse_indices int32 of x's shape, values[inverse]
    rebuilds x. size/fill_value as unique."""
    v, inv = unique(x, return_inverse=True, equal_nan=False, size=size, fill_value=fill_value)
    return UniqueInverseResult(v, inv)


def unique_all(x, /, *, size=None, fill_value=None):
    """UniqueAllResult(values, indices, inverse_indices, counts) (numpy.unique_all): unique
    with every extra result and equal_nan=False. size/fill_value as unique."""
    r = unique(x, return_index=True, return_inverse=True, return_counts=True, equal_nan=False,
               size=size, fill_value=fill_value)
    return UniqueAllResult(*r)


# --- set operations on 1-d arrays -----------------------------------------------------------


def _finish(name, what, mask, vals, size, fill_value, default_fill):
    """The entries of vals where mask, compacted to `size` and padded with the fill."""
    if size is None:
        size = _static_count(name, what, jnp.sum(mask, dtype=_I32))
    pos, valid, count = _compact(mask, size)
    out = _take0(vals, pos)
    if fill_value is None:
        fill = default_fill(out, count)
    else:
        fill = _fill_array(name, fill_value, vals.dtype, ())
    return _pad(out, valid, fill), pos, valid, count


def _unique_padded(name, x):
    """Sorted unique values of the 1-d x, padded to x.size, with their validity and indices."""
    u = _unique_rows(name, x, True, x.shape[0], None if x.shape[0] else 0)
    return u.values, u.valid, u.index


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted unique values in either array (numpy.union1d); both are flattened and promoted
    to one dtype. size/fill_value as unique (default fill: the smallest value; for two empty
    inputs and size > 0 fill_value is required). Raises ConcretizationTypeError for traced input
    without size."""
    a, b = _promote_1d("union1d", ar1, ar2)
    size = _size_arg("union1d", size)
    u = _unique_rows("union1d", jnp.concatenate([a, b]), True, size, fill_value)
    return u.values


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):
    """The sorted values in both arrays (numpy.intersect1d); inputs flattened, promoted to one
    dtype. NaN is in no intersection.

    return_indices: also (i1, i2), int32, the indices of each value's first occurrence in ar1
    and ar2 (with assume_unique, its position). size: exactly `size` results, padded with
    fill_value (default: the smallest result, 0 when there is none); padded indices are
    ar1.size and ar2.size, as jax.numpy. assume_unique: the inputs hold no repeats (skips the
    unique step; wrong results otherwise). Algorithm: unique of each (padded to its length),
    one stable sort of (padding-last, value, position) of both, a value that equals its
    successor is in both. Raises ConcretizationTypeError for traced input without size.
    """
    name = "intersect1d"
    a, b = _promote_1d(name, ar1, ar2)
    size = _size_arg(name, size)
    if assume_unique:
        u1, v1, i1 = a, _filled(a.shape, True, dtypes.bool_), _iota(a.shape[0])
        u2, v2, i2 = b, _filled(b.shape, True, dtypes.bool_), _iota(b.shape[0])
    else:
        u1, v1, i1 = _unique_padded(name, a)
        u2, v2, i2 = _unique_padded(name, b)
    n1, n2 = u1.shape[0], u2.shape[0]
    both = jnp.concatenate([u1, u2])
    valid = jnp.concatenate([v1, v2])
    tot = n1 + n2
    if tot:
        pad_key, aux, src = lax.sort([lax.bitwise_not(valid), both, _iota(tot)], 0, num_keys=2)
        hit = lax.bitwise_and(lax.eq(aux[1:], aux[:-1]), lax.bitwise_not(pad_key[1:]))
    else:
        aux, src, hit = both, _iota(0), _filled((0,), False, dtypes.bool_)
    vals, pos, ok, _ = _finish(name, "its inputs", hit, aux, size, fill_value, _first_or_zero)
    if not return_indices:
        return vals
    out_size = vals.shape[0]
    if not (n1 and n2):
        return vals, _filled((out_size,), a.shape[0], _I32), _filled((out_size,), b.shape[0], _I32)
    j1 = jnp.take(src, pos)
    j2 = lax.sub(jnp.take(src, lax.add(pos, _filled(pos.shape, 1, _I32))),
                 _filled(pos.shape, n1, _I32))
    k1 = jnp.take(i1, lax.clamp(_filled(j1.shape, 0, _I32), j1, _filled(j1.shape, n1 - 1, _I32)))
    k2 = jnp.take(i2, lax.clamp(_filled(j2.shape, 0, _I32), j2, _filled(j2.shape, n2 - 1, _I32)))
    k1 = lax.select(ok, k1, _filled(k1.shape, a.shape[0], _I32))
    k2 = lax.select(ok, k2, _filled(k2.shape, b.shape[0], _I32))
    return vals, k1, k2


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The unique values of ar1 that are not in ar2 (numpy.setdiff1d): sorted, or in ar1's
    order with assume_unique (ar1 then holds no repeats). Inputs flattened; the result has
    ar1's dtype (values are compared promoted); NaN is in nothing, so ar1's NaN stays.
    size: exactly `size` results padded with fill_value (default 0, as jax.numpy). Algorithm:
    unique of ar1 (padded), then isin, which compares all pairs (memory ar1.size * ar2.size).
    Raises ConcretizationTypeError for traced input without size."""
    name = "setdiff1d"
    a, b = asarray(ar1), asarray(ar2)
    a, b = lax.reshape(a, (a.size,)), lax.reshape(b, (b.size,))
    size = _size_arg(name, size)
    if assume_unique:
        u1, v1 = a, _filled(a.shape, True, dtypes.bool_)
    else:
        u1, v1, _ = _unique_padded(name, a)
    keep = lax.bitwise_and(v1, jnp.isin(u1, b, invert=True)) if u1.shape[0] else v1
    zero = lambda out, count: _filled((), 0, out.dtype)
    return _finish(name, "its inputs", keep, u1, size, fill_value, zero)[0]


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted values in exactly one of the arrays (numpy.setxor1d); inputs flattened,
    promoted to one dtype. NaN never equals NaN here, as NumPy's (a NaN in each input gives two
    NaNs). size: exactly `size` results padded with fill_value (default: the smallest result, 0
    when there is none). assume_unique: skip the unique step. Algorithm: unique of each
    (padded), one stable sort of (padding-last, value), keep the values that differ from both
    neighbours. Raises ConcretizationTypeError for traced input without size."""
    name = "setxor1d"
    a, b = _promote_1d(name, ar1, ar2)
    size = _size_arg(name, size)
    if assume_unique:
        u1, v1 = a, _filled(a.shape, True, dtypes.bool_)
        u2, v2 = b, _filled(b.shape, True, dtypes.bool_)
    else:
        u1, v1, _ = _unique_padded(name, a)
        u2, v2, _ = _unique_padded(name, b)
    both = jnp.concatenate([u1, u2])
    valid = jnp.concatenate([v1, v2])
    tot = both.shape[0]
    if tot:
        pad_key, aux = lax.sort([lax.bitwise_not(valid), both], 0, num_keys=2)
        diff = lax.ne(aux[1:], aux[:-1])
        t = _filled((1,), True, dtypes.bool_)
        left = jnp.concatenate([t, diff])
        right = jnp.concatenate([lax.bitwise_or(diff, pad_key[1:]), t])
        keep = lax.bitwise_and(lax.bitwise_not(pad_key), lax.bitwise_and(left, right))
    else:
        aux, keep = both, _filled((0,), False, dtypes.bool_)
    return _finish(name, "its inputs", keep, aux, size, fill_value, _first_or_zero)[0]


# --- histograms -----------------------------------------------------------------------------


def _inexact(*xs):
    d = dtypes.result_type(*xs)
    return d if dtypes.is_float(d) else dtypes.default_float


def _check_finite_range(name, lo, hi, what):
    cl, ch = _concrete(lo), _concrete(hi)
    if cl is None or ch is None:
        return
    if not (np.isfinite(cl) and np.isfinite(ch)):
        raise ValueError(f"{name}: {what} range of [{cl}, {ch}] is not finite{where_am_i()}")
    if cl > ch:
        raise ValueError(f"{name}: max must be larger than min in range parameter, got "
                         f"({cl}, {ch}){where_am_i()}")


def _bin_edges(name, x, bins, range, dt):
    if isinstance(bins, str):
        raise NotImplementedError(f"{name}: string bins ({bins!r}) are not supported; pass an "
                                  f"int or an array of edges{where_am_i()}")
    nd = np.ndim(bins)
    if nd == 1:
        e = asarray(bins, dt)
        if e.shape[0] < 1:
            raise ValueError(f"{name}: bins must hold at least one edge{where_am_i()}")
        c = _concrete(e)
        if c is not None and np.any(np.diff(c) < 0):
            raise ValueError(f"{name}: `bins` must increase monotonically, when an array"
                             f"{where_am_i()}")
        return e
    if nd != 0:
        raise ValueError(f"{name}: bins must be an int or a 1-d array of edges, got "
                         f"{nd} dimensions{where_am_i()}")
    n = _int(name, "bins", bins)
    if n < 1:
        raise ValueError(f"{name}: `bins` must be positive, when an integer, got {n}"
                         f"{where_am_i()}")
    if range is None:
        if x.size == 0:
            lo, hi = _filled((), 0, dt), _filled((), 1, dt)
        else:
            lo = lax.convert_element_type(jnp.min(x), dt)
            hi = lax.convert_element_type(jnp.max(x), dt)
            _check_finite_range(name, lo, hi, "autodetected")
    else:
        r = asarray(range, dt)
        if r.shape != (2,):
            raise ValueError(f"{name}: range must be None or a (min, max) pair, got shape "
                             f"{r.shape}{where_am_i()}")
        lo, hi = r[0], r[1]
        _check_finite_range(name, lo, hi, "supplied")
    same = lax.eq(lo, hi)
    half = _filled((), 0.5, dt)
    lo, hi = (lax.select(same, lax.sub(lo, half), lo), lax.select(same, lax.add(hi, half), hi))
    return jnp.linspace(lo, hi, n + 1, dtype=dt)


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The bin edges histogram(a, bins, range) uses (numpy.histogram_bin_edges).

    bins: an int (that many equal-width bins over `range`, default [a.min(), a.max()], widened
    by 0.5 either side when empty; (0, 1) for an empty a) or a 1-d increasing array of edges
    (returned as they are). Result: 1-d, float dtype of a (float32 for integers). weights is
    unused (no string bins). Works under jit (the range is computed from a). Raises
    NotImplementedError for string bins, ValueError for bins < 1, decreasing edges, a range
    that is not a (min, max) pair, min > max or (concrete) non-finite limits.
    """
    del weights
    x = jnp.ravel(asarray(a))
    return _bin_edges("histogram_bin_edges", x, bins, range, _inexact(x))


def histogram(a, bins=10, range=None, weights=None, density=None):
    """The histogram of a's values (numpy.histogram): (counts, bin_edges).

    a is flattened; edges as histogram_bin_edges. Bins are half-open [e_i, e_{i+1}) except the
    last, which includes its right edge; values outside the edges (and NaN) are not counted.
    counts: int32 (bins,) without weights (NumPy: int64; jax.numpy: float), else the sum of
    the weights (of a's shape) in each bin, in their dtype; density: counts / width / total
    (float). Algorithm: searchsorted (all pairs: memory a.size * len(edges)), then a
    drop-out-of-range scatter-add. Works under jit. Raises ValueError for weights of another
    shape and what histogram_bin_edges raises.
    """
    x = asarray(a)
    if weights is not None:
        w = asarray(weights)
        if w.shape != x.shape:
            raise ValueError(f"histogram: weights of shape {w.shape} must have a's shape "
                             f"{x.shape}{where_am_i()}")
        w = jnp.ravel(w)
        if w.dtype == dtypes.bool_:
            w = lax.convert_element_type(w, _I32)
    x = jnp.ravel(x)
    dt = _inexact(x) if weights is None else _inexact(x, w)
    edges = _bin_edges("histogram", x, bins, range, dt)
    ne = edges.shape[0]
    if weights is None:
        w = _filled(x.shape, 1, _I32)
    idx = jnp.searchsorted(edges, x, side="right")
    idx = jnp.where(jnp.equal(x, edges[-1]), ne - 1, idx)
    counts = _filled((ne,), 0, w.dtype).at[idx].add(w)[1:]
    if density:
        counts = jnp.true_divide(jnp.true_divide(counts, jnp.diff(edges)), jnp.sum(counts))
    return counts, edges


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """The D-dimensional histogram of N points (numpy.histogramdd): (hist, [edges_0, ...]).

    sample: an (N, D) array, a 1-d array (D = 1), or a sequence of D 1-d arrays of length N
    (NumPy's (D, N) form). bins: an int for every dimension, or a sequence of D ints or 1-d
    edge arrays; range: None or a sequence of D (min, max) pairs or Nones. Per dimension as
    histogram (the last bin includes its right edge; outliers and NaN dropped). hist: float
    (sample's float dtype, or weights'), shape (bins_0, ..., bins_{D-1}); weights (N,) are
    summed; density divides by the total and the bin volumes. Algorithm: searchsorted per
    dimension, ravel_multi_index with one outlier bin each side, bincount of static length.
    Works under jit. Raises ValueError for a sample that is not 1-d or 2-d, weights not of
    shape (N,), bins or range of the wrong length, and what histogram_bin_edges raises.
    """
    name = "histogramdd"
    if isinstance(sample, list | tuple):
        s = jnp.stack([jnp.ravel(asarray(v)) for v in sample], axis=1)
    else:
        s = asarray(sample)
        if s.ndim == 1:
            s = lax.reshape(s, (s.shape[0], 1))
        elif s.ndim != 2:
            raise ValueError(f"{name}: sample must be an (N, D) array, got shape {s.shape}"
                             f"{where_am_i()}")
    n, d = s.shape
    if weights is not None:
        w = asarray(weights)
        if w.shape != (n,):
            raise ValueError(f"{name}: weights of shape {w.shape} must have one weight per "
                             f"sample, shape ({n},){where_am_i()}")
        if w.dtype == dtypes.bool_:
            w = lax.convert_element_type(w, _I32)
        dt = _inexact(s, w)
    else:
        w, dt = None, _inexact(s)
    if isinstance(bins, list | tuple) or (isinstance(bins, Array | np.ndarray) and bins.ndim):
        per_dim = list(bins)
        if len(per_dim) != d:
            raise ValueError(f"{name}: bins must be an int or have one entry per dimension "
                             f"({d}), got {len(per_dim)}{where_am_i()}")
    else:
        per_dim = [bins] * d
    if range is not None and (len(range) != d or
                              any(r is not None and np.shape(r) != (2,) for r in range)):
        raise ValueError(f"{name}: for a sample of shape {(n, d)}, range must be a "
                         f"sequence of {d} (min, max) pairs or Nones{where_am_i()}")
    idxs, edges = [], []
    for i in builtins.range(d):
        col = s[:, i]
        e = _bin_edges(name, col, per_dim[i], None if range is None else range[i], dt)
        k = jnp.searchsorted(e, col, side="right")
        k = jnp.where(jnp.equal(col, e[-1]), lax.sub(k, _filled(k.shape, 1, k.dtype)), k)
        idxs.append(k)
        edges.append(e)
    nbins = tuple(e.shape[0] + 1 for e in edges)
    flat = jnp.ravel_multi_index(tuple(idxs), nbins, mode="clip")
    hist = jnp.bincount(flat, w, length=math.prod(nbins))
    hist = lax.convert_element_type(lax.reshape(hist, nbins), dt)
    hist = hist[(slice(1, -1),) * d]
    if density:
        hist = jnp.true_divide(hist, jnp.sum(hist))
        for i, e in enumerate(edges):
            width = jnp.diff(e)
            hist = jnp.true_divide(hist, lax.reshape(width, tuple(
                width.shape[0] if j == i else 1 for j in builtins.range(d))))
    return hist, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """The 2-d histogram of points (x[i], y[i]) (numpy.histogram2d): (hist, xedges, yedges).

    x, y: 1-d of one length. bins: an int, one edge array for both, [int, int], or
    [edges_x, edges_y]; range: None or [[xmin, xmax], [ymin, ymax]]. hist: float,
    (len(xedges) - 1, len(yedges) - 1); as histogramdd otherwise. Raises ValueError (ShapeError)
    for x, y not 1-d of one length, and what histogramdd raises.
    """
    xa, ya = asarray(x), asarray(y)
    if xa.ndim != 1 or ya.ndim != 1 or xa.shape != ya.shape:
        raise ShapeError(f"histogram2d: x and y must be 1-d of one length, got shapes "
                         f"{xa.shape} and {ya.shape}{where_am_i()}")
    try:
        nb = len(bins)
    except TypeError:
        nb = 1
    if nb not in (1, 2):
        bins = [bins, bins]
    dt = dtypes.result_type(xa, ya)
    pts = jnp.stack([lax.convert_element_type(xa, dt), lax.convert_element_type(ya, dt)], axis=1)
    hist, edges = histogramdd(pts, bins, range, weights, density)
    return hist, edges[0], edges[1]


# --- sorting --------------------------------------------------------------------------------


def _array_sequence(name, arg, v, error):
    """v as a list of Arrays: the rows (first axis) of an array, or the items of a sequence;
    `error` for a 0-d array."""
    if isinstance(v, Array | np.ndarray):
        a = asarray(v)
        if a.ndim == 0:
            raise error(f"{name}: {arg} must be a sequence of arrays, got a 0-d array"
                        f"{where_am_i()}")
        return [a[i] for i in builtins.range(a.shape[0])]
    return [asarray(x) for x in v]


def lexsort(keys, axis=-1):
    """The int32 indices that sort by several keys (numpy.lexsort): the LAST key is the primary
    one, earlier keys break ties; stable, NaN last.

    keys: a sequence of same-shaped arrays, or a 2-d (or higher) array whose rows (first axis)
    are the keys. Result: the keys' shape (0-d keys give 0). Algorithm: one stable lax.sort of
    (key_{k-1}, ..., key_0, iota) with num_keys=k. Raises TypeError for no keys, ShapeError for
    keys of different shapes, ValueError for an axis out of range.
    """
    ks = _array_sequence("lexsort", "keys", keys, TypeError)
    if not ks:
        raise TypeError(f"lexsort: need a sequence of keys with len > 0{where_am_i()}")
    shapes = {v.shape for v in ks}
    if len(shapes) > 1:
        raise ShapeError(f"lexsort: all keys need the same shape, got "
                         f"{', '.join(str(v.shape) for v in ks)}{where_am_i()}")
    shape = ks[0].shape
    if not shape:
        return _filled((), 0, _I32)
    ax = normalize_axis(axis, len(shape))
    return lax.sort([*ks[::-1], lax.iota(_I32, shape, ax)], ax, num_keys=len(ks))[-1]


def _partition_args(name, a, kth, axis):
    x = asarray(a)
    if axis is None:
        x, ax = lax.reshape(x, (x.size,)), 0
    else:
        ax = normalize_axis(axis, x.ndim)
    n = x.shape[ax]
    ks = np.ravel(np.asarray(kth)) if not isinstance(kth, Array) else _concrete(kth)
    if ks is None:
        raise ConcretizationTypeError(f"{name}: kth must be static, got a traced value"
                                      f"{where_am_i()}")
    ks = np.ravel(ks)
    if ks.dtype.kind not in "iu" and not (ks.size == 0 and ks.dtype.kind == "f"):
        raise TypeError(f"{name}: kth must be an integer or a sequence of integers, got "
                        f"{np.asarray(kth).dtype}{where_am_i()}")
    for k in ks:
        if not -n <= int(k) < n:
            raise ValueError(f"{name}: kth(={int(k)}) out of bounds ({n}) for axis {ax} of "
                             f"shape {x.shape}{where_am_i()}")
    return x, ax


def partition(a, kth, axis=-1):
    """A partitioned copy of a (numpy.partition): the element at each kth position is the one a
    sorted array has there, smaller ones before it, larger after.

    Nova returns the fully sorted array (jnp.sort along axis: stable, NaN last), which meets
    that contract for every kth. kth: an int or a sequence of ints (static); axis None
    flattens. Same shape and dtype. Raises ValueError for kth out of [-n, n) or an axis out of
    range, TypeError for a non-integer kth.
    """
    x, ax = _partition_args("partition", a, kth, axis)
    return jnp.sort(x, axis=ax)


def argpartition(a, kth, axis=-1):
    """The int32 indices that partition a (numpy.argpartition); nova returns the indices that
    fully sort it (jnp.argsort: stable, NaN last), which partition for every kth. Arguments and
    errors as partition."""
    x, ax = _partition_args("argpartition", a, kth, axis)
    return jnp.argsort(x, axis=ax)


# --- deleting and inserting -----------------------------------------------------------------


def _axis_view(x, axis):
    if axis is None:
        return lax.reshape(x, (x.size,)), 0
    return x, normalize_axis(axis, x.ndim)


def _delete_traced(x, obj, ax):
    n = x.shape[ax]
    o = lax.convert_element_type(jnp.ravel(obj), _I32)
    k = o.shape[0]
    if k > n:
        raise ValueError(f"delete: {k} unique indices cannot be deleted from an axis of size "
                         f"{n}{where_am_i()}")
    o = jnp.where(lax.lt(o, _filled(o.shape, 0, _I32)), lax.add(o, _filled(o.shape, n, _I32)), o)
    o = jnp.clip(o, 0, n)
    o = lax.sub(jnp.sort(o), _iota(k))
    i = _iota(n - k)
    if k:
        shift = jnp.sum(lax.ge(lax.broadcast_in_dim(i, (k, n - k), (1,)),
                               lax.broadcast_in_dim(o, (k, n - k), (0,))), axis=0, dtype=_I32)
        i = lax.add(i, shift)
    return jnp.take(x, i, axis=ax) if n - k else lax.slice_in_dim(x, 0, 0, axis=ax)


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    """arr without the entries `obj` along `axis` (numpy.delete); axis None flattens first.

    obj: an int, a slice, a sequence or array of ints (negative ones count from the end;
    repeats allowed), or a bool mask of length arr.shape[axis]. These need static (concrete)
    values; a traced integer obj works with assume_unique_indices=True (the indices are then
    promised distinct and in range, as jax.numpy; the result has n - len(obj) entries).
    Same dtype. Raises IndexError for an index out of range, ValueError for a mask of the wrong
    length, TypeError for a non-integer obj, ConcretizationTypeError for a traced obj without
    assume_unique_indices.
    """
    x, ax = _axis_view(asarray(arr), axis)
    n = x.shape[ax]
    if isinstance(obj, slice):
        keep = np.ones(n, bool)
        keep[obj] = False
        return jnp.take(x, np.flatnonzero(keep), axis=ax)
    if isinstance(obj, Array):
        c = _concrete(obj)
        if c is None:
            if assume_unique_indices and dtypes.is_int(obj.dtype):
                return _delete_traced(x, obj, ax)
            raise ConcretizationTypeError(
                f"delete: obj is traced (inside jit or vmap); pass static indices, or integer "
                f"indices with assume_unique_indices=True{where_am_i()}")
        obj = c
    o = np.asarray(obj)
    if o.dtype == bool:
        if o.shape != (n,):
            raise ValueError(f"delete: a boolean obj must be 1-d of the axis' length {n}, got "
                             f"shape {o.shape}{where_am_i()}")
        keep = ~o
    elif o.dtype.kind in "iu" or (o.size == 0 and not isinstance(obj, np.ndarray)):
        o = o.astype(np.int64).ravel()
        bad = o[(o < -n) | (o >= n)]
        if bad.size:
            raise IndexError(f"delete: index {int(bad[0])} is out of bounds for axis {ax} with "
                             f"size {n}{where_am_i()}")
        keep = np.ones(n, bool)
        keep[o] = False
    else:
        raise TypeError(f"delete: obj must be integers, a slice or a boolean mask, got "
                        f"{o.dtype}{where_am_i()}")
    return jnp.take(x, np.flatnonzero(keep), axis=ax)


def insert(arr, obj, values, axis=None):
    """arr with `values` inserted before the indices `obj` along `axis` (numpy.insert); axis
    None flattens first.

    obj (static): an int (values, given at least arr.ndim dimensions with leading 1s, has its
    first axis moved to `axis` and is inserted there as a block), a slice, or a 1-d sequence /
    concrete array of ints (one inserted slab per index; values broadcast to arr's shape with
    len(obj) along axis). Indices may be negative and repeated (later ones go after earlier
    ones), in [-n, n]. values are cast to arr's dtype. Algorithm: a static permutation of
    concatenate([arr, values]) applied with one gather. Raises IndexError for an index out of
    range, ValueError for a multi-dimensional obj, TypeError for a non-integer obj,
    ShapeError for values that do not broadcast, ConcretizationTypeError for a traced obj.
    """
    x, ax = _axis_view(asarray(arr), axis)
    n = x.shape[ax]
    if isinstance(obj, slice):
        idx, scalar = np.arange(*obj.indices(n)), False
    else:
        if isinstance(obj, Array):
            c = _concrete(obj)
            if c is None:
                raise ConcretizationTypeError(
                    f"insert: obj must be static (an int, a slice or concrete indices), got a "
                    f"traced array (inside jit or vmap){where_am_i()}")
            obj = c
        idx = np.asarray(obj)
        if idx.dtype.kind not in "iu":
            if idx.size == 0 and idx.dtype != bool:
                idx = idx.astype(np.int64)
            else:
                raise TypeError(f"insert: obj must be integers or a slice, got {idx.dtype}"
                                f"{where_am_i()}")
        if idx.ndim > 1:
            raise ValueError(f"insert: obj must be an int, a slice or a 1-d sequence of ints, "
                             f"got shape {idx.shape}{where_am_i()}")
        scalar = idx.ndim == 0
    idx = idx.astype(np.int64).ravel()
    bad = idx[(idx < -n) | (idx > n)]
    if bad.size:
        raise IndexError(f"insert: index {int(bad[0])} is out of bounds for axis {ax} with size "
                         f"{n}{where_am_i()}")
    idx = np.where(idx < 0, idx + n, idx)
    v = asarray(values, x.dtype)
    vshape = v.shape
    if idx.size == 0:
        return x
    if v.ndim < x.ndim:
        v = lax.reshape(v, (1,) * (x.ndim - v.ndim) + v.shape)
    if idx.size == 1 and scalar and v.ndim == x.ndim:
        v = jnp.moveaxis(v, 0, ax)
    numnew = idx.size if idx.size != 1 else (v.shape[ax] if v.ndim == x.ndim else 1)
    target = x.shape[:ax] + (numnew,) + x.shape[ax + 1:]
    try:
        if v.ndim > x.ndim:
            raise ShapeError
        v = broadcast_to(v, target)
    except ShapeError:
        raise ShapeError(f"insert: values of shape {vshape} do not broadcast to the inserted "
                         f"shape {target} (arr shape {x.shape}, axis {ax}){where_am_i()}") from None
    if idx.size == 1:
        vals_pos = idx[0] + np.arange(numnew)
    else:
        order = np.argsort(idx, kind="stable")
        vals_pos = idx.copy()
        vals_pos[order] += np.arange(numnew)
    total = n + numnew
    old = np.ones(total, bool)
    old[vals_pos] = False
    src = np.empty(total, np.int64)
    src[old] = np.arange(n)
    src[vals_pos] = n + np.arange(numnew)
    return jnp.take(jnp.concatenate([x, v], axis=ax), src, axis=ax)


# --- selection ------------------------------------------------------------------------------


def _compress(name, cond, x, ax, size, fill_value):
    if cond.ndim != 1:
        raise ValueError(f"{name}: condition must be 1-d, got shape {cond.shape}{where_am_i()}")
    if cond.dtype != dtypes.bool_:
        cond = lax.ne(cond, _filled(cond.shape, 0, cond.dtype))
    rows = jnp.moveaxis(x, ax, 0)
    n, k = rows.shape[0], cond.shape[0]
    if k > n:
        extra = _concrete(cond[n:])
        if extra is not None and extra.any():
            raise ValueError(f"{name}: condition has {k} entries for an axis of length {n}; the "
                             f"ones beyond it must be False{where_am_i()}")
        cond = cond[:n]
    elif k < n:
        rows = rows[:k]
    size = _size_arg(name, size)
    if size is None:
        c = _concrete(cond)
        if c is None:
            raise _size_error(name, "condition")
        out = jnp.take(rows, np.flatnonzero(c), axis=0)
    else:
        pos, valid, _ = _compact(cond, size)
        out = _pad(_take0(rows, pos), valid,
                   _fill_array(name, fill_value, rows.dtype, rows.shape[1:]))
    return jnp.moveaxis(out, 0, ax)


def compress(condition, a, axis=None, *, size=None, fill_value=0):
    """The slices of a along `axis` where condition is True (numpy.compress); axis None
    flattens a.

    condition: 1-d (nonzero counts as True); a shorter one selects among the first
    len(condition) slices; entries beyond the axis must be False. Without size, condition must
    be concrete (a may be traced). size: exactly `size` slices, the first ones selected,
    padded with fill_value (default 0). dtype: a's. Raises ValueError for a condition that is
    not 1-d or selects beyond the axis, ConcretizationTypeError for traced condition without
    size.
    """
    x = asarray(a)
    if axis is None:
        x, ax = lax.reshape(x, (x.size,)), 0
    else:
        ax = normalize_axis(axis, x.ndim)
    return _compress("compress", asarray(condition), x, ax, size, fill_value)


def extract(condition, arr, *, size=None, fill_value=0):
    """The elements of arr where condition is nonzero, both flattened (numpy.extract); 1-d, arr's
    dtype. size/fill_value and errors as compress."""
    c, x = asarray(condition), asarray(arr)
    return _compress("extract", lax.reshape(c, (c.size,)), lax.reshape(x, (x.size,)), 0, size,
                     fill_value)


def choose(a, choices, mode="raise"):
    """out[i] = choices[a[i]][i], everything broadcast together (numpy.choose).

    a: integers; choices: a sequence of arrays (or an array whose first axis enumerates them),
    promoted to one dtype. mode "raise": a must be concrete and in [0, len(choices)) (use
    "wrap" or "clip" under jit); "wrap": a modulo len(choices); "clip": clamped. Result: the
    broadcast shape, the choices' dtype. Raises TypeError for non-integer a, ValueError for no
    choices, an entry out of range or an unknown mode, ShapeError for shapes that do not
    broadcast, ConcretizationTypeError for traced a with mode "raise".
    """
    idx = asarray(a)
    if not dtypes.is_int(idx.dtype):
        raise TypeError(f"choose: a must be an integer array, got {idx.dtype}{where_am_i()}")
    ch = _array_sequence("choose", "choices", choices, ValueError)
    if not ch:
        raise ValueError(f"choose: choices must not be empty{where_am_i()}")
    k = len(ch)
    if mode == "raise":
        c = _concrete(idx)
        if c is None:
            raise ConcretizationTypeError(
                f"choose: mode='raise' needs concrete a, but it is traced (inside jit or vmap); "
                f"use mode='wrap' or mode='clip'{where_am_i()}")
        if c.size and (c.min() < 0 or c.max() >= k):
            bad = c.min() if c.min() < 0 else c.max()
            raise ValueError(f"choose: invalid entry {bad} in choice array a: must be in "
                             f"[0, {k}) for {k} choices{where_am_i()}")
    elif mode == "wrap":
        idx = jnp.mod(idx, k)
    elif mode == "clip":
        idx = jnp.clip(idx, 0, k - 1)
    else:
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}"
                         f"{where_am_i()}")
    dt = dtypes.result_type(*ch)
    shape = broadcast_shapes(idx.shape, *(c.shape for c in ch), name="choose")
    stacked = jnp.stack([broadcast_to(lax.convert_element_type(c, dt), shape) for c in ch])
    sel = lax.reshape(broadcast_to(lax.convert_element_type(idx, _I32), shape), (1,) + shape)
    return lax.reshape(jnp.take_along_axis(stacked, sel, axis=0), shape)


def resize(a, new_shape):
    """a's flattened values repeated (cyclically) to fill `new_shape` (numpy.resize; not
    a.resize, which pads with zeros). new_shape: an int or a tuple of ints; same dtype. An empty
    a (or new size) gives zeros. Raises ValueError for a negative dimension, TypeError for a
    non-integer one."""
    x = asarray(a)
    x = lax.reshape(x, (x.size,))
    shape = (new_shape,) if not isinstance(new_shape, tuple | list) else tuple(new_shape)
    shape = tuple(_int("resize", "new_shape", d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"resize: all elements of new_shape must be non-negative, got {shape}"
                         f"{where_am_i()}")
    total = math.prod(shape)
    if x.size == 0 or total == 0:
        return _filled(shape, 0, x.dtype)
    reps = -(-total // x.size)
    return lax.reshape(jnp.tile(x, reps)[:total], shape)


def trim_zeros(filt, trim="fb", axis=None):
    """filt without its leading ('f') and/or trailing ('b') zeros (numpy.trim_zeros).

    trim: 'f', 'b', 'fb' or 'bf'. axis (NumPy 2.2): the axes to trim (None: all); along each,
    the bounding box of the nonzero entries is kept; an all-zero filt gives an empty result.
    Same dtype. The result's shape depends on the values, so filt must be concrete: there is no
    size= form. Raises ValueError for another trim, ConcretizationTypeError for traced filt.
    """
    x = asarray(filt)
    if not isinstance(trim, str) or trim.lower() not in {"fb", "bf", "f", "b"}:
        raise ValueError(f"trim_zeros: unexpected character(s) in `trim`: {trim!r}; use 'f', "
                         f"'b' or 'fb'{where_am_i()}")
    trim = trim.lower()
    c = _concrete(x)
    if c is None:
        raise ConcretizationTypeError(
            f"trim_zeros: the result's shape depends on the values of filt, which are traced "
            f"(inside jit or vmap); trim_zeros needs a concrete array (call it outside jit)"
            f"{where_am_i()}")
    axes = normalize_axes(axis, x.ndim)
    if not axes:
        return x
    nz = np.argwhere(c != 0)
    if nz.shape[0] == 0:
        start = stop = np.zeros(x.ndim, np.int64)
    else:
        start = nz.min(axis=0) if "f" in trim else np.zeros(x.ndim, np.int64)
        stop = nz.max(axis=0) + 1 if "b" in trim else np.asarray(x.shape)
    sl = tuple(slice(int(start[d]), int(stop[d])) if d in axes else slice(None)
               for d in builtins.range(x.ndim))
    return x[sl]

