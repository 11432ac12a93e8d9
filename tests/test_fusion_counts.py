"""Fusion counts (issue 3): how many kernels the normalizations, softmaxes, a cross-entropy and an
MLP block become, forward and backward, counted from the compiled program's text, with every
compiled result checked against the reference interpreter."""

import re

import numpy as np
import pytest

import nova
import nova.numpy as jnp
from nova.compiler.backend_cpu import compile_program
from nova.compiler.fuse import fuse
from nova.compiler.pipeline import run_passes
from nova.core.interpreter import run_program
from tests.helpers import assert_close, loop_vector_width

_KERNEL = re.compile(r"nova\.kernel @\w+ \([^)]*\) \{kind = \"(\w+)\", ops = \[([^\]]*)\]"
                     r"(?:, iter_shape=\(([^)]*)\)(?: \w+=\w+)* red_axes=(\([^)]*\)|None))?")


def softmax(x):
    m = jnp.max(x, -1, keepdims=True)
    e = jnp.exp(x - m)
    return e / jnp.sum(e, -1, keepdims=True)


def log_softmax(x):
    s = x - jnp.max(x, -1, keepdims=True)
    return s - jnp.log(jnp.sum(jnp.exp(s), -1, keepdims=True))


def layer_norm(x, g, b):
    mu = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, -1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + 1e-5) * g + b


def gelu_tanh(h):
    return 0.5 * h * (1 + jnp.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))


def cross_entropy(logits, labels):
    picked = jnp.take_along_axis(log_softmax(logits), labels[:, None], axis=1)
    return -jnp.mean(picked)


