"""Sequential kernels for the CPU: scatters (scatter_add, scatter) and cumulative scans.

Both are kernels of their own (fusion kinds "scatter" and "scan", nova/compiler/fuse.py): their
result must be written in a fixed order, so no consumer can evaluate it at an index. Their inputs
are evaluated at an index like a loop kernel's values (LoopKernelEmitter.value), so elementwise
and movement producers fused into the kernel cost no buffer: the zeros a gradient scatters into,
the cotangent it scatters, the input of a scan.

A scatter first fills the output with the operand, then walks the update rows in row-major order
of the index batch: an in-range row combines its slice of updates into the output, an
out-of-range row is dropped (the reference's rules; 'set' keeps the last of repeated indices
because later rows overwrite earlier ones). Large scatters split the update slice's last axis
over threads: each thread owns whole columns of the output, so the row order per element, and
with it every result, stays the same.

A scan loops over the positions of its axis innermost, carrying the running value in registers
(float32 for 16-bit floats, as the reference), vectorized across the last axis when the scan runs
along another one.
"""

from __future__ import annotations

import numpy as np

from nova.compiler.codegen.builder import Value
from nova.compiler.codegen.cpu.loops import (
    MIN_THREADED_ELEMENTS,
    LoopKernelEmitter,
    _NoVector,
    mem_elem,
    memref_type,
)
from nova.compiler.kernel import Kernel
from nova.core import dtypes

SCATTERS = ("scatter_add", "scatter")
SCANS = ("cumsum", "cumprod", "cummax", "cummin")


class _SequentialEmitter(LoopKernelEmitter):
    """Shared plumbing: phases tried with vectors first, loop nests, raw output accesses."""

    def __init__(self, name: str, kernel: Kernel, width: int, threads: int):
        super().__init__(name, kernel, width, threads)
        (self.e,) = [q for q in self.prog.eqns if q.prim.name in SCATTERS + SCANS]
        if list(self.prog.outputs) != [self.e.outputs[0]]:
            raise AssertionError(f"{name}: a {kernel.kind} kernel has the template's result as "
                                 "its only output (fusion invariant broken)")
        self.out_name = self.out_args[0][0]
        self.out_t = self.e.outputs[0].type
        self.vec_aligned = True
        self.width = width  # the vector width each phase tries first (phases reset self.W)

    def _attempt(self, phase) -> None:
        """Emits phase(width) with the vector width, or with scalars when an access along the
        vector axis is not contiguous (the partial vector attempt is discarded)."""
        b = self.b
        lines, mark, indent, depth = b.lines, len(b.lines), b.indent, len(self.memo)
        if self.width:
            try:
                phase(self.width)
                return
            except _NoVector:
                b.lines = lines
                del b.lines[mark:]
                b.indent = indent
                del self.memo[depth:]
                b.forget_constants()
                self.vec_iv = None
        phase(0)

    def _open(self, tag: str, sizes, vec: int, threads: int):
        """Loops over `sizes` (the last stepping by vec when vec > 0), the first split over
        threads when threads > 1; returns (ivs, close)."""
        par = threads > 1 and len(sizes) > 0 and sizes[0] > 1
        ivs = []
        for n, size in enumerate(sizes):
            step = vec if (n == len(sizes) - 1 and vec) else 1
            if n == 0 and par:
                self._parallel_for(f"{tag}{n}", size, step, threads)
            else:
                self._for(f"{tag}{n}", size, step)
            ivs.append(Value(f"%{tag}{n}", "index"))
            if step > 1:
                self.vec_iv = f"%{tag}{n}"

        def close():
            for _ in sizes:
                self._end()
            if par:
                self._close_parallel()
            self.vec_iv = None

        return ivs, close

    def _threads_for(self, size: int) -> int:
        return self.threads if size >= MIN_THREADED_ELEMENTS else 1

    def _mem(self, idx) -> tuple:
        t = self.out_t
        return ", ".join(x.name for x in idx), memref_type(t), mem_elem(t.dtype)

    def _store(self, val: Value, idx, width: int) -> None:
        b = self.b
        ix, mt, el = self._mem(idx)
        if val.dtype == dtypes.bool_:
            val = b.cast(val, dtypes.uint8)
        if width:
            val = b.splat(val, width)
            b.emit(f"vector.store {val.name}, {self.out_name}[{ix}] : {mt}, vector<{width}x{el}>")
        else:
            b.emit(f"memref.store {val.name}, {self.out_name}[{ix}] : {mt}")

    def _load_out(self, idx, width: int) -> Value:
        b = self.b
        ix, mt, el = self._mem(idx)
        dt = self.out_t.dtype
        raw_dt = dtypes.uint8 if dt == dtypes.bool_ else dt
        if width:
            val = b.op(f"vector.load {self.out_name}[{ix}] : {mt}, vector<{width}x{el}>", raw_dt,
                       width)
        else:
            val = b.op(f"memref.load {self.out_name}[{ix}] : {mt}", raw_dt, 0)
        if dt == dtypes.bool_:
            val = b.cmp("ne", val, b.const(0, dtypes.uint8, width))
        return val

    def _text(self) -> str:
        return "\n".join(self.globals + [self._signature()] + self.b.lines + ["    return", "  }"])


