"""Algebraic simplification and the clean-ups that reverse mode makes necessary.

- x + (-0), (-0) + x, x - (+0), x * 1, 1 * x, x / 1 -> x (exact in IEEE arithmetic; x + (+0)
  is not: -0 + +0 is +0), and any zero term in reverse mode's additions (stage "bwd": an
  absent cotangent term, JAX's symbolic zero);
- zero cotangents: neg/broadcast/reshape/transpose/reduce_sum/convert of zeros -> zeros and
  select(p, z, z) -> z (exact, so user arithmetic keeps its IEEE meaning);
- broadcast-then-reduce: reduce_sum over exactly the dimensions a broadcast added -> x * n;
- boolean identities x & false -> false, x & true -> x, x | true -> true, x | false -> x, and
  select of a constant predicate -> the chosen operand (exact), which removes the zero-safe VJP
  masks of constant partials;
- isinf of a value that cannot be infinite (tanh, logistic, sin, cos, erf, finite constants, and
  sums, products and selections of those whose magnitude bound stays below the dtype's maximum)
  -> false;
- a contraction over an empty axis -> zeros; a reduction over an empty axis -> its identity
  (0 for sum, 1 for prod, -inf / +inf or the integer extremes for max / min), broadcast;
- a contraction whose contracting axes all have size 1 (or that has none: a batched outer
  product, which `vmap` of a per-example gradient makes) -> the product of the two operands
  broadcast to the result's shape: exactly the one term of each sum, computed by a loop kernel
  that streams the result (and fuses with its operands' producers) instead of a GEMM with K = 1;
- transpose(dot_general(x, y)) that only swaps the free dimensions -> dot_general(y, x) (when the
  transpose is the product's only reader);
- dot_general(transpose(x), y) (or of a transposed y) -> dot_general(x, y) with the dimension
  numbers read through the permutation, when the result stays a GEMM over the operands' memory
  (`gemm_layout`): `a.T @ g` and `x @ w.T` read a and w where they are instead of a transposed
  copy.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from nova.compiler.kernel import gemm_layout
from nova.compiler.rewrite import Rewriter, splat_value
from nova.core import dtypes
from nova.core.ir import Program
from nova.core.primitive import Reduction

# Ops that map an all-zero operand to all zeros exactly. (mul and dot_general are not here:
# inf * 0 is NaN, and Nova does not change the meaning of user arithmetic.)
_ZERO_PRESERVING = {"neg", "broadcast_in_dim", "reshape", "transpose", "reduce_sum",
                    "convert_element_type"}
# Ops whose result lies in [-1, 1] (or [0, 1]) for every finite or infinite operand (NaN stays
# NaN), and ops that keep a bounded operand bounded: isinf of such a value is always false.
_BOUNDED = {"tanh", "logistic", "sin", "cos", "erf"}
_KEEPS_BOUNDED = {"neg", "broadcast_in_dim", "reshape", "transpose", "abs", "add", "sub", "mul",
                  "select"}


def _is_outer_product(ins, dimension_numbers) -> bool:
    (lc, _), _ = dimension_numbers
    return all(ins[0].type.shape[a] == 1 for a in lc) and ins[0].type.size > 0 and \
        ins[1].type.size > 0


def _outer_product(rw: Rewriter, ins, dimension_numbers, out, source):
    """dot_general(x, y) over size-1 contracting axes as x * y, each operand put in the result's
    order (batch, its free axes), its contracting axes dropped, and broadcast to the result."""
    (lc, rc), (lb, rb) = dimension_numbers
    nb = len(lb)
    x_free = [i for i in range(ins[0].type.ndim) if i not in lc and i not in lb]
    y_free = [i for i in range(ins[1].type.ndim) if i not in rc and i not in rb]
    shape = out.type.shape
    parts = []
    for v, batch, free, contract, at in ((ins[0], lb, x_free, lc, nb),
                                         (ins[1], rb, y_free, rc, nb + len(x_free))):
        perm = (*batch, *free, *contract)
        if perm != tuple(range(len(perm))):
            (v,) = rw.emit("transpose", [v], {"permutation": perm}, source)
        kept = v.type.shape[:nb + len(free)]
        if kept != v.type.shape:
            (v,) = rw.emit("reshape", [v], {"new_sizes": kept}, source)
        dims = (*range(nb), *range(at, at + len(free)))
        if v.type.shape != shape:
            (v,) = rw.emit("broadcast_in_dim", [v], {"shape": shape,
                                                     "broadcast_dimensions": dims}, source)
        parts.append(v)
    return rw.emit("mul", parts, {}, source)[0]


def simplify(program: Program, fold_operand_transposes: bool = True) -> Program:
    """The rewrites of the module docstring; fold_operand_transposes=False keeps transposes
    that feed a dot_general as their own equations (a pass option, for comparing the two)."""
    rw = Rewriter(program)
    uses: dict[int, int] = {}
    for e in program.eqns:
        for v in e.inputs:
            uses[id(v)] = uses.get(id(v), 0) + 1
    for v in program.outputs:
        uses[id(v)] = uses.get(id(v), 0) + 1
    for e in program.eqns:
        rw.stage = e.stage
        ins = [rw.get(v) for v in e.inputs]
        name = e.prim.name
        out = e.outputs[0] if e.outputs else None
        splats = [splat_value(v, rw.producer) for v in ins]
        if name in ("add", "sub") and splats[1] == 0 and ins[0].type == out.type and \
                _exact_zero_operand(e, splats[1], name == "sub"):
            rw.replace(out, ins[0])
            continue
        if name == "add" and splats[0] == 0 and ins[1].type == out.type and \
                _exact_zero_operand(e, splats[0], False):
            rw.replace(out, ins[1])
            continue
        if name in ("mul", "div") and splats[1] == 1 and ins[0].type == out.type:
            rw.replace(out, ins[0])
            continue
        if name == "mul" and splats[0] == 1 and ins[1].type == out.type:
            rw.replace(out, ins[1])
            continue
        if name in _ZERO_PRESERVING and splats and splats[0] == 0:
            # the zero's sign is kept (neg flips it): w / -0.0 is -inf (found by review);
            # a sum of -0s is left alone (the kernels' sums start from +0)
            negative = dtypes.is_float(out.type.dtype) and \
                bool(np.signbit(splats[0])) != (name == "neg")
            if not (name == "reduce_sum" and np.signbit(splats[0])):
                rw.replace(out, _zeros(rw, out, e.source, negative))
                continue
        if name in ("and", "or") and out.type.dtype == np.dtype(bool):
            # x & false -> false, x & true -> x, x | true -> true, x | false -> x (either side);
            # with select below this drops the zero-safe VJP mask (nova/ops/elementwise.py)
            # wherever the partial is a finite constant.
            absorbing = name == "or"  # the value that decides the result alone
            done = False
            for k in (0, 1):
                if splats[k] is None or ins[1 - k].type != out.type:
                    continue
                keep = ins[k] if bool(splats[k]) == absorbing else ins[1 - k]
                rw.replace(out, keep)
                done = True
                break
            if done:
                continue
        if name == "isinf" and _bounded(ins[0], rw.producer):
            # e.g. the zero-safe VJP mask of 0.5 * (1 + tanh(u)) keeps only its isnan test
            c = rw.constant(np.zeros((), bool), e.source)
            if out.type.shape:
                (c,) = rw.emit("broadcast_in_dim", [c], {"shape": out.type.shape,
                                                         "broadcast_dimensions": ()}, e.source)
            rw.replace(out, c)
            continue
        if name == "select" and splats[0] is not None:
            chosen = ins[1] if bool(splats[0]) else ins[2]
            if chosen.type == out.type:
                rw.replace(out, chosen)
                continue
        if name == "select" and splats[1] == 0 and splats[2] == 0:
            rw.replace(out, _zeros(rw, out, e.source))
            continue
        if name == "transpose" and uses.get(id(e.inputs[0])) == 1:
            src = rw.producer.get(id(ins[0]))
            if src is not None and src.prim.name == "dot_general":
                swapped = _swapped_dimension_numbers(src, e.params["permutation"])
                if swapped is not None:
                    (res,) = rw.emit("dot_general", [src.inputs[1], src.inputs[0]],
                                     {"dimension_numbers": swapped}, e.source)
                    rw.replace(out, res)
                    continue
        if name == "dot_general" and fold_operand_transposes:
            folded = _fold_operand_transposes(rw, ins, e.params["dimension_numbers"])
            if folded is not None:
                (res,) = rw.emit("dot_general", folded[0], {"dimension_numbers": folded[1]},
                                 e.source)
                rw.replace(out, res)
                continue
        if name == "dot_general" and any(ins[0].type.shape[a] == 0
                                         for a in e.params["dimension_numbers"][0][0]):
            # A contraction over an empty axis is all zeros (an empty sum), whatever its
            # operands hold: no kernel (the CUDA loop kernel for it did not parse).
            rw.replace(out, _zeros(rw, out, e.source))
            continue
        if name == "dot_general" and _is_outer_product(ins, e.params["dimension_numbers"]):
            rw.replace(out, _outer_product(rw, ins, e.params["dimension_numbers"], out,
                                           e.source))
            continue
        if isinstance(e.prim.kernel, Reduction) and "axes" in e.params and \
                any(ins[0].type.shape[a] == 0 for a in e.params["axes"]):
            # A reduction over an empty axis is its identity everywhere (sum 0, prod 1, max
            # -inf, min +inf, as NumPy's): no kernel loops over nothing (the CUDA codegen
            # could not express such a reduction).
            ident = np.asarray(e.prim.kernel.identity(out.type.dtype), out.type.dtype)
            c = rw.constant(ident, e.source)
            if out.type.shape:
                (c,) = rw.emit("broadcast_in_dim", [c], {"shape": out.type.shape,
                                                         "broadcast_dimensions": ()}, e.source)
            rw.replace(out, c)
            continue
        if name == "reduce_sum":
            src = rw.producer.get(id(ins[0]))
            if src is not None and src.prim.name == "broadcast_in_dim":
                added = _added_dims(src)
                if added is not None and set(e.params["axes"]) == added and \
                        src.inputs[0].type.shape == out.type.shape:
                    n = int(np.prod([src.outputs[0].type.shape[a] for a in added], dtype=np.int64))
                    x = src.inputs[0]
                    c = rw.constant(np.asarray(n, dtype=x.type.dtype), e.source)
                    (cb,) = rw.emit("broadcast_in_dim", [c], {"shape": x.type.shape,
                                                               "broadcast_dimensions": ()}, e.source)
                    (res,) = rw.emit("mul", [x, cb], {}, e.source)
                    rw.replace(out, res)
                    continue
        rw.keep(e)
    return rw.finish()


def _magnitude_bound(v, producer, depth: int = 8) -> float | None:
    """An upper bound of |v| over every input (NaN aside), or None if v may be infinite: finite
    constants, the bounded ops, and sums, products and selections of bounded values."""
    c = splat_value(v, producer)
    if c is not None:
        return abs(float(c)) if np.isfinite(c) else None
    e = producer.get(id(v))
    if e is None or depth == 0 or not dtypes.is_float(v.type.dtype):
        return None
    name = e.prim.name
    if name in _BOUNDED:
        return 1.0
    if name not in _KEEPS_BOUNDED:
        return None
    operands = e.inputs[1:] if name == "select" else e.inputs
    bounds = [_magnitude_bound(u, producer, depth - 1) for u in operands]
    if any(x is None for x in bounds):
        return None
    if name in ("add", "sub"):
        return bounds[0] + bounds[1]
    if name == "mul":
        return bounds[0] * bounds[1]
    return max(bounds)


def _bounded(v, producer) -> bool:
    """v is finite or NaN, never infinite (its magnitude bound is below the dtype's maximum)."""
    bound = _magnitude_bound(v, producer)
    if bound is None or not dtypes.is_float(v.type.dtype):
        return False
    return bound < float(ml_dtypes.finfo(v.type.dtype).max)


def _swapped_dimension_numbers(dot, perm):
    """dot_general(x, y) has dimensions (batch, x free, y free); if `perm` only swaps the two free
    blocks, transpose(dot_general(x, y), perm) is dot_general(y, x) with these dimension numbers
    (the same products and sums, written in the transposed layout: reverse mode's weight
    gradients come out this way). Else None."""
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    x, y = dot.inputs
    nb = len(lb)
    nx = x.type.ndim - len(lc) - nb
    ny = y.type.ndim - len(rc) - nb
    want = list(range(nb)) + list(range(nb + nx, nb + nx + ny)) + list(range(nb, nb + nx))
    if list(perm) != want or want == list(range(len(want))):
        return None
    return ((tuple(rc), tuple(lc)), (tuple(rb), tuple(lb)))


def _fold_operand_transposes(rw: Rewriter, ins, dimension_numbers):
    """([x, y], dimension numbers) of a dot_general reading its transposed operands' sources
    directly, or None when neither operand is a transpose or the folded form is no GEMM over
    memory as it is. dot_general's result dims are (batch, lhs free, rhs free), each free block
    in increasing operand-dim order: a permutation that reorders an operand's free dims among
    themselves would change the result's layout, so it is left alone."""
    (lc, rc), (lb, rb) = dimension_numbers
    dims = [[list(lc), list(lb)], [list(rc), list(rb)]]
    new = list(ins)
    changed = False
    for k in (0, 1):
        src = rw.producer.get(id(ins[k]))
        if src is None or src.prim.name != "transpose":
            continue
        perm = src.params["permutation"]
        contract, batch = dims[k]
        free = [d for d in range(len(perm)) if d not in contract and d not in batch]
        mapped_free = [perm[d] for d in free]
        if mapped_free != sorted(mapped_free):
            continue
        dims[k] = [[perm[d] for d in contract], [perm[d] for d in batch]]
        new[k] = src.inputs[0]
        changed = True
    if not changed:
        return None
    dn = ((tuple(dims[0][0]), tuple(dims[1][0])), (tuple(dims[0][1]), tuple(dims[1][1])))
    if gemm_layout(new[0].type, new[1].type, dn) is None:
        return None
    return new, dn


def _exact_zero_operand(e, zero, subtracted: bool) -> bool:
    """Whether x + zero (x - zero when subtracted) is x for every x: for integers always; for
    floats when the zero is -0.0 (+0.0 when subtracted), since -0.0 + +0.0 is +0.0 (found by
    review: 1 / (x + 0.0) at x = -0.0 gave -inf). Reverse mode's additions (stage "bwd") drop
    a zero either way: a zero there is an absent cotangent term (JAX's symbolic zero), not
    user arithmetic."""
    if e.stage == "bwd" or not dtypes.is_float(e.outputs[0].type.dtype):
        return True
    return bool(np.signbit(zero)) != subtracted


def _zeros(rw: Rewriter, like, source, negative: bool = False):
    c = rw.constant(np.asarray(-0.0 if negative else 0, like.type.dtype), source)
    if like.type.shape == ():
        return c
    (b,) = rw.emit("broadcast_in_dim", [c], {"shape": like.type.shape, "broadcast_dimensions": ()},
                   source)
    return b


def _added_dims(bcast):
    """The output dims a broadcast_in_dim added (not mapped from an operand dim), or None."""
    dims = bcast.params["broadcast_dimensions"]
    in_shape = bcast.inputs[0].type.shape
    if any(in_shape[i] == 1 and bcast.outputs[0].type.shape[d] != 1 for i, d in enumerate(dims)):
        return None
    return set(range(len(bcast.params["shape"]))) - set(dims)
