"""Hopper GEMMs (codegen/cuda/wgmma.py, target sm_90a) without a GPU: run by the simulator in
every operand layout, dtype and edge case against the reference interpreter; the simulator's
checks fail on broken kernels; the PTX assembles for sm_90a without spills at two blocks per
SM; the accumulator struct maps to the wgmma's registers in order; Hopper devices compile for
sm_90a by default."""

import re

import numpy as np
import pytest

import nova
import nova.numpy as jnp
from nova import gpu
from nova.compiler import backend_cuda
from nova.compiler.codegen.cuda.compile import compile_to_ptx, ptxas_info, wrap_module
from nova.core import dtypes
from nova.nn import functional as F
from tests.test_cuda_codegen import _fused, _simulate_program, needs_ptxas

S = nova.ShapeDtypeStruct
f32, f16, bf16 = np.float32, np.float16, dtypes.bfloat16


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "nova-cuda-cache"))


def _layout_fn(layout: str):
    def fn(a, b):
        return jnp.matmul(jnp.swapaxes(a, -1, -2) if layout[0] == "t" else a,
                          jnp.swapaxes(b, -1, -2) if layout[1] == "t" else b)
    return fn


def _specs(layout: str, m: int, k: int, n: int, dtype, batch=()):
    a = (k, m) if layout[0] == "t" else (m, k)
    b = (n, k) if layout[1] == "t" else (k, n)
    return [S(batch + a, dtype), S(batch + b, dtype)]


def tf32_rna(x):
    """float32 values rounded to TF32 as the kernels round their operands (cvt.rna: 10 mantissa
    bits, ties away from zero); other dtypes unchanged."""
    x = np.asarray(x)
    if x.dtype != np.float32:
        return x
    bits = (x.view(np.uint32).astype(np.uint64) + 0x1000) & 0xFFFFE000
    out = bits.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, out)


def _tf32_reference(args):
    """The reference's inputs: the two matmul operands rounded to TF32 (an epilogue's inputs,
    e.g. a bias, are read as they are)."""
    return [tf32_rna(a) for a in args[:2]] + list(args[2:])


def _check(got, want, dtype):
    """TF32 against the reference on TF32-rounded operands (their products are exact in float32:
    only the accumulation order differs), 16-bit types within a few units in the last place."""
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
        assert not np.isnan(g64).any()
        if dtype == f32:
            assert np.max(np.abs(g64 - w64)) <= 2e-5 * np.abs(w64).max()
        else:  # a few units in the last place of the 16-bit output (accumulation order)
            ulp = 2.0 ** -7 if dtype == bf16 else 2.0 ** -10
            assert np.all(np.abs(g64 - w64) <= 4 * ulp * np.abs(w64) + 1e-6 * np.abs(w64).max())


def _schedules(fn, specs, arch, precision="tf32", sm_count=None):
    out = []
    for k in _fused(fn, specs).kernels:
        if k.kind == "contraction":
            for gk, em in backend_cuda.lower_kernel(k, arch, precision, sm_count):
                out.append((gk.schedule.get("gpu_schedule"), em))
    return out


@pytest.mark.parametrize("dtype", [f32, bf16, f16], ids=["tf32", "bf16", "f16"])
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("shape", [(128, 96, 192), (70, 33, 130), (19, 40, 23)],
                         ids=["even", "edges", "odd"])
def test_simulated_wgmma_gemms(layout, dtype, shape):
    """Every operand layout: K-major operands copied by cp.async or 16-byte register loads (k
    a multiple of 16 bytes), (k, free) operands staged through registers as transposed blocks
    (free size a multiple of 4) or scalars, tile edges in m, n and k, column pairs stored as
    2-vectors (even n) or one by one (odd n), one 64 x 64 warpgroup tile per block."""
    specs = _specs(layout, *shape, dtype)
    (sched, em), = _schedules(_layout_fn(layout), specs, "sm_90a")
    assert sched.startswith("wgmma") and em.block == (128, 1, 1)
    pairs = [line for line in em.text.splitlines() if "vector.store" in line and "%out" in line]
    assert bool(pairs) == (shape[2] % 2 == 0)  # column pairs as 2-vectors where n is even
    got, want = _simulate_program(_layout_fn(layout), specs, "tf32", seed=5, arch="sm_90a",
                                  reference_args=_tf32_reference)
    _check(got, want, dtype)


