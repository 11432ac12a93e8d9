"""Set, search and index functions of nova.numpy, as NumPy's and jax.numpy's: isin,
searchsorted, digitize, bincount, the triangle and diagonal index helpers, indices, logspace,
geomspace, rot90, unravel_index, ravel_multi_index, fill_diagonal, nonzero / flatnonzero /
argwhere. Where NumPy's result shape depends on the values (nonzero, bincount), a static
`size=` / `length=` is taken as in JAX; without it the values must be concrete.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

# nova.numpy is only partly initialized while it imports this module; it is complete by the time
# any function here runs.
from nova import numpy_api as jnp
from nova.core import dtypes
from nova.core.errors import ConcretizationTypeError
from nova.numpy_impl.families_common import _concrete, _filled, _float_dtype, _full, _int, _zeros
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
    "argwhere",
    "bincount",
    "diag_indices",
    "diag_indices_from",
    "digitize",
    "fill_diagonal",
    "flatnonzero",
    "geomspace",
    "indices",
    "isin",
    "logspace",
    "nonzero",
    "ravel_multi_index",
    "rot90",
    "searchsorted",
    "tril_indices",
    "tril_indices_from",
    "triu_indices",
    "triu_indices_from",
    "unravel_index",
]


# --- sets and searching ---------------------------------------------------------------------


def isin(element, test_elements, assume_unique=False, invert=False):
    """True where an element of `element` is in test_elements (numpy.isin).

    bool array of element's shape; test_elements is flattened; NaN is in nothing. Compares all
    pairs (memory element.size * test_elements.size). invert: the negation.
    """
    e, t = asarray(element), jnp.ravel(asarray(test_elements))
    if t.size == 0:
        out = _filled(e.shape, False, dtypes.bool_)
    else:
        out = jnp.any(jnp.equal(jnp.expand_dims(e, -1), t), axis=-1)
    return lax.bitwise_not(out) if invert else out


def _nan_last_less(p, q):
    """p < q with NaN above everything (NumPy's sort order)."""
    lt = lax.lt(p, q)
    if not dtypes.is_float(p.dtype):
        return lt
    return lax.bitwise_or(lt, lax.bitwise_and(lax.isnan(q), lax.bitwise_not(lax.isnan(p))))


def searchsorted(a, v, side="left", sorter=None):
    """Indices where v's elements would be inserted into the sorted 1-d `a` (numpy.searchsorted).

    side "left": the first suitable place (count of a < v), "right": the last (count of
    a <= v); NaN sorts last, as NumPy. sorter: int indices that sort a. int32 result of v's
    shape. Compares all pairs (jax.numpy's method="compare_all"). Raises ValueError for a that
    is not 1-d or an unknown side.
    """
    x, val = asarray(a), asarray(v)
    if x.ndim != 1:
        raise ValueError(f"searchsorted: a must be 1-d, got shape {x.shape}{where_am_i()}")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}"
                         f"{where_am_i()}")
    if sorter is not None:
        x = jnp.take(x, sorter)
    dt = dtypes.result_type(x, val)
    x, val = lax.convert_element_type(x, dt), lax.convert_element_type(val, dt)
    shape = val.shape + x.shape
    xb = lax.broadcast_in_dim(x, shape, (val.ndim,))
    vb = lax.broadcast_in_dim(val, shape, tuple(range(val.ndim)))
    hit = _nan_last_less(xb, vb) if side == "left" else lax.bitwise_not(_nan_last_less(vb, xb))
    return jnp.sum(hit, axis=-1, dtype=dtypes.int32)


