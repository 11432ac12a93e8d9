"""Forward matching for the attention pass (nova/compiler/attention.py): the Q·Kᵀ, scale, mask,
softmax, ·V subgraph, with axis labels (batch b0.., query q, key k, head dims d of Q/K and e of
V) for every operand, so that any layout of the operands is recognized."""

from __future__ import annotations

import numpy as np

from nova.compiler.rewrite import producers, splat_value
from nova.core import dtypes
from nova.core.ir import Eqn, Program, Var
from nova.core.trace import _reference_eval

# A masked logit at or below this is hidden exactly as -inf would hide it: exp(fill - m) is 0 in
# float32 once some visible logit m exceeds fill + 104, and every causal row sees its diagonal.
_HIDDEN = -1.0e4
# Masks built from iotas (tril by comparison) are evaluated up to this many elements.
_CONST_EVAL_LIMIT = 1 << 24
ROW_OPS = ("reduce_sum", "reduce_max", "reduce_min")
MOVES = ("broadcast_in_dim", "reshape", "transpose", "convert_element_type")


class Match:
    """One recognized forward: operands with their axis labels, mask and the replaced values."""

    def __init__(self):
        self.eqns: list[Eqn] = []  # forward equations replaced (by identity)
        self.internal: list[Var] = []  # their outputs other than o
        self.pv = self.qk = None  # the P·V and Q·Kᵀ contractions
        self.qop = self.kop = self.vop = self.p = None  # operands Q', K', V' and P
        self.q_labels = self.k_labels = self.v_labels = None  # their axis labels
        self.p_labels = self.o_labels = None
        self.fused = None  # (q, k, v, o, lse) of the emitted forward
        self.mask_var = None  # the emitted mask constant ("select" / "add")
        self.scale = 1.0
        self.mask_kind = "none"
        self.fill = float("-inf")
        self.mask = None  # (Tq, Tk) np.ndarray for "select" / "add"
        self.bwd = None  # Backward when the program holds the VJP of this attention


class Backward:
    def __init__(self):
        self.eqns: list[Eqn] = []  # the region (including dP and the exit contractions)
        self.dp = None  # the equation dP = dot_general(dO, V')
        self.dp_labels = None
        self.do = None
        self.do_labels = None
        self.exits: dict[str, tuple] = {}  # "dq"/"dk"/"dv" -> (Var, labels)


class Graph:
    def __init__(self, program: Program):
        self.program = program
        self.prod = producers(program)
        # Readers that reach a program output: a dead use of an intermediate (left for dce)
        # must not look like a foreign reader. The P·V contraction itself may be dead (grad
        # without the value): the match still starts there, since the backward needs O.
        live = {id(v) for v in program.outputs}
        self.live_eqns: set[int] = set()
        for e in reversed(program.eqns):
            if any(id(o) in live for o in e.outputs):
                self.live_eqns.add(id(e))
                live.update(id(v) for v in e.inputs)
        self.users: dict[int, list[Eqn]] = {}
        for e in program.eqns:
            if id(e) not in self.live_eqns:
                continue
            for v in e.inputs:
                lst = self.users.setdefault(id(v), [])
                if all(u is not e for u in lst):
                    lst.append(e)
        self.outputs = {id(v) for v in program.outputs}
        self.index = {id(e): i for i, e in enumerate(program.eqns)}
        self.consts: dict[int, np.ndarray] = {}

    def op(self, v: Var, *names):
        e = self.prod.get(id(v))
        return e if e is not None and e.prim.name in names else None

    def const_value(self, v: Var):
        """The value of a constant-derived v (evaluated with the reference), or None. A
        broadcast is a read-only view of its operand's value (zero strides, nothing copied), so
        a constant of any size that broadcasts one of at most _CONST_EVAL_LIMIT elements has a
        value: the zero cotangent of a (8, 12, 1024, 1024) causal mask's `select` is a
        broadcast scalar. Other values over the limit are None."""
        if id(v) in self.consts:
            return self.consts[id(v)]
        if not self.is_const(v):
            return None
        e = self.prod[id(v)]
        if e.prim.name == "broadcast_in_dim":
            src = self.const_value(e.inputs[0])
            if src is None:
                return None
            shape = [1] * v.type.ndim
            for i, d in enumerate(e.params["broadcast_dimensions"]):
                shape[d] = src.shape[i]
            val = np.broadcast_to(np.asarray(src).reshape(shape), v.type.shape)
            self.consts[id(v)] = val
            return val
        if v.type.size > _CONST_EVAL_LIMIT:
            return None
        ins = [self.const_value(u) for u in e.inputs]
        if any(x is None for x in ins):
            return None
        outs = _reference_eval(e.prim, ins, e.params, [o.type for o in e.outputs])
        for o, val in zip(e.outputs, outs, strict=True):
            self.consts[id(o)] = val
        return self.consts[id(v)]

    def is_const(self, v: Var, depth: int = 0) -> bool:
        """v is computed from constants and iotas only (a mask, a fill, a splat)."""
        e = self.prod.get(id(v))
        if e is None or depth > 8:
            return False
        if e.prim.name in ("constant", "iota"):
            return True
        return all(self.is_const(u, depth + 1) for u in e.inputs)


