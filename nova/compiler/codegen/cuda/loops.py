"""Loop kernels for NVIDIA GPUs: elementwise/movement chains and row reductions as `gpu.func`s.

The same Kernel descriptions as the CPU backend (nova/compiler/fuse.py), and the same
expression-at-an-index machinery (LoopKernelEmitter in codegen/cpu/loops.py: movement folded into
the access pattern, an elementwise op applies its primitive's scalar body), mapped to threads:

- Elementwise (no reduced axes): one thread per W consecutive elements of the last axis, W
  chosen so that a vector access is 16 bytes (`vector.load {alignment = 16}` becomes
  `ld.global.v4.b32`); a bounds check only when the grid overshoots. An access that is not
  contiguous along the last axis makes the kernel scalar (one element per thread).
- Column reductions (the last axis kept): see columns.py.
- Row reductions: one block per row (the kept axes); each thread reduces a strided share of the
  row (W-wide vector chunks when the last axis is reduced and contiguous; a row of at most 4
  chunks per thread stays in registers across phases, read once), then the block combines
  the partial results with warp shuffles (`gpu.shuffle xor`, 16..1) and one shared-memory slot per
  warp, so every thread holds the row's result for the next phase. Full-shape outputs are written
  by all threads in the same strided order; per-row outputs by thread 0. argmax/argmin combine
  (value, position) pairs with NumPy's rules (first occurrence, NaN wins).
"""

from __future__ import annotations

import numpy as np

from nova.compiler.codegen.builder import Value
from nova.compiler.codegen.cpu.index import _NoVector, mem_elem, memref_type
from nova.compiler.codegen.cpu.loops import LoopKernelEmitter
from nova.compiler.codegen.cuda.block_reduce import BlockReduceMixin
from nova.compiler.codegen.cuda.columns import ColumnReductionMixin
from nova.compiler.fuse import ARG_REDUCTIONS as _ARG_REDUCTIONS
from nova.compiler.kernel import Kernel
from nova.core import dtypes

MAX_BLOCK = 256  # threads per block of loop kernels
MAX_RESIDENT = 4  # row chunks a thread may keep in registers across a row kernel's phases
WARP = 32


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _itemsize(t) -> int:
    return 1 if t.dtype == dtypes.bool_ else np.dtype(t.dtype).itemsize


