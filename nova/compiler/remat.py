"""Rematerialization: forward values the backward reads are recomputed there from values it keeps
anyway, so they die with their last forward use instead of living across the whole backward.

A training step's peak memory sits where the forward ends: every forward value a backward
equation reads is live there (the "saved" values). Some of them are cheap functions of other
saved values or of the program's inputs: a GELU output of its (saved) pre-activation and bias,
a layer norm's output of its (saved) input and per-row statistics, the head-merged attention
output of the (saved) per-head one. Keeping such a value costs its bytes for the whole
backward; recomputing it costs one memory-bound kernel right before its first backward reader.

The pass, greedily over saved values by decreasing size: find the cone of equations computing v
from leaves that stay live into the backward regardless (other saved values, program inputs and
outputs, constants), through cheap loop-kernel operations only (elementwise, movement,
reductions: `fusion_rules.loop_class`; no contraction, attention, scatter or sort), at most
`max_cone` equations. If there is one, the backward's readers of v read a clone of that cone
instead, emitted (stage "bwd") just before the first of them. The cone's leaves are pinned:
they stay saved, so a later choice cannot make an earlier clone extend a lifetime. Each choice
removes v's bytes from the saved set and adds no other value to it. Every primitive is pure
(random bits are counter-based), so a clone computes the same values.

This is the idea of activation recomputation (Chen et al. 2016, "Training Deep Nets with
Sublinear Memory Cost") restricted to recomputations that extend no other lifetime, as
PyTorch's min-cut partitioner does for pointwise operations (torch.compile). It runs last (a
later cse would merge the clones back). The CUDA targets enable it (`pipeline.target_options`,
`config.rematerialize`); on the CPU it is off unless asked for, since there a step is bound
by compute rather than memory.
"""

from __future__ import annotations

from nova.compiler.dce import dce
from nova.compiler.fusion_rules import backward_start, loop_class
from nova.core.ir import Eqn, Program, Var

MIN_BYTES = 1 << 20  # smaller saved values are not worth a kernel
MAX_CONE = 32  # equations recomputed for one value


def saved_values(program: Program) -> tuple[int, list]:
    """(index of the first backward equation, the Vars the backward keeps from the forward).

    Kept means materialized: fusion (fuse.py) writes it as a kernel output before the first
    kernel holding a backward equation, and a kernel at or after that one reads it. (A value a
    backward equation reads that fusion recomputes inside its readers, a broadcast or a cheap
    elementwise step, costs no memory across the boundary.) (len(eqns), []) for a program
    without a backward."""
    from nova.compiler.fuse import fuse

    eqns = program.eqns
    boundary = backward_start(eqns)
    if boundary == len(eqns):
        return boundary, []
    kernels = fuse(program).kernels
    first = next((n for n, k in enumerate(kernels)
                  if any(e.stage == "bwd" for e in k.program.eqns)), len(kernels))
    forward = {id(o) for e in eqns[:boundary] for o in e.outputs}
    made = {id(v): v for k in kernels[:first] for v in k.outputs if id(v) in forward}
    saved = {id(v): made[id(v)] for k in kernels[first:] for v in k.inputs if id(v) in made}
    return boundary, list(saved.values())


