"""What each member of a named axis receives from a collective, with `axis_index_groups`, and
the collectives over a tuple of axis names (one flattened axis).

`semantics(xp, name, xs, params)` is the one statement of every collective's meaning: xs is a
batch whose axis 0 holds the members of the axis, xp the namespace it runs in (numpy for the
primitives' references, nova.numpy when a vmap replays an equation over its own axis;
nova/collectives.py `own_rule`). With groups (a partition of range(axis size) into groups of
one size k; member m has position pos[m] in its group, in the order the group lists it), the
members are first reordered position-major into a (k, g, ...) batch, so that the ungrouped
rule, applied with every member axis shifted past the g axis, acts on each group at once.

A collective over a tuple of names cannot be one equation: each name is resolved by its own
vmap, at a different replay. `over_axes` gathers the operand over all the names (one
all_gather per name, minor first: every member then holds the same (n, ...) batch, major to
minor in the order given), applies `semantics` to it, and keeps the row of the member's
flattened `axis_index`. Under vmap the gathered batch does not vary over the members, so the
work is that of the single-axis rule; the derivative comes from all_gather's (psum_scatter)
and the row selection's.
"""

from __future__ import annotations

import math
import operator
from collections import Counter

import numpy as np


class GroupSizeError(ValueError, NotImplementedError):
    """axis_index_groups of unequal sizes. Nova requires one size (ValueError); JAX's psum
    accepts unequal groups on CPU and GPU, which Nova does not support (NotImplementedError)."""


def check_groups(groups, size: int, fn: str) -> tuple | None:
    """groups as a tuple of tuples of ints, checked to partition range(size) into groups of one
    size. Raises TypeError for non-integer indices, ValueError for a repeated index, one out
    of range or one missing, GroupSizeError (a ValueError) for groups of unequal sizes."""
    if groups is None:
        return None
    try:
        canon = tuple(tuple(operator.index(i) for i in g) for g in groups)
    except TypeError:
        raise TypeError(f"{fn}: axis_index_groups must be a sequence of sequences of ints, got "
                        f"{groups!r}") from None
    if not canon or not all(canon):
        raise ValueError(f"{fn}: axis_index_groups {canon} must be non-empty groups")
    flat = [i for g in canon for i in g]
    repeated = sorted(i for i, count in Counter(flat).items() if count > 1)
    if repeated:
        raise ValueError(f"{fn}: axis_index_groups {canon} repeat the indices {repeated}")
    outside = sorted(i for i in flat if not 0 <= i < size)
    if outside:
        raise ValueError(f"{fn}: axis_index_groups {canon} hold the indices {outside}, out of "
                         f"range for an axis of size {size}")
    missing = sorted(set(range(size)) - set(flat))
    if missing:
        raise ValueError(f"{fn}: axis_index_groups {canon} do not cover the indices {missing} "
                         f"of an axis of size {size}")
    sizes = [len(g) for g in canon]
    if len(set(sizes)) > 1:
        raise GroupSizeError(f"{fn}: axis_index_groups {canon} have sizes {sizes}; Nova needs "
                             "groups of one size")
    return canon


def group_size(groups, size: int) -> int:
    """The number of members a collective combines: the group size, else the axis size."""
    return len(groups[0]) if groups else size


# --- the ungrouped rules: xs holds the n members along axis 0 ------------------------------------


def _gathered(xp, xs, axis, tiled):
    """all_gather: what every member receives."""
    out = xp.moveaxis(xs, 0, axis)
    if tiled:
        shape = list(xs.shape[1:])
        shape[axis] *= xs.shape[0]
        out = xp.reshape(out, tuple(shape))
    return out


