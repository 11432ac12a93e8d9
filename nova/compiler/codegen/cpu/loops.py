"""Loop kernels for the CPU: elementwise/movement chains and row reductions as scf loops.

A loop kernel (nova/compiler/fuse.py) iterates over one shape S and may reduce axes A of it. The
generated function loops over the kept axes of S; per row it runs one phase per level of
(mutually independent) reductions, each an inner loop nest carrying accumulators, then stores the
full-shape outputs in a last inner loop and the per-row outputs once. Every value is computed
"at an index": a kernel input is loaded through the index maps of the movement ops between it and
its use (so broadcasts, transposes and reshapes cost no copy), an elementwise op applies its
primitive's scalar body. When every access along the last axis of S is contiguous or invariant,
the kernel is vectorized along it with vector<Wx...> values (explicit vectors, since LLVM's
auto-vectorizer only emits 256-bit code here; MLIR_NOTES.md §1): inside the reduction loops when
the last axis is reduced (row reductions), else along the kept last axis, so that a column
reduction (layer norm's dgamma, a bias gradient) keeps one column per lane and walks down the
rows with contiguous vector loads.

Movement with several sources is evaluated at an index too: concatenate and pad choose their
source with `scf.if` on the index (only the chosen side loads, so no index is clamped; a vector
chunk stays vectorized when every boundary falls between chunks), gather loads its coordinates
from the index array, clamps them and reads the operand there. argmax/argmin are reductions that
carry a (value, position) pair. Constants with data are read from module-level globals.
"""

from __future__ import annotations

import numpy as np

from nova.compiler.codegen.builder import Value
from nova.compiler.codegen.cpu.index import _KB, _NoVector, _reshape_map, mem_elem, memref_type
from nova.compiler.codegen.cpu.movement import MovementMixin
from nova.compiler.codegen.cpu.row_reduction import RowReductionMixin
from nova.compiler.fuse import is_reduction
from nova.compiler.kernel import Kernel
from nova.core import dtypes
from nova.core.ir import TensorType
from nova.core.primitive import Elementwise, IndexMap

__all__ = ["LoopKernelEmitter", "MIN_THREADED_ELEMENTS", "emit_loop_kernel", "mem_elem",
           "memref_type", "_KB", "_NoVector"]

# Reductions and dtypes the row-major column partials handle (_column_partials_ok).
_PARTIAL_REDUCTIONS = ("reduce_sum", "reduce_prod", "reduce_max", "reduce_min")
_PARTIAL_DTYPES = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64, dtypes.uint8,
                   dtypes.uint32)

