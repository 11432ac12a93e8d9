"""Structural primitives: constants, copies, iota, broadcast_in_dim, reshape, transpose."""

from __future__ import annotations

import operator

import numpy as np

from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.core.ir import TensorType
from nova.core.primitive import (
    Cost,
    Elementwise,
    FusionKind,
    IndexMap,
    Primitive,
    Template,
    broadcast_batched,
)
from nova.ops import elementwise as ew


def _no_inputs_vjp(ct, *, out, **params):
    return ()


# --- constant -----------------------------------------------------------------------------------


def _constant_rule(*, value):
    return TensorType(value.shape, value.dtype)


def _freeze_array(v):
    a = np.array(v, copy=True)
    a.setflags(write=False)
    return a


constant_p = Primitive(
    "constant",
    shape_rule=_constant_rule,
    impl=lambda *, value: value,
    vjp=_no_inputs_vjp,
    jvp=lambda tangents, *, out, value: ew.zeros_like(out),
    fusion=FusionKind.OPAQUE,
    kernel=Template("constant"),
    cost=lambda ins, outs, *, value: Cost(0, value.nbytes),
    differentiable=False,
    param_types={"value": _freeze_array},
)


def constant(value):
    return constant_p.bind(value=np.asarray(value))


def full(shape, value, dtype):
    """`value` broadcast to `shape`: a 0-d constant plus a broadcast (fuses into consumers)."""
    c = constant(np.asarray(value, dtype=dtype))
    shape = tuple(shape)
    return c if shape == () else broadcast_in_dim(c, shape, ())


# --- copy: a fresh value equal to its input (marks the argument of a nested transform) -----------

copy_p = Primitive(
    "copy",
    shape_rule=lambda x: x,
    impl=lambda x: x.copy(),
    vjp=lambda ct, x, *, out: (ct,),
    jvp=lambda tangents, x, *, out: tangents[0],
    fusion=FusionKind.ELEMENTWISE,
    kernel=Elementwise(lambda b, x: x),
)
copy = copy_p.bind

# --- optimization_barrier ---------------------------------------------------------------------

# The identity that the passes do not see through: cse cannot merge an equation reading its
# outputs with one reading its inputs, so a recomputation (nova.checkpoint's backward) stays a
# recomputation. compiler/barriers.py removes it after the last cse, before fusion; the
# interpreter and eager calls evaluate it as the identity.
optimization_barrier_p = Primitive(
    "optimization_barrier",
    shape_rule=lambda *types: tuple(types),
    impl=lambda *xs: tuple(xs),
    vjp=lambda cts, *xs, out: tuple(c if dtypes.is_inexact(x.dtype) else None
                                    for c, x in zip(cts, xs, strict=True)),
    jvp=lambda tangents, *xs, out: tuple(tangents),
    fusion=FusionKind.OPAQUE,
    kernel=Template("optimization_barrier"),
    cost=lambda ins, outs, **_: Cost(0, sum(t.nbytes for t in outs)),
    multiple_results=True,
    batch=lambda args, batched: optimization_barrier_p.bind(*broadcast_batched(args, batched)),
)


def optimization_barrier(operand):
    """`operand` (an array or a pytree of arrays) unchanged, as jax.lax.optimization_barrier:
    the compiler's passes do not see through it, so computations on its results are not
    merged with the same computations on its inputs (common-subexpression elimination stops
    there). Derivatives pass through it as through the identity."""
    from nova.core.pytree import tree_flatten, tree_unflatten
    from nova.numpy_impl.util import asarray

    leaves, tree = tree_flatten(operand)
    if not leaves:
        return operand
    outs = optimization_barrier_p.bind(*[asarray(x) for x in leaves])
    return tree_unflatten(tree, list(outs))


# --- checkpoint_name ----------------------------------------------------------------------------

# The identity that names a value for a checkpoint policy (nova.checkpoint_policies'
# save_only_these_names...): nova.checkpoint reads the name off the equation; compiler/barriers.py
# drops it first thing, so no pass ever sees it; eagerly it is the identity.
checkpoint_name_p = Primitive(
    "checkpoint_name",
    shape_rule=lambda x, *, name: x,
    impl=lambda x, *, name: x,
    vjp=lambda ct, x, *, out, name: (ct,),
    jvp=lambda tangents, x, *, out, name: tangents[0],
    fusion=FusionKind.ELEMENTWISE,
    kernel=Elementwise(lambda b, x, *, name: x),
    batch=lambda args, batched, *, name: checkpoint_name_p.bind(args[0], name=name),
    param_types={"name": str},
)


