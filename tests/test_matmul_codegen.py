"""Nova's generated CPU matmul kernels (nova/compiler/codegen/cpu/matmul.py) against NumPy.

Every kernel of a test module is compiled in one MLIR module (one JIT call, ~0.3 s per kernel);
the reference is NumPy in float64 on the same (rounded) inputs, and float32 results must be within
1e-5 relative error (max |error| / max |reference|).
"""

from __future__ import annotations

import numpy as np
import pytest

from nova.compiler.codegen.builder import Builder, Value
from nova.compiler.codegen.cpu import matmul as mm
from nova.compiler.codegen.cpu.matmul import CPUDevice, MatmulSpec, build_matmuls, plan

AVX2 = CPUDevice(vector_bits=256, n_vregs=16, l1d=32 * 1024, l1d_ways=8, l2=512 * 1024,
                 l3=32 * 1024 * 1024, cores=2)
AVX512 = CPUDevice(vector_bits=512, n_vregs=32, l1d=48 * 1024, l1d_ways=12, l2=2 * 1024 * 1024,
                   l3=105 * 1024 * 1024, cores=16)
# Tiny caches: blocks of a few micro-tiles, so small shapes cross every block loop (jc, pc, ic).
TINY = CPUDevice(vector_bits=256, n_vregs=16, l1d=2 * 1024, l1d_ways=8, l2=4 * 1024,
                 l3=8 * 1024, cores=2)


