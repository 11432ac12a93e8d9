"""Canonicalization: constant folding and removal of identity movement/cast ops.

Rules (each local, applied in one forward sweep):
- an equation whose inputs are all constants is evaluated (when that does not grow the data);
- identity reshape / broadcast_in_dim / transpose / convert_element_type / copy /
  stop_gradient (after reverse mode it is the identity) -> its input; the rounds before the
  attention pass keep stop_gradient (`canonicalize_keeping_stop_gradient`): a softmax with a
  stopped part has another backward than the one the flash kernel computes, and the forward
  match must see the stop to leave it alone;
- reshape of reshape -> one reshape; transpose of transpose -> one transpose (or none);
  broadcast_in_dim of broadcast_in_dim -> one broadcast.
"""

from __future__ import annotations

import numpy as np

from nova.compiler.rewrite import Rewriter, constant_value, distinct_part, is_splat
from nova.core.ir import Program, TensorType
from nova.core.primitive import FusionKind, makes_effects
from nova.core.trace import _reference_eval

_NO_FOLD = {"constant", "iota", "broadcast_in_dim"}
_FOLD_LIMIT = 64  # elements: folding must not turn a cheap broadcast into a big constant


def canonicalize_keeping_stop_gradient(program: Program) -> Program:
    """canonicalize, leaving stop_gradient in place (the pipeline's rounds before attention
    recognition: found by review, `e / stop_gradient(sum(e))` was fused with softmax's
    backward)."""
    return canonicalize(program, keep_stop_gradient=True)


def canonicalize(program: Program, keep_stop_gradient: bool = False) -> Program:
    rw = Rewriter(program)
    removed = ("copy",) if keep_stop_gradient else ("copy", "stop_gradient")
    for e in program.eqns:
        rw.stage = e.stage
        ins = [rw.get(v) for v in e.inputs]
        name = e.prim.name
        if name in removed:
            rw.replace(e.outputs[0], ins[0])
            continue
        if name in ("reshape", "convert_element_type", "broadcast_in_dim", "transpose") and (
            ins[0].type == e.outputs[0].type and _is_identity(name, e.params, ins[0].type)
        ):
            rw.replace(e.outputs[0], ins[0])
            continue
        src = rw.producer.get(id(ins[0])) if ins else None
        if name == "reshape" and src is not None and src.prim.name == "reshape":
            (out,) = rw.emit("reshape", [src.inputs[0]], e.params, e.source)
            rw.replace(e.outputs[0], out)
            continue
        if name == "transpose" and src is not None and src.prim.name == "transpose":
            inner, outer = src.params["permutation"], e.params["permutation"]
            perm = tuple(inner[p] for p in outer)
            if perm == tuple(range(len(perm))):
                rw.replace(e.outputs[0], src.inputs[0])
            else:
                (out,) = rw.emit("transpose", [src.inputs[0]], {"permutation": perm}, e.source)
                rw.replace(e.outputs[0], out)
            continue
        if name == "broadcast_in_dim" and src is not None and src.prim.name == "broadcast_in_dim":
            inner_dims = src.params["broadcast_dimensions"]
            outer_dims = e.params["broadcast_dimensions"]
            dims = tuple(outer_dims[d] for d in inner_dims)
            (out,) = rw.emit("broadcast_in_dim", [src.inputs[0]],
                             {"shape": e.params["shape"], "broadcast_dimensions": dims}, e.source)
            rw.replace(e.outputs[0], out)
            continue
        # (an io_callback of constants is not folded: it runs each time the program does)
        if ins and name not in _NO_FOLD and not makes_effects(e.prim, e.params):
            consts = [constant_value(v, rw.producer) for v in ins]
            if all(c is not None for c in consts):
                if _fold(rw, e, consts):
                    continue
        rw.keep(e)
    return rw.finish()


def _fold(rw: Rewriter, e, consts) -> bool:
    """Evaluates an equation of constants. Elementwise ops of splats fold to a splat (a 0-d
    constant and a broadcast), so folding never turns a broadcast into a big constant."""
    splat = all(is_splat(c) for c in consts)
    if e.prim.fusion is FusionKind.ELEMENTWISE and splat and not e.prim.multiple_results:
        scalars = [distinct_part(c).reshape(-1)[:1].reshape(()) for c in consts]
        (val,) = _reference_eval(e.prim, scalars, e.params,
                                 [TensorType((), o.type.dtype) for o in e.outputs])
        out = e.outputs[0]
        c = rw.constant(val, e.source)
        if out.type.shape:
            (c,) = rw.emit("broadcast_in_dim", [c], {"shape": out.type.shape,
                                                      "broadcast_dimensions": ()}, e.source)
        rw.replace(out, c)
        return True
    if any(o.type.size > _FOLD_LIMIT for o in e.outputs):
        return False
    vals = _reference_eval(e.prim, [np.asarray(c) for c in consts], e.params,
                           [o.type for o in e.outputs])
    for o, val in zip(e.outputs, vals, strict=True):
        rw.replace(o, rw.constant(val, e.source))
    return True


def _is_identity(name, params, in_type) -> bool:
    if name == "transpose":
        return params["permutation"] == tuple(range(in_type.ndim))
    if name == "broadcast_in_dim":
        return params["broadcast_dimensions"] == tuple(range(in_type.ndim))
    return True
