"""Reductions of nova.numpy: sum, prod, mean, var, std, max, min, argmax, argmin, any, all.

NumPy's axis (None, int or tuple; negative counts from the end) and keepdims throughout.
"""

from __future__ import annotations

import builtins

import numpy as np

from nova.core import dtypes
from nova.ops import lax
from nova.numpy_impl.util import asarray, normalize_axes, normalize_axis, where_am_i


def _keep(y, x_shape, axes, keepdims):
    if not keepdims:
        return y
    return lax.reshape(y, tuple(1 if i in axes else d for i, d in enumerate(x_shape)))


def _sum_dtype(x, dtype):
    if dtype is not None:
        return dtypes.canonicalize(dtype)
    if x.dtype == dtypes.bool_ or x.dtype in dtypes.SMALL_INTS:
        return dtypes.default_int
    return x.dtype


_LOW = (dtypes.float16, dtypes.bfloat16)


def _accumulate(x):
    """float16/bfloat16 values accumulate in float32 (as XLA does): a bf16 running sum stops
    growing at 256 ones."""
    return lax.convert_element_type(x, dtypes.float32) if x.dtype in _LOW else x


def sum(a, axis=None, dtype=None, keepdims=False):  # noqa: A001 - NumPy's name
    """Sum over `axis` (None: all; int or tuple; negative counts from the end).

    bool and uint8 inputs sum in int32; float16/bfloat16 accumulate in float32 and round once.
    Raises ValueError for an out-of-range or repeated axis.
    """
    x = asarray(a)
    axes = normalize_axes(axis, x.ndim)
    x = lax.convert_element_type(x, _sum_dtype(x, dtype))
    y = lax.convert_element_type(lax.reduce_sum(_accumulate(x), axes), x.dtype)
    return _keep(y, x.shape, axes, keepdims)


def prod(a, axis=None, dtype=None, keepdims=False, initial=None):
    """Product over `axis` (None: all; int or tuple; negative counts from the end), numpy.prod.

    bool and uint8 inputs multiply in int32 (as sum); `dtype` overrides. `initial` multiplies the
    result. An empty reduction gives 1. The gradient is exact where the input holds zeros (the
    product of the other elements). Raises ValueError for an out-of-range or repeated axis.
    """
    x = asarray(a)
    axes = normalize_axes(axis, x.ndim)
    x = lax.convert_element_type(x, _sum_dtype(x, dtype))
    y = lax.reduce_prod(x, axes)
    if initial is not None:
        from nova.numpy_impl.ufuncs import multiply

        y = lax.convert_element_type(multiply(y, initial), y.dtype)
    return _keep(y, x.shape, axes, keepdims)


def mean(a, axis=None, dtype=None, keepdims=False):
    """Arithmetic mean over `axis`; integer inputs give float32, float16/bfloat16 accumulate
    in float32. Empty reductions give NaN."""
    x = asarray(a)
    axes = normalize_axes(axis, x.ndim)
    dt = dtypes.canonicalize(dtype) if dtype is not None else (
        x.dtype if dtypes.is_float(x.dtype) else dtypes.default_float)
    x = lax.convert_element_type(x, dt)
    n = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
    s = lax.reduce_sum(_accumulate(x), axes)
    y = lax.div(s, lax.full(s.shape, n if n else np.nan, s.dtype)) if n else \
        lax.full(s.shape, np.nan, s.dtype)
    return _keep(lax.convert_element_type(y, dt), x.shape, axes, keepdims)


def var(a, axis=None, dtype=None, ddof=0, keepdims=False):
    """Variance over `axis` computed in two passes (mean, then mean squared deviation)."""
    x = asarray(a)
    axes = normalize_axes(axis, x.ndim)
    dt = dtypes.canonicalize(dtype) if dtype is not None else (
        x.dtype if dtypes.is_float(x.dtype) else dtypes.default_float)
    x = lax.convert_element_type(x, dt)
    wide = _accumulate(x)
    m = mean(wide, axes, keepdims=True)
    d = lax.sub(wide, lax.broadcast_in_dim(m, x.shape, tuple(range(x.ndim))))
    n = int(np.prod([x.shape[i] for i in axes], dtype=np.int64)) - ddof
    s = lax.reduce_sum(lax.mul(d, d), axes)
    y = lax.div(s, lax.full(s.shape, n if n > 0 else np.nan, s.dtype))
    return _keep(lax.convert_element_type(y, dt), x.shape, axes, keepdims)


