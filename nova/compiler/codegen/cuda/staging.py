"""GEMM tiles from global to shared memory, and the small text emitter the GEMM generator uses.

Each thread copies its share of the A (BM x BK) and B (BK x BN) slices into their shared tiles
(SIMT: [k][free]; tensor cores: the operand's memory order, `smem_index`). Along an operand's
contiguous memory dimension the copy uses 16-byte vectors (`ld.global.v4` of 4 float32 or 8
16-bit values) when that dimension and the tile edge are multiples of the width (so a vector is
either wholly inside the matrix or wholly outside); other dtypes and layouts copy element by
element. Elements outside the matrix read as 0. Operands are converted to the compute type on
the way (bf16/f16 widened for SIMT; TF32 rounding for the TF32 schedule), except for the 16-bit
tensor-core schedules, which keep the raw 16-bit patterns. `stage_loads` and `stage_stores` are
separate so the next tile can be loaded into registers while the current one is multiplied;
`async_copy` instead issues 16-byte cp.async chunks into a stage of matmul.py's ring (raw
values: `round_tf32_in_place` rounds a thread's own landed chunks to TF32 after its wait).
"""

from __future__ import annotations

from nova.compiler.codegen.builder import elem_type
from nova.core import dtypes


class Text:
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


class StagingMixin:
    """Needs: t (Text), dtype, tf32, tid, threads, BM, BN, BK, m, n, k, batch, a_trans, b_trans,
    row0, col0, abase, bbase, as_t, bs_t, se (shared element type), half (16-bit tensor cores),
    smem_a_ik (As indexed [i, k] rather than [k, i]), smem_b_jk (Bs indexed [j, k] rather than
    [k, j])."""

    def _operands(self):
        """Per operand (A, B): memref, flat base of the batch, the tile's origin along the free
        dimension (rows of A, columns of B), that dimension's size, the tile's size along it, and
        whether memory is (k, free), i.e. contiguous along the free dimension."""
        return (("%a", self.abase, self.row0, self.m, self.BM, self.a_trans),
                ("%b", self.bbase, self.col0, self.n, self.BN, not self.b_trans))

    def vector_width(self, free_size: int, tile_free: int, contig_is_k: bool) -> int:
        if self.dtype == dtypes.float32:
            w = 4
        elif self.half:
            w = 8
        else:
            return 1
        dim, tile = (self.k, self.BK) if contig_is_k else (free_size, tile_free)
        return w if dim % w == 0 and tile % w == 0 else 1

    def stage_loads(self, k0: str) -> list:
        """Loads this thread's share of both tiles at k offset k0 (into registers); the result is
        what stage_stores writes to shared memory."""
        t = self.t
        pending = []
        for which, (mem, base, origin, size, tile, free_major) in zip("ab", self._operands(),
                                                                        strict=True):
            # free_major: memory is (k, free) -- contiguous along the free dimension.
            contig_is_k = not free_major
            v = self.vector_width(size, tile, contig_is_k)
            along = self.BK if contig_is_k else tile
            count = tile * self.BK // (v * self.threads)
            for q in range(count):
                e = t.add(self.tid, t.c(q * self.threads)) if q else self.tid
                lane_c = t.idx("remui", e, t.c(along // v))
                lane_o = t.idx("divui", e, t.c(along // v))
                c = t.mul(lane_c, v)
                kl, fl = (c, lane_o) if contig_is_k else (lane_o, c)
                gk, gf = t.add(k0, kl), t.add(origin, fl)
                addr = t.add(base, t.mul(gk, size), gf) if free_major else \
                    t.add(base, t.mul(gf, self.k), gk)
                conds = self._bounds(gf, size, tile) + self._bounds(gk, self.k, self.BK)
                val = self._load(mem, addr, conds, v)
                elems = [(kl, fl, val)] if v == 1 else self._split(val, kl, fl, contig_is_k, v)
                pending.append((which, elems, v, (kl, fl, val), contig_is_k))
        return pending

    # --- asynchronous copies (cp.async, sm_80+) ----------------------------------------------
    def async_ready(self) -> bool:
        """Whether both tiles can be copied by 16-byte cp.async chunks: each operand vectorizes
        along its contiguous dimension, and shared memory keeps that dimension innermost."""
        for which, size, tile, free_major in (("a", self.m, self.BM, self.a_trans),
                                               ("b", self.n, self.BN, not self.b_trans)):
            contig_is_k = not free_major
            inner_is_k = self.smem_a_ik if which == "a" else self.smem_b_jk
            if inner_is_k != contig_is_k or self.vector_width(size, tile, contig_is_k) == 1:
                return False
        return True

    def chunks(self) -> list:
        """This thread's 16-byte chunks of both tiles, the same at every K slice: (operand,
        k offset in the slice, free offset in the tile, width in elements)."""
        t = self.t
        out = []
        for which, (_, _, _, size, tile, free_major) in zip("ab", self._operands(), strict=True):
            contig_is_k = not free_major
            v = self.vector_width(size, tile, contig_is_k)
            along = self.BK if contig_is_k else tile
            for q in range(tile * self.BK // (v * self.threads)):
                e = t.add(self.tid, t.c(q * self.threads)) if q else self.tid
                c = t.mul(t.idx("remui", e, t.c(along // v)), v)
                o = t.idx("divui", e, t.c(along // v))
                out.append((which, *((c, o) if contig_is_k else (o, c)), v))
        return out

    def smem_index(self, which: str, k_: str, f_: str, stage: str | None = None) -> str:
        """The index list of element (k, free) in tile `which` (and pipeline stage)."""
        inner_is_k = self.smem_a_ik if which == "a" else self.smem_b_jk
        pos = f"{f_}, {k_}" if inner_is_k else f"{k_}, {f_}"
        return f"{stage}, {pos}" if stage is not None else pos

    def async_copy(self, k0: str, stage: str, chunks: list, live: str | None = None) -> str:
        """Issues this thread's cp.async chunks of the K slice at k0 into pipeline `stage` and
        commits them as one group; chunks wholly outside the matrix, and every chunk when the
        i1 `live` is false (a slice past the end, whose buffer is never read), are zero-filled
        (source size 0: no global read; address clamped to the operand's start). Returns the
        group's token."""
        t = self.t
        ops = {which: op for which, op in zip("ab", self._operands(), strict=True)}
        toks = []
        for which, kl, fl, v in chunks:
            mem, base, origin, size, tile, free_major = ops[which]
            gk, gf = t.add(k0, kl), t.add(origin, fl)
            addr = t.add(base, t.mul(gk, size), gf) if free_major else \
                t.add(base, t.mul(gf, self.k), gk)
            conds = self._bounds(gf, size, tile) + self._bounds(gk, self.k, self.BK)
            addr, n = self.zero_fill(addr, conds + ([live] if live is not None else []), v)
            el = elem_type(self.dtype)
            src_t = f"memref<{self.batch * self.k * (self.m if mem == '%a' else self.n)}x{el}>"
            dst, dst_t = ("%As", self.as_t) if which == "a" else ("%Bs", self.bs_t)
            toks.append(t.op(f"nvgpu.device_async_copy {mem}[{addr}], "
                             f"{dst}[{self.smem_index(which, kl, fl, stage)}], {v}, {n} "
                             f"{{bypassL1}} : {src_t} to {dst_t}"))
        return t.op(f"nvgpu.device_async_create_group {', '.join(toks)}")

    def zero_fill(self, addr: str, conds: list, v: int) -> tuple:
        """(source address, source size) of a v-element cp.async chunk: where any i1 of
        `conds` is false, size 0 (the chunk is zero-filled, nothing read) from address 0."""
        t = self.t
        n = t.c(v)
        if conds:
            ok = conds[0]
            for c in conds[1:]:
                ok = t.op(f"arith.andi {ok}, {c} : i1")
            addr = t.op(f"arith.select {ok}, {addr}, {t.c(0)} : index")
            n = t.op(f"arith.select {ok}, {n}, {t.c(0)} : index")
        return addr, n

    def round_tf32_in_place(self, stage: str, chunks: list) -> None:
        """Rounds this thread's own landed chunks to TF32 (as _widen does for staged values)."""
        t = self.t
        for which, kl, fl, v in chunks:
            smem, mt = ("%As", self.as_t) if which == "a" else ("%Bs", self.bs_t)
            at = f"{smem}[{self.smem_index(which, kl, fl, stage)}]"
            x = t.op(f"vector.load {at} {{alignment = 16}} : {mt}, vector<{v}xf32>")
            t.emit(f"vector.store {self._widen(x, v)}, {at} {{alignment = 16}} : {mt}, "
                   f"vector<{v}xf32>")

    def _split(self, val, kl, fl, contig_is_k, v):
        t = self.t
        out = []
        for j in range(v):
            x = t.op(f"vector.extract {val}[{j}] : {self.se} from vector<{v}x{self.se}>")
            off = t.add(kl if contig_is_k else fl, t.c(j)) if j else (kl if contig_is_k else fl)
            out.append((off, fl, x) if contig_is_k else (kl, off, x))
        return out

    def stage_stores(self, pending: list) -> None:
        t = self.t
        for which, elems, v, (kl, fl, val), contig_is_k in pending:
            mt = self.as_t if which == "a" else self.bs_t
            smem = "%As" if which == "a" else "%Bs"
            inner_is_k = self.smem_a_ik if which == "a" else self.smem_b_jk
            if v > 1 and inner_is_k == contig_is_k:  # the vector lies along smem's inner dimension
                t.emit(f"vector.store {val}, {smem}[{self.smem_index(which, kl, fl)}] "
                       f"{{alignment = {self._itemsize() * v}}} : {mt}, vector<{v}x{self.se}>")
                continue
            for k_, f_, x in elems:
                t.emit(f"memref.store {x}, {smem}[{self.smem_index(which, k_, f_)}] : {mt}")

    def _bounds(self, g: str, lim: int, tile: int) -> list:
        """[g < lim] when tiles overhang the edge of a dimension of size lim."""
        if lim % tile == 0:
            return []
        return [self.t.op(f"arith.cmpi ult, {g}, {self.t.c(lim)} : index")]

    def _load(self, mem: str, addr: str, conds: list, v: int) -> str:
        """The operand value(s) at flat address addr in the compute type (0 when outside)."""
        t = self.t
        el = elem_type(self.dtype)
        mt = f"memref<{self.batch * self.k * (self.m if mem == '%a' else self.n)}x{el}>"
        ty = f"vector<{v}x{el}>" if v > 1 else el
        text = (f"vector.load {mem}[{addr}] {{alignment = {self._itemsize() * v}}} : {mt}, {ty}"
                if v > 1 else f"memref.load {mem}[{addr}] : {mt}")
        if conds:
            ok = conds[0]
            for c in conds[1:]:
                ok = t.op(f"arith.andi {ok}, {c} : i1")
            res = t.fresh()
            t.emit(f"{res} = scf.if {ok} -> ({ty}) {{")
            t.indent += 2
            x = t.op(text)
            t.emit(f"scf.yield {x} : {ty}")
            t.indent -= 2
            t.emit("} else {")
            lit = "0" if el == "i16" else "0.0"
            zero = t.c(f"dense<{lit}>", ty) if v > 1 else t.c(lit, el)
            t.emit(f"  scf.yield {zero} : {ty}")
            t.emit("}")
            x = res
        else:
            x = t.op(text)
        return self._widen(x, v)

    def _itemsize(self) -> int:
        return {dtypes.float16: 2, dtypes.bfloat16: 2, dtypes.float64: 8}.get(self.dtype, 4)

    def _widen(self, x: str, v: int) -> str:
        t = self.t
        vt = (lambda e: f"vector<{v}x{e}>") if v > 1 else (lambda e: e)
        def cst(val, e):
            return t.c(f"dense<{val}>", vt(e)) if v > 1 else t.c(val, e)

        if self.half:  # the tensor cores take the 16-bit values as they are
            return x
        if self.dtype == dtypes.float16:
            return t.op(f"arith.extf {x} : {vt('f16')} to {vt('f32')}")
        if self.dtype == dtypes.bfloat16:  # bf16 bits << 16 are the float32 value (exact)
            w = t.op(f"arith.extui {x} : {vt('i16')} to {vt('i32')}")
            s = t.op(f"arith.shli {w}, {cst(16, 'i32')} : {vt('i32')}")
            return t.op(f"arith.bitcast {s} : {vt('i32')} to {vt('f32')}")
        if self.tf32:  # round to TF32 (10 mantissa bits): ties away from zero, as cvt.rna
            bits = t.op(f"arith.bitcast {x} : {vt('f32')} to {vt('i32')}")
            r = t.op(f"arith.addi {bits}, {cst(0x1000, 'i32')} : {vt('i32')}")
            r = t.op(f"arith.andi {r}, {cst(-0x2000, 'i32')} : {vt('i32')}")
            r = t.op(f"arith.bitcast {r} : {vt('i32')} to {vt('f32')}")
            # NaNs stay NaN for the tensor cores, which read the upper 19 bits: quieted (bit
            # 22 set), since 0x7fffffff + 0x1000 would carry into the sign bit (-0.0) and a NaN
            # whose payload lies in the low 13 bits alone would read as infinity.
            quiet = t.op(f"arith.ori {bits}, {cst(0x400000, 'i32')} : {vt('i32')}")
            quiet = t.op(f"arith.bitcast {quiet} : {vt('i32')} to {vt('f32')}")
            nan = t.op(f"arith.cmpf uno, {x}, {x} : {vt('f32')}")
            sel = f"{vt('i1')}, " if v > 1 else ""
            return t.op(f"arith.select {nan}, {quiet}, {r} : {sel}{vt('f32')}")
        return x
