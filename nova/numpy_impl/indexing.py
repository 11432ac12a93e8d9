"""Indexing of nova.numpy: x[idx] (NumPy's basic and advanced indexing), take, take_along_axis, and
the functional updates x.at[idx].set/add/multiply/min/max/get.

Semantics differ from NumPy's only where a traced value forces it (as in JAX):
- Static indices (Python ints, lists, NumPy arrays) are checked: out of range raises IndexError
  naming the index, the axis and its size, for reads and for .at updates alike.
- Dynamic indices (nova Arrays, traced or not) are not checked: after negative indices wrap once
  (i + size), a read CLAMPS them into range, and an .at update DROPS out-of-range ones.
- Boolean masks need concrete values (NumPy arrays, or nova Arrays outside jit): the result's
  shape is the number of True entries. A mask traced inside jit raises ConcretizationTypeError.
- x.at[idx].set(v) with repeated indices keeps the last update; .add/.multiply/.min/.max combine
  all of them (repeats accumulate, like numpy.add.at).
"""

from __future__ import annotations

import builtins

import numpy as np

from nova.core import dtypes
from nova.core.array import Array
from nova.core.errors import ConcretizationTypeError, ShapeError
from nova.numpy_impl.index_plan import (
    apply_basic,
    check_static,
    describe,
    dynamic_index,
    index_coords,
    index_dtype,
    parse_index,
    static_value,
)
from nova.numpy_impl.util import asarray, broadcast_to, normalize_axis, where_am_i
from nova.ops import lax

__all__ = ["getitem", "take", "take_along_axis", "_IndexUpdateHelper"]


def getitem(x, idx):
    """x[idx] with NumPy's rules: ints (negative count from the end), slices with any step,
    None/newaxis, Ellipsis, integer arrays (broadcast together; their dimensions go where the
    first one was when they are adjacent, else first) and boolean masks (concrete only).

    Static out-of-range indices raise IndexError; dynamic ones (nova Arrays) are clamped. Float
    indices raise TypeError; a traced mask or slice bound raises ConcretizationTypeError.
    """
    x = asarray(x)
    plan = parse_index(x.shape, idx, "x[...]")
    y = apply_basic(lax.reshape(x, plan.shape), plan)
    if not plan.adv:
        return y
    # Slices kept every axis (ints are advanced here), so plan axes are y's axes.
    axes = [a for a, _ in plan.adv]
    empty = [a for a in axes if y.shape[a] == 0]
    if empty and int(np.prod(plan.adv_shape)) > 0:
        raise IndexError(
            f"x[...]: index is out of bounds for axis {empty[0]} with size 0{where_am_i()}"
        )
    nb = len(plan.adv_shape)
    dims = tuple(range(nb))
    parts = [(v, dims[nb - np.ndim(v) :], y.shape[a]) for a, v in plan.adv]
    indices = index_coords(parts, plan.adv_shape, index_dtype(*y.shape))
    out = lax.gather(y, indices, axes)  # adv_shape + the other axes in order
    rest = [a for a, e in enumerate(plan.entries) if e[0] != "adv"]
    if plan.adv_front:
        return out
    p = sum(1 for a in rest if a < axes[0])
    perm = list(range(nb, nb + p)) + list(range(nb)) + list(range(nb + p, nb + len(rest)))
    return lax.transpose(out, perm)


# --- take, take_along_axis ------------------------------------------------------------------------


def take_1d(x, idx, axis):
    """x indexed along `axis` by in-range indices (a NumPy array or nova int array of any shape),
    whose dimensions replace that axis."""
    dt = index_dtype(*x.shape)
    ind = (
        lax.constant(np.asarray(idx, dt))
        if not isinstance(idx, Array)
        else lax.convert_element_type(idx, dt)
    )
    out = lax.gather(x, lax.reshape(ind, ind.shape + (1,)), (axis,))
    k = ind.ndim
    perm = list(range(k, k + axis)) + list(range(k)) + list(range(k + axis, out.ndim))
    return lax.transpose(out, perm)


