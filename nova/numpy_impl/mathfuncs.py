"""Elementwise math (logaddexp, hypot, cbrt, copysign, heaviside), differences and selection
(diff, select, count_nonzero, array_equal) and products (kron, cross) of nova.numpy, as NumPy's
and jax.numpy's, written over existing nova.numpy / nova.lax functions (jit, grad, vmap and
every backend work without new kernels).
"""

from __future__ import annotations

import builtins

import numpy as np

# nova.numpy is only partly initialized while it imports this module; it is complete by the time
# any function here runs.
from nova import numpy_api as jnp
from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.numpy_impl.families_common import _filled, _full, _int, _zeros
from nova.numpy_impl.util import (
    asarray,
    broadcast_shapes,
    broadcast_to,
    normalize_axis,
    promote,
    where_am_i,
)
from nova.ops import lax

__all__ = [
    "array_equal",
    "array_equiv",
    "cbrt",
    "copysign",
    "count_nonzero",
    "cross",
    "diff",
    "ediff1d",
    "heaviside",
    "hypot",
    "kron",
    "nextafter",
    "logaddexp",
    "logaddexp2",
    "select",
]


# --- elementwise ----------------------------------------------------------------------------


def logaddexp(x1, x2, /):
    """log(exp(x1) + exp(x2)) elementwise without overflow (numpy.logaddexp).

    Broadcasts x1 and x2; integer and bool inputs become float32, floats keep the promoted
    dtype. Computed as max + log1p(exp(-|x1 - x2|)) (jax.numpy.logaddexp); equal infinities give
    that infinity. The gradient is sigmoid(x1 - x2) for x1 (1/2 each at ties). Raises
    ShapeError when the shapes do not broadcast.
    """
    a, b = promote("logaddexp", x1, x2, to_inexact=True)
    delta = lax.sub(a, b)
    nan = lax.isnan(delta)
    safe = lax.select(nan, _zeros(delta), delta)
    out = lax.add(lax.max(a, b), lax.log1p(lax.exp(lax.neg(lax.abs(safe)))))
    return lax.select(nan, lax.add(a, b), out)


def logaddexp2(x1, x2, /):
    """log2(2**x1 + 2**x2) elementwise without overflow (numpy.logaddexp2).

    Shapes, dtypes and errors as logaddexp; computed as max + log1p(2**-|x1 - x2|) / ln 2.
    """
    a, b = promote("logaddexp2", x1, x2, to_inexact=True)
    delta = lax.sub(a, b)
    nan = lax.isnan(delta)
    safe = lax.select(nan, _zeros(delta), delta)
    tail = lax.mul(lax.log1p(lax.exp2(lax.neg(lax.abs(safe)))), _full(a, 1 / np.log(2)))
    return lax.select(nan, lax.add(a, b), lax.add(lax.max(a, b), tail))


def hypot(x1, x2, /):
    """sqrt(x1**2 + x2**2) elementwise without overflow or underflow (numpy.hypot).

    Broadcasts; integer inputs become float32. Computed as m * sqrt(1 + (n/m)**2) with
    m = max(|x1|, |x2|), n the min (jax.numpy.hypot); an infinite operand gives inf even with a
    NaN, as C's hypot. Raises ShapeError when the shapes do not broadcast.
    """
    a, b = promote("hypot", x1, x2, to_inexact=True)
    a, b = lax.abs(a), lax.abs(b)
    inf = lax.bitwise_or(lax.isinf(a), lax.isinf(b))
    m, n = lax.max(a, b), lax.min(a, b)
    zero = lax.eq(m, _zeros(m))
    safe = lax.select(zero, _full(m, 1), m)
    r = lax.div(n, safe)
    out = lax.mul(m, lax.sqrt(lax.add(_full(r, 1), lax.mul(r, r))))
    out = lax.select(zero, m, out)
    return lax.select(inf, _full(out, np.inf), out)


def cbrt(x, /):
    """The real cube root elementwise, negative inputs included (numpy.cbrt).

    Integer and bool inputs become float32; the result has x's shape. Computed as
    sign(x) * |x|**(1/3) and one Newton step; the derivative at 0 is infinite (NaN), as 1/(3 cbrt(x)**2) is.
    """
    (a,) = promote("cbrt", x, to_inexact=True)
    y = lax.mul(lax.sign(a), lax.pow(lax.abs(a), _full(a, 1 / 3)))
    # One Newton step: pow with 1/3 rounded to the dtype is off by ~ln|x| ulps (1e10: 24).
    ok = lax.bitwise_and(lax.ne(y, _zeros(y)), lax.bitwise_not(lax.isinf(y)))
    ys = lax.select(ok, y, _full(y, 1))
    step = lax.div(lax.add(lax.add(ys, ys), lax.div(a, lax.mul(ys, ys))), _full(y, 3))
    return lax.select(ok, step, y)


_SIGNED_OF_WIDTH = {2: np.int16, 4: np.int32, 8: np.int64}


