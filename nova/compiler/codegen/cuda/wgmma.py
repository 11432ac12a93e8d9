"""Hopper GEMMs (sm_90a): warpgroup tensor cores (`wgmma.mma_async`) over 128-byte-swizzled
shared tiles, for TF32 (float32 at matmul precision "tf32"), float16 and bfloat16 operands.

PTX ISA 8.0, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions":
- A warpgroup (4 consecutive warps, 128 threads) issues `wgmma.mma_async.m64nNkK`: D (64 x N,
  float32, in registers) += A (64 x K) B (K x N), both operands read by the tensor cores from
  shared memory through 64-bit matrix descriptors (K = 8 for tf32, 16 for f16/bf16: 32 bytes).
- Descriptor ("Matrix Descriptor Format"): bits 0-13 start address >> 4, 16-29 leading byte
  offset >> 4, 32-45 stride byte offset >> 4, 49-51 base offset, 62-63 swizzle mode (1 =
  128-byte swizzle). Every tile here is K-major with 128-byte swizzle ("canonical layouts"):
  row r of an operand (a row of A, a column of B) holds 128 bytes of K at byte r * 128 of its
  1024-byte atom of 8 rows, atoms SBO = 1024 bytes apart; the hardware XORs address bits 4-6
  (the 16-byte chunk) with bits 7-9 (the row within the atom), so a chunk c of row r is stored
  at chunk c ^ (r % 8). Tiles start at 1024-byte boundaries (base offset 0), and the K step
  within a slice advances the start address by 32 bytes (as CUTLASS's GMMA descriptor
  iterator does).
- Accumulator fragment ("wgmma-64N-D"): thread l of warp w of the warpgroup holds, for each 8
  columns j, d[4j + 2h + c] = D[16 w + l / 4 + 8 h][8 j + 2 (l % 4) + c].
- Shared memory written by ordinary stores or cp.async is made visible to the tensor cores
  (the async proxy) by `fence.proxy.async.shared::cta` in each writing thread before the
  barrier; `wgmma.fence` orders register and shared accesses before the first wgmma, and
  `wgmma.commit_group` / `wgmma.wait_group 0` complete them before the accumulators are read.

Both operands must be K-major in shared memory for tf32 (the transpose bits exist only for
16-bit types), so every tile is K-major and staging adapts to the operand's memory (`_plans`):
16-bit k-contiguous tiles copy by cp.async; TF32 k-contiguous tiles by 16-byte loads rounded
to TF32 in registers and 16-byte stores; (k, free) tiles as 4-row blocks, `vec` 4-element loads
along the free dimension transposed in registers into 16-byte stores (the 8 lanes of a
quarter-warp store 8 chunks of one row: conflict-free); sizes no multiple of the vector widths
element by element. The K loop runs over a ring of S stages (one barrier per slice, CUTLASS's
multistage main loop, without warp specialization). The ring lives in dynamic shared memory,
aligned to 1024 bytes at run time (the kernel rounds its base up; 1 KiB extra).

Tiles: the largest of 128 x 256 (two warpgroups of 64 x 256, 256 threads, one block per SM),
128 x 128 (two warpgroups of 64 x 128, two blocks per SM where no tile overhangs) and 64 x 64
(one warpgroup) that still gives every SM a block; K slices of 128 bytes (32 tf32 or 64 16-bit
values: one swizzle row); stages: up to 4 such that the SM's blocks fit its shared memory.
With 4 stages the loop keeps one wgmma group in flight across its barrier (`wait_group 1`,
the ring written 2 slices ahead), as CUTLASS's mainloops do; with fewer it waits for each
group (`wait_group 0`, S - 1 slices ahead).
"""

from __future__ import annotations

from nova.compiler.codegen.builder import elem_type
from nova.compiler.codegen.cpu.index import memref_type
from nova.compiler.codegen.cuda.matmul import GPUMatmul
from nova.compiler.codegen.cuda.staging import Text

