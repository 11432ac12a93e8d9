"""Contraction kernels for NVIDIA GPUs: a dot_general with its fused elementwise epilogue as a tiled
GEMM `gpu.func`, on the operands' memory as it is (gemm_layout: (batch, m, k) or (batch, k, m)
times (batch, k, n) or (batch, n, k); batch = grid z, folded into grid x beyond 65,535).

Each block computes a BM x BN tile of C, stepping K by BK through shared memory (staging.py).
The tensor-core schedules keep each tile in its operand's memory order and, when both operands
copy as 16-byte chunks, fill a ring of 2-4 buffers with cp.async (`nvgpu.device_async_copy`,
sm_80+): slice kt is multiplied while the next ones are in flight, one barrier per slice
(CUTLASS's multistage main loop); past 48 KiB the ring lives in dynamic shared memory (the
launch opts in). Otherwise the next slice is loaded into registers while the current one is
multiplied (one buffer, two barriers per slice). Inner schedules (mma.py): "tf32" (float32
operands, matmul precision "tf32") and "f16" / "bf16" (float16 / bfloat16 operands at any
precision: their products are exact in the float32 accumulator) on tensor cores, fragments
loaded by ldmatrix where the layout allows; and "simt" (float32 at precision "highest",
float64; FMA in the compute type). Tiles come from a small analytic rule: the tensor-core
schedules use 128 x 128 tiles (8 warps of 64 x 32) when that still gives every SM a block,
else 64 x 64 (4 warps of 32 x 32), with K slices of 32 (16 for TF32 staged through registers
or within 48 KiB); ring stages: up to 4 such that two blocks fit an SM. SIMT uses 64 x 64
tiles with 256 threads.

The epilogue (bias, activation, residual: equations fusion put after the dot_general) is
evaluated per output element with the loop-kernel machinery (codegen/cpu/contraction.py's
_Epilogue), so broadcasts of a bias are folded into its loads.
"""

from __future__ import annotations

import numpy as np

from nova.compiler.codegen.builder import Value, elem_type
from nova.compiler.codegen.cpu.contraction import _Epilogue
from nova.compiler.codegen.cpu.index import _NoVector, memref_type
from nova.compiler.codegen.cuda.mma import HalfMmaSchedule, MmaSchedule, SimtSchedule
from nova.compiler.codegen.cuda.staging import StagingMixin, Text
from nova.compiler.kernel import gemm_layout
from nova.compiler.kernel import Kernel
from nova.core import dtypes

BK = 16
# (BM, BN, WM, WN): tile and warp grid of the tensor-core schedule, largest first.
MMA_TILES = ((128, 128, 2, 4), (64, 64, 2, 2))
_FLOATS = (dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16)


# Static shared memory per block (CUDA's limit without the opt-in for larger dynamic sizes).
SHARED_LIMIT = 48 * 1024
# CUDA's limit on grid y and z.
MAX_GRID_Z = 65535

class _EpilogueHost:
    """What _Epilogue needs of the calling builder: indent, lines, batch_index."""

    def __init__(self, t: Text, batch_index):
        self.indent = t.indent
        self.lines = t.lines
        self.batch_index = batch_index


def _compute_dtype(dtype):
    return dtypes.float64 if dtype == dtypes.float64 else dtypes.float32


