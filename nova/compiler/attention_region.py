"""Backward matching for the attention pass (nova/compiler/attention.py): the region of
equations that reverse mode derived from a matched forward, its cotangent dO and its exits (the
cotangents of Q', K' and V'), checked with axis labels."""

from __future__ import annotations

from nova.compiler.attention_match import (
    MOVES,
    ROW_OPS,
    Backward,
    Graph,
    Match,
    dims,
    dot_out_labels,
    operand_labels,
)
from nova.compiler.rewrite import distinct_part
from nova.core.ir import Eqn, Var
from nova.core.primitive import FusionKind, IndexMap


def _internal_labels(m: Match, v: Var):
    """Axis labels of an internal forward value: the (q, k) plane, a row, or a keepdims row."""
    pl = m.p_labels
    shape = m.p.type.shape
    ka = pl.index("k")
    if v.type.shape == shape:
        return pl
    if v.type.shape == tuple(d for i, d in enumerate(shape) if i != ka):
        return tuple(x for x in pl if x != "k")
    if v.type.shape == tuple(1 if i == ka else d for i, d in enumerate(shape)):
        return tuple(None if x == "k" else x for x in pl)
    return None


def _unify(a: tuple, b: tuple):
    if len(a) != len(b):
        return None
    out = []
    for x, y in zip(a, b, strict=True):
        if x is not None and y is not None and x != y:
            return None
        out.append(x if x is not None else y)
    return tuple(out)


def _region_labels(e: Eqn, ins: list):
    """Output labels of a region equation from its inputs' labels (None entries: constants)."""
    name = e.prim.name
    known = [lab for lab in ins if lab is not None]
    if not known:
        return None
    if (e.prim.fusion is FusionKind.ELEMENTWISE and not isinstance(e.prim.kernel, IndexMap)) \
            or name == "convert_element_type":
        out = known[0]
        for lab in known[1:]:
            out = _unify(out, lab)
            if out is None:
                return None
        return out
    (lab,) = ins[:1]
    if lab is None:
        return None
    if name in ROW_OPS:
        axes = e.params["axes"]
        return tuple(x for i, x in enumerate(lab) if i not in axes)
    if name == "transpose":
        return tuple(lab[i] for i in e.params["permutation"])
    if name == "broadcast_in_dim":
        out = [None] * e.outputs[0].type.ndim
        for i, d in enumerate(e.params["broadcast_dimensions"]):
            if e.inputs[0].type.shape[i] == e.outputs[0].type.shape[d]:
                out[d] = lab[i]
        return tuple(out)
    if name == "reshape":  # only the insertion/removal of size-1 axes keeps labels
        src = [(x, n) for x, n in zip(lab, e.inputs[0].type.shape, strict=True) if n != 1]
        dst = e.outputs[0].type.shape
        if [n for _, n in src] != [n for n in dst if n != 1]:
            return None
        it = iter(x for x, _ in src)
        return tuple(next(it) if n != 1 else None for n in dst)
    return None


def match_backward(g: Graph, m: Match) -> bool:
    """Finds the VJP region of m (sets m.bwd), or accepts a forward-only use. False: leave m."""
    inside = {id(e) for e in m.eqns}
    labels: dict[int, tuple] = {}
    for v in m.internal:
        lab = _internal_labels(m, v)
        if lab is None:
            return False
        labels[id(v)] = lab
    region: dict[int, Eqn] = {}
    pending = [u for v in m.internal for u in g.users.get(id(v), []) if id(u) not in inside]
    if not pending:
        return True
    bwd = Backward()
    while pending:
        e = pending.pop()
        if id(e) in region:
            continue
        region[id(e)] = e
        if e.prim.name == "dot_general":
            continue  # an exit (checked by its labels); its users lie outside the region
        for o in e.outputs:
            if id(o) in g.outputs:
                return False
            pending += g.users.get(id(o), [])
    made = {id(o) for e in region.values() for o in e.outputs}
    for e in list(region.values()):  # the cotangent enters through dP: absorb what uses it
        if e.prim.name == "dot_general":
            continue
        for v in e.inputs:
            if id(v) not in labels and id(v) not in made and not g.is_const(v) and \
                    not _absorb(g, m, bwd, v, region, made, labels):
                return False
    for e in region.values():
        if e.prim.name != "dot_general" and any(
                id(u) not in region for o in e.outputs for u in g.users.get(id(o), [])):
            return False
    order = sorted(region.values(), key=lambda q: g.index[id(q)])
    for e in order:
        if not _label_region_eqn(g, m, bwd, e, labels):
            return False
    if bwd.do is None or not bwd.exits:
        return False
    if not _linear_in_dp(g, m, bwd, order):
        return False
    bwd.eqns = list(region.values()) + ([bwd.dp] if bwd.dp is not None else [])
    members = {id(e) for e in bwd.eqns}
    if bwd.dp is not None and any(id(u) not in members for u in g.users[id(bwd.dp.outputs[0])]):
        return False
    m.bwd = bwd
    return True


