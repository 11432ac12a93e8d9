"""Indexing primitives: gather, scatter_add and scatter (set, mul, min, max).

Index semantics (as JAX's defaults): `gather` CLAMPS every index into [0, size - 1], so it always
reads some element; `scatter_add` and `scatter` DROP an update whose index row has any coordinate
out of range. nova.numpy normalizes negative indices (i + size) before binding these.

Dimension numbers are a simpler form of XLA's: `axes` names the operand axes that are indexed
(point indexing, one coordinate per axis); `indices` has shape `batch + (len(axes),)`. The gathered
result (and a scatter's `updates`) has shape `batch + rest`, where `rest` lists the operand
dimensions not in `axes`, in order. Taking along one axis is `axes=(a,)`; NumPy's advanced
indexing with several index arrays is the same with several axes.
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


def _ints(v):
    return tuple(int(i) for i in v)


# --- gather / scatter: shared checks --------------------------------------------------------------

SCATTER_MODES = ("set", "add", "mul", "min", "max")
_SCATTER_P_MODES = ("set", "mul", "min", "max")  # 'add' is its own primitive, scatter_add


def _check_axes(name, operand, indices, axes):
    if not dtypes.is_int(indices.dtype):
        raise TypeError(f"{name}: indices must have an integer dtype, got {indices.dtype}")
    if indices.ndim < 1 or indices.shape[-1] != len(axes):
        raise ShapeError(
            f"{name}: indices of shape {indices.shape} must end in a dimension of size "
            f"len(axes) = {len(axes)} (axes {axes})"
        )
    for a in axes:
        if not 0 <= a < operand.ndim:
            raise ValueError(
                f"{name}: axis {a} is out of range for an operand of shape {operand.shape}"
            )
    if len(set(axes)) != len(axes):
        raise ValueError(f"{name}: repeated axis in {axes}")
    batch = indices.shape[:-1]
    rest = tuple(n for d, n in enumerate(operand.shape) if d not in axes)
    return batch, rest


def _np_front(x, axes):
    """A view of x with `axes` moved to the front (in that order), the rest after in order."""
    return np.moveaxis(x, list(axes), list(range(len(axes))))


def _np_sizes(shape, axes, dtype):
    return np.array([shape[a] for a in axes], dtype=dtype)


# --- gather -------------------------------------------------------------------------------------


def _gather_rule(operand, indices, *, axes):
    batch, rest = _check_axes("gather", operand, indices, axes)
    empty = [a for a in axes if operand.shape[a] == 0]
    if empty and int(np.prod(batch, dtype=np.int64)) > 0:
        raise ShapeError(
            f"gather: cannot index axis {empty[0]} of size 0 (operand shape {operand.shape}) "
            f"with non-empty indices of shape {indices.shape}"
        )
    return TensorType(batch + rest, operand.dtype)


def _gather_impl(operand, indices, *, axes):
    if not axes:  # no indexed axes: every batch position reads the whole operand
        return np.broadcast_to(operand, indices.shape[:-1] + operand.shape).copy()
    hi = np.maximum(_np_sizes(operand.shape, axes, indices.dtype) - 1, 0)
    idx = np.clip(indices, 0, hi)
    front = _np_front(operand, axes)
    return front[tuple(idx[..., i] for i in range(len(axes)))]


def _gather_vjp(ct, operand, indices, *, out, axes):
    if not dtypes.is_inexact(operand.dtype):
        return None, None
    # The forward read the clamped positions, so their cotangents accumulate there.
    zeros = ew.zeros_like(operand)
    return scatter_add(zeros, clamp_indices(indices, operand.shape, axes), ct, axes), None


def _gather_cost(ins, outs, *, axes):
    return Cost(0, ins[1].nbytes + 2 * outs[0].nbytes)


def _with_batch_coordinate(indices):
    """vmap helper: indices (B, ..., k) of B examples with each row's example number put first
    (B, ..., 1 + k), so one gather or scatter over the stacked operand indexes each example's
    own slice. Indices narrower than int32 (uint8, int16, ...) are widened to int32 first,
    since the example number may not fit them (a uint8 coordinate wrapped past 255)."""
    if indices.dtype not in (dtypes.int32, dtypes.int64):
        indices = ew.convert_element_type(indices, dtypes.int32)
    coord = st.iota(indices.dtype, indices.shape[:-1] + (1,), 0)
    from nova.ops.slicing import concatenate

    return concatenate([coord, indices], indices.ndim - 1)


def _gather_batch(args, batched, *, axes):
    """vmap of gather: a mapped operand alone is gathered with its mapped axis among the rest
    (then moved to the front); mapped indices alone give a mapped result directly; both: each
    index row gets its example's number as an extra coordinate."""
    operand, indices = args
    up = tuple(a + 1 for a in axes)
    if batched[0] and not batched[1]:
        out = gather_p.bind(operand, indices, axes=up)
        at = indices.ndim - 1
        return st.transpose(out, (at, *(i for i in range(out.ndim) if i != at)))
    if batched[1] and not batched[0]:
        return gather_p.bind(operand, indices, axes=axes)
    return gather_p.bind(operand, _with_batch_coordinate(indices), axes=(0, *up))


