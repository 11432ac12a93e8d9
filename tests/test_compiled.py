"""The compiled CPU backend: every primitive and fused programs against the reference interpreter;
fusion counts; the kernel cache (same process, second process, corruption, concurrency)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nova
import nova.numpy as jnp
from nova.compiler import cache
from nova.compiler.backend_cpu import compile_program
from nova.compiler.fuse import fuse
from nova.compiler.pipeline import run_passes
from nova.core.interpreter import run_program
from nova.core.ir import Eqn, Program, TensorType, Var
from nova.core.primitive import all_primitives
from tests.helpers import assert_close, loop_vector_width
from tests.prim_examples import all_examples

PRIMS = all_primitives()
EXAMPLES = all_examples()


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    d = tmp_path_factory.getbasetemp() / "nova-cache"
    monkeypatch.setenv("NOVA_CACHE_DIR", str(d))


def _one_eqn_program(prim, args, params):
    params = prim.canonical_params(params)
    ins = [Var(TensorType(np.shape(a), np.asarray(a).dtype)) for a in args]
    t = prim.abstract_eval([v.type for v in ins], **params)
    outs = [Var(x) for x in (t if prim.multiple_results else [t])]
    return Program(ins, [Eqn(prim, ins, params, outs)], outs)


def _tolerance(out):
    return 1e-5 if out.dtype == np.float32 else 1e-12


@pytest.mark.parametrize("name", sorted(PRIMS))
def test_every_primitive_compiled_matches_interpreter(name):
    prim = PRIMS[name]
    for k, ex in enumerate(EXAMPLES[name]):
        args, params = ex(np.random.default_rng(k))
        args = [np.asarray(a) for a in args]
        # float32 variants of float64 examples exercise the vector paths too.
        variants = [args]
        # (The control-flow primitives' Regions fix their operands' dtypes.)
        if any(a.dtype == np.float64 for a in args) and name not in (
                "convert_element_type", "scan", "while", "cond"):
            variants.append([a.astype(np.float32) if a.dtype == np.float64 else a for a in args])
        for vargs in variants:
            p = _one_eqn_program(prim, vargs, params)
            exe = compile_program(p)
            got = exe(vargs)
            want = run_program(p, vargs)
            for g, w in zip(got, want, strict=True):
                assert g.dtype == w.dtype and g.shape == w.shape
                assert_close(g, w, rtol=_tolerance(w), atol=_tolerance(w))


def _softmax(x):
    m = jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(x - m)
    return e / jnp.sum(e, axis=-1, keepdims=True)


def _layer_norm(x, g, b):
    mu = jnp.mean(x, -1, keepdims=True)
    v = jnp.mean((x - mu) ** 2, -1, keepdims=True)
    return (x - mu) / jnp.sqrt(v + 1e-5) * g + b


def _fused(f, *args):
    p = run_passes(nova.make_program(f)(*args))
    return p, fuse(p)


def test_integer_division_edge_cases_do_not_trap():
    """INT_MIN // -1 and INT_MIN % -1 trap on x86 (SIGFPE killed the process, found by
    review): they give INT_MIN and 0, as the reference; x // 0 and x % 0 stay 0."""
    a = np.array([-2**31, 7, -7, 5, -2**31, 9], np.int32)
    b = np.array([-1, -1, 2, 0, 1, -1], np.int32)
    want_q = np.array([-2**31, -7, -4, 0, -2**31, -9], np.int32)
    want_r = np.array([0, 0, 1, 0, 0, 0], np.int32)
    for f in (nova.jit(lambda x, y: (x // y, x % y)), lambda x, y: (jnp.asarray(x) // y,
                                                                     jnp.asarray(x) % y)):
        q, r = f(a, b)
        np.testing.assert_array_equal(np.asarray(q), want_q)
        np.testing.assert_array_equal(np.asarray(r), want_r)
    big = np.full(37, -2**63, np.int64)  # a vector loop with a remainder, int64
    q = nova.jit(lambda x, y: x // y)(big, np.full(37, -1, np.int64))
    np.testing.assert_array_equal(np.asarray(q), big)


def test_float32_division_by_a_row_scalar_outside_the_reciprocal_range():
    """x / b over a per-row scalar b is computed as x * (1/b) only where 1/b is a normal float:
    a subnormal b gave inf (found by review), a huge b lost precision."""
    x = np.full(64, 1e-39, np.float32)
    np.testing.assert_array_equal(np.asarray(nova.jit(lambda v, s: v / s)(x, np.float32(1e-39))),
                                  np.ones(64, np.float32))
    scale = np.array([[1e-38], [1.0], [1.0], [1e-39], [1.0]], np.float32)
    rows = np.linspace(1, 2, 5 * 40, dtype=np.float32).reshape(5, 40) * scale
    d = np.array([[1e-39], [3.0], [3e38], [-2e-40], [7e37]], np.float32)
    got = np.asarray(nova.jit(lambda a, c: a / c)(rows, d))
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, rows / d, rtol=2.5e-7, atol=0)  # within about 1 ulp


def test_gradients_through_zero_size_arrays_compile():
    """A log_softmax over a (0, 3) product, sliced, differentiated: the reductions over empty
    axes are constants now (the kernels reading zero-size constants did not parse, found by
    review); the gradients are zeros of the arguments' shapes, as eagerly."""
    x, w, b = np.zeros((0, 5), np.float32), np.ones((5, 3), np.float32), np.ones(3, np.float32)

    def f(x, w, b):
        return jnp.sum(nova.nn.log_softmax(x @ w + b, axis=-1)[:, :1])

    got = nova.jit(nova.grad(f, argnums=(0, 1, 2)))(x, w, b)
    want = nova.grad(f, argnums=(0, 1, 2))(x, w, b)
    for g, e, a in zip(got, want, (x, w, b), strict=True):
        assert np.asarray(g).shape == a.shape
        np.testing.assert_array_equal(np.asarray(g), np.asarray(e))


def test_softmax_forward_is_one_kernel():
    x = np.random.default_rng(0).standard_normal((16, 128)).astype(np.float32)
    p, fp = _fused(_softmax, x)
    assert len(fp.kernels) == 1 and fp.kernels[0].kind == "loop"
    assert "reduce_max" in fp.as_text() and "reduce_sum" in fp.as_text()
    assert_close(compile_program(p)([x])[0], run_program(p, [x])[0], rtol=1e-6)


def test_layer_norm_forward_is_one_kernel():
    rng = np.random.default_rng(1)
    args = [rng.standard_normal((16, 64)).astype(np.float32),
            rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)]
    p, fp = _fused(_layer_norm, *args)
    assert len(fp.kernels) == 1
    assert_close(compile_program(p)(args)[0], run_program(p, args)[0], rtol=1e-5, atol=1e-5)


