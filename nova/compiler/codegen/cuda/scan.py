"""Cumulative scans on the GPU (cumsum, cumprod, cummax, cummin; forward or reversed).

One thread per position of the other axes walks the scan axis in order, carrying the running
value (float32 for 16-bit floats, as the reference), and stores every prefix: the same order of
operations as the NumPy reference, so results match it exactly. When the scan axis is not the
last one, neighbouring threads read neighbouring elements (coalesced); a scan along the last axis
of long rows leaves the GPU mostly idle and reads strided -- a block-wide parallel scan is the
next step for those.
"""

from __future__ import annotations

import numpy as np

from nova.compiler.codegen.builder import Value
from nova.compiler.codegen.cpu.index import memref_type
from nova.compiler.codegen.cuda.loops import MAX_BLOCK, WARP, GPULoopEmitter
from nova.compiler.kernel import Kernel
from nova.core import dtypes
from nova.ops.scan import scan_identity

SCANS = ("cumsum", "cumprod", "cummax", "cummin")



class GPUScan(GPULoopEmitter):
    """Emits a scan kernel (see the module docstring); launch configuration in grid/block."""

    def emit(self) -> str:
        b = self.b
        b.indent = 6
        self.W = 0
        (e,) = [q for q in self.prog.eqns if q.prim.name in SCANS]
        if list(self.prog.outputs) != [e.outputs[0]]:
            raise NotImplementedError(
                f"cuda codegen: scan kernel {self.name} with outputs other than the scan's result")
        x, out_t = e.inputs[0], e.outputs[0].type
        axis, reverse = e.params["axis"], e.params["reverse"]
        shape, n = out_t.shape, out_t.shape[axis]
        outer = [d for d in range(len(shape)) if d != axis]
        total = int(np.prod([shape[d] for d in outer], dtype=np.int64))
        block = min(MAX_BLOCK, -(-total // WARP) * WARP)
        self.block, self.grid = (block, 1, 1), (-(-total // block), 1, 1)
        bid = b.op("gpu.block_id x", "index", 0)
        tid = b.op("gpu.thread_id x", "index", 0)
        g = b.add(b.mul(bid, b.const(block, "index")), tid)
        if total % block:
            self._open(f"scf.if {b.cmp('lt', g, b.const(total, 'index')).name} {{")
        o_idx = self._unflatten(g, [shape[d] for d in outer]) if outer else []
        low = out_t.dtype in (dtypes.float16, dtypes.bfloat16)
        acc_dt = dtypes.float32 if low else out_t.dtype
        init = b.const(scan_identity(e.prim.name, acc_dt), acc_dt)
        res = b.fresh()
        lo, hi, one = b.const(0, "index"), b.const(n, "index"), b.const(1, "index")
        self._open(f"{res}:1 = scf.for %k = {lo.name} to {hi.name} step {one.name} "
                   f"iter_args(%k_a0 = {init.name}) -> ({init.type}) {{")
        acc = Value("%k_a0", acc_dt, 0)
        k = Value("%k", "index")
        b.deps[k.name] = frozenset([k.name])
        pos = b.sub(b.const(n - 1, "index"), k) if reverse else k
        it = iter(o_idx)
        idx = tuple(pos if d == axis else next(it) for d in range(len(shape)))
        self.kept_names, self.kept_sizes = [], []
        xv = self.value(x, idx)
        if low:
            xv = b._wide(xv)
        b.default_dtype = acc_dt
        combine = {"cumsum": b.add, "cumprod": b.mul, "cummax": b.max, "cummin": b.min}
        new = combine[e.prim.name](acc, xv)
        val = b._narrow(new, out_t.dtype) if low else new
        if out_t.dtype == dtypes.bool_:
            val = b.cast(val, dtypes.uint8)
        ix = ", ".join(v.name for v in idx)
        b.emit(f"memref.store {val.name}, {self.out_args[0][0]}[{ix}] : {memref_type(out_t)}")
        self._end([new])
        if total % block:
            self._end()
        return self._function_text()


def emit_gpu_scan(kernel: Kernel) -> GPUScan:
    """The emitter of a scan kernel after `emit()` (`.text`, `.grid`, `.block`)."""
    em = GPUScan(kernel.name, kernel, 0)
    em.text = em.emit()
    return em