def digitize(x, bins, right=False):
    """The index of the bin of each element of x (numpy.digitize).

    bins: 1-d, increasing or decreasing. right=False: bins[i-1] <= x < bins[i] for increasing
    bins; right=True: bins[i-1] < x <= bins[i]. int32 result of x's shape. Raises ValueError
    for bins that are not 1-d or (when concrete) not monotonic.
    """
    b, xv = asarray(bins), asarray(x)
    if b.ndim != 1:
        raise ValueError(f"digitize: bins must be 1-d, got shape {b.shape}{where_am_i()}")
    if b.shape[0] == 0:
        return _filled(xv.shape, 0, dtypes.int32)
    c = _concrete(b)
    if c is not None and c.size > 1:
        d = np.diff(c)
        if not (np.all(d >= 0) or np.all(d <= 0)):
            raise ValueError(f"digitize: bins must be monotonically increasing or decreasing"
                             f"{where_am_i()}")
    side = "left" if right else "right"
    up = searchsorted(b, xv, side)
    down = lax.sub(_filled(xv.shape, b.shape[0], dtypes.int32),
                   searchsorted(jnp.flip(b), xv, side))
    return jnp.where(lax.ge(b[-1], b[0]), up, down)


def bincount(x, weights=None, minlength=0, *, length=None):
    """Counts (or summed weights) of each value of the non-negative int array x
    (numpy.bincount, with jax.numpy's `length`).

    x: 1-d integers or bools. The result has `length` entries when given (values >= length are
    dropped, negative ones count as 0 under jit, as jax.numpy), else max(minlength, max(x) + 1),
    which needs concrete x. dtype: int32 without weights, else weights' dtype (bool: int32).
    Raises TypeError for non-integer x, ValueError for x not 1-d, negative (concrete) values,
    a negative minlength/length or weights of another shape, ConcretizationTypeError for a
    traced x without `length`.
    """
    xa = asarray(x)
    if not (dtypes.is_int(xa.dtype) or xa.dtype == dtypes.bool_):
        raise TypeError(f"bincount: x must be an integer array, got {xa.dtype}{where_am_i()}")
    if xa.ndim != 1:
        raise ValueError(f"bincount: x must be 1-d, got shape {xa.shape}{where_am_i()}")
    minlength = _int("bincount", "minlength", minlength)
    if minlength < 0:
        raise ValueError(f"bincount: minlength must be non-negative, got {minlength}"
                         f"{where_am_i()}")
    xa = lax.convert_element_type(xa, dtypes.int32) if xa.dtype == dtypes.bool_ else xa
    c = _concrete(xa)
    if c is not None and c.size and c.min() < 0:
        raise ValueError(f"bincount: x must be non-negative, got {c.min()}{where_am_i()}")
    if length is None:
        if c is None:
            raise ConcretizationTypeError(
                "bincount: the output length depends on the values of x, which are traced here "
                "(inside jit or vmap); pass a static `length=` argument, as jax.numpy.bincount"
                f"{where_am_i()}")
        length = builtins.max(minlength, int(c.max()) + 1 if c.size else 0)
    length = _int("bincount", "length", length)
    if length < 0:
        raise ValueError(f"bincount: length must be non-negative, got {length}{where_am_i()}")
    if weights is None:
        w = _filled(xa.shape, 1, dtypes.int32)
    else:
        w = asarray(weights)
        if w.shape != xa.shape:
            raise ValueError(f"bincount: weights of shape {w.shape} do not match x of shape "
                             f"{xa.shape}{where_am_i()}")
        if w.dtype == dtypes.bool_:
            w = lax.convert_element_type(w, dtypes.int32)
    idx = lax.max(xa, _zeros(xa))
    return lax.scatter_add(_filled((length,), 0, w.dtype), lax.reshape(idx, (xa.size, 1)), w,
                           (0,))


# --- index helpers --------------------------------------------------------------------------


def _index_arrays(parts):
    return tuple(asarray(np.asarray(p, np.int32)) for p in parts)


def _static_ints(name, **kw):
    return {k: (None if v is None else _int(name, k, v)) for k, v in kw.items()}


def tril_indices(n, k=0, m=None):
    """The (row, col) int32 indices of the lower triangle (diagonal k) of an (n, m) array
    (numpy.tril_indices). n, k, m: Python ints. Raises TypeError for non-integers."""
    s = _static_ints("tril_indices", n=n, k=k, m=m)
    return _index_arrays(np.tril_indices(s["n"], s["k"], s["m"]))


