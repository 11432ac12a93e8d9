"""Index arithmetic for CPU loop kernels: an MLIR text builder that folds index constants and
tracks which loop ivs (and at which unit-stride offset) each index depends on, memref types, and
the index map of a reshape."""

from __future__ import annotations

import re

import numpy as np

from nova.compiler.codegen.builder import Builder, elem_type
from nova.core import dtypes


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
        # () -> (vector iv name, lanes W, whether the iv steps by W from multiples of W), set by
        # the emitter: lets div/rem by a multiple of W keep a vector chunk contiguous.
        self.vec_info = None

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

    def _chunk_iv(self, x, n) -> str | None:
        """The vector iv if x = iv + c where the iv steps by W from multiples of W and both c and
        the divisor n are multiples of W: then the W lanes of a chunk never straddle a multiple
        of n, so x // n is the same for every lane and x % n moves with the lanes."""
        info = self.vec_info() if self.vec_info is not None else None
        if not info or n is None or n <= 0:
            return None
        iv, width, aligned = info
        if iv is None or not width or not aligned or n % width:
            return None
        root, c = (x.name, 0) if x.name == iv else self.affine.get(x.name, (None, 0))
        return iv if root == iv and c % width == 0 else None

    def div(self, a, b):
        if a.dtype != "index":
            return super().div(a, b)
        if self._iconst(b) == 1:
            return a
        r = self._index_op("arith.divui", a, b, lambda x, y: x // y)
        iv = self._chunk_iv(a, self._iconst(b))
        if iv is not None:
            self.deps[r.name] = self.deps.get(r.name, frozenset()) - {iv}
        return r

    def rem(self, a, b):
        if a.dtype != "index":
            return super().rem(a, b)
        if self._iconst(b) == 1:
            return self.const(0, "index")
        r = self._index_op("arith.remui", a, b, lambda x, y: x % y)
        iv = self._chunk_iv(a, self._iconst(b))
        if iv is not None:
            self.unit[r.name] = iv
        return r


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
