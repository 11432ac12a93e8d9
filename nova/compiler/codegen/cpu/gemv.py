"""Matrix-vector products (a dot_general whose GEMM has m = 1 or n = 1) as their own kernels.

A GEMM kernel run on a vector packs the whole matrix and fills one row of its register block:
0.08-0.33x NumPy's GB/s (BENCHMARKS.md, "Matrix-vector products"). A matrix-vector product is memory-bound
(2 flops per matrix element read once), so this kernel streams the matrix once with the vector
in registers or L1. Two memory layouts cover every case (with M the matrix, v the vector, L the
output length):

- "rows" (C[j] = sum_k M[j, k] v[k], M stored (L, k)): R = 4 rows at a time, two SIMD
  accumulators per row over k (the v loads shared by the four rows), a horizontal sum per row
  at the end; the k tail and the last L % 4 rows are scalar or one row at a time.
- "columns" (C[j] = sum_k v[k] M[k, j], M stored (k, L)): KB = 8 rows of M per pass, each
  row walked left to right across the thread's slab of C (eight sequential streams, which the
  prefetchers follow; walking down one column block instead jumps L * 4 bytes per load and
  ran at a third of the speed), eight broadcasts of v held in registers, C's slab read and
  written once per pass from L1; the last k % 8 rows one at a time, scalar tail columns.

Which operand is the vector and how the matrix is stored follows from gemm_layout: m = 1 makes A
the vector and B the matrix ("columns" unless B is transposed); n = 1 makes B the vector and A
the matrix ("rows" unless A is transposed). The output range is split into contiguous slabs over
OpenMP threads when the matrix is large enough (each thread one slab, correct for any number of
threads granted). Summation order differs from the reference's (vector partial sums).
"""

from __future__ import annotations

import os

from nova.compiler.codegen.cpu.matmul import _Emitter, host_device
from nova.compiler.kernel import Kernel, gemm_layout
from nova.core import dtypes

# Matrix elements per thread below which one thread runs the whole product. Measured (w @ x,
# jitted, 300 calls, two threads against one): 1024 x 1024 median 210-216 us against 102-106
# (the best calls 81-107 against 91-99: the second thread is not always there at once on this
# shared two-core machine), 1536 x 1536 176-182 against 214-243, 2048 x 2048 319-335 against
# 435-593, 4096 x 4096 2.1 against 2.9-3.2 ms.
MIN_PER_THREAD = 1 << 20
ROWS = 4  # rows per step of the "rows" layout
KB = 8  # rows of M per pass of the "columns" layout


def gemv_layout(kernel: Kernel):
    """(layout, L, k, vector operand index) when `kernel` is one float32/float64 dot_general
    with no batch whose GEMM has m = 1 or n = 1, else None. layout is "rows" or "columns"
    (module docstring); the matrix is the other operand."""
    eqns = kernel.program.eqns
    if len(eqns) != 1 or eqns[0].prim.name != "dot_general":
        return None
    dot = eqns[0]
    x, y = dot.inputs
    if list(kernel.program.inputs) != [x, y] or list(kernel.program.outputs) != dot.outputs:
        return None
    if x.type.dtype not in (dtypes.float32, dtypes.float64) or y.type.dtype != x.type.dtype:
        return None
    lay = gemm_layout(x.type, y.type, dot.params["dimension_numbers"])
    if lay is None:
        return None
    batch, m, n, k, a_trans, b_trans = lay
    if batch != 1 or k < 1:
        return None
    if m == 1:
        return ("rows" if b_trans else "columns"), n, k, 0
    if n == 1:
        return ("columns" if a_trans else "rows"), m, k, 1
    return None