def test_log_softmax_and_its_gradient_compile_and_match():
    x = np.random.default_rng(2).standard_normal((8, 32)).astype(np.float32)

    def f(x):
        m = jnp.max(x, -1, keepdims=True)
        return jnp.sum((x - m - jnp.log(jnp.sum(jnp.exp(x - m), -1, keepdims=True))) ** 2)

    p = run_passes(nova.make_program(nova.value_and_grad(f))(x))
    fp = fuse(p)
    assert fp.count("host") == 0
    for g, w in zip(compile_program(p)([x]), run_program(p, [x]), strict=True):
        assert_close(g, w, rtol=1e-5, atol=1e-5)


def test_layer_norm_backward_matches():
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((8, 64)).astype(np.float32),
            rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)]
    f = nova.grad(lambda x, g, b: jnp.sum(_layer_norm(x, g, b) ** 2), argnums=(0, 1, 2))
    p = run_passes(nova.make_program(f)(*args))
    for g, w in zip(compile_program(p)(args), run_program(p, args), strict=True):
        assert_close(g, w, rtol=1e-4, atol=1e-4)


def test_jit_uses_compiled_backend_and_reports_kernels():
    nova.config.update("backend", "compiled")
    try:
        f = nova.jit(lambda x: _softmax(x) * 2.0)
        x = np.random.default_rng(4).standard_normal((4, 16)).astype(np.float32)
        c = f.lower(x).compile()
        assert "nova.kernel" in c.as_text()
        assert_close(f(x), 2 * np.exp(x - x.max(-1, keepdims=True)) / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True), rtol=1e-6)
        assert c.memory_analysis()["kernels"] == 1
        assert c.cost_analysis()["flops"] > 0
    finally:
        nova.config.update("backend", "interpreter")


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_hypothesis_random_programs_compiled_vs_interpreted(data):
    shape = data.draw(st.sampled_from([(4, 8), (3, 5), (2, 3, 16), (17,), (1, 32)]))
    ops = data.draw(st.lists(st.sampled_from(
        ["exp", "tanh", "mul", "add", "sum_keep", "max_keep", "T", "bcast", "sub_mean", "reshape"]),
        min_size=1, max_size=6))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    x = rng.standard_normal(shape).astype(np.float32)

    def f(x):
        y = x
        for op in ops:
            if op == "exp":
                y = jnp.exp(y * 0.1)
            elif op == "tanh":
                y = jnp.tanh(y)
            elif op == "mul":
                y = y * x if y.shape == x.shape else y * 2.0
            elif op == "add":
                y = y + 1.5
            elif op == "sum_keep":
                y = y - jnp.sum(y, axis=-1, keepdims=True) / y.shape[-1]
            elif op == "max_keep":
                y = y - jnp.max(y, axis=-1, keepdims=True)
            elif op == "T":
                y = y.T
            elif op == "bcast":  # a mean, not a sum: saturating tanh makes 1 - tanh^2 ill-conditioned
                y = y + jnp.mean(y, axis=0)
            elif op == "sub_mean":
                y = y - jnp.mean(y)
            elif op == "reshape":
                y = y.reshape(-1)
        return jnp.sum(y * y)

    p = run_passes(nova.make_program(nova.value_and_grad(f))(x))
    for g, w in zip(compile_program(p)([x]), run_program(p, [x]), strict=True):
        # float32 sums in another order: errors scale with the largest magnitude involved.
        assert_close(g, w, rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(w).max())))


def test_cache_hit_in_process_and_identical_kernels_compile_once():
    cache.clear_memory()
    before = dict(cache.stats)
    x = np.ones((6, 40), np.float32)
    p = run_passes(nova.make_program(lambda x: jnp.tanh(x) * 3.0 + 1.0)(x))
    compile_program(p)
    compile_program(p)
    assert cache.stats["memory_hits"] > before["memory_hits"]

    def two_layers(x):  # identical kernels twice in one program
        for _ in range(2):
            x = _softmax(x) * 2.0 + x
        return x
    q = run_passes(nova.make_program(two_layers)(x))
    misses = cache.stats["misses"]
    compile_program(q)
    kinds = {k.name for k in fuse(q).kernels}
    assert cache.stats["misses"] - misses <= len(kinds)


