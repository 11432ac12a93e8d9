"""Matrix-vector products (nova/compiler/codegen/cpu/gemv.py): which contractions take the
matrix-vector kernel, and its results against NumPy in float64 over both layouts, both float
dtypes, every transpose, odd tails, one and several threads, and a fused epilogue."""

from __future__ import annotations

import numpy as np
import pytest

import nova
import nova.numpy as jnp
from nova.compiler.codegen.cpu import gemv
from nova.compiler.fuse import fuse
from nova.compiler.pipeline import run_passes

S = nova.ShapeDtypeStruct
f32, f64 = np.float32, np.float64


def _contractions(f, *specs):
    program = run_passes(nova.make_program(f)(*specs))
    return [k for k in fuse(program).kernels if k.kind == "contraction"]


@pytest.mark.parametrize("f, specs, want", [
    (lambda x, w: x @ w, [S((37,), f32), S((37, 41), f32)], ("columns", 41, 37, 0)),
    (lambda w, x: w @ x, [S((41, 37), f32), S((37,), f32)], ("rows", 41, 37, 1)),
    (lambda x, w: x @ w.T, [S((37,), f64), S((41, 37), f64)], ("rows", 41, 37, 0)),
    (lambda w, x: w.T @ x, [S((37, 41), f64), S((37,), f64)], ("columns", 41, 37, 1)),
    (lambda x, w: x[None, :] @ w, [S((37,), f32), S((37, 41), f32)], ("columns", 41, 37, 0)),
])
def test_layouts(f, specs, want):
    (k,) = _contractions(f, *specs)
    assert gemv.gemv_layout(k) == want
    assert "vector.fma" in gemv.emit_gemv("k", k)


@pytest.mark.parametrize("f, specs", [
    (lambda a, b: a @ b, [S((4, 7), f32), S((7, 9), f32)]),  # a GEMM
    (lambda a, b: jnp.einsum("bk,bkn->bn", a, b), [S((3, 7), f32), S((3, 7, 9), f32)]),  # batch
    (lambda a, b: a @ b, [S((7,), np.int32), S((7, 9), np.int32)]),  # integers
])
def test_not_matrix_vector(f, specs):
    for k in _contractions(f, *specs):
        assert gemv.gemv_layout(k) is None and gemv.emit_gemv("k", k) is None


def test_threads_split_the_output():
    (k,) = _contractions(lambda x, w: x @ w, S((1024,), f32), S((1024, 2048), f32))
    assert "omp.parallel" in gemv.emit_gemv("k", k, threads=2)
    assert "omp.parallel" not in gemv.emit_gemv("k", k, threads=1)
    (small,) = _contractions(lambda x, w: x @ w, S((16,), f32), S((16, 64), f32))
    assert "omp.parallel" not in gemv.emit_gemv("k", small, threads=2)


CASES = {
    "x @ w": (lambda x, w, wt: x @ w, lambda x, w: x @ w),
    "w.T @ x (stored)": (lambda x, w, wt: wt @ x, lambda x, w: w.T @ x),
    "x @ wt.T": (lambda x, w, wt: x @ wt.T, lambda x, w: x @ w),
    "w.T @ x": (lambda x, w, wt: w.T @ x, lambda x, w: w.T @ x),
    "tanh(x @ w + 1)": (lambda x, w, wt: jnp.tanh(x @ w + 1.0), lambda x, w: np.tanh(x @ w + 1.0)),
    "(1, k) @ w": (lambda x, w, wt: x[None, :] @ w, lambda x, w: (x @ w)[None, :]),
}


@pytest.mark.parametrize("dtype", [f32, f64])
@pytest.mark.parametrize("k, n", [(1, 1), (3, 5), (16, 16), (17, 33), (100, 7), (5, 2049),
                                  (700, 300), (300, 700), (4099, 3), (1500, 1500)])
def test_matches_numpy(dtype, k, n):
    rng = np.random.default_rng(k * 1000 + n)
    x = rng.standard_normal(k).astype(dtype)
    w = rng.standard_normal((k, n)).astype(dtype)
    wt = np.ascontiguousarray(w.T)
    for name, (f, ref_f) in CASES.items():
        got = np.asarray(nova.jit(f)(x, w, wt))
        ref = ref_f(x.astype(f64), w.astype(f64))
        assert got.shape == ref.shape and got.dtype == dtype, name
        scale = np.sqrt(k) * max(1.0, float(np.abs(ref).max()))
        tol = (2e-6 if dtype == f32 else 1e-14) * scale
        assert float(np.abs(got - ref).max()) <= tol, (name, float(np.abs(got - ref).max()))


def test_ssa_names_are_unique_for_every_shape():
    """Every emitted kernel defines each SSA name once (a load named like an index constant,
    %c<k>, broke the "columns" kernel for k = 31, (9, 64), ...: found by review)."""
    import re

    # (k = 1 is an outer product: simplify makes it a loop kernel, no contraction.)
    for k in list(range(2, 70)) + [127, 128, 1000]:
        for n in (1, 2, 3, 7, 8, 9, 16, 31, 64, 65, 3072):
            for f, specs in ((lambda x, w: x @ w, [S((k,), f32), S((k, n), f32)]),
                             (lambda w, x: w @ x, [S((n, k), f32), S((k,), f32)])):
                (kern,) = _contractions(f, *specs)
                for threads in (1, 2):
                    text = gemv.emit_gemv("k", kern, threads=threads)
                    if text is None:  # k == 1 or n == 1 on both sides: an outer product
                        continue
                    # definitions: `%x = ...`, `%r:2 = ...` and iter_args' `(%a = %init`
                    names = re.findall(r"(%\w+)(?::\d+)? = ", text)
                    dup = {m for m in names if names.count(m) > 1}
                    assert not dup, (k, n, threads, sorted(dup)[:5])


@pytest.mark.parametrize("k, n", [(31, 31), (9, 64), (5, 10), (65, 7), (127, 3072)])
def test_shapes_found_by_review(k, n):
    rng = np.random.default_rng(k + n)
    x = rng.standard_normal(k).astype(f32)
    w = rng.standard_normal((k, n)).astype(f32)
    got = np.asarray(nova.jit(lambda a, b: a @ b)(x, w))
    np.testing.assert_allclose(got, x.astype(f64) @ w, rtol=1e-4, atol=1e-4 * np.sqrt(k))
