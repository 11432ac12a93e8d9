"""Split-K for GEMMs whose tiles leave a wave tail: a batched GEMM of partial products, then a
loop kernel adding them (and running the epilogue).

A weight gradient of GPT-2 124M, dW = x^T dy over 8 x 1024 rows, has a 768 x 3072 output: 144
tiles of 128 x 128 on 132 SMs, two waves with the second 9 % full. Its operands' leading axis
(the batch of 8) is contracted, so it can be a batch instead, with no copy: the first launch
computes P = 8 partial products of K / P rows each (P x the tiles, a full grid), the second
reduces them over P (a column kernel, codegen/cuda/columns.py) and applies the epilogue the
GEMM had. Only that split is done here (P = the operands' shared leading contracted axis,
2 <= P <= 16, float32 results): a reshape of another axis would make the operands views the
launch list does not have.

Whether to split is decided by a cost model (DESIGN.md: schedules are analytic). A GEMM takes
waves x the time of one block, waves = ceil(blocks / SMs) (blocks sharing an SM share its
tensor cores), a block 2 BM BN K_block / (F_sm eff), F_sm the SM's share of the dense peak,
eff = min(1, I / 32) with I = BM BN / (2 (BM + BN)) x (4 / itemsize) the tile's flops per byte
of operands loaded (a tile under 32 waits on L2: a 64 x 64 float32 tile runs at half speed).
The split adds its partials' traffic (written once, read once) at 80 % of the memory bandwidth
and a launch (3 us). Split when the model says the pair takes at most 0.9 x the GEMM. The
figures (peaks from NVIDIA's data sheets, the L2 balance point of 32 flops per byte) are
estimates until a GPU measures them (bench/NOTES.md round 16).
"""

from __future__ import annotations

import math

import numpy as np

from nova.compiler.kernel import Kernel
from nova.core import dtypes
from nova.core.ir import Eqn, Program, Var
from nova.core.primitive import lookup
from nova.gpu.device import describe

MAX_SPLITS = 16
L2_BALANCE = 32.0  # flops per operand byte a tile needs to keep the tensor cores busy
LAUNCH_SECONDS = 3e-6
GAIN = 0.9  # split only when the model predicts at most this fraction of the GEMM's time
# Dense peak FLOP/s by compute capability major and kind (data sheets: A100, H100 SXM).
PEAK = {8: {"tf32": 156e12, "half": 312e12, "simt": 19.5e12},
        9: {"tf32": 495e12, "half": 989e12, "simt": 67e12}}


def _leading_split(k: Kernel):
    """(dot_general eqn, P) when k's GEMM contracts both operands' axis 0 (of equal size P,
    2..MAX_SPLITS) besides other axes, has no batch axes and a float32 result; else None."""
    dots = [e for e in k.program.eqns if e.prim.name == "dot_general"]
    if k.kind != "contraction" or len(dots) != 1 or len(k.program.outputs) != 1:
        return None
    (dot,) = dots
    x, y = dot.inputs
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    if lb or rb or 0 not in lc or len(lc) < 2 or rc[list(lc).index(0)] != 0:
        return None
    p = x.type.shape[0]
    if not 2 <= p <= MAX_SPLITS or dot.outputs[0].type.dtype != dtypes.float32:
        return None
    if any(v is x or v is y for e in k.program.eqns if e is not dot for v in e.inputs):
        return None  # an epilogue reading an operand: the finishing kernel would need it too
    return dot, p


def split_k_parts(k: Kernel) -> list[Kernel] | None:
    """[batched partial GEMM, finishing loop kernel] for contraction kernel k, or None when k
    does not have the structure _leading_split needs (the caller decides whether to use them)."""
    found = _leading_split(k)
    if found is None:
        return None
    dot, _ = found
    x, y = dot.inputs
    (lc, rc), _ = dot.params["dimension_numbers"]
    keep = [i for i, d in enumerate(lc) if d != 0]
    dn = ((tuple(lc[i] for i in keep), tuple(rc[i] for i in keep)), ((0,), (0,)))
    prim = lookup("dot_general")
    params = prim.canonical_params({**dot.params, "dimension_numbers": dn})
    part = Var(prim.abstract_eval([x.type, y.type], **params))
    operands = [x] if x is y else [x, y]
    gemm = Kernel("contraction", Program(operands, [Eqn(prim, [x, y], params, [part])], [part]),
                  operands, [part])
    red = lookup("reduce_sum")
    eqns = [Eqn(red, [part], red.canonical_params({"axes": (0,)}), [dot.outputs[0]])]
    eqns += [e for e in k.program.eqns if e is not dot]
    ins = [part] + [v for v in k.program.inputs[len(operands):]
                    if any(v is u for e in eqns for u in e.inputs)]
    finish = Kernel("loop", Program(ins, eqns, list(k.program.outputs)), ins,
                    list(k.outputs), {"iter_shape": part.type.shape, "red_axes": (0,)})
    return [gemm, finish]


def gemm_seconds(em, arch: str, sm_count: int) -> float:
    """The model's time of GEMM emitter `em` (after its tile choice): see the module docstring."""
    props = describe(arch)
    kind = "tf32" if em.tf32 else "half" if em.half else "simt"
    peak = PEAK.get(props.compute_capability[0], PEAK[9])[kind]
    itemsize = np.dtype(em.dtype).itemsize
    blocks = int(np.prod(em.grid))
    waves = math.ceil(blocks / sm_count)
    intensity = em.BM * em.BN / (2 * (em.BM + em.BN)) * 4 / itemsize
    eff = min(1.0, intensity / L2_BALANCE)
    return waves * 2 * em.BM * em.BN * em.k / (peak / sm_count * eff)


def traffic_seconds(part_type, arch: str) -> float:
    """Writing and reading the partials, writing the sum, and one more launch."""
    bw = describe(arch).memory_bandwidth or 2e12
    moved = 2 * part_type.nbytes + part_type.nbytes // part_type.shape[0]
    return moved / (0.8 * bw) + LAUNCH_SECONDS
