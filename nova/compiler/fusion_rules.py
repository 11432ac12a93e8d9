"""Fusion rules: which equations a loop kernel can hold and when a value may join a kernel.

Used by the fusion pass (nova/compiler/fuse.py): the classification of equations (elementwise,
movement, reduction), what is cheap enough to recompute in every reader, and the shape and
alignment conditions under which an equation joins a group (a per-row value must be read at its
own row; a matmul epilogue sees the result only at the element it computes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nova.core.ir import Eqn
from nova.core.primitive import FusionKind, IndexMap, Reduction

# Up to this many elements a constant is recomputed in every kernel that reads it: one element
# as an immediate, more as a read-only global holding its data (loop kernels). Larger constants
# stay `host:constant` buffers: their bytes would bloat the kernel text and its cache key.
INLINE_CONSTANT = 4096
# An elementwise value read by more kernels than this is stored once instead of recomputed,
# unless it is at most 1/PER_ROW_RATIO the size of every reader's iteration space (per_row).
MAX_CLONES = 3
PER_ROW_RATIO = 8
# Movement whose element comes from one of several sources (operands, padding value) or from a
# position loaded from an index array: loop kernels evaluate them at an index like an IndexMap.
INLINE_TEMPLATES = ("concatenate", "pad", "gather")
# Index-valued reductions over one axis, carrying a (value, position) pair per row.
ARG_REDUCTIONS = ("argmax", "argmin")


def backward_start(eqns) -> int:
    """Index of the first equation reverse mode appended (stage "bwd"); len(eqns) if none."""
    return next((i for i, e in enumerate(eqns) if e.stage == "bwd"), len(eqns))


def is_reduction(e) -> bool:
    """A reduction phase of a loop kernel: a Reduction hook or argmax/argmin."""
    return isinstance(e.prim.kernel, Reduction) or e.prim.name in ARG_REDUCTIONS


def reduced_axes(e) -> tuple:
    """The axes a reduction equation reduces."""
    return (e.params["axis"],) if e.prim.name in ARG_REDUCTIONS else tuple(e.params["axes"])


@dataclass
class Group:
    """A kernel being formed: its kind, iteration shape, reduced axes and equation indices."""

    kind: str
    iter_shape: tuple
    red_axes: tuple | None = None
    eqns: list = field(default_factory=list)  # indices into program.eqns
    dot: int | None = None  # the contraction's equation index


def is_cheap(e: Eqn, prod: dict) -> bool:
    """Recomputed in every consumer kernel instead of being stored."""
    name = e.prim.name
    if name == "constant":
        return e.outputs[0].type.size <= INLINE_CONSTANT
    if name == "iota":
        return True
    if name == "broadcast_in_dim":
        src = prod.get(id(e.inputs[0]))
        return src is not None and is_cheap(src, prod) and src.prim.name != "broadcast_in_dim"
    return False


def per_row(e: Eqn, users: list) -> bool:
    """e's values are far fewer than the elements each consumer kernel iterates over (a per-row
    value such as layer norm's 1/sqrt(var + eps)): recomputing it in every consumer costs less
    than a kernel launch and a round trip through memory, however many consumers there are."""
    size = sum(o.type.size for o in e.outputs)
    return all(size * PER_ROW_RATIO <= int(np.prod(g.iter_shape, dtype=np.int64))
               for g in users)


def loop_class(e: Eqn) -> str | None:
    """'elementwise', 'movement' or 'reduction' if the equation can live in a loop kernel."""
    p = e.prim
    if p.name == "constant":
        # Read at an index from a global (a movement with no input); too large: host buffer.
        return "movement" if e.outputs[0].type.size <= INLINE_CONSTANT else None
    if p.fusion is FusionKind.ELEMENTWISE and not isinstance(p.kernel, IndexMap):
        return "elementwise"  # several results (threefry2x32) are all computed at one index
    if isinstance(p.kernel, IndexMap) or p.name in INLINE_TEMPLATES:
        return "movement"
    if is_reduction(e):
        return "reduction"
    return None


def kept_shape(shape, axes):
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def row_aligned(var, group_eqns: set, consumers: dict, eqns: list, in_shape, axes) -> bool:
    """Every use of a per-row value inside the group reads it at the row's own index."""
    kept_dims = tuple(i for i in range(len(in_shape)) if i not in axes)
    keepdims_shape = tuple(1 if i in axes else d for i, d in enumerate(in_shape))
    for ci in consumers.get(id(var), []):
        if ci not in group_eqns:
            continue
        c = eqns[ci]
        name = c.prim.name
        out = c.outputs[0]
        if name == "broadcast_in_dim":
            dims = c.params["broadcast_dimensions"]
            if out.type.shape != tuple(in_shape):
                return False
            aligned = (var.type.shape == kept_shape(in_shape, axes) and dims == kept_dims) or (
                var.type.shape == keepdims_shape and dims == tuple(range(len(in_shape))))
            if aligned and full_aligned(out, group_eqns, consumers, eqns, in_shape):
                continue
            return False
        if name == "reshape" and out.type.shape in (keepdims_shape, kept_shape(in_shape, axes)):
            if not row_aligned(out, group_eqns, consumers, eqns, in_shape, axes):
                return False
            continue
        if loop_class(c) == "elementwise" and out.type.shape == var.type.shape:
            if not all(row_aligned(o, group_eqns, consumers, eqns, in_shape, axes)
                       for o in c.outputs):
                return False
            continue
        return False
    return True