def _subprocess_compile(cache_dir, tag):
    code = textwrap.dedent(f"""
        import json, time, numpy as np, nova, nova.numpy as jnp
        from nova.compiler import cache
        from nova.compiler.backend_cpu import compile_program
        from nova.compiler.pipeline import run_passes
        x = np.ones((5, 48), np.float32)
        p = run_passes(nova.make_program(lambda x: jnp.exp(x - jnp.max(x, -1, keepdims=True)) * {tag})(x))
        t = time.perf_counter(); exe = compile_program(p); dt = time.perf_counter() - t
        print(json.dumps({{"stats": cache.stats, "dt": dt, "out": float(exe([x])[0].sum())}}))
    """)
    env = dict(os.environ, NOVA_CACHE_DIR=str(cache_dir))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_cache_hit_from_a_second_process(tmp_path):
    first = _subprocess_compile(tmp_path, 2.0)
    second = _subprocess_compile(tmp_path, 2.0)
    assert first["stats"]["misses"] >= 1 and second["stats"]["misses"] == 0
    assert second["stats"]["disk_hits"] >= 1
    assert second["out"] == first["out"] == pytest.approx(5 * 48 * 2.0)


def test_corrupted_cache_entry_is_dropped_and_rebuilt(tmp_path):
    _subprocess_compile(tmp_path, 3.0)
    libs = list((tmp_path / "cpu" / "lib").glob("*.so"))
    assert libs
    for lib in libs:
        lib.write_bytes(lib.read_bytes()[:100])  # truncated
    again = _subprocess_compile(tmp_path, 3.0)
    assert again["stats"]["corrupt"] >= 1 and again["stats"]["misses"] >= 1
    assert again["out"] == pytest.approx(5 * 48 * 3.0)


def test_two_processes_fill_one_cache_at_once(tmp_path):
    code = textwrap.dedent("""
        import numpy as np, nova, nova.numpy as jnp
        from nova.compiler.backend_cpu import compile_program
        from nova.compiler.pipeline import run_passes
        x = np.ones((7, 33), np.float32)
        p = run_passes(nova.make_program(lambda x: jnp.sin(x) * jnp.cos(x))(x))
        print(float(compile_program(p)([x])[0].sum()))
    """)
    env = dict(os.environ, NOVA_CACHE_DIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert float(out) == pytest.approx(7 * 33 * np.sin(1) * np.cos(1), rel=1e-5)


def test_read_only_cache_dir_falls_back_to_memory(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "cpu").mkdir()
    (ro / "cpu" / "lib").write_text("not a directory")  # makes the library dir unusable
    monkeypatch.setenv("NOVA_CACHE_DIR", str(ro))
    monkeypatch.setattr(cache, "_warned_readonly", False)
    x = np.ones((3, 19), np.float32)
    p = run_passes(nova.make_program(lambda x: jnp.exp(x) * 7.0)(x))
    with pytest.warns(UserWarning, match="in-memory"):
        exe = compile_program(p)
    assert_close(exe([x])[0], np.exp(x) * 7.0)


def test_log_compiles_names_trigger_and_cache(monkeypatch, caplog):
    monkeypatch.setenv("NOVA_LOG_COMPILES", "1")
    nova.config.update("backend", "compiled")
    try:
        f = nova.jit(lambda x: jnp.exp(x) * 5.0)
        with caplog.at_level("WARNING", logger="nova.compiler"):
            f(np.ones((3, 7), np.float32))
            f(np.ones((3, 8), np.float32))
    finally:
        nova.config.update("backend", "interpreter")
    text = caplog.text
    assert "triggered by: first call" in text
    assert "triggered by: argument 'x' changed" in text
    assert "nova codegen:" in text and "from cache" in text
    assert "canonicalize" in text  # time per pass


def test_compiler_error_names_kernel_stage_and_dump(tmp_path):
    from nova.compiler.codegen.cpu.compile import compile_to_shared_library
    from nova.core.errors import CompilerError

    bad = "module {\n  func.func @k_bad(%a: memref<4xf32>) {\n    %x = arith.addf %a, %a : f32\n    return\n  }\n}\n"
    with pytest.raises(CompilerError, match=r"(?s)k_bad.*stage 'parse'.*MLIR: .*\.mlir") as ei:
        compile_to_shared_library(bad, ["k_bad"], str(tmp_path / "k.so"), what="kernel k_bad")
    dump = str(ei.value).split("MLIR: ")[1].strip()
    assert os.path.exists(dump) and "k_bad" in open(dump).read()


def test_compiles_leave_no_scratch_files(tmp_path, monkeypatch):
    """Each compile's scratch folder (MLIR source, object file) is removed once the library is
    written; a failed one keeps only the MLIR its error names."""
    import tempfile

    from nova.compiler.codegen.cpu.compile import compile_to_shared_library
    from nova.core.errors import CompilerError

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    good = ("module {\n  func.func @k_ok(%a: memref<4xf32>) {\n    return\n  }\n}\n")
    compile_to_shared_library(good, ["k_ok"], str(tmp_path / "ok.so"), what="kernel k_ok")
    assert (tmp_path / "ok.so").exists()
    assert list(scratch.iterdir()) == []
    bad = good.replace("return", "%x = arith.addf %a, %a : f32\n    return")
    with pytest.raises(CompilerError) as ei:
        compile_to_shared_library(bad, ["k_ok"], str(tmp_path / "bad.so"), what="kernel k_ok")
    left = [str(p) for p in scratch.rglob("*") if p.is_file()]
    assert left == [str(ei.value).split("MLIR: ")[1].strip()]
    assert not (tmp_path / "bad.so").exists()


def _check_plan_no_overlap(exe):
    """No two simultaneously live planned buffers share bytes (checked over the launch list)."""
    plan = exe.plan
    first, last = {}, {}
    for n, launch in enumerate(exe.launches):
        for s in launch.outputs:
            first.setdefault(s, n)
        for s in launch.inputs:
            last[s] = n
    root = {s: plan.aliases.get(s, s) for s in first}
    spans = {}
    for s, r in root.items():
        if r in plan.offsets:
            a, b = spans.get(r, (first[s], last.get(s, first[s])))
            spans[r] = (min(a, first[s]), max(b, last.get(s, first[s])))
    items = [(plan.offsets[r], exe.slot_types[r].nbytes, *spans[r]) for r in spans]
    for i, (o1, n1, a1, b1) in enumerate(items):
        for o2, n2, a2, b2 in items[i + 1:]:
            if not (b1 < a2 or b2 < a1):  # live at the same time
                assert o1 + n1 <= o2 or o2 + n2 <= o1, "overlapping live buffers"
    return items


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 4), st.integers(0, 1000))
def test_memory_plan_property_no_live_overlap(depth, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    w = rng.standard_normal((32, 32)).astype(np.float32) * 0.2

    def f(x, w):
        for i in range(depth):
            x = jnp.tanh(x @ w) + _softmax(x) * (i + 1)
        return jnp.sum(x * x)

    p = run_passes(nova.make_program(nova.value_and_grad(f, argnums=(0, 1)))(x, w))
    exe = compile_program(p)
    items = _check_plan_no_overlap(exe)
    mem = exe.memory_analysis()
    assert mem["arena_bytes"] <= mem["temp_bytes_without_reuse"] + 64 * len(items)
    for g, want in zip(exe([x, w]), run_program(p, [x, w]), strict=True):
        assert_close(g, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))


