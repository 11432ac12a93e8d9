"""Joining, splitting, tiling and padding of nova.numpy: concatenate, stack, split, tile, repeat,
flip, roll, pad."""

from __future__ import annotations

import builtins
import numbers
import operator

import numpy as np

from nova.core import dtypes
from nova.core.array import Array
from nova.core.errors import ShapeError
from nova.numpy_impl.index_plan import static_value
from nova.numpy_impl.indexing import take_1d
from nova.numpy_impl.util import asarray, normalize_axes, normalize_axis, where_am_i
from nova.ops import lax

__all__ = [
    "append",
    "array_split",
    "column_stack",
    "concatenate",
    "dstack",
    "flip",
    "fliplr",
    "flipud",
    "hsplit",
    "hstack",
    "pad",
    "repeat",
    "roll",
    "split",
    "stack",
    "tile",
    "vsplit",
    "vstack",
]


def _arrays(name, arrays, dtype):
    if isinstance(arrays, Array):
        arrays = list(arrays)
    arrays = list(arrays)
    if not arrays:
        raise ValueError(f"{name}: need at least one array{where_am_i()}")
    dt = dtypes.canonicalize(dtype) if dtype is not None else dtypes.result_type(*arrays)
    return [asarray(a, dt) for a in arrays]


def _shapes(xs):
    return ", ".join(str(x.shape) for x in xs)


def concatenate(arrays, axis=0, dtype=None):
    """Joins arrays along an existing `axis` (None: flattens them first).

    All arrays must have the same number of dimensions and the same sizes except on `axis`; the
    dtype is the promoted one (or `dtype`). Raises ShapeError naming the shapes otherwise, and
    ValueError for 0-d inputs or an out-of-range axis.
    """
    xs = _arrays("concatenate", arrays, dtype)
    if axis is None:
        xs = [lax.reshape(x, (x.size,)) for x in xs]
        axis = 0
    if any(x.ndim == 0 for x in xs):
        raise ValueError(
            f"concatenate: zero-dimensional arrays cannot be concatenated{where_am_i()}"
        )
    if any(x.ndim != xs[0].ndim for x in xs):
        raise ShapeError(
            f"concatenate: all arrays must have the same number of dimensions, got shapes "
            f"{_shapes(xs)}{where_am_i()}"
        )
    ax = normalize_axis(axis, xs[0].ndim)
    for x in xs:
        if any(
            a != b for d, (a, b) in enumerate(zip(x.shape, xs[0].shape, strict=True)) if d != ax
        ):
            raise ShapeError(
                f"concatenate: array sizes must match except on axis {ax}, got shapes "
                f"{_shapes(xs)}{where_am_i()}"
            )
    return lax.concatenate(xs, ax)


def append(arr, values, axis=None):
    """concatenate((arr, values), axis); axis None flattens both (numpy.append)."""
    return concatenate([arr, values], axis=axis)


def stack(arrays, axis=0, dtype=None):
    """Joins arrays of one shape along a new `axis` of the result (size len(arrays)).

    Raises ShapeError naming the shapes when they differ.
    """
    xs = _arrays("stack", arrays, dtype)
    if any(x.shape != xs[0].shape for x in xs):
        raise ShapeError(
            f"stack: all input arrays must have the same shape, got {_shapes(xs)}{where_am_i()}"
        )
    ax = normalize_axis(axis, xs[0].ndim + 1)
    shape = xs[0].shape[:ax] + (1,) + xs[0].shape[ax:]
    return lax.concatenate([lax.reshape(x, shape) for x in xs], ax)


def _at_least(x, n):
    """x with at least n dimensions, the new size-1 axes placed as numpy.atleast_{1,2,3}d does."""
    if x.ndim >= n:
        return x
    if n == 3:
        shape = {0: (1, 1, 1), 1: (1, x.size, 1), 2: x.shape + (1,)}[x.ndim]
    else:
        shape = (1,) * (n - x.ndim) + x.shape
    return lax.reshape(x, shape)


def hstack(tup, dtype=None):
    """Stacks horizontally: along axis 0 for 1-d inputs, else axis 1 (numpy.hstack)."""
    xs = [_at_least(x, 1) for x in _arrays("hstack", tup, dtype)]
    return concatenate(xs, axis=0 if xs[0].ndim == 1 else 1)


def vstack(tup, dtype=None):
    """Stacks vertically (axis 0) after making inputs at least 2-d: (n,) becomes (1, n)."""
    return concatenate([_at_least(x, 2) for x in _arrays("vstack", tup, dtype)], axis=0)


def dstack(tup, dtype=None):
    """Stacks along the third axis after making inputs at least 3-d (numpy.dstack)."""
    return concatenate([_at_least(x, 3) for x in _arrays("dstack", tup, dtype)], axis=2)