# Roles of region values for _linear_in_dp: a term linear in dP (the cotangent the fused
# backward recomputes from dO), a coefficient (from forward values and constants only), a
# constant, a predicate (booleans steering selects), a predicate computed from dP.
_LIN, _COEF, _CONST, _PRED, _PRED_OF_DP = "lin", "coef", "const", "pred", "pred of dP"
_LINEAR_UNARY = ("neg", "reduce_sum") + MOVES


def _linear_in_dp(g, m, bwd, order: list) -> bool:
    """Whether the region computes the exits from dP as the fused backward does: by linear
    maps of dP with coefficients from forward values, never adding a term that does not come
    from dP (another use of P or S contributes one: `sum(p * p)`, `sum(s)`; the fused kernel
    would drop it: found by review, wrong gradients under jit)."""
    role: dict[int, str] = {}
    if bwd.dp is not None:
        role[id(bwd.dp.outputs[0])] = _LIN
    for v in m.internal:
        role[id(v)] = _COEF

    def of(v):
        r = role.get(id(v))
        if r is None:
            r = _CONST if g.is_const(v) else None
        return r

    def is_zero(v) -> bool:
        c = g.const_value(v)
        return c is not None and not distinct_part(c).any()

    exit_kind = {id(v): kind for kind, (v, _) in bwd.exits.items()}
    for e in order:
        name = e.prim.name
        rs = [of(v) for v in e.inputs]
        if name == "dot_general":
            # An exit: dQ and dK contract dS (linear in dP) with K' or Q', dV contracts P
            # with dO (the other operand comes from outside the region).
            want = _COEF if exit_kind.get(id(e.outputs[0])) == "dv" else _LIN
            if want not in rs:
                return False
            continue
        if None in rs:
            return False
        if e.outputs[0].type.dtype == bool:
            out = _PRED_OF_DP if _LIN in rs or _PRED_OF_DP in rs else _PRED
        elif _LIN not in rs:
            # A test of dP itself may zero a coefficient (reverse mode's zero-cotangent guard:
            # the product with dP is zero there anyway), never choose between two others.
            if name == "select" and rs[0] == _PRED_OF_DP and \
                    not any(r == _CONST and is_zero(v)
                            for r, v in zip(rs[1:], e.inputs[1:], strict=True)):
                return False
            out = _CONST if all(r == _CONST for r in rs) else _COEF
        elif name in ("add", "sub"):
            if any(r != _LIN for r in rs):
                return False  # a term from elsewhere joins dP's
            out = _LIN
        elif name == "mul":
            if rs.count(_LIN) != 1:
                return False
            out = _LIN
        elif name == "div":
            if rs[0] != _LIN or rs[1] == _LIN:
                return False
            out = _LIN
        elif name == "select":
            if rs[0] == _LIN or any(r != _LIN and not (r == _CONST and is_zero(v))
                                    for r, v in zip(rs[1:], e.inputs[1:], strict=True)):
                return False
            out = _LIN
        elif name in _LINEAR_UNARY:
            out = _LIN
        else:
            return False  # not linear in dP
        role[id(e.outputs[0])] = out
    return True


