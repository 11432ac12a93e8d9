"""The CUDA backend without a GPU: generated PTX assembles (ptxas, sm_80 and sm_90), launch
configurations fit the device descriptions, cross-compilation fills the disk cache and a cache hit
needs no MLIR, unsupported kernels and a missing GPU raise clear errors. Runtime tests on a real
GPU are marked `gpu` and skip without one.
"""

import re

import numpy as np
import pytest

import nova
import nova.numpy as jnp
from nova import gpu
from nova.compiler import backend_cuda
from nova.compiler.codegen.cuda.compile import parse_target, ptxas_available, ptxas_info
from nova.compiler.fuse import fuse
from nova.compiler.pipeline import run_passes, target_options
from nova.core import dtypes
from nova.nn import functional as F

S = nova.ShapeDtypeStruct
f32, bf16 = np.float32, dtypes.bfloat16
needs_ptxas = pytest.mark.skipif(not ptxas_available(), reason="ptxas is not on PATH")
needs_gpu = pytest.mark.skipif(not gpu.is_available(), reason="no NVIDIA GPU")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "nova-cuda-cache"))


def _loss_ln(x, w, b):
    return jnp.sum(F.layer_norm(x, w, b) ** 2)


def _ce(logits, labels):
    return F.cross_entropy(logits, labels)


def _scatter_rows(op, upd, mode):
    from nova.ops.indexing import scatter

    rows = np.array([[3], [0], [3], [-1], [19], [20], [3], [0]], np.int32)
    return scatter(op, jnp.asarray(rows), upd, axes=(0,), mode=mode)


def _bit_tricks(x):
    # sign-bit clearing through an int32 view, and round's away-from-zero ties (lax)
    bits = nova.lax.bitcast_convert_type(x, np.int32)
    mag = nova.lax.bitwise_and(bits, nova.lax.full_like(bits, 0x7FFFFFFF))
    return nova.lax.bitcast_convert_type(mag, np.float32) + nova.lax.round(x * 2.5)


def _narrow_ints(x, y):
    z = x * 3 + y - (x >> 1) + x // (y | 1)
    return z, z.astype(np.float32) * 0.5, jnp.sum(z, axis=1), jnp.max(x, axis=1)


# (name, function, argument specs): elementwise with broadcasts and casts, odd shapes (scalar
# code), row reductions forward and backward, argmax, a column reduction, contractions with
# epilogues and transposed/batched/bf16 operands.
CASES = [
    ("gelu_bias", lambda x, b: F.gelu(x + b, approximate=True), [S((64, 256), f32), S((256,), f32)]),
    ("odd_elementwise", lambda x: jnp.exp(x) * 2.0 - x, [S((7, 13), f32)]),
    ("bitcast_round", _bit_tricks, [S((8, 70), f32)]),
    ("narrow_ints", _narrow_ints, [S((8, 70), np.int8), S((8, 70), np.int8)]),
    ("narrow_ints16", _narrow_ints, [S((8, 70), np.uint16), S((8, 70), np.uint16)]),
    ("bf16_cast", lambda x: (x.astype(bf16) * 3).astype(f32), [S((32, 64), f32)]),
    ("concat_pad", lambda x, y: jnp.pad(jnp.concatenate([x, y], axis=1), ((0, 0), (4, 4))),
     [S((16, 32), f32), S((16, 32), f32)]),
    ("softmax", lambda x: F.softmax(x), [S((64, 1000), f32)]),
    ("softmax_resident", lambda x: F.softmax(x), [S((16, 4096), f32)]),
    ("layer_norm_resident", lambda x, w, b: F.layer_norm(x, w, b),
     [S((8, 2048), f32), S((2048,), f32), S((2048,), f32)]),
    ("layer_norm_fwd_bwd", nova.grad(_loss_ln, argnums=(0, 1, 2)),
     [S((32, 768), f32), S((768,), f32), S((768,), f32)]),
    ("cross_entropy_fwd_bwd", nova.value_and_grad(_ce), [S((16, 500), f32), S((16,), np.int32)]),
    ("argmax", lambda x: jnp.argmax(x, axis=-1), [S((8, 1024), f32)]),
    ("column_sum", lambda x: jnp.sum(x, axis=0), [S((300, 40), f32)]),
    # 2 MiB over 8 column tiles: split over the rows (codegen/cuda/column_split.py)
    ("column_sum_split", lambda h, dy: (dy * jnp.tanh(h), jnp.sum(dy * h, axis=(0, 1))),
     [S((4, 512, 256), f32), S((4, 512, 256), f32)]),
    ("column_softmax", lambda x: F.softmax(x, axis=0), [S((100, 72), f32)]),
    ("column_argmax", lambda x: jnp.argmax(x, axis=0), [S((64, 40), f32)]),
    ("middle_axis_max", lambda x: jnp.max(x, axis=1), [S((4, 50, 64), f32)]),
    ("cumsum_rows_and_grad", nova.value_and_grad(lambda x: jnp.sum(jnp.cumsum(x, axis=1) ** 2)),
     [S((16, 50), f32)]),
    ("cumprod_columns", lambda x: jnp.cumprod(x, axis=0), [S((12, 70), f32)]),
    ("cumsum_int", lambda x: jnp.cumsum(x, axis=-1), [S((5, 9), np.int32)]),
    ("argsort", lambda x: jnp.argsort(x, axis=-1), [S((6, 100), f32)]),
    ("scatter_max_cas", lambda op, u: _scatter_rows(op, u, "max"),
     [S((20, 8), f32), S((8, 8), f32)]),
    ("scatter_set_last_wins", lambda op, u: _scatter_rows(op, u, "set"),
     [S((20, 8), f32), S((8, 8), f32)]),
    ("embedding_grad", nova.grad(lambda w, ids: jnp.sum(jnp.take(w, ids, axis=0) ** 2)),
     [S((50, 16), f32), S((8, 12), np.int32)]),
    ("matmul_bias_tanh", lambda x, w, b: jnp.tanh(x @ w + b),
     [S((100, 70), f32), S((70, 130), f32), S((130,), f32)]),
    ("matmul_nt", lambda x, w: jnp.matmul(x, w.T), [S((128, 64), f32), S((96, 64), f32)]),
    ("batched_matmul", lambda x, w: x @ w, [S((3, 64, 32), f32), S((3, 32, 48), f32)]),
    ("matmul_bf16", lambda x, w: x @ w, [S((64, 64), bf16), S((64, 128), bf16)]),
]


def _fused(fn, specs):
    return fuse(run_passes(nova.make_program(fn)(*specs), options=target_options("cuda")))


