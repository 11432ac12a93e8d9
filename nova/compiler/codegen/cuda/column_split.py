"""Column reductions split over the reduced rows: one launch of partial results, one to finish.

A column kernel (columns.py) gives each block 32 columns and all the rows, so a bias or
layer-norm weight gradient of 768 columns runs on 24 blocks: 24 of an H200's 132 SMs, each
with one block's loads in flight. The GPT-2 124M step has 50 such kernels moving 7.9 GB
(bench/NOTES.md round 16). Split here, as a split-K GEMM splits its reduction: the first kernel
iterates (P, R/P, columns) and writes, for each reduction, P partial results (P x columns)
besides the kernel's full-shape outputs; the second reduces the P partials with the same
reduction and runs the rest of the kernel (the optimizer update of the reduced values).

Only kernels this applies to cleanly are split: every reduction reduces all axes but the last
with an associative hook (sum, max, min, prod, and, or; not argmax/argmin, whose partials need
positions), no full-shape value depends on a reduction (one level), and what follows the
reductions is per-column. Both kernels are ordinary loop kernels with honest sub-Programs (the
partial reduction is `reduce(reshape(x, (P, R/P, C)), axes=(1,))`), so the reference
interpreter and the simulator check them like any other.
"""

from __future__ import annotations

import numpy as np

from nova.compiler.fusion_rules import ARG_REDUCTIONS, is_reduction
from nova.compiler.kernel import Kernel
from nova.core import dtypes
from nova.core.ir import Eqn, Program, Var
from nova.core.primitive import lookup

LANES = 32  # columns per block (columns.py)
MIN_BYTES = 1 << 20  # below this a second launch costs more than the idle SMs
WAVES = 4  # aim at this many blocks per SM
MIN_ROWS = 128  # rows per split: 16 per warp at least
MAX_SPLITS = 64
_NARROW = (np.dtype(np.float16), dtypes.bfloat16)


def column_splits(k: Kernel, sm_count: int) -> int:
    """How many parts the rows of column kernel k are split into (1: not split): the smallest
    power of two that gives WAVES blocks per SM, with at least MIN_ROWS rows a part, dividing
    the rows evenly; 1 when the kernel already fills twice the SMs or reads under MIN_BYTES."""
    S = tuple(k.schedule.get("iter_shape") or ())
    A = tuple(k.schedule.get("red_axes") or ())
    if k.kind != "loop" or len(S) < 2 or A != tuple(range(len(S) - 1)) or S[-1] < LANES:
        return 1
    tiles = -(-S[-1] // LANES)
    if tiles >= 2 * sm_count or sum(v.type.nbytes for v in k.program.inputs) < MIN_BYTES:
        return 1
    rows = int(np.prod(S[:-1], dtype=np.int64))
    p = 1
    while (p * tiles < WAVES * sm_count and 2 * p <= MAX_SPLITS and rows % (2 * p) == 0
           and rows // (2 * p) >= MIN_ROWS):
        p *= 2
    return p


def _closure(roots, producer, stop) -> list:
    """Ids of the equations that compute `roots`, not walking past Vars in `stop`."""
    seen, todo = {}, list(roots)
    while todo:
        v = todo.pop()
        if id(v) in stop:
            continue
        e = producer.get(id(v))
        if e is None or id(e) in seen:
            continue
        seen[id(e)] = e
        todo.extend(e.inputs)
    return seen


def _eqn(prim_name: str, ins: list, params: dict, out: Var | None = None) -> tuple[Eqn, Var]:
    prim = lookup(prim_name)
    params = prim.canonical_params(params)
    if out is None:
        out = Var(prim.abstract_eval([v.type for v in ins], **params))
    return Eqn(prim, list(ins), params, [out]), out


def split_column_kernel(k: Kernel, sm_count: int) -> list[Kernel] | None:
    """[partials kernel, finishing kernel] for column kernel k (see the module docstring), or
    None when k is not split (column_splits is 1, or its structure is not the one above)."""
    p = column_splits(k, sm_count)
    if p == 1:
        return None
    prog = k.program
    S = tuple(k.schedule["iter_shape"])
    A = tuple(range(len(S) - 1))
    cols, rows = S[-1], int(np.prod(S[:-1], dtype=np.int64))
    reds = [e for e in prog.eqns if is_reduction(e)]
    if not reds:
        return None
    for r in reds:
        if (r.prim.name in ARG_REDUCTIONS or tuple(r.params.get("axes", ())) != A
                or r.inputs[0].type.shape != S or r.outputs[0].type.shape != (cols,)):
            return None
    producer = {id(o): e for e in prog.eqns for o in e.outputs}
    full = [v for v in prog.outputs if v.type.shape == S]
    per_col = [v for v in prog.outputs if v.type.shape != S]
    if any(v.type.shape != (cols,) for v in per_col):
        return None
    red_out = {id(r.outputs[0]) for r in reds}
    bulk = _closure(full + [r.inputs[0] for r in reds], producer, set())
    if any(is_reduction(e) for e in bulk.values()):
        return None  # a second level reads a reduced value: not split
    tail = _closure(per_col, producer, red_out)
    if any(o.type.shape not in ((cols,), ()) for e in tail.values() for o in e.outputs):
        return None  # the finishing kernel iterates (P, columns): per-column values only
    split = (p, rows // p, cols)

    # The partials: the bulk equations, then per reduction reshape -> reduce over axis 1.
    eqns_a = [e for e in prog.eqns if id(e) in bulk]
    parts, eqns_b = [], []
    for r in reds:
        x = r.inputs[0]
        widen = r.prim.name in ("reduce_sum", "reduce_prod") and x.type.dtype in _NARROW
        if widen:  # partials in float32: one rounding, at the end
            e, x = _eqn("convert_element_type", [x], {"new_dtype": np.dtype(np.float32)})
            eqns_a.append(e)
        e, xs = _eqn("reshape", [x], {"new_sizes": split})
        eqns_a.append(e)
        e, part = _eqn(r.prim.name, [xs], {**r.params, "axes": (1,)})
        eqns_a.append(e)
        parts.append(part)
        if widen:
            e, total = _eqn(r.prim.name, [part], {**r.params, "axes": (0,)})
            eqns_b.append(e)
            eqns_b.append(_eqn("convert_element_type", [total],
                               {"new_dtype": r.outputs[0].type.dtype}, r.outputs[0])[0])
        else:
            eqns_b.append(_eqn(r.prim.name, [part], {**r.params, "axes": (0,)},
                               r.outputs[0])[0])
    used_a = {id(v) for e in eqns_a for v in e.inputs} | {id(v) for v in full}
    ins_a = [v for v in prog.inputs if id(v) in used_a]
    part_a = Kernel("loop", Program(ins_a, eqns_a, full + parts), ins_a, full + parts,
                    {"iter_shape": split, "red_axes": (1,), "column_splits": p})
    eqns_b += [e for e in prog.eqns if id(e) in tail]
    used_b = {id(v) for e in eqns_b for v in e.inputs} | {id(v) for v in per_col}
    ins_b = parts + [v for v in prog.inputs if id(v) in used_b]
    finish = Kernel("loop", Program(ins_b, eqns_b, per_col), ins_b, per_col,
                    {"iter_shape": (p, cols), "red_axes": (0,)})
    return [part_a, finish]

