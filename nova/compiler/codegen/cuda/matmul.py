"""Contraction kernels for NVIDIA GPUs: a dot_general with its fused elementwise epilogue as a tiled
GEMM `gpu.func`, on the operands' memory as it is (gemm_layout: (batch, m, k) or (batch, k, m)
times (batch, k, n) or (batch, n, k); batch = grid z).

Two schedules, both staging 64x64 output tiles through shared memory, K in steps of 16 with
zero padding at the edges:
- "tf32" (float32 operands, matmul precision "tf32"): 4 warps in 2x2, each a 32x32 warp tile of
  2x4 `nvgpu.mma.sync` m16n8k8 tensor-core ops (PTX ISA, "Matrix fragments for mma.m16n8k8",
  .tf32: a0..a3 at (g, t), (g+8, t), (g, t+4), (g+8, t+4); b0, b1 at (t, g), (t+4, g); c at
  (g, 2t + {0,1}) and (g+8, 2t + {0,1}), g = lane / 4, t = lane % 4). Operands are rounded to
  TF32 (round to nearest, ties away: cvt.rna's rule) when they are written to shared memory.
- "simt" (every other float dtype): 16x16 threads with a 4x4 register tile each, FMA in float32
  (float64 for float64), bf16/f16 operands widened when staged, the result rounded once.

The epilogue (bias, activation, residual: equations fusion put after the dot_general) is
evaluated per output element with the loop-kernel machinery (codegen/cpu/contraction.py's
_Epilogue), so broadcasts of a bias are folded into its loads.
"""

from __future__ import annotations

import numpy as np

from nova.compiler.codegen.builder import Value, elem_type
from nova.compiler.codegen.cpu.contraction import _Epilogue, gemm_layout
from nova.compiler.codegen.cpu.index import _NoVector, memref_type
from nova.compiler.kernel import Kernel
from nova.core import dtypes

BM = BN = 64
BK = 16
_FLOATS = (dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16)


class _Text:
    """Line emitter with function-level constants (valid in every nested region)."""

    def __init__(self):
        self.lines: list[str] = []
        self.consts: list[str] = []
        self._cache: dict = {}
        self.n = 0
        self.indent = 6

    def fresh(self) -> str:
        self.n += 1
        return f"%m{self.n}"

    def emit(self, text: str) -> None:
        self.lines.append(" " * self.indent + text)

    def op(self, text: str) -> str:
        name = self.fresh()
        self.emit(f"{name} = {text}")
        return name

    def c(self, v, t: str = "index") -> str:
        key = (repr(v), t)
        if key not in self._cache:
            name = f"%c{len(self._cache)}"
            self._cache[key] = name
            self.consts.append(f"      {name} = arith.constant {v} : {t}")
        return self._cache[key]

    def idx(self, opname: str, a: str, b: str) -> str:
        return self.op(f"arith.{opname} {a}, {b} : index")

    def add(self, *xs: str) -> str:
        out = xs[0]
        for x in xs[1:]:
            out = self.idx("addi", out, x)
        return out

    def mul(self, a: str, k: int) -> str:
        return a if k == 1 else self.idx("muli", a, self.c(k))


class _EpilogueHost:
    """What _Epilogue needs of the calling builder: indent, lines, batch_index."""

    def __init__(self, t: _Text, batch_index):
        self.indent = t.indent
        self.lines = t.lines
        self.batch_index = batch_index


def _compute_dtype(dtype):
    return dtypes.float64 if dtype == dtypes.float64 else dtypes.float32


