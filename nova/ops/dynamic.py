"""jax.lax's slicing at traced positions and its small helpers, built on Nova's primitives.

`dynamic_slice` and `dynamic_update_slice` take start indices that may be traced (a loop
counter inside `lax.fori_loop`, a position in a KV cache). As in JAX, a negative start counts
from the end (start + operand.shape[k]) unless `allow_negative_indices=False`; then, as in XLA,
every start is clamped so that the slice fits: into [0, operand.shape[k] - size[k]], so
out-of-range starts never fail.
Starts that are Python ints are static: those axes are cut by `slice` at trace time; the
traced ones go through `gather` (reads) or `scatter` "set" (writes) over the slice's index
grid, so reverse mode, forward mode and vmap come from those primitives' rules.
"""

from __future__ import annotations

import operator

import numpy as np

from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.ops import elementwise as ew
from nova.ops import indexing as ix
from nova.ops import slicing as sl
from nova.ops import sort as so
from nova.ops import structural as st


def _array(x):
    from nova.numpy_impl.util import asarray  # (Python scalars, NumPy arrays, tracers)

    return asarray(x)


def _is_static(s) -> bool:
    return isinstance(s, int | np.integer) and not isinstance(s, bool)


def _starts(start_indices, ndim: int, name: str) -> list:
    """One start per axis: a Python int (static), or a 0-d int32 array (traced or not)."""
    if hasattr(start_indices, "shape") and not isinstance(start_indices, list | tuple):
        a = _array(start_indices)
        if a.ndim != 1:
            raise TypeError(f"{name}: start_indices must be a sequence of scalars or a 1-d "
                            f"array, got shape {a.shape}")
        start_indices = [st.reshape(sl.slice(a, (k,), (k + 1,)), ()) for k in range(a.shape[0])]
    starts = list(start_indices)
    if len(starts) != ndim:
        raise ShapeError(f"{name}: {len(starts)} start indices for an operand of {ndim} "
                         f"dimension(s)")
    out = []
    for k, s in enumerate(starts):
        if _is_static(s):
            out.append(int(s))
            continue
        a = _array(s)
        if a.shape != () or not dtypes.is_int(a.dtype):
            raise TypeError(f"{name}: start index {k} must be an integer scalar, got "
                            f"{a.dtype} of shape {a.shape}")
        out.append(ew.convert_element_type(a, dtypes.int32))
    return out


def _negatives(allow_negative_indices, ndim: int, name: str) -> list[bool]:
    """allow_negative_indices (a bool, or one per axis) as one bool per axis."""
    if isinstance(allow_negative_indices, bool | np.bool_):
        return [bool(allow_negative_indices)] * ndim
    flags = [bool(f) for f in allow_negative_indices]
    if len(flags) != ndim:
        raise ValueError(f"{name}: allow_negative_indices has {len(flags)} entries for an "
                         f"operand of {ndim} dimension(s)")
    return flags


def _clamped(s, dim: int, size: int, wrap: bool, name: str):
    """Start s of an axis of length dim for a slice of `size` entries: negative counts from the
    end when `wrap` (JAX's allow_negative_indices), then clamped into [0, dim - size]. s is an
    int (a static negative start without `wrap` raises ValueError, as JAX) or an int32
    scalar array."""
    hi = dim - size
    if isinstance(s, int):
        if s < 0 and not wrap:
            raise ValueError(f"{name}: start index {s} is out of bounds for an axis of size "
                             f"{dim} with allow_negative_indices=False")
        if s < 0:
            s += dim
        return min(max(s, 0), hi)
    if wrap:
        zero = st.full((), 0, dtypes.int32)
        s = ew.select(ew.lt(s, zero), ew.add(s, st.full((), dim, dtypes.int32)), s)
    lo_c = st.full((), 0, dtypes.int32)
    hi_c = st.full((), hi, dtypes.int32)
    return ew.min(ew.max(s, lo_c), hi_c)


def _grid(starts: list, sizes: tuple):
    """int32 indices of shape sizes + (len(starts),): row i of the slice's grid at start +
    i, axis by axis."""
    cols = []
    for p, (s, n) in enumerate(zip(starts, sizes, strict=True)):
        i = st.iota(dtypes.int32, sizes, p)
        s = st.full(sizes, s, dtypes.int32) if isinstance(s, int) else \
            st.broadcast_in_dim(s, sizes, ())
        cols.append(st.reshape(ew.add(i, s), (*sizes, 1)))
    return cols[0] if len(cols) == 1 else sl.concatenate(cols, len(sizes))