def triu_indices(n, k=0, m=None):
    """The (row, col) int32 indices of the upper triangle (diagonal k) of an (n, m) array
    (numpy.triu_indices). n, k, m: Python ints. Raises TypeError for non-integers."""
    s = _static_ints("triu_indices", n=n, k=k, m=m)
    return _index_arrays(np.triu_indices(s["n"], s["k"], s["m"]))


def _shape_2d(name, arr):
    shape = asarray(arr).shape
    if len(shape) != 2:
        raise ValueError(f"{name}: input array must be 2-d, got shape {shape}{where_am_i()}")
    return shape


def tril_indices_from(arr, k=0):
    """tril_indices for arr's (2-d) shape (numpy.tril_indices_from); ValueError if not 2-d."""
    r, c = _shape_2d("tril_indices_from", arr)
    return tril_indices(r, k, c)


def triu_indices_from(arr, k=0):
    """triu_indices for arr's (2-d) shape (numpy.triu_indices_from); ValueError if not 2-d."""
    r, c = _shape_2d("triu_indices_from", arr)
    return triu_indices(r, k, c)


def diag_indices(n, ndim=2):
    """`ndim` copies of the int32 indices 0..n-1, indexing the main diagonal of an array of
    shape (n,) * ndim (numpy.diag_indices). Raises TypeError for non-integers."""
    s = _static_ints("diag_indices", n=n, ndim=ndim)
    return _index_arrays([np.arange(s["n"])] * s["ndim"])


def diag_indices_from(arr):
    """diag_indices for arr's shape (numpy.diag_indices_from). Raises ValueError unless arr is
    at least 2-d with all dimensions equal."""
    shape = asarray(arr).shape
    if len(shape) < 2:
        raise ValueError(f"diag_indices_from: input array must be at least 2-d, got shape "
                         f"{shape}{where_am_i()}")
    if len(set(shape)) != 1:
        raise ValueError(f"diag_indices_from: all dimensions of input must be of equal length, "
                         f"got shape {shape}{where_am_i()}")
    return diag_indices(shape[0], len(shape))


def indices(dimensions, dtype=None, sparse=False):
    """The grid of indices of an array of shape `dimensions` (numpy.indices).

    Result: shape (len(dimensions), *dimensions) of `dtype` (int32 default), or with sparse a
    tuple of arrays of shape (1, ..., d_i, ..., 1). Raises TypeError for non-integer dims.
    """
    dims = tuple(_int("indices", "dimensions", d) for d in dimensions)
    dt = dtypes.default_int if dtype is None else dtypes.canonicalize(dtype)
    if sparse:
        return tuple(lax.reshape(lax.iota(dt, (d,), 0), tuple(d if j == i else 1
                                                              for j in range(len(dims))))
                     for i, d in enumerate(dims))
    if not dims:
        return _filled((0,), 0, dt)
    return jnp.stack([lax.iota(dt, dims, i) for i in range(len(dims))])


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """base ** linspace(start, stop, num, endpoint) (numpy.logspace).

    start, stop, base: scalars or arrays (broadcast; base is expanded at `axis`, as NumPy).
    Shape as linspace; float32 unless wider inputs or `dtype` (integers truncate). Raises what
    linspace raises.
    """
    lo, hi, b = asarray(start), asarray(stop), asarray(base)
    nd = len(broadcast_shapes(lo.shape, hi.shape, b.shape, name="logspace"))
    lo, hi, b = (lax.reshape(v, (1,) * (nd - v.ndim) + v.shape) for v in (lo, hi, b))
    y = jnp.linspace(lo, hi, num, endpoint=endpoint, axis=axis)
    if b.ndim:
        b = jnp.expand_dims(b, normalize_axis(axis, y.ndim))
    else:
        b = base if isinstance(base, int | float) else b  # a Python scalar stays weakly typed
    out = jnp.power(b, y)
    return out if dtype is None else lax.convert_element_type(out, dtypes.canonicalize(dtype))


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """`num` values from start to stop evenly spaced on a log scale (numpy.geomspace).

    Both ends negative give negative values; the first (and, with endpoint, last) value is
    start (stop) exactly. Shapes as linspace; float32 unless wider inputs or `dtype`. Raises
    ValueError when (concrete) start or stop is zero; mixed signs give NaN, as NumPy's reals.
    """
    s, t = asarray(start), asarray(stop)
    for name, v in (("start", s), ("stop", t)):
        c = _concrete(v)
        if c is not None and np.any(c == 0):
            raise ValueError(f"geomspace: a geometric sequence cannot include zero ({name} is 0)"
                             f"{where_am_i()}")
    ct = _float_dtype(s, t, 1.0)
    s, t = lax.convert_element_type(s, ct), lax.convert_element_type(t, ct)
    shape = broadcast_shapes(s.shape, t.shape, name="geomspace")
    s, t = broadcast_to(s, shape), broadcast_to(t, shape)
    sign = lax.sign(s)
    inv_ln10 = 1 / np.log(10)
    lo = lax.mul(lax.log(lax.div(s, sign)), _full(s, inv_ln10))
    hi = lax.mul(lax.log(lax.div(t, sign)), _full(t, inv_ln10))
    y = jnp.power(10.0, jnp.linspace(lo, hi, num, endpoint=endpoint, dtype=ct))
    full = (num,) + shape
    dims = tuple(range(1, len(full)))
    y = lax.mul(y, lax.broadcast_in_dim(sign, full, dims))
    i = lax.iota(dtypes.int32, full, 0)
    y = lax.select(lax.eq(i, _zeros(i)), lax.broadcast_in_dim(s, full, dims), y)
    if endpoint and num > 1:
        y = lax.select(lax.eq(i, _filled(full, num - 1, dtypes.int32)),
                       lax.broadcast_in_dim(t, full, dims), y)
    if dtype is not None:
        y = lax.convert_element_type(y, dtypes.canonicalize(dtype))
    return jnp.moveaxis(y, 0, normalize_axis(axis, len(full)))


