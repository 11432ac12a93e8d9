"""The rest of jax.lax, written over Nova's primitives and nova.numpy (no primitive of its own).

- Scatters in JAX's ScatterDimensionNumbers: scatter_mul, scatter_min, scatter_max,
  scatter_sub, scatter_apply, and scatter / scatter_add taking either that or Nova's point form
  (nova/ops/indexing.py). A JAX scatter is rewritten as a point scatter: every element of
  `updates` gets the full operand coordinate it lands on (window start + window offset), and a
  window that does not fit is dropped as a whole (mode "fill") or moved into range ("clip").
- Convolution helpers over conv_general_dilated: conv_transpose, conv_with_general_padding,
  conv_general_dilated_patches (strided slices, no GEMM, so patches are exact),
  conv_general_dilated_local (unshared kernels: patches times a per-position kernel), the shape
  tuples and conv_general_permutations / conv_dimension_numbers in JAX's convention (spatial
  axes in the order of the kernel's layout string).
- Bit-level functions without bitcast: clz (binary search with shifts), mulhi (a wider product,
  or 32-bit limbs for int64: Hacker's Delight 2nd ed. sec. 8-2), nextafter, reduce_precision
  (exact power-of-two scaling and round-half-even).
- approx_max_k / approx_min_k (exact top-k, which every recall_target permits), ragged_dot,
  custom_linear_solve and custom_root (implicit-function derivatives through nova.custom_vjp),
  platform_dependent, composite, and small helpers (index_take, tile, stack, unstack,
  broadcast_to_rank, broadcast_like, empty).

Like composite.py, it imports nova.numpy and the transforms lazily (they sit above ops/).
"""

from __future__ import annotations

import enum
import functools
import math
import operator
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.ops import elementwise as ew
from nova.ops import indexing
from nova.ops import slicing as sl
from nova.ops import structural as st
from nova.ops.composite import _floats, _jnp
from nova.ops.contraction import dot_general

# --- scatter in JAX's dimension numbers --------------------------------------------------------


class ScatterDimensionNumbers(NamedTuple):
    """jax.lax.ScatterDimensionNumbers: which axes of `updates` are window axes
    (update_window_dims, sorted), which operand axes have a window of size 1 that updates do not
    carry (inserted_window_dims), which operand axis each index coordinate addresses
    (scatter_dims_to_operand_dims), and the operand / index axes that are batch axes paired
    one to one (operand_batching_dims, scatter_indices_batching_dims)."""

    update_window_dims: Sequence[int]
    inserted_window_dims: Sequence[int]
    scatter_dims_to_operand_dims: Sequence[int]
    operand_batching_dims: Sequence[int] = ()
    scatter_indices_batching_dims: Sequence[int] = ()


class GatherScatterMode(enum.Enum):
    """Out-of-range index handling (jax.lax.GatherScatterMode): CLIP moves a window into range,
    FILL_OR_DROP drops a scatter window that does not fit, PROMISE_IN_BOUNDS promises none
    is out of range (Nova then drops, as FILL_OR_DROP)."""

    CLIP = "clip"
    FILL_OR_DROP = "fill"
    PROMISE_IN_BOUNDS = "promise_in_bounds"

    @staticmethod
    def from_any(mode) -> GatherScatterMode:
        """The mode from None (FILL_OR_DROP), a name ("clip", "fill", "drop",
        "promise_in_bounds") or a GatherScatterMode (Nova's or JAX's). Raises ValueError."""
        if mode is None:
            return GatherScatterMode.FILL_OR_DROP
        if isinstance(mode, GatherScatterMode):
            return mode
        name = getattr(mode, "name", None)  # jax.lax.GatherScatterMode
        if name in GatherScatterMode.__members__:
            return GatherScatterMode[name]
        names = {"clip": "CLIP", "fill": "FILL_OR_DROP", "drop": "FILL_OR_DROP",
                 "promise_in_bounds": "PROMISE_IN_BOUNDS"}
        if isinstance(mode, str) and mode in names:
            return GatherScatterMode[names[mode]]
        raise ValueError(f"unknown gather/scatter mode {mode!r}: use 'clip', 'fill', 'drop' or "
                         "'promise_in_bounds'")


def _is_scatter_dnums(d) -> bool:
    return hasattr(d, "update_window_dims") and hasattr(d, "scatter_dims_to_operand_dims")


def _dims(name: str, field: str, v, bound: int, ordered: bool = True) -> tuple[int, ...]:
    v = tuple(operator.index(i) for i in v)
    if len(set(v)) != len(v) or any(not 0 <= i < bound for i in v) or \
            (ordered and list(v) != sorted(v)):
        raise ValueError(f"{name}: dimension_numbers.{field} = {v} must be "
                         f"{'sorted, ' if ordered else ''}distinct and in [0, {bound})")
    return v


def _scatter_points(name: str, operand, indices, update_shape: tuple, dnums):
    """(coords, starts, window) for an `update_shape` array of updates under JAX's dimension
    numbers, checked as JAX checks them: coords[d] (of update_shape) is the operand coordinate
    along axis d that each update element lands on; starts[d] the window start read from the
    indices, for the indexed axes d; window maps each window axis of the operand to the
    updates axis that spans it."""
    jnp = _jnp()
    nd, us = operand.ndim, tuple(update_shape)
    if not dtypes.is_int(indices.dtype):
        raise TypeError(f"{name}: scatter_indices must be integers, got dtype {indices.dtype}")
    if indices.ndim < 1:
        raise ShapeError(f"{name}: scatter_indices need an index vector axis (the last), got "
                         f"shape {indices.shape}")
    uwd = _dims(name, "update_window_dims", dnums.update_window_dims, len(us))
    iwd = _dims(name, "inserted_window_dims", dnums.inserted_window_dims, nd)
    obd = _dims(name, "operand_batching_dims", dnums.operand_batching_dims, nd)
    sd = _dims(name, "scatter_dims_to_operand_dims", dnums.scatter_dims_to_operand_dims, nd,
               ordered=False)
    sib = _dims(name, "scatter_indices_batching_dims", dnums.scatter_indices_batching_dims,
                indices.ndim - 1, ordered=False)
    if set(iwd) & set(obd) or set(sd) & set(obd) or len(sib) != len(obd):
        raise ValueError(f"{name}: operand_batching_dims {obd} must pair one to one with "
                         f"scatter_indices_batching_dims {sib} and be neither inserted "
                         f"{iwd} nor indexed {sd}")
    if len(uwd) + len(iwd) + len(obd) != nd:
        raise ShapeError(f"{name}: {len(uwd)} window, {len(iwd)} inserted and {len(obd)} batch "
                         f"axes do not make the operand's rank {nd}")
    if len(sd) != indices.shape[-1]:
        raise ShapeError(f"{name}: scatter_indices of shape {indices.shape} have "
                         f"{indices.shape[-1]} coordinates, scatter_dims_to_operand_dims {sd}")
    scatter_axes = [i for i in range(len(us)) if i not in uwd]
    if tuple(us[i] for i in scatter_axes) != indices.shape[:-1]:
        raise ShapeError(f"{name}: updates of shape {us} with window axes {uwd} do not match "
                         f"scatter_indices of shape {indices.shape}")
    window = dict(zip([d for d in range(nd) if d not in iwd and d not in obd], uwd,
                      strict=True))
    for d, w in window.items():
        if us[w] > operand.shape[d]:
            raise ShapeError(f"{name}: update window axis {w} of size {us[w]} exceeds operand "
                             f"axis {d} of size {operand.shape[d]}")
    for d, k in zip(obd, sib, strict=True):
        if operand.shape[d] != indices.shape[k]:
            raise ShapeError(f"{name}: operand batch axis {d} (size {operand.shape[d]}) and "
                             f"index batch axis {k} (size {indices.shape[k]}) differ")
    idt = dtypes.int64 if any(n >= 2**31 - 1 for n in operand.shape) else dtypes.int32
    idx = indices.astype(idt)
    coords, starts = [], {}
    for d in range(nd):
        c = None
        if d in sd:
            c = st.broadcast_in_dim(idx[..., sd.index(d)], us, tuple(scatter_axes))
            starts[d] = c
        elif d in obd:
            c = st.iota(idt, us, scatter_axes[sib[obd.index(d)]])
        if d in window:
            off = st.iota(idt, us, window[d])
            c = off if c is None else c + off
        coords.append(jnp.zeros(us, idt) if c is None else c)
    return coords, starts, window