def dims(dot: Eqn):
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    return tuple(lc), tuple(rc), tuple(lb), tuple(rb)


def operand_labels(ndim: int, batch: tuple, contract: int, contract_label: str,
                    free_label: str) -> tuple | None:
    """Labels of a rank-(nb+2) dot operand: its batch axes b0.., one contracted, one free axis."""
    if len(batch) != ndim - 2:
        return None
    labels = [None] * ndim
    for n, a in enumerate(batch):
        labels[a] = f"b{n}"
    labels[contract] = contract_label
    free = [i for i in range(ndim) if labels[i] is None]
    if len(free) != 1:
        return None
    labels[free[0]] = free_label
    return tuple(labels)


def dot_out_labels(dot: Eqn, lab_x: tuple, lab_y: tuple) -> tuple | None:
    lc, rc, lb, rb = dims(dot)
    for a, b in zip(lc + lb, rc + rb, strict=True):
        if lab_x[a] != lab_y[b] or lab_x[a] is None:
            return None
    xf = [lab_x[i] for i in range(len(lab_x)) if i not in lc and i not in lb]
    yf = [lab_y[i] for i in range(len(lab_y)) if i not in rc and i not in rb]
    return tuple(lab_x[i] for i in lb) + tuple(xf) + tuple(yf)


def _row_source(g: Graph, v: Var, shape: tuple, axis: int, eqns: list, guard=None):
    """The per-row value (shape without `axis`) that v broadcasts along `axis`, or None.

    guard: "max" also looks through where(isfinite(m), m, 0), floor(m) and stop_gradient(m)
    (jax.nn.softmax's form; the max's cotangent path is zero anyway) and "sum" through
    where(s == 0, 1, s) (nova.nn's softmax: a fully masked row gives zeros; any shift of the
    exponent cancels in the division), which the fused kernels implement the same way; "recip"
    through one reciprocal (and the "sum" guard)."""
    stops = []
    st = g.op(v, "stop_gradient")
    if guard == "max" and st is not None:  # jax.nn.softmax stops the shift: it cancels
        stops, v = [st], st.inputs[0]
    b = g.op(v, "broadcast_in_dim")
    if b is None or b.outputs[0].type.shape != shape:
        return None
    x, dims = b.inputs[0], b.params["broadcast_dimensions"]
    kept = tuple(i for i in range(len(shape)) if i != axis)
    row_shape = tuple(shape[i] for i in kept)
    keep_shape = tuple(1 if i == axis else d for i, d in enumerate(shape))
    if not ((x.type.shape == row_shape and dims == kept) or
            (x.type.shape == keep_shape and dims == tuple(range(len(shape))))):
        return None
    found = stops + [b]
    recips = 0
    while True:
        st = g.op(x, "stop_gradient")
        if guard == "max" and st is not None:
            found.append(st)
            x = st.inputs[0]
            continue
        inner = _reciprocal_of(g, x)
        if guard == "recip" and inner is not None and recips == 0:
            found.append(g.prod[id(x)])
            x, recips = inner, 1
            continue
        fl = g.op(x, "floor")
        if guard == "max" and fl is not None:  # nova.nn shifts by floor(max): it cancels too
            found.append(fl)
            x = fl.inputs[0]
            continue
        sel = g.op(x, "select")
        kind = "sum" if guard == "recip" else guard
        preds = _guard(g, sel, kind) if guard is not None and sel is not None else None
        if preds is not None:
            found += [sel] + preds
            x = sel.inputs[1] if kind == "max" else sel.inputs[2]
            continue
        r = g.op(x, "reshape")
        if r is not None and x.type.shape != row_shape and r.inputs[0].type.shape in (
                row_shape, keep_shape):
            found.append(r)
            x = r.inputs[0]
            continue
        break
    if x.type.shape != row_shape or (guard == "recip" and not recips):
        return None
    eqns += found
    return x


def _reciprocal_of(g: Graph, v: Var):
    """x if v = reciprocal(x) or 1 / x, else None."""
    e = g.prod.get(id(v))
    if e is None:
        return None
    if e.prim.name == "reciprocal":
        return e.inputs[0]
    if e.prim.name == "div" and splat_value(e.inputs[0], g.prod) == 1:
        return e.inputs[1]
    return None


