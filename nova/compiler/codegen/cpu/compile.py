"""Compiles MLIR text of CPU kernels into a shared library and loads its functions with ctypes.

Route (MLIR_NOTES.md §3, route A): parse, lower with CPU_PIPELINE, JIT with ExecutionEngine at
-O3 for the host CPU with position-independent code, dump the object file, link it with the
system `gcc -shared` into a .so. Kernels take bare pointers (static shapes;
`use-bare-ptr-memref-call-conv`), so a kernel is a plain C function `void k(void*, ...)` that a
later process loads with ctypes without importing MLIR.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile
import threading

from nova.core.errors import CompilerError

# Ops of the `math` dialect that LLVM has no intrinsic for are first expanded (tanh, sinh, ...)
# or turned into libm calls; `finalize-memref-to-llvm` must precede `convert-scf-to-cf` when
# OpenMP regions are present (MLIR_NOTES.md §2), and `convert-ub-to-llvm` is required (§1).
CPU_PIPELINE = (
    "builtin.module("
    "canonicalize,cse,math-expand-ops,convert-vector-to-scf,lower-affine,"
    "expand-strided-metadata,finalize-memref-to-llvm,convert-scf-to-cf,"
    "convert-math-to-llvm,convert-math-to-libm,convert-vector-to-llvm,convert-arith-to-llvm,"
    "convert-index-to-llvm,convert-ub-to-llvm,convert-cf-to-llvm,"
    "convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},convert-arith-to-llvm,"
    "reconcile-unrealized-casts)"
)

_lock = threading.Lock()


def compile_to_shared_library(text: str, func_names: list[str], so_path: str, *,
                              dump_dir: str | None = None, what: str = "kernels") -> None:
    """Compiles the MLIR module `text` defining `func_names` into the shared library `so_path`.

    The library is written atomically (temporary file + rename). Raises CompilerError naming the
    kernels, the failing stage and the path of a dump of the MLIR.
    """
    from nova.compiler.bindings import load_mlir

    load_mlir()
    from mlir import ir, passmanager
    from mlir.execution_engine import ExecutionEngine

    work = tempfile.mkdtemp(prefix="nova-cc-")
    src_path = os.path.join(dump_dir or work, f"{os.path.basename(so_path)}.mlir")
    if dump_dir:
        os.makedirs(dump_dir, exist_ok=True)
    with open(src_path, "w") as f:
        f.write(text)
    stage = "parse"
    with _lock, ir.Context() as ctx:
        ctx.allow_unregistered_dialects = False
        try:
            module = ir.Module.parse(text)
            stage = "verify"
            module.operation.verify()
            stage = "lower"
            passmanager.PassManager.parse(CPU_PIPELINE).run(module.operation)
            if dump_dir:
                with open(os.path.join(dump_dir, f"{os.path.basename(so_path)}.llvm.mlir"), "w") as f:
                    f.write(str(module))
            stage = "llvm"
            engine = ExecutionEngine(module, opt_level=3, enable_pic=True)
            for name in func_names:
                engine.raw_lookup(name)
            obj = os.path.join(work, "k.o")
            engine.dump_to_object_file(obj)
        except Exception as e:  # noqa: BLE001 - rethrown with the kernel and stage named
            raise CompilerError(
                f"compiling {what} failed in stage '{stage}': {e}\n  MLIR: {src_path}"
            ) from None
    tmp_so = so_path + f".tmp{os.getpid()}"
    res = subprocess.run(["gcc", "-shared", "-o", tmp_so, obj, "-lm"], capture_output=True,
                         text=True)
    if res.returncode != 0:
        raise CompilerError(f"linking {what} failed: {res.stderr.strip()}\n  MLIR: {src_path}")
    os.replace(tmp_so, so_path)


def load_function(so_path: str, name: str, nargs: int):
    """A ctypes function `void name(void*, ...)` from a compiled library."""
    lib = ctypes.CDLL(so_path)
    fn = getattr(lib, name)
    fn.argtypes = [ctypes.c_void_p] * nargs
    fn.restype = None
    return fn
