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
import numbers
from dataclasses import dataclass

import numpy as np

from nova.core import dtypes
from nova.core.array import Array
from nova.core.errors import ConcretizationTypeError, ShapeError
from nova.core.trace import Tracer
from nova.numpy_impl.util import asarray, broadcast_to, normalize_axis, where_am_i
from nova.ops import lax

__all__ = ["getitem", "take", "take_along_axis", "_IndexUpdateHelper"]

_pyslice = builtins.slice


def static_value(x):
    """x's value as a NumPy array if it is known while tracing (host values, concrete Arrays and
    tracers of grad's concrete trace); None for a value traced inside jit."""
    if isinstance(x, Tracer):
        return None if x._val is None else np.asarray(x._val)
    return np.asarray(x)


def _index_dtype(*sizes):
    return dtypes.int64 if builtins.max(sizes, default=0) >= 2**31 - 1 else dtypes.int32


# --- parsing an index into a plan -----------------------------------------------------------------


@dataclass
class _Plan:
    """An index tuple resolved against a shape.

    shape:   the array's shape with the axes inserted by None (and bool scalars)
    entries: one per axis of `shape`: ("full",), ("slice", start, step, length), ("int", i),
             or ("adv", k) naming adv[k]
    adv:     (axis, index) of each advanced index: a NumPy int array (checked, non-negative) or
             a nova int Array (dynamic: negative values still to wrap)
    adv_shape: the broadcast shape of the advanced indices
    adv_front: the advanced dimensions go first in the result (they are not adjacent in the index)
    """

    shape: tuple
    entries: list
    adv: list
    adv_shape: tuple
    adv_front: bool

    def layout(self):
        """The result's dimensions: ("B", j) for advanced ones, ("axis", a) for sliced ones."""
        out, placed = [], False
        b = [("B", j) for j in range(len(self.adv_shape))]
        if self.adv and self.adv_front:
            out, placed = list(b), True
        for a, e in enumerate(self.entries):
            if e[0] in ("full", "slice"):
                out.append(("axis", a))
            elif e[0] == "adv" and not placed:
                out.extend(b)
                placed = True
        return out

    def result_shape(self):
        return tuple(self.adv_shape[j] if kind == "B" else self._axis_len(j) for kind, j in self.layout())

    def _axis_len(self, a):
        e = self.entries[a]
        return self.shape[a] if e[0] == "full" else e[3]


def _describe(item):
    return f"{type(item).__name__} {item!r}" if not isinstance(item, Array) else f"array of {item.dtype}"


def _type_error(where, item, pos):
    return TypeError(
        f"{where}: only integers, slices (`:`), ellipsis (`...`), None (numpy.newaxis) and integer "
        f"or boolean arrays are valid indices; got {_describe(item)} at position {pos}{where_am_i()}"
    )


def _classify(item, pos, where):
    """(kind, value): kind in none, ellipsis, slice, int, boolscalar, array, mask."""
    if item is None:
        return "none", None
    if item is Ellipsis:
        return "ellipsis", None
    if isinstance(item, _pyslice):
        return "slice", item
    if isinstance(item, bool | np.bool_):
        return "boolscalar", bool(item)
    if isinstance(item, numbers.Integral):
        return "int", int(item)
    if isinstance(item, Array):
        if dtypes.is_bool(item.dtype):
            if item.ndim == 0:
                return "boolscalar", bool(_concrete_mask(item, where))
            return "mask", item
        if dtypes.is_int(item.dtype):
            return "array", item
        raise _type_error(where, item, pos)
    if isinstance(item, np.ndarray | list | tuple | np.generic):
        try:
            v = np.asarray(item)
        except ValueError:
            raise _type_error(where, item, pos) from None
        if v.dtype == np.bool_:
            return ("mask", v) if v.ndim else ("boolscalar", bool(v))
        if v.dtype.kind in "iu":
            return "array", v
        if v.size == 0 and v.dtype.kind == "f" and not isinstance(item, np.ndarray):
            return "array", v.astype(np.intp)  # an empty list indexes nothing, as in NumPy
        if isinstance(item, list | tuple) and any(isinstance(e, Array) for e in item):
            return "array", asarray(list(item))  # a list holding nova scalars: a dynamic array
    raise _type_error(where, item, pos)


