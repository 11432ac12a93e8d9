"""Argument checking, dtype promotion and broadcasting shared by the nova.numpy functions."""

from __future__ import annotations

import builtins
import operator

import numpy as np

from nova.core import dtypes
from nova.core.array import Array
from nova.core.errors import ShapeError
from nova.core.source_info import short, user_frame_line
from nova.core.trace import current_trace
from nova.ops import lax


def where_am_i() -> str:
    """' (at file.py:LINE)' naming the user's line, for error messages."""
    return f" (at {short(user_frame_line())})"


def is_array(x) -> bool:
    return isinstance(x, Array)


def asarray(x, dtype=None) -> Array:
    """x as a nova Array (tracers pass through); Python scalars/lists take Nova's default dtypes."""
    if isinstance(x, Array):
        if dtype is not None:
            return lax.convert_element_type(x, dtypes.canonicalize(dtype))
        return x
    if isinstance(x, list | tuple) and any(isinstance(e, Array) for e in _flat_items(x)):
        from nova.numpy_impl.joining import stack

        return stack([asarray(e, dtype) for e in x])
    if dtype is not None:
        d = dtypes.canonicalize(dtype)
    else:
        if isinstance(x, str) or x is None:
            raise TypeError(f"cannot convert {type(x).__name__} {x!r} to a nova Array{where_am_i()}")
        d = dtypes.dtype_of_value(x)
    try:
        v = np.asarray(x)
    except ValueError as e:
        raise ValueError(f"cannot convert {type(x).__name__} to an array: {e}{where_am_i()}") from None
    if v.dtype == object:
        raise TypeError(f"cannot convert a value of type {type(x).__name__} to a nova Array{where_am_i()}")
    if v.dtype.kind in "iu" and d.kind in "iu" and v.size and \
            isinstance(x, int | list | tuple) and not isinstance(x, bool):
        # Python integers out of the target's range raise, as in NumPy 2 and JAX (`int32 array
        # + 2**40` wrapped silently to `+ 0`); NumPy arrays and explicit casts still wrap.
        info = np.iinfo(d)
        lo, hi = int(v.min()), int(v.max())
        if lo < info.min or hi > info.max:
            bad = lo if lo < info.min else hi
            raise OverflowError(f"Python integer {bad} out of bounds for {d}{where_am_i()}")
    return Array(v.astype(d, copy=False))


def _flat_items(x):
    for e in x:
        if isinstance(e, list | tuple):
            yield from _flat_items(e)
        else:
            yield e


def result_type(*args):
    return dtypes.result_type(*args)


def broadcast_shapes(*shapes, name="broadcast"):
    """NumPy's broadcasting rule; ShapeError naming all shapes and the user's line on mismatch."""
    ndim = builtins.max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        size = 1
        for s in shapes:
            j = i - (ndim - len(s))
            if j < 0:
                continue
            d = s[j]
            if d == 1:
                continue
            if size not in (1, d):
                raise ShapeError(
                    f"{name}: operands could not be broadcast together with shapes "
                    f"{' '.join(str(tuple(s)) for s in shapes)}{where_am_i()}"
                )
            size = d
        out.append(size)
    return tuple(out)


def broadcast_to(x: Array, shape) -> Array:
    shape = tuple(int(d) for d in shape)
    if x.shape == shape:
        return x
    if len(shape) < x.ndim:
        raise ShapeError(f"cannot broadcast an array of shape {x.shape} to {shape}{where_am_i()}")
    lead = len(shape) - x.ndim
    for i, d in enumerate(x.shape):
        if d not in (1, shape[lead + i]):
            raise ShapeError(f"cannot broadcast an array of shape {x.shape} to {shape}{where_am_i()}")
    if type(x) is Array and x.size == 1 and current_trace() is None and not x._deleted:
        # Eager fill from one host value (`x + 1.0`): NumPy writes the same bits as the
        # broadcast_in_dim kernel, without an op's dispatch (about half of an eager scalar op).
        out = np.empty(shape, x.dtype)
        out[...] = x._concrete("an operand").reshape(())
        return Array(out, owned=True)
    return lax.broadcast_in_dim(x, shape, tuple(range(lead, len(shape))))


def _eager_scalar_operand(a, b) -> list | None:
    """[a, b] for eager `x + 1.0` / `2 * x` on the host, the Python scalar filled to the float
    array's shape and dtype (weak typing keeps the array's dtype), or None: general promotion
    and broadcasting were half of such a call's time."""
    if type(a) is Array:
        x, s, first = a, b, True
    elif type(b) is Array:
        x, s, first = b, a, False
    else:
        return None
    if type(s) is int:
        if not -(2**63) <= s < 2**63:  # refused by the general path, as under jit
            return None
    elif type(s) is not float:
        return None
    if x._deleted or current_trace() is not None:
        return None
    aval = x.aval
    if not dtypes.is_float(aval.dtype):
        return None
    out = np.empty(aval.shape, aval.dtype)
    out[...] = s
    filled = Array(out, owned=True)
    return [x, filled] if first else [filled, x]


def promote(name: str, *args, to_inexact: bool = False) -> list[Array]:
    """Promotes to one dtype (Python scalars weakly typed) and broadcasts to one shape."""
    first = args[0] if args else None
    if isinstance(first, Array):  # fast path: Arrays of one shape and dtype (x + y)
        aval = first.aval
        if all(isinstance(a, Array) and a.aval == aval for a in args) and \
                (not to_inexact or dtypes.is_inexact(aval.dtype)):
            return list(args)
    if len(args) == 2:
        filled = _eager_scalar_operand(*args)
        if filled is not None:
            return filled
    for a in args:
        if isinstance(a, str) or a is None:
            raise TypeError(f"{name}: unsupported operand type {type(a).__name__}{where_am_i()}")
    dt = dtypes.result_type(*args)
    if to_inexact and not dtypes.is_inexact(dt):
        dt = dtypes.default_float
    arrs = [asarray(a, dt) if not isinstance(a, Array) else lax.convert_element_type(a, dt) for a in args]
    shape = broadcast_shapes(*(a.shape for a in arrs), name=name)
    return [broadcast_to(a, shape) for a in arrs]


def normalize_axis(axis, ndim: int, name: str = "axis") -> int:
    try:
        a = operator.index(axis)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(axis).__name__}{where_am_i()}") from None
    if not -ndim <= a < ndim:
        raise ValueError(
            f"{name} {axis} is out of bounds for an array of dimension {ndim}{where_am_i()}"
        )
    return a % ndim


def normalize_axes(axis, ndim: int, name: str = "axis") -> tuple:
    """None -> all axes; int or tuple -> sorted tuple of non-negative axes (no repeats)."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, tuple | list):
        axes = tuple(normalize_axis(a, ndim, name) for a in axis)
    else:
        axes = (normalize_axis(axis, ndim, name),)
    if len(set(axes)) != len(axes):
        raise ValueError(f"repeated {name} in {axis}{where_am_i()}")
    return tuple(sorted(axes))
