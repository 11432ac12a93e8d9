"""Merge a scan into the scan that repeats it: reverse mode's forward scan (control_flow.py
`_scan_vjp`) runs the body again to stack the residuals its backward reads, with the primal's
body as its `primal_body`. When the primal scan, with the same operands, length and direction,
is in the same Program (forward and backward traced together under jit), its outputs are the
first outputs of the repeating scan: the primal scan is dropped and the repeating one takes its
place, so the forward loop runs once."""

from __future__ import annotations

from nova.compiler.rewrite import Rewriter
from nova.core.ir import Program


def _key(e, body) -> tuple:
    p = e.params
    return (body, tuple(id(v) for v in e.inputs), p["length"], p["reverse"], p["n_consts"],
            p["n_carry"])


def merge_scans(program: Program) -> Program:
    first: dict = {}  # key -> index of the first primal scan with it
    for i, e in enumerate(program.eqns):
        if e.prim.name == "scan" and e.params.get("primal_body") is None:
            first.setdefault(_key(e, e.params["body"]), i)
    take: dict[int, object] = {}  # index of a primal scan -> the scan that repeats it
    for e in program.eqns:
        if e.prim.name == "scan" and e.params.get("primal_body") is not None:
            i = first.get(_key(e, e.params["primal_body"]))
            if i is not None and i not in take:
                take[i] = e
    if not take:
        return program
    moved = {id(e) for e in take.values()}
    rw = Rewriter(program)
    for i, e in enumerate(program.eqns):
        if id(e) in moved:
            continue  # emitted where its primal scan was
        if i in take:
            r = rw.keep(take[i])
            for old, new in zip(e.outputs, r.outputs, strict=False):
                rw.replace(old, new)
            continue
        rw.keep(e)
    return rw.finish()
