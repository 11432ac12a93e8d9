"""The rest of NumPy's and the array API's array functions in nova.numpy, written over existing
nova.numpy functions (jit, grad and vmap work unchanged):

- the array API's names: concat, permute_dims, unstack, cumulative_sum, cumulative_prod
  (include_initial), matrix_transpose, vecdot, matvec, vecmat;
- shape helpers: atleast_3d, rollaxis, block, ptp, copy;
- functional application: apply_along_axis, apply_over_axes (over nova.vmap), piecewise,
  fromfunction;
- functional updates: put, put_along_axis, place (arrays are immutable: inplace=False);
- index construction: ix_, mgrid, ogrid, index_exp, s_, mask_indices;
- isscalar, iterable (the complex helpers real, imag, conj, ... are in complexfuncs.py);
- host I/O as jax.numpy's (NumPy's readers and writers, converted): save, savez, load,
  frombuffer, fromstring, fromiter, fromfile, from_dlpack, array_str, array_repr and the
  print options; save and savez write a path atomically (a temporary file, then os.replace);
- the modified Bessel function i0 (Abramowitz & Stegun 9.8.1 and 9.8.2 are not accurate to
  float64, so Cephes' Chebyshev expansions, Clenshaw's recurrence) and the Kaiser window.
"""

from __future__ import annotations

import builtins
import math
import operator

import numpy as np

# nova.numpy is only partly initialized while it imports this module; it is complete by the time
# any function here runs.
from nova import numpy_api as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.core.errors import ShapeError
from nova.numpy_impl.util import asarray, normalize_axis, where_am_i

__all__ = [
    "apply_along_axis",
    "apply_over_axes",
    "array_repr",
    "array_str",
    "atleast_3d",
    "block",
    "c_",
    "concat",
    "copy",
    "cumulative_prod",
    "cumulative_sum",
    "diagflat",
    "dsplit",
    "einsum_path",
    "from_dlpack",
    "frombuffer",
    "fromfile",
    "fromfunction",
    "fromiter",
    "fromstring",
    "get_printoptions",
    "i0",
    "index_exp",
    "isscalar",
    "iterable",
    "ix_",
    "kaiser",
    "load",
    "mask_indices",
    "matrix_transpose",
    "matvec",
    "mgrid",
    "ogrid",
    "packbits",
    "permute_dims",
    "piecewise",
    "place",
    "printoptions",
    "ptp",
    "put",
    "put_along_axis",
    "r_",
    "rollaxis",
    "s_",
    "save",
    "savez",
    "set_printoptions",
    "unpackbits",
    "unstack",
    "vecdot",
    "vecmat",
]


# --- the array API's names ------------------------------------------------------------------


def concat(arrays, /, *, axis=0):
    """The array API's concatenate: arrays joined along `axis` (None flattens them first)."""
    if axis is None:
        return jnp.concatenate([jnp.ravel(asarray(a)) for a in arrays])
    return jnp.concatenate(arrays, axis=axis)


def permute_dims(a, /, axes):
    """The array API's transpose: a's axes in the order `axes` (a permutation)."""
    return jnp.transpose(a, axes)


def unstack(x, /, *, axis=0):
    """The arrays of x along `axis`, as a tuple (the array API's unstack: stack's inverse).
    Raises ValueError for a 0-d x or an out-of-range axis."""
    a = asarray(x)
    if a.ndim == 0:
        raise ValueError(f"unstack: x must have at least one dimension{where_am_i()}")
    ax = normalize_axis(axis, a.ndim)
    return tuple(jnp.take(a, i, axis=ax) for i in range(a.shape[ax]))