def std(a, axis=None, dtype=None, ddof=0, keepdims=False):
    """Standard deviation: sqrt(var(...))."""
    return lax.sqrt(var(a, axis, dtype, ddof, keepdims))


def _extremum(name, op):
    def f(a, axis=None, keepdims=False, initial=None):
        x = asarray(a)
        axes = normalize_axes(axis, x.ndim)
        if initial is None and builtins.any(x.shape[i] == 0 for i in axes):
            raise ValueError(
                f"zero-size array to reduction operation {name} which has no identity: shape "
                f"{x.shape}, axis {axis}{where_am_i()}"
            )
        y = op(x, axes)
        if initial is not None:
            from nova.numpy_impl.ufuncs import maximum, minimum

            y = (maximum if name == "max" else minimum)(y, initial)
        return _keep(y, x.shape, axes, keepdims)

    f.__name__ = name
    f.__doc__ = (
        f"{name.capitalize()} over `axis` (numpy.{name}); ties share the gradient equally. Raises "
        "ValueError for an empty reduction without `initial`."
    )
    return f


max = _extremum("max", lax.reduce_max)  # noqa: A001
min = _extremum("min", lax.reduce_min)  # noqa: A001
amax = max
amin = min


def any(a, axis=None, keepdims=False):  # noqa: A001
    """True where any element along `axis` is nonzero."""
    x = asarray(a)
    axes = normalize_axes(axis, x.ndim)
    b = x if x.dtype == dtypes.bool_ else lax.ne(x, lax.full(x.shape, 0, x.dtype))
    return _keep(lax.reduce_max(b, axes), x.shape, axes, keepdims)


def all(a, axis=None, keepdims=False):  # noqa: A001
    """True where every element along `axis` is nonzero."""
    x = asarray(a)
    axes = normalize_axes(axis, x.ndim)
    b = x if x.dtype == dtypes.bool_ else lax.ne(x, lax.full(x.shape, 0, x.dtype))
    return _keep(lax.reduce_min(b, axes), x.shape, axes, keepdims)


def _arg_reduction(name, op):
    def f(a, axis=None, out=None, *, keepdims=False):
        if out is not None:
            raise TypeError(
                f"{name}: out= is not supported (nova arrays are immutable){where_am_i()}"
            )
        x = asarray(a)
        shape = x.shape
        if axis is None:
            x = lax.reshape(x, (x.size,))
            ax = 0
        else:
            ax = normalize_axis(axis, x.ndim)
        if x.shape[ax] == 0:
            raise ValueError(
                f"attempt to get {name} of an empty sequence: shape {shape}, axis {axis}"
                f"{where_am_i()}"
            )
        y = op(x, ax, dtypes.default_int)
        if not keepdims:
            return y
        if axis is None:
            return lax.reshape(y, (1,) * len(shape))
        return lax.reshape(y, tuple(1 if i == ax else d for i, d in enumerate(shape)))

    f.__name__ = name
    f.__doc__ = (
        f"Indices of the {'maxima' if name == 'argmax' else 'minima'} along `axis`, "
        f"numpy.{name}.\n\n"
        "axis None gives the index into the flattened array. The result is int32 with the input's\n"
        "shape less `axis` (ones everywhere with keepdims and axis None). Ties give the first\n"
        "index; a NaN wins over every number (the first NaN). Not differentiable. Raises\n"
        "ValueError for an empty axis or an axis out of range, TypeError for `out`."
    )
    return f


argmax = _arg_reduction("argmax", lax.argmax)
argmin = _arg_reduction("argmin", lax.argmin)