class GPUMatmul(StagingMixin):
    """Emits one contraction kernel; after `emit()` the launch configuration is in grid/block."""

    def __init__(self, name: str, kernel: Kernel, tf32: bool, sm_count: int,
                 shared_optin: int = 48 * 1024, tile: tuple | None = None):
        self.forced_tile = tuple(tile) if tile else None  # (BM, BN): config "gemm_tile"
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
        # 16-bit operands stay 16-bit up to the tensor cores (raw bit patterns in shared memory).
        self.half = self.dtype in (dtypes.float16, dtypes.bfloat16)
        self.mma_type = {dtypes.float16: "f16", dtypes.bfloat16: "bf16"}.get(self.dtype)
        self.schedule = "tf32" if self.tf32 else (self.mma_type or "simt")
        self.inner = (MmaSchedule if self.tf32 else HalfMmaSchedule if self.half
                      else SimtSchedule)
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
        self.shared_optin = shared_optin
        self._choose_tiles(sm_count)
        # With the dynamic shared memory of sm_80+ (up to `shared_optin` bytes per block) the
        # cp.async ring takes K slices of 32 (TF32 too): half the barriers per flop.
        if self.tf32 and shared_optin > SHARED_LIMIT and self.async_ready():
            self.BK = 2 * BK
        nx = -(-self.n // self.BN)
        # Grid z holds the batch up to CUDA's limit of 65,535; a larger batch folds into grid x
        # (limit 2^31 - 1): block x = batch * column tiles + column tile.
        self.fold_batch = self.batch > MAX_GRID_Z
        self.grid = ((nx * self.batch, -(-self.m // self.BM), 1) if self.fold_batch
                     else (nx, -(-self.m // self.BM), self.batch))
        self.shared_bytes = 0
        self.dynamic_shared_bytes = 0

    def _choose_tiles(self, sm_count: int) -> None:
        """The largest tensor-core tile that still gives every SM at least one block (a wave),
        or the forced tile (config "gemm_tile", for measurements) when it is in the table;
        SIMT: 64 x 64 tiles of 16 x 16 threads."""
        self.BK = 2 * BK if self.half else BK
        self.stage = None  # the pipeline stage index of shared-memory reads (cp.async)
        if not (self.tf32 or self.half):
            self.BM = self.BN = 64
            self.threads = 256
            self.smem_a_ik = self.smem_b_jk = False
            return
        forced = [t for t in MMA_TILES if t[:2] == self.forced_tile]
        for bm, bn, wm, wn in forced or MMA_TILES:
            blocks = -(-self.m // bm) * -(-self.n // bn) * self.batch
            if blocks >= sm_count or forced or (bm, bn, wm, wn) == MMA_TILES[-1]:
                break
        self.BM, self.BN, self.WM, self.WN = bm, bn, wm, wn
        self.threads = 32 * wm * wn
        # Tiles keep their operand's memory order: k innermost where the memory is k-contiguous.
        self.smem_a_ik = not self.a_trans
        self.smem_b_jk = self.b_trans

    # --- text ----------------------------------------------------------------------------------
    def emit(self) -> str:
        t = self.t = Text()
        el = elem_type(self.dtype)
        ce = elem_type(self.ct)
        smem = "#gpu.address_space<workgroup>"
        BM, BN, BK = self.BM, self.BN, self.BK
        # Padding keeps fragment reads conflict-free and rows 16-byte aligned for vector
        # accesses. Tensor cores: a [free][k] tile has rows of 20 words (BK + 4 floats, BK + 8
        # halves), so the 8 rows x 4 k-columns (or pairs) a warp reads fall in 32 distinct banks;
        # a [k][free] tile has rows of free + 8 elements (8 or 4 banks apart per k).
        if self.tf32 or self.half:
            pad_k = 8 if self.half else 4
            a_shape = (BM, BK + pad_k) if self.smem_a_ik else (BK, BM + 8)
            b_shape = (BN, BK + pad_k) if self.smem_b_jk else (BK, BN + 8)
        else:
            a_shape, b_shape = (BK, BM + 4), (BK, BN + 4)
        self.se = el if self.half else ce  # shared memory's element type (bf16 as i16 bits)
        itemsize = 2 if self.half else np.dtype(self.ct).itemsize
        stage_bytes = itemsize * (a_shape[0] * a_shape[1] + b_shape[0] * b_shape[1])
        # cp.async pipeline (sm_80+) when both tiles copy as 16-byte chunks, else one buffer
        # staged through registers. Stages: up to 4 such that two blocks fit an SM's opt-in
        # shared memory (dynamic shared memory past the 48 KiB of static), else as many as
        # fit in 48 KiB; at least 2.
        self.stages = 0
        if (self.tf32 or self.half) and self.async_ready():
            fit = [s for s in (4, 3, 2) if 2 * s * stage_bytes <= self.shared_optin]
            self.stages = fit[0] if fit else max(2, min(4, SHARED_LIMIT // stage_bytes))
            assert self.stages * stage_bytes <= max(self.shared_optin, SHARED_LIMIT), (
                f"{self.name}: {self.stages} stages of {stage_bytes} B exceed shared memory")
        lead = f"{self.stages}x" if self.stages else ""
        self.as_t = f"memref<{lead}{a_shape[0]}x{a_shape[1]}x{self.se}, {smem}>"
        self.bs_t = f"memref<{lead}{b_shape[0]}x{b_shape[1]}x{self.se}, {smem}>"
        total = stage_bytes * max(self.stages, 1)
        a_bytes = itemsize * max(self.stages, 1) * a_shape[0] * a_shape[1]  # Bs follows As
        dynamic = total > SHARED_LIMIT
        self.shared_bytes = 0 if dynamic else total
        self.dynamic_shared_bytes = total if dynamic else 0
        b, m, n, k = self.batch, self.m, self.n, self.k
        out_t = self.final.type
        args = [f"%a: memref<{b * m * k}x{el}>", f"%b: memref<{b * k * n}x{el}>"]
        args += [f"%e{i}: {memref_type(v.type)}" for i, v in enumerate(self.epi_inputs)]
        args += [f"%out: memref<{max(out_t.size, 1)}x{elem_type(out_t.dtype)}>"]
        # Both tiles are read and written with 16-byte vector accesses (staging.py), but MLIR
        # places workgroup buffers at the element's alignment unless told otherwise.
        align = "{llvm.align = 16 : i64}"
        attrs = (f"kernel attributes {{known_block_size = array<i32: {self.threads}, 1, 1>}} "
                 "{")
        if dynamic:  # views of the block's dynamic shared memory (an extern .shared array)
            dyn, dyn_t = f"@{self.name}_smem", f"memref<0xi8, {smem}>"
            bytes_t = f"memref<{total}xi8, {smem}>"
            head = "\n".join([
                f"    memref.global \"public\" {dyn} : {dyn_t} {{alignment = 16 : i64}}",
                f"    gpu.func @{self.name}({', '.join(args)}) {attrs}",
                f"      %smem0 = memref.get_global {dyn} : {dyn_t}",
                f"      %smem = memref.reinterpret_cast %smem0 to offset: [0], sizes: [{total}], "
                f"strides: [1] : {dyn_t} to {bytes_t}",
                "      %smem_a = arith.constant 0 : index",
                f"      %smem_b = arith.constant {a_bytes} : index",
                f"      %As = memref.view %smem[%smem_a][] : {bytes_t} to {self.as_t}",
                f"      %Bs = memref.view %smem[%smem_b][] : {bytes_t} to {self.bs_t}"])
        else:
            head = (f"    gpu.func @{self.name}({', '.join(args)}) workgroup(%As : {self.as_t} "
                    f"{align}, %Bs : {self.bs_t} {align}) {attrs}")
        self._block_coords()
        self.inner.thread_coords(self)  # before the loop: the store after it uses them too
        accs = self.inner.init_accs(self)
        if self.stages:
            res = self._pipelined_loop(accs)
        else:
            res = self._staged_loop(accs)
        self._store([f"{res}#{i}" for i in range(len(accs))])
        return "\n".join([head] + t.consts + t.lines + ["      gpu.return", "    }"])

    def _block_coords(self) -> None:
        """This block's tile: column and row tile (bx, by), batch element (bz), thread id, the
        tile's origin (row0, col0) and the batch element's flat bases in A, B and C."""
        t = self.t
        self.bx = t.op("gpu.block_id x")
        self.by = t.op("gpu.block_id y")
        if self.fold_batch:
            nx = t.c(-(-self.n // self.BN))
            self.bz = t.idx("divui", self.bx, nx)
            self.bx = t.idx("remui", self.bx, nx)
        else:
            self.bz = t.op("gpu.block_id z")
        self.tid = t.op("gpu.thread_id x")
        self.row0 = t.mul(self.by, self.BM)
        self.col0 = t.mul(self.bx, self.BN)
        m, n, k = self.m, self.n, self.k
        self.abase = t.mul(self.bz, m * k)
        self.bbase = t.mul(self.bz, k * n)
        self.cbase = t.mul(self.bz, m * n)

    def _pipelined_loop(self, accs: list) -> str:
        """The K loop over a ring of `stages` shared-memory buffers filled by cp.async: slice kt
        is multiplied while slices kt + 1 .. kt + stages - 1 are in flight (one barrier per
        slice). Slices past the end are zero-filled copies (no global read) into buffers
        nobody reads, so every thread commits one group per slice without a branch; TF32
        operands are rounded in place by the thread that copied them."""
        t = self.t
        S, BK = self.stages, self.BK
        kt_n = -(-self.k // BK)
        chunks = self.chunks()
        for s in range(S - 1):
            live = None if s < kt_n else t.c(0, "i1")
            group = self.async_copy(t.c(min(s, kt_n - 1) * BK), t.c(s), chunks, live)
        res, types = self._open_k_loop(accs, kt_n)
        # Groups committed before this slice's wait: tiles 0 .. kt + S - 2, so S - 2 may pend.
        t.emit(f"nvgpu.device_async_wait {group} {{numGroups = {S - 2} : i32}}")
        self.stage = t.idx("remui", "%kt", t.c(S))
        if self.tf32:
            self.round_tf32_in_place(self.stage, chunks)
        t.emit("gpu.barrier")  # slice kt visible to all; slice kt - 1's buffer free
        ahead = t.idx("addi", "%kt", t.c(S - 1))
        nxt = t.idx("minui", ahead, t.c(kt_n - 1))
        live = t.op(f"arith.cmpi ult, {ahead}, {t.c(kt_n)} : index")
        self.async_copy(t.mul(nxt, BK), t.idx("remui", ahead, t.c(S)), chunks, live)
        new = self.inner.steps(self, [f"%acc{i}" for i in range(len(accs))])
        t.emit(f"scf.yield {', '.join(new)} : {types}")
        t.indent -= 2
        t.emit("}")
        # No copy may still be landing when the block exits.
        t.emit(f"nvgpu.device_async_wait {group} {{numGroups = 0 : i32}}")
        self.stage = None
        return res

    def _open_k_loop(self, accs: list, kt_n: int) -> tuple:
        """Opens `scf.for %kt` over the kt_n K slices carrying the accumulators (%acc<i>);
        returns (result name, accumulator types)."""
        t = self.t
        res = t.fresh()
        names = ", ".join(f"%acc{i} = {a}" for i, a in enumerate(accs))
        types = ", ".join([self.acc_type] * len(accs))
        t.emit(f"{res}:{len(accs)} = scf.for %kt = {t.c(0)} to {t.c(kt_n)} step {t.c(1)} "
               f"iter_args({names}) -> ({types}) {{")
        t.indent += 2
        return res, types

    def _staged_loop(self, accs: list) -> str:
        """The K loop over one shared-memory buffer: the next slice is loaded into registers
        while the current one is multiplied, then stored (two barriers per slice)."""
        t = self.t
        BK = self.BK
        kt_n = -(-self.k // BK)
        self.stage_stores(self.stage_loads(t.c(0)))
        t.emit("gpu.barrier")
        res, types = self._open_k_loop(accs, kt_n)
        # The next slice (the last one again on the last step: no branch, harmless).
        nxt = t.idx("minui", t.idx("addi", "%kt", t.c(1)), t.c(kt_n - 1))
        pending = self.stage_loads(t.mul(nxt, BK))
        new = self.inner.steps(self, [f"%acc{i}" for i in range(len(accs))])
        t.emit("gpu.barrier")
        self.stage_stores(pending)
        t.emit("gpu.barrier")
        t.emit(f"scf.yield {', '.join(new)} : {types}")
        t.indent -= 2
        t.emit("}")
        return res

    # --- epilogue and store ------------------------------------------------------------------
    def _store(self, finals: list) -> None:
        """The epilogue and the store of every accumulator this thread holds. Tensor-core
        fragments hold pairs of adjacent columns (c even, c + 1): with an even n they are
        stored as one 2-element vector (8 bytes for float32), so a warp's stores cover whole
        32-byte sectors of 8 rows instead of every other 4 bytes of them."""
        t = self.t
        m, n = self.m, self.n
        fin_t = self.final.type
        el = elem_type(fin_t.dtype)
        mt = f"memref<{max(fin_t.size, 1)}x{el}>"
        elems = list(self.inner.elements(self, finals))
        paired = (getattr(self.inner, "pairs", False) and n % 2 == 0
                  and np.dtype(fin_t.dtype).itemsize >= 2)
        groups = [elems[i:i + 2] for i in range(0, len(elems), 2)] if paired else \
            [[e] for e in elems]
        for group in groups:
            _, r, c = group[0]
            gi, gj = t.add(self.row0, r), t.add(self.col0, c)
            conds = self._bounds(gi, m, self.BM) + self._bounds(gj, n, self.BN)
            if conds:
                ok = conds[0] if len(conds) == 1 else \
                    t.op(f"arith.andi {conds[0]}, {conds[1]} : i1")
                t.emit(f"scf.if {ok} {{")
                t.indent += 2
            vals = [self._epilogue_value(a, gi, t.add(gj, t.c(j)) if j else gj)
                    for j, (a, _, _) in enumerate(group)]
            addr = t.add(self.cbase, t.mul(gi, n), gj)
            if len(vals) == 1:
                t.emit(f"memref.store {vals[0]}, %out[{addr}] : {mt}")
            else:
                vt = f"vector<2x{el}>"
                vec = t.op(f"vector.from_elements {vals[0]}, {vals[1]} : {vt}")
                size = 2 * np.dtype(fin_t.dtype).itemsize
                t.emit(f"vector.store {vec}, %out[{addr}] {{alignment = {size}}} : {mt}, {vt}")
            if conds:
                t.indent -= 2
                t.emit("}")

    def _epilogue_value(self, acc: str, gi: str, gj: str) -> str:
        """Output element (gi, gj): the accumulator narrowed once, then the fused epilogue."""
        v = self._narrow(acc, self.dot.outputs[0].type.dtype)
        if self.epilogue is None:
            return v.name
        host = _EpilogueHost(self.t, Value(self.bz, "index"))
        try:
            v = self.epilogue(host, v, Value(gi, "index"), Value(gj, "index"),
                              [f"%e{i}" for i in range(len(self.epi_inputs))])
        except _NoVector:
            raise NotImplementedError(
                f"cuda codegen: the epilogue of contraction {self.name} reads a constant "
                "with data (split it into a loop kernel)") from None
        return v.name

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


def emit_gpu_contraction(name: str, kernel: Kernel, precision: str,
                         sm_count: int = 132, shared_optin: int = 48 * 1024,
                         arch: str = "sm_90", tile: tuple | None = None) -> GPUMatmul:
    """The emitter of a contraction kernel after `emit()` (text in `.text`; launch configuration
    in `.grid`, `.block`, `.shared_bytes` (static) and `.dynamic_shared_bytes` (set when the
    cp.async ring needs more than 48 KiB: the launch must opt in)). precision: "tf32" uses
    tensor cores for float32 operands; sm_count and shared_optin (the target's SM count and
    opt-in shared memory per block) size the tiles and the pipeline; tile (BM, BN) forces a
    tensor-core tile of the schedule's table (others are ignored). On arch "sm_90a" (Hopper's
    architecture-specific instructions) tensor-core contractions run as wgmma kernels
    (wgmma.py); elsewhere as mma.sync.

    Raises NotImplementedError naming what is unsupported (layout, dtype, several outputs)."""
    if precision not in ("highest", "tf32"):
        raise ValueError(f"matmul precision must be 'highest' or 'tf32', got {precision!r}")
    tf32 = precision == "tf32"
    mm = GPUMatmul(name, kernel, tf32=tf32, sm_count=sm_count, shared_optin=shared_optin,
                   tile=tile)
    if arch == "sm_90a" and (mm.tf32 or mm.half):
        from nova.compiler.codegen.cuda.wgmma import WgmmaMatmul

        try:
            mm = WgmmaMatmul(name, kernel, tf32=tf32, sm_count=sm_count,
                             shared_optin=shared_optin, tile=tile)
        except NotImplementedError:  # (a ring that does not fit): the mma.sync kernel
            pass
    mm.text = mm.emit()
    mm.block = (mm.threads, 1, 1)
    # Each output element's epilogue inputs are read by the thread that stores it, from the
    # accumulators in its registers, once, right before that store (`_store`): an output may
    # take the buffer of an epilogue input of its shape that dies here (plan_memory).
    kernel.schedule.update({"gpu_schedule": mm.schedule, "tile": (mm.BM, mm.BN, mm.BK),
                            "stages": mm.stages, "epilogue_in_place": True})
    return mm
