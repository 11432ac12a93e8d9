"""Scatters on the GPU (scatter_add: the gradient of gather; scatter with modes set, add, mul, min,
max), as two launches.

1. fill: the output takes the operand (an elementwise loop kernel over the output, with the
   operand's fused producers -- typically zeros -- evaluated in place);
2. update: one thread per update element loads its index row, drops it when out of range (the
   reference's rule) and combines the update into the output:
   - add into float32/float64/float16/int32/int64: `memref.atomic_rmw` (atom.global.add);
   - other adds, mul, min, max: a compare-and-swap loop (`memref.generic_atomic_rmw`) on the
     element's bits, combining with the primitive's own rule (NaN-propagating min/max, as NumPy);
   - set: the last in-range update row with the same index wins (row-major order of the batch,
     as NumPy assigns), so a thread stores only when no later row targets its element.
   The order of atomic combinations is not fixed: float sums and products may differ from the
   sequential reference in the last bits, as with every GPU scatter-add.
"""

from __future__ import annotations

import numpy as np

from nova.compiler.codegen.builder import Value
from nova.compiler.codegen.cpu.index import mem_elem, memref_type
from nova.compiler.codegen.cuda.loops import MAX_BLOCK, WARP, GPULoopEmitter, emit_gpu_loop_kernel
from nova.compiler.kernel import Kernel
from nova.core import dtypes
from nova.core.ir import Eqn, Program
from nova.core.primitive import lookup

_ATOMIC_ADD = {"f32": "addf", "f64": "addf", "f16": "addf", "i32": "addi", "i64": "addi"}
_BITS = {"f16": "i16", "i16": "i16", "f32": "i32", "i32": "i32", "f64": "i64", "i64": "i64"}


def _scatter_eqn(kernel: Kernel) -> Eqn:
    (e,) = [q for q in kernel.program.eqns if q.prim.name in ("scatter_add", "scatter")]
    return e


def _mode(e: Eqn) -> str:
    return "add" if e.prim.name == "scatter_add" else e.params["mode"]


def check_supported(kernel: Kernel) -> Eqn:
    e = _scatter_eqn(kernel)
    mode, dtype = _mode(e), e.outputs[0].type.dtype
    el = mem_elem(dtype)
    cas_ok = el in _BITS
    ok = (mode == "set" or (mode == "add" and el in _ATOMIC_ADD) or cas_ok) and \
        len(kernel.program.outputs) == 1
    if not ok:
        raise NotImplementedError(
            f"cuda codegen: scatter kernel {kernel.name} ({e.prim.name}, mode {mode!r}, {dtype}, "
            f"{len(kernel.program.outputs)} output(s)): combining needs a 16/32/64-bit element "
            "and one output")
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