@pytest.mark.parametrize("dtype", [f32, bf16], ids=["tf32", "bf16"])
@pytest.mark.parametrize("layout", ["nn", "tt"])
@pytest.mark.parametrize("shape,sm_count,tile,stages", [
    ((200, 160, 136), 1, (128, 256), 4),  # the largest tile whenever one SM is to be filled
    ((200, 160, 136), 3, (128, 128), 4),  # 2 x 2 blocks fill 3 SMs; edges: one block per SM
    ((256, 256, 256), 4, (128, 128), 3)])  # no edges: two blocks per SM, 3 stages, wait 0
def test_simulated_wgmma_two_warpgroup_tiles(layout, dtype, shape, sm_count, tile, stages):
    """The two-warpgroup tiles (256 threads) with K remainders and edges in both free
    dimensions, with one wgmma group in flight (4 stages) or none (3)."""
    specs = _specs(layout, *shape, dtype)
    (_, em), = _schedules(_layout_fn(layout), specs, "sm_90a", sm_count=sm_count)
    assert ((em.BM, em.BN), em.block, em.stages) == (tile, (256, 1, 1), stages)
    assert f"nvvm.wgmma.wait.group.sync.aligned {1 if stages == 4 else 0}" in em.text
    got, want = _simulate_program(_layout_fn(layout), specs, "tf32", seed=7, sm_count=sm_count,
                                  arch="sm_90a", reference_args=_tf32_reference)
    _check(got, want, dtype)


@pytest.mark.parametrize("dtype", [f32, bf16], ids=["tf32", "bf16"])
def test_simulated_wgmma_batched_epilogue(dtype):
    """A batch (grid z) with a bias + GELU-tanh epilogue fused into the wgmma kernel (one
    kernel), in the operands' dtype."""
    def fn(x, w, b):
        return F.gelu(x @ w + b, approximate=True)
    specs = [S((3, 40, 48), dtype), S((3, 48, 72), dtype), S((72,), dtype)]
    (sched, em), = _schedules(fn, specs, "sm_90a")
    assert sched.startswith("wgmma") and len(_fused(fn, specs).kernels) == 1
    got, want = _simulate_program(fn, specs, "tf32", seed=3, arch="sm_90a",
                                  reference_args=_tf32_reference)
    for g, w in zip(got, want, strict=True):
        g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
        tol = 2e-5 if dtype == f32 else 2.0 ** -6  # bf16: the GELU is evaluated in bf16 steps
        assert np.max(np.abs(g64 - w64)) <= tol * np.abs(w64).max()


def test_wgmma_only_on_sm_90a_tensor_core_schedules():
    """sm_90 keeps mma.sync; float32 at precision "highest" and float64 stay SIMT on sm_90a."""
    mm = _layout_fn("nn")
    assert _schedules(mm, _specs("nn", 64, 64, 64, f32), "sm_90")[0][0] == "tf32"
    assert _schedules(mm, _specs("nn", 64, 64, 64, f32), "sm_90a")[0][0] == "wgmma-tf32"
    assert _schedules(mm, _specs("nn", 64, 64, 64, bf16), "sm_90a")[0][0] == "wgmma-bf16"
    assert _schedules(mm, _specs("nn", 64, 64, 64, f32), "sm_90a", "highest")[0][0] == "simt"
    assert _schedules(mm, _specs("nn", 64, 64, 64, np.float64), "sm_90a")[0][0] == "simt"


def _mutated(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


@pytest.mark.parametrize("dtype", [f32, bf16], ids=["tf32", "bf16"])
def test_simulator_catches_broken_wgmma_kernels(dtype):
    """A missing final wgmma wait, or a wait that leaves the group reading the stage being
    rewritten in flight, raises; a wrong swizzle or K step gives wrong products, an
    unaligned ring reads outside the views, a cp.async wait too few (bf16's A tile is copied by
    cp.async; TF32 stages both tiles through registers) reads poison."""
    from nova.compiler.codegen.cuda.simulate import simulate

    specs = _specs("nn", 64, 192, 64, dtype)
    ((gk, em),) = [(k, em) for k in _fused(_layout_fn("nn"), specs).kernels
                   for _, em in backend_cuda.lower_kernel(k, "sm_90a", "tf32")]
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s.shape).astype(dtype) for s in specs)
    want = np.asarray(a, np.float64) @ np.asarray(b, np.float64)

    def run(text):
        out = np.zeros((64, 64), dtype)
        simulate(wrap_module(gk.name, text, "sm_90a"), gk.name, em.grid, em.block, [a, b, out],
                 dynamic_shared_bytes=em.dynamic_shared_bytes)
        return np.asarray(out, np.float64)

    assert np.max(np.abs(run(em.text) - want)) <= 1e-2 * np.abs(want).max()
    assert "nvvm.wgmma.wait.group.sync.aligned 1" in em.text  # 4 stages: one group in flight
    with pytest.raises(AssertionError, match="accumulator read while a wgmma is in flight"):
        run(_mutated(em.text, "nvvm.wgmma.wait.group.sync.aligned 0", ""))
    with pytest.raises(AssertionError, match="in-flight wgmma reads"):  # two groups in flight
        run(_mutated(em.text, "nvvm.wgmma.wait.group.sync.aligned 1", "nvvm.wgmma.wait.group."
                     "sync.aligned 2"))
    unswizzled = em.text.replace("arith.xori", "arith.ori")  # chunk | row instead of ^
    assert unswizzled != em.text
    assert np.max(np.abs(run(unswizzled) - want)) > 0.1 * np.abs(want).max()
    step = re.search(r"arith.constant 2 : i64", em.text)
    assert step and np.max(np.abs(run(em.text.replace(
        "arith.constant 2 : i64", "arith.constant 1 : i64")) - want)) > 0.1 * np.abs(want).max()
    with pytest.raises(IndexError, match="outside every shared view"):
        run(re.sub(r"%As = memref.view %smem\[%m\d+\]", "%As = memref.view %smem[%c0]", em.text))
    if dtype == bf16:
        assert np.isnan(run(_mutated(em.text, "numGroups = 1 : i32", "numGroups = 2 : i32"))).any()
    else:
        assert "device_async_copy" not in em.text


