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
of them are in one loop kernel and the result stays valid (shape rules above, in
nova/compiler/fusion_rules.py). Cheap producers (0-d constants, their broadcasts, iota, per-row
values) are cloned into every kernel that reads them. A value several kernels need is computed in
one of them and stored for the others (nova/compiler/fusion_sharing.py).
"""

from __future__ import annotations

import heapq

from nova.compiler.fusion_rules import (  # noqa: F401 - ARG_REDUCTIONS, is_reduction re-exported
    ARG_REDUCTIONS,
    MAX_CLONES,
    Group,
    can_join,
    epilogue_ok,
    is_cheap,
    is_reduction,
    loop_class,
    per_row,
    read_through_windows,
    reduced_axes,
)
from nova.compiler.fusion_sharing import merge_siblings, shared_target
from nova.compiler.kernel import FusedProgram, Kernel
from nova.core.ir import Eqn, Program
from nova.core.primitive import FusionKind

# Primitives whose result is written in a fixed order, each a kernel of its own kind; their
# inputs are evaluated at an index inside it like a loop kernel's values.
_SEQUENTIAL = {"scatter_add": "scatter", "scatter": "scatter", "cumsum": "scan",
               "cumprod": "scan", "cummax": "scan", "cummin": "scan", "sort": "sort"}
# Fused attention (nova/ops/attention.py): flash kernels of their own, reading stored operands.
ATTENTION = ("flash_attention_fwd", "flash_attention_bwd")
# Results up to this many bytes may be computed ahead of their place for a consumer needed
# earlier (`_order`): the optimizer's step-count scalars, per-row statistics.
PULL_BYTES = 1 << 20
# Kernel kinds that evaluate the values they read at an index (clones may be recomputed there).
_INLINE_KINDS = ("loop", "scatter", "scan", "sort")


def fuse(program: Program) -> FusedProgram:
    eqns = program.eqns
    prod = {id(o): e for e in eqns for o in e.outputs}
    consumers: dict[int, list[int]] = {}
    for i, e in enumerate(eqns):
        for v in e.inputs:
            consumers.setdefault(id(v), []).append(i)
    outputs = {id(v) for v in program.outputs}
    group_of: dict[int, Group] = {}
    groups: list[Group] = []
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
        cls = loop_class(e)
        users, non_loop = users_of(e)
        is_out = any(id(o) in outputs for o in e.outputs)
        cheap = is_cheap(e, prod)
        if users and not non_loop and not is_out and (
            cheap or (len(users) > 1 and cls == "movement")
            or (len(users) > 1 and cls == "elementwise" and (
                len(users) <= MAX_CLONES or per_row(e, users)))
        ):
            clones[i] = users
            for g in users:
                cloned_by.setdefault(id(g), []).append(i)
            continue
        target = users[0] if len(users) == 1 and not non_loop else None
        if cls in ("reduction", "elementwise") and target is None and users:
            shared = shared_target(i, e, cls, users, eqns, prod_index, group_of, clones,
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
                can_join(e, cls, target, is_out, consumers, eqns, clones) and \
                not _sums_matmuls(e, prod, eqns, consumers) and \
                not read_through_windows(e, consumers, eqns):
            target.eqns.append(i)
            group_of[i] = target
            continue
        if cls is not None and target is not None and target.kind == "contraction" and \
                cls != "reduction" and not is_out and target.red_axes is None and \
                not any(c == target.dot for o in e.outputs for c in consumers.get(id(o), [])) \
                and not _sums_matmuls(e, prod, eqns, consumers):
            # A producer of the epilogue (not of the matmul's operands) is evaluated inline.
            target.eqns.append(i)
            group_of[i] = target
            continue
        if cls in ("elementwise", "movement") and target is not None and not is_out and \
                target.kind in _SEQUENTIAL.values() and not _sums_matmuls(e, prod, eqns, consumers):
            # A producer of a scatter's operand, indices or updates, or of a scan's input, is
            # evaluated at an index inside the sequential kernel (no buffer in between).
            target.eqns.append(i)
            group_of[i] = target
            continue
        if e.prim.fusion is FusionKind.CONTRACTION and target is not None and not is_out and \
                epilogue_ok(e, target, eqns, consumers, outputs, clones):
            # Fuse into the matmul: the loop group becomes its epilogue (bias, activation, ...).
            target.kind = "contraction"
            target.dot = i
            target.eqns.append(i)
            group_of[i] = target
            continue
        if cls == "reduction":
            g = Group("loop", e.inputs[0].type.shape, reduced_axes(e), [i])
        elif cls is not None:
            g = Group("loop", e.outputs[0].type.shape, None, [i])
        elif e.prim.fusion is FusionKind.CONTRACTION:
            g = Group("contraction", e.outputs[0].type.shape, None, [i], dot=i)
        elif e.prim.name in _SEQUENTIAL:
            g = Group(_SEQUENTIAL[e.prim.name], e.outputs[0].type.shape, None, [i])
        elif e.prim.name in ATTENTION:
            g = Group("attention", (), None, [i])
        else:
            g = Group(f"host:{e.prim.name}", (), None, [i])
        groups.append(g)
        group_of[i] = g

    groups.reverse()
    groups = merge_siblings(groups, eqns, prod_index, consumers, clones)
    index_of = {id(e): i for i, e in enumerate(eqns)}
    kernels = []
    for g in groups:
        k = _make_kernel(g, eqns, prod, outputs, consumers, clones, index_of)
        if g.kind == "contraction" and _epilogue_reads_operands(k, eqns[g.dot]):
            # The GEMM epilogue only sees the result and its own extra inputs, so an epilogue
            # that also reads the matmul's operands becomes a separate loop kernel.
            epi = Group("loop", g.iter_shape, None, [i for i in g.eqns if i != g.dot])
            for gs in clones.values():
                gs[:] = [epi if x is g else x for x in gs]
            g.eqns = [g.dot]
            k = _make_kernel(g, eqns, prod, outputs, consumers, clones, index_of)
            kernels.append(k)
            k = _make_kernel(epi, eqns, prod, outputs, consumers, clones, index_of)
        kernels.append(k)
    return FusedProgram(program, _order(kernels, program))


def _sums_matmuls(e: Eqn, prod: dict, eqns, consumers) -> bool:
    """Whether `e` is a link of a running sum of matmul results, acc_i = acc_(i-1) + A_i @ B_i
    with acc_(i-1) itself such a sum (linear_cross_entropy's weight gradient, chunk by chunk).
    Joined into its consumer's kernel (the AdamW update, a scatter, the next matmul's
    epilogue), every link would make its term a stored input of that one kernel, all terms
    live at once (8 x 154 MB on GPT-2 124M); as a loop group of its own, each matmul takes the
    running sum as its epilogue instead, for the same traffic. A single sum of two products
    (relu(A @ B + C @ D)) is no chain and still joins."""
    if not _adds_matmul(e, prod):
        return False
    if any((p := prod.get(id(v))) is not None and _adds_matmul(p, prod) for v in e.inputs):
        return True
    # the chain's first link (A_1 @ B_1 + A_2 @ B_2), read by the next link
    return any(_adds_matmul(eqns[c], prod) for o in e.outputs for c in consumers.get(id(o), []))


def _adds_matmul(e: Eqn, prod: dict) -> bool:
    """e is an add or sub with an operand that is a matmul's result of e's shape."""
    if e.prim.name not in ("add", "sub"):
        return False
    shape = e.outputs[0].type.shape
    for v in e.inputs:
        p = prod.get(id(v))
        if p is not None and p.prim.name == "convert_element_type":  # a widened product
            p = prod.get(id(p.inputs[0]))
        if p is not None and p.prim.fusion is FusionKind.CONTRACTION and v.type.shape == shape:
            return True
    return False


def _epilogue_reads_operands(k, dot: Eqn) -> bool:
    operands = {id(v) for v in dot.inputs}
    return any(id(v) in operands for e in k.program.eqns if e is not dot for v in e.inputs)


def _make_kernel(g: Group, eqns, prod, outputs, consumers, clones, index_of) -> Kernel:
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
    k.schedule_position = min(g.eqns)  # its first own equation (not a recomputed clone)
    if g.kind in _INLINE_KINDS:
        k.schedule = {"iter_shape": g.iter_shape, "red_axes": g.red_axes}
    return k


def _order(kernels: list, program: Program) -> list:
    """Kernels in an order where every input is computed before use (list scheduling on
    program order): of the kernels whose inputs are ready, the one needed first runs first. A
    kernel is needed at its first own equation's place in the program, or earlier where a
    kernel needed earlier reads its result (a kernel joining a backward equation with an
    optimizer update needs the update's step-count scalars at the backward's place).

    Running whatever was ready at once hoisted kernels that need only forward values (the
    backward's recomputations, remat.py, for every layer) to the start of the backward, where
    their results then lived across it.

    Only kernels with small results (PULL_BYTES) are pulled ahead of their own place by an
    earlier consumer: a big result pulled ahead is memory held from then on. (The loss total of
    linear_cross_entropy's chunks is one kernel, needed at the first chunk's place; pulled
    through it, every chunk's forward ran before the first chunk's gradient GEMMs, and all
    eight chunks' logits, 1.65 GB at GPT-2 124M, were live at once.)"""
    produced_by = {id(o): n for n, k in enumerate(kernels) for o in k.outputs}
    preds = [sorted({produced_by[id(v)] for v in k.inputs if id(v) in produced_by} - {n})
             for n, k in enumerate(kernels)]
    succs: list[list] = [[] for _ in kernels]
    for n, ps in enumerate(preds):
        for p in ps:
            succs[p].append(n)

    def schedule(priority) -> list:
        missing = [len(ps) for ps in preds]
        heap = [(priority[n], n) for n in range(len(kernels)) if not missing[n]]
        heapq.heapify(heap)
        order = []
        while heap:
            _, n = heapq.heappop(heap)
            order.append(n)
            for m in succs[n]:
                missing[m] -= 1
                if not missing[m]:
                    heapq.heappush(heap, (priority[m], m))
        if len(order) != len(kernels):
            raise AssertionError("fusion produced a cyclic kernel graph")
        return order

    own = [(k.schedule_position, n) for n, k in enumerate(kernels)]
    needed = list(own)
    small = [sum(v.type.nbytes for v in k.outputs) <= PULL_BYTES for k in kernels]
    for n in reversed(schedule(own)):  # consumers before producers
        if small[n]:
            for m in succs[n]:
                needed[n] = min(needed[n], needed[m])
    return [kernels[n] for n in schedule([(needed[n], own[n]) for n in range(len(kernels))])]