def checkpoint_name(x, name: str):
    """x (an array or a pytree of arrays) unchanged, named `name` for the policies of
    nova.checkpoint (jax.ad_checkpoint.checkpoint_name): under
    `checkpoint_policies.save_only_these_names(name)` the forward keeps it for the backward
    instead of recomputing it. Raises TypeError when name is not a str."""
    from nova.core.pytree import tree_map
    from nova.numpy_impl.util import asarray

    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name: name must be a str, got {type(name).__name__}")
    return tree_map(lambda leaf: checkpoint_name_p.bind(asarray(leaf), name=name), x)


# --- iota ---------------------------------------------------------------------------------------


def _iota_rule(*, dtype, shape, dimension):
    if any(d < 0 for d in shape):
        raise ValueError(f"iota: negative dimensions are not allowed, got shape {shape}")
    if not 0 <= dimension < len(shape):
        raise ValueError(f"iota: dimension {dimension} out of range for shape {shape}")
    return TensorType(shape, dtype)


def _iota_impl(*, dtype, shape, dimension):
    ar = np.arange(shape[dimension], dtype=dtype)
    view = [1] * len(shape)
    view[dimension] = shape[dimension]
    return np.broadcast_to(ar.reshape(view), shape).copy()


iota_p = Primitive(
    "iota",
    shape_rule=_iota_rule,
    impl=_iota_impl,
    vjp=_no_inputs_vjp,
    jvp=lambda tangents, *, out, **p: ew.zeros_like(out),
    fusion=FusionKind.ELEMENTWISE,
    kernel=IndexMap(lambda b, idx, in_types, *, dtype, shape, dimension: idx[dimension]),
    differentiable=False,
    param_types={"dtype": dtypes.canonicalize, "shape": tuple},
)


def iota(dtype, shape, dimension=0):
    """0, 1, 2, ... along `dimension` of an array of `shape` and `dtype`. `shape` may be an int
    n, as jax.lax.iota(dtype, size)'s: the 1-D [0, n). Raises ValueError for a dimension
    outside the shape."""
    shape = (operator.index(shape),) if isinstance(shape, int | np.integer) else tuple(shape)
    return iota_p.bind(dtype=dtype, shape=shape, dimension=dimension)


def broadcasted_iota(dtype, shape, dimension):
    """jax.lax.broadcasted_iota: an array of `shape` and `dtype` counting along `dimension`."""
    return iota(dtype, tuple(shape), dimension)


# --- broadcast_in_dim ---------------------------------------------------------------------------


def _bcast_rule(x, *, shape, broadcast_dimensions):
    if len(broadcast_dimensions) != x.ndim:
        raise ShapeError(
            f"broadcast_in_dim: operand of shape {x.shape} needs {x.ndim} broadcast dimensions, "
            f"got {broadcast_dimensions}"
        )
    if any(b < a for a, b in zip(broadcast_dimensions, broadcast_dimensions[1:], strict=False)):
        raise ShapeError(f"broadcast_in_dim: dimensions {broadcast_dimensions} must increase")
    for i, d in enumerate(broadcast_dimensions):
        if not 0 <= d < len(shape) or x.shape[i] not in (1, shape[d]):
            raise ShapeError(f"cannot broadcast shape {x.shape} to {shape}")
    return TensorType(shape, x.dtype)


def _bcast_impl(x, *, shape, broadcast_dimensions):
    view = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        view[d] = x.shape[i]
    return np.broadcast_to(x.reshape(view), shape)


def _bcast_vjp(ct, x, *, out, shape, broadcast_dimensions):
    from nova.ops.reduction import reduce_sum

    # Sum over the new dimensions and over the operand's size-1 dimensions that were expanded.
    new = tuple(d for d in range(len(shape)) if d not in broadcast_dimensions)
    expanded = tuple(
        d for i, d in enumerate(broadcast_dimensions) if x.shape[i] == 1 and shape[d] != 1
    )
    axes = tuple(sorted(new + expanded))
    r = reduce_sum(ct, axes) if axes else ct
    return (reshape(r, x.shape),)