def _cumulative(name, op, identity, x, axis, dtype, include_initial):
    a = asarray(x)
    if axis is None:
        if a.ndim > 1:
            raise ValueError(f"{name}: axis must be given for an array of {a.ndim} dimensions"
                             f"{where_am_i()}")
        a = jnp.ravel(a)
        axis = 0
    if a.ndim == 0:
        raise ValueError(f"{name}: x must have at least one dimension{where_am_i()}")
    ax = normalize_axis(axis, a.ndim)
    if dtype is None and name == "cumulative_sum":
        # jnp.cumulative_sum's rule is sum's, not cumsum's (small ints widen); its
        # cumulative_prod keeps cumprod's.
        from nova.numpy_impl.reductions import _sum_dtype

        dtype = _sum_dtype(a, None)
    out = op(a, axis=ax, dtype=dtype)
    if include_initial:
        shape = list(out.shape)
        shape[ax] = 1
        out = jnp.concatenate([jnp.full(shape, identity, out.dtype), out], axis=ax)
    return out


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running sums along `axis` (the array API's cumulative_sum; cumsum with
    include_initial=True prepending the 0). axis may be omitted for 1-d x only (ValueError
    otherwise). The dtype is sum's (as jnp's: int8 gives int32, uint8 uint32), or `dtype`."""
    return _cumulative("cumulative_sum", jnp.cumsum, 0, x, axis, dtype, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running products along `axis` (the array API's cumulative_prod; include_initial=True
    prepends the 1). axis may be omitted for 1-d x only (ValueError otherwise). The dtype
    is cumprod's (as jnp's: int8 stays int8, bool gives int32), or `dtype`."""
    return _cumulative("cumulative_prod", jnp.cumprod, 1, x, axis, dtype, include_initial)


def matrix_transpose(x, /):
    """x with its last two axes swapped (the array API's matrix_transpose); ValueError for
    fewer than 2 dimensions."""
    from nova.numpy_impl.norms import matrix_transpose as mt

    return mt(x)


def vecdot(x1, x2, /, *, axis=-1):
    """The dot product of vectors along `axis`, sum(conj(x1) * x2), batch dimensions broadcast
    (the array API's vecdot; a complex x1 is conjugated)."""
    from nova.numpy_impl.norms import vecdot as vd

    return vd(x1, x2, axis=axis)


def matvec(x1, x2, /):
    """Matrix-vector products x1 (..., m, n) @ x2 (..., n) -> (..., m), batch dimensions
    broadcast (numpy.matvec). Raises ShapeError for mismatched sizes or too few dimensions."""
    a, v = asarray(x1), asarray(x2)
    if a.ndim < 2 or v.ndim < 1 or a.shape[-1] != v.shape[-1]:
        raise ShapeError(f"matvec: x1 {a.shape} must be (..., m, n) and x2 {v.shape} (..., n)"
                         f"{where_am_i()}")
    return jnp.matmul(a, v[..., None])[..., 0]


def vecmat(x1, x2, /):
    """Vector-matrix products conj(x1) (..., m) @ x2 (..., m, n) -> (..., n), batch dimensions
    broadcast (numpy.vecmat: a complex x1 is conjugated). Raises ShapeError for mismatched
    sizes."""
    v, a = asarray(x1), asarray(x2)
    if a.ndim < 2 or v.ndim < 1 or a.shape[-2] != v.shape[-1]:
        raise ShapeError(f"vecmat: x1 {v.shape} must be (..., m) and x2 {a.shape} (..., m, n)"
                         f"{where_am_i()}")
    return jnp.matmul(jnp.conj(v)[..., None, :], a)[..., 0, :]


# --- shape helpers --------------------------------------------------------------------------


def atleast_3d(*arys):
    """Each input with at least 3 dimensions (numpy.atleast_3d): (n,) -> (1, n, 1), (m, n) ->
    (m, n, 1), 0-d -> (1, 1, 1). One input gives one array, several a list."""
    out = []
    for x in arys:
        a = asarray(x)
        if a.ndim == 0:
            a = jnp.reshape(a, (1, 1, 1))
        elif a.ndim == 1:
            a = a[None, :, None]
        elif a.ndim == 2:
            a = a[:, :, None]
        out.append(a)
    return out[0] if len(out) == 1 else out


def rollaxis(a, axis, start=0):
    """a with `axis` moved to before position `start` (numpy.rollaxis; prefer moveaxis)."""
    x = asarray(a)
    n = x.ndim
    ax = normalize_axis(axis, n)
    st = operator.index(start)
    if st < 0:
        st += n
    if not 0 <= st <= n:
        raise ValueError(f"rollaxis: start {start} is out of range for {n} dimensions"
                         f"{where_am_i()}")
    if ax < st:
        st -= 1
    return jnp.moveaxis(x, ax, st)


def _block_depth(arrays, path=()):
    if isinstance(arrays, tuple):
        raise TypeError(f"block: arrays is a tuple at {list(path)}; only lists may be nested"
                        f"{where_am_i()}")
    if isinstance(arrays, list):
        if not arrays:
            raise ValueError(f"block: an empty list at {list(path)}{where_am_i()}")
        depths = {_block_depth(x, (*path, i)) for i, x in enumerate(arrays)}
        if len(depths) != 1:
            raise ValueError(f"block: list depths are mismatched at {list(path)}{where_am_i()}")
        return 1 + depths.pop()
    return 0