def emit_gemv(name: str, kernel: Kernel, threads: int | None = None) -> str | None:
    """MLIR text of `func.func @name(x, y, out)` (bare pointers) computing kernel's matrix-vector
    dot_general, or None when it is not one (gemv_layout). threads: OpenMP threads for a large
    matrix (default: the host's usable cores)."""
    found = gemv_layout(kernel)
    if found is None:
        return None
    layout, L, k, vec_index = found
    el = "f32" if kernel.program.inputs[0].type.dtype == dtypes.float32 else "f64"
    W = max(1, host_device().vector_bits // (32 if el == "f32" else 64))
    cores = threads or host_device().cores or os.cpu_count() or 1
    nt = max(1, min(cores, (L * k) // MIN_PER_THREAD, L // (ROWS if layout == "rows" else W)))
    return _GemvGen(name, layout, L, k, vec_index, el, W, nt).emit()


class _GemvGen:
    def __init__(self, name, layout, L, k, vec_index, el, W, nt):
        self.name, self.layout, self.L, self.k = name, layout, L, k
        self.vec_index, self.el, self.W, self.nt = vec_index, el, W, nt
        self.e = _Emitter(el)
        self.vt = f"vector<{W}x{el}>"
        self.v_t = f"memref<{k}x{el}>"
        self.m_t = f"memref<{L}x{k}x{el}>" if layout == "rows" else f"memref<{k}x{L}x{el}>"
        self.c_t = f"memref<{L}x{el}>"

    def emit(self) -> str:
        e = self.e
        names = ["%V", "%M"] if self.vec_index == 0 else ["%M", "%V"]
        types = {"%V": self.v_t, "%M": self.m_t}
        sig = ", ".join(f"{n}: {types[n]}" for n in names) + f", %C: {self.c_t}"
        if self.nt > 1:
            nt = e.op(f"arith.constant {self.nt} : i32", "nt")
            e.open(f"omp.parallel num_threads({nt} : i32)")
            tid = e.op("arith.index_cast "
                       + e.op("func.call @omp_get_thread_num() : () -> i32", "tid")
                       + " : i32 to index", "i")
            nth = e.op("arith.index_cast "
                       + e.op("func.call @omp_get_num_threads() : () -> i32", "nth")
                       + " : i32 to index", "i")
            # Slab s of nt covers outputs [s * L / nt, (s + 1) * L / nt) rounded to whole steps;
            # each thread takes slabs tid, tid + nthreads, ... (fewer threads granted: still all).
            e.for_("%slab", tid, e.idx(self.nt), nth)
            step = ROWS if self.layout == "rows" else self.W
            units = -(-self.L // step)
            lo = e.min(e.mul(e.op(f"arith.divui {e.mul('%slab', e.idx(units))}, "
                                  f"{e.idx(self.nt)} : index", "i"), e.idx(step)),
                       e.idx(self.L))
            nxt = e.add("%slab", e.idx(1))
            hi = e.min(e.mul(e.op(f"arith.divui {e.mul(nxt, e.idx(units))}, "
                                  f"{e.idx(self.nt)} : index", "i"), e.idx(step)),
                       e.idx(self.L))
            self.body(lo, hi)
            e.close()
            e.emit("omp.terminator")
            e.close()
        else:
            self.body(e.idx(0), e.idx(self.L))
        consts = [f"    {n} = {v}" for n, v in sorted(e.consts.items())]
        return "\n".join([f"func.func @{self.name}({sig}) {{", *consts, *e.lines,
                          "    return", "}"])

    def body(self, lo: str, hi: str) -> None:
        if self.layout == "rows":
            self.rows(lo, hi)
        else:
            self.columns(lo, hi)

    # --- helpers ----------------------------------------------------------------------------------
    def load_v(self, i: str) -> str:
        return self.e.op(f"vector.load %V[{i}] : {self.v_t}, {self.vt}", "x")

    def fma(self, a: str, b: str, c: str) -> str:
        return self.e.op(f"vector.fma {a}, {b}, {c} : {self.vt}", "f")

    def split(self, lo: str, hi: str, step: int) -> str:
        """The end of the whole steps of `step` in [lo, hi)."""
        e = self.e
        n = e.sub(hi, lo)
        return e.add(lo, e.mul(e.op(f"arith.divui {n}, {e.idx(step)} : index", "i"),
                               e.idx(step)))

    def scalar_dot(self, row_of, lo: str, hi: str) -> str:
        """sum over kk in [lo, hi) of M[row_of(kk)] * v[kk] (row_of gives the M indices)."""
        e, el = self.e, self.el
        s = e.fresh("s")
        e.open(f"{s} = scf.for %kk{e.count} = {lo} to {hi} step {e.idx(1)} "
               f"iter_args(%acc{e.count} = {e.fzero()}) -> ({el})")
        kk, acc = f"%kk{e.count}", f"%acc{e.count}"
        # (the names above were fixed before any op inside the loop bumped the counter)
        mv = e.op(f"memref.load %M[{row_of(kk)}] : {self.m_t}", "m")
        vv = e.op(f"memref.load %V[{kk}] : {self.v_t}", "v")
        e.emit(f"scf.yield {e.op(f'math.fma {mv}, {vv}, {acc} : {el}', 'f')} : {el}")
        e.close()
        return s

    # --- "rows": C[j] = sum_k M[j, k] v[k] ---------------------------------------------------
    def rows(self, lo: str, hi: str) -> None:
        e = self.e
        full = self.split(lo, hi, ROWS)
        e.for_("%jr", lo, full, e.idx(ROWS))
        self.row_block("%jr", ROWS)
        e.close()
        e.for_("%j1", full, hi, e.idx(1))
        self.row_block("%j1", 1)
        e.close()

    def row_block(self, j: str, R: int) -> None:
        e, W, el, vt = self.e, self.W, self.el, self.vt
        rows = [j] + [e.add(j, e.idx(r)) for r in range(1, R)]
        kmain = (self.k // (2 * W)) * 2 * W
        zero = e.fzero(W)
        accs = [zero] * (2 * R)
        if kmain:
            res = e.fresh("acc")
            names = [f"%a{e.count}_{q}" for q in range(2 * R)]
            inits = ", ".join(f"{n} = {zero}" for n in names)
            e.open(f"{res}:{2 * R} = scf.for %kk{e.count} = {e.idx(0)} to {e.idx(kmain)} "
                   f"step {e.idx(2 * W)} iter_args({inits}) -> ({', '.join([vt] * (2 * R))})")
            kk = f"%kk{e.count}"
            kk2 = e.add(kk, e.idx(W))
            x0, x1 = self.load_v(kk), self.load_v(kk2)
            new = []
            for r, row in enumerate(rows):
                m0 = e.op(f"vector.load %M[{row}, {kk}] : {self.m_t}, {vt}", "m")
                m1 = e.op(f"vector.load %M[{row}, {kk2}] : {self.m_t}, {vt}", "m")
                new += [self.fma(m0, x0, names[2 * r]), self.fma(m1, x1, names[2 * r + 1])]
            e.emit(f"scf.yield {', '.join(new)} : {', '.join([vt] * (2 * R))}")
            e.close()
            accs = [f"{res}#{q}" for q in range(2 * R)]
        for r, row in enumerate(rows):
            total = e.op(f"arith.addf {accs[2 * r]}, {accs[2 * r + 1]} : {vt}", "v")
            s = e.op(f"vector.reduction <add>, {total} : {vt} into {el}", "r")
            if kmain < self.k:
                tail = self.scalar_dot(lambda kk, row=row: f"{row}, {kk}", e.idx(kmain),
                                       e.idx(self.k))
                s = e.op(f"arith.addf {s}, {tail} : {el}", "r")
            e.emit(f"memref.store {s}, %C[{row}] : {self.c_t}")

    # --- "columns": C[j] = sum_k v[k] M[k, j] ------------------------------------------------
    def columns(self, lo: str, hi: str) -> None:
        """KB rows of M at a time, each walked left to right across the slab (KB sequential
        streams: the prefetchers follow them), the slab's partial sums in C (L1-resident)."""
        e = self.e
        vec_end = self.split(lo, hi, self.W)
        e.for_("%jz", lo, hi, e.idx(1))
        e.emit(f"memref.store {e.fzero()}, %C[%jz] : {self.c_t}")
        e.close()
        kmain = (self.k // KB) * KB
        if kmain:
            e.for_("%kb", e.idx(0), e.idx(kmain), e.idx(KB))
            self.column_rows("%kb", KB, lo, vec_end, hi)
            e.close()
        for r in range(kmain, self.k):
            self.column_rows(e.idx(r), 1, lo, vec_end, hi)

    def column_rows(self, k0: str, nr: int, lo: str, vec_end: str, hi: str) -> None:
        """C[j] += sum over the nr rows k0.. of v[k] M[k, j] for j in [lo, hi)."""
        e, W, el, vt = self.e, self.W, self.el, self.vt
        ks = [k0] + [e.add(k0, e.idx(r)) for r in range(1, nr)]
        vs = [e.op(f"memref.load %V[{kk}] : {self.v_t}", "v") for kk in ks]
        bs = [e.op(f"vector.broadcast {v} : {el} to {vt}", "b") for v in vs]
        j = f"%jc{e.count}"
        e.for_(j, lo, vec_end, e.idx(W))
        c = e.op(f"vector.load %C[{j}] : {self.c_t}, {vt}", "cv")
        for kk, b in zip(ks, bs, strict=True):
            m = e.op(f"vector.load %M[{kk}, {j}] : {self.m_t}, {vt}", "m")
            c = self.fma(m, b, c)
        e.emit(f"vector.store {c}, %C[{j}] : {self.c_t}, {vt}")
        e.close()
        j = f"%jt{e.count}"
        e.for_(j, vec_end, hi, e.idx(1))
        c = e.op(f"memref.load %C[{j}] : {self.c_t}", "cv")
        for kk, v in zip(ks, vs, strict=True):
            m = e.op(f"memref.load %M[{kk}, {j}] : {self.m_t}", "m")
            c = e.op(f"math.fma {m}, {v}, {c} : {el}", "f")
        e.emit(f"memref.store {c}, %C[{j}] : {self.c_t}")
        e.close()
