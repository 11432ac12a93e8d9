"""Dead-code elimination: drop equations none of whose outputs reach a program output."""

from __future__ import annotations

from nova.core.ir import Program


def dce(program: Program) -> Program:
    live = {id(v) for v in program.outputs}
    kept = []
    for e in reversed(program.eqns):
        # Every primitive is pure (random bits are counter-based), so unused means removable.
        if any(id(o) in live for o in e.outputs):
            kept.append(e)
            live.update(id(v) for v in e.inputs)
    kept.reverse()
    return Program(program.inputs, kept, program.outputs, program.input_names)