def _take_indices(indices, n, axis, mode, name):
    if isinstance(indices, Array):
        ok = dtypes.is_int(indices.dtype)
    else:
        host = np.asarray(indices)
        ok = host.dtype.kind in "iu" or (host.size == 0 and not isinstance(indices, np.ndarray))
        indices = host.astype(np.int64) if ok else indices
    if not ok:
        raise TypeError(f"{name}: indices must be integers, got {describe(indices)}{where_am_i()}")
    if mode == "raise":
        v = static_value(indices)
        if v is None:
            raise ConcretizationTypeError(
                f"{name}: mode='raise' needs concrete indices, but they are traced inside jit; use "
                f"mode='clip' or 'wrap'{where_am_i()}"
            )
        return check_static(v, axis, n, name)
    if mode in ("clip", "wrap"):
        dt = index_dtype(n)
        i = lax.convert_element_type(asarray(indices), dt)
        if n == 0:
            return i
        if mode == "wrap":
            nn = lax.full(i.shape, n, dt)
            return lax.rem(lax.add(lax.rem(i, nn), nn), nn)
        return i  # gather clamps (NumPy's 'clip' also maps negatives to 0)
    if mode is not None:
        raise ValueError(
            f"{name}: mode must be None, 'raise', 'clip' or 'wrap', got {mode!r}{where_am_i()}"
        )
    if isinstance(indices, Array):
        return dynamic_index(indices, n, index_dtype(n))
    return check_static(indices, axis, n, name)


def take(a, indices, axis=None, mode=None):
    """Elements of `a` at `indices` along `axis` (None: of the flattened array).

    Result shape: a.shape[:axis] + indices.shape + a.shape[axis + 1:], a's dtype.
    mode None: static indices are checked (IndexError) and negative ones wrap; dynamic ones wrap
    negatives once and clamp. 'raise': check (needs concrete indices); 'clip': clamp into range
    (negatives become 0); 'wrap': indices modulo the size.
    """
    x = asarray(a)
    if axis is None:
        x, ax = lax.reshape(x, (x.size,)), 0
    else:
        ax = normalize_axis(axis, x.ndim)
    ind = _take_indices(indices, x.shape[ax], ax, mode, "take")
    if x.shape[ax] == 0 and int(np.prod(np.shape(ind))) > 0:
        raise IndexError(f"take: cannot take from axis {ax} of size 0{where_am_i()}")
    return take_1d(x, ind, ax)


def take_along_axis(arr, indices, axis, mode=None):
    """out[..., j, ...] = arr[..., indices[..., j, ...], ...] along `axis` (numpy.take_along_axis).

    indices: integer array with arr's number of dimensions; other dimensions broadcast against
    arr's. axis None: arr is flattened and indices must be 1-d. Out-of-range handling as take.
    Raises ValueError for a dimension mismatch, ShapeError for shapes that do not broadcast.
    """
    x = asarray(arr)
    if axis is None:
        x, ax = lax.reshape(x, (x.size,)), 0
    else:
        ax = normalize_axis(axis, x.ndim)
    shape = np.shape(indices) if not isinstance(indices, Array) else indices.shape
    if len(shape) != x.ndim:
        raise ValueError(
            f"take_along_axis: indices of shape {tuple(shape)} must have the same number of "
            f"dimensions as arr of shape {x.shape}{where_am_i()}"
        )
    out_shape = []
    for d, (m, k) in enumerate(zip(x.shape, shape, strict=True)):
        if d == ax:
            out_shape.append(k)
        elif m == k or 1 in (m, k):
            out_shape.append(builtins.max(m, k) if 0 not in (m, k) else 0)
        else:
            raise ShapeError(
                f"take_along_axis: arr of shape {x.shape} and indices of shape {tuple(shape)} do "
                f"not broadcast outside axis {ax}{where_am_i()}"
            )
    out_shape = tuple(out_shape)
    ind = _take_indices(indices, x.shape[ax], ax, mode, "take_along_axis")
    if x.shape[ax] == 0 and int(np.prod(out_shape)) > 0:
        raise IndexError(f"take_along_axis: cannot take from axis {ax} of size 0{where_am_i()}")
    bshape = tuple(out_shape[d] if d != ax else x.shape[d] for d in range(x.ndim))
    x = lax.broadcast_in_dim(x, bshape, tuple(range(x.ndim)))
    dt = index_dtype(*bshape)
    dims = tuple(range(x.ndim))
    parts = []
    for d in range(x.ndim):
        if d == ax:
            v = ind if isinstance(ind, Array) else np.asarray(ind)
            parts.append((_broadcast_index(v, out_shape), dims, x.shape[d]))
        else:
            parts.append(
                (
                    np.broadcast_to(
                        np.arange(out_shape[d]).reshape(
                            [-1 if i == d else 1 for i in range(x.ndim)]
                        ),
                        out_shape,
                    ),
                    dims,
                    x.shape[d],
                )
            )
    return lax.gather(x, index_coords(parts, out_shape, dt), dims)


