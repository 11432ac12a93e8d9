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

Differences from JAX: `axis_index_groups` is not supported (NotImplementedError); all_gather,
psum_scatter, ppermute and all_to_all take one axis name (psum, pmean, pmax, pmin, axis_index
and axis_size also a tuple of names); pmax and pmin have no derivative rules (as in JAX).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

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


def _one_name(axis_name, fn: str):
    names = _names(axis_name)
    if len(names) != 1:
        raise NotImplementedError(f"{fn}: one axis name is supported, got {axis_name!r}")
    return names[0]


def _no_groups(groups, fn: str) -> None:
    if groups is not None:
        raise NotImplementedError(f"{fn}: axis_index_groups is not supported")


def _asarray(x):
    from nova.numpy_impl.util import asarray

    return asarray(x)


# --- batch semantics, over either namespace (numpy for references, nova.numpy for replays) -----


def _move(xp, x, src, dst):
    return xp.moveaxis(x, src, dst)


def _gathered(xp, xs, axis, tiled):
    """all_gather on the batch xs (members along axis 0): what every member receives."""
    out = _move(xp, xs, 0, axis)
    if tiled:
        shape = list(xs.shape[1:])
        shape[axis] *= xs.shape[0]
        out = xp.reshape(out, tuple(shape))
    return out