def _signbit(b):
    # The IEEE sign bit: the float's bits read as a signed int of its width are negative
    # (so -0.0 and a NaN with its sign bit set count as negative, as in NumPy).
    bits = lax.bitcast_convert_type(b, _SIGNED_OF_WIDTH[np.dtype(b.dtype).itemsize])
    return lax.lt(bits, lax.full_like(bits, 0))


def copysign(x1, x2, /):
    """|x1| with the sign of x2 elementwise (numpy.copysign); -0.0 in x2 counts as negative.

    Broadcasts; integer inputs become float32; a NaN's sign bit counts too. Raises ShapeError
    for shapes that do not broadcast.
    """
    a, b = promote("copysign", x1, x2, to_inexact=True)
    mag = lax.abs(a)
    return lax.select(_signbit(b), lax.neg(mag), mag)


def nextafter(x1, x2, /):
    """The next representable float after x1 in the direction of x2, elementwise
    (numpy.nextafter; x2 where they are equal, NaN if either is NaN). Broadcasts; integer
    inputs become float32. Raises ShapeError for shapes that do not broadcast."""
    a, b = promote("nextafter", x1, x2, to_inexact=True)
    return lax.nextafter(a, b)


def heaviside(x1, x2, /):
    """The Heaviside step: 0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0 (numpy.heaviside).

    Broadcasts; integer inputs become float32; NaN in x1 gives NaN. Raises ShapeError for
    shapes that do not broadcast.
    """
    a, h = promote("heaviside", x1, x2, to_inexact=True)
    zero = _zeros(a)
    out = lax.select(lax.lt(a, zero), zero, lax.select(lax.gt(a, zero), _full(a, 1), h))
    return lax.select(lax.isnan(a), a, out)


# --- differences and selection --------------------------------------------------------------