def _compiled_kernels(f, *args):
    """[(kind, ops, red_axes)] parsed from the compiled text, after checking every output of the
    compiled program against the reference interpreter."""
    program = run_passes(nova.make_program(f)(*args))
    exe = compile_program(program)
    values = [np.asarray(a) for a in args]
    for got, want in zip(exe(values), run_program(program, values), strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype
        scale = max(1.0, float(np.abs(want).max()))
        assert_close(got, want, rtol=2e-5, atol=2e-5 * scale)
    kernels = []
    for kind, ops, _, red in _KERNEL.findall(exe.as_text()):
        kernels.append((kind, [o for o in ops.split(", ") if o], red))
    assert len(kernels) == exe.as_text().count("nova.kernel"), exe.as_text()
    return kernels


def _rng_args(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


@pytest.mark.parametrize("fn", [softmax, log_softmax], ids=["softmax", "log_softmax"])
def test_softmax_family_forward_and_backward_are_one_kernel_each(fn):
    x, dy = _rng_args((32, 96), (32, 96))
    (fwd,) = _compiled_kernels(fn, x)
    assert fwd[0] == "loop" and {"reduce_max", "reduce_sum", "exp"} <= set(fwd[1])
    # The backward alone (the forward's row statistics are recomputed inside it).
    bwd = _compiled_kernels(nova.grad(lambda x, dy: jnp.sum(fn(x) * dy)), x, dy)
    assert len(bwd) == 1 and bwd[0][2] == "(1,)"


def test_layer_norm_forward_is_one_kernel_and_backward_two():
    x, g, b, dy = _rng_args((48, 64), (64,), (64,), (48, 64), seed=1)
    assert len(_compiled_kernels(layer_norm, x, g, b)) == 1
    f = nova.grad(lambda x, g, b, dy: jnp.sum(layer_norm(x, g, b) * dy), argnums=(0, 1, 2))
    kernels = _compiled_kernels(f, x, g, b, dy)
    # One row kernel (mean, variance and dx, storing the row statistics) and one column kernel
    # holding both parameter-gradient reductions (dgamma and dbeta in one pass).
    assert [(k, red) for k, _, red in kernels] == [("loop", "(1,)"), ("loop", "(0,)")]
    assert kernels[1][1].count("reduce_sum") == 2


def test_layer_norm_statistics_are_computed_once_and_stored_for_the_backward():
    """In a training program the forward row kernel writes the mean and variance sums per row;
    the backward's kernels read them (no separate statistics kernel)."""
    x, g, b, dy = _rng_args((32, 48), (48,), (48,), (32, 80), seed=2)
    w = _rng_args((48, 80), seed=3)[0] * 0.1

    def loss(x, g, b, w, dy):
        return jnp.sum((layer_norm(x, g, b) @ w) * dy)

    program = run_passes(nova.make_program(nova.grad(loss, argnums=(0, 1, 2, 3)))(x, g, b, w, dy))
    fused = fuse(program)
    rows = [k for k in fused.kernels if k.kind == "loop" and k.schedule["red_axes"] == (1,)]
    first = rows[0]
    assert [v.type.shape for v in first.outputs].count((32,)) == 2  # two per-row statistics
    assert first.op_names().count("reduce_sum") == 2
    # Every reduction over rows is in the forward kernel or the dx kernel.
    assert len(rows) == 2 and rows[1].outputs[0].type.shape == (32, 48)
    assert len(fused.kernels) <= 7
    _compiled_kernels(nova.grad(loss, argnums=(0, 1, 2, 3)), x, g, b, w, dy)


def test_cross_entropy_forward_and_backward():
    logits = _rng_args((32, 64), seed=4)[0]
    labels = np.random.default_rng(5).integers(0, 64, 32)
    kernels = _compiled_kernels(nova.value_and_grad(cross_entropy), logits, labels)
    kinds = [(k, red) for k, _, red in kernels]
    # The one-hot cotangent (the gather's transpose), one row kernel for the statistics and the
    # gradient, and the mean over rows of the picked log-probabilities.
    assert kinds.count(("loop", "(1,)")) == 1
    assert len(kernels) == 3


def test_mlp_bias_and_gelu_in_the_matmul_epilogue():
    x, b, dy = _rng_args((64, 96), (384,), (64, 384), seed=6)
    w = _rng_args((96, 384), seed=7)[0] * 0.1

    def mlp(x, w, b):
        return gelu_tanh(x @ w + b)

    (k,) = _compiled_kernels(mlp, x, w, b)
    assert k[0] == "contraction" and k[1][0] == "dot_general"
    assert "tanh" in k[1] and "add" in k[1]
    # Training: the forward matmul's epilogue also applies GELU's derivative to the incoming
    # cotangent, so dh is written by the matmul kernel itself.
    f = nova.grad(lambda x, w, b, dy: jnp.sum(mlp(x, w, b) * dy), argnums=(0, 1, 2))
    kernels = _compiled_kernels(f, x, w, b, dy)
    assert kernels[0][0] == "contraction" and "tanh" in kernels[0][1]
    assert sum(1 for k, _, _ in kernels if k == "contraction") == 3


def test_sibling_column_reductions_merge_only_without_a_dependency():
    """Two column sums over the same data share one kernel; a column sum that reads the other's
    result at other positions (reversed) needs it complete first, so it stays a second kernel."""
    x, y = _rng_args((40, 24), (40, 24), seed=8)

    def siblings(x, y):
        return jnp.sum(x * y, 0), jnp.sum(x + y, 0)

    kernels = _compiled_kernels(siblings, x, y)
    assert len(kernels) == 1 and kernels[0][1].count("reduce_sum") == 2

    def chained(x, y):
        s = jnp.sum(x * y, 0)
        return jnp.sum(x * s[::-1], 0)

    assert len(_compiled_kernels(chained, x, y)) == 2


def test_column_reductions_sharing_only_a_scalar_stay_apart():
    """Column sums over different data that read a common scalar (an optimizer's step count)
    are not merged: sharing it saves no traffic, and a merged kernel would hold the first sum's
    data until the last one's is ready (every LayerNorm weight update of a GPT-2 step ran as one
    kernel at the end of the backward, holding 25 cotangents)."""
    x, y = _rng_args((40, 24), (40, 24), seed=8)
    c = np.float32(3.0)

    def with_a_step(x, y, c):
        return jnp.sum(x * x, 0) * c, jnp.sum(jnp.sin(y) * y, 0) * c

    kernels = _compiled_kernels(with_a_step, x, y, c)
    assert [ops.count("reduce_sum") for _, ops, _ in kernels] == [1, 1]

    def sharing_data_too(x, y, c):  # x is read by both: one pass computes both sums
        return jnp.sum(x * x, 0) * c, jnp.sum(x * y, 0) * c

    kernels = _compiled_kernels(sharing_data_too, x, y, c)
    assert [ops.count("reduce_sum") for _, ops, _ in kernels] == [2]


def test_zero_safe_masks_of_constant_partials_are_removed_and_kept_for_data():
    x, y = _rng_args((16, 32), (16, 32), seed=9)
    # d(3x)/dx is the constant 3: no isnan/isinf mask survives the passes.
    program = run_passes(nova.make_program(nova.grad(lambda x: jnp.sum(jnp.sin(x * 3.0))))(x))
    names = [e.prim.name for e in program.eqns]
    assert "isinf" not in names and "isnan" not in names
    # d(x*y)/dx = y is data: the mask stays, so a zero cotangent times an infinite y is 0.
    y[0, 0] = np.inf

    def f(x, y):
        return jnp.sum(jnp.where(x > 100.0, x * y, 0.0))

    program = run_passes(nova.make_program(nova.grad(f))(x, y))
    assert "isinf" in [e.prim.name for e in program.eqns]
    (dx,) = compile_program(program)([x, y])
    assert np.isfinite(dx).all() and (dx == 0).all()


def test_cost_analysis_reports_flops_and_bytes_per_kernel():
    x, b = _rng_args((64, 96), (384,), seed=10)
    w = _rng_args((96, 384), seed=11)[0] * 0.1

    def f(x, w, b):
        return softmax(gelu_tanh(x @ w + b))

    compiled = nova.jit(f).lower(x, w, b).compile()
    cost = compiled.cost_analysis()
    per = cost["per_kernel"]
    assert cost["kernels"] == len(per) == compiled.as_text().count("nova.kernel") == 2
    for k in per:
        assert f"@{k['kernel']} " in compiled.as_text()
        assert k["bytes accessed"] == k["bytes read"] + k["bytes written"]
        assert k["arithmetic intensity"] == pytest.approx(k["flops"] / k["bytes accessed"])
    mm, sm = per
    assert mm["kind"] == "contraction" and sm["kind"] == "loop"
    # The bias and GELU join the softmax row kernel (its reductions keep the matmul from taking
    # them as an epilogue): the matmul kernel is 2mnk flops over x and w.
    assert mm["ops"] == ["dot_general"] and mm["flops"] == 2 * 64 * 96 * 384
    assert mm["bytes read"] == x.nbytes + w.nbytes and mm["bytes written"] == 64 * 384 * 4
    assert sm["bytes read"] == 64 * 384 * 4 + b.nbytes and sm["bytes written"] == 64 * 384 * 4
    assert sm["flops"] > 10 * 64 * 384  # GELU's and softmax's elementwise work per element
    assert {"reduce_max", "exp", "reduce_sum"} <= set(sm["ops"])
    assert cost["flops"] == mm["flops"] + sm["flops"]
    assert cost["bytes accessed"] == mm["bytes accessed"] + sm["bytes accessed"]
    assert mm["arithmetic intensity"] > 5 * sm["arithmetic intensity"]


@pytest.mark.parametrize("shape,axes", [((64, 48), (0,)), ((6, 10, 32), (0, 1)),
                                        ((40, 20), (0,)), ((40, 10), (0,))],
                         ids=["2d", "3d", "narrower", "scalar-fallback"])
def test_column_reductions_vectorize_along_the_kept_axis(shape, axes):
    """Reductions that keep the last axis (dgamma, dbeta, bias gradients) run with one lane per
    column and contiguous loads; the sums, maxima and argmax/argmin (NumPy's first occurrence,
    NaN wins) match the interpreter."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal(shape).astype(np.float32)
    x[1, ..., 3] = np.nan  # a NaN column entry for argmax/argmin
    x[..., 5] = 1.0  # ties in one column: the first position wins
    y = rng.standard_normal(shape).astype(np.float32)

    def f(x, y):
        s = jnp.sum(x * y, axes)
        m = jnp.max(jnp.abs(y), axes)
        return s / m, jnp.sum(y, axes, keepdims=True) * y

    kernels = _compiled_kernels(f, x, y)
    assert len(kernels) == 1 and kernels[0][2] == str(axes)
    program = run_passes(nova.make_program(f)(x, y))
    (launch,) = compile_program(program).launches
    # two registers per chunk where the row holds them, else one, half or a quarter of one
    want = loop_vector_width(shape[-1], wide=True)
    assert launch.kernel.schedule["vector_width"] == want and (want > 1) == (shape[-1] != 10)
    if len(axes) == 1:
        for fn in (jnp.argmax, jnp.argmin):
            (k,) = _compiled_kernels(lambda x, fn=fn: fn(x * 2.0, axis=0), x)
            assert k[2] == "(0,)"


def test_embedding_and_layer_norm_share_one_kernel_and_per_row_values_are_recomputed():
    """The embedding sum read by many backward kernels is written by the layer-norm row kernel
    that reads it (no kernel of its own), and 1/sqrt(var + eps), a per-row value read by several
    kernels, is recomputed in each of them instead of getting a (rows, 1) kernel."""
    rng = np.random.default_rng(13)
    table = rng.standard_normal((50, 32)).astype(np.float32)
    pos = rng.standard_normal((16, 32)).astype(np.float32)
    g, b = _rng_args((32,), (32,), seed=14)
    w = _rng_args((32, 40), seed=15)[0] * 0.2
    tokens = rng.integers(0, 50, (4, 16)).astype(np.int32)

    def loss(table, pos, g, b, w, tokens):
        x = table[tokens] + pos
        return jnp.sum(jnp.tanh(layer_norm(x, g, b) @ w))

    f = nova.grad(loss, argnums=(0, 1, 2, 3, 4))
    kernels = _compiled_kernels(f, table, pos, g, b, w, tokens)
    (first,) = [ops for _, ops, _ in kernels if "gather" in ops]
    assert first.count("reduce_sum") == 2 and "sqrt" in first
    program = run_passes(nova.make_program(f)(table, pos, g, b, w, tokens))
    shapes = [k.schedule.get("iter_shape") for k in fuse(program).kernels]
    assert (4, 16, 1) not in shapes and (4, 16) not in shapes


def test_merging_attention_heads_stays_vectorized():
    """(batch, heads, seq, d) -> (batch, seq, heads * d): along the merged axis the index is
    split by div/rem by d; with d a multiple of the vector width a chunk of lanes stays inside one
    head, so the loads are contiguous vectors (not scalar code)."""
    from nova.compiler.codegen.cpu.matmul import host_device

    lanes = host_device().vector_bits // 32
    rng = np.random.default_rng(16)
    # d = 1.5 lanes: the merged axis (2 heads) is still a whole number of chunks, but chunks
    # straddle the heads, so that layout takes half-width vectors (which stay inside one);
    # d = 6: no vector of 4 or more lanes stays inside a head, so scalar code.
    for d, width in ((4 * lanes, lanes), (lanes + lanes // 2, lanes // 2), (6, 1)):
        x = rng.standard_normal((3, 2, 5, d)).astype(np.float32)

        def merge(x, d=d):
            return jnp.transpose(x, (0, 2, 1, 3)).reshape(3, 5, 2 * d) * 2.0

        _compiled_kernels(merge, x)
        program = run_passes(nova.make_program(merge)(x))
        (launch,) = compile_program(program).launches
        assert launch.kernel.schedule["vector_width"] == width, d


def test_weight_gradient_is_written_in_the_weights_layout():
    """Reverse mode gives dW as transpose(dot_general(dy, x)); simplify swaps the operands so the
    matmul writes dW in W's layout and the update reads it contiguously (no transpose left)."""
    x, w = _rng_args((24, 40), (40, 56), seed=17)

    def step(x, w):
        g = nova.grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(w)
        return w - 0.1 * g

    program = run_passes(nova.make_program(step)(x, w))
    prod = {id(o): e for e in program.eqns for o in e.outputs}
    for e in program.eqns:
        if e.prim.name == "transpose":
            assert prod[id(e.inputs[0])].prim.name != "dot_general"
    kernels = _compiled_kernels(step, x, w)
    assert [k for k, _, _ in kernels].count("contraction") == 2
    assert all("transpose" not in ops for k, ops, _ in kernels if k == "loop")


def test_isinf_mask_of_a_bounded_partial_is_dropped_and_nan_still_masked():
    """d(tanh(x) * y)/dy = tanh(x) can be NaN but never infinite: the zero-safe mask keeps only
    its isnan test, so a zero cotangent still gives 0 where x is NaN; an unbounded constant
    product (1e30 * 1e30 overflows float32) keeps its isinf test."""
    x, y = _rng_args((8, 16), (8, 16), seed=18)
    x[2, 3] = np.nan

    def f(x, y):
        return jnp.sum(jnp.where(y > 100.0, jnp.tanh(x) * y, 0.0))

    program = run_passes(nova.make_program(nova.grad(f, argnums=1))(x, y))
    names = [e.prim.name for e in program.eqns]
    assert "isinf" not in names and "isnan" in names
    (dy,) = compile_program(program)([x, y])
    assert (dy == 0).all()

    def g(x, y):
        return jnp.sum(jnp.where(y > 100.0, (jnp.tanh(x) * 1e30) * 1e30 * y, 0.0))

    program = run_passes(nova.make_program(nova.grad(g, argnums=1))(x, y))
    assert "isinf" in [e.prim.name for e in program.eqns]


def test_rank0_values_are_computed_once_before_the_loops():
    """Bias corrections like 1 - b1**t depend on no loop index: the kernel computes them once
    before its loops (LLVM left the libm powf call in the loop body, two per vector)."""
    from nova.compiler.codegen.cpu.loops import emit_loop_kernel

    p = np.random.default_rng(18).standard_normal((64, 96)).astype(np.float32)
    t = np.array(3, np.int32)

    def f(p, t):
        c = 1.0 - 0.9 ** t.astype(jnp.float32)
        return p / c + jnp.sqrt(c)

    kernels = _compiled_kernels(f, p, t)
    assert len(kernels) == 1
    (k,) = fuse(run_passes(nova.make_program(f)(p, t))).kernels
    text = emit_loop_kernel(k.name, k)
    assert text.count("math.powf") == 1
    assert text.index("math.powf") < min(text.index(s) for s in ("scf.for", "omp.parallel")
                                         if s in text)


@pytest.mark.parametrize("shape", [(7, 64), (5, 6, 32), (64, 48), (301, 256)],
                         ids=["odd-rows", "3d", "2d", "2-threads-uneven"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_column_sums_run_row_major_with_per_thread_partials(shape, dtype):
    """Column sums whose full-shape outputs do not read the sums (bias gradients next to the
    gradient they sum) walk the rows in order, each thread adding into its own partial row;
    a kernel whose output reads the sums keeps the column-by-column walk. Both match the
    interpreter (odd row counts split unevenly over the threads)."""
    rng = np.random.default_rng(19)
    x = rng.standard_normal(shape).astype(dtype)
    y = rng.standard_normal(shape).astype(dtype)
    axes = tuple(range(len(shape) - 1))

    def grads(x, y):  # a GELU-like backward: dh, its column sum and sum(dh * x)
        dh = y * (1.0 + jnp.tanh(x)) * 0.5
        return dh, jnp.sum(dh, axes), jnp.sum(dh * x, axes)

    def normalized(x, y):  # the full output reads the sums
        return x / jnp.sum(x * x, axes)

    _compiled_kernels(grads, x, y)
    _compiled_kernels(normalized, x, y)
    for f, want in ((grads, True), (normalized, False)):
        program = run_passes(nova.make_program(f)(x, y))
        exe = compile_program(program)
        col = [l.kernel.schedule for l in exe.launches
               if l.kernel is not None and l.kernel.schedule.get("red_axes") == axes]
        assert col and all(sc["row_major_partials"] is want for sc in col)
        if shape[0] > 300:
            assert all(sc["threads"] == matmul_host_cores() for sc in col)
    from nova.compiler.codegen.cpu.loops import emit_loop_kernel

    for k in fuse(run_passes(nova.make_program(grads)(x, y))).kernels:
        if k.kind == "loop" and k.schedule.get("red_axes") == axes:
            text = emit_loop_kernel(k.name, k)
            # one thread: plain loops, no OpenMP region around them
            assert ("omp.parallel" in text) is (k.schedule["threads"] > 1)


def matmul_host_cores() -> int:
    from nova.compiler.codegen.cpu.matmul import host_device

    return host_device().cores


@pytest.mark.parametrize("shape", [(7, 64), (5, 6, 32), (301, 256)],
                         ids=["odd-rows", "3d", "2-threads-uneven"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8])
def test_column_max_min_prod_run_row_major(shape, dtype):
    """Column max, min and product take the row-major per-thread partials too (each partial row
    starts at the reduction's identity and the threads' rows are combined after the parallel
    region); float max/min still propagate a NaN from any row and lane."""
    rng = np.random.default_rng(23)
    if np.issubdtype(dtype, np.integer):
        x = rng.integers(0, 100, shape).astype(dtype)
    else:
        x = rng.standard_normal(shape).astype(dtype)
        x.reshape(-1, shape[-1])[shape[0] // 2, 3] = np.nan  # one NaN in column 3
    axes = tuple(range(len(shape) - 1))

    def f(x):
        y = x * 2 if np.issubdtype(dtype, np.integer) else x * 0.5
        ones = jnp.ones_like(x) if np.issubdtype(dtype, np.integer) else 1.0 + x * 1e-3
        return y, jnp.max(y, axes), jnp.min(y, axes), jnp.prod(ones, axes), jnp.sum(y, axes)

    program = run_passes(nova.make_program(f)(x))
    exe = compile_program(program)
    col = [l.kernel.schedule for l in exe.launches
           if l.kernel is not None and l.kernel.schedule.get("red_axes") == axes]
    assert col and all(sc["row_major_partials"] for sc in col)
    got = exe([x])
    want = run_program(program, [x])
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        if np.issubdtype(dtype, np.integer):
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
            assert_close(np.nan_to_num(g), np.nan_to_num(w), rtol=1e-5, atol=1e-5)
    if not np.issubdtype(dtype, np.integer):
        assert np.isnan(got[1][..., 3]) and np.isnan(got[2][..., 3])


def test_operand_transposes_fold_into_the_contraction():
    """`a.T @ g` and `x @ w.T` read a and w in place (the GEMM's transposed packs): one
    contraction kernel and no transpose kernel. A permutation that reorders an operand's free
    dims would reorder the result's, so it stays a transpose, and every case matches NumPy."""
    a, g, w = _rng_args((64, 48), (64, 32), (40, 48), seed=21)
    x3 = _rng_args((6, 5, 48), seed=22)[0]
    cases = [(lambda a, g: a.T @ g, (a, g), a.T @ g),
             (lambda a, w: a @ w.T, (a, w), a @ w.T),
             (lambda x, w: jnp.einsum("ijk,lk->jil", jnp.transpose(x, (1, 0, 2)), w), (x3, w),
              np.einsum("ijk,lk->jil", np.transpose(x3, (1, 0, 2)), w))]
    for k, (f, args, want) in enumerate(cases):
        compiled = nova.jit(f).lower(*args).compile()
        text = compiled.as_text()
        assert_close(np.asarray(compiled(*args)), want, rtol=1e-5, atol=1e-5)
        if k < 2:
            assert text.count("nova.kernel") == 1 and "transpose" not in text, text
    # CUDA targets fold them too: the GPU GEMM keeps each tile in its operand's memory order
    # (checked in the simulator and with ptxas; not yet timed on a GPU).
    from nova.compiler.pipeline import target_options

    names = [e.prim.name for e in run_passes(nova.make_program(cases[0][0])(a, g),
                                             options=target_options("cuda:sm_90")).eqns]
    assert names == ["dot_general"]


def _fused(fn, *args):
    return fuse(run_passes(nova.make_program(fn)(*args)))


def test_a_running_sum_of_matmuls_stays_a_chain_of_gemm_epilogues():
    """acc + A_i @ B_i, four terms, read by an elementwise update: each GEMM takes the running
    sum as its epilogue (fuse._sums_matmuls), so no kernel reads more than one earlier
    product; joined into the update, all four products were its stored inputs at once (the
    linear cross-entropy's weight gradient: 8 x 154 MB on GPT-2 124M). A single sum of two
    products, relu(A @ B + C @ D), still fuses into one GEMM epilogue."""
    rng = np.random.default_rng(0)
    mats = [rng.standard_normal(s).astype(np.float32) for s in [(6, 5), (5, 7)] * 4]
    w = rng.standard_normal((6, 7)).astype(np.float32)

    def chain(w, *ab):
        acc = ab[0] @ ab[1]
        for i in range(2, len(ab), 2):
            acc = acc + ab[i] @ ab[i + 1]
        return w - 0.1 * acc

    fp = _fused(chain, w, *mats)
    gemms = [k for k in fp.kernels if k.kind == "contraction"]
    assert len(gemms) == 4
    full = (6, 7)
    for k in fp.kernels:
        products = [v for v in k.inputs if v.type.shape == full and v is not fp.program.inputs[0]]
        assert len(products) <= 1, (k.kind, k.op_names())
    got = compile_program(fp.program)([w, *mats])
    want = w - 0.1 * sum(mats[i] @ mats[i + 1] for i in range(0, 8, 2))
    assert_close(got[0], want, rtol=1e-5)

    def two(a, b, c, d):
        return jnp.maximum(a @ b + c @ d, 0.0)

    fp = _fused(two, *mats[:4])
    assert sum(k.kind == "contraction" for k in fp.kernels) == 2 and len(fp.kernels) == 2


def test_a_late_consumer_does_not_pull_big_producers_ahead():
    """fuse._order: the loss total of a chunked linear cross-entropy is one small kernel
    needed where the first chunk's part is; it may not drag the later chunks' logits GEMMs
    ahead of the first chunk's gradient GEMMs (all chunks' logits would be live at once).
    Launch order: every chunk's weight-gradient GEMM runs before the next chunk's logits."""
    from nova.nn import functional as F

    rng = np.random.default_rng(1)
    n, c, v, chunk = 64, 16, 512, 16
    x = rng.standard_normal((n, c)).astype(np.float32)
    w = rng.standard_normal((v, c)).astype(np.float32)
    y = rng.integers(0, v, n)

    def loss(x, w):
        return F.linear_cross_entropy(x, w, y, chunk_size=chunk)

    import nova.compiler.fuse as fuse_mod

    saved = fuse_mod.PULL_BYTES
    fuse_mod.PULL_BYTES = 1024  # below one chunk's logits (16 x 512 x 4 bytes)
    try:
        fp = _fused(nova.value_and_grad(loss, argnums=(0, 1)), x, w)
    finally:
        fuse_mod.PULL_BYTES = saved
    kinds = []
    for k in fp.kernels:
        if k.kind == "contraction":
            out = k.outputs[0].type.shape
            kinds.append("logits" if out == (chunk, v) else "dw" if out == (v, c) else "dx")
    assert kinds.count("logits") == n // chunk
    # logits_1, dx_1 / dw_1, logits_2, ...: no two logits GEMMs in a row
    assert all(not (a == b == "logits") for a, b in zip(kinds, kinds[1:])), kinds