def test_wgmma_accumulator_struct_maps_to_registers_in_order():
    """The link the simulator assumes: element i of the accumulator struct is the i-th register
    of the wgmma's destination list (checked on the PTX of a kernel storing element i at i)."""
    st = "!llvm.struct<(" + ", ".join(["f32"] * 32) + ")>"
    stores = "\n".join(f"      %e{i} = llvm.extractvalue %r[{i}] : {st}\n"
                       f"      %c{i} = arith.constant {i} : index\n"
                       f"      memref.store %e{i}, %o[%c{i}] : memref<32xf32>" for i in range(32))
    body = f"""    gpu.func @k(%o: memref<32xf32>, %d: i64) kernel {{
      %z = llvm.mlir.zero : {st}
      nvvm.wgmma.fence.aligned
      %r = nvvm.wgmma.mma_async %d, %d, %z, #nvvm.shape<m = 64, n = 64, k = 8>, D [<f32>, #nvvm.wgmma_scale_out<one>], A [<tf32>, #nvvm.wgmma_scale_in<one>, <row>], B [<tf32>, #nvvm.wgmma_scale_in<one>, <col>] : {st} -> {st}
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
{stores}
      gpu.return
    }}"""
    ptx = compile_to_ptx({"m": wrap_module("m", body, "sm_90a")})["m"]
    dest = re.search(r"wgmma\.mma_async\S*\s+\{([^}]*)\}", ptx).group(1)
    regs = [x.strip() for x in dest.split(",")]
    stored = {int(off or 0) // 4: r for off, r in
              re.findall(r"st\.global\.\w+\s+\[%rd\d+\+?(\d*)\], (%r\d+|%f\d+)", ptx)}
    assert len(regs) == 32 and regs == [stored[i] for i in range(32)]


@needs_ptxas
@pytest.mark.parametrize("dtype", [f32, bf16], ids=["tf32", "bf16"])
def test_wgmma_gemms_assemble_for_sm_90a_without_spills(dtype):
    """The 128 x 128 wgmma GEMMs in all four layouts (2048^3 and a batch of 4 x 1000^3): ptxas
    accepts them for sm_90a, no spills; where no tile overhangs, `.minnctapersm 2` asks for two
    blocks of 256 threads per SM (at most 128 registers); the SM's rings fit its opt-in shared
    memory; ptxas injects no warpgroup.wait."""
    props = gpu.describe("sm_90a")
    for layout in ("nn", "nt", "tn", "tt"):
        for shape in ((4, 1000, 1000), (2048, 2048)):
            fused = _fused(_layout_fn(layout), [S(shape, dtype)] * 2)
            (k,) = fused.kernels
            (((_, rec),),) = backend_cuda.compile_kernels(fused, "cuda:sm_90a", "tf32").values()
            assert "wgmma.mma_async.sync.aligned.m64n128" in rec["ptx"]
            capped = ".minnctapersm 2" in rec["ptx"]
            assert capped == (shape == (2048, 2048)), (layout, shape)  # no tile edges
            info = ptxas_info(rec["ptx"], "sm_90a")
            assert info["spill_bytes"] == 0 and info["stack_bytes"] == 0, (layout, shape, info)
            assert info["advisories"] == [], info  # no warpgroup.wait injected by ptxas
            assert not capped or info["registers"] <= 128, (layout, shape, info)
            blocks = 2 if capped else 1
            assert blocks * rec["dynamic_shared_bytes"] <= props.max_shared_memory_per_block_optin
            assert k.schedule["tile"][:2] == (128, 128), k.schedule