class GPULoopEmitter(BlockReduceMixin, ColumnReductionMixin, LoopKernelEmitter):
    """Emits one loop kernel as a `gpu.func` (see the module docstring); after `emit()` the
    launch configuration is in `grid`, `block` and `shared_bytes`."""

    fast_extremes = False  # the block reductions combine one accumulator per reduction

    def __init__(self, name: str, kernel: Kernel, width: int):
        super().__init__(name, kernel, width, threads=1)
        self.b.exp_fast_path = False
        self.workgroup: list[str] = []  # workgroup-memory attributions of the gpu.func
        self.shared_bytes = 0
        self.grid = (1, 1, 1)
        self.block = (WARP, 1, 1)
        self.stash = None

    # --- memory access with known alignment ---------------------------------------------------
    def _aligned_attr(self, idx, t) -> str:
        """` {alignment = B}` when a W-wide access at idx starts on a W-element boundary."""
        c = self._vec_offset(idx[-1]) if idx else None
        size = _itemsize(t)
        if not t.shape or c is None or c % self.W or t.shape[-1] % self.W:
            return ""
        return f" {{alignment = {self.W * size}}}"

    def _load(self, v, idx) -> Value:
        vec_pos = [k for k, x in enumerate(idx) if self._depends_on_vec(x)]
        if not vec_pos or not self.W:
            return super()._load(v, idx)
        name, t = self.arg[id(v)]
        b = self.b
        if vec_pos != [len(idx) - 1] or b.unit_root(idx[-1]) != self.vec_iv:
            raise _NoVector()
        el, W = mem_elem(t.dtype), self.W
        ix = ", ".join(x.name for x in idx)
        load_t = dtypes.uint8 if t.dtype == dtypes.bool_ else t.dtype
        val = b.op(f"vector.load {name}[{ix}]{self._aligned_attr(idx, t)} : {memref_type(t)}, "
                   f"vector<{W}x{el}>", load_t, W)
        if t.dtype == dtypes.bool_:
            val = b.cmp("ne", val, b.const(0, dtypes.uint8, W))
        return val

    def _store_outputs(self, outs, ivs, shape, row=False):
        """Stores every output at ivs, all values computed before the first store (an output
        may take an input's buffer: see the CPU emitter's _store_outputs)."""
        b = self.b
        idx = tuple(ivs[i] for i in range(len(shape)))
        vals = [self.value(v, idx) for _, v in outs]
        for (name, v), val in zip(outs, vals, strict=True):
            t = v.type
            if t.dtype == dtypes.bool_ and val.dtype == dtypes.bool_:
                val = b.cast(val, dtypes.uint8)
            ix = ", ".join(x.name for x in idx)
            on_vec = self.W and not row and self.vec_iv and idx and idx[-1].name == self.vec_iv
            if on_vec and not val.width:
                val = b.splat(val, self.W)
            if val.width:
                b.emit(f"vector.store {val.name}, {name}[{ix}]{self._aligned_attr(idx, t)} : "
                       f"{memref_type(t)}, vector<{val.width}x{mem_elem(t.dtype)}>")
            else:
                b.emit(f"memref.store {val.name}, {name}[{ix}] : {memref_type(t)}")

    # --- structure ----------------------------------------------------------------------------
    def _open(self, header: str) -> None:
        b = self.b
        b.emit(header)
        b.indent += 2
        self.memo.append({})
        b.forget_constants()

    def _unflatten(self, flat: Value, sizes: list) -> list:
        """Indices of a row-major flat index over `sizes` (the first one is not reduced modulo
        its size: the caller guarantees flat < prod(sizes))."""
        b = self.b
        out = [None] * len(sizes)
        q = flat
        for pos in reversed(range(len(sizes))):
            if pos == 0:
                out[0] = q if sizes[0] != 1 else b.const(0, "index")
            else:
                out[pos] = b.rem(q, b.const(sizes[pos], "index"))
                q = b.div(q, b.const(sizes[pos], "index"))
        return out

    def _mark_vector_root(self, x: Value) -> None:
        self.b.deps[x.name] = frozenset([x.name])
        self.vec_iv = x.name
        self.vec_aligned = True

    def _signature(self) -> str:
        args = [f"{n}: {memref_type(t)}" for n, t in getattr(self, "sig_args", self.arg).values()]
        args += [f"{n}: {memref_type(v.type)}" for n, v in self.out_args]
        wg = f" workgroup({', '.join(self.workgroup)})" if self.workgroup else ""
        return (f"    gpu.func @{self.name}({', '.join(args)}){wg} kernel attributes "
                f"{{known_block_size = array<i32: {self.block[0]}, 1, 1>}} {{")

    def emit(self) -> str:
        """The gpu.module body: constant globals and the gpu.func (indented for gpu.module)."""
        self.b.indent = 6
        if self.is_column_kernel(self.S, self.A):
            self._emit_columns()
        elif self.A:
            self._emit_rows()
        else:
            self._emit_elementwise()
        return self._function_text()

    def _function_text(self) -> str:
        """The module-level constants, then the gpu.func with the emitted body. Constants are
        16-byte aligned, so vector loads of them may claim W-element alignment."""
        consts = ["  " + g + " {alignment = 16 : i64}" for g in self.globals]
        return "\n".join(consts + [self._signature()] + self.b.lines
                         + ["      gpu.return", "    }"])

    def _emit_elementwise(self) -> None:
        b, S = self.b, self.S
        n = int(np.prod(S, dtype=np.int64))
        if not S or S[-1] % max(self.W, 1) or S[-1] < self.W:
            self.W = 0
        per = self.W or 1
        nthreads = n // per
        block = min(MAX_BLOCK, _ceil_div(nthreads, WARP) * WARP)
        self.block, self.grid = (block, 1, 1), (_ceil_div(nthreads, block), 1, 1)
        bid = b.op("gpu.block_id x", "index", 0)
        tid = b.op("gpu.thread_id x", "index", 0)
        g = b.add(b.mul(bid, b.const(block, "index")), tid)
        if nthreads % block:
            inside = b.cmp("lt", g, b.const(nthreads, "index"))
            self._open(f"scf.if {inside.name} {{")
        lin = b.mul(g, b.const(per, "index"))
        idx = self._unflatten(lin, list(S)) if S else []
        if self.W:
            self._mark_vector_root(idx[-1])
        self.kept_names, self.kept_sizes = [x.name for x in idx], list(S)
        self._store_outputs(list(self.out_args), dict(enumerate(idx)), S)
        if nthreads % block:
            self._end()

    def _emit_rows(self) -> None:
        b, S, A = self.b, self.S, self.A
        kept = [i for i in range(len(S)) if i not in A]
        if self.W and (A[-1] != len(S) - 1 or S[-1] % self.W or S[-1] < self.W):
            self.W = 0
        vec = self.W
        rows = int(np.prod([S[i] for i in kept], dtype=np.int64))
        red_sizes = [S[i] for i in A]
        if vec:
            red_sizes[-1] //= vec
        chunks = int(np.prod(red_sizes, dtype=np.int64))
        block, per = self._row_block(chunks)
        self.block, self.grid = (block, 1, 1), (max(rows, 1), 1, 1)
        self.nwarps = block // WARP
        # One block per row, every phase ends in a block-wide reduction (a barrier), and the
        # full-shape outputs are stored after the last: an output may take an input's buffer
        # (plan_memory.inplace_safe).
        self.k.schedule["rows_in_place"] = True
        row = b.op("gpu.block_id x", "index", 0)
        self.tid = b.op("gpu.thread_id x", "index", 0)
        ivs = dict(zip(kept, self._unflatten(row, [S[i] for i in kept]), strict=True))
        self.kept_names = [ivs[i].name for i in kept]
        self.kept_sizes = [S[i] for i in kept]
        self.red_sizes, self.chunks = red_sizes, chunks
        # Register-resident rows: each thread's `per` chunks sit at fixed positions computed once,
        # so every phase reads the same SSA values and a row is loaded from memory only once.
        self.resident = []
        for c in range(per):
            self.cur = b.add(self.tid, b.const(c * block, "index")) if c else self.tid
            red = self._reduced_index()
            self.resident.append((red, self.vec_iv))
        self.vec_iv = None
        for level in self._levels():
            self._gpu_phase(level, ivs)
        row_shape = tuple(S[i] for i in kept)
        full = [(n, v) for n, v in self.out_args if v.type.shape == S]
        row_outs = [(n, v) for n, v in self.out_args
                    if v.type.shape == row_shape and v.type.shape != S]
        if full and self.resident:
            for red, root in self.resident:
                self.vec_iv = root
                self._store_outputs(full, {**ivs, **red}, S)
        elif full:
            ivs = dict(ivs)
            self._strided_loop("o", None)
            ivs.update(self._reduced_index())
            self._store_outputs(full, ivs, S)
            self._end()
        if row_outs:
            zero = b.const(0, "index")
            first = b.cmp("eq", self.tid, zero)
            saved, self.W, self.vec_iv = self.W, 0, None
            self._open(f"scf.if {first.name} {{")
            self._store_outputs(row_outs, {k: ivs[i] for k, i in enumerate(kept)}, row_shape,
                                row=True)
            self._end()
            self.W = saved

    @staticmethod
    def _row_block(chunks: int) -> tuple[int, int]:
        """(threads per block, chunks per thread if rows are register-resident else 0): the
        largest multiple of 32 up to 256 that divides the row into at most MAX_RESIDENT chunks
        per thread; else a strided loop over the row."""
        for block in range(MAX_BLOCK, WARP - 1, -WARP):
            if chunks % block == 0 and chunks // block <= MAX_RESIDENT:
                return block, chunks // block
        return max(WARP, min(MAX_BLOCK, _ceil_div(chunks, WARP) * WARP)), 0

    def _open_for(self, tag: str, lo: Value, hi: int, step: int, accs):
        """Opens `scf.for %tag = lo to hi step step` (with iter_args when accs is a non-empty
        list), makes %tag the current position and returns the loop's results (or None)."""
        b = self.b
        hi_v, st = b.const(hi, "index"), b.const(step, "index")
        if accs:
            names = ", ".join(f"%{tag}_a{k} = {a.name}" for k, a in enumerate(accs))
            types = ", ".join(a.type for a in accs)
            res = b.fresh()
            self._open(f"{res}:{len(accs)} = scf.for %{tag} = {lo.name} to {hi_v.name} step "
                       f"{st.name} iter_args({names}) -> ({types}) {{")
        else:
            res = None
            self._open(f"scf.for %{tag} = {lo.name} to {hi_v.name} step {st.name} {{")
        self.cur = Value(f"%{tag}", "index")
        return res

    def _strided_loop(self, tag: str, accs):
        """`scf.for %tag = tid to chunks step block` (with iter_args when accs is a list)."""
        return self._open_for(tag, self.tid, self.chunks, self.block[0], accs)

    def _reduced_index(self) -> dict:
        """{axis: index} of the current strided-loop position over the reduced axes."""
        idx = self._unflatten(self.cur, list(self.red_sizes))
        if self.W:
            idx[-1] = self.b.mul(idx[-1], self.b.const(self.W, "index"))
            self._mark_vector_root(idx[-1])
        return dict(zip(self.A, idx, strict=True))

    def _gpu_phase(self, reds, ivs) -> None:
        b = self.b
        inits, counts = [], []
        for r in reds:
            init = self._red_init(r, self.W)
            inits += init
            counts.append(len(init))
        self.phase_count += 1
        if self.resident:
            finals = list(inits)
            for red, root in self.resident:
                self.vec_iv = root
                finals = self._combine_at({**ivs, **red}, reds, counts, finals)
            self.vec_iv = None
        else:
            tag = f"r{self.phase_count}"
            res = self._strided_loop(tag, inits)
            accs = [Value(f"%{tag}_a{k}", a.dtype, a.width) for k, a in enumerate(inits)]
            new = self._combine_at({**ivs, **self._reduced_index()}, reds, counts, accs)
            self._end(new)
            finals = [Value(f"{res}#{k}", a.dtype, a.width) for k, a in enumerate(inits)]
        pos = 0
        for r, n in zip(reds, counts, strict=True):
            part = finals[pos:pos + n]
            pos += n
            if r.prim.name in _ARG_REDUCTIONS:
                val, at = self._arg_horizontal(r, *part)
                val, at = self._block_reduce([val, at], lambda x, y, r=r: self._arg_pair(r, x, y))
                self.row_vals[id(r.outputs[0])] = b.cast(at, r.outputs[0].type.dtype)
                continue
            acc = part[0]
            if acc.width:
                acc = self._red_finish(r, [acc])
            out_t = r.outputs[0].type.dtype

            def combine(x, y, r=r, out_t=out_t):
                b.default_dtype = out_t
                return [r.prim.kernel.combine(b, x[0], y[0])]

            (acc,) = self._block_reduce([acc], combine)
            self.row_vals[id(r.outputs[0])] = acc

    def _combine_at(self, idx_map, reds, counts, accs) -> list:
        """The accumulators after combining each reduction's input at one position of the row."""
        idx = tuple(idx_map[i] for i in range(len(self.S)))
        new, pos = [], 0
        for r, n in zip(reds, counts, strict=True):
            x = self.value(r.inputs[0], idx)
            new += self._red_combine(r, accs[pos:pos + n], x, idx_map, self.W)
            pos += n
        return new


def vector_width(kernel: Kernel) -> int:
    """Elements per 16-byte access of the widest element the kernel reads or writes."""
    types = [v.type for v in kernel.program.inputs + kernel.program.outputs]
    widest = max((_itemsize(t) for t in types), default=4)
    return max(1, 16 // widest)


def emit_gpu_loop_kernel(name: str, kernel: Kernel) -> GPULoopEmitter:
    """The emitter of one loop kernel after `emit()` (text in `.text`, launch configuration in
    `.grid`, `.block`, `.shared_bytes`); vectorized when every access along the last axis is
    contiguous, else scalar."""
    if kernel.kind not in ("loop", "scatter:fill"):
        raise NotImplementedError(f"cuda codegen: kernel kind {kernel.kind!r} is not a loop kernel")
    width = vector_width(kernel)
    for w in ((width, 0) if width > 1 else (0,)):
        em = GPULoopEmitter(name, kernel, w)
        try:
            em.text = em.emit()
            kernel.schedule["vector_width"] = max(em.W, 1)
            return em
        except _NoVector:
            continue
    raise AssertionError(f"loop kernel {name}: the scalar emitter raised _NoVector")