def dynamic_slice(operand, start_indices, slice_sizes, *, allow_negative_indices=True):
    """operand[s0:s0 + n0, s1:s1 + n1, ...] for starts s (ints or traced int scalars, or a 1-d
    int array) and static sizes n, as jax.lax.dynamic_slice: a negative start counts from the
    end (unless allow_negative_indices is False for its axis: a bool or one per axis), then
    each start is clamped into [0, operand.shape[k] - n[k]]. Returns an array of shape
    `slice_sizes` and operand's dtype. Raises ShapeError for a wrong number of starts or
    sizes, or a size outside [0, dim]; TypeError for a start that is not an integer scalar;
    ValueError for a static negative start that may not wrap."""
    x = _array(operand)
    sizes = tuple(operator.index(n) for n in slice_sizes)
    if len(sizes) != x.ndim:
        raise ShapeError(f"dynamic_slice: {len(sizes)} slice sizes for an operand of shape "
                         f"{x.shape}")
    for k, (n, d) in enumerate(zip(sizes, x.shape, strict=True)):
        if not 0 <= n <= d:
            raise ShapeError(f"dynamic_slice: slice size {n} of axis {k} is outside [0, {d}] "
                             f"(operand shape {x.shape})")
    wraps = _negatives(allow_negative_indices, x.ndim, "dynamic_slice")
    starts = [_clamped(s, d, n, w, "dynamic_slice") for s, d, n, w in
              zip(_starts(start_indices, x.ndim, "dynamic_slice"), x.shape, sizes, wraps,
                  strict=True)]
    static = [isinstance(s, int) for s in starts]
    lo = [s if f else 0 for s, f in zip(starts, static, strict=True)]
    hi = [s + n if f else d for s, n, d, f in zip(starts, sizes, x.shape, static, strict=True)]
    if lo != [0] * x.ndim or hi != list(x.shape):
        x = sl.slice(x, lo, hi)
    dyn = [k for k in range(x.ndim) if not static[k]]
    if not dyn:
        return x
    g = ix.gather(x, _grid([starts[k] for k in dyn], tuple(sizes[k] for k in dyn)), tuple(dyn))
    # g's axes: the traced ones first, then the others in order
    order = dyn + [k for k in range(x.ndim) if static[k]]
    return st.transpose(g, tuple(order.index(k) for k in range(x.ndim)))


def dynamic_update_slice(operand, update, start_indices, *, allow_negative_indices=True):
    """operand with `update` written at the starts (ints or traced int scalars, or a 1-d int
    array), as jax.lax.dynamic_update_slice: a negative start counts from the end (unless
    allow_negative_indices is False for its axis), then each start is clamped into
    [0, operand.shape[k] - update.shape[k]]. Returns an array of operand's shape and dtype.
    Raises TypeError when the dtypes differ or a start is not an integer scalar, ShapeError
    when update has another rank or a larger extent than operand, ValueError for a static
    negative start that may not wrap."""
    x = _array(operand)
    u = _array(update)
    if u.dtype != x.dtype:
        raise TypeError(f"dynamic_update_slice: update has dtype {u.dtype}, operand "
                        f"{x.dtype} (they must match)")
    if u.ndim != x.ndim or any(n > d for n, d in zip(u.shape, x.shape, strict=True)):
        raise ShapeError(f"dynamic_update_slice: update of shape {u.shape} does not fit in "
                         f"operand of shape {x.shape}")
    wraps = _negatives(allow_negative_indices, x.ndim, "dynamic_update_slice")
    starts = [_clamped(s, d, n, w, "dynamic_update_slice") for s, d, n, w in
              zip(_starts(start_indices, x.ndim, "dynamic_update_slice"), x.shape, u.shape,
                  wraps, strict=True)]
    if u.size == 0:
        return x
    # Axes the update covers whole at a static start need no index (scatter's "rest" axes).
    axes = [k for k in range(x.ndim)
            if not (isinstance(starts[k], int) and u.shape[k] == x.shape[k])]
    if not axes:
        return u
    rest = [k for k in range(x.ndim) if k not in axes]
    ut = st.transpose(u, tuple(axes + rest))
    idx = _grid([starts[k] for k in axes], tuple(u.shape[k] for k in axes))
    return ix.scatter(x, idx, ut, tuple(axes), "set")


def _axis(axis: int, ndim: int, name: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}: axis {axis} is out of bounds for an operand of {ndim} "
                         f"dimension(s)")
    return axis % ndim