def _scatter_any(name: str, operand, scatter_indices, updates, dimension_numbers, mode,
                 combine: Callable):
    """combine(operand, point indices, updates, axes) for either form of dimension numbers."""
    jnp = _jnp()
    x, i, u = jnp.asarray(operand), jnp.asarray(scatter_indices), jnp.asarray(updates)
    clip = GatherScatterMode.from_any(mode) is GatherScatterMode.CLIP
    if not _is_scatter_dnums(dimension_numbers):  # Nova's point form: the primitive checks
        axes = tuple(operator.index(a) for a in dimension_numbers)
        if clip:
            i = indexing.clamp_indices(i, x.shape, axes)
        return combine(x, i, u, axes)
    if u.dtype != x.dtype:
        raise TypeError(f"{name}: updates have dtype {u.dtype} and the operand {x.dtype}; "
                        "they must match")
    coords, starts, window = _scatter_points(name, x, i, u.shape, dimension_numbers)
    nd = x.ndim
    valid = None
    for d, start in starts.items():
        extent = u.shape[window[d]] if d in window else 1
        top = x.shape[d] - extent
        if clip:
            coords[d] = coords[d] + (jnp.clip(start, 0, top) - start)
        else:  # a window that does not fit is dropped whole: one coordinate put out of range
            ok = (start >= 0) & (start <= top)
            valid = ok if valid is None else valid & ok
    if valid is not None:
        coords[0] = jnp.where(valid, coords[0], -1)
    m = u.size
    pts = jnp.stack(coords, axis=-1).reshape(m, nd) if nd else \
        jnp.zeros((m, 0), dtypes.int32)
    return combine(x, pts, u.reshape(m), tuple(range(nd)))


def _mode_combine(mode: str):
    return lambda x, i, u, axes: indexing.scatter(x, i, u, axes, mode)


_SCATTER_DOC = """{what} (jax.lax.{name}).

    operand: any shape and dtype; scatter_indices: integers whose last axis is the index vector;
    updates: operand's dtype. dimension_numbers: a ScatterDimensionNumbers (JAX's: windows,
    inserted and batch axes) or a sequence of ints `axes` (Nova's point form of
    nova.ops.indexing.scatter: updates of shape indices.shape[:-1] + the other axes). mode
    (GatherScatterMode or its name): out-of-range windows are dropped ("fill", the default) or
    moved into range ("clip"). indices_are_sorted / unique_indices are hints and ignored.
    {combine} Raises TypeError for mismatched dtypes or non-integer indices, ShapeError /
    ValueError for dimension numbers that do not fit the shapes."""


def _scatter_fn(name: str, what: str, combine_doc: str, combine: Callable,
                check: Callable | None = None):
    def fn(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
           unique_indices=False, mode=None):
        if check is not None:
            check(operand)
        return _scatter_any(name, operand, scatter_indices, updates, dimension_numbers, mode,
                            combine)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = _SCATTER_DOC.format(what=what, name=name, combine=combine_doc)
    return fn


def _no_bool(name):
    def check(operand):
        if _jnp().asarray(operand).dtype == dtypes.bool_:
            raise TypeError(f"{name}: a bool operand is not supported")

    return check


def _sub_combine(x, i, u, axes):
    # x - u == x + (-u) exactly: IEEE negation is exact, integers wrap alike
    return indexing.scatter_add(x, i, _jnp().negative(u), axes)


scatter_add = _scatter_fn(
    "scatter_add", "operand with updates added where they land", "Repeats accumulate.",
    lambda x, i, u, axes: indexing.scatter_add(x, i, u, axes))
scatter_sub = _scatter_fn(
    "scatter_sub", "operand with updates subtracted where they land",
    "Repeats accumulate; bool operands raise TypeError.", _sub_combine, _no_bool("scatter_sub"))
scatter_mul = _scatter_fn(
    "scatter_mul", "operand multiplied by the updates that land on each place",
    "Repeats multiply; the gradient avoids dividing by zero updates.", _mode_combine("mul"))
scatter_min = _scatter_fn(
    "scatter_min", "The minimum of operand and the updates that land on each place",
    "Tied places share the gradient evenly.", _mode_combine("min"))
scatter_max = _scatter_fn(
    "scatter_max", "The maximum of operand and the updates that land on each place",
    "Tied places share the gradient evenly.", _mode_combine("max"))


def scatter(operand, scatter_indices, updates, dimension_numbers, mode=None, *,
            indices_are_sorted=False, unique_indices=False):
    """operand with updates written where they land (jax.lax.scatter), in either form.

    With a ScatterDimensionNumbers (JAX's form) `mode` is the GatherScatterMode ("fill" drops a
    window out of range, "clip" moves it in) and of repeated indices the last update wins
    (JAX leaves the order unspecified). With a sequence of ints `axes` (Nova's point form of
    nova.ops.indexing.scatter) `mode` is the combination, one of 'set', 'add', 'mul', 'min',
    'max', and out-of-range rows are dropped. Raises as scatter_add does; ValueError for an
    unknown mode.
    """
    if not _is_scatter_dnums(dimension_numbers):
        return indexing.scatter(operand, scatter_indices, updates, dimension_numbers, mode)
    return _scatter_any("scatter", operand, scatter_indices, updates, dimension_numbers, mode,
                        _mode_combine("set"))


