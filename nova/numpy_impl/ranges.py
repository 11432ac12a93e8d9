"""Ranges and triangles of nova.numpy: arange, linspace, eye, identity, tri, tril, triu.

All are built from `iota`, comparisons and `select`, so they fuse into their consumers and work
under `jit` (only sizes must be static; linspace's endpoints and tril's operand may be traced).
"""

from __future__ import annotations

import math
import operator

import numpy as np

from nova.core import dtypes
from nova.core.array import Array
from nova.core.errors import ShapeError
from nova.numpy_impl.util import asarray, broadcast_shapes, broadcast_to, where_am_i
from nova.ops import lax

__all__ = ["arange", "eye", "identity", "linspace", "tri", "tril", "triu"]


def _static_number(name, arg, value):
    """A concrete Python number from an argument that sets a size (a traced one raises)."""
    if isinstance(value, Array):
        if value.ndim != 0:
            raise TypeError(
                f"{name}: {arg} must be a scalar, got shape {value.shape}{where_am_i()}"
            )
        value = value.item()  # raises ConcretizationTypeError under jit
    elif isinstance(value, np.ndarray | np.generic):
        if np.ndim(value) != 0:
            raise TypeError(
                f"{name}: {arg} must be a scalar, got shape {np.shape(value)}{where_am_i()}"
            )
    elif not isinstance(value, int | float):
        raise TypeError(f"{name}: {arg} must be a number, got {type(value).__name__}{where_am_i()}")
    return value


def _count(name, arg, n):
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"{name}: {arg} must be an integer, got {n!r}{where_am_i()}") from None
    if n < 0:
        raise ValueError(f"{name}: {arg} must be non-negative, got {n}{where_am_i()}")
    return n


def arange(start, stop=None, step=None, dtype=None):
    """numpy.arange: start, start + step, ... stopping before `stop` (1-D).

    arange(stop) starts at 0. Arguments are concrete numbers (the length is static). dtype: int32
    for int arguments, float32 when any is a Python float (the promoted dtype of NumPy scalars),
    or `dtype`. Length ceil((stop - start) / step), at least 0. Raises ValueError for step 0.
    """
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    start, stop, step = (
        _static_number("arange", a, v)
        for a, v in zip(("start", "stop", "step"), (start, stop, step), strict=True)
    )
    if step == 0:
        raise ValueError(f"arange: step must not be zero{where_am_i()}")
    d = dtypes.result_type(start, stop, step) if dtype is None else dtypes.canonicalize(dtype)
    if dtypes.is_bool(d):
        raise TypeError(f"arange: dtype must be numeric, got bool{where_am_i()}")
    n = max(0, math.ceil((float(stop) - float(start)) / float(step)))
    if dtypes.is_float(d) or not all(float(v).is_integer() for v in (start, step)):
        # Computed in the float dtype (or float32 when a float range is cast to integers).
        ct = d if dtypes.is_float(d) else dtypes.default_float
        i = lax.convert_element_type(lax.iota(dtypes.int32, (n,)), ct)
        x = lax.add(lax.mul(i, lax.full((n,), step, ct)), lax.full((n,), start, ct))
        return lax.convert_element_type(x, d)
    i = lax.iota(d, (n,))
    return lax.add(lax.mul(i, lax.full((n,), int(step), d)), lax.full((n,), int(start), d))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """numpy.linspace: `num` evenly spaced values from start to stop (stop included if endpoint).

    start, stop: scalars or arrays (broadcast together; may be traced); the result has shape
    (num,) + their shape with the new axis at `axis`. Values are start + i * step with
    step = (stop - start) / (num - 1 if endpoint else num), the last one exactly stop. dtype:
    float32 unless the inputs are a wider float, complex64 for complex endpoints (complex128
    for complex128 ones), or `dtype` (integer dtypes round down, as NumPy).
    retstep: also return step (shape of the endpoints; NaN when num == 1 with endpoint).
    """
    num = _count("linspace", "num", num)
    lo, hi = (asarray(v) if not isinstance(v, Array) else v for v in (start, stop))
    d = dtypes.result_type(lo, hi, 1.0) if dtype is None else dtypes.canonicalize(dtype)
    ct = d if dtypes.is_inexact(d) else dtypes.result_type(lo, hi, 1.0)
    base = broadcast_shapes(lo.shape, hi.shape, name="linspace")
    lo = broadcast_to(lax.convert_element_type(lo, ct), base)
    hi = broadcast_to(lax.convert_element_type(hi, ct), base)
    div = num - 1 if endpoint else num
    step = (
        lax.div(lax.sub(hi, lo), lax.full(base, div, ct)) if div > 0 else lax.full(base, np.nan, ct)
    )
    shape = (num,) + base
    dims = tuple(range(1, len(shape)))
    i = lax.convert_element_type(lax.iota(dtypes.int32, shape, 0), ct)
    y = lax.mul(i, lax.broadcast_in_dim(step, shape, dims)) if div > 0 else lax.zeros_like(i)
    y = lax.add(y, lax.broadcast_in_dim(lo, shape, dims))
    if endpoint and num > 1:
        last = lax.eq(lax.iota(dtypes.int32, shape, 0), lax.full(shape, num - 1, dtypes.int32))
        y = lax.select(last, lax.broadcast_in_dim(hi, shape, dims), y)
    if not dtypes.is_inexact(d):
        y = lax.floor(lax.real(y) if dtypes.is_complex(y.dtype) else y)
    y = lax.convert_element_type(y, d)
    axis = _result_axis(axis, len(shape))
    if axis != 0:
        y = lax.transpose(y, list(range(1, axis + 1)) + [0] + list(range(axis + 1, len(shape))))
    return (y, step) if retstep else y


