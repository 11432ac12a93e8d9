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
from nova.ops.scan import scan_identity

SCATTERS = ("scatter_add", "scatter")
SCANS = ("cumsum", "cumprod", "cummax", "cummin")
SORTS = ("sort",)


class _SequentialEmitter(LoopKernelEmitter):
    """Shared plumbing: phases tried with vectors first, loop nests, raw output accesses."""

    def __init__(self, name: str, kernel: Kernel, width: int, threads: int):
        super().__init__(name, kernel, width, threads)
        (self.e,) = [q for q in self.prog.eqns if q.prim.name in SCATTERS + SCANS + SORTS]
        outs = list(self.prog.outputs)
        if not outs or any(all(o is not r for r in self.e.outputs) for o in outs):
            raise AssertionError(f"{name}: a {kernel.kind} kernel has only the template's results "
                                 "as outputs (fusion invariant broken)")
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
        init = b.const(scan_identity(e.prim.name, acc_dt), acc_dt, vec)
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


class SortEmitter(_SequentialEmitter):
    """sort: per row, a stable bottom-up merge sort of the positions 0..n-1 by the keys (two
    heap scratch buffers of positions, one pass per doubling run width, unrolled since n is
    static), then every output element is its operand read at the sorted position.

    Order (NumPy's, as the reference): lexicographic over the keys; floats compare numerically
    with -0.0 equal to 0.0 and NaN after everything (NaNs equal among themselves); a merge takes
    the left run's element unless the right one is strictly smaller, which keeps ties stable.
    """

    def emit(self) -> str:
        self.b.indent = 4
        self._attempt(self._sort)
        return self._text()

    def _region(self):
        self.memo.append({})
        self.b.forget_constants()
        self.b.indent += 2

    def _end_region(self):
        self.memo.pop()
        self.b.forget_constants()
        self.b.indent -= 2

    def _less(self, at_a, at_b) -> Value:
        """Whether the element at position a sorts strictly before the one at b (i1)."""
        b = self.b
        keys = self.e.inputs[:self.e.params["num_keys"]]
        less, equal_so_far = None, None
        for k in keys:
            x, y = self.value(k, at_a), self.value(k, at_b)
            lt = b.cmp("lt", x, y)
            eq = b.cmp("eq", x, y)
            if x.is_float:
                nx, ny = b.isnan(x), b.isnan(y)
                lt = b.or_(lt, b.and_(ny, b.not_(nx)))
                eq = b.or_(eq, b.and_(nx, ny))
            term = lt if equal_so_far is None else b.and_(equal_so_far, lt)
            less = term if less is None else b.or_(less, term)
            equal_so_far = eq if equal_so_far is None else b.and_(equal_so_far, eq)
        return less

    def _sort(self, w: int) -> None:
        del w  # positions are data-dependent: scalar code
        b = self.b
        e = self.e
        d = e.params["dimension"]
        shape = e.inputs[0].type.shape
        n = shape[d]
        if not all(shape):
            return
        rows = [i for i in range(len(shape)) if i != d]
        ivs, close = self._open("o", [shape[i] for i in rows],
                                0, self._threads_for(int(np.prod(shape, dtype=np.int64))))
        pos_t = f"memref<{n}xi32>"
        self.row_ivs = ivs
        bufs = [b.op(f"memref.alloc() : {pos_t}", "index", 0) for _ in range(2 if n > 1 else 1)]
        self._for("p", n, 1)
        j = b.op("arith.index_cast %p : index to i32", dtypes.int32, 0)
        b.emit(f"memref.store {j.name}, {bufs[0].name}[%p] : {pos_t}")
        self._end()
        src, dst = bufs[0], bufs[-1]
        width, npass = 1, 0
        while width < n:
            npass += 1
            self._merge_pass(npass, width, n, src, dst, pos_t)
            src, dst = dst, src
            width *= 2
        self._for("q", n, 1)
        q = Value("%q", "index")
        p = b.op(f"memref.load {src.name}[%q] : {pos_t}", dtypes.int32, 0)
        it = iter(ivs)
        out_idx = tuple(q if i == d else next(it) for i in range(len(shape)))
        by_var = {id(o): k for k, o in enumerate(e.outputs)}
        for name, o in self.out_args:
            val = self.value(e.inputs[by_var[id(o)]], self._at(p))
            self._store_to(name, o.type, val, out_idx)
        self._end()
        for buf in bufs:
            b.emit(f"memref.dealloc {buf.name} : {pos_t}")
        close()

    def _merge_pass(self, npass, width, n, src, dst, pos_t) -> None:
        """Merges the sorted runs [lo, lo+width) and [lo+width, lo+2*width) of src into dst."""
        b = self.b
        tag = f"m{npass}"
        self._for(tag, n, 2 * width)
        lo = Value(f"%{tag}", "index")
        top = b.const(n, "index")
        mid = b.op(f"arith.minui {b.add(lo, b.const(width, 'index')).name}, {top.name} : index",
                   "index", 0)
        hi = b.op(f"arith.minui {b.add(lo, b.const(2 * width, 'index')).name}, {top.name} : index",
                  "index", 0)
        one = b.const(1, "index")
        res = b.fresh()
        k, i, j = f"%{tag}k", f"%{tag}i", f"%{tag}j"
        b.emit(f"{res}:2 = scf.for {k} = {lo.name} to {hi.name} step {one.name} "
               f"iter_args({i} = {lo.name}, {j} = {mid.name}) -> (index, index) {{")
        self._region()
        iv, jv = Value(i, "index"), Value(j, "index")
        left_open = b.cmp("lt", iv, mid)
        right_open = b.cmp("lt", jv, hi)
        pick = b.fresh()
        # Which element comes next: the left run's unless it is exhausted or the right run's
        # head sorts strictly before it. Loads happen only where the run still has elements.
        b.emit(f"{pick}:2 = scf.if {left_open.name} -> (i32, i1) {{")
        self._region()
        pi = b.op(f"memref.load {src.name}[{i}] : {pos_t}", dtypes.int32, 0)
        inner = b.fresh()
        b.emit(f"{inner}:2 = scf.if {right_open.name} -> (i32, i1) {{")
        self._region()
        pj = b.op(f"memref.load {src.name}[{j}] : {pos_t}", dtypes.int32, 0)
        right_first = self._less(self._at(pj), self._at(pi))
        chosen = b.select(right_first, pj, pi)
        b.emit(f"scf.yield {chosen.name}, {right_first.name} : i32, i1")
        self._end_region()
        b.emit("} else {")
        self._region()
        no = b.const(False, dtypes.bool_)
        b.emit(f"scf.yield {pi.name}, {no.name} : i32, i1")
        self._end_region()
        b.emit("}")
        b.emit(f"scf.yield {inner}#0, {inner}#1 : i32, i1")
        self._end_region()
        b.emit("} else {")
        self._region()
        pj = b.op(f"memref.load {src.name}[{j}] : {pos_t}", dtypes.int32, 0)
        yes = b.const(True, dtypes.bool_)
        b.emit(f"scf.yield {pj.name}, {yes.name} : i32, i1")
        self._end_region()
        b.emit("}")
        b.emit(f"memref.store {pick}#0, {dst.name}[{k}] : {pos_t}")
        took_right = Value(f"{pick}#1", dtypes.bool_, 0)
        zero = b.const(0, "index")
        step_i = b.select(took_right, zero, one)
        step_j = b.select(took_right, one, zero)
        b.emit(f"scf.yield {b.add(iv, step_i).name}, {b.add(jv, step_j).name} : index, index")
        self._end_region()
        b.emit("}")
        self._end()

    def _at(self, p: Value) -> tuple:
        """The operand index of the current row's element at position p (an i32 value)."""
        b = self.b
        d = self.e.params["dimension"]
        pi = b.op(f"arith.index_cast {p.name} : i32 to index", "index", 0)
        it = iter(self.row_ivs)
        return tuple(pi if i == d else next(it) for i in range(self.e.inputs[0].type.ndim))

    def _store_to(self, name, t, val, idx) -> None:
        b = self.b
        if val.dtype == dtypes.bool_:
            val = b.cast(val, dtypes.uint8)
        ix = ", ".join(x.name for x in idx)
        b.emit(f"memref.store {val.name}, {name}[{ix}] : {memref_type(t)}")


def emit_sequential_kernel(name: str, kernel: Kernel, vector_width: int | None = None) -> str:
    """MLIR text of `func.func @name(inputs..., outputs...)` for a "scatter", "scan" or "sort"
    kernel."""
    from nova.compiler.codegen.cpu.matmul import host_device

    dev = host_device()
    if vector_width is None:
        vector_width = dev.vector_bits // 32
    cls = {"scatter": ScatterEmitter, "scan": ScanEmitter, "sort": SortEmitter}[kernel.kind]
    em = cls(name, kernel, vector_width, dev.cores)
    text = em.emit()
    return text