def dynamic_slice_in_dim(operand, start_index, slice_size: int, axis: int = 0, *,
                         allow_negative_indices: bool = True):
    """dynamic_slice along one axis (jax.lax.dynamic_slice_in_dim)."""
    x = _array(operand)
    a = _axis(axis, x.ndim, "dynamic_slice_in_dim")
    starts = [0] * x.ndim
    starts[a] = start_index
    sizes = list(x.shape)
    sizes[a] = slice_size
    return dynamic_slice(x, starts, sizes, allow_negative_indices=allow_negative_indices)


def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True, *,
                         allow_negative_indices: bool = True):
    """The entry at (traced) position `index` of `axis` (jax.lax.dynamic_index_in_dim); the
    axis is kept with size 1 when keepdims, else removed."""
    x = _array(operand)
    a = _axis(axis, x.ndim, "dynamic_index_in_dim")
    y = dynamic_slice_in_dim(x, index, 1, a, allow_negative_indices=allow_negative_indices)
    return y if keepdims else st.reshape(y, x.shape[:a] + x.shape[a + 1:])


def dynamic_update_slice_in_dim(operand, update, start_index, axis: int, *,
                                allow_negative_indices: bool = True):
    """dynamic_update_slice along one axis (jax.lax.dynamic_update_slice_in_dim)."""
    x = _array(operand)
    a = _axis(axis, x.ndim, "dynamic_update_slice_in_dim")
    starts = [0] * x.ndim
    starts[a] = start_index
    return dynamic_update_slice(x, update, starts, allow_negative_indices=allow_negative_indices)


def dynamic_update_index_in_dim(operand, update, index, axis: int, *,
                                allow_negative_indices: bool = True):
    """Writes `update` at position `index` of `axis` (jax.lax.dynamic_update_index_in_dim);
    update may lack that axis (it is added with size 1)."""
    x = _array(operand)
    a = _axis(axis, x.ndim, "dynamic_update_index_in_dim")
    u = _array(update)
    if u.ndim == x.ndim - 1:
        u = st.reshape(u, u.shape[:a] + (1,) + u.shape[a:])
    return dynamic_update_slice_in_dim(x, u, index, a,
                                       allow_negative_indices=allow_negative_indices)


def index_in_dim(operand, index: int, axis: int = 0, keepdims: bool = True):
    """The entry at static position `index` of `axis` (negative counts from the end), as
    jax.lax.index_in_dim. Raises IndexError for a position out of range."""
    x = _array(operand)
    a = _axis(axis, x.ndim, "index_in_dim")
    n = x.shape[a]
    if not -n <= index < n:
        raise IndexError(f"index_in_dim: index {index} is out of bounds for axis {a} of size "
                         f"{n}")
    i = index % n
    return slice_in_dim(x, i, i + 1, axis=a) if keepdims else \
        st.reshape(slice_in_dim(x, i, i + 1, axis=a), x.shape[:a] + x.shape[a + 1:])


def slice_in_dim(operand, start_index, limit_index, stride: int = 1, axis: int = 0):
    """operand[..., start:limit:stride, ...] along `axis` (jax.lax.slice_in_dim; None means
    the axis' start or end, negative indices count from the end)."""
    x = _array(operand)
    a = _axis(axis, x.ndim, "slice_in_dim")
    n = x.shape[a]
    start = 0 if start_index is None else int(start_index)
    limit = n if limit_index is None else int(limit_index)
    start, limit = (start + n if start < 0 else start), (limit + n if limit < 0 else limit)
    lo, hi, strides = [0] * x.ndim, list(x.shape), [1] * x.ndim
    lo[a], hi[a], strides[a] = start, limit, int(stride)
    return sl.slice(x, lo, hi, strides)


def expand_dims(array, dimensions):
    """array with size-1 axes inserted at `dimensions` (positions in the result), as
    jax.lax.expand_dims."""
    x = _array(array)
    dimensions = tuple(dimensions)
    nd = x.ndim + len(dimensions)
    dims = sorted(_axis(d, nd, "expand_dims") for d in dimensions)
    if len(set(dims)) != len(dims):
        raise ValueError(f"expand_dims: repeated axis in dimensions {tuple(dimensions)}")
    shape = list(x.shape)
    for d in dims:
        shape.insert(d, 1)
    return st.reshape(x, tuple(shape))


def squeeze(array, dimensions):
    """array without the size-1 axes `dimensions` (jax.lax.squeeze). Raises ValueError for an
    axis whose size is not 1."""
    x = _array(array)
    dimensions = tuple(dimensions)
    dims = {_axis(d, x.ndim, "squeeze") for d in dimensions}
    if len(dims) != len(dimensions):
        raise ValueError(f"squeeze: repeated axis in dimensions {tuple(dimensions)}")
    for d in dims:
        if x.shape[d] != 1:
            raise ValueError(f"squeeze: axis {d} has size {x.shape[d]}, not 1 (shape "
                             f"{x.shape})")
    return st.reshape(x, tuple(n for k, n in enumerate(x.shape) if k not in dims))


