"""Fusion: partition the optimized Program into kernels (DESIGN.md "Fusion").

Loop kernels hold elementwise chains with broadcasts and other movement folded into their access
pattern, and row reductions with their elementwise prologue and epilogue: softmax, log-softmax,
layer norm and their backwards each become one kernel per row block. A loop kernel iterates over
one shape S; its reductions (if any) all reduce the same axes A of S, and its outputs have shape S
(full) or S without A (one value per row). Reductions include argmax/argmin ((value, position)
pairs). Movement includes concatenate, pad and gather, which loop kernels evaluate at an index
(choosing the source by position, loading the gathered position from the index array).
Contractions are their own kernels; scatters, scans and sorts are sequential kernels ("scatter",
"scan", "sort") into which the elementwise/movement producers of their inputs fuse; primitives
without a generated kernel (constants too large to embed) become `host:` kernels.

The walk goes backward over the equations: a producer joins the kernel of its consumers when all
of them are in one loop kernel and the result stays valid (shape rules above). Cheap producers
(0-d constants, their broadcasts, iota) are cloned into every kernel that reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nova.compiler.kernel import FusedProgram, Kernel
from nova.core.ir import Eqn, Program
from nova.core.primitive import FusionKind, IndexMap, Reduction

# Up to this many elements a constant is recomputed in every kernel that reads it: one element
# as an immediate, more as a read-only global holding its data (loop kernels). Larger constants
# stay `host:constant` buffers: their bytes would bloat the kernel text and its cache key.
_INLINE_CONSTANT = 4096
# An elementwise value read by more kernels than this is stored once instead of recomputed,
# unless it is at most 1/_PER_ROW_RATIO the size of every reader's iteration space (_per_row).
_MAX_CLONES = 3
_PER_ROW_RATIO = 8
# Movement whose element comes from one of several sources (operands, padding value) or from a
# position loaded from an index array: loop kernels evaluate them at an index like an IndexMap.
_INLINE_TEMPLATES = ("concatenate", "pad", "gather")
# Primitives whose result is written in a fixed order, each a kernel of its own kind; their
# inputs are evaluated at an index inside it like a loop kernel's values.
_SEQUENTIAL = {"scatter_add": "scatter", "scatter": "scatter", "cumsum": "scan",
               "cumprod": "scan", "cummax": "scan", "cummin": "scan", "sort": "sort"}
# Fused attention (nova/ops/attention.py): flash kernels of their own, reading stored operands.
ATTENTION = ("flash_attention_fwd", "flash_attention_bwd")
# Kernel kinds that evaluate the values they read at an index (clones may be recomputed there).
_INLINE_KINDS = ("loop", "scatter", "scan", "sort")
# Index-valued reductions over one axis, carrying a (value, position) pair per row.
ARG_REDUCTIONS = ("argmax", "argmin")


def is_reduction(e) -> bool:
    """A reduction phase of a loop kernel: a Reduction hook or argmax/argmin."""
    return isinstance(e.prim.kernel, Reduction) or e.prim.name in ARG_REDUCTIONS


def reduced_axes(e) -> tuple:
    """The axes a reduction equation reduces."""
    return (e.params["axis"],) if e.prim.name in ARG_REDUCTIONS else tuple(e.params["axes"])


@dataclass
class _Group:
    kind: str
    iter_shape: tuple
    red_axes: tuple | None = None
    eqns: list = field(default_factory=list)  # indices into program.eqns
    dot: int | None = None  # the contraction's equation index


def _is_cheap(e: Eqn, prod: dict) -> bool:
    """Recomputed in every consumer kernel instead of being stored."""
    name = e.prim.name
    if name == "constant":
        return e.outputs[0].type.size <= _INLINE_CONSTANT
    if name == "iota":
        return True
    if name == "broadcast_in_dim":
        src = prod.get(id(e.inputs[0]))
        return src is not None and _is_cheap(src, prod) and src.prim.name != "broadcast_in_dim"
    return False


def _per_row(e: Eqn, users: list) -> bool:
    """e's values are far fewer than the elements each consumer kernel iterates over (a per-row
    value such as layer norm's 1/sqrt(var + eps)): recomputing it in every consumer costs less
    than a kernel launch and a round trip through memory, however many consumers there are."""
    size = sum(o.type.size for o in e.outputs)
    return all(size * _PER_ROW_RATIO <= int(np.prod(g.iter_shape, dtype=np.int64))
               for g in users)


def _loop_class(e: Eqn) -> str | None:
    """'elementwise', 'movement' or 'reduction' if the equation can live in a loop kernel."""
    p = e.prim
    if p.name == "constant":
        # Read at an index from a global (a movement with no input); too large: host buffer.
        return "movement" if e.outputs[0].type.size <= _INLINE_CONSTANT else None
    if p.fusion is FusionKind.ELEMENTWISE and not isinstance(p.kernel, IndexMap):
        return "elementwise"  # several results (threefry2x32) are all computed at one index
    if isinstance(p.kernel, IndexMap) or p.name in _INLINE_TEMPLATES:
        return "movement"
    if is_reduction(e):
        return "reduction"
    return None


def _kept(shape, axes):
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _row_aligned(var, group_eqns: set, consumers: dict, eqns: list, in_shape, axes) -> bool:
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
            aligned = (var.type.shape == _kept(in_shape, axes) and dims == kept_dims) or (
                var.type.shape == keepdims_shape and dims == tuple(range(len(in_shape))))
            if aligned and _full_aligned(out, group_eqns, consumers, eqns, in_shape):
                continue
            return False
        if name == "reshape" and out.type.shape in (keepdims_shape, _kept(in_shape, axes)):
            if not _row_aligned(out, group_eqns, consumers, eqns, in_shape, axes):
                return False
            continue
        if _loop_class(c) == "elementwise" and out.type.shape == var.type.shape:
            if not all(_row_aligned(o, group_eqns, consumers, eqns, in_shape, axes)
                       for o in c.outputs):
                return False
            continue
        return False
    return True


def _full_aligned(var, group_eqns: set, consumers: dict, eqns: list, shape,
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
        if _loop_class(c) != "elementwise" or c.outputs[0].type.shape != tuple(shape):
            return False
        if not all(_full_aligned(o, group_eqns, consumers, eqns, shape, checked)
                   for o in c.outputs):
            return False
    return True


def fuse(program: Program) -> FusedProgram:
    eqns = program.eqns
    prod = {id(o): e for e in eqns for o in e.outputs}
    consumers: dict[int, list[int]] = {}
    for i, e in enumerate(eqns):
        for v in e.inputs:
            consumers.setdefault(id(v), []).append(i)
    outputs = {id(v) for v in program.outputs}
    group_of: dict[int, _Group] = {}
    groups: list[_Group] = []
    # Equations recomputed inside each consumer kernel instead of being stored: eqn index ->
    # the loop groups that clone it. Movement is free to recompute (an index map) and cheap
    # elementwise ops cost less than a round trip through memory.
    clones: dict[int, list] = {}

    def users_of(e):
        us, non_loop = [], False
        for o in e.outputs:
            for c in consumers.get(id(o), []):
                gs = clones[c] if c in clones else [group_of.get(c)]
                for g in gs:
                    # A matmul's epilogue evaluates values inline like a loop kernel; its
                    # operands must be stored.
                    inline = g is not None and (g.kind in _INLINE_KINDS or (
                        g.kind == "contraction" and c != g.dot and c not in clones))
                    if not inline:
                        non_loop = True
                    if g is not None and all(g is not u for u in us):
                        us.append(g)
        return us, non_loop

    prod_index = {id(o): i for i, e in enumerate(eqns) for o in e.outputs}

    def members_of(g):
        """The equations a group computes: its own and the ones it clones."""
        return list(g.eqns) + cloned_by.get(id(g), [])

    cloned_by: dict[int, list] = {}  # id(group) -> indices of the equations it clones
    for i in reversed(range(len(eqns))):
        e = eqns[i]
        cls = _loop_class(e)
        users, non_loop = users_of(e)
        is_out = any(id(o) in outputs for o in e.outputs)
        cheap = _is_cheap(e, prod)
        if users and not non_loop and not is_out and (
            cheap or (len(users) > 1 and cls == "movement")
            or (len(users) > 1 and cls == "elementwise" and (
                len(users) <= _MAX_CLONES or _per_row(e, users)))
        ):
            clones[i] = users
            for g in users:
                cloned_by.setdefault(id(g), []).append(i)
            continue
        target = users[0] if len(users) == 1 and not non_loop else None
        if cls in ("reduction", "elementwise") and target is None and users:
            shared = _shared_target(i, e, cls, users, eqns, prod_index, group_of, clones,
                                    consumers, members_of, prod)
            if shared is not None:
                # Computed inside one consumer kernel and stored for the others (layer norm's
                # mean and variance: the row kernel that needs them writes them per row; an
                # elementwise value read by too many kernels to recompute, written by the
                # first row kernel that reads it).
                shared.eqns.append(i)
                group_of[i] = shared
                continue
        if cls is not None and target is not None and target.kind == "loop" and \
                _can_join(e, cls, target, is_out, consumers, eqns, clones):
            target.eqns.append(i)
            group_of[i] = target
            continue
        if cls is not None and target is not None and target.kind == "contraction" and \
                cls != "reduction" and not is_out and target.red_axes is None and \
                not any(c == target.dot for o in e.outputs for c in consumers.get(id(o), [])):
            # A producer of the epilogue (not of the matmul's operands) is evaluated inline.
            target.eqns.append(i)
            group_of[i] = target
            continue
        if cls in ("elementwise", "movement") and target is not None and not is_out and \
                target.kind in _SEQUENTIAL.values():
            # A producer of a scatter's operand, indices or updates, or of a scan's input, is
            # evaluated at an index inside the sequential kernel (no buffer in between).
            target.eqns.append(i)
            group_of[i] = target
            continue
        if e.prim.fusion is FusionKind.CONTRACTION and target is not None and not is_out and \
                _epilogue_ok(e, target, eqns, consumers, outputs, clones):
            # Fuse into the matmul: the loop group becomes its epilogue (bias, activation, ...).
            target.kind = "contraction"
            target.dot = i
            target.eqns.append(i)
            group_of[i] = target
            continue
        if cls == "reduction":
            g = _Group("loop", e.inputs[0].type.shape, reduced_axes(e), [i])
        elif cls is not None:
            g = _Group("loop", e.outputs[0].type.shape, None, [i])
        elif e.prim.fusion is FusionKind.CONTRACTION:
            g = _Group("contraction", e.outputs[0].type.shape, None, [i], dot=i)
        elif e.prim.name in _SEQUENTIAL:
            g = _Group(_SEQUENTIAL[e.prim.name], e.outputs[0].type.shape, None, [i])
        elif e.prim.name in ATTENTION:
            g = _Group("attention", (), None, [i])
        else:
            g = _Group(f"host:{e.prim.name}", (), None, [i])
        groups.append(g)
        group_of[i] = g

    groups.reverse()
    groups = _merge_siblings(groups, eqns, prod_index, consumers, clones)
    index_of = {id(e): i for i, e in enumerate(eqns)}
    kernels = []
    for g in groups:
        k = _make_kernel(g, eqns, prod, outputs, consumers, clones, index_of)
        if g.kind == "contraction" and _epilogue_reads_operands(k, eqns[g.dot]):
            # The GEMM epilogue only sees the result and its own extra inputs, so an epilogue
            # that also reads the matmul's operands becomes a separate loop kernel.
            epi = _Group("loop", g.iter_shape, None, [i for i in g.eqns if i != g.dot])
            for gs in clones.values():
                gs[:] = [epi if x is g else x for x in gs]
            g.eqns = [g.dot]
            k = _make_kernel(g, eqns, prod, outputs, consumers, clones, index_of)
            kernels.append(k)
            k = _make_kernel(epi, eqns, prod, outputs, consumers, clones, index_of)
        kernels.append(k)
    return FusedProgram(program, _order(kernels, program))


def _depends_on(g: _Group, others: list, start: int, eqns, prod_index, group_of, clones,
                members_of) -> bool:
    """Whether group g reads (through any chain of equations after `start`) a value computed by
    one of the groups `others`. Equations at or before `start` cannot read the values of groups
    formed so far (those consume a later equation's result), so the search stops there."""
    targets = {id(u) for u in others}
    stack = members_of(g)
    seen = set(stack)  # equations whose inputs are (to be) followed
    groups_seen = {id(g)}
    while stack:
        k = stack.pop()
        for v in eqns[k].inputs:
            p = prod_index.get(id(v))
            if p is None or p <= start or p in seen:
                continue
            if p in clones:  # recomputed by the reader: follow its own inputs
                seen.add(p)
                stack.append(p)
                continue
            gp = group_of.get(p)
            if gp is None or id(gp) in groups_seen:
                continue
            if id(gp) in targets:
                return True
            groups_seen.add(id(gp))
            for q in members_of(gp):
                if q not in seen:
                    seen.add(q)
                    stack.append(q)
    return False


def _epilogue_of_contraction(e: Eqn, prod: dict, consumers: dict, eqns: list,
                             steps: int = 64) -> bool:
    """e is the one value a matmul's result is computed into elementwise (through at most
    `steps` equations): every reader of the matmul's result and of the values between is on the
    way to e. Then e belongs in that matmul's epilogue (bias, activation, its derivative), not
    in a row kernel that would make the matmul write its raw result first."""
    cone, stack, dots = {id(e): e}, [e], []
    while stack and len(cone) < steps:
        q = stack.pop()
        for v in q.inputs:
            src = prod.get(id(v))
            if src is None or id(src) in cone:
                continue
            if src.prim.fusion is FusionKind.CONTRACTION:
                dots.append(src)
            elif _loop_class(src) == "elementwise" or src.prim.name == "broadcast_in_dim":
                cone[id(src)] = src
                stack.append(src)
    if not dots or stack:  # no matmul, or the walk stopped early
        return False
    for q in dots + [q for q in cone.values() if q is not e]:
        for o in q.outputs:
            if any(id(eqns[c]) not in cone for c in consumers.get(id(o), [])):
                return False
    return True


def _shared_target(i: int, e: Eqn, cls: str, users: list, eqns, prod_index, group_of, clones,
                   consumers, members_of, prod_of):
    """A loop group among the consumers of `e` that can compute it and store it for the others,
    or None. A reduction needs a group reducing the same axes (or iterating over its input
    shape); an elementwise value only joins row kernels (groups with reductions), so that a pure
    elementwise group stays free to become a matmul epilogue. Joining must make no cycle: the
    group may not itself depend on another consumer group. Earliest group first."""
    loops = [g for g in users if g.kind == "loop"]
    loops.sort(key=lambda g: min(g.eqns))
    for g in loops:
        others = [u for u in users if u is not g]
        if cls == "reduction" and g.red_axes is None and g.iter_shape != e.inputs[0].type.shape:
            continue
        if cls == "elementwise" and (g.red_axes is None or _epilogue_of_contraction(e, prod_of, consumers, eqns)):
            continue
        if _depends_on(g, others, i, eqns, prod_index, group_of, clones, members_of):
            continue
        if _can_join(e, cls, g, True, consumers, eqns, clones):
            return g
    return None


def _merge_siblings(groups: list, eqns, prod_index, consumers, clones) -> list:
    """Merges loop groups that reduce the same axes of the same iteration shape and read a common
    input, when neither depends on the other: one pass over the shared data computes all their
    reductions (layer norm's dgamma and dbeta column sums). Returns the new group list."""

    def inputs_of(g, cloned) -> set:
        members = set(g.eqns) | set(cloned.get(id(g), ()))
        return {id(v) for k in members for v in eqns[k].inputs
                if prod_index.get(id(v)) not in members}

    def downstream(a, owner) -> set:
        """The ids of the groups that read, through any chain of kernels, a value a computes."""
        stack, seen = [a], set()
        while stack:
            g = stack.pop()
            for k in g.eqns:
                for o in eqns[k].outputs:
                    for c in consumers.get(id(o), []):
                        for h in (clones[c] if c in clones else [owner.get(c)]):
                            if h is not None and id(h) not in seen:
                                seen.add(id(h))
                                stack.append(h)
        return seen

    by_space: dict = {}
    for g in groups:
        if g.kind == "loop" and g.red_axes:
            by_space.setdefault((g.iter_shape, g.red_axes), []).append(g)
    cands = [gs for gs in by_space.values() if len(gs) > 1]
    if not cands:
        return groups
    owner = {k: g for g in groups for k in g.eqns}
    cloned: dict[int, list] = {}
    for c, gs in clones.items():
        for g in gs:
            cloned.setdefault(id(g), []).append(c)
    everyone = [g for gs in cands for g in gs]
    reach = {id(g): downstream(g, owner) for g in everyone}
    for gs in cands:
        ins = {id(g): inputs_of(g, cloned) for g in gs}
        alive = list(gs)
        x = 0
        while x < len(alive):
            a = alive[x]
            y = x + 1
            while y < len(alive):
                b = alive[y]
                if not ins[id(a)] & ins[id(b)] or id(b) in reach[id(a)] or \
                        id(a) in reach[id(b)]:
                    y += 1
                    continue
                # Merge b into a; whatever reached either now reaches a and what follows both.
                a.eqns.extend(b.eqns)
                ins[id(a)] |= ins[id(b)]
                reach[id(a)] |= reach[id(b)]
                for h in everyone:
                    r = reach[id(h)]
                    if id(b) in r or id(a) in r:
                        r |= reach[id(a)] | {id(a)}
                for hs in clones.values():
                    if any(h is b for h in hs):
                        hs[:] = [h for h in hs if h is not b and h is not a] + [a]
                groups.remove(b)
                everyone.remove(b)
                alive.pop(y)
            x += 1
    return groups


def _epilogue_reads_operands(k, dot: Eqn) -> bool:
    operands = {id(v) for v in dot.inputs}
    return any(id(v) in operands for e in k.program.eqns if e is not dot for v in e.inputs)


def _can_join(e: Eqn, cls: str, g: _Group, is_out: bool, consumers, eqns, clones) -> bool:
    out = e.outputs[0]
    if cls == "reduction":
        in_shape, axes = e.inputs[0].type.shape, reduced_axes(e)
        if g.red_axes is None:
            if g.iter_shape not in (out.type.shape, in_shape):
                return False
        elif in_shape != g.iter_shape or axes != g.red_axes:
            return False
        members = set(g.eqns) | {c for c, gs in clones.items() if any(x is g for x in gs)}
        if not _row_aligned(out, members, consumers, eqns, in_shape, axes):
            return False
        if g.red_axes is None and g.iter_shape == out.type.shape and not _all_row_level(g, eqns, out.type.shape):
            return False
        g.iter_shape, g.red_axes = in_shape, axes
        return True
    if not is_out:
        return True
    # A stored output must be full-shape, or per-row in a kernel with reductions.
    if out.type.shape == g.iter_shape:
        return True
    return g.red_axes is not None and out.type.shape == _kept(g.iter_shape, g.red_axes)


def _epilogue_ok(dot: Eqn, g: _Group, eqns, consumers, outputs, clones) -> bool:
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
            if _loop_class(ce) != "elementwise" or ce.outputs[0].type.shape != out.type.shape:
                return False
            derived.update(id(o) for o in ce.outputs)
    return True


def _all_row_level(g: _Group, eqns, row_shape) -> bool:
    return all(o.type.shape == row_shape for i in g.eqns for o in eqns[i].outputs)


def _make_kernel(g: _Group, eqns, prod, outputs, consumers, clones, index_of) -> Kernel:
    members = sorted(g.eqns)
    if g.dot is not None:  # the matmul first: its operands are the kernel's first inputs
        members.remove(g.dot)
        members.insert(0, g.dot)
    member_set = set(members)
    defined: set[int] = set()
    body: list[Eqn] = []
    inputs: list = []
    seen_inputs: set[int] = set()

    def pull(v):
        """Makes v available inside the kernel: cloned if recomputed here, else an input."""
        if id(v) in defined or id(v) in seen_inputs:
            return
        src = prod.get(id(v))
        ci = index_of.get(id(src)) if src is not None else None
        if ci is not None and ci in clones and any(x is g for x in clones[ci]):
            for u in src.inputs:
                pull(u)
            body.append(src)
            defined.update(id(o) for o in src.outputs)
            return
        seen_inputs.add(id(v))
        inputs.append(v)

    for i in members:
        e = eqns[i]
        for v in e.inputs:
            if id(v) not in defined:
                pull(v)
        body.append(e)
        defined.update(id(o) for o in e.outputs)
    outs = []
    for i in members:
        for o in eqns[i].outputs:
            used_outside = id(o) in outputs or any(
                c not in member_set for c in consumers.get(id(o), []))
            if used_outside:
                outs.append(o)
    sub = Program(list(inputs), body, outs)
    k = Kernel(g.kind, sub, list(inputs), outs)
    if g.kind in _INLINE_KINDS:
        k.schedule = {"iter_shape": g.iter_shape, "red_axes": g.red_axes}
    return k


def _order(kernels: list, program: Program) -> list:
    """Kernels in an order where every input is computed before use (program order of outputs)."""
    ready = {id(v) for v in program.inputs}
    pending = list(kernels)
    ordered = []
    while pending:
        progressed = False
        for k in list(pending):
            if all(id(v) in ready for v in k.inputs):
                ordered.append(k)
                ready.update(id(o) for o in k.outputs)
                pending.remove(k)
                progressed = True
        if not progressed:
            raise AssertionError("fusion produced a cyclic kernel graph")
    return ordered
