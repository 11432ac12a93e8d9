"""Common-subexpression elimination: one equation per (primitive, inputs, params)."""

from __future__ import annotations

import hashlib

import numpy as np

from nova.compiler.rewrite import Rewriter
from nova.core.ir import Program
from nova.ops.callback import has_effects


def _param_key(v):
    if isinstance(v, np.ndarray):
        return ("ndarray", str(v.dtype), v.shape, hashlib.sha1(np.ascontiguousarray(v).tobytes()).hexdigest())
    if isinstance(v, tuple | list):
        return tuple(_param_key(x) for x in v)
    if isinstance(v, float) and v != v:
        return ("nan",)
    if isinstance(v, np.dtype):
        return ("dtype", str(v))
    return (type(v).__name__, v)


def cse(program: Program) -> Program:
    rw = Rewriter(program)
    seen: dict = {}
    for e in program.eqns:
        ins = [rw.get(v) for v in e.inputs]
        if has_effects(e):  # each call of an io_callback happens
            rw.keep(e)
            continue
        key = (e.prim.name, tuple(id(v) for v in ins),
               tuple(sorted((k, _param_key(p)) for k, p in e.params.items())))
        prev = seen.get(key)
        if prev is not None:
            for old, new in zip(e.outputs, prev.outputs, strict=True):
                rw.replace(old, new)
            continue
        seen[key] = rw.keep(e)
    return rw.finish()
