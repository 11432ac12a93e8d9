"""Array creation functions of nova.numpy."""

from __future__ import annotations

import operator

import numpy as np

from nova.core import dtypes
from nova.core.array import Array
from nova.numpy_impl.util import asarray, where_am_i
from nova.ops import lax


def _shape(shape, name="shape"):
    if isinstance(shape, int | np.integer):
        shape = (shape,)
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"{name} must be an int or a sequence of ints, got {shape!r}{where_am_i()}") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"negative dimensions are not allowed: {name} {shape}{where_am_i()}")
    return shape


def array(object, dtype=None, copy=True):  # noqa: A002 - NumPy's name
    """A new Array from a Python scalar, (nested) list, NumPy array or Array.

    Python floats become float32 and ints int32 (JAX's defaults); NumPy arrays keep their dtype
    when Nova supports it. copy=True (the default, as in NumPy) gives the Array a buffer of its
    own when `object` is a NumPy array or a concrete Array; `asarray` may share the NumPy
    array's memory instead. Raises TypeError for unknown dtypes or unconvertible objects.
    """
    from nova.core.array import Array
    from nova.core.trace import Tracer

    a = asarray(object, dtype)
    if copy and isinstance(object, np.ndarray | Array) and not isinstance(a, Tracer):
        v = a._concrete("nova.numpy.array")
        if np.may_share_memory(v, object if isinstance(object, np.ndarray) else
                               object._concrete("nova.numpy.array")):
            return Array(np.array(v, copy=True), owned=True)
    return a


def full(shape, fill_value, dtype=None):
    """An array of `shape` filled with `fill_value` (dtype from the value if not given: a
    Python bool, int, float or complex gives bool, int32, float32 or complex64, as jnp).
    Raises TypeError for a complex scalar fill_value with a real dtype (as jnp)."""
    shape = _shape(shape)
    if dtype is not None:
        d = dtypes.canonicalize(dtype)
    elif isinstance(fill_value, Array):
        d = fill_value.dtype
    else:
        d = dtypes.dtype_of_value(
            np.asarray(fill_value) if not isinstance(fill_value, int | float | complex | bool)
            else fill_value)
    if isinstance(fill_value, Array) or hasattr(fill_value, "shape") and \
            tuple(fill_value.shape) != ():
        # An Array (a traced one too: its derivative flows, as jnp.full's does) is broadcast.
        from nova.numpy_impl.shape import broadcast_to

        return broadcast_to(asarray(fill_value, d), shape)
    if isinstance(fill_value, complex | np.complexfloating) and not dtypes.is_complex(d):
        raise TypeError(f"full: the complex fill_value {fill_value!r} does not fit the real "
                        f"dtype {d} (as jnp; pass .real or a complex dtype), shape {shape}"
                        f"{where_am_i()}")
    return lax.full(shape, fill_value if not hasattr(fill_value, "item") else fill_value.item(), d)


def zeros(shape, dtype=None):
    """An array of zeros; float32 unless `dtype` is given."""
    return full(shape, 0, dtype if dtype is not None else dtypes.default_float)


def ones(shape, dtype=None):
    """An array of ones; float32 unless `dtype` is given."""
    return full(shape, 1, dtype if dtype is not None else dtypes.default_float)


def empty(shape, dtype=None):
    """Like zeros (Nova arrays are immutable values, so there is no uninitialized memory)."""
    return zeros(shape, dtype)


def full_like(a, fill_value, dtype=None, shape=None):
    x = asarray(a)
    return full(x.shape if shape is None else shape, fill_value, dtype if dtype is not None else x.dtype)


def zeros_like(a, dtype=None, shape=None):
    return full_like(a, 0, dtype, shape)


def ones_like(a, dtype=None, shape=None):
    return full_like(a, 1, dtype, shape)


def empty_like(a, dtype=None, shape=None):
    return zeros_like(a, dtype, shape)
