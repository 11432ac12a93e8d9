"""Row-reduction phases of CPU loop kernels (a mixin of LoopKernelEmitter).

Reductions are grouped into levels (a level reads only results of earlier levels); each level is
one inner loop nest over the reduced axes carrying every reduction's accumulators (vectors along
the last axis, reduced horizontally at the end; in a column reduction, which keeps the last axis,
one lane per column and no horizontal step), whose results become per-row values. argmax and
argmin carry (value, position) pairs with NumPy's tie and NaN rules. When the single full-shape
output is computed from values the last level reduces (softmax: e / sum(e)), those values are
stored in the output during the phase and reloaded in the final pass (`_choose_stash`). Costly
values (exp, tanh, log, ...) that several passes over a row read (softmax's backward: the sum, the
dot with the cotangent and the output all read e = exp(x - max)) are kept by the first of them in
a per-thread row buffer and loaded by the others (`_choose_row_cache`).
"""

from __future__ import annotations

import numpy as np

from nova.compiler.codegen.builder import Value, elem_type
from nova.compiler.codegen.cpu.index import mem_elem, memref_type
from nova.compiler.fuse import ARG_REDUCTIONS as _ARG_REDUCTIONS
from nova.compiler.fuse import is_reduction
from nova.core import dtypes


_HORIZONTAL = {"reduce_sum": ("add", "add"), "reduce_max": ("maximumf", "maxsi"),
               "reduce_min": ("minimumf", "minsi"), "reduce_prod": ("mul", "mul")}
# The position's type inside the kernel (axis sizes are far below 2**31); cast on output.
_POS = dtypes.int32


def _extreme(dtype, lowest: bool):
    """The start value of an arg-reduction: the lowest (argmax) or highest (argmin) value."""
    d = np.dtype(dtype)
    if d == dtypes.bool_:
        return not lowest
    if dtypes.is_float(d):
        return -np.inf if lowest else np.inf
    return int(np.iinfo(d).min if lowest else np.iinfo(d).max)


