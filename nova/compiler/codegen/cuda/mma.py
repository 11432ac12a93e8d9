"""The GEMM inner schedules over shared-memory tiles: tensor-core TF32, tensor-core f16/bf16, and
SIMT FMA.

- MmaSchedule: warps in a WM x WN grid, each owning a (BM/WM) x (BN/WN) warp tile of m16n8k8
  `nvgpu.mma.sync` ops. Fragments follow the PTX ISA tables for m16n8k8 .tf32 (g = lane / 4,
  t = lane % 4): A a0..a3 at (g, t), (g+8, t), (g, t+4), (g+8, t+4); B b0, b1 at (t, g),
  (t+4, g); C c0..c3 at (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1) -- nvgpu passes the vector
  elements in row-major order as those registers (pinned by a test).
- HalfMmaSchedule: the same warp grid of m16n8k16 `nvvm.mma.sync` ops on float16 or bfloat16
  operands with float32 accumulators (nvgpu's mma.sync cannot deduce bf16, so NVVM's op is used
  for both). PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type": each 32-bit
  register holds two consecutive k elements, the lower k in the low half. A registers a0..a3 at
  row g (a0, a2) or g + 8 (a1, a3), k = 2t, 2t + 1 (a0, a1) or 2t + 8, 2t + 9 (a2, a3); B b0, b1
  at column g, k = 2t, 2t + 1 and 2t + 8, 2t + 9; C as above.
- SimtSchedule: 16 x 16 threads, each a 4 x 4 register tile at rows ty + 16r, columns tx + 16c
  (conflict-free shared-memory reads), FMA in the compute type.

The tensor-core schedules keep each tile in shared memory in its operand's memory order (k or the
free dimension innermost), so staging never transposes and cp.async can copy it (matmul.py).
Their fragments come from `ldmatrix` (PTX ISA: lanes 8i .. 8i + 7 address the 16-byte rows of
8x8 matrix i; lane L receives row L / 4, 32-bit word L % 4): one .x4 per 16-row A tile and per
pair of 8-column B tiles where k is the tile's inner dimension (the tf32 elements move as b16
pairs), `.trans` for 16-bit tiles with k outer (lane L then receives the k pair 2 (L % 4),
2 (L % 4) + 1 of column L / 4); tf32 tiles with k outer are read element by element.

All three expose: thread_coords() (before the k loop), init_accs(), steps(accs) (one BK slice),
and elements(finals) -> (accumulator scalar, row in tile, column in tile) for the epilogue.
"""

from __future__ import annotations

from nova.compiler.codegen.builder import elem_type