def _broadcast_index(v, shape):
    if isinstance(v, Array):
        return lax.broadcast_in_dim(v, shape, tuple(range(len(shape)))) if v.shape != shape else v
    return np.broadcast_to(v, shape)


# --- x.at[idx] ------------------------------------------------------------------------------------

_MODES = {"set": "set", "add": "add", "multiply": "mul", "min": "min", "max": "max"}


def _update(x, idx, values, method):
    """x with `values` combined into x[idx] by `method`; same index forms as getitem."""
    where = f"x.at[...].{method}"
    x = asarray(x)
    plan = parse_index(x.shape, idx, where)
    # Basic ints become advanced (0-d) indices: with no index arrays they add no dimension.
    for a, e in enumerate(plan.entries):
        if e[0] == "int":
            plan.adv.append((a, np.asarray(e[1], np.int64)))
            plan.entries[a] = ("adv", len(plan.adv) - 1)
    view = plan.result_shape()
    v = asarray(values)
    v = lax.convert_element_type(v, x.dtype)
    try:
        v = broadcast_to(v, view)
    except ShapeError:
        raise ShapeError(
            f"{where}: cannot broadcast values of shape {v.shape} to the indexed shape {view} "
            f"(array shape {x.shape}){where_am_i()}"
        ) from None
    layout = plan.layout()
    batch_pos = [
        p for p, (kind, a) in enumerate(layout) if kind == "B" or plan.entries[a][0] == "slice"
    ]
    window_pos = [p for p in range(len(layout)) if p not in batch_pos]
    batch_shape = tuple(view[p] for p in batch_pos)
    b_dims = tuple(i for i, p in enumerate(batch_pos) if layout[p][0] == "B")
    parts, axes = [], []
    for a, e in enumerate(plan.entries):
        if e[0] == "slice":
            s0, step, length = e[1:]
            d = batch_pos.index(layout.index(("axis", a)))
            parts.append((s0 + step * np.arange(length), (d,), plan.shape[a]))
            axes.append(a)
        elif e[0] == "adv":
            v_idx = plan.adv[e[1]][1]
            nd = np.ndim(v_idx) if not isinstance(v_idx, Array) else v_idx.ndim
            parts.append((v_idx, b_dims[len(b_dims) - nd :], plan.shape[a]))
            axes.append(a)
    indices = index_coords(parts, batch_shape, index_dtype(*plan.shape))
    updates = lax.transpose(v, batch_pos + window_pos)
    y = lax.reshape(x, plan.shape)
    out = lax.scatter(y, indices, updates, axes, _MODES[method])
    return lax.reshape(out, x.shape)


class _IndexUpdateRef:
    """x.at[idx]: functional updates of x at idx (returns new arrays; x is unchanged)."""

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array = array
        self.index = index

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self):
        """x[idx] (the same as getitem)."""
        return getitem(self.array, self.index)

    def set(self, values):
        """x with x[idx] replaced by values (broadcast; cast to x's dtype). Repeats: last wins."""
        return _update(self.array, self.index, values, "set")

    def add(self, values):
        """x with values added at idx; repeated indices accumulate (like numpy.add.at)."""
        return _update(self.array, self.index, values, "add")

    def multiply(self, values):
        """x with x[idx] multiplied by values; repeated indices multiply in turn."""
        return _update(self.array, self.index, values, "multiply")

    mul = multiply

    def min(self, values):
        """x with x[idx] replaced by minimum(x[idx], values), repeats included."""
        return _update(self.array, self.index, values, "min")

    def max(self, values):
        """x with x[idx] replaced by maximum(x[idx], values), repeats included."""
        return _update(self.array, self.index, values, "max")


class _IndexUpdateHelper:
    """The `.at` property of nova.Array: `x.at[idx].set(v)` is NumPy's `x[idx] = v` as a new array.

    Supports the index forms of getitem; methods set, add, multiply, min, max and get. Gradients
    flow to both x and the values. Static out-of-range indices raise IndexError; dynamic ones
    are dropped (the update does not happen), as in JAX.
    """

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        return _IndexUpdateRef(self.array, index)

    def __repr__(self):
        return f"_IndexUpdateHelper({self.array!r})"
