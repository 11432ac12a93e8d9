"""Flash-attention kernels for NVIDIA GPUs: flash_attention_fwd and flash_attention_bwd
(nova/ops/attention.py) as `gpu.func`s, following FlashAttention-2 (T. Dao, "FlashAttention-2:
Faster Attention with Better Parallelism and Work Partitioning", arXiv 2307.08691, Algorithms 1
and 2). The T x T score matrix never reaches global memory. Inner products are scalar/vector FMAs
(SIMT) on shared-memory tiles, in the operands' dtype (float32 or float64); float32 at matmul
precision "tf32" runs the tensor-core kernels of attention_mma.py where their tiles apply, and
elsewhere these kernels with Q and K rounded to TF32 (so the logits, and a SIMT backward's P
against a tensor-core forward's lse, are the tensor cores').

Forward (Algorithm 1): one block per (batch element, tile of BQ query rows), GROUP = 8 threads
per query row. The Q tile is staged once; per tile of BK keys (causal: only tiles up to the
block's last row, fully masked tiles are skipped), K and V are staged, each thread computes
BK/8 scores of its row, the row's max and sum combine over its 8 lanes by shuffles (online
softmax: m' = max(m, max s), l' = l e^(m-m') + sum e^(s-m')), P goes through shared memory and
each thread updates its Dv/8 columns of the row's O (rescaled by e^(m-m')). Finally
o = O / l, lse = m + log l; a row that saw no key keeps m = -inf (0 is used in its place in the
exponents) and ends with o = 0, lse = -inf.

Backward (Algorithm 2): one block per (batch element, tile of BK keys), 8 threads per key row,
dK and dV of the row in registers. K and V are staged once; per query tile (causal: from the
tile holding the block's first key), Q, dO, lse and delta are staged, each thread computes
P = e^(s - lse) and dS = P (dP - delta) for BQ/8 queries of its key row (a "select" mask's
filled logits get dS = 0: they depend on neither q nor k) into shared memory, then
dV += Pᵀ dO and dK += dSᵀ Q. dQ: each block adds its tile's dS K into dq with atomics
(red.global.add; dq is zeroed by a fill launch first), as Algorithm 2 does. A separate pass
over query tiles would be deterministic but recompute S and dP (two of the backward's five
tile products, +40 % flops); the atomics cost Tk/BK adds per dq element, resolved in L2. The
order of those adds is not fixed, so dq may differ in the last bits between runs.

Tails: rows past Tq or Tk are staged as zeros, their logits masked (-inf), nothing is stored
for them. Masks (Tq, Tk) are read per score at a clamped index and applied as on the CPU.
"""

from __future__ import annotations

import math

import numpy as np

from nova.compiler.codegen.cuda.attention_text import (
    GROUP,
    FlashText,
    backward_tiles,
    forward_tiles,
    row_length,
    unsupported,
    widths,
)
from nova.compiler.codegen.cuda.loops import emit_gpu_loop_kernel
from nova.compiler.kernel import Kernel
from nova.core.ir import Eqn, Program, TensorType, Var
from nova.core.primitive import lookup


def supports(dtype, d: int, dv: int) -> bool:
    """Whether the GPU kernels handle q/k of head dim d and v of head dim dv in `dtype`
    (float32 or float64, tiles within 48 KiB of shared memory: d = dv <= 320 in float32, 160 in
    float64). The attention recognition pass leaves other attentions as matmuls + softmax on
    CUDA targets."""
    return unsupported(dtype, d, dv) is None


