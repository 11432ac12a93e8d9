"""Slicing primitives with static bounds: slice, rev, pad, concatenate.

slice and rev are movements with an index map (they fold into the consuming kernel's reads); pad
and concatenate read one of several sources per element, so codegen builds them from a template.
"""

from __future__ import annotations

import builtins

import numpy as np

from nova.core.array import Array
from nova.core.errors import ShapeError
from nova.core.ir import TensorType
from nova.core import dtypes
from nova.core.primitive import Cost, FusionKind, IndexMap, Primitive, Template, broadcast_batched
from nova.ops import elementwise as ew
from nova.ops import reduction as red
from nova.ops import structural as st

_pyslice = builtins.slice


def _ints(v):
    return tuple(int(i) for i in v)


# --- slice --------------------------------------------------------------------------------------


def _slice_sizes(start, limit, strides):
    return tuple(
        max(0, -(-(hi - lo) // s)) for lo, hi, s in zip(start, limit, strides, strict=True)
    )


def _slice_rule(x, *, start_indices, limit_indices, strides):
    if not len(start_indices) == len(limit_indices) == len(strides) == x.ndim:
        raise ShapeError(
            f"slice: operand of shape {x.shape} needs {x.ndim} start/limit/stride values, got "
            f"start {start_indices}, limit {limit_indices}, strides {strides}"
        )
    for d, (lo, hi, s, n) in enumerate(
        zip(start_indices, limit_indices, strides, x.shape, strict=True)
    ):
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
    config = tuple(
        (a, b, (s - 1) if m else 0) for a, b, s, m in zip(lo, hi, strides, out.shape, strict=True)
    )
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
    batch=lambda args, batched, *, start_indices, limit_indices, strides: slice_p.bind(
        args[0], start_indices=(0, *start_indices),
        limit_indices=(args[0].shape[0], *limit_indices), strides=(1, *strides)),
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
    batch=lambda args, batched, *, dimensions: rev_p.bind(
        args[0], dimensions=tuple(d + 1 for d in dimensions)),
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
        raise ShapeError(
            f"pad: the padding value must be a scalar, got shape {padding_value.shape}"
        )
    if padding_value.dtype != x.dtype:
        raise TypeError(
            f"pad: padding value dtype {padding_value.dtype} differs from operand dtype {x.dtype}"
        )
    if len(padding_config) != x.ndim or any(len(t) != 3 for t in padding_config):
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
    grown = tuple(
        n + builtins.max(0, n - 1) * i for n, (_, _, i) in zip(x.shape, padding_config, strict=True)
    )
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


def _pad_batch(args, batched, padding_config):
    """vmap of pad: the mapped axis is not padded; a batched padding value (one per example)
    pads each example with its own value: the operand padded with zeros, then a select between
    it and the broadcast values by where the operand lies."""
    x, pv = args
    config = ((0, 0, 0), *padding_config)
    if not batched[1]:
        return pad_p.bind(x, pv, padding_config=config)
    if not batched[0]:
        x = broadcast_batched([x, pv], [False, True])[0]
    out = pad_p.bind(x, st.constant(np.zeros((), x.dtype)), padding_config=config)
    inside = pad_p.bind(st.full(x.shape, True, dtypes.bool_), st.constant(np.asarray(False)),
                        padding_config=config)
    fill = st.broadcast_in_dim(pv, out.shape, (0,))
    return ew.select(inside, out, fill)


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
    batch=lambda args, batched, *, padding_config: _pad_batch(args, batched, padding_config),
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
    batch=lambda args, batched, *, dimension: concatenate_p.bind(
        *broadcast_batched(args, batched), dimension=dimension + 1),
)


def concatenate(operands, dimension):
    """Joins arrays of one dtype along `dimension`; all other dimensions must agree."""
    operands = list(operands)
    if len(operands) == 1:
        return operands[0]
    return concatenate_p.bind(*operands, dimension=int(dimension))
