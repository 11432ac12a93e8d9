"""An index tuple resolved against a shape (NumPy's basic and advanced indexing rules), and the
index arrays built from it; shared by x[idx] and x.at[idx] in nova.numpy's indexing module."""

from __future__ import annotations

import builtins
import numbers
from dataclasses import dataclass

import numpy as np

from nova.core import dtypes
from nova.core.array import Array
from nova.core.errors import ConcretizationTypeError
from nova.core.trace import Tracer
from nova.numpy_impl.util import asarray, where_am_i
from nova.ops import lax

_pyslice = builtins.slice


def static_value(x):
    """x's value as a NumPy array if it is known while tracing (host values, concrete Arrays and
    tracers of grad's concrete trace); None for a value traced inside jit."""
    if isinstance(x, Tracer):
        return None if x._val is None else np.asarray(x._val)
    return np.asarray(x)


def index_dtype(*sizes):
    return dtypes.int64 if builtins.max(sizes, default=0) >= 2**31 - 1 else dtypes.int32


# --- parsing an index into a plan -----------------------------------------------------------------


@dataclass
class IndexPlan:
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
        return tuple(
            self.adv_shape[j] if kind == "B" else self._axis_len(j) for kind, j in self.layout()
        )

    def _axis_len(self, a):
        e = self.entries[a]
        return self.shape[a] if e[0] == "full" else e[3]


def describe(item):
    return (
        f"{type(item).__name__} {item!r}"
        if not isinstance(item, Array)
        else f"array of {item.dtype}"
    )


def _type_error(where, item, pos):
    return TypeError(
        f"{where}: only integers, slices (`:`), ellipsis (`...`), None (numpy.newaxis) and integer "
        f"or boolean arrays are valid indices; got {describe(item)} at position {pos}{where_am_i()}"
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
        raise TypeError(
            f"{where}: slice indices must be integers or None, got {s}{where_am_i()}"
        ) from e
    except ValueError as e:
        raise ValueError(f"{where}: {e} (in {s}){where_am_i()}") from None
    return start, step, len(range(start, stop, step))


def check_static(v, axis, n, where):
    """A host index checked against the axis size and wrapped to non-negative."""
    v = np.asarray(v, dtype=np.int64)
    bad = (v < -n) | (v >= n)
    if bad.any():
        i = int(v[bad].reshape(-1)[0])
        raise IndexError(
            f"{where}: index {i} is out of bounds for axis {axis} with size {n}{where_am_i()}"
        )
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


def _expand_ellipsis(parsed, ndim, where):
    """The classified items with Ellipsis (or the implicit trailing one) as full slices."""
    consumed = sum(
        1 if k in ("slice", "int", "array") else np.ndim(v) if k == "mask" else 0 for k, v in parsed
    )
    if consumed > ndim:
        raise IndexError(
            f"{where}: too many indices for array: array is {ndim}-dimensional, but {consumed} "
            f"were indexed{where_am_i()}"
        )
    kinds = [k for k, _ in parsed]
    if kinds.count("ellipsis") > 1:
        raise IndexError(f"{where}: an index can only have a single ellipsis ('...'){where_am_i()}")
    fill = [("slice", _pyslice(None))] * (ndim - consumed)
    if "ellipsis" in kinds:
        e = kinds.index("ellipsis")
        return parsed[:e] + fill + parsed[e + 1 :]
    return parsed + fill


def _array_entry(v, axis, n, where):
    """The index of an integer-array entry: checked on the host, or left dynamic."""
    if not isinstance(v, Array):
        return check_static(v, axis, n, where)
    if n == 0 and v.size:
        raise IndexError(
            f"{where}: index is out of bounds for axis {axis} with size 0{where_am_i()}"
        )
    return v


def parse_index(x_shape, idx, where) -> IndexPlan:
    """Resolves `idx` (anything NumPy accepts in x[idx]) against an array of shape x_shape.

    Raises IndexError and TypeError as NumPy would, naming `where` and the user's line.
    """
    items = list(idx) if isinstance(idx, tuple) else [idx]
    parsed = _expand_ellipsis(
        [_classify(it, pos, where) for pos, it in enumerate(items)], len(x_shape), where
    )
    # With any advanced index present, ints become advanced (0-d) indices too, as in NumPy.
    has_adv = any(k in ("array", "mask", "boolscalar") for k, _ in parsed)
    shape, entries, adv = [], [], []

    def add_adv(axis, index):
        adv.append((axis, index))
        entries.append(("adv", len(adv) - 1))

    src = iter(x_shape)
    for kind, v in parsed:
        axis = len(shape)
        if kind == "none":
            shape.append(1)
            entries.append(("full",))
        elif kind == "boolscalar":  # x[True] is x[None][[True]]: a new axis and a 1-element mask
            shape.append(1)
            add_adv(axis, np.nonzero(np.array([v]))[0])
        elif kind == "mask":
            shape.extend(next(src) for _ in range(np.ndim(v)))
            for k, arr in enumerate(_mask_to_arrays(v, axis, tuple(shape), where)):
                add_adv(axis + k, arr)
        else:
            n = next(src)
            shape.append(n)
            if kind == "slice":
                start, step, length = _slice_bounds(v, n, where)
                full = start == 0 and step == 1 and length == n
                entries.append(("full",) if full else ("slice", start, step, length))
            elif kind == "int" and not has_adv:
                entries.append(("int", int(check_static(v, axis, n, where))))
            else:
                add_adv(axis, _array_entry(v, axis, n, where))
    adv_pos = [a for a, e in enumerate(entries) if e[0] == "adv"]
    adjacent = not adv_pos or adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1))
    shapes = [tuple(np.shape(v)) for _, v in adv]
    try:
        adv_shape = tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise IndexError(
            f"{where}: shape mismatch: indexing arrays could not be broadcast together with shapes "
            f"{' '.join(str(s) for s in shapes)}{where_am_i()}"
        ) from None
    return IndexPlan(tuple(shape), entries, adv, adv_shape, not adjacent)


# --- building index arrays ------------------------------------------------------------------------


def dynamic_index(v, n, dt):
    """A nova int index with negative values wrapped once (i + n); range is left to the op."""
    i = lax.convert_element_type(v, dt)
    return lax.select(lax.lt(i, lax.full(i.shape, 0, dt)), lax.add(i, lax.full(i.shape, n, dt)), i)


def index_coords(parts, batch_shape, dt):
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
        c = dynamic_index(v, n, dt) if isinstance(v, Array) else lax.constant(np.asarray(v, dt))
        c = lax.broadcast_in_dim(c, batch_shape, dims)
        cols.append(lax.reshape(c, batch_shape + (1,)))
    return lax.concatenate(cols, len(batch_shape))


def apply_basic(y, plan):
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
        y = lax.reshape(
            y, tuple(d for d, e in zip(y.shape, plan.entries, strict=True) if e[0] != "int")
        )
    return y
