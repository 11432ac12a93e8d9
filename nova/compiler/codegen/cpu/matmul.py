"""Nova's CPU matmul kernel generator: BLIS-style packed GEMM written in MLIR's vector dialect.

`emit_matmul(name, spec)` returns the MLIR text of one `func.func` computing, for every batch
index b, C[b] = A[b] @ B[b] (optionally followed by a fused elementwise epilogue) with

    A: memref<batch x m x k>  (or batch x k x m with a_trans)
    B: memref<batch x k x n>  (or batch x n x k with b_trans)
    C: memref<batch x m x n>                                   dtype f32 or f64, static shapes.

The operands are always 3-D, also for batch == 1: a C-contiguous (m, k) array has the same bytes as
a (1, m, k) one, and kernels take bare pointers (compile.py), so a caller passes 2-D arrays as they
are. Arguments are `(A, B, *epilogue_args, C)`.

The algorithm is the BLIS refactoring of Goto's algorithm (K. Goto and R. van de Geijn, "Anatomy
of high-performance matrix multiplication", ACM TOMS 34(3), 2008; F. Van Zee and R. van de Geijn,
"BLIS: A Framework for Rapidly Instantiating BLAS Functionality", ACM TOMS 41(3), 2015), with the
blocking parameters derived analytically as in T. M. Low et al., "Analytical Modeling Is Enough
for High-Performance BLIS", ACM TOMS 43(2), 2016 -- no autotuning search:

    for jc in 0..n step NC                       B panel (KC x NC) lives in L3
      for pc in 0..k step KC
        pack B[pc:pc+KC, jc:jc+NC] -> Bp[NC/NR][KC][NR]           (transpose folded in)
        for ic in 0..m step MC                   A block (MC x KC) lives in L2
          pack A[ic:ic+MC, pc:pc+KC] -> Ap[MC/MR][KC][MR]         (transpose folded in)
          for jr in 0..NC step NR                B micro-panel (KC x NR) lives in L1
            for ir in 0..MC step MR
              micro-kernel: MR x NR/W vector accumulators in registers (scf.for iter_args),
              k loop unrolled KU times, each step = NR/W vector loads of Bp, MR broadcasts of Ap
              and MR*NR/W `vector.fma`; then C (+)= acc, with the epilogue at the last pc.

Edges need no special shapes: packing zero-pads A rows past m, B columns past n and k past the
last multiple of KU, so every micro-kernel runs the same unrolled loop; a micro-tile that sticks
out of C goes through a small scratch tile and a scalar copy of its valid part.

Shape-generic kernels (`generic_variant`, `generic_params`): a kernel without an epilogue can be
emitted for its variant only -- dtype and register block -- taking `(A, B, P, C)` with P an
int64 vector of batch, m, n, k, the thread split, the cache blocks and the two transpose flags,
and A, B, C viewed at those sizes (memref.reinterpret_cast of bare pointers; both layouts of A
and B, the packs choose one behind an `scf.if`). The analytic plan still runs per shape, in
Python, to fill P; one compiled kernel then serves every shape and transpose of its variant.

Threads (spec.threads > 1): the iteration space is cut into `threads` independent slabs (along
batch, m or n, whichever duplicates less packing work) run inside one `omp.parallel` region;
each slab packs into its own buffers, so there is no synchronisation beyond the fork/join.
Why OpenMP: measured on the 2-core development machine (bench/NOTES.md), the `intel-openmp`
wheel's libiomp5.so implements the `__kmpc_*` API that MLIR's OpenMP lowering calls, links into
the kernel .so with an rpath, and keeps its threads pooled between calls, so setup stays pip-only
and the kernel remains one plain C function that the runtime calls like any other. Splitting the
work across Python threads (ctypes releases the GIL) would work too, but pushes the thread pool
and the partitioning into every caller.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from nova.compiler.codegen.builder import Builder, Value

# --- device description ----------------------------------------------------------------------


@dataclass(frozen=True)
class CPUDevice:
    """What the analytic blocking needs to know about a CPU (sizes in bytes, per core).

    vector_bits: SIMD register width (512 for AVX-512, 256 for AVX2); n_vregs: architectural
    vector registers (32 with AVX-512, 16 with AVX2); l1d/l2: per-core data caches; l3: shared
    last-level cache; cores: cores the process may run on.
    """

    vector_bits: int = 512
    n_vregs: int = 32
    l1d: int = 32 * 1024
    l1d_ways: int = 8
    l2: int = 1024 * 1024
    l3: int = 32 * 1024 * 1024
    cores: int = 2


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _parse_size(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(s[-1:], 1)
    return int(s.rstrip("KMG")) * mult


@functools.lru_cache(maxsize=1)
def host_device() -> CPUDevice:
    """The CPUDevice of this machine, from /proc/cpuinfo and /sys (defaults where unreadable).

    The vector width must match what LLVM compiles for (ExecutionEngine targets the host CPU):
    emitting vector<16xf32> on an AVX2-only host would split every vector in two and double the
    register pressure the micro-kernel was sized for.
    """
    flags: set[str] = set()
    info = _read("/proc/cpuinfo") or ""
    for line in info.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    if "avx512f" in flags:
        bits, regs = 512, 32
    elif "avx2" in flags and "fma" in flags:
        bits, regs = 256, 16
    elif flags:
        bits, regs = 128, 16
    else:  # not Linux/x86: assume a 128-bit SIMD unit with 32 registers (NEON-like)
        bits, regs = 128, 32
    dev = dict(vector_bits=bits, n_vregs=regs)
    base = "/sys/devices/system/cpu/cpu0/cache"
    for idx in range(8):
        d = f"{base}/index{idx}"
        level, kind, size = _read(f"{d}/level"), _read(f"{d}/type"), _read(f"{d}/size")
        if not (level and kind and size):
            continue
        if level == "1" and kind == "Data":
            dev["l1d"] = _parse_size(size)
            ways = _read(f"{d}/ways_of_associativity")
            if ways and ways.isdigit() and int(ways) > 0:
                dev["l1d_ways"] = int(ways)
        elif level == "2":
            dev["l2"] = _parse_size(size)
        elif level == "3":
            dev["l3"] = _parse_size(size)
    try:
        dev["cores"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        dev["cores"] = os.cpu_count() or 1
    return CPUDevice(**dev)


# --- specification and plan ------------------------------------------------------------------


@dataclass(frozen=True)
class MatmulSpec:
    """One batched matmul C[b] = epilogue(A[b] @ B[b]) with static shapes.

    A[b] is stored (m, k), or (k, m) with a_trans; B[b] is (k, n), or (n, k) with b_trans; all
    arrays C-contiguous. dtype: float32 or float64 (A, B and C alike). threads: the most threads
    the kernel may use (plan() may use fewer for small problems).

    epilogue(b: Builder, acc: Value, i: Value, j: Value, args: list[str]) -> Value is called
    while emitting the store of C: acc holds C[batch, i, j:j+W] (a vector of width W), or the
    single element C[batch, i, j] (width 0) on the scalar edge path; i, j are index Values and
    args the SSA names of the epilogue memref arguments. It returns the Value to store, of the
    same width. The batch index is available as `b.batch_index` (an index Value). The epilogue
    arguments have the MLIR types `epilogue_arg_types`, by default C's type each. The epilogue
    runs once per element, after the last k block.

    C must not alias A, B or an epilogue argument: C holds partial sums between k blocks (so an
    in-place residual `C = A @ B + C` must pass the residual as a separate buffer).
    """

    batch: int
    m: int
    n: int
    k: int
    a_trans: bool = False
    b_trans: bool = False
    dtype: np.dtype = field(default=np.dtype(np.float32))
    threads: int = 1
    epilogue: Callable | None = None
    n_epilogue_args: int = 0
    epilogue_arg_types: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        if self.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"matmul kernels support float32 and float64, not {self.dtype}")
        for f in ("batch", "m", "n", "k", "threads"):
            if int(getattr(self, f)) < 1:
                raise ValueError(f"MatmulSpec.{f} must be >= 1, got {getattr(self, f)}")
        if self.epilogue_arg_types and len(self.epilogue_arg_types) != self.n_epilogue_args:
            raise ValueError("epilogue_arg_types must name one type per epilogue argument")

    @property
    def elem(self) -> str:
        return "f32" if self.dtype == np.dtype(np.float32) else "f64"

    @property
    def a_type(self) -> str:
        r, c = (self.k, self.m) if self.a_trans else (self.m, self.k)
        return f"memref<{self.batch}x{r}x{c}x{self.elem}>"

    @property
    def b_type(self) -> str:
        r, c = (self.n, self.k) if self.b_trans else (self.k, self.n)
        return f"memref<{self.batch}x{r}x{c}x{self.elem}>"

    @property
    def c_type(self) -> str:
        return f"memref<{self.batch}x{self.m}x{self.n}x{self.elem}>"

    @property
    def arg_types(self) -> list[str]:
        ep = list(self.epilogue_arg_types) or [self.c_type] * self.n_epilogue_args
        return [self.a_type, self.b_type, *ep, self.c_type]

    @property
    def nargs(self) -> int:
        return 3 + self.n_epilogue_args


# The k loop of the micro-kernel is unrolled this many times: enough to give the out-of-order
# core independent loads to run ahead with, small enough that the k padding (< KU) is negligible.
KU = 4
# The most rows of a micro-tile: more only costs code size (the register bound is stricter).
MR_CAP = 16
# A thread is worth its fork/join only with this much work. Measured (bench/NOTES.md): with
# hot workers a 2-thread call costs ~15-30 us more than a 1-thread one, which 2 threads win
# back from about 2 x 80 GFLOP/s x 30 us = 4.8 MFLOP. Until round 19 this was 8 MFLOP (a 16
# MFLOP GEMM before 2 threads); the 8.4 MFLOP GEMMs of an RNN step ([64, 256] @ [256, 256],
# back to back in a native loop, the workers hot) ran 91 us on one thread, and on two the
# 200-step BPTT of bench/scan.py fell from 70.6 / 80.9 to 49.4 / 60.2 ms (two runs each).
MIN_FLOPS_PER_THREAD = 4_000_000


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return _ceil_div(a, b) * b


def _pow2_at_least(x: int) -> int:
    return 1 << max(0, x - 1).bit_length()


def _balanced(total: int, cap: int, mult: int) -> int:
    """The block size <= cap (a multiple of mult) that cuts `total` into the fewest, most even
    blocks: e.g. k=300 with KC<=256 gives two blocks of 152, not 256 + 44."""
    blocks = _ceil_div(total, cap)
    return min(cap, _round_up(_ceil_div(total, blocks), mult))


def plan(spec: MatmulSpec, device: CPUDevice | None = None) -> dict:
    """The blocking of `spec` on `device` (default: this host), derived analytically.

    Register block (MR x NR, NR = NV vectors of W lanes): MR*NV accumulators + NV B vectors + 1
    broadcast A value must fit the vector registers; among NV in {1, 2, 4} we take the shape with
    the most FMAs per load instruction (MR*NV / (MR + NV)), since loads, not FMAs, bound a
    register-blocked kernel (Low et al. 2016). AVX2 gives 6x16 f32 (BLIS' Haswell kernel), AVX-512
    6x64. MR and NR shrink to m and n when those are smaller.
    Cache blocks: KC so that one B micro-panel (KC x NR) plus two A micro-panels (current and
    prefetched) fill the L1 ways left after one way for C; MC so that the A block (MC x KC) takes
    half of L2; NC so that the B panel (KC x NC) takes half of this core's share of L3. Each is then
    evened out over the actual size (fewest, most equal blocks).
    Threads: at most spec.threads and device.cores, and only with MIN_FLOPS_PER_THREAD each;
    slabs along batch when it divides evenly (or is large), else along m when m >= n (splitting m
    makes every thread pack all of B, splitting n all of A: the smaller one is duplicated).
    """
    dev = device or host_device()
    size = spec.dtype.itemsize
    w = max(1, dev.vector_bits // (8 * size))
    nv_cap = max(1, _ceil_div(spec.n, w))
    best = None
    for nv in (1, 2, 4):
        if nv > 1 and nv > nv_cap:
            continue
        mr = min((dev.n_vregs - 1 - nv) // nv, MR_CAP, spec.m)
        if mr < 1:
            continue
        score = (mr * nv / (mr + nv), mr * nv)
        if best is None or score > best[0]:
            best = (score, mr, nv)
    _, mr, nv = best
    nr = nv * w

    # KC is a multiple of the unroll and of the transposing packs' W x W blocks.
    kq = max(KU, w)
    usable_l1 = dev.l1d * (dev.l1d_ways - 1) // dev.l1d_ways
    kc_max = max(kq, usable_l1 // ((nr + 2 * mr) * size) // kq * kq)
    mc_max = max(mr, dev.l2 // 2 // (kc_max * size) // mr * mr)
    nc_max = max(nr, dev.l3 // max(1, dev.cores) // 2 // (kc_max * size) // nr * nr)

    flops = 2 * spec.batch * spec.m * spec.n * spec.k
    threads = max(1, min(spec.threads, dev.cores, flops // MIN_FLOPS_PER_THREAD))
    split, slab = "none", 0
    if threads > 1:
        if spec.batch % threads == 0 or spec.batch >= 4 * threads:
            split, slab = "batch", _ceil_div(spec.batch, threads)
            threads = _ceil_div(spec.batch, slab)
        else:
            m_ok = _ceil_div(spec.m, mr) >= threads
            n_ok = _ceil_div(spec.n, nr) >= threads
            if m_ok and (spec.m >= spec.n or not n_ok):
                split, slab = "m", _round_up(_ceil_div(spec.m, threads), mr)
                threads = _ceil_div(spec.m, slab)
            elif n_ok:
                split, slab = "n", _round_up(_ceil_div(spec.n, threads), nr)
                threads = _ceil_div(spec.n, slab)
            else:
                threads = 1
    if threads == 1:
        split, slab = "none", 0
    rows = slab if split == "m" else spec.m
    cols = slab if split == "n" else spec.n
    kc = _balanced(spec.k, kc_max, kq)
    mc = _balanced(rows, mc_max, mr)
    nc = _balanced(cols, nc_max, nr)
    return {
        "W": w, "MR": mr, "NV": nv, "NR": nr, "KU": KU, "KC": kc, "MC": mc, "NC": nc,
        "KC_max": kc_max, "MC_max": mc_max, "NC_max": nc_max,
        "threads": threads, "split": split, "slab": slab, "device": dev,
    }


# --- IR emission -----------------------------------------------------------------------------


def shuffle_transpose(op, rows: list[str], tw: int, vt: str) -> list[str]:
    """The transpose of a tw x tw block held as tw vectors `rows` of type `vt` (tw a power of
    2): log2(tw) rounds of `new[2i], new[2i+1] = interleave_lo/hi(r[i], r[i + tw/2])` (the
    perfect-shuffle transpose), each a `vector.shuffle` that LLVM maps to unpack / permute
    instructions. op(text) emits one operation and returns its SSA name."""
    lo = [q // 2 + (q % 2) * tw for q in range(tw)]
    hi = [tw // 2 + q // 2 + (q % 2) * tw for q in range(tw)]
    for _ in range(tw.bit_length() - 1):
        new = []
        for i in range(tw // 2):
            a, b = rows[i], rows[i + tw // 2]
            for mask in (lo, hi):
                new.append(op(f"vector.shuffle {a}, {b} {mask} : {vt}, {vt}"))
        rows = new
    return rows



class _Emitter:
    """Lines of MLIR with an indentation level, fresh SSA names and hoisted constants."""

    def __init__(self, elem: str):
        self.lines: list[str] = []
        self.indent = 4
        self.count = 0
        self.elem = elem
        self.consts: dict[str, str] = {}  # SSA name -> defining op, emitted at function entry

    def fresh(self, hint: str = "t") -> str:
        if hint in ("c", "cm"):  # idx()'s constants are %c<value> / %cm<value>
            raise ValueError(f"SSA hint {hint!r} is reserved for index constants")
        self.count += 1
        return f"%{hint}{self.count}"

    def emit(self, text: str) -> None:
        self.lines.append(" " * self.indent + text)

    def op(self, text: str, hint: str = "t") -> str:
        name = self.fresh(hint)
        self.emit(f"{name} = {text}")
        return name

    def idx(self, v: int) -> str:
        name = f"%c{v}" if v >= 0 else f"%cm{-v}"
        self.consts[name] = f"arith.constant {v} : index"
        return name

    def fzero(self, width: int = 0) -> str:
        if width:
            name = f"%zero_v{width}"
            self.consts[name] = f"arith.constant dense<0.0> : vector<{width}x{self.elem}>"
        else:
            name = "%zero_s"
            self.consts[name] = f"arith.constant 0.0 : {self.elem}"
        return name

    # index arithmetic (all on `index`)
    def add(self, a: str, b: str) -> str:
        return self.op(f"arith.addi {a}, {b} : index", "i")

    def sub(self, a: str, b: str) -> str:
        return self.op(f"arith.subi {a}, {b} : index", "i")

    def mul(self, a: str, b: str) -> str:
        return self.op(f"arith.muli {a}, {b} : index", "i")

    def min(self, a: str, b: str) -> str:
        return self.op(f"arith.minsi {a}, {b} : index", "i")

    def ceil_div(self, a: str, b: int) -> str:
        return self.op(f"arith.ceildivsi {a}, {self.idx(b)} : index", "i")

    def cmp(self, pred: str, a: str, b: str) -> str:
        return self.op(f"arith.cmpi {pred}, {a}, {b} : index", "p")

    def open(self, text: str) -> None:
        self.emit(text + " {")
        self.indent += 2

    def close(self, text: str = "}") -> None:
        self.indent -= 2
        self.emit(text)

    def for_(self, iv: str, lo: str, hi: str, step: str) -> None:
        self.open(f"scf.for {iv} = {lo} to {hi} step {step}")


class _MatmulGen:
    def __init__(self, name: str, spec: MatmulSpec, tiles: dict):
        self.name, self.spec, self.t = name, spec, tiles
        self.e = _Emitter(spec.elem)
        self.elem = spec.elem
        w = tiles["W"]
        self.vt = f"vector<{w}x{self.elem}>"
        # Scratch shapes: whole NC x KC panel of B, MC x KC block of A, one MR x NR tile of C.
        t = tiles
        self.generic = bool(t.get("generic"))
        if self.generic:
            # Shapes, strides and blocking come from the parameter vector at run time.
            if spec.epilogue is not None:
                raise ValueError("a shape-generic matmul takes no epilogue")
            dyn = f"memref<?x?x?x{self.elem}, strided<[?, ?, 1]>>"
            self.a_t = self.b_t = self.c_t = dyn
            self.bp_t = f"memref<?x?x{t['NR']}x{self.elem}>"
            self.ap_t = f"memref<?x?x{t['MR']}x{self.elem}>"
        else:
            self.a_t, self.b_t, self.c_t = spec.a_type, spec.b_type, spec.c_type
            self.bp_t = f"memref<{t['NC'] // t['NR']}x{t['KC']}x{t['NR']}x{self.elem}>"
            self.ap_t = f"memref<{t['MC'] // t['MR']}x{t['KC']}x{t['MR']}x{self.elem}>"
        self.ct_t = f"memref<{t['MR']}x{t['NR']}x{self.elem}>"
        self.ep_builder = Builder(prefix="ep")
        self.ep_builder.exp_fast_path = True
        self.ep_builder.default_dtype = spec.dtype

    # ---- top level ----
    def emit(self) -> str:
        s, t, e = self.spec, self.t, self.e
        self.A, self.B, self.C = "%A", "%B", "%C"
        self.eargs = [f"%E{i}" for i in range(s.n_epilogue_args)]
        names = [self.A, self.B, *self.eargs, self.C]
        sig = ", ".join(f"{n}: {ty}" for n, ty in zip(names, s.arg_types))
        if self.generic:
            sig = self._generic_prologue()
        if self.generic or t["threads"] > 1:
            nt = self.nt if self.generic else e.op(f"arith.constant {t['threads']} : i32", "nt")
            # Each thread takes slabs tid, tid + nthreads, ...: correct even if the runtime
            # grants fewer threads than asked (nested parallelism, OMP_THREAD_LIMIT).
            e.open(f"omp.parallel num_threads({nt} : i32)")
            tid32 = e.op("func.call @omp_get_thread_num() : () -> i32", "tid")
            nth32 = e.op("func.call @omp_get_num_threads() : () -> i32", "nth")
            tid = e.op(f"arith.index_cast {tid32} : i32 to index", "i")
            nth = e.op(f"arith.index_cast {nth32} : i32 to index", "i")
            e.for_("%slab", tid, self.p["threads"] if self.generic else e.idx(t["threads"]), nth)
            self.slab("%slab")
            e.close()
            e.emit("omp.terminator")
            e.close()
        else:
            self.slab(None)
        consts = [f"    {n} = {v}" for n, v in sorted(self.e.consts.items())]
        return "\n".join([f"func.func @{self.name}({sig}) {{", *consts, *e.lines,
                          "    return", "}"])

    # Positions in a shape-generic kernel's parameter vector (an int64 memref argument).
    GENERIC_PARAMS = ("batch", "m", "n", "k", "threads", "split", "slab", "KC", "MC", "NC",
                      "a_trans", "b_trans")

    def _generic_prologue(self) -> str:
        """Signature `(A, B, P, C)` with A, B, C as bare pointers (memref<1xT>) viewed through
        memref.reinterpret_cast at the sizes and strides P holds; loads P into index values."""
        e, el, s = self.e, self.elem, self.spec
        n_p = len(self.GENERIC_PARAMS)
        pt = f"memref<{n_p}xi64>"
        self.p = {}
        for q, name in enumerate(self.GENERIC_PARAMS):
            raw = e.op(f"memref.load %P[{e.idx(q)}] : {pt}", "pr")
            self.p[name] = e.op(f"arith.index_cast {raw} : i64 to index", "p")
        self.nt = e.op(f"arith.index_cast {self.p['threads']} : index to i32", "nt")
        bdim, m, n, k = self.p["batch"], self.p["m"], self.p["n"], self.p["k"]

        def view(raw, rows, cols):
            plane = e.mul(rows, cols)
            return e.op(f"memref.reinterpret_cast {raw} to offset: [0], sizes: [{bdim}, {rows}, "
                        f"{cols}], strides: [{plane}, {cols}, 1] : memref<1x{el}> to {self.a_t}",
                        "view")

        # Both layouts of A and B (descriptors only); the packs pick one by P's a_trans/b_trans.
        self.A_views = {False: view("%A0", m, k), True: view("%A0", k, m)}
        self.B_views = {False: view("%B0", k, n), True: view("%B0", n, k)}
        self.A, self.B, self.C = self.A_views[False], self.B_views[False], view("%C0", m, n)
        return f"%A0: memref<1x{el}>, %B0: memref<1x{el}>, %P: {pt}, %C0: memref<1x{el}>"

    def slab(self, sid: str | None) -> None:
        s, t, e = self.spec, self.t, self.e
        if self.generic:
            b0, b1 = e.idx(0), self.p["batch"]
            m0, m1 = e.idx(0), self.p["m"]
            n0, n1 = e.idx(0), self.p["n"]
            # The split axis is a run-time choice (plan() made it for the actual shape):
            # 0 none, 1 batch, 2 m, 3 n; the slab's range replaces that axis' full range.
            lo = e.mul(sid, self.p["slab"])
            spl = [e.cmp("eq", self.p["split"], e.idx(q)) for q in (1, 2, 3)]
            sel = lambda c, a, b: e.op(f"arith.select {c}, {a}, {b} : index", "i")  # noqa: E731
            total = sel(spl[0], b1, sel(spl[1], m1, n1))
            hi = e.min(e.add(lo, self.p["slab"]), total)
            b0, b1 = sel(spl[0], lo, b0), sel(spl[0], hi, b1)
            m0, m1 = sel(spl[1], lo, m0), sel(spl[1], hi, m1)
            n0, n1 = sel(spl[2], lo, n0), sel(spl[2], hi, n1)
            sid = None
            kdim, kc_t, mc_t, nc_t = self.p["k"], self.p["KC"], self.p["MC"], self.p["NC"]
        else:
            b0, b1 = e.idx(0), e.idx(s.batch)
            m0, m1 = e.idx(0), e.idx(s.m)
            n0, n1 = e.idx(0), e.idx(s.n)
            kdim, kc_t, mc_t, nc_t = e.idx(s.k), e.idx(t["KC"]), e.idx(t["MC"]), e.idx(t["NC"])
        if sid is not None:
            lo = e.mul(sid, e.idx(t["slab"]))
            total = {"batch": s.batch, "m": s.m, "n": s.n}[t["split"]]
            hi = e.min(e.add(lo, e.idx(t["slab"])), e.idx(total))
            if t["split"] == "batch":
                b0, b1 = lo, hi
            elif t["split"] == "m":
                m0, m1 = lo, hi
            else:
                n0, n1 = lo, hi
        # Heap scratch (64-byte aligned, one cache line): the B panel can be megabytes, too big
        # for a thread's stack, and each slab (thread) owns its buffers.
        if self.generic:
            sizes_b = f"{e.ceil_div(nc_t, t['NR'])}, {kc_t}"
            sizes_a = f"{e.ceil_div(mc_t, t['MR'])}, {kc_t}"
        else:
            sizes_b = sizes_a = ""
        self.Bp = e.op(f"memref.alloc({sizes_b}) {{alignment = 64 : i64}} : {self.bp_t}", "Bp")
        self.Ap = e.op(f"memref.alloc({sizes_a}) {{alignment = 64 : i64}} : {self.ap_t}", "Ap")
        self.Ct = e.op(f"memref.alloc() {{alignment = 64 : i64}} : {self.ct_t}", "Ct")
        c1 = e.idx(1)
        e.for_("%bb", b0, b1, c1)
        self.bb = "%bb"
        self.ep_builder.batch_index = Value("%bb", "index")
        e.for_("%jc", n0, n1, nc_t)
        nc = e.min(nc_t, e.sub(n1, "%jc"))
        npb = e.ceil_div(nc, t["NR"])
        e.for_("%pc", e.idx(0), kdim, kc_t)
        kc = e.min(kc_t, e.sub(kdim, "%pc"))
        kcu = e.mul(e.ceil_div(kc, KU), e.idx(KU))
        first = e.cmp("eq", "%pc", e.idx(0))
        last = e.cmp("eq", e.add("%pc", kc), kdim)
        self.pack_b("%jc", nc, npb, "%pc", kc, kcu)
        e.for_("%ic", m0, m1, mc_t)
        mc = e.min(mc_t, e.sub(m1, "%ic"))
        npa = e.ceil_div(mc, t["MR"])
        self.pack_a("%ic", mc, npa, "%pc", kc, kcu)
        e.for_("%jr", e.idx(0), npb, c1)
        e.for_("%ir", e.idx(0), npa, c1)
        self.micro_tile("%jc", nc, "%jr", "%ic", mc, "%ir", kcu, first, last)
        for _ in range(5):
            e.close()
        e.close()
        for buf, ty in ((self.Bp, self.bp_t), (self.Ap, self.ap_t), (self.Ct, self.ct_t)):
            e.emit(f"memref.dealloc {buf} : {ty}")

    # ---- packing ----
    def pack_b(self, jc, nc, npb, pc, kc, kcu) -> None:
        """Bp[jp, kk, c] = B[bb, pc+kk, jc+jp*NR+c] (0 past n or past kc, up to kcu)."""
        s, t, e = self.spec, self.t, self.e
        nr, w, vt = t["NR"], t["W"], self.vt
        c0, c1 = e.idx(0), e.idx(1)
        e.for_("%jp", c0, npb, c1)
        jofs = e.mul("%jp", e.idx(nr))
        j = e.add(jc, jofs)
        nv = e.min(e.idx(nr), e.sub(nc, jofs))
        self._either(lambda trans: self._pack_b_panel(trans, j, nv, pc, kc), "b_trans",
                     s.b_trans)
        # k padding up to a multiple of KU: zeros contribute nothing to the sums.
        e.for_("%kk", kc, kcu, c1)
        for v in range(t["NV"]):
            e.emit(f"vector.store {e.fzero(w)}, {self.Bp}[%jp, %kk, {e.idx(v * w)}] : "
                   f"{self.bp_t}, {vt}")
        e.close()
        e.close()

    def pack_a(self, ic, mc, npa, pc, kc, kcu) -> None:
        """Ap[ip, kk, r] = A[bb, ic+ip*MR+r, pc+kk] (0 past m or past kc, up to kcu)."""
        s, t, e = self.spec, self.t, self.e
        mr = t["MR"]
        c0, c1 = e.idx(0), e.idx(1)
        mvt = f"vector<{mr}x{self.elem}>"
        e.for_("%ip", c0, npa, c1)
        iofs = e.mul("%ip", e.idx(mr))
        i = e.add(ic, iofs)
        mv = e.min(e.idx(mr), e.sub(mc, iofs))
        self._either(lambda trans: self._pack_a_block(trans, i, mv, pc, kc), "a_trans",
                     s.a_trans)
        e.for_("%kk", kc, kcu, c1)
        e.emit(f"vector.store {e.fzero(mr)}, {self.Ap}[%ip, %kk, {c0}] : {self.ap_t}, {mvt}")
        e.close()
        e.close()

    def _either(self, emit, flag: str, static: bool) -> None:
        """emit(trans) for the kernel's transpose; a shape-generic kernel reads it from its
        parameter vector and holds both packs behind an `scf.if` (one kernel then serves
        every transpose variant: one micro-kernel for LLVM to compile instead of four)."""
        if not self.generic:
            emit(static)
            return
        e = self.e
        on = e.cmp("ne", self.p[flag], e.idx(0))
        e.open(f"scf.if {on}")
        emit(True)
        e.close("} else {")
        e.indent += 2
        emit(False)
        e.close()

    def _pack_b_panel(self, trans, j, nv, pc, kc) -> None:
        """The kc packed rows of one NR-wide panel of B (B transposed when `trans`)."""
        t, e = self.t, self.e
        nr, w, vt, bt = t["NR"], t["W"], self.vt, self.b_t
        B = self.B_views[trans] if self.generic else self.B
        c0, c1 = e.idx(0), e.idx(1)
        if trans:
            # B is (n, k): the panel is a transpose of NR rows of B, done W x W at a time.
            self.pack_transposed(B, bt, j, nv, nr, "%jp", self.Bp, self.bp_t, pc, kc)
        else:
            # B is (k, n): each packed row is NR contiguous elements, copied as vectors; the
            # last panel uses masked loads so that nothing past column n is touched.
            full = e.cmp("eq", nv, e.idx(nr))
            e.open(f"scf.if {full}")
            e.for_("%kk", c0, kc, c1)
            krow = e.add(pc, "%kk")
            for v in range(t["NV"]):
                col = e.add(j, e.idx(v * w))
                x = e.op(f"vector.load {B}[{self.bb}, {krow}, {col}] : {bt}, {vt}", "x")
                e.emit(f"vector.store {x}, {self.Bp}[%jp, %kk, {e.idx(v * w)}] : "
                       f"{self.bp_t}, {vt}")
            e.close()
            e.close("} else {")
            e.indent += 2
            masks = []
            for v in range(t["NV"]):
                cnt = e.sub(nv, e.idx(v * w))
                masks.append(e.op(f"vector.create_mask {cnt} : vector<{w}xi1>", "mask"))
            e.for_("%kk", c0, kc, c1)
            krow = e.add(pc, "%kk")
            for v in range(t["NV"]):
                col = e.add(j, e.idx(v * w))
                x = e.op(f"vector.maskedload {B}[{self.bb}, {krow}, {col}], {masks[v]}, "
                         f"{e.fzero(w)} : {bt}, vector<{w}xi1>, {vt} into {vt}", "x")
                e.emit(f"vector.store {x}, {self.Bp}[%jp, %kk, {e.idx(v * w)}] : "
                       f"{self.bp_t}, {vt}")
            e.close()
            e.close()

    def _pack_a_block(self, trans, i, mv, pc, kc) -> None:
        """The kc packed k-steps of one MR-row block of A (A transposed when `trans`)."""
        t, e = self.t, self.e
        mr, at = t["MR"], self.a_t
        A = self.A_views[trans] if self.generic else self.A
        c0, c1 = e.idx(0), e.idx(1)
        mvt = f"vector<{mr}x{self.elem}>"
        if trans:
            full = e.cmp("eq", mv, e.idx(mr))
            # A is (k, m): the MR values of one packed k step are contiguous; one vector each.
            e.open(f"scf.if {full}")
            e.for_("%kk", c0, kc, c1)
            x = e.op(f"vector.load {A}[{self.bb}, {e.add(pc, '%kk')}, {i}] : {at}, {mvt}",
                     "x")
            e.emit(f"vector.store {x}, {self.Ap}[%ip, %kk, {c0}] : {self.ap_t}, {mvt}")
            e.close()
            e.close("} else {")
            e.indent += 2
            mask = e.op(f"vector.create_mask {mv} : vector<{mr}xi1>", "mask")
            e.for_("%kk", c0, kc, c1)
            x = e.op(f"vector.maskedload {A}[{self.bb}, {e.add(pc, '%kk')}, {i}], {mask}, "
                     f"{e.fzero(mr)} : {at}, vector<{mr}xi1>, {mvt} into {mvt}", "x")
            e.emit(f"vector.store {x}, {self.Ap}[%ip, %kk, {c0}] : {self.ap_t}, {mvt}")
            e.close()
            e.close()
        else:
            # A is (m, k): the block is a transpose of MR rows of A.
            self.pack_transposed(A, at, i, mv, mr, "%ip", self.Ap, self.ap_t, pc, kc)

    def transpose(self, rows: list[str], tw: int) -> list[str]:
        return shuffle_transpose(lambda text: self.e.op(text, "tr"), rows, tw,
                                 f"vector<{tw}x{self.elem}>")

    def pack_transposed(self, src, src_t, base, nvalid, r, p, dst, dst_t, pc, kc) -> None:
        """dst[p, kk, c] = src[bb, base + c, pc + kk] for c < r (0 for c >= nvalid), kk < kc
        (0 up to the next multiple of the block size TW; plan() makes KC a multiple of it).

        Rows of src are contiguous in k, so blocks of TW rows x TW k-values are read as TW
        vectors (masked at the n/m and k edges, which also zero-fills), transposed in registers
        and stored as TW packed k-steps: vector loads and stores instead of 2 scalar memory
        operations per element, and far less code for LLVM than scalar copy loops it would
        unroll and vectorize itself.
        """
        e, el = self.e, self.elem
        tw = min(self.t["W"], _pow2_at_least(r))
        vt, mt = f"vector<{tw}x{el}>", f"vector<{tw}xi1>"
        c0 = e.idx(0)
        e.for_("%tk", c0, kc, e.idx(tw))
        col = e.add(pc, "%tk")
        # Plain loads for whole blocks, masked ones only at the edges: measured on Zen 3, a
        # pack made of masked loads (vmaskmovps) ran 1.5x slower than the plain-load version
        # on a (256 x 256) @ (256 x 64) batch (bench/NOTES.md).
        inside = e.op(f"arith.andi {e.cmp('eq', nvalid, e.idx(r))}, "
                      f"{e.cmp('sle', e.add('%tk', e.idx(tw)), kc)} : i1", "p")
        e.open(f"scf.if {inside}")
        self._transpose_block(src, src_t, base, None, r, p, dst, dst_t, col, tw)
        e.close("} else {")
        e.indent += 2
        cnt_k = e.min(e.idx(tw), e.sub(kc, "%tk"))
        self._transpose_block(src, src_t, base, (nvalid, cnt_k), r, p, dst, dst_t, col, tw)
        e.close()
        e.close()

    def _transpose_block(self, src, src_t, base, edge, r, p, dst, dst_t, col, tw) -> None:
        """One TW-deep k block of pack_transposed; edge = (valid rows, valid k) or None."""
        e, el = self.e, self.elem
        vt, mt = f"vector<{tw}x{el}>", f"vector<{tw}xi1>"
        c0 = e.idx(0)
        for g in range(_ceil_div(r, tw)):
            rows = []
            for c in range(tw):
                row = g * tw + c
                if row >= r:  # padding rows of the block (r < tw): zeros, never loaded
                    rows.append(e.fzero(tw))
                    continue
                at = f"{src}[{self.bb}, {e.add(base, e.idx(row))}, {col}]"
                if edge is None:
                    rows.append(e.op(f"vector.load {at} : {src_t}, {vt}", "x"))
                    continue
                nvalid, cnt_k = edge
                ok = e.cmp("slt", e.idx(row), nvalid)
                cnt = e.op(f"arith.select {ok}, {cnt_k}, {c0} : index", "i")
                mask = e.op(f"vector.create_mask {cnt} : {mt}", "mask")
                rows.append(e.op(f"vector.maskedload {at}, {mask}, {e.fzero(tw)} : {src_t}, "
                                 f"{mt}, {vt} into {vt}", "x"))
            lanes = min(tw, r - g * tw)  # the last block may hold fewer real rows
            for q, v in enumerate(self.transpose(rows, tw)):
                kk = e.add("%tk", e.idx(q)) if q else "%tk"
                st = vt
                if lanes < tw:
                    st = f"vector<{lanes}x{el}>"
                    v = e.op(f"vector.extract_strided_slice {v} {{offsets = [0], "
                             f"sizes = [{lanes}], strides = [1]}} : {vt} to {st}", "x")
                e.emit(f"vector.store {v}, {dst}[{p}, {kk}, {e.idx(g * tw)}] : {dst_t}, {st}")

    # ---- micro-kernel ----
    def k_loop(self, jr: str, ir: str, kcu: str, init: list[str]) -> list[str]:
        """MR x NV accumulators += Ap[ir, :kcu, :] (outer) Bp[jr, :kcu, :], unrolled KU times."""
        t, e, vt = self.t, self.e, self.vt
        mr, nvec, w = t["MR"], t["NV"], t["W"]
        n = len(init)
        res = e.fresh("acc")
        iters = [f"%x{q}" for q in range(n)]
        args = ", ".join(f"{a} = {b}" for a, b in zip(iters, init))
        e.open(f"{res}:{n} = scf.for %k = {e.idx(0)} to {kcu} step {e.idx(KU)} "
               f"iter_args({args}) -> ({', '.join([vt] * n)})")
        cur = list(iters)
        for u in range(KU):
            ku = e.add("%k", e.idx(u)) if u else "%k"
            bv = [e.op(f"vector.load {self.Bp}[{jr}, {ku}, {e.idx(v * w)}] : {self.bp_t}, {vt}",
                       "b") for v in range(nvec)]
            for r in range(mr):
                a = e.op(f"memref.load {self.Ap}[{ir}, {ku}, {e.idx(r)}] : {self.ap_t}", "a")
                av = e.op(f"vector.broadcast {a} : {self.elem} to {vt}", "av")
                for v in range(nvec):
                    q = r * nvec + v
                    cur[q] = e.op(f"vector.fma {av}, {bv[v]}, {cur[q]} : {vt}", "y")
        e.emit(f"scf.yield {', '.join(cur)} : {', '.join([vt] * n)}")
        e.close()
        return [f"{res}#{q}" for q in range(n)]

    def epilogue(self, acc: str, width: int, i: str, j: str) -> str:
        """Emits the user epilogue (if any) at the current position; returns the value to store."""
        s, e = self.spec, self.e
        if s.epilogue is None:
            return acc
        b = self.ep_builder
        b.lines = []
        b.indent = e.indent
        b.forget_constants()  # constants of an earlier region are not visible here
        out = s.epilogue(b, Value(acc, s.dtype, width), Value(i, "index"), Value(j, "index"),
                         list(self.eargs))
        if out.width != width or out.dtype != s.dtype:
            raise ValueError(f"matmul epilogue returned {out.type}, expected "
                             f"{'vector<%dx%s>' % (width, s.elem) if width else s.elem}")
        e.lines.extend(b.lines)
        return out.name

    def micro_tile(self, jc, nc, jr, ic, mc, ir, kcu, first, last) -> None:
        s, t, e, vt = self.spec, self.t, self.e, self.vt
        mr, nvec, nr, w, ct = t["MR"], t["NV"], t["NR"], t["W"], self.c_t
        i = e.add(ic, e.mul(ir, e.idx(mr)))
        j = e.add(jc, e.mul(jr, e.idx(nr)))
        mv = e.min(e.idx(mr), e.sub(mc, e.mul(ir, e.idx(mr))))
        nv = e.min(e.idx(nr), e.sub(nc, e.mul(jr, e.idx(nr))))
        full = e.op(f"arith.andi {e.cmp('eq', mv, e.idx(mr))}, {e.cmp('eq', nv, e.idx(nr))} : i1",
                    "p")
        n = mr * nvec
        rows = [e.add(i, e.idx(r)) if r else i for r in range(mr)]
        cols = [e.add(j, e.idx(v * w)) if v else j for v in range(nvec)]
        tys = ", ".join([vt] * n)
        # Accumulate from zero and add C after the k loop (BLIS' beta = 1 update): loading C
        # into the accumulators first put its latency in front of the FMA chains (measured
        # 81 vs 86 GFLOP/s at 2048, bench/NOTES.md). A full tile's C is prefetched for writing
        # now and arrives while the k loop runs. Full and edge tiles share the k loop.
        if t.get("prefetch_c", True):  # plan key for the benchmark's with/without comparison
            e.open(f"scf.if {full}")
            for r in range(mr):
                for v in range(nvec):
                    e.emit(f"memref.prefetch {self.C}[{self.bb}, {rows[r]}, {cols[v]}], "
                           f"write, locality<3>, data : {ct}")
            e.close()
        part = self.k_loop(jr, ir, kcu, [e.fzero(w)] * n)
        e.open(f"scf.if {full}")
        sums = e.fresh("sum")
        e.open(f"{sums}:{n} = scf.if {first} -> ({tys})")
        e.emit(f"scf.yield {', '.join(part)} : {tys}")
        e.close("} else {")
        e.indent += 2
        added = []
        for r in range(mr):
            for v in range(nvec):
                old = e.op(f"vector.load {self.C}[{self.bb}, {rows[r]}, {cols[v]}] : {ct}, {vt}",
                           "cv")
                added.append(e.op(f"arith.addf {old}, {part[r * nvec + v]} : {vt}", "y"))
        e.emit(f"scf.yield {', '.join(added)} : {tys}")
        e.close()
        acc = [f"{sums}#{q}" for q in range(n)]
        if s.epilogue is not None:
            e.open(f"scf.if {last}")
            for r in range(mr):
                for v in range(nvec):
                    y = self.epilogue(acc[r * nvec + v], w, rows[r], cols[v])
                    e.emit(f"vector.store {y}, {self.C}[{self.bb}, {rows[r]}, {cols[v]}] : "
                           f"{ct}, {vt}")
            e.close("} else {")
            e.indent += 2
        for r in range(mr):
            for v in range(nvec):
                e.emit(f"vector.store {acc[r * nvec + v]}, {self.C}[{self.bb}, {rows[r]}, "
                       f"{cols[v]}] : {ct}, {vt}")
        if s.epilogue is not None:
            e.close()
        # Edge tile (sticks out of C): spill the whole tile to the scratch tile Ct, then merge
        # its valid part element by element (scalar epilogue).
        e.close("} else {")
        e.indent += 2
        acc = part
        for r in range(mr):
            for v in range(nvec):
                e.emit(f"vector.store {acc[r * nvec + v]}, {self.Ct}[{e.idx(r)}, "
                       f"{e.idx(v * w)}] : {self.ct_t}, {vt}")
        c0, c1 = e.idx(0), e.idx(1)
        e.for_("%er", c0, mv, c1)
        e.for_("%ec", c0, nv, c1)
        row, col = e.add(i, "%er"), e.add(j, "%ec")
        x = e.op(f"memref.load {self.Ct}[%er, %ec] : {self.ct_t}", "x")
        el = self.elem
        e.open(f"%sum = scf.if {first} -> ({el})")
        e.emit(f"scf.yield {x} : {el}")
        e.close("} else {")
        e.indent += 2
        old = e.op(f"memref.load {self.C}[{self.bb}, {row}, {col}] : {ct}", "old")
        e.emit(f"scf.yield {e.op(f'arith.addf {old}, {x} : {el}', 'x')} : {el}")
        e.close()
        y = "%sum"
        if s.epilogue is not None:
            e.open(f"%out = scf.if {last} -> ({el})")
            e.emit(f"scf.yield {self.epilogue('%sum', 0, row, col)} : {el}")
            e.close("} else {")
            e.indent += 2
            e.emit(f"scf.yield %sum : {el}")
            e.close()
            y = "%out"
        e.emit(f"memref.store {y}, {self.C}[{self.bb}, {row}, {col}] : {ct}")
        e.close()
        e.close()
        e.close()


def emit_matmul(name: str, spec: MatmulSpec, tiles: dict | None = None,
                device: CPUDevice | None = None) -> str:
    """MLIR text of `func.func @name(A, B, *epilogue_args, C)` computing spec (see the module
    docstring for shapes). tiles: a plan() dict to use instead of the analytic one (for the
    benchmark's experiments); device: the CPUDevice to plan for (default: this host).

    A threaded kernel (`needs_openmp(text)`) calls the OpenMP runtime: its module must also hold
    OMP_DECLS once (module_text() adds them), be compiled with `openmp=True`, and run after
    `use_openmp_defaults()` (compile.py) in the process that loads it."""
    t = dict(tiles) if tiles is not None else plan(spec, device)
    return _MatmulGen(name, spec, t).emit()


def generic_variant(spec: MatmulSpec, device: CPUDevice | None = None) -> dict | None:
    """The tiles of a shape-generic kernel able to run `spec` as well as its own kernel would, or
    None. A generic kernel fixes only what code generation needs (dtype, the register block
    MR x NV of W lanes); batch, m, n, k, the transposes, the thread split and the cache blocks
    are read at run time from a parameter vector (`generic_params`). Every spec with the same
    variant shares one compiled kernel: the matmuls of a model compile once, not once per
    shape (the 15 matmul kernels of the tiny GPT-2 step were 3.6 of its 6.2 s of LLVM time).
    None for an epilogue (its code is shape-specific) and where the register block would
    shrink to the shape (m < MR or n < NR: a matrix-vector product keeps its own kernel)."""
    if spec.epilogue is not None:
        return None
    dev = device or host_device()
    t = plan(spec, dev)
    big = plan(MatmulSpec(1, 4096, 4096, 256, dtype=spec.dtype), dev)
    if (t["MR"], t["NV"]) != (big["MR"], big["NV"]):
        return None
    return {"generic": True, "W": t["W"], "MR": t["MR"], "NV": t["NV"], "NR": t["NR"],
            "KU": t["KU"], "threads": 2, "device": dev}


def generic_name(spec: MatmulSpec, tiles: dict) -> str:
    """The symbol of the shape-generic kernel for spec's variant: the dtype and the register
    block (one kernel serves all four transpose combinations, read from its parameters)."""
    return f"nova_gemm_{spec.elem}_{tiles['MR']}x{tiles['NR']}"


def generic_params(spec: MatmulSpec, device: CPUDevice | None = None) -> np.ndarray:
    """The int64 parameter vector of `spec` for its shape-generic kernel (the order of
    _MatmulGen.GENERIC_PARAMS): shapes, and the analytic plan's thread split and cache blocks
    for this shape."""
    t = plan(spec, device)
    split = {"none": 0, "batch": 1, "m": 2, "n": 3}[t["split"]]
    vals = {"batch": spec.batch, "m": spec.m, "n": spec.n, "k": spec.k, "threads": t["threads"],
            "split": split, "slab": max(t["slab"], 1), "KC": t["KC"], "MC": t["MC"],
            "NC": t["NC"], "a_trans": int(spec.a_trans), "b_trans": int(spec.b_trans)}
    return np.array([vals[name] for name in _MatmulGen.GENERIC_PARAMS], np.int64)


def needs_openmp(text: str) -> bool:
    """Whether emitted kernel text uses OpenMP (compile it with `openmp=True`)."""
    return "omp.parallel" in text


OMP_DECLS = (
    "func.func private @omp_get_thread_num() -> i32\n"
    "func.func private @omp_get_num_threads() -> i32\n"
)


def module_text(funcs: list[str]) -> str:
    """One MLIR module holding several emitted kernels (plus the OpenMP runtime declarations
    they need): compiling many kernels at once amortises the ~0.1-0.3 s JIT cost."""
    body = "\n\n".join(funcs)
    return (OMP_DECLS + "\n" if needs_openmp(body) else "") + body + "\n"


class MatmulKernel:
    """A compiled matmul callable on NumPy arrays: `kernel(a, b, *epilogue_args, out=None)`."""

    def __init__(self, spec: MatmulSpec, fn):
        self.spec, self.fn = spec, fn

    def __call__(self, a, b, *eargs, out=None):
        s = self.spec
        a_shape = (s.batch,) + ((s.k, s.m) if s.a_trans else (s.m, s.k))
        b_shape = (s.batch,) + ((s.n, s.k) if s.b_trans else (s.k, s.n))
        if out is None:
            out = np.empty((s.batch, s.m, s.n), s.dtype)
        arrays = [a, b, *eargs, out]
        for x, shape in ((a, a_shape), (b, b_shape), (out, (s.batch, s.m, s.n))):
            if x.dtype != s.dtype or not x.flags.c_contiguous or x.size != math.prod(shape):
                raise ValueError(f"matmul kernel expects C-contiguous {s.dtype} arrays of "
                                 f"{shape}, got {x.dtype} {x.shape}")
        if len(eargs) != s.n_epilogue_args:
            raise ValueError(f"expected {s.n_epilogue_args} epilogue arguments")
        self.fn(*[x.ctypes.data for x in arrays])
        return out


def build_matmuls(kernels: dict[str, MatmulSpec], so_path: str,
                  tiles: dict[str, dict] | None = None) -> dict[str, MatmulKernel]:
    """Emits all `kernels` (name -> spec) into one module, compiles it to `so_path` and returns
    name -> MatmulKernel. tiles optionally overrides the plan of some kernels."""
    from nova.compiler.codegen.cpu.compile import (
        compile_to_shared_library,
        load_function,
        use_openmp_defaults,
    )

    tiles = tiles or {}
    text = module_text([emit_matmul(n, s, tiles.get(n)) for n, s in kernels.items()])
    openmp = needs_openmp(text)
    if openmp:
        use_openmp_defaults()
    compile_to_shared_library(text, list(kernels), so_path, openmp=openmp,
                              what=f"matmul kernels {', '.join(kernels)}")
    return {n: MatmulKernel(s, load_function(so_path, n, s.nargs)) for n, s in kernels.items()}