def scatter_apply(operand, scatter_indices, func: Callable, dimension_numbers, *,
                  update_shape: Sequence[int] = (), indices_are_sorted=False,
                  unique_indices=False, mode=None):
    """operand with `func` applied to each element the scatter addresses (jax.lax.scatter_apply),
    once per time it is addressed: an index repeated k times applies func k times, as JAX does.

    func: a scalar function (it is vmapped over the operand's elements) returning operand's
    dtype. update_shape: the shape updates would have (JAX's: index batch + window axes).
    dimension_numbers and mode as scatter_add. With unique_indices=True func is applied once
    (so the result is differentiable); otherwise the repeats run in a while_loop (no reverse
    mode; JAX has no derivative for scatter_apply at all). Raises TypeError when func changes
    the dtype or shape.
    """
    import nova
    from nova.control_flow import while_loop

    jnp = _jnp()
    x = jnp.asarray(operand)
    count = _scatter_any("scatter_apply", jnp.zeros(x.shape, dtypes.int32), scatter_indices,
                         jnp.ones(tuple(update_shape), dtypes.int32), dimension_numbers, mode,
                         lambda z, i, u, axes: indexing.scatter_add(z, i, u, axes))
    if x.size == 0:
        return x
    per_element = nova.vmap(func)

    def step(y):
        out = jnp.asarray(per_element(y.reshape(-1)))
        if out.dtype != x.dtype or out.shape != (x.size,):
            raise TypeError(f"scatter_apply: func must map a {x.dtype} scalar to a {x.dtype} "
                            f"scalar, got {out.dtype} of per-element shape {out.shape[1:]}")
        return out.reshape(x.shape)

    out = jnp.where(count > 0, step(x), x)
    if unique_indices:
        return out

    def body(carry):
        k, y = carry
        return k + 1, jnp.where(count > k, step(y), y)

    most = jnp.max(count)
    return while_loop(lambda c: c[0] < most, body, (jnp.asarray(1, dtypes.int32), out))[1]


# --- convolution helpers -------------------------------------------------------------------------


class ConvDimensionNumbers(NamedTuple):
    """jax.lax.ConvDimensionNumbers: the positions of (batch, feature, spatial...) in lhs,
    (out feature, in feature, spatial...) in rhs, (batch, feature, spatial...) in the output."""

    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


def conv_general_permutations(dimension_numbers) -> tuple:
    """(lhs_perm, rhs_perm, out_perm) of layout strings such as ("NHWC", "HWIO", "NHWC")
    (jax.lax.conv_general_permutations): each the axis positions of (N, C, spatial...) /
    (O, I, spatial...) / (N, C, spatial...), spatial axes in the order rhs names them. Raises
    TypeError for non-strings, ValueError for layouts that are not permutations of one set."""
    if not (isinstance(dimension_numbers, Sequence) and len(dimension_numbers) == 3
            and all(isinstance(s, str) for s in dimension_numbers)):
        raise TypeError(f"conv_general_permutations: dimension_numbers must be three layout "
                        f"strings, got {dimension_numbers!r}")
    lhs, rhs, out = dimension_numbers
    for s, pair in ((lhs, "NC"), (rhs, "OI"), (out, "NC")):
        if len(set(s)) != len(s) or pair[0] not in s or pair[1] not in s:
            raise ValueError(f"conv_general_permutations: layout {s!r} must name distinct axes, "
                             f"{pair[0]} and {pair[1]} among them")
    spatial = [c for c in rhs if c not in "OI"]
    if not len(lhs) == len(rhs) == len(out) or \
            sorted(c for c in lhs if c not in "NC") != sorted(spatial) or \
            sorted(c for c in out if c not in "NC") != sorted(spatial):
        raise ValueError(f"conv_general_permutations: layouts {tuple(dimension_numbers)} do not "
                         "name the same spatial axes")

    def perm(s, pair):
        return (s.index(pair[0]), s.index(pair[1])) + tuple(s.index(c) for c in spatial)

    return perm(lhs, "NC"), perm(rhs, "OI"), perm(out, "NC")


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
    """The ConvDimensionNumbers of `dimension_numbers` (jax.lax.conv_dimension_numbers): None
    (NCHW... / OIHW... / NCHW...), three layout strings (conv_general_permutations: spatial
    axes in rhs' order, which is also the order of strides, padding and dilations), three
    position tuples, or a ConvDimensionNumbers (returned as it is). Raises ShapeError for
    operands of different ranks, ValueError for a malformed spec."""
    from nova.ops import convolution as cv

    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    nd = len(lhs_shape)
    if len(rhs_shape) != nd or nd < 2:
        raise ShapeError(f"conv_dimension_numbers: lhs of shape {tuple(lhs_shape)} and rhs of "
                         f"shape {tuple(rhs_shape)} need one rank >= 2")
    if isinstance(dimension_numbers, Sequence) and len(dimension_numbers) == 3 and \
            all(isinstance(s, str) for s in dimension_numbers):
        if any(len(s) != nd for s in dimension_numbers):
            raise ValueError(f"conv_dimension_numbers: layouts {tuple(dimension_numbers)} must "
                             f"each name {nd} axes")
        return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))
    return ConvDimensionNumbers(*cv.conv_dimension_numbers(lhs_shape, rhs_shape,
                                                           dimension_numbers))


def _in_canonical(shape, spec) -> tuple:
    return tuple(shape[i] for i in spec)