def _result_axis(axis, ndim):
    try:
        a = operator.index(axis)
    except TypeError:
        raise TypeError(f"linspace: axis must be an integer, got {axis!r}{where_am_i()}") from None
    if not -ndim <= a < ndim:
        raise ValueError(
            f"linspace: axis {axis} is out of bounds for a result of {ndim} dimensions"
            f"{where_am_i()}"
        )
    return a % ndim


def _diagonal_mask(rows, cols, k, pred):
    """pred(j, i + k) over a (rows, cols) grid of row i, column j: bool."""
    shape = (rows, cols)
    i = lax.add(lax.iota(dtypes.int32, shape, 0), lax.full(shape, k, dtypes.int32))
    j = lax.iota(dtypes.int32, shape, 1)
    return pred(j, i)


def _float_or(dtype):
    return dtypes.default_float if dtype is None else dtypes.canonicalize(dtype)


def eye(N, M=None, k=0, dtype=None):
    """A 2-D (N, M) array with ones on the k-th diagonal (above the main one for k > 0).

    M defaults to N; dtype to float32. Raises ValueError for negative sizes.
    """
    n = _count("eye", "N", N)
    m = n if M is None else _count("eye", "M", M)
    mask = _diagonal_mask(n, m, operator.index(k), lax.eq)
    return lax.convert_element_type(mask, _float_or(dtype))


def identity(n, dtype=None):
    """The (n, n) identity matrix (float32 unless `dtype`)."""
    return eye(n, dtype=dtype)


def tri(N, M=None, k=0, dtype=None):
    """An (N, M) array with ones at and below the k-th diagonal, zeros above (float32 default)."""
    n = _count("tri", "N", N)
    m = n if M is None else _count("tri", "M", M)
    mask = _diagonal_mask(n, m, operator.index(k), lax.le)
    return lax.convert_element_type(mask, _float_or(dtype))


def _triangle(name, m, k, pred):
    x = asarray(m)
    if x.ndim == 0:
        raise ShapeError(f"{name}: input must be at least 1-D, got a 0-d array{where_am_i()}")
    if x.ndim == 1:
        x = broadcast_to(x, (x.shape[0], x.shape[0]))  # NumPy treats a vector as its rows
    rows, cols = x.shape[-2:]
    mask = _diagonal_mask(rows, cols, operator.index(k), pred)
    mask = lax.broadcast_in_dim(mask, x.shape, (x.ndim - 2, x.ndim - 1))
    return lax.select(mask, x, lax.zeros_like(x))


def tril(m, k=0):
    """m with the elements above the k-th diagonal zeroed, over the last two axes (batched).

    A 1-D m is taken as the rows of a square matrix, as in NumPy. Shape and dtype are m's.
    """
    return _triangle("tril", m, k, lax.le)


def triu(m, k=0):
    """m with the elements below the k-th diagonal zeroed, over the last two axes (batched)."""
    return _triangle("triu", m, k, lax.ge)