@pytest.fixture(scope="module", params=["sm_80", "sm_90", "sm_90a"])
def compiled(request):
    """{case: (fused program, {id(kernel): [(codegen kernel, record)]})} for one architecture,
    with both matmul precisions for contractions."""
    arch = request.param
    out = {}
    for name, fn, specs in CASES:
        fused = _fused(fn, specs)
        recs = backend_cuda.compile_kernels(fused, f"cuda:{arch}", "highest")
        if fused.count("contraction"):
            tf = backend_cuda.compile_kernels(fused, f"cuda:{arch}", "tf32")
            recs = {k: v + tf[k] for k, v in recs.items()}
        out[name] = (fused, recs)
    return arch, out


def _records(compiled_case):
    return [rec for parts in compiled_case[1].values() for _, rec in parts]


@needs_ptxas
@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_ptx_assembles_within_limits(compiled, case):
    arch, cases = compiled
    props = gpu.describe(arch)
    recs = _records(cases[case])
    assert recs, f"{case}: no GPU kernel was generated"
    for rec in recs:
        assert f".target {arch}" in rec["ptx"]
        info = ptxas_info(rec["ptx"], arch)  # raises with ptxas's message if rejected
        threads = int(np.prod(rec["block"]))
        assert threads % props.warp_size == 0 and threads <= props.max_threads_per_block
        assert info["registers"] <= props.max_registers_per_thread
        assert info["registers"] * threads <= props.max_registers_per_block
        assert info["shared_bytes"] == rec["shared_bytes"], (rec["entry"], info)
        assert info["shared_bytes"] <= props.max_shared_memory_per_block
        assert info["spill_bytes"] == 0, (rec["entry"], info)
        assert all(g >= 1 for g in rec["grid"]) and rec["grid"][0] < 2**31
        assert max(rec["grid"][1:]) <= 65535


def _kernel_records(cases, name, kind):
    fused, recs = cases[name]
    return [rec for k in fused.kernels if k.kind == kind for _, rec in recs[id(k)]]


def test_schedules_and_instructions(compiled):
    """The PTX uses what each schedule is for: 16-byte accesses, shuffles, tensor cores."""
    arch, cases = compiled
    (gelu,) = _kernel_records(cases, "gelu_bias", "loop")
    assert "ld.global.v4" in gelu["ptx"] and "st.global.v4" in gelu["ptx"]
    assert gelu["grid"] == [16, 1, 1] and gelu["block"] == [256, 1, 1]  # 64*256/4 threads
    (odd,) = _kernel_records(cases, "odd_elementwise", "loop")
    assert "v4" not in odd["ptx"] and odd["block"] == [96, 1, 1]  # 91 elements, scalar
    (sm,) = _kernel_records(cases, "softmax", "loop")
    assert sm["grid"] == [64, 1, 1] and "shfl.sync.bfly" in sm["ptx"] and "bar.sync" in sm["ptx"]
    assert sm["shared_bytes"] == 2 * 8 * 4  # one slot per warp for max and for sum
    # Rows of 4096: 256 threads x 4 chunks of float4 kept in registers: x is read once.
    (res,) = _kernel_records(cases, "softmax_resident", "loop")
    assert res["block"] == [256, 1, 1] and res["ptx"].count("ld.global") == 4
    assert sm["ptx"].count("ld.global") == 3  # 1000 columns: a strided loop per phase
    # Column reductions: 32 columns per block (coalesced), 8 warps over the rows.
    (col,) = _kernel_records(cases, "column_sum", "loop")
    assert col["block"] == [256, 1, 1] and col["grid"] == [2, 1, 1]
    # 300 rows: a loop over 4 rows per warp and iteration (4 loads issued together), then one
    # over the last 12 rows.
    assert col["ptx"].count("ld.global") == 4 + 1
    # ... split over the rows where that leaves SMs idle: 16 parts of 128 rows x 8 tiles, then
    # one launch adding the 16 partials.
    *_, part, finish = _kernel_records(cases, "column_sum_split", "loop")
    assert part["grid"] == [16 * 8, 1, 1] and finish["grid"] == [8, 1, 1]
    (mid,) = _kernel_records(cases, "middle_axis_max", "loop")
    assert mid["grid"] == [4 * 2, 1, 1] and mid["shared_bytes"] == 8 * 32 * 4
    mm = _kernel_records(cases, "matmul_bias_tanh", "contraction")
    simt, tf32 = mm
    assert simt["grid"] == [3, 2, 1] and "mma.sync" not in simt["ptx"]
    assert tf32["block"] == [128, 1, 1]
    if arch == "sm_90a":  # Hopper: one warpgroup's wgmma, the tile's 64 columns at once
        assert "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32" in tf32["ptx"]
        assert "mma.sync" not in tf32["ptx"] and tf32["dynamic_shared_bytes"] > 0
    else:
        assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in tf32["ptx"]
    (bmm, _) = _kernel_records(cases, "batched_matmul", "contraction")
    assert bmm["grid"] == [1, 1, 3]


def test_shared_tiles_are_16_byte_aligned_for_vector_accesses(compiled):
    """A kernel that reads or writes shared memory 8 or 16 bytes at a time (GEMM tiles staged
    as float4; LLVM also merges a block reduction's per-warp slot reads into ld.shared.v4)
    declares its shared buffers aligned to that: MLIR places workgroup buffers at their
    element's alignment unless asked, and a misaligned vector access faults on the GPU."""
    _, cases = compiled
    vector_kernels = 0
    for name in cases:
        for rec in _records(cases[name]):
            ptx = rec["ptx"]
            widths = re.findall(r"(?:ld|st)\.shared\.v([24])\.[fbus]32", ptx)
            if not widths:
                continue
            vector_kernels += 1
            aligns = [int(a) for a in re.findall(r"\.shared \.align (\d+)", ptx)]
            need = 4 * max(int(w) for w in widths)  # v4.f32: 16 bytes, v2: 8
            assert aligns and min(aligns) >= need, (name, rec["entry"], aligns, need)
    assert vector_kernels >= 6  # GEMMs and row reductions (else this checks nothing)


