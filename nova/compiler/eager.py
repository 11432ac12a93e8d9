"""Eager ops through the compiler: each primitive application is a one-equation Program compiled
by the same backend and served from the same kernel cache (DESIGN.md "Eager ops")."""

from __future__ import annotations

from nova.compiler.backend_cpu import compile_program
from nova.compiler.cse import _param_key
from nova.core.ir import Eqn, Program, TensorType, Var

_executables: dict = {}


def run_eqn(prim, values, params, out_types) -> list:
    """Evaluates `prim(*values; params)` with a compiled one-equation program (cached)."""
    in_types = tuple(TensorType(v.shape, v.dtype) for v in values)
    key = (prim.name, in_types, tuple(sorted((k, _param_key(p)) for k, p in params.items())))
    exe = _executables.get(key)
    if exe is None:
        ins = [Var(t) for t in in_types]
        outs = [Var(t) for t in out_types]
        exe = compile_program(Program(ins, [Eqn(prim, ins, params, outs)], outs))
        # Eager executables are many and cached for the process: they keep no spare output
        # buffers (executable.py _OutputPool).
        exe.pool_outputs(False)
        _executables[key] = exe
    return exe(list(values))