def column_stack(tup):
    """Stacks 1-d arrays as columns of a 2-d array (higher-d arrays join on axis 1)."""
    xs = [
        lax.reshape(x, (x.size, 1)) if x.ndim < 2 else x for x in _arrays("column_stack", tup, None)
    ]
    return concatenate(xs, axis=1)


# --- splitting -----------------------------------------------------------------------------------


def _split_at(x, points, ax):
    """Pieces x[p_i:p_{i+1}] along ax, with Python's slice semantics for each pair."""
    out = []
    n = x.shape[ax]
    for lo, hi in zip(points[:-1], points[1:], strict=True):
        start, stop, _ = builtins.slice(lo, hi).indices(n)
        stop = builtins.max(start, stop)
        s, lim = [0] * x.ndim, list(x.shape)
        s[ax], lim[ax] = start, stop
        out.append(lax.slice(x, s, lim))
    return out


def _split_points(name, x, indices_or_sections, ax, equal):
    n = x.shape[ax]
    sections = (
        static_value(indices_or_sections)
        if isinstance(indices_or_sections, Array)
        else np.asarray(indices_or_sections)
        if not isinstance(indices_or_sections, numbers.Integral)
        else None
    )
    if sections is None or sections.ndim == 0:
        try:
            k = operator.index(indices_or_sections if sections is None else sections.item())
        except TypeError:
            raise TypeError(
                f"{name}: indices_or_sections must be an int or a sequence of ints, got "
                f"{indices_or_sections!r}{where_am_i()}"
            ) from None
        if k <= 0:
            raise ValueError(
                f"{name}: number of sections must be larger than 0, got {k}{where_am_i()}"
            )
        if equal and n % k:
            raise ValueError(
                f"{name}: array split does not result in an equal division: axis {ax} of size {n} "
                f"into {k} sections{where_am_i()}"
            )
        each, extra = divmod(n, k)
        sizes = [each + 1] * extra + [each] * (k - extra)
        return list(np.cumsum([0] + sizes))
    if sections.dtype.kind not in "iu" and sections.size:
        raise TypeError(
            f"{name}: split indices must be integers, got {sections.dtype}{where_am_i()}"
        )
    return [0] + [int(i) for i in sections.reshape(-1)] + [n]


def split(ary, indices_or_sections, axis=0):
    """Splits into a list of arrays along `axis`.

    indices_or_sections: an int k (k equal pieces; ValueError if the size is not divisible) or a
    sorted sequence of split points (Python slice semantics: points past the end give empty pieces).
    """
    x = asarray(ary)
    ax = normalize_axis(axis, x.ndim)
    return _split_at(x, _split_points("split", x, indices_or_sections, ax, equal=True), ax)


def array_split(ary, indices_or_sections, axis=0):
    """Like split, but an int k need not divide the size: the first size % k pieces are longer."""
    x = asarray(ary)
    ax = normalize_axis(axis, x.ndim)
    return _split_at(x, _split_points("array_split", x, indices_or_sections, ax, equal=False), ax)


def hsplit(ary, indices_or_sections):
    """split along axis 1 (axis 0 for 1-d arrays)."""
    x = asarray(ary)
    if x.ndim == 0:
        raise ValueError(f"hsplit only works on arrays of 1 or more dimensions{where_am_i()}")
    return split(x, indices_or_sections, axis=1 if x.ndim > 1 else 0)


def vsplit(ary, indices_or_sections):
    """split along axis 0 of an array of at least 2 dimensions."""
    x = asarray(ary)
    if x.ndim < 2:
        raise ValueError(
            f"vsplit only works on arrays of 2 or more dimensions, got shape {x.shape}"
            f"{where_am_i()}"
        )
    return split(x, indices_or_sections, axis=0)


# --- tile, repeat ---------------------------------------------------------------------------------


def _int_tuple(name, v):
    try:
        return (
            (operator.index(v),)
            if not isinstance(v, tuple | list)
            else tuple(operator.index(i) for i in v)
        )
    except TypeError:
        raise TypeError(
            f"{name} must be an int or a tuple of ints, got {v!r}{where_am_i()}"
        ) from None


def tile(A, reps):  # noqa: N803 - NumPy's name
    """Repeats A `reps` times per dimension (numpy.tile): result shape is A's shape (padded with
    leading 1s to len(reps) dimensions) times reps (padded with leading 1s to A.ndim)."""
    x = asarray(A)
    reps = _int_tuple("tile: reps", reps)
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: reps must be non-negative, got {reps}{where_am_i()}")
    nd = builtins.max(len(reps), x.ndim)
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - x.ndim) + x.shape
    inter = tuple(d for r_n in zip(reps, shape, strict=True) for d in r_n)  # (r0, n0, r1, n1, ...)
    b = lax.broadcast_in_dim(lax.reshape(x, shape), inter, tuple(range(1, 2 * nd, 2)))
    return lax.reshape(b, tuple(r * n for r, n in zip(reps, shape, strict=True)))


