"""Dead-code elimination: drop equations none of whose outputs reach a program output, and
shrink a kept `scan` to what is used (its unused ys, the carries nothing used depends on, and
the operands its body no longer reads), recursively inside its body."""

from __future__ import annotations

from nova.core.ir import Eqn, Program, Region


def dce(program: Program) -> Program:
    live = {id(v) for v in program.outputs}
    kept = []
    for e in reversed(program.eqns):
        # Every primitive is pure (random bits are counter-based), so unused means removable.
        if any(id(o) in live for o in e.outputs):
            if e.prim.name == "scan":
                e = _shrink_scan(e, live)
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
    params.update(body=Region(new_body), n_consts=len(cs), n_carry=len(hs))
    return Eqn(e.prim, inputs, params, outputs, e.source, e.stage)