def block(arrays):
    """An array assembled from nested lists of blocks (numpy.block): the innermost lists are
    joined along the last axis, the next ones along the second to last, and so on; every
    block is first given at least as many dimensions as the nesting depth (leading 1s).
    Raises ValueError for mismatched depths or empty lists, TypeError for tuples."""
    depth = _block_depth(arrays)
    leaves = []

    def collect(x):
        if isinstance(x, list):
            for y in x:
                collect(y)
        else:
            leaves.append(asarray(x))

    collect(arrays)
    ndim = builtins.max([depth, *(a.ndim for a in leaves)])

    def rec(x, level):
        if not isinstance(x, list):
            a = asarray(x)
            return jnp.reshape(a, (1,) * (ndim - a.ndim) + a.shape)
        parts = [rec(y, level + 1) for y in x]
        return jnp.concatenate(parts, axis=-(depth - level))

    return rec(arrays, 0)


def ptp(a, axis=None, out=None, keepdims=False):
    """max - min along axis (numpy.ptp: "peak to peak"); out must be None."""
    if out is not None:
        raise NotImplementedError(f"ptp: out= is not supported (arrays are immutable){where_am_i()}")
    x = asarray(a)
    return jnp.max(x, axis=axis, keepdims=keepdims) - jnp.min(x, axis=axis, keepdims=keepdims)


def copy(a, order=None):
    """A copy of a (numpy.copy): a new Array with a's values (Nova's arrays are immutable, so
    this matters only for NumPy inputs taken by value)."""
    from nova.ops import lax

    return lax.copy(asarray(a))


def diagflat(v, k=0):
    """A 2-d array with the flattened v on diagonal k (numpy.diagflat)."""
    return jnp.diag(jnp.ravel(asarray(v)), k)


def dsplit(ary, indices_or_sections):
    """split along the third axis (numpy.dsplit); ValueError for fewer than 3 dimensions."""
    a = asarray(ary)
    if a.ndim < 3:
        raise ValueError(f"dsplit: ary must have at least 3 dimensions, got shape {a.shape}"
                         f"{where_am_i()}")
    return jnp.split(a, indices_or_sections, axis=2)


def einsum_path(subscripts, *operands, optimize="greedy", einsum_call=False):
    """(path, report) of numpy.einsum_path for operands of these shapes (a host computation
    on the shapes alone: Nova's own einsum contracts pairwise in its own order)."""
    shaped = [np.broadcast_to(np.zeros((), np.float32), np.shape(asarray(o))) for o in operands]
    return np.einsum_path(subscripts, *shaped, optimize=optimize)


def _bits_axis(a, axis):
    if axis is None:
        return jnp.ravel(a), 0
    return a, normalize_axis(axis, a.ndim)


def packbits(a, /, axis=None, bitorder="big"):
    """The elements of a (nonzero as 1) packed 8 to a uint8 along axis (numpy.packbits; the
    flattened a with axis None), the last byte zero-padded; bitorder 'big' puts the first
    element in the most significant bit. Raises TypeError for float input, ValueError for a
    bad bitorder."""
    x = asarray(a)
    if not (dtypes.is_int(x.dtype) or x.dtype == dtypes.bool_):
        raise TypeError(f"packbits: a must be bool or integer, got dtype {x.dtype}{where_am_i()}")
    if bitorder not in ("big", "little"):
        raise ValueError(f"packbits: bitorder must be 'big' or 'little', got {bitorder!r}"
                         f"{where_am_i()}")
    x, ax = _bits_axis(x, axis)
    bits = (x != 0).astype(dtypes.int32)
    n = bits.shape[ax]
    pad = (-n) % 8
    if pad:
        widths = [(0, 0)] * bits.ndim
        widths[ax] = (0, pad)
        bits = jnp.pad(bits, widths)
    bits = jnp.moveaxis(bits, ax, -1)
    bits = jnp.reshape(bits, (*bits.shape[:-1], (n + pad) // 8, 8))
    weights = 2 ** np.arange(7, -1, -1) if bitorder == "big" else 2 ** np.arange(8)
    packed = jnp.sum(bits * jnp.asarray(weights.astype(np.int32)), axis=-1)
    return jnp.moveaxis(packed.astype(dtypes.uint8), -1, ax)


def unpackbits(a, /, axis=None, count=None, bitorder="big"):
    """The bits of a uint8 array as 0/1 uint8 values along axis (numpy.unpackbits; flattened
    with axis None); count keeps the first `count` bits (negative: drops the last -count),
    a count beyond the bits pads with zeros. Raises TypeError for non-uint8 input."""
    x = asarray(a)
    if x.dtype != dtypes.uint8:
        raise TypeError(f"unpackbits: a must be uint8, got dtype {x.dtype}{where_am_i()}")
    if bitorder not in ("big", "little"):
        raise ValueError(f"unpackbits: bitorder must be 'big' or 'little', got {bitorder!r}"
                         f"{where_am_i()}")
    x, ax = _bits_axis(x, axis)
    shifts = np.arange(7, -1, -1) if bitorder == "big" else np.arange(8)
    xi = jnp.moveaxis(x, ax, -1).astype(dtypes.int32)
    bits = (xi[..., None] >> jnp.asarray(shifts.astype(np.int32))) & 1
    bits = jnp.reshape(bits, (*bits.shape[:-2], bits.shape[-2] * 8)).astype(dtypes.uint8)
    if count is not None:
        total = bits.shape[-1]
        c = operator.index(count)
        if -c > total:
            raise ValueError(f"unpackbits: count {c} removes more than the {total} bits"
                             f"{where_am_i()}")
        keep = c if c >= 0 else total + c
        if keep <= total:
            bits = bits[..., :keep]
        else:
            bits = jnp.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, keep - total)])
    return jnp.moveaxis(bits, -1, ax)


