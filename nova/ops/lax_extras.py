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

The scatters live in lax_scatter.py, the convolution helpers in lax_conv.py, the bit-level
functions in lax_bits.py and custom_linear_solve / custom_root in lax_implicit.py; this module
holds the rest and re-exports them all (nova/ops/lax.py imports every name from here).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence

import numpy as np

from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.ops import indexing
from nova.ops import structural as st
from nova.ops.composite import _jnp
from nova.ops.contraction import dot_general
from nova.ops.lax_bits import clz, mulhi, nextafter, reduce_precision  # noqa: F401
from nova.ops.lax_conv import (  # noqa: F401
    ConvDimensionNumbers,
    conv_dimension_numbers,
    conv_general_dilated_local,
    conv_general_dilated_patches,
    conv_general_permutations,
    conv_general_shape_tuple,
    conv_shape_tuple,
    conv_transpose,
    conv_transpose_shape_tuple,
    conv_with_general_padding,
    reduce_window_shape_tuple,
)
from nova.ops.lax_implicit import custom_linear_solve, custom_root  # noqa: F401
from nova.ops.lax_scatter import (  # noqa: F401
    GatherScatterMode,
    ScatterDimensionNumbers,
    scatter,
    scatter_add,
    scatter_apply,
    scatter_max,
    scatter_min,
    scatter_mul,
    scatter_sub,
)

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