def _scattered(xp, xs, scatter_dimension, tiled):
    """psum_scatter: the batch of each member's block (members along 0)."""
    n, dim = xs.shape[0], scatter_dimension
    s = xp.sum(xs, axis=0, dtype=xs.dtype)
    if tiled:
        shape = s.shape
        s = xp.reshape(s, (*shape[:dim], n, shape[dim] // n, *shape[dim + 1:]))
    return xp.moveaxis(s, dim, 0)


def _permuted(xp, xs, perm):
    """ppermute: member d receives member s's value for (s, d) in perm, zeros where no pair
    names d."""
    src = {d: s for s, d in perm}
    parts = [xs[src[d]] if d in src else xp.zeros_like(xs[0]) for d in range(xs.shape[0])]
    return xp.stack(parts, axis=0)


def _exchanged(xp, xs, split_axis, concat_axis, tiled):
    """all_to_all: member j receives block j of every member's split axis."""
    n, concat = xs.shape[0], concat_axis
    s = split_axis + 1  # axes of a member, shifted past the batch axis
    if tiled:
        shape = xs.shape
        blocks = xp.reshape(xs, (*shape[:s], n, shape[s] // n, *shape[s + 1:]))
        blocks = xp.moveaxis(blocks, s, 0)  # (dest j, source i, ...member axes with block)
        out = xp.moveaxis(blocks, 1, concat + 1)  # source i before the concat axis
        shape = list(out.shape)
        merged = shape[:concat + 1] + [shape[concat + 1] * shape[concat + 2]] + shape[concat + 3:]
        return xp.reshape(out, tuple(merged))
    blocks = xp.moveaxis(xs, s, 0)  # (dest j, source i, ...member axes without split)
    return xp.moveaxis(blocks, 1, concat + 1)


def _rule(xp, name, xs, p, shift=0):
    """The ungrouped rule on xs, each member axis moved `shift` places right: (value,
    whether it is one row per member)."""
    if name == "psum":
        return xp.sum(xs, axis=0, dtype=xs.dtype), False
    if name in ("pmax", "pmin"):
        return (xp.max if name == "pmax" else xp.min)(xs, axis=0), False
    if name == "all_gather":
        return _gathered(xp, xs, p["axis"] + shift, p["tiled"]), False
    if name == "psum_scatter":
        return _scattered(xp, xs, p["scatter_dimension"] + shift, p["tiled"]), True
    if name == "ppermute":
        return _permuted(xp, xs, p["perm"]), True
    return _exchanged(xp, xs, p["split_axis"] + shift, p["concat_axis"] + shift, p["tiled"]), True


def semantics(xp, name, xs, p):
    """The collective `name` (params p, without axis_name and axis_size) on the batch xs
    (members along axis 0): (the (n, ...) batch of what each member receives, True), or
    (the one value every member receives, False)."""
    groups = p.get("axis_index_groups")
    if not groups:
        return _rule(xp, name, xs, p)
    k, g = len(groups[0]), len(groups)
    table = np.asarray(groups)  # (g, k): member table[i, j] is at position j of group i
    grp, pos = np.empty(xs.shape[0], np.int64), np.empty(xs.shape[0], np.int64)
    grp[table], pos[table] = np.arange(g)[:, None], np.arange(k)[None, :]
    ys = xp.reshape(xp.take(xs, table.T.reshape(-1), axis=0), (k, g, *xs.shape[1:]))
    out, per_member = _rule(xp, name, ys, p, shift=1)
    if not per_member:  # (g, ...): one value per group
        return xp.take(out, grp, axis=0), True
    out = xp.reshape(out, (k * g, *out.shape[2:]))  # (k, g, ...) position-major
    return xp.take(out, pos * g + grp, axis=0), True


def over_axes(name, x, frames, params):
    """The collective `name` on the array x over the flattened axes of `frames` (major to
    minor), as the module docstring says. params: the primitive's, without axis_name and
    axis_size; they are checked by its shape rule with the flattened size."""
    import nova.numpy as jnp
    from nova import collectives as c
    from nova.core.ir import TensorType
    from nova.ops import lax

    n = math.prod(f.size for f in frames)
    names = tuple(f.name for f in frames)
    c.PRIMS[name].shape_rule(TensorType(x.shape, x.dtype), axis_name=names, axis_size=n,
                             **params)
    xs = x
    for f in reversed(frames):
        xs = c.all_gather_p.bind(xs, axis_name=f.name, axis_size=f.size, axis=0, tiled=False)
    xs = jnp.reshape(xs, (n, *x.shape))
    out, per_member = semantics(jnp, name, xs, params)
    if not per_member:
        return out
    return lax.dynamic_index_in_dim(out, c.axis_index(names), 0, keepdims=False)
