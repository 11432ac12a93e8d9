"""GPU kernels to PTX: target names, the `gpu.module` wrapper, the NVVM pipeline, `ptxas -v`.

Route (../shared/MLIR_NOTES.md §4): each kernel is a `gpu.module` carrying
`#nvvm.target<chip = "sm_XX", features = "+ptxNN">`; GPU_PIPELINE lowers it to NVVM with bare
pointer arguments (static shapes) and `gpu-module-to-binary{format=isa}` emits PTX through LLVM's
NVPTX back end (no GPU and no ptxas needed). Many kernels compile in one MLIR module, one
`gpu.binary` per kernel. `ptxas -v` (when on PATH) reports registers and shared memory.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading

from nova.core.errors import CompilerError

# Inside gpu.module: scf -> cf first (else "LLVM Translation failed ... unrealized_conversion"),
# memref subviews/affine maps expanded, nvgpu (mma.sync) before gpu -> nvvm, vector -> llvm,
# then nvvm -> llvm (wgmma and fence.proxy become inline PTX there; LLVM cannot translate them).
GPU_PIPELINE = (
    "builtin.module(gpu.module(convert-scf-to-cf,expand-strided-metadata,lower-affine,"
    "convert-nvgpu-to-nvvm,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true},"
    "convert-vector-to-llvm,convert-nvvm-to-llvm,reconcile-unrealized-casts),"
    "gpu-module-to-binary{format=isa})"
)

# The PTX ISA version each architecture needs (PTX ISA guide, "Release history"); LLVM's
# default (+ptx60) cannot target sm_90 and aborts the process (MLIR_NOTES.md §4).
_PTX_FEATURES = {"sm_80": "+ptx80", "sm_86": "+ptx80", "sm_89": "+ptx80", "sm_90": "+ptx80",
                 "sm_90a": "+ptx80", "sm_100": "+ptx86", "sm_120": "+ptx87"}

_lock = threading.Lock()


def parse_target(target: str) -> str:
    """The architecture of a CUDA target string: "cuda:sm_90" -> "sm_90".

    Raises ValueError for anything else (naming the supported architectures)."""
    if not isinstance(target, str) or not target.startswith("cuda:"):
        raise ValueError(f"a CUDA target looks like 'cuda:sm_90', got {target!r}")
    arch = target.split(":", 1)[1]
    if arch not in _PTX_FEATURES:
        raise ValueError(f"unsupported CUDA architecture {arch!r} in target {target!r}; "
                         f"supported: {sorted(_PTX_FEATURES)}")
    return arch


def wrap_module(name: str, body: str, arch: str) -> str:
    """The `gpu.module @name` holding one kernel's globals and gpu.func, for architecture arch."""
    return (f"  gpu.module @{name} [#nvvm.target<chip = \"{arch}\", features = "
            f"\"{_PTX_FEATURES[arch]}\">] {{\n{body}\n  }}")


def compile_to_ptx(modules: dict, *, dump_dir: str | None = None, what: str = "kernels") -> dict:
    """{name: PTX text} for {name: gpu.module text} (each from `wrap_module`), in one MLIR module.

    Raises CompilerError naming the kernels, the failing stage and a dump of the MLIR."""
    from nova.compiler.bindings import load_mlir

    load_mlir()
    from mlir import ir, passmanager
    from mlir.dialects import gpu

    text = ("module attributes {gpu.container_module} {\n" + "\n".join(modules.values())
            + "\n}\n")
    work = dump_dir or tempfile.mkdtemp(prefix="nova-cuda-")
    os.makedirs(work, exist_ok=True)
    src = os.path.join(work, f"cuda-{hashlib.sha256(text.encode()).hexdigest()[:16]}.mlir")
    with open(src, "w") as f:
        f.write(text)
    stage = "parse"
    out: dict[str, str] = {}
    with _lock, ir.Context():
        try:
            module = ir.Module.parse(text)
            stage = "verify"
            module.operation.verify()
            stage = "lower to PTX"
            passmanager.PassManager.parse(GPU_PIPELINE).run(module.operation)
            for op in module.body.operations:
                if op.operation.name != "gpu.binary":
                    continue
                sym = ir.StringAttr(op.attributes["sym_name"]).value
                for a in op.attributes["objects"]:
                    out[sym] = bytes(gpu.ObjectAttr(a).object).decode()
        except Exception as e:  # noqa: BLE001 - rethrown naming the kernels and the stage
            raise CompilerError(f"cuda codegen of {what} failed in stage '{stage}': {e}\n"
                                f"  MLIR: {src}") from None
    missing = [n for n in modules if n not in out]
    if missing:
        raise CompilerError(f"cuda codegen produced no PTX for {missing}\n  MLIR: {src}")
    if dump_dir is None:  # success: the scratch MLIR is not named by any error
        shutil.rmtree(work, ignore_errors=True)
    if dump_dir:
        for n, ptx in out.items():
            with open(os.path.join(dump_dir, n + ".ptx"), "w") as f:
                f.write(ptx)
    return out


def ptxas_available() -> bool:
    return shutil.which("ptxas") is not None


def ptxas_info(ptx: str, arch: str) -> dict:
    """Assembles `ptx` with `ptxas -v -arch=arch`; {"registers", "shared_bytes", "spill_bytes",
    "stack_bytes", "advisories"} for its (single) entry, advisories being ptxas's numbered
    performance notes, e.g. "(C7517) warpgroup.wait is injected ..." where code reads wgmma
    accumulators before their wait. Raises CompilerError with ptxas's message on failure,
    FileNotFoundError when ptxas is not on PATH."""
    exe = shutil.which("ptxas")
    if exe is None:
        raise FileNotFoundError("ptxas is not on PATH")
    with tempfile.TemporaryDirectory(prefix="nova-ptxas-") as d:
        path = os.path.join(d, "k.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        res = subprocess.run([exe, "-v", f"-arch={arch}", path, "-o", os.path.join(d, "k.cubin")],
                             capture_output=True, text=True)
    log = res.stdout + res.stderr
    if res.returncode != 0:
        raise CompilerError(f"ptxas -arch={arch} rejected the PTX:\n{log.strip()}")
    regs = re.search(r"Used (\d+) registers", log)
    smem = re.search(r"(\d+) bytes smem", log)
    spill = re.search(r"(\d+) bytes spill stores", log)
    stack = re.search(r"(\d+) bytes stack frame", log)
    return {"registers": int(regs.group(1)) if regs else 0,
            "shared_bytes": int(smem.group(1)) if smem else 0,
            "spill_bytes": int(spill.group(1)) if spill else 0,
            "stack_bytes": int(stack.group(1)) if stack else 0,
            "advisories": re.findall(r"\(C7\d+\)[^\n]*", log)}
