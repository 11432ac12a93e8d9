"""The executable cache: a compiled CPU program on disk, keyed by the traced Program.

The kernel cache (nova/compiler/cache.py) already spares a second process the LLVM compiles, but
not the passes, fusion, kernel synthesis and memory planning in front of them, which are most of
a warm first step. This cache stores their result -- the launch list, the memory plan, the
kernel-cache keys of its kernels -- under a key made of

    the traced Program's text (constants included, source lines excluded)
    + the donated inputs + the pass list + the config flags that change code + the target
    + a fingerprint of Nova's own source (any change to the compiler makes old entries miss),

so a process that traces the same program again builds its executable without running the
compiler: the passes run lazily only if something asks for the optimized Program
(`Lowered.as_text()`, `debug_nans`, `memory_analysis()`'s bytes saved for the backward).

Entries are JSON (no pickle) in `<NOVA_CACHE_DIR>/cpu/exe/`, written atomically (temporary file
+ rename) with a sha256 of their body checked on read; a corrupt entry, or one whose kernels have
left the kernel cache, is dropped and the program is compiled as if nothing was cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings

import numpy as np

from nova.compiler import cache
from nova.config import config
from nova.core import dtypes
from nova.core.errors import CompilerError
from nova.core.ir import Program, TensorType, parse_program, print_program
from nova.runtime.executable import describe_kernel

_fingerprint: str | None = None


def source_fingerprint() -> str:
    """sha256 over the text of every module of the `nova` package (computed once per process)."""
    global _fingerprint
    if _fingerprint is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        h = hashlib.sha256()
        for d, subdirs, files in os.walk(root):
            subdirs.sort()
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(d, name)
                    h.update(os.path.relpath(path, root).encode() + b"\0")
                    with open(path, "rb") as f:
                        h.update(f.read())
        _fingerprint = h.hexdigest()
    return _fingerprint


def program_key(program: Program, donated=(), target: str | None = None) -> str:
    """The cache key of compiling the traced `program` (see the module docstring)."""
    from nova.compiler.pipeline import PASSES

    h = hashlib.sha256()
    # The pass list is in the key too: a caller may run a modified pipeline (a pass left out to
    # compare against the unfused program) without changing Nova's source.
    passes = repr([(name, getattr(fn, "__module__", ""), getattr(fn, "__qualname__", repr(fn)))
                   for name, fn in PASSES])
    from nova.compiler.backend_cpu import GENERIC_MATMULS

    for part in (print_program(program, debug_info=False), repr(sorted(donated)), passes,
                 repr(config.code_key()), target or cache.host_target(), cache.CODEGEN_VERSION,
                 f"generic_matmuls={GENERIC_MATMULS}", source_fingerprint()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _path(key: str) -> str:
    return os.path.join(cache.cache_dir(), "cpu", "exe", key[:2], key + ".json")


def _type(t: TensorType) -> list:
    return [list(t.shape), dtypes.MLIR_NAME[t.dtype]]


def _untype(x) -> TensorType:
    return TensorType(tuple(x[0]), dtypes.FROM_MLIR[x[1]])


def store(key: str, exe) -> bool:
    """Writes `exe` (a CPUExecutable) under `key`; False when it cannot be described (a launch
    whose kernel is unknown) or the cache directory is not writable."""
    launches = []
    for launch in exe.launches:
        rec = {"name": launch.name, "inputs": list(launch.inputs),
               "outputs": list(launch.outputs), "out_types": [_type(t) for t in launch.out_types]}
        if launch.fn is not None:
            k = cache.key_of(launch.fn)
            if k is None:
                return False
            rec["kernel_key"] = k
            rec["what"] = launch.description or describe_kernel(launch.kernel)
        else:
            kernel = getattr(launch.host, "kernel", None)
            if kernel is None:
                return False
            rec["host_kind"] = kernel.kind
            rec["host_program"] = print_program(kernel.program, debug_info=False)
        launches.append(rec)
    plan = exe.plan
    body = {
        "n_inputs": exe.n_inputs, "output_slots": list(exe.output_slots), "text": exe.text,
        "costs": exe.costs, "memory": exe.memory,
        "slot_types": [[s, _type(t)] for s, t in sorted(exe.slot_types.items())],
        "plan": None if plan is None else {
            "offsets": [[s, o] for s, o in sorted(plan.offsets.items())],
            "aliases": [[s, a] for s, a in sorted(plan.aliases.items())],
            "arena_bytes": plan.arena_bytes, "peak_bytes": plan.peak_bytes,
            "naive_bytes": plan.naive_bytes},
        "launches": launches,
        "constants": [[s, a.dtype.str, a.tolist()] for s, a in sorted(exe.constants.items())],
    }
    try:
        text = json.dumps(body, default=_json_default)
    except TypeError:
        return False
    data = json.dumps({"sha256": hashlib.sha256(text.encode()).hexdigest(), "body": text})
    try:
        cache._atomic_write(_path(key), data.encode())
    except OSError:
        return False  # the kernel cache has already warned about an unusable directory
    return True


def _json_default(x):
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    raise TypeError(type(x).__name__)


def _drop(path: str, why: str) -> None:
    warnings.warn(f"nova: dropping executable cache entry {path}: {why}", stacklevel=3)
    try:
        os.remove(path)
    except OSError:
        pass


def load(key: str):
    """The CPUExecutable stored under `key`, or None (a miss; bad entries are dropped)."""
    path = _path(key)
    try:
        with open(path) as f:
            outer = json.load(f)
        text = outer["body"]
        if hashlib.sha256(text.encode()).hexdigest() != outer["sha256"]:
            raise ValueError("sha256 mismatch")
        body = json.loads(text)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        _drop(path, str(e))
        return None
    try:
        return _build(body)
    except _KernelGone:
        return None  # a kernel left the kernel cache: compile (and store) afresh
    except (KeyError, ValueError, TypeError, IndexError) as e:
        _drop(path, f"unreadable ({type(e).__name__}: {e})")
        return None


class _KernelGone(Exception):
    pass


def _build(body: dict):
    from nova.compiler.backend_cpu import _host_fn, _launcher
    from nova.compiler.codegen.cpu.compile import load_function, use_openmp_defaults
    from nova.compiler.kernel import Kernel
    from nova.compiler.plan_memory import MemoryPlan
    from nova.runtime.executable import CPUExecutable, Launch

    launches = []
    for rec in body["launches"]:
        out_types = [_untype(t) for t in rec["out_types"]]
        if "kernel_key" in rec:
            key = rec["kernel_key"]
            fn = cache.memory_get(key)
            if fn is None:
                entry = cache.disk_get(key)
                if entry is None:
                    raise _KernelGone(key)
                use_openmp_defaults()  # harmless for serial kernels; needed before a threaded one
                try:
                    fn = load_function(entry["so"], entry["symbol"], entry["nargs"])
                except (OSError, CompilerError) as e:
                    raise _KernelGone(key) from e
                cache.memory_put(key, fn)
            launches.append(Launch(rec["name"], rec["inputs"], rec["outputs"], out_types, fn,
                                   description=rec.get("what", "")))
        else:
            prog = parse_program(rec["host_program"])
            k = Kernel(rec["host_kind"], prog, list(prog.inputs), list(prog.outputs))
            launches.append(Launch(rec["name"], rec["inputs"], rec["outputs"], out_types, None,
                                   _host_fn(k)))
    plan = None
    if body["plan"] is not None:
        p = body["plan"]
        plan = MemoryPlan({s: o for s, o in p["offsets"]}, {s: a for s, a in p["aliases"]},
                          p["arena_bytes"], p["peak_bytes"], p["naive_bytes"])
    slot_types = {s: _untype(t) for s, t in body["slot_types"]}
    constants = {s: np.array(vals, np.dtype(dt)) for s, dt, vals in body.get("constants", [])}
    return CPUExecutable(body["n_inputs"], launches, body["output_slots"], body["text"],
                         body["costs"], body["memory"], plan, slot_types, launcher=_launcher(),
                         constants=constants)