class _AxisConcatenator:
    """r_ / c_: index with arrays, scalars and slices (start:stop:step, or a complex step for
    that many points, stop included) to concatenate them along an axis. A leading string sets
    "axis", "axis,ndmin" or "axis,ndmin,trans1d" as numpy.r_'s; c_ is r_['-1,2,0', ...].
    The matrix directives 'r' and 'c' are not supported (NotImplementedError)."""

    def __init__(self, axis, ndmin, trans1d, name):
        self.axis, self.ndmin, self.trans1d, self.name = axis, ndmin, trans1d, name

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        if items and isinstance(items[0], str):
            spec, items = items[0], items[1:]
            if spec in ("r", "c"):
                raise NotImplementedError(f"{self.name}: the matrix directives 'r' and 'c' "
                                          f"are not supported")
            parts = [int(p) for p in spec.split(",")]
            axis = parts[0]
            if len(parts) > 1:
                ndmin = parts[1]
            if len(parts) > 2:
                trans1d = parts[2]
        arrays = []
        for it in items:
            if isinstance(it, slice):
                start = 0 if it.start is None else it.start
                step = 1 if it.step is None else it.step
                if isinstance(step, complex):
                    vals = np.linspace(start, it.stop, int(abs(step)))
                else:
                    vals = np.arange(start, it.stop, step)
                dt = dtypes.default_float if vals.dtype.kind == "f" else dtypes.default_int
                x = jnp.asarray(vals.astype(dt))
            else:
                x = asarray(it)
            nd = x.ndim
            if nd < ndmin:
                x = jnp.reshape(x, (1,) * (ndmin - nd) + x.shape)
                if trans1d != -1:
                    k2 = ndmin - nd
                    k1 = trans1d if trans1d >= 0 else trans1d + k2 + 1
                    axes = list(range(ndmin))
                    x = jnp.transpose(x, axes[:k1] + axes[k2:] + axes[k1:k2])
            arrays.append(x)
        if not arrays:
            return jnp.zeros((0,), dtypes.default_float)
        return jnp.concatenate(arrays, axis=axis)


r_ = _AxisConcatenator(0, 1, -1, "r_")
c_ = _AxisConcatenator(-1, 2, 0, "c_")


# --- functional application -----------------------------------------------------------------


def apply_along_axis(func1d, axis: int, arr, *args, **kwargs):
    """func1d applied to every 1-d slice of arr along `axis` (numpy.apply_along_axis), by
    nova.vmap over the other axes (func1d is traced once). The result's shape is arr's with
    `axis` replaced by func1d's output shape."""
    import nova

    a = asarray(arr)
    ax = normalize_axis(axis, a.ndim)
    moved = jnp.moveaxis(a, ax, -1)

    def f(v):
        return func1d(v, *args, **kwargs)

    for _ in range(a.ndim - 1):
        f = nova.vmap(f)
    out = asarray(f(moved))
    lead = a.ndim - 1
    # out: (other axes..., func1d's dims...): put func1d's dims at `axis`
    k = out.ndim - lead
    perm = list(range(ax)) + list(range(lead, lead + k)) + list(range(ax, lead))
    return jnp.transpose(out, perm)


