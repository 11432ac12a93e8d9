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

from nova.compiler.rewrite import Rewriter, producers, splat_value
from nova.core import dtypes
from nova.core.ir import Eqn, Program, Var
from nova.core.primitive import FusionKind, IndexMap
from nova.core.trace import _reference_eval

# A masked logit at or below this is hidden exactly as -inf would hide it: exp(fill - m) is 0 in
# float32 once some visible logit m exceeds fill + 104, and every causal row sees its diagonal.
_HIDDEN = -1.0e4
# Masks built from iotas (tril by comparison) are evaluated up to this many elements.
_CONST_EVAL_LIMIT = 1 << 24
_ROW_OPS = ("reduce_sum", "reduce_max", "reduce_min")
_MOVES = ("broadcast_in_dim", "reshape", "transpose", "convert_element_type")


class _Match:
    """One recognized forward: operands with their axis labels, mask and the replaced values."""

    def __init__(self):
        self.eqns: list[Eqn] = []  # forward equations replaced (by identity)
        self.internal: list[Var] = []  # their outputs other than o
        self.labels: dict[int, tuple] = {}  # id(var) -> axis labels, for internal values
        self.scale = 1.0
        self.mask_kind = "none"
        self.fill = float("-inf")
        self.mask = None  # (Tq, Tk) np.ndarray for "select" / "add"
        self.bwd = None  # _Backward when the program holds the VJP of this attention


class _Backward:
    def __init__(self):
        self.eqns: list[Eqn] = []  # the region (including dP and the exit contractions)
        self.dp = None  # the equation dP = dot_general(dO, V')
        self.dp_labels = None
        self.do = None
        self.do_labels = None
        self.exits: dict[str, tuple] = {}  # "dq"/"dk"/"dv" -> (Var, labels)


def fuse_attention(program: Program) -> Program:
    """Replaces every recognized attention (and its backward) by the fused primitives."""
    g = _Graph(program)
    matches = []
    taken: set[int] = set()
    for e in program.eqns:
        if e.prim.name != "dot_general" or id(e) in taken:
            continue
        m = _match_forward(g, e)
        if m is None or any(id(q) in taken for q in m.eqns):
            continue
        if not _match_backward(g, m):
            continue
        matches.append(m)
        taken.update(id(q) for q in m.eqns)
        if m.bwd is not None:
            taken.update(id(q) for q in m.bwd.eqns)
    if not matches:
        return program
    return _rewrite(program, matches)


class _Graph:
    def __init__(self, program: Program):
        self.program = program
        self.prod = producers(program)
        self.users: dict[int, list[Eqn]] = {}
        for e in program.eqns:
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
        """The value of a constant-derived v (evaluated with the reference), or None."""
        if not self.is_const(v) or v.type.size > _CONST_EVAL_LIMIT:
            return None
        if id(v) not in self.consts:
            e = self.prod[id(v)]
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


# --- forward ------------------------------------------------------------------------------------


def _dims(dot: Eqn):
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    return tuple(lc), tuple(rc), tuple(lb), tuple(rb)


