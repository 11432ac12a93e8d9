"""LLVM IR -> object file through LLVM's C API with Nova's pass pipeline, and the link step
(codegen/cpu/object_code.py, compile.py)."""

import ctypes
import subprocess

import numpy as np
import pytest

import nova
import nova.numpy as jnp
from nova.compiler import cache
from nova.compiler.codegen.cpu import compile as cc
from nova.compiler.codegen.cpu import object_code
from nova.core.errors import CompilerError

AXPY = """
define void @axpy(ptr %x, ptr %y, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %px = getelementptr float, ptr %x, i64 %i
  %py = getelementptr float, ptr %y, i64 %i
  %a = load float, ptr %px
  %b = load float, ptr %py
  %m = fmul float %a, 2.0
  %s = fadd float %m, %b
  store float %s, ptr %py
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
"""


def _native():
    native = object_code.llvm()
    if native is None:
        pytest.skip(f"LLVM C API not available: {object_code._llvm_error}")
    return native


def test_emit_object_compiles_and_runs(tmp_path):
    native = _native()
    obj, so = str(tmp_path / "k.o"), str(tmp_path / "k.so")
    native.emit_object(AXPY, obj, object_code.OPT_PIPELINE)
    subprocess.run(["gcc", "-shared", "-o", so, obj], check=True)
    fn = ctypes.CDLL(so).axpy
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    x = np.arange(37, dtype=np.float32)
    y = np.ones(37, np.float32)
    fn(x.ctypes.data, y.ctypes.data, 37)
    np.testing.assert_array_equal(y, 2 * np.arange(37, dtype=np.float32) + 1)


def test_emit_object_reports_llvm_errors(tmp_path):
    native = _native()
    with pytest.raises(RuntimeError, match="parsing the LLVM IR"):
        native.emit_object("define void @f( {", str(tmp_path / "a.o"), object_code.OPT_PIPELINE)
    with pytest.raises(RuntimeError, match="no-such-pass"):
        native.emit_object(AXPY, str(tmp_path / "b.o"), "function(no-such-pass)")


def test_a_bad_pipeline_is_a_compiler_error_naming_the_stage(tmp_path, monkeypatch):
    _native()
    monkeypatch.setenv("NOVA_LLVM_PIPELINE", "function(no-such-pass)")
    text = "module {\n  func.func @k_p(%a: memref<4xf32>) {\n    return\n  }\n}\n"
    with pytest.raises(CompilerError, match=r"(?s)stage 'llvm'.*no-such-pass"):
        cc.compile_to_shared_library(text, ["k_p"], str(tmp_path / "p.so"), what="kernel k_p")


def test_the_pipeline_is_part_of_the_cache_key(monkeypatch):
    monkeypatch.delenv("NOVA_LLVM_PIPELINE", raising=False)
    assert object_code.pipeline() == object_code.OPT_PIPELINE
    default = cache.host_target()
    monkeypatch.setenv("NOVA_LLVM_PIPELINE", "default<O3>")
    assert object_code.pipeline() == "default<O3>"
    assert cache.host_target() != default


def test_the_usable_cores_are_part_of_the_cache_key(monkeypatch):
    # Kernels split their loops over host_device().cores threads: a process limited to one core
    # (taskset) must not load the executable a two-core process cached, nor the reverse.
    import dataclasses

    from nova.compiler.codegen.cpu import matmul

    dev = matmul.host_device()
    default = cache.host_target()
    monkeypatch.setattr(matmul, "host_device",
                        lambda: dataclasses.replace(dev, cores=dev.cores + 1))
    assert cache.host_target() != default


@pytest.mark.parametrize("route", ["c-api", "execution-engine"])
def test_both_routes_compute_the_same_program(route, monkeypatch, tmp_path):
    """Kernels through the C API, and through MLIR's ExecutionEngine where it is missing."""
    if route == "execution-engine":
        monkeypatch.setattr(object_code, "llvm", lambda: None)
    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path))
    cache.clear_memory()
    misses = cache.stats["misses"]
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 48)).astype(np.float32)
    w = rng.standard_normal((48, 40)).astype(np.float32)

    def f(x, w):
        h = jnp.tanh(x @ w + 0.5)
        return jnp.sum(h * h, axis=-1) - jnp.max(h, axis=-1)

    got = np.asarray(nova.jit(f)(x, w))
    assert cache.stats["misses"] > misses  # compiled here, through this route
    h = np.tanh(x.astype(np.float64) @ w + 0.5)
    np.testing.assert_allclose(got, (h * h).sum(-1) - h.max(-1), rtol=2e-5, atol=2e-5)


