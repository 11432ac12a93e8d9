"""Generated CPU kernels for the template primitives (nova/compiler/codegen/cpu/): concatenate,
pad and gather evaluated inline in loop kernels, argmax/argmin as (value, index) reductions,
scatter_add/scatter and the cumulative scans as sequential kernels.

Each test checks the fusion result (how many kernels, of which kind, no `host:` kernel) and the
values against the reference interpreter, including edge cases: clamped gather indices, dropped
and repeated scatter indices, size-0 arrays, bool and integer dtypes, vector-unaligned shapes.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nova
import nova.numpy as jnp
from nova.compiler.backend_cpu import compile_program
from nova.compiler.fuse import fuse
from nova.compiler.pipeline import run_passes
from nova.core import dtypes
from nova.core.interpreter import run_program
from nova.ops import indexing, reduction, scan, slicing
from nova.ops.sort import sort_p
from tests.helpers import assert_close


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    d = tmp_path_factory.getbasetemp() / "nova-cache"
    monkeypatch.setenv("NOVA_CACHE_DIR", str(d))


def _compiled(f, *args, grad=False):
    """(fused program, compiled outputs), after checking the outputs against the interpreter."""
    if grad:
        f = nova.value_and_grad(f)
    p = run_passes(nova.make_program(f)(*args))
    fp = fuse(p)
    args = [np.asarray(a) for a in args]
    got = compile_program(p)(args)
    want = run_program(p, args)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        tol = 1e-5 if g.dtype in (np.float32, np.float64) else None
        assert_close(g, w, rtol=tol, atol=tol)
    return fp, got


def _kinds(fp):
    return [k.kind for k in fp.kernels]


def _rng(seed=0):
    return np.random.default_rng(seed)


# --- concatenate ----------------------------------------------------------------------------------


@pytest.mark.parametrize("shapes,axis", [
    (((4, 32), (4, 16)), 1),  # boundaries on vector chunks: vector code
    (((4, 32), (3, 32)), 0),  # concatenation across rows
    (((4, 5), (4, 3), (4, 9)), 1),  # unaligned boundaries: scalar code
    (((2, 0, 8), (2, 3, 8), (2, 1, 8)), 1),  # an empty operand is never chosen
    (((7,), (9,)), 0),
])
def test_concatenate_fuses_with_its_consumer(shapes, axis):
    rng = _rng()
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    fp, (out,) = _compiled(lambda *xs: jnp.concatenate(xs, axis=axis) * 2.0, *args)
    assert _kinds(fp) == ["loop"]
    assert "concatenate" in fp.as_text() and "host:" not in fp.as_text()
    np.testing.assert_allclose(out, np.concatenate(args, axis=axis) * 2.0, rtol=1e-6)


def test_concatenate_bool_and_int_operands():
    rng = _rng(1)
    a, b = rng.standard_normal((3, 17)) > 0, rng.standard_normal((2, 17)) > 0
    fp, (out,) = _compiled(lambda a, b: jnp.logical_not(jnp.concatenate([a, b], axis=0)), a, b)
    assert _kinds(fp) == ["loop"]
    np.testing.assert_array_equal(out, ~np.concatenate([a, b]))
    i = rng.integers(-9, 9, (4, 8)).astype(np.int32)
    j = rng.integers(-9, 9, (4, 24)).astype(np.int32)
    fp, (out,) = _compiled(lambda i, j: jnp.concatenate([i, j], axis=1) + 1, i, j)
    assert _kinds(fp) == ["loop"]
    np.testing.assert_array_equal(out, np.concatenate([i, j], axis=1) + 1)


def test_concatenate_inside_a_softmax_row_kernel():
    rng = _rng(2)
    a = rng.standard_normal((4, 32)).astype(np.float32)
    b = rng.standard_normal((4, 16)).astype(np.float32)

    def f(a, b):
        x = jnp.concatenate([a, b], axis=1)
        e = jnp.exp(x - jnp.max(x, -1, keepdims=True))
        return e / jnp.sum(e, -1, keepdims=True)

    fp, _ = _compiled(f, a, b)
    assert _kinds(fp) == ["loop"]


def test_concatenate_gradient_has_no_host_kernels():
    rng = _rng(3)
    a = rng.standard_normal((3, 8)).astype(np.float32)
    b = rng.standard_normal((5, 8)).astype(np.float32)
    fp, _ = _compiled(lambda a, b: jnp.sum(jnp.tanh(jnp.concatenate([a, b])) ** 2), a, b, grad=True)
    assert "host:" not in fp.as_text()


# --- pad ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,config", [
    ((4, 32), ((1, 2, 0), (16, 16, 0))),  # vector chunks stay on one side of every edge
    ((4, 32), ((1, 2, 0), (3, 1, 0))),  # unaligned edges: scalar code
    ((4, 5), ((-1, 2, 1), (2, -3, 0))),  # negative padding crops; interior padding
    ((3, 4), ((0, 0, 2), (1, 1, 3))),
    ((0, 4), ((1, 1, 0), (0, 0, 0))),  # an empty operand: all padding
])
def test_pad_fuses_with_its_consumer(shape, config):
    x = _rng(4).standard_normal(shape).astype(np.float32)
    fp, (out,) = _compiled(lambda x: slicing.pad(x, -0.5, config) + 1.0, x)
    assert _kinds(fp) == ["loop"] and "host:" not in fp.as_text()
    want = slicing.pad_p.impl(x, np.float32(-0.5), padding_config=config) + 1.0
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_pad_with_a_computed_padding_value_and_its_gradient():
    rng = _rng(5)
    x, v = rng.standard_normal((3, 6)).astype(np.float32), np.float32(0.25)
    fp, _ = _compiled(lambda x, v: jnp.sum(slicing.pad(x, v * 2.0, ((1, 1, 1), (0, 2, 0))) ** 2),
                      x, v, grad=True)
    assert "host:" not in fp.as_text()


def test_pad_int_operand():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    fp, (out,) = _compiled(lambda x: slicing.pad(x, 7, ((1, 0, 1), (2, 1, 0))) * 3, x)
    assert _kinds(fp) == ["loop"]
    np.testing.assert_array_equal(out, slicing.pad_p.impl(x, np.int32(7), padding_config=(
        (1, 0, 1), (2, 1, 0))) * 3)


# --- gather -------------------------------------------------------------------------------------


def test_embedding_lookup_plus_position_is_one_kernel():
    rng = _rng(6)
    wte = rng.standard_normal((50, 64)).astype(np.float32)
    wpe = rng.standard_normal((8, 64)).astype(np.float32)
    tokens = rng.integers(0, 50, (2, 8)).astype(np.int32)
    fp, (out,) = _compiled(lambda w, t, p: w[t] + p, wte, tokens, wpe)
    assert _kinds(fp) == ["loop"]
    assert "gather" in fp.as_text() and "host:" not in fp.as_text()
    np.testing.assert_allclose(out, wte[tokens] + wpe, rtol=1e-6)


def test_embedding_lookup_joins_the_layer_norm_kernel():
    rng = _rng(7)
    wte = rng.standard_normal((40, 32)).astype(np.float32)
    tokens = rng.integers(0, 40, (3, 5)).astype(np.int32)

    def f(w, t):
        x = w[t]
        mu = jnp.mean(x, -1, keepdims=True)
        return (x - mu) / jnp.sqrt(jnp.mean((x - mu) ** 2, -1, keepdims=True) + 1e-5)

    fp, _ = _compiled(f, wte, tokens)
    assert _kinds(fp) == ["loop"]


@pytest.mark.parametrize("idt", [np.int32, np.int64, np.uint8, np.uint32])
def test_gather_clamps_out_of_range_indices(idt):
    x = _rng(8).standard_normal((5, 24)).astype(np.float32)
    raw = np.array([[2], [0], [4], [7], [200]])
    if np.dtype(idt).kind == "i":
        raw = np.concatenate([raw, [[-1], [-30]]])
    idx = raw.astype(idt)
    fp, (out,) = _compiled(lambda x, i: indexing.gather(x, i, (0,)) * 1.0, x, idx)
    assert _kinds(fp) == ["loop"]
    np.testing.assert_array_equal(out, x[np.clip(raw[:, 0], 0, 4)])


def test_gather_two_axes_and_int_bool_operands():
    rng = _rng(9)
    x = rng.integers(-50, 50, (3, 4, 5)).astype(np.int64)
    idx = rng.integers(-1, 6, (2, 7, 2)).astype(np.int32)
    fp, (out,) = _compiled(lambda x, i: indexing.gather(x, i, (2, 0)) + 1, x, idx)
    assert _kinds(fp) == ["loop"]
    b = rng.standard_normal((6, 3)) > 0
    fp, (out,) = _compiled(lambda x, i: jnp.logical_not(indexing.gather(x, i, (0,))), b,
                           np.array([[5], [0], [9]], np.int32))
    assert _kinds(fp) == ["loop"]
    np.testing.assert_array_equal(out, ~b[[5, 0, 5]])


def test_gather_of_lanes_and_of_computed_indices():
    rng = _rng(10)
    x = rng.standard_normal(40).astype(np.float32)
    idx = rng.integers(0, 40, (16, 1)).astype(np.int32)
    # The batch axis is the vector axis: every lane reads its own position (scalar code).
    fp, (out,) = _compiled(lambda x, i: indexing.gather(x, i, (0,)) * 3.0, x, idx)
    np.testing.assert_allclose(out, x[idx[:, 0]] * 3.0, rtol=1e-6)
    # Indices computed in the same kernel.
    fp, (out,) = _compiled(lambda x, i: indexing.gather(x, (i * 3) % 40, (0,)), x, idx)
    assert _kinds(fp) == ["loop"]
    np.testing.assert_allclose(out, x[(idx[:, 0] * 3) % 40])


def test_gather_size_zero():
    x = _rng(11).standard_normal((4, 8)).astype(np.float32)
    fp, (out,) = _compiled(lambda x, i: indexing.gather(x, i, (0,)) + 1.0, x,
                           np.zeros((0, 1), np.int32))
    assert out.shape == (0, 8)


# --- argmax / argmin ------------------------------------------------------------------------------


def _arg_data():
    x = _rng(12).standard_normal((5, 64)).astype(np.float32)
    x[1, 5] = x[1, 40] = np.nan  # the first NaN wins
    x[2, :] = 1.0  # ties: the first position
    x[3, ::3] = np.nan
    x[4, :] = -np.inf  # the start value itself: position 0
    return x


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, dtypes.bfloat16, np.float64])
def test_arg_reductions_follow_numpy_ties_and_nans(name, axis, dtype):
    x = _arg_data().astype(dtype)
    fn = getattr(reduction, name)
    fp, (out,) = _compiled(lambda x: fn(x, axis), x)
    assert _kinds(fp) == ["loop"] and name in fp.as_text()
    np_fn = np.argmax if name == "argmax" else np.argmin
    np.testing.assert_array_equal(out, np_fn(x.astype(np.float32), axis=axis))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reductions_int_bool_and_index_dtypes(name):
    rng = _rng(13)
    fn = getattr(reduction, name)
    np_fn = np.argmax if name == "argmax" else np.argmin
    ints = rng.integers(-3, 3, (5, 32)).astype(np.int32)
    ints[0] = np.iinfo(np.int32).min
    ints[1] = np.iinfo(np.int32).max
    for idt in (np.int32, np.int64, np.uint8):
        _, (out,) = _compiled(lambda x: fn(x, 1, idt), ints)
        assert out.dtype == idt
        np.testing.assert_array_equal(out, np_fn(ints, axis=1).astype(idt))
    flags = rng.standard_normal((6, 48)) > 0.5
    flags[0], flags[1] = False, True
    _, (out,) = _compiled(lambda x: fn(x, 1), flags)
    np.testing.assert_array_equal(out, np_fn(flags, axis=1))


def test_argmax_fuses_with_prologue_epilogue_and_other_reductions():
    x = _rng(14).standard_normal((4, 37)).astype(np.float32)  # 37: scalar code

    def f(x):
        y = jnp.exp(x) * 2.0
        # One row kernel: both reductions feed one per-row epilogue.
        return reduction.argmax(y, 1) + (jnp.max(y, 1) > 3.0).astype(jnp.int32)

    fp, _ = _compiled(f, x)
    assert _kinds(fp) == ["loop"]
    fp, _ = _compiled(lambda x: jnp.argmax(x, axis=-1) == 3, x[:, :32])
    assert _kinds(fp) == ["loop"]


def test_reduce_prod_is_a_loop_reduction():
    x = _rng(15).uniform(0.5, 1.5, (4, 64)).astype(np.float32)
    fp, _ = _compiled(lambda x: jnp.prod(x, axis=1) * 2.0, x)
    assert _kinds(fp) == ["loop"]


# --- index tracking along the vector axis -------------------------------------------------------


def test_reversed_and_shifted_reads_along_the_vector_axis():
    x = _rng(16).standard_normal((4, 64)).astype(np.float32)
    # rev reads lanes backwards (scalar code); a unit-stride slice at an offset stays a vector
    # load; a strided slice does not.
    _, (out,) = _compiled(lambda x: jnp.flip(x, 1) * 2.0, x)
    np.testing.assert_allclose(out, x[:, ::-1] * 2.0)
    _, (out,) = _compiled(lambda x: x[:, 3:35] + x[:, 32:], x)
    np.testing.assert_allclose(out, x[:, 3:35] + x[:, 32:], rtol=1e-6)
    _, (out,) = _compiled(lambda x: x[:, ::2] * 1.5, x)
    np.testing.assert_allclose(out, x[:, ::2] * 1.5, rtol=1e-6)


# --- scatter_add / scatter ------------------------------------------------------------------------


def _scatter_ref(operand, idx, updates, axes, mode):
    return indexing._np_scatter(operand, idx, updates, axes, mode)


@pytest.mark.parametrize("mode", ["add", "set", "mul", "min", "max"])
@pytest.mark.parametrize("cols", [32, 5])  # vector and scalar update rows
def test_scatter_drops_out_of_range_and_combines_repeats(mode, cols):
    rng = _rng(17)
    x = rng.standard_normal((5, cols)).astype(np.float32)
    idx = np.array([[1], [3], [1], [9], [-2], [0], [1], [5]], np.int32)  # repeats, 9/-2/5 dropped
    upd = rng.standard_normal((8, cols)).astype(np.float32)
    fp, (out,) = _compiled(lambda x, i, u: indexing.scatter(x * 2.0, i, u + 1.0, (0,), mode),
                           x, idx, upd)
    assert _kinds(fp) == ["scatter"] and "host:" not in fp.as_text()
    np.testing.assert_allclose(out, _scatter_ref(x * 2, idx, upd + 1, (0,), mode), rtol=1e-6)


def test_embedding_gradient_is_one_scatter_kernel():
    rng = _rng(18)
    wte = rng.standard_normal((50, 64)).astype(np.float32)
    wpe = rng.standard_normal((8, 64)).astype(np.float32)
    tokens = rng.integers(0, 50, (2, 8)).astype(np.int32)
    tokens[0, :3] = 7  # repeated tokens accumulate
    fp, (loss, grads) = _compiled(lambda w, t, p: jnp.sum((w[t] + p) ** 2), wte, tokens, wpe,
                                  grad=True)
    assert "host:" not in fp.as_text()
    (scat,) = [k for k in fp.kernels if k.kind == "scatter"]
    # The cotangent (recomputed from the gather) and the zeros fuse into the scatter kernel.
    assert {"gather", "scatter_add"} <= set(scat.op_names())
    want = np.zeros_like(wte)
    np.add.at(want, tokens.reshape(-1), (2 * (wte[tokens] + wpe)).reshape(-1, 64))
    np.testing.assert_allclose(grads, want, rtol=1e-5, atol=1e-5)


def test_scatter_two_axes_int_bool_and_unsigned_indices():
    rng = _rng(19)
    x = rng.integers(-9, 9, (3, 4, 2)).astype(np.int32)
    idx = np.array([[[0, 1], [2, 0]], [[0, 1], [3, 1]]], np.int32)  # (3, 1) is out of range
    upd = rng.integers(-9, 9, (2, 2, 4)).astype(np.int32)
    fp, (out,) = _compiled(lambda x, i, u: indexing.scatter_add(x, i, u, (0, 2)), x, idx, upd)
    assert _kinds(fp) == ["scatter"]
    np.testing.assert_array_equal(out, _scatter_ref(x, idx, upd, (0, 2), "add"))
    flags = rng.standard_normal((6, 3)) > 0
    bidx = np.array([[5], [0], [200], [5]], np.uint8)  # 200 dropped; uint8 has no negatives
    bupd = rng.standard_normal((4, 3)) > 0
    for mode in ("add", "set", "max", "min"):
        fp, (out,) = _compiled(lambda x, i, u: indexing.scatter(x, i, u, (0,), mode), flags,
                               bidx, bupd)
        np.testing.assert_array_equal(out, _scatter_ref(flags, bidx, bupd, (0,), mode))


def test_scatter_size_zero_and_no_updates():
    x = _rng(20).standard_normal((4, 16)).astype(np.float32)
    _, (out,) = _compiled(lambda x, i, u: indexing.scatter_add(x, i, u, (0,)), x,
                          np.zeros((0, 1), np.int32), np.zeros((0, 16), np.float32))
    np.testing.assert_array_equal(out, x)  # only the copy
    _, (out,) = _compiled(lambda x, i, u: indexing.scatter_add(x, i, u, (0,)),
                          np.zeros((0, 16), np.float32), np.array([[0], [1]], np.int32),
                          np.ones((2, 16), np.float32))
    assert out.shape == (0, 16)  # every index is out of range of an empty axis


def test_large_scatter_splits_columns_over_threads():
    rng = _rng(21)
    v = rng.standard_normal((300, 512)).astype(np.float32)
    idx = rng.integers(-5, 305, (400, 1)).astype(np.int32)
    idx[:50] = 3  # many writes to one row: per-column order must stay the row order
    u = rng.standard_normal((400, 512)).astype(np.float32)
    for mode in ("add", "set"):
        _, (out,) = _compiled(lambda v, i, u: indexing.scatter(v, i, u, (0,), mode), v, idx, u)
        np.testing.assert_allclose(out, _scatter_ref(v, idx, u, (0,), mode), rtol=1e-5,
                                   atol=1e-5)


# --- cumulative scans -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cummax", "cummin"])
@pytest.mark.parametrize("axis,reverse", [(0, False), (1, True), (2, False), (1, False)])
def test_scans_match_the_reference(name, axis, reverse):
    x = _rng(22).uniform(0.5, 1.5, (3, 5, 16)).astype(np.float32)
    x[0, 1, 2] = np.nan  # NaN propagates through every scan
    fn = getattr(scan, name)
    fp, _ = _compiled(lambda x: fn(x * 1.0, axis, reverse), x)
    assert _kinds(fp) == ["scan"] and name in fp.as_text()


@pytest.mark.parametrize("dtype", [np.float16, dtypes.bfloat16, np.int32, np.uint8, np.float64])
def test_scans_low_precision_and_integer_dtypes(dtype):
    x = _rng(23).uniform(-3, 3, (4, 32))
    x = (x if np.dtype(dtype).kind == "f" or dtype == dtypes.bfloat16 else np.abs(x) * 10)
    x = x.astype(dtype)
    for name in ("cumsum", "cummax", "cummin"):
        fn = getattr(scan, name)
        for axis in (0, 1):
            _, (out,) = _compiled(lambda x: fn(x, axis, axis == 1), x)
            assert out.dtype == x.dtype


def test_scan_bool_and_size_zero():
    flags = _rng(24).standard_normal((5, 16)) > 0.8
    _, (out,) = _compiled(lambda x: scan.cummax(x, 0), flags)
    np.testing.assert_array_equal(out, np.maximum.accumulate(flags, axis=0))
    _, (out,) = _compiled(lambda x: scan.cumsum(x, 1), np.zeros((3, 0), np.float32))
    assert out.shape == (3, 0)


def test_large_scan_is_threaded_and_vectorized():
    x = _rng(25).standard_normal((512, 256)).astype(np.float32)
    _compiled(lambda x: scan.cumsum(x, 0), x)
    _compiled(lambda x: scan.cummax(x, 1, True), x)


# --- random bits, iota, matmul epilogues ---------------------------------------------------------


def test_random_bits_are_generated_loop_kernels():
    import nova.random as nr

    key = np.asarray(nr.PRNGKey(0))
    fp, outs = _compiled(lambda k: (nr.uniform(k, (64, 48)) * 2.0, nr.normal(k, (5, 7))), key)
    assert set(_kinds(fp)) == {"loop"} and "threefry2x32" in fp.as_text()


def test_iota_along_the_vector_axis():
    x = np.arange(64 * 48, dtype=np.float32).reshape(64, 48)
    _compiled(lambda x: x + jnp.arange(48, dtype=jnp.float32) * jnp.arange(64)[:, None], x)
    _compiled(lambda x: x + jnp.arange(64 * 48, dtype=jnp.float32).reshape(64, 48), x)


@pytest.mark.parametrize("move", ["rev", "transpose", "concatenate"])
def test_matmul_epilogue_never_reads_other_elements_of_the_result(move):
    rng = _rng(26)
    x = rng.standard_normal((16, 16)).astype(np.float32)
    w = (rng.standard_normal((16, 16)) * 0.1).astype(np.float32)
    moves = {"rev": lambda y: jnp.flip(y, 0), "transpose": lambda y: y.T,
             "concatenate": lambda y: jnp.concatenate([y[8:], y[:8]])}
    fp, _ = _compiled(lambda x, w: moves[move](jnp.exp(x @ w)) * 2.0, x, w)
    assert "host:" not in fp.as_text()


# --- random programs mixing the templates --------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_hypothesis_template_programs_and_gradients(data):
    shape = data.draw(st.sampled_from([(4, 8), (3, 5), (8, 16), (2, 32), (5, 24)]))
    ops = data.draw(st.lists(st.sampled_from(
        ["roll0", "roll1", "pad", "gather", "cumsum", "argmax", "tanh", "sum_keep", "T"]),
        min_size=1, max_size=5))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    x = rng.standard_normal(shape).astype(np.float32)

    def f(x):
        y = x
        for op in ops:
            n, m = y.shape
            if op == "roll0":
                y = jnp.concatenate([y[1:], y[:1]], axis=0)
            elif op == "roll1":
                k = m // 3 or 1
                y = jnp.concatenate([y[:, k:], y[:, :k] * 0.5], axis=1)
            elif op == "pad":
                y = slicing.pad(y, 0.25, ((1, 1, 0), (2, 2, 1)))[1:-1, 2:-2:2]
            elif op == "gather":  # repeats, and -1 / n + 3 clamped
                idx = np.array([(3 * i + 1) % n for i in range(n - 2)] + [-1, n + 3], np.int32)
                y = indexing.gather(y, idx[:, None], (0,))
            elif op == "cumsum":
                y = scan.cumsum(y, 1, reverse=n % 2 == 0) * 0.2
            elif op == "argmax":
                hot = jnp.argmax(y, axis=-1)[:, None] == jnp.arange(m)
                y = y + hot.astype(jnp.float32)
            elif op == "tanh":
                y = jnp.tanh(y)
            elif op == "sum_keep":
                y = y - jnp.sum(y, axis=-1, keepdims=True) / m
            elif op == "T":
                y = y.T
        return jnp.sum(y * y)

    p = run_passes(nova.make_program(nova.value_and_grad(f))(x))
    assert "host:" not in fuse(p).as_text()
    for g, w in zip(compile_program(p)([x]), run_program(p, [x]), strict=True):
        # float32 sums in another order: errors scale with the largest magnitude involved.
        assert_close(g, w, rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(w).max())))


def test_row_values_are_never_read_at_another_row():
    # rev/slice/pad of a value computed from per-row sums would need other rows' sums: the
    # reduction stays in its own kernel.
    x = _rng(27).standard_normal((4, 8)).astype(np.float32)
    _compiled(lambda x: jnp.flip(x - jnp.sum(x, -1, keepdims=True), 0) * 2.0, x)
    _compiled(lambda x: jnp.sum(jnp.concatenate([x[1:], x[:1]]) ** 2), x, grad=True)


def test_small_constants_are_globals_large_ones_host_buffers():
    x = _rng(28).standard_normal((64, 80)).astype(np.float32)
    small = np.arange(80, dtype=np.float32)
    fp, _ = _compiled(lambda x: x * small, x)
    assert _kinds(fp) == ["loop"]
    big = np.linspace(0, 1, 64 * 80, dtype=np.float32).reshape(64, 80)
    fp, _ = _compiled(lambda x: x * big, x)
    assert "host:constant" in fp.as_text()


# --- sort -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 7, 16, 33])
@pytest.mark.parametrize("dimension", [0, 1])
def test_sort_is_stable_with_numpy_nan_order(n, dimension):
    rng = _rng(29)
    x = rng.integers(-3, 3, (n, n + 2) if dimension == 0 else (4, n)).astype(np.float32)
    x.reshape(-1)[::5] = np.nan  # NaNs last
    x.reshape(-1)[1::7] = -0.0  # equal to 0.0: ties keep their order
    pos = np.broadcast_to(np.arange(x.shape[dimension], dtype=np.int32).reshape(
        (-1, 1) if dimension == 0 else (1, -1)), x.shape).copy()
    fp, (keys, perm) = _compiled(
        lambda x, p: tuple(sort_p.bind(x, p, dimension=dimension, num_keys=1)), x, pos)
    assert _kinds(fp) == ["sort"]
    want = np.argsort(x, axis=dimension, kind="stable").astype(np.int32)
    np.testing.assert_array_equal(perm, want)


def test_sort_two_keys_int_bool_half_and_argsort():
    rng = _rng(30)
    k1 = rng.integers(0, 3, (5, 40)).astype(np.int32)
    k2 = rng.standard_normal((5, 40)).astype(np.float16)
    v = rng.standard_normal((5, 40)) > 0
    fp, outs = _compiled(lambda a, b, c: tuple(sort_p.bind(a, b, c, dimension=1, num_keys=2)),
                         k1, k2, v)
    assert _kinds(fp) == ["sort"]
    fp, (idx,) = _compiled(lambda x: (jnp.argsort(x, axis=-1),), k2.astype(np.float32))
    assert "host:" not in fp.as_text()
    np.testing.assert_array_equal(idx, np.argsort(k2.astype(np.float32), -1, kind="stable"))


def test_sort_gradient_and_large_threaded_sort():
    rng = _rng(31)
    x = rng.standard_normal((8, 24)).astype(np.float32)
    fp, _ = _compiled(lambda x: jnp.sum(jnp.sort(x, axis=1)[:, :5] ** 2), x, grad=True)
    assert "host:" not in fp.as_text()
    big = rng.standard_normal((64, 1500)).astype(np.float32)
    _, (out,) = _compiled(lambda x: jnp.sort(x * 2.0, axis=1), big)
    np.testing.assert_array_equal(out, np.sort(big * 2.0, axis=1))