def rot90(m, k=1, axes=(0, 1)):
    """m rotated by 90 degrees k times in the plane `axes`, from the first axis towards the
    second (numpy.rot90). Same dtype; the two axes' lengths swap for odd k. Raises ValueError
    when len(axes) != 2, the axes are equal or out of range."""
    x = asarray(m)
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError(f"rot90: len(axes) must be 2, got {axes}{where_am_i()}")
    a0, a1 = (normalize_axis(a, x.ndim, "axes") for a in axes)
    if a0 == a1:
        raise ValueError(f"rot90: axes must be different, got {axes}{where_am_i()}")
    k = _int("rot90", "k", k) % 4
    if k == 0:
        return x
    if k == 2:
        return jnp.flip(jnp.flip(x, a0), a1)
    perm = list(range(x.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return jnp.transpose(jnp.flip(x, a1), perm)
    return jnp.flip(jnp.transpose(x, perm), a1)


# --- flat and multi-dimensional indices -----------------------------------------------------


def _int_array(name, arg, v):
    x = asarray(v)
    if not dtypes.is_int(x.dtype):
        raise TypeError(f"{name}: {arg} must be an integer array, got {x.dtype}{where_am_i()}")
    return x


def unravel_index(indices, shape):
    """The tuple of coordinate arrays of flat `indices` into an array of `shape`, row-major
    (numpy.unravel_index).

    indices: ints of any shape; each result has its shape and dtype. Concrete indices out of
    [0, prod(shape)) raise ValueError, as NumPy; traced ones are clipped (negative ones count
    from the end), as jax.numpy. Raises TypeError for non-integer indices.
    """
    idx = _int_array("unravel_index", "indices", indices)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    dims = tuple(_int("unravel_index", "shape", d) for d in shape)
    total = math.prod(dims)
    c = _concrete(idx)
    if c is not None and c.size and (c.min() < 0 or c.max() >= total):
        bad = c.min() if c.min() < 0 else c.max()
        raise ValueError(f"unravel_index: index {bad} is out of bounds for array with size "
                         f"{total}{where_am_i()}")
    if total == 0 or not dims:
        return tuple(_zeros(idx) for _ in dims)
    idx = lax.clamp(_filled(idx.shape, -total, idx.dtype), idx,
                    _filled(idx.shape, total - 1, idx.dtype))
    idx = jnp.where(lax.lt(idx, _zeros(idx)), lax.add(idx, _full(idx, total)), idx)
    out = []
    for d in reversed(dims):
        out.append(lax.rem(idx, _full(idx, d)))
        idx = lax.div(idx, _full(idx, d))
    return tuple(reversed(out))


def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    """The flat indices of coordinate arrays into an array of shape `dims`
    (numpy.ravel_multi_index).

    multi_index: one int array per dimension (broadcast together); the result has their
    broadcast shape and promoted int dtype. mode (one, or one per dimension): "raise" (needs
    concrete coordinates; ValueError when one is out of range), "clip" or "wrap". order "C"
    (row-major) or "F". Raises ValueError for the wrong number of arrays or an unknown
    mode/order, TypeError for non-integer coordinates, ConcretizationTypeError for mode="raise"
    with traced coordinates (use "clip" or "wrap" under jit, as jax.numpy).
    """
    dims = tuple(_int("ravel_multi_index", "dims", d) for d in dims)
    arrs = [_int_array("ravel_multi_index", f"multi_index[{i}]", v)
            for i, v in enumerate(multi_index)]
    if len(arrs) != len(dims):
        raise ValueError(f"ravel_multi_index: got {len(arrs)} coordinate arrays for "
                         f"{len(dims)} dimensions {dims}{where_am_i()}")
    modes = (mode,) * len(dims) if isinstance(mode, str) else tuple(mode)
    if len(modes) != len(dims) or any(md not in ("raise", "clip", "wrap") for md in modes):
        raise ValueError(f"ravel_multi_index: mode must be 'raise', 'clip' or 'wrap' (or one "
                         f"per dimension), got {mode!r}{where_am_i()}")
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: order must be 'C' or 'F', got {order!r}"
                         f"{where_am_i()}")
    if not arrs:
        return asarray(0)
    arrs = promote("ravel_multi_index", *arrs)
    fixed = []
    for i, (v, d, md) in enumerate(zip(arrs, dims, modes, strict=True)):
        if md == "raise":
            c = _concrete(v)
            if c is None:
                raise ConcretizationTypeError(
                    f"ravel_multi_index: mode='raise' needs concrete coordinates, but "
                    f"multi_index[{i}] is traced; use mode='clip' or mode='wrap' under jit"
                    f"{where_am_i()}")
            if c.size and (c.min() < 0 or c.max() >= d):
                raise ValueError(f"ravel_multi_index: invalid entry in coordinates array "
                                 f"{i} (dimension of size {d}){where_am_i()}")
        elif md == "clip":
            v = lax.clamp(_zeros(v), v, _full(v, builtins.max(d - 1, 0)))
        else:
            v = jnp.mod(v, d)
        fixed.append(v)
    order_dims = range(len(dims)) if order == "C" else range(len(dims) - 1, -1, -1)
    out, stride = None, 1
    for i in reversed(list(order_dims)):
        term = lax.mul(fixed[i], _full(fixed[i], stride))
        out = term if out is None else lax.add(out, term)
        stride *= dims[i]
    return out


def fill_diagonal(a, val, wrap=False, *, inplace=False):
    """a with its main diagonal set to val, as a new array (jax.numpy.fill_diagonal's
    functional form of numpy.fill_diagonal).

    a: at least 2-d (all dimensions equal beyond 2-d); val: a scalar or array whose flattened
    values repeat along the diagonal, cast to a's dtype. wrap: for tall 2-d arrays, continue the
    diagonal below every N+1 rows, as NumPy. Same shape and dtype as a; differentiable in a
    and val. Raises NotImplementedError for inplace=True (nova arrays are immutable),
    ValueError for a of fewer than 2 or unequal dimensions.
    """
    if inplace:
        raise NotImplementedError("fill_diagonal: nova arrays are immutable; pass inplace=False "
                                  f"and use the returned array{where_am_i()}")
    x = asarray(a)
    if x.ndim < 2:
        raise ValueError(f"fill_diagonal: array must be at least 2-d, got shape {x.shape}"
                         f"{where_am_i()}")
    if x.ndim == 2:
        step = x.shape[1] + 1
        end = x.size if wrap else x.shape[1] * x.shape[1]
    else:
        if len(set(x.shape)) != 1:
            raise ValueError(f"fill_diagonal: all dimensions of input must be of equal length, "
                             f"got shape {x.shape}{where_am_i()}")
        step = 1 + int(np.cumprod(x.shape[:-1]).sum())
        end = x.size
    idx = np.arange(0, builtins.min(end, x.size), step)
    v = jnp.ravel(asarray(val, x.dtype))
    if idx.size == 0 or v.size == 0:
        return x
    vals = jnp.take(v, np.arange(idx.size) % v.size) if v.size != 1 else v[0]
    return lax.reshape(jnp.ravel(x).at[idx].set(vals), x.shape)


def _nonzero_size(name, mask, size):
    if size is not None:
        size = _int(name, "size", size)
        if size < 0:
            raise ValueError(f"{name}: size must be non-negative, got {size}{where_am_i()}")
        return size
    c = _concrete(mask)
    if c is None:
        raise ConcretizationTypeError(
            f"{name}: the number of nonzero elements of a traced array is not known inside jit "
            f"or vmap; pass a static `size=` argument (and optionally `fill_value=`), as "
            f"jax.numpy.{name}{where_am_i()}")
    return int(c.sum())


def nonzero(a, *, size=None, fill_value=None):
    """The indices of a's nonzero elements, one int32 array per dimension, in row-major order
    (numpy.nonzero, with jax.numpy's `size` and `fill_value`).

    size: the static length of each result (the first `size` hits; missing ones take
    fill_value, default 0; a scalar or one value per dimension). Without size the count is
    taken from concrete values. Raises ValueError for a 0-d array (as NumPy 2), a negative size
    or a fill_value tuple of the wrong length, ConcretizationTypeError for traced a without size.
    """
    x = asarray(a)
    if x.ndim == 0:
        raise ValueError(f"nonzero: calling nonzero on 0-d arrays is not allowed; use "
                         f"nonzero(atleast_1d(x)){where_am_i()}")
    mask = jnp.ravel(x if x.dtype == dtypes.bool_ else lax.ne(x, _zeros(x)))
    size = _nonzero_size("nonzero", mask, size)
    fills = fill_value if isinstance(fill_value, tuple | list) else (fill_value,) * x.ndim
    if len(fills) != x.ndim:
        raise ValueError(f"nonzero: fill_value must be a scalar or have {x.ndim} entries, got "
                         f"{len(fills)}{where_am_i()}")
    i32 = dtypes.int32
    n = mask.size
    if n:
        order = jnp.argsort(lax.bitwise_not(mask))  # stable: the hits first, in order
        flat = order[:size] if size <= n else jnp.concatenate(
            [order, _filled((size - n,), 0, i32)])
        valid = lax.lt(lax.iota(i32, (size,), 0),
                       broadcast_to(jnp.sum(mask, dtype=i32), (size,)))
    else:
        flat = _filled((size,), 0, i32)
        valid = _filled((size,), False, dtypes.bool_)
    out, stride = [], n
    for d, fill in zip(x.shape, fills, strict=True):
        stride //= builtins.max(d, 1)
        coord = lax.rem(lax.div(flat, _full(flat, builtins.max(stride, 1))),
                        _full(flat, builtins.max(d, 1)))
        fv = _filled((size,), 0 if fill is None else fill, i32)
        out.append(lax.select(valid, coord, fv))
    return tuple(out)


def flatnonzero(a, *, size=None, fill_value=None):
    """The int32 indices of the nonzero elements of ravel(a) (numpy.flatnonzero); size and
    fill_value as nonzero."""
    return nonzero(jnp.ravel(asarray(a)), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    """The (N, a.ndim) int32 indices of a's nonzero elements, one row each (numpy.argwhere);
    size and fill_value as nonzero (a 0-d a gives shape (N, 0))."""
    x = asarray(a)
    out = jnp.stack(nonzero(jnp.atleast_1d(x), size=size, fill_value=fill_value), axis=1)
    if x.ndim == 0:
        return lax.reshape(out[:, :0], (out.shape[0], 0))
    return out