def apply_over_axes(func, a, axes):
    """func(a, axis) applied for each axis in turn (numpy.apply_over_axes); a result with one
    dimension fewer gets it back (expand_dims), so the result keeps a's number of dimensions.
    Raises ValueError when func changes the number of dimensions otherwise."""
    x = asarray(a)
    for ax in np.atleast_1d(axes).tolist():
        axn = normalize_axis(ax, x.ndim)
        res = asarray(func(x, axn))
        if res.ndim == x.ndim:
            x = res
        elif res.ndim == x.ndim - 1:
            x = jnp.expand_dims(res, axn)
        else:
            raise ValueError(f"apply_over_axes: func must return an array of {x.ndim} or "
                             f"{x.ndim - 1} dimensions, got {res.ndim}{where_am_i()}")
    return x


def piecewise(x, condlist, funclist, *args, **kw):
    """A piecewise function of x (numpy.piecewise): where condlist[k] is True the value is
    funclist[k](x) (or the scalar funclist[k]); a funclist one longer than condlist gives the
    value where no condition holds (else 0). A later condition wins where several hold.
    Every function is evaluated on all of x (selection by where), so jit and grad work.
    Raises ValueError when the lengths do not fit."""
    a = asarray(x)
    # NumPy's rule: a scalar, or a sequence whose first entry is not itself a sequence or an
    # array (for x with dimensions), is one condition
    first = condlist[0] if isinstance(condlist, list | tuple) and condlist else None
    if np.isscalar(condlist) or isinstance(condlist, Array | np.ndarray) and \
            np.ndim(condlist) == a.ndim or (isinstance(condlist, list | tuple) and a.ndim != 0
                                            and not isinstance(first, list | tuple | np.ndarray
                                                               | Array)):
        condlist = [condlist]
    conds = [jnp.asarray(c, dtype=dtypes.bool_) for c in condlist]
    n = len(conds)
    if len(funclist) not in (n, n + 1):
        raise ValueError(f"piecewise: funclist has {len(funclist)} entries for {n} conditions; "
                         f"expected {n} or {n + 1}{where_am_i()}")

    def value(f):
        v = f(a, *args, **kw) if callable(f) else f
        return jnp.broadcast_to(jnp.asarray(v, dtype=a.dtype), a.shape)

    out = value(funclist[n]) if len(funclist) == n + 1 else jnp.zeros(a.shape, a.dtype)
    for c, f in zip(conds, funclist[:n], strict=True):
        out = jnp.where(jnp.broadcast_to(c, a.shape), value(f), out)
    return out


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """function(*indices) with one index array per axis of `shape`, each of `dtype`
    (numpy.fromfunction): function is called once, on whole arrays."""
    shape = tuple(operator.index(s) for s in shape)
    grids = jnp.indices(shape, dtype=dtype)
    return function(*[grids[i] for i in range(len(shape))], **kwargs)


# --- functional updates ---------------------------------------------------------------------


def _no_inplace(name, inplace):
    if inplace:
        raise ValueError(f"{name}: inplace=True is not supported (arrays are immutable); use "
                         f"the returned array{where_am_i()}")


def put(a, ind, v, mode=None, *, inplace=False):
    """a with the values v at the flat indices ind (numpy.put, functional as jax.numpy's:
    inplace must be False). v repeats cyclically to ind's length; mode 'raise' (default, for
    concrete indices), 'wrap' or 'clip' for out-of-range indices."""
    _no_inplace("put", inplace)
    x = asarray(a)
    idx = jnp.ravel(jnp.asarray(ind))
    if not dtypes.is_int(idx.dtype):
        raise TypeError(f"put: ind must be integers, got dtype {idx.dtype}{where_am_i()}")
    vals = jnp.ravel(jnp.asarray(v, dtype=x.dtype))
    if idx.size == 0:
        return x
    if vals.size == 0:
        raise ValueError(f"put: v must not be empty when ind is not{where_am_i()}")
    if vals.size != idx.size:
        vals = jnp.take(vals, jnp.arange(idx.size) % vals.size)
    n = x.size
    mode = "raise" if mode is None else mode
    if mode == "wrap":
        idx = idx % n
    elif mode == "clip":
        idx = jnp.clip(idx, 0, n - 1)
    elif mode == "raise":
        from nova.numpy_impl.families_common import _concrete

        c = _concrete(idx)
        if c is not None and c.size and (c.min() < -n or c.max() >= n):
            raise IndexError(f"put: index {int(c.max() if c.max() >= n else c.min())} is out "
                             f"of bounds for size {n}{where_am_i()}")
        idx = jnp.where(idx < 0, idx + n, idx)
    else:
        raise ValueError(f"put: mode must be 'raise', 'wrap' or 'clip', got {mode!r}{where_am_i()}")
    return jnp.reshape(jnp.ravel(x).at[idx].set(vals), x.shape)


