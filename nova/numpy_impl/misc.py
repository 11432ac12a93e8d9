"""More nova.numpy functions: bit shifts, diag/diagonal/trace, meshgrid, nan_to_num."""

from __future__ import annotations

import numpy as np

from nova.core import dtypes
from nova.ops import lax
from nova.numpy_impl.util import asarray, normalize_axis, promote, where_am_i

__all__ = ["left_shift", "right_shift", "diag", "diagonal", "trace", "meshgrid", "nan_to_num"]


def _int_args(name, x1, x2):
    a, b = promote(name, x1, x2)
    if not dtypes.is_int(a.dtype):
        raise TypeError(f"{name} needs integer operands, got {a.dtype}{where_am_i()}")
    return a, b


def left_shift(x1, x2, /):
    """x1 << x2 elementwise (numpy.left_shift); shifts of the bit width or more give 0."""
    return lax.shift_left(*_int_args("left_shift", x1, x2))


def right_shift(x1, x2, /):
    """x1 >> x2 elementwise (numpy.right_shift): arithmetic for signed, logical for unsigned
    integers; shifts of the bit width or more give the sign fill (or 0)."""
    a, b = _int_args("right_shift", x1, x2)
    if dtypes.is_unsigned(a.dtype):
        return lax.shift_right_logical(a, b)
    return lax.shift_right_arithmetic(a, b)


def diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonal `offset` of the planes (axis1, axis2), as the last axis (numpy.diagonal)."""
    x = asarray(a)
    if x.ndim < 2:
        raise ValueError(f"diagonal needs an array of at least 2 dimensions, got shape {x.shape}"
                         f"{where_am_i()}")
    i1, i2 = normalize_axis(axis1, x.ndim, "axis1"), normalize_axis(axis2, x.ndim, "axis2")
    if i1 == i2:
        raise ValueError(f"diagonal: axis1 and axis2 cannot be the same{where_am_i()}")
    from nova.numpy_impl.shape import moveaxis

    x = moveaxis(x, (i1, i2), (-2, -1))
    n, m = x.shape[-2], x.shape[-1]
    rows = np.arange(max(0, -offset), min(n, m - offset)) if m - offset > 0 else np.arange(0)
    if rows.size == 0:
        return lax.reshape(x[..., :0, 0], x.shape[:-2] + (0,)) if x.size else \
            lax.full(x.shape[:-2] + (0,), 0, x.dtype)
    return x[..., rows, rows + offset]


def diag(v, k=0):
    """numpy.diag: the k-th diagonal of a 2-D array, or a 2-D array with v on its k-th diagonal."""
    x = asarray(v)
    if x.ndim == 2:
        return diagonal(x, k)
    if x.ndim != 1:
        raise ValueError(f"diag needs a 1-D or 2-D array, got shape {x.shape}{where_am_i()}")
    n = x.shape[0] + abs(k)
    r = lax.iota(dtypes.int32, (n, n), 0)
    c = lax.iota(dtypes.int32, (n, n), 1)
    on = lax.eq(lax.sub(c, r), lax.full((n, n), k, dtypes.int32))
    idx = lax.select(lax.ge(lax.full((n, n), k, dtypes.int32), lax.full((n, n), 0, dtypes.int32)),
                     r, c)
    idx = lax.min(idx, lax.full((n, n), max(x.shape[0] - 1, 0), dtypes.int32))
    from nova.numpy_impl.indexing import take

    vals = take(x, idx) if x.shape[0] else lax.full((n, n), 0, x.dtype)
    return lax.select(on, vals, lax.full((n, n), 0, x.dtype))


def trace(a, offset=0, axis1=0, axis2=1, dtype=None):
    """Sum of the diagonal `offset` of the planes (axis1, axis2) (numpy.trace)."""
    from nova.numpy_impl.reductions import sum as sum_

    return sum_(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def meshgrid(*xi, indexing="xy", sparse=False, copy=True):
    """Coordinate arrays from 1-D coordinate vectors (numpy.meshgrid; indexing 'xy' or 'ij')."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}{where_am_i()}")
    arrs = [asarray(x).reshape(-1) if asarray(x).ndim != 1 else asarray(x) for x in xi]
    shape = [a.shape[0] for a in arrs]
    if indexing == "xy" and len(arrs) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrs):
        dim = i
        if indexing == "xy" and len(arrs) >= 2 and i < 2:
            dim = 1 - i
        if sparse:
            s = [1] * len(arrs)
            s[dim] = a.shape[0]
            out.append(lax.reshape(a, tuple(s)))
        else:
            out.append(lax.broadcast_in_dim(a, tuple(shape), (dim,)))
    return out


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN -> `nan`, +inf -> `posinf` (default: the dtype's max), -inf -> `neginf` (its min),
    elementwise (numpy.nan_to_num). x: any shape; the result has x's shape and dtype (bool and
    integers are returned as they are). A complex x has each part replaced independently (as
    NumPy: nan + inf j gives 0 + max j)."""
    a = asarray(x)
    if dtypes.is_complex(a.dtype):
        re = nan_to_num(lax.real(a), copy, nan, posinf, neginf)
        im = nan_to_num(lax.imag(a), copy, nan, posinf, neginf)
        return lax.complex(re, im)
    if not dtypes.is_float(a.dtype):
        return a
    fi = dtypes.finfo(a.dtype)
    hi = float(fi.max) if posinf is None else posinf
    lo = float(fi.min) if neginf is None else neginf
    full = lambda v: lax.full(a.shape, v, a.dtype)  # noqa: E731
    out = lax.select(lax.isnan(a), full(nan), a)
    pos = lax.bitwise_and(lax.isinf(a), lax.gt(a, full(0)))
    neg = lax.bitwise_and(lax.isinf(a), lax.lt(a, full(0)))
    return lax.select(neg, full(lo), lax.select(pos, full(hi), out))
