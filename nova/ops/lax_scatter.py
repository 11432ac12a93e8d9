"""jax.lax's scatters in ScatterDimensionNumbers form, rewritten as Nova's point scatters."""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable, Sequence
from typing import NamedTuple

from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.ops import indexing
from nova.ops import structural as st
from nova.ops.composite import _jnp


class ScatterDimensionNumbers(NamedTuple):
    """jax.lax.ScatterDimensionNumbers: which axes of `updates` are window axes
    (update_window_dims, sorted), which operand axes have a window of size 1 that updates do not
    carry (inserted_window_dims), which operand axis each index coordinate addresses
    (scatter_dims_to_operand_dims), and the operand / index axes that are batch axes paired
    one to one (operand_batching_dims, scatter_indices_batching_dims)."""

    update_window_dims: Sequence[int]
    inserted_window_dims: Sequence[int]
    scatter_dims_to_operand_dims: Sequence[int]
    operand_batching_dims: Sequence[int] = ()
    scatter_indices_batching_dims: Sequence[int] = ()


class GatherScatterMode(enum.Enum):
    """Out-of-range index handling (jax.lax.GatherScatterMode): CLIP moves a window into range,
    FILL_OR_DROP drops a scatter window that does not fit, PROMISE_IN_BOUNDS promises none
    is out of range (Nova then drops, as FILL_OR_DROP)."""

    CLIP = "clip"
    FILL_OR_DROP = "fill"
    PROMISE_IN_BOUNDS = "promise_in_bounds"

    @staticmethod
    def from_any(mode) -> GatherScatterMode:
        """The mode from None (FILL_OR_DROP), a name ("clip", "fill", "drop",
        "promise_in_bounds") or a GatherScatterMode (Nova's or JAX's). Raises ValueError."""
        if mode is None:
            return GatherScatterMode.FILL_OR_DROP
        if isinstance(mode, GatherScatterMode):
            return mode
        name = getattr(mode, "name", None)  # jax.lax.GatherScatterMode
        if name in GatherScatterMode.__members__:
            return GatherScatterMode[name]
        names = {"clip": "CLIP", "fill": "FILL_OR_DROP", "drop": "FILL_OR_DROP",
                 "promise_in_bounds": "PROMISE_IN_BOUNDS"}
        if isinstance(mode, str) and mode in names:
            return GatherScatterMode[names[mode]]
        raise ValueError(f"unknown gather/scatter mode {mode!r}: use 'clip', 'fill', 'drop' or "
                         "'promise_in_bounds'")


def _is_scatter_dnums(d) -> bool:
    return hasattr(d, "update_window_dims") and hasattr(d, "scatter_dims_to_operand_dims")


def _dims(name: str, field: str, v, bound: int, ordered: bool = True) -> tuple[int, ...]:
    v = tuple(operator.index(i) for i in v)
    if len(set(v)) != len(v) or any(not 0 <= i < bound for i in v) or \
            (ordered and list(v) != sorted(v)):
        raise ValueError(f"{name}: dimension_numbers.{field} = {v} must be "
                         f"{'sorted, ' if ordered else ''}distinct and in [0, {bound})")
    return v


