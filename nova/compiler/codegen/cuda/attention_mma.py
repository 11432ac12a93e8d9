"""Flash-attention forward on tensor cores (TF32 `mma.sync` m16n8k8) for float32 operands at
matmul precision "tf32": FlashAttention-2's forward (T. Dao, arXiv 2307.08691, Algorithm 1 and
§3.1-3.3: the Q tile split across warps, so no warp exchanges its rows' statistics).

One block of 4 warps per (batch element, tile of 64 query rows); warp w owns rows 16w..16w+15.
Each thread holds its Q fragments (the m16n8k8 A layout, codegen/cuda/mma.py) in registers,
rounded to TF32 once. Key tiles of BKV keys stream through a ring of shared buffers filled by
cp.async (K rows padded to D + 4 floats, V rows to Dv + 8, so fragment reads are conflict-free;
each thread rounds the chunks it copied to TF32 before the block's barrier). Per tile:
- S = Q Kᵀ on tensor cores: BKV/8 accumulator tiles of 16 x 8 per warp (C layout: thread (g, t)
  holds rows g, g + 8 and keys 2t, 2t + 1 of each tile);
- logits and masks exactly as the SIMT kernel (attention.py `logit`), online softmax per row
  with the row max combined over the 4 lanes sharing a row (two xor shuffles); each thread keeps
  a partial row sum l, rescaled with the row's correction and combined across the lanes once at
  the end;
- P (rounded to TF32) goes through a warp-private shared buffer into the A layout, and
  O += P V on tensor cores (O's Dv/8 accumulator tiles stay in registers, rescaled first).
Finally o = O / l and lse = m + log l (o = 0 and lse = -inf for a row that saw no key).

Used when D and Dv are multiples of 8 and at most 128 (Q fragments and O accumulators in
registers), and each key tile splits into whole 16-byte chunks per thread; otherwise the SIMT
kernel runs. The backward stays SIMT in float32: it recomputes P = exp(s - lse) with s in
float32 against the TF32 forward's lse, a difference of the order of TF32's rounding.
"""

from __future__ import annotations

import math

from nova.compiler.codegen.cuda.attention import _Flash

WARPS = 4
THREADS = 32 * WARPS
BQ = 16 * WARPS
MAX_HEAD_DIM = 128
SHARED_LIMIT = 48 * 1024
# (keys per tile, pipeline stages), preferred first.
KV_TILES = ((64, 2), (32, 2), (64, 1), (32, 1), (16, 2), (16, 1))
MMA = ("{mmaShape = [16, 8, 8], tf32Enabled} : (vector<4x1xf32>, vector<2x1xf32>, "
       "vector<2x2xf32>) -> vector<2x2xf32>")


