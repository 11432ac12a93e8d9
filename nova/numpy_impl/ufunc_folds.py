"""The index-driven ufunc methods (numpy_impl/ufunc_objects): `at` by a scan over the updated
entries for the ufuncs without a scatter update, and `reduceat` as masked reductions for the
associative ufuncs and as one scan of per-segment folds for the others."""

from __future__ import annotations

import numpy as np

from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.numpy_impl.ufuncs import where as select
from nova.numpy_impl.util import asarray, where_am_i

__all__ = ["checked_indices", "fold_reduceat", "masked_reduceat", "sequential_at"]


def _result_dtype(func, a, operand):
    """The dtype of func(a's element, operand's element); a Python scalar operand stays weakly
    typed (a float16 a with 2.5 stays float16)."""
    from nova.control_flow import trace_region
    from nova.core.ir import TensorType

    types = [TensorType((), a.dtype)]
    if operand is None:
        one = func
    elif isinstance(operand, bool | int | float):
        def one(x):
            return func(x, operand)
    else:
        one = func
        types.append(TensorType((), operand.dtype))
    return np.dtype(trace_region(one, types)[0].outputs[0].type.dtype)


def sequential_at(u, a, indices, b):
    """a with u's function applied at a[indices], one indexed entry at a time in C order (so a
    repeated index applies repeatedly, numpy.ufunc.at's unbuffered rule). The result dtype is
    the function's for a's and b's elements, as jnp's (divide.at of ints is float32); b
    broadcasts to a[indices].shape. One scan step per indexed entry, or one gather and
    scatter when the indices are concrete and never repeat. Raises ShapeError when b does not
    broadcast to a[indices].shape, and what indexing raises for bad indices."""
    from nova.control_flow import scan
    from nova.numpy_impl.index_plan import static_value
    from nova.numpy_impl.ranges import arange
    from nova.numpy_impl.shape import broadcast_to

    a = asarray(a)
    weak = isinstance(b, bool | int | float)
    operand = None if u.nin == 1 else (b if weak else asarray(b))
    dtype = _result_dtype(u._func, a, operand)
    pos = arange(a.size, dtype=dtypes.int32).reshape(a.shape)[indices]  # the entries updated
    flat = a.astype(dtype).reshape(-1)
    p = pos.reshape(-1)
    if operand is not None and not weak:
        lead = pos.ndim - operand.ndim
        if lead < 0 or any(d not in (1, g) for d, g in zip(operand.shape, pos.shape[lead:],
                                                             strict=True)):
            raise ShapeError(f"{u.__name__}.at: b of shape {operand.shape} does not broadcast "
                             f"to a[indices].shape {pos.shape} (a of shape {a.shape})"
                             f"{where_am_i()}")
        operand = broadcast_to(operand, pos.shape).reshape(-1)
    if p.shape[0] == 0:
        return flat.reshape(a.shape)

    def apply(x, v):
        return (u._func(x) if u.nin == 1 else u._func(x, v)).astype(dtype)

    known = static_value(p)
    if known is not None and np.unique(known).size == known.size:
        return flat.at[p].set(apply(flat[p], operand)).reshape(a.shape)

    def step(c, x):
        i, v = x if isinstance(x, tuple) else (x, operand)
        return c.at[i].set(apply(c[i], v)), None

    xs = (p, operand) if operand is not None and not weak else p
    return scan(step, flat, xs)[0].reshape(a.shape)


def fold_reduceat(func, xs, idx, end):
    """The folds ((x[i] op x[i+1]) op ...) op x[e-1] of each segment [i, e) = [idx[k], end[k])
    of xs along its leading axis, all k at once: one scan over xs whose carry holds every
    segment's fold (a segment with i >= e stays x[i]). xs: (n, ...); idx, end: (k,) ints in
    [0, n]; result (k, ...) in xs's dtype. O(k n) work, as the masked associative path."""
    from nova.control_flow import scan
    from nova.numpy_impl.ranges import arange

    tail = (1,) * (xs.ndim - 1)

    def step(c, jx):
        j, x = jx
        inside = ((idx < j) & (j < end)).reshape(idx.shape + tail)
        return select(inside, func(c, x[None]).astype(c.dtype), c), None

    j = arange(xs.shape[0], dtype=idx.dtype)
    return scan(step, xs[idx], (j, xs))[0]


def checked_indices(name: str, idx, n: int, axis: int, shape):
    """reduceat's indices: concrete ones checked against [0, n), traced ones (which cannot be)
    clipped into [0, n - 1] as Nova's gathers clip. Raises IndexError naming the index."""
    from nova.numpy_impl.index_plan import static_value

    v = static_value(idx)
    if v is None:
        return idx.clip(0, n - 1)
    bad = v[(v < 0) | (v >= n)]
    if bad.size:
        raise IndexError(f"{name}.reduceat: index {int(bad[0])} is out of bounds [0, {n}) for "
                         f"axis {axis} of an array of shape {shape}{where_am_i()}")
    return idx


def masked_reduceat(u, xs, idx, end):
    """The reductions of the segments [idx[k], end[k]) of xs along its leading axis with u's
    associative reducer, each a masked reduction over the whole axis (a segment with
    idx >= end is xs[idx]). xs: (n, ...); result (k, ...) in xs's dtype."""
    from nova.numpy_impl.ranges import arange
    from nova.numpy_impl.ufunc_objects import cast_identity

    tail = (1,) * (xs.ndim - 1)
    j = arange(xs.shape[0])
    rows = (j[None, :] >= idx[:, None]) & (j[None, :] < end[:, None])  # (k, n)
    first = xs[idx]  # each segment's first entry
    # Outside its segment an entry is the identity, or (idempotent ufuncs) the segment's first
    # entry again: no dtype-dependent sentinel, and fmax of an all-NaN segment stays NaN.
    fill = asarray(cast_identity(u.identity, xs.dtype)) if u.identity is not None \
        else first[:, None]
    res = u._reducer(select(rows.reshape(rows.shape + tail), xs[None], fill), axis=(1,),
                     dtype=xs.dtype, keepdims=False)
    return select((idx >= end).reshape(idx.shape + tail), first, res).astype(xs.dtype)