class _Flash(FlashText):
    """One fused attention equation's kernel: `forward()` or `backward()` returns the gpu.func
    text and sets grid, block, shared_bytes and tiles."""

    def __init__(self, name: str, kernel: Kernel, precision: str = "highest"):
        (self.e,) = [q for q in kernel.program.eqns if q.prim.name.startswith("flash_attention")]
        q, k, v = (x.type for x in self.e.inputs[:3])
        why = unsupported(q.dtype, q.shape[-1], v.shape[-1])
        if why is not None:
            raise NotImplementedError(f"cuda codegen: no flash-attention kernel for {why} "
                                      f"(kernel {name})")
        super().__init__(q.dtype)
        # At matmul precision "tf32" every float32 attention kernel takes its logits from TF32
        # Q and K (the tensor-core kernels' operands), so a SIMT backward recomputes P against
        # a tensor-core forward's lse from the same logits.
        self.tf32 = precision == "tf32" and self.el == "f32"
        self.name, self.prog = name, kernel.program
        self.fwd = self.e.prim.name == "flash_attention_fwd"
        p = self.e.params
        self.scale, self.kind, self.fill = p["scale"], p["mask_kind"], p["fill"]
        self.n = int(np.prod(q.shape[:-2], dtype=np.int64))
        self.tq, self.d = q.shape[-2:]
        self.tk, self.dv = v.shape[-2:]
        _, self.wd, self.wv, self.pad = widths(q.dtype, self.d, self.dv)
        self._arguments()

    def _arguments(self) -> None:
        """%in<i> for the kernel program's inputs, %out<j> for the outputs it keeps (position j
        among the equation's results); memref types by role (bool masks as i8)."""
        n, tq, tk, d, dv = self.n, self.tq, self.tk, self.d, self.dv
        roles = ["q", "k", "v"] + ([] if self.fwd else ["lse", "do", "delta"])
        sizes = {"q": n * tq * d, "k": n * tk * d, "v": n * tk * dv, "lse": n * tq,
                 "do": n * tq * dv, "delta": n * tq, "mask": tq * tk, "o": n * tq * dv,
                 "dq": n * tq * d, "dk": n * tk * d, "dv": n * tk * dv}
        if len(self.e.inputs) > len(roles):
            roles.append("mask")
        self.mem, self.mt = {}, {}
        name_of = {id(x): f"%in{i}" for i, x in enumerate(self.prog.inputs)}
        args = {}
        for role, x in zip(roles, self.e.inputs, strict=True):
            el = "i8" if role == "mask" and self.kind == "select" else self.el
            self.mem[role] = name_of[id(x)]
            self.mt[role] = f"memref<{sizes[role]}x{el}>"
            args.setdefault(name_of[id(x)], self.mt[role])
        outs = ["o", "lse"] if self.fwd else ["dq", "dk", "dv"]
        sig = [f"{a}: {t}" for a, t in args.items()]
        for o in self.prog.outputs:
            (pos,) = [j for j, x in enumerate(self.e.outputs) if x is o]
            role = outs[pos]
            self.mem[role], self.mt[role] = f"%out{pos}", f"memref<{sizes[role]}x{self.el}>"
            sig.append(f"%out{pos}: {self.mt[role]}")
        self.sig = sig

    # --- masks ----------------------------------------------------------------------------------
    def logit(self, dot: str, i: str, j: str) -> tuple:
        """(s, valid, keep) for query i and key j: s = scale * dot masked as the primitive says
        (-inf where the pair is outside the matrix or hidden); keep is the select mask (or None)."""
        s = self.f("mulf", dot, self.cf(self.scale))
        valid = self.and_(self.cmpi("ult", j, self.ci(self.tk)),
                          self.cmpi("ult", i, self.ci(self.tq)))
        if self.kind == "causal":
            valid = self.and_(valid, self.cmpi("ule", j, i))
        keep = None
        if self.kind in ("select", "add"):
            at = self.add(self.mul(self.i("minui", i, self.tq - 1), self.tk),
                          self.i("minui", j, self.tk - 1))
            x = self.op(f"memref.load {self.mem['mask']}[{at}] : {self.mt['mask']}")
            if self.kind == "select":
                keep = self.op(f"arith.cmpi ne, {x}, {self.t.c(0, 'i8')} : i8")
                s = self.select(keep, s, self.cf(self.fill))
            else:
                s = self.f("addf", s, x)
        return self.select(valid, s, self.cf(-math.inf)), valid, keep

    def _head(self, threads: int) -> str:
        wg = f" workgroup({', '.join(self.workgroup)})" if self.workgroup else ""
        return (f"    gpu.func @{self.name}({', '.join(self.sig)}){wg} kernel attributes "
                f"{{known_block_size = array<i32: {threads}, 1, 1>}} {{")

    def _text(self, threads: int) -> str:
        return "\n".join([self._head(threads)] + self.t.consts + self.t.lines
                         + ["      gpu.return", "    }"])

    def _store_rows(self, role: str, row: str, rows: int, vals: list, dim: int, w: int, sub: str,
                    ok: str) -> None:
        """This thread's chunks (sub + GROUP t, w wide) of row `row` of the (n, rows, dim)
        result `role`, when `ok` and the chunk lies inside dim."""
        chunks = dim // w
        for t, val in enumerate(vals):
            chunk = self.add(sub, GROUP * t)
            cond = ok
            if (t + 1) * GROUP > chunks:
                cond = self.and_(ok, self.cmpi("ult", chunk, self.ci(chunks)))
            self.open_if(cond)
            at = self.add(self.mul(row, dim), self.mul(chunk, w))
            self.store(val, self.mem[role], at, self.mt[role], w)
            self.close_if(cond)

    # --- forward --------------------------------------------------------------------------------
    def forward(self) -> str:
        bq, bk = forward_tiles(np.dtype(self.e.inputs[0].type.dtype), self.d, self.dv)
        tq, tk, d, dv, wd, wv, pad = self.tq, self.tk, self.d, self.dv, self.wd, self.wv, self.pad
        threads = bq * GROUP
        qs = self.shared("Qs", bq, row_length(d, wd, pad))
        ks = self.shared("Ks", bk, row_length(d, wd, pad))
        vs = self.shared("Vs", bk, row_length(dv, wv, pad))
        ss = self.shared("Ss", bq, bk + pad)
        nqt = -(-tq // bq)
        bid, tid = self.op("gpu.block_id x"), self.op("gpu.thread_id x")
        n = self.i("divui", bid, nqt)
        # Query tiles in reverse order: under a causal mask the last tiles are the longest.
        i0 = self.mul(self.i("subi", self.ci(nqt - 1), self.i("remui", bid, nqt)), bq)
        r, sub = self.i("divui", tid, GROUP), self.i("remui", tid, GROUP)
        i = self.add(i0, r)
        self.load_tile("%Qs", qs, self.mem["q"], self.mt["q"], n, i0, tq, d, wd, bq, threads, tid,
                       self.tf32)
        if self.kind == "causal":  # key tiles past the block's last row are fully masked
            kend = self.i("minui", self.add(i0, bq), tk)
            nkt = self.i("divui", self.add(kend, bk - 1), bk)
        else:
            nkt = self.ci(-(-tk // bk))
        nt = -(-(dv // wv) // GROUP)  # O chunks per thread
        types = [self.el, self.el] + [self.ty(wv)] * nt
        inits = [self.cf(-math.inf), self.cf(0.0)] + [self.cf(0.0, wv)] * nt
        kt, carried, res = self.open_for(self.ci(0), nkt, inits, types)
        m, l_, o = carried[0], carried[1], carried[2:]
        j0 = self.mul(kt, bk)
        self.emit("gpu.barrier")  # the previous tile's K, V and P are no longer read
        self.load_tile("%Ks", ks, self.mem["k"], self.mt["k"], n, j0, tk, d, wd, bk, threads, tid,
                       self.tf32)
        self.load_tile("%Vs", vs, self.mem["v"], self.mt["v"], n, j0, tk, dv, wv, bk, threads,
                       tid)
        self.emit("gpu.barrier")
        keys = [self.add(sub, GROUP * u) for u in range(bk // GROUP)]
        dots = self.dots("%Qs", qs, r, "%Ks", ks, keys, d, wd)
        s = [self.logit(x, i, self.add(j0, key))[0] for x, key in zip(dots, keys, strict=True)]
        row_max = s[0]
        for x in s[1:]:
            row_max = self.f("maximumf", row_max, x)
        m_new = self.f("maximumf", m, self.group_reduce(row_max, "maximumf"))
        dead = self.cmpf("oeq", m_new, self.cf(-math.inf))
        m_safe = self.select(dead, self.cf(0.0), m_new)
        corr = self.exp(self.f("subf", m, m_safe))
        row_sum = None
        for x, key in zip(s, keys, strict=True):
            p = self.exp(self.f("subf", x, m_safe))
            self.store(p, "%Ss", f"{r}, {key}", ss, 1)
            row_sum = p if row_sum is None else self.f("addf", row_sum, p)
        l_new = self.f("addf", self.f("mulf", l_, corr), self.group_reduce(row_sum, "addf"))
        self.emit("gpu.barrier")  # the row's P, written by its 8 lanes, is complete
        corr_v = self.splat(corr, wv)
        o = [self.f("mulf", x, corr_v, wv) for x in o]
        j, acc, res2 = self.open_for(self.ci(0), self.ci(bk), o, [self.ty(wv)] * nt)
        pv = self.splat(self.load("%Ss", f"{r}, {j}", ss, 1), wv)
        new = [self.fma(pv, self.load("%Vs", f"{j}, {self.mul(self.add(sub, GROUP * t), wv)}",
                                      vs, wv), a, wv) for t, a in enumerate(acc)]
        o = self.close_for(new, [self.ty(wv)] * nt, res2)
        m, l_, *o = self.close_for([m_new, l_new] + o, types, res)
        # o = O / l and lse = m + log l; 0 and -inf for a row that saw no key (l = 0).
        live = self.cmpf("ogt", l_, self.cf(0.0))
        inv = self.select(live, self.f("divf", self.cf(1.0), l_), self.cf(0.0))
        row = self.add(self.mul(n, tq), i)
        in_range = self.cmpi("ult", i, self.ci(tq))
        if "o" in self.mem:
            inv_v = self.splat(inv, wv)
            self._store_rows("o", row, tq, [self.f("mulf", x, inv_v, wv) for x in o], dv, wv, sub,
                             in_range)
        if "lse" in self.mem:
            logl = self.op(f"math.log {self.select(live, l_, self.cf(1.0))} : {self.el}")
            lse = self.select(live, self.f("addf", m, logl), self.cf(-math.inf))
            first = self.and_(in_range, self.cmpi("eq", sub, self.ci(0)))
            self.open_if(first)
            self.store(lse, self.mem["lse"], row, self.mt["lse"], 1)
            self.close_if(first)
        self.grid, self.block = (self.n * nqt, 1, 1), (threads, 1, 1)
        self.tiles = (bq, bk)
        return self._text(threads)

    # --- backward -------------------------------------------------------------------------------
    def backward(self) -> str:
        bk, bq = backward_tiles(np.dtype(self.e.inputs[0].type.dtype), self.d, self.dv)
        tq, tk, d, dv, wd, wv, pad = self.tq, self.tk, self.d, self.dv, self.wd, self.wv, self.pad
        threads = bk * GROUP
        ks = self.shared("Ks", bk, row_length(d, wd, pad))
        vs = self.shared("Vs", bk, row_length(dv, wv, pad))
        qs = self.shared("Qs", bq, row_length(d, wd, pad))
        dos = self.shared("dOs", bq, row_length(dv, wv, pad))
        ps = self.shared("Ps", bk, bq + pad)
        dss = self.shared("dSs", bk, bq + pad)
        ls = self.shared("Ls", bq)
        ds_t = self.shared("Ds", bq)
        nkt = -(-tk // bk)
        bid, tid = self.op("gpu.block_id x"), self.op("gpu.thread_id x")
        n = self.i("divui", bid, nkt)
        j0 = self.mul(self.i("remui", bid, nkt), bk)
        r, sub = self.i("divui", tid, GROUP), self.i("remui", tid, GROUP)
        j = self.add(j0, r)
        self.load_tile("%Ks", ks, self.mem["k"], self.mt["k"], n, j0, tk, d, wd, bk, threads, tid,
                       self.tf32)
        self.load_tile("%Vs", vs, self.mem["v"], self.mt["v"], n, j0, tk, dv, wv, bk, threads,
                       tid)
        # Causal: query tiles before the one holding key j0 see none of this block's keys.
        first = self.i("divui", j0, bq) if self.kind == "causal" else self.ci(0)
        nk, nv = -(-(d // wd) // GROUP), -(-(dv // wv) // GROUP)
        types = [self.ty(wd)] * nk + [self.ty(wv)] * nv
        inits = [self.cf(0.0, wd)] * nk + [self.cf(0.0, wv)] * nv
        qt, carried, res = self.open_for(first, self.ci(-(-tq // bq)), inits, types)
        dk, dvs = carried[:nk], carried[nk:]
        i0 = self.mul(qt, bq)
        self.emit("gpu.barrier")  # the previous query tile is no longer read
        self.load_tile("%Qs", qs, self.mem["q"], self.mt["q"], n, i0, tq, d, wd, bq, threads, tid,
                       self.tf32)
        self.load_tile("%dOs", dos, self.mem["do"], self.mt["do"], n, i0, tq, dv, wv, bq,
                       threads, tid)
        self._stage_rows(n, i0, bq, tid, ls, ds_t)
        self.emit("gpu.barrier")
        cols = [self.add(sub, GROUP * u) for u in range(bq // GROUP)]
        s_dots = self.dots("%Ks", ks, r, "%Qs", qs, cols, d, wd)
        dp_dots = self.dots("%Vs", vs, r, "%dOs", dos, cols, dv, wv)
        for c, sd, dp in zip(cols, s_dots, dp_dots, strict=True):
            s, valid, keep = self.logit(sd, self.add(i0, c), j)
            lse = self.load("%Ls", c, ls, 1)
            live = self.and_(valid, self.cmpf("one", lse, self.cf(-math.inf)))
            p = self.select(live, self.exp(self.f("subf", s, lse)), self.cf(0.0))
            ds = self.f("mulf", p, self.f("subf", dp, self.load("%Ds", c, ds_t, 1)))
            if keep is not None:
                ds = self.select(keep, ds, self.cf(0.0))
            self.store(p, "%Ps", f"{r}, {c}", ps, 1)
            self.store(ds, "%dSs", f"{r}, {c}", dss, 1)
        self.emit("gpu.barrier")
        c, acc, res2 = self.open_for(self.ci(0), self.ci(bq), dk + dvs, types)
        p = self.load("%Ps", f"{r}, {c}", ps, 1)
        ds = self.load("%dSs", f"{r}, {c}", dss, 1)
        pv, dsv = self.splat(p, wv), self.splat(ds, wd)
        new = [self.fma(dsv, self.load("%Qs", f"{c}, {self.mul(self.add(sub, GROUP * t), wd)}",
                                       qs, wd), a, wd) for t, a in enumerate(acc[:nk])]
        new += [self.fma(pv, self.load("%dOs", f"{c}, {self.mul(self.add(sub, GROUP * t), wv)}",
                                       dos, wv), a, wv) for t, a in enumerate(acc[nk:])]
        acc = self.close_for(new, types, res2)
        if "dq" in self.mem:
            self._dq_atomics(n, i0, bq, bk, tid, threads, ks, dss)
        out = self.close_for(acc, types, res)
        ok = self.cmpi("ult", j, self.ci(tk))
        row = self.add(self.mul(n, tk), j)
        if "dk" in self.mem:
            sc = self.cf(self.scale, wd)
            self._store_rows("dk", row, tk, [self.f("mulf", x, sc, wd) for x in out[:nk]], d, wd,
                             sub, ok)
        if "dv" in self.mem:
            self._store_rows("dv", row, tk, out[nk:], dv, wv, sub, ok)
        self.grid, self.block = (self.n * nkt, 1, 1), (threads, 1, 1)
        self.tiles = (bk, bq)
        return self._text(threads)

    def _stage_rows(self, n: str, i0: str, bq: int, tid: str, ls: str, ds_t: str) -> None:
        """lse (-inf past Tq) and delta (0 past Tq) of the query tile into shared memory."""
        inside = self.cmpi("ult", tid, self.ci(bq))
        self.open_if(inside)
        g = self.add(i0, tid)
        ok = self.cmpi("ult", g, self.ci(self.tq))
        at = self.add(self.mul(n, self.tq), self.i("minui", g, self.tq - 1))
        lse = self.load(self.mem["lse"], at, self.mt["lse"], 1)
        self.store(self.select(ok, lse, self.cf(-math.inf)), "%Ls", tid, ls, 1)
        delta = self.load(self.mem["delta"], at, self.mt["delta"], 1)
        self.store(self.select(ok, delta, self.cf(0.0)), "%Ds", tid, ds_t, 1)
        self.close_if(inside)

    def _dq_atomics(self, n, i0, bq, bk, tid, threads, ks, dss) -> None:
        """dq[i0 + c, :] += scale * sum over the block's keys of dS[key, c] K[key, :], one w-wide
        chunk of one query row per thread and step, added with atomics."""
        d, wd = self.d, self.wd
        cpd = d // wd
        total = bq * cpd
        for u in range(-(-total // threads)):
            e = self.add(tid, u * threads)
            c = self.i("divui", e, cpd)
            col = self.mul(self.i("remui", e, cpd), wd)
            g = self.add(i0, c)
            cond = self.cmpi("ult", g, self.ci(self.tq))
            if (u + 1) * threads > total:
                cond = self.and_(cond, self.cmpi("ult", e, self.ci(total)))
            self.open_if(cond)
            key, (acc,), res = self.open_for(self.ci(0), self.ci(bk), [self.cf(0.0, wd)],
                                             [self.ty(wd)])
            ds = self.splat(self.load("%dSs", f"{key}, {c}", dss, 1), wd)
            new = self.fma(ds, self.load("%Ks", f"{key}, {col}", ks, wd), acc, wd)
            (acc,) = self.close_for([new], [self.ty(wd)], res)
            acc = self.f("mulf", acc, self.cf(self.scale, wd), wd)
            at = self.add(self.mul(self.add(self.mul(n, self.tq), g), d), col)
            for lane in range(wd):
                x = acc if wd == 1 else self.op(f"vector.extract {acc}[{lane}] : {self.el} from "
                                                f"{self.ty(wd)}")
                self.op(f"memref.atomic_rmw addf {x}, {self.mem['dq']}[{self.add(at, lane)}] : "
                        f"({self.el}, {self.mt['dq']}) -> {self.el}")
            self.close_if(cond)


def _zero_fill(kernel: Kernel, out: Var) -> Kernel:
    """A loop kernel writing zeros into `out` (dq, before the backward's atomic adds)."""
    const, bcast = lookup("constant"), lookup("broadcast_in_dim")
    zero = Var(TensorType((), out.type.dtype))
    eqns = [Eqn(const, [], const.canonical_params({"value": np.zeros((), out.type.dtype)}),
                [zero]),
            Eqn(bcast, [zero], bcast.canonical_params({"shape": out.type.shape,
                                                       "broadcast_dimensions": ()}), [out])]
    (pos,) = [j for j, x in enumerate(kernel.program.outputs) if x is out]
    return Kernel("loop", Program([], eqns, [out]), [], [kernel.outputs[pos]],
                  {"iter_shape": out.type.shape, "red_axes": None})


def emit_gpu_attention(kernel: Kernel, precision: str = "highest") -> list:
    """[(codegen kernel, emitter)] of an "attention" fusion kernel (one flash_attention_fwd or
    flash_attention_bwd equation), in launch order: the forward kernel; or the zero fill of dq
    (when the program keeps dq) and the backward kernel. Emitters carry `.text`, `.grid`,
    `.block`, `.shared_bytes`. precision: matmul precision; "tf32" runs float32 kernels on
    tensor cores where attention_mma.py applies ("flash_mma_tf32"), else SIMT ("flash_simt").

    Raises NotImplementedError naming the dtype or head dims without a kernel (see
    `supports`)."""
    from nova.compiler.codegen.cuda.attention_mma import FlashMma, mma_backward_fits, mma_tiles

    em = _Flash(kernel.name, kernel, precision)
    schedule = "flash_simt"
    fits = mma_tiles(em.d, em.dv) is not None if em.fwd else mma_backward_fits(em.d, em.dv)
    if em.tf32 and fits:
        em, schedule = FlashMma(kernel.name, kernel, precision), "flash_mma_tf32"
    em.text = em.forward() if em.fwd else em.backward()
    kernel.schedule.update({"gpu_schedule": schedule, "tile": em.tiles})
    parts = [(kernel, em)]
    if not em.fwd and "dq" in em.mem:
        dq = em.e.outputs[0]
        fill = _zero_fill(kernel, dq)
        parts.insert(0, (fill, emit_gpu_loop_kernel(fill.name, fill)))
    return parts
