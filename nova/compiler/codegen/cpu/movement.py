"""Movement with several sources, evaluated at an index inside CPU loop kernels (a mixin of
LoopKernelEmitter): concatenate and pad choose their source with `scf.if` on the index (only the
chosen side loads, so no index is clamped; a vector chunk stays vectorized when every boundary
falls between chunks); gather loads its coordinates from the index array, clamps them and reads
the operand there."""

from __future__ import annotations

from nova.compiler.codegen.builder import Value
from nova.compiler.codegen.cpu.index import _NoVector


class MovementMixin:
    """Needs the emitter's builder `b`, `W`, `memo`, `vec_aligned`, `value()` and
    `_depends_on_vec()`, `_vec_offset()`."""

    def _uniform(self, x: Value, bounds) -> None:
        """Checks that comparing the index x with each of `bounds` gives one answer for all
        lanes of a vector chunk, so that a scalar condition (computed at the chunk's first lane)
        can choose the source of the whole chunk; raises _NoVector otherwise.

        True when x does not depend on the vector iv, or is `iv + c` where the iv steps by W
        from a multiple of W and every bound lies on a chunk boundary (bound - c divisible by W).
        """
        if not self._depends_on_vec(x):
            return
        c = self._vec_offset(x)
        if c is None or not self.vec_aligned or any((q - c) % self.W for q in bounds):
            raise _NoVector()

    def _branch(self, cond: Value, then_fn, else_fn) -> Value:
        """`scf.if cond` yielding then_fn() or else_fn(): only the chosen side runs, so each side
        may load at indices that are only valid when it is chosen. cond is a scalar i1; a vector
        side and a scalar side are reconciled by broadcasting the scalar."""
        b = self.b
        outer, indent = b.lines, b.indent
        sides = []
        for fn in (then_fn, else_fn):
            b.lines, b.indent = [], indent + 2
            self.memo.append({})
            b.forget_constants()
            try:
                sides.append([b.lines, fn()])
            finally:  # also when _NoVector unwinds to a scalar retry
                self.memo.pop()
                b.forget_constants()
                b.lines, b.indent = outer, indent
        width = max(v.width for _, v in sides)
        for side in sides:
            lines, v = side
            b.lines, b.indent = lines, indent + 2
            if v.dtype != sides[0][1].dtype:
                raise AssertionError(f"loop kernel {self.name}: branch dtypes differ")
            v = b.splat(v, width) if width else v
            b.emit(f"scf.yield {v.name} : {v.type}")
            side[1] = v
            b.forget_constants()
        b.lines, b.indent = outer, indent
        vals = [v for _, v in sides]
        res = b.fresh()
        t = sides[0][1].type
        b.emit(f"{res} = scf.if {cond.name} -> ({t}) {{")
        b.lines.extend(sides[0][0])
        b.emit("} else {")
        b.lines.extend(sides[1][0])
        b.emit("}")
        b.deps[res] = frozenset().union(*(b.deps.get(x.name, ()) for x in (cond, *vals)))
        return Value(res, sides[0][1].dtype, width)

    def _index_cmp(self, pred: str, x: Value, bound: int) -> Value | bool:
        """x <pred> bound for a non-negative index x, folded to a Python bool when x is a
        constant or the answer does not depend on x (bound <= 0)."""
        cx = self.b.ivals.get(x.name)
        if cx is not None:
            return {"lt": cx < bound, "ge": cx >= bound, "eq": cx == bound}[pred]
        if bound <= 0 and pred in ("lt", "ge"):
            return pred == "ge"
        return self.b.cmp(pred, x, self.b.const(bound, "index"))

    def _all(self, conds) -> Value | bool:
        """The conjunction of conditions (Python bools fold away)."""
        out: Value | bool = True
        for c in conds:
            if c is False:
                return False
            if c is True:
                continue
            out = c if out is True else self.b.and_(out, c)
        return out

    def _concatenate(self, e, idx) -> Value:
        """The operand whose range along the dimension holds the index, read at the index minus
        the operand's offset: a binary search of scf.if on the index over the operands' ranges
        (empty operands never chosen), so an element costs log2(operands) comparisons and the
        nesting stays shallow for hundreds of operands (im2col of a large kernel)."""
        d = e.params["dimension"]
        o = idx[d]
        b = self.b
        pieces, off = [], 0
        for u in e.inputs:
            n = u.type.shape[d]
            if n:
                pieces.append((off, u))
            off += n
        self._uniform(o, [lo for lo, _ in pieces[1:]])

        def at(k):
            lo, u = pieces[k]
            shifted = b.add(o, b.const(-lo, "index"))  # the position inside operand u
            return self.value(u, idx[:d] + (shifted,) + idx[d + 1:])

        def search(first, last):  # the index lies in pieces[first:last]
            if last - first == 1:
                return at(first)
            mid = (first + last) // 2
            cond = self._index_cmp("lt", o, pieces[mid][0])
            if cond is True:
                return search(first, mid)
            if cond is False:
                return search(mid, last)
            return self._branch(cond, lambda: search(first, mid), lambda: search(mid, last))

        return search(0, len(pieces))

    def _pad(self, e, idx) -> Value:
        """The operand where the index falls on one of its elements (inside the low/high edges
        and on the interior grid), else the padding value."""
        x, pv = e.inputs
        b = self.b
        conds, src = [], []
        for d, (lo, hi, interior) in enumerate(e.params["padding_config"]):
            n, o, step = x.type.shape[d], idx[d], interior + 1
            end = lo + n + max(n - 1, 0) * interior  # one past the operand's last element
            if self._depends_on_vec(o) and interior:
                raise _NoVector()
            if n == 0:
                conds.append(False)
            if lo > 0:
                self._uniform(o, [lo])
                conds.append(self._index_cmp("ge", o, lo))
            if end < e.outputs[0].type.shape[d]:
                self._uniform(o, [end])
                conds.append(self._index_cmp("lt", o, end))
            t = b.add(o, b.const(-lo, "index"))  # position on the grown operand
            if step > 1:
                conds.append(self._index_cmp("eq", b.rem(t, b.const(step, "index")), 0))
                t = b.div(t, b.const(step, "index"))
            src.append(t)
        cond = self._all(conds)
        if cond is False:
            return self.value(pv, ())
        if cond is True:
            return self.value(x, tuple(src))
        fill = self.value(pv, ())  # outside the branch: computed once per row, not per element
        return self._branch(cond, lambda: self.value(x, tuple(src)), lambda: fill)

    def _gather(self, e, idx) -> Value:
        """operand at the (clamped) coordinates loaded from `indices` at the batch index: the
        coordinates are scalars per row, so the rest of the index keeps its access pattern."""
        operand, indices = e.inputs
        axes = e.params["axes"]
        b = self.b
        nb = indices.type.ndim - 1
        batch, rest = tuple(idx[:nb]), list(idx[nb:])
        it = indices.type.dtype
        coords = []
        for j, a in enumerate(axes):
            c = self.value(indices, batch + (b.const(j, "index"),))
            if c.width:
                raise _NoVector()  # per-lane coordinates: a gather of lanes, not a vector load
            hi = b.const(max(operand.type.shape[a] - 1, 0), it)
            c = b.min(c, hi) if c.unsigned else b.min(b.max(c, b.const(0, it)), hi)
            cast = "arith.index_castui" if c.unsigned else "arith.index_cast"
            coords.append(b.op(f"{cast} {c.name} : {c.elem} to index", "index", 0))
        src = tuple(coords[axes.index(d)] if d in axes else rest.pop(0)
                    for d in range(operand.type.ndim))
        return self.value(operand, src)

    # --- structure ---------------------------------------------------------------------------