def operands(spec: MatmulSpec, seed: int = 0):
    """Random A, B stored as the spec says, and the float64 reference C (batch, m, n)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((spec.batch, spec.m, spec.k)).astype(spec.dtype)
    b = rng.standard_normal((spec.batch, spec.k, spec.n)).astype(spec.dtype)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    a_st = np.ascontiguousarray(a.transpose(0, 2, 1)) if spec.a_trans else a
    b_st = np.ascontiguousarray(b.transpose(0, 2, 1)) if spec.b_trans else b
    return a_st, b_st, ref


def rel_err(out, ref) -> float:
    return float(np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-30))


TOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}

# (batch, m, n, k): tiny sizes, sizes that are multiples of nothing, k = 1, k across KC blocks.
SHAPES = [(1, 1, 1, 1), (1, 1, 17, 3), (1, 3, 1, 5), (1, 3, 5, 7), (1, 17, 17, 17),
          (2, 33, 40, 9), (1, 64, 64, 64), (1, 100, 130, 300), (3, 7, 50, 1), (1, 13, 96, 33)]
TRANS = [(False, False), (False, True), (True, False), (True, True)]


def _sweep_kernels():
    ks, tiles = {}, {}
    for i, (b, m, n, k) in enumerate(SHAPES):
        combos = TRANS if i % 2 == 0 or (b, m, n, k) == (1, 100, 130, 300) else TRANS[::3]
        for at, bt in combos:
            ks[f"sw{i}_{int(at)}{int(bt)}"] = MatmulSpec(b, m, n, k, at, bt)
    # Every block loop runs several times (tiny caches), with ragged last blocks.
    for at, bt in TRANS:
        name = f"tiny_{int(at)}{int(bt)}"
        ks[name] = MatmulSpec(2, 45, 70, 83, at, bt)
        tiles[name] = plan(ks[name], TINY)
    ks["f64"] = MatmulSpec(2, 19, 23, 31, False, True, dtype=np.float64)
    ks["f64_tiny"] = MatmulSpec(1, 40, 37, 70, True, False, dtype=np.float64)
    tiles["f64_tiny"] = plan(ks["f64_tiny"], TINY)
    # The AVX-512 blocking (6 x 64 tiles of vector<16xf32>) runs anywhere, slowly without it.
    ks["avx512_shape"] = MatmulSpec(1, 20, 70, 40, True, True)
    tiles["avx512_shape"] = plan(ks["avx512_shape"], AVX512)
    return ks, tiles


SWEEP, SWEEP_TILES = _sweep_kernels()


def test_sweep_matches_numpy(tmp_path):
    """All sweep kernels from one compile (a module fixture would be compiled once per xdist
    worker); failures are collected so that one run names every failing kernel."""
    ks = build_matmuls(SWEEP, str(tmp_path / "sweep.so"), SWEEP_TILES)
    bad = []
    for i, (name, spec) in enumerate(SWEEP.items()):
        a, b, ref = operands(spec, seed=i)
        out = ks[name](a, b)
        err = rel_err(out, ref)
        if out.shape != ref.shape or not err <= TOL[spec.dtype]:
            bad.append((name, spec, err))
    assert not bad, bad
    check_2d_arrays_and_out(ks["sw6_00"])
    check_argument_errors(ks["sw6_00"])


def check_2d_arrays_and_out(kernel):
    """batch == 1 kernels take plain 2-D arrays (same bytes); `out` is written in place."""
    a, b, ref = operands(kernel.spec)
    out = np.full((kernel.spec.m, kernel.spec.n), np.nan, np.float32)
    res = kernel(a[0], b[0], out=out)
    assert res is out and rel_err(out, ref[0]) <= 1e-5


def check_argument_errors(kernel):
    a, b, _ = operands(kernel.spec)
    with pytest.raises(ValueError, match="C-contiguous"):
        kernel(a.astype(np.float64), b)
    with pytest.raises(ValueError, match="C-contiguous"):
        kernel(np.asfortranarray(a[0]), b)
    with pytest.raises(ValueError, match="epilogue"):
        kernel(a, b, a)


def test_tiny_plan_crosses_all_blocks():
    """The TINY device really makes the sweep kernels loop over several jc, pc and ic blocks."""
    for name in ("tiny_00", "tiny_11"):
        t, s = SWEEP_TILES[name], SWEEP[name]
        assert t["NC"] < s.n and t["KC"] < s.k and t["MC"] < s.m


# --- epilogues ---------------------------------------------------------------------------------


def bias_add(b: Builder, acc: Value, i: Value, j: Value, args: list[str]) -> Value:
    """C[b, i, j] = acc + bias[j], bias: memref<n x f32> (a vector load on full tiles)."""
    ty = f"memref<{N_EPI}xf32>"
    if acc.width:
        x = b.op(f"vector.load {args[0]}[{j.name}] : {ty}, {acc.type}", acc.dtype, acc.width)
    else:
        x = b.op(f"memref.load {args[0]}[{j.name}] : {ty}", acc.dtype, 0)
    return b.add(acc, x)


def tanh_epi(b: Builder, acc: Value, i: Value, j: Value, args: list[str]) -> Value:
    return b.tanh(acc)


def residual_gelu(b: Builder, acc: Value, i: Value, j: Value, args: list[str]) -> Value:
    """C = gelu_tanh(acc) + R[batch, i, j] with R shaped like C: uses b.batch_index."""
    ty = f"memref<{B_EPI}x{M_EPI}x{N_EPI}xf32>"
    idx = f"{b.batch_index.name}, {i.name}, {j.name}"
    if acc.width:
        r = b.op(f"vector.load {args[0]}[{idx}] : {ty}, {acc.type}", acc.dtype, acc.width)
    else:
        r = b.op(f"memref.load {args[0]}[{idx}] : {ty}", acc.dtype, 0)
    c = lambda v: b.const(v, None, acc.width)  # noqa: E731
    cube = b.mul(acc, b.mul(acc, acc))
    inner = b.mul(c(0.7978845608028654), b.add(acc, b.mul(c(0.044715), cube)))
    gelu = b.mul(b.mul(c(0.5), acc), b.add(c(1.0), b.tanh(inner)))
    return b.add(gelu, r)


def gelu_ref(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


B_EPI, M_EPI, N_EPI, K_EPI = 2, 29, 45, 300  # edges in m and n; two KC blocks of k


def build_or_skip(kernels, so_path, tiles):
    try:
        return build_matmuls(kernels, so_path, tiles)
    except Exception as e:  # noqa: BLE001 - only a missing OpenMP runtime is a skip
        if "libiomp5" in str(e):
            pytest.skip(str(e))
        raise


def test_epilogues(tmp_path):
    """bias-add (vector loads of a 1-D argument), tanh, and gelu + residual (3-D argument indexed
    with b.batch_index), with edges in m and n and two k blocks (the epilogue must run only after
    the last one), also threaded."""
    bias_t = (f"memref<{N_EPI}xf32>",)
    ks = {
        "bias": MatmulSpec(B_EPI, M_EPI, N_EPI, K_EPI, epilogue=bias_add, n_epilogue_args=1,
                           epilogue_arg_types=bias_t),
        "tanh": MatmulSpec(B_EPI, M_EPI, N_EPI, K_EPI, True, False, epilogue=tanh_epi),
        "resgelu": MatmulSpec(B_EPI, M_EPI, N_EPI, K_EPI, False, True, epilogue=residual_gelu,
                              n_epilogue_args=1),
        "bias_2t": MatmulSpec(B_EPI, M_EPI, N_EPI, K_EPI, epilogue=bias_add, n_epilogue_args=1,
                              epilogue_arg_types=bias_t, threads=2),
    }
    # Too little work for plan() to use 2 threads: force them (2 slabs of m).
    tiles = {"bias_2t": dict(plan(ks["bias_2t"], AVX2), threads=2, split="m", slab=18)}
    assert plan(ks["bias"], AVX2)["KC"] < K_EPI
    epi = build_or_skip(ks, str(tmp_path / "epi.so"), tiles)

    a, b, ref = operands(ks["bias"], 1)
    bias = np.random.default_rng(2).standard_normal(N_EPI).astype(np.float32)
    for name in ("bias", "bias_2t"):
        assert rel_err(epi[name](a, b, bias), ref + bias) <= 1e-5, name

    a, b, ref = operands(ks["tanh"], 3)
    # Scaled to keep tanh off its flat tails, so the comparison means something.
    out = epi["tanh"](a / np.float32(10), b)
    assert np.abs(out - np.tanh(ref / 10)).max() <= 1e-5

    a, b, ref = operands(ks["resgelu"], 4)
    res = np.random.default_rng(5).standard_normal((B_EPI, M_EPI, N_EPI)).astype(np.float32)
    assert rel_err(epi["resgelu"](a, b, res), gelu_ref(ref) + res) <= 1e-5


def test_epilogue_sees_vector_and_scalar_paths():
    """Full tiles call the epilogue on vectors of width W, edge tiles on scalars."""
    widths = []

    def spy(b, acc, i, j, args):
        widths.append(acc.width)
        assert i.dtype == "index" and j.dtype == "index" and b.batch_index.dtype == "index"
        return acc

    text = mm.emit_matmul("k", MatmulSpec(1, 29, 45, 8, epilogue=spy), device=AVX2)
    assert sorted(set(widths)) == [0, 8] and "@k(" in text


def test_epilogue_width_checked():
    bad = lambda b, acc, i, j, args: b.const(0.0, None, 0)  # noqa: E731
    with pytest.raises(ValueError, match="epilogue returned"):
        mm.emit_matmul("k", MatmulSpec(1, 12, 32, 8, epilogue=bad), device=AVX2)


# --- threads -----------------------------------------------------------------------------------

THREADED = {
    "t_m": MatmulSpec(1, 301, 64, 500, threads=2),  # split along m
    "t_n": MatmulSpec(1, 40, 515, 400, True, True, threads=2),  # split along n
    "t_b": MatmulSpec(4, 70, 90, 350, False, True, threads=2),  # split along batch
    "t_b3": MatmulSpec(3, 130, 50, 450, True, False, threads=2),  # batch 3: split along m
}


def test_thread_plans():
    want = {"t_m": "m", "t_n": "n", "t_b": "batch", "t_b3": "m"}
    for name, spec in THREADED.items():
        t = plan(spec, AVX2)
        assert (t["threads"], t["split"]) == (2, want[name]), name


def test_threaded_matches_numpy(tmp_path):
    ks = build_or_skip(THREADED, str(tmp_path / "thr.so"),
                       {n: plan(s, AVX2) for n, s in THREADED.items()})
    for name, spec in THREADED.items():
        a, b, ref = operands(spec, 7)
        for _ in range(3):  # the thread pool is reused across calls
            assert rel_err(ks[name](a, b), ref) <= 1e-5, name


# --- the plan ----------------------------------------------------------------------------------

PLAN_SHAPES = [(1, 1, 1, 1), (1, 3, 17, 5), (1, 256, 256, 256), (1, 1024, 1024, 1024),
               (1, 1024, 3072, 768), (8, 128, 64, 64), (1, 2048, 2048, 2048), (1, 5, 50257, 768)]


@pytest.mark.parametrize("dev", [AVX2, AVX512, TINY], ids=["avx2", "avx512", "tiny"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_plan_constraints(dev, dtype):
    for b, m, n, k in PLAN_SHAPES:
        for threads in (1, 2, 16):
            spec = MatmulSpec(b, m, n, k, dtype=dtype, threads=threads)
            t = plan(spec, dev)
            assert t == plan(spec, dev)  # deterministic
            size = np.dtype(dtype).itemsize
            w = dev.vector_bits // (8 * size)
            assert t["W"] == w and t["NR"] == t["NV"] * w
            # Registers: accumulators + B vectors + one broadcast A value.
            assert t["MR"] * t["NV"] + t["NV"] + 1 <= dev.n_vregs
            assert t["MR"] <= max(1, m)
            # Caches: B micro-panel + 2 A micro-panels in L1, A block in half of L2.
            assert t["KC"] * (t["NR"] + 2 * t["MR"]) * size <= dev.l1d or t["KC"] == max(4, w)
            assert t["MC"] * t["KC"] * size <= dev.l2 // 2 or t["MC"] == t["MR"]
            assert t["KC"] % max(mm.KU, w) == 0 and t["MC"] % t["MR"] == 0
            assert t["NC"] % t["NR"] == 0
            assert t["KC"] <= t["KC_max"] and t["MC"] <= t["MC_max"] and t["NC"] <= t["NC_max"]
            # Blocks are not larger than the problem needs (one ragged block at most).
            assert t["KC"] < k + max(mm.KU, w)
            assert 1 <= t["threads"] <= min(threads, dev.cores)
            if t["threads"] > 1:
                assert 2 * b * m * n * k >= t["threads"] * mm.MIN_FLOPS_PER_THREAD


def test_plan_known_values():
    big = MatmulSpec(1, 2048, 2048, 2048)
    t = plan(big, AVX2)  # BLIS' Haswell sgemm kernel is 6 x 16 with KC = 256
    assert (t["W"], t["MR"], t["NR"], t["KC"]) == (8, 6, 16, 256)
    assert (t["MC"], t["NC"]) == (228, 2048)  # 9 even blocks of m
    t = plan(big, AVX512)
    assert (t["W"], t["MR"], t["NR"]) == (16, 6, 64)
    t = plan(MatmulSpec(1, 2048, 2048, 2048, dtype=np.float64), AVX2)
    assert (t["W"], t["MR"], t["NR"]) == (4, 6, 8)
    # Small problems: the register block shrinks to the matrix; no threads for tiny work.
    t = plan(MatmulSpec(1, 1, 5, 3, threads=2), AVX2)
    assert (t["MR"], t["NR"], t["threads"]) == (1, 8, 1)
    t = plan(MatmulSpec(1, 1024, 1024, 1024, threads=2), AVX2)
    assert (t["threads"], t["split"]) == (2, "m")
    t = plan(MatmulSpec(1, 1024, 3072, 768, threads=2), AVX2)
    assert (t["threads"], t["split"], t["slab"]) == (2, "n", 1536)


def test_host_device_is_sane():
    dev = mm.host_device()
    assert dev.vector_bits in (128, 256, 512) and dev.n_vregs in (16, 32)
    assert 0 < dev.l1d < dev.l2 and dev.cores >= 1


def test_kernel_text_is_self_contained():
    """Nova generates the GEMM itself: vector FMAs on packed buffers, no library calls."""
    text = mm.emit_matmul("k", MatmulSpec(1, 64, 64, 64), device=AVX2)
    assert "vector.fma" in text and "func.call" not in text and "omp." not in text
    assert "func.func @k(%A: memref<1x64x64xf32>, %B: memref<1x64x64xf32>, " \
           "%C: memref<1x64x64xf32>)" in text
    threaded_text = mm.emit_matmul("k", MatmulSpec(1, 512, 512, 512, threads=2), device=AVX2)
    assert mm.needs_openmp(threaded_text) and "omp.parallel num_threads" in threaded_text


def test_spec_validation():
    with pytest.raises(ValueError, match="float32 and float64"):
        MatmulSpec(1, 2, 2, 2, dtype=np.int32)
    with pytest.raises(ValueError, match=">= 1"):
        MatmulSpec(1, 0, 2, 2)
    with pytest.raises(ValueError, match="one type per"):
        MatmulSpec(1, 2, 2, 2, n_epilogue_args=2, epilogue_arg_types=("memref<2xf32>",))


# --- shape-generic kernels -----------------------------------------------------------------------


def test_generic_kernels_run_every_shape_of_their_variant(tmp_path):
    """One compiled kernel runs any shape and transpose combination from its parameter vector:
    batch, m and n splits over two threads, edges in m, n and k, several k/m/n blocks (TINY's
    blocking), and a single-thread plan; all against NumPy in float64."""
    from nova.compiler.codegen.cpu.compile import (
        compile_to_shared_library,
        load_function,
        use_openmp_defaults,
    )

    specs = [MatmulSpec(1, 512, 384, 128, threads=2), MatmulSpec(1, 7, 16, 5, threads=2),
             MatmulSpec(3, 100, 70, 300, a_trans=True, threads=2),
             MatmulSpec(1, 64, 48, 33, b_trans=True, threads=2),
             MatmulSpec(2, 513, 257, 129, a_trans=True, b_trans=True, threads=2),
             MatmulSpec(4, 64, 64, 32, b_trans=True, threads=2),
             MatmulSpec(1, 60, 1200, 128, threads=2), MatmulSpec(1, 300, 40, 70, threads=1)]
    texts, names = {}, []
    for s in specs:
        tiles = mm.generic_variant(s, TINY)
        assert tiles is not None
        name = mm.generic_name(s, tiles)
        texts.setdefault(name, mm.emit_matmul(name, s, tiles, TINY))
        names.append(name)
    assert len(texts) == 1  # nn, nt, tn and tt share one kernel
    so = str(tmp_path / "generic.so")
    try:
        compile_to_shared_library(mm.module_text(list(texts.values())), list(texts), so,
                                  openmp=True)
    except Exception as e:  # noqa: BLE001 - only a missing OpenMP runtime is a skip
        if "libiomp5" in str(e):
            pytest.skip(str(e))
        raise
    use_openmp_defaults()
    splits = set()
    for s, name in zip(specs, names, strict=True):
        fn = load_function(so, name, 4)
        a, b, ref = operands(s, seed=len(splits))
        c = np.full((s.batch, s.m, s.n), np.nan, s.dtype)
        params = mm.generic_params(s, TINY)
        splits.add(int(params[mm._MatmulGen.GENERIC_PARAMS.index("split")]))
        fn(a.ctypes.data, b.ctypes.data, params.ctypes.data, c.ctypes.data)
        assert rel_err(c, ref) < 1e-5, (s, params)
    assert splits == {0, 1, 2, 3}


def test_generic_variant_keeps_shape_specific_kernels_where_they_fit_better():
    assert mm.generic_variant(MatmulSpec(1, 1, 256, 256)) is None  # m < MR: matrix-vector
    assert mm.generic_variant(MatmulSpec(1, 256, 4, 256)) is None  # n < one vector pair
    assert mm.generic_variant(MatmulSpec(1, 64, 64, 64, epilogue=tanh_epi)) is None
    a = mm.generic_variant(MatmulSpec(1, 64, 64, 64), AVX2)
    b = mm.generic_variant(MatmulSpec(2, 1000, 3000, 7), AVX2)
    assert a == b  # the text depends on the variant only
    s1, s2 = MatmulSpec(1, 64, 64, 64), MatmulSpec(1, 128, 64, 64)
    assert mm.emit_matmul("g", s1, a, AVX2) == mm.emit_matmul("g", s2, a, AVX2)