def mma_tiles(d: int, dv: int):
    """(BKV, stages) of the tensor-core forward for head dims d, dv (float32), or None when it
    does not apply (head dims not multiples of 8 or above 128, no tile fitting 48 KiB of shared
    memory with whole 16-byte chunks per thread)."""
    if d % 8 or dv % 8 or d > MAX_HEAD_DIM or dv > MAX_HEAD_DIM:
        return None
    for bkv, stages in KV_TILES:
        smem = 4 * (stages * bkv * ((d + 4) + (dv + 8)) + WARPS * 16 * (bkv + 4))
        chunks_even = (bkv * d // 4) % THREADS == 0 and (bkv * dv // 4) % THREADS == 0
        if smem <= SHARED_LIMIT and chunks_even:
            return bkv, stages
    return None


class FlashMma(_Flash):
    """The tensor-core forward; `forward()` returns the gpu.func text (grid, block, tiles set)."""

    def _round(self, x: str, w: int = 1) -> str:
        """x rounded to TF32 (10 mantissa bits, ties away from zero, as cvt.rna.tf32.f32)."""
        it, ft = (f"vector<{w}xi32>", f"vector<{w}xf32>") if w > 1 else ("i32", "f32")
        cst = (lambda v: self.t.c(f"dense<{v}>", it)) if w > 1 else (lambda v: self.t.c(v, "i32"))
        bits = self.op(f"arith.bitcast {x} : {ft} to {it}")
        bits = self.op(f"arith.addi {bits}, {cst(0x1000)} : {it}")
        bits = self.op(f"arith.andi {bits}, {cst(-0x2000)} : {it}")
        return self.op(f"arith.bitcast {bits} : {it} to {ft}")

    def _copy_tile(self, role: str, smem: str, smt: str, stage: str, row0: str, dim: int,
                   chunks: list) -> list:
        """cp.async of this thread's 16-byte chunks of rows row0.. of K or V into `stage`
        (zero-filled past Tk); returns the tokens."""
        toks = []
        for e in chunks:
            row = self.i("divui", e, dim // 4)
            col = self.mul(self.i("remui", e, dim // 4), 4)
            g = self.add(row0, row)
            ok = self.cmpi("ult", g, self.ci(self.tk))
            at = self.add(self.mul(self.add(self.mul(self.nb, self.tk), g), dim), col)
            at = self.select_index(ok, at)
            n = self.op(f"arith.select {ok}, {self.ci(4)}, {self.ci(0)} : index")
            toks.append(self.op(
                f"nvgpu.device_async_copy {self.mem[role]}[{at}], {smem}[{stage}, {row}, {col}], "
                f"4, {n} {{bypassL1}} : {self.mt[role]} to {smt}"))
        return toks

    def select_index(self, ok: str, at: str) -> str:
        return self.op(f"arith.select {ok}, {at}, {self.ci(0)} : index")

    def _issue(self, tile: str, stage: str) -> str:
        """Copies of key tile `tile` (K and V) into `stage`, committed as one group."""
        j0 = self.mul(tile, self.bkv)
        toks = self._copy_tile("k", "%Ks", self.ks, stage, j0, self.d, self.k_chunks)
        toks += self._copy_tile("v", "%Vs", self.vs, stage, j0, self.dv, self.v_chunks)
        return self.op(f"nvgpu.device_async_create_group {', '.join(toks)}")

    def _round_landed(self, stage: str) -> None:
        """This thread's landed chunks of both tiles rounded to TF32 in place."""
        for smem, smt, dim, chunks in (("%Ks", self.ks, self.d, self.k_chunks),
                                       ("%Vs", self.vs, self.dv, self.v_chunks)):
            for e in chunks:
                row = self.i("divui", e, dim // 4)
                col = self.mul(self.i("remui", e, dim // 4), 4)
                at = f"{smem}[{stage}, {row}, {col}]"
                x = self.op(f"vector.load {at} {{alignment = 16}} : {smt}, vector<4xf32>")
                self.emit(f"vector.store {self._round(x, 4)}, {at} {{alignment = 16}} : {smt}, "
                          "vector<4xf32>")

    def forward(self) -> str:
        self.bkv, stages = mma_tiles(self.d, self.dv)
        bkv, d, dv, tq, tk = self.bkv, self.d, self.dv, self.tq, self.tk
        self.ks = self.shared("Ks", stages, bkv, d + 4)
        self.vs = self.shared("Vs", stages, bkv, dv + 8)
        ps = self.shared("Ps", WARPS, 16, bkv + 4)
        nqt = -(-tq // BQ)
        bid, tid = self.op("gpu.block_id x"), self.op("gpu.thread_id x")
        self.nb = n = self.i("divui", bid, nqt)
        # Query tiles in reverse order: under a causal mask the last tiles are the longest.
        i0 = self.mul(self.i("subi", self.ci(nqt - 1), self.i("remui", bid, nqt)), BQ)
        warp, lane = self.i("divui", tid, 32), self.i("remui", tid, 32)
        g, t4 = self.i("divui", lane, 4), self.i("remui", lane, 4)
        rows = [self.add(i0, self.mul(warp, 16), g)]
        rows.append(self.add(rows[0], 8))
        two_t = self.mul(t4, 2)
        self.k_chunks = [self.add(tid, u * THREADS) for u in range(bkv * d // 4 // THREADS)]
        self.v_chunks = [self.add(tid, u * THREADS) for u in range(bkv * dv // 4 // THREADS)]
        # Q fragments, TF32, zero past Tq.
        qf = []
        for kd in range(d // 8):
            c0 = self.add(t4, kd * 8)
            vals = []
            for row, col in ((rows[0], c0), (rows[1], c0), (rows[0], self.add(c0, 4)),
                             (rows[1], self.add(c0, 4))):
                ok = self.cmpi("ult", row, self.ci(tq))
                at = self.add(self.mul(self.add(self.mul(n, tq), self.i("minui", row, tq - 1)),
                                       d), col)
                x = self.load(self.mem["q"], at, self.mt["q"], 1)
                vals.append(self._round(self.select(ok, x, self.cf(0.0))))
            qf.append(self.op(f"vector.from_elements {', '.join(vals)} : vector<4x1xf32>"))
        if self.kind == "causal":  # key tiles past the block's last row are fully masked
            kend = self.i("minui", self.add(i0, BQ), tk)
            nkt = self.i("divui", self.add(kend, bkv - 1), bkv)
        else:
            nkt = self.ci(-(-tk // bkv))
        last = self.i("subi", self.i("maxui", nkt, 1), 1)
        group = None
        for s in range(stages - 1):
            group = self._issue(self.i("minui", self.ci(s), last), self.ci(s))
        acc_t = "vector<2x2xf32>"
        nd = dv // 8
        zero = self.t.c("dense<0.0>", acc_t)
        types = ["f32"] * 4 + [acc_t] * nd
        inits = [self.cf(-math.inf)] * 2 + [self.cf(0.0)] * 2 + [zero] * nd
        kt, carried, res = self.open_for(self.ci(0), nkt, inits, types)
        m, l_, o = carried[0:2], carried[2:4], carried[4:]
        if stages == 1:
            stage = self.ci(0)
            self.emit("gpu.barrier")  # the previous tile is no longer read
            group = self._issue(kt, stage)
            self.emit(f"nvgpu.device_async_wait {group} {{numGroups = 0 : i32}}")
        else:
            stage = self.i("remui", kt, stages)
            self.emit(f"nvgpu.device_async_wait {group} {{numGroups = {stages - 2} : i32}}")
        self._round_landed(stage)
        self.emit("gpu.barrier")  # tile kt visible to all; the buffer of tile kt - 1 is free
        if stages > 1:
            ahead = self.add(kt, stages - 1)
            self._issue(self.i("minui", ahead, last), self.i("remui", ahead, stages))
        j0 = self.mul(kt, bkv)
        # S = Q K^T: one 16 x 8 accumulator tile per 8 keys.
        scores = []
        for nt in range(bkv // 8):
            key = self.add(g, nt * 8)
            acc = zero
            for kd in range(d // 8):
                c0 = self.add(t4, kd * 8)
                b = [self.op(f"memref.load %Ks[{stage}, {key}, {c}] : {self.ks}")
                     for c in (c0, self.add(c0, 4))]
                bf = self.op(f"vector.from_elements {', '.join(b)} : vector<2x1xf32>")
                acc = self.op(f"nvgpu.mma.sync ({qf[kd]}, {bf}, {acc}) {MMA}")
            scores.append(acc)
        # Logits, row maxima over the 4 lanes of a row, online softmax.
        s = [[], []]
        for nt, acc in enumerate(scores):
            for h in range(2):
                for c in range(2):
                    x = self.op(f"vector.extract {acc}[{h}, {c}] : f32 from {acc_t}")
                    j = self.add(j0, nt * 8 + c, two_t)
                    s[h].append(self.logit(x, rows[h], j)[0])
        m_new, corr, l_new, safe = [], [], [], []
        for h in range(2):
            mx = s[h][0]
            for x in s[h][1:]:
                mx = self.f("maximumf", mx, x)
            for off in (1, 2):
                mx = self.f("maximumf", mx, self.shuffle(mx, off))
            mn = self.f("maximumf", m[h], mx)
            dead = self.cmpf("oeq", mn, self.cf(-math.inf))
            ms = self.select(dead, self.cf(0.0), mn)
            m_new.append(mn)
            safe.append(ms)
            corr.append(self.exp(self.f("subf", m[h], ms)))
        for h in range(2):
            total = self.f("mulf", l_[h], corr[h])
            prow = self.add(g, 8 * h)
            for nt in range(bkv // 8):
                p = [self.exp(self.f("subf", s[h][2 * nt + c], safe[h])) for c in range(2)]
                for x in p:
                    total = self.f("addf", total, x)
                pv = self._round(self.op(f"vector.from_elements {p[0]}, {p[1]} : vector<2xf32>"),
                                 2)
                col = self.add(two_t, nt * 8)
                self.emit(f"vector.store {pv}, %Ps[{warp}, {prow}, {col}] {{alignment = 8}} : "
                          f"{ps}, vector<2xf32>")
            l_new.append(total)
        self.emit("gpu.barrier")  # each warp's P is complete
        scale = self.op(f"vector.from_elements {corr[0]}, {corr[0]}, {corr[1]}, {corr[1]} : "
                        f"{acc_t}")
        o = [self.op(f"arith.mulf {x}, {scale} : {acc_t}") for x in o]
        for kk in range(bkv // 8):
            c0 = self.add(t4, kk * 8)
            c4 = self.add(c0, 4)
            a = [self.op(f"memref.load %Ps[{warp}, {r}, {c}] : {ps}")
                 for r, c in ((g, c0), (self.add(g, 8), c0), (g, c4), (self.add(g, 8), c4))]
            af = self.op(f"vector.from_elements {', '.join(a)} : vector<4x1xf32>")
            for q in range(nd):
                col = self.add(g, q * 8)
                b = [self.op(f"memref.load %Vs[{stage}, {r}, {col}] : {self.vs}")
                     for r in (c0, c4)]
                bf = self.op(f"vector.from_elements {', '.join(b)} : vector<2x1xf32>")
                o[q] = self.op(f"nvgpu.mma.sync ({af}, {bf}, {o[q]}) {MMA}")
        out = self.close_for(m_new + l_new + o, types, res)
        m, l_, o = out[0:2], out[2:4], out[4:]
        if stages > 1:  # no copy may still be landing when the block exits
            self.emit(f"nvgpu.device_async_wait {group} {{numGroups = 0 : i32}}")
        self._finish(n, rows, t4, two_t, m, l_, o)
        self.grid, self.block = (self.n * nqt, 1, 1), (THREADS, 1, 1)
        self.tiles = (BQ, bkv)
        return self._text(THREADS)

    def _finish(self, n, rows, t4, two_t, m, l_, o) -> None:
        """o = O / l and lse = m + log l per row (0 and -inf for a row that saw no key)."""
        tq, dv = self.tq, self.dv
        acc_t = "vector<2x2xf32>"
        for h in range(2):
            total = l_[h]
            for off in (1, 2):
                total = self.f("addf", total, self.shuffle(total, off))
            live = self.cmpf("ogt", total, self.cf(0.0))
            inv = self.select(live, self.f("divf", self.cf(1.0), total), self.cf(0.0))
            in_range = self.cmpi("ult", rows[h], self.ci(tq))
            row = self.add(self.mul(n, tq), rows[h])
            if "o" in self.mem:
                self.open_if(in_range)
                inv2 = self.op(f"vector.broadcast {inv} : f32 to vector<2xf32>")
                for q, acc in enumerate(o):
                    pair = self.op(f"vector.extract {acc}[{h}] : vector<2xf32> from {acc_t}")
                    val = self.op(f"arith.mulf {pair}, {inv2} : vector<2xf32>")
                    at = self.add(self.mul(row, dv), two_t, q * 8)
                    self.emit(f"vector.store {val}, {self.mem['o']}[{at}] {{alignment = 8}} : "
                              f"{self.mt['o']}, vector<2xf32>")
                self.close_if(in_range)
            if "lse" in self.mem:
                logl = self.op(f"math.log {self.select(live, total, self.cf(1.0))} : f32")
                lse = self.select(live, self.f("addf", m[h], logl), self.cf(-math.inf))
                first = self.and_(in_range, self.cmpi("eq", t4, self.ci(0)))
                self.open_if(first)
                self.store(lse, self.mem["lse"], row, self.mt["lse"], 1)
                self.close_if(first)
