"""Stable sorts on the GPU (sort, argsort, top-k's sort) by rank: one thread per element counts the
elements of its line that sort before it, and writes every operand's value at that rank.

The order is NumPy's (the CPU kernel's `_less`): lexicographic over the first num_keys operands,
NaN after every number, -0.0 equal to 0.0, ties kept in their original order (an element ranks
after the equal elements to its left). Each thread compares with the whole line, so the work is
n^2 per line of n: fine for the short lines of argsort/top-k over a few thousand entries; a
block-wide merge or bitonic sort in shared memory is the next step for long lines.
"""

from __future__ import annotations

import numpy as np

from nova.compiler.codegen.builder import Value
from nova.compiler.codegen.cpu.index import memref_type
from nova.compiler.codegen.cuda.loops import MAX_BLOCK, WARP, GPULoopEmitter
from nova.compiler.kernel import Kernel
from nova.core import dtypes


class GPUSort(GPULoopEmitter):
    """Emits a sort kernel (see the module docstring); launch configuration in grid/block."""

    def _less(self, keys, at_a, at_b) -> Value:
        """Whether the element at index a sorts strictly before the one at index b (i1)."""
        b = self.b
        less, equal_so_far = None, None
        for k in keys:
            x, y = self.value(k, at_a), self.value(k, at_b)
            lt, eq = b.cmp("lt", x, y), b.cmp("eq", x, y)
            if x.is_float:
                nx, ny = b.isnan(x), b.isnan(y)
                lt = b.or_(lt, b.and_(ny, b.not_(nx)))
                eq = b.or_(eq, b.and_(nx, ny))
            term = lt if equal_so_far is None else b.and_(equal_so_far, lt)
            less = term if less is None else b.or_(less, term)
            equal_so_far = eq if equal_so_far is None else b.and_(equal_so_far, eq)
        return less

    def emit(self) -> str:
        b = self.b
        b.indent = 6
        self.W = 0
        (e,) = [q for q in self.prog.eqns if q.prim.name == "sort"]
        outs = list(self.prog.outputs)
        if any(all(o is not r for r in e.outputs) for o in outs):
            raise NotImplementedError(
                f"cuda codegen: sort kernel {self.name} with outputs other than the sort's results")
        dim, keys = e.params["dimension"], e.inputs[:e.params["num_keys"]]
        shape = e.outputs[0].type.shape
        n, total = shape[dim], int(np.prod(shape, dtype=np.int64))
        block = min(MAX_BLOCK, -(-total // WARP) * WARP)
        self.block, self.grid = (block, 1, 1), (-(-total // block), 1, 1)
        bid = b.op("gpu.block_id x", "index", 0)
        tid = b.op("gpu.thread_id x", "index", 0)
        g = b.add(b.mul(bid, b.const(block, "index")), tid)
        if total % block:
            self._open(f"scf.if {b.cmp('lt', g, b.const(total, 'index')).name} {{")
        idx = self._unflatten(g, list(shape))
        self.kept_names, self.kept_sizes = [], []
        for v in e.inputs:  # this thread's own elements: loaded once, outside the loop (memo)
            self.value(v, tuple(idx))
        zero = b.const(0, "index")
        res = b.fresh()
        self._open(f"{res}:1 = scf.for %j = {zero.name} to {b.const(n, 'index').name} step "
                   f"{b.const(1, 'index').name} iter_args(%j_a0 = {zero.name}) -> (index) {{")
        j = Value("%j", "index")
        b.deps[j.name] = frozenset([j.name])
        at_j = tuple(j if d == dim else x for d, x in enumerate(idx))
        before = b.cmp("lt", j, idx[dim])
        # j < i: j ranks first unless it is strictly greater; j > i: only if strictly less.
        inc = b.select(before, b.not_(self._less(keys, tuple(idx), at_j)),
                       self._less(keys, at_j, tuple(idx)))
        step = b.op(f"arith.extui {inc.name} : i1 to i64", dtypes.int64, 0)
        step = b.op(f"arith.index_cast {step.name} : i64 to index", "index", 0)
        rank = b.op(f"arith.addi %j_a0, {step.name} : index", "index", 0)
        self._end([rank])
        dst = tuple(Value(f"{res}#0", "index") if d == dim else x for d, x in enumerate(idx))
        for name, v in self.out_args:
            operand = e.inputs[[id(r) for r in e.outputs].index(id(v))]
            val = self.value(operand, tuple(idx))
            if v.type.dtype == dtypes.bool_:
                val = b.cast(val, dtypes.uint8)
            b.emit(f"memref.store {val.name}, {name}[{', '.join(x.name for x in dst)}] : "
                   f"{memref_type(v.type)}")
        if total % block:
            self._end()
        return self._function_text()


def emit_gpu_sort(kernel: Kernel) -> GPUSort:
    """The emitter of a sort kernel after `emit()` (`.text`, `.grid`, `.block`)."""
    em = GPUSort(kernel.name, kernel, 0)
    em.text = em.emit()
    return em