def _simulate_program(fn, specs, precision, seed=0, sm_count=None, arch="sm_90",
                      reference_args=None, in_place=None):
    """(outputs of the fused program with every GPU kernel for `arch` run by the SIMT simulator,
    outputs of the NumPy reference interpreter) for random inputs; `reference_args` maps the
    inputs to the reference's (e.g. rounded as the kernels' operands are). in_place: a list
    that collects (kernel name, reduced axes, input position, output position) for every output
    the kernel then writes over a copy of an input it reads, wherever plan_memory.inplace_safe
    allows."""
    from nova.compiler.backend_cpu import _empty, _host_fn
    from nova.compiler.codegen.cuda.compile import wrap_module
    from nova.compiler.codegen.cuda.simulate import simulate
    from nova.compiler.plan_memory import inplace_safe
    from nova.core.interpreter import run_program

    rng = np.random.default_rng(seed)
    prog = run_passes(nova.make_program(fn)(*specs), options=target_options("cuda"))
    args = [rng.integers(0, s.shape[-1], s.shape).astype(s.dtype) if np.dtype(s.dtype).kind in "iu"
            else rng.standard_normal(s.shape).astype(s.dtype) for s in specs]
    env = {id(v): a for v, a in zip(prog.inputs, args, strict=True)}
    for k in fuse(prog).kernels:
        if k.kind.startswith("host:") or _empty(k):
            env.update({id(v): np.asarray(a) for v, a in zip(k.outputs, _host_fn(k)([]), strict=True)})
            continue
        for gk, em in backend_cuda.lower_kernel(k, arch, precision, sm_count):
            ins = [np.ascontiguousarray(env[id(v)]) for v in gk.program.inputs]
            # A scatter's fill and atomic-add launches write one buffer.
            outs = [env[id(v)] if id(v) in env else np.zeros(v.type.shape, v.type.dtype)
                    for v in gk.program.outputs]
            if in_place is not None:
                taken = set()
                for j in range(len(outs)):
                    for i in range(len(ins)):
                        if i not in taken and inplace_safe(gk, i, j):
                            ins[i] = outs[j] = ins[i].copy()  # one buffer, read then written
                            taken.add(i)
                            in_place.append((gk.name, gk.schedule.get("red_axes"), i, j))
                            break
            simulate(wrap_module(gk.name, em.text, arch), gk.name, em.grid, em.block, ins + outs,
                     dynamic_shared_bytes=getattr(em, "dynamic_shared_bytes", 0))
            env.update({id(v): a for v, a in zip(gk.program.outputs, outs, strict=True)})
    ref = reference_args(args) if reference_args is not None else args
    return [env[id(v)] for v in prog.outputs], run_program(prog, ref)


@pytest.mark.parametrize("case,precision", [(c[0], "highest") for c in CASES]
                         + [(c[0], "tf32") for c in CASES if "matmul" in c[0]])
def test_simulated_kernels_match_reference(case, precision):
    """Every generated GPU kernel, run thread by thread (lockstep) by codegen/cuda/simulate.py,
    against the NumPy reference: index math, vector widths and claimed alignments, bounds
    checks, warp shuffles and shared memory, TF32 fragments (PTX ISA layout)."""
    fn, specs = {c[0]: (c[1], c[2]) for c in CASES}[case]
    got, want = _simulate_program(fn, specs, precision)
    # TF32 keeps 10 mantissa bits: ~3e-4 of the largest product sum, more after tanh's squash.
    tol = 1e-2 if precision == "tf32" or "bf16" in case else 1e-5  # DESIGN.md: 1e-5 for f32
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
        scale = max(float(np.max(np.abs(w64))), 1e-30) if w64.size else 1.0
        assert float(np.max(np.abs(g64 - w64), initial=0.0)) <= tol * scale, case


def test_simulated_scatter_add_repeats_and_drops():
    """Repeated indices accumulate (atomics), out-of-range index rows are dropped."""
    from nova.ops.indexing import scatter_add

    def fn(op, upd):
        idx = jnp.asarray(np.array([[3], [0], [3], [-1], [19], [20], [3]], np.int32))
        return scatter_add(op, idx, upd, axes=(0,))

    specs = [S((20, 8), f32), S((7, 8), f32)]
    assert [k.kind for k in _fused(fn, specs).kernels] == ["scatter"]
    got, want = _simulate_program(fn, specs, "highest")
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("axis", [0, 1])
def test_simulated_sort_and_argsort(axis):
    """NumPy's stable order: ties keep their positions, NaN last, -0.0 equal to 0.0."""
    from nova.compiler.codegen.cuda.compile import wrap_module
    from nova.compiler.codegen.cuda.simulate import simulate

    rng = np.random.default_rng(2)
    x = np.floor(rng.standard_normal((24, 40)) * 2).astype(f32)
    x[1, 3], x[1, 9], x[5, 0] = np.nan, np.nan, np.nan
    x[2, 4], x[2, 7] = -0.0, 0.0
    fused = _fused(lambda a: (jnp.sort(a, axis=axis), jnp.argsort(a, axis=axis)), [S(x.shape, f32)])
    outs = {}
    for k in fused.kernels:
        assert k.kind == "sort"
        ((gk, em),) = backend_cuda.lower_kernel(k, "sm_90", "highest")
        bufs = [np.zeros(v.type.shape, v.type.dtype) for v in gk.program.outputs]
        simulate(wrap_module(gk.name, em.text, "sm_90"), gk.name, em.grid, em.block, [x] + bufs)
        outs.update({id(v): buf for v, buf in zip(gk.program.outputs, bufs, strict=True)})
    got_sorted, got_order = (outs[id(v)] for v in fused.program.outputs)
    np.testing.assert_array_equal(got_order, np.argsort(x, axis=axis, kind="stable"))
    np.testing.assert_array_equal(got_sorted, np.sort(x, axis=axis))


# bf16 add/mul are left out: they round at every step, so their result depends on the order in
# which repeated rows combine (atomics give no order), and an exact comparison is meaningless.
_SCATTER_CASES = [(m, d) for m in ("set", "add", "mul", "min", "max")
                  for d in (f32, np.int32, bf16) if not (d == bf16 and m in ("add", "mul"))]


@pytest.mark.parametrize("mode,dtype", _SCATTER_CASES)
def test_simulated_scatter_modes(mode, dtype):
    """Every scatter mode against the reference: repeated rows (set: the last one wins; others
    combine through compare-and-swap or atomic add), out-of-range rows dropped."""
    from nova.ops.indexing import scatter

    rows = np.array([[3], [0], [3], [-1], [19], [20], [3], [0]], np.int32)

    def fn(op, upd):
        return scatter(op, jnp.asarray(rows), upd, axes=(0,), mode=mode)

    specs = [S((20, 8), dtype), S((8, 8), dtype)]
    (k,) = _fused(fn, specs).kernels
    assert k.kind == "scatter"
    got, want = _simulate_program(fn, specs, "highest")
    np.testing.assert_allclose(np.asarray(got[0], np.float64), np.asarray(want[0], np.float64),
                               rtol=1e-6, atol=1e-6)