def put_along_axis(arr, indices, values, axis, inplace=False, mode=None):
    """arr with `values` written at `indices` along `axis` (numpy.put_along_axis, functional:
    inplace must be False): the inverse of take_along_axis. indices broadcast against arr
    but along axis; values broadcast to indices' shape. axis None works on the flattened arr."""
    _no_inplace("put_along_axis", inplace)
    x = asarray(arr)
    idx = jnp.asarray(indices)
    if axis is None:
        flat = jnp.ravel(x)
        return jnp.reshape(put(flat, idx, values, mode="wrap" if mode == "wrap" else None),
                           x.shape)
    ax = normalize_axis(axis, x.ndim)
    if idx.ndim != x.ndim:
        raise ShapeError(f"put_along_axis: indices must have arr's {x.ndim} dimensions, got "
                         f"shape {idx.shape}{where_am_i()}")
    shape = [builtins.max(i, s) if k != ax else i
             for k, (i, s) in enumerate(zip(idx.shape, x.shape, strict=True))]
    idx = jnp.broadcast_to(idx, shape)
    idx = jnp.where(idx < 0, idx + x.shape[ax], idx)
    vals = jnp.broadcast_to(jnp.asarray(values, dtype=x.dtype), shape)
    grids = list(jnp.indices(shape, sparse=True))
    grids[ax] = idx
    return x.at[tuple(grids)].set(vals)


def place(arr, mask, vals, *, inplace=False):
    """arr with its elements where mask is True replaced by vals in order, vals repeating
    (numpy.place, functional: inplace must be False). mask must be concrete (its True count
    decides the layout); raises ConcretizationTypeError under jit for a traced mask."""
    _no_inplace("place", inplace)
    x = asarray(arr)
    m = np.asarray(jnp.asarray(mask, dtype=dtypes.bool_))
    m = np.broadcast_to(m, x.shape)
    pos = np.flatnonzero(m)
    if pos.size == 0:
        return x
    v = jnp.ravel(jnp.asarray(vals, dtype=x.dtype))
    if v.size == 0:
        raise ValueError(f"place: vals must not be empty when mask has True values{where_am_i()}")
    picked = jnp.take(v, jnp.asarray((np.arange(pos.size) % v.size).astype(np.int32)))
    return jnp.reshape(jnp.ravel(x).at[jnp.asarray(pos.astype(np.int32))].set(picked), x.shape)


# --- index construction ---------------------------------------------------------------------


def ix_(*args):
    """Open-mesh index arrays from 1-d sequences (numpy.ix_): the k-th of n is reshaped to
    (1, ..., len, ..., 1) so that a[ix_(rows, cols)] selects a cross product. Boolean
    sequences become their True positions (concrete input). Raises ValueError for input that
    is not 1-d."""
    out = []
    n = len(args)
    for k, s in enumerate(args):
        a = jnp.asarray(s)
        if a.ndim != 1:
            raise ValueError(f"ix_: argument {k} must be 1-d, got shape {a.shape}{where_am_i()}")
        if a.dtype == dtypes.bool_:
            a = jnp.asarray(np.flatnonzero(np.asarray(a)).astype(np.int32))
        elif a.size == 0:
            a = a.astype(dtypes.int32)
        out.append(jnp.reshape(a, (1,) * k + (a.shape[0],) + (1,) * (n - k - 1)))
    return tuple(out)