def _guard(g: Graph, sel: Eqn, guard: str):
    """The predicate's equations if sel is where(isfinite(m), m, 0) ("max") or
    where(s == 0, 1, s) ("sum"), else None."""
    pred, a, b = sel.inputs
    if guard == "max":  # isfinite(m) = not(isnan(m) or isinf(m))
        n = g.op(pred, "not")
        o = g.op(n.inputs[0], "or") if n is not None else None
        if o is None or splat_value(b, g.prod) != 0:
            return None
        tests = [g.prod.get(id(u)) for u in o.inputs]
        if any(t is None or t.inputs[0] is not a for t in tests) or \
                sorted(t.prim.name for t in tests) != ["isinf", "isnan"]:
            return None
        return [n, o] + tests
    eq = g.op(pred, "eq")
    if eq is not None and eq.inputs[0] is b and splat_value(eq.inputs[1], g.prod) == 0 \
            and splat_value(a, g.prod) == 1:
        return [eq]
    return None


def _denominator(g: Graph, e: Eqn, shape: tuple, axis: int, eqns: list):
    """(numerator, row sum) if e is num / broadcast(sum) or num * a broadcast reciprocal of it
    (the reciprocal taken before or after the broadcast)."""
    if e.prim.name == "div":
        return e.inputs[0], _row_source(g, e.inputs[1], shape, axis, eqns, "sum")
    for num, den in (e.inputs, e.inputs[::-1]):
        inner = _reciprocal_of(g, den)
        if inner is not None:
            ssum = _row_source(g, inner, shape, axis, eqns, "sum")
            if ssum is not None:
                eqns.append(g.prod[id(den)])
                return num, ssum
        ssum = _row_source(g, den, shape, axis, eqns, "recip")
        if ssum is not None:
            return num, ssum
    return None, None


def _softmax(g: Graph, p: Var, axis: int, m: Match):
    """x if p = softmax(x) over `axis` (max/exp/sum/divide), recording the equations."""
    shape = p.type.shape
    e_div = g.op(p, "div", "mul")
    if e_div is None:
        return None
    eqns = [e_div]
    num, ssum = _denominator(g, e_div, shape, axis, eqns)
    red = g.op(ssum, "reduce_sum") if ssum is not None else None
    if red is None or red.params["axes"] != (axis,) or red.inputs[0] is not num:
        return None
    ex = g.op(num, "exp")
    if ex is None:
        return None
    eqns += [red, ex]
    x = ex.inputs[0]
    sub = g.op(x, "sub")
    if sub is not None:
        rmax = _row_source(g, sub.inputs[1], shape, axis, eqns, "max")
        mx = g.op(rmax, "reduce_max") if rmax is not None else None
        if mx is not None and mx.params["axes"] == (axis,) and mx.inputs[0] is sub.inputs[0]:
            eqns += [sub, mx]
            x = sub.inputs[0]
        else:
            return None  # exp(x - something else) is not a softmax
    m.eqns += eqns
    return x


def _const_matrix(g: Graph, v: Var, qa: int, ka: int):
    """The (Tq, Tk) value of a constant v of the logits' shape that varies only along the query
    axis qa and key axis ka, or None."""
    b = g.op(v, "broadcast_in_dim")
    src, dims = (b.inputs[0], b.params["broadcast_dimensions"]) if b else (v, None)
    val = g.const_value(src)
    if val is None:
        return None
    if dims is None:
        full = val
    else:
        shape = [1] * v.type.ndim
        for i, d in enumerate(dims):
            shape[d] = val.shape[i]
        full = np.broadcast_to(val.reshape(shape), v.type.shape)
    # Batch axes along which the value is a broadcast (zero strides) cannot vary: one index of
    # each is enough, so the check below never materializes the logits' shape (a batch-64
    # causal mask: 0.9 GB of booleans, found by review).
    full = np.asarray(full)
    full = full[tuple(slice(0, 1) if i not in (qa, ka) and full.strides[i] == 0
                      else slice(None) for i in range(full.ndim))]
    sub = np.moveaxis(full, (qa, ka), (-2, -1))
    first = sub.reshape((-1,) + sub.shape[-2:])[0]
    if not np.all(sub == first):
        return None  # the mask differs between batch elements
    return np.array(first)