def _scatter_points(name: str, operand, indices, update_shape: tuple, dnums):
    """(coords, starts, window) for an `update_shape` array of updates under JAX's dimension
    numbers, checked as JAX checks them: coords[d] (of update_shape) is the operand coordinate
    along axis d that each update element lands on; starts[d] the window start read from the
    indices, for the indexed axes d; window maps each window axis of the operand to the
    updates axis that spans it."""
    jnp = _jnp()
    nd, us = operand.ndim, tuple(update_shape)
    if not dtypes.is_int(indices.dtype):
        raise TypeError(f"{name}: scatter_indices must be integers, got dtype {indices.dtype}")
    if indices.ndim < 1:
        raise ShapeError(f"{name}: scatter_indices need an index vector axis (the last), got "
                         f"shape {indices.shape}")
    uwd = _dims(name, "update_window_dims", dnums.update_window_dims, len(us))
    iwd = _dims(name, "inserted_window_dims", dnums.inserted_window_dims, nd)
    obd = _dims(name, "operand_batching_dims", dnums.operand_batching_dims, nd)
    sd = _dims(name, "scatter_dims_to_operand_dims", dnums.scatter_dims_to_operand_dims, nd,
               ordered=False)
    sib = _dims(name, "scatter_indices_batching_dims", dnums.scatter_indices_batching_dims,
                indices.ndim - 1, ordered=False)
    if set(iwd) & set(obd) or set(sd) & set(obd) or len(sib) != len(obd):
        raise ValueError(f"{name}: operand_batching_dims {obd} must pair one to one with "
                         f"scatter_indices_batching_dims {sib} and be neither inserted "
                         f"{iwd} nor indexed {sd}")
    if len(uwd) + len(iwd) + len(obd) != nd:
        raise ShapeError(f"{name}: {len(uwd)} window, {len(iwd)} inserted and {len(obd)} batch "
                         f"axes do not make the operand's rank {nd}")
    if len(sd) != indices.shape[-1]:
        raise ShapeError(f"{name}: scatter_indices of shape {indices.shape} have "
                         f"{indices.shape[-1]} coordinates, scatter_dims_to_operand_dims {sd}")
    scatter_axes = [i for i in range(len(us)) if i not in uwd]
    if tuple(us[i] for i in scatter_axes) != indices.shape[:-1]:
        raise ShapeError(f"{name}: updates of shape {us} with window axes {uwd} do not match "
                         f"scatter_indices of shape {indices.shape}")
    window = dict(zip([d for d in range(nd) if d not in iwd and d not in obd], uwd,
                      strict=True))
    for d, w in window.items():
        if us[w] > operand.shape[d]:
            raise ShapeError(f"{name}: update window axis {w} of size {us[w]} exceeds operand "
                             f"axis {d} of size {operand.shape[d]}")
    for d, k in zip(obd, sib, strict=True):
        if operand.shape[d] != indices.shape[k]:
            raise ShapeError(f"{name}: operand batch axis {d} (size {operand.shape[d]}) and "
                             f"index batch axis {k} (size {indices.shape[k]}) differ")
    idt = dtypes.int64 if any(n >= 2**31 - 1 for n in operand.shape) else dtypes.int32
    idx = indices.astype(idt)
    coords, starts = [], {}
    for d in range(nd):
        c = None
        if d in sd:
            c = st.broadcast_in_dim(idx[..., sd.index(d)], us, tuple(scatter_axes))
            starts[d] = c
        elif d in obd:
            c = st.iota(idt, us, scatter_axes[sib[obd.index(d)]])
        if d in window:
            off = st.iota(idt, us, window[d])
            c = off if c is None else c + off
        coords.append(jnp.zeros(us, idt) if c is None else c)
    return coords, starts, window


def _scatter_any(name: str, operand, scatter_indices, updates, dimension_numbers, mode,
                 combine: Callable):
    """combine(operand, point indices, updates, axes) for either form of dimension numbers."""
    jnp = _jnp()
    x, i, u = jnp.asarray(operand), jnp.asarray(scatter_indices), jnp.asarray(updates)
    clip = GatherScatterMode.from_any(mode) is GatherScatterMode.CLIP
    if not _is_scatter_dnums(dimension_numbers):  # Nova's point form: the primitive checks
        axes = tuple(operator.index(a) for a in dimension_numbers)
        if clip:
            i = indexing.clamp_indices(i, x.shape, axes)
        return combine(x, i, u, axes)
    if u.dtype != x.dtype:
        raise TypeError(f"{name}: updates have dtype {u.dtype} and the operand {x.dtype}; "
                        "they must match")
    coords, starts, window = _scatter_points(name, x, i, u.shape, dimension_numbers)
    nd = x.ndim
    valid = None
    for d, start in starts.items():
        extent = u.shape[window[d]] if d in window else 1
        top = x.shape[d] - extent
        if clip:
            coords[d] = coords[d] + (jnp.clip(start, 0, top) - start)
        else:  # a window that does not fit is dropped whole: one coordinate put out of range
            ok = (start >= 0) & (start <= top)
            valid = ok if valid is None else valid & ok
    if valid is not None:
        coords[0] = jnp.where(valid, coords[0], -1)
    m = u.size
    pts = jnp.stack(coords, axis=-1).reshape(m, nd) if nd else \
        jnp.zeros((m, 0), dtypes.int32)
    return combine(x, pts, u.reshape(m), tuple(range(nd)))


def _mode_combine(mode: str):
    return lambda x, i, u, axes: indexing.scatter(x, i, u, axes, mode)


_SCATTER_DOC = """{what} (jax.lax.{name}).

    operand: any shape and dtype; scatter_indices: integers whose last axis is the index vector;
    updates: operand's dtype. dimension_numbers: a ScatterDimensionNumbers (JAX's: windows,
    inserted and batch axes) or a sequence of ints `axes` (Nova's point form of
    nova.ops.indexing.scatter: updates of shape indices.shape[:-1] + the other axes). mode
    (GatherScatterMode or its name): out-of-range windows are dropped ("fill", the default) or
    moved into range ("clip"). indices_are_sorted / unique_indices are hints and ignored.
    {combine} Raises TypeError for mismatched dtypes or non-integer indices, ShapeError /
    ValueError for dimension numbers that do not fit the shapes."""