def _slice_bounds(s, n, where):
    try:
        start, stop, step = s.indices(n)
    except TypeError as e:
        if any(isinstance(b, Tracer) for b in (s.start, s.stop, s.step)):
            raise ConcretizationTypeError(
                f"{where}: slice bounds must be static, but {s} holds a traced value inside jit; "
                f"index with a traced integer (x[i], a gather) or mark the argument static with "
                f"static_argnums{where_am_i()}"
            ) from None
        raise TypeError(f"{where}: slice indices must be integers or None, got {s}{where_am_i()}") from e
    except ValueError as e:
        raise ValueError(f"{where}: {e} (in {s}){where_am_i()}") from None
    return start, step, len(range(start, stop, step))


def _check_static(v, axis, n, where):
    """A host index checked against the axis size and wrapped to non-negative."""
    v = np.asarray(v, dtype=np.int64)
    bad = (v < -n) | (v >= n)
    if bad.any():
        i = int(v[bad].reshape(-1)[0])
        raise IndexError(f"{where}: index {i} is out of bounds for axis {axis} with size {n}{where_am_i()}")
    return np.where(v < 0, v + n, v)


def _concrete_mask(mask, where):
    m = static_value(mask)
    if m is None:
        raise ConcretizationTypeError(
            f"{where}: a boolean mask of shape {mask.shape} is traced inside jit, but the result's "
            f"shape (its number of True entries) must be static. Use nova.numpy.where(mask, x, y) "
            f"to keep the shape, compute the mask outside jit, or pass it as a static argument"
            f"{where_am_i()}"
        )
    return m


def _mask_to_arrays(mask, axis, shape, where):
    m = _concrete_mask(mask, where)
    dims = shape[axis : axis + m.ndim]
    if tuple(dims) != m.shape:
        raise IndexError(
            f"{where}: boolean index of shape {m.shape} does not match the indexed array's "
            f"dimensions {tuple(dims)} from axis {axis} (array shape {tuple(shape)}){where_am_i()}"
        )
    return [a.astype(np.int64) for a in np.nonzero(m)]