def _operand_labels(ndim: int, batch: tuple, contract: int, contract_label: str,
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


def _dot_out_labels(dot: Eqn, lab_x: tuple, lab_y: tuple) -> tuple | None:
    lc, rc, lb, rb = _dims(dot)
    for a, b in zip(lc + lb, rc + rb, strict=True):
        if lab_x[a] != lab_y[b] or lab_x[a] is None:
            return None
    xf = [lab_x[i] for i in range(len(lab_x)) if i not in lc and i not in lb]
    yf = [lab_y[i] for i in range(len(lab_y)) if i not in rc and i not in rb]
    return tuple(lab_x[i] for i in lb) + tuple(xf) + tuple(yf)


def _row_source(g: _Graph, v: Var, shape: tuple, axis: int, eqns: list, guard=None):
    """The per-row value (shape without `axis`) that v broadcasts along `axis`, or None.

    guard: "max" also looks through where(isfinite(m), m, 0) and floor(m) and "sum" through
    where(s == 0, 1, s) (nova.nn's softmax: a fully masked row gives zeros; any shift of the
    exponent cancels in the division), which the fused kernels implement the same way; "recip"
    through one reciprocal (and the "sum" guard)."""
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
    found = [b]
    recips = 0
    while True:
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


def _reciprocal_of(g: _Graph, v: Var):
    """x if v = reciprocal(x) or 1 / x, else None."""
    e = g.prod.get(id(v))
    if e is None:
        return None
    if e.prim.name == "reciprocal":
        return e.inputs[0]
    if e.prim.name == "div" and splat_value(e.inputs[0], g.prod) == 1:
        return e.inputs[1]
    return None


def _guard(g: _Graph, sel: Eqn, guard: str):
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


def _denominator(g: _Graph, e: Eqn, shape: tuple, axis: int, eqns: list):
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


def _softmax(g: _Graph, p: Var, axis: int, m: _Match):
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


def _const_matrix(g: _Graph, v: Var, qa: int, ka: int):
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
    sub = np.moveaxis(full, (qa, ka), (-2, -1))
    first = sub.reshape((-1,) + sub.shape[-2:])[0]
    if not np.all(sub == first):
        return None  # the mask differs between batch elements
    return np.array(first)


def _logits(g: _Graph, x: Var, qa: int, ka: int, m: _Match):
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


def _classify_mask(m: _Match, kind: str, mat: np.ndarray, fill) -> None:
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


def _match_forward(g: _Graph, pv: Eqn) -> _Match | None:
    lc, rc, lb, rb = _dims(pv)
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
        m = _Match()
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
    lc, rc, lb, rb = _dims(qk)
    if len(lc) != 1 or lb != tuple(range(nb)) or rb != tuple(range(nb)):
        return False
    a, b = qk.inputs
    # The output's axes are (batch, a's free, b's free): key axis last means b holds the keys.
    kop_is_b = ka == nb + 1
    qop, kop = (a, b) if kop_is_b else (b, a)
    qc, kc = (lc[0], rc[0]) if kop_is_b else (rc[0], lc[0])
    m.q_labels = _operand_labels(qop.type.ndim, lb, qc, "d", "q")
    m.k_labels = _operand_labels(kop.type.ndim, lb, kc, "d", "k")
    pc, vc, _, _ = _dims(pv)
    vcon = (vc if pi == 0 else pc)[0]
    m.v_labels = _operand_labels(vop.type.ndim, lb, vcon, "k", "e")
    if None in (m.q_labels, m.k_labels, m.v_labels):
        return False
    m.qop, m.kop = qop, kop
    p_labels = tuple(f"b{i}" for i in range(nb)) + (("q", "k") if qa < ka else ("k", "q"))
    m.p_labels = p_labels
    lab = (p_labels, m.v_labels) if pi == 0 else (m.v_labels, p_labels)
    m.o_labels = _dot_out_labels(pv, *lab)
    return m.o_labels is not None and set(m.o_labels) >= {"q", "e"}


def _closed(g: _Graph, m: _Match) -> bool:
    """No forward-stage use of an internal value outside the match; none is a program output."""
    inside = {id(e) for e in m.eqns}
    for v in m.internal:
        if id(v) in g.outputs:
            return False
        for u in g.users.get(id(v), []):
            if id(u) not in inside and u.stage != "bwd":
                return False
    return True


# --- backward -----------------------------------------------------------------------------------


def _internal_labels(m: _Match, v: Var):
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
    if name in _ROW_OPS:
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


def _match_backward(g: _Graph, m: _Match) -> bool:
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
    bwd = _Backward()
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
    bwd.eqns = list(region.values()) + ([bwd.dp] if bwd.dp is not None else [])
    members = {id(e) for e in bwd.eqns}
    if bwd.dp is not None and any(id(u) not in members for u in g.users[id(bwd.dp.outputs[0])]):
        return False
    m.bwd = bwd
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
    if not (e.prim.fusion is FusionKind.ELEMENTWISE or e.prim.name in _MOVES + _ROW_OPS):
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
    lc, rc, lb, rb = _dims(e)
    for vi in (0, 1):
        if e.inputs[vi] is not m.vop:
            continue
        do = e.inputs[1 - vi]
        dc = (rc if vi == 0 else lc)[0]
        do_labels = _operand_labels(do.type.ndim, lb, dc, "e", "q")
        if do_labels is None or (bwd.do is not None and (bwd.do is not do)):
            continue
        lab = (do_labels, m.v_labels) if vi == 1 else (m.v_labels, do_labels)
        out = _dot_out_labels(e, *lab)
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
    lc, rc, _, _ = _dims(e)
    if len(lc) != 1 or (ins[0] is None) == (ins[1] is None):
        return False
    ri = 0 if ins[0] is not None else 1
    ext = e.inputs[1 - ri]
    contracted = ins[ri][(lc if ri == 0 else rc)[0]]
    roles = {"q": (m.qop, m.q_labels), "k": (m.kop, m.k_labels), "do": (bwd.do, bwd.do_labels)}
    for kind, (role, plane, result) in _EXITS.items():
        var, lab = roles[role]
        if var is not ext or contracted != plane or kind in bwd.exits:
            continue
        pair = (ins[0], lab) if ri == 0 else (lab, ins[1])
        out = _dot_out_labels(e, *pair)
        nb = len(m.p_labels) - 2
        if out is None or set(out) - {f"b{i}" for i in range(nb)} != result:
            continue
        bwd.exits[kind] = (e.outputs[0], out)
        return True
    return False


# --- rewrite ------------------------------------------------------------------------------------


def _to_layout(rw: Rewriter, v: Var, have: tuple, want: tuple) -> Var:
    """v (axes labelled `have`) transposed to the axis order `want`."""
    if have == want:
        return v
    return rw.emit("transpose", [v], {"permutation": tuple(have.index(x) for x in want)})[0]


def _canonical(nb: int, *tail: str) -> tuple:
    return tuple(f"b{i}" for i in range(nb)) + tail


def _params(m: _Match) -> dict:
    return {"scale": m.scale, "mask_kind": m.mask_kind, "fill": m.fill}


def _emit_forward(rw: Rewriter, m: _Match, source) -> None:
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


def _emit_backward(rw: Rewriter, m: _Match, source) -> None:
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


def _rewrite(program: Program, matches: list) -> Program:
    rw = Rewriter(program)
    skip: set[int] = set()
    at_fwd = {id(m.pv): m for m in matches}
    at_bwd: dict[int, _Match] = {}
    for m in matches:
        skip.update(id(e) for e in m.eqns)
        if m.bwd is not None:
            skip.update(id(e) for e in m.bwd.eqns)
            first = min((e for e in m.bwd.eqns if e.prim.name == "dot_general" and any(
                e.outputs[0] is var for var, _ in m.bwd.exits.values())),
                key=lambda e: program.eqns.index(e))
            at_bwd[id(first)] = m
    for e in program.eqns:
        rw.stage = e.stage
        if id(e) in at_fwd:
            _emit_forward(rw, at_fwd[id(e)], e.source)
        if id(e) in at_bwd:
            rw.stage = "bwd"
            _emit_backward(rw, at_bwd[id(e)], e.source)
        if id(e) not in skip:
            rw.keep(e)
    return rw.finish()