@needs_ptxas
@pytest.mark.parametrize("dtype", [f32, bf16], ids=["tf32", "bf16"])
def test_wgmma_tiles_of_128_x_256_keep_a_group_in_flight(dtype):
    """Large GEMMs (4096^3, GPT-2's 8192 x 768 @ 768 x 50304) take 128 x 256 tiles (two
    warpgroups of m64n256, one block per SM, 4 stages) and leave one wgmma group in flight
    across the loop's barrier: ptxas injects no warpgroup.wait (it would, with advisory C7517,
    if the pending accumulators were touched), no spills, registers within the 255 limit and
    the block's 64 K."""
    for sa, sb in (((4096, 4096), (4096, 4096)), ((8192, 768), (768, 50304))):
        fused = _fused(_layout_fn("nn"), [S(sa, dtype), S(sb, dtype)])
        (k,) = fused.kernels
        (((_, rec),),) = backend_cuda.compile_kernels(fused, "cuda:sm_90a", "tf32").values()
        assert k.schedule["tile"][:2] == (128, 256) and k.schedule["stages"] == 4
        assert "m64n256" in rec["ptx"] and "wgmma.wait_group.sync.aligned \t1" in rec["ptx"]
        info = ptxas_info(rec["ptx"], "sm_90a")
        assert info["advisories"] == [] and info["spill_bytes"] == 0, info
        assert info["registers"] * 256 <= 65536, info
        # The ring's 1024-byte alignment is computed at run time (not left to the driver):
        # the extern array is declared 16-byte aligned, so LLVM keeps the rounding.
        assert ".extern .shared .align 16" in rec["ptx"] and ", 1008;" in rec["ptx"]
        # column pairs leave as 8-byte stores (whole 32-byte sectors per warp)
        assert rec["ptx"].count("st.global.v2") == 64 and "st.global.f32" not in rec["ptx"]


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
def test_tf32_rounding_keeps_nans(arch):
    """CUDA's canonical NaN (0x7fffffff), a negative one, and NaNs whose payload lies in the low
    13 bits alone survive the TF32 operand rounding (adding half a unit would carry the first
    two into -0.0 / +0.0; the tensor cores would read the others as infinities): their rows of
    the product are NaN, the other rows are right (mma.sync and wgmma kernels)."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 64)).astype(f32)
    b = rng.standard_normal((64, 64)).astype(f32)
    a.view(np.uint32)[3, 5] = 0x7FFFFFFF
    a.view(np.uint32)[40, 0] = 0xFFFFFFFF
    a.view(np.uint32)[17, 9] = 0x7F800001  # payload in the low 13 bits only
    a.view(np.uint32)[50, 63] = 0xFF801FFF
    from nova.compiler.codegen.cuda.simulate import simulate

    ((gk, em),) = [(k, em) for k in _fused(_layout_fn("nn"), [S((64, 64), f32)] * 2).kernels
                   for _, em in backend_cuda.lower_kernel(k, arch, "tf32")]
    out = np.zeros((64, 64), f32)
    simulate(wrap_module(gk.name, em.text, arch), gk.name, em.grid, em.block, [a, b, out],
             dynamic_shared_bytes=getattr(em, "dynamic_shared_bytes", 0))
    bad = np.zeros(64, bool)
    bad[[3, 17, 40, 50]] = True
    assert np.isnan(out[bad]).all() and not np.isnan(out[~bad]).any()
    want = tf32_rna(a[~bad]).astype(np.float64) @ tf32_rna(b)
    assert np.max(np.abs(out[~bad] - want)) <= 2e-5 * np.abs(want).max()


def test_hopper_devices_compile_for_sm_90a(monkeypatch):
    h = gpu.describe("sm_90")
    monkeypatch.delenv("NOVA_CUDA_ARCH", raising=False)
    assert h.target_arch == "sm_90a" and gpu.describe("sm_80").target_arch == "sm_80"
    assert h.runs("sm_90a") and h.runs("sm_90") and not h.runs("sm_80")
    monkeypatch.setenv("NOVA_CUDA_ARCH", "sm_90")
    assert h.target_arch == "sm_90"
    monkeypatch.setenv("NOVA_CUDA_ARCH", "sm_80")
    with pytest.raises(ValueError, match="NOVA_CUDA_ARCH='sm_80' does not run on"):
        h.target_arch  # noqa: B018
