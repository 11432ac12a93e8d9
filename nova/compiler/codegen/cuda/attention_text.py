"""The MLIR text helpers behind the flash-attention GPU kernels (codegen/cuda/attention.py): tile
geometry, typed scalar/vector arithmetic, loops with carried values, tile loads from global into
shared memory, row dot products and the masked logits."""

from __future__ import annotations

import math

import numpy as np

from nova.compiler.codegen.builder import elem_type, float_literal
from nova.compiler.codegen.cuda.staging import Text
from nova.core import dtypes

# Threads per row of a tile (a query row forward, a key row backward): 8 consecutive lanes of one
# warp, so a row's max and sum combine with three butterfly shuffles.
GROUP = 8
# (query rows, keys) per block forward and (keys, query rows) backward, largest first; the first
# whose shared memory fits SHARED_LIMIT is used (static shared memory: no opt-in needed).
FWD_TILES = ((32, 32), (32, 16), (16, 16), (16, 8), (8, 8))
BWD_TILES = ((32, 32), (32, 16), (16, 16), (16, 8), (8, 8))
SHARED_LIMIT = 48 * 1024
WG = "#gpu.address_space<workgroup>"
DTYPES = (dtypes.float32, dtypes.float64)


def widths(dtype, d: int, dv: int) -> tuple:
    """(itemsize, vector width along D, along Dv, row padding in elements): 16-byte vectors when
    the head dim is a multiple of their width, else scalars; rows padded by 16 bytes so the 4
    rows a warp reads at once fall in different shared-memory banks."""
    size = np.dtype(dtype).itemsize
    w = 16 // size
    return size, (w if d % w == 0 else 1), (w if dv % w == 0 else 1), w


