"""Scatter-add on the GPU (the gradient of gather: embedding tables), as two launches.

1. fill: the output takes the operand (an elementwise loop kernel over the output, with the
   operand's fused producers -- typically zeros -- evaluated in place);
2. add: one thread per update element loads its index row, drops it when out of range (the
   reference's rule), and adds the update with `memref.atomic_rmw` (atom.global.add), so
   repeated indices accumulate. The order of those additions is not fixed: float sums may differ
   from the sequential reference in the last bits, as with every GPU scatter-add.

Other scatter modes (set: the last repeated index wins; mul, min, max) and bf16 updates need an
ordered or compare-and-swap kernel: compiling them raises NotImplementedError.
"""

from __future__ import annotations

import numpy as np

from nova.compiler.codegen.cpu.index import mem_elem, memref_type
from nova.compiler.codegen.cuda.loops import MAX_BLOCK, WARP, GPULoopEmitter, emit_gpu_loop_kernel
from nova.compiler.kernel import Kernel
from nova.core.ir import Eqn, Program
from nova.core.primitive import lookup

_ATOMIC_KIND = {"f32": "addf", "f64": "addf", "f16": "addf", "i32": "addi", "i64": "addi"}


def _scatter_eqn(kernel: Kernel) -> Eqn:
    (e,) = [q for q in kernel.program.eqns if q.prim.name in ("scatter_add", "scatter")]
    return e


def check_supported(kernel: Kernel) -> Eqn:
    e = _scatter_eqn(kernel)
    mode = "add" if e.prim.name == "scatter_add" else e.params["mode"]
    dtype = e.outputs[0].type.dtype
    el = mem_elem(dtype)
    if mode != "add" or el not in _ATOMIC_KIND or len(kernel.program.outputs) != 1:
        raise NotImplementedError(
            f"cuda codegen: scatter kernel {kernel.name} ({e.prim.name}, mode {mode!r}, {dtype}, "
            f"{len(kernel.program.outputs)} output(s)): only adding into float32/float64/float16/"
            "int32/int64 with one output has a GPU kernel")
    return e


def fill_kernel(kernel: Kernel) -> Kernel:
    """The loop kernel writing the operand into the scatter's output buffer."""
    e = _scatter_eqn(kernel)
    operand, out = e.inputs[0], e.outputs[0]
    prim = lookup("convert_element_type")  # to its own dtype: a copy at each index
    copy = Eqn(prim, [operand], prim.canonical_params({"new_dtype": out.type.dtype}), [out])
    eqns = [q for q in kernel.program.eqns if q is not e] + [copy]
    prog = Program(list(kernel.program.inputs), eqns, [out])
    return Kernel("scatter:fill", prog, list(kernel.inputs), list(kernel.outputs),
                  {"iter_shape": out.type.shape, "red_axes": None})


class GPUScatterAdd(GPULoopEmitter):
    """The atomic-add launch of a scatter kernel (see the module docstring)."""

    def emit(self) -> str:
        b = self.b
        b.indent = 6
        self.W = 0
        e = _scatter_eqn(self.k)
        _, indices, updates = e.inputs
        axes = e.params["axes"]
        shape = e.outputs[0].type.shape
        nb = indices.type.ndim - 1
        n = updates.type.size
        block = min(MAX_BLOCK, -(-n // WARP) * WARP)
        self.block, self.grid = (block, 1, 1), (-(-n // block), 1, 1)
        bid = b.op("gpu.block_id x", "index", 0)
        tid = b.op("gpu.thread_id x", "index", 0)
        g = b.add(b.mul(bid, b.const(block, "index")), tid)
        if n % block:
            self._open(f"scf.if {b.cmp('lt', g, b.const(n, 'index')).name} {{")
        idx = self._unflatten(g, list(updates.type.shape)) if updates.type.shape else []
        self.kept_names, self.kept_sizes = [x.name for x in idx], list(updates.type.shape)
        coords, valid = [], []
        for j, a in enumerate(axes):
            c = self.value(indices, tuple(idx[:nb]) + (b.const(j, "index"),))
            it = np.dtype(c.dtype)
            if not c.unsigned:
                valid.append(b.cmp("ge", c, b.const(0, it)))
            if shape[a] <= np.iinfo(it).max:
                valid.append(b.cmp("lt", c, b.const(shape[a], it)))
            cast = "arith.index_castui" if c.unsigned else "arith.index_cast"
            coords.append(b.op(f"{cast} {c.name} : {c.elem} to index", "index", 0))
        cond = self._all(valid)
        if cond is not True:
            self._open(f"scf.if {cond.name} {{")
        upd = self.value(updates, tuple(idx))
        rest = iter(idx[nb:])
        dst = [coords[axes.index(d)] if d in axes else next(rest) for d in range(len(shape))]
        name, t = self.out_args[0][0], e.outputs[0].type
        upd = b.cast(upd, t.dtype)
        kind = _ATOMIC_KIND[upd.elem]
        b.op(f"memref.atomic_rmw {kind} {upd.name}, {name}[{', '.join(x.name for x in dst)}] : "
             f"({upd.elem}, {memref_type(t)}) -> {upd.elem}", t.dtype, 0)
        if cond is not True:
            self._end()
        if n % block:
            self._end()
        consts = ["  " + gl + " {alignment = 16 : i64}" for gl in self.globals]
        return "\n".join(consts + [self._signature()] + b.lines + ["      gpu.return", "    }"])


def emit_gpu_scatter(kernel: Kernel) -> list:
    """[(codegen kernel, emitter)] for the fill and the atomic-add launches of a scatter kernel.
    Raises NotImplementedError for modes and dtypes without a GPU kernel."""
    check_supported(kernel)
    fill = fill_kernel(kernel)
    add = Kernel("scatter:add", kernel.program, list(kernel.inputs), list(kernel.outputs),
                 dict(kernel.schedule))
    em = GPUScatterAdd(add.name, add, 0)
    em.text = em.emit()
    return [(fill, emit_gpu_loop_kernel(fill.name, fill)), (add, em)]