ROW_BYTES = 128  # one swizzle row: the K extent of a shared slice
ATOM_BYTES = 1024  # 8 rows: the swizzle atom (stride byte offset)
# (BM, BN, warpgroups along M): largest first.
WGMMA_TILES = ((128, 256, 2), (128, 128, 2), (64, 64, 1))
SMEM = "#gpu.address_space<workgroup>"


def descriptor_high_bits() -> int:
    """The constant fields of a K-major 128-byte-swizzle descriptor: swizzle mode 1 (bits 62-63),
    stride byte offset 1024 >> 4 (bits 32-45), leading byte offset 1 (bits 16-29; unused by
    swizzled K-major layouts)."""
    return (1 << 62) | ((ATOM_BYTES >> 4) << 32) | (1 << 16)


class _Fragments:
    """The wgmma accumulator layout, for GPUMatmul._store (see the module docstring)."""

    pairs = True  # adjacent columns (c = 0, 1) one after the other

    @staticmethod
    def elements(mm, finals: list):
        t = mm.t
        (acc,) = finals
        for i in range(mm.BN // 2):
            j, h, c = i // 4, (i // 2) % 2, i % 2
            v = t.op(f"llvm.extractvalue {acc}[{i}] : {mm.acc_type}")
            row = t.add(mm.row_base, t.c(8 * h)) if h else mm.row_base
            col = t.add(mm.col_base, t.c(8 * j + c)) if 8 * j + c else mm.col_base
            yield v, row, col


class WgmmaMatmul(GPUMatmul):
    """One contraction kernel on Hopper's warpgroup tensor cores (same interface as GPUMatmul)."""

    def __init__(self, name, kernel, tf32, sm_count, shared_optin, tile=None):
        super().__init__(name, kernel, tf32, sm_count, shared_optin, tile)
        if not (self.tf32 or self.half):
            raise ValueError("wgmma GEMMs take tf32, float16 or bfloat16 operands")
        self.esize = 2 if self.half else 4
        self.vec = 16 // self.esize  # elements per 16-byte chunk
        self.row_elems = ROW_BYTES // self.esize
        self.BK = self.row_elems
        self.kstep = 32 // self.esize  # the wgmma's K: 32 bytes
        self.wgmma_type = "tf32" if self.tf32 else self.mma_type
        self.schedule = f"wgmma-{self.wgmma_type}"
        self.inner = _Fragments
        self.acc_type = "!llvm.struct<(" + ", ".join(["f32"] * (self.BN // 2)) + ")>"
        stage_bytes = (self.BM + self.BN) * ROW_BYTES
        # Stages: up to 4 such that the blocks an SM should hold (blocks_per_sm) fit its
        # shared memory; at least 2.
        blocks = self.blocks_per_sm()
        fit = [s for s in (4, 3, 2) if blocks * (s * stage_bytes + ATOM_BYTES) <= shared_optin]
        if not fit:
            raise NotImplementedError(f"cuda codegen: {name}'s wgmma ring does not fit "
                                      f"{shared_optin} B of shared memory")
        self.stages = fit[0]
        # With 4 stages one wgmma group stays in flight across the loop's barrier
        # (wait_group 1) and the ring is written S - 2 slices ahead; with fewer the lookahead
        # would drop to one slice, so those wait for their group (wait_group 0, S - 1 ahead).
        self.inflight = 1 if self.stages >= 4 else 0
        self.shared_bytes = 0
        self.dynamic_shared_bytes = self.stages * stage_bytes + ATOM_BYTES

    def _choose_tiles(self, sm_count: int) -> None:
        forced = [t for t in WGMMA_TILES if t[:2] == self.forced_tile]
        for bm, bn, wgs in forced or WGMMA_TILES:
            blocks = -(-self.m // bm) * -(-self.n // bn) * self.batch
            if blocks >= sm_count or forced or (bm, bn, wgs) == WGMMA_TILES[-1]:
                break
        self.BM, self.BN, self.WGS = bm, bn, wgs
        self.threads = 128 * wgs
        self.BK = 32
        self.stage = None
        self.smem_a_ik = self.smem_b_jk = True  # (cp.async-ready checks of the base class)

    # --- operands -------------------------------------------------------------------------------
    def _plans(self) -> list:
        """Per operand: (name, memref, batch base, tile origin, free size, tile rows, memory is
        (k, free), copy kind). Kinds: "async" (16-bit, k-contiguous: cp.async chunks); "chunk"
        (TF32, k-contiguous: 16-byte loads rounded in registers, 16-byte stores; cheaper in
        shared-memory bandwidth than rounding cp.async chunks in place); "block" (contiguous
        along the free dimension: a thread loads `vec` rows of 4 free elements and stores them
        transposed as 4 chunks of `vec` k); "scalar" (sizes no multiple of the vector widths)."""
        out = []
        for which, (mem, base, origin, size, tile, free_major) in zip("ab", self._operands(),
                                                                        strict=True):
            if not free_major and self.k % self.vec == 0:
                kind = "chunk" if self.tf32 else "async"
            elif free_major and size % 4 == 0:
                kind = "block"
            else:
                kind = "scalar"
            out.append((which, mem, base, origin, size, tile, free_major, kind))
        return out

    def _src_t(self, mem: str) -> str:
        el = elem_type(self.dtype)
        return f"memref<{self.batch * self.k * (self.m if mem == '%a' else self.n)}x{el}>"

    def _swizzled(self, row: str, kcol: str) -> str:
        """The element offset in a tile of element (row, k) (k within the slice)."""
        t = self.t
        chunk = t.idx("divui", kcol, t.c(self.vec))
        within = t.idx("remui", kcol, t.c(self.vec))
        pos = t.idx("xori", chunk, t.idx("remui", row, t.c(8)))
        return t.add(t.mul(row, self.row_elems), t.mul(pos, self.vec), within)

    def _items(self, plan) -> list:
        """This thread's share of one slice of an operand: [(row in tile, k in slice)], the
        origin of each chunk, block or scalar. Chunks: e -> (row e / 8, chunk e % 8), a warp
        covers 4 whole rows; blocks: e -> (4 rows from 4 (e / 8), chunk e % 8), so the 8 lanes
        of a quarter-warp store 8 chunks of one row (conflict-free) and each load instruction
        reads 8 k rows of 4 x 4 contiguous free elements; scalars: consecutive threads along
        the contiguous dimension."""
        t = self.t
        _, _, _, _, _, tile, free_major, kind = plan
        out = []
        per = {"async": 8 * tile, "chunk": 8 * tile, "block": 2 * tile,
               "scalar": tile * self.BK}[kind]
        for q in range(per // self.threads):
            e = t.add(self.tid, t.c(q * self.threads)) if q else self.tid
            if kind in ("async", "chunk"):
                out.append((t.idx("divui", e, t.c(8)), t.mul(t.idx("remui", e, t.c(8)), self.vec)))
            elif kind == "block":
                out.append((t.mul(t.idx("divui", e, t.c(8)), 4),
                            t.mul(t.idx("remui", e, t.c(8)), self.vec)))
            elif free_major:
                out.append((t.idx("remui", e, t.c(tile)), t.idx("divui", e, t.c(tile))))
            else:
                out.append((t.idx("divui", e, t.c(self.BK)), t.idx("remui", e, t.c(self.BK))))
        return out

    def _global(self, plan, row: str, kl: str, k0: str):
        """(flat address, [in-bounds conditions]) of element (row, k0 + kl) of an operand."""
        t = self.t
        _, _, base, origin, size, tile, free_major, _ = plan
        gk, gf = t.add(k0, kl), t.add(origin, row)
        addr = t.add(base, t.mul(gk, size), gf) if free_major else \
            t.add(base, t.mul(gf, self.k), gk)
        return addr, self._bounds(gf, size, tile) + self._bounds(gk, self.k, self.BK)

    def _copy_async(self, plans, items, k0: str, stage: str, live: str | None) -> list:
        t = self.t
        toks = []
        v = self.vec
        for plan, its in zip(plans, items, strict=True):
            if plan[7] != "async":
                continue
            which, mem = plan[0], plan[1]
            dst, dst_t, rows = self._tile(which)
            for row, kl in its:
                addr, conds = self._global(plan, row, kl, k0)
                addr, n = self.zero_fill(addr, conds + ([live] if live is not None else []), v)
                at = t.add(t.mul(stage, rows * self.row_elems), self._swizzled(row, kl))
                toks.append(t.op(f"nvgpu.device_async_copy {mem}[{addr}], {dst}[{at}], {v}, {n} "
                                 f"{{bypassL1}} : {self._src_t(mem)} to {dst_t}"))
        return toks

    def _load_registers(self, plans, items, k0: str) -> list:
        """Global loads of the register-staged operands' share of the slice at k0 (TF32 values
        rounded): [(plan, row, k, [values])]."""
        t = self.t
        pending = []
        for plan, its in zip(plans, items, strict=True):
            kind = plan[7]
            if kind == "async":
                continue
            for row, kl in its:
                if kind == "block":  # vec loads of 4 free elements, at k .. k + vec - 1
                    vals = []
                    for kk in range(self.vec):
                        addr, conds = self._global(plan, row, t.add(kl, t.c(kk)) if kk else kl,
                                                   k0)
                        vals.append(self._load(plan[1], addr, conds, 4))
                else:
                    addr, conds = self._global(plan, row, kl, k0)
                    vals = [self._load(plan[1], addr, conds, self.vec if kind == "chunk" else 1)]
                pending.append((plan, row, kl, vals))
        return pending

    def _store_registers(self, pending: list, stage: str) -> None:
        t = self.t
        v, se = self.vec, self.se
        for plan, row, kl, vals in pending:
            dst, dst_t, rows = self._tile(plan[0])
            origin = t.mul(stage, rows * self.row_elems)
            kind = plan[7]
            if kind == "scalar":
                t.emit(f"memref.store {vals[0]}, {dst}[{t.add(origin, self._swizzled(row, kl))}]"
                       f" : {dst_t}")
                continue
            if kind == "chunk":
                chunks = [(row, vals[0])]
            else:  # transpose the vec x 4 block: row i's chunk is element i of every load
                chunks = []
                for i in range(4):
                    xs = [t.op(f"vector.extract {x}[{i}] : {se} from vector<4x{se}>")
                          for x in vals]
                    chunks.append((t.add(row, t.c(i)) if i else row,
                                   t.op(f"vector.from_elements {', '.join(xs)} : "
                                        f"vector<{v}x{se}>")))
            for r, x in chunks:
                at = t.add(origin, self._swizzled(r, kl))
                t.emit(f"vector.store {x}, {dst}[{at}] {{alignment = 16}} : {dst_t}, "
                       f"vector<{v}x{se}>")

    def blocks_per_sm(self) -> int:
        """The blocks an SM is meant to hold: 2 for tiles up to 128 x 128 where no tile
        overhangs the matrix (`.minnctapersm 2`: at most 128 registers a thread at 256
        threads), else 1. Measured with ptxas 13.0 over the four layouts of 2048^3 and
        4 x 1000^3 in TF32 and bf16 at 128 x 128: without edges every kernel fits 128 registers
        unasked (116-128); with edges (bounds checks on the loads) they take 128-138, and
        capped at 128 one spilled 12 bytes. 128 x 256 tiles hold 128 accumulators a thread."""
        if self.BN > 128:
            return 1
        return 1 if (self.m % self.BM or self.n % self.BN or self.k % self.BK) else 2

    def _tile(self, which: str):
        return (("%As", self.as_t, self.BM) if which == "a" else ("%Bs", self.bs_t, self.BN))

    # --- text -------------------------------------------------------------------------------------
    def emit(self) -> str:
        t = self.t = Text()
        el = elem_type(self.dtype)
        self.se = el if self.half else "f32"
        BM, BN, S = self.BM, self.BN, self.stages
        total = self.dynamic_shared_bytes
        a_elems, b_elems = S * BM * self.row_elems, S * BN * self.row_elems
        self.as_t = f"memref<{a_elems}x{self.se}, {SMEM}>"
        self.bs_t = f"memref<{b_elems}x{self.se}, {SMEM}>"
        b, m, n, k = self.batch, self.m, self.n, self.k
        out_t = self.final.type
        args = [f"%a: memref<{b * m * k}x{el}>", f"%b: memref<{b * k * n}x{el}>"]
        args += [f"%e{i}: {memref_type(v.type)}" for i, v in enumerate(self.epi_inputs)]
        args += [f"%out: memref<{max(out_t.size, 1)}x{elem_type(out_t.dtype)}>"]
        occupancy = ", nvvm.minctasm = 2 : i32" if self.blocks_per_sm() == 2 else ""
        dyn, dyn_t = f"@{self.name}_smem", f"memref<0xi8, {SMEM}>"
        bytes_t = f"memref<{total}xi8, {SMEM}>"
        head = "\n".join([
            # Declared 16-byte aligned on purpose: a 1024 here lets LLVM fold the run-time
            # rounding below away, leaving correctness to the driver's placement.
            f"    memref.global \"public\" {dyn} : {dyn_t} {{alignment = 16 : i64}}",
            (f"    gpu.func @{self.name}({', '.join(args)}) kernel attributes "
             f"{{known_block_size = array<i32: {self.threads}, 1, 1>{occupancy}}} {{")])
        t.emit(f"%smem0 = memref.get_global {dyn} : {dyn_t}")
        t.emit(f"%smem = memref.reinterpret_cast %smem0 to offset: [0], sizes: [{total}], "
               f"strides: [1] : {dyn_t} to {bytes_t}")
        # Round the ring's start up to the swizzle atom (descriptors assume base offset 0).
        base = t.op(f"memref.extract_aligned_pointer_as_index %smem : {bytes_t} -> index")
        pad = t.idx("andi", t.idx("subi", t.c(0), base), t.c(ATOM_BYTES - 1))
        t.emit(f"%As = memref.view %smem[{pad}][] : {bytes_t} to {self.as_t}")
        boff = t.idx("addi", pad, t.c(a_elems * self.esize))
        t.emit(f"%Bs = memref.view %smem[{boff}][] : {bytes_t} to {self.bs_t}")
        self._block_coords()
        # Fragment coordinates: warpgroup wg (rows 64 wg), warp w in it, lane l.
        wg = t.idx("divui", self.tid, t.c(128))
        w = t.idx("remui", t.idx("divui", self.tid, t.c(32)), t.c(4))
        lane = t.idx("remui", self.tid, t.c(32))
        self.row_base = t.add(t.mul(wg, 64), t.mul(w, 16), t.idx("divui", lane, t.c(4)))
        self.col_base = t.mul(t.idx("remui", lane, t.c(4)), 2)
        # Descriptor bases (start address >> 4 in the low bits); a slice of stage s, warpgroup
        # wg and K step ks adds (s * rows * 128 + wg * 64 * 128 + ks * 32) >> 4.
        hi = t.c(descriptor_high_bits(), "i64")
        self.desc = {}
        for which, view, view_t in (("a", "%As", self.as_t), ("b", "%Bs", self.bs_t)):
            p = t.op(f"memref.extract_aligned_pointer_as_index {view} : {view_t} -> index")
            p = t.op(f"arith.index_cast {t.idx('shrui', p, t.c(4))} : index to i64")
            self.desc[which] = t.op(f"arith.ori {p}, {hi} : i64")
        wg_off = t.op(f"arith.index_cast {t.mul(wg, 64 * ROW_BYTES // 16)} : index to i64")
        self.desc["a"] = t.op(f"arith.addi {self.desc['a']}, {wg_off} : i64")
        res = self._main_loop()
        self._store([res])
        return "\n".join([head] + t.consts + t.lines + ["      gpu.return", "    }"])

    def _main_loop(self) -> str:
        """The K loop over the ring: slice kt is multiplied from stage kt % S while slices
        kt + 1 .. kt + A (A = S - 1 - inflight) are in flight; one barrier per slice. With
        one wgmma group left in flight (inflight = 1), the barrier of iteration kt follows
        every warpgroup's wait for group kt - 2, so stage (kt - 2) % S is the one rewritten."""
        t = self.t
        S, BK = self.stages, self.BK
        ahead_n = S - 1 - self.inflight
        kt_n = -(-self.k // BK)
        plans = self._plans()
        items = [self._items(p) for p in plans]
        any_async = any(p[7] == "async" for p in plans)
        group = None
        for s in range(ahead_n):  # the prologue: slices 0 .. A - 1
            k0 = t.c(min(s, kt_n - 1) * BK)
            if any_async:
                live = None if s < kt_n else t.c(0, "i1")
                toks = self._copy_async(plans, items, k0, t.c(s), live)
                group = t.op(f"nvgpu.device_async_create_group {', '.join(toks)}")
            self._store_registers(self._load_registers(plans, items, k0), t.c(s))
        zero = t.op(f"llvm.mlir.zero : {self.acc_type}")
        res = t.fresh()
        t.emit(f"{res} = scf.for %kt = {t.c(0)} to {t.c(kt_n)} step {t.c(1)} "
               f"iter_args(%acc = {zero}) -> ({self.acc_type}) {{")
        t.indent += 2
        stage = t.idx("remui", "%kt", t.c(S))
        if any_async:  # slices 0 .. kt + A - 1 committed, so A - 1 may still be in flight
            t.emit(f"nvgpu.device_async_wait {group} {{numGroups = {ahead_n - 1} : i32}}")
        t.emit("nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, "
               "space = #nvvm.shared_space<cta>}")
        t.emit("gpu.barrier")  # slice kt visible to all; the stage of slice kt + A is free
        ahead = t.idx("addi", "%kt", t.c(ahead_n))
        k_next = t.mul(t.idx("minui", ahead, t.c(kt_n - 1)), BK)
        s_next = t.idx("remui", ahead, t.c(S))
        if any_async:
            live = t.op(f"arith.cmpi ult, {ahead}, {t.c(kt_n)} : index")
            toks = self._copy_async(plans, items, k_next, s_next, live)
            t.op(f"nvgpu.device_async_create_group {', '.join(toks)}")
        pending = self._load_registers(plans, items, k_next)
        acc = self._wgmma_slice("%acc", stage)
        self._store_registers(pending, s_next)
        t.emit(f"nvvm.wgmma.wait.group.sync.aligned {self.inflight}")
        t.emit(f"scf.yield {acc} : {self.acc_type}")
        t.indent -= 2
        t.emit("}")
        if self.inflight:
            t.emit("nvvm.wgmma.wait.group.sync.aligned 0")
        if any_async:  # no copy may still be landing when the block exits
            t.emit(f"nvgpu.device_async_wait {group} {{numGroups = 0 : i32}}")
        return res

    def _wgmma_slice(self, acc: str, stage: str) -> str:
        """wgmma.fence, the slice's BK / K wgmma ops on `stage`, commit; returns the result."""
        t = self.t
        t.emit("nvvm.wgmma.fence.aligned")
        da, db = self.desc["a"], self.desc["b"]
        for which, rows in (("a", self.BM), ("b", self.BN)):
            off = t.op(f"arith.index_cast {t.mul(stage, rows * ROW_BYTES // 16)} : index to i64")
            if which == "a":
                da = t.op(f"arith.addi {da}, {off} : i64")
            else:
                db = t.op(f"arith.addi {db}, {off} : i64")
        ty = self.wgmma_type
        for ks in range(self.BK // self.kstep):
            step = t.c(ks * 32 // 16, "i64")
            a = t.op(f"arith.addi {da}, {step} : i64") if ks else da
            b = t.op(f"arith.addi {db}, {step} : i64") if ks else db
            acc = t.op(f"nvvm.wgmma.mma_async {a}, {b}, {acc}, "
                       f"#nvvm.shape<m = 64, n = {self.BN}, k = {self.kstep}>, "
                       f"D [<f32>, #nvvm.wgmma_scale_out<one>], "
                       f"A [<{ty}>, #nvvm.wgmma_scale_in<one>, <row>], "
                       f"B [<{ty}>, #nvvm.wgmma_scale_in<one>, <col>] "
                       f": {self.acc_type} -> {self.acc_type}")
        t.emit("nvvm.wgmma.commit.group.sync.aligned")
        return acc

