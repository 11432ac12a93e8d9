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
    # jnp.sum's rule: bool and signed ints narrower than int32 sum in int32, unsigned ones in
    # uint32 (the default int of their signedness); wider ints and floats keep their dtype.
    if dtype is not None:
        return dtypes.canonicalize(dtype)
    if x.dtype == dtypes.bool_ or x.dtype in dtypes.SMALL_INTS:
        return dtypes.uint32 if dtypes.is_unsigned(x.dtype) else dtypes.default_int
    return x.dtype


def _float_result_dtype(name, x, dtype):
    """mean/var's dtype: `dtype` when given (bool refused, as jnp), else x's when it is a
    float or complex, else float32."""
    if dtype is None:
        return x.dtype if dtypes.is_inexact(x.dtype) else dtypes.default_float
    dt = dtypes.canonicalize(dtype, arg_name=f"{name} dtype")
    if dtypes.is_bool(dt):
        raise TypeError(f"{name}: dtype bool is not supported (a {name} needs a division); "
                        f"got input dtype {x.dtype}{where_am_i()}")
    return dt


_LOW = (dtypes.float16, dtypes.bfloat16)


def _accumulate(x):
    """float16/bfloat16 values accumulate in float32 (as XLA does): a bf16 running sum stops
    growing at 256 ones."""
    return lax.convert_element_type(x, dtypes.float32) if x.dtype in _LOW else x


def sum(a, axis=None, dtype=None, keepdims=False):  # noqa: A001 - NumPy's name
    """Sum over `axis` (None: all; int or tuple; negative counts from the end), jnp.sum.

    The result dtype is `dtype` when given; else bool, int8 and int16 inputs sum in int32 and
    uint8 and uint16 in uint32 (jnp.sum's rule), other dtypes keep theirs (int64 stays
    int64). float16/bfloat16 accumulate in float32 and round once. Integer sums wrap on
    overflow. Raises ValueError for an out-of-range or repeated axis, TypeError for an
    unknown dtype.
    """
    x = asarray(a)
    axes = normalize_axes(axis, x.ndim)
    x = lax.convert_element_type(x, _sum_dtype(x, dtype))
    if x.dtype == dtypes.bool_:  # a bool sum (dtype=bool) is an "or", as jnp's and NumPy's
        return _keep(lax.reduce_max(x, axes), x.shape, axes, keepdims)
    y = lax.convert_element_type(lax.reduce_sum(_accumulate(x), axes), x.dtype)
    return _keep(y, x.shape, axes, keepdims)


def prod(a, axis=None, dtype=None, keepdims=False, initial=None):
    """Product over `axis` (None: all; int or tuple; negative counts from the end), numpy.prod.

    The result dtype is sum's (bool and small ints widen to int32 / uint32); `dtype` overrides. `initial` multiplies the
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
    """Arithmetic mean over `axis` (jnp.mean): a of any shape; the result has a's shape less
    the reduced axes (kept as 1 with keepdims). bool and integer inputs give float32, float
    inputs keep their dtype (float16/bfloat16 accumulate in float32). An integer `dtype`
    casts a to it and computes in it, as jnp: the sum and the count wrap (300 elements
    count 44 in int8), the division truncates toward zero, and the result has that dtype.
    An empty reduction gives NaN in a float dtype and 0 in an integer one (the zero sum
    divided by a zero count with Nova's integer division, where 0 is the quotient of every
    division by 0; jnp's program divides the same way and leaves XLA's value). Raises
    TypeError for dtype bool (as jnp) or an unknown dtype, ValueError for an out-of-range or
    repeated axis."""
    x = asarray(a)
    axes = normalize_axes(axis, x.ndim)
    dt = _float_result_dtype("mean", x, dtype)
    x = lax.convert_element_type(x, dt)
    n = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
    s = lax.reduce_sum(_accumulate(x), axes)
    if n == 0 and not dtypes.is_int(s.dtype):
        y = lax.full(s.shape, np.nan, s.dtype)
    else:
        # jnp casts the count to the dtype, wrapping as the sum does (300 in int8 is 44)
        count = np.asarray(n, np.int64).astype(s.dtype)
        y = lax.div(s, lax.full(s.shape, count, s.dtype))
    return _keep(lax.convert_element_type(y, dt), x.shape, axes, keepdims)


def var(a, axis=None, dtype=None, ddof=0, keepdims=False):
    """Variance over `axis` computed in two passes (mean, then mean squared deviation), jnp.var.

    The dtype is mean's: x's for a float, float32 for bool and integers, `dtype` when given;
    a complex x gives the mean of |x - mean|^2 in its real dtype (float32 for complex64), a
    complex `dtype` that value as complex. An integer `dtype` computes the mean, deviations
    and division in that dtype (truncating) and, as jnp, gives the result as float32.
    n - ddof <= 0 gives NaN. Raises TypeError for dtype bool, ValueError for a bad axis.
    """
    x = asarray(a)
    axes = normalize_axes(axis, x.ndim)
    dt = _float_result_dtype("var", x, dtype)
    x = lax.convert_element_type(x, dt)
    wide = _accumulate(x)
    m = mean(wide, axes, dtype=wide.dtype, keepdims=True)
    d = lax.sub(wide, lax.broadcast_in_dim(m, x.shape, tuple(range(x.ndim))))
    n = int(np.prod([x.shape[i] for i in axes], dtype=np.int64)) - ddof
    if dtypes.is_complex(dt):  # the mean of |d|^2, real (as jnp) unless `dtype` is given
        re, im = lax.real(d), lax.imag(d)
        s = lax.reduce_sum(lax.add(lax.mul(re, re), lax.mul(im, im)), axes)
        y = lax.div(s, lax.full(s.shape, n if n > 0 else np.nan, s.dtype))
        out = dt if dtype is not None else dtypes.real_dtype(dt)
        return _keep(lax.convert_element_type(y, out), x.shape, axes, keepdims)
    s = lax.reduce_sum(lax.mul(d, d), axes)
    if not dtypes.is_float(dt):  # jnp: an integer quotient, then NaN where n <= 0 (float32)
        q = lax.div(s, lax.full(s.shape, builtins.max(n, 1), s.dtype))
        y = lax.convert_element_type(q, dtypes.result_type(dt, 1.0))
        if n <= 0:
            y = lax.full(y.shape, np.nan, y.dtype)
        return _keep(y, x.shape, axes, keepdims)
    y = lax.div(s, lax.full(s.shape, n if n > 0 else np.nan, s.dtype))
    return _keep(lax.convert_element_type(y, dt), x.shape, axes, keepdims)


def std(a, axis=None, dtype=None, ddof=0, keepdims=False):
    """Standard deviation: sqrt(var(...)), jnp.std; shapes and dtypes as var (real for a
    complex x). Raises ValueError for a `dtype` that is neither float nor complex (as jnp),
    else what var raises."""
    if dtype is not None and not dtypes.is_inexact(
            dtypes.canonicalize(dtype, arg_name="std dtype")):
        raise ValueError(f"std: dtype must be a float dtype, got {dtypes.canonicalize(dtype)}"
                         f"{where_am_i()}")
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