def test_unsupported_scatter_dtypes_are_named():
    from nova.ops.indexing import scatter

    idx = np.zeros((4, 1), np.int32)
    fused = _fused(lambda op, u: scatter(op, jnp.asarray(idx), u, axes=(0,), mode="max"),
                   [S((8, 4), np.uint8), S((4, 4), np.uint8)])
    with pytest.raises(NotImplementedError, match="mode 'max'"):
        backend_cuda.compile_kernels(fused, "cuda:sm_90")


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_simulated_arg_reductions_ties_and_nans(op, axis):
    """First occurrence wins among ties and the first NaN wins, across lanes, warps and groups
    (as NumPy), for row (axis 1) and column (axis 0) kernels."""
    from nova.compiler.codegen.cuda.compile import wrap_module
    from nova.compiler.codegen.cuda.simulate import simulate

    rng = np.random.default_rng(1)
    x = np.floor(rng.standard_normal((48, 1024)) * 1.5).astype(f32)  # few distinct values
    x[3, 700], x[3, 900], x[40, 5] = np.nan, np.nan, np.nan
    fn = (lambda a: jnp.argmax(a, axis=axis)) if op == "argmax" else (lambda a: jnp.argmin(a, axis=axis))
    (k,) = _fused(fn, [S(x.shape, f32)]).kernels
    ((gk, em),) = backend_cuda.lower_kernel(k, "sm_90", "highest")
    out = np.zeros(k.outputs[0].type.shape, k.outputs[0].type.dtype)
    simulate(wrap_module(gk.name, em.text, "sm_90"), gk.name, em.grid, em.block, [x, out])
    np.testing.assert_array_equal(out, getattr(np, op)(x, axis=axis))


@pytest.mark.parametrize("name,fn,specs", [
    ("nn", lambda x, w: x @ w, [S((256, 96), f32), S((96, 192), f32)]),
    ("tn", lambda x, w: jnp.tensordot(x, w, axes=([0], [0])), [S((64, 256), f32), S((64, 128), f32)]),
    ("nt_bias", lambda x, w, b: jnp.tensordot(x, w, axes=([1], [1])) + b,
     [S((130, 48), f32), S((200, 48), f32), S((200,), f32)]),
    ("odd_k", lambda x, w: x @ w, [S((128, 37), f32), S((37, 128), f32)]),
])
def test_simulated_large_tiles(name, fn, specs):
    """The 128 x 128 tensor-core tile (8 warps), vector staging of every layout, K edges."""
    fused = _fused(fn, specs)
    (k,) = [k for k in fused.kernels if k.kind == "contraction"]
    (_, em), = backend_cuda.lower_kernel(k, "sm_90", "tf32", sm_count=1)
    assert (em.BM, em.BN, em.threads) == (128, 128, 256)
    if name == "odd_k":  # A's rows not 16-byte aligned: staged through registers, B by vectors
        assert em.stages == 0 and em.text.count("vector.load") == 2 * 2  # prologue + loop
    else:  # 16-byte cp.async chunks: S - 1 slices ahead + the loop's; sm_90's dynamic shared
        # memory holds 3 stages of 32-deep slices, two blocks per SM
        assert (em.stages, em.BK) == (3, 32) and 48 * 1024 < em.dynamic_shared_bytes <= 113 * 1024
        chunks = (em.BM + em.BN) * em.BK // (4 * em.threads)
        assert em.text.count("nvgpu.device_async_copy") == chunks * em.stages
    got, want = _simulate_program(fn, specs, "tf32", sm_count=1)
    for g, w in zip(got, want, strict=True):
        scale = float(np.max(np.abs(w)))
        assert float(np.max(np.abs(np.asarray(g, np.float64) - w))) <= 1e-3 * scale, name


def test_simulated_power_and_atan2():
    """math.powf (AdamW's bias corrections b ** count) and math.atan2 run in the simulator."""
    fn = lambda x, y: (jnp.exp(x) ** y, jnp.arctan2(x, y))  # noqa: E731
    got, want = _simulate_program(fn, [S((8, 64), f32), S((8, 64), f32)], "highest")
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)


def _two_outputs(z, w, x):
    o1 = w - jnp.max(z, -1, keepdims=True)
    return o1, x * o1 + z


@pytest.mark.parametrize("case", ["softmax", "softmax_resident", "layer_norm_resident",
                                  "layer_norm_fwd_bwd", "cross_entropy_fwd_bwd", "odd_softmax",
                                  "flip_in_row", "other_rows_max", "two_outputs_resident",
                                  "two_outputs_strided"])
def test_row_kernels_written_in_place_match_reference(case):
    """Row kernels store their full-shape outputs after every phase over the row, so an output
    may take the buffer of an input it reads (plan_memory.inplace_safe): run by the simulator
    with each such output and input sharing one buffer, the results stay the reference's. A
    row kernel reading its input at other positions of the row (a flip) or another row's value
    must not be written in place."""
    extra = {
        "odd_softmax": (lambda x: F.softmax(x, axis=-1), [S((3, 257), f32)]),
        # rows longer than the block's threads hold: a thread's later chunks of the last pass
        # read elements the block stored in earlier ones
        "flip_in_row": (lambda x: jnp.flip(x, 1) - jnp.max(x, 1, keepdims=True),
                        [S((2, 8192), f32)]),
        "other_rows_max": (lambda x: x - jnp.flip(jnp.max(x, 1, keepdims=True), 0),
                           [S((8, 96), f32)]),
        # o1 over z reads z only through its row maximum; o2 reads z itself after o1 is
        # stored, unless every output is computed before the first store (found by review)
        "two_outputs_resident": (_two_outputs, [S((8, 96), f32)] * 3),
        "two_outputs_strided": (_two_outputs, [S((2, 8192), f32)] * 3),
    }
    fn, specs = extra.get(case) or {c[0]: (c[1], c[2]) for c in CASES}[case]
    aliased = []
    got, want = _simulate_program(fn, specs, "highest", in_place=aliased)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                   rtol=1e-5, atol=1e-5)
    rows = [a for a in aliased if a[1]]
    if case in ("flip_in_row", "other_rows_max"):
        assert not rows  # (other_rows_max: its elementwise kernel x - flip(max) may be)
    else:
        assert rows, "no row kernel output was allowed over an input"


@pytest.mark.parametrize("arch,precision", [("sm_90", "highest"), ("sm_90", "tf32"),
                                             ("sm_90a", "tf32")])