def _to_layout(x, spec):
    """x in canonical (N, C, spatial...) order moved to the layout `spec` names."""
    where = {ax: k for k, ax in enumerate(spec)}
    return st.transpose(x, tuple(where[k] for k in range(x.ndim)))


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count: int = 1) -> tuple:
    """The output shape (N / batch_group_count, O, spatial...) of a convolution of NCHW... lhs
    and OIHW... rhs shapes (jax.lax.conv_shape_tuple): floor((in + lo + hi - k) / stride) + 1
    per spatial axis, 0 when the kernel does not fit. pads: (low, high) pairs or "VALID" /
    "SAME" / "SAME_LOWER". Raises ValueError for a wrong number of strides or pads."""
    from nova.ops.convolution import padtype_to_pads

    nsp = len(lhs_shape) - 2
    strides = tuple(operator.index(s) for s in strides)
    if len(strides) != nsp or len(rhs_shape) != len(lhs_shape):
        raise ValueError(f"conv_shape_tuple: {len(strides)} strides for lhs {tuple(lhs_shape)} "
                         f"and rhs {tuple(rhs_shape)}")
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    pads = [tuple(operator.index(p) for p in pair) for pair in pads]
    if len(pads) != nsp or any(len(p) != 2 for p in pads):
        raise ValueError(f"conv_shape_tuple: padding must be {nsp} (low, high) pairs, got {pads}")
    out = [max(0, (n + lo + hi - k) // s + 1) for n, k, s, (lo, hi) in
           zip(lhs_shape[2:], rhs_shape[2:], strides, pads, strict=True)]
    return (lhs_shape[0] // batch_group_count, rhs_shape[0], *out)


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                             dimension_numbers) -> tuple:
    """conv_shape_tuple in the layouts of dimension_numbers (jax.lax.conv_general_shape_tuple):
    the output shape in the out layout."""
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    canon = conv_shape_tuple(_in_canonical(lhs_shape, dn.lhs_spec),
                             _in_canonical(rhs_shape, dn.rhs_spec), window_strides, padding)
    return _permuted_shape(canon, dn.out_spec)


def _permuted_shape(canon, out_spec) -> tuple:
    out = [0] * len(canon)
    for k, ax in enumerate(out_spec):
        out[ax] = canon[k]
    return tuple(out)


def _conv_transpose_padding(k: int, s: int, padding: str) -> tuple[int, int]:
    """The (low, high) padding of the dilated input that makes a transposed convolution's output
    in * s ("SAME") or (in - 1) * s + k ("VALID") long, for a (dilated) kernel of size k."""
    mode = padding.upper()
    if mode == "SAME":
        total = k + s - 2
        lo = k - 1 if s > k - 1 else -(-total // 2)
    elif mode == "VALID":
        total = k + s - 2 + max(k - s, 0)
        lo = k - 1
    else:
        raise ValueError(f"conv_transpose: padding must be 'SAME', 'VALID' or (low, high) pairs, "
                         f"got {padding!r}")
    return lo, total - lo


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers) -> tuple:
    """The output shape of conv_transpose in the out layout (jax.lax.conv_transpose_shape_tuple):
    (in - 1) * stride + lo + hi - k + 2 per spatial axis."""
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    lhs_t, rhs_t = _in_canonical(lhs_shape, dn.lhs_spec), _in_canonical(rhs_shape, dn.rhs_spec)
    strides = tuple(operator.index(s) for s in window_strides)
    if isinstance(padding, str):
        padding = [_conv_transpose_padding(k, s, padding)
                   for k, s in zip(rhs_t[2:], strides, strict=True)]
    out = [(n - 1) * s - k + 2 + lo + hi for n, k, s, (lo, hi) in
           zip(lhs_t[2:], rhs_t[2:], strides, padding, strict=True)]
    return _permuted_shape((lhs_t[0], rhs_t[0], *out), dn.out_spec)


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None) -> tuple:
    """The output shape of reduce_window (jax.lax.reduce_window_shape_tuple): padding is
    (low, high) pairs; the operand dilated by base_dilation, the window by window_dilation."""
    nd = len(operand_shape)
    bdil = (1,) * nd if base_dilation is None else tuple(base_dilation)
    wdil = (1,) * nd if window_dilation is None else tuple(window_dilation)
    if not len(window_dimensions) == len(window_strides) == len(padding) == len(bdil) == \
            len(wdil) == nd:
        raise ValueError(f"reduce_window_shape_tuple: window, strides, padding and dilations "
                         f"need {nd} entries (operand shape {tuple(operand_shape)})")
    out = []
    for n, w, s, (lo, hi), b, d in zip(operand_shape, window_dimensions, window_strides,
                                       padding, bdil, wdil, strict=True):
        padded = ((n - 1) * b + 1 if n else 0) + lo + hi
        out.append(max(0, (padded - ((w - 1) * d + 1)) // s + 1))
    return tuple(out)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """conv_general_dilated in the NCHW / OIHW layouts (jax.lax.conv_with_general_padding)."""
    from nova.ops.convolution import conv_general_dilated

    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


_TRANSPOSE_LAYOUTS = {3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                      5: ("NHWDC", "HWDIO", "NHWDC")}


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel: bool = False, precision=None, preferred_element_type=None,
                   use_consistent_padding: bool = False):
    """The transposed ("fractionally strided") convolution (jax.lax.conv_transpose): lhs
    dilated by `strides`, then a stride-1 convolution with rhs.

    lhs, rhs: rank n + 2 in the layouts of dimension_numbers (default TensorFlow's: NHC / HIO,
    NHWC / HWIO, NHWDC / HWDIO for n = 1, 2, 3). padding: "SAME" (output in * stride),
    "VALID" (output (in - 1) * stride + k) or (low, high) pairs, which are the padding of the
    transposed convolution itself, or with use_consistent_padding=True that of the forward
    convolution it transposes (then d * (k - 1) - p is padded). transpose_kernel=True flips the
    kernel's spatial axes and swaps its I and O axes (the gradient of conv, as Keras'
    Conv2DTranspose). Raises ValueError for a rank without a default layout or bad padding.
    """
    from nova.ops.convolution import conv_general_dilated

    jnp = _jnp()
    x, w = jnp.asarray(lhs), jnp.asarray(rhs)
    if dimension_numbers is None:
        if x.ndim not in _TRANSPOSE_LAYOUTS:
            raise ValueError(f"conv_transpose: no default layout for rank {x.ndim}; give "
                             "dimension_numbers")
        dimension_numbers = _TRANSPOSE_LAYOUTS[x.ndim]
    dn = conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    nsp = x.ndim - 2
    strides = tuple(operator.index(s) for s in strides)
    rdil = (1,) * nsp if rhs_dilation is None else tuple(operator.index(d) for d in rhs_dilation)
    if len(strides) != nsp or len(rdil) != nsp:
        raise ValueError(f"conv_transpose: strides {strides} and rhs_dilation {rdil} need {nsp} "
                         "entries")
    kernel = [(w.shape[a] - 1) * d + 1 for a, d in zip(dn.rhs_spec[2:], rdil, strict=True)]
    if isinstance(padding, str):
        pads = [_conv_transpose_padding(k, s, padding) for k, s in zip(kernel, strides,
                                                                       strict=True)]
    else:
        pads = [tuple(operator.index(p) for p in pair) for pair in padding]
        if len(pads) != nsp or any(len(p) != 2 for p in pads):
            raise ValueError(f"conv_transpose: padding must be {nsp} (low, high) pairs, got "
                             f"{padding}")
        if use_consistent_padding:
            pads = [(k - 1 - lo, k - 1 - hi) for k, (lo, hi) in zip(kernel, pads, strict=True)]
    if transpose_kernel:
        w = sl.rev(w, tuple(dn.rhs_spec[2:]))
        r = dn.rhs_spec
        dn = ConvDimensionNumbers(dn.lhs_spec, (r[1], r[0], *r[2:]), dn.out_spec)
    return conv_general_dilated(x, w, (1,) * nsp, pads, lhs_dilation=strides,
                                rhs_dilation=rdil, dimension_numbers=dn, precision=precision,
                                preferred_element_type=preferred_element_type)


def _conv_pads(name, padding, in_shape, kernel, strides, ldil) -> list:
    """(low, high) per spatial axis, as conv_general_dilated resolves them."""
    from nova.ops.convolution import padtype_to_pads

    if isinstance(padding, str):
        if any(d != 1 for d in ldil):
            raise ValueError(f"{name}: string padding is not implemented with lhs_dilation; "
                             "give (low, high) pairs")
        return padtype_to_pads(in_shape, kernel, strides, padding)
    pads = [tuple(operator.index(p) for p in pair) for pair in padding]
    if len(pads) != len(in_shape) or any(len(p) != 2 for p in pads):
        raise ValueError(f"{name}: padding must be {len(in_shape)} (low, high) pairs, got "
                         f"{padding}")
    return pads


def conv_general_dilated_patches(lhs, filter_shape: Sequence[int], window_strides, padding,
                                 lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                                 precision=None, preferred_element_type=None):
    """The image patches that conv_general_dilated with a `filter_shape` kernel multiplies
    (jax.lax.conv_general_dilated_patches): the output's feature axis holds each patch
    flattened in the order (input feature, then the kernel's spatial axes in rhs' order), so
    its size is C * prod(filter_shape); the output is in the out layout of dimension_numbers.

    Taken by strided slices (no multiplication), so patches are exact for every value,
    inf and NaN included. filter_shape, strides and dilations follow rhs' spatial order.
    Raises ShapeError / ValueError as conv_general_dilated.
    """
    from nova.ops.convolution import _ints, _windows

    jnp = _jnp()
    x = jnp.asarray(lhs)
    if x.ndim < 2:
        raise ShapeError(f"conv_general_dilated_patches: lhs needs a batch and a feature axis, "
                         f"got shape {x.shape}")
    dn = conv_dimension_numbers(x.shape, x.shape, dimension_numbers)
    nsp = x.ndim - 2
    filt = tuple(operator.index(k) for k in filter_shape)
    if len(filt) != nsp or any(k < 1 for k in filt):
        raise ValueError(f"conv_general_dilated_patches: filter_shape must be {nsp} positive "
                         f"ints, got {filt}")
    strides = _ints("window_strides", window_strides, nsp, 1)
    ldil = _ints("lhs_dilation", lhs_dilation, nsp, 1)
    rdil = _ints("rhs_dilation", rhs_dilation, nsp, 1)
    xt = st.transpose(x, dn.lhs_spec)  # (N, C, spatial in rhs order)
    eff = [(k - 1) * d + 1 for k, d in zip(filt, rdil, strict=True)]
    pads = _conv_pads("conv_general_dilated_patches", padding, xt.shape[2:], eff, strides, ldil)
    xp = sl.pad(xt, np.zeros((), x.dtype), [(0, 0, 0), (0, 0, 0)] +
                [(lo, hi, d - 1) for (lo, hi), d in zip(pads, ldil, strict=True)])
    out_sp = [max(0, (p - k) // s + 1) for p, k, s in zip(xp.shape[2:], eff, strides,
                                                           strict=True)]
    n, c, kk = xt.shape[0], xt.shape[1], math.prod(filt)
    if 0 in out_sp or n * c == 0:
        out = jnp.zeros((n, c * kk, *out_sp), x.dtype)
    else:
        cols = list(_windows(xp, filt, strides, rdil, out_sp, lead=2))  # each (N, C, out...)
        out = jnp.stack(cols, axis=2).reshape(n, c * kk, *out_sp)
    if preferred_element_type is not None:
        out = out.astype(preferred_element_type)
    return _to_layout(out, dn.out_spec)


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape: Sequence[int],
                               lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                               precision=None):
    """A convolution with a separate kernel at every output position (a locally connected
    layer; jax.lax.conv_general_dilated_local).

    rhs: in its layout, out features O, I = C * prod(filter_shape) (the patch order of
    conv_general_dilated_patches: input feature, then the window's spatial axes in rhs'
    order), and spatial axes the output's positions. out[n, o, p] = sum_i patches[n, i, p] *
    rhs[o, i, p]. Raises ShapeError when rhs does not have that shape.
    """
    jnp = _jnp()
    x, w = jnp.asarray(lhs), jnp.asarray(rhs)
    dn = conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    canonical = tuple(range(x.ndim))
    patches = conv_general_dilated_patches(
        x, filter_shape, window_strides, padding, lhs_dilation, rhs_dilation,
        ConvDimensionNumbers(dn.lhs_spec, canonical, canonical))  # (N, C * K, out...)
    wt = st.transpose(w, dn.rhs_spec)  # (O, C * K, out...)
    if wt.shape[1:] != patches.shape[1:]:
        raise ShapeError(f"conv_general_dilated_local: rhs has (I, spatial) = {wt.shape[1:]} in "
                         f"its layout; patches of filter_shape {tuple(filter_shape)} need "
                         f"{patches.shape[1:]}")
    n, ck, out_sp = patches.shape[0], patches.shape[1], patches.shape[2:]
    npos = math.prod(out_sp)
    pt = st.transpose(patches.reshape(n, ck, npos), (2, 0, 1))  # (P, N, I)
    wp = st.transpose(wt.reshape(wt.shape[0], ck, npos), (2, 1, 0))  # (P, I, O)
    y = dot_general(pt, wp, (((2,), (1,)), ((0,), (0,))))  # (P, N, O)
    out = st.transpose(y, (1, 2, 0)).reshape(n, wt.shape[0], *out_sp)
    return _to_layout(out, dn.out_spec)