def _parse(x_shape, idx, where) -> _Plan:
    items = list(idx) if isinstance(idx, tuple) else [idx]
    parsed = [_classify(it, pos, where) for pos, it in enumerate(items)]
    ndim = len(x_shape)
    consumed = 0
    for kind, v in parsed:
        if kind in ("slice", "int", "array"):
            consumed += 1
        elif kind == "mask":
            consumed += np.ndim(v)
    if consumed > ndim:
        raise IndexError(
            f"{where}: too many indices for array: array is {ndim}-dimensional, but {consumed} "
            f"were indexed{where_am_i()}"
        )
    n_ell = sum(k == "ellipsis" for k, _ in parsed)
    if n_ell > 1:
        raise IndexError(f"{where}: an index can only have a single ellipsis ('...'){where_am_i()}")
    fill = [("slice", _pyslice(None))] * (ndim - consumed)
    if n_ell:
        e = [k for k, _ in parsed].index("ellipsis")
        parsed = parsed[:e] + fill + parsed[e + 1 :]
    else:
        parsed = parsed + fill

    shape, entries, adv = [], [], []
    src = iter(x_shape)
    has_adv = any(k in ("array", "mask", "boolscalar") for k, _ in parsed)
    for kind, v in parsed:
        if kind == "none":
            shape.append(1)
            entries.append(("full",))
            continue
        if kind == "boolscalar":
            # x[True] is x[None][[True]]: a new axis indexed by a 1-element mask.
            shape.append(1)
            adv.append((len(entries), np.nonzero(np.array([v]))[0]))
            entries.append(("adv", len(adv) - 1))
            continue
        if kind == "mask":
            axis = len(shape)
            shape.extend(next(src) for _ in range(np.ndim(v)))
            for a_i, arr in enumerate(_mask_to_arrays(v, axis, tuple(shape), where)):
                adv.append((axis + a_i, arr))
                entries.append(("adv", len(adv) - 1))
            continue
        n = next(src)
        axis = len(shape)
        shape.append(n)
        if kind == "slice":
            start, step, length = _slice_bounds(v, n, where)
            full = start == 0 and step == 1 and length == n
            entries.append(("full",) if full else ("slice", start, step, length))
        elif kind == "int":
            i = int(_check_static(v, axis, n, where))
            if has_adv:
                adv.append((axis, np.asarray(i, np.int64)))
                entries.append(("adv", len(adv) - 1))
            else:
                entries.append(("int", i))
        else:  # an integer array
            if isinstance(v, Array):
                if n == 0 and v.size:
                    raise IndexError(
                        f"{where}: index is out of bounds for axis {axis} with size 0{where_am_i()}"
                    )
                adv.append((axis, v))
            else:
                adv.append((axis, _check_static(v, axis, n, where)))
            entries.append(("adv", len(adv) - 1))
    adv_pos = [a for a, e in enumerate(entries) if e[0] == "adv"]
    adjacent = not adv_pos or adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1))
    try:
        adv_shape = tuple(np.broadcast_shapes(*(tuple(np.shape(v)) for _, v in adv)))
    except ValueError:
        raise IndexError(
            f"{where}: shape mismatch: indexing arrays could not be broadcast together with shapes "
            f"{' '.join(str(tuple(np.shape(v))) for _, v in adv)}{where_am_i()}"
        ) from None
    return _Plan(tuple(shape), entries, adv, adv_shape, not adjacent)


# --- building index arrays ------------------------------------------------------------------------


def _dynamic_index(v, n, dt):
    """A nova int index with negative values wrapped once (i + n); range is left to the op."""
    i = lax.convert_element_type(v, dt)
    return lax.select(lax.lt(i, lax.full(i.shape, 0, dt)), lax.add(i, lax.full(i.shape, n, dt)), i)


def _coords(parts, batch_shape, dt):
    """Stacks coordinate arrays into indices of shape batch_shape + (len(parts),).

    parts: (value, dims, n): value a NumPy or nova int array whose axes map to `dims` of
    batch_shape; n the size of the indexed axis (for wrapping dynamic negatives).
    """
    if all(not isinstance(v, Array) for v, _, _ in parts):
        cols = []
        for v, dims, _ in parts:
            view = [1] * len(batch_shape)
            for ax, d in zip(range(np.ndim(v)), dims, strict=True):
                view[d] = np.shape(v)[ax]
            cols.append(np.broadcast_to(np.reshape(v, view), batch_shape))
        host = np.stack(cols, axis=-1) if cols else np.zeros(batch_shape + (0,), dt)
        return lax.constant(host.astype(dt))
    cols = []
    for v, dims, n in parts:
        c = _dynamic_index(v, n, dt) if isinstance(v, Array) else lax.constant(np.asarray(v, dt))
        c = lax.broadcast_in_dim(c, batch_shape, dims)
        cols.append(lax.reshape(c, batch_shape + (1,)))
    return lax.concatenate(cols, len(batch_shape))


def _apply_slices(y, plan):
    """Applies the slice and basic-int entries of the plan (ints drop their axis)."""
    flips = [a for a, e in enumerate(plan.entries) if e[0] == "slice" and e[2] < 0]
    y = lax.rev(y, flips)
    start, limit, strides = [], [], []
    for a, e in enumerate(plan.entries):
        n = plan.shape[a]
        if e[0] == "slice":
            s0, step, length = e[1:]
            if step < 0:  # position s0 of x is position n - 1 - s0 of the reversed x
                s0, step = n - 1 - s0, -step
            if length == 0:
                s0 = 0
            start.append(s0)
            limit.append(s0 + (length - 1) * step + 1 if length else s0)
            strides.append(step)
        elif e[0] == "int":
            start.append(e[1])
            limit.append(e[1] + 1)
            strides.append(1)
        else:
            start.append(0)
            limit.append(n)
            strides.append(1)
    y = lax.slice(y, start, limit, strides)
    if any(e[0] == "int" for e in plan.entries):
        y = lax.reshape(y, tuple(d for d, e in zip(y.shape, plan.entries, strict=True) if e[0] != "int"))
    return y