def _scatter_batch(prim):
    """vmap of scatter_add / scatter: every operand made mapped, each index row given its
    example's number as an extra coordinate (repeats stay within one example, in order)."""

    def batch(args, batched, *, axes, **params):
        operand, indices, updates = broadcast_batched(args, batched)
        return prim.bind(operand, _with_batch_coordinate(indices), updates,
                         axes=(0, *(a + 1 for a in axes)), **params)

    return batch


gather_p = Primitive(
    "gather",
    shape_rule=_gather_rule,
    impl=_gather_impl,
    vjp=_gather_vjp,
    jvp=lambda t, operand, indices, *, out, axes: gather(t[0], indices, axes),
    fusion=FusionKind.OPAQUE,
    kernel=Template("gather"),
    cost=_gather_cost,
    param_types={"axes": _ints},
    batch=_gather_batch,
)


def gather(operand, indices, axes):
    """out[b..., r...] = operand at indices[b..., :] on `axes` (clamped into range), r elsewhere.

    operand: any shape; indices: integer array of shape batch + (len(axes),). Result shape
    batch + (operand dims not in axes, in order), operand's dtype.
    """
    return gather_p.bind(operand, indices, axes=_ints(axes))


# --- scatter_add ----------------------------------------------------------------------------------


def _scatter_rule(name):
    def rule(operand, indices, updates, *, axes, **params):
        batch, rest = _check_axes(name, operand, indices, axes)
        if updates.shape != batch + rest:
            raise ShapeError(
                f"{name}: updates of shape {updates.shape} must have shape batch + rest = "
                f"{batch + rest} (operand {operand.shape}, indices {indices.shape}, axes {axes})"
            )
        if updates.dtype != operand.dtype:
            raise TypeError(
                f"{name}: updates dtype {updates.dtype} differs from operand dtype {operand.dtype}"
            )
        mode = params.get("mode")
        if mode is not None and mode not in _SCATTER_P_MODES:
            raise ValueError(f"{name}: mode must be one of {_SCATTER_P_MODES}, got {mode!r}")
        return operand

    return rule


def _np_scatter(operand, indices, updates, axes, mode):
    out = operand.copy()
    sizes = _np_sizes(operand.shape, axes, indices.dtype)
    valid = np.all((indices >= 0) & (indices < sizes), axis=-1)
    idx, upd = indices[valid], updates[valid]  # (n, k) and (n,) + rest
    ufunc = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}.get(mode)
    if out.dtype == np.bool_ and mode == "add":
        ufunc = np.logical_or
    if not axes:  # every update lands on the whole operand
        for u in upd:
            out = u.copy() if mode == "set" else ufunc(out, u)
        return out
    front = _np_front(out, axes)  # a view: writes land in `out`
    if mode == "set":
        # The last of repeated indices wins (row-major order of the batch), as NumPy assigns.
        flat = np.ravel_multi_index(tuple(idx.T), tuple(sizes))
        _, last = np.unique(flat[::-1], return_index=True)
        keep = len(flat) - 1 - last
        front[tuple(idx[keep].T)] = upd[keep]
        return out
    ufunc.at(front, tuple(idx.T), upd)
    return out


