"""gemm_operands: every dot_general whose operands are not a (batched) GEMM over their memory
gets transposed operands that are.

The GEMM kernels (CPU codegen/cpu/matmul.py, CUDA codegen/cuda/matmul.py) read A as (batch, m,
k) or (batch, k, m) and B as (batch, k, n) or (batch, n, k) in place (kernel.gemm_layout). A
dot_general contracting a middle axis (`einsum("ijk,jl->ikl")`: x's free axes on both sides of
the contracted one) or with batch axes that do not lead fit neither: the CPU then ran it as a
scalar loop kernel (~40x slower than the GEMM at (256, 64, 64) x (64, 64)), and CUDA refused
it. Here such an operand is transposed to (batch, free, contracting) for x and (batch,
contracting, free) for y, which keeps the result's axis order (batch, x's free, y's free in
order), so the rewritten equation computes the same values; the transposes are one copy of
each operand, O(size) against the product's O(m n k). Runs in the backends right before fusion
(after the passes, whose transpose folding would undo it). Programs without such a dot_general
are returned as they are.
"""

from __future__ import annotations

from nova.compiler.kernel import gemm_layout
from nova.compiler.rewrite import Rewriter
from nova.core.ir import Program


def _needs_copy(e) -> bool:
    if e.prim.name != "dot_general":
        return False
    x, y = e.inputs
    return gemm_layout(x.type, y.type, e.params["dimension_numbers"]) is None


def gemm_operands(program: Program) -> Program:
    """`program` with transposed operands for the dot_generals that need them (module doc)."""
    if not any(_needs_copy(e) for e in program.eqns):
        return program
    rw = Rewriter(program)
    for e in program.eqns:
        if not _needs_copy(e):
            rw.keep(e)
            continue
        rw.stage = e.stage
        x, y = (rw.get(v) for v in e.inputs)
        (lc, rc), (lb, rb) = e.params["dimension_numbers"]
        xf = [i for i in range(x.type.ndim) if i not in lc and i not in lb]
        yf = [i for i in range(y.type.ndim) if i not in rc and i not in rb]
        px = (*lb, *xf, *lc)
        py = (*rb, *rc, *yf)
        nb, nk = len(lb), len(lc)

        def moved(v, perm):
            if perm == tuple(range(v.type.ndim)):
                return v
            return rw.emit("transpose", [v], {"permutation": perm}, e.source)[0]

        xt, yt = moved(x, px), moved(y, py)
        dn = ((tuple(range(nb + len(xf), nb + len(xf) + nk)), tuple(range(nb, nb + nk))),
              (tuple(range(nb)), tuple(range(nb))))
        (out,) = rw.emit("dot_general", [xt, yt], {"dimension_numbers": dn}, e.source)
        rw.replace(e.outputs[0], out)
    return rw.finish()
