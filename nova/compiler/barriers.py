"""Removes `optimization_barrier` equations (ops/structural.py): each result is replaced by the
operand it stands for. Runs after the last cse (pipeline.py), so the recomputations a barrier
kept apart from the computations they repeat (nova.checkpoint) stay apart through fusion."""

from __future__ import annotations

from nova.compiler.rewrite import Rewriter
from nova.core.ir import Program


def drop_barriers(program: Program) -> Program:
    if not any(e.prim.name == "optimization_barrier" for e in program.eqns):
        return program
    rw = Rewriter(program)
    for e in program.eqns:
        if e.prim.name == "optimization_barrier":
            for o, v in zip(e.outputs, e.inputs, strict=True):
                rw.replace(o, rw.get(v))
            continue
        rw.keep(e)
    return rw.finish()
