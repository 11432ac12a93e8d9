"""Cross-thread combining for GPU row kernels: warp shuffles, one shared-memory slot per warp, and
NumPy's rules for (value, position) pairs of argmax/argmin."""

from __future__ import annotations

import numpy as np

from nova.compiler.codegen.builder import Value
from nova.compiler.codegen.cpu.row_reduction import _POS
from nova.core import dtypes

WARP = 32


def _shuffle_type(elem: str) -> tuple[str, str | None]:
    """(the 32/64-bit type a value is shuffled as, how it gets there); nvvm.shfl.sync takes only
    32-bit values, 64-bit ones are split by the lowering."""
    if elem in ("f32", "i32", "f64", "i64"):
        return elem, None
    if elem == "f16":
        return "f32", "float"
    return "i32", "int"  # i1, i8, i16 (bf16 bits)


class BlockReduceMixin:
    """Part of GPULoopEmitter (codegen/cuda/loops.py); needs tid, nwarps, workgroup."""

    def _shuffle(self, v: Value, offset: int) -> Value:
        b = self.b
        st, how = _shuffle_type(v.elem)
        x = v
        if how == "float":
            x = b.op(f"arith.extf {v.name} : {v.elem} to f32", dtypes.float32, 0)
        elif how == "int":
            x = b.op(f"arith.extui {v.name} : {v.elem} to i32", dtypes.uint32, 0)
        off = b.op(f"arith.constant {offset} : i32", dtypes.int32, 0)
        width = b.op(f"arith.constant {WARP} : i32", dtypes.int32, 0)
        name = b.fresh()
        b.emit(f"{name}, {name}_ok = gpu.shuffle xor {x.name}, {off.name}, {width.name} : {st}")
        if how == "float":
            return b.op(f"arith.truncf {name} : f32 to {v.elem}", v.dtype, 0)
        if how == "int":
            return b.op(f"arith.trunci {name} : i32 to {v.elem}", v.dtype, 0)
        return Value(name, v.dtype, 0)

    def _block_reduce(self, vals: list, combine) -> list:
        """Combines per-thread scalars over the block: butterfly shuffles within each warp, then
        one shared-memory slot per warp read back by every thread (all threads get the result)."""
        b = self.b
        for offset in (16, 8, 4, 2, 1):
            vals = combine(vals, [self._shuffle(v, offset) for v in vals])
        if self.nwarps == 1:
            return vals
        lane = b.rem(self.tid, b.const(WARP, "index"))
        warp = b.div(self.tid, b.const(WARP, "index"))
        smems = []
        for v in vals:
            el = "i8" if v.elem == "i1" else v.elem
            name = f"%wg{len(self.workgroup)}"
            mt = f"memref<{self.nwarps}x{el}, #gpu.address_space<workgroup>>"
            # 16-byte aligned: LLVM reads the slots back as 16-byte vectors (ld.shared.v4),
            # while MLIR would place the buffer at its element's alignment.
            self.workgroup.append(f"{name} : {mt} {{llvm.align = 16 : i64}}")
            self.shared_bytes = -(-self.shared_bytes // 16) * 16 + \
                self.nwarps * max(1, int(el[1:]) // 8)
            smems.append((name, mt, el))
        first = b.cmp("eq", lane, b.const(0, "index"))
        self._open(f"scf.if {first.name} {{")
        for v, (name, mt, el) in zip(vals, smems, strict=True):
            x = b.op(f"arith.extui {v.name} : i1 to i8", dtypes.uint8, 0) if el != v.elem else v
            b.emit(f"memref.store {x.name}, {name}[{warp.name}] : {mt}")
        self._end()
        b.emit("gpu.barrier")
        out = None
        for w in range(self.nwarps):
            got = []
            for v, (name, mt, el) in zip(vals, smems, strict=True):
                x = b.op(f"memref.load {name}[{b.const(w, 'index').name}] : {mt}", v.dtype, 0)
                if el != v.elem:
                    x = b.op(f"arith.trunci {x.name} : i8 to i1", v.dtype, 0)
                got.append(Value(x.name, v.dtype, 0))
            out = got if out is None else combine(out, got)
        return out

    def _arg_pair(self, r, a: list, c: list) -> list:
        """The better of two (value, position) pairs: a strictly better value, or an equal one
        at a smaller position; a NaN beats any number, and between NaNs the smaller position."""
        b = self.b
        (va, ia), (vc, ic) = a, c
        better = b.cmp("gt" if r.prim.name == "argmax" else "lt", vc, va)
        earlier = b.cmp("lt", ic, ia)
        tie = b.and_(b.cmp("eq", vc, va), earlier)
        if va.is_float:
            na, nc = b.isnan(va), b.isnan(vc)
            better = b.or_(better, b.and_(nc, b.not_(na)))
            tie = b.or_(tie, b.and_(b.and_(na, nc), earlier))
        take = b.or_(better, tie)
        return [b.select(take, vc, va), b.select(take, ic, ia)]

    def _arg_horizontal(self, r, acc_v: Value, acc_i: Value) -> tuple:
        """(value, position) over the lanes of vector accumulators (as the CPU's finish step)."""
        if not acc_v.width:
            return acc_v, acc_i
        b = self.b
        wide = b._wide(acc_v)
        kinds = ("maximumf", "maxsi") if r.prim.name == "argmax" else ("minimumf", "minsi")
        best = self._horizontal(kinds, wide)
        hit = b.cmp("eq", wide, best)
        if wide.is_float:
            hit = b.or_(hit, b.and_(b.isnan(wide), b.splat(b.isnan(best), wide.width)))
        far = b.const(np.iinfo(np.int32).max, _POS, acc_i.width)
        pos = self._horizontal(("minsi", "minsi"), b.select(hit, acc_i, far))
        return b._narrow(best, acc_v.dtype), pos
