"""Rematerialization (nova/compiler/remat.py): forward values the backward reads are recomputed
there from values it keeps anyway. The rewritten program computes the same values, keeps fewer
bytes across the forward/backward boundary, runs each recomputation right before its reader,
and never recomputes through a contraction."""

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova.compiler.backend_cpu import compile_program
from nova.compiler.fuse import fuse
from nova.compiler.pipeline import run_passes, target_options
from nova.compiler.remat import rematerialize, saved_values
from nova.core.interpreter import run_program
from nova.nn import functional as F
from tests.helpers import assert_close

S = nova.ShapeDtypeStruct
f32 = np.float32


def _mlp_loss(x, w1, b1, w2, g, b):
    h = F.gelu(x @ w1 + b1, approximate=True)  # the GELU output feeds w2's gradient
    y = F.layer_norm(h @ w2, g, b)  # the layer norm output feeds nothing in the backward here
    return jnp.sum(F.layer_norm(x + y, g, b) @ w2.T)


def _block_loss(x, w1, b1, w2, g, b):
    """A pre-norm residual block: the layer norm's output feeds w1's gradient."""
    y = F.layer_norm(x, g, b)
    h = F.gelu(y @ w1 + b1, approximate=True)
    return jnp.sum((x + h @ w2) ** 2)


def _block_out(x, w1, b1, w2, g, b):
    return F.gelu(F.layer_norm(x, g, b) @ w1 + b1, approximate=True) @ w2


def _args(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((64, 96)).astype(f32)
    w1 = (rng.standard_normal((96, 256)) * 0.1).astype(f32)
    b1 = rng.standard_normal(256).astype(f32)
    w2 = (rng.standard_normal((256, 96)) * 0.1).astype(f32)
    g, b = rng.standard_normal(96).astype(f32), rng.standard_normal(96).astype(f32)
    return [x, w1, b1, w2, g, b]


def _program(loss, args):
    return run_passes(nova.make_program(nova.value_and_grad(loss, argnums=(0, 1, 2, 3, 4, 5)))(
        *args))


def _saved_bytes(program) -> int:
    return sum(v.type.nbytes for v in saved_values(program)[1])


@pytest.mark.parametrize("loss", [_mlp_loss, _block_loss])
def test_recomputed_program_keeps_fewer_bytes_and_computes_the_same(loss):
    args = _args()
    before = _program(loss, args)
    after = rematerialize(before, enabled=True, min_bytes=0)
    assert after is not before
    assert _saved_bytes(after) < _saved_bytes(before)
    # The same primitives on the same values: the reference gives identical bits.
    for got, want in zip(run_program(after, args), run_program(before, args), strict=True):
        np.testing.assert_array_equal(got, want)
    exe = compile_program(after)
    for got, want in zip(exe(args), run_program(before, args), strict=True):
        assert_close(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))


def test_the_gelu_output_is_recomputed_from_the_kept_pre_activation():
    args = _args()
    before = _program(_block_loss, args)
    after = rematerialize(before, enabled=True, min_bytes=0)
    shapes = lambda p: sorted(v.type.shape for v in saved_values(p)[1])
    # kept before: the layer norm output and the GELU output (64 x 256) among others
    assert shapes(before).count((64, 256)) > shapes(after).count((64, 256))
    assert shapes(before).count((64, 96)) > shapes(after).count((64, 96))
    clones = [e for e in after.eqns[saved_values(after)[0]:] if e.prim.name == "tanh"]
    assert clones and all(e.stage == "bwd" for e in clones)


def test_a_contraction_result_is_never_recomputed():
    """Only loop-kernel work is recomputed: x @ w kept by the backward stays kept."""
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((64, 64)).astype(f32), rng.standard_normal((64, 64)).astype(f32)
    p = run_passes(nova.make_program(nova.grad(lambda x, w: jnp.sum(jnp.tanh(x @ w) * (x @ w)),
                                               argnums=(0, 1)))(x, w))
    after = rematerialize(p, enabled=True, min_bytes=0)
    names = [e.prim.name for e in after.eqns]
    assert names.count("dot_general") == [e.prim.name for e in p.eqns].count("dot_general")