class _Grid:
    """mgrid / ogrid: index with slices (start:stop:step; a complex step like 5j means that
    many points, stop included) to get dense (mgrid) or open (ogrid) coordinate arrays."""

    def __init__(self, sparse: bool, name: str):
        self.sparse = sparse
        self.name = name

    def __getitem__(self, key):
        single = isinstance(key, slice)
        keys = (key,) if single else tuple(key)
        axes = []
        for k in keys:
            if not isinstance(k, slice):
                raise TypeError(f"{self.name}: expected slices, got {type(k).__name__}")
            start = 0 if k.start is None else k.start
            step = 1 if k.step is None else k.step
            if isinstance(step, complex):
                num = int(abs(step))
                vals = np.linspace(start, k.stop, num)
            else:
                vals = np.arange(start, k.stop, step)
            axes.append(vals)
        floaty = any(v.dtype.kind == "f" for v in axes)
        dt = dtypes.default_float if floaty else dtypes.default_int
        axes = [jnp.asarray(v.astype(dt)) for v in axes]
        if single:
            return axes[0]
        grids = jnp.meshgrid(*axes, indexing="ij", sparse=self.sparse)
        return list(grids) if self.sparse else jnp.stack(grids)


mgrid = _Grid(False, "mgrid")
ogrid = _Grid(True, "ogrid")
index_exp = np.index_exp
s_ = np.s_


def mask_indices(n, mask_func, k=0, *, size=None):
    """The (rows, cols) indices where mask_func(ones((n, n)), k) is nonzero (numpy.mask_indices;
    e.g. mask_func=jnp.triu). n and k are static; size as nonzero's."""
    m = mask_func(jnp.ones((n, n), dtypes.int32), k)
    return jnp.nonzero(m, size=size) if size is not None else jnp.nonzero(m)


def isscalar(element, /):
    """True for Python and NumPy scalars and for 0-d arrays (jax.numpy.isscalar's rule, which
    counts 0-d Arrays); False for strings, sequences and arrays with dimensions."""
    if isinstance(element, Array):
        return element.ndim == 0
    if isinstance(element, str | bytes):
        return False
    return bool(np.isscalar(element)) or (isinstance(element, np.ndarray) and element.ndim == 0)


def iterable(y, /):
    """Whether y can be iterated (numpy.iterable); 0-d arrays cannot."""
    if isinstance(y, Array):
        return y.ndim > 0
    return bool(np.iterable(y))


# --- i0 and the Kaiser window ---------------------------------------------------------------

# Cephes' Chebyshev coefficients for exp(-x) I0(x): on [0, 8] in (x/2 - 2), on (8, inf) in
# (32/x - 2) with exp(-x) I0(x) sqrt(x) (Cody 1969; Cephes i0.c, public domain).
_I0_A = [
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
    -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
    1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
    -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
    1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
    -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
    1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1,
]
_I0_B = [
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
    3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
    2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
    8.04490411014108831608e-1,
]


def _chbevl(x, coeffs):
    # Clenshaw's recurrence for a Chebyshev series (Cephes' chbevl: sum of the first half
    # coefficient convention)
    b0 = jnp.zeros_like(x)
    b1 = jnp.zeros_like(x)
    b2 = b1
    for c in coeffs:
        b2 = b1
        b1 = b0
        b0 = x * b1 - b2 + c
    return 0.5 * (b0 - b2)


def _i0e(m):
    # exp(-m) I0(m) for m = |x| >= 0
    small = m <= 8.0
    ms = jnp.where(small, m, jnp.full_like(m, 8.0))
    ml = jnp.where(small, jnp.full_like(m, 16.0), m)
    lo = _chbevl(ms * 0.5 - 2.0, _I0_A)
    hi = _chbevl(32.0 / ml - 2.0, _I0_B) / jnp.sqrt(ml)
    return jnp.where(small, lo, hi)


def i0(x):
    """The modified Bessel function of the first kind, order 0, elementwise (numpy.i0).

    Integer inputs become float32. Cephes' Chebyshev expansions of exp(-|x|) I0(x) on [0, 8]
    and (8, inf) (Clenshaw's recurrence), accurate to ~1e-15 relative in float64; I0 is even
    and overflows to inf beyond |x| ~ 713 (float64). Differentiable (I0' = I1, here through
    the expansions). Raises ValueError for a complex x.
    """
    a = asarray(x)
    if dtypes.is_complex(a.dtype):
        raise ValueError(f"i0: x must be real, got shape {a.shape} dtype {a.dtype} (as "
                         f"jax.numpy){where_am_i()}")
    if not dtypes.is_float(a.dtype):
        a = a.astype(dtypes.default_float)
    m = jnp.abs(a)
    return jnp.exp(m) * _i0e(m)