class GPUMatmul:
    """Emits one contraction kernel; after `emit()` the launch configuration is in grid/block."""

    def __init__(self, name: str, kernel: Kernel, tf32: bool):
        dots = [e for e in kernel.program.eqns if e.prim.name == "dot_general"]
        if len(dots) != 1 or len(kernel.program.outputs) != 1:
            raise NotImplementedError(
                f"cuda codegen: contraction kernel {name} with {len(dots)} dot_general(s) and "
                f"{len(kernel.program.outputs)} output(s) (one of each is supported)")
        self.dot = dot = dots[0]
        x, y = dot.inputs
        if x.type.dtype not in _FLOATS or y.type.dtype != x.type.dtype:
            raise NotImplementedError(
                f"cuda codegen: contraction of {x.type.dtype} x {y.type.dtype} (float32, float64, "
                "float16 and bfloat16 operands of one dtype are supported)")
        lay = gemm_layout(x.type, y.type, dot.params["dimension_numbers"])
        if lay is None or list(kernel.program.inputs[:2]) != [x, y]:
            raise NotImplementedError(
                f"cuda codegen: dot_general {x.type} x {y.type} with dimension numbers "
                f"{dot.params['dimension_numbers']} is not a (batched) GEMM over its operands' "
                "memory")
        self.batch, self.m, self.n, self.k, self.a_trans, self.b_trans = lay
        self.name, self.kernel = name, kernel
        self.dtype = x.type.dtype
        self.ct = _compute_dtype(self.dtype)
        self.tf32 = tf32 and self.dtype == dtypes.float32
        self.schedule = "tf32" if self.tf32 else "simt"
        out = dot.outputs[0]
        (lc, _), (lb, _) = dot.params["dimension_numbers"]
        nb, nxf = len(lb), x.type.ndim - len(lc) - len(lb)
        groups = (list(range(nb)), list(range(nb, nb + nxf)), list(range(nb + nxf, out.type.ndim)))
        self.final = kernel.program.outputs[0]
        self.epilogue = None
        if self.final is not out:
            if self.final.type.shape != out.type.shape:
                raise NotImplementedError(f"cuda codegen: epilogue of {name} changes the shape")
            self.epilogue = _Epilogue(kernel, out, out.type.shape, groups)
        self.epi_inputs = list(kernel.program.inputs[2:])
        self.block = (128 if self.tf32 else 256, 1, 1)
        self.grid = (-(-self.n // BN), -(-self.m // BM), self.batch)
        self.shared_bytes = 0

    # --- text ----------------------------------------------------------------------------------
    def emit(self) -> str:
        t = self.t = _Text()
        el = elem_type(self.dtype)
        ce = elem_type(self.ct)
        smem = "#gpu.address_space<workgroup>"
        if self.tf32:
            self.as_t, self.bs_t = f"memref<{BM}x{BK + 4}xf32, {smem}>", f"memref<{BK}x{BN + 8}xf32, {smem}>"
            self.shared_bytes = 4 * (BM * (BK + 4) + BK * (BN + 8))
        else:
            self.as_t, self.bs_t = f"memref<{BK}x{BM + 1}x{ce}, {smem}>", f"memref<{BK}x{BN + 1}x{ce}, {smem}>"
            self.shared_bytes = np.dtype(self.ct).itemsize * BK * (BM + BN + 2)
        b, m, n, k = self.batch, self.m, self.n, self.k
        out_t = self.final.type
        args = [f"%a: memref<{b * m * k}x{el}>", f"%b: memref<{b * k * n}x{el}>"]
        args += [f"%e{i}: {memref_type(v.type)}" for i, v in enumerate(self.epi_inputs)]
        args += [f"%out: memref<{max(out_t.size, 1)}x{elem_type(out_t.dtype)}>"]
        head = (f"    gpu.func @{self.name}({', '.join(args)}) workgroup(%As : {self.as_t}, "
                f"%Bs : {self.bs_t}) kernel attributes {{known_block_size = array<i32: "
                f"{self.block[0]}, 1, 1>}} {{")
        self.bx = t.op("gpu.block_id x")
        self.by = t.op("gpu.block_id y")
        self.bz = t.op("gpu.block_id z")
        self.tid = t.op("gpu.thread_id x")
        self.row0 = t.mul(self.by, BM)
        self.col0 = t.mul(self.bx, BN)
        self.abase = t.mul(self.bz, m * k)
        self.bbase = t.mul(self.bz, k * n)
        self.cbase = t.mul(self.bz, m * n)
        self._thread_coords()  # before the loop: the store after it uses them too
        accs = self._init_accs()
        kt_n = -(-k // BK)
        res = t.fresh()
        names = ", ".join(f"%acc{i} = {a}" for i, a in enumerate(accs))
        types = ", ".join([self.acc_type] * len(accs))
        t.emit(f"{res}:{len(accs)} = scf.for %kt = {t.c(0)} to {t.c(kt_n)} step {t.c(1)} "
               f"iter_args({names}) -> ({types}) {{")
        t.indent += 2
        k0 = t.mul("%kt", BK)
        self._stage_tiles(k0)
        t.emit("gpu.barrier")
        new = self._mma_steps([f"%acc{i}" for i in range(len(accs))]) if self.tf32 else \
            self._fma_steps([f"%acc{i}" for i in range(len(accs))])
        t.emit("gpu.barrier")
        t.emit(f"scf.yield {', '.join(new)} : {types}")
        t.indent -= 2
        t.emit("}")
        finals = [f"{res}#{i}" for i in range(len(accs))]
        self._store(finals)
        return "\n".join([head] + t.consts + t.lines + ["      gpu.return", "    }"])

    def _init_accs(self) -> list:
        t = self.t
        if self.tf32:
            self.acc_type = "vector<2x2xf32>"
            z = t.c("dense<0.0>", "vector<2x2xf32>")
            return [z] * 8
        self.acc_type = elem_type(self.ct)
        return [t.c("0.0", self.acc_type)] * 16

    # --- global -> shared --------------------------------------------------------------------
    def _load_elem(self, mem: str, addr: str, conds: list) -> str:
        """The operand element at flat address addr as the compute type (0 when out of range)."""
        t = self.t
        el = elem_type(self.dtype)
        mt = f"memref<{self._size(mem)}x{el}>"
        if conds:
            ok = conds[0]
            for c in conds[1:]:
                ok = t.op(f"arith.andi {ok}, {c} : i1")
            res = t.fresh()
            t.emit(f"{res} = scf.if {ok} -> ({el}) {{")
            t.indent += 2
            v = t.op(f"memref.load {mem}[{addr}] : {mt}")
            t.emit(f"scf.yield {v} : {el}")
            t.indent -= 2
            t.emit("} else {")
            zero = t.c("0", el) if el == "i16" else t.c("0.0", el)
            t.emit(f"  scf.yield {zero} : {el}")
            t.emit("}")
            v = res
        else:
            v = t.op(f"memref.load {mem}[{addr}] : {mt}")
        return self._widen(v)

    def _size(self, mem: str) -> int:
        b, m, n, k = self.batch, self.m, self.n, self.k
        return b * m * k if mem == "%a" else b * k * n

    def _widen(self, v: str) -> str:
        t = self.t
        if self.dtype == dtypes.float16:
            return t.op(f"arith.extf {v} : f16 to f32")
        if self.dtype == dtypes.bfloat16:  # bf16 bits << 16 are the float32 value (exact)
            w = t.op(f"arith.extui {v} : i16 to i32")
            s = t.op(f"arith.shli {w}, {t.c(16, 'i32')} : i32")
            return t.op(f"arith.bitcast {s} : i32 to f32")
        if self.tf32:  # round to TF32 (10 mantissa bits): ties away from zero, as cvt.rna
            bits = t.op(f"arith.bitcast {v} : f32 to i32")
            r = t.op(f"arith.addi {bits}, {t.c(0x1000, 'i32')} : i32")
            r = t.op(f"arith.andi {r}, {t.c(-0x2000, 'i32')} : i32")
            return t.op(f"arith.bitcast {r} : i32 to f32")
        return v

    def _bounds(self, gi: str, lim: int, tile: int, full: int) -> list:
        """[gi < lim] when tiles overhang the edge of a dimension of size lim."""
        if full % tile == 0:
            return []
        return [self.t.op(f"arith.cmpi ult, {gi}, {self.t.c(lim)} : index")]

    def _stage_tiles(self, k0: str) -> None:
        """Each thread copies its share of the A (BMxBK) and B (BKxBN) tiles to shared memory."""
        t = self.t
        nthreads = self.block[0]
        m, n, k = self.m, self.n, self.k
        for q in range(BM * BK // nthreads):
            e = t.add(self.tid, t.c(q * nthreads)) if q else self.tid
            if self.a_trans:  # memory (k, m): consecutive threads read consecutive i
                kl, il = t.idx("divui", e, t.c(BM)), t.idx("remui", e, t.c(BM))
            else:
                il, kl = t.idx("divui", e, t.c(BK)), t.idx("remui", e, t.c(BK))
            gi, gk = t.add(self.row0, il), t.add(k0, kl)
            addr = t.add(self.abase, t.mul(gk, m), gi) if self.a_trans else \
                t.add(self.abase, t.mul(gi, k), gk)
            v = self._load_elem("%a", addr, self._bounds(gi, m, BM, m) + self._bounds(gk, k, BK, k))
            pos = f"{il}, {kl}" if self.tf32 else f"{kl}, {il}"
            t.emit(f"memref.store {v}, %As[{pos}] : {self.as_t}")
        for q in range(BK * BN // nthreads):
            e = t.add(self.tid, t.c(q * nthreads)) if q else self.tid
            if self.b_trans:  # memory (n, k)
                jl, kl = t.idx("divui", e, t.c(BK)), t.idx("remui", e, t.c(BK))
            else:
                kl, jl = t.idx("divui", e, t.c(BN)), t.idx("remui", e, t.c(BN))
            gj, gk = t.add(self.col0, jl), t.add(k0, kl)
            addr = t.add(self.bbase, t.mul(gj, k), gk) if self.b_trans else \
                t.add(self.bbase, t.mul(gk, n), gj)
            v = self._load_elem("%b", addr, self._bounds(gj, n, BN, n) + self._bounds(gk, k, BK, k))
            t.emit(f"memref.store {v}, %Bs[{kl}, {jl}] : {self.bs_t}")

    # --- shared -> registers -> FMA / mma ----------------------------------------------------
    def _thread_coords(self) -> None:
        """SIMT: this thread's 4 rows and 4 columns of the tile (strided by 16); tf32: the
        warp's tile origin and the lane's group g and thread-in-group t."""
        t = self.t
        if self.tf32:
            warp = t.idx("divui", self.tid, t.c(32))
            lane = t.idx("remui", self.tid, t.c(32))
            self.wm0 = t.mul(t.idx("divui", warp, t.c(2)), 32)
            self.wn0 = t.mul(t.idx("remui", warp, t.c(2)), 32)
            self.g = t.idx("divui", lane, t.c(4))
            self.tt = t.idx("remui", lane, t.c(4))
            return
        tx = t.idx("remui", self.tid, t.c(16))
        ty = t.idx("divui", self.tid, t.c(16))
        self.simt_rows = [t.add(ty, t.c(16 * r)) if r else ty for r in range(4)]
        self.simt_cols = [t.add(tx, t.c(16 * c)) if c else tx for c in range(4)]

    def _fma_steps(self, accs: list) -> list:
        t = self.t
        ce = self.acc_type
        rows, cols = self.simt_rows, self.simt_cols
        accs = list(accs)
        for kk in range(BK):
            a = [t.op(f"memref.load %As[{t.c(kk)}, {r}] : {self.as_t}") for r in rows]
            bv = [t.op(f"memref.load %Bs[{t.c(kk)}, {c}] : {self.bs_t}") for c in cols]
            for r in range(4):
                for c in range(4):
                    i = 4 * r + c
                    accs[i] = t.op(f"math.fma {a[r]}, {bv[c]}, {accs[i]} : {ce}")
        return accs

    def _mma_steps(self, accs: list) -> list:
        t = self.t
        wm0, wn0, g, tt = self.wm0, self.wn0, self.g, self.tt
        accs = list(accs)
        for ks in range(BK // 8):
            c0 = t.add(tt, t.c(ks * 8)) if ks else tt
            c1 = t.add(c0, t.c(4))
            fa = []
            for mi in range(2):
                r0 = t.add(wm0, t.c(mi * 16), g)
                r1 = t.add(r0, t.c(8))
                vals = [t.op(f"memref.load %As[{r}, {c}] : {self.as_t}")
                        for r, c in ((r0, c0), (r1, c0), (r0, c1), (r1, c1))]
                fa.append(t.op(f"vector.from_elements {', '.join(vals)} : vector<4x1xf32>"))
            fb = []
            for ni in range(4):
                col = t.add(wn0, t.c(ni * 8), g)
                vals = [t.op(f"memref.load %Bs[{kr}, {col}] : {self.bs_t}") for kr in (c0, c1)]
                fb.append(t.op(f"vector.from_elements {', '.join(vals)} : vector<2x1xf32>"))
            for mi in range(2):
                for ni in range(4):
                    i = 4 * mi + ni
                    accs[i] = t.op(
                        f"nvgpu.mma.sync ({fa[mi]}, {fb[ni]}, {accs[i]}) {{mmaShape = [16, 8, 8], "
                        f"tf32Enabled}} : (vector<4x1xf32>, vector<2x1xf32>, vector<2x2xf32>) -> "
                        "vector<2x2xf32>")
        return accs

    # --- epilogue and store ------------------------------------------------------------------
    def _elements(self, finals: list):
        """(accumulator scalar, row within the tile, column within the tile) per thread."""
        t = self.t
        if not self.tf32:
            for r in range(4):
                for c in range(4):
                    yield finals[4 * r + c], self.simt_rows[r], self.simt_cols[c]
            return
        for mi in range(2):
            for ni in range(4):
                acc = finals[4 * mi + ni]
                for h in range(2):
                    row = t.add(self.wm0, t.c(mi * 16 + 8 * h), self.g)
                    for c in range(2):
                        col = t.add(self.wn0, t.c(ni * 8 + c), t.mul(self.tt, 2))
                        v = t.op(f"vector.extract {acc}[{h}, {c}] : f32 from vector<2x2xf32>")
                        yield v, row, col

    def _store(self, finals: list) -> None:
        t = self.t
        m, n = self.m, self.n
        out_dtype = self.dot.outputs[0].type.dtype
        fin_t = self.final.type
        mt = f"memref<{max(fin_t.size, 1)}x{elem_type(fin_t.dtype)}>"
        for acc, r, c in self._elements(finals):
            gi, gj = t.add(self.row0, r), t.add(self.col0, c)
            conds = self._bounds(gi, m, BM, m) + self._bounds(gj, n, BN, n)
            if conds:
                ok = conds[0] if len(conds) == 1 else t.op(f"arith.andi {conds[0]}, {conds[1]} : i1")
                t.emit(f"scf.if {ok} {{")
                t.indent += 2
            v = self._narrow(acc, out_dtype)
            if self.epilogue is not None:
                host = _EpilogueHost(t, Value(self.bz, "index"))
                try:
                    v = self.epilogue(host, v, Value(gi, "index"), Value(gj, "index"),
                                      [f"%e{i}" for i in range(len(self.epi_inputs))]).name
                except _NoVector:
                    raise NotImplementedError(
                        f"cuda codegen: the epilogue of contraction {self.name} reads a constant "
                        "with data (split it into a loop kernel)") from None
            addr = t.add(self.cbase, t.mul(gi, n), gj)
            t.emit(f"memref.store {v.name if isinstance(v, Value) else v}, %out[{addr}] : {mt}")
            if conds:
                t.indent -= 2
                t.emit("}")

    def _narrow(self, acc: str, dtype) -> Value:
        """The accumulator rounded once to the dot_general's output dtype."""
        from nova.compiler.codegen.builder import Builder

        if dtype in (dtypes.float32, dtypes.float64):
            return Value(acc, dtype, 0)
        nb = Builder(prefix=f"n{self.t.n}_")
        nb.indent = self.t.indent
        self.t.n += 1
        out = nb._narrow(Value(acc, dtypes.float32, 0), dtype)
        self.t.lines.extend(nb.lines)
        return out


def emit_gpu_contraction(name: str, kernel: Kernel, precision: str) -> GPUMatmul:
    """The emitter of a contraction kernel after `emit()` (text in `.text`; launch configuration
    in `.grid`, `.block`). precision: "tf32" uses tensor cores for float32 operands.

    Raises NotImplementedError naming what is unsupported (layout, dtype, several outputs)."""
    if precision not in ("highest", "tf32"):
        raise ValueError(f"matmul precision must be 'highest' or 'tf32', got {precision!r}")
    mm = GPUMatmul(name, kernel, tf32=precision == "tf32")
    mm.text = mm.emit()
    kernel.schedule.update({"gpu_schedule": mm.schedule, "tile": (BM, BN, BK)})
    return mm