# --- integer and float bits ---------------------------------------------------------------------


def _int_array(name: str, x):
    a = _jnp().asarray(x)
    if not dtypes.is_int(a.dtype):
        raise TypeError(f"{name}: x must be an integer array, got dtype {a.dtype}")
    return a


def clz(x):
    """The number of leading zero bits of each element's bit pattern, in x's dtype
    (jax.lax.clz): 0 for negative signed values, the bit width for 0. Integers only
    (TypeError otherwise). A binary search with logical shifts (log2(width) steps)."""
    jnp = _jnp()
    a = _int_array("clz", x)
    width = a.dtype.itemsize * 8
    neg = a < 0 if not dtypes.is_unsigned(a.dtype) else None
    y = a if neg is None else jnp.where(neg, jnp.zeros_like(a), a)
    length = jnp.zeros(a.shape, dtypes.int32)  # bit length of y, found from the top half down
    s = width // 2
    while s:
        hi = jnp.right_shift(y, s)
        nz = hi != 0
        y = jnp.where(nz, hi, y)
        length = length + jnp.where(nz, s, 0)
        s //= 2
    out = (width - length - (y != 0).astype(dtypes.int32)).astype(a.dtype)
    return out if neg is None else jnp.where(neg, jnp.zeros_like(out), out)


def _same_ints(name: str, x, y):
    jnp = _jnp()
    a, b = jnp.asarray(x), jnp.asarray(y)
    if a.dtype != b.dtype or not dtypes.is_int(a.dtype):
        raise TypeError(f"{name}: x and y must be integers of one dtype, got {a.dtype} and "
                        f"{b.dtype}")
    return jnp.broadcast_arrays(a, b)


def mulhi(x, y, /):
    """The high half of the double-width product x * y, in x's dtype (jax.lax.mulhi): floor(x y
    / 2^n) for n-bit signed ints, x y >> n for unsigned. Up to 32 bits the product is taken in
    a wider integer; int64 multiplies 32-bit limbs (Hacker's Delight 2nd ed. sec. 8-2, mulhs).
    Raises TypeError for floats or mixed dtypes (uint64 does not exist in Nova)."""
    jnp = _jnp()
    a, b = _same_ints("mulhi", x, y)
    bits = a.dtype.itemsize * 8
    if bits < 64:
        unsigned = dtypes.is_unsigned(a.dtype)
        wide = {8: dtypes.int32, 16: dtypes.uint32 if unsigned else dtypes.int32}.get(
            bits, dtypes.int64)
        p = a.astype(wide) * b.astype(wide)  # uint32 x uint32 wraps in int64: the bits hold
        sh = jnp.full(p.shape, bits, wide)
        hi = ew.shift_right_logical(p, sh) if unsigned else ew.shift_right_arithmetic(p, sh)
        return hi.astype(a.dtype)
    mask = jnp.full(a.shape, 0xFFFFFFFF, a.dtype)
    s32 = jnp.full(a.shape, 32, a.dtype)
    u0, u1 = a & mask, ew.shift_right_arithmetic(a, s32)
    v0, v1 = b & mask, ew.shift_right_arithmetic(b, s32)
    w0 = u0 * v0  # the unsigned 64-bit product, wrapped
    t = u1 * v0 + ew.shift_right_logical(w0, s32)
    w1 = u0 * v1 + (t & mask)
    return u1 * v1 + ew.shift_right_arithmetic(t, s32) + ew.shift_right_arithmetic(w1, s32)


