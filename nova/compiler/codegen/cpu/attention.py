"""Flash-attention CPU kernels: flash_attention_fwd and flash_attention_bwd as MLIR text.

The algorithms are FlashAttention-2's (T. Dao, arXiv 2307.08691, Algorithms 1 and 2), arranged
for a CPU core: the T x T score matrix never exists; a group of G = GROUP_ROWS query rows works
on one block of BK keys at a time, its G x BK scores in an L1-resident scratch tile.

Both directions first transpose Kᵀ (and, backward, Vᵀ) of the batch element into a per-thread
scratch (D x Tk, zero-padded to a multiple of BK), so a tile of scores is a small GEMM with
TILE_ROWS rows x 2 vectors of keys in registers: s[r, j:j+W] += q[i0+r, d] * Kᵀ[d, j:j+W].
Forward, per group and key block (q: N x Tq x D, k: N x Tk x D, v: N x Tk x Dv):
    scores -> per row the online softmax: m' = max(m, max s), l' = l e^(m-m') + sum e^(s-m'),
    the row of O scaled by e^(m-m') and the scores replaced by P = e^(s-m'); then O += P V (a
    small GEMM into the group's scratch O). Finally o = O / l, lse = m + log l. Causal groups stop
    at the block of their last row's diagonal. A row that sees no key (m = -inf) uses 0 in place
    of m in the exponents, so every e^ is 0, and ends with o = 0, lse = -inf.
Backward, per key block and group of query rows that see it (causal: rows i >= j0): S and
    dP = dO·Vᵀ tiles are recomputed, P = e^(s - lse), dS = c P (dP - delta) in place; then
    dV += Pᵀ dO, dK += dSᵀ Q and dQ += dS K as small GEMMs (TILE_ROWS rows of the result x 2
    vectors in registers over the group's rows or the block's keys).
Threads: the forward splits (batch element, interleaved groups) over OpenMP threads; the
    backward splits batch elements only, since every query row adds into dK/dV of the same keys
    (B x H = 16 in the benchmark keeps both cores busy).
"""

from __future__ import annotations

import math

from nova.compiler.codegen.cpu.attention_emitter import BK_VECTORS, GROUP_ROWS, AttentionEmitter
from nova.compiler.kernel import Kernel
from nova.core import dtypes