def kaiser(M, beta):
    """The Kaiser window of M points (numpy.kaiser): I0(beta sqrt(1 - (2n/(M-1) - 1)^2)) /
    I0(beta), float32 as jax.numpy's windows. M <= 0 gives an empty array, M == 1 [1.]."""
    M = operator.index(M)
    if M <= 0:
        return jnp.zeros((0,), dtypes.float32)
    if M == 1:
        return jnp.ones((1,), dtypes.float32)
    n = jnp.arange(M, dtype=dtypes.float32)
    alpha = (M - 1) / 2.0
    b = jnp.asarray(beta, dtype=dtypes.float32)
    r = (n - alpha) / alpha
    arg = jnp.abs(b * jnp.sqrt(jnp.clip(1 - r * r, 0, None)))
    bb = jnp.abs(b)
    # i0(arg) / i0(beta) as a ratio of exponentially scaled values: no overflow for large beta
    return _i0e(arg) / _i0e(bb) * jnp.exp(arg - bb)


# --- host I/O -------------------------------------------------------------------------------


def _host(a):
    return np.asarray(asarray(a)) if isinstance(a, Array) else a


def _atomic(path, write):
    """Writes through `write(fileobj)` to a temporary file beside `path`, then renames it over
    `path` (os.replace): a reader never sees a half-written file, and a failure leaves any old
    file in place."""
    import os
    import tempfile

    d = os.path.dirname(os.path.abspath(path)) or "."
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".nova-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _npy_path(file, suffix):
    import os

    if isinstance(file, str | os.PathLike):
        p = os.fspath(file)
        return p if p.endswith(suffix) else p + suffix
    return None


def save(file, arr, allow_pickle=True, fix_imports=True):
    """Writes arr in NumPy's .npy format (numpy.save; a path gets ".npy" appended as NumPy's
    does, and is written atomically); file may also be an open binary file."""
    host = _host(arr)
    path = _npy_path(file, ".npy")
    if path is None:
        np.save(file, host, allow_pickle=allow_pickle)
        return
    _atomic(path, lambda f: np.save(f, host, allow_pickle=allow_pickle))


def savez(file, *args, **kwds):
    """Writes several arrays into one uncompressed .npz archive (numpy.savez; atomic for a
    path, ".npz" appended)."""
    hargs = [_host(a) for a in args]
    hkw = {k: _host(v) for k, v in kwds.items()}
    path = _npy_path(file, ".npz")
    if path is None:
        np.savez(file, *hargs, **hkw)
        return
    _atomic(path, lambda f: np.savez(f, *hargs, **hkw))


def load(file, *args, **kwargs):
    """numpy.load, with a .npy result as a nova Array (jax.numpy.load); an .npz archive comes
    back as NumPy's lazy NpzFile (index it and pass the arrays to nova.numpy.asarray)."""
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray) and out.dtype == np.dtype("V2"):
        # .npy stores bfloat16 (ml_dtypes) as 2-byte voids: read them back as bfloat16, as JAX
        out = out.view(dtypes.bfloat16)
    return asarray(out) if isinstance(out, np.ndarray) and out.dtype != object else out


def frombuffer(buffer, dtype=float, count=-1, offset=0):
    """A 1-d Array interpreting a bytes-like buffer (numpy.frombuffer), copied to Nova."""
    return asarray(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string, dtype=float, count=-1, *, sep):
    """A 1-d Array parsed from text with separator `sep` (numpy.fromstring's text mode)."""
    return asarray(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def fromiter(iterable, dtype, count=-1):
    """A 1-d Array from an iterable of scalars (numpy.fromiter)."""
    return asarray(np.fromiter(iterable, dtype=dtype, count=count))


def fromfile(file, dtype=float, count=-1, sep="", offset=0):
    """A 1-d Array read from a file of raw bytes or text (numpy.fromfile)."""
    return asarray(np.fromfile(file, dtype=dtype, count=count, sep=sep, offset=offset))


def from_dlpack(x, /, *, device=None, copy=None):
    """An Array from any object with __dlpack__ (a NumPy array, a torch CPU tensor), through
    numpy.from_dlpack (copied onto Nova's host buffers)."""
    return asarray(np.array(np.from_dlpack(x), copy=True))


def array_str(a, max_line_width=None, precision=None, suppress_small=None):
    """The string of a's values (numpy.array_str)."""
    return np.array_str(np.asarray(asarray(a)), max_line_width, precision, suppress_small)


def array_repr(arr, max_line_width=None, precision=None, suppress_small=None):
    """NumPy's repr of arr's values (numpy.array_repr)."""
    return np.array_repr(np.asarray(asarray(arr)), max_line_width, precision, suppress_small)


get_printoptions = np.get_printoptions
set_printoptions = np.set_printoptions
printoptions = np.printoptions