def _absorb(g, m, bwd, v: Var, region: dict, made: set, labels: dict, depth: int = 0) -> bool:
    """Adds to the region the equations computing v from dP and constants (reverse mode's
    zero-cotangent guards test dP itself); records dP. False when v depends on anything else."""
    e = g.prod.get(id(v))
    if e is None or depth > 16:
        return False
    if e.prim.name == "dot_general":
        lab = _cotangent_product(g, m, bwd, v)
        if lab is None:
            return False
        labels[id(v)] = lab
        return True
    if not (e.prim.fusion is FusionKind.ELEMENTWISE or e.prim.name in MOVES + ROW_OPS):
        return False
    for u in e.inputs:
        if id(u) in labels or id(u) in made or g.is_const(u):
            continue
        if not _absorb(g, m, bwd, u, region, made, labels, depth + 1):
            return False
    region[id(e)] = e
    made.update(id(o) for o in e.outputs)
    return True


def _label_region_eqn(g, m, bwd, e: Eqn, labels: dict) -> bool:
    ins = []
    for v in e.inputs:
        if id(v) in labels:
            ins.append(labels[id(v)])
        elif g.is_const(v) or e.prim.name == "dot_general":
            ins.append(None)
        else:
            return False
    if e.prim.name == "dot_general":
        return _label_exit(m, bwd, e, ins)
    out = _region_labels(e, ins)
    if out is None or len(e.outputs) != 1:
        return False
    labels[id(e.outputs[0])] = out
    return True


def _cotangent_product(g, m, bwd, v: Var):
    """Labels of dP = dot_general(dO, V') (contracting V's head dim), recording dO; else None."""
    e = g.op(v, "dot_general")
    if e is None:
        return None
    if bwd.dp is not None:
        return bwd.dp_labels if e is bwd.dp else None
    lc, rc, lb, rb = dims(e)
    for vi in (0, 1):
        if e.inputs[vi] is not m.vop:
            continue
        do = e.inputs[1 - vi]
        dc = (rc if vi == 0 else lc)[0]
        do_labels = operand_labels(do.type.ndim, lb, dc, "e", "q")
        if do_labels is None or (bwd.do is not None and (bwd.do is not do)):
            continue
        lab = (do_labels, m.v_labels) if vi == 1 else (m.v_labels, do_labels)
        out = dot_out_labels(e, *lab)
        if out != m.p_labels:  # dP is P's cotangent: it has P's layout
            continue
        if do.type.shape != tuple(m.pv.outputs[0].type.shape[m.o_labels.index(x)]
                                  for x in do_labels):
            continue
        bwd.dp, bwd.dp_labels, bwd.do, bwd.do_labels = e, out, do, do_labels
        return out
    return None


# exit kind -> (the external operand's role, the plane label it contracts, result labels)
_EXITS = {"dq": ("k", "k", {"q", "d"}), "dk": ("q", "q", {"k", "d"}), "dv": ("do", "q", {"k", "e"})}


def _label_exit(m, bwd, e: Eqn, ins: list) -> bool:
    """e contracts a region value with Q', K' or dO out of the (q, k) plane: an exit."""
    lc, rc, lb, rb = dims(e)
    if len(lc) != 1 or (ins[0] is None) == (ins[1] is None):
        return False
    ri = 0 if ins[0] is not None else 1
    ext = e.inputs[1 - ri]
    contracted = ins[ri][(lc if ri == 0 else rc)[0]]
    if bwd.do is None and contracted == "q" and ext.type.ndim == len(m.p_labels):
        # Only V is differentiated: no dP, and dO is the other operand of the dV contraction.
        ext_contract, ext_batch = (rc[0], rb) if ri == 0 else (lc[0], lb)
        lab = operand_labels(ext.type.ndim, ext_batch, ext_contract, "q", "e")
        if lab is not None:
            bwd.do, bwd.do_labels = ext, lab
    roles = {"q": (m.qop, m.q_labels), "k": (m.kop, m.k_labels), "do": (bwd.do, bwd.do_labels)}
    for kind, (role, plane, result) in _EXITS.items():
        var, lab = roles[role]
        if var is not ext or contracted != plane or kind in bwd.exits:
            continue
        pair = (ins[0], lab) if ri == 0 else (lab, ins[1])
        out = dot_out_labels(e, *pair)
        nb = len(m.p_labels) - 2
        if out is None or set(out) - {f"b{i}" for i in range(nb)} != result:
            continue
        bwd.exits[kind] = (e.outputs[0], out)
        return True
    return False