class MmaSchedule:
    pairs = True  # elements() yields adjacent columns (c even, c + 1) one after the other
    def thread_coords(self) -> None:
        t = self.t
        warp = t.idx("divui", self.tid, t.c(32))
        lane = t.idx("remui", self.tid, t.c(32))
        self.wtm, self.wtn = self.BM // self.WM, self.BN // self.WN  # warp tile
        self.wm0 = t.mul(t.idx("divui", warp, t.c(self.WN)), self.wtm)
        self.wn0 = t.mul(t.idx("remui", warp, t.c(self.WN)), self.wtn)
        self.g = t.idx("divui", lane, t.c(4))
        self.tt = t.idx("remui", lane, t.c(4))
        self.MI, self.NI = self.wtm // 16, self.wtn // 8
        # ldmatrix row addresses (PTX ISA, ldmatrix: lanes 8i .. 8i + 7 give the rows of 8x8
        # matrix i): l8 = lane % 8, q1 = lane / 8 % 2 and q2 = lane / 16 select the 8-row and
        # 16-byte halves a matrix covers.
        self.l8 = t.idx("remui", lane, t.c(8))
        self.q1 = t.idx("remui", t.idx("divui", lane, t.c(8)), t.c(2))
        self.q2 = t.idx("divui", lane, t.c(16))

    def init_accs(self) -> list:
        self.acc_type = "vector<2x2xf32>"
        return [self.t.c("dense<0.0>", "vector<2x2xf32>")] * (self.MI * self.NI)

    def ldmatrix(self, which: str, free: str, k: str, tiles: int, trans: bool, res: str) -> str:
        """nvgpu.ldmatrix (ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16) of tile `which`,
        this lane's row address at (free, k)."""
        smem, mt = ("%As", self.as_t) if which == "a" else ("%Bs", self.bs_t)
        at = self.smem_index(which, k, free, self.stage)
        return self.t.op(f"nvgpu.ldmatrix {smem}[{at}] {{numTiles = {tiles} : i32, transpose = "
                         f"{'true' if trans else 'false'}}} : {mt} -> {res}")

    def steps(self, accs: list) -> list:
        t = self.t
        accs = list(accs)
        for ks in range(self.BK // 8):
            c0 = t.add(self.tt, t.c(ks * 8)) if ks else self.tt
            c1 = t.add(c0, t.c(4))
            fa = []
            for mi in range(self.MI):
                if self.smem_a_ik:  # As[m][k]: one ldmatrix.x4 (32-bit elements as b16 pairs)
                    row = t.add(self.wm0, t.c(mi * 16), self.l8, t.mul(self.q1, 8))
                    col = t.add(t.mul(self.q2, 4), t.c(ks * 8))
                    fa.append(MmaSchedule.ldmatrix(self, "a", row, col, 4, False,
                                                   "vector<4x1xf32>"))
                    continue
                r0 = t.add(self.wm0, t.c(mi * 16), self.g)
                r1 = t.add(r0, t.c(8))
                vals = [t.op(f"memref.load %As[{self.smem_index('a', c, r, self.stage)}] : "
                             f"{self.as_t}") for r, c in ((r0, c0), (r1, c0), (r0, c1), (r1, c1))]
                fa.append(t.op(f"vector.from_elements {', '.join(vals)} : vector<4x1xf32>"))
            fb = []
            for ni in range(self.NI):
                if self.smem_b_jk and ni % 2 == 0 and ni + 1 < self.NI:
                    # Bs[n][k]: one ldmatrix.x4 gives b0, b1 of two 8-column tiles.
                    row = t.add(self.wn0, t.c(ni * 8), self.l8, t.mul(self.q2, 8))
                    col = t.add(t.mul(self.q1, 4), t.c(ks * 8))
                    v = MmaSchedule.ldmatrix(self, "b", row, col, 4, False, "vector<4x1xf32>")
                    for h in range(2):
                        parts = [t.op(f"vector.extract {v}[{2 * h + j}, 0] : f32 from "
                                      "vector<4x1xf32>") for j in range(2)]
                        fb.append(t.op(f"vector.from_elements {', '.join(parts)} : "
                                       "vector<2x1xf32>"))
                    continue
                if len(fb) > ni:
                    continue
                col = t.add(self.wn0, t.c(ni * 8), self.g)
                vals = [t.op(f"memref.load %Bs[{self.smem_index('b', kr, col, self.stage)}] : "
                             f"{self.bs_t}") for kr in (c0, c1)]
                fb.append(t.op(f"vector.from_elements {', '.join(vals)} : vector<2x1xf32>"))
            for mi in range(self.MI):
                for ni in range(self.NI):
                    i = self.NI * mi + ni
                    accs[i] = t.op(
                        f"nvgpu.mma.sync ({fa[mi]}, {fb[ni]}, {accs[i]}) {{mmaShape = [16, 8, 8], "
                        f"tf32Enabled}} : (vector<4x1xf32>, vector<2x1xf32>, vector<2x2xf32>) -> "
                        "vector<2x2xf32>")
        return accs

    def elements(self, finals: list):
        t = self.t
        two_t = t.mul(self.tt, 2)
        for mi in range(self.MI):
            for ni in range(self.NI):
                acc = finals[self.NI * mi + ni]
                for h in range(2):
                    row = t.add(self.wm0, t.c(mi * 16 + 8 * h), self.g)
                    for c in range(2):
                        col = t.add(self.wn0, t.c(ni * 8 + c), two_t)
                        v = t.op(f"vector.extract {acc}[{h}, {c}] : f32 from vector<2x2xf32>")
                        yield v, row, col


class SimtSchedule:
    def thread_coords(self) -> None:
        t = self.t
        tx = t.idx("remui", self.tid, t.c(16))
        ty = t.idx("divui", self.tid, t.c(16))
        self.simt_rows = [t.add(ty, t.c(16 * r)) if r else ty for r in range(4)]
        self.simt_cols = [t.add(tx, t.c(16 * c)) if c else tx for c in range(4)]

    def init_accs(self) -> list:
        self.acc_type = elem_type(self.ct)
        return [self.t.c("0.0", self.acc_type)] * 16

    def steps(self, accs: list) -> list:
        t = self.t
        accs = list(accs)
        for kk in range(self.BK):
            a = [t.op(f"memref.load %As[{self.smem_index('a', t.c(kk), r, self.stage)}] : "
                      f"{self.as_t}") for r in self.simt_rows]
            b = [t.op(f"memref.load %Bs[{self.smem_index('b', t.c(kk), c, self.stage)}] : "
                      f"{self.bs_t}") for c in self.simt_cols]
            for r in range(4):
                for c in range(4):
                    i = 4 * r + c
                    accs[i] = t.op(f"math.fma {a[r]}, {b[c]}, {accs[i]} : {self.acc_type}")
        return accs

    def elements(self, finals: list):
        for r in range(4):
            for c in range(4):
                yield finals[4 * r + c], self.simt_rows[r], self.simt_cols[c]


class HalfMmaSchedule(MmaSchedule):
    """m16n8k16 tensor-core steps for float16 / bfloat16 operands (see the module docstring)."""

    def init_accs(self) -> list:
        self.acc_type = "f32"
        return [self.t.c("0.0", "f32")] * (4 * self.MI * self.NI)

    def _word(self, v: str, i: int) -> str:
        """Register i of an ldmatrix result (two 16-bit values) as the mma operand type."""
        t = self.t
        se = self.se
        pair = t.op(f"vector.extract {v}[{i}] : vector<2x{se}> from vector<4x2x{se}>")
        word = t.op(f"vector.bitcast {pair} : vector<2x{se}> to vector<1xi32>")
        reg = t.op(f"vector.extract {word}[0] : i32 from vector<1xi32>")
        if self.mma_type == "f16":
            reg = t.op(f"llvm.bitcast {reg} : i32 to vector<2xf16>")
        return reg

    def steps(self, accs: list) -> list:
        t = self.t
        accs = list(accs)
        opt = "vector<2xf16>" if self.mma_type == "f16" else "i32"
        struct = "!llvm.struct<(f32, f32, f32, f32)>"
        assert self.NI % 2 == 0, "B tiles are loaded in pairs (warp tiles 32 columns wide)"
        for ks in range(self.BK // 16):
            # ldmatrix.x4 per A tile and per pair of B tiles; .trans where k is not the tile's
            # inner dimension (each lane then gets the k pair of its row or column).
            res = f"vector<4x2x{self.se}>"
            fa = []
            for mi in range(self.MI):
                m0 = t.add(self.wm0, t.c(mi * 16))
                if self.smem_a_ik:
                    v = MmaSchedule.ldmatrix(self, "a", t.add(m0, self.l8, t.mul(self.q1, 8)),
                                             t.add(t.mul(self.q2, 8), t.c(ks * 16)), 4, False, res)
                else:
                    v = MmaSchedule.ldmatrix(self, "a", t.add(m0, t.mul(self.q1, 8)),
                                             t.add(self.l8, t.mul(self.q2, 8), t.c(ks * 16)), 4,
                                             True, res)
                fa.append([HalfMmaSchedule._word(self, v, i) for i in range(4)])
            fb = []
            for ni in range(0, self.NI, 2):
                n0 = t.add(self.wn0, t.c(ni * 8))
                if self.smem_b_jk:
                    v = MmaSchedule.ldmatrix(self, "b", t.add(n0, self.l8, t.mul(self.q2, 8)),
                                             t.add(t.mul(self.q1, 8), t.c(ks * 16)), 4, False, res)
                else:
                    v = MmaSchedule.ldmatrix(self, "b", t.add(n0, t.mul(self.q2, 8)),
                                             t.add(self.l8, t.mul(self.q1, 8), t.c(ks * 16)), 4,
                                             True, res)
                words = [HalfMmaSchedule._word(self, v, i) for i in range(4)]
                fb += [words[:2], words[2:]]
            for mi in range(self.MI):
                for ni in range(self.NI):
                    i = 4 * (self.NI * mi + ni)
                    d = t.op(
                        f"nvvm.mma.sync A[{', '.join(fa[mi])}] B[{', '.join(fb[ni])}] "
                        f"C[{', '.join(accs[i:i + 4])}] {{layoutA = #nvvm.mma_layout<row>, "
                        "layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = "
                        f"#nvvm.mma_type<{self.mma_type}>, multiplicandBPtxType = "
                        f"#nvvm.mma_type<{self.mma_type}>, shape = #nvvm.shape<m = 16, n = 8, "
                        f"k = 16>}} : ({opt}, {opt}, f32) -> {struct}")
                    for j in range(4):
                        accs[i + j] = t.op(f"llvm.extractvalue {d}[{j}] : {struct}")
        return accs

    def elements(self, finals: list):
        t = self.t
        two_t = t.mul(self.tt, 2)
        for mi in range(self.MI):
            for ni in range(self.NI):
                for j in range(4):
                    row = t.add(self.wm0, t.c(mi * 16 + 8 * (j // 2)), self.g)
                    col = t.add(self.wn0, t.c(ni * 8 + j % 2), two_t)
                    yield finals[4 * (self.NI * mi + ni) + j], row, col