class _FlashKernels(AttentionEmitter):
    """The forward and backward kernels of one fused attention equation."""

    # --- forward ------------------------------------------------------------------------------
    def forward(self) -> str:
        sig = self.signature()
        q, k, v = self.ins[:3]
        o, lse = self.out
        n_, tq, d, dv, we = self.n, self.tq, self.d, self.dv, self.we
        c0, c1 = self.idx(0), self.idx(1)
        qt, vt_m, ot = (self.memref(n_, tq, d), self.memref(n_, self.tk, dv),
                        self.memref(n_, tq, dv))
        g_t, row_t, og_t = (self.memref(GROUP_ROWS, self.bk), self.memref(GROUP_ROWS),
                            self.memref(1, GROUP_ROWS, dv))
        vte = self.vt(we)
        groups = -(-tq // GROUP_ROWS)

        def body(tid, nth):
            kt = self.op(f"memref.alloc() {{alignment = 64 : i64}} : {self.memref(d, self.tkp)}")
            sg = self.op(f"memref.alloc() {{alignment = 64 : i64}} : {g_t}")
            og = self.op(f"memref.alloc() {{alignment = 64 : i64}} : {og_t}")
            ms = self.op(f"memref.alloc() : {row_t}")
            ls = self.op(f"memref.alloc() : {row_t}")
            self.open(f"scf.for %it = {tid} to {self.idx(self.items)} step {nth}")
            n = self.op(f"arith.divui %it, {self.idx(self.splits)} : index")
            split = self.op(f"arith.remui %it, {self.idx(self.splits)} : index")
            self.transpose_into(kt, k, n, self.tk, d)
            self.open(f"scf.for %gi = {split} to {self.idx(groups)} step {self.idx(self.splits)}")
            i0 = self.imul("%gi", self.idx(GROUP_ROWS))
            rows = self.imin(self.idx(GROUP_ROWS), self.isub(self.idx(tq), i0))
            self.open(f"scf.for %r = {c0} to {rows} step {c1}")
            self.emit(f"memref.store {self.fc(-math.inf)}, {ms}[%r] : {row_t}")
            self.emit(f"memref.store {self.fc(0.0)}, {ls}[%r] : {row_t}")
            self.open(f"scf.for %zc = {c0} to {self.idx(dv)} step {self.idx(we)}")
            self.emit(f"vector.store {self.fc(0.0, we)}, {og}[{c0}, %r, %zc] : {og_t}, {vte}")
            self.close()
            self.close()
            kend_last = self.key_end(self.isub(self.iadd(i0, rows), c1))
            nblk = self.op(f"arith.ceildivsi {kend_last}, {self.idx(self.bk)} : index")
            self.open(f"scf.for %jb = {c0} to {nblk} step {c1}")
            j0 = self.imul("%jb", self.idx(self.bk))
            keys = self.imin(self.idx(self.bk), self.isub(kend_last, j0))
            self.dot_group(sg, q, qt, n, i0, rows, d, kt, j0, keys)
            self.online_softmax(sg, g_t, ms, ls, row_t, og, og_t, i0, rows, j0)
            self.tile_update(og, og_t, c0, rows, v, vt_m, j0, keys, sg, n, dv, we, False, c0)
            self.close()  # key blocks
            self.finish_rows(o, ot, lse, ms, ls, row_t, og, og_t, n, i0, rows)
            self.close()  # groups
            self.close()  # items
            for buf, t in ((kt, self.memref(d, self.tkp)), (sg, g_t), (og, og_t), (ms, row_t),
                           (ls, row_t)):
                self.emit(f"memref.dealloc {buf} : {t}")

        self.parallel(body)
        return self.finish(sig)

    def online_softmax(self, sg, g_t, ms, ls, row_t, og, og_t, i0, rows, j0) -> None:
        """For each row of the group: the block's scores become P = e^(s - m') in place,
        m' = max(m, max s), l' = l e^(m - m') + sum P, and the row of O is scaled by e^(m - m').
        A row with no visible key so far keeps m = -inf and uses 0 in its place (all e^ = 0)."""
        w, we, el = self.w, self.we, self.el
        c0, c1 = self.idx(0), self.idx(1)
        self.open(f"scf.for %r = {c0} to {rows} step {c1}")
        i = self.iadd(i0, "%r")
        s = [self.op(f"vector.load {sg}[%r, {self.idx(c * w)}] : {g_t}, {self.vt(w)}")
             for c in range(BK_VECTORS)]
        kend = self.key_end(i)
        visible = self.isub(kend, j0)
        s, _, _ = self.logits(s, i, j0, kend)
        m = self.op(f"memref.load {ms}[%r] : {row_t}")
        m_new = self.arith("maximumf", m, self.reduce("maximumf", s, w))
        dead = self.op(f"arith.cmpf oeq, {m_new}, {self.fc(-math.inf)} : {el}")
        m_safe = self.op(f"arith.select {dead}, {self.fc(0.0)}, {m_new} : {el}")
        corr = self.exp(self.arith("subf", m, m_safe), 0)
        bm = self.bcast(m_safe, w)
        ps = []
        for c, x in enumerate(s):
            (p,) = self.if_used(self.key_vector_used(c, visible),
                                lambda x=x: [self.exp(self.arith("subf", x, bm, w), w)], 1)
            self.emit(f"vector.store {p}, {sg}[%r, {self.idx(c * w)}] : {g_t}, {self.vt(w)}")
            ps.append(p)
        l_old = self.op(f"memref.load {ls}[%r] : {row_t}")
        l_new = self.arith("addf", self.arith("mulf", l_old, corr), self.reduce("add", ps, w))
        self.emit(f"memref.store {l_new}, {ls}[%r] : {row_t}")
        self.emit(f"memref.store {m_new}, {ms}[%r] : {row_t}")
        bc = self.bcast(corr, we)
        for x in range(self.dv // we):
            at = f"{og}[{c0}, %r, {self.idx(x * we)}] : {og_t}, {self.vt(we)}"
            self.emit(f"vector.store {self.arith('mulf', self.op(f'vector.load {at}'), bc, we)}, "
                      f"{at}")
        self.close()

    def finish_rows(self, o, ot, lse, ms, ls, row_t, og, og_t, n, i0, rows) -> None:
        """o = O / l and lse = m + log l per row of the group; 0 and -inf for a row that saw no
        key (l = 0)."""
        we, el = self.we, self.el
        c0, c1 = self.idx(0), self.idx(1)
        self.open(f"scf.for %r = {c0} to {rows} step {c1}")
        i = self.iadd(i0, "%r")
        m = self.op(f"memref.load {ms}[%r] : {row_t}")
        l_ = self.op(f"memref.load {ls}[%r] : {row_t}")
        live = self.op(f"arith.cmpf ogt, {l_}, {self.fc(0.0)} : {el}")
        inv = self.op(f"arith.select {live}, {self.arith('divf', self.fc(1.0), l_)}, "
                      f"{self.fc(0.0)} : {el}")
        binv = self.bcast(inv, we)
        for x in range(self.dv // we):
            y = self.op(f"vector.load {og}[{c0}, %r, {self.idx(x * we)}] : {og_t}, {self.vt(we)}")
            self.emit(f"vector.store {self.arith('mulf', y, binv, we)}, "
                      f"{o}[{n}, {i}, {self.idx(x * we)}] : {ot}, {self.vt(we)}")
        one_if_dead = self.op(f"arith.select {live}, {l_}, {self.fc(1.0)} : {el}")
        logl = self.op(f"math.log {one_if_dead} : {el}")
        val = self.op(f"arith.select {live}, {self.arith('addf', m, logl)}, "
                      f"{self.fc(-math.inf)} : {el}")
        self.emit(f"memref.store {val}, {lse}[{n}, {i}] : {self.memref(self.n, self.tq)}")
        self.close()

    # --- backward -----------------------------------------------------------------------------

    def backward(self) -> str:
        sig = self.signature()
        q, k, v, lse, do, delta = self.ins[:6]
        dq, dk, dv_ = self.out
        n_, tq, tk, d, dv, w, wd = (self.n, self.tq, self.tk, self.d, self.dv, self.w, self.wd)
        c0, c1 = self.idx(0), self.idx(1)
        qt, kt_m, vt_m = (self.memref(n_, tq, d), self.memref(n_, tk, d),
                          self.memref(n_, tk, dv))
        ot, rt = self.memref(n_, tq, dv), self.memref(n_, tq)
        g_t = self.memref(GROUP_ROWS, self.bk)

        def body(tid, nth):
            kt = self.op(f"memref.alloc() {{alignment = 64 : i64}} : {self.memref(d, self.tkp)}")
            vt = self.op(f"memref.alloc() {{alignment = 64 : i64}} : "
                         f"{self.memref(dv, self.tkp)}")
            pb = self.op(f"memref.alloc() {{alignment = 64 : i64}} : {g_t}")
            sb = self.op(f"memref.alloc() {{alignment = 64 : i64}} : {g_t}")
            self.open(f"scf.for %n = {tid} to {self.idx(self.items)} step {nth}")
            n = "%n"
            self.transpose_into(kt, k, n, tk, d)
            self.transpose_into(vt, v, n, tk, dv)
            for buf, rows, cols in ((dq, tq, d), (dk, tk, d), (dv_, tk, dv)):
                self.zero(buf, n, rows, cols)
            nblk = -(-tk // self.bk)
            self.open(f"scf.for %jb = {c0} to {self.idx(nblk)} step {c1}")
            j0 = self.imul("%jb", self.idx(self.bk))
            keys = self.imin(self.idx(self.bk), self.isub(self.idx(tk), j0))
            start = j0 if self.kind == "causal" else c0
            self.open(f"scf.for %i0 = {start} to {self.idx(tq)} step {self.idx(GROUP_ROWS)}")
            rows = self.imin(self.idx(GROUP_ROWS), self.isub(self.idx(tq), "%i0"))
            # keys of the block some row of the group sees (causal: up to the group's last row)
            need = keys
            if self.kind == "causal":
                need = self.imin(keys, self.isub(self.iadd("%i0", rows), j0))
            self.dot_group(pb, q, qt, n, "%i0", rows, d, kt, j0, need)  # S, then P in place
            self.dot_group(sb, do, ot, n, "%i0", rows, dv, vt, j0, need)  # dP, then dS
            self.open(f"scf.for %r = {c0} to {rows} step {c1}")
            i = self.iadd("%i0", "%r")
            lse_i = self.op(f"memref.load {lse}[{n}, {i}] : {rt}")
            live = self.op(f"arith.cmpf one, {lse_i}, {self.fc(-math.inf)} : {self.el}")
            self.open(f"scf.if {live}")
            kend = self.key_end(i)
            s = [self.op(f"vector.load {pb}[%r, {self.idx(c * w)}] : {g_t}, {self.vt(w)}")
                 for c in range(BK_VECTORS)]
            dp = [self.op(f"vector.load {sb}[%r, {self.idx(c * w)}] : {g_t}, {self.vt(w)}")
                  for c in range(BK_VECTORS)]
            s, valid, keep = self.logits(s, i, j0, kend)
            bl = self.bcast(lse_i, w)
            bdel = self.bcast(self.op(f"memref.load {delta}[{n}, {i}] : {rt}"), w)
            visible = self.isub(kend, j0)

            def p_ds(c):
                p = self.exp(self.arith("subf", s[c], bl, w), w)
                p = self.op(f"arith.select {valid[c]}, {p}, {self.fc(0.0, w)} : "
                            f"vector<{w}xi1>, {self.vt(w)}")
                ds = self.arith("mulf", p, self.arith("subf", dp[c], bdel, w), w)
                ds = self.arith("mulf", ds, self.fc(self.scale, w), w)
                if keep[c] is not None:  # a filled logit does not depend on q or k
                    ds = self.op(f"arith.select {keep[c]}, {ds}, {self.fc(0.0, w)} : "
                                 f"vector<{w}xi1>, {self.vt(w)}")
                return [p, ds]

            for c in range(BK_VECTORS):
                p, ds = self.if_used(self.key_vector_used(c, visible), lambda c=c: p_ds(c), 2)
                off = self.idx(c * w)
                self.emit(f"vector.store {p}, {pb}[%r, {off}] : {g_t}, {self.vt(w)}")
                self.emit(f"vector.store {ds}, {sb}[%r, {off}] : {g_t}, {self.vt(w)}")
            self.close("} else {")  # a row that sees no key contributes nothing
            self.b.indent += 2
            for c in range(BK_VECTORS):
                off = self.idx(c * w)
                for buf in (pb, sb):
                    self.emit(f"vector.store {self.fc(0.0, w)}, {buf}[%r, {off}] : {g_t}, "
                              f"{self.vt(w)}")
            self.close()  # scf.if live
            self.close()  # rows of the group
            self.tile_update(dv_, vt_m, j0, need, do, ot, "%i0", rows, pb, n, dv, self.we, True)
            self.tile_update(dk, kt_m, j0, need, q, qt, "%i0", rows, sb, n, d, wd, True)
            self.tile_update(dq, qt, "%i0", rows, k, kt_m, j0, need, sb, n, d, wd, False)
            self.close()  # groups
            self.close()  # key blocks
            self.close()  # items
            for buf, t in ((kt, self.memref(d, self.tkp)), (vt, self.memref(dv, self.tkp)),
                           (pb, g_t), (sb, g_t)):
                self.emit(f"memref.dealloc {buf} : {t}")

        self.parallel(body)
        return self.finish(sig)


def emit_attention(name: str, kernel: Kernel) -> str | None:
    """MLIR text of `func.func @name(inputs..., outputs...)` for a kernel holding one
    flash_attention_fwd or flash_attention_bwd equation, or None for a dtype without a kernel
    (the caller runs the reference)."""
    (e,) = [q for q in kernel.program.eqns if q.prim.name.startswith("flash_attention")]
    if e.inputs[0].type.dtype not in (dtypes.float32, dtypes.float64):
        return None
    if any(t.size == 0 for t in (x.type for x in e.inputs[:3])):
        return None
    g = _FlashKernels(name, kernel)
    return g.forward() if g.fwd else g.backward()