def nextafter(x1, x2):
    """The next float after x1 in the direction of x2, elementwise (jax.lax.nextafter): x2
    where they are equal (so nextafter(0., -0.) is -0.), NaN if either is NaN, the smallest
    subnormal after zero, +-max from +-inf inward. Computed without bitcast by exact float
    steps (nova.random's: x +- |x| / 2^(p+1), at powers of two x +- |x| / 2^p, small values
    scaled up first). Broadcasts; floats only (TypeError)."""
    from nova.random import _nextafter

    jnp = _jnp()
    a, b = _floats("nextafter", x1, x2)
    out = jnp.where(b > a, _nextafter(a, +1), jnp.where(b < a, _nextafter(a, -1), b))
    return jnp.where(jnp.isnan(a) | jnp.isnan(b), jnp.full_like(a, np.nan), out)


def _rounded(x, exponent_bits: int, mantissa_bits: int):
    """x rounded to a float format of the given bit counts (XLA's ReducePrecision), by exact
    power-of-two scaling: x / 2^k with 2^k the target ulp at x, rounded half to even, times 2^k.
    Below the smallest normal the source format's ulp applies (its subnormals round on their
    own grid, as the bit pattern does). With no mantissa bits the kept bit is the exponent's
    lowest, so a tie goes to the even biased exponent. Then values past the target's largest
    exponent become inf and those below its smallest normal a signed zero. The rounding step
    passes the derivative straight through (reduce_precision's rule sets the cotangent)."""
    jnp = _jnp()
    info = dtypes.finfo(x.dtype)
    out = x
    if mantissa_bits < info.nmant:
        a = jnp.abs(x)
        finite = jnp.isfinite(a) & (a > 0)
        a = jnp.where(finite, a, jnp.ones_like(a))
        e = jnp.maximum(jnp.frexp(a)[1] - 1, info.minexp)  # the binade's exponent
        k = e - mantissa_bits
        q = jnp.ldexp(a, -k)  # in [2^m, 2^(m+1)): the kept bits before the point
        r = q + ew.stop_gradient(jnp.round(q) - q)  # exactly round(q)
        if mantissa_bits == 0:
            biased_even = (e + (info.maxexp - 1)) % 2 == 0
            r = jnp.where(q == 1.5, jnp.where(biased_even, 1.0, 2.0).astype(x.dtype), r)
        y = jnp.ldexp(r, k)
        out = jnp.where(finite, jnp.where(jnp.signbit(x), -y, y), x)
    if exponent_bits < info.nexp:
        bias = 2 ** (exponent_bits - 1) - 1
        ay = jnp.abs(out)
        inf = jnp.where(jnp.signbit(out), -np.inf, np.inf).astype(x.dtype)
        out = jnp.where(ay >= 2.0 ** (bias + 1), inf, out)
        out = jnp.where(ay < 2.0 ** (1 - bias), out * 0.0, out)  # x * 0 keeps the sign
    return out


@functools.cache
def _reduce_precision_fn():
    import nova

    @functools.partial(nova.custom_vjp, nondiff_argnums=(1, 2))
    def rp(x, exponent_bits, mantissa_bits):
        return _rounded(x, exponent_bits, mantissa_bits)

    def fwd(x, exponent_bits, mantissa_bits):
        return _rounded(x, exponent_bits, mantissa_bits), None

    def bwd(exponent_bits, mantissa_bits, _, g):
        return (_rounded(g, exponent_bits, mantissa_bits),)

    rp.defvjp(fwd, bwd)
    return rp


def reduce_precision(operand, exponent_bits: int, mantissa_bits: int):
    """operand rounded to a float format with `exponent_bits` exponent and `mantissa_bits`
    mantissa bits, kept in its own dtype (jax.lax.reduce_precision; e.g. (5, 10) simulates
    float16 in float32, (8, 7) bfloat16): mantissa rounded half to even, then overflow to inf
    and values below the format's smallest normal flushed to signed zero (XLA's semantics: no
    subnormals in the reduced format unless its exponent is the source's); NaN and inf pass.
    Exact (power-of-two scaling). The derivative, as JAX's, reduces the cotangent's precision
    (forward mode passes the tangent through unrounded). Raises TypeError for non-floats,
    ValueError for exponent_bits < 1 or mantissa_bits < 0."""
    jnp = _jnp()
    x = jnp.asarray(operand)
    if not dtypes.is_float(x.dtype):
        raise TypeError(f"reduce_precision: operand must be a float array, got dtype {x.dtype}")
    e, m = operator.index(exponent_bits), operator.index(mantissa_bits)
    if e < 1 or m < 0:
        raise ValueError(f"reduce_precision: exponent_bits must be >= 1 and mantissa_bits >= 0, "
                         f"got {e} and {m}")
    return _reduce_precision_fn()(x, e, m)


# --- selection and products ---------------------------------------------------------------------


def _approx_top_k(name, operand, k, reduction_dimension, recall_target, largest):
    from nova.numpy_impl.util import normalize_axis
    from nova.ops.dynamic import top_k

    jnp = _jnp()
    x = jnp.asarray(operand)
    if not dtypes.is_float(x.dtype):
        raise TypeError(f"{name}: operand must be a float array, got dtype {x.dtype}")
    if x.ndim == 0:
        raise ValueError(f"{name}: the operand needs at least one dimension")
    if not 0 < recall_target <= 1:
        raise ValueError(f"{name}: recall_target must be in (0, 1], got {recall_target}")
    axis = normalize_axis(reduction_dimension, x.ndim, "reduction_dimension")
    if not 0 <= operator.index(k) <= x.shape[axis]:
        raise ValueError(f"{name}: k={k} is outside [0, {x.shape[axis]}] (the size of "
                         f"reduction_dimension {axis})")
    moved = jnp.moveaxis(x, axis, -1)
    if largest:
        vals, idx = top_k(moved, k)
    else:  # the largest of -x (exact), then x's own values (-0.0 stays itself)
        idx = top_k(-moved, k)[1]
        vals = jnp.take_along_axis(moved, idx, axis=-1)
    return jnp.moveaxis(vals, -1, axis), jnp.moveaxis(idx, -1, axis)


def approx_max_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """(values, int32 indices) of the k largest entries along reduction_dimension, largest first
    (jax.lax.approx_max_k). Nova computes them exactly (top_k: ties in index order, NaN
    largest), which meets every recall_target; with aggregate_to_topk=False JAX may return
    more than k candidates, Nova returns the k. Floats only (TypeError); raises ValueError for
    k outside [0, size] or recall_target outside (0, 1]."""
    return _approx_top_k("approx_max_k", operand, k, reduction_dimension, recall_target, True)


