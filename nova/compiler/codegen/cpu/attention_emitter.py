"""The MLIR text emitter behind the flash-attention CPU kernels (codegen/cpu/attention.py):
SSA plumbing, the kernel signature, and the building blocks both directions use (Kᵀ/Vᵀ
transposes, score tiles and rank-G updates as small register-tiled GEMMs, masks, OpenMP split)."""

from __future__ import annotations

import math
import os

import numpy as np

from nova.compiler.codegen.builder import Builder, Value, elem_type, float_literal
from nova.compiler.codegen.cpu.matmul import host_device, shuffle_transpose
from nova.compiler.kernel import Kernel

# Keys per block: BK_VECTORS vectors of W keys (a group's scratch tiles are GROUP_ROWS x BK).
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


class AttentionEmitter:
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
        self.b.exp_fast_path = True
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

    def round_down(self, a: str, m: int) -> str:
        """a rounded down to a multiple of m (index values)."""
        q = self.op(f"arith.divui {a}, {self.idx(m)} : index")
        return self.imul(q, self.idx(m))

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
        """dst[c, j] = src[n, j, c] for j < rows, 0 for rows <= j < tkp (dst: cols x tkp).

        Whole W x W blocks go through registers: W vector loads along c, the perfect-shuffle
        transpose, W vector stores along j. Element by element, the stores (one per element,
        each to another row of dst) took ~14 % of the forward kernel's cycles at T = 128, D = 64
        (perf, bench/NOTES.md round 7). The edges that do not fill a block stay scalar."""
        c0, c1 = self.idx(0), self.idx(1)
        w = self.w
        st = self.memref(self.n, rows, cols)
        dt = self.memref(cols, self.tkp)
        jfull, cfull = rows // w * w, cols // w * w
        if w > 1 and jfull and cfull:
            vt = self.vt(w)
            self.open(f"scf.for %tj = {c0} to {self.idx(jfull)} step {self.idx(w)}")
            self.open(f"scf.for %tc = {c0} to {self.idx(cfull)} step {self.idx(w)}")
            vecs = [self.op(f"vector.load {src}[{n}, {self.iadd('%tj', self.idx(r))}, %tc] : "
                            f"{st}, {vt}") for r in range(w)]
            for q, v in enumerate(shuffle_transpose(self.op, vecs, w, vt)):
                self.emit(f"vector.store {v}, {dst}[{self.iadd('%tc', self.idx(q))}, %tj] : "
                          f"{dt}, {vt}")
            self.close()
            self.close()
        else:
            jfull = cfull = 0
        # The edges: columns past the last whole block (every row), rows past it (those columns)
        for (j_lo, j_hi), (c_lo, c_hi) in (((0, rows), (cfull, cols)), ((jfull, rows), (0, cfull))):
            if j_lo >= j_hi or c_lo >= c_hi:
                continue
            self.open(f"scf.for %tj = {self.idx(j_lo)} to {self.idx(j_hi)} step {c1}")
            self.open(f"scf.for %tc = {self.idx(c_lo)} to {self.idx(c_hi)} step {c1}")
            x = self.op(f"memref.load {src}[{n}, %tj, %tc] : {st}")
            self.emit(f"memref.store {x}, {dst}[%tc, %tj] : {dt}")
            self.close()
            self.close()
        if self.tkp > rows:
            self.open(f"scf.for %tj = {self.idx(rows)} to {self.idx(self.tkp)} step {c1}")
            self.open(f"scf.for %tc = {c0} to {self.idx(cols)} step {c1}")
            self.emit(f"memref.store {self.fc(0.0)}, {dst}[%tc, %tj] : {dt}")
            self.close()
            self.close()

    def dot_group(self, dst: str, src: str, src_t: str, n: str, i0: str, rows: str,
                  width: int, t_buf: str, j0: str, need: str) -> None:
        """dst[r, :] = src[n, i0 + r, :] · T[:, j0:j0 + BK] for r < rows (T: width x tkp, the
        transposed K or V): a small GEMM, TILE_ROWS rows x 2 vectors of keys in registers over
        the loop on the head dim. Only the pairs of key vectors holding one of the first `need`
        (>= 1) keys of the block are computed: the others are hidden from every row of the
        group (past the causal diagonal or the last key), and dst keeps whatever it held there.
        """
        w = self.w
        vt = self.vt(w)
        g_t = self.memref(GROUP_ROWS, self.bk)
        full = self.round_down(rows, TILE_ROWS)
        for lo, hi, tr, tag in ((self.idx(0), full, TILE_ROWS, "ga"), (full, rows, 1, "gb")):
            self.open(f"scf.for %{tag} = {lo} to {hi} step {self.idx(tr)}")
            ts = [self.iadd(f"%{tag}", self.idx(x)) if x else f"%{tag}" for x in range(tr)]
            srows = [self.iadd(i0, t) for t in ts]
            for x in range(BK_VECTORS // 2):
                if x:  # pair 0 always holds a needed key
                    used = self.op(f"arith.cmpi slt, {self.idx(2 * x * w)}, {need} : index")
                    self.open(f"scf.if {used}")
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
                if x:
                    self.close()  # scf.if used
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

    def key_vector_used(self, c: int, visible: str) -> str | None:
        """An i1 value: vector c of the key block holds one of the `visible` keys a row sees
        from the block's start on; None where that always holds (vector 0: every row sees a
        key of each block it visits; without a causal mask or a tail block, all of them)."""
        if c == 0 or (self.kind != "causal" and self.tk % self.bk == 0):
            return None
        return self.op(f"arith.cmpi slt, {self.idx(c * self.w)}, {visible} : index")

    def if_used(self, used: str | None, compute, n_results: int) -> list:
        """compute() -> n_results vectors of W lanes, run only where `used` holds (zeros
        otherwise, which is what a vector of hidden keys gives: e^-inf = 0)."""
        if used is None:
            return compute()
        vt = self.vt(self.w)
        res = self.b.fresh()
        self.open(f"{res}:{n_results} = scf.if {used} -> ({', '.join([vt] * n_results)})")
        vals = compute()
        self.emit(f"scf.yield {', '.join(vals)} : {', '.join([vt] * n_results)}")
        self.close("} else {")
        self.b.indent += 2
        zero = self.fc(0.0, self.w)
        self.emit(f"scf.yield {', '.join([zero] * n_results)} : "
                  f"{', '.join([vt] * n_results)}")
        self.close()
        return [f"{res}#{j}" for j in range(n_results)]

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
        full = self.round_down(dst_count, TILE_ROWS)
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