def _scatter_cost(ins, outs, **params):
    flops = 0 if params.get("mode") == "set" else ins[2].size
    return Cost(flops, sum(t.nbytes for t in ins) + outs[0].nbytes)


def _scatter_add_vjp(ct, operand, indices, updates, *, out, axes):
    if not dtypes.is_inexact(operand.dtype):
        return None, None, None
    return ct, None, _gathered(ct, indices, axes)


scatter_add_p = Primitive(
    "scatter_add",
    shape_rule=_scatter_rule("scatter_add"),
    impl=lambda operand, indices, updates, *, axes: _np_scatter(
        operand, indices, updates, axes, "add"
    ),
    vjp=_scatter_add_vjp,
    jvp=lambda t, operand, indices, updates, *, out, axes: scatter_add(t[0], indices, t[2], axes),
    fusion=FusionKind.OPAQUE,
    kernel=Template("scatter"),
    cost=_scatter_cost,
    param_types={"axes": _ints},
    batch=lambda args, batched, **params: _scatter_batch(scatter_add_p)(args, batched, **params),
)


def scatter_add(operand, indices, updates, axes):
    """operand with updates[b, ...] added at indices[b, :] on `axes` (repeats accumulate).

    The transpose of gather. Updates whose index row is out of range are dropped.
    """
    return scatter_add_p.bind(operand, indices, updates, axes=_ints(axes))


# --- scatter: set, mul, min, max ----------------------------------------------------------------


def _select_valid(valid, x):
    return ew.select(
        st.broadcast_in_dim(valid, x.shape, tuple(range(valid.ndim))), x, ew.zeros_like(x)
    )


def _gathered(x, indices, axes):
    """gather(x, indices), with zeros where the index row is out of range (a dropped update)."""
    return _select_valid(in_bounds(indices, x.shape, axes), gather(x, indices, axes))


def _winners(operand, indices, updates, axes):
    """bool of updates' shape: True for the update that the forward's 'set' kept (the last one)."""
    batch = indices.shape[:-1]
    n = int(np.prod(batch, dtype=np.int64))
    idt = dtypes.int32 if n < 2**31 else dtypes.int64
    ids = st.reshape(st.iota(idt, (n,), 0), batch)
    ids = st.broadcast_in_dim(ids, updates.shape, tuple(range(len(batch))))
    last = scatter(st.full(operand.shape, -1, idt), indices, ids, axes, "max")
    return ew.eq(gather(last, indices, axes), ids)


def _extremum_parts(operand, indices, updates, out, axes):
    """Masks of the places that attain the result of a min/max scatter, and their counts."""
    hit_x = ew.eq(operand, out)
    valid = st.broadcast_in_dim(
        in_bounds(indices, operand.shape, axes), updates.shape, tuple(range(indices.ndim - 1))
    )
    hit_u = ew.bitwise_and(valid, ew.eq(updates, gather(out, indices, axes)))
    fx = ew.convert_element_type(hit_x, operand.dtype)
    fu = ew.convert_element_type(hit_u, operand.dtype)
    count = scatter_add(fx, indices, fu, axes)  # >= 1 everywhere: out is x or some update
    return fx, fu, count


def _mul_parts(operand, indices, updates, axes):
    """(P, others): P = product of updates landing on each place (1 if none); others[k] = product
    of the other updates landing where update k lands, computed without dividing by zero."""
    zero_u = ew.eq(updates, ew.zeros_like(updates))
    nonzero = ew.select(zero_u, ew.full_like(updates, 1), updates)
    ones = ew.full_like(operand, 1)
    p_nz = scatter(ones, indices, nonzero, axes, "mul")
    n_zero = scatter_add(
        ew.zeros_like(operand), indices, ew.convert_element_type(zero_u, operand.dtype), axes
    )
    p = scatter(ones, indices, updates, axes, "mul")
    p_nz_k, n_zero_k = gather(p_nz, indices, axes), gather(n_zero, indices, axes)
    zero_k = ew.zeros_like(updates)
    others = ew.select(
        zero_u,
        ew.select(ew.eq(n_zero_k, ew.full_like(updates, 1)), p_nz_k, zero_k),
        ew.select(ew.eq(n_zero_k, zero_k), ew.div(p_nz_k, nonzero), zero_k),
    )
    return p, others


