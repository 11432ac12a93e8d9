"""Indexing primitives: slice, rev, pad, concatenate, gather, scatter_add and scatter.

Index semantics (as JAX's defaults): `gather` CLAMPS every index into [0, size - 1], so it always
reads some element; `scatter_add` and `scatter` DROP an update whose index row has any coordinate
out of range. nova.numpy normalizes negative indices (i + size) before binding these.

Gather/scatter dimension numbers are a simpler form of XLA's: `axes` names the operand axes that
are indexed (point indexing, one coordinate per axis); `indices` has shape `batch + (len(axes),)`.
The gathered result (and a scatter's `updates`) has shape `batch + rest`, where `rest` lists the
operand dimensions not in `axes`, in order. Taking along one axis is `axes=(a,)`; NumPy's advanced
indexing with several index arrays is the same with several axes.
"""

from __future__ import annotations

import builtins

import numpy as np

from nova.core import dtypes
from nova.core.array import Array
from nova.core.errors import ShapeError
from nova.core.ir import TensorType
from nova.core.primitive import Cost, FusionKind, IndexMap, Primitive, Template
from nova.ops import elementwise as ew
from nova.ops import reduction as red
from nova.ops import structural as st

_pyslice = builtins.slice


def _ints(v):
    return tuple(int(i) for i in v)


# --- slice --------------------------------------------------------------------------------------