class RowReductionMixin:
    """Reduction levels and phases; needs the emitter's builder `b`, program `prog`, `S`, `A`, `W`,
    `value()`, `_for()` and `_end()`."""

    def _levels(self):
        """Reductions grouped into levels: a level only reads results of earlier levels."""
        memo: dict[int, int] = {}

        def depth(v):
            if id(v) in memo:
                return memo[id(v)]
            e = self.prod.get(id(v))
            d = 0
            if e is not None:
                d = max((depth(u) for u in e.inputs), default=0)
                d += 1 if is_reduction(e) else 0
            memo[id(v)] = d
            return d

        out: dict[int, list] = {}
        for r in self.prog.eqns:
            if is_reduction(r):
                out.setdefault(depth(r.inputs[0]), []).append(r)
        return [out[k] for k in sorted(out)]

    def _choose_stash(self, levels):
        """(value, output name, output type) when the kernel's single full-shape output is
        computed from a value that the last reduction level also reduces (softmax: e / sum(e)):
        that value is then stored once and reloaded, not computed twice."""
        full = [(n, v) for n, v in self.out_args if v.type.shape == self.S]
        if len(full) != 1 or not levels:
            return None
        name, out = full[0]
        if not dtypes.is_float(out.type.dtype) or id(out) in self.arg:
            return None
        for r in levels[-1]:
            v = r.inputs[0]
            if v.type.shape != self.S or v.type.dtype != out.type.dtype or id(v) in self.arg:
                continue
            if r.prim.name in _ARG_REDUCTIONS:
                continue
            if self._reaches(out, v) and self._read_in_place(v):
                return (v, name, out.type)
        return None

    def _read_in_place(self, v) -> bool:
        """Whether every read of v in the kernel is at the index being computed: v reaches the
        reductions and outputs only through full-shape elementwise ops. A transpose, flip or
        reshape on the way reads it at other indices (another row, or columns of this row that
        a buffer holding v for the current row does not hold yet): then v can be neither stashed
        in the output nor kept in a row buffer (found by review: e.T * t read the row buffer)."""
        consumers: dict[int, list] = {}
        for e in self.prog.eqns:
            for u in e.inputs:
                consumers.setdefault(id(u), []).append(e)
        stack, seen = [v], set()
        while stack:
            u = stack.pop()
            if id(u) in seen:
                continue
            seen.add(id(u))
            for e in consumers.get(id(u), ()):
                if is_reduction(e):
                    continue
                if type(e.prim.kernel).__name__ != "Elementwise" or \
                        any(o.type.shape != self.S for o in e.outputs):
                    return False
                stack.extend(e.outputs)
        return True

    def _choose_row_cache(self, levels, limit: int) -> dict:
        """{id(v): (v, first pass)} for the costly elementwise values (exp, tanh, log, ...:
        `costly(name)`) that two or more passes over a row evaluate: the reduction phases and the
        final pass storing full-shape outputs. The first pass stores such a value in a row
        buffer and the later ones load it (softmax's backward evaluated exp four times per
        element). Only for row reductions over the last axis, vectorized, float32/float64
        values, rows of at most `limit` elements; a value the stash already keeps is left out."""
        S, A = self.S, self.A
        if not A or self.col or tuple(A) != (len(S) - 1,) or not self.W or S[-1] > limit:
            return {}
        stash = getattr(self, "stash", None)
        passes = [[r.inputs[0] for r in level] for level in levels]
        passes.append([v for _, v in self.out_args if v.type.shape == S])
        uses: dict[int, tuple] = {}
        for p, roots in enumerate(passes):
            seen: set[int] = set()
            stack = list(roots)
            while stack:
                v = stack.pop()
                if id(v) in seen or id(v) in self.arg or v.type.shape != S:
                    continue
                seen.add(id(v))
                if stash is not None and p == len(passes) - 1 and v is stash[0]:
                    continue  # the final pass reloads it from the output
                e = self.prod.get(id(v))
                if e is None or type(e.prim.kernel).__name__ != "Elementwise":
                    continue
                if self.costly(e.prim.name) and len(e.outputs) == 1 and \
                        v.type.dtype in (dtypes.float32, dtypes.float64):
                    uses.setdefault(id(v), (v, []))[1].append(p)
                stack.extend(e.inputs)
        return {k: (v, ps[0]) for k, (v, ps) in uses.items()
                if len(ps) > 1 and self._read_in_place(v)}

    @staticmethod
    def costly(name: str) -> bool:
        return False

    def _reaches(self, root, target) -> bool:
        """Whether `root`'s expression reads `target` elementwise (same index) without passing
        through a reduction or a movement (which would read it at other indices)."""
        seen, stack = set(), [root]
        while stack:
            v = stack.pop()
            if v is target:
                return True
            if id(v) in seen:
                continue
            seen.add(id(v))
            e = self.prod.get(id(v))
            if e is None or type(e.prim.kernel).__name__ != "Elementwise":
                continue
            if any(o.type.shape != self.S for o in e.outputs):
                continue
            stack.extend(u for u in e.inputs if u.type.shape == self.S)
        return False

    def _phase(self, reds, ivs, kept):
        """One reduction level: an inner loop nest over the reduced axes carrying every
        reduction's accumulators (two for argmax/argmin: value and position), then the
        horizontal reduction of vector accumulators; results become per-row values."""
        b = self.b
        S, A = self.S, self.A
        vec = self.W if (A and A[-1] == len(S) - 1) else 0  # the reduction loop's step
        # Column reductions keep one lane per column in each accumulator (no horizontal step).
        lanes = self.W if self.col else vec
        if any(S[i] == 0 for i in A):  # an empty reduction is its identity (argmax rejects it)
            for r in reds:
                t = r.outputs[0].type
                self.row_vals[id(r.outputs[0])] = b.const(r.prim.kernel.identity(t.dtype),
                                                          t.dtype, self.W if self.col else 0)
            return
        inits, counts = [], []
        for r in reds:
            init = self._red_init(r, lanes)
            inits += init
            counts.append(len(init))
        accs = list(inits)
        saved_w, saved_iv = self.W, self.vec_iv
        if not self.col:
            self.W = vec
        loop_results = []
        self.phase_count += 1
        for i in A:
            step = vec if (i == len(S) - 1 and vec) else 1
            tag = f"r{self.phase_count}_{i}"
            res = self._for(tag, S[i], step, accs)
            loop_results.append(res)
            accs = [Value(f"%{tag}_a{k}", a.dtype, a.width) for k, a in enumerate(accs)]
            ivs[i] = Value(f"%{tag}", "index")
            if step > 1:
                self.vec_iv = f"%{tag}"
        new, pos = [], 0
        idx = tuple(ivs[i] for i in range(len(S)))
        for r, n in zip(reds, counts, strict=True):
            x = self.value(r.inputs[0], idx)
            stash = getattr(self, "stash", None)
            if stash is not None and stash[0] is r.inputs[0]:
                # Keep the reduced values (e.g. softmax's exponentials) in the output buffer:
                # the last pass reloads them from cache instead of recomputing them.
                name, t = stash[1], stash[2]
                ix = ", ".join(i.name for i in idx)
                if x.width:
                    self.b.emit(f"vector.store {x.name}, {name}[{ix}] : {memref_type(t)}, "
                                f"vector<{x.width}x{mem_elem(t.dtype)}>")
                else:
                    self.b.emit(f"memref.store {x.name}, {name}[{ix}] : {memref_type(t)}")
            if lanes and not x.width:  # the same value for every column of the chunk
                x = self.b.splat(x, lanes)
            new += self._red_combine(r, accs[pos:pos + n], x, ivs, vec)
            pos += n
        for key, (v, first) in getattr(self, "row_cache", {}).items():
            if first == self.phase_count - 1:  # this pass evaluates it first: keep it
                self._row_cache_store(v, self.value(v, idx), idx)
                self.row_cache_ready.add(key)
        for depth in reversed(range(len(A))):
            res = loop_results[depth]
            self._end(new)
            new = [Value(f"{res}#{k}", a.dtype, a.width) for k, a in enumerate(inits)]
        self.W, self.vec_iv = saved_w, saved_iv
        pos = 0
        for r, n in zip(reds, counts, strict=True):
            self.row_vals[id(r.outputs[0])] = self._red_finish(r, new[pos:pos + n])
            pos += n

    # The CPU loop emitter sets this; the CUDA emitters that share the mixin keep one
    # accumulator per (non-arg) reduction.
    fast_extremes = False

    def _fast_extreme(self, r) -> bool:
        """Float max/min reductions carry (bare vmaxps/vminps accumulator, NaN-seen flags): the
        NaN-propagating maximum costs a compare and a blend on the accumulator's dependency chain
        of every step (3 instructions, ~3 cycles of latency, instead of 1)."""
        return self.fast_extremes and r.prim.name in ("reduce_max", "reduce_min") and \
            r.outputs[0].type.dtype in (dtypes.float32, dtypes.float64)

    def _red_init(self, r, vec) -> list:
        b = self.b
        if self._fast_extreme(r):
            t = r.outputs[0].type.dtype
            return [b.const(r.prim.kernel.identity(t), t, vec), b.const(False, dtypes.bool_, vec)]
        if r.prim.name in _ARG_REDUCTIONS:
            xt = r.inputs[0].type.dtype
            start = _extreme(xt, lowest=r.prim.name == "argmax")
            return [b.const(start, xt, vec), b.const(0, _POS, vec)]
        t = r.outputs[0].type.dtype
        return [b.const(r.prim.kernel.identity(t), t, vec)]

    def _red_combine(self, r, accs, x, ivs, vec) -> list:
        b = self.b
        if self._fast_extreme(r):
            acc, seen = accs
            kind = "maximumf" if r.prim.name == "reduce_max" else "minimumf"
            # poison where x is NaN: _red_finish then selects NaN from the flags
            m = b.op(f"arith.{kind} {acc.name}, {x.name} fastmath<nnan,nsz> : {acc.type}",
                     acc.dtype, acc.width)
            return [m, b.or_(seen, b.isnan(x))]
        if r.prim.name not in _ARG_REDUCTIONS:
            b.default_dtype = r.outputs[0].type.dtype
            return [r.prim.kernel.combine(b, accs[0], x)]
        # NumPy's rules: a strictly better value replaces the pair (ties keep the first
        # position), and the first NaN replaces any number and is never replaced.
        acc_v, acc_i = accs
        better = b.cmp("gt" if r.prim.name == "argmax" else "lt", x, acc_v)
        if x.is_float:
            first_nan = b.and_(b.isnan(x), b.not_(b.isnan(acc_v)))
            better = b.or_(*b._coerce(better, first_nan))
        iv = ivs[r.params["axis"]]
        p = b.op(f"arith.index_cast {iv.name} : index to {elem_type(_POS)}", _POS, 0)
        if vec:  # lane k of the chunk starting at iv is position iv + k
            lanes = ", ".join(str(k) for k in range(vec))
            ramp = b.op(f"arith.constant dense<[{lanes}]> : vector<{vec}x{elem_type(_POS)}>",
                        _POS, vec)
            p = b.add(b.splat(p, vec), ramp)
        elif acc_i.width:  # a column reduction: every lane (column) is at position iv
            p = b.splat(p, acc_i.width)
        return [b.select(better, x, acc_v), b.select(better, p, acc_i)]

    def _red_finish(self, r, accs) -> Value:
        """The row's result from its accumulators, reducing vector lanes horizontally."""
        b = self.b
        out_t = r.outputs[0].type.dtype
        if r.prim.name in _ARG_REDUCTIONS:
            acc_v, acc_i = accs
            if acc_v.width and not self.col:
                # The best value over lanes (NaN if any lane holds one), then the smallest
                # position among lanes holding it: each lane kept its first occurrence.
                wide = b._wide(acc_v)
                kinds = ("maximumf", "maxsi") if r.prim.name == "argmax" else ("minimumf", "minsi")
                best = self._horizontal(kinds, wide)
                hit = b.cmp("eq", wide, best)
                if wide.is_float:
                    hit = b.or_(hit, b.and_(b.isnan(wide), b.splat(b.isnan(best), wide.width)))
                far = b.const(np.iinfo(np.int32).max, _POS, acc_i.width)
                acc_i = self._horizontal(("minsi", "minsi"), b.select(hit, acc_i, far))
            return b.cast(acc_i, out_t)
        acc = accs[0]
        if self._fast_extreme(r):
            seen = accs[1]
            if acc.width and not self.col:
                kind = "maximumf" if r.prim.name == "reduce_max" else "minimumf"
                acc = b.op(f"vector.reduction <{kind}>, {acc.name} fastmath<nnan,nsz> : "
                           f"{acc.type} into {acc.elem}", acc.dtype, 0)
                seen = b.op(f"vector.reduction <or>, {seen.name} : {seen.type} into i1",
                            dtypes.bool_, 0)
            return b.select(seen, b.const(float("nan"), acc.dtype, acc.width), acc)
        if not acc.width or self.col:  # one column per lane: nothing to combine
            return acc
        low = acc.dtype in (dtypes.float16, dtypes.bfloat16)
        acc = self._horizontal(_HORIZONTAL[r.prim.name], b._wide(acc) if low else acc)
        return b._narrow(acc, out_t) if low else acc

    def _horizontal(self, kinds, acc: Value) -> Value:
        """vector.reduction of acc's lanes; kinds = (float kind, signed integer kind)."""
        kind = kinds[0] if acc.is_float else kinds[1]
        if not acc.is_float and acc.unsigned and kind not in ("add", "mul"):
            kind = kind.replace("s", "u", 1)
        return self.b.op(f"vector.reduction <{kind}>, {acc.name} : {acc.type} into {acc.elem}",
                         acc.dtype, 0)