class GPUScatterUpdate(GPULoopEmitter):
    """The update launch of a scatter kernel (see the module docstring)."""

    def _coords(self, indices, batch_idx, shape, axes) -> tuple:
        """(target coordinates as index values, in-range condition or True) of an index row."""
        b = self.b
        coords, valid = [], []
        for j, a in enumerate(axes):
            c = self.value(indices, tuple(batch_idx) + (b.const(j, "index"),))
            it = np.dtype(c.dtype)
            if not c.unsigned:
                valid.append(b.cmp("ge", c, b.const(0, it)))
            if shape[a] <= np.iinfo(it).max:
                valid.append(b.cmp("lt", c, b.const(shape[a], it)))
            cast = "arith.index_castui" if c.unsigned else "arith.index_cast"
            coords.append(b.op(f"{cast} {c.name} : {c.elem} to index", "index", 0))
        return coords, self._all(valid)

    def _signature(self) -> str:
        text = super()._signature()
        if self.bits_type:  # the compare-and-swap loop sees the output as integers (bare pointer)
            name, v = self.out_args[0]
            text = text.replace(f"{name}: {memref_type(v.type)}",
                                f"{name}: {self.out_memref}")
        return text

    def emit(self) -> str:
        b = self.b
        b.indent = 6
        self.W = 0
        e = _scatter_eqn(self.k)
        _, indices, updates = e.inputs
        axes, mode = e.params["axes"], _mode(e)
        out_t = e.outputs[0].type
        shape, nb = out_t.shape, indices.type.ndim - 1
        el = mem_elem(out_t.dtype)
        use_atomic = mode == "add" and el in _ATOMIC_ADD
        self.bits_type = _BITS[el] if mode not in ("set",) and not use_atomic else None
        dims = "x".join(str(d) for d in shape)
        self.out_memref = f"memref<{dims + 'x' if dims else ''}{self.bits_type}>"
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
        coords, cond = self._coords(indices, idx[:nb], shape, axes)
        if mode == "set":
            cond = self._not_shadowed(indices, idx[:nb], coords, cond, shape, axes)
        if cond is not True:
            self._open(f"scf.if {cond.name} {{")
        upd = b.cast(self.value(updates, tuple(idx)), out_t.dtype)
        rest = iter(idx[nb:])
        dst = [coords[axes.index(d)] if d in axes else next(rest) for d in range(len(shape))]
        name, ix = self.out_args[0][0], ", ".join(x.name for x in dst)
        if mode == "set":
            val = b.cast(upd, dtypes.uint8) if out_t.dtype == dtypes.bool_ else upd
            b.emit(f"memref.store {val.name}, {name}[{ix}] : {memref_type(out_t)}")
        elif use_atomic:
            b.op(f"memref.atomic_rmw {_ATOMIC_ADD[el]} {upd.name}, {name}[{ix}] : "
                 f"({upd.elem}, {memref_type(out_t)}) -> {upd.elem}", out_t.dtype, 0)
        else:
            self._cas(name, ix, upd, mode, out_t.dtype)
        if cond is not True:
            self._end()
        if n % block:
            self._end()
        return self._function_text()

    def _cas(self, name: str, ix: str, upd: Value, mode: str, dtype) -> None:
        """`generic_atomic_rmw` on the element's bits: current value combined with upd."""
        b = self.b
        bits, el = self.bits_type, upd.elem
        res, cur = b.fresh(), b.fresh()
        self._open(f"{res} = memref.generic_atomic_rmw {name}[{ix}] : {self.out_memref} {{")
        b.emit(f"^bb0({cur}: {bits}):")
        old = Value(cur, dtype, 0)
        if el != bits:  # floats: reinterpret the bits (bf16 is carried as i16 already)
            old = b.op(f"arith.bitcast {cur} : {bits} to {el}", dtype, 0)
        b.default_dtype = dtype
        new = {"add": b.add, "mul": b.mul, "min": b.min, "max": b.max}[mode](old, upd)
        out = new.name
        if el != bits:
            out = b.op(f"arith.bitcast {new.name} : {el} to {bits}", "index", 0).name
        b.emit(f"memref.atomic_yield {out} : {bits}")
        self._end()

    def _not_shadowed(self, indices, batch_idx, coords, cond, shape, axes):
        """cond and no later in-range index row (row-major batch order) equals this row."""
        b = self.b
        batch = list(indices.type.shape[:-1])
        total = int(np.prod(batch, dtype=np.int64))
        flat = b.const(0, "index")
        for x, size in zip(batch_idx, batch, strict=True):
            flat = b.add(b.mul(flat, b.const(size, "index")), x)
        start = b.add(flat, b.const(1, "index"))
        no = b.const(False, dtypes.bool_)
        res = b.fresh()
        self._open(f"{res}:1 = scf.for %s = {start.name} to {b.const(total, 'index').name} step "
                   f"{b.const(1, 'index').name} iter_args(%s_a0 = {no.name}) -> (i1) {{")
        s_idx = self._unflatten(Value("%s", "index"), batch) if batch else []
        other, ok = self._coords(indices, s_idx, shape, axes)
        same = ok
        for x, y in zip(coords, other, strict=True):
            eq = b.cmp("eq", x, y)
            same = eq if same is True else b.and_(same, eq)
        shadowed = b.or_(Value("%s_a0", dtypes.bool_, 0), same) if same is not True else \
            b.const(True, dtypes.bool_)
        self._end([shadowed])
        keep = b.not_(Value(f"{res}#0", dtypes.bool_, 0))
        return keep if cond is True else b.and_(cond, keep)


def emit_gpu_scatter(kernel: Kernel) -> list:
    """[(codegen kernel, emitter)] for the fill and the update launches of a scatter kernel.
    Raises NotImplementedError for element types the update cannot combine."""
    check_supported(kernel)
    fill = fill_kernel(kernel)
    update = Kernel("scatter:update", kernel.program, list(kernel.inputs), list(kernel.outputs),
                    dict(kernel.schedule))
    em = GPUScatterUpdate(update.name, update, 0)
    em.text = em.emit()
    return [(fill, emit_gpu_loop_kernel(fill.name, fill)), (update, em)]
