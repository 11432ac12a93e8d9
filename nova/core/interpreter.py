"""The reference interpreter: runs any Program with the primitives' NumPy implementations.

It is the oracle of every backend test and the executor of last resort.
"""

from __future__ import annotations

import numpy as np

from nova.core.ir import Program
from nova.core.trace import _reference_eval


def run_program(program: Program, args: list) -> list:
    """Evaluates `program` on NumPy values `args`; returns the list of output ndarrays."""
    if len(args) != len(program.inputs):
        raise TypeError(f"program takes {len(program.inputs)} inputs, got {len(args)}")
    env: dict[int, np.ndarray] = {}
    for v, a in zip(program.inputs, args, strict=True):
        a = np.asarray(a)
        if a.shape != v.type.shape or a.dtype != v.type.dtype:
            raise TypeError(
                f"program input {v.hint or ''} expects {v.type}, got {a.shape} {a.dtype}"
            )
        env[id(v)] = a
    for e in program.eqns:
        vals = [env[id(v)] for v in e.inputs]
        outs = _reference_eval(e.prim, vals, e.params, [v.type for v in e.outputs])
        for v, o in zip(e.outputs, outs, strict=True):
            env[id(v)] = o
    return [env[id(v)] for v in program.outputs]
