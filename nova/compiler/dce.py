"""Dead-code elimination: drop equations none of whose outputs reach a program output, and
shrink kept control flow to what is used, recursively inside its Regions: a `scan` loses its
unused ys, the carries nothing used depends on and the operands its body no longer reads; a
`while` the carries neither a used result nor the predicate depends on (and the constants only
those read); a `cond` its unused results and the operands no branch reads any more."""

from __future__ import annotations

from nova.core.ir import Eqn, Program, Region
from nova.ops.callback import has_effects


def dce(program: Program) -> Program:
    live = {id(v) for v in program.outputs}
    kept = []
    for e in reversed(program.eqns):
        # Every primitive but a host callback made for its effect (Primitive.effectful) is
        # pure (random bits are counter-based), so unused means removable. A loop or cond
        # holding such a callback is kept whole (not shrunk: its effect reads what it reads).
        if has_effects(e):
            kept.append(e)
            live.update(id(v) for v in e.inputs)
            continue
        if any(id(o) in live for o in e.outputs):
            shrink = _SHRINK.get(e.prim.name)
            if shrink is not None:
                e = shrink(e, live)
            kept.append(e)
            live.update(id(v) for v in e.inputs)
    kept.reverse()
    return Program(program.inputs, kept, program.outputs, program.input_names)


def _reads(program: Program, outputs: list) -> set:
    """ids of the program's inputs that `outputs` depend on."""
    need = {id(v) for v in outputs}
    for e in reversed(program.eqns):
        if any(id(o) in need for o in e.outputs):
            need.update(id(v) for v in e.inputs)
    return need & {id(v) for v in program.inputs}


def _shrink_scan(e: Eqn, live: set) -> Eqn:
    """The scan `e` computing only its outputs in `live` (and what they need), or e itself."""
    p = e.params
    body = p["body"].program
    nc, nh = p["n_consts"], p["n_carry"]
    c_in, h_in, x_in = body.inputs[:nc], body.inputs[nc:nc + nh], body.inputs[nc + nh:]
    h_out, y_out = body.outputs[:nh], body.outputs[nh:]
    keep_h = {k for k in range(nh) if id(e.outputs[k]) in live}
    keep_y = [k for k in range(len(y_out)) if id(e.outputs[nh + k]) in live]
    while True:  # a carry is kept while a kept output depends on it
        reads = _reads(body, [h_out[k] for k in sorted(keep_h)] + [y_out[k] for k in keep_y])
        more = {k for k in range(nh) if id(h_in[k]) in reads} - keep_h
        if not more:
            break
        keep_h |= more
    hs = sorted(keep_h)
    cs = [k for k in range(nc) if id(c_in[k]) in reads]
    xs = [k for k in range(len(x_in)) if id(x_in[k]) in reads]
    if len(hs) == nh and len(keep_y) == len(y_out) and len(cs) == nc and len(xs) == len(x_in):
        return e
    new_body = dce(Program([c_in[k] for k in cs] + [h_in[k] for k in hs] + [x_in[k] for k in xs],
                           body.eqns, [h_out[k] for k in hs] + [y_out[k] for k in keep_y]))
    ops = e.inputs
    inputs = ([ops[k] for k in cs] + [ops[nc + k] for k in hs]
              + [ops[nc + nh + k] for k in xs])
    outputs = [e.outputs[k] for k in hs] + [e.outputs[nh + k] for k in keep_y]
    params = {k: v for k, v in p.items() if k != "primal_body"}
    params.update(body=Region(new_body, p["body"].dropped_rules), n_consts=len(cs),
                  n_carry=len(hs))
    return Eqn(e.prim, inputs, params, outputs, e.source, e.stage)


def _shrink_while(e: Eqn, live: set) -> Eqn:
    """The while `e` carrying only what its outputs in `live` and its predicate need."""
    p = e.params
    cond, body = p["cond"].program, p["body"].program
    ncc, nbc = p["n_cond_consts"], p["n_body_consts"]
    nh = len(e.outputs)
    cc_in, ch_in = cond.inputs[:ncc], cond.inputs[ncc:]
    bc_in, bh_in = body.inputs[:nbc], body.inputs[nbc:]
    creads = _reads(cond, cond.outputs)
    keep = {k for k in range(nh) if id(e.outputs[k]) in live or id(ch_in[k]) in creads}
    while True:  # a carry is kept while a kept carry's next value depends on it
        reads = _reads(body, [body.outputs[k] for k in sorted(keep)])
        more = {k for k in range(nh) if id(bh_in[k]) in reads} - keep
        if not more:
            break
        keep |= more
    hs = sorted(keep)
    ccs = [k for k in range(ncc) if id(cc_in[k]) in creads]
    bcs = [k for k in range(nbc) if id(bc_in[k]) in reads]
    if len(hs) == nh and len(ccs) == ncc and len(bcs) == nbc:
        return e
    new_cond = dce(Program([cc_in[k] for k in ccs] + [ch_in[k] for k in hs], cond.eqns,
                           cond.outputs))
    new_body = dce(Program([bc_in[k] for k in bcs] + [bh_in[k] for k in hs], body.eqns,
                           [body.outputs[k] for k in hs]))
    ops = e.inputs
    inputs = ([ops[k] for k in ccs] + [ops[ncc + k] for k in bcs]
              + [ops[ncc + nbc + k] for k in hs])
    params = dict(p, cond=Region(new_cond, p["cond"].dropped_rules),
                  body=Region(new_body, p["body"].dropped_rules), n_cond_consts=len(ccs),
                  n_body_consts=len(bcs))
    return Eqn(e.prim, inputs, params, [e.outputs[k] for k in hs], e.source, e.stage)


def _shrink_cond(e: Eqn, live: set) -> Eqn:
    """The cond `e` computing only its outputs in `live`, reading only the operands some
    branch still needs."""
    branches = [r.program for r in e.params["branches"]]
    outs = [k for k in range(len(e.outputs)) if id(e.outputs[k]) in live]
    n_ops = len(e.inputs) - 1
    reads = [_reads(b, [b.outputs[k] for k in outs]) for b in branches]
    ops = [k for k in range(n_ops) if any(id(b.inputs[k]) in r for b, r in
                                          zip(branches, reads, strict=True))]
    if len(outs) == len(e.outputs) and len(ops) == n_ops:
        return e
    new = tuple(Region(dce(Program([b.inputs[k] for k in ops], b.eqns,
                                   [b.outputs[k] for k in outs])), r.dropped_rules)
                for b, r in zip(branches, e.params["branches"], strict=True))
    params = dict(e.params, branches=new)
    return Eqn(e.prim, [e.inputs[0]] + [e.inputs[1 + k] for k in ops], params,
               [e.outputs[k] for k in outs], e.source, e.stage)


_SHRINK = {"scan": _shrink_scan, "while": _shrink_while, "cond": _shrink_cond}