def test_gemm_epilogue_written_in_place_matches_reference(arch, precision):
    """A GEMM's output may take the buffer of an epilogue input of its shape that dies there
    (plan_memory: the thread storing an element read its epilogue inputs just before): a
    running sum acc + A_i @ B_i of three terms (the chain fusion keeps), run by the simulator
    with acc and the output sharing one buffer, equals the reference, for the SIMT, mma.sync
    and wgmma kernels; an epilogue reading its input transposed is not written in place."""
    def chain(a1, b1, a2, b2, a3, b3):
        return (a1 @ b1 + a2 @ b2) + a3 @ b3

    def transposed(a, b, c):
        return a @ b + c.T

    specs = [S((40, 24), f32), S((24, 72), f32)] * 3
    aliased = []
    got, want = _simulate_program(chain, specs, precision, arch=arch, in_place=aliased)
    tol = 2e-2 if precision == "tf32" else 1e-5
    np.testing.assert_allclose(got[0], want[0], rtol=tol, atol=tol)
    gemms = [a for a in aliased if a[2] >= 2]  # inputs 0 and 1 are the dot's operands
    assert len(gemms) >= 1, aliased
    aliased = []
    got, want = _simulate_program(transposed, [S((48, 48), f32)] * 3, precision, arch=arch,
                                  in_place=aliased)
    np.testing.assert_allclose(got[0], want[0], rtol=tol, atol=tol)
    assert not [a for a in aliased if a[2] >= 2], aliased


def test_simulated_training_step_with_recomputed_activations(monkeypatch):
    """CUDA targets rematerialize (compiler/remat.py): a 2-block residual MLP's value_and_grad,
    every value recomputed that can be (the size floor lowered for this small model), run by
    the simulator, equals the reference; the recomputations are there."""
    from nova.compiler import remat

    monkeypatch.setattr(remat, "MIN_BYTES", 0)

    def loss(x, w1, b1, w2, g, b):
        for _ in range(2):
            h = F.gelu(F.layer_norm(x, g, b) @ w1 + b1, approximate=True)
            x = x + h @ w2
        return jnp.sum(x * x)

    specs = [S((32, 64), f32), S((64, 128), f32), S((128,), f32), S((128, 64), f32),
             S((64,), f32), S((64,), f32)]
    step = nova.value_and_grad(loss, argnums=(0, 1, 2, 3, 4, 5))
    prog = run_passes(nova.make_program(step)(*specs), options=target_options("cuda"))
    assert any(e.stage == "bwd" and e.prim.name == "tanh" for e in prog.eqns)
    got, want = _simulate_program(step, specs, "highest")
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                   rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(w).max())))


def _many_column_sums(g, *xs):
    """60 column sums that read a common input: sibling fusion merges them into one kernel (as
    it merges a LayerNorm's weight and bias gradients with the bias gradient of the projection
    before it)."""
    return [jnp.sum(g * x, axis=0) for x in xs]


def test_merged_column_reductions_share_their_shared_memory():
    specs = [S((40, 96), f32)] * 61
    (k,) = [k for k in _fused(_many_column_sums, specs).kernels if k.kind == "loop"]
    (_, em), = backend_cuda.lower_kernel(k, "sm_90", "highest")
    assert em.text.count("#gpu.address_space<workgroup>>") >= 60  # 60 reductions
    assert em.shared_bytes == 8 * 32 * 4  # one GROUPS x LANES float32 buffer, taken in turn
    got, want = _simulate_program(_many_column_sums, specs, "highest")
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,fn,specs,precision", [
    ("scalar_sum", lambda x: jnp.sum(x), [S((), f32)], "highest"),
    ("single_row_max", lambda x: x - jnp.max(x, axis=-1, keepdims=True), [S((1, 64), f32)],
     "highest"),
    ("odd_softmax", lambda x: F.softmax(x, axis=-1), [S((2, 257), f32)], "highest"),
    ("unit_axis_column", lambda x: jnp.sum(x, axis=0), [S((4, 1, 36), f32)], "highest"),
    ("matmul_1x1x1", lambda x, w: x @ w, [S((1, 1), f32), S((1, 1), f32)], "tf32"),
    ("matmul_tn_edges", lambda x, w: jnp.tensordot(x, w, axes=([0], [0])),
     [S((17, 65), f32), S((17, 63), f32)], "tf32"),
    ("vector_matrix", lambda x, w: x @ w, [S((100,), f32), S((100, 130), f32)], "highest"),
    ("matmul_f16", lambda x, w: x @ w, [S((65, 17), np.float16), S((17, 63), np.float16)],
     "highest"),
])
def test_simulated_edge_shapes(name, fn, specs, precision):
    """Scalars, unit axes, sizes one past a tile or a vector, f16 GEMMs (sweeps of ~200 such
    programs passed while the kernels were written; these keep the edges covered)."""
    got, want = _simulate_program(fn, specs, precision)
    tol = 2e-3 if precision == "tf32" or "f16" in name else 1e-5
    for g, w in zip(got, want, strict=True):
        g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
        assert g64.shape == w64.shape
        scale = max(float(np.max(np.abs(w64))), 1e-30)
        assert float(np.max(np.abs(g64 - w64))) <= tol * scale, name


_BAD_KERNEL = """    gpu.func @k(%a: memref<8xf32>, %o: memref<8xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
      %t = gpu.thread_id x
      %z = arith.constant 0 : index
      %c = arith.constant OFFSET : index
      %i = arith.addi INDEX, %c : index
      %v = vector.load %a[%i] {alignment = 16} : memref<8xf32>, vector<4xf32>
      %first = arith.cmpi eq, %t, %z : index
      scf.if %first {
        vector.store %v, %o[%z] : memref<8xf32>, vector<4xf32>
      }
      gpu.return
    }"""


def test_simulator_catches_bad_kernels():
    """The simulator's checks can fail: out-of-range and misaligned accesses are reported."""
    from nova.compiler.codegen.cuda.compile import wrap_module
    from nova.compiler.codegen.cuda.simulate import simulate

    def run(offset, index):
        text = _BAD_KERNEL.replace("OFFSET", str(offset)).replace("INDEX", index)
        a, o = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
        simulate(wrap_module("m", text, "sm_90"), "k", (1, 1, 1), (32, 1, 1), [a, o])
        return o

    np.testing.assert_array_equal(run(4, "%z")[:4], [4, 5, 6, 7])  # in range, aligned
    with pytest.raises(IndexError, match="out of range"):  # threads 5.. read past the end
        run(0, "%t")
    with pytest.raises(AssertionError, match="alignment 16"):  # byte 4 is not 16-aligned
        run(1, "%z")


