"""Attention recognition: Program -> Program pass replacing scaled-dot-product attention, forward
and backward, by flash_attention_fwd / flash_attention_bwd (nova/ops/attention.py).

Forward. The pass looks for the subgraph users write with nova.numpy or nova.nn:

    r = dot_general(Q', K')                  (q @ swapaxes(k), einsum 'qd,kd->qk', any batch dims)
    x = a chain of: mul/div by a positive scalar constant (the scale, before or after the mask),
        one select(mask constant, ., fill constant) or add(., additive constant)
    p = exp(x - broadcast(reduce_max(x))) / broadcast(reduce_sum(...))    (softmax over keys;
        the max subtraction may be missing; a division or a multiplication by a reciprocal)
    o = dot_general(p, V')                   (p @ v, either operand order)

Axes are tracked as labels (batch..., q, k, d for the head dim of Q/K, e for the head dim of V),
so transposed operands (K stored as Kᵀ, o computed as (v.T @ p.T)) are recognized and get
transposes to and from the fused op's (..., T, D) layout; canonicalize folds them afterwards.
A boolean mask equal to tril (keys after the query hidden, fill <= _HIDDEN) becomes the causal
kernel with no mask operand; other (Tq, Tk) masks become the "select"/"add" operand; masks with
batch dims are not fused (the decomposition runs unchanged).

Backward. After `grad`, reverse mode appended the VJP of each of those ops. Every forward-stage
use of the intermediate values (r, x, max, exp, sum, p) must lie inside the match, so every other
use of them is a backward equation produced by the VJP rules of the matched ops, fed by a single
cotangent dO of o: it enters as dP = dot_general(dO, V') and through the dV contraction.
Following those uses (elementwise ops, row reductions and broadcasts, transposes) until each path
ends in a contraction with Q', K' or dO that leaves the (q, k) plane gives the exits: the
cotangents of Q', K' and V'. The region's result is the VJP of attention by construction; the
labels check that each exit is the contraction it must be, and anything unexpected (a program
output, an unknown op, a second cotangent source) leaves the whole match unfused. The region is
replaced by delta = rowsum(dO ∘ O), one flash_attention_bwd, and transposes to the exits' layouts.
"""

from __future__ import annotations

import numpy as np

from nova.compiler.attention_match import Graph, Match, match_forward
from nova.compiler.attention_region import match_backward
from nova.compiler.rewrite import Rewriter
from nova.core.ir import Program, Var


def fuse_attention(program: Program, supports=None) -> Program:
    """Replaces every recognized attention (and its backward) by the fused primitives.

    supports: a backend's predicate supports(dtype, d, dv) -> bool on the operands' dtype and
    the head dims of q/k and v; an attention it rejects stays matmuls + softmax there."""
    g = Graph(program)
    matches = []
    taken: set[int] = set()
    for e in program.eqns:
        if e.prim.name != "dot_general" or id(e) in taken:
            continue
        m = match_forward(g, e)
        if m is None or any(id(q) in taken for q in m.eqns):
            continue
        if supports is not None and not supports(*_head_dims(m)):
            continue
        if not match_backward(g, m):
            continue
        matches.append(m)
        taken.update(id(q) for q in m.eqns)
        if m.bwd is not None:
            taken.update(id(q) for q in m.bwd.eqns)
    if not matches:
        return program
    return _rewrite(program, matches, g.live_eqns)


def _head_dims(m: Match) -> tuple:
    """(dtype, head dim of q and k, head dim of v) of a recognized attention."""
    q, v = m.qop.type, m.vop.type
    return q.dtype, q.shape[m.q_labels.index("d")], v.shape[m.v_labels.index("e")]


def _to_layout(rw: Rewriter, v: Var, have: tuple, want: tuple) -> Var:
    """v (axes labelled `have`) transposed to the axis order `want`."""
    if have == want:
        return v
    return rw.emit("transpose", [v], {"permutation": tuple(have.index(x) for x in want)})[0]


def _canonical(nb: int, *tail: str) -> tuple:
    return tuple(f"b{i}" for i in range(nb)) + tail


def _params(m: Match) -> dict:
    return {"scale": m.scale, "mask_kind": m.mask_kind, "fill": m.fill}


def _emit_forward(rw: Rewriter, m: Match, source) -> None:
    nb = len(m.p_labels) - 2
    q = _to_layout(rw, rw.get(m.qop), m.q_labels, _canonical(nb, "q", "d"))
    k = _to_layout(rw, rw.get(m.kop), m.k_labels, _canonical(nb, "k", "d"))
    v = _to_layout(rw, rw.get(m.vop), m.v_labels, _canonical(nb, "k", "e"))
    args = [q, k, v]
    if m.mask is not None:
        dt = np.bool_ if m.mask_kind == "select" else q.type.dtype
        m.mask_var = rw.constant(np.asarray(m.mask, dtype=dt), source)
        args.append(m.mask_var)
    o, lse = rw.emit("flash_attention_fwd", args, _params(m), source)
    m.fused = (q, k, v, o, lse)
    rw.replace(m.pv.outputs[0], _to_layout(rw, o, _canonical(nb, "q", "e"), m.o_labels))


def _emit_backward(rw: Rewriter, m: Match, source) -> None:
    nb = len(m.p_labels) - 2
    q, k, v, o, lse = m.fused
    do = _to_layout(rw, rw.get(m.bwd.do), m.bwd.do_labels, _canonical(nb, "q", "e"))
    prod = rw.emit("mul", [do, o], {}, source)[0]
    delta = rw.emit("reduce_sum", [prod], {"axes": (nb + 1,)}, source)[0]
    args = [q, k, v, lse, do, delta] + ([m.mask_var] if m.mask is not None else [])
    dq, dk, dv = rw.emit("flash_attention_bwd", args, _params(m), source)
    have = {"dq": (dq, _canonical(nb, "q", "d")), "dk": (dk, _canonical(nb, "k", "d")),
            "dv": (dv, _canonical(nb, "k", "e"))}
    for kind, (var, labels) in m.bwd.exits.items():
        val, lab = have[kind]
        rw.replace(var, _to_layout(rw, val, lab, labels))


def _rewrite(program: Program, matches: list, live: set) -> Program:
    """The program with each match replaced; dead equations are dropped (one may read a value
    the replacement removed)."""
    rw = Rewriter(program)
    position = {id(e): i for i, e in enumerate(program.eqns)}
    skip: set[int] = set()
    at_fwd = {id(m.pv): m for m in matches}
    at_bwd: dict[int, Match] = {}
    for m in matches:
        skip.update(id(e) for e in m.eqns)
        if m.bwd is not None:
            skip.update(id(e) for e in m.bwd.eqns)
            first = min((e for e in m.bwd.eqns if e.prim.name == "dot_general" and any(
                e.outputs[0] is var for var, _ in m.bwd.exits.values())),
                key=lambda e: position[id(e)])
            at_bwd[id(first)] = m
    for e in program.eqns:
        rw.stage = e.stage
        if id(e) in at_fwd:
            _emit_forward(rw, at_fwd[id(e)], e.source)
        if id(e) in at_bwd:
            rw.stage = "bwd"
            _emit_backward(rw, at_bwd[id(e)], e.source)
        if id(e) not in skip and id(e) in live:
            rw.keep(e)
    return rw.finish()