def row_length(dim: int, w: int, pad: int) -> int:
    """Elements per shared-memory row of a tile whose columns GROUP threads split in w-wide
    chunks (the last thread's chunks may reach past dim: they are read, never stored); pad is
    16 bytes in elements."""
    n = max(dim, -(-dim // (w * GROUP)) * w * GROUP) + pad
    return -(-n // pad) * pad  # whole 16-byte units: every buffer stays 16-byte aligned


def forward_tiles(dtype, d: int, dv: int):
    """(BQ, BK) of the forward kernel, or None when no tile fits in shared memory."""
    size, wd, wv, pad = widths(dtype, d, dv)
    for bq, bk in FWD_TILES:
        elems = (bq + bk) * row_length(d, wd, pad) + bk * row_length(dv, wv, pad) + bq * (bk + pad)
        if elems * size <= SHARED_LIMIT:
            return bq, bk
    return None


def backward_tiles(dtype, d: int, dv: int):
    """(BK, BQ) of the backward kernel, or None when no tile fits in shared memory."""
    size, wd, wv, pad = widths(dtype, d, dv)
    for bk, bq in BWD_TILES:
        elems = ((bk + bq) * (row_length(d, wd, pad) + row_length(dv, wv, pad))
                 + 2 * bk * (bq + pad) + 2 * bq)
        if elems * size <= SHARED_LIMIT:
            return bk, bq
    return None


def unsupported(dtype, d: int, dv: int) -> str | None:
    """Why the GPU has no flash-attention kernel for these operands, or None when it has."""
    if dtype not in DTYPES:
        return f"dtype {np.dtype(dtype).name} (float32 and float64 are supported)"
    if forward_tiles(dtype, d, dv) is None or backward_tiles(dtype, d, dv) is None:
        return f"head dims D={d}, Dv={dv} leave no tile within {SHARED_LIMIT} B of shared memory"
    return None


class FlashText:
    """Typed MLIR text for one kernel (element type `el`, index arithmetic, loops)."""

    def __init__(self, dtype):
        self.t = Text()
        self.el = elem_type(dtype)
        self.workgroup: list[str] = []
        self.shared_bytes = 0
        self.size = np.dtype(dtype).itemsize

    # --- values ---------------------------------------------------------------------------------
    def op(self, text: str) -> str:
        return self.t.op(text)

    def emit(self, text: str) -> None:
        self.t.emit(text)

    def ci(self, v: int) -> str:
        return self.t.c(int(v))

    def ty(self, w: int) -> str:
        return f"vector<{w}x{self.el}>" if w > 1 else self.el

    def cf(self, v: float, w: int = 1) -> str:
        lit = float_literal(float(v), self.el)
        if w > 1:
            if not math.isfinite(v):
                raise ValueError("vector constants must be finite")
            return self.t.c(f"dense<{lit}>", self.ty(w))
        return self.t.c(lit, self.el)

    def f(self, name: str, a: str, b: str, w: int = 1) -> str:
        return self.op(f"arith.{name} {a}, {b} : {self.ty(w)}")

    def fma(self, a: str, b: str, c: str, w: int = 1) -> str:
        dialect = "vector" if w > 1 else "math"
        return self.op(f"{dialect}.fma {a}, {b}, {c} : {self.ty(w)}")

    def exp(self, x: str) -> str:
        return self.op(f"math.exp {x} : {self.el}")

    def splat(self, x: str, w: int) -> str:
        return x if w == 1 else self.op(f"vector.broadcast {x} : {self.el} to {self.ty(w)}")

    def hsum(self, x: str, w: int) -> str:
        if w == 1:
            return x
        return self.op(f"vector.reduction <add>, {x} : {self.ty(w)} into {self.el}")

    def select(self, c: str, a: str, b: str, w: int = 1) -> str:
        return self.op(f"arith.select {c}, {a}, {b} : {self.ty(w)}")

    def cmpf(self, pred: str, a: str, b: str) -> str:
        return self.op(f"arith.cmpf {pred}, {a}, {b} : {self.el}")

    def cmpi(self, pred: str, a: str, b: str) -> str:
        return self.op(f"arith.cmpi {pred}, {a}, {b} : index")

    def and_(self, a: str, b: str) -> str:
        return self.op(f"arith.andi {a}, {b} : i1")

    def i(self, name: str, a: str, b) -> str:
        """Index arithmetic; an int operand becomes a constant."""
        return self.t.idx(name, a, self.ci(b) if isinstance(b, int) else b)

    def add(self, *xs) -> str:
        out = xs[0]
        for x in xs[1:]:
            if x != 0:
                out = self.i("addi", out, x)
        return out

    def mul(self, a: str, k: int) -> str:
        return a if k == 1 else self.i("muli", a, k)

    def shuffle(self, x: str, offset: int) -> str:
        name = self.t.fresh()
        off, width = self.t.c(offset, "i32"), self.t.c(32, "i32")
        self.emit(f"{name}, {name}_ok = gpu.shuffle xor {x}, {off}, {width} : {self.el}")
        return name

    def group_reduce(self, x: str, kind: str) -> str:
        """x combined (maximumf / addf) over the GROUP lanes of a row."""
        offset = GROUP // 2
        while offset:
            x = self.f(kind, x, self.shuffle(x, offset))
            offset //= 2
        return x

    # --- structure ------------------------------------------------------------------------------
    def shared(self, name: str, *shape: int, el: str | None = None) -> str:
        """A workgroup buffer %name of `shape`; returns its memref type."""
        mt = f"memref<{'x'.join(str(s) for s in shape)}x{el or self.el}, {WG}>"
        # 16-byte aligned (vector accesses); MLIR's default is the element's alignment.
        self.workgroup.append(f"%{name} : {mt} {{llvm.align = 16 : i64}}")
        self.shared_bytes += int(np.prod(shape)) * self.size
        return mt

    def open_for(self, lo: str, hi: str, inits: list, types: list) -> tuple:
        """Opens `scf.for` from lo to hi (step 1) carrying inits; (induction variable, carried
        names, result name or None)."""
        iv = self.t.fresh() + "_i"
        res = self.t.fresh() if inits else None
        if inits:
            carried = [f"{iv}_a{k}" for k in range(len(inits))]
            args = ", ".join(f"{c} = {x}" for c, x in zip(carried, inits, strict=True))
            self.emit(f"{res}:{len(inits)} = scf.for {iv} = {lo} to {hi} step {self.ci(1)} "
                      f"iter_args({args}) -> ({', '.join(types)}) {{")
        else:
            carried = []
            self.emit(f"scf.for {iv} = {lo} to {hi} step {self.ci(1)} {{")
        self.t.indent += 2
        return iv, carried, res

    def close_for(self, yields: list, types: list, res: str | None) -> list:
        if yields:
            self.emit(f"scf.yield {', '.join(yields)} : {', '.join(types)}")
        self.t.indent -= 2
        self.emit("}")
        return [f"{res}#{k}" for k in range(len(yields))] if res else []

    def open_if(self, cond: str | None) -> None:
        if cond is not None:
            self.emit(f"scf.if {cond} {{")
            self.t.indent += 2

    def close_if(self, cond: str | None) -> None:
        if cond is not None:
            self.t.indent -= 2
            self.emit("}")

    # --- memory ---------------------------------------------------------------------------------
    def load(self, mem: str, idx: str, mt: str, w: int) -> str:
        if w == 1:
            return self.op(f"memref.load {mem}[{idx}] : {mt}")
        return self.op(f"vector.load {mem}[{idx}] {{alignment = {w * self.size}}} : {mt}, "
                       f"{self.ty(w)}")

    def store(self, val: str, mem: str, idx: str, mt: str, w: int) -> None:
        if w == 1:
            self.emit(f"memref.store {val}, {mem}[{idx}] : {mt}")
        else:
            self.emit(f"vector.store {val}, {mem}[{idx}] {{alignment = {w * self.size}}} : {mt}, "
                      f"{self.ty(w)}")

    def tf32_round(self, x: str, w: int = 1) -> str:
        """float32 x (w-wide) rounded to TF32: 10 mantissa bits, ties away from zero (as
        cvt.rna.tf32.f32; the tensor-core kernels' operand rounding). NaNs stay NaN for the
        tensor cores (which read the upper 19 bits): quieted, since the carry of 0x7fffffff +
        0x1000 would reach the sign bit (-0.0) and a payload in the low 13 bits alone would
        read as infinity."""
        it, ft = (f"vector<{w}xi32>", f"vector<{w}xf32>") if w > 1 else ("i32", "f32")
        cst = (lambda v: self.t.c(f"dense<{v}>", it)) if w > 1 else (lambda v: self.t.c(v, "i32"))
        raw = self.op(f"arith.bitcast {x} : {ft} to {it}")
        bits = self.op(f"arith.addi {raw}, {cst(0x1000)} : {it}")
        bits = self.op(f"arith.andi {bits}, {cst(-0x2000)} : {it}")
        rounded = self.op(f"arith.bitcast {bits} : {it} to {ft}")
        quiet = self.op(f"arith.ori {raw}, {cst(0x400000)} : {it}")
        quiet = self.op(f"arith.bitcast {quiet} : {it} to {ft}")
        nan = self.op(f"arith.cmpf uno, {x}, {x} : {ft}")
        return self.op(f"arith.select {nan}, {quiet}, {rounded} : "
                       f"{f'vector<{w}xi1>, ' if w > 1 else ''}{ft}")

    def load_tile(self, smem: str, smt: str, mem: str, mt: str, n: str, row0: str,
                  rows_total: int, dim: int, w: int, tile_rows: int, threads: int, tid: str,
                  tf32: bool = False):
        """Rows row0.. of batch element n of a (rows_total, dim) operand into the shared tile
        (tile_rows, >= dim), w-wide chunks spread over the block; rows past the end read 0;
        rounded to TF32 when `tf32`."""
        cpr = dim // w
        total = tile_rows * cpr
        base = self.mul(n, rows_total * dim)
        for u in range(-(-total // threads)):
            e = self.add(tid, u * threads)
            guard = self.cmpi("ult", e, self.ci(total)) if (u + 1) * threads > total else None
            self.open_if(guard)
            row = self.i("divui", e, cpr)
            col = self.mul(self.i("remui", e, cpr), w)
            g = self.add(row0, row)
            ok = self.cmpi("ult", g, self.ci(rows_total))
            gc = self.i("minui", g, rows_total - 1)
            val = self.load(mem, self.add(base, self.mul(gc, dim), col), mt, w)
            val = self.select(ok, val, self.cf(0.0, w), w)
            if tf32:
                val = self.tf32_round(val, w)
            self.store(val, smem, f"{row}, {col}", smt, w)
            self.close_if(guard)

    def dots(self, a: str, amt: str, a_row: str, b: str, bmt: str, b_rows: list, dim: int,
             w: int) -> list:
        """[sum over the first dim columns of a[a_row, :] * b[row, :] for row in b_rows]
        (shared tiles; FMA on w-wide chunks, summed across the chunk at the end)."""
        zero = self.cf(0.0, w)
        iv, accs, res = self.open_for(self.ci(0), self.ci(dim // w), [zero] * len(b_rows),
                                      [self.ty(w)] * len(b_rows))
        col = self.mul(iv, w)
        x = self.load(a, f"{a_row}, {col}", amt, w)
        new = [self.fma(x, self.load(b, f"{r}, {col}", bmt, w), acc, w)
               for r, acc in zip(b_rows, accs, strict=True)]
        out = self.close_for(new, [self.ty(w)] * len(b_rows), res)
        return [self.hsum(o, w) for o in out]