def full_aligned(var, group_eqns: set, consumers: dict, eqns: list, shape,
                 checked: set | None = None) -> bool:
    """A full-shape value computed from per-row values is read inside the group only at its own
    index: by elementwise equations (recursively) or by reductions, which read it at the same
    (row, position) in their phase; a movement (rev, slice, pad, ...) would need another row's
    per-row values. `checked`: values already found aligned (shared subexpressions are walked
    once)."""
    checked = set() if checked is None else checked
    if id(var) in checked:
        return True
    checked.add(id(var))
    for ci in consumers.get(id(var), []):
        if ci not in group_eqns:
            continue
        c = eqns[ci]
        if is_reduction(c):
            continue
        if loop_class(c) != "elementwise" or c.outputs[0].type.shape != tuple(shape):
            return False
        if not all(full_aligned(o, group_eqns, consumers, eqns, shape, checked)
                   for o in c.outputs):
            return False
    return True


def can_join(e: Eqn, cls: str, g: Group, is_out: bool, consumers, eqns, clones) -> bool:
    out = e.outputs[0]
    if cls == "reduction":
        in_shape, axes = e.inputs[0].type.shape, reduced_axes(e)
        if g.red_axes is None:
            if g.iter_shape not in (out.type.shape, in_shape):
                return False
        elif in_shape != g.iter_shape or axes != g.red_axes:
            return False
        members = set(g.eqns) | {c for c, gs in clones.items() if any(x is g for x in gs)}
        if not row_aligned(out, members, consumers, eqns, in_shape, axes):
            return False
        if g.red_axes is None and g.iter_shape == out.type.shape and not all_row_level(g, eqns, out.type.shape):
            return False
        g.iter_shape, g.red_axes = in_shape, axes
        return True
    if not is_out:
        return True
    # A stored output must be full-shape, or per-row in a kernel with reductions.
    if out.type.shape == g.iter_shape:
        return True
    return g.red_axes is not None and out.type.shape == kept_shape(g.iter_shape, g.red_axes)


def epilogue_ok(dot: Eqn, g: Group, eqns, consumers, outputs, clones) -> bool:
    """A loop group can be the epilogue of `dot`: it has no reductions, iterates over the dot's
    output shape, has one output of that shape, and reads the dot's result only elementwise."""
    out = dot.outputs[0]
    if g.kind != "loop" or g.red_axes is not None or g.iter_shape != out.type.shape:
        return False
    members = set(g.eqns)
    outs = [o for i in g.eqns for o in eqns[i].outputs
            if id(o) in outputs or any(c not in members for c in consumers.get(id(o), []))]
    if len(outs) != 1 or outs[0].type.shape != out.type.shape or outs[0].type.dtype != out.type.dtype:
        return False
    for c in consumers.get(id(out), []):
        if c not in members:
            return False
    # The epilogue sees the result only at the element it computes (the accumulator in hand), so
    # everything derived from it must be elementwise at the output's shape: a transpose, rev or
    # gather of exp(dot) would read other elements of the result.
    cloned = {c for c, gs in clones.items() if any(x is g for x in gs)}
    derived = {id(out)}
    for i in sorted(members | cloned):
        ce = eqns[i]
        if any(id(v) in derived for v in ce.inputs):
            if loop_class(ce) != "elementwise" or ce.outputs[0].type.shape != out.type.shape:
                return False
            derived.update(id(o) for o in ce.outputs)
    return True


def read_through_windows(e: Eqn, consumers: dict, eqns) -> bool:
    """A pad read by several slices (the windows of im2col or pooling) is stored, not evaluated
    inside their kernel: there every window tests the pad's bounds again at each element, and a
    bound inside a vector chunk (a 3x3 "SAME" window's column 1) makes the whole kernel scalar.
    Stored, the windows are plain vector copies (bench/conv.py's 3x3 im2col: ~11 ms fused,
    ~1 ms for the copies plus ~0.3 ms for the stored pad)."""
    if e.prim.name != "pad":
        return False
    return sum(eqns[c].prim.name == "slice" for c in consumers.get(id(e.outputs[0]), [])) > 1


def all_row_level(g: Group, eqns, row_shape) -> bool:
    return all(o.type.shape == row_shape for i in g.eqns for o in eqns[i].outputs)