def rematerialize(program: Program, enabled: bool = False, min_bytes: int | None = None,
                  max_cone: int = MAX_CONE) -> Program:
    """The program with the backward's reads of cheaply recomputable forward values replaced by
    clones (see the module docstring); unchanged when `enabled` is false or nothing qualifies.
    min_bytes: the smallest saved value considered (default MIN_BYTES, read at the call);
    max_cone: the most equations one clone may hold."""
    if not enabled:
        return program
    min_bytes = MIN_BYTES if min_bytes is None else min_bytes
    eqns = program.eqns
    boundary, saved = saved_values(program)
    if not saved:
        return program
    prod: dict[int, tuple[int, Eqn]] = {}
    for i, e in enumerate(eqns[:boundary]):
        for o in e.outputs:
            prod[id(o)] = (i, e)
    free = {id(v) for v in program.inputs} | {id(v) for v in program.outputs}
    keep = {id(v) for v in saved}  # live into the backward: leaves a clone may read
    pinned: set[int] = set()  # leaves of chosen clones: they stay saved
    chosen: dict[int, list] = {}  # id(v) -> the cone's equation indices, in program order

    def cone_of(v: Var):
        cone, stack = set(), [v]
        while stack:
            u = stack.pop()
            i, e = prod[id(u)]
            if i in cone:
                continue
            if loop_class(e) is None:
                return None
            cone.add(i)
            if len(cone) > max_cone:
                return None
            for x in e.inputs:
                if id(x) in free or (id(x) in keep and x is not v):
                    continue
                if eqns[prod[id(x)][0]].prim.name in ("constant", "iota"):
                    continue  # constants are leaves (a clone reads the same one)
                stack.append(x)
        return sorted(cone)

    for v in sorted(saved, key=lambda v: -v.type.nbytes):
        if v.type.nbytes < min_bytes or id(v) in free or id(v) in pinned:
            continue
        cone = cone_of(v)
        if cone is None:
            continue
        chosen[id(v)] = cone
        keep.discard(id(v))
        inside = {id(o) for i in cone for o in eqns[i].outputs}
        pinned.update(id(x) for i in cone for x in eqns[i].inputs if id(x) not in inside)
    if not chosen:
        return program
    # A chosen value with no forward reader is no longer computed in the forward at all.
    return dce(_with_clones(program, boundary, chosen))


def _with_clones(program: Program, boundary: int, chosen: dict) -> Program:
    """The program whose equations at or after `boundary` read clones of the chosen values.

    Each cone is cloned once, just before its first reader that does real work: a movement
    (reshape, transpose, broadcast) of a chosen value or of such a movement is held back with
    the clone until something else reads it, since fusion folds movements into their reader's
    kernel and a kernel runs where its last equation is (reverse mode emits the reshape feeding
    a weight gradient long before the contraction)."""
    eqns = program.eqns
    out: list[Eqn] = list(eqns[:boundary])
    clone_of: dict[int, Var] = {}  # id(original forward value) -> its clone
    held: dict[int, Eqn] = {}  # id(output) -> a held-back movement, in program order

    def emit_clone(v: Var) -> None:
        if id(v) in clone_of:
            return
        local: dict[int, Var] = {}
        for i in chosen[id(v)]:
            q = eqns[i]
            outs = [Var(o.type) for o in q.outputs]
            out.append(Eqn(q.prim, [local.get(id(x), x) for x in q.inputs], q.params, outs,
                           q.source, "bwd"))
            local.update({id(o): n for o, n in zip(q.outputs, outs, strict=True)})
        clone_of[id(v)] = local[id(v)]

    def release(v: Var) -> None:
        """Emits what computing v needs: its clone, or the held movements leading to it."""
        if id(v) in chosen:
            emit_clone(v)
            return
        e = held.pop(id(v), None)
        if e is None:
            return
        for x in e.inputs:
            release(x)
        put(e)

    def put(e: Eqn) -> None:
        ins = [clone_of.get(id(x), x) for x in e.inputs]
        if any(a is not b for a, b in zip(ins, e.inputs, strict=True)):
            e = Eqn(e.prim, ins, e.params, e.outputs, e.source, e.stage)
        out.append(e)

    for e in eqns[boundary:]:
        pending = [x for x in e.inputs if (id(x) in chosen and id(x) not in clone_of)
                   or id(x) in held]
        if pending and loop_class(e) == "movement" and len(e.outputs) == 1 and all(
                id(x) in chosen or id(x) in held or x.type.size == 1 for x in e.inputs):
            held[id(e.outputs[0])] = e
            continue
        for x in e.inputs:
            release(x)
        put(e)
    for v in program.outputs:  # (a held movement that is a program output)
        release(v)
    outputs = [clone_of.get(id(v), v) for v in program.outputs]  # (outputs are never chosen)
    return Program(program.inputs, out, outputs, program.input_names)