class ScatterEmitter(_SequentialEmitter):
    """scatter_add / scatter: fill the output with the operand, then combine the update rows."""

    def emit(self) -> str:
        b = self.b
        b.indent = 4
        operand, indices, updates = self.e.inputs
        t = self.out_t
        if t.size == 0:
            return self._text()
        self._attempt(lambda w: self._fill(operand, w))
        if updates.type.size:
            self._attempt(self._updates)
        return self._text()

    def _fill(self, operand, w: int) -> None:
        shape = self.out_t.shape
        vec = w if w and shape and shape[-1] % w == 0 else 0
        self.W = vec
        ivs, close = self._open("f", shape, vec, self._threads_for(self.out_t.size))
        self._store(self.value(operand, tuple(ivs)), ivs, vec)
        close()
        self.W = 0

    def _combine(self, old: Value, upd: Value) -> Value:
        b = self.b
        mode = "add" if self.e.prim.name == "scatter_add" else self.e.params["mode"]
        b.default_dtype = self.out_t.dtype
        if mode == "add":
            return b.or_(old, upd) if old.dtype == dtypes.bool_ else b.add(old, upd)
        return {"mul": b.mul, "min": b.min, "max": b.max}[mode](old, upd)

    def _updates(self, w: int) -> None:
        b = self.b
        _, indices, updates = self.e.inputs
        axes = self.e.params["axes"]
        shape = self.out_t.shape
        nb = indices.type.ndim - 1
        rest = [d for d in range(len(shape)) if d not in axes]
        rest_sizes = [shape[d] for d in rest]
        vec = w if w and rest and rest[-1] == len(shape) - 1 and rest_sizes[-1] % w == 0 else 0
        threads = self._threads_for(updates.type.size) if rest else 1
        # Split the last axis of the update slice over threads: each thread owns whole output
        # columns and walks every update row in order, so no two threads touch one element.
        split = threads > 1 and rest_sizes[-1] >= 2 * max(vec, 1)
        if split:
            lo, hi = self._thread_span(rest_sizes[-1], max(vec, 1), threads)
        bivs, close_batch = self._open("b", indices.type.shape[:nb], 0, 1)
        coords, valid = [], []
        for j, a in enumerate(axes):
            c = self.value(indices, tuple(bivs) + (b.const(j, "index"),))
            it, size = np.dtype(c.dtype), shape[a]
            if not c.unsigned:
                valid.append(b.cmp("ge", c, b.const(0, it)))
            if size <= np.iinfo(it).max:
                valid.append(b.cmp("lt", c, b.const(size, it)))
            cast = "arith.index_castui" if c.unsigned else "arith.index_cast"
            coords.append(b.op(f"{cast} {c.name} : {c.elem} to index", "index", 0))
        cond = self._all(valid)
        if cond is not True:
            b.emit(f"scf.if {cond.name} {{")
            b.indent += 2
            self.memo.append({})
            b.forget_constants()
        self.W = vec
        rivs = []
        for n, size in enumerate(rest_sizes):
            last = n == len(rest_sizes) - 1
            step = vec if (last and vec) else 1
            if last and split:
                self._for_range(f"r{n}", lo, hi, step)
            else:
                self._for(f"r{n}", size, step)
            rivs.append(Value(f"%r{n}", "index"))
            if step > 1:
                self.vec_iv = f"%r{n}"
        upd = self.value(updates, tuple(bivs) + tuple(rivs))
        pos = iter(rivs)
        dst = tuple(coords[axes.index(d)] if d in axes else next(pos) for d in range(len(shape)))
        if self.e.prim.name == "scatter" and self.e.params["mode"] == "set":
            new = upd
        else:
            new = self._combine(self._load_out(dst, vec), upd)
        self._store(new, dst, vec)
        for _ in rest_sizes:
            self._end()
        self.vec_iv = None
        self.W = 0
        if cond is not True:
            self.memo.pop()
            b.indent -= 2
            b.emit("}")
            b.forget_constants()
        close_batch()
        if split:
            self._close_parallel()


