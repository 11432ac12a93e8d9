"""A small rewriting helper shared by the Program passes: rebuild a Program with replacements."""

from __future__ import annotations

import numpy as np

from nova.core.ir import Eqn, Program, TensorType, Var
from nova.core.primitive import lookup


class Rewriter:
    """Builds a new Program while mapping old values to new ones.

    `emit(prim, inputs, params, like)` appends an equation (inputs are *new* vars) and returns its
    new output vars; `replace(old, new)` makes later uses of `old` read `new`.
    """

    def __init__(self, program: Program):
        self.old = program
        self.env: dict[int, Var] = {}
        self.eqns: list[Eqn] = []
        self.inputs = []
        for v in program.inputs:
            self.env[id(v)] = v
            self.inputs.append(v)
        self.producer: dict[int, Eqn] = {}
        self.stage = "fwd"  # the stage new equations get: passes set it to the rewritten one's

    def get(self, v: Var) -> Var:
        return self.env.get(id(v), v)

    def replace(self, old: Var, new: Var) -> None:
        self.env[id(old)] = new

    def keep(self, e: Eqn) -> Eqn:
        """Re-emits e with its inputs mapped (its outputs keep their identity)."""
        ins = [self.get(v) for v in e.inputs]
        if all(a is b for a, b in zip(ins, e.inputs, strict=True)):
            ne = e
        else:
            ne = Eqn(e.prim, ins, e.params, e.outputs, e.source, e.stage)
        self.eqns.append(ne)
        for o in ne.outputs:
            self.producer[id(o)] = ne
        return ne

    def emit(self, name: str, inputs: list, params: dict, source=None) -> list:
        prim = lookup(name)
        params = prim.canonical_params(params)
        types = prim.abstract_eval([v.type for v in inputs], **params)
        types = list(types) if prim.multiple_results else [types]
        outs = [Var(t) for t in types]
        e = Eqn(prim, list(inputs), params, outs, source, self.stage)
        self.eqns.append(e)
        for o in outs:
            self.producer[id(o)] = e
        return outs

    def constant(self, value: np.ndarray, source=None) -> Var:
        return self.emit("constant", [], {"value": np.asarray(value)}, source)[0]

    def finish(self) -> Program:
        return Program(self.inputs, self.eqns, [self.get(v) for v in self.old.outputs],
                       list(self.old.input_names))


def producers(program: Program) -> dict[int, Eqn]:
    out = {}
    for e in program.eqns:
        for o in e.outputs:
            out[id(o)] = e
    return out


def use_counts(program: Program) -> dict[int, int]:
    counts: dict[int, int] = {}
    for e in program.eqns:
        for v in e.inputs:
            counts[id(v)] = counts.get(id(v), 0) + 1
    for v in program.outputs:
        counts[id(v)] = counts.get(id(v), 0) + 1
    return counts


def constant_value(v: Var, prod: dict) -> np.ndarray | None:
    """The value of v if it is a constant or a broadcast of one (None otherwise)."""
    e = prod.get(id(v))
    if e is None:
        return None
    if e.prim.name == "constant":
        return e.params["value"]
    if e.prim.name == "broadcast_in_dim":
        inner = constant_value(e.inputs[0], prod)
        if inner is not None and inner.size == 1:
            return np.broadcast_to(inner.reshape(()), v.type.shape)
    return None


def distinct_part(c) -> np.ndarray:
    """The elements of c that are stored, not repeated: a broadcast view (zero strides, as
    constant_value returns for a broadcast scalar) loses its repeated axes, so checks on a
    (1024, 4096) broadcast of one number look at one element instead of copying 4M."""
    c = np.asarray(c)
    if c.size and 0 in c.strides:
        c = c[tuple(0 if s == 0 else slice(None) for s in c.strides)]
    return c


def is_splat(c) -> bool:
    """Whether the non-empty array c holds one value in every element."""
    flat = distinct_part(c).reshape(-1)
    return flat.size >= 1 and (flat.size == 1 or bool(np.all(flat == flat[0])))


def splat_value(v: Var, prod: dict):
    """The scalar if v is a constant whose elements are all equal (a splat), else None."""
    c = constant_value(v, prod)
    if c is None or c.size == 0 or not is_splat(c):
        return None
    return distinct_part(c).reshape(-1)[0].item()


def type_of(shape, dtype) -> TensorType:
    return TensorType(tuple(shape), dtype)
