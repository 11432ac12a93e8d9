"""Fusion across consumers: values several kernels need, computed once.

A reduction (or an elementwise value) read by several kernels is computed inside one consumer
row kernel and stored for the others, when that creates no cycle between kernels; loop kernels
reducing the same axes of the same shape that read a common bulk input merge into one
multi-output kernel (layer norm backward: dgamma and dbeta in one pass).
"""

from __future__ import annotations

import numpy as np

from nova.compiler.fusion_rules import (
    PER_ROW_RATIO,
    Group,
    backward_start,
    can_join,
    loop_class,
)
from nova.core.ir import Eqn
from nova.core.primitive import FusionKind


def depends_on(g: Group, others: list, start: int, eqns, prod_index, group_of, clones,
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


def epilogue_of_contraction(e: Eqn, prod: dict, consumers: dict, eqns: list,
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
            elif loop_class(src) == "elementwise" or src.prim.name == "broadcast_in_dim":
                cone[id(src)] = src
                stack.append(src)
    if not dots or stack:  # no matmul, or the walk stopped early
        return False
    for q in dots + [q for q in cone.values() if q is not e]:
        for o in q.outputs:
            if any(id(eqns[c]) not in cone for c in consumers.get(id(o), [])):
                return False
    return True


def shared_target(i: int, e: Eqn, cls: str, users: list, eqns, prod_index, group_of, clones,
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
        if cls == "elementwise" and (
                g.red_axes is None or epilogue_of_contraction(e, prod_of, consumers, eqns)):
            continue
        if depends_on(g, others, i, eqns, prod_index, group_of, clones, members_of):
            continue
        if can_join(e, cls, g, True, consumers, eqns, clones):
            return g
    return None


def merge_siblings(groups: list, eqns, prod_index, consumers, clones) -> list:
    """Merges loop groups that reduce the same axes of the same iteration shape and read a common
    bulk input (one of more than 1/PER_ROW_RATIO the size of the iteration space), when neither
    depends on the other: one pass over the shared data computes all their reductions (layer
    norm's dgamma and dbeta column sums). Sharing only a scalar or a per-row value (an
    optimizer's step count, a learning rate) saves no traffic: such groups stay apart, so each
    runs when its own inputs are ready and they die there (merged, every LayerNorm weight
    gradient of a GPT-2 step waited for the last one and held the 25 cotangents it reads).
    Returns the new group list."""

    def inputs_of(g, cloned) -> set:
        members = set(g.eqns) | set(cloned.get(id(g), ()))
        space = int(np.prod(g.iter_shape, dtype=np.int64))
        return {id(v) for k in members for v in eqns[k].inputs
                if prod_index.get(id(v)) not in members and v.type.size * PER_ROW_RATIO > space}

    boundary = backward_start(eqns)

    def across(a, b) -> bool:
        """a lies wholly in the forward and b wholly in the backward: merged, b (a backward
        recomputation of a reduction, remat.py) would run in the forward and its result live
        across the backward (found by review)."""
        return max(a.eqns) < boundary <= min(b.eqns)

    def downstream(a, successors) -> set:
        """The ids of the groups that read, through any chain of kernels, a value a computes."""
        stack, seen = [a], set()
        while stack:
            for h in successors[id(stack.pop())]:
                if id(h) not in seen:
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
    successors: dict[int, list] = {}  # group -> the groups reading one of its values
    for g in groups:
        out = {}
        for k in g.eqns:
            for o in eqns[k].outputs:
                for c in consumers.get(id(o), []):
                    for h in (clones[c] if c in clones else [owner.get(c)]):
                        if h is not None:
                            out[id(h)] = h
        successors[id(g)] = list(out.values())
    everyone = [g for gs in cands for g in gs]
    reach = {id(g): downstream(g, successors) for g in everyone}
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
                        id(a) in reach[id(b)] or across(a, b) or across(b, a):
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
