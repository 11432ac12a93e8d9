"""The two GEMM inner schedules over shared-memory tiles: tensor-core TF32 and SIMT FMA.

- MmaSchedule: warps in a WM x WN grid, each owning a (BM/WM) x (BN/WN) warp tile of m16n8k8
  `nvgpu.mma.sync` ops. Fragments follow the PTX ISA tables for m16n8k8 .tf32 (g = lane / 4,
  t = lane % 4): A a0..a3 at (g, t), (g+8, t), (g, t+4), (g+8, t+4); B b0, b1 at (t, g),
  (t+4, g); C c0..c3 at (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1) -- nvgpu passes the vector
  elements in row-major order as those registers (pinned by a test).
- SimtSchedule: 16 x 16 threads, each a 4 x 4 register tile at rows ty + 16r, columns tx + 16c
  (conflict-free shared-memory reads), FMA in the compute type.

Both expose: thread_coords() (before the k loop), init_accs(), steps(accs) (one BK slice), and
elements(finals) -> (accumulator scalar, row in tile, column in tile) for the epilogue.
"""

from __future__ import annotations

from nova.compiler.codegen.builder import elem_type


class MmaSchedule:
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

    def init_accs(self) -> list:
        self.acc_type = "vector<2x2xf32>"
        return [self.t.c("dense<0.0>", "vector<2x2xf32>")] * (self.MI * self.NI)

    def steps(self, accs: list) -> list:
        t = self.t
        accs = list(accs)
        for ks in range(self.BK // 8):
            c0 = t.add(self.tt, t.c(ks * 8)) if ks else self.tt
            c1 = t.add(c0, t.c(4))
            fa = []
            for mi in range(self.MI):
                r0 = t.add(self.wm0, t.c(mi * 16), self.g)
                r1 = t.add(r0, t.c(8))
                vals = [t.op(f"memref.load %As[{r}, {c}] : {self.as_t}")
                        for r, c in ((r0, c0), (r1, c0), (r0, c1), (r1, c1))]
                fa.append(t.op(f"vector.from_elements {', '.join(vals)} : vector<4x1xf32>"))
            fb = []
            for ni in range(self.NI):
                col = t.add(self.wn0, t.c(ni * 8), self.g)
                vals = [t.op(f"memref.load %Bs[{kr}, {col}] : {self.bs_t}") for kr in (c0, c1)]
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
            a = [t.op(f"memref.load %As[{t.c(kk)}, {r}] : {self.as_t}") for r in self.simt_rows]
            b = [t.op(f"memref.load %Bs[{t.c(kk)}, {c}] : {self.bs_t}") for c in self.simt_cols]
            for r in range(4):
                for c in range(4):
                    i = 4 * r + c
                    accs[i] = t.op(f"math.fma {a[r]}, {b[c]}, {accs[i]} : {self.acc_type}")
        return accs

    def elements(self, finals: list):
        for r in range(4):
            for c in range(4):
                yield finals[4 * r + c], self.simt_rows[r], self.simt_cols[c]
