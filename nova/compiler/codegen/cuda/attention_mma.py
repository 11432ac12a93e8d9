"""Flash attention on tensor cores (TF32 `mma.sync` m16n8k8) for float32 operands at matmul
precision "tf32": FlashAttention-2's forward and backward (T. Dao, arXiv 2307.08691, Algorithms
1 and 2, §3.1-3.3: tiles split across warps so that no warp exchanges its rows' statistics).

One block of 4 warps per (batch element, tile of 64 query rows); warp w owns rows 16w..16w+15.
Each thread holds its Q fragments (the m16n8k8 A layout, codegen/cuda/mma.py) in registers,
rounded to TF32 once. Key tiles of BKV keys stream through a ring of shared buffers filled by
cp.async (K rows padded to D + 4 floats, V rows to 8 (mod 16) floats, `v_row`, so the
fragment reads of both are conflict-free;
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

The forward is used when D and Dv are multiples of 8 and at most 128 (Q fragments and O
accumulators in registers), and each key tile splits into whole 16-byte chunks per thread.

Backward: one block of 4 warps per (batch element, tile of 64 keys); warp w owns keys
16w..16w+15, their K and V rows as A fragments in registers, and their dK and dV accumulators.
K is also kept in shared memory (rows D + 8) for dQ. Per tile of 32 query rows (causal: from the
tile holding the block's first key), Q and dO arrive by cp.async (rows D + 4, Dv + 4) with lse
and delta, then per warp: S^T = K Q^T and dP^T = V dO^T on tensor cores (16 keys x 32 queries),
P^T = exp(s - lse) and dS^T = P^T (dP^T - delta) per element (masks as the SIMT kernel), P^T
through the warp's rows of a shared buffer into dV += P^T dO, then dS^T through the same buffer
into dK += dS^T Q; after a barrier, dQ += dS K for the tile: warp w takes 16 query rows and half
of D's 8-column tiles (A = dS^T read transposed from the buffer, B = K) and adds its tiles into
dq with atomics (dq zero-filled by a launch before). Used when D and Dv are multiples of 16
whose tiles fit 48 KiB of shared memory (D = Dv = 64: 45 KiB) and split into whole chunks;
otherwise the SIMT backward runs (float32, against this forward's lse: a difference of the
order of TF32's rounding).
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


# Backward: keys per block (16 per warp) and query rows per step.
BKV_BWD, BQ_BWD = 64, 32


def mma_backward_fits(d: int, dv: int) -> bool:
    """Whether the tensor-core backward applies to head dims d, dv (float32): multiples of 16
    (dQ's warps split D's 8-column tiles in two; whole 16-byte chunks per thread), at most 128,
    whose tiles fit 48 KiB of shared memory (Q and dO tiles, the P/dS buffer, K for dQ)."""
    if d % 8 or dv % 8 or d > MAX_HEAD_DIM or dv > MAX_HEAD_DIM:
        return False
    smem = 4 * (BQ_BWD * (d + 4) + BQ_BWD * (dv + 4) + BKV_BWD * (BQ_BWD + 4)
                + BKV_BWD * (d + 8) + 2 * BQ_BWD)
    chunks = all((rows * dim // 4) % THREADS == 0
                 for rows, dim in ((BQ_BWD, d), (BQ_BWD, dv), (BKV_BWD, d)))
    return smem <= SHARED_LIMIT and chunks and (d // 8) % (WARPS // (BQ_BWD // 16)) == 0


def v_row(dv: int) -> int:
    """Floats per row of the forward's V tile: 8 (mod 16), so the B-fragment reads (rows t,
    t + 4 of column g) fall in 32 distinct banks (a row length of 0 (mod 16) conflicts)."""
    return dv + 8 if dv % 16 == 0 else dv


def mma_tiles(d: int, dv: int):
    """(BKV, stages) of the tensor-core forward for head dims d, dv (float32), or None when it
    does not apply (head dims not multiples of 8 or above 128, no tile fitting 48 KiB of shared
    memory with whole 16-byte chunks per thread)."""
    if d % 8 or dv % 8 or d > MAX_HEAD_DIM or dv > MAX_HEAD_DIM:
        return None
    for bkv, stages in KV_TILES:
        smem = 4 * (stages * bkv * ((d + 4) + v_row(dv)) + WARPS * 16 * (bkv + 4))
        chunks_even = (bkv * d // 4) % THREADS == 0 and (bkv * dv // 4) % THREADS == 0
        if smem <= SHARED_LIMIT and chunks_even:
            return bkv, stages
    return None


class FlashMma(_Flash):
    """The tensor-core forward; `forward()` returns the gpu.func text (grid, block, tiles set)."""

    def _copy_tile(self, role: str, smem: str, smt: str, stage: str, row0: str, dim: int,
                   chunks: list, live: str | None = None) -> list:
        """cp.async of this thread's 16-byte chunks of rows row0.. of K or V into `stage`
        (zero-filled past Tk, and wholly when the i1 `live` is false: a tile past the last,
        never read); returns the tokens."""
        toks = []
        for e in chunks:
            row = self.i("divui", e, dim // 4)
            col = self.mul(self.i("remui", e, dim // 4), 4)
            g = self.add(row0, row)
            ok = self.cmpi("ult", g, self.ci(self.tk))
            if live is not None:
                ok = self.and_(ok, live)
            at = self.add(self.mul(self.add(self.mul(self.nb, self.tk), g), dim), col)
            at = self.select_index(ok, at)
            n = self.op(f"arith.select {ok}, {self.ci(4)}, {self.ci(0)} : index")
            toks.append(self.op(
                f"nvgpu.device_async_copy {self.mem[role]}[{at}], {smem}[{stage}, {row}, {col}], "
                f"4, {n} {{bypassL1}} : {self.mt[role]} to {smt}"))
        return toks

    def select_index(self, ok: str, at: str) -> str:
        return self.op(f"arith.select {ok}, {at}, {self.ci(0)} : index")

    def _issue(self, tile: str, stage: str, live: str | None = None) -> str:
        """Copies of key tile `tile` (K and V) into `stage`, committed as one group (zero-fill
        only when the i1 `live` is false)."""
        j0 = self.mul(tile, self.bkv)
        toks = self._copy_tile("k", "%Ks", self.ks, stage, j0, self.d, self.k_chunks, live)
        toks += self._copy_tile("v", "%Vs", self.vs, stage, j0, self.dv, self.v_chunks, live)
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
                self.emit(f"vector.store {self.tf32_round(x, 4)}, {at} {{alignment = 16}} : {smt}, "
                          "vector<4xf32>")

    def forward(self) -> str:
        self.bkv, stages = mma_tiles(self.d, self.dv)
        bkv, d, dv, tq, tk = self.bkv, self.d, self.dv, self.tq, self.tk
        self.ks = self.shared("Ks", stages, bkv, d + 4)
        self.vs = self.shared("Vs", stages, bkv, v_row(dv))
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
                vals.append(self.tf32_round(self.select(ok, x, self.cf(0.0))))
            qf.append(self.op(f"vector.from_elements {', '.join(vals)} : vector<4x1xf32>"))
        if self.kind == "causal":  # key tiles past the block's last row are fully masked
            kend = self.i("minui", self.add(i0, BQ), tk)
            nkt = self.i("divui", self.add(kend, bkv - 1), bkv)
        else:
            nkt = self.ci(-(-tk // bkv))
        last = self.i("subi", self.i("maxui", nkt, 1), 1)
        group = None
        for s in range(stages - 1):
            live = self.cmpi("ult", self.ci(s), nkt)
            group = self._issue(self.i("minui", self.ci(s), last), self.ci(s), live)
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
            self._issue(self.i("minui", ahead, last), self.i("remui", ahead, stages),
                        self.cmpi("ult", ahead, nkt))
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
                pair = self.op(f"vector.from_elements {p[0]}, {p[1]} : vector<2xf32>")
                pv = self.tf32_round(pair, 2)
                col = self.add(two_t, nt * 8)
                self.emit(f"vector.store {pv}, %Ps[{warp}, {prow}, {col}] {{alignment = 8}} : "
                          f"{ps}, vector<2xf32>")
            l_new.append(total)
        self.emit(f"nvvm.bar.warp.sync {self.t.c(-1, 'i32')} : i32")  # the warp's P is complete
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

    # --- backward -------------------------------------------------------------------------------
    def _frags(self, role: str, rows: list, dim: int, rows_total: int) -> list:
        """A-operand fragments (TF32, zero past rows_total) of a warp's 16 rows of operand
        `role` (K or V of this block), one vector<4x1xf32> per 8 columns."""
        out = []
        for kd in range(dim // 8):
            c0 = self.add(self.t4, kd * 8)
            vals = []
            for row, col in ((rows[0], c0), (rows[1], c0), (rows[0], self.add(c0, 4)),
                             (rows[1], self.add(c0, 4))):
                ok = self.cmpi("ult", row, self.ci(rows_total))
                at = self.add(self.mul(self.add(self.mul(self.nb, rows_total),
                                                self.i("minui", row, rows_total - 1)), dim), col)
                x = self.load(self.mem[role], at, self.mt[role], 1)
                vals.append(self.tf32_round(self.select(ok, x, self.cf(0.0))))
            out.append(self.op(f"vector.from_elements {', '.join(vals)} : vector<4x1xf32>"))
        return out

    def _copy_rows(self, role: str, smem: str, smt: str, row0: str, rows_total: int, tile: int,
                   dim: int) -> list:
        """cp.async of rows row0 .. row0 + tile of `role` into smem[row, col] (zero past
        rows_total); this thread's chunks as (row, col) pairs, for rounding after they land."""
        toks, mine = [], []
        for u in range(tile * dim // 4 // THREADS):
            e = self.add(self.tid, u * THREADS)
            row = self.i("divui", e, dim // 4)
            col = self.mul(self.i("remui", e, dim // 4), 4)
            g = self.add(row0, row)
            ok = self.cmpi("ult", g, self.ci(rows_total))
            at = self.add(self.mul(self.add(self.mul(self.nb, rows_total), g), dim), col)
            at = self.select_index(ok, at)
            n = self.op(f"arith.select {ok}, {self.ci(4)}, {self.ci(0)} : index")
            toks.append(self.op(
                f"nvgpu.device_async_copy {self.mem[role]}[{at}], {smem}[{row}, {col}], 4, {n} "
                f"{{bypassL1}} : {self.mt[role]} to {smt}"))
            mine.append((smem, smt, row, col))
        self._pending = getattr(self, "_pending", []) + mine
        return toks

    def _land(self, toks: list) -> None:
        """Commits `toks`, waits for them, rounds this thread's landed chunks to TF32."""
        group = self.op(f"nvgpu.device_async_create_group {', '.join(toks)}")
        self.emit(f"nvgpu.device_async_wait {group} {{numGroups = 0 : i32}}")
        for smem, smt, row, col in self._pending:
            at = f"{smem}[{row}, {col}]"
            x = self.op(f"vector.load {at} {{alignment = 16}} : {smt}, vector<4xf32>")
            self.emit(f"vector.store {self.tf32_round(x, 4)}, {at} {{alignment = 16}} : {smt}, "
                      "vector<4xf32>")
        self._pending = []

    def _to_buffer(self, buf: str, bt: str, warp: str, tiles: list) -> None:
        """Stores C-layout tiles (16 rows of the warp x 8 columns each, TF32-rounded) into the
        warp's rows of buf[key, query]."""
        for nq, (v0, v1) in enumerate(tiles):
            for h, pair in enumerate((v0, v1)):
                pv = self.tf32_round(pair, 2)
                row = self.add(self.mul(warp, 16), self.g, 8 * h)
                col = self.add(self.two_t, nq * 8)
                self.emit(f"vector.store {pv}, {buf}[{row}, {col}] {{alignment = 8}} : {bt}, "
                          "vector<2xf32>")

    def _mma_rows(self, buf: str, bt: str, warp: str, kdim: int, b_smem: str, b_t: str,
                  ndim: int, accs: list) -> list:
        """accs (16 x ndim C tiles) += buf[warp's 16 rows, :kdim] @ b_smem[:kdim, :ndim] (A from
        the warp's rows of buf, B[k][n] = b_smem[k, n])."""
        accs = list(accs)
        r0 = self.add(self.mul(warp, 16), self.g)
        r8 = self.add(r0, 8)
        for kk in range(kdim // 8):
            c0 = self.add(self.t4, kk * 8)
            c4 = self.add(c0, 4)
            a = [self.op(f"memref.load {buf}[{r}, {c}] : {bt}")
                 for r, c in ((r0, c0), (r8, c0), (r0, c4), (r8, c4))]
            af = self.op(f"vector.from_elements {', '.join(a)} : vector<4x1xf32>")
            for q in range(ndim // 8):
                col = self.add(self.g, q * 8)
                b = [self.op(f"memref.load {b_smem}[{r}, {col}] : {b_t}") for r in (c0, c4)]
                bf = self.op(f"vector.from_elements {', '.join(b)} : vector<2x1xf32>")
                accs[q] = self.op(f"nvgpu.mma.sync ({af}, {bf}, {accs[q]}) {MMA}")
        return accs

    def backward(self) -> str:
        d, dv, tq, tk = self.d, self.dv, self.tq, self.tk
        bkv, bq = BKV_BWD, BQ_BWD
        qs = self.shared("Qs", bq, d + 4)
        dos = self.shared("dOs", bq, dv + 4)
        buf = self.shared("Bf", bkv, bq + 4)  # P^T, then dS^T, of the query tile
        ks = self.shared("Ks", bkv, d + 8)
        ls = self.shared("Ls", bq)
        ds_t = self.shared("Ds", bq)
        nkt = -(-tk // bkv)
        bid, self.tid = self.op("gpu.block_id x"), self.op("gpu.thread_id x")
        self.nb = n = self.i("divui", bid, nkt)
        j0 = self.mul(self.i("remui", bid, nkt), bkv)
        warp, lane = self.i("divui", self.tid, 32), self.i("remui", self.tid, 32)
        self.g, self.t4 = self.i("divui", lane, 4), self.i("remui", lane, 4)
        self.two_t = self.mul(self.t4, 2)
        keys = [self.add(j0, self.mul(warp, 16), self.g)]
        keys.append(self.add(keys[0], 8))
        kf = self._frags("k", keys, d, tk)
        vf = self._frags("v", keys, dv, tk)
        self._land(self._copy_rows("k", "%Ks", ks, j0, tk, bkv, d))
        acc_t = "vector<2x2xf32>"
        zero = self.t.c("dense<0.0>", acc_t)
        # Causal: query tiles before the one holding key j0 see none of this block's keys.
        first = self.i("divui", j0, bq) if self.kind == "causal" else self.ci(0)
        nk, nv = d // 8, dv // 8
        types = [acc_t] * (nk + nv)
        qt, carried, res = self.open_for(first, self.ci(-(-tq // bq)), [zero] * (nk + nv), types)
        dk, dvs = carried[:nk], carried[nk:]
        i0 = self.mul(qt, bq)
        self.emit("gpu.barrier")  # the previous query tile is no longer read
        toks = self._copy_rows("q", "%Qs", qs, i0, tq, bq, d)
        toks += self._copy_rows("do", "%dOs", dos, i0, tq, bq, dv)
        self._stage_rows(n, i0, bq, self.tid, ls, ds_t)
        self._land(toks)
        self.emit("gpu.barrier")
        # S^T = K Q^T and dP^T = V dO^T: the warp's 16 keys x the tile's queries.
        st, dpt = [], []
        for nq in range(bq // 8):
            qrow = self.add(self.g, nq * 8)
            for frags, smem, smt, dim, out in ((kf, "%Qs", qs, d, st), (vf, "%dOs", dos, dv, dpt)):
                acc = zero
                for kd in range(dim // 8):
                    c0 = self.add(self.t4, kd * 8)
                    b = [self.op(f"memref.load {smem}[{qrow}, {c}] : {smt}")
                         for c in (c0, self.add(c0, 4))]
                    bf = self.op(f"vector.from_elements {', '.join(b)} : vector<2x1xf32>")
                    acc = self.op(f"nvgpu.mma.sync ({frags[kd]}, {bf}, {acc}) {MMA}")
                out.append(acc)
        p_tiles, ds_tiles = [], []
        for nq in range(bq // 8):
            pp, dd = [], []
            for h in range(2):
                ps_, dss_ = [], []
                for c in range(2):
                    qc = self.add(self.two_t, nq * 8 + c)
                    sd = self.op(f"vector.extract {st[nq]}[{h}, {c}] : f32 from {acc_t}")
                    dp = self.op(f"vector.extract {dpt[nq]}[{h}, {c}] : f32 from {acc_t}")
                    s, valid, keep = self.logit(sd, self.add(i0, qc), keys[h])
                    lse = self.load("%Ls", qc, ls, 1)
                    live = self.and_(valid, self.cmpf("one", lse, self.cf(-math.inf)))
                    p = self.select(live, self.exp(self.f("subf", s, lse)), self.cf(0.0))
                    ds = self.f("mulf", p, self.f("subf", dp, self.load("%Ds", qc, ds_t, 1)))
                    if keep is not None:
                        ds = self.select(keep, ds, self.cf(0.0))
                    ps_.append(p)
                    dss_.append(ds)
                pp.append(self.op(f"vector.from_elements {ps_[0]}, {ps_[1]} : vector<2xf32>"))
                dd.append(self.op(f"vector.from_elements {dss_[0]}, {dss_[1]} : vector<2xf32>"))
            p_tiles.append(pp)
            ds_tiles.append(dd)
        # dV += P^T dO (the warp's rows of the buffer; no other warp reads them).
        self._to_buffer("%Bf", buf, warp, p_tiles)
        warp_sync = f"nvvm.bar.warp.sync {self.t.c(-1, 'i32')} : i32"
        self.emit(warp_sync)  # the warp's rows of P^T are complete
        dvs = self._mma_rows("%Bf", buf, warp, bq, "%dOs", dos, dv, dvs)
        self.emit(warp_sync)  # the warp's P^T is read: its rows take dS^T
        self._to_buffer("%Bf", buf, warp, ds_tiles)
        self.emit("gpu.barrier")  # dQ reads every warp's dS^T
        dk = self._mma_rows("%Bf", buf, warp, bq, "%Qs", qs, d, dk)
        if "dq" in self.mem:
            self._dq_mma(n, i0, bq, bkv, warp, buf, ks)
        out = self.close_for(dk + dvs, types, res)
        self._store_tiles("dk", keys, out[:nk], d, self.scale)
        self._store_tiles("dv", keys, out[nk:], dv, None)
        self.grid, self.block = (self.n * nkt, 1, 1), (THREADS, 1, 1)
        self.tiles = (bkv, bq)
        return self._text(THREADS)

    def _dq_mma(self, n, i0, bq, bkv, warp, buf, ks) -> None:
        """dq[i0 .. i0 + bq, :] += scale * dS K over the block's keys: warp w computes query rows
        16 (w % 2) .. + 16 and one half of the head dim's 8-column tiles (A[q, key] =
        dS^T[key, q] from the buffer, B = K from shared memory), then adds its tiles into dq
        with atomics (red.global.add)."""
        d, tq = self.d, self.tq
        acc_t = "vector<2x2xf32>"
        zero = self.t.c("dense<0.0>", acc_t)
        halves = WARPS // (bq // 16)  # warps sharing a 16-row slice of queries
        per = (d // 8) // halves
        m0 = self.mul(self.i("remui", warp, bq // 16), 16)
        n_first = self.mul(self.i("divui", warp, bq // 16), per)
        accs = [zero] * per
        q0 = self.add(m0, self.g)
        q8 = self.add(q0, 8)
        for kk in range(bkv // 8):
            c0 = self.add(self.t4, kk * 8)
            c4 = self.add(c0, 4)
            a = [self.op(f"memref.load %Bf[{k}, {q}] : {buf}")
                 for q, k in ((q0, c0), (q8, c0), (q0, c4), (q8, c4))]
            af = self.op(f"vector.from_elements {', '.join(a)} : vector<4x1xf32>")
            for u in range(per):
                col = self.add(self.mul(self.add(n_first, u), 8), self.g)
                b = [self.op(f"memref.load %Ks[{r}, {col}] : {ks}") for r in (c0, c4)]
                bf = self.op(f"vector.from_elements {', '.join(b)} : vector<2x1xf32>")
                accs[u] = self.op(f"nvgpu.mma.sync ({af}, {bf}, {accs[u]}) {MMA}")
        for h, q in enumerate((q0, q8)):
            gq = self.add(i0, q)
            ok = self.cmpi("ult", gq, self.ci(tq))
            self.open_if(ok)
            base = self.mul(self.add(self.mul(n, tq), gq), d)
            for u in range(per):
                for c in range(2):
                    x = self.op(f"vector.extract {accs[u]}[{h}, {c}] : f32 from {acc_t}")
                    x = self.f("mulf", x, self.cf(self.scale))
                    col = self.add(self.mul(self.add(n_first, u), 8), self.two_t, c)
                    self.op(f"memref.atomic_rmw addf {x}, {self.mem['dq']}"
                            f"[{self.add(base, col)}] : (f32, {self.mt['dq']}) -> f32")
            self.close_if(ok)

    def _store_tiles(self, role: str, keys: list, accs: list, dim: int, scale) -> None:
        """The warp's C tiles (its 16 keys x dim) into dk or dv (times scale), keys < Tk."""
        if role not in self.mem:
            return
        acc_t = "vector<2x2xf32>"
        for h in range(2):
            ok = self.cmpi("ult", keys[h], self.ci(self.tk))
            self.open_if(ok)
            row = self.add(self.mul(self.nb, self.tk), keys[h])
            for q, acc in enumerate(accs):
                pair = self.op(f"vector.extract {acc}[{h}] : vector<2xf32> from {acc_t}")
                if scale is not None:
                    sc = self.op(f"vector.broadcast {self.cf(scale)} : f32 to vector<2xf32>")
                    pair = self.op(f"arith.mulf {pair}, {sc} : vector<2xf32>")
                at = self.add(self.mul(row, dim), self.two_t, q * 8)
                self.emit(f"vector.store {pair}, {self.mem[role]}[{at}] {{alignment = 8}} : "
                          f"{self.mt[role]}, vector<2xf32>")
            self.close_if(ok)