def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The n-th discrete difference along `axis` (numpy.diff).

    prepend / append (scalars or arrays matching a's other dimensions) join a along `axis`
    first. The result's `axis` is n shorter (never below 0); dtype: a's (bool gives the
    not_equal of neighbours, as NumPy). Raises ValueError for n < 0 or a 0-d array, TypeError
    for a non-integer n, ShapeError for prepend/append of the wrong shape.
    """
    x = asarray(a)
    n = _int("diff", "n", n)
    if n < 0:
        raise ValueError(f"diff: order n must be non-negative, got {n}{where_am_i()}")
    if n == 0:
        return x
    if x.ndim == 0:
        raise ValueError(f"diff requires input that is at least one dimensional{where_am_i()}")
    ax = normalize_axis(axis, x.ndim)
    parts = []
    for v in (prepend, x, append):
        if v is None:
            continue
        v = asarray(v)
        if v.ndim == 0:
            v = broadcast_to(v, x.shape[:ax] + (1,) + x.shape[ax + 1:])
        parts.append(v)
    if len(parts) > 1:
        x = jnp.concatenate(parts, axis=ax)
    for _ in range(n):
        m = x.shape[ax]
        if m == 0:
            break
        hi, lo = lax.slice_in_dim(x, 1, m, axis=ax), lax.slice_in_dim(x, 0, m - 1, axis=ax)
        x = lax.ne(hi, lo) if x.dtype == dtypes.bool_ else lax.sub(hi, lo)
    return x


def ediff1d(ary, to_end=None, to_begin=None):
    """Differences of consecutive elements of the flattened `ary` (numpy.ediff1d).

    Returns a 1-d array of ary's dtype: ravel(to_begin), the ary.size - 1 differences,
    ravel(to_end) (both cast to ary's dtype). Raises TypeError for a bool `ary`.
    """
    x = jnp.ravel(asarray(ary))
    if x.dtype == dtypes.bool_:
        raise TypeError(f"ediff1d: bool input has no subtraction{where_am_i()}")
    d = lax.sub(x[1:], x[:-1]) if x.size else x
    parts = [jnp.ravel(asarray(v, x.dtype)) for v in (to_begin,) if v is not None]
    parts.append(d)
    parts += [jnp.ravel(asarray(v, x.dtype)) for v in (to_end,) if v is not None]
    return jnp.concatenate(parts) if len(parts) > 1 else d


def select(condlist, choicelist, default=0):
    """The element of the first choicelist[i] whose condlist[i] holds, else `default`
    (numpy.select).

    condlist: bool arrays; choicelist: arrays; all broadcast together. The dtype is the
    promotion of the choices and default (Nova's weak scalars: a float32 choice with the default
    0 stays float32, as jax.numpy.select). Raises ValueError for lists of different or zero
    length, TypeError for a condition that is not bool, ShapeError when shapes do not broadcast.
    """
    condlist, choicelist = list(condlist), list(choicelist)
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: condlist and choicelist must have the same length, got "
                         f"{len(condlist)} and {len(choicelist)}{where_am_i()}")
    if not condlist:
        raise ValueError(f"select with an empty condition list is not possible{where_am_i()}")
    conds = [asarray(c) for c in condlist]
    for i, c in enumerate(conds):
        if c.dtype != dtypes.bool_:
            raise TypeError(f"select: condlist[{i}] must be a bool array, got {c.dtype}"
                            f"{where_am_i()}")
    vals = promote("select", default, *choicelist)
    shape = broadcast_shapes(*(c.shape for c in conds), vals[0].shape, name="select")
    out = broadcast_to(vals[0], shape)
    for c, v in zip(reversed(conds), reversed(vals[1:]), strict=True):
        out = lax.select(broadcast_to(c, shape), broadcast_to(v, shape), out)
    return out


def count_nonzero(a, axis=None, *, keepdims=False):
    """The number of nonzero (True, NaN included) elements along `axis` (numpy.count_nonzero).

    axis None / int / tuple; int32 result of a's shape without `axis` (kept as 1 with
    keepdims). Raises ValueError for an axis out of range or repeated.
    """
    x = asarray(a)
    nz = x if x.dtype == dtypes.bool_ else lax.ne(x, _zeros(x))
    return jnp.sum(nz, axis=axis, dtype=dtypes.default_int, keepdims=keepdims)


def array_equal(a1, a2, equal_nan=False):
    """True if a1 and a2 have the same shape and elements (numpy.array_equal).

    Returns a 0-d bool Array (as jax.numpy; NumPy returns a Python bool); different shapes give
    False. equal_nan: NaN equals NaN.
    """
    x, y = asarray(a1), asarray(a2)
    if x.shape != y.shape:
        return asarray(False)
    eq = jnp.equal(x, y)
    if equal_nan:
        eq = lax.bitwise_or(eq, lax.bitwise_and(jnp.isnan(x), jnp.isnan(y)))
    return jnp.all(eq)


def array_equiv(a1, a2):
    """True if a1 and a2 broadcast together and are equal elementwise (numpy.array_equiv).

    Returns a 0-d bool Array; shapes that do not broadcast give False.
    """
    x, y = asarray(a1), asarray(a2)
    try:
        broadcast_shapes(x.shape, y.shape)
    except ShapeError:
        return asarray(False)
    return jnp.all(jnp.equal(x, y))


# --- products -------------------------------------------------------------------------------


def kron(a, b):
    """The Kronecker product (numpy.kron): blocks a[i, j, ...] * b.

    The operand of fewer dimensions gets leading 1s; the result's shape is the elementwise
    product of the two shapes; dtype: the promotion of a's and b's.
    """
    x, y = asarray(a), asarray(b)
    dt = dtypes.result_type(x, y)
    x, y = lax.convert_element_type(x, dt), lax.convert_element_type(y, dt)
    nd = builtins.max(x.ndim, y.ndim)
    x = lax.reshape(x, (1,) * (nd - x.ndim) + x.shape)
    y = lax.reshape(y, (1,) * (nd - y.ndim) + y.shape)
    inter = tuple(d for pair in zip(x.shape, y.shape, strict=True) for d in pair)
    xb = lax.broadcast_in_dim(x, inter, tuple(range(0, 2 * nd, 2)))
    yb = lax.broadcast_in_dim(y, inter, tuple(range(1, 2 * nd, 2)))
    return lax.reshape(jnp.multiply(xb, yb), tuple(p * q for p, q in zip(x.shape, y.shape,
                                                                         strict=True)))


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of 3-vectors (or 2-vectors: z = 0) along axisa / axisb (numpy.cross).

    `axis` overrides all three. The vectors' other dimensions broadcast; the result holds the
    3 components at `axisc`, or for two 2-vectors the z component alone (no vector axis). dtype:
    the promotion of a's and b's. Raises ValueError when a vector axis is not of length 2 or 3
    or an axis is out of range, ShapeError when the other dimensions do not broadcast.
    """
    if axis is not None:
        axisa = axisb = axisc = axis
    x, y = asarray(a), asarray(b)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError(f"cross: a and b must be at least 1-d, got shapes {x.shape} and "
                         f"{y.shape}{where_am_i()}")
    x = jnp.moveaxis(x, normalize_axis(axisa, x.ndim, "axisa"), -1)
    y = jnp.moveaxis(y, normalize_axis(axisb, y.ndim, "axisb"), -1)
    if x.shape[-1] not in (2, 3) or y.shape[-1] not in (2, 3):
        raise ValueError(f"cross: incompatible dimensions for cross product (dimension must be "
                         f"2 or 3), got vectors of length {x.shape[-1]} and {y.shape[-1]}"
                         f"{where_am_i()}")
    shape = broadcast_shapes(x.shape[:-1], y.shape[:-1], name="cross")
    dt = dtypes.result_type(x, y)

    def parts(v):
        v = lax.convert_element_type(v, dt)
        return [broadcast_to(v[..., i], shape) for i in range(v.shape[-1])]

    xs, ys = parts(x), parts(y)
    z = _filled(shape, 0, dt)
    x0, x1, x2 = (xs + [z])[:3]
    y0, y1, y2 = (ys + [z])[:3]
    sub, mul = jnp.subtract, jnp.multiply
    c2 = sub(mul(x0, y1), mul(x1, y0))
    if len(xs) == 2 and len(ys) == 2:
        return c2
    out = jnp.stack([sub(mul(x1, y2), mul(x2, y1)), sub(mul(x2, y0), mul(x0, y2)), c2], axis=-1)
    return jnp.moveaxis(out, -1, normalize_axis(axisc, out.ndim, "axisc"))
