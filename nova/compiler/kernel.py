"""Backend-neutral kernel descriptions: the result of fusion, the input of schedule and codegen.

A Kernel is a group of equations of the optimized Program with its own sub-Program (kernel inputs
-> kernel outputs). A FusedProgram is the launch list: kernels in execution order over the values
of the Program.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from nova.core.ir import Program, Var, print_program


@dataclass
class Kernel:
    """kind: "loop" (elementwise/movement chains and row reductions), "contraction", or
    "host:<primitive>" (a primitive with no generated kernel yet, run by its reference)."""

    kind: str
    program: Program
    inputs: list  # outer Vars, in the order of program.inputs
    outputs: list  # outer Vars, in the order of program.outputs
    schedule: dict = field(default_factory=dict)
    # Where the kernel's first own equation sits in the fused Program: fuse orders the ready
    # kernels by it.
    schedule_position: int = 0

    def body_text(self) -> str:
        # Printed once per kernel (codegen and the caches ask for the name several times): the
        # memo is keyed by the sub-Program object and its length, which nothing edits once the
        # Kernel exists.
        key = (id(self.program), len(self.program.eqns), self.kind)
        memo = self.__dict__.get("_text_memo")
        if memo is None or memo[0] != key:
            text = print_program(self.program, debug_info=False)
            name = "k_" + hashlib.sha256((self.kind + text).encode()).hexdigest()[:16]
            memo = self.__dict__["_text_memo"] = (key, text, name)
        return memo[1]

    @property
    def name(self) -> str:
        self.body_text()
        return self.__dict__["_text_memo"][2]

    def op_names(self) -> list[str]:
        return [e.prim.name for e in self.program.eqns if e.prim.name != "constant"]

    def cost(self) -> dict:
        """The kernel's work from its primitives' cost rules: `flops` (every equation it
        evaluates, recomputed clones included), `bytes read` / `bytes written` (each input and
        output once: the traffic a kernel that keeps its intermediates in registers needs),
        `bytes accessed` (their sum) and `arithmetic intensity` (flops per byte accessed)."""
        flops = sum(e.prim.cost([v.type for v in e.inputs], [v.type for v in e.outputs],
                                **e.params).flops for e in self.program.eqns)
        read = sum(v.type.nbytes for v in self.inputs)
        written = sum(v.type.nbytes for v in self.outputs)
        moved = read + written
        return {"kernel": self.name, "kind": self.kind, "ops": self.op_names(), "flops": flops,
                "bytes read": read, "bytes written": written, "bytes accessed": moved,
                "arithmetic intensity": flops / moved if moved else 0.0}


@dataclass
class FusedProgram:
    program: Program  # the optimized Program the kernels partition
    kernels: list  # launch order

    def as_text(self) -> str:
        """The launch list: one `nova.kernel` line per kernel, naming its fused ops."""
        names: dict[int, str] = {}

        def nm(v: Var) -> str:
            if id(v) not in names:
                names[id(v)] = f"%{len(names)}"
            return names[id(v)]

        args = ", ".join(f"{nm(v)}: {v.type}" for v in self.program.inputs)
        lines = [f"func.func @main({args}) {{"]
        for k in self.kernels:
            ins = ", ".join(nm(v) for v in k.inputs)
            outs = ", ".join(nm(v) for v in k.outputs)
            ops = ", ".join(k.op_names())
            sched = " ".join(f"{a}={b}" for a, b in sorted(k.schedule.items()))
            lines.append(f"  {outs} = nova.kernel @{k.name} ({ins}) "
                         f"{{kind = \"{k.kind}\", ops = [{ops}]{', ' + sched if sched else ''}}}")
        lines.append("  return " + ", ".join(nm(v) for v in self.program.outputs))
        lines.append("}")
        return "\n".join(lines) + "\n"

    def count(self, kind_prefix: str = "") -> int:
        return sum(1 for k in self.kernels if k.kind.startswith(kind_prefix))


def gemm_layout(x_type, y_type, dimension_numbers):
    """(batch, m, n, k, a_trans, b_trans) when a dot_general of operands typed x_type and y_type
    with `dimension_numbers` ((lhs contracting, rhs contracting), (lhs batch, rhs batch)) is
    a (batched) GEMM C[b] = op(A[b]) @ op(B[b]) over the operands' memory as it is: batch the
    product of the leading batch dims, A (m x k) or, a_trans, (k x m) row-major, B (k x n) or,
    b_trans, (n x k). None otherwise (the backends then copy an operand first). Shared by the
    simplify pass (which folds transposes only where this holds) and every backend's GEMM."""
    (lc, rc), (lb, rb) = dimension_numbers
    nb = len(lb)
    if tuple(lb) != tuple(range(nb)) or tuple(rb) != tuple(range(nb)):
        return None
    xf = [i for i in range(x_type.ndim) if i not in lc and i not in lb]
    yf = [i for i in range(y_type.ndim) if i not in rc and i not in rb]
    rest_x = list(range(nb, x_type.ndim))
    xk = sorted(lc)
    if rest_x == xf + xk:
        a_trans = False
    elif rest_x == xk + xf:
        a_trans = True
    else:
        return None
    yk = [rc[list(lc).index(d)] for d in xk]  # y's contracting dims in x's memory order
    rest_y = list(range(nb, y_type.ndim))
    if rest_y == yk + yf:
        b_trans = False
    elif rest_y == yf + yk:
        b_trans = True
    else:
        return None
    prod = lambda t, dims: int(np.prod([t.shape[d] for d in dims], dtype=np.int64))  # noqa: E731
    batch = prod(x_type, lb)
    m, n, k = prod(x_type, xf), prod(y_type, yf), prod(x_type, xk)
    if min(batch, m, n, k) < 1:
        return None
    return batch, m, n, k, a_trans, b_trans
