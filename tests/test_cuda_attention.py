"""Flash-attention GPU kernels (nova/compiler/codegen/cuda/attention.py) without a GPU: every mask
kind, forward and backward, tails and head dims run in the SIMT simulator against the NumPy
reference; the PTX assembles for sm_80 and sm_90 within the launch limits; CUDA compiles of
recognized attention hold the fused kernels, and attentions without a kernel stay unfused.
"""

import numpy as np
import pytest

import nova
import nova.numpy as jnp
from nova import gpu
from nova.compiler import backend_cuda
from nova.compiler.codegen.cuda.attention import supports
from nova.compiler.codegen.cuda.compile import ptxas_available, ptxas_info, wrap_module
from nova.compiler.fuse import fuse
from nova.compiler.pipeline import run_passes, target_options
from nova.core.interpreter import run_program
from nova.nn import functional as F
from nova.ops.attention import flash_attention, flash_attention_bwd_p

S = nova.ShapeDtypeStruct
f32, f64 = np.float32, np.float64
needs_ptxas = pytest.mark.skipif(not ptxas_available(), reason="ptxas is not on PATH")
CUDA_PASSES = target_options("cuda")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "nova-cuda-cache"))


def _mask(kind, tq, tk, dtype, rng):
    """A (tq, tk) mask operand with one fully masked row (and, for "add", a partly -inf row)."""
    if kind == "select":
        m = rng.random((tq, tk)) > 0.4
        m[3] = False
        return m
    if kind == "add":
        m = rng.standard_normal((tq, tk)).astype(dtype)
        m[2] = -np.inf
        m[5, :3] = -np.inf
        return m
    return None


def _fwd_bwd(kind, shape_q, dv, dtype, fill, seed, tk=None):
    """(function, specs): o, lse of flash_attention_fwd, then dq, dk, dv of flash_attention_bwd for
    a random cotangent dO (delta = rowsum(dO o)); tk keys (default: as many as queries)."""
    tq = shape_q[-2]
    tk = tk or tq
    mask = _mask(kind, tq, tk, dtype, np.random.default_rng(seed))

    def f(q, k, v, do):
        m = () if mask is None else (jnp.asarray(mask),)
        o, lse = flash_attention(q, k, v, *m, scale=0.3, mask_kind=kind, fill=fill)
        delta = jnp.sum(do * o, axis=-1)
        grads = flash_attention_bwd_p.bind(q, k, v, lse, do, delta, *m, scale=0.3,
                                           mask_kind=kind, fill=fill)
        return (o, lse, *grads)

    k_shape = shape_q[:-2] + (tk, shape_q[-1])
    v_shape, o_shape = k_shape[:-1] + (dv,), shape_q[:-1] + (dv,)
    return f, [S(shape_q, dtype), S(k_shape, dtype), S(v_shape, dtype), S(o_shape, dtype)]


def _simulate(prog, args, precision="highest"):
    """The outputs of `prog` (after the passes) with every GPU kernel run in the SIMT simulator
    (an output buffer starts as NaN: a kernel must write every element it owns), and the kinds
    of the GPU kernels (schedules of the attention ones in `_simulate.schedules`)."""
    from nova.compiler.backend_cpu import _empty, _host_fn
    from nova.compiler.codegen.cuda.simulate import simulate

    env = {id(v): a for v, a in zip(prog.inputs, args, strict=True)}
    kinds = []
    _simulate.schedules = []
    for k in fuse(prog).kernels:
        if k.kind.startswith("host:") or _empty(k) or not k.program.eqns:
            env.update({id(v): np.asarray(a) for v, a in zip(k.outputs, _host_fn(k)([]),
                                                              strict=True)})
            continue
        for gk, em in backend_cuda.lower_kernel(k, "sm_90", precision):
            ins = [np.ascontiguousarray(env[id(v)]) for v in gk.program.inputs]
            outs = [env[id(v)] if id(v) in env else np.full(v.type.shape, np.nan, v.type.dtype)
                    for v in gk.program.outputs]
            simulate(wrap_module(gk.name, em.text, "sm_90"), gk.name, em.grid, em.block,
                     ins + outs, dynamic_shared_bytes=getattr(em, "dynamic_shared_bytes", 0))
            env.update({id(v): a for v, a in zip(gk.program.outputs, outs, strict=True)})
            kinds.append(gk.kind)
            if gk.kind == "attention":
                _simulate.schedules.append(gk.schedule["gpu_schedule"])
    return [env[id(v)] for v in prog.outputs], kinds


