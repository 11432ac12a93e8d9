"""Contraction kernels for the CPU: a dot_general (plus its fused elementwise epilogue) as a
packed GEMM (matmul.py), when its operands' layouts are a (batch, m, k)/(batch, k, m) and
(batch, k, n)/(batch, n, k) view of their memory; otherwise the caller falls back to a loop
kernel.

The epilogue (bias add, activation, residual add: the elementwise equations that fusion put after
the dot_general) is evaluated at C[batch, i, j:j+W] with the same expression-at-an-index machinery
as loop kernels, so broadcasts of a bias or a residual read are folded into its loads.
"""

from __future__ import annotations

import os

import numpy as np

from nova.compiler.codegen.cpu.loops import LoopKernelEmitter, _KB, _NoVector, memref_type
from nova.compiler.codegen.cpu.matmul import (
    MatmulSpec,
    emit_matmul,
    generic_name,
    generic_params,
    generic_variant,
)
from nova.compiler.kernel import Kernel, gemm_layout
from nova.core import dtypes


class _Epilogue(LoopKernelEmitter):
    """Evaluates the epilogue equations at C[batch, i, j:j+W] with a fresh index-aware builder."""

    def __init__(self, kernel: Kernel, dot_out, out_shape, groups):
        self.calls = 0  # per kernel, so the text (and so the cache key) is deterministic
        self.k = kernel
        self.prog = kernel.program
        self.prod = {id(o): e for e in self.prog.eqns for o in e.outputs}
        self.dot_out = dot_out
        self.out_shape = out_shape
        self.groups = groups  # (batch dims, m dims, n dims) as positions of out_shape

    def __call__(self, b, acc, i, j, args):
        self.calls += 1
        kb = _KB()
        kb.exp_fast_path = getattr(b, "exp_fast_path", False)  # on with the CPU matmul's builder
        kb.prefix = f"e{self.calls}_"
        kb.indent = b.indent
        self.b = kb
        self.name = "epilogue"
        self.memo = [{}]
        self.row_vals = {}
        self.W = acc.width
        self.vec_iv = j.name if acc.width else None
        kb.deps[j.name] = frozenset([j.name])
        bi = getattr(b, "batch_index", None)
        self.arg = {}
        for n, v in enumerate(self.prog.inputs[2:]):
            self.arg[id(v)] = (args[n], v.type)
        self.bound = {id(self.dot_out): acc}
        idx = self._index(kb, bi, i, j)
        out = self.value(self.prog.outputs[0], idx)
        if out.width != acc.width:
            out = kb.splat(out, acc.width)
        b.lines.extend(kb.lines)
        return out

    def _index(self, kb, bi, i, j):
        """The multi-dimensional index of C[bi, i, j] in the dot_general's output shape."""
        bd, md, nd = self.groups
        idx = [None] * len(self.out_shape)
        for dims, flat in ((bd, bi), (md, i), (nd, j)):
            if not dims:
                continue
            if len(dims) == 1:
                idx[dims[0]] = flat
                continue
            for pos, d in enumerate(dims):
                stride = int(np.prod([self.out_shape[q] for q in dims[pos + 1:]], dtype=np.int64))
                q = kb.div(flat, kb.const(stride, "index"))
                idx[d] = q if pos == 0 else kb.rem(q, kb.const(self.out_shape[d], "index"))
        return tuple(idx)

    def _compute(self, v, idx):
        if id(v) in self.bound:
            return self.bound[id(v)]
        return super()._compute(v, idx)


def _bare_dot(kernel: Kernel):
    """(dot_general equation, layout) when the kernel is one GEMM-shaped float dot_general
    whose operands are the kernel's two inputs, else None."""
    dots = [e for e in kernel.program.eqns if e.prim.name == "dot_general"]
    if len(dots) != 1 or len(kernel.program.outputs) != 1:
        return None
    dot = dots[0]
    x, y = dot.inputs
    if x.type.dtype not in (dtypes.float32, dtypes.float64):
        return None
    if list(kernel.program.inputs[:2]) != [x, y]:
        return None
    lay = gemm_layout(x.type, y.type, dot.params["dimension_numbers"])
    return None if lay is None else (dot, lay)


def emit_generic_contraction(kernel: Kernel, threads: int | None = None):
    """(symbol, MLIR text, int64 parameter vector) of the shape-generic GEMM running `kernel`
    (a lone dot_general, no epilogue), or None. The text depends only on the dtype, the
    transposes and the register block, so the matmuls of a program of any shapes share a few
    compiled kernels; the shapes, thread split and cache blocks of this kernel are the
    parameter vector (matmul.generic_params), passed as the third argument (A, B, P, C)."""
    found = _bare_dot(kernel)
    if found is None or len(kernel.program.eqns) != 1:
        return None
    dot, (batch, m, n, k, a_trans, b_trans) = found
    if kernel.program.outputs[0] is not dot.outputs[0]:
        return None
    spec = MatmulSpec(batch=batch, m=m, n=n, k=k, a_trans=a_trans, b_trans=b_trans,
                      dtype=dot.inputs[0].type.dtype, threads=threads or os.cpu_count() or 1)
    tiles = generic_variant(spec)
    if tiles is None:
        return None
    sym = generic_name(spec, tiles)
    return sym, emit_matmul(sym, spec, tiles), generic_params(spec)


def generic_matmul_text(dtype, threads: int | None = None):
    """(symbol, MLIR text, argument count) of the shape-generic GEMM serving matmuls of `dtype`
    on this host, or None where the dtype has none: the kernel emit_generic_contraction gives
    any matmul of that dtype large enough for the register block (its text depends on neither
    the shapes nor the transposes), so it can be built before a program's matmuls are known."""
    try:
        spec = MatmulSpec(batch=1, m=4096, n=4096, k=256, dtype=np.dtype(dtype),
                          threads=threads or os.cpu_count() or 1)
        tiles = generic_variant(spec)
    except (KeyError, ValueError, _NoVector):  # a dtype without matmul kernels
        return None
    if tiles is None:
        return None
    sym = generic_name(spec, tiles)
    try:
        return sym, emit_matmul(sym, spec, tiles), 4  # A, B, the parameter vector, C
    except _NoVector:
        return None


def emit_contraction(name: str, kernel: Kernel, threads: int | None = None):
    """(MLIR text, argument order) of a GEMM kernel for `kernel`, or None if its layout or dtype
    does not fit a GEMM (then the caller builds a loop kernel)."""
    found = _bare_dot(kernel)
    if found is None:
        return None
    dot, (batch, m, n, k, a_trans, b_trans) = found
    x = dot.inputs[0]
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    out = dot.outputs[0]
    nb = len(lb)
    nxf = x.type.ndim - len(lc) - nb
    groups = (list(range(nb)), list(range(nb, nb + nxf)), list(range(nb + nxf, out.type.ndim)))
    epi_inputs = list(kernel.program.inputs)[2:]
    final = kernel.program.outputs[0]
    epilogue = None
    if final is not out:
        if final.type.dtype != out.type.dtype or final.type.shape != out.type.shape:
            return None
        epilogue = _Epilogue(kernel, out, out.type.shape, groups)
    spec = MatmulSpec(batch=batch, m=m, n=n, k=k, a_trans=a_trans, b_trans=b_trans,
                      dtype=x.type.dtype, threads=threads or os.cpu_count() or 1,
                      epilogue=epilogue, n_epilogue_args=len(epi_inputs),
                      epilogue_arg_types=tuple(memref_type(v.type) for v in epi_inputs))
    try:
        return emit_matmul(name, spec)
    except _NoVector:
        return None
