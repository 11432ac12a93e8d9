"""Loop kernels for the CPU: elementwise/movement chains and row reductions as scf loops.

A loop kernel (nova/compiler/fuse.py) iterates over one shape S and may reduce axes A of it. The
generated function loops over the kept axes of S; per row it runs one phase per level of
(mutually independent) reductions, each an inner loop nest carrying accumulators, then stores the
full-shape outputs in a last inner loop and the per-row outputs once. Every value is computed
"at an index": a kernel input is loaded through the index maps of the movement ops between it and
its use (so broadcasts, transposes and reshapes cost no copy), an elementwise op applies its
primitive's scalar body. When the innermost loop runs over the last axis of S and every access
along it is contiguous or invariant, the kernel is vectorized with vector<Wx...> values (explicit
vectors, since LLVM's auto-vectorizer only emits 256-bit code here; MLIR_NOTES.md §1).

Movement with several sources is evaluated at an index too: concatenate and pad choose their
source with `scf.if` on the index (only the chosen side loads, so no index is clamped; a vector
chunk stays vectorized when every boundary falls between chunks), gather loads its coordinates
from the index array, clamps them and reads the operand there. argmax/argmin are reductions that
carry a (value, position) pair. Constants with data are read from module-level globals.
"""

from __future__ import annotations

import re

import numpy as np

from nova.compiler.codegen.builder import Builder, Value, elem_type
from nova.compiler.fuse import ARG_REDUCTIONS as _ARG_REDUCTIONS
from nova.compiler.fuse import is_reduction
from nova.compiler.kernel import Kernel
from nova.core import dtypes
from nova.core.primitive import Elementwise, IndexMap


class _NoVector(Exception):
    """An access along the vector axis is not contiguous: generate scalar code instead."""


def mem_elem(dtype) -> str:
    d = np.dtype(dtype)
    return "i8" if d == dtypes.bool_ else elem_type(d)


def memref_type(t) -> str:
    el = mem_elem(t.dtype)
    if t.size == 0:
        # Never accessed (its loops run zero times); LLVM's JIT rejects zero-sized memref
        # arguments, so the pointer is typed as one element.
        return f"memref<1x{el}>"
    if not t.shape:
        return f"memref<{el}>"
    return "memref<" + "x".join(str(d) for d in t.shape) + f"x{el}>"


_SSA_NAME = re.compile(r"%[A-Za-z0-9_]+(?:#[0-9]+)?")