def _scattered(xp, xs, scatter_dimension, tiled):
    """psum_scatter on the batch xs: the batch of each member's block (members along 0)."""
    n, dim = xs.shape[0], scatter_dimension
    s = xp.sum(xs, axis=0)
    if tiled:
        shape = s.shape
        s = xp.reshape(s, (*shape[:dim], n, shape[dim] // n, *shape[dim + 1:]))
    return _move(xp, s, dim, 0)


def _permuted(xp, xs, perm):
    """ppermute on the batch xs: member d receives member s's value for (s, d) in perm,
    zeros where no pair names d."""
    n = xs.shape[0]
    src = {d: s for s, d in perm}
    parts = [xs[src[d]] if d in src else xp.zeros_like(xs[0]) for d in range(n)]
    return xp.stack(parts, axis=0)


def _exchanged(xp, xs, split_axis, concat_axis, tiled):
    """all_to_all on the batch xs: member j receives block j of every member's split axis."""
    n, concat = xs.shape[0], concat_axis
    s = split_axis + 1  # axes of a member, shifted past the batch axis
    if tiled:
        shape = xs.shape
        blocks = xp.reshape(xs, (*shape[:s], n, shape[s] // n, *shape[s + 1:]))
        blocks = _move(xp, blocks, s, 0)  # (dest j, source i, ...member axes with block)
        out = _move(xp, blocks, 1, concat + 1)  # source i before the concat axis
        shape = list(out.shape)
        merged = shape[:concat + 1] + [shape[concat + 1] * shape[concat + 2]] + shape[concat + 3:]
        return xp.reshape(out, tuple(merged))
    blocks = _move(xp, xs, s, 0)  # (dest j, source i, ...member axes without split)
    return _move(xp, blocks, 1, concat + 1)


# --- primitives -----------------------------------------------------------------------------------


def _same(x, **p):
    return TensorType(x.shape, x.dtype)


def _gather_rule(x, *, axis_name, axis_size, axis, tiled):
    if not 0 <= axis <= (x.ndim - 1 if tiled else x.ndim):
        raise ValueError(f"all_gather: axis {axis} is out of range for an operand of shape "
                         f"{tuple(x.shape)}{' (tiled)' if tiled else ''}")
    shape = list(x.shape)
    if tiled:
        shape[axis] *= axis_size
    else:
        shape.insert(axis, axis_size)
    return TensorType(tuple(shape), x.dtype)


def _split(fn: str, what: str, x, d: int, n: int, tiled: bool) -> list:
    """x's shape with axis d split over n members: divided by n (tiled; a multiple of n) or
    removed (it must equal n). Raises ValueError otherwise."""
    shape = list(x.shape)
    if tiled and shape[d] % n or not tiled and shape[d] != n:
        need = f"a multiple of {n}" if tiled else f"equal to the axis size {n}"
        raise ValueError(f"{fn}: {what} {d} of the operand of shape {tuple(x.shape)} must be "
                         f"{need}")
    if tiled:
        shape[d] //= n
    else:
        del shape[d]
    return shape


def _scatter_rule(x, *, axis_name, axis_size, scatter_dimension, tiled):
    d = scatter_dimension
    if not 0 <= d < x.ndim:
        raise ValueError(f"psum_scatter: scatter_dimension {d} is out of range for an operand "
                         f"of shape {tuple(x.shape)}")
    return TensorType(tuple(_split("psum_scatter", "dimension", x, d, axis_size, tiled)),
                      x.dtype)


def _permute_rule(x, *, axis_name, axis_size, perm):
    srcs, dsts = [s for s, _ in perm], [d for _, d in perm]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts) or \
            not all(0 <= i < axis_size for i in srcs + dsts):
        raise ValueError(f"ppermute: perm {perm} must pair distinct sources with distinct "
                         f"destinations in range({axis_size})")
    return TensorType(x.shape, x.dtype)


def _a2a_rule(x, *, axis_name, axis_size, split_axis, concat_axis, tiled):
    if not 0 <= split_axis < x.ndim or not 0 <= concat_axis < x.ndim:
        raise ValueError(f"all_to_all: split_axis {split_axis} and concat_axis {concat_axis} "
                         f"must be axes of the operand of shape {tuple(x.shape)}")
    shape = _split("all_to_all", "split axis", x, split_axis, axis_size, tiled)
    if tiled:
        shape[concat_axis] *= axis_size
    else:
        shape.insert(concat_axis, axis_size)
    return TensorType(tuple(shape), x.dtype)


def _replicated(fn):
    """A reference: fn's batch semantics on a replicated operand, as member 0 sees it."""
    def impl(x, *, axis_name, axis_size, **p):
        xs = np.broadcast_to(x, (axis_size, *np.shape(x)))
        return np.asarray(fn(np, xs, **p))
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


def _prim(name, rule, impl, vjp, jvp, varying=False, **shifts):
    p = Primitive(name, shape_rule=rule, impl=impl, vjp=vjp, jvp=jvp,
                  fusion=FusionKind.OPAQUE, kernel=Template("collective"),
                  batch=_rebind(name, **shifts), param_types={"perm": _perm_param},
                  axis_varying=varying)
    PRIMS[name] = p
    return p


def _perm_param(perm):
    return tuple((int(s), int(d)) for s, d in perm)


PRIMS: dict[str, Primitive] = {}

psum_p = _prim("psum", _same, lambda x, *, axis_name, axis_size: x * np.asarray(axis_size, x.dtype),
               vjp=lambda ct, x, *, out, **p: (psum_p.bind(ct, **p),),
               jvp=lambda t, x, *, out, **p: psum_p.bind(t[0], **p))
pmax_p = _prim("pmax", _same, lambda x, **p: np.array(x), _no_derivative("pmax"),
               _no_derivative("pmax"))
pmin_p = _prim("pmin", _same, lambda x, **p: np.array(x), _no_derivative("pmin"),
               _no_derivative("pmin"))
all_gather_p = _prim(
    "all_gather", _gather_rule, _replicated(_gathered),
    vjp=lambda ct, x, *, out, axis_name, axis_size, axis, tiled: (psum_scatter_p.bind(
        ct, axis_name=axis_name, axis_size=axis_size, scatter_dimension=axis, tiled=tiled),),
    jvp=lambda t, x, *, out, **p: all_gather_p.bind(t[0], **p), axis=1)
psum_scatter_p = _prim(
    "psum_scatter", _scatter_rule, lambda x, **p: _replicated(_scattered)(x, **p)[0],
    vjp=lambda ct, x, *, out, axis_name, axis_size, scatter_dimension, tiled: (all_gather_p.bind(
        ct, axis_name=axis_name, axis_size=axis_size, axis=scatter_dimension, tiled=tiled),),
    jvp=lambda t, x, *, out, **p: psum_scatter_p.bind(t[0], **p), varying=True,
    scatter_dimension=1)
ppermute_p = _prim(
    "ppermute", _permute_rule, lambda x, **p: _replicated(_permuted)(x, **p)[0],
    vjp=lambda ct, x, *, out, perm, **p: (ppermute_p.bind(
        ct, perm=tuple((d, s) for s, d in perm), **p),),
    jvp=lambda t, x, *, out, **p: ppermute_p.bind(t[0], **p), varying=True)
all_to_all_p = _prim(
    "all_to_all", _a2a_rule, lambda x, **p: _replicated(_exchanged)(x, **p)[0],
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
            return x * jnp.asarray(size, x.dtype), False
        if name in ("pmax", "pmin"):
            return x, False
        x = jnp.broadcast_to(x, (size, *x.shape))
    if name == "psum":
        return jnp.sum(x, axis=0, dtype=x.dtype), False
    if name in ("pmax", "pmin"):
        return (jnp.max if name == "pmax" else jnp.min)(x, axis=0), False
    if name == "all_gather":
        return _gathered(jnp, x, p["axis"], p["tiled"]), False
    if name == "psum_scatter":
        return _scattered(jnp, x, p["scatter_dimension"], p["tiled"]), True
    if name == "ppermute":
        return _permuted(jnp, x, p["perm"]), True
    return _exchanged(jnp, x, p["split_axis"], p["concat_axis"], p["tiled"]), True


# --- user functions -------------------------------------------------------------------------------


def _reduce(prim, fn, x, axis_name):
    names = _names(axis_name)
    frames = [_frame(n, fn) for n in names]

    def one(leaf):
        a = _asarray(leaf)
        for f in frames:
            a = prim.bind(a, axis_name=f.name, axis_size=f.size)
        return a

    return tree_map(one, x)


def psum(x, axis_name, *, axis_index_groups=None):
    """Sum of x over the members of the named vmap axis (or axes), as jax.lax.psum.

    x: a pytree of arrays (or Python scalars) of any shapes and dtypes; every member receives
    the same sum, of x's shapes and dtypes. axis_name: the name given to an enclosing
    `nova.vmap(..., axis_name=...)`, or a tuple of names (the sum over all of them).
    psum(1, "i") is the axis size; bool leaves are summed as int32 counts. Its VJP is psum of
    the cotangent (JAX's rule).
    Raises NameError for an unbound axis name, NotImplementedError for axis_index_groups.
    """
    _no_groups(axis_index_groups, "psum")

    def counted(leaf):  # a bool sums as int32 counts, as in JAX
        a = _asarray(leaf)
        return a.astype(dtypes.int32) if a.dtype == dtypes.bool_ else a

    return _reduce(psum_p, "psum", tree_map(counted, x), axis_name)


def pmax(x, axis_name, *, axis_index_groups=None):
    """Elementwise maximum of x over the members of the named axis (or axes), as
    jax.lax.pmax; otherwise as `psum`. A grad inside the vmap raises NotImplementedError, as
    JAX; differentiated from outside the vmap it is a max over the batch axis (derivative to
    the maximal member), where JAX raises."""
    _no_groups(axis_index_groups, "pmax")
    return _reduce(pmax_p, "pmax", x, axis_name)


def pmin(x, axis_name, *, axis_index_groups=None):
    """Elementwise minimum of x over the members of the named axis (or axes), as
    jax.lax.pmin; as `pmax`."""
    _no_groups(axis_index_groups, "pmin")
    return _reduce(pmin_p, "pmin", x, axis_name)


def pmean(x, axis_name, *, axis_index_groups=None):
    """Mean of x over the members of the named axis (or axes), as jax.lax.pmean: psum(x)
    divided by the axis size (integer x gives a float result, as true division)."""
    _no_groups(axis_index_groups, "pmean")
    n = axis_size(axis_name)
    return tree_map(lambda s: s / n, psum(x, axis_name))


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


def all_gather(x, axis_name, *, axis_index_groups=None, axis: int = 0, tiled: bool = False):
    """Every member's x, stacked along a new axis `axis` (tiled: concatenated along the
    existing axis `axis`), as jax.lax.all_gather.

    x: a pytree of arrays; each leaf of shape S gives shape S with the axis size inserted at
    `axis` (tiled: S with S[axis] multiplied by it), the same on every member. Its VJP is
    psum_scatter. Raises NameError for an unbound name, ValueError for an axis out of range.
    """
    _no_groups(axis_index_groups, "all_gather")
    f = _frame(_one_name(axis_name, "all_gather"), "all_gather")

    def one(leaf):
        a = _asarray(leaf)
        ax = axis + (a.ndim + (0 if tiled else 1)) if axis < 0 else axis
        return all_gather_p.bind(a, axis_name=f.name, axis_size=f.size, axis=int(ax),
                                 tiled=bool(tiled))

    return tree_map(one, x)


def psum_scatter(x, axis_name, *, scatter_dimension: int = 0, axis_index_groups=None,
                 tiled: bool = False):
    """psum of x, of which member j keeps block j along scatter_dimension, as
    jax.lax.psum_scatter. Not tiled, x.shape[scatter_dimension] must equal the axis size and
    that dimension is removed; tiled, it must be a multiple and is divided by the axis size.
    Raises NameError for an unbound name, ValueError for a dimension of the wrong size."""
    _no_groups(axis_index_groups, "psum_scatter")
    f = _frame(_one_name(axis_name, "psum_scatter"), "psum_scatter")

    def one(leaf):
        a = _asarray(leaf)
        d = scatter_dimension + a.ndim if scatter_dimension < 0 else scatter_dimension
        return psum_scatter_p.bind(a, axis_name=f.name, axis_size=f.size,
                                   scatter_dimension=int(d), tiled=bool(tiled))

    return tree_map(one, x)


def ppermute(x, axis_name, perm):
    """Member d receives member s's x for each pair (s, d) in perm; members no pair names as a
    destination receive zeros, as jax.lax.ppermute. x: a pytree of arrays (shapes and dtypes
    kept). Its VJP is ppermute with the pairs reversed. Raises NameError for an unbound name,
    ValueError for repeated or out-of-range indices in perm."""
    f = _frame(_one_name(axis_name, "ppermute"), "ppermute")
    pairs = _perm_param(perm)
    return tree_map(lambda leaf: ppermute_p.bind(_asarray(leaf), axis_name=f.name,
                                                 axis_size=f.size, perm=pairs), x)


def pshuffle(x, axis_name, perm):
    """Member i receives member perm[i]'s x, as jax.lax.pshuffle (perm: a permutation of
    range(axis size)). Raises ValueError when perm is not one."""
    n = axis_size(axis_name)
    if sorted(int(p) for p in perm) != list(range(n)):
        raise ValueError(f"pshuffle: perm {tuple(perm)} is not a permutation of range({n})")
    return ppermute(x, axis_name, [(int(s), d) for d, s in enumerate(perm)])


def all_to_all(x, axis_name, split_axis: int, concat_axis: int, *, axis_index_groups=None,
               tiled: bool = False):
    """Member j receives block j of every member's split_axis, joined along concat_axis, as
    jax.lax.all_to_all. Not tiled, x.shape[split_axis] must equal the axis size: that axis is
    removed and a new one of the axis size is inserted at concat_axis. Tiled, split_axis is
    divided by the axis size and concat_axis multiplied by it. Raises NameError for an
    unbound name, ValueError for axes out of range or of the wrong size."""
    _no_groups(axis_index_groups, "all_to_all")
    f = _frame(_one_name(axis_name, "all_to_all"), "all_to_all")

    def one(leaf):
        a = _asarray(leaf)
        s = split_axis + a.ndim if split_axis < 0 else split_axis
        c = concat_axis + a.ndim if concat_axis < 0 else concat_axis
        return all_to_all_p.bind(a, axis_name=f.name, axis_size=f.size, split_axis=int(s),
                                 concat_axis=int(c), tiled=bool(tiled))

    return tree_map(one, x)
