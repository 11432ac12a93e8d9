"""Collective operations over a named `vmap` axis: psum, pmean, pmax, pmin, all_gather,
psum_scatter, ppermute, pshuffle, all_to_all, axis_index and axis_size, as jax.lax's.

`vmap(f, axis_name="i")` binds the name "i" while f is traced (an `AxisFrame` on `_FRAMES`). A
collective called there records one equation (its primitive, with the axis name and size as
params) on the example's abstract value; when that vmap replays f's Program on the whole batch
(nova/batching.py `_replay`), an equation naming its own axis becomes ordinary Nova ops over the
batch axis (`own_rule`: psum a sum over it, all_gather a move of it, ppermute a gather along it),
and one naming an enclosing vmap's axis is rebound with its axes shifted past the inner batch axis
(the primitive's `batch` rule), to be resolved when that vmap replays. So a collective never
reaches a compiled Program, and composes with grad (in both orders), jit and nested vmaps.
`axis_index` is an extra mapped input of the vmap's trace whose batch is `iota(size)`.

Each primitive's NumPy reference (`impl`) is the result seen by member 0 of an axis over which
the operand is replicated (psum: size * x); vmap evaluates that reference for values that
depend on no mapped argument (`Trace.known_values`) only where it is the same for every member:
ppermute, psum_scatter and all_to_all (`Primitive.axis_varying`) are never evaluated that way.

`axis_index_groups` (a partition of the axis into groups of one size) is a param of the
equation; a collective over a tuple of names is assembled from one all_gather per name
(nova/collectives_groups.py, which states every collective's batch semantics).

Differences from JAX: jax.vmap refuses axis_index_groups (NotImplementedError) and a tuple of
names for all_gather, psum_scatter and ppermute; Nova gives them jax.pmap's and shard_map's
meaning. Groups must have one size (JAX's psum on CPU also takes unequal ones). ppermute
over a tuple numbers the members outermost-vmap-major, as shard_map numbers devices in mesh
order. pmax and pmin have no derivative rules, as in JAX (over a tuple of names with groups
they are computed from an all_gather and are differentiable).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from nova.collectives_groups import check_groups, group_size, over_axes, semantics
from nova.core import dtypes
from nova.core.ir import TensorType
from nova.core.primitive import FusionKind, Primitive, Template
from nova.core.pytree import tree_map

__all__ = ["all_gather", "all_to_all", "axis_index", "axis_size", "pmax", "pmean", "pmin",
           "ppermute", "pshuffle", "psum", "psum_scatter"]


@dataclass
class AxisFrame:
    """A vmap axis bound while its function is traced: its name, size and inner trace."""

    name: object
    size: int
    trace: object
    index: object = None  # axis_index's Tracer (an input of `trace`), made on first use
    index_vars: dict = field(default_factory=dict)  # id(var) of that input -> its Var


_FRAMES: list[AxisFrame] = []  # innermost last
_REPLAYING: list = [None]  # the axis name of the vmap replaying now (innermost last)


def _frame(name, fn: str) -> AxisFrame:
    for f in reversed(_FRAMES):
        if f.name == name:
            return f
    bound = [f.name for f in _FRAMES]
    raise NameError(f"{fn}: unbound axis name: {name!r} (bound here: {bound}; name an axis "
                    f"with nova.vmap(..., axis_name=...))")


def bound_axes() -> bool:
    """Whether some vmap's axis name is bound (jit then re-traces instead of reusing a Program
    traced for another axis size)."""
    return bool(_FRAMES)


def _names(axis_name) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, tuple | list) else (axis_name,)


def _frames(axis_name, fn: str) -> list[AxisFrame]:
    """The frames of axis_name's names, major to minor. Raises ValueError for a repeated name,
    NameError for an unbound one."""
    names = _names(axis_name)
    if len(set(names)) != len(names):
        raise ValueError(f"{fn}: axis_name {axis_name!r} repeats a name")
    return [_frame(n, fn) for n in names]


def _asarray(x):
    from nova.numpy_impl.util import asarray

    return asarray(x)


# --- primitives -----------------------------------------------------------------------------------
# An equation's params: axis_name and axis_size (of one vmap axis), the collective's own, and
# axis_index_groups where given (a checked tuple of tuples; absent or None: the whole axis).


def _same(x, **p):
    return TensorType(x.shape, x.dtype)


def _members(axis_size, groups) -> tuple[int, str]:
    k = group_size(groups, axis_size)
    return k, (f"the group size {k}" if groups else f"the axis size {k}")


def _gather_rule(x, *, axis_name, axis_size, axis, tiled, axis_index_groups=None):
    if not 0 <= axis <= (x.ndim - 1 if tiled else x.ndim):
        raise ValueError(f"all_gather: axis {axis} is out of range for an operand of shape "
                         f"{tuple(x.shape)}{' (tiled)' if tiled else ''}")
    k, _ = _members(axis_size, axis_index_groups)
    shape = list(x.shape)
    if tiled:
        shape[axis] *= k
    else:
        shape.insert(axis, k)
    return TensorType(tuple(shape), x.dtype)


def _split(fn: str, what: str, x, d: int, axis_size: int, groups, tiled: bool) -> list:
    """x's shape with axis d split over the k members a collective combines: divided by k
    (tiled; a multiple of k) or removed (it must equal k). Raises ValueError otherwise."""
    k, named = _members(axis_size, groups)
    shape = list(x.shape)
    if tiled and shape[d] % k or not tiled and shape[d] != k:
        need = f"a multiple of {named}" if tiled else f"equal to {named}"
        raise ValueError(f"{fn}: {what} {d} of the operand of shape {tuple(x.shape)} must be "
                         f"{need}")
    if tiled:
        shape[d] //= k
    else:
        del shape[d]
    return shape


def _scatter_rule(x, *, axis_name, axis_size, scatter_dimension, tiled, axis_index_groups=None):
    d = scatter_dimension
    if not 0 <= d < x.ndim:
        raise ValueError(f"psum_scatter: scatter_dimension {d} is out of range for an operand "
                         f"of shape {tuple(x.shape)}")
    return TensorType(tuple(_split("psum_scatter", "dimension", x, d, axis_size,
                                   axis_index_groups, tiled)), x.dtype)


def _permute_rule(x, *, axis_name, axis_size, perm):
    srcs, dsts = [s for s, _ in perm], [d for _, d in perm]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts) or \
            not all(0 <= i < axis_size for i in srcs + dsts):
        raise ValueError(f"ppermute: perm {perm} must pair distinct sources with distinct "
                         f"destinations in range({axis_size})")
    return TensorType(x.shape, x.dtype)


def _a2a_rule(x, *, axis_name, axis_size, split_axis, concat_axis, tiled,
              axis_index_groups=None):
    if not 0 <= split_axis < x.ndim or not 0 <= concat_axis < x.ndim:
        raise ValueError(f"all_to_all: split_axis {split_axis} and concat_axis {concat_axis} "
                         f"must be axes of the operand of shape {tuple(x.shape)}")
    shape = _split("all_to_all", "split axis", x, split_axis, axis_size, axis_index_groups,
                   tiled)
    k, _ = _members(axis_size, axis_index_groups)
    if tiled:
        shape[concat_axis] *= k
    else:
        shape.insert(concat_axis, k)
    return TensorType(tuple(shape), x.dtype)


def _reference(name):
    """A reference: the collective on a replicated operand, as member 0 sees it (psum: k * x
    for groups of k members, as JAX's psum of a constant; pmax and pmin: x)."""
    def impl(x, *, axis_name, axis_size, **p):
        if name == "psum":
            return x * np.asarray(group_size(p.get("axis_index_groups"), axis_size), x.dtype)
        if name in ("pmax", "pmin"):
            return np.array(x)
        xs = np.broadcast_to(x, (axis_size, *np.shape(x)))
        out, per_member = semantics(np, name, xs, p)
        return np.array(out[0] if per_member else out)
    return impl


def _rebind(name, **shifts):
    def batch(vals, flags, **params):
        from nova.core.primitive import broadcast_batched

        (x,) = broadcast_batched(vals, flags)
        return PRIMS[name].bind(x, **dict(params, **{k: params[k] + 1 for k in shifts}))
    return batch


def _no_derivative(name):
    def rule(*args, **kwargs):
        raise NotImplementedError(f"Differentiation rule for '{name}' not implemented (as in "
                                  "JAX); use psum of a one-hot mask or a sort-based max")
    return rule


def _prim(name, rule, vjp, jvp, varying=False, **shifts):
    p = Primitive(name, shape_rule=rule, impl=_reference(name), vjp=vjp, jvp=jvp,
                  fusion=FusionKind.OPAQUE, kernel=Template("collective"),
                  batch=_rebind(name, **shifts), param_types={"perm": _perm_param},
                  axis_varying=varying)
    PRIMS[name] = p
    return p


def _perm_param(perm):
    return tuple((int(s), int(d)) for s, d in perm)


def _renamed(p, old, new):
    """The params p with the param `old` renamed `new` (all_gather's axis is psum_scatter's
    scatter_dimension)."""
    q = dict(p)
    q[new] = q.pop(old)
    return q


PRIMS: dict[str, Primitive] = {}

psum_p = _prim("psum", _same, vjp=lambda ct, x, *, out, **p: (psum_p.bind(ct, **p),),
               jvp=lambda t, x, *, out, **p: psum_p.bind(t[0], **p))
pmax_p = _prim("pmax", _same, _no_derivative("pmax"), _no_derivative("pmax"))
pmin_p = _prim("pmin", _same, _no_derivative("pmin"), _no_derivative("pmin"))
all_gather_p = _prim(
    "all_gather", _gather_rule,
    vjp=lambda ct, x, *, out, **p: (psum_scatter_p.bind(
        ct, **_renamed(p, "axis", "scatter_dimension")),),
    jvp=lambda t, x, *, out, **p: all_gather_p.bind(t[0], **p), axis=1)
psum_scatter_p = _prim(
    "psum_scatter", _scatter_rule,
    vjp=lambda ct, x, *, out, **p: (all_gather_p.bind(
        ct, **_renamed(p, "scatter_dimension", "axis")),),
    jvp=lambda t, x, *, out, **p: psum_scatter_p.bind(t[0], **p), varying=True,
    scatter_dimension=1)
ppermute_p = _prim(
    "ppermute", _permute_rule,
    vjp=lambda ct, x, *, out, perm, **p: (ppermute_p.bind(
        ct, perm=tuple((d, s) for s, d in perm), **p),),
    jvp=lambda t, x, *, out, **p: ppermute_p.bind(t[0], **p), varying=True)
all_to_all_p = _prim(
    "all_to_all", _a2a_rule,
    vjp=lambda ct, x, *, out, split_axis, concat_axis, **p: (all_to_all_p.bind(
        ct, split_axis=concat_axis, concat_axis=split_axis, **p),),
    jvp=lambda t, x, *, out, **p: all_to_all_p.bind(t[0], **p), varying=True,
    split_axis=1, concat_axis=1)

COLLECTIVES = frozenset(PRIMS)


def own_rule(e, x, mapped: bool, size: int):
    """The equation e of a collective over the replaying vmap's own axis, as Nova ops on the
    operand x (batch along axis 0 when mapped): (result, whether it is mapped)."""
    import nova.numpy as jnp

    name, p = e.prim.name, {k: v for k, v in e.params.items()
                            if k not in ("axis_name", "axis_size")}
    if not mapped:
        if name == "psum":
            k = group_size(p.get("axis_index_groups"), size)
            return x * jnp.asarray(k, x.dtype), False
        if name in ("pmax", "pmin"):
            return x, False
        x = jnp.broadcast_to(x, (size, *x.shape))
    return semantics(jnp, name, x, p)


# --- user functions -------------------------------------------------------------------------------


def _bind(name, x, axis_name, groups=None, **params):
    """The collective `name` on each leaf of x over axis_name (one name: one equation; a tuple
    of names: `over_axes`); params may depend on the leaf (a function of it)."""
    frames = _frames(axis_name, name)
    size = math.prod(f.size for f in frames)
    groups = check_groups(groups, size, name)
    extra = {} if groups is None else {"axis_index_groups": groups}

    def one(leaf):
        a = _asarray(leaf)
        p = {k: (v(a) if callable(v) else v) for k, v in params.items()} | extra
        if len(frames) == 1:
            return PRIMS[name].bind(a, axis_name=frames[0].name, axis_size=size, **p)
        return over_axes(name, a, frames, p)

    return tree_map(one, x)


def _reduce(name, x, axis_name, groups):
    """psum, pmax or pmin: without groups, one equation per name (each resolved by its vmap)."""
    if groups is not None or len(_names(axis_name)) == 1:
        return _bind(name, x, axis_name, groups)
    frames = _frames(axis_name, name)

    def one(leaf):
        a = _asarray(leaf)
        for f in frames:
            a = PRIMS[name].bind(a, axis_name=f.name, axis_size=f.size)
        return a

    return tree_map(one, x)


def psum(x, axis_name, *, axis_index_groups=None):
    """Sum of x over the members of the named vmap axis (or axes), as jax.lax.psum.

    x: a pytree of arrays (or Python scalars) of any shapes and dtypes; every member receives
    the same sum, of x's shapes and dtypes. axis_name: the name given to an enclosing
    `nova.vmap(..., axis_name=...)`, or a tuple of names (the sum over all of them).
    psum(1, "i") is the axis size (the group size with groups); bool leaves are summed as
    int32 counts. Its VJP is psum of the cotangent (JAX's rule).

    axis_index_groups: None (the whole axis), or a partition of range(axis size) (for a tuple
    of names, of the flattened axis) into groups of one size k, as lists of indices: each
    member then sums only over its group. (JAX's jax.vmap refuses groups, its pmap takes
    them; its psum on CPU also takes groups of unequal sizes, which Nova refuses.)
    Raises NameError for an unbound axis name, TypeError for non-integer group indices,
    ValueError naming the groups for a repeated, missing or out-of-range index, and
    GroupSizeError (a ValueError, and a NotImplementedError) for groups of unequal sizes.
    """
    def counted(leaf):  # a bool sums as int32 counts, as in JAX
        a = _asarray(leaf)
        return a.astype(dtypes.int32) if a.dtype == dtypes.bool_ else a

    return _reduce("psum", tree_map(counted, x), axis_name, axis_index_groups)


def pmax(x, axis_name, *, axis_index_groups=None):
    """Elementwise maximum of x over the members of the named axis (or axes), as
    jax.lax.pmax; otherwise as `psum`. A grad inside the vmap raises NotImplementedError, as
    JAX (except over a tuple of names with groups, computed from an all_gather); from outside
    the vmap it is a max over the batch axis (derivative to the maximal member), where JAX
    raises."""
    return _reduce("pmax", x, axis_name, axis_index_groups)


def pmin(x, axis_name, *, axis_index_groups=None):
    """Elementwise minimum of x over the members of the named axis (or axes), as
    jax.lax.pmin; as `pmax`."""
    return _reduce("pmin", x, axis_name, axis_index_groups)


def pmean(x, axis_name, *, axis_index_groups=None):
    """Mean of x over the members of the named axis (or axes), or of each group, as
    jax.lax.pmean: psum(x) divided by the axis (or group) size (integer x gives a float result,
    as true division). axis_index_groups: as `psum`."""
    size = axis_size(axis_name)
    n = group_size(check_groups(axis_index_groups, size, "pmean"), size)
    return tree_map(lambda s: s / n, psum(x, axis_name, axis_index_groups=axis_index_groups))


def axis_size(axis_name) -> int:
    """The size of the named vmap axis (the product for a tuple of names), a Python int, as
    jax.lax.axis_size. Raises NameError for an unbound name."""
    size = 1
    for n in _names(axis_name):
        size *= _frame(n, "axis_size").size
    return size


def axis_index(axis_name):
    """The index of the current member along the named vmap axis: an int32 scalar (0 .. size-1),
    as jax.lax.axis_index; for a tuple of names the row-major index over them. Raises NameError
    for an unbound name."""
    from nova.ops import lax

    idx = None
    for n in _names(axis_name):
        f = _frame(n, "axis_index")
        if f.index is None:
            f.index = f.trace.new_input(TensorType((), dtypes.int32), name=f"axis_index({n})")
            f.index_vars[id(f.index._var)] = f.index._var
        idx = f.index if idx is None else lax.add(lax.mul(idx, lax.full_like(idx, f.size)),
                                                  f.index)
    return idx


def _axis(i, ndim):
    return int(i + ndim if i < 0 else i)


def all_gather(x, axis_name, *, axis_index_groups=None, axis: int = 0, tiled: bool = False):
    """Every member's x, stacked along a new axis `axis` (tiled: concatenated along the
    existing axis `axis`), as jax.lax.all_gather.

    x: a pytree of arrays; each leaf of shape S gives shape S with the axis size (the group
    size with groups) inserted at `axis` (tiled: S[axis] multiplied by it), the same on every
    member (of a group). axis_name: one name, or a tuple of names: one axis flattened from
    them, major to minor in the order given (JAX's jax.vmap refuses a tuple here; its pmap
    and shard_map take it). Its VJP is psum_scatter. Raises NameError for an unbound name,
    ValueError for an axis out of range, and for axis_index_groups as `psum` (a member
    receives its group's values, in the group's order).
    """
    def ax(a):
        return int(axis + (a.ndim + (0 if tiled else 1)) if axis < 0 else axis)

    return _bind("all_gather", x, axis_name, axis_index_groups, axis=ax,
                 tiled=bool(tiled))


def psum_scatter(x, axis_name, *, scatter_dimension: int = 0, axis_index_groups=None,
                 tiled: bool = False):
    """psum of x, of which member j (of the axis, or at position j of its group) keeps block j
    along scatter_dimension, as jax.lax.psum_scatter. Not tiled, x.shape[scatter_dimension]
    must equal the axis (or group) size and that dimension is removed; tiled, it must be a
    multiple and is divided by that size. axis_name: one name or a tuple, as `all_gather`.
    Its VJP is all_gather. Raises NameError for an unbound name, ValueError for a dimension
    of the wrong size, and for axis_index_groups as `psum`.
    """
    return _bind("psum_scatter", x, axis_name, axis_index_groups,
                 scatter_dimension=lambda a: _axis(scatter_dimension, a.ndim),
                 tiled=bool(tiled))


def ppermute(x, axis_name, perm):
    """Member d receives member s's x for each pair (s, d) in perm; members no pair names as a
    destination receive zeros, as jax.lax.ppermute. x: a pytree of arrays (shapes and dtypes
    kept). axis_name: one name, or a tuple of names whose members perm numbers along one
    flattened axis, the outermost vmap's major whatever the tuple's order: as JAX's ppermute
    numbers the devices of a tuple of mesh axes in the mesh's order (while its axis_index and
    all_gather follow the tuple's). Its VJP is ppermute with the pairs reversed. Raises
    NameError for an unbound name, ValueError for repeated or out-of-range indices in perm."""
    names = _names(axis_name)
    if len(names) > 1:
        depth = {n: i for i, n in enumerate(f.name for f in _FRAMES)}
        names = tuple(sorted(names, key=lambda n: depth.get(n, -1)))
    return _bind("ppermute", x, names, perm=_perm_param(perm))


def pshuffle(x, axis_name, perm):
    """Member i receives member perm[i]'s x, as jax.lax.pshuffle (perm: a permutation of
    range(axis size); a tuple of names as `ppermute`). Raises ValueError when perm is not
    one."""
    n = axis_size(axis_name)
    if sorted(int(p) for p in perm) != list(range(n)):
        raise ValueError(f"pshuffle: perm {tuple(perm)} is not a permutation of range({n})")
    return ppermute(x, axis_name, [(int(s), d) for d, s in enumerate(perm)])


def all_to_all(x, axis_name, split_axis: int, concat_axis: int, *, axis_index_groups=None,
               tiled: bool = False):
    """Member j (of the axis, or at position j of its group) receives block j of every
    member's split_axis, joined along concat_axis, as jax.lax.all_to_all. Not tiled,
    x.shape[split_axis] must equal the axis (or group) size: that axis is removed and a new
    one of that size is inserted at concat_axis. Tiled, split_axis is divided by that size and
    concat_axis multiplied by it. axis_name: one name or a tuple, as `all_gather`. Raises
    NameError for an unbound name, ValueError for axes out of range or of the wrong size.
    axis_index_groups: as `psum`.
    """
    return _bind("all_to_all", x, axis_name, axis_index_groups,
                 split_axis=lambda a: _axis(split_axis, a.ndim),
                 concat_axis=lambda a: _axis(concat_axis, a.ndim), tiled=bool(tiled))