def clamp(min, x, max):
    """min <= x <= max elementwise (jax.lax.clamp; XLA's value min(max(x, min), max)): min and
    max are scalars or of x's shape, of x's dtype (Python scalars take it). Derivatives follow
    JAX's rules: x's where min < x < max, min's where x < min < max, max's where max < x, and
    none at a bound (x == min or x == max). Raises ShapeError / TypeError otherwise."""
    x = _array(x)
    from nova.numpy_impl.util import asarray

    # Python scalars are weakly typed: they take x's dtype
    lo, hi = (asarray(b, x.dtype) if isinstance(b, int | float) else _array(b)
              for b in (min, max))
    for name, b in (("min", lo), ("max", hi)):
        if b.shape not in ((), x.shape):
            raise ShapeError(f"clamp: {name} has shape {b.shape}; it must be a scalar or of "
                             f"x's shape {x.shape}")
        if b.dtype != x.dtype:
            raise TypeError(f"clamp: {name} has dtype {b.dtype}, x {x.dtype} (they must "
                            f"match)")
    lo = st.broadcast_in_dim(lo, x.shape, ()) if lo.shape != x.shape else lo
    hi = st.broadcast_in_dim(hi, x.shape, ()) if hi.shape != x.shape else hi
    value = ew.min(ew.max(x, lo), hi)
    if not dtypes.is_float(x.dtype):
        return value
    # Each position takes the operand its derivative belongs to (the three masks exclude one
    # another and each picks an operand equal to the value); elsewhere -- at a bound, or a
    # NaN -- the value carries no derivative.
    out = ew.select(ew.lt(hi, x), hi, ew.stop_gradient(value))
    out = ew.select(ew.bitwise_and(ew.gt(lo, x), ew.lt(lo, hi)), lo, out)
    return ew.select(ew.bitwise_and(ew.gt(x, lo), ew.lt(x, hi)), x, out)


def integer_pow(x, y: int):
    """x ** y for a static Python int y by repeated multiplication (exact for integers, as
    jax.lax.integer_pow); a negative y takes the reciprocal (floats only)."""
    x = _array(x)
    y = operator.index(y)
    if x.dtype == np.bool_:
        raise TypeError("integer_pow: the operand must be an integer or float array, got "
                        "bool")
    if y < 0 and not dtypes.is_float(x.dtype):
        raise TypeError(f"integer_pow: a negative exponent needs a float operand, got "
                        f"{x.dtype}")
    result, base, n = None, x, abs(y)
    while n:
        if n & 1:
            result = base if result is None else ew.mul(result, base)
        n >>= 1
        if n:
            base = ew.mul(base, base)
    if result is None:
        result = st.full(x.shape, 1, x.dtype)
    return ew.reciprocal(result) if y < 0 else result


def top_k(operand, k: int):
    """The k largest entries along the last axis, largest first, and their int32 positions
    (jax.lax.top_k): equal values come in the order of their positions, +0.0 before -0.0 (as
    JAX's total order); NaN counts as largest.
    Raises ValueError for k outside [0, operand.shape[-1]]."""
    x = _array(operand)
    if x.ndim < 1:
        raise ValueError("top_k: the operand needs at least one dimension")
    n = x.shape[-1]
    k = operator.index(k)
    if not 0 <= k <= n:
        raise ValueError(f"top_k: k={k} is outside [0, {n}] (the last axis)")
    last = x.ndim - 1
    pos = st.iota(dtypes.int32, x.shape, last)
    # ascending by (value, -position): the last k, reversed, are the largest with ties in order;
    # for floats a middle key puts -0.0 below +0.0 (1/x < 0 tells them apart).
    if dtypes.is_float(x.dtype):
        zero = st.full(x.shape, 0, x.dtype)
        positive = ew.convert_element_type(
            ew.bitwise_not(ew.lt(ew.div(st.full(x.shape, 1, x.dtype), x), zero)), dtypes.int32)
        vals, _, negpos = so.sort([x, positive, ew.neg(pos)], last, num_keys=3)
    else:
        vals, negpos = so.sort([x, ew.neg(pos)], last, num_keys=2)
    lo = [0] * x.ndim
    lo[-1] = n - k
    vals = sl.rev(sl.slice(vals, lo, x.shape), (last,))
    idx = sl.rev(sl.slice(negpos, lo, x.shape), (last,))
    return vals, ew.neg(idx)
