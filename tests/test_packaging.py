"""Packaging: `import nova` is fast and MLIR-free; the MLIR and CUDA bindings import when asked."""

import subprocess
import sys



def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120).stdout


def test_import_nova_does_not_import_mlir_and_is_fast():
    out = _run(
        "import sys, time; t = time.perf_counter(); import nova, nova.numpy as jnp; "
        "dt = time.perf_counter() - t; x = jnp.ones(3) * 2; "
        "print(any(m == 'mlir' or m.startswith('mlir.') for m in sys.modules), dt, float(x.sum()))"
    )
    imported, dt, total = out.split()
    assert imported == "False"
    assert float(total) == 6.0
    assert float(dt) < 5.0  # generous: the machine is shared; typical is well under a second


def test_mlir_bindings_load_and_jit_a_function():
    from nova.compiler.bindings import load_mlir

    mlir = load_mlir()
    from mlir import ir
    from mlir.execution_engine import ExecutionEngine
    from mlir.passmanager import PassManager

    with ir.Context():
        m = ir.Module.parse("""
          func.func @twice(%x: f32) -> f32 attributes {llvm.emit_c_interface} {
            %r = arith.addf %x, %x : f32
            return %r : f32
          }""")
        PassManager.parse("builtin.module(convert-func-to-llvm,convert-arith-to-llvm,"
                          "reconcile-unrealized-casts)").run(m.operation)
        ee = ExecutionEngine(m, opt_level=2)
        import ctypes

        arg = ctypes.c_float(21.0)
        res = ctypes.c_float(0.0)
        ee.invoke("twice", ctypes.pointer(arg), ctypes.pointer(res))
        assert res.value == 42.0
    assert mlir.__name__ == "mlir"


def test_cuda_python_imports_without_a_gpu():
    from cuda.bindings import driver

    assert hasattr(driver, "cuInit")
