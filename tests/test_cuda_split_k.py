"""Split-K GEMMs on the GPU (codegen/cuda/split_k.py): which contractions split and what the
cost model chooses at GPT-2 124M's weight-gradient shapes, and the two launches (a batched
GEMM of partial products, a loop kernel adding them and running the epilogue) against the NumPy
reference in the SIMT simulator, for the SIMT, mma.sync and wgmma GEMMs."""

import nova.numpy as jnp
import numpy as np
import pytest

from nova.compiler import backend_cuda
from nova.compiler.codegen.cuda.split_k import split_k_parts
from nova.core import dtypes
from nova.core.ir import verify_program
from tests.test_cuda_codegen import S, _fused, _simulate_program

f32 = np.float32


def _weight_grad(x, dy, b):
    """A weight gradient over (batch, time) rows with a bias and tanh epilogue."""
    return jnp.tanh(0.05 * jnp.tensordot(x, dy, axes=([0, 1], [0, 1])) + b)


def _contractions(fn, specs):
    return [k for k in _fused(fn, specs).kernels if k.kind == "contraction"]


def test_split_structure():
    specs = [S((8, 64, 32), f32), S((8, 64, 48), f32), S((48,), f32)]
    (k,) = _contractions(_weight_grad, specs)
    gemm, finish = split_k_parts(k)
    (dot,) = gemm.program.eqns
    assert dot.params["dimension_numbers"] == (((1,), (1,)), ((0,), (0,)))
    assert gemm.outputs[0].type.shape == (8, 32, 48)
    assert finish.schedule == {"iter_shape": (8, 32, 48), "red_axes": (0,)}
    assert finish.program.outputs == k.program.outputs  # the epilogue runs after the sum
    assert finish.program.eqns[0].prim.name == "reduce_sum"


@pytest.mark.parametrize("arch,precision", [("sm_90", "highest"), ("sm_90", "tf32"),
                                            ("sm_90a", "tf32")])
def test_split_gemms_match_reference(arch, precision):
    """K = 8 x 512: one wave of 64 x 64 tiles over K = 4096 before, of 8 x as many over 512
    after (the partials cost ~3 us, the launch included): split, in the model."""
    specs = [S((8, 512, 32), f32), S((8, 512, 96), f32), S((96,), f32)]
    (k,) = _contractions(_weight_grad, specs)
    lowered = backend_cuda.lower_kernel(k, arch, precision, 132)
    assert [gk.kind for gk, _ in lowered] == ["contraction", "loop"]
    assert lowered[0][0].schedule["split_k"] == 8 and lowered[0][1].grid[2] == 8
    got, want = _simulate_program(_weight_grad, specs, precision, arch=arch, sm_count=132)
    tol = 1e-2 if precision == "tf32" else 1e-5  # TF32: 10 mantissa bits over K = 4096
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, atol=tol * max(1.0, float(np.abs(w).max())))


def test_the_cost_model_at_gpt2_124m():
    """At 124M's shapes (8 x 1024 rows) the model splits the 768 x 768 and 768 x 2304 weight
    gradients (64 x 64 tiles in 144 and 432 blocks become 128 x 256 tiles in 144 x 8 / 4 and
    54 x 8 blocks) and keeps the 768 x 3072 one (128 x 128 tiles, 144 blocks: its partials'
    traffic would cost about what the wave tail does)."""
    def dw(x, dy):
        return jnp.tensordot(x, dy, axes=([0, 1], [0, 1]))

    chosen = {}
    for n in (768, 2304, 3072):
        (k,) = _contractions(dw, [S((8, 1024, 768), f32), S((8, 1024, n), f32)])
        lowered = backend_cuda.lower_kernel(k, "sm_90a", "tf32")
        chosen[n] = lowered[0][0].schedule.get("split_k")
        if chosen[n]:
            before, after = lowered[0][0].schedule["model_us"]
            assert after <= 0.9 * before
    assert chosen == {768: 8, 2304: 8, 3072: None}


def test_unsplit_contractions():
    """No split without a shared leading contracted axis, with batch axes, for more than 16
    parts, for bfloat16 results (the partials would round), or when the epilogue reads an
    operand."""
    bf16 = dtypes.bfloat16
    cases = [
        (lambda x, w: x @ w, [S((64, 32), f32), S((32, 48), f32)]),
        (lambda x, w: jnp.einsum("bik,bkj->bij", x, w), [S((8, 32, 16), f32), S((8, 16, 24), f32)]),
        (lambda x, y: jnp.tensordot(x, y, axes=([0, 1], [0, 1])),
         [S((32, 64, 32), f32), S((32, 64, 48), f32)]),
        (lambda x, y: jnp.tensordot(x, y, axes=([0, 1], [0, 1])),
         [S((8, 64, 32), bf16), S((8, 64, 48), bf16)]),
    ]
    for fn, specs in cases:
        for k in _contractions(fn, specs):
            assert split_k_parts(k) is None


def test_forced_gemm_tile():
    """config "gemm_tile" (for bench/device_check.py's tile measurements) makes every GEMM take
    that tile where its schedule has it, is validated, and keys the jit cache."""
    import nova

    specs = [S((8192, 768), f32), S((768, 768), f32)]
    (k,) = _contractions(lambda x, w: x @ w, specs)
    saved = nova.config.read("gemm_tile")
    try:
        for tile, grid in (((128, 128), (6, 64, 1)), ((64, 64), (12, 128, 1)), (None, (3, 64, 1))):
            nova.config.update("gemm_tile", tile)
            ((_, em),) = backend_cuda.lower_kernel(k, "sm_90a", "tf32")
            assert em.grid == grid
        nova.config.update("gemm_tile", (96, 96))  # not in the table: the analytic choice
        ((_, em),) = backend_cuda.lower_kernel(k, "sm_90a", "tf32")
        assert em.grid == (3, 64, 1)
        with pytest.raises(ValueError, match="gemm_tile"):
            nova.config.update("gemm_tile", [128, 128])
        keys = set()
        for tile in (None, (128, 128)):
            nova.config.update("gemm_tile", tile)
            keys.add(nova.config.code_key())
        assert len(keys) == 2
    finally:
        nova.config.update("gemm_tile", saved)


def test_gram_matrix_split_keeps_the_epilogue_inputs():
    """x^T x + b: one operand, so the epilogue's inputs start after it (found by review: the
    finishing kernel dropped b)."""
    specs = [S((8, 64, 32), f32), S((32,), f32)]
    (k,) = _contractions(lambda x, b: jnp.tensordot(x, x, axes=([0, 1], [0, 1])) + b, specs)
    _, finish = split_k_parts(k)
    assert any(v is k.program.inputs[-1] for v in finish.program.inputs)
    verify_program(finish.program)  # every value defined before its use