def approx_min_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """(values, int32 indices) of the k smallest entries along reduction_dimension, smallest
    first (jax.lax.approx_min_k), exactly; ties in index order. As approx_max_k."""
    return _approx_top_k("approx_min_k", operand, k, reduction_dimension, recall_target, False)


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None):
    """The grouped matrix product (jax.lax.ragged_dot): lhs (m, k), rhs (g, k, n), group_sizes
    (g,) integers splitting lhs' rows into consecutive groups; row i of the (m, n) result is
    lhs[i] @ rhs[group of i], and rows past sum(group_sizes) are zero. Every row's product with
    every group's matrix is taken (one GEMM, m x k x g n) and each row keeps its own, so the
    result is exact and differentiable in lhs and rhs. Raises ShapeError / TypeError for
    mismatched shapes or non-integer group_sizes; NotImplementedError for group_offset."""
    jnp = _jnp()
    x, w, gs = jnp.asarray(lhs), jnp.asarray(rhs), jnp.asarray(group_sizes)
    if group_offset is not None:
        raise NotImplementedError("ragged_dot: group_offset is not implemented")
    if x.ndim != 2 or w.ndim != 3 or gs.ndim != 1 or x.shape[1] != w.shape[1] or \
            gs.shape[0] != w.shape[0]:
        raise ShapeError(f"ragged_dot: need lhs (m, k), rhs (g, k, n), group_sizes (g,); got "
                         f"{x.shape}, {w.shape}, {gs.shape}")
    if not dtypes.is_int(gs.dtype):
        raise TypeError(f"ragged_dot: group_sizes must be integers, got dtype {gs.dtype}")
    dt = dtypes.result_type(x, w)
    x, w = x.astype(dt), w.astype(dt)
    m, g = x.shape[0], w.shape[0]
    ends = jnp.cumsum(gs.astype(dtypes.int32))
    group = jnp.sum(jnp.arange(m, dtype=dtypes.int32)[:, None] >= ends[None, :], axis=1,
                    dtype=dtypes.int32)  # g for rows past the last group
    every = dot_general(x, w, (((1,), (1,)), ((), ())))  # (m, g, n)
    own = jnp.take_along_axis(every, jnp.minimum(group, g - 1)[:, None, None], axis=1)[:, 0]
    out = jnp.where((group < g)[:, None], own, jnp.zeros_like(own)) if g else \
        jnp.zeros((m, w.shape[2]), dt)
    return out if preferred_element_type is None else out.astype(preferred_element_type)


# --- implicit-function derivatives --------------------------------------------------------------


def _closure_convert(fun: Callable, example):
    """fun (a function of one pytree like `example`) as call(leaves, consts) reading only its
    arguments, and consts: the values of enclosing traces fun reads (fun is traced once, on
    abstract values, as control flow's bodies are)."""
    from nova.control_flow import _region, inline, trace_region
    from nova.core.ir import TensorType
    from nova.core.pytree import tree_flatten, tree_unflatten

    leaves, tree = tree_flatten(example)
    types = [TensorType(tuple(x.shape), x.dtype) for x in leaves]
    program, consts, out_tree = trace_region(lambda *ls: fun(tree_unflatten(tree, ls)), types)
    region = _region(program)

    def call(arg_leaves, const_vals):
        return tree_unflatten(out_tree, inline(region, list(arg_leaves) + list(const_vals)))

    return call, list(consts), out_tree


def _float_leaves(name: str, tree):
    from nova.core.pytree import tree_flatten

    jnp = _jnp()
    leaves, td = tree_flatten(tree)
    leaves = [jnp.asarray(x) for x in leaves]
    for x in leaves:
        if not dtypes.is_float(x.dtype):
            raise TypeError(f"{name}: the arrays must be floats, got dtype {x.dtype}")
    return leaves, td


def custom_linear_solve(matvec: Callable, b, solve: Callable,
                        transpose_solve: Callable | None = None, symmetric: bool = False,
                        has_aux: bool = False):
    """x = solve(matvec, b) with derivatives by implicit differentiation of A x = b
    (jax.lax.custom_linear_solve): solve is never differentiated through (it may be an
    iterative loop).

    matvec: the linear map A (a pytree of b's structure to one), differentiable, closing over
    its parameters theta. b: a pytree of float arrays. solve(matvec, b) -> x (with aux when
    has_aux). Reverse mode: b's cotangent is u = transpose_solve(vecmat, x_bar), vecmat = A^T
    (the VJP of matvec; matvec itself when symmetric, and then solve serves as
    transpose_solve), and theta's is -(d/dtheta <u, A(theta) x>). Forward mode transposes that
    rule (transpose_solve must then be written in differentiable operations). Values solve
    closes over get no derivative. Raises TypeError for non-float b or a matvec whose output
    structure differs from b's; NotImplementedError when reverse mode meets a missing
    transpose_solve.
    """
    import nova
    from nova.core.pytree import tree_unflatten
    from nova.core.trace import current_trace

    if transpose_solve is None and symmetric:
        transpose_solve = solve
    b_leaves, b_tree = _float_leaves("custom_linear_solve", b)
    b = tree_unflatten(b_tree, b_leaves)
    if current_trace() is None:  # no derivative can be asked for
        return solve(matvec, b)
    mv, mv_consts, mv_tree = _closure_convert(matvec, b)
    if mv_tree != b_tree:
        raise TypeError(f"custom_linear_solve: matvec returns the structure {mv_tree}, b has "
                        f"{b_tree}")
    sv, sv_consts, _ = _closure_convert(lambda rhs: solve(matvec, rhs), b)

    def solution(out):
        return out[0] if has_aux else out

    @nova.custom_vjp
    def linear_solve(b_leaves, mv_consts, sv_consts):
        return sv(b_leaves, sv_consts)

    def fwd(b_leaves, mv_consts, sv_consts):
        out = sv(b_leaves, sv_consts)
        return out, (solution(out), mv_consts)

    def bwd(res, g):
        from nova.core.pytree import tree_leaves

        x, mv_c = res
        if transpose_solve is None:
            raise NotImplementedError("custom_linear_solve: reverse mode needs transpose_solve "
                                      "(or symmetric=True)")

        def matvec_of(v):
            return mv(tree_leaves(v), mv_c)

        if symmetric:
            vecmat = matvec_of
        else:
            pull = nova.vjp(matvec_of, x)[1]

            def vecmat(u):
                return pull(u)[0]

        u = solution(transpose_solve(vecmat, solution(g)))
        pull_c = nova.vjp(lambda c: mv(tree_leaves(x), c), mv_c)[1]
        (c_bar,) = pull_c(u)
        return tree_leaves(u), [-c for c in c_bar], None

    linear_solve.defvjp(fwd, bwd)
    return linear_solve(b_leaves, mv_consts, sv_consts)