class _KB(Builder):
    """Builder with index-arithmetic folding and tracking of which loop ivs an index depends on."""

    def __init__(self):
        super().__init__()
        self.ivals: dict[str, int] = {}  # index constants
        self.deps: dict[str, frozenset] = {}
        # Index values of the form `root + constant` (root: a loop iv or any other index value),
        # so that a shifted access along the vector axis is still known to be contiguous.
        self.affine: dict[str, tuple[str, int]] = {}
        # Index values `iv + q` where q does not depend on the loop iv: consecutive iterations
        # (vector lanes) of iv read consecutive elements. name -> iv name.
        self.unit: dict[str, str] = {}

    def op(self, text, dtype, width):
        """Every value depends on the loop ivs its operands depend on (an index reversed with
        `arith.subi` or loaded from an index array still moves with the vector iv)."""
        val = super().op(text, dtype, width)
        deps = frozenset().union(*(self.deps.get(n, ()) for n in _SSA_NAME.findall(text)))
        if deps:
            self.deps[val.name] = deps
        return val

    def const(self, v, dtype=None, width: int = 0):
        val = super().const(v, dtype, width)
        if dtype == "index":
            self.ivals[val.name] = int(v)
            self.deps.setdefault(val.name, frozenset())
        return val

    def _iconst(self, x):
        return self.ivals.get(x.name)

    def _index_op(self, opname, a, b, fold):
        ca, cb = self._iconst(a), self._iconst(b)
        if ca is not None and cb is not None:
            return self.const(fold(ca, cb), "index")
        r = self.op(f"{opname} {a.name}, {b.name} : index", "index", 0)
        self.deps[r.name] = self.deps.get(a.name, frozenset()) | self.deps.get(b.name, frozenset())
        return r

    def add(self, a, b):
        if a.dtype != "index":
            return super().add(a, b)
        if self._iconst(b) == 0:
            return a
        if self._iconst(a) == 0:
            return b
        r = self._index_op("arith.addi", a, b, lambda x, y: x + y)
        for p, q in ((a, b), (b, a)):
            root = self.unit_root(p)
            if root is not None and root not in self.deps.get(q.name, ()):
                self.unit[r.name] = root
        ca, cb = self._iconst(a), self._iconst(b)
        if (ca is None) != (cb is None):
            base, c = (b, ca) if cb is None else (a, cb)
            root, c0 = self.affine.get(base.name, (base.name, 0))
            self.affine[r.name] = (root, c0 + c)
        return r

    def unit_root(self, x) -> str | None:
        """The loop iv that x moves with at unit stride (x = iv + q, q independent of iv)."""
        if x.name in self.unit:
            return self.unit[x.name]
        return x.name if self.deps.get(x.name) == frozenset([x.name]) else None

    def mul(self, a, b):
        if a.dtype != "index":
            return super().mul(a, b)
        if self._iconst(b) == 1:
            return a
        if self._iconst(a) == 1:
            return b
        if self._iconst(a) == 0 or self._iconst(b) == 0:
            return self.const(0, "index")
        return self._index_op("arith.muli", a, b, lambda x, y: x * y)

    def div(self, a, b):
        if a.dtype != "index":
            return super().div(a, b)
        if self._iconst(b) == 1:
            return a
        return self._index_op("arith.divui", a, b, lambda x, y: x // y)

    def rem(self, a, b):
        if a.dtype != "index":
            return super().rem(a, b)
        if self._iconst(b) == 1:
            return self.const(0, "index")
        return self._index_op("arith.remui", a, b, lambda x, y: x % y)


def _reshape_map(b: _KB, idx, in_shape, out_shape):
    """Index map of a reshape, split into groups of dimensions with equal products so that
    dimensions kept whole map directly (no div/rem), which keeps the vector axis contiguous."""
    groups, i, j = [], 0, 0
    while i < len(out_shape) or j < len(in_shape):
        oi, ij = [i] if i < len(out_shape) else [], [j] if j < len(in_shape) else []
        po = out_shape[i] if i < len(out_shape) else 1
        pi = in_shape[j] if j < len(in_shape) else 1
        i, j = i + 1, j + 1
        while po != pi:
            if po < pi:
                oi.append(i)
                po *= out_shape[i]
                i += 1
            else:
                ij.append(j)
                pi *= in_shape[j]
                j += 1
        groups.append((oi, ij))
    res = [None] * len(in_shape)
    for oi, ij in groups:
        live_o = [k for k in oi if out_shape[k] != 1]
        live_i = [k for k in ij if in_shape[k] != 1]
        for k in ij:
            if in_shape[k] == 1:
                res[k] = b.const(0, "index")
        if len(live_o) == 1 and len(live_i) == 1:
            res[live_i[0]] = idx[live_o[0]]
            continue
        if not live_i:
            continue
        flat = b.const(0, "index")
        for k in live_o:
            flat = b.add(b.mul(flat, b.const(out_shape[k], "index")), idx[k])
        for pos, k in enumerate(live_i):
            stride = int(np.prod([in_shape[m] for m in live_i[pos + 1:]], dtype=np.int64))
            q = b.div(flat, b.const(stride, "index"))
            res[k] = q if pos == 0 else b.rem(q, b.const(in_shape[k], "index"))
    return tuple(res)


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


class LoopKernelEmitter:
    """Emits one loop kernel; `value(var, idx)` gives a kernel value at an index (scalar, or a
    vector of W consecutive elements along the last axis when `vec_iv` runs there)."""

    def __init__(self, name: str, kernel: Kernel, width: int, threads: int = 1):
        self.threads = threads
        self.name = name
        self.k = kernel
        self.W = width
        self.b = _KB()
        self.prog = kernel.program
        self.prod = {id(o): e for e in self.prog.eqns for o in e.outputs}
        self.S = tuple(kernel.schedule["iter_shape"])
        self.A = tuple(kernel.schedule["red_axes"] or ())
        self.arg = {}
        for n, v in enumerate(self.prog.inputs):
            self.arg[id(v)] = (f"%in{n}", v.type)
        self.out_args = [(f"%out{n}", v) for n, v in enumerate(self.prog.outputs)]
        self.memo: list[dict] = [{}]
        self.row_vals: dict[int, Value] = {}
        self.globals: list[str] = []  # module-level constant data, emitted before the function
        self._global_names: dict[int, str] = {}
        self.vec_iv: str | None = None
        self.phase_count = 0

    # --- expression at an index -------------------------------------------------------------
    def _key(self, v, idx):
        return (id(v), tuple(x.name for x in idx))

    def value(self, v, idx) -> Value:
        key = self._key(v, idx)
        for scope in reversed(self.memo):
            if key in scope:
                return scope[key]
        val = self._compute(v, idx)
        self.memo[-1][key] = val
        return val

    def _depends_on_vec(self, x: Value) -> bool:
        return self.vec_iv is not None and self.vec_iv in self.b.deps.get(x.name, frozenset())

    def _vec_offset(self, x: Value) -> int | None:
        """c if the index x is `vector iv + c` (lanes read consecutive elements), else None."""
        if self.vec_iv is None:
            return None
        if x.name == self.vec_iv:
            return 0
        root, c = self.b.affine.get(x.name, (None, 0))
        return c if root == self.vec_iv else None

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

    def _load(self, v, idx) -> Value:
        name, t = self.arg[id(v)]
        b = self.b
        ix = ", ".join(x.name for x in idx)
        mt = memref_type(t)
        el = mem_elem(t.dtype)
        vec_pos = [k for k, x in enumerate(idx) if self._depends_on_vec(x)]
        if not vec_pos or not self.W:
            val = b.op(f"memref.load {name}[{ix}] : {mt}", t.dtype if el != "i8" or t.dtype != dtypes.bool_ else dtypes.uint8, 0)
            if t.dtype == dtypes.bool_:
                val = b.cmp("ne", val, b.const(0, dtypes.uint8))
            return val
        if vec_pos != [len(idx) - 1] or b.unit_root(idx[-1]) != self.vec_iv:
            raise _NoVector()
        W = self.W
        val = b.op(f"vector.load {name}[{ix}] : {mt}, vector<{W}x{el}>",
                   t.dtype if t.dtype != dtypes.bool_ else dtypes.uint8, W)
        if t.dtype == dtypes.bool_:
            val = b.cmp("ne", val, b.const(0, dtypes.uint8, W))
        return val

    bound: dict = {}
    # True when the vector iv runs over multiples of W (a loop kernel's own loops); a matmul
    # epilogue evaluated at arbitrary column offsets leaves it False.
    vec_aligned = False

    def _compute(self, v, idx) -> Value:
        if id(v) in self.bound:
            return self.bound[id(v)]
        if id(v) in self.arg:
            return self._load(v, idx)
        if id(v) in self.row_vals:
            aligned = len(idx) == len(self.kept_names) and all(
                x.name == n or (size == 1 and self.b.ivals.get(x.name) == 0)
                for x, n, size in zip(idx, self.kept_names, self.kept_sizes, strict=True))
            if not aligned:
                raise AssertionError(
                    f"loop kernel {self.name}: a per-row value is read at {[x.name for x in idx]}, "
                    f"not at its row {self.kept_names} (fusion invariant broken)")
            return self.row_vals[id(v)]
        e = self.prod[id(v)]
        b = self.b
        p = e.prim
        if p.name == "constant":
            data = np.asarray(e.params["value"])
            if data.size == 1:
                val = data.reshape(-1)[0]
                return b.const(val.item() if hasattr(val, "item") else val, v.type.dtype)
            return self._global_load(v, data, idx)
        if p.name == "reshape":
            src = e.inputs[0]
            return self.value(src, _reshape_map(b, idx, src.type.shape, v.type.shape))
        if p.name == "concatenate":
            return self._concatenate(e, idx)
        if p.name == "pad":
            return self._pad(e, idx)
        if p.name == "gather":
            return self._gather(e, idx)
        if isinstance(p.kernel, IndexMap):
            in_types = [u.type for u in e.inputs]
            new_idx = p.kernel.index_map(b, tuple(idx), in_types, **e.params)
            if not e.inputs:  # iota: the index itself is the value
                iv = b.op(f"arith.index_cast {new_idx.name} : index to i64", dtypes.int64, 0)
                if self._depends_on_vec(new_idx):
                    if b.unit_root(new_idx) != self.vec_iv:
                        raise _NoVector()
                    # Along the vector axis lane k holds the chunk's first index + k.
                    lanes = ", ".join(str(k) for k in range(self.W))
                    ramp = b.op(f"arith.constant dense<[{lanes}]> : vector<{self.W}xi64>",
                                dtypes.int64, self.W)
                    iv = b.add(b.splat(iv, self.W), ramp)
                return b.cast(iv, v.type.dtype)
            return self.value(e.inputs[0], tuple(new_idx))
        if isinstance(p.kernel, Elementwise):
            args = [self.value(u, idx) for u in e.inputs]
            b.default_dtype = e.inputs[0].type.dtype if e.inputs else v.type.dtype
            res = p.kernel.body(b, *args, **e.params)
            if not p.multiple_results:
                return res
            # One evaluation gives every result at this index (threefry2x32's two words).
            for o, r in zip(e.outputs, res, strict=True):
                self.memo[-1][self._key(o, idx)] = r
            return res[[id(o) for o in e.outputs].index(id(v))]
        raise AssertionError(f"loop kernel {self.name}: cannot compute nova.{p.name} at an index")

    # --- constants with data ------------------------------------------------------------------
    def _global_load(self, v, data, idx) -> Value:
        """A load of a constant's element from a read-only `memref.global` holding its bytes."""
        if not hasattr(self, "globals"):
            raise _NoVector()  # a matmul epilogue emits no module-level ops: use a loop kernel
        t = v.type
        name = self._global_names.get(id(v))
        if name is None:
            name = f"{self.name}_c{len(self.globals)}"
            self._global_names[id(v)] = name
            raw = np.ascontiguousarray(data, dtype=t.dtype)
            if t.dtype == dtypes.bool_:
                raw = raw.astype(np.uint8)
            # The hex form carries the exact bytes of any dtype (NaN payloads, bf16 bits).
            self.globals.append(f'  memref.global "private" constant @{name} : {memref_type(t)} '
                                f'= dense<"0x{raw.tobytes().hex().upper()}">')
        ref = self.b.op(f"memref.get_global @{name} : {memref_type(t)}", "index", 0)
        self.arg[id(v)] = (ref.name, t)
        try:
            return self._load(v, idx)
        finally:
            del self.arg[id(v)]

    # --- movement with several sources, gather ----------------------------------------------
    def _concatenate(self, e, idx) -> Value:
        """The operand whose range along the dimension holds the index, read at the index minus
        the operand's offset: a chain of scf.if on the index (empty operands never chosen)."""
        d = e.params["dimension"]
        o = idx[d]
        b = self.b
        pieces, off = [], 0
        for u in e.inputs:
            n = u.type.shape[d]
            if n:
                pieces.append((off, off + n, u))
            off += n
        self._uniform(o, [hi for _, hi, _ in pieces[:-1]])

        def piece(k):
            lo, hi, u = pieces[k]

            def at(u=u, lo=lo):
                shifted = b.add(o, b.const(-lo, "index"))  # the position inside operand u
                return self.value(u, idx[:d] + (shifted,) + idx[d + 1:])

            if k == len(pieces) - 1:
                return at()
            cond = self._index_cmp("lt", o, hi)
            if cond is True:
                return at()
            if cond is False:
                return piece(k + 1)
            return self._branch(cond, at, lambda: piece(k + 1))

        return piece(0)

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
    def _for(self, iv: str, n: int, step: int, iter_args=None):
        b = self.b
        lo, hi, st = b.const(0, "index"), b.const(n, "index"), b.const(step, "index")
        if iter_args:
            names = ", ".join(f"%{iv}_a{k} = {a.name}" for k, a in enumerate(iter_args))
            types = ", ".join(a.type for a in iter_args)
            res = b.fresh()
            b.emit(f"{res}:{len(iter_args)} = scf.for %{iv} = {lo.name} to {hi.name} step {st.name} "
                   f"iter_args({names}) -> ({types}) {{")
        else:
            res = None
            b.emit(f"scf.for %{iv} = {lo.name} to {hi.name} step {st.name} {{")
        b.indent += 2
        b.deps[f"%{iv}"] = frozenset([f"%{iv}"])
        self.memo.append({})
        b.forget_constants()
        return res

    def _end(self, yields=None):
        b = self.b
        if yields is not None:
            b.emit(f"scf.yield {', '.join(y.name for y in yields)} : "
                   f"{', '.join(y.type for y in yields)}")
        b.indent -= 2
        b.emit("}")
        self.memo.pop()
        b.forget_constants()

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

    def _signature(self) -> str:
        args = [f"{n}: {memref_type(t)}" for n, t in getattr(self, "sig_args", self.arg).values()]
        args += [f"{n}: {memref_type(v.type)}" for n, v in self.out_args]
        return f"  func.func @{self.name}({', '.join(args)}) {{"

    def emit(self) -> str:
        b = self.b
        S, A = self.S, self.A
        if any(d == 0 for d in S) and not A or any(S[i] == 0 for i in range(len(S)) if i not in A):
            # Nothing to compute: every output is empty.
            return "\n".join([self._signature(), "    return", "  }"])
        kept = [i for i in range(len(S)) if i not in A]
        ivs: dict[int, Value] = {}
        vec_axis = len(S) - 1 if S and (not A or A[-1] == len(S) - 1) else None
        if vec_axis is not None and self.W and S[vec_axis] % self.W:
            raise _NoVector()
        if vec_axis is None:
            self.W = 0
        b.indent = 4
        self.vec_aligned = True
        self.kept_names = [f"%i{i}" for i in kept]
        self.kept_sizes = [S[i] for i in kept]
        threads = self.threads if kept and S[kept[0]] > 1 else 1
        for n, i in enumerate(kept):
            step = self.W if (i == vec_axis and self.W) else 1
            if n == 0 and threads > 1:
                self._parallel_for(f"i{i}", S[i], step, threads)
            else:
                self._for(f"i{i}", S[i], step)
            ivs[i] = Value(f"%i{i}", "index")
            if step > 1:
                self.vec_iv = f"%i{i}"
        # Reduction phases, one per level.
        levels = self._levels()
        self.stash = self._choose_stash(levels) if A else None
        for level in levels:
            self._phase(level, ivs, kept)
        if self.stash is not None:  # the last pass reads the stashed values back
            self.sig_args = dict(self.arg)
            self.arg[id(self.stash[0])] = (self.stash[1], self.stash[2])
        row_shape = tuple(S[i] for i in kept)
        full_outs = [(n, v) for n, v in self.out_args if v.type.shape == S and A]
        row_outs = [(n, v) for n, v in self.out_args if A and v.type.shape == row_shape and v.type.shape != S]
        if not A:
            full_outs = list(self.out_args)
        if A and full_outs:
            for i in A:
                step = self.W if (i == vec_axis and self.W) else 1
                self._for(f"j{i}", S[i], step)
                ivs[i] = Value(f"%j{i}", "index")
                if step > 1:
                    self.vec_iv = f"%j{i}"
            self._store_outputs(full_outs, ivs, S)
            for _ in A:
                self._end()
        elif not A:
            self._store_outputs(full_outs, ivs, S)
        if row_outs:
            saved_w, saved_iv = self.W, self.vec_iv
            if A:
                self.W, self.vec_iv = 0, None
            self._store_outputs(row_outs, {k: ivs[i] for k, i in enumerate(kept)}, row_shape,
                                row=True)
            self.W, self.vec_iv = saved_w, saved_iv
        for n, _ in enumerate(kept):
            self._end()
            if n == len(kept) - 1 and threads > 1:
                self._close_parallel()
        return "\n".join(self.globals + [self._signature()] + b.lines + ["    return", "  }"])

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
            if self._reaches(out, v):
                return (v, name, out.type)
        return None

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

    def _parallel_for(self, iv: str, n: int, step: int, threads: int):
        """The outermost loop split into one contiguous chunk per OpenMP thread (the kernel stays
        one C function; libiomp5 keeps its threads pooled between calls, see matmul.py)."""
        lo, hi = self._thread_span(n, step, threads)
        self._for_range(iv, lo, hi, step)

    def _thread_span(self, n: int, step: int, threads: int):
        """Opens an `omp.parallel` region (closed by `_close_parallel`) and returns this thread's
        [lo, hi) of 0..n in whole steps: contiguous chunks, one per thread."""
        b = self.b
        nt = b.op(f"arith.constant {threads} : i32", dtypes.int32, 0)
        b.emit(f"omp.parallel num_threads({nt.name} : i32) {{")
        b.indent += 2
        b.forget_constants()
        tid32 = b.op("func.call @omp_get_thread_num() : () -> i32", dtypes.int32, 0)
        nth32 = b.op("func.call @omp_get_num_threads() : () -> i32", dtypes.int32, 0)
        tid = b.op(f"arith.index_cast {tid32.name} : i32 to index", "index", 0)
        nth = b.op(f"arith.index_cast {nth32.name} : i32 to index", "index", 0)
        steps = b.const(n // step, "index")
        chunk = b.op(f"arith.ceildivui {steps.name}, {nth.name} : index", "index", 0)
        span = b.op(f"arith.muli {chunk.name}, {b.const(step, 'index').name} : index", "index", 0)
        lo = b.op(f"arith.muli {tid.name}, {span.name} : index", "index", 0)
        hi0 = b.op(f"arith.addi {lo.name}, {span.name} : index", "index", 0)
        hi = b.op(f"arith.minui {hi0.name}, {b.const(n, 'index').name} : index", "index", 0)
        return lo, hi

    def _close_parallel(self):
        b = self.b
        b.emit("omp.terminator")
        b.indent -= 2
        b.emit("}")
        b.forget_constants()

    def _for_range(self, iv: str, lo: Value, hi: Value, step: int):
        """`scf.for %iv = lo to hi step step` with index values as bounds (closed by _end)."""
        b = self.b
        b.emit(f"scf.for %{iv} = {lo.name} to {hi.name} step {b.const(step, 'index').name} {{")
        b.indent += 2
        b.deps[f"%{iv}"] = frozenset([f"%{iv}"])
        self.memo.append({})
        b.forget_constants()

    def _phase(self, reds, ivs, kept):
        """One reduction level: an inner loop nest over the reduced axes carrying every
        reduction's accumulators (two for argmax/argmin: value and position), then the
        horizontal reduction of vector accumulators; results become per-row values."""
        b = self.b
        S, A = self.S, self.A
        vec = self.W if (A and A[-1] == len(S) - 1) else 0
        if any(S[i] == 0 for i in A):  # an empty reduction is its identity (argmax rejects it)
            for r in reds:
                t = r.outputs[0].type
                self.row_vals[id(r.outputs[0])] = b.const(r.prim.kernel.identity(t.dtype), t.dtype)
            return
        inits, counts = [], []
        for r in reds:
            init = self._red_init(r, vec)
            inits += init
            counts.append(len(init))
        accs = list(inits)
        saved_w, saved_iv = self.W, self.vec_iv
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
            new += self._red_combine(r, accs[pos:pos + n], x, ivs, vec)
            pos += n
        for depth in reversed(range(len(A))):
            res = loop_results[depth]
            self._end(new)
            new = [Value(f"{res}#{k}", a.dtype, a.width) for k, a in enumerate(inits)]
        self.W, self.vec_iv = saved_w, saved_iv
        pos = 0
        for r, n in zip(reds, counts, strict=True):
            self.row_vals[id(r.outputs[0])] = self._red_finish(r, new[pos:pos + n])
            pos += n

    def _red_init(self, r, vec) -> list:
        b = self.b
        if r.prim.name in _ARG_REDUCTIONS:
            xt = r.inputs[0].type.dtype
            start = _extreme(xt, lowest=r.prim.name == "argmax")
            return [b.const(start, xt, vec), b.const(0, _POS, vec)]
        t = r.outputs[0].type.dtype
        return [b.const(r.prim.kernel.identity(t), t, vec)]

    def _red_combine(self, r, accs, x, ivs, vec) -> list:
        b = self.b
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
        return [b.select(better, x, acc_v), b.select(better, p, acc_i)]

    def _red_finish(self, r, accs) -> Value:
        """The row's result from its accumulators, reducing vector lanes horizontally."""
        b = self.b
        out_t = r.outputs[0].type.dtype
        if r.prim.name in _ARG_REDUCTIONS:
            acc_v, acc_i = accs
            if acc_v.width:
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
        if not acc.width:
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

    def _store_outputs(self, outs, ivs, shape, row=False):
        b = self.b
        idx = tuple(ivs[i] for i in range(len(shape)))
        for name, v in outs:
            val = self.value(v, idx)
            t = v.type
            el = mem_elem(t.dtype)
            if t.dtype == dtypes.bool_:
                val = b.cast(val, dtypes.uint8) if val.dtype == dtypes.bool_ else val
            ix = ", ".join(x.name for x in idx)
            if self.W and not row and not val.width and self.vec_iv and idx and idx[-1].name == self.vec_iv:
                val = b.splat(val, self.W)
            if val.width:
                b.emit(f"vector.store {val.name}, {name}[{ix}] : {memref_type(t)}, vector<{val.width}x{el}>")
            else:
                b.emit(f"memref.store {val.name}, {name}[{ix}] : {memref_type(t)}")


# A kernel is split over threads only from this many elements of iteration space: a 2-thread
# OpenMP call costs ~15-30 us more than a 1-thread one (bench/NOTES.md), which a memory-bound
# loop over 64K float32 elements (~30 us) barely repays.
MIN_THREADED_ELEMENTS = 1 << 16


def emit_loop_kernel(name: str, kernel: Kernel, vector_width: int | None = None) -> str:
    """MLIR text of one `func.func @name(inputs..., outputs...)` computing a loop kernel.

    Tries explicit vectors (the host's SIMD width in float32 lanes) first and falls back to
    scalar code when an access along the innermost axis is not contiguous. Large kernels split
    their outermost loop over the host's cores (OpenMP).
    """
    from nova.compiler.codegen.cpu.matmul import host_device

    dev = host_device()
    if vector_width is None:
        vector_width = dev.vector_bits // 32
    size = int(np.prod(kernel.schedule["iter_shape"], dtype=np.int64))
    threads = dev.cores if size >= MIN_THREADED_ELEMENTS else 1
    kernel.schedule["threads"] = threads
    if vector_width:
        try:
            text = LoopKernelEmitter(name, kernel, vector_width, threads).emit()
            kernel.schedule["vector_width"] = vector_width
            return text
        except _NoVector:
            pass
    kernel.schedule["vector_width"] = 1
    return LoopKernelEmitter(name, kernel, 0, threads).emit()