def test_memory_plan_reuses_buffers_and_works_in_place():
    x = np.random.default_rng(5).standard_normal((64, 64)).astype(np.float32)
    w = np.eye(64, dtype=np.float32) * 0.5

    def chain(x, w):
        for _ in range(6):
            x = _softmax(x @ w) + 1.0  # matmul and softmax kernels; each input dies at its use
        return x

    p = run_passes(nova.make_program(chain)(x, w))
    exe = compile_program(p)
    mem = exe.memory_analysis()
    assert mem["arena_bytes"] < mem["temp_bytes_without_reuse"] / 2
    assert_close(exe([x, w])[0], run_program(p, [x, w])[0], rtol=1e-5)

    q = run_passes(nova.make_program(lambda x: jnp.exp(x * 2.0) * 3.0 + jnp.sin(x))(x))
    q2 = run_passes(nova.make_program(lambda x: jnp.tanh(jnp.sum(x, 0)) + jnp.exp(x) * 2.0)(x))
    for prog in (q, q2):
        e = compile_program(prog)
        _check_plan_no_overlap(e)
        assert_close(e([x])[0], run_program(prog, [x])[0], rtol=1e-5)


def _layer_norm(x, g, b):
    mu = jnp.mean(x, -1, keepdims=True)
    return (x - mu) / jnp.sqrt(jnp.mean((x - mu) ** 2, -1, keepdims=True) + 1e-5) * g + b