def _scatter_fn(name: str, what: str, combine_doc: str, combine: Callable,
                check: Callable | None = None):
    def fn(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
           unique_indices=False, mode=None):
        if check is not None:
            check(operand)
        return _scatter_any(name, operand, scatter_indices, updates, dimension_numbers, mode,
                            combine)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = _SCATTER_DOC.format(what=what, name=name, combine=combine_doc)
    return fn


def _no_bool(name):
    def check(operand):
        if _jnp().asarray(operand).dtype == dtypes.bool_:
            raise TypeError(f"{name}: a bool operand is not supported")

    return check


def _sub_combine(x, i, u, axes):
    # x - u == x + (-u) exactly: IEEE negation is exact, integers wrap alike
    return indexing.scatter_add(x, i, _jnp().negative(u), axes)


scatter_add = _scatter_fn(
    "scatter_add", "operand with updates added where they land", "Repeats accumulate.",
    lambda x, i, u, axes: indexing.scatter_add(x, i, u, axes))
scatter_sub = _scatter_fn(
    "scatter_sub", "operand with updates subtracted where they land",
    "Repeats accumulate; bool operands raise TypeError.", _sub_combine, _no_bool("scatter_sub"))
scatter_mul = _scatter_fn(
    "scatter_mul", "operand multiplied by the updates that land on each place",
    "Repeats multiply; the gradient avoids dividing by zero updates.", _mode_combine("mul"))
scatter_min = _scatter_fn(
    "scatter_min", "The minimum of operand and the updates that land on each place",
    "Tied places share the gradient evenly.", _mode_combine("min"))
scatter_max = _scatter_fn(
    "scatter_max", "The maximum of operand and the updates that land on each place",
    "Tied places share the gradient evenly.", _mode_combine("max"))


def scatter(operand, scatter_indices, updates, dimension_numbers, mode=None, *,
            indices_are_sorted=False, unique_indices=False):
    """operand with updates written where they land (jax.lax.scatter), in either form.

    With a ScatterDimensionNumbers (JAX's form) `mode` is the GatherScatterMode ("fill" drops a
    window out of range, "clip" moves it in) and of repeated indices the last update wins
    (JAX leaves the order unspecified). With a sequence of ints `axes` (Nova's point form of
    nova.ops.indexing.scatter) `mode` is the combination, one of 'set', 'add', 'mul', 'min',
    'max', and out-of-range rows are dropped. Raises as scatter_add does; ValueError for an
    unknown mode.
    """
    if not _is_scatter_dnums(dimension_numbers):
        return indexing.scatter(operand, scatter_indices, updates, dimension_numbers, mode)
    return _scatter_any("scatter", operand, scatter_indices, updates, dimension_numbers, mode,
                        _mode_combine("set"))


def scatter_apply(operand, scatter_indices, func: Callable, dimension_numbers, *,
                  update_shape: Sequence[int] = (), indices_are_sorted=False,
                  unique_indices=False, mode=None):
    """operand with `func` applied to each element the scatter addresses (jax.lax.scatter_apply),
    once per time it is addressed: an index repeated k times applies func k times, as JAX does.

    func: a scalar function (it is vmapped over the operand's elements) returning operand's
    dtype. update_shape: the shape updates would have (JAX's: index batch + window axes).
    dimension_numbers and mode as scatter_add. With unique_indices=True func is applied once
    (so the result is differentiable); otherwise the repeats run in a while_loop (no reverse
    mode; JAX has no derivative for scatter_apply at all). Raises TypeError when func changes
    the dtype or shape.
    """
    import nova
    from nova.control_flow import while_loop

    jnp = _jnp()
    x = jnp.asarray(operand)
    count = _scatter_any("scatter_apply", jnp.zeros(x.shape, dtypes.int32), scatter_indices,
                         jnp.ones(tuple(update_shape), dtypes.int32), dimension_numbers, mode,
                         lambda z, i, u, axes: indexing.scatter_add(z, i, u, axes))
    if x.size == 0:
        return x
    per_element = nova.vmap(func)

    def step(y):
        out = jnp.asarray(per_element(y.reshape(-1)))
        if out.dtype != x.dtype or out.shape != (x.size,):
            raise TypeError(f"scatter_apply: func must map a {x.dtype} scalar to a {x.dtype} "
                            f"scalar, got {out.dtype} of per-element shape {out.shape[1:]}")
        return out.reshape(x.shape)

    out = jnp.where(count > 0, step(x), x)
    if unique_indices:
        return out

    def body(carry):
        k, y = carry
        return k + 1, jnp.where(count > k, step(y), y)

    most = jnp.max(count)
    return while_loop(lambda c: c[0] < most, body, (jnp.asarray(1, dtypes.int32), out))[1]
