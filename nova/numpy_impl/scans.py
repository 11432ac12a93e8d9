"""Cumulative functions of nova.numpy: cumsum, cumprod (NumPy's axis and dtype rules)."""

from __future__ import annotations

from nova.core import dtypes
from nova.ops import lax
from nova.numpy_impl.util import asarray, normalize_axis, where_am_i

__all__ = ["cumsum", "cumprod"]


def _accumulation_dtype(x, dtype):
    # jnp.cumsum/cumprod's rule (unlike sum's): only bool widens, to int32; every other dtype
    # accumulates in itself (int8 stays int8 and wraps) unless a dtype is given.
    if dtype is not None:
        return dtypes.canonicalize(dtype)
    if x.dtype == dtypes.bool_:
        return dtypes.default_int
    return x.dtype


def _complex_cumprod(x, axis):
    # The cumprod primitive has no complex form; the odd-even parallel prefix of complex
    # multiplications (Ladner & Fischer, "Parallel prefix computation", JACM 27(4), 1980)
    # is built from slices, concatenations and complex products, all of which do, and it
    # differentiates through them.
    return lax.associative_scan(lax.mul, x, axis=axis)


def _cumulative(name, op):
    def f(a, axis=None, dtype=None, out=None):
        if out is not None:
            raise TypeError(
                f"{name}: out= is not supported (nova arrays are immutable){where_am_i()}"
            )
        x = asarray(a)
        if axis is None or x.ndim == 0:
            if x.ndim == 0 and axis is not None:
                normalize_axis(axis, 1)  # NumPy treats a 0-d input as 1-d here
            x = lax.reshape(x, (x.size,))
            ax = 0
        else:
            ax = normalize_axis(axis, x.ndim)
        dt = _accumulation_dtype(x, dtype)
        if dtypes.is_bool(dt):
            # A bool running sum/product is a running "any"/"all".
            combine = lax.cummax if name == "cumsum" else lax.cummin
            return combine(lax.convert_element_type(x, dt), ax)
        x = lax.convert_element_type(x, dt)
        if name == "cumprod" and dtypes.is_complex(dt):
            return _complex_cumprod(x, ax)
        return op(x, ax)

    f.__name__ = name
    what = "sum" if name == "cumsum" else "product"
    f.__doc__ = (
        f"Cumulative {what} along `axis` (numpy.{name}); axis None flattens the input first.\n\n"
        "The result has the input's shape (1-d of its size when flattened) and, as jnp's, the\n"
        "input's dtype (int8 stays int8), bool giving int32, unless `dtype` is given. Integer\n"
        "accumulation wraps on overflow. Complex inputs are supported (a complex cumprod is a\n"
        "parallel prefix of complex products: lax.associative_scan, log2(n) levels). "
        "Raises ValueError for an axis out of range, TypeError for `out` or an unknown dtype."
    )
    return f


cumsum = _cumulative("cumsum", lax.cumsum)
cumprod = _cumulative("cumprod", lax.cumprod)