def test_disabled_and_small_values_leave_the_program_alone():
    args = _args()
    p = _program(_block_loss, args)
    assert rematerialize(p) is p  # enabled defaults to False
    assert rematerialize(p, enabled=True) is p  # every value is under MIN_BYTES (1 MiB)
    forward_only = run_passes(nova.make_program(_block_loss)(*args))
    assert rematerialize(forward_only, enabled=True, min_bytes=0) is forward_only


def test_each_recomputation_runs_right_before_its_reader():
    """Launch order: the recomputing kernel comes after every kernel computed before its
    reader's own place in the program, not at the start of the backward."""
    args = _args()
    p = rematerialize(_program(_block_loss, args), enabled=True, min_bytes=0)
    kernels = fuse(p).kernels
    index = {id(o): n for n, k in enumerate(kernels) for o in k.outputs}
    for n, k in enumerate(kernels):
        if k.kind != "loop" or any(e.stage != "bwd" for e in k.program.eqns):
            continue
        if "tanh" not in k.op_names():
            continue
        readers = [m for m, q in enumerate(kernels) if any(id(v) in {id(o) for o in k.outputs}
                                                          for v in q.inputs)]
        assert readers and min(readers) - n <= 2, (n, readers)
        assert all(index.get(id(v), -1) < n for v in k.inputs)


def test_the_config_flag_selects_targets():
    assert "remat" not in (target_options(None) or {})
    assert target_options("cuda:sm_90")["remat"] == {"enabled": True}
    nova.config.update("rematerialize", True)
    assert target_options(None)["remat"] == {"enabled": True}
    nova.config.update("rematerialize", False)
    assert "remat" not in target_options("cuda:sm_90")
    with pytest.raises(ValueError, match="rematerialize"):
        nova.config.update("rematerialize", "sometimes")


def test_a_jitted_training_step_with_remat_plans_less_memory_and_matches():
    """nova.jit on the CPU with rematerialize=True: the planned peak drops and the step's
    values are the ones without it."""
    shapes = [(2048, 128), (128, 512), (512,), (512, 128), (128,), (128,)]  # (over 1 MiB)
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(s).astype(f32) * 0.1 for s in shapes]
    def blocks(x, w1, b1, w2, g, b):  # at the boundary, every block's values are kept
        for _ in range(3):
            x = x + _block_out(x, w1, b1, w2, g, b)
        return jnp.sum(x ** 2)

    step = nova.value_and_grad(blocks, argnums=(1, 2, 3))
    plain = nova.jit(step).lower(*args).compile()
    want = plain(*args)  # (a compiled function runs under the flags it was compiled with)
    nova.config.update("rematerialize", True)
    lowered = nova.jit(step).lower(*args)
    assert lowered.program is not None
    remat = lowered.compile()
    peak = lambda c: c.memory_analysis()["planned_peak_bytes"]
    # three GELU outputs (4 MiB each) and three layer norm outputs (1 MiB each) recomputed
    assert peak(remat) <= peak(plain) - 3 * 4 * 2**20, (peak(remat), peak(plain))
    got = remat(*args)
    for g, w in zip(nova.tree_util.tree_leaves(got), nova.tree_util.tree_leaves(want),
                    strict=True):
        # float32 sums over 2048 rows, fused differently: 1e-4 of the largest magnitude
        w = np.asarray(w)
        assert_close(np.asarray(g), w, rtol=1e-4, atol=1e-4 * float(np.abs(w).max()))


def test_a_recomputed_reduction_is_not_merged_back_into_the_forward():
    """A recomputed column sum shares its bulk inputs with the forward sum it copies; sibling
    fusion must not merge the two (the copy would run in the forward, computed twice there and
    kept across the backward: found by review)."""
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal((1024, 128)).astype(f32) for _ in range(2))

    def loss(x, w):
        return jnp.max(jnp.sum(x * w, axis=0))

    p = run_passes(nova.make_program(nova.value_and_grad(loss, argnums=(0, 1)))(x, w))
    q = rematerialize(p, enabled=True, min_bytes=0)
    assert q is not p
    sums = [k for k in fuse(q).kernels if "reduce_sum" in k.op_names() and
            k.schedule.get("iter_shape") == (1024, 128)]
    assert len(sums) == 2, [k.op_names() for k in sums]
    assert {e.stage for k in sums for e in k.program.eqns if e.prim.name == "reduce_sum"} == \
        {"fwd", "bwd"}
    for got, want in zip(compile_program(q)([x, w]), run_program(p, [x, w]), strict=True):
        assert_close(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))
