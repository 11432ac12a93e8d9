"""Eager ops through the compiler: each primitive application is a one-equation Program compiled
by the same backend and served from the same kernel cache (DESIGN.md "Eager ops")."""

from __future__ import annotations

from nova.compiler.backend_cpu import compile_program
from nova.compiler.cse import _param_key
from nova.core.ir import Eqn, Program, TensorType, Var
from nova.core.trace import FreshResults

_executables: dict = {}


def run_eqn(prim, values, params, out_types) -> list:
    """Evaluates `prim(*values; params)` with a compiled one-equation program (cached).

    The cache key holds each value's shape and dtype as they are (the pair a TensorType is
    interned by: building the TensorTypes cost ~0.4 us each per op) and the params' keys.
    Results are FreshResults when the executable allocates each of them (bind then skips its
    overlap checks)."""
    key = (prim.name, tuple([(v.shape, v.dtype) for v in values]),
           tuple(sorted((k, _param_key(p)) for k, p in params.items())) if params else ())
    hit = _executables.get(key)
    if hit is None:
        ins = [Var(TensorType(v.shape, v.dtype)) for v in values]
        outs = [Var(t) for t in out_types]
        exe = compile_program(Program(ins, [Eqn(prim, ins, params, outs)], outs))
        # Eager executables are many and cached for the process: they keep no spare output
        # buffers (executable.py _OutputPool).
        exe.pool_outputs(False)
        fresh = getattr(exe, "fresh_outputs", None)
        hit = _executables[key] = (exe, fresh is not None and fresh())
    exe, fresh = hit
    outs = exe(values)
    return FreshResults(outs) if fresh else outs