def test_mma_operands_keep_vector_order():
    """The one link the simulator assumes: nvgpu.mma.sync passes vector<4x1> A, vector<2x1> B and
    vector<2x2> C elements (row-major) as PTX fragments a0..a3, b0..b1, c0..c3, and returns d0..d3
    in the same order. Checked on the PTX of a kernel that loads ten consecutive floats."""
    import re

    from nova.compiler.codegen.cuda.compile import compile_to_ptx, wrap_module

    loads = "\n".join(f"      %c{i} = arith.constant {i} : index\n"
                      f"      %x{i} = memref.load %a[%c{i}] : memref<16xf32>" for i in range(10))
    stores = "\n".join(f"      %e{i} = vector.extract %r[{i // 2}, {i % 2}] : f32 from vector<2x2xf32>\n"
                       f"      memref.store %e{i}, %o[%c{i}] : memref<16xf32>" for i in range(4))
    body = f"""    gpu.func @k(%a: memref<16xf32>, %o: memref<16xf32>) kernel {{
{loads}
      %fa = vector.from_elements %x0, %x1, %x2, %x3 : vector<4x1xf32>
      %fb = vector.from_elements %x4, %x5 : vector<2x1xf32>
      %fc = vector.from_elements %x6, %x7, %x8, %x9 : vector<2x2xf32>
      %r = nvgpu.mma.sync (%fa, %fb, %fc) {{mmaShape = [16, 8, 8], tf32Enabled}} : (vector<4x1xf32>, vector<2x1xf32>, vector<2x2xf32>) -> vector<2x2xf32>
{stores}
      gpu.return
    }}"""
    ptx = compile_to_ptx({"m": wrap_module("m", body, "sm_90")})["m"]
    reg_at = {int(off or 0) // 4: r for r, off in
              re.findall(r"ld\.global\.\w+\s+(%r\d+), \[%rd\d+\+?(\d*)\]", ptx)}
    d, a, b, c = re.search(r"mma\.sync\S*\s+\{([^}]*)\},\s*\{([^}]*)\},\s*\{([^}]*)\},\s*"
                           r"\{([^}]*)\}", ptx).groups()
    regs = lambda text: [x.strip() for x in text.split(",")]  # noqa: E731
    assert regs(a) == [reg_at[i] for i in range(4)]
    assert regs(b) == [reg_at[i] for i in (4, 5)]
    assert regs(c) == [reg_at[i] for i in range(6, 10)]
    stored = {int(off or 0) // 4: r for off, r in
              re.findall(r"st\.global\.\w+\s+\[%rd\d+\+?(\d*)\], (%r\d+)", ptx)}
    assert regs(d) == [stored[i] for i in range(4)]


@pytest.mark.parametrize("el,res", [("f32", "vector<4x1xf32>"), ("i16", "vector<4x2xi16>")])
def test_ldmatrix_results_keep_matrix_order(el, res):
    """The link the simulator assumes for nvgpu.ldmatrix: row i of the result vector is the
    i-th destination register of ldmatrix.x4 (matrix i, from lanes 8i .. 8i + 7)."""
    import re

    from nova.compiler.codegen.cuda.compile import compile_to_ptx, wrap_module

    rows = int(res.split("x")[0].split("<")[1])
    inner = res.split("x")[1]
    stores = "\n".join(
        f"      %c{i + 1} = arith.constant {i} : index\n"
        f"      %p{i} = vector.extract %v[{i}] : vector<{inner}x{el}> from {res}\n"
        f"      %w{i} = vector.bitcast %p{i} : vector<{inner}x{el}> to vector<1xi32>\n"
        f"      %x{i} = vector.extract %w{i}[0] : i32 from vector<1xi32>\n"
        f"      memref.store %x{i}, %o[%c{i + 1}] : memref<16xi32>" for i in range(rows))
    mt = f"memref<32x{16 // (4 if el == 'f32' else 2)}x{el}, #gpu.address_space<workgroup>>"
    body = f"""    gpu.func @k(%o: memref<16xi32>) workgroup(%s : {mt} {{llvm.align = 16 : i64}}) kernel {{
      %c0 = arith.constant 0 : index
      %t = gpu.thread_id x
      %v = nvgpu.ldmatrix %s[%t, %c0] {{numTiles = 4 : i32, transpose = false}} : {mt} -> {res}
{stores}
      gpu.return
    }}"""
    ptx = compile_to_ptx({"m": wrap_module("m", body, "sm_90")})["m"]
    dst = re.search(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16\s+\{([^}]*)\}", ptx).group(1)
    stored = {int(off or 0) // 4: r for off, r in
              re.findall(r"st\.global\.\w+\s+\[%rd\d+\+?(\d*)\], (%r\d+)", ptx)}
    assert [x.strip() for x in dst.split(",")] == [stored[i] for i in range(4)]