def repeat(a, repeats, axis=None):
    """Repeats each element `repeats` times along `axis` (None: of the flattened array).

    repeats: an int, or one count per element along the axis; per-element counts must be concrete
    (a traced count would make the result's shape depend on data: ConcretizationTypeError-like
    TypeError). Raises ValueError for negative counts, ShapeError for a count list of wrong length.
    """
    x = asarray(a)
    if axis is None:
        x, ax = lax.reshape(x, (x.size,)), 0
    else:
        ax = normalize_axis(axis, x.ndim)
    reps = static_value(repeats) if isinstance(repeats, Array) else np.asarray(repeats)
    if reps is None:
        raise TypeError(
            f"repeat: `repeats` is traced, but the result's shape depends on its value; pass "
            f"concrete counts (mark the argument static with static_argnums){where_am_i()}"
        )
    if reps.dtype.kind not in "iub":
        raise TypeError(f"repeat: repeats must be integers, got {reps.dtype}{where_am_i()}")
    if np.any(reps < 0):
        raise ValueError(f"repeat: negative repeat counts {reps.tolist()}{where_am_i()}")
    n = x.shape[ax]
    if reps.size == 1:
        r = int(reps.reshape(-1)[0])
        grown = x.shape[: ax + 1] + (r,) + x.shape[ax + 1 :]
        dims = tuple(d for d in range(x.ndim + 1) if d != ax + 1)
        b = lax.broadcast_in_dim(x, grown, dims)
        return lax.reshape(b, x.shape[:ax] + (n * r,) + x.shape[ax + 1 :])
    if reps.ndim != 1 or reps.size != n:
        raise ShapeError(
            f"repeat: repeats of shape {reps.shape} do not match axis {ax} of size {n} "
            f"(array shape {x.shape}){where_am_i()}"
        )
    return take_1d(x, np.repeat(np.arange(n), reps), ax)


# --- flip, roll -----------------------------------------------------------------------------------


def flip(m, axis=None):
    """Reverses the order of elements along `axis` (None: all axes; int or tuple)."""
    x = asarray(m)
    return lax.rev(x, normalize_axes(axis, x.ndim))


def fliplr(m):
    """Reverses axis 1 (left/right); needs at least 2 dimensions."""
    x = asarray(m)
    if x.ndim < 2:
        raise ValueError(f"fliplr: input must be at least 2-d, got shape {x.shape}{where_am_i()}")
    return lax.rev(x, (1,))


def flipud(m):
    """Reverses axis 0 (up/down); needs at least 1 dimension."""
    x = asarray(m)
    if x.ndim < 1:
        raise ValueError(f"flipud: input must be at least 1-d, got shape {x.shape}{where_am_i()}")
    return lax.rev(x, (0,))


def _roll_axis(x, shift, ax):
    n = x.shape[ax]
    if n == 0:
        return x
    s = static_value(shift) if isinstance(shift, Array) else np.asarray(shift)
    if s is not None:
        if s.dtype.kind not in "iu" or s.ndim:
            raise TypeError(f"roll: shift must be an integer, got {shift!r}{where_am_i()}")
        s = int(s) % n
        if s == 0:
            return x
        lo, hi = _split_at(x, [0, n - s, n], ax)
        return lax.concatenate([hi, lo], ax)
    # A traced shift: read element (i - shift) mod n through a gather.
    sh = lax.convert_element_type(shift, dtypes.int32)
    nn = lax.full((), n, dtypes.int32)
    sh = lax.rem(lax.add(lax.rem(sh, nn), nn), nn)
    i = lax.iota(dtypes.int32, (n,), 0)
    src = lax.rem(
        lax.add(lax.sub(i, lax.broadcast_in_dim(sh, (n,), ())), lax.full((n,), n, dtypes.int32)),
        lax.full((n,), n, dtypes.int32),
    )
    return take_1d(x, src, ax)