def _check(got, want, tol):
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
        finite = np.isfinite(w64)
        assert np.array_equal(np.isfinite(g64), finite)  # lse = -inf on fully masked rows
        assert np.array_equal(g64[~finite], w64[~finite])
        scale = max(float(np.max(np.abs(w64[finite]), initial=0.0)), 1e-30)
        assert float(np.max(np.abs(g64[finite] - w64[finite]), initial=0.0)) <= tol * scale


# (mask kind, q shape (..., T, D), Dv): T not a multiple of any tile (tails), D in {16, 64},
# several query and key tiles (T = 70), batch dims, a head dim that is no vector width (D = 6),
# Dv != D, head dims that need smaller tiles.
SIM_CASES = [(kind, shape, dv) for kind in ("none", "causal", "select", "add")
             for shape, dv in (((2, 37, 16), 16), ((1, 70, 64), 64))] + [
    ("select", (2, 1, 21, 6), 10),
    ("causal", (3, 33, 16), 24),
    ("add", (1, 19, 320), 320),  # the smallest tiles: 16 x 8 forward, 8 x 8 backward
]


@pytest.mark.parametrize("kind,shape,dv", SIM_CASES)
def test_simulated_flash_attention_matches_reference(kind, shape, dv):
    """o, lse, dq, dk, dv of the simulated kernels against the NumPy reference (float64 inside):
    online softmax across key tiles, causal tile skipping, masks, fully masked rows (o = 0,
    lse = -inf, zero gradients), tails, dq's atomics and its zero fill."""
    fill = -np.inf if kind == "select" else 0.0
    fn, specs = _fwd_bwd(kind, shape, dv, f32, fill, seed=1)
    prog = run_passes(nova.make_program(fn)(*specs))
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s.shape).astype(s.dtype) for s in specs]
    got, kinds = _simulate(prog, args)
    assert kinds.count("attention") == 2
    _check(got, run_program(prog, args), 2e-6)


MMA, SIMT = "flash_mma_tf32", "flash_simt"
# (mask kind, q shape, Dv, forward and backward schedules at precision "tf32"): the forward with a
# ring of two key tiles (D = 64, 16) or one buffer (D = 40: 32-key tiles do not split into whole
# chunks per thread, and two 64-key buffers do not fit); the backward where D and Dv are
# multiples of 16 whose tiles fit (not D = 128, Dv = 24 or D = 40); Dv != D, a fully masked row,
# several query and key tiles, tails and batch dims; D = 6 keeps both SIMT.
MMA_CASES = [("causal", (1, 70, 64), 64, MMA, MMA),
             ("none", (2, 37, 16), 16, MMA, MMA),
             ("select", (2, 1, 45, 16), 16, MMA, MMA),
             ("add", (1, 70, 32), 32, MMA, MMA),
             ("add", (1, 70, 40), 40, MMA, SIMT),
             ("causal", (3, 33, 16), 24, MMA, SIMT),
             ("causal", (1, 130, 128), 128, MMA, SIMT),
             ("select", (2, 1, 21, 6), 10, SIMT, SIMT)]


@pytest.mark.parametrize("kind,shape,dv,fwd,bwd", MMA_CASES)
def test_simulated_tensor_core_attention(kind, shape, dv, fwd, bwd):
    """The TF32 tensor-core kernels (attention_mma.py), simulated. Forward: m16n8k8 fragments of
    Q, K, P and V, the cp.async ring, online softmax across the 4 lanes of a row. Backward: S^T
    and dP^T per warp of keys, P^T and dS^T through the shared buffer into dV, dK and dQ's
    atomics. Masks, tails and fully masked rows throughout. TF32 keeps 10 mantissa bits of each
    operand (~1e-3 of the largest value after two chained products); a misplaced fragment is off
    by O(1)."""
    fill = -np.inf if kind == "select" else 0.0
    fn, specs = _fwd_bwd(kind, shape, dv, f32, fill, seed=7)
    prog = run_passes(nova.make_program(fn)(*specs))
    rng = np.random.default_rng(8)
    args = [rng.standard_normal(s.shape).astype(s.dtype) for s in specs]
    got, kinds = _simulate(prog, args, "tf32")
    assert kinds.count("attention") == 2
    assert _simulate.schedules == [fwd, bwd]
    # (the SIMT kernels at "tf32" take their logits from TF32 Q and K as well)
    _check(got, run_program(prog, args), 4e-3)