def _slice_sizes(start, limit, strides):
    return tuple(max(0, -(-(hi - lo) // s)) for lo, hi, s in zip(start, limit, strides, strict=True))


def _slice_rule(x, *, start_indices, limit_indices, strides):
    if not len(start_indices) == len(limit_indices) == len(strides) == x.ndim:
        raise ShapeError(
            f"slice: operand of shape {x.shape} needs {x.ndim} start/limit/stride values, got "
            f"start {start_indices}, limit {limit_indices}, strides {strides}"
        )
    for d, (lo, hi, s, n) in enumerate(zip(start_indices, limit_indices, strides, x.shape, strict=True)):
        if not 0 <= lo <= hi <= n or s < 1:
            raise ShapeError(
                f"slice: bad bounds on dimension {d} of shape {x.shape}: start {lo}, limit {hi}, "
                f"stride {s} (need 0 <= start <= limit <= {n} and stride >= 1)"
            )
    return TensorType(_slice_sizes(start_indices, limit_indices, strides), x.dtype)


def _slice_impl(x, *, start_indices, limit_indices, strides):
    return x[tuple(_pyslice(*t) for t in zip(start_indices, limit_indices, strides, strict=True))]


def _slice_vjp(ct, x, *, out, start_indices, limit_indices, strides):
    # Zero-pad the cotangent back into place; strides become interior padding.
    lo, hi = [], []
    for s0, st_, n, m in zip(start_indices, strides, x.shape, out.shape, strict=True):
        real_limit = s0 + (m - 1) * st_ + 1 if m else s0
        lo.append(s0)
        hi.append(n - real_limit)
    config = tuple((a, b, (s - 1) if m else 0)
                   for a, b, s, m in zip(lo, hi, strides, out.shape, strict=True))
    return (pad(ct, 0, config),)


def _slice_index_map(b, idx, in_types, *, start_indices, limit_indices, strides):
    return tuple(
        b.add(b.const(lo, "index"), b.mul(i, b.const(s, "index")))
        for i, lo, s in zip(idx, start_indices, strides, strict=True)
    )


def _slice_cost(ins, outs, **params):
    # Reads only the selected elements.
    return Cost(0, 2 * outs[0].nbytes)


slice_p = Primitive(
    "slice",
    shape_rule=_slice_rule,
    impl=_slice_impl,
    vjp=_slice_vjp,
    jvp=lambda t, x, *, out, **p: slice_p.bind(t[0], **p),
    fusion=FusionKind.MOVEMENT,
    kernel=IndexMap(_slice_index_map),
    cost=_slice_cost,
    param_types={"start_indices": _ints, "limit_indices": _ints, "strides": _ints},
)


def slice(x, start_indices, limit_indices, strides=None):  # noqa: A001 - lax's name
    """x[start:limit:stride] on every dimension (static bounds, 0 <= start <= limit <= size)."""
    start, limit = _ints(start_indices), _ints(limit_indices)
    strides = _ints(strides) if strides is not None else (1,) * len(start)
    if start == (0,) * x.ndim and limit == tuple(x.shape) and strides == (1,) * x.ndim:
        return x
    return slice_p.bind(x, start_indices=start, limit_indices=limit, strides=strides)


# --- rev ----------------------------------------------------------------------------------------


def _rev_rule(x, *, dimensions):
    for d in dimensions:
        if not 0 <= d < x.ndim:
            raise ValueError(f"rev: dimension {d} is out of range for an array of shape {x.shape}")
    if len(set(dimensions)) != len(dimensions):
        raise ValueError(f"rev: repeated dimension in {dimensions}")
    return x


def _rev_index_map(b, idx, in_types, *, dimensions):
    (x,) = in_types
    return tuple(
        b.sub(b.const(x.shape[d] - 1, "index"), i) if d in dimensions else i
        for d, i in enumerate(idx)
    )


rev_p = Primitive(
    "rev",
    shape_rule=_rev_rule,
    impl=lambda x, *, dimensions: np.flip(x, dimensions) if dimensions else x,
    vjp=lambda ct, x, *, out, dimensions: (rev(ct, dimensions),),
    jvp=lambda t, x, *, out, dimensions: rev(t[0], dimensions),
    fusion=FusionKind.MOVEMENT,
    kernel=IndexMap(_rev_index_map),
    param_types={"dimensions": lambda a: tuple(sorted(int(i) for i in a))},
)


def rev(x, dimensions):
    """x reversed along each dimension in `dimensions`."""
    dimensions = tuple(sorted(int(d) for d in dimensions))
    return rev_p.bind(x, dimensions=dimensions) if dimensions else x


# --- pad ----------------------------------------------------------------------------------------


def _padded_size(n, lo, hi, interior):
    return lo + hi + n + builtins.max(0, n - 1) * interior


def _pad_rule(x, padding_value, *, padding_config):
    if padding_value.shape != ():
        raise ShapeError(f"pad: the padding value must be a scalar, got shape {padding_value.shape}")
    if padding_value.dtype != x.dtype:
        raise TypeError(
            f"pad: padding value dtype {padding_value.dtype} differs from operand dtype {x.dtype}"
        )
    if len(padding_config) != x.ndim:
        raise ShapeError(
            f"pad: operand of shape {x.shape} needs {x.ndim} (lo, hi, interior) triples, got "
            f"{padding_config}"
        )
    shape = []
    for d, ((lo, hi, interior), n) in enumerate(zip(padding_config, x.shape, strict=True)):
        size = _padded_size(n, lo, hi, interior)
        if interior < 0 or size < 0:
            raise ShapeError(
                f"pad: config {(lo, hi, interior)} on dimension {d} of shape {x.shape} gives "
                f"size {size} (interior must be >= 0 and the result size >= 0)"
            )
        shape.append(size)
    return TensorType(tuple(shape), x.dtype)


def _pad_impl(x, padding_value, *, padding_config):
    grown = tuple(n + builtins.max(0, n - 1) * i for n, (_, _, i) in zip(x.shape, padding_config, strict=True))
    core = np.full(grown, padding_value, x.dtype)
    core[tuple(_pyslice(None, None, i + 1) for _, _, i in padding_config)] = x
    widths = [(builtins.max(lo, 0), builtins.max(hi, 0)) for lo, hi, _ in padding_config]
    full = np.pad(core, widths, mode="constant", constant_values=padding_value)
    crop = tuple(
        _pyslice(builtins.max(-lo, 0), full.shape[d] - builtins.max(-hi, 0))
        for d, (lo, hi, _) in enumerate(padding_config)
    )
    return full[crop]


def _pad_vjp(ct, x, padding_value, *, out, padding_config):
    # Negated lo/hi undo the padding (re-growing what negative padding cropped), then a strided
    # slice skips the interior padding. The padding value receives everything else.
    unpad = tuple((-lo, -hi, 0) for lo, hi, _ in padding_config)
    u = pad(ct, 0, unpad)
    dx = slice(u, (0,) * u.ndim, u.shape, tuple(i + 1 for _, _, i in padding_config))
    everything = tuple(range(ct.ndim))
    dpv = ew.sub(red.reduce_sum(ct, everything), red.reduce_sum(dx, everything))
    return dx, dpv


pad_p = Primitive(
    "pad",
    shape_rule=_pad_rule,
    impl=_pad_impl,
    vjp=_pad_vjp,
    jvp=lambda t, x, pv, *, out, padding_config: pad(t[0], t[1], padding_config),
    # A movement whose reads are predicated (in bounds: the operand, else the padding value), so
    # codegen synthesizes it from a template rather than folding a plain index map.
    fusion=FusionKind.MOVEMENT,
    kernel=Template("pad"),
    param_types={"padding_config": lambda c: tuple(_ints(t) for t in c)},
)


def pad(x, padding_value, padding_config):
    """Pads x by (lo, hi, interior) per dimension with the 0-d `padding_value` (array or scalar).

    Negative lo/hi crop. Result size per dimension: lo + hi + n + max(0, n - 1) * interior.
    """
    if not isinstance(padding_value, Array):
        padding_value = st.constant(np.asarray(padding_value, x.dtype))
    config = tuple(_ints(t) for t in padding_config)
    if all(t == (0, 0, 0) for t in config) and len(config) == x.ndim:
        return x
    return pad_p.bind(x, padding_value, padding_config=config)


# --- concatenate --------------------------------------------------------------------------------


def _concat_rule(*xs, dimension):
    if not xs:
        raise ValueError("concatenate needs at least one operand")
    x0 = xs[0]
    if not 0 <= dimension < x0.ndim:
        raise ValueError(f"concatenate: dimension {dimension} is out of range for shape {x0.shape}")
    for x in xs[1:]:
        if x.dtype != x0.dtype:
            raise TypeError(f"concatenate: operand dtypes differ: {x0.dtype} and {x.dtype}")
        if x.ndim != x0.ndim or any(
            a != b for d, (a, b) in enumerate(zip(x.shape, x0.shape, strict=True)) if d != dimension
        ):
            raise ShapeError(
                f"concatenate: shapes {' '.join(str(t.shape) for t in xs)} differ outside "
                f"dimension {dimension}"
            )
    shape = list(x0.shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return TensorType(tuple(shape), x0.dtype)


def _concat_vjp(ct, *xs, out, dimension):
    pieces, offset = [], 0
    for x in xs:
        start = [0] * ct.ndim
        limit = list(ct.shape)
        start[dimension], limit[dimension] = offset, offset + x.shape[dimension]
        pieces.append(slice(ct, start, limit))
        offset += x.shape[dimension]
    return tuple(pieces)


concatenate_p = Primitive(
    "concatenate",
    shape_rule=_concat_rule,
    impl=lambda *xs, dimension: np.concatenate(xs, axis=dimension),
    vjp=_concat_vjp,
    jvp=lambda ts, *xs, out, dimension: concatenate(ts, dimension),
    # Each output element reads one operand chosen by position: a template, like pad.
    fusion=FusionKind.MOVEMENT,
    kernel=Template("concatenate"),
)


def concatenate(operands, dimension):
    """Joins arrays of one dtype along `dimension`; all other dimensions must agree."""
    operands = list(operands)
    if len(operands) == 1:
        return operands[0]
    return concatenate_p.bind(*operands, dimension=int(dimension))


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
            raise ValueError(f"{name}: axis {a} is out of range for an operand of shape {operand.shape}")
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
    hi = np.maximum(_np_sizes(operand.shape, axes, indices.dtype) - 1, 0)
    idx = np.clip(indices, 0, hi)
    front = _np_front(operand, axes)
    return front[tuple(idx[..., i] for i in range(len(axes)))]


def _gather_vjp(ct, operand, indices, *, out, axes):
    if not dtypes.is_float(operand.dtype):
        return None, None
    # The forward read the clamped positions, so their cotangents accumulate there.
    zeros = ew.zeros_like(operand)
    return scatter_add(zeros, clamp_indices(indices, operand.shape, axes), ct, axes), None


def _gather_cost(ins, outs, *, axes):
    return Cost(0, ins[1].nbytes + 2 * outs[0].nbytes)


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
            raise TypeError(f"{name}: updates dtype {updates.dtype} differs from operand dtype {operand.dtype}")
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
    if not dtypes.is_float(operand.dtype):
        return None, None, None
    return ct, None, _gathered(ct, indices, axes)


scatter_add_p = Primitive(
    "scatter_add",
    shape_rule=_scatter_rule("scatter_add"),
    impl=lambda operand, indices, updates, *, axes: _np_scatter(operand, indices, updates, axes, "add"),
    vjp=_scatter_add_vjp,
    jvp=lambda t, operand, indices, updates, *, out, axes: scatter_add(t[0], indices, t[2], axes),
    fusion=FusionKind.OPAQUE,
    kernel=Template("scatter"),
    cost=_scatter_cost,
    param_types={"axes": _ints},
)


def scatter_add(operand, indices, updates, axes):
    """operand with updates[b, ...] added at indices[b, :] on `axes` (repeats accumulate).

    The transpose of gather. Updates whose index row is out of range are dropped.
    """
    return scatter_add_p.bind(operand, indices, updates, axes=_ints(axes))


# --- scatter: set, mul, min, max ----------------------------------------------------------------



def _select_valid(valid, x):
    return ew.select(st.broadcast_in_dim(valid, x.shape, tuple(range(valid.ndim))), x, ew.zeros_like(x))


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
    valid = st.broadcast_in_dim(in_bounds(indices, operand.shape, axes), updates.shape,
                                tuple(range(indices.ndim - 1)))
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
    n_zero = scatter_add(ew.zeros_like(operand), indices, ew.convert_element_type(zero_u, operand.dtype), axes)
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
    if not dtypes.is_float(operand.dtype):
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
    impl=lambda operand, indices, updates, *, axes, mode: _np_scatter(operand, indices, updates, axes, mode),
    vjp=_scatter_vjp,
    jvp=_scatter_jvp,
    fusion=FusionKind.OPAQUE,
    kernel=Template("scatter"),
    cost=_scatter_cost,
    param_types={"axes": _ints, "mode": str},
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


# --- index helpers (lax level, used by the rules above and by nova.numpy) ---------------------------


def _sizes_like(indices, shape, axes):
    """A constant of indices' shape holding the size of the indexed axis in the last dimension."""
    sizes = st.constant(np.array([shape[a] for a in axes], dtype=indices.dtype))
    return st.broadcast_in_dim(sizes, indices.shape, (indices.ndim - 1,))


def clamp_indices(indices, shape, axes):
    """indices clamped into [0, size - 1] per indexed axis (what gather reads)."""
    hi = ew.max(ew.sub(_sizes_like(indices, shape, axes), ew.full_like(indices, 1)), ew.zeros_like(indices))
    return ew.min(ew.max(indices, ew.zeros_like(indices)), hi)


def in_bounds(indices, shape, axes):
    """bool of shape indices.shape[:-1]: True where every coordinate of the row is in range."""
    ok = ew.bitwise_and(ew.ge(indices, ew.zeros_like(indices)), ew.lt(indices, _sizes_like(indices, shape, axes)))
    as_int = ew.convert_element_type(ok, dtypes.int32)
    # ge, not eq: with no indexed axes the minimum over an empty row is the largest int32.
    return ew.ge(red.reduce_min(as_int, (indices.ndim - 1,)),
                 st.full(indices.shape[:-1], 1, dtypes.int32))
