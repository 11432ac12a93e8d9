"""Column reductions on the GPU: loop kernels that reduce axes other than the last one (bias and
layer-norm weight gradients: sums over the batch).

One block covers 32 consecutive positions of the last (kept) axis, one per lane, so every warp
reads 128 contiguous bytes per row; its 8 warps split the reduced positions (warp g takes
g, g + 8, ..., four per loop iteration with their loads issued together). The 8 partial
results of a column meet in shared memory and every thread of the column combines them in
warp order, so all hold the column's result for the next phase. Lanes
past the last column compute on the last column (in bounds) and store nothing.
"""

from __future__ import annotations

import numpy as np

from nova.compiler.codegen.builder import Value
from nova.compiler.codegen.cpu.index import _reshape_map
from nova.core import dtypes

LANES = 32
GROUPS = 8
UNROLL = 4  # reduced positions per warp and loop iteration


class ColumnReductionMixin:
    """Part of GPULoopEmitter (codegen/cuda/loops.py)."""

    @staticmethod
    def is_column_kernel(S, A) -> bool:
        return bool(A) and A[-1] != len(S) - 1 and S[-1] >= LANES

    def _emit_columns(self) -> None:
        b, S, A = self.b, self.S, self.A
        self.W, self.vec_iv = 0, None
        kept = [i for i in range(len(S)) if i not in A]
        cols = S[-1]
        tiles = -(-cols // LANES)
        outer_sizes = [S[i] for i in kept[:-1]]
        outer = int(np.prod(outer_sizes, dtype=np.int64))
        self.block, self.grid = (LANES * GROUPS, 1, 1), (outer * tiles, 1, 1)
        bid = b.op("gpu.block_id x", "index", 0)
        self.tid = b.op("gpu.thread_id x", "index", 0)
        lane = b.rem(self.tid, b.const(LANES, "index"))
        self.group = b.div(self.tid, b.const(LANES, "index"))
        col = b.add(b.mul(b.rem(bid, b.const(tiles, "index")), b.const(LANES, "index")), lane)
        # Lanes past the edge read the last column (valid addresses); their results are dropped.
        self.col_ok = b.cmp("lt", col, b.const(cols, "index")) if cols % LANES else None
        col_in = b.min(col, b.const(cols - 1, "index")) if cols % LANES else col
        o_flat = b.div(bid, b.const(tiles, "index"))
        o_idx = self._unflatten(o_flat, outer_sizes) if outer_sizes else []
        ivs = dict(zip(kept, o_idx + [col_in], strict=True))
        self.kept_names = [ivs[i].name for i in kept]
        self.kept_sizes = [S[i] for i in kept]
        self.red_sizes = [S[i] for i in A]
        self.red_total = int(np.prod(self.red_sizes, dtype=np.int64))
        self.lane = lane
        for level in self._levels():
            self._column_phase(level, ivs)
        row_shape = tuple(S[i] for i in kept)
        full = [(n, v) for n, v in self.out_args if v.type.shape == S]
        row_outs = [(n, v) for n, v in self.out_args
                    if v.type.shape == row_shape and v.type.shape != S]
        # Full-size outputs of another shape: the rows split into (parts, rows per part) by
        # column_split.py, stored at the reshaped index.
        views = [(n, v) for n, v in self.out_args if v.type.shape not in (S, row_shape)
                 and v.type.size == int(np.prod(S, dtype=np.int64)) and v.type.shape
                 and v.type.shape[-1] == S[-1]]
        if len(full) + len(row_outs) + len(views) != len(self.out_args):
            raise AssertionError(f"column kernel {self.name}: an output of no known shape")
        if full or views:
            def store(positions, _):
                stores = []
                for m in positions:
                    idx = {**ivs, **m}
                    at = tuple(idx[i] for i in range(len(S)))
                    stores.append((full, idx, S))
                    for n, v in views:
                        where = _reshape_map(b, at, v.type.shape, S)
                        stores.append(([(n, v)], dict(enumerate(where)), v.type.shape))
                for outs, idx, shape in stores:  # every position's loads before any store
                    for _, v in outs:
                        self.value(v, tuple(idx[i] for i in range(len(shape))))
                for outs, idx, shape in stores:
                    if outs:
                        self._guarded(lambda o=outs, i=idx, s=shape: self._store_outputs(o, i, s))

            self._group_positions("o", None, store)
        if row_outs:
            first = b.cmp("eq", self.group, b.const(0, "index"))
            self._open(f"scf.if {first.name} {{")
            self._guarded(lambda: self._store_outputs(
                row_outs, {k: ivs[i] for k, i in enumerate(kept)}, row_shape, row=True))
            self._end()

    def _guarded(self, body) -> None:
        if self.col_ok is None:
            body()
            return
        self._open(f"scf.if {self.col_ok.name} {{")
        body()
        self._end()

    def _group_positions(self, tag: str, accs, body):
        """Runs body(positions, accs) over this warp's reduced positions (group, group + GROUPS,
        ...) in order, UNROLL per loop iteration, then the remainder one at a time: each warp
        otherwise has one row's loads in flight, and a column kernel is latency-bound (in PTX
        the loop is not unrolled). positions: {axis: index} maps; body returns the new
        accumulators (None without). Returns the final accumulators."""
        b = self.b
        total, span = self.red_total, GROUPS * UNROLL
        main = total // span * span
        loops = [(tag, self.group, main, span, UNROLL)] if main else []
        if main < total:
            lo = b.add(self.group, b.const(main, "index")) if main else self.group
            loops.append((f"{tag}t" if main else tag, lo, total, GROUPS, 1))
        for t, lo, hi, step, n in loops:
            res = self._open_for(t, lo, hi, step, accs)
            first = self.cur
            positions = []
            for u in range(n):
                self.cur = b.add(first, b.const(GROUPS * u, "index")) if u else first
                positions.append(self._column_reduced_index())
            if accs:
                new = body(positions, [Value(f"%{t}_a{k}", a.dtype, a.width)
                                       for k, a in enumerate(accs)])
                self._end(new)
                accs = [Value(f"{res}#{k}", a.dtype, a.width) for k, a in enumerate(accs)]
            else:
                body(positions, None)
                self._end()
        return accs

    def _column_reduced_index(self) -> dict:
        return dict(zip(self.A, self._unflatten(self.cur, list(self.red_sizes)), strict=True))

    def _column_phase(self, reds, ivs) -> None:
        b = self.b
        inits, counts = [], []
        for r in reds:
            init = self._red_init(r, 0)
            inits += init
            counts.append(len(init))
        self.phase_count += 1

        def combine(positions, accs):
            maps = [{**ivs, **m} for m in positions]
            for m in maps:  # every position's loads before the first combine
                idx = tuple(m[i] for i in range(len(self.S)))
                for r in reds:
                    self.value(r.inputs[0], idx)
            for m in maps:
                accs = self._combine_at(m, reds, counts, accs)
            return accs

        finals = self._group_positions(f"r{self.phase_count}", inits, combine)
        pos = 0
        for r, n in zip(reds, counts, strict=True):
            part = finals[pos:pos + n]
            pos += n
            if r.prim.name in ("argmax", "argmin"):
                _, at = self._group_reduce(part, lambda x, y, r=r: self._arg_pair(r, x, y))
                self.row_vals[id(r.outputs[0])] = b.cast(at, r.outputs[0].type.dtype)
                continue
            out_t = r.outputs[0].type.dtype

            def combine(x, y, r=r, out_t=out_t):
                b.default_dtype = out_t
                return [r.prim.kernel.combine(b, x[0], y[0])]

            (acc,) = self._group_reduce(part, combine)
            self.row_vals[id(r.outputs[0])] = acc

    def _group_slots(self, vals: list) -> list:
        """(name, memref type, element type) of a GROUPS x LANES shared buffer for each value.
        The reductions of a kernel take turns with the same buffers (one per element type and
        position): sibling fusion may merge dozens of column reductions over the same data into
        one kernel, and a buffer each would pass the 48 KiB of shared memory a block may use."""
        pool = getattr(self, "_column_slots", None)
        if pool is None:
            pool = self._column_slots = {}
        used: dict[str, int] = {}
        slots = []
        for v in vals:
            el = "i8" if v.elem == "i1" else v.elem
            mt = f"memref<{GROUPS}x{LANES}x{el}, #gpu.address_space<workgroup>>"
            k = used[el] = used.get(el, -1) + 1
            names = pool.setdefault(el, [])
            if k == len(names):
                names.append(f"%wg{len(self.workgroup)}")
                # 16-byte aligned, as LLVM may vectorize the reads (see block_reduce.py).
                self.workgroup.append(f"{names[k]} : {mt} {{llvm.align = 16 : i64}}")
                self.shared_bytes = -(-self.shared_bytes // 16) * 16 + \
                    GROUPS * LANES * max(1, int(el[1:]) // 8)
            slots.append((names[k], mt, el))
        return slots

    def _group_reduce(self, vals: list, combine) -> list:
        """Combines the GROUPS partial values of each column through shared memory; every thread
        of the column gets the result (combined in group order)."""
        b = self.b
        slots = self._group_slots(vals)
        if getattr(self, "_column_reduces", 0):
            b.emit("gpu.barrier")  # the previous reduction has read the buffers written next
        self._column_reduces = getattr(self, "_column_reduces", 0) + 1
        for v, (name, mt, el) in zip(vals, slots, strict=True):
            x = b.op(f"arith.extui {v.name} : i1 to i8", dtypes.uint8, 0) if el != v.elem else v
            b.emit(f"memref.store {x.name}, {name}[{self.group.name}, {self.lane.name}] : {mt}")
        b.emit("gpu.barrier")
        out = None
        for g in range(GROUPS):
            got = []
            for v, (name, mt, el) in zip(vals, slots, strict=True):
                x = b.op(f"memref.load {name}[{b.const(g, 'index').name}, {self.lane.name}] : {mt}",
                         v.dtype, 0)
                if el != v.elem:
                    x = b.op(f"arith.trunci {x.name} : i8 to i1", v.dtype, 0)
                got.append(Value(x.name, v.dtype, 0))
            out = got if out is None else combine(out, got)
        return out