@pytest.mark.parametrize("dtype,precision,schedule,instruction", [
    (f32, "highest", "simt", None),
    (f32, "tf32", "tf32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
    (bf16, "highest", "bf16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
    (bf16, "tf32", "bf16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
    (np.float16, "highest", "f16", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
    (np.float64, "tf32", "simt", None),
])
def test_contraction_schedule_per_dtype(dtype, precision, schedule, instruction):
    """TF32 tensor cores only for float32 at precision "tf32"; 16-bit operands always use the
    m16n8k16 tensor-core instruction of their type (exact products, float32 accumulators)."""
    fused = _fused(lambda x, w: x @ w, [S((64, 64), dtype), S((64, 64), dtype)])
    (parts,) = backend_cuda.compile_kernels(fused, "cuda:sm_90", precision).values()
    ptx = parts[0][1]["ptx"]
    (k,) = fused.kernels
    assert k.schedule["gpu_schedule"] == schedule
    if instruction is None:
        assert "mma.sync" not in ptx
    else:
        assert instruction in ptx


def _tensor_core_gemm_cases():
    mm = lambda x, w: x @ w  # noqa: E731
    cases = []
    for dt in (bf16, np.float16, f32):
        tag = {bf16: "bf16", np.float16: "f16", f32: "tf32"}[dt]
        cases += [
            (f"{tag}_nn_vector", mm, [S((128, 64), dt), S((64, 256), dt)]),
            (f"{tag}_nn_edges", mm, [S((70, 33), dt), S((33, 130), dt)]),
            (f"{tag}_nt", lambda x, w: x @ w.T, [S((96, 72), dt), S((40, 72), dt)]),
            (f"{tag}_tn", lambda x, w: jnp.tensordot(x, w, axes=([0], [0])),
             [S((48, 64), dt), S((48, 24), dt)]),
            (f"{tag}_tt_odd", lambda x, w: jnp.tensordot(x, w, axes=([0], [1])),
             [S((19, 40), dt), S((24, 19), dt)]),
            (f"{tag}_batched_bias_gelu",
             lambda x, w, b: F.gelu((x @ w + b).astype(f32), approximate=True),
             [S((3, 40, 48), dt), S((3, 48, 72), dt), S((72,), dt)]),
        ]
    return cases


@pytest.mark.parametrize("name,fn,specs", _tensor_core_gemm_cases(),
                         ids=[c[0] for c in _tensor_core_gemm_cases()])
def test_simulated_tensor_core_gemms(name, fn, specs):
    """Tensor-core GEMMs (m16n8k16 f16/bf16, m16n8k8 TF32) run by the simulator in all four
    operand layouts: tiles in the operands' memory order, copied by cp.async into a ring of
    buffers where both operands take 16-byte chunks, else staged through registers (a dimension
    not a multiple of the vector width), with tile edges, K slices with a remainder, batches and
    a fused epilogue, against the reference interpreter."""
    got, want = _simulate_program(fn, specs, "tf32", seed=3)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
        if name.startswith("tf32"):  # 10 mantissa bits per operand, float32 output
            assert np.max(np.abs(g64 - w64)) <= 2e-3 * np.abs(w64).max(), name
            continue
        # A few units in the last place of the 16-bit type: the accumulation order differs, so
        # a rounding to 16 bits can land one unit off, and the epilogue rounds a second time
        # (bias added in float16) before GELU. A misplaced fragment is off by O(1).
        ulp = 2.0 ** -7 if "bf16" in name else 2.0 ** -10
        tol = 4 * ulp * np.abs(w64) + 1e-6 * np.abs(w64).max()
        assert np.all(np.abs(g64 - w64) <= tol), name


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype,precision", [(f32, "tf32"), (bf16, "highest")])
def test_large_tensor_core_gemms_do_not_spill(arch, dtype, precision):
    """The 128 x 128 tensor-core GEMMs with their cp.async rings in dynamic shared memory, in
    all four layouts (a batch of 4 x 1000^3 and 2048^3): no register spills (an earlier version
    spilled 4 bytes with its in-place TF32 rounding), shared memory within the opt-in limit."""
    props = gpu.describe(arch)
    for layout in ("nn", "nt", "tn", "tt"):
        for shape in ((4, 1000, 1000), (2048, 2048)):
            def fn(a, b, layout=layout):
                a = jnp.swapaxes(a, -1, -2) if layout[0] == "t" else a
                return a @ (jnp.swapaxes(b, -1, -2) if layout[1] == "t" else b)
            fused = _fused(fn, [S(shape, dtype)] * 2)
            (k,) = fused.kernels
            (((_, rec),),) = backend_cuda.compile_kernels(fused, f"cuda:{arch}", precision).values()
            info = ptxas_info(rec["ptx"], arch)
            assert info["spill_bytes"] == 0 and info["stack_bytes"] == 0, (layout, shape, info)
            assert rec["shared_bytes"] + rec["dynamic_shared_bytes"] <= \
                props.max_shared_memory_per_block_optin
            assert k.schedule["tile"][:2] == (128, 128), k.schedule


@pytest.mark.parametrize("dtype,precision", [(f32, "tf32"), (bf16, "highest")])
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_tensor_core_gemms_pipeline_cp_async(layout, dtype, precision):
    """Every operand layout with vector-friendly sizes fills a ring of shared buffers with
    cp.async (within the 48 KiB of static shared memory); sizes that are no multiple of the
    vector width fall back to staging through registers."""
    def lower(k, m=256, n=512):
        x = S((k, m) if layout[0] == "t" else (m, k), dtype)
        w = S((n, k) if layout[1] == "t" else (k, n), dtype)
        def fn(a, b):
            return jnp.matmul(a.T if layout[0] == "t" else a, b.T if layout[1] == "t" else b)
        (k_,) = _fused(fn, [x, w]).kernels
        ((_, em),) = backend_cuda.lower_kernel(k_, "sm_90", precision)
        return em
    em = lower(256)
    assert 2 <= em.stages <= 4 and em.shared_bytes <= 48 * 1024, (em.stages, em.shared_bytes)
    assert em.text.count("nvgpu.device_async_copy") >= 4 and "numGroups" in em.text
    staged = lower(253, 255, 511)
    assert staged.stages == 0 and "device_async_copy" not in staged.text


def test_cross_compile_through_jit_then_cache_hit_without_mlir(monkeypatch):
    def f(x, w):
        return F.softmax(x @ w)

    args = [S((64, 32), f32), S((32, 48), f32)]
    before = dict(backend_cuda.stats)
    compiled = nova.jit(f).lower(*args, target="cuda:sm_90").compile()
    assert backend_cuda.stats["misses"] == before["misses"] + 2
    assert "contraction" in compiled.as_text() and "loop" in compiled.as_text()
    # A fresh process: nothing in memory, PTX from disk, MLIR never called.
    backend_cuda._mem.clear()
    import nova.compiler.backend_cuda as bc

    def no_mlir(*a, **k):
        raise AssertionError("cache hit compiled with MLIR")

    monkeypatch.setattr(bc, "compile_to_ptx", no_mlir)
    hits = backend_cuda.stats["disk_hits"]
    nova.jit(f).lower(*args, target="cuda:sm_90").compile()
    assert backend_cuda.stats["disk_hits"] == hits + 2
    # The target is part of the key: sm_80 is a miss.
    with pytest.raises(AssertionError, match="cache hit compiled with MLIR"):
        nova.jit(f).lower(*args, target="cuda:sm_80").compile()


def test_corrupt_cache_entry_is_rebuilt():
    fused = _fused(lambda x: x * 2.0 + 1.0, [S((4, 8), f32)])
    (parts,) = backend_cuda.compile_kernels(fused, "cuda:sm_90").values()
    rec = parts[0][1]
    import glob
    import json
    import os

    paths = [p for p in glob.glob(os.path.join(os.environ["NOVA_CACHE_DIR"], "cuda", "*", "*.json"))
             if json.load(open(p))["entry"] == rec["entry"]]
    assert len(paths) == 1
    data = json.load(open(paths[0]))
    data["ptx"] = data["ptx"].replace("ld.global", "ld.globl")
    json.dump(data, open(paths[0], "w"))
    backend_cuda._mem.clear()
    with pytest.warns(UserWarning, match="corrupt CUDA kernel cache entry"):
        (again,) = backend_cuda.compile_kernels(fused, "cuda:sm_90").values()
    assert again[0][1]["ptx"] == rec["ptx"]


def test_unsupported_kernel_kind_is_named():
    import dataclasses

    fused = _fused(lambda x: jnp.exp(x), [S((16, 8), f32)])
    (k,) = fused.kernels
    with pytest.raises(NotImplementedError, match="kernel kind 'mystery'"):
        backend_cuda.lower_kernel(dataclasses.replace(k, kind="mystery"), "sm_90", "highest")


@pytest.mark.parametrize("target", ["cuda", "cuda:sm_75", "gpu:sm_90", None])
def test_bad_target(target):
    with pytest.raises(ValueError, match="cuda:sm_90|unsupported CUDA architecture"):
        parse_target(target)


def test_device_descriptions():
    from nova.compiler.codegen.cuda.compile import _PTX_FEATURES

    for arch in _PTX_FEATURES:  # every architecture codegen accepts has limits to check against
        assert gpu.describe(arch).max_threads_per_block == 1024
    h = gpu.describe("sm_90")
    assert h.compute_capability == (9, 0) and h.arch == "sm_90"
    assert h.max_shared_memory_per_block_optin > h.max_shared_memory_per_block
    with pytest.raises(ValueError, match="unknown CUDA architecture 'sm_1'"):
        gpu.describe("sm_1")


@pytest.mark.skipif(gpu.is_available(), reason="a GPU is present")
def test_no_gpu_errors_are_clear():
    assert gpu.device_count() == 0
    for call in (gpu.memory_stats, gpu.get_device_properties, lambda: gpu.Module(".version 8.0"),
                 lambda: gpu.DeviceBuffer(16), gpu.synchronize):
        with pytest.raises(gpu.GPUUnavailableError, match="NVIDIA GPU"):
            call()
    assert issubclass(gpu.GPUUnavailableError, RuntimeError)
    c = nova.jit(lambda x: x + 1.0).lower(S((8,), f32), target="cuda:sm_90").compile()
    with pytest.raises(RuntimeError, match="compiled for cuda:sm_90 and needs an NVIDIA GPU"):
        c(np.zeros(8, f32))


def test_cuda_errors_are_named():
    from nova.gpu.driver import CudaError, error_class

    assert error_class("CUDA_ERROR_ILLEGAL_ADDRESS") is gpu.CudaLaunchError
    assert error_class("CUDA_ERROR_INVALID_PTX") is gpu.CudaInvalidPTXError
    assert error_class("CUDA_ERROR_STREAM_CAPTURE_INVALIDATED") is gpu.CudaGraphError
    assert error_class("CUDA_ERROR_SOMETHING_NEW") is CudaError
    e = gpu.CudaLaunchError("cuLaunchKernel", "CUDA_ERROR_ILLEGAL_ADDRESS", 700, "bad access")
    assert "cuLaunchKernel failed: CUDA_ERROR_ILLEGAL_ADDRESS (700): bad access" == str(e)
    assert issubclass(nova.OutOfMemoryError, MemoryError) and gpu.OutOfMemoryError is nova.OutOfMemoryError


# --- on a GPU -------------------------------------------------------------------------------------


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("name", ["gelu_bias", "softmax", "layer_norm_fwd_bwd", "argmax",
                                  "matmul_bias_tanh", "batched_matmul"])
def test_gpu_matches_reference(name):
    from nova.core.interpreter import run_program

    fn, specs = {c[0]: (c[1], c[2]) for c in CASES}[name]
    arch = gpu.get_device_properties().arch
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s.shape).astype(s.dtype) for s in specs]
    compiled = nova.jit(fn).lower(*specs, target=f"cuda:{arch}").compile()
    got = nova.tree_util.tree_leaves(compiled(*args))
    want = run_program(run_passes(nova.make_program(fn)(*specs)), args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@needs_gpu
def test_gpu_allocator_and_graph_replay():
    before = gpu.memory_stats()
    buf = gpu.DeviceBuffer(1000)
    x = np.arange(250, dtype=np.float32)
    gpu.copy_host_to_device(buf.ptr, x, gpu.default_stream())
    y = gpu.copy_device_to_host(np.empty_like(x), buf.ptr, gpu.default_stream())
    np.testing.assert_array_equal(x, y)
    buf.free()
    again = gpu.DeviceBuffer(1000)  # served from the cache
    assert gpu.memory_stats()["num_cache_hits"] > before["num_cache_hits"]
    again.free()
    with pytest.raises(nova.OutOfMemoryError, match="requested"):
        gpu.DeviceBuffer(1 << 50)
    c = nova.jit(lambda a: a * 2.0).lower(S((1024,), f32),
                                          target=f"cuda:{gpu.get_device_properties().arch}").compile()
    for i in range(4):  # calls 3 and 4 replay a captured graph
        np.testing.assert_array_equal(np.asarray(c(np.full(1024, i, f32))), np.full(1024, 2 * i))


def test_memory_plan_without_ptx_is_the_executables():
    """backend_cuda.plan_program_memory (no PTX, no MLIR: bench/memory_plan.py) plans the arena
    that compile_program's executable holds, for an MLP training step with donated weights;
    what it lists as live at the peak fits in the arena."""
    def step(w1, w2, x, y):
        def loss(w1, w2):
            return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)

        g1, g2 = nova.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - 0.1 * g1, w2 - 0.1 * g2

    specs = [S((32, 64), f32), S((64, 16), f32), S((128, 32), f32), S((128, 16), f32)]
    jitted = nova.jit(step, donate_argnums=(0, 1))
    lowered = jitted.lower(*specs, target="cuda:sm_90")
    exe = lowered.compile()._exe
    plan = backend_cuda.plan_program_memory(lowered.program, target="cuda:sm_90",
                                            donated=(0, 1))
    assert plan["arena_bytes"] == exe.plan.arena_bytes > 0
    assert plan["peak_bytes"] == exe.plan.peak_bytes
    assert plan["launches"] == len(exe.launches)
    assert plan["in_place"] == len(exe.plan.aliases)
    assert 0 < sum(b for b, _, _ in plan["live_at_peak"]) <= plan["arena_bytes"]


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint16])
def test_narrow_integer_kernels_simulate_and_assemble(dtype):
    """int8 / int16 / uint16 elementwise (wrapping arithmetic, shifts, division), a cast to
    float, a row sum (accumulated in int32, uint32 for uint16) and a row max, run by the SIMT simulator against
    the NumPy reference (CASES' narrow_ints checks their PTX)."""
    fn = _narrow_ints

    specs = [S((8, 70), dtype), S((8, 70), dtype)]
    got, want = _simulate_program(fn, specs, "highest")
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    acc = np.uint32 if np.dtype(dtype).kind == "u" else np.int32  # as jnp.sum
    assert np.asarray(want[0]).dtype == dtype and np.asarray(want[2]).dtype == acc