def custom_root(f: Callable, initial_guess, solve: Callable, tangent_solve: Callable,
                has_aux: bool = False):
    """x = solve(f, initial_guess), a root of f, with derivatives by the implicit function
    theorem (jax.lax.custom_root): f(x(theta), theta) = 0 gives dx = -(df/dx)^-1 (df/dtheta)
    dtheta, for the parameters theta f closes over; solve is never differentiated through.

    f: a pytree -> the same structure. solve(f, guess) -> x (with aux when has_aux).
    tangent_solve(g, y) solves g(x) = y for the linear g = f linearized at the root (a scalar:
    `lambda g, y: y / g(1.0)`; vectors: a solve with `nova.jacobian(g)(y)`). Reverse mode
    transposes tangent_solve (as JAX does), so it must be linear and differentiable in y; the
    cotangent reaching theta is -(df/dtheta)^T u. initial_guess gets no derivative. Raises
    TypeError for non-float guesses or an f whose output structure differs from its input's.
    """
    import nova
    from nova.core.pytree import tree_leaves, tree_unflatten
    from nova.core.trace import current_trace

    jnp = _jnp()
    g_leaves, g_tree = _float_leaves("custom_root", initial_guess)
    guess = tree_unflatten(g_tree, g_leaves)
    if current_trace() is None:
        return solve(f, guess)
    fc, f_consts, f_tree = _closure_convert(f, guess)
    if f_tree != g_tree:
        raise TypeError(f"custom_root: f returns the structure {f_tree}, initial_guess has "
                        f"{g_tree}")
    sv, sv_consts, _ = _closure_convert(lambda g0: solve(f, g0), guess)

    def solution(out):
        return out[0] if has_aux else out

    @nova.custom_vjp
    def root(g_leaves, f_consts, sv_consts):
        return sv(g_leaves, sv_consts)

    def fwd(g_leaves, f_consts, sv_consts):
        out = sv(g_leaves, sv_consts)
        return out, (solution(out), f_consts)

    def bwd(res, ct):
        x, f_c = res
        xl = tree_leaves(x)

        def linearized(v):  # df/dx at the root, applied to v
            vl = [jnp.broadcast_to(jnp.asarray(t, p.dtype), p.shape)
                  for t, p in zip(tree_leaves(v), xl, strict=True)]
            return nova.jvp(lambda *z: fc(z, f_c), xl, vl)[1]

        pull = nova.vjp(lambda y: tangent_solve(linearized, y), x)[1]
        (u,) = pull(solution(ct))
        (c_bar,) = nova.vjp(lambda c: fc(xl, c), f_c)[1](u)
        return None, [-c for c in c_bar], None

    root.defvjp(fwd, bwd)
    return root(g_leaves, f_consts, sv_consts)


# --- platforms, composites, small helpers -------------------------------------------------------

_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")


def platform_dependent(*args, default: Callable | None = None, **per_platform: Callable):
    """per_platform[p](*args) for p = nova.default_backend() ("cpu" or "cuda"), else
    default(*args) (jax.lax.platform_dependent). Raises ValueError for an unknown platform
    name (JAX's: cpu, cuda, rocm, tpu), NotImplementedError when no branch applies."""
    from nova.runtime.devices import default_backend

    for name in per_platform:
        if name not in _PLATFORMS:
            raise ValueError(f"platform_dependent: unknown platform {name!r}; use one of "
                             f"{_PLATFORMS}")
    platform = default_backend()
    fn = per_platform.get(platform, default)
    if fn is None:
        raise NotImplementedError(f"platform_dependent: no branch for platform {platform!r} "
                                  f"(branches: {sorted(per_platform)}) and no default")
    return fn(*args)


def composite(decomposition: Callable, name: str, version: int = 0) -> Callable:
    """The function `decomposition`, marked as a named composite operation (jax.lax.composite;
    as a decorator: `functools.partial(lax.composite, name="my.op")`). Nova has no composite
    op in its IR: a call runs the decomposition, which defines the semantics (JAX's fallback
    when a compiler does not recognize the name). Raises TypeError for a non-callable,
    ValueError for an empty name or a negative version."""
    if not callable(decomposition):
        raise TypeError(f"composite: decomposition must be callable, got "
                        f"{type(decomposition).__name__}")
    if not isinstance(name, str) or not name:
        raise ValueError(f"composite: name must be a non-empty string, got {name!r}")
    if operator.index(version) < 0:
        raise ValueError(f"composite: version must be non-negative, got {version}")

    @functools.wraps(decomposition)
    def call(*args, **kwargs):
        return decomposition(*args, **kwargs)

    return call


def index_take(src, idxs: Sequence, axes: Sequence[int]):
    """src gathered at one point per row of `idxs` (jax.lax.index_take): idxs holds one 1-d
    integer array per axis in `axes`, all of one length n; the result is (n,) + the other axes
    of src. Indices wrap modulo the axis' size (-1 is the last). Raises ValueError when idxs
    and axes differ in length, ShapeError for index arrays that are not 1-d of one length."""
    jnp = _jnp()
    x = jnp.asarray(src)
    axes = tuple(operator.index(a) for a in axes)
    idxs = [jnp.asarray(i) for i in idxs]
    if len(idxs) != len(axes):
        raise ValueError(f"index_take: {len(idxs)} index arrays for {len(axes)} axes")
    if not idxs or any(i.ndim != 1 or i.shape != idxs[0].shape for i in idxs):
        raise ShapeError("index_take: idxs must be 1-d arrays of one length, got shapes "
                         + ", ".join(str(i.shape) for i in idxs))
    rows = [jnp.remainder(i, x.shape[a]) for i, a in zip(idxs, axes, strict=True)]
    return indexing.gather(x, jnp.stack(rows, axis=1), axes)


def tile(operand, reps: Sequence[int]):
    """operand repeated reps[d] times along each axis d (jax.lax.tile): len(reps) must equal
    operand.ndim (TypeError otherwise, as JAX)."""
    jnp = _jnp()
    x = jnp.asarray(operand)
    reps = tuple(operator.index(r) for r in reps)
    if len(reps) != x.ndim:
        raise TypeError(f"tile: len(reps) = {len(reps)} must equal the operand's rank {x.ndim}")
    return jnp.tile(x, reps)


def stack(operands: Sequence, axis: int = 0):
    """The operands joined along a new axis (jax.lax.stack): one shape and one dtype (no
    promotion; TypeError otherwise)."""
    jnp = _jnp()
    xs = [jnp.asarray(x) for x in operands]
    if not xs:
        raise ValueError("stack: at least one operand is needed")
    if any(x.dtype != xs[0].dtype for x in xs):
        raise TypeError("stack: the operands must share one dtype, got "
                        + ", ".join(str(x.dtype) for x in xs))
    return jnp.stack(xs, axis=axis)


def unstack(x, axis: int = 0) -> tuple:
    """The slices of x along `axis`, as a tuple (jax.lax.unstack)."""
    return tuple(_jnp().unstack(_jnp().asarray(x), axis=axis))


def broadcast_to_rank(x, rank: int):
    """x with leading axes of size 1 added up to rank `rank` (jax.lax.broadcast_to_rank); x
    as it is when its rank is already `rank` or more."""
    a = _jnp().asarray(x)
    return a.reshape((1,) * (operator.index(rank) - a.ndim) + a.shape) if a.ndim < rank else a


def broadcast_like(arr, like_arr):
    """arr broadcast to like_arr's shape (jax.lax.broadcast_like)."""
    jnp = _jnp()
    return jnp.broadcast_to(jnp.asarray(arr), jnp.shape(like_arr))


def empty(shape, dtype, *, out_sharding=None):
    """An array of `shape` and `dtype` whose values are unspecified (jax.lax.empty): Nova fills
    it with zeros (as JAX does on the CPU)."""
    shape = (operator.index(shape),) if isinstance(shape, int | np.integer) else tuple(shape)
    return st.full(shape, 0, dtypes.canonicalize(dtype))
