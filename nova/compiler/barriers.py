"""Removes the identity markers of ops/structural.py, each result replaced by the operand it
stands for: `optimization_barrier` after the last cse (pipeline.py), so the recomputations a
barrier kept apart from the computations they repeat (nova.checkpoint) stay apart through fusion;
`checkpoint_name` (a name for checkpoint policies, read at trace time) before every other pass,
so that no pattern has to look through it."""

from __future__ import annotations

from nova.compiler.rewrite import Rewriter
from nova.core.ir import Program


def _drop(program: Program, marker: str) -> Program:
    if not any(e.prim.name == marker for e in program.eqns):
        return program
    rw = Rewriter(program)
    for e in program.eqns:
        if e.prim.name == marker:
            for o, v in zip(e.outputs, e.inputs, strict=True):
                rw.replace(o, rw.get(v))
            continue
        rw.keep(e)
    return rw.finish()


def drop_barriers(program: Program) -> Program:
    return _drop(program, "optimization_barrier")


def drop_names(program: Program) -> Program:
    return _drop(program, "checkpoint_name")