def _logits(g: Graph, x: Var, qa: int, ka: int, m: Match):
    """Walks from the softmax input back to the Q·Kᵀ contraction; returns it, recording the
    scale and the mask (None when the chain holds anything else)."""
    after = 1.0  # product of the scales met so far (they act after the ops further back)
    masked = None
    while True:
        e = g.prod.get(id(x))
        if e is None:
            return None
        name = e.prim.name
        if name == "dot_general":
            break
        if name in ("mul", "div"):
            a, c = e.inputs
            s = splat_value(c, g.prod)
            if s is None and name == "mul":
                c, a = e.inputs
                s = splat_value(c, g.prod)
            if s is None or not np.isfinite(s) or s <= 0:
                return None
            s = float(s) if name == "mul" else 1.0 / float(s)
            m.scale *= s
            after *= s
            x = a
        elif name == "select" and masked is None:
            keep, a, fill = e.inputs
            f = splat_value(fill, g.prod)
            mat = _const_matrix(g, keep, qa, ka)
            if f is None or mat is None or mat.dtype != np.bool_:
                return None
            masked = ("select", mat, float(f) * after)
            x = a
        elif name == "add" and masked is None:
            a, c = e.inputs
            if not g.is_const(c):
                c, a = e.inputs
            mat = _const_matrix(g, c, qa, ka) if g.is_const(c) else None
            if mat is None:
                return None
            masked = ("add", mat.astype(np.float64) * after, None)
            x = a
        else:
            return None
        m.eqns.append(e)
    if masked is not None:
        _classify_mask(m, *masked)
    return e


def _classify_mask(m: Match, kind: str, mat: np.ndarray, fill) -> None:
    tq, tk = mat.shape
    tril = np.tril(np.ones((tq, tk), bool))
    if kind == "select":
        keep, hidden = mat, fill <= _HIDDEN
        if hidden and np.all(keep):
            return
        if hidden and tq == tk and np.array_equal(keep, tril):
            m.mask_kind = "causal"
            return
        m.mask_kind, m.mask, m.fill = "select", keep, fill
        return
    visible = mat == 0
    if np.all(visible):
        return
    if tq == tk and np.array_equal(visible, tril) and np.all(mat[~visible] <= _HIDDEN):
        m.mask_kind = "causal"
        return
    m.mask_kind, m.mask = "add", mat


def match_forward(g: Graph, pv: Eqn) -> Match | None:
    lc, rc, lb, rb = dims(pv)
    nb = len(lb)
    if len(lc) != 1 or lb != tuple(range(nb)) or rb != tuple(range(nb)):
        return None
    if pv.outputs[0].type.dtype not in (dtypes.float32, dtypes.float64):
        return None
    for pi in (0, 1):
        p, vop = pv.inputs[pi], pv.inputs[1 - pi]
        if p.type.ndim != nb + 2 or vop.type.ndim != nb + 2:
            continue
        axis = (lc if pi == 0 else rc)[0]
        if axis < nb:
            continue
        qa = 2 * nb + 1 - axis  # the other non-batch axis of p
        m = Match()
        x = _softmax(g, p, axis, m)
        if x is None:
            continue
        qk = _logits(g, x, qa, axis, m)
        if qk is None or qk.outputs[0].type.shape != p.type.shape:
            continue
        if not _label_forward(m, qk, pv, pi, p, vop, qa, axis, nb):
            continue
        m.eqns += [qk, pv]
        m.pv, m.qk, m.vop, m.p = pv, qk, vop, p
        m.internal = [o for e in m.eqns if e is not pv for o in e.outputs]
        if _closed(g, m):
            return m
    return None


def _label_forward(m, qk, pv, pi, p, vop, qa, ka, nb) -> bool:
    lc, rc, lb, rb = dims(qk)
    if len(lc) != 1 or lb != tuple(range(nb)) or rb != tuple(range(nb)):
        return False
    a, b = qk.inputs
    # The output's axes are (batch, a's free, b's free): key axis last means b holds the keys.
    kop_is_b = ka == nb + 1
    qop, kop = (a, b) if kop_is_b else (b, a)
    qc, kc = (lc[0], rc[0]) if kop_is_b else (rc[0], lc[0])
    m.q_labels = operand_labels(qop.type.ndim, lb, qc, "d", "q")
    m.k_labels = operand_labels(kop.type.ndim, lb, kc, "d", "k")
    pc, vc, _, _ = dims(pv)
    vcon = (vc if pi == 0 else pc)[0]
    m.v_labels = operand_labels(vop.type.ndim, lb, vcon, "k", "e")
    if None in (m.q_labels, m.k_labels, m.v_labels):
        return False
    m.qop, m.kop = qop, kop
    p_labels = tuple(f"b{i}" for i in range(nb)) + (("q", "k") if qa < ka else ("k", "q"))
    m.p_labels = p_labels
    lab = (p_labels, m.v_labels) if pi == 0 else (m.v_labels, p_labels)
    m.o_labels = dot_out_labels(pv, *lab)
    return m.o_labels is not None and set(m.o_labels) >= {"q", "e"}


def _closed(g: Graph, m: Match) -> bool:
    """No forward-stage use of an internal value outside the match; none is a program output."""
    inside = {id(e) for e in m.eqns}
    for v in m.internal:
        if id(v) in g.outputs:
            return False
        for u in g.users.get(id(v), []):
            if id(u) not in inside and u.stage != "bwd":
                return False
    return True