def test_link_commands_try_ld_then_gcc(monkeypatch):
    monkeypatch.setattr(cc.shutil, "which", lambda name: "/usr/bin/ld" if name == "ld" else None)
    monkeypatch.setattr(cc, "_libgcc", lambda: "/usr/lib/gcc/libgcc.a")
    cmds = cc.link_commands("k.o", "k.so", "/opt/omp")
    assert [c[0] for c in cmds] == ["ld", "gcc"]
    assert cmds[0][-5:] == ["/usr/lib/gcc/libgcc.a", "-L/opt/omp", "-liomp5", "-rpath", "/opt/omp"]
    assert "defs" in cmds[0]  # an undefined symbol fails the link, so gcc gets its turn
    assert "-Wl,-rpath,/opt/omp" in cmds[1]
    monkeypatch.setattr(cc.shutil, "which", lambda name: None)
    assert [c[0] for c in cc.link_commands("k.o", "k.so", None)] == ["gcc"]


def test_a_failing_first_linker_falls_back(monkeypatch, tmp_path):
    real = cc.link_commands
    monkeypatch.setattr(cc, "link_commands",
                        lambda obj, out, omp: [["false"], *real(obj, out, omp)])
    text = ("module {\n  func.func @k_fb(%a: memref<4xf32>) {\n"
            "    %c = arith.constant 3.0 : f32\n    %i = arith.constant 0 : index\n"
            "    memref.store %c, %a[%i] : memref<4xf32>\n    return\n  }\n}\n")
    so = str(tmp_path / "fb.so")
    cc.compile_to_shared_library(text, ["k_fb"], so, what="kernel k_fb")
    fn = cc.load_function(so, "k_fb", 1)
    a = np.zeros(4, np.float32)
    fn(a.ctypes.data)
    assert a.tolist() == [3.0, 0.0, 0.0, 0.0]
    monkeypatch.setattr(cc, "link_commands", lambda obj, out, omp: [["false"], ["false"]])
    with pytest.raises(CompilerError, match="linking kernel k_fb failed: false: ; false: "):
        cc.compile_to_shared_library(text, ["k_fb"], str(tmp_path / "x.so"), what="kernel k_fb")
    assert not (tmp_path / "x.so").exists()


@pytest.mark.parametrize("verify_each_pass", [True, False])
def test_kernels_lower_with_and_without_per_pass_verification(verify_each_pass, monkeypatch,
                                                               tmp_path):
    """The lowering checks the module after every pass only with `verify_passes` (the test
    suite's setting); without it the result is still verified once. Both compile the same
    kernels."""
    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path))
    cache.clear_memory()
    old = nova.config.read("verify_passes")
    nova.config.update("verify_passes", verify_each_pass)
    try:
        assert cc._verify_each_pass() is verify_each_pass
        misses = cache.stats["misses"]
        x = np.random.default_rng(5).standard_normal((33, 70)).astype(np.float32)
        got = np.asarray(nova.jit(lambda x: nova.nn.softmax(x * 1.5, axis=-1))(x))
        assert cache.stats["misses"] > misses
    finally:
        nova.config.update("verify_passes", old)
    e = np.exp(1.5 * x.astype(np.float64) - (1.5 * x).max(-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=2e-6, atol=1e-7)


def test_kernels_needing_libgcc_helpers_load(tmp_path, monkeypatch):
    """float64 -> float16 is a libgcc call (`__truncdfhf2`) on hosts without AVX-512 FP16: the
    library must carry it (found by review: an ld link without libgcc loaded with an undefined
    symbol)."""
    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path))
    cache.clear_memory()
    x = np.array([1.5, -2.25, 70000.0, 1e-8, np.nan, -0.0, 6.1e-5], np.float64)
    got = np.asarray(nova.jit(lambda a: (a.astype(jnp.float16) * 2).astype(jnp.float64))(x))
    with np.errstate(over="ignore"):  # 70000 -> inf in float16, as intended
        want = (x.astype(np.float16) * 2).astype(np.float64)
    np.testing.assert_array_equal(got, want)
