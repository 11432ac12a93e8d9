"""Packaging: `import nova` is fast and MLIR-free; the MLIR and CUDA bindings import when asked."""

import os
import subprocess
import sys

import numpy as np
import pytest



def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120).stdout


def test_import_nova_does_not_import_mlir_and_is_fast():
    # Importing nova never needs MLIR; with the interpreter backend, neither does running ops.
    out = _run(
        "import os; os.environ['NOVA_BACKEND'] = 'interpreter'; "
        "import sys, time; t = time.perf_counter(); import nova, nova.numpy as jnp; "
        "dt = time.perf_counter() - t; x = jnp.ones(3) * 2; "
        "print(any(m == 'mlir' or m.startswith('mlir.') for m in sys.modules), dt, float(x.sum()))"
    )
    imported, dt, total = out.split()
    assert imported == "False"
    assert float(total) == 6.0
    assert float(dt) < 5.0  # generous: the machine is shared; typical is well under a second


def test_warm_kernel_cache_runs_without_importing_mlir(tmp_path):
    """A machine with a warm kernel cache runs compiled kernels without importing MLIR."""
    code = (
        "import sys, numpy as np, nova, nova.numpy as jnp; "
        "f = nova.jit(lambda x: jnp.tanh(x) * 2.0 + 1.0); y = f(np.ones((4, 8), np.float32)); "
        "print(any(m == 'mlir' or m.startswith('mlir.') for m in sys.modules), float(y.sum()))"
    )
    env = dict(os.environ, NOVA_CACHE_DIR=str(tmp_path), NOVA_BACKEND="compiled")
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                           check=True, timeout=300).stdout.split()
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, check=True, timeout=300).stdout.split()
    assert first[0] == "True" and second[0] == "False"
    assert float(first[1]) == float(second[1]) == pytest.approx(32 * (2 * np.tanh(1) + 1))


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