def _scan_identity(name: str, dtype):
    """The running value before the first element: combining it with x gives x exactly
    (-0.0 for float sums, so that a leading -0.0 stays -0.0)."""
    d = np.dtype(dtype)
    if name == "cumsum":
        return -0.0 if dtypes.is_float(d) else 0
    if name == "cumprod":
        return 1
    lowest = name == "cummax"
    if d == dtypes.bool_:
        return not lowest
    if dtypes.is_float(d):
        return -np.inf if lowest else np.inf
    return int(np.iinfo(d).min if lowest else np.iinfo(d).max)


class ScanEmitter(_SequentialEmitter):
    """cumsum / cumprod / cummax / cummin along one axis, optionally from the end."""

    def emit(self) -> str:
        self.b.indent = 4
        if self.out_t.size:
            self._attempt(self._scan)
        return self._text()

    def _scan(self, w: int) -> None:
        b = self.b
        e = self.e
        x = e.inputs[0]
        axis, reverse = e.params["axis"], e.params["reverse"]
        shape = self.out_t.shape
        dt = self.out_t.dtype
        n = shape[axis]
        outer = [d for d in range(len(shape)) if d != axis]
        vec = w if w and outer and outer[-1] == len(shape) - 1 and shape[-1] % w == 0 else 0
        self.W = vec
        ivs, close = self._open("o", [shape[d] for d in outer], vec,
                                self._threads_for(self.out_t.size))
        low = dt in (dtypes.float16, dtypes.bfloat16)
        acc_dt = dtypes.float32 if low else dt
        init = b.const(_scan_identity(e.prim.name, acc_dt), acc_dt, vec)
        res = self._for("k", n, 1, [init])
        acc = Value("%k_a0", acc_dt, vec)
        k = Value("%k", "index")
        pos = b.sub(b.const(n - 1, "index"), k) if reverse else k
        it = iter(ivs)
        idx = tuple(pos if d == axis else next(it) for d in range(len(shape)))
        xv = self.value(x, idx)
        if low:
            xv = b._wide(xv)
        b.default_dtype = acc_dt
        combine = {"cumsum": b.add, "cumprod": b.mul, "cummax": b.max, "cummin": b.min}
        new = combine[e.prim.name](acc, xv)
        if vec:
            new = b.splat(new, vec)
        self._store(b._narrow(new, dt) if low else new, idx, vec)
        self._end([new])
        del res
        close()
        self.W = 0


def emit_sequential_kernel(name: str, kernel: Kernel, vector_width: int | None = None) -> str:
    """MLIR text of `func.func @name(inputs..., outputs...)` for a "scatter" or "scan" kernel."""
    from nova.compiler.codegen.cpu.matmul import host_device

    dev = host_device()
    if vector_width is None:
        vector_width = dev.vector_bits // 32
    cls = ScatterEmitter if kernel.kind == "scatter" else ScanEmitter
    em = cls(name, kernel, vector_width, dev.cores)
    text = em.emit()
    return text
