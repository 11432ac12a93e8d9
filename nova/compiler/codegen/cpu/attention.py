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
import os

import numpy as np

from nova.compiler.codegen.builder import Builder, Value, elem_type, float_literal
from nova.compiler.codegen.cpu.matmul import host_device
from nova.compiler.kernel import Kernel
from nova.core import dtypes

# Keys per block: BK_VECTORS vectors of scores per row (registers: BK/W + Dv/W accumulators).
BK_VECTORS = 8
# The backward updates dK/dV/dQ once per group of this many query rows and a key block (small
# GEMMs with TILE_ROWS rows x 2 vectors of the result in registers) instead of once per row: per
# row, dK and dV would cost a load and a store per multiply-add, and stores are the scarcest port.
GROUP_ROWS = 16
TILE_ROWS = 4
# A batch element needs this many score pairs before a second thread pays for its fork/join.
MIN_PAIRS_PER_THREAD = 16_384


def _pow2_divisor(n: int, cap: int) -> int:
    """The largest power of two <= cap dividing n (the vector width along a head dim)."""
    w = 1
    while w * 2 <= cap and n % (w * 2) == 0:
        w *= 2
    return w


class _Gen:
    """MLIR text for one fused attention equation (forward or backward)."""

    def __init__(self, name: str, kernel: Kernel):
        (self.e,) = [q for q in kernel.program.eqns if q.prim.name.startswith("flash_attention")]
        self.name = name
        self.fwd = self.e.prim.name == "flash_attention_fwd"
        p = self.e.params
        self.scale, self.kind, self.fill = p["scale"], p["mask_kind"], p["fill"]
        q, k, v = (x.type for x in self.e.inputs[:3])
        self.dtype = q.dtype
        self.el = elem_type(q.dtype)
        self.n = int(np.prod(q.shape[:-2], dtype=np.int64))
        self.tq, self.d = q.shape[-2:]
        self.tk, self.dv = v.shape[-2:]
        dev = host_device()
        self.w = max(1, dev.vector_bits // (8 * q.dtype.itemsize))
        self.bk = BK_VECTORS * self.w
        self.tkp = -(-self.tk // self.bk) * self.bk
        self.wd = _pow2_divisor(self.d, self.w)
        self.we = _pow2_divisor(self.dv, self.w)
        self.prog = kernel.program
        self.b = Builder(prefix="a")
        self.b.default_dtype = q.dtype
        self.b.indent = 4
        self.consts: dict[str, str] = {}
        pairs = self.tq * self.tk // (2 if self.kind == "causal" else 1)
        cores = dev.cores or os.cpu_count() or 1
        if self.fwd:
            splits = 1 if self.n >= cores else max(1, min(cores // self.n, self.tq))
            self.splits = splits if pairs >= MIN_PAIRS_PER_THREAD * splits else 1
            items = self.n * self.splits
        else:
            self.splits = 1
            items = self.n
        self.items = items
        self.threads = max(1, min(cores, items, max(1, self.n * pairs // MIN_PAIRS_PER_THREAD)))

    # --- text helpers -----------------------------------------------------------------------
    def emit(self, text: str) -> None:
        self.b.emit(text)

    def op(self, text: str, hint: str = "t") -> str:
        return self.b.op(text, self.dtype, 0).name

    def idx(self, v: int) -> str:
        name = f"%c{v}"
        self.consts[name] = f"arith.constant {v} : index"
        return name

    def fc(self, v: float, width: int = 0) -> str:
        """A float constant (scalar or splat vector), defined at function entry."""
        lit = float_literal(float(v), self.el)
        tag = lit.replace(".", "p").replace("-", "m").replace("+", "").replace("0x", "h")
        if width:
            name = f"%f{tag}_v{width}"
            self.consts[name] = f"arith.constant dense<{lit}> : vector<{width}x{self.el}>"
        else:
            name = f"%f{tag}"
            self.consts[name] = f"arith.constant {lit} : {self.el}"
        return name

    def vt(self, w: int) -> str:
        return f"vector<{w}x{self.el}>"

    def open(self, text: str) -> None:
        self.emit(text + " {")
        self.b.indent += 2

    def close(self, text: str = "}") -> None:
        self.b.indent -= 2
        self.emit(text)
        self.b.forget_constants()

    def exp(self, x: str, width: int) -> str:
        self.b.forget_constants()  # the polynomial's constants are defined right here
        return self.b.exp(Value(x, self.dtype, width)).name

    def iadd(self, a: str, b: str) -> str:
        return self.op(f"arith.addi {a}, {b} : index")

    def imul(self, a: str, b: str) -> str:
        return self.op(f"arith.muli {a}, {b} : index")

    def imin(self, a: str, b: str) -> str:
        return self.op(f"arith.minsi {a}, {b} : index")

    def isub(self, a: str, b: str) -> str:
        return self.op(f"arith.subi {a}, {b} : index")

    def bcast(self, x: str, w: int) -> str:
        return self.op(f"vector.broadcast {x} : {self.el} to {self.vt(w)}")

    def fma(self, a: str, b: str, c: str, w: int) -> str:
        return self.op(f"vector.fma {a}, {b}, {c} : {self.vt(w)}")

    def arith(self, opname: str, a: str, b: str, w: int = 0) -> str:
        return self.op(f"arith.{opname} {a}, {b} : {self.vt(w) if w else self.el}")

    def reduce(self, kind: str, vals: list, w: int) -> str:
        acc = vals[0]
        for x in vals[1:]:
            acc = self.arith("maximumf" if kind == "maximumf" else "addf", acc, x, w)
        return self.op(f"vector.reduction <{kind}>, {acc} : {self.vt(w)} into {self.el}")

    def memref(self, *shape, el=None) -> str:
        return f"memref<{'x'.join(str(s) for s in shape)}x{el or self.el}>"

    # --- arguments ----------------------------------------------------------------------------
    def signature(self) -> str:
        """Arguments: the kernel program's inputs then outputs (unique values, in order)."""
        types = {}
        n, tq, tk, d, dv = self.n, self.tq, self.tk, self.d, self.dv
        ins = self.e.inputs
        shapes = [(n, tq, d), (n, tk, d), (n, tk, dv)]
        if self.fwd:
            outs = [(n, tq, dv), (n, tq)]
        else:
            shapes += [(n, tq), (n, tq, dv), (n, tq)]
            outs = [(n, tq, d), (n, tk, d), (n, tk, dv)]
        mask_el = "i8" if self.kind == "select" else self.el
        for v, shape in zip(ins, shapes + ([(tq, tk)] if len(ins) > len(shapes) else []),
                            strict=True):
            types[id(v)] = self.memref(*shape, el=mask_el if shape == (tq, tk) else None)
        args, self.arg = [], {}
        for i, v in enumerate(self.prog.inputs):
            args.append(f"%in{i}: {types[id(v)]}")
            self.arg[id(v)] = f"%in{i}"
        self.missing = []  # outputs nobody reads: scratch inside the kernel
        for j, (o, shape) in enumerate(zip(self.e.outputs, outs, strict=True)):
            if any(o is x for x in self.prog.outputs):
                continue
            self.missing.append((f"%out{j}", self.memref(*shape)))
        for j, o in enumerate(self.prog.outputs):
            (pos,) = [i for i, x in enumerate(self.e.outputs) if x is o]
            args.append(f"%out{pos}: {self.memref(*outs[pos])}")
        self.out = [f"%out{j}" for j in range(len(outs))]
        self.ins = [self.arg[id(v)] for v in ins]
        return ", ".join(args)

    # --- common pieces ------------------------------------------------------------------------
    def transpose_into(self, dst: str, src: str, n: str, rows: int, cols: int) -> None:
        """dst[c, j] = src[n, j, c] for j < rows, 0 for rows <= j < tkp (dst: cols x tkp)."""
        c0, c1 = self.idx(0), self.idx(1)
        st = self.memref(self.n, rows, cols)
        self.open(f"scf.for %tj = {c0} to {self.idx(rows)} step {c1}")
        self.open(f"scf.for %tc = {c0} to {self.idx(cols)} step {c1}")
        x = self.op(f"memref.load {src}[{n}, %tj, %tc] : {st}")
        self.emit(f"memref.store {x}, {dst}[%tc, %tj] : {self.memref(cols, self.tkp)}")
        self.close()
        self.close()
        if self.tkp > rows:
            self.open(f"scf.for %tj = {self.idx(rows)} to {self.idx(self.tkp)} step {c1}")
            self.open(f"scf.for %tc = {c0} to {self.idx(cols)} step {c1}")
            self.emit(f"memref.store {self.fc(0.0)}, {dst}[%tc, %tj] : "
                      f"{self.memref(cols, self.tkp)}")
            self.close()
            self.close()

    def dot_group(self, dst: str, src: str, src_t: str, n: str, i0: str, rows: str,
                  width: int, t_buf: str, j0: str) -> None:
        """dst[r, :] = src[n, i0 + r, :] · T[:, j0:j0 + BK] for r < rows (T: width x tkp, the
        transposed K or V): a small GEMM, TILE_ROWS rows x 2 vectors of keys in registers over
        the loop on the head dim."""
        w = self.w
        vt = self.vt(w)
        g_t = self.memref(GROUP_ROWS, self.bk)
        full = self.op(f"arith.muli {self.op(f'arith.divui {rows}, {self.idx(TILE_ROWS)} : index')}"
                       f", {self.idx(TILE_ROWS)} : index")
        for lo, hi, tr, tag in ((self.idx(0), full, TILE_ROWS, "ga"), (full, rows, 1, "gb")):
            self.open(f"scf.for %{tag} = {lo} to {hi} step {self.idx(tr)}")
            ts = [self.iadd(f"%{tag}", self.idx(x)) if x else f"%{tag}" for x in range(tr)]
            srows = [self.iadd(i0, t) for t in ts]
            for x in range(BK_VECTORS // 2):
                offs = [self.idx((2 * x + c) * w) for c in range(2)]
                cols = [self.iadd(j0, off) for off in offs]
                n_acc = 2 * tr
                res = self.b.fresh()
                iters = ", ".join(f"%{tag}{a} = {self.fc(0.0, w)}" for a in range(n_acc))
                self.open(f"{res}:{n_acc} = scf.for %{tag}d = {self.idx(0)} to "
                          f"{self.idx(width)} step {self.idx(1)} iter_args({iters}) -> "
                          f"({', '.join([vt] * n_acc)})")
                tv = [self.op(f"vector.load {t_buf}[%{tag}d, {col}] : "
                              f"{self.memref(width, self.tkp)}, {vt}") for col in cols]
                outs = []
                for r in range(tr):
                    a = self.bcast(self.op(f"memref.load {src}[{n}, {srows[r]}, %{tag}d] : "
                                           f"{src_t}"), w)
                    for c in range(2):
                        outs.append(self.fma(a, tv[c], f"%{tag}{2 * r + c}", w))
                self.emit(f"scf.yield {', '.join(outs)} : {', '.join([vt] * n_acc)}")
                self.close()
                for r in range(tr):
                    for c in range(2):
                        self.emit(f"vector.store {res}#{2 * r + c}, {dst}[{ts[r]}, {offs[c]}] : "
                                  f"{g_t}, {vt}")
            self.close()

    def logits(self, s: list, i: str, j0: str, kend: str) -> tuple:
        """Scaled and masked scores; (scores, valid masks, keep masks or None)."""
        w = self.w
        valid, keep, out = [], [], []
        mask_t = self.memref(self.tq, self.tk, el="i8" if self.kind == "select" else None)
        for c, x in enumerate(s):
            col = self.iadd(j0, self.idx(c * w)) if c else j0
            cnt = self.isub(kend, col)
            vm = self.op(f"vector.create_mask {cnt} : vector<{w}xi1>")
            x = self.arith("mulf", x, self.fc(self.scale, w), w)
            km = None
            if self.kind == "select":
                raw = self.op(f"vector.maskedload {self.ins[-1]}[{i}, {col}], {vm}, "
                              f"{self.zero_i8()} : {mask_t}, vector<{w}xi1>, vector<{w}xi8> "
                              f"into vector<{w}xi8>")
                km = self.op(f"arith.cmpi ne, {raw}, {self.zero_i8()} : vector<{w}xi8>")
                x = self.op(f"arith.select {km}, {x}, {self.fc(self.fill, w)} : "
                            f"vector<{w}xi1>, {self.vt(w)}")
            elif self.kind == "add":
                bias = self.op(f"vector.maskedload {self.ins[-1]}[{i}, {col}], {vm}, "
                               f"{self.fc(0.0, w)} : {mask_t}, vector<{w}xi1>, {self.vt(w)} "
                               f"into {self.vt(w)}")
                x = self.arith("addf", x, bias, w)
            x = self.op(f"arith.select {vm}, {x}, {self.fc(-math.inf, w)} : vector<{w}xi1>, "
                        f"{self.vt(w)}")
            out.append(x)
            valid.append(vm)
            keep.append(km)
        return out, valid, keep

    def zero_i8(self) -> str:
        name = f"%zi8_v{self.w}"
        self.consts[name] = f"arith.constant dense<0> : vector<{self.w}xi8>"
        return name

    def key_end(self, i: str) -> str:
        """One past the last key row i sees."""
        if self.kind == "causal":
            return self.imin(self.iadd(i, self.idx(1)), self.idx(self.tk))
        return self.idx(self.tk)

    def parallel(self, body) -> None:
        """body(item) for item in range(self.items), split over OpenMP threads."""
        if self.threads > 1:
            nt = self.op(f"arith.constant {self.threads} : i32")
            self.open(f"omp.parallel num_threads({nt} : i32)")
            tid = self.op("func.call @omp_get_thread_num() : () -> i32")
            nth = self.op("func.call @omp_get_num_threads() : () -> i32")
            tid = self.op(f"arith.index_cast {tid} : i32 to index")
            nth = self.op(f"arith.index_cast {nth} : i32 to index")
            body(tid, nth)
            self.emit("omp.terminator")
            self.close()
        else:
            body(self.idx(0), self.idx(1))

    def finish(self, sig: str) -> str:
        consts = [f"    {n} = {v}" for n, v in sorted(self.consts.items())]
        scratch = [f"    {nm} = memref.alloc() : {t}" for nm, t in self.missing]
        free = [f"    memref.dealloc {nm} : {t}" for nm, t in self.missing]
        return "\n".join([f"func.func @{self.name}({sig}) {{", *consts, *scratch,
                          *self.b.lines, *free, "    return", "}"])

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
            self.dot_group(sg, q, qt, n, i0, rows, d, kt, j0)
            self.online_softmax(sg, g_t, ms, ls, row_t, og, og_t, i0, rows, j0)
            keys = self.imin(self.idx(self.bk), self.isub(kend_last, j0))
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
        s, _, _ = self.logits(s, i, j0, self.key_end(i))
        m = self.op(f"memref.load {ms}[%r] : {row_t}")
        m_new = self.arith("maximumf", m, self.reduce("maximumf", s, w))
        dead = self.op(f"arith.cmpf oeq, {m_new}, {self.fc(-math.inf)} : {el}")
        m_safe = self.op(f"arith.select {dead}, {self.fc(0.0)}, {m_new} : {el}")
        corr = self.exp(self.arith("subf", m, m_safe), 0)
        bm = self.bcast(m_safe, w)
        ps = []
        for c, x in enumerate(s):
            p = self.exp(self.arith("subf", x, bm, w), w)
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
    def zero(self, buf: str, n: str, rows: int, cols: int) -> None:
        wz = _pow2_divisor(cols, self.w)
        c1 = self.idx(1)
        self.open(f"scf.for %zr = {self.idx(0)} to {self.idx(rows)} step {c1}")
        self.open(f"scf.for %zc = {self.idx(0)} to {self.idx(cols)} step {self.idx(wz)}")
        self.emit(f"vector.store {self.fc(0.0, wz)}, {buf}[{n}, %zr, %zc] : "
                  f"{self.memref(self.n, rows, cols)}, {self.vt(wz)}")
        self.close()
        self.close()

    def tile_update(self, dst, dst_t, dst_base, dst_count, src, src_t, src_base, src_count,
                    coef, n, width, wv, coef_by_src: bool, dst_n: str | None = None) -> None:
        """dst[n, dst_base + t, :] += sum_s C[t, s] * src[n, src_base + s, :] for t < dst_count,
        s < src_count, with C[t, s] = coef[s, t] (coef_by_src) or coef[t, s]: a small GEMM,
        TILE_ROWS rows x (1 or 2) vectors of dst in registers over the loop on s.
        dK += dSᵀ Q and dV += Pᵀ dO (t: keys of the block, s: query rows of the group) and
        dQ += dS K (t: query rows, s: keys); in the forward O += P V into a scratch O (its batch
        index dst_n; default n, the batch element of src and dst)."""
        dst_n = n if dst_n is None else dst_n
        ncol = width // wv
        cv = 2 if ncol % 2 == 0 else 1
        vtw = self.vt(wv)
        g_t = self.memref(GROUP_ROWS, self.bk)
        full = self.op(f"arith.muli {self.op(f'arith.divui {dst_count}, {self.idx(TILE_ROWS)} : index')}"
                       f", {self.idx(TILE_ROWS)} : index")
        for lo, hi, tr, tag in ((self.idx(0), full, TILE_ROWS, "ta"), (full, dst_count, 1, "tb")):
            self.open(f"scf.for %{tag} = {lo} to {hi} step {self.idx(tr)}")
            ts = [self.iadd(f"%{tag}", self.idx(x)) if x else f"%{tag}" for x in range(tr)]
            drows = [self.iadd(dst_base, t) for t in ts]
            for x in range(ncol // cv):
                cols = [self.idx((x * cv + c) * wv) for c in range(cv)]
                init = [self.op(f"vector.load {dst}[{dst_n}, {drows[r]}, {cols[c]}] : {dst_t}, "
                                f"{vtw}") for r in range(tr) for c in range(cv)]
                res = self.b.fresh()
                iters = ", ".join(f"%{tag}{q} = {x0}" for q, x0 in enumerate(init))
                self.open(f"{res}:{len(init)} = scf.for %{tag}s = {self.idx(0)} to {src_count} "
                          f"step {self.idx(1)} iter_args({iters}) -> "
                          f"({', '.join([vtw] * len(init))})")
                srow = self.iadd(src_base, f"%{tag}s")
                sv = [self.op(f"vector.load {src}[{n}, {srow}, {cols[c]}] : {src_t}, {vtw}")
                      for c in range(cv)]
                outs = []
                for r in range(tr):
                    at = f"%{tag}s, {ts[r]}" if coef_by_src else f"{ts[r]}, %{tag}s"
                    cf = self.bcast(self.op(f"memref.load {coef}[{at}] : {g_t}"), wv)
                    for c in range(cv):
                        outs.append(self.fma(cf, sv[c], f"%{tag}{r * cv + c}", wv))
                self.emit(f"scf.yield {', '.join(outs)} : {', '.join([vtw] * len(outs))}")
                self.close()
                for r in range(tr):
                    for c in range(cv):
                        self.emit(f"vector.store {res}#{r * cv + c}, {dst}[{dst_n}, {drows[r]}, "
                                  f"{cols[c]}] : {dst_t}, {vtw}")
            self.close()

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
            self.dot_group(pb, q, qt, n, "%i0", rows, d, kt, j0)  # S, then P in place
            self.dot_group(sb, do, ot, n, "%i0", rows, dv, vt, j0)  # dP, then dS in place
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
            for c in range(BK_VECTORS):
                p = self.exp(self.arith("subf", s[c], bl, w), w)
                p = self.op(f"arith.select {valid[c]}, {p}, {self.fc(0.0, w)} : "
                            f"vector<{w}xi1>, {self.vt(w)}")
                ds = self.arith("mulf", p, self.arith("subf", dp[c], bdel, w), w)
                ds = self.arith("mulf", ds, self.fc(self.scale, w), w)
                if keep[c] is not None:  # a filled logit does not depend on q or k
                    ds = self.op(f"arith.select {keep[c]}, {ds}, {self.fc(0.0, w)} : "
                                 f"vector<{w}xi1>, {self.vt(w)}")
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
            self.tile_update(dv_, vt_m, j0, keys, do, ot, "%i0", rows, pb, n, dv, self.we, True)
            self.tile_update(dk, kt_m, j0, keys, q, qt, "%i0", rows, sb, n, d, wd, True)
            self.tile_update(dq, qt, "%i0", rows, k, kt_m, j0, keys, sb, n, d, wd, False)
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
    g = _Gen(name, kernel)
    return g.forward() if g.fwd else g.backward()