class LoopKernelEmitter(MovementMixin, RowReductionMixin):
    """Emits one loop kernel; `value(var, idx)` gives a kernel value at an index (scalar, or a
    vector of W consecutive elements along the last axis when `vec_iv` runs there)."""

    fast_extremes = True  # float max/min reductions with NaN flags (row_reduction.py)
    # Costly values kept in row buffers (set per kernel in __init__; emitters that reuse
    # value() without it, such as matmul epilogues, keep none).
    row_cache_ready: frozenset | set = frozenset()

    def __init__(self, name: str, kernel: Kernel, width: int, threads: int = 1,
                 nontemporal: bool = False):
        self.threads = threads
        self.nontemporal = nontemporal
        self.name = name
        self.k = kernel
        self.W = width
        self.b = _KB()
        self.b.exp_fast_path = True  # GPULoopEmitter turns it off again
        self.prog = kernel.program
        self.prod = {id(o): e for e in self.prog.eqns for o in e.outputs}
        self.S = tuple(kernel.schedule["iter_shape"])
        self.A = tuple(kernel.schedule["red_axes"] or ())
        self.arg = {}
        for n, v in enumerate(self.prog.inputs):
            self.arg[id(v)] = (f"%in{n}", v.type)
        self.out_args = [(f"%out{n}", v) for n, v in enumerate(self.prog.outputs)]
        self.memo: list[dict] = [{}]
        self.row_vals: dict[int, Value] = {}
        self.globals: list[str] = []  # module-level constant data, emitted before the function
        self._global_names: dict[int, str] = {}
        self.vec_iv: str | None = None
        self.col = False  # column reduction: vectors along the kept last axis (see emit)
        self.b.vec_info = lambda: (self.vec_iv, self.W, self.vec_aligned)
        self.phase_count = 0
        self.row_cache: dict = {}  # see RowReductionMixin._choose_row_cache
        self.row_cache_ready: set[int] = set()
        self.row_cache_bufs: dict[int, tuple[str, str]] = {}

    @staticmethod
    def costly(name: str) -> bool:
        """Whether a primitive's expansion is worth storing once per row instead of evaluating
        it again in a later pass (EXPANSION_OPS: polynomial approximations)."""
        return EXPANSION_OPS.get(name, 1) >= 16

    # --- a row buffer for costly values that several passes read -------------------------------
    def _row_cache_alloc(self) -> None:
        """One buffer of S[-1] elements per cached value, allocated once per thread (before the
        row loop) and freed by _row_cache_free."""
        for key, (v, _) in self.row_cache.items():
            mt = f"memref<{self.S[-1]}x{mem_elem(v.type.dtype)}>"
            buf = self.b.op(f"memref.alloc() {{alignment = 64 : i64}} : {mt}", "index", 0)
            self.row_cache_bufs[key] = (buf.name, mt)

    def _row_cache_free(self) -> None:
        for name, mt in self.row_cache_bufs.values():
            self.b.emit(f"memref.dealloc {name} : {mt}")

    def _row_cache_store(self, v, val: Value, idx) -> None:
        name, mt = self.row_cache_bufs[id(v)]
        if val.width:
            self.b.emit(f"vector.store {val.name}, {name}[{idx[-1].name}] : {mt}, "
                        f"vector<{val.width}x{mem_elem(v.type.dtype)}>")
        else:
            self.b.emit(f"memref.store {val.name}, {name}[{idx[-1].name}] : {mt}")

    def _row_cache_load(self, v, idx) -> Value:
        name, mt = self.row_cache_bufs[id(v)]
        el = mem_elem(v.type.dtype)
        if self.W and self._depends_on_vec(idx[-1]):
            return self.b.op(f"vector.load {name}[{idx[-1].name}] : {mt}, vector<{self.W}x{el}>",
                             v.type.dtype, self.W)
        return self.b.op(f"memref.load {name}[{idx[-1].name}] : {mt}", v.type.dtype, 0)

    # --- expression at an index -------------------------------------------------------------
    def _key(self, v, idx):
        return (id(v), tuple(x.name for x in idx))

    def value(self, v, idx) -> Value:
        key = self._key(v, idx)
        for scope in reversed(self.memo):
            if key in scope:
                return scope[key]
        val = self._compute(v, idx)
        self.memo[-1][key] = val
        return val

    def _depends_on_vec(self, x: Value) -> bool:
        return self.vec_iv is not None and self.vec_iv in self.b.deps.get(x.name, frozenset())

    def _vec_offset(self, x: Value) -> int | None:
        """c if the index x is `vector iv + c` (lanes read consecutive elements), else None."""
        if self.vec_iv is None:
            return None
        if x.name == self.vec_iv:
            return 0
        root, c = self.b.affine.get(x.name, (None, 0))
        return c if root == self.vec_iv else None

    def _load(self, v, idx) -> Value:
        name, t = self.arg[id(v)]
        b = self.b
        ix = ", ".join(x.name for x in idx)
        mt = memref_type(t)
        el = mem_elem(t.dtype)
        vec_pos = [k for k, x in enumerate(idx) if self._depends_on_vec(x)]
        if not vec_pos or not self.W:
            val = b.op(f"memref.load {name}[{ix}] : {mt}", t.dtype if el != "i8" or t.dtype != dtypes.bool_ else dtypes.uint8, 0)
            if t.dtype == dtypes.bool_:
                val = b.cmp("ne", val, b.const(0, dtypes.uint8))
            return val
        if vec_pos != [len(idx) - 1] or b.unit_root(idx[-1]) != self.vec_iv:
            raise _NoVector()
        W = self.W
        val = b.op(f"vector.load {name}[{ix}] : {mt}, vector<{W}x{el}>",
                   t.dtype if t.dtype != dtypes.bool_ else dtypes.uint8, W)
        if t.dtype == dtypes.bool_:
            val = b.cmp("ne", val, b.const(0, dtypes.uint8, W))
        return val

    bound: dict = {}
    # True when the vector iv runs over multiples of W (a loop kernel's own loops); a matmul
    # epilogue evaluated at arbitrary column offsets leaves it False.
    vec_aligned = False

    def _compute(self, v, idx) -> Value:
        if id(v) in self.bound:
            return self.bound[id(v)]
        if id(v) in self.arg:
            return self._load(v, idx)
        if id(v) in self.row_cache_ready and all(
                idx[i].name == f"%i{i}" for i in range(len(idx)) if i not in self.A):
            return self._row_cache_load(v, idx)  # (only ever read at its own row)
        if id(v) in self.row_vals:
            aligned = len(idx) == len(self.kept_names) and all(
                x.name == n or (size == 1 and self.b.ivals.get(x.name) == 0)
                for x, n, size in zip(idx, self.kept_names, self.kept_sizes, strict=True))
            if not aligned:
                raise AssertionError(
                    f"loop kernel {self.name}: a per-row value is read at {[x.name for x in idx]}, "
                    f"not at its row {self.kept_names} (fusion invariant broken)")
            return self.row_vals[id(v)]
        e = self.prod[id(v)]
        b = self.b
        p = e.prim
        if p.name == "constant":
            data = np.asarray(e.params["value"])
            if data.size == 1:
                val = data.reshape(-1)[0]
                return b.const(val.item() if hasattr(val, "item") else val, v.type.dtype)
            return self._global_load(v, data, idx)
        if p.name == "reshape":
            src = e.inputs[0]
            return self.value(src, _reshape_map(b, idx, src.type.shape, v.type.shape))
        if p.name == "concatenate":
            return self._concatenate(e, idx)
        if p.name == "pad":
            return self._pad(e, idx)
        if p.name == "gather":
            return self._gather(e, idx)
        if isinstance(p.kernel, IndexMap):
            in_types = [u.type for u in e.inputs]
            new_idx = p.kernel.index_map(b, tuple(idx), in_types, **e.params)
            if not e.inputs:  # iota: the index itself is the value
                iv = b.op(f"arith.index_cast {new_idx.name} : index to i64", dtypes.int64, 0)
                if self._depends_on_vec(new_idx):
                    if b.unit_root(new_idx) != self.vec_iv:
                        raise _NoVector()
                    # Along the vector axis lane k holds the chunk's first index + k.
                    lanes = ", ".join(str(k) for k in range(self.W))
                    ramp = b.op(f"arith.constant dense<[{lanes}]> : vector<{self.W}xi64>",
                                dtypes.int64, self.W)
                    iv = b.add(b.splat(iv, self.W), ramp)
                return b.cast(iv, v.type.dtype)
            return self.value(e.inputs[0], tuple(new_idx))
        if isinstance(p.kernel, Elementwise):
            args = [self.value(u, idx) for u in e.inputs]
            b.default_dtype = e.inputs[0].type.dtype if e.inputs else v.type.dtype
            res = p.kernel.body(b, *args, **e.params)
            if not p.multiple_results:
                return res
            # One evaluation gives every result at this index (threefry2x32's two words).
            for o, r in zip(e.outputs, res, strict=True):
                self.memo[-1][self._key(o, idx)] = r
            return res[[id(o) for o in e.outputs].index(id(v))]
        raise AssertionError(f"loop kernel {self.name}: cannot compute nova.{p.name} at an index")

    # --- constants with data ------------------------------------------------------------------
    def _global_load(self, v, data, idx) -> Value:
        """A load of a constant's element from a read-only `memref.global` holding its bytes."""
        if not hasattr(self, "globals"):
            raise _NoVector()  # a matmul epilogue emits no module-level ops: use a loop kernel
        t = v.type
        name = self._global_names.get(id(v))
        if name is None:
            name = f"{self.name}_c{len(self.globals)}"
            self._global_names[id(v)] = name
            raw = np.ascontiguousarray(data, dtype=t.dtype)
            if t.dtype == dtypes.bool_:
                raw = raw.astype(np.uint8)
            # The hex form carries the exact bytes of any dtype (NaN payloads, bf16 bits).
            self.globals.append(f'  memref.global "private" constant @{name} : {memref_type(t)} '
                                f'= dense<"0x{raw.tobytes().hex().upper()}">')
        ref = self.b.op(f"memref.get_global @{name} : {memref_type(t)}", "index", 0)
        self.arg[id(v)] = (ref.name, t)
        try:
            return self._load(v, idx)
        finally:
            del self.arg[id(v)]

    # --- movement with several sources, gather ----------------------------------------------
    def _for(self, iv: str, n: int, step: int, iter_args=None):
        b = self.b
        lo, hi, st = b.const(0, "index"), b.const(n, "index"), b.const(step, "index")
        if iter_args:
            names = ", ".join(f"%{iv}_a{k} = {a.name}" for k, a in enumerate(iter_args))
            types = ", ".join(a.type for a in iter_args)
            res = b.fresh()
            b.emit(f"{res}:{len(iter_args)} = scf.for %{iv} = {lo.name} to {hi.name} step {st.name} "
                   f"iter_args({names}) -> ({types}) {{")
        else:
            res = None
            b.emit(f"scf.for %{iv} = {lo.name} to {hi.name} step {st.name} {{")
        b.indent += 2
        b.deps[f"%{iv}"] = frozenset([f"%{iv}"])
        self.memo.append({})
        b.forget_constants()
        return res

    def _end(self, yields=None):
        b = self.b
        if yields is not None:
            b.emit(f"scf.yield {', '.join(y.name for y in yields)} : "
                   f"{', '.join(y.type for y in yields)}")
        b.indent -= 2
        b.emit("}")
        self.memo.pop()
        b.forget_constants()

    def _signature(self) -> str:
        args = [f"{n}: {memref_type(t)}" for n, t in getattr(self, "sig_args", self.arg).values()]
        args += [f"{n}: {memref_type(v.type)}" for n, v in self.out_args]
        return f"  func.func @{self.name}({', '.join(args)}) {{"

    def emit(self) -> str:
        b = self.b
        S, A = self.S, self.A
        if any(d == 0 for d in S) and not A or any(S[i] == 0 for i in range(len(S)) if i not in A):
            # Nothing to compute: every output is empty.
            return "\n".join([self._signature(), "    return", "  }"])
        kept = [i for i in range(len(S)) if i not in A]
        ivs: dict[int, Value] = {}
        # Vectors run along the last axis: inside the reduction loop when it is reduced (row
        # reductions, lanes reduced horizontally at the end), else along the kept last axis
        # (column reductions: lane k accumulates column c + k, loads stay contiguous).
        self.col = bool(A) and len(S) - 1 not in A
        vec_axis = len(S) - 1 if S else None
        if vec_axis is not None and self.W and S[vec_axis] % self.W:
            raise _NoVector()
        if vec_axis is None:
            self.W = 0
        b.indent = 4
        self.vec_aligned = True
        self.kept_names = [f"%i{i}" for i in kept]
        self.kept_sizes = [S[i] for i in kept]
        threads = self.threads if kept and S[kept[0]] > 1 else 1
        levels = self._levels()
        self.stash = self._choose_stash(levels) if A and not self.col else None
        if self.stash is not None:
            # The stash goes through the output and is read back: its lines must stay cached.
            self.nontemporal = False
        # A row kernel that stores into no output before its last pass (a stash does) may write
        # an output over an input (plan_memory.inplace_safe): one thread computes each row.
        self.k.schedule["rows_in_place"] = bool(A) and not self.col and self.stash is None
        self.row_cache = self._choose_row_cache(levels, ROW_CACHE_MAX_ELEMENTS)
        self._hoist_scalars()
        self.k.schedule["row_major_partials"] = self._column_partials_ok(levels, threads)
        if self.k.schedule["row_major_partials"]:
            self._emit_column_partials(levels[0], threads)
            return "\n".join(self.globals + [self._signature()] + b.lines + ["    return", "  }"])
        if threads == 1:
            self._row_cache_alloc()
        for n, i in enumerate(kept):
            step = self.W if (i == vec_axis and self.W) else 1
            if n == 0 and threads > 1:
                lo, hi = self._thread_span(S[i], step, threads)
                self._row_cache_alloc()  # per thread
                self._for_range(f"i{i}", lo, hi, step)
            else:
                self._for(f"i{i}", S[i], step)
            ivs[i] = Value(f"%i{i}", "index")
            if step > 1:
                self.vec_iv = f"%i{i}"
        # Reduction phases, one per level.
        for level in levels:
            self._phase(level, ivs, kept)
        if self.stash is not None:  # the last pass reads the stashed values back
            self.sig_args = dict(self.arg)
            self.arg[id(self.stash[0])] = (self.stash[1], self.stash[2])
        row_shape = tuple(S[i] for i in kept)
        full_outs = [(n, v) for n, v in self.out_args if v.type.shape == S and A]
        row_outs = [(n, v) for n, v in self.out_args if A and v.type.shape == row_shape and v.type.shape != S]
        if not A:
            full_outs = list(self.out_args)
        if A and full_outs:
            for i in A:
                step = self.W if (i == vec_axis and self.W) else 1
                self._for(f"j{i}", S[i], step)
                ivs[i] = Value(f"%j{i}", "index")
                if step > 1:
                    self.vec_iv = f"%j{i}"
            self._store_outputs(full_outs, ivs, S)
            for _ in A:
                self._end()
        elif not A:
            self._store_outputs(full_outs, ivs, S)
        if row_outs:
            saved_w, saved_iv = self.W, self.vec_iv
            if A and not self.col:
                self.W, self.vec_iv = 0, None
            self._store_outputs(row_outs, {k: ivs[i] for k, i in enumerate(kept)}, row_shape,
                                row=True)
            self.W, self.vec_iv = saved_w, saved_iv
        for n, _ in enumerate(kept):
            self._end()
            if n == len(kept) - 1 and threads > 1:
                self._row_cache_free()
                self._close_parallel()
        if threads == 1:
            self._row_cache_free()
        return "\n".join(self.globals + [self._signature()] + b.lines + ["    return", "  }"])

    # --- column reductions as row-major passes with per-thread partial sums ----------------------
    def _column_partials_ok(self, levels, threads: int) -> bool:
        """Column reductions (the last axis kept, every other axis reduced: bias gradients, dgamma
        and dbeta, `x.max(axis=0)`) -- sums, products, max and min of floats or integers --
        whose full-shape outputs do not read the reductions, with at most 256 KiB of partials
        (a stack scratch, see _emit_column_partials).
        Walking down the columns reads one cache line per row with a stride of a whole row, and
        the full-shape outputs took a second such walk: the GELU-backward + bias-gradient kernel
        of the tiny GPT-2 step ran at 2.3x the time of the same work row-major."""
        S, A = self.S, self.A
        if not (self.col and self.W and len(levels) == 1 and A == tuple(range(len(S) - 1))):
            return False
        reds = levels[0]
        if not all(r.prim.name in _PARTIAL_REDUCTIONS and r.outputs[0].type.dtype ==
                   r.inputs[0].type.dtype and r.outputs[0].type.dtype in _PARTIAL_DTYPES
                   for r in reds):
            return False
        if S[0] < 2 * threads or len(reds) * S[-1] * 8 * threads > 256 * 1024:
            return False
        sums = {id(r.outputs[0]) for r in reds}
        full = [v for _, v in self.out_args if v.type.shape == S]
        return not any(self._reads_any(v, sums) for v in full)

    def _reads_any(self, root, ids) -> bool:
        seen, stack = set(), [root]
        while stack:
            v = stack.pop()
            if id(v) in ids:
                return True
            if id(v) in seen:
                continue
            seen.add(id(v))
            e = self.prod.get(id(v))
            if e is not None:
                stack.extend(e.inputs)
        return False

    def _emit_column_partials(self, reds, threads: int):
        """Rows split over the threads (the outermost axis), each thread combining its rows into
        its own row of a (threads, columns) scratch per reduction while it writes the full-shape
        outputs row-major; after the parallel region one pass combines the threads' rows in
        thread order and stores the per-column outputs. The scratch starts at the reduction's
        identity (0 for sums, the lowest value for max, ...), so a thread the runtime did not
        start contributes nothing. Float max/min propagate NaN (arith.maximumf/minimumf)."""
        b, S, W = self.b, self.S, self.W
        C, n = S[-1], len(S)
        full_outs = [(nm, v) for nm, v in self.out_args if v.type.shape == S]
        col_outs = [(nm, v) for nm, v in self.out_args if v.type.shape == (C,)]
        scratch = []
        for k, r in enumerate(reds):
            t = TensorType((threads, C), r.outputs[0].type.dtype)
            name = f"%part{k}"
            b.emit(f"{name} = memref.alloca() {{alignment = 64 : i64}} : {memref_type(t)}")
            scratch.append((name, t))
        self._for("zt", threads, 1)
        self._for("zc", C, W)
        for r, (name, t) in zip(reds, scratch, strict=True):
            start = b.const(r.prim.kernel.identity(t.dtype), t.dtype, W)
            b.emit(f"vector.store {start.name}, {name}[%zt, %zc] : {memref_type(t)}, {start.type}")
        self._end()
        self._end()
        if threads > 1:
            lo, hi = self._thread_span(S[0], 1, threads)
            tid = self.thread_id
        else:  # no parallel region for a single thread
            lo, hi = b.const(0, "index"), b.const(S[0], "index")
            tid = b.const(0, "index")
        self._for_range("i0", lo, hi, 1)
        ivs = {0: Value("%i0", "index")}
        for a in range(1, n - 1):
            self._for(f"i{a}", S[a], 1)
            ivs[a] = Value(f"%i{a}", "index")
        self._for(f"i{n - 1}", C, W)
        ivs[n - 1] = Value(f"%i{n - 1}", "index")
        self.vec_iv = f"%i{n - 1}"
        idx = tuple(ivs[a] for a in range(n))
        for r, (name, t) in zip(reds, scratch, strict=True):
            x = self.value(r.inputs[0], idx)
            if not x.width:
                x = b.splat(x, W)
            vt = f"vector<{W}x{mem_elem(t.dtype)}>"
            acc = b.op(f"vector.load {name}[{tid.name}, {idx[-1].name}] : {memref_type(t)}, {vt}",
                       t.dtype, W)
            b.default_dtype = t.dtype
            new = r.prim.kernel.combine(b, acc, x)
            b.emit(f"vector.store {new.name}, {name}[{tid.name}, {idx[-1].name}] : "
                   f"{memref_type(t)}, {vt}")
        self._store_outputs(full_outs, ivs, S)
        for _ in range(n):
            self._end()
        if threads > 1:
            self._close_parallel()
        # The per-column outputs: the threads' partial sums added in thread order.
        self._for("c", C, W)
        c = Value("%c", "index")
        self.vec_iv = "%c"
        for r, (name, t) in zip(reds, scratch, strict=True):
            vt = f"vector<{W}x{mem_elem(t.dtype)}>"
            total = None
            for k in range(threads):
                part = b.op(f"vector.load {name}[{b.const(k, 'index').name}, %c] : "
                            f"{memref_type(t)}, {vt}", t.dtype, W)
                b.default_dtype = t.dtype
                total = part if total is None else r.prim.kernel.combine(b, total, part)
            self.row_vals[id(r.outputs[0])] = total
        self.kept_names, self.kept_sizes = ["%c"], [C]
        self._store_outputs(col_outs, {0: c}, (C,), row=True)
        self._end()

    def _hoist_scalars(self):
        """Computes the rank-0 values that no loop index reaches (a step count, the bias
        corrections 1 - b1**t, a learning rate) once, before the loops. LLVM leaves a libm
        `powf` call inside the loop: the AdamW update paid two per vector of 8 elements."""
        scalar = {id(v) for v in self.prog.inputs if v.type.shape == ()}
        for e in self.prog.eqns:
            if is_reduction(e) or any(o.type.shape != () for o in e.outputs):
                continue
            if e.prim.name != "constant" and (not isinstance(e.prim.kernel, Elementwise) or
                                              not all(id(u) in scalar for u in e.inputs)):
                continue
            for o in e.outputs:
                scalar.add(id(o))
                self.value(o, ())

    def _parallel_for(self, iv: str, n: int, step: int, threads: int):
        """The outermost loop split into one contiguous chunk per OpenMP thread (the kernel stays
        one C function; libiomp5 keeps its threads pooled between calls, see matmul.py)."""
        lo, hi = self._thread_span(n, step, threads)
        self._for_range(iv, lo, hi, step)

    def _thread_span(self, n: int, step: int, threads: int):
        """Opens an `omp.parallel` region (closed by `_close_parallel`) and returns this thread's
        [lo, hi) of 0..n in whole steps: contiguous chunks, one per thread."""
        b = self.b
        nt = b.op(f"arith.constant {threads} : i32", dtypes.int32, 0)
        b.emit(f"omp.parallel num_threads({nt.name} : i32) {{")
        b.indent += 2
        b.forget_constants()
        tid32 = b.op("func.call @omp_get_thread_num() : () -> i32", dtypes.int32, 0)
        nth32 = b.op("func.call @omp_get_num_threads() : () -> i32", dtypes.int32, 0)
        tid = b.op(f"arith.index_cast {tid32.name} : i32 to index", "index", 0)
        nth = b.op(f"arith.index_cast {nth32.name} : i32 to index", "index", 0)
        steps = b.const(n // step, "index")
        chunk = b.op(f"arith.ceildivui {steps.name}, {nth.name} : index", "index", 0)
        span = b.op(f"arith.muli {chunk.name}, {b.const(step, 'index').name} : index", "index", 0)
        lo = b.op(f"arith.muli {tid.name}, {span.name} : index", "index", 0)
        hi0 = b.op(f"arith.addi {lo.name}, {span.name} : index", "index", 0)
        hi = b.op(f"arith.minui {hi0.name}, {b.const(n, 'index').name} : index", "index", 0)
        self.thread_id = tid
        return lo, hi

    def _close_parallel(self):
        b = self.b
        b.emit("omp.terminator")
        b.indent -= 2
        b.emit("}")
        b.forget_constants()

    def _for_range(self, iv: str, lo: Value, hi: Value, step: int):
        """`scf.for %iv = lo to hi step step` with index values as bounds (closed by _end)."""
        b = self.b
        b.emit(f"scf.for %{iv} = {lo.name} to {hi.name} step {b.const(step, 'index').name} {{")
        b.indent += 2
        b.deps[f"%{iv}"] = frozenset([f"%{iv}"])
        self.memo.append({})
        b.forget_constants()

    def _store_outputs(self, outs, ivs, shape, row=False):
        """Stores every output at ivs. All values are computed before the first store: an
        output may take an input's buffer (plan_memory.inplace_safe), and a later output that
        reads the input at this index must see the input (found by review: o1 = w - max(z)
        written over z, then o2 = sin(z) * o1 read o1 as z)."""
        b = self.b
        idx = tuple(ivs[i] for i in range(len(shape)))
        vals = [self.value(v, idx) for _, v in outs]
        for (name, v), val in zip(outs, vals, strict=True):
            t = v.type
            el = mem_elem(t.dtype)
            if t.dtype == dtypes.bool_:
                val = b.cast(val, dtypes.uint8) if val.dtype == dtypes.bool_ else val
            ix = ", ".join(x.name for x in idx)
            if self.W and (not row or self.col) and not val.width and self.vec_iv and idx and \
                    idx[-1].name == self.vec_iv:
                val = b.splat(val, self.W)
            if val.width:
                # Streaming stores (see emit_loop_kernel) of whole 16-byte-aligned vectors: the
                # vector axis starts every row at a multiple of W, and the runtime hands every
                # kernel 16-byte-aligned buffers (nova/runtime/executable.py).
                size = np.dtype(t.dtype).itemsize
                attr = ""
                if self.nontemporal and not row and (val.width * size) % NT_ALIGN == 0 and \
                        (t.shape[-1] * size) % NT_ALIGN == 0:
                    attr = f" {{nontemporal = true, alignment = {NT_ALIGN} : i64}}"
                b.emit(f"vector.store {val.name}, {name}[{ix}]{attr} : {memref_type(t)}, "
                       f"vector<{val.width}x{el}>")
            else:
                b.emit(f"memref.store {val.name}, {name}[{ix}] : {memref_type(t)}")


# A kernel is split over threads only from this many elements of iteration space: a 2-thread
# OpenMP call costs ~15-30 us more than a 1-thread one (bench/NOTES.md), which a memory-bound
# loop over 64K float32 elements (~30 us) barely repays.
MIN_THREADED_ELEMENTS = 1 << 16


# Non-temporal ("streaming") stores write whole cache lines to memory without reading them
# first (a normal store to a line not in cache reads it: 3 transfers per output byte instead of
# 2) and without evicting useful lines. They pay only when the output would not stay in cache for
# its consumer anyway: when a kernel's inputs and outputs together exceed the last-level cache.
# Measured on (8192, 768) float32 layer norm: ~35 % of the kernel's samples sat on the output
# stores (bench/NOTES.md). The stores declare this alignment (bytes); every buffer a kernel
# writes is at least this aligned (the arena at 64, fresh outputs by malloc at 16, a donated
# input that is not is replaced by a fresh buffer: nova/runtime/executable.py).
NT_ALIGN = 16

# Rows up to this many elements keep their costly values in a per-thread row buffer when several
# passes read them (RowReductionMixin._choose_row_cache): 64 KiB of float32, within L2.
ROW_CACHE_MAX_ELEMENTS = 16384


#
# Streaming stores also pay only in a memory-bound kernel: measured side by side (same process,
# interleaved) on (8192, 768) float32, they took x * 2 from 1.30 to 1.21 ms and layer norm from
# 1.85 to 1.56 ms (the minima; medians alike), but made softmax (3.18 -> 3.28 ms) and GELU-tanh
# (3.41 -> 3.51 ms), whose time goes into exp / tanh, slower. The arithmetic intensity that
# decides it weights each primitive by the vector instructions its expansion takes (the
# polynomial approximations of math-polynomial-approximation, a division's latency), since the
# cost rules count one flop per element for exp as for add.
EXPANSION_OPS = {"exp": 16, "exp2": 16, "expm1": 16, "log": 16, "log1p": 16, "log2": 16,
                 "tanh": 16, "logistic": 16, "erf": 16, "sin": 20, "cos": 20, "tan": 24,
                 "sinh": 20, "cosh": 20, "atan": 20, "atan2": 24, "pow": 32, "div": 4, "rem": 8,
                 "sqrt": 4, "rsqrt": 4, "reciprocal": 4}
# Weighted flops per byte accessed up to which a kernel counts as memory-bound here: layer norm
# is 0.9, softmax 2.5, GELU-tanh 3.0 (bench/NOTES.md).
MAX_STREAMING_INTENSITY = 1.5


def weighted_intensity(kernel: Kernel) -> float:
    """Flops per byte accessed with every primitive's flops weighted by EXPANSION_OPS."""
    flops = 0
    for e in kernel.program.eqns:
        c = e.prim.cost([v.type for v in e.inputs], [v.type for v in e.outputs], **e.params)
        flops += c.flops * EXPANSION_OPS.get(e.prim.name, 1)
    prog = kernel.program
    moved = sum(v.type.nbytes for v in list(prog.inputs) + list(prog.outputs))
    return flops / moved if moved else 0.0


def uses_nontemporal_stores(kernel: Kernel, last_level_cache: int) -> bool:
    """Whether a loop kernel's full-shape vector stores should be non-temporal: its inputs and
    outputs together exceed the last-level cache (bytes) and it is memory-bound
    (`weighted_intensity` at most MAX_STREAMING_INTENSITY)."""
    prog = kernel.program
    total = sum(v.type.nbytes for v in list(prog.inputs) + list(prog.outputs))
    return total > last_level_cache and weighted_intensity(kernel) <= MAX_STREAMING_INTENSITY


def emit_loop_kernel(name: str, kernel: Kernel, vector_width: int | None = None,
                     streaming: bool | None = None) -> str:
    """MLIR text of one `func.func @name(inputs..., outputs...)` computing a loop kernel.
    streaming=False forbids non-temporal stores (None: `uses_nontemporal_stores` decides).

    Tries explicit vectors (the host's SIMD width in float32 lanes) first and falls back to
    scalar code when an access along the innermost axis is not contiguous. Large kernels split
    their outermost loop over the host's cores (OpenMP).
    """
    from nova.compiler.codegen.cpu.matmul import host_device

    dev = host_device()
    S, A = kernel.schedule["iter_shape"], kernel.schedule["red_axes"] or ()
    size = int(np.prod(S, dtype=np.int64))
    threads = dev.cores if size >= MIN_THREADED_ELEMENTS else 1
    kernel.schedule["threads"] = threads
    nontemporal = streaming is not False and uses_nontemporal_stores(kernel, dev.l3)
    if vector_width is None:
        native = dev.vector_bits // 32
        widths = [native]
        if A and len(S) - 1 not in A:
            # A column reduction walks down the columns with a stride of one row: two SIMD
            # registers per chunk use whole 64-byte cache lines (one register would leave the
            # other half-line to be fetched again much later).
            widths = [2 * native]
        elif not A and weighted_intensity(kernel) > MAX_STREAMING_INTENSITY:
            # An arithmetic-bound elementwise kernel (a tanh or exp polynomial per element)
            # computes two SIMD registers per step: two independent dependency chains, and each
            # polynomial coefficient loaded once for both (there are more constants than
            # registers). GELU-tanh on (8192, 768) float32: 15.3 -> 13.1 cycles per 8 elements
            # (llvm-mca, Zen 3), median time -10 % measured (bench/NOTES.md round 5).
            widths = [2 * native, native]
        elif tuple(A) == (len(S) - 1,) and weighted_intensity(kernel) > MAX_STREAMING_INTENSITY:
            # The same for rows whose passes are arithmetic-bound (softmax, cross-entropy: an
            # exp per element): single-thread softmax on cached (256, 768) rows -6 % (bench/
            # NOTES.md round 8).
            widths = [2 * native, native]
        # Rows that are no multiple of the preferred vector take one register, then half or
        # a quarter of one (an AVX-512 host on rows of 104: 8 lanes instead of scalar code).
        widths += [w for w in (native, native // 2, native // 4) if w >= 4 and w not in widths]
    else:
        widths = [vector_width]
    for width in [w for w in widths if w]:
        try:
            emitter = LoopKernelEmitter(name, kernel, width, threads, nontemporal)
            text = emitter.emit()
            kernel.schedule["vector_width"] = width
            kernel.schedule["nontemporal_stores"] = emitter.nontemporal
            return text
        except _NoVector:
            pass
    kernel.schedule["vector_width"] = 1
    kernel.schedule["nontemporal_stores"] = False
    return LoopKernelEmitter(name, kernel, 0, threads).emit()