def getitem(x, idx):
    """x[idx] with NumPy's rules: ints (negative count from the end), slices with any step,
    None/newaxis, Ellipsis, integer arrays (broadcast together; their dimensions go where the
    first one was when they are adjacent, else first) and boolean masks (concrete only).

    Static out-of-range indices raise IndexError; dynamic ones (nova Arrays) are clamped. Float
    indices raise TypeError; a traced mask or slice bound raises ConcretizationTypeError.
    """
    x = asarray(x)
    plan = _parse(x.shape, idx, "x[...]")
    y = _apply_slices(lax.reshape(x, plan.shape), plan)
    if not plan.adv:
        return y
    # Slices kept every axis (ints are advanced here), so plan axes are y's axes.
    axes = [a for a, _ in plan.adv]
    empty = [a for a in axes if y.shape[a] == 0]
    if empty and int(np.prod(plan.adv_shape)) > 0:
        raise IndexError(f"x[...]: index is out of bounds for axis {empty[0]} with size 0{where_am_i()}")
    nb = len(plan.adv_shape)
    dims = tuple(range(nb))
    parts = [(v, dims[nb - np.ndim(v):], y.shape[a]) for a, v in plan.adv]
    indices = _coords(parts, plan.adv_shape, _index_dtype(*y.shape))
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
    dt = _index_dtype(*x.shape)
    ind = lax.constant(np.asarray(idx, dt)) if not isinstance(idx, Array) else lax.convert_element_type(idx, dt)
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
        raise TypeError(f"{name}: indices must be integers, got {_describe(indices)}{where_am_i()}")
    if mode == "raise":
        v = static_value(indices)
        if v is None:
            raise ConcretizationTypeError(
                f"{name}: mode='raise' needs concrete indices, but they are traced inside jit; use "
                f"mode='clip' or 'wrap'{where_am_i()}"
            )
        return _check_static(v, axis, n, name)
    if mode in ("clip", "wrap"):
        dt = _index_dtype(n)
        i = lax.convert_element_type(asarray(indices), dt)
        if n == 0:
            return i
        if mode == "wrap":
            nn = lax.full(i.shape, n, dt)
            return lax.rem(lax.add(lax.rem(i, nn), nn), nn)
        return i  # gather clamps (NumPy's 'clip' also maps negatives to 0)
    if mode is not None:
        raise ValueError(f"{name}: mode must be None, 'raise', 'clip' or 'wrap', got {mode!r}{where_am_i()}")
    if isinstance(indices, Array):
        return _dynamic_index(indices, n, _index_dtype(n))
    return _check_static(indices, axis, n, name)


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
    dt = _index_dtype(*bshape)
    dims = tuple(range(x.ndim))
    parts = []
    for d in range(x.ndim):
        if d == ax:
            v = ind if isinstance(ind, Array) else np.asarray(ind)
            parts.append((_broadcast_index(v, out_shape), dims, x.shape[d]))
        else:
            parts.append((np.broadcast_to(np.arange(out_shape[d]).reshape(
                [-1 if i == d else 1 for i in range(x.ndim)]), out_shape), dims, x.shape[d]))
    return lax.gather(x, _coords(parts, out_shape, dt), dims)


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
    plan = _parse(x.shape, idx, where)
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
    batch_pos = [p for p, (kind, a) in enumerate(layout) if kind == "B" or plan.entries[a][0] == "slice"]
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
    indices = _coords(parts, batch_shape, _index_dtype(*plan.shape))
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