@pytest.mark.parametrize("name,fn,row_aliased", [
    # every pass over a row reads x at the index it computes: the output takes x's buffer
    ("layer_norm", lambda h, g, b: _layer_norm(h, g, b), True),
    ("log_softmax", lambda h, g, b: h - jnp.max(h, -1, keepdims=True) * g, True),
    # the output holds exp(h - max) during the sum pass and the last pass reads h too: a stash
    ("softmax_times_h", lambda h, g, b: _softmax(h) * h + b, False),
    # the last pass reads the row at other positions
    ("flipped_row", lambda h, g, b: jnp.flip(h, 1) - jnp.max(h, -1, keepdims=True), False),
])
def test_row_kernels_write_over_a_dying_input_only_when_safe(name, fn, row_aliased):
    """A row kernel may store its full-shape output over an input that dies there (the matmul
    result h) when every pass reads it at the index it computes (plan_memory.inplace_safe and
    the emitter's schedule["rows_in_place"]); results equal the reference either way."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((48, 64)).astype(np.float32)
    w = rng.standard_normal((64, 256)).astype(np.float32) * 0.2
    g, b = (rng.standard_normal(256).astype(np.float32) for _ in range(2))
    p = run_passes(nova.make_program(lambda x, w, g, b: fn(x @ w, g, b) @ w.T)(x, w, g, b))
    exe = compile_program(p)
    _check_plan_no_overlap(exe)
    rows = [l for l in exe.launches if l.kernel is not None and l.kernel.schedule.get("red_axes")]
    assert len(rows) == 1
    assert (rows[0].outputs[0] in exe.plan.aliases) == row_aliased
    got, want = exe([x, w, g, b])[0], run_program(p, [x, w, g, b])[0]
    assert_close(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


@pytest.mark.parametrize("kind", ["rows", "elementwise"])
def test_an_output_over_a_donated_input_leaves_it_for_the_other_outputs(kind):
    """Output 0 takes the donated z's buffer without reading z at its own index; output 1 reads
    z there. Every output is computed before the first store, so output 1 sees z (it read
    output 0's values instead: found by review, the elementwise case since the in-place
    rule's start)."""

    def rows(z, w):
        o1 = w - jnp.max(w, -1, keepdims=True)
        return o1, jnp.sin(z) * o1 + jnp.max(z, -1, keepdims=True)

    def elementwise(z, w):
        o1 = w * 2.0
        return o1, jnp.sin(z) + o1

    f = {"rows": rows, "elementwise": elementwise}[kind]
    rng = np.random.default_rng(0)
    z, w = (rng.standard_normal((64, 128)).astype(np.float32) for _ in range(2))
    want = [np.asarray(t) for t in nova.jit(f)(z, w)]
    donated = nova.jit(f, donate_argnums=(0,))
    assert donated.lower(z, w).compile()._exe.plan.aliases, "nothing was written in place"
    got = [np.asarray(t) for t in donated(jnp.asarray(z.copy()), jnp.asarray(w))]
    for g, x in zip(got, want, strict=True):
        assert_close(g, x, rtol=1e-6, atol=1e-6)


def test_donated_inputs_are_reused_in_place():
    from nova.compiler.plan_memory import inplace_safe

    f = nova.jit(lambda p, g: p - 0.1 * g, donate_argnums=0)
    p = jnp.ones((128, 128))
    c = f.lower(p, jnp.ones((128, 128))).compile()
    (launch,) = [l for l in c._exe.launches if l.fn is not None]
    assert inplace_safe(launch.kernel, 0, 0)
    out = f(p, jnp.ones((128, 128)))
    assert_close(out, np.full((128, 128), 0.9, np.float32))
    assert p.is_deleted()


def test_program_outputs_take_donated_buffers():
    """A training-style update writes its results over the donated inputs: the memory plan
    aliases the output slots to the input slots, the planned peak drops by their bytes, the
    caller's new Arrays are Nova's own (so the next call copies nothing) and keep the same
    buffers from step to step."""
    f = nova.jit(lambda p, m, g: (p - 0.1 * (m * 0.9 + g), m * 0.9 + g), donate_argnums=(0, 1))
    p, m, g = jnp.ones((256, 128)), jnp.zeros((256, 128)), jnp.ones((256, 128))
    c = f.lower(p, m, g).compile()
    exe = c._exe
    out_roots = {exe.plan.aliases.get(s) for s in exe.output_slots}
    assert out_roots == {0, 1}
    assert exe.memory_analysis()["in_place"] >= 2
    kept = nova.jit(lambda p, m, g: (p - 0.1 * (m * 0.9 + g), m * 0.9 + g)).lower(p, m, g)
    assert exe.plan.peak_bytes == kept.compile()._exe.plan.peak_bytes - 2 * 256 * 128 * 4

    p, m = f(p, m, g)
    assert p._owned and m._owned
    addresses = (p._value.ctypes.data, m._value.ctypes.data)
    want_p, want_m = np.full((256, 128), 0.9, np.float32), np.ones((256, 128), np.float32)
    for _ in range(3):
        p, m = f(p, m, g)
        want_m = want_m * 0.9 + 1.0
        want_p = want_p - 0.1 * want_m
    assert (p._value.ctypes.data, m._value.ctypes.data) == addresses
    assert_close(p, want_p, rtol=1e-5)
    assert_close(m, want_m, rtol=1e-5)


def test_a_donated_buffer_passed_twice_is_copied_before_it_is_written():
    """p's buffer is taken by the first result, and q is read by a later kernel: when the same
    Array is passed as both, the donated copy must not be the one both read."""
    rng = np.random.default_rng(3)
    f = nova.jit(lambda p, q: (p * 2.0 + 1.0, jnp.tanh((p * 2.0 + 1.0) @ q)), donate_argnums=0)
    x_np = (rng.standard_normal((64, 64)) * 0.1).astype(np.float32)
    x = nova.jit(lambda: jnp.asarray(x_np) + 0.0)()
    assert x._owned
    c = f.lower(x, x).compile()
    assert c._overwritten() == (0,)
    a, b = f(x, x)
    assert_close(a, x_np * 2 + 1, rtol=1e-6)
    assert_close(b, np.tanh((x_np * 2 + 1) @ x_np), rtol=1e-4, atol=1e-5)


def test_allocate_arena_alignment_and_pages():
    from nova.runtime.executable import SMALL_PAGE_ARENA_MIN, allocate_arena

    for n in (100, SMALL_PAGE_ARENA_MIN, SMALL_PAGE_ARENA_MIN + 12345):
        a = allocate_arena(n)
        assert a.dtype == np.uint8 and a.shape == (n,) and a.ctypes.data % 64 == 0
        a[:] = 7  # writable end to end
        assert int(a[-1]) == 7


def _resident_kib(address: int, nbytes: int) -> int | None:
    """KiB of the page-aligned range [address, address + nbytes) resident in memory, from
    mincore(2) (None where it is unavailable)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        mincore = libc.mincore
    except (OSError, AttributeError):
        return None
    mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    pages = -(-nbytes // 4096)
    vec = np.zeros(pages, np.uint8)
    if mincore(address, nbytes, vec.ctypes.data) != 0:
        return None
    return int((vec & 1).sum()) * 4


def test_a_large_arena_is_populated_in_the_background_without_losing_writes():
    import mmap
    import threading

    from nova.runtime import executable

    n = 4 * executable.SMALL_PAGE_ARENA_MIN
    with executable.populating_arenas():
        a = executable.allocate_arena(n)
    a[0] = a[n // 2] = 5  # written while the populating thread may still run
    for t in threading.enumerate():
        if t.name == "nova-arena-populate":
            t.join()
    assert int(a[0]) == 5 and int(a[n // 2]) == 5 and int(a[1]) == 0 and int(a[-1]) == 0
    probe = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    libc = executable._libc()
    addr = np.frombuffer(probe, np.uint8).ctypes.data
    if libc is None or libc.madvise(addr, 4096, executable.MADV_POPULATE_WRITE) != 0:
        pytest.skip("this kernel has no MADV_POPULATE_WRITE")
    rss = _resident_kib(a.ctypes.data, n)
    assert rss is not None and rss * 1024 >= n  # two pages touched here, every page resident
    b = executable.allocate_arena(n)  # outside populating_arenas: left to the first call
    b[0] = 1
    assert _resident_kib(b.ctypes.data, n) * 1024 < n // 4


def test_a_program_compiled_ahead_of_time_holds_no_arena_memory_until_called():
    """Only jit's call path populates a new arena; `.lower().compile()` leaves it untouched (found
    by review: a 256 MB arena was resident right after compile)."""
    import threading

    x = np.zeros((4096, 512), np.float32)
    w = np.zeros((512, 512), np.float32)
    f = nova.jit(lambda a, b: jnp.tanh(jnp.tanh(a @ b) @ b) @ b)
    c = f.lower(x, w).compile()
    for t in threading.enumerate():
        if t.name == "nova-arena-populate":
            t.join()
    arena = c._exe.arena
    assert arena is not None and arena.nbytes >= 8 << 20
    rss = _resident_kib(arena.ctypes.data, arena.nbytes)
    if rss is None:
        pytest.skip("no mincore")
    assert rss * 1024 < arena.nbytes // 4


def test_tracing_and_compiling_pause_the_garbage_collector():
    import gc

    seen = []

    def f(x):
        seen.append(gc.isenabled())
        return x * 2

    assert gc.isenabled()
    nova.jit(f)(np.ones(3, np.float32))
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        nova.jit(f)(np.ones(4, np.float32))
        assert not gc.isenabled()  # the caller's choice is kept
    finally:
        gc.enable()


def test_mlp_bias_gelu_in_matmul_epilogue_and_schedule():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((64, 96)).astype(np.float32)
    w = rng.standard_normal((96, 384)).astype(np.float32) * 0.1
    b = rng.standard_normal(384).astype(np.float32)

    def mlp(x, w, b):
        h = x @ w + b
        return 0.5 * h * (1 + jnp.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))

    p = run_passes(nova.make_program(mlp)(x, w, b))
    fp = fuse(p)
    assert len(fp.kernels) == 1 and fp.kernels[0].kind == "contraction"
    ops = fp.kernels[0].op_names()
    assert ops[0] == "dot_general" and "tanh" in ops and "add" in ops
    exe = compile_program(p)
    assert len([l for l in exe.launches if l.fn is not None]) == 1  # one native call
    assert_close(exe([x, w, b])[0], run_program(p, [x, w, b])[0], rtol=1e-4, atol=1e-5)


def test_loop_schedule_is_analytic_and_asserted():
    from nova.compiler.codegen.cpu.loops import MIN_THREADED_ELEMENTS
    from nova.compiler.codegen.cpu.matmul import host_device

    dev = host_device()
    big = np.ones((512, 256), np.float32)
    small = np.ones((4, 8), np.float32)
    for x, threads in ((big, dev.cores), (small, 1)):
        p = run_passes(nova.make_program(_softmax)(x))
        exe = compile_program(p)
        (launch,) = exe.launches
        sched = launch.kernel.schedule
        assert sched["iter_shape"] == x.shape and sched["red_axes"] == (1,)
        assert sched["threads"] == (threads if x.size >= MIN_THREADED_ELEMENTS else 1)
        # softmax's rows are arithmetic-bound (an exp per element): two SIMD registers per
        # step where the row holds whole pairs, else one, else half or a quarter of one
        assert sched["vector_width"] == loop_vector_width(x.shape[1], wide=True)
    # a transposed access along the innermost axis cannot be vectorized: scalar code
    p = run_passes(nova.make_program(lambda x: jnp.exp(x.T) * 2.0)(np.ones((16, 16), np.float32)))
    (launch,) = compile_program(p).launches
    assert launch.kernel.schedule["vector_width"] == 1


def _gelu_tanh(x):
    return 0.5 * x * (1 + jnp.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


@pytest.mark.parametrize("cols", [64, 24, 10])
def test_arithmetic_bound_elementwise_kernels_compute_two_registers_per_step(cols):
    """GELU-tanh (a rational polynomial per element) steps by two SIMD registers when its last
    axis is a multiple of that, falls back to one register (or half or a quarter of one) when
    it is not, and to scalar code for rows of 10; a cheap elementwise kernel starts at one
    register. Results match the interpreter either way."""
    x = np.random.default_rng(0).standard_normal((32, cols)).astype(np.float32) * 4
    for fn, wide in ((_gelu_tanh, True), (lambda v: v * 2.0 + 1.0, False)):
        p = run_passes(nova.make_program(fn)(x))
        exe = compile_program(p)
        (launch,) = exe.launches
        want = loop_vector_width(cols, wide)
        assert launch.kernel.schedule["vector_width"] == want
        assert_close(exe([x])[0], run_program(p, [x])[0], rtol=1e-5, atol=1e-6)


def test_dump_dir_has_programs_kernel_mlir_and_llvm_ir(tmp_path, monkeypatch):
    monkeypatch.setenv("NOVA_DUMP_DIR", str(tmp_path))
    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path / "cache"))
    x = np.ones((3, 11), np.float32)
    f = nova.jit(lambda x: jnp.exp(x) * 3.5 - 1.0)
    f(x)
    names = [p.name for p in tmp_path.iterdir()]
    assert any(n.endswith(".dce.mlir") for n in names)  # the Program after each pass
    so_mlir = [n for n in names if n.endswith(".so.mlir")]
    assert so_mlir and "func.func @k_" in (tmp_path / so_mlir[0]).read_text()
    assert any(n.endswith(".so.llvm.mlir") for n in names)  # after lowering
    ll = [n for n in names if n.endswith(".so.ll")]
    assert ll and "define void @k_" in (tmp_path / ll[0]).read_text()


def test_host_kernel_strided_output_feeds_native_kernels():
    # pad's reference returns a strided view (a crop); native kernels take bare pointers.
    def f(x):
        return (jnp.pad(x, ((1, 0), (0, 2))) ** 2).sum() + jnp.concatenate([x, x], 1).sum()

    x = np.random.default_rng(7).standard_normal((3, 4)).astype(np.float32)
    assert_close(nova.jit(nova.grad(f))(x), 2 * x + 2, rtol=1e-5)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_low_precision_sums_means_and_matmul_accumulate_in_float32(dtype):
    ones = jnp.ones(100_000, dtype)
    assert float(jnp.mean(ones)) == 1.0
    s = float(jnp.sum(jnp.ones(1000, dtype)))
    assert s == 1000.0
    rng = np.random.default_rng(8)
    a = rng.standard_normal((64, 256)).astype(np.float32)
    b = rng.standard_normal((256, 32)).astype(np.float32)
    exact = a.astype(dtype).astype(np.float64) @ b.astype(dtype).astype(np.float64)
    for backend in ("compiled", "interpreter"):
        nova.config.update("backend", backend)
        got = np.asarray(jnp.asarray(a, dtype) @ jnp.asarray(b, dtype), np.float64)
        rel = np.abs(got - exact).max() / np.abs(exact).max()
        assert rel < (4e-3 if dtype == jnp.bfloat16 else 5e-4), (backend, rel)
        v = np.asarray(jnp.var(jnp.asarray(a, dtype), axis=1), np.float64)
        assert_close(v, a.astype(dtype).astype(np.float64).var(1), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("move", [lambda h: jnp.flip(h, 0), lambda h: h.T,
                                  lambda h: jnp.roll(h, 3, 1), lambda h: h[::-1, 2:].sum(1)[:, None] + h])
def test_no_in_place_write_over_an_input_read_elsewhere(move):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((16, 16)).astype(np.float32)
    w = rng.standard_normal((16, 16)).astype(np.float32) * 0.3
    f = nova.jit(lambda x, w: (move(jnp.exp(x @ w)) * 2.0) @ w)
    got = np.asarray(f(x, w), np.float64)
    nova.config.update("backend", "interpreter")
    want = np.asarray(nova.jit(lambda x, w: (move(jnp.exp(x @ w)) * 2.0) @ w)(x, w), np.float64)
    assert_close(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def _f32_exp_expansions(text: str) -> int:
    """How many float32 exp expansions a kernel's text holds: each has one full path (a vector
    exp's behind its fast path's branch), whose 2^n scaling in two steps is the only i32 right
    shift in these kernels."""
    import re

    return len(re.findall(r"arith\.shrsi \S+, \S+ : (?:vector<\d+x)?i32>?", text))


def test_softmax_computes_each_exponential_once():
    """The row's exponentials are kept in the output during the sum pass and reloaded, so the
    kernel evaluates exp once per element (one exp expansion in the text)."""
    from nova.compiler.codegen.cpu.loops import emit_loop_kernel

    x = np.random.default_rng(10).standard_normal((64, 256)).astype(np.float32)
    p = run_passes(nova.make_program(_softmax)(x))
    (k,) = fuse(p).kernels
    text = emit_loop_kernel(k.name, k)
    assert _f32_exp_expansions(text) == 1
    assert_close(compile_program(p)([x])[0], run_program(p, [x])[0], rtol=1e-6)


def test_matmuls_of_different_shapes_share_one_generic_kernel():
    """Lone matmuls run a shape-generic kernel per (dtype, transposes) variant: two matmuls of
    different shapes call one compiled function with their own parameter vectors, and the
    executable cache round-trips those vectors."""
    from nova.compiler.backend_cpu import GENERIC_MATMULS

    if not GENERIC_MATMULS:
        pytest.skip("NOVA_GENERIC_MATMULS=0")
    rng = np.random.default_rng(8)
    # n of 64 and more: the register block of the largest GEMMs on AVX2 (6 x 16) and AVX-512
    # (6 x 64) hosts alike, so neither matmul shrinks it to its own shape
    x = rng.standard_normal((64, 32)).astype(np.float32)
    w1 = rng.standard_normal((32, 64)).astype(np.float32)
    w2 = rng.standard_normal((48, 128)).astype(np.float32)
    y = rng.standard_normal((64, 48)).astype(np.float32)

    def f(x, w1, w2, y):
        return x @ w1, y @ w2

    p = run_passes(nova.make_program(f)(x, w1, w2, y))
    exe = compile_program(p)
    mm_launches = [l for l in exe.launches if l.fn is not None and l.kernel.kind == "contraction"]
    assert len(mm_launches) == 2
    assert mm_launches[0].fn is mm_launches[1].fn
    params = [exe.constants[l.inputs[-1]] for l in mm_launches]
    assert [tuple(q[1:4]) for q in params] == [(64, 64, 32), (64, 128, 48)]
    for got, want in zip(exe([x, w1, w2, y]), (x @ w1, y @ w2), strict=True):
        assert_close(got, want, rtol=1e-4, atol=1e-4)
    from nova.compiler import executable_cache

    key = executable_cache.program_key(nova.make_program(f)(x, w1, w2, y))
    assert executable_cache.store(key, exe)
    again = executable_cache.load(key)
    assert {s: a.tolist() for s, a in again.constants.items()} == \
        {s: a.tolist() for s, a in exe.constants.items()}
    assert_close(again([x, w1, w2, y])[1], y @ w2, rtol=1e-4, atol=1e-4)


def _softmax_grad(w):
    def f(x):
        e = jnp.exp(x - jnp.max(x, -1, keepdims=True))
        return jnp.sum(e / jnp.sum(e, -1, keepdims=True) * w)

    return nova.grad(f)


@pytest.mark.parametrize("shape,dtype,expansions", [
    ((64, 256), np.float32, 1),        # one thread
    ((4, 96, 768), np.float32, 1),     # two kept axes, two threads (>= 64K elements)
    ((48, 40), np.float64, 1),
    ((3, 20000), np.float32, 4),       # rows over ROW_CACHE_MAX_ELEMENTS: evaluated per pass
])
def test_softmax_backward_keeps_its_exponentials_in_a_row_buffer(shape, dtype, expansions):
    """Softmax's backward reads e = exp(x - max) in three passes (the sum, the dot with the
    cotangent, the output): the first keeps e in a per-thread row buffer and the later ones load
    it, so exp is expanded once in the kernel text (4 times without the buffer)."""
    import re

    from nova.compiler.codegen.cpu.loops import emit_loop_kernel

    rng = np.random.default_rng(11)
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    w = rng.standard_normal(shape).astype(dtype)
    p = run_passes(nova.make_program(_softmax_grad(w))(x))
    loops = [k for k in fuse(p).kernels if k.kind == "loop"]
    assert len(loops) == 1
    text = emit_loop_kernel(loops[0].name, loops[0])
    found = _f32_exp_expansions(text)
    if dtype == np.float64:  # float64 exp stays math.exp (libm): count those instead
        found = text.count("math.exp ")
    assert found == expansions, found
    got = compile_program(p)([x])[0]
    xd, wd = x.astype(np.float64), w.astype(np.float64)
    e = np.exp(xd - xd.max(-1, keepdims=True))
    s = e / e.sum(-1, keepdims=True)
    want = s * (wd - (s * wd).sum(-1, keepdims=True))
    rtol = 1e-12 if dtype == np.float64 else 2e-6
    assert_close(got, want, rtol=rtol, atol=rtol * np.abs(want).max())


def _exp_cached_then_transposed(x):
    e = jnp.exp(x)
    s = e.sum(-1, keepdims=True)
    t = (e * x / s).sum(-1, keepdims=True)  # a second pass reads e: a row-buffer candidate
    return e.T * t  # ... and the output reads e at other rows


@pytest.mark.parametrize("fn", [
    _exp_cached_then_transposed,
    lambda x: jnp.exp(x) / jnp.exp(x).sum(-1, keepdims=True) + jnp.exp(x).T,
    lambda x: jnp.exp(x) / jnp.exp(x).sum(-1, keepdims=True) + jnp.flip(jnp.exp(x), -1),
    lambda x: (2 * x) / (2 * x).sum(-1, keepdims=True) + (2 * x).T,
], ids=["row_buffer_transposed", "stash_transposed", "stash_flipped", "stash_scaled"])
@pytest.mark.parametrize("n", [8, 16, 40])
def test_values_a_row_kernel_reads_at_other_indices_are_not_kept_per_row(fn, n):
    """A value the final pass also reads through a transpose or flip cannot live in the output
    (the stash) or in a per-row buffer: those hold only the current row, in the order it is
    written (found by review: relative errors of 0.93 and NaN)."""
    x = np.random.default_rng(n).standard_normal((n, n)).astype(np.float32)
    p = run_passes(nova.make_program(fn)(x))
    got = compile_program(p)([x])[0]
    want = run_program(p, [x.astype(np.float32)])[0]
    assert_close(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_float_to_int_casts_saturate_as_jax():
    """Out-of-range float -> int casts saturate at the type's range and NaN gives 0, compiled,
    eagerly and in the reference (a plain fptosi/fptoui of such a value is poison: x86
    saturated, the GPU simulator and the reference wrapped; found by review)."""
    vals = np.array([300.0, -5.0, 1e10, -1e10, np.nan, 255.9, -0.7, 2.5, -2.5, 3e9, -3e9,
                     2.0**31, -2.0**31, np.inf, -np.inf], np.float32)
    want = {np.uint8: [255, 0, 255, 0, 0, 255, 0, 2, 0, 255, 0, 255, 0, 255, 0],
            np.int32: [300, -5, 2**31 - 1, -2**31, 0, 255, 0, 2, -2, 2**31 - 1, -2**31,
                       2**31 - 1, -2**31, 2**31 - 1, -2**31],
            np.uint32: [300, 0, 2**32 - 1, 0, 0, 255, 0, 2, 0, 3000000000, 0, 2**31, 0,
                        2**32 - 1, 0]}
    for dt, w in want.items():
        for src in (vals, vals.astype(np.float64)):
            got = nova.jit(lambda x: x.astype(dt))(np.concatenate([src] * 3))  # vector + tail
            assert np.asarray(got).tolist() == w * 3, (dt, src.dtype)
        assert np.asarray(jnp.asarray(vals).astype(dt)).tolist() == w
        saved = nova.config.backend
        nova.config.update("backend", "interpreter")
        try:
            assert np.asarray(jnp.asarray(vals).astype(dt)).tolist() == w
        finally:
            nova.config.update("backend", saved)


@pytest.mark.parametrize("n", [2, 3, 7, 300])
def test_concatenate_of_many_operands_in_one_kernel(n):
    # the generated kernel picks each element's operand by a binary search of scf.if; 300
    # operands (im2col of a 17x17 kernel) once overflowed a linear chain's recursion
    rng = np.random.default_rng(n)
    parts = [rng.standard_normal((3, int(k))) for k in rng.integers(0, 4, n)]
    parts[0] = rng.standard_normal((3, 2))  # at least one non-empty operand
    f = nova.jit(lambda *ps: jnp.sin(jnp.concatenate(ps, axis=1)) * 2.0)
    np.testing.assert_allclose(np.asarray(f(*parts)), np.sin(np.concatenate(parts, 1)) * 2.0,
                               rtol=1e-14)