@pytest.mark.parametrize("d,bwd", [(40, SIMT), (48, MMA)])
def test_tf32_forward_and_backward_agree_on_large_logits(d, bwd):
    """Peaked softmax (logits spread ~30): a tensor-core forward's lse and the backward's
    recomputed P come from the same TF32 logits, whichever kernel runs the backward (with
    float32 logits in a SIMT backward, P rows summed to 0.86-1.17 and dv was off by 8e-2)."""
    fn, specs = _fwd_bwd("causal", (2, 70, d), d, f32, 0.0, seed=9)
    prog = run_passes(nova.make_program(fn)(*specs))
    rng = np.random.default_rng(10)
    args = [rng.standard_normal(s.shape).astype(s.dtype) for s in specs]
    args[0] = args[0] * np.float32(30.0)
    got, _ = _simulate(prog, args, "tf32")
    assert _simulate.schedules == [MMA, bwd]
    want = run_program(prog, args)
    for g, w in zip(got[2:], want[2:], strict=True):  # dq, dk, dv
        scale = float(np.max(np.abs(w)))
        assert float(np.max(np.abs(np.asarray(g, np.float64) - w))) <= 1e-2 * scale


@pytest.mark.parametrize("kind", ["none", "select", "add"])
def test_simulated_cross_attention_lengths(kind):
    """Tq != Tk (13 queries, 37 keys: one query tile, two key tiles with a tail)."""
    fn, specs = _fwd_bwd(kind, (2, 13, 16), 8, f32, -1.0, seed=5, tk=37)
    prog = run_passes(nova.make_program(fn)(*specs))
    rng = np.random.default_rng(6)
    args = [rng.standard_normal(s.shape).astype(s.dtype) for s in specs]
    got, _ = _simulate(prog, args)
    _check(got, run_program(prog, args), 2e-6)


def test_simulated_select_with_finite_fill_and_float64():
    """A finite fill takes part in the softmax (and gets no gradient); float64 runs in float64."""
    for dtype, fill, tol in ((f32, -2.0, 2e-6), (f64, -2.0, 1e-13)):
        fn, specs = _fwd_bwd("select", (2, 19, 16), 16, dtype, fill, seed=2)
        prog = run_passes(nova.make_program(fn)(*specs))
        rng = np.random.default_rng(3)
        args = [rng.standard_normal(s.shape).astype(s.dtype) for s in specs]
        got, _ = _simulate(prog, args)
        _check(got, run_program(prog, args), tol)


def _causal_loss(q, k, v):
    return jnp.sum(F.scaled_dot_product_attention(q, k, v, causal=True) ** 2)


def test_simulated_recognized_attention_value_and_grad():
    """User code (nova.nn's attention under value_and_grad) after the CUDA pass list: the fused
    kernels, simulated, give the reference's loss and gradients."""
    fn = nova.value_and_grad(_causal_loss, argnums=(0, 1, 2))
    specs = [S((2, 2, 45, 16), f32)] * 3
    traced = nova.make_program(fn)(*specs)
    prog = run_passes(traced, options=CUDA_PASSES)
    names = [e.prim.name for e in prog.eqns]
    assert "flash_attention_fwd" in names and "flash_attention_bwd" in names
    rng = np.random.default_rng(4)
    args = [rng.standard_normal(s.shape).astype(f32) for s in specs]
    got, kinds = _simulate(prog, args)
    assert kinds.count("attention") == 2
    _check(got, run_program(traced, args), 1e-5)