def _scatter_vjp(ct, operand, indices, updates, *, out, axes, mode):
    if not dtypes.is_inexact(operand.dtype):
        return None, None, None
    if mode == "set":
        dx = scatter(ct, indices, ew.zeros_like(updates), axes, "set")
        won = _winners(operand, indices, updates, axes)
        return dx, None, ew.select(won, gather(ct, indices, axes), ew.zeros_like(updates))
    if mode == "mul":
        p, others = _mul_parts(operand, indices, updates, axes)
        du = ew.mul(_gathered(ew.mul(ct, operand), indices, axes), others)
        return ew.mul(ct, p), None, du
    fx, fu, count = _extremum_parts(operand, indices, updates, out, axes)
    share = ew.div(ct, count)
    return ew.mul(share, fx), None, ew.mul(_gathered(share, indices, axes), fu)


def _scatter_jvp(t, operand, indices, updates, *, out, axes, mode):
    tx, _, tu = t
    if mode == "set":
        return scatter(tx, indices, tu, axes, mode)
    if mode == "mul":
        p, others = _mul_parts(operand, indices, updates, axes)
        dp = scatter_add(ew.zeros_like(operand), indices, ew.mul(tu, others), axes)
        return ew.add(ew.mul(tx, p), ew.mul(operand, dp))
    fx, fu, count = _extremum_parts(operand, indices, updates, out, axes)
    num = scatter_add(ew.mul(tx, fx), indices, ew.mul(tu, fu), axes)
    return ew.div(num, count)


scatter_p = Primitive(
    "scatter",
    shape_rule=_scatter_rule("scatter"),
    impl=lambda operand, indices, updates, *, axes, mode: _np_scatter(
        operand, indices, updates, axes, mode
    ),
    vjp=_scatter_vjp,
    jvp=_scatter_jvp,
    fusion=FusionKind.OPAQUE,
    kernel=Template("scatter"),
    cost=_scatter_cost,
    param_types={"axes": _ints, "mode": str},
    batch=lambda args, batched, **params: _scatter_batch(scatter_p)(args, batched, **params),
)


def scatter(operand, indices, updates, axes, mode):
    """operand combined with updates at indices on `axes`; mode: 'set', 'add', 'mul', 'min', 'max'.

    Out-of-range index rows are dropped. For 'set', the last of repeated indices wins (row-major
    order of the index batch); for the others repeats combine. 'add' binds scatter_add.
    Gradients: 'min'/'max' split the cotangent evenly among tied places, as reduce_max does.
    """
    if mode == "add":
        return scatter_add(operand, indices, updates, axes)
    return scatter_p.bind(operand, indices, updates, axes=_ints(axes), mode=mode)


# --- index helpers (lax level, used by the rules above and by nova.numpy) -----------------------


def _sizes_like(indices, shape, axes):
    """A constant of indices' shape holding the size of the indexed axis in the last dimension."""
    sizes = st.constant(np.array([shape[a] for a in axes], dtype=indices.dtype))
    return st.broadcast_in_dim(sizes, indices.shape, (indices.ndim - 1,))


def clamp_indices(indices, shape, axes):
    """indices clamped into [0, size - 1] per indexed axis (what gather reads)."""
    hi = ew.max(
        ew.sub(_sizes_like(indices, shape, axes), ew.full_like(indices, 1)), ew.zeros_like(indices)
    )
    return ew.min(ew.max(indices, ew.zeros_like(indices)), hi)


def in_bounds(indices, shape, axes):
    """bool of shape indices.shape[:-1]: True where every coordinate of the row is in range."""
    ok = ew.bitwise_and(
        ew.ge(indices, ew.zeros_like(indices)), ew.lt(indices, _sizes_like(indices, shape, axes))
    )
    as_int = ew.convert_element_type(ok, dtypes.int32)
    # ge, not eq: with no indexed axes the minimum over an empty row is the largest int32.
    return ew.ge(
        red.reduce_min(as_int, (indices.ndim - 1,)), st.full(indices.shape[:-1], 1, dtypes.int32)
    )