def roll(a, shift, axis=None):
    """Rolls elements along `axis` by `shift` (elements past the end come back at the start).

    shift: int or tuple (broadcast against axis); a traced 0-d integer shift works too (a gather).
    axis None rolls the flattened array and restores the shape.
    """
    x = asarray(a)
    if axis is None:
        return lax.reshape(roll(lax.reshape(x, (x.size,)), shift, 0), x.shape)
    shifts = shift if isinstance(shift, tuple | list) else (shift,)
    axes = axis if isinstance(axis, tuple | list) else (axis,)
    if len(shifts) != len(axes) and 1 not in (len(shifts), len(axes)):
        raise ValueError(
            f"roll: shift {shift} and axis {axis} must have the same length{where_am_i()}"
        )
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    if len(axes) == 1:
        axes = axes * len(shifts)
    for s, ax in zip(shifts, axes, strict=True):
        x = _roll_axis(x, s, normalize_axis(ax, x.ndim))
    return x


# --- pad ------------------------------------------------------------------------------------------

_INDEX_MODES = ("edge", "reflect", "symmetric", "wrap")


def _pairs(name, value, ndim, as_int):
    """NumPy's _as_pairs: a scalar, (v,), (before, after) or one pair per axis -> ndim pairs."""
    arr = np.asarray(value)
    if as_int:
        if arr.dtype.kind not in "iu":
            raise TypeError(f"pad: {name} must be integers, got {value!r}{where_am_i()}")
        arr = arr.astype(np.int64)
    if arr.ndim < 3 and arr.size == 1:
        v = arr.reshape(-1)[0].item()
        return [(v, v)] * ndim
    if arr.ndim < 3 and arr.size == 2 and arr.shape != (2, 1):
        b, a = arr.reshape(-1).tolist()
        return [(b, a)] * ndim
    try:
        return [tuple(p) for p in np.broadcast_to(arr, (ndim, 2)).tolist()]
    except ValueError:
        raise ValueError(
            f"pad: {name} {value!r} cannot be broadcast to ({ndim}, 2) pairs for an array of "
            f"{ndim} dimensions{where_am_i()}"
        ) from None


def pad(array, pad_width, mode="constant", **kwargs):
    """Pads an array (numpy.pad). Result shape: each axis grows by before + after.

    pad_width: an int, (n,), (before, after) or ((before, after),) * ndim, non-negative.
    mode: 'constant' (constant_values: a scalar, which may be a 0-d Array, or per-axis pairs like
    pad_width; later axes own the corners, as NumPy), 'edge', 'reflect', 'symmetric' or 'wrap'.
    Raises ValueError for negative widths, unknown modes or unknown keyword arguments.
    """
    x = asarray(array)
    widths = _pairs("pad_width", pad_width, x.ndim, as_int=True)
    if any(w < 0 for p in widths for w in p):
        raise ValueError(f"pad: pad_width {pad_width!r} contains negative values{where_am_i()}")
    if mode == "constant":
        extra = set(kwargs) - {"constant_values"}
        if extra:
            raise ValueError(
                f"pad: unsupported keyword arguments {sorted(extra)} for mode 'constant'"
                f"{where_am_i()}"
            )
        value = kwargs.get("constant_values", 0)
        if isinstance(value, Array) or np.ndim(value) == 0:
            v = (
                lax.convert_element_type(asarray(value), x.dtype)
                if isinstance(value, Array)
                else value
            )
            if isinstance(v, Array) and v.shape != ():
                raise ShapeError(
                    f"pad: constant_values must be 0-d, got shape {v.shape}{where_am_i()}"
                )
            return lax.pad(
                x,
                v if isinstance(v, Array) else np.asarray(v, x.dtype),
                [(b, a, 0) for b, a in widths],
            )
        values = _pairs("constant_values", value, x.ndim, as_int=False)
        for d, ((b, a), (vb, va)) in enumerate(zip(widths, values, strict=True)):
            before = [(0, 0, 0)] * x.ndim
            after = [(0, 0, 0)] * x.ndim
            before[d], after[d] = (b, 0, 0), (0, a, 0)
            x = lax.pad(lax.pad(x, np.asarray(vb, x.dtype), before), np.asarray(va, x.dtype), after)
        return x
    if mode not in _INDEX_MODES:
        raise ValueError(
            f"pad: mode {mode!r} is not supported (supported: 'constant', "
            f"{', '.join(repr(m) for m in _INDEX_MODES)}){where_am_i()}"
        )
    if kwargs and set(kwargs) - {"reflect_type"} or kwargs.get("reflect_type", "even") != "even":
        raise ValueError(
            f"pad: unsupported keyword arguments {kwargs} for mode {mode!r}{where_am_i()}"
        )
    for d, (b, a) in enumerate(widths):
        if b == a == 0:
            continue
        n = x.shape[d]
        if n == 0:
            raise ValueError(
                f"pad: can't extend empty axis {d} of shape {x.shape} with mode {mode!r}"
                f"{where_am_i()}"
            )
        # The source index of every output position, computed on the host once.
        x = take_1d(x, np.pad(np.arange(n), (b, a), mode=mode), d)
    return x