def _bcast_index_map(b, idx, in_types, *, shape, broadcast_dimensions):
    (x,) = in_types
    return tuple(
        b.const(0, "index") if x.shape[i] == 1 else idx[d]
        for i, d in enumerate(broadcast_dimensions)
    )


broadcast_in_dim_p = Primitive(
    "broadcast_in_dim",
    shape_rule=_bcast_rule,
    impl=_bcast_impl,
    vjp=_bcast_vjp,
    jvp=lambda t, x, *, out, **p: broadcast_in_dim(t[0], **p),
    fusion=FusionKind.MOVEMENT,
    kernel=IndexMap(_bcast_index_map),
    param_types={"shape": tuple, "broadcast_dimensions": tuple},
    batch=lambda args, batched, *, shape, broadcast_dimensions: broadcast_in_dim_p.bind(
        args[0], shape=(args[0].shape[0], *shape),
        broadcast_dimensions=(0, *(d + 1 for d in broadcast_dimensions))),
)


def broadcast_in_dim(x, shape, broadcast_dimensions):
    shape = tuple(int(d) for d in shape)
    if x.shape == shape and tuple(broadcast_dimensions) == tuple(range(len(shape))):
        return x
    return broadcast_in_dim_p.bind(
        x, shape=shape, broadcast_dimensions=tuple(broadcast_dimensions)
    )


# --- reshape ------------------------------------------------------------------------------------


def _reshape_rule(x, *, new_sizes):
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size or any(d < 0 for d in new_sizes):
        raise ShapeError(f"cannot reshape array of shape {x.shape} (size {x.size}) into {new_sizes}")
    return TensorType(new_sizes, x.dtype)


def _row_major_strides(shape):
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


def _reshape_index_map(b, idx, in_types, *, new_sizes):
    (x,) = in_types
    flat = b.const(0, "index")
    for i, s in zip(idx, _row_major_strides(new_sizes), strict=True):
        flat = b.add(flat, b.mul(i, b.const(s, "index")))
    out = []
    for d, s in zip(x.shape, _row_major_strides(x.shape), strict=True):
        out.append(b.rem(b.div(flat, b.const(s, "index")), b.const(d, "index")))
    return tuple(out)


reshape_p = Primitive(
    "reshape",
    shape_rule=_reshape_rule,
    impl=lambda x, *, new_sizes: x.reshape(new_sizes),
    vjp=lambda ct, x, *, out, new_sizes: (reshape(ct, x.shape),),
    jvp=lambda t, x, *, out, new_sizes: reshape(t[0], new_sizes),
    fusion=FusionKind.MOVEMENT,
    kernel=IndexMap(_reshape_index_map),
    param_types={"new_sizes": lambda s: tuple(int(d) for d in s)},
    batch=lambda args, batched, *, new_sizes: reshape_p.bind(
        args[0], new_sizes=(args[0].shape[0], *new_sizes)),
)


def reshape(x, new_sizes):
    new_sizes = tuple(int(d) for d in new_sizes)
    if x.shape == new_sizes:
        return x
    return reshape_p.bind(x, new_sizes=new_sizes)


# --- transpose ----------------------------------------------------------------------------------


def _transpose_rule(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise ValueError(f"transpose: {permutation} is not a permutation of the {x.ndim} axes of {x.shape}")
    return TensorType(tuple(x.shape[p] for p in permutation), x.dtype)


def _inverse_perm(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _transpose_index_map(b, idx, in_types, *, permutation):
    inv = _inverse_perm(permutation)
    return tuple(idx[inv[a]] for a in range(len(permutation)))


transpose_p = Primitive(
    "transpose",
    shape_rule=_transpose_rule,
    impl=lambda x, *, permutation: np.transpose(x, permutation),
    vjp=lambda ct, x, *, out, permutation: (transpose(ct, _inverse_perm(permutation)),),
    jvp=lambda t, x, *, out, permutation: transpose(t[0], permutation),
    fusion=FusionKind.MOVEMENT,
    kernel=IndexMap(_transpose_index_map),
    param_types={"permutation": tuple},
    batch=lambda args, batched, *, permutation: transpose_p.bind(
        args[0], permutation=(0, *(p + 1 for p in permutation))),
)


def transpose(x, permutation):
    permutation = tuple(int(p) for p in permutation)
    if permutation == tuple(range(len(permutation))):
        return x
    return transpose_p.bind(x, permutation=permutation)