def test_cuda_compile_of_causal_attention_has_fused_kernels():
    """nova.jit(...).lower(target="cuda:sm_90"): the forward, dq's fill and the backward are
    the only kernels touching the T x T problem (no T x T value is materialized)."""
    fn = nova.value_and_grad(_causal_loss, argnums=(0, 1, 2))
    specs = [S((2, 4, 64, 32), f32)] * 3
    lowered = nova.jit(fn).lower(*specs, target="cuda:sm_90")
    prims = [e.prim.name for e in lowered.program.eqns]
    assert prims.count("flash_attention_fwd") == 1 and prims.count("flash_attention_bwd") == 1
    assert "dot_general" not in prims and "exp" not in prims
    fused = fuse(lowered.program)
    assert fused.count("attention") == 2
    assert all(v.type.shape[-2:] != (64, 64) for k in fused.kernels for v in k.outputs)
    exe = lowered.compile()._exe
    kinds = [l.info["kind"] for l in exe.launches if l.ptx is not None]
    assert kinds.count("attention") == 2
    fwd, bwd = [l for l in exe.launches if l.ptx is not None and l.info["kind"] == "attention"]
    assert fwd.config.grid == (8 * 2, 1, 1) and fwd.config.block == (256, 1, 1)  # 32-row tiles
    assert bwd.config.grid == (8 * 2, 1, 1)  # 32-key tiles
    # The CPU target fuses the same attention (the predicate only restricts CUDA).
    cpu = nova.jit(fn).lower(*specs)
    assert [e.prim.name for e in cpu.program.eqns].count("flash_attention_bwd") == 1


def test_attention_without_a_gpu_kernel_stays_unfused_on_cuda():
    """Head dims whose tiles overflow shared memory: the CUDA pass list keeps matmuls + softmax,
    and the emitter names the reason when called on such a kernel anyway."""
    assert supports(np.dtype(f32), 64, 64) and supports(np.dtype(f64), 128, 128)
    assert not supports(np.dtype(f32), 1024, 1024)
    specs = [S((1, 16, 1024), f32)] * 3
    traced = nova.make_program(lambda q, k, v: F.scaled_dot_product_attention(q, k, v))(*specs)
    assert "flash_attention_fwd" not in [e.prim.name for e in
                                         run_passes(traced, options=CUDA_PASSES).eqns]
    fused = fuse(run_passes(traced))  # the CPU pass list fuses it
    (k,) = [k for k in fused.kernels if k.kind == "attention"]
    with pytest.raises(NotImplementedError, match="head dims D=1024, Dv=1024"):
        backend_cuda.lower_kernel(k, "sm_90", "highest")


# Kernels for ptxas: (mask kind, q shape, Dv, dtype); D = 128 (smaller tiles), float64, D = 6.
PTX_CASES = [("causal", (2, 100, 64), 64, f32), ("select", (2, 100, 16), 16, f32),
             ("add", (1, 100, 128), 128, f32), ("none", (2, 100, 40), 40, f32),
             ("causal", (2, 100, 64), 64, f64), ("none", (2, 50, 6), 6, f32)]


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_attention_ptx_assembles_within_limits(arch):
    props = gpu.describe(arch)
    for kind, shape, dv, dtype in PTX_CASES:
        fn, specs = _fwd_bwd(kind, shape, dv, dtype, -np.inf, seed=0)
        fused = fuse(run_passes(nova.make_program(fn)(*specs)))
        recs = backend_cuda.compile_kernels(fused, f"cuda:{arch}", "highest")
        attn = [rec for k in fused.kernels if k.kind == "attention" for _, rec in recs[id(k)]]
        assert len(attn) == 3  # forward, dq's zero fill, backward
        if dtype == f32:  # the TF32 tensor-core kernels where they apply
            tf = backend_cuda.compile_kernels(fused, f"cuda:{arch}", "tf32")
            mma = [rec for k in fused.kernels if k.kind == "attention" for _, rec in tf[id(k)]
                   if "mma.sync" in rec["ptx"]]
            # forward: head dims that are multiples of 8; backward: of 16, up to 64 here
            want = (shape[-1] % 8 == 0) + (shape[-1] % 16 == 0 and shape[-1] <= 64)
            assert len(mma) == want, (kind, shape)
            attn += mma
        assert any("atom.global.add" in r["ptx"] or "red.global.add" in r["ptx"] for r in attn)
        for rec in attn:
            info = ptxas_info(rec["ptx"], arch)
            threads = int(np.prod(rec["block"]))
            assert threads % 32 == 0 and threads <= props.max_threads_per_block
            assert info["shared_bytes"] == rec["shared_bytes"], (kind, shape, info)
            assert info["shared_bytes"] <= props.max_shared_memory_per_block
            assert info["registers"] * threads <= props.max_registers_per_block
            # ptxas picks a register budget for occupancy and may spill a few words (seen: up
            # to 16 bytes); more would mean the tiles' register use got out of hand.
            assert info["spill_bytes"] <= 64, (kind, shape, info)
            if rec["shared_bytes"]:
                assert ".shared .align 16" in rec["ptx"]  # vector accesses to shared tiles
