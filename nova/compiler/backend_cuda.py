"""The CUDA backend: passes -> fusion -> GPU kernels -> PTX in the kernel cache -> executable.

Cross-compilation: `nova.jit(f).lower(*shape_dtype_structs, target="cuda:sm_90").compile()` runs
on a machine without a GPU and writes every kernel's PTX into the disk cache
(`$NOVA_CACHE_DIR/cuda/<key[:2]>/<key>.json`: entry name, PTX text, its sha256, launch
configuration). Kernel text generation is pure Python, so a GPU machine with that cache rebuilds
the same keys and loads the PTX without importing MLIR (MLIR is imported only on a cache miss).

Kernels: loop kernels (elementwise, row reductions) and contractions (tensor cores for float16 and
bfloat16, and for float32 when the matmul precision is "tf32": mma.sync, or wgmma on sm_90a
(codegen/cuda/wgmma.py); SIMT otherwise); an epilogue the
GEMM cannot evaluate becomes its own loop kernel, and a dot_general that is no GEMM over its operands' memory runs as a loop kernel
reducing the contracting axes (both generated GPU code, as on the CPU backend). Scatters run as a
fill and an update launch (atomics); scans one thread per scanned line; sorts by rank. Fused
attention (flash_attention_fwd / _bwd) runs as FlashAttention-2 kernels (codegen/cuda/attention.py;
float32 on TF32 tensor cores at precision "tf32", attention_mma.py; the backward as a zero fill
of dq and one launch adding into it with atomics); the attention
pass fuses only the attentions those kernels support (`attention.supports`: float32/float64,
head dims whose tiles fit shared memory), the others stay matmuls + softmax. Constants too
large to inline are uploaded once. Control flow (lax.scan, while_loop, cond) compiles its
functions into CUDA executables of their own, run by a DeviceLoop (nova/gpu/loops.py). Host
callbacks (pure_callback, io_callback, so debug.print / debug.callback) run as a HostCall
(nova/gpu/host_call.py) at their place in the launch list: the stream is synchronized, the
operands copied to the host, the Python function called, its results copied back; such an
executable is not replayed as a CUDA graph, and inside a loop body the call runs once per
iteration. Other host primitives have no GPU kernel yet: compiling them raises
NotImplementedError naming the kernel kind.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings

import numpy as np

from nova.compiler import cache
from nova.compiler.backend_cpu import (
    _contraction_as_loop,
    _empty,
    _host_fn,
    _memory,
    _split_epilogue,
)
from nova.compiler.codegen.cuda.attention import emit_gpu_attention
from nova.compiler.codegen.cuda.column_split import split_column_kernel
from nova.compiler.codegen.cuda.compile import compile_to_ptx, parse_target, wrap_module
from nova.compiler.codegen.cuda.loops import emit_gpu_loop_kernel
from nova.compiler.codegen.cuda.matmul import emit_gpu_contraction
from nova.compiler.codegen.cuda.scan import emit_gpu_scan
from nova.compiler.codegen.cuda.scatter import emit_gpu_scatter
from nova.compiler.codegen.cuda.sort import emit_gpu_sort
from nova.compiler.codegen.cuda.split_k import GAIN as SPLIT_GAIN
from nova.compiler.codegen.cuda.split_k import gemm_seconds, split_k_parts, traffic_seconds
from nova.compiler.fuse import fuse
from nova.compiler.kernel import Kernel
from nova.compiler.plan_memory import plan_memory
from nova.config import config
from nova.core import dtypes
from nova.core.errors import CompilerError
from nova.core.ir import Program
from nova.gpu.device import describe
from nova.gpu.executable import CUDAExecutable, GPULaunch
from nova.gpu.host_call import HostCall
from nova.gpu.module import LaunchConfig

# Bump when generated GPU code changes meaning or launch ABI: old disk entries then miss.
CUDA_CODEGEN_VERSION = "nova-cuda-2"  # 2: records carry dynamic_shared_bytes
stats = {"memory_hits": 0, "disk_hits": 0, "misses": 0, "corrupt": 0}
_mem: dict[str, dict] = {}


# --- kernel synthesis -----------------------------------------------------------------------------
def lower_kernel(k: Kernel, arch: str, precision: str, sm_count: int | None = None) -> list:
    """[(codegen kernel, emitter)] implementing fusion kernel k on the GPU, in launch order.
    Emitters carry `.text`, `.grid`, `.block`, `.shared_bytes`. sm_count (default: the
    architecture's) sizes GEMM tiles.

    Raises NotImplementedError naming the kernel kind when there is no GPU kernel for it."""
    if k.kind == "loop":
        parts = split_column_kernel(k, sm_count or describe(arch).sm_count)
        return [(p, emit_gpu_loop_kernel(p.name, p)) for p in parts or [k]]
    if k.kind == "contraction":
        props = describe(arch)
        sms = sm_count or props.sm_count
        optin = props.max_shared_memory_per_block_optin
        tile = config.read("gemm_tile")
        try:
            em = emit_gpu_contraction(k.name, k, precision, sms, optin, arch, tile)
            return _split_k(k, em, arch, precision, sms, optin, tile) or [(k, em)]
        except NotImplementedError:
            if len(k.program.eqns) > 1:  # GEMM + separate epilogue loop kernel
                return [part for p in _split_epilogue(k)
                        for part in lower_kernel(p, arch, precision, sm_count)]
            x = k.program.eqns[0].inputs[0]
            if not dtypes.is_float(x.type.dtype):  # (bfloat16's NumPy kind is "V")
                raise
            gk = _contraction_as_loop(k)  # contracting axes reduced by a row kernel
            gk.schedule["gpu_schedule"] = "loop"
            return [(gk, emit_gpu_loop_kernel(gk.name, gk))]
    if k.kind == "scatter":
        return emit_gpu_scatter(k)
    if k.kind == "scan":
        return [(k, emit_gpu_scan(k))]
    if k.kind == "sort":
        return [(k, emit_gpu_sort(k))]
    if k.kind == "attention":
        return emit_gpu_attention(k, precision)
    raise NotImplementedError(
        f"cuda backend: no GPU kernel for kernel kind {k.kind!r} (ops {k.op_names()}); "
        "supported kinds: 'loop', 'contraction', 'scatter', 'scan', 'sort', 'attention', and "
        "large constants")


def _split_k(k: Kernel, em, arch: str, precision: str, sms: int, optin: int,
             tile=None) -> list | None:
    """k as a batched GEMM of partial products and a loop kernel adding them, when the cost
    model of codegen/cuda/split_k.py says that is faster than GEMM emitter `em`; else None."""
    parts = split_k_parts(k)
    if parts is None:
        return None
    gemm, finish = parts
    try:
        em_a = emit_gpu_contraction(gemm.name, gemm, precision, sms, optin, arch, tile)
    except NotImplementedError:
        return None
    before = gemm_seconds(em, arch, sms)
    after = gemm_seconds(em_a, arch, sms) + traffic_seconds(gemm.outputs[0].type, arch)
    if after > SPLIT_GAIN * before:
        return None
    gemm.schedule["split_k"] = gemm.outputs[0].type.shape[0]
    gemm.schedule["model_us"] = (round(before * 1e6, 1), round(after * 1e6, 1))
    return [(gemm, em_a), (finish, emit_gpu_loop_kernel(finish.name, finish))]


def _check_limits(sym: str, em, arch: str) -> None:
    """The launch configuration fits the architecture's limits (else a codegen bug)."""
    props = describe(arch)
    threads = int(np.prod(em.block))
    dynamic = getattr(em, "dynamic_shared_bytes", 0)
    if (threads > props.max_threads_per_block
            or em.shared_bytes > props.max_shared_memory_per_block
            or em.shared_bytes + dynamic > props.max_shared_memory_per_block_optin):
        raise CompilerError(f"cuda codegen: kernel {sym} needs {threads} threads and "
                            f"{em.shared_bytes} B of static and {dynamic} B of dynamic shared "
                            f"memory per block, over {arch}'s limits")
    if em.grid[0] >= 2**31 or max(em.grid[1:]) > 65535:
        raise CompilerError(f"cuda codegen: kernel {sym} grid {em.grid} exceeds CUDA's limits")


# --- the disk cache -----------------------------------------------------------------------------
def _entry_path(key: str) -> str:
    return os.path.join(cache.cache_dir(), "cuda", key[:2], key + ".json")


def _disk_get(key: str) -> dict | None:
    path = _entry_path(key)
    try:
        with open(path) as f:
            rec = json.load(f)
        if hashlib.sha256(rec["ptx"].encode()).hexdigest() != rec["sha256"]:
            raise ValueError("PTX hash mismatch")
        stats["disk_hits"] += 1
        return rec
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        stats["corrupt"] += 1
        warnings.warn(f"nova: dropping corrupt CUDA kernel cache entry {path}: {e}", stacklevel=2)
        try:
            os.remove(path)
        except OSError:
            pass
        return None


def _disk_put(key: str, rec: dict) -> None:
    path = _entry_path(key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            json.dump(rec, f)
        os.replace(tmp, path)
    except OSError as e:
        warnings.warn(f"nova: cannot write the CUDA kernel cache ({e}); in-memory only",
                      stacklevel=2)


def compile_kernels(fused, target: str, precision: str | None = None) -> dict:
    """{id(fusion kernel): [(codegen kernel, record)]}; a record has entry, ptx, grid, block,
    shared_bytes. PTX comes from the memory or disk cache, else from MLIR (one batch)."""
    arch = parse_target(target)
    precision = precision or config.read("matmul_precision")
    result, missing = {}, {}
    for k in fused.kernels:
        if k.kind.startswith("host:") or _empty(k):
            continue
        parts = []
        for gk, em in lower_kernel(k, arch, precision):
            sym = gk.name
            _check_limits(sym, em, arch)
            text = wrap_module(sym, em.text, arch)
            key = cache.kernel_key(sym, text, f"{target}|{CUDA_CODEGEN_VERSION}")
            rec = _mem.get(key)
            if rec is not None:
                stats["memory_hits"] += 1
            else:
                rec = _disk_get(key)
                if rec is not None:
                    _mem[key] = rec
            if rec is None:
                missing[key] = (sym, text, em, gk)
            parts.append((gk, key))
        result[id(k)] = parts
    if missing:
        stats["misses"] += len(missing)
        from nova.compiler.bindings import MLIRUnavailableError

        try:
            ptx = compile_to_ptx({sym: text for sym, text, _, _ in missing.values()},
                                 dump_dir=os.environ.get("NOVA_DUMP_DIR"),
                                 what=f"{len(missing)} GPU kernel(s) for {target}")
        except MLIRUnavailableError as e:
            names = ", ".join(sym for sym, _, _, _ in list(missing.values())[:4])
            raise CompilerError(
                f"{len(missing)} GPU kernel(s) for {target} ({names}...) are not in the kernel "
                f"cache at {cache.cache_dir()}, and building them needs MLIR ({e}); compile them "
                "on a machine with MLIR (bench/build_gpu_cache.py) and carry the cache") from None
        for key, (sym, _, em, gk) in missing.items():
            digest = hashlib.sha256(ptx[sym].encode()).hexdigest()
            rec = {"entry": sym, "ptx": ptx[sym], "sha256": digest,
                   "grid": list(em.grid), "block": list(em.block), "shared_bytes": em.shared_bytes,
                   "dynamic_shared_bytes": getattr(em, "dynamic_shared_bytes", 0),
                   "kind": gk.kind, "target": target, "version": CUDA_CODEGEN_VERSION}
            _mem[key] = rec
            _disk_put(key, rec)
    return {kid: [(gk, _mem[key]) for gk, key in parts] for kid, parts in result.items()}


# --- the executable -------------------------------------------------------------------------------
def compile_program(program: Program, *, target: str, donated=()) -> CUDAExecutable:
    """The CUDA executable of `program` for target "cuda:sm_XX" (no GPU needed to build it; calling
    it needs one and raises GPUUnavailableError otherwise)."""
    from nova.compiler.legalize_complex import has_complex, legalize_complex

    from nova.compiler.dot_layout import gemm_operands

    if has_complex(program):  # a Program that skipped the pass pipeline
        program = legalize_complex(program)
    program = gemm_operands(program)  # dot_generals the GEMM reads in place
    fused = fuse(program)
    kernels = compile_kernels(fused, target)
    launches, slot_types, output_slots, per_kernel = _launch_list(program, fused, kernels,
                                                                  target)
    plan = plan_memory(launches, len(program.inputs), output_slots, slot_types,
                       donated=set(donated))
    memory = _memory(program, fused)
    memory.update(plan.summary())
    costs = {"flops": sum(p["flops"] for p in per_kernel),
             "bytes accessed": sum(p["bytes"] for p in per_kernel), "per_kernel": per_kernel}
    exe = CUDAExecutable(len(program.inputs), launches, output_slots, slot_types, plan,
                         fused.as_text(), costs, memory, target)
    # Results take the program's output types (a slot's type is the last kernel's view of it).
    exe.output_types = [v.type for v in program.outputs]
    return exe


_CONTROL_FLOW = ("host:scan", "host:while", "host:cond")


def _device_loop(k: Kernel, target: str):
    """The DeviceLoop (nova/gpu/loops.py) of a control-flow kernel: its Regions compiled for
    `target` like any program (their PTX into the kernel cache too)."""
    from nova.compiler.pipeline import run_passes
    from nova.gpu.loops import DeviceLoop

    if len(k.program.eqns) != 1:
        raise NotImplementedError(f"cuda backend: a {k.kind} kernel of "
                                  f"{len(k.program.eqns)} equations")
    (e,) = k.program.eqns
    p = e.params
    if e.prim.name == "scan":
        roles = {"body": p["body"]}
    elif e.prim.name == "while":
        roles = {"cond": p["cond"], "body": p["body"]}
    else:
        roles = {f"branch{i}": br for i, br in enumerate(p["branches"])}
    regions = {role: compile_program(run_passes(r.program), target=target)
               for role, r in roles.items()}
    return e, DeviceLoop(e.prim.name, p, regions, [v.type for v in e.inputs],
                         [v.type for v in e.outputs])


# Host calls on every execution: the callbacks, and the copies between complex buffers and
# their planar float parts (nova/ops/complex.py; no GPU kernel for them yet).
_CALLBACKS = ("host:pure_callback", "host:io_callback", "host:complex_as_pairs",
              "host:pairs_as_complex")


def _host_call_launch(k: Kernel, slot) -> GPULaunch:
    """The launch of a host-callback kernel: a HostCall (nova/gpu/host_call.py) running the
    equation's reference on host copies of its operands on every call (never at build time,
    even when its operands are constants: an effect runs once per execution)."""
    call = HostCall(k.name, _host_fn(k), [v.type for v in k.inputs], [v.type for v in k.outputs])
    return GPULaunch(k.name, [slot(v) for v in k.inputs], [slot(v) for v in k.outputs],
                     [v.type for v in k.outputs], host_call=call, info={"kind": k.kind})


def _launch_list(program: Program, fused, kernels: dict, target: str | None = None) -> tuple:
    """(launches, slot types, output slots, per-kernel costs) of `fused` in launch order.
    kernels: {id(fusion kernel): [(codegen kernel, record or None)]}; a None record (a plan
    made without PTX, `plan_program_memory`) gives a launch with no PTX or configuration.
    target: the CUDA target control-flow Regions are compiled for (None: a plan, whose
    control-flow launches hold no DeviceLoop)."""
    slots = {id(v): i for i, v in enumerate(program.inputs)}
    types = {id(v): v.type for v in program.inputs}

    def slot(v):
        types[id(v)] = v.type
        if id(v) not in slots:
            slots[id(v)] = len(slots)
        return slots[id(v)]

    launches, per_kernel = [], []
    for k in fused.kernels:
        if k.kind in _CONTROL_FLOW and not _empty(k):
            # All of the equation's results: those the program does not read get slots too.
            e, loop = _device_loop(k, target) if target is not None else (k.program.eqns[0],
                                                                           None)
            launches.append(GPULaunch(k.name, [slot(v) for v in e.inputs],
                                      [slot(v) for v in e.outputs],
                                      [v.type for v in e.outputs], loop=loop,
                                      info={"kind": k.kind}))
            per_kernel.append({"kernel": k.name, "kind": k.kind,
                               "flops": e.prim.cost([v.type for v in e.inputs],
                                                    [v.type for v in e.outputs],
                                                    **e.params).flops,
                               "bytes": sum(v.type.nbytes for v in [*e.inputs, *e.outputs])})
            continue
        if k.kind in _CALLBACKS and not _empty(k):
            launches.append(_host_call_launch(k, slot))
            per_kernel.append({"kernel": k.name, "kind": k.kind, "flops": 0,
                               "bytes": sum(v.type.nbytes for v in [*k.inputs, *k.outputs])})
            continue
        if k.kind.startswith("host:") or _empty(k):
            if k.inputs and not _empty(k):
                raise NotImplementedError(
                    f"cuda backend: kernel kind {k.kind!r} has no GPU kernel (ops {k.op_names()})")
            value = _host_fn(k)([])  # constants (no inputs) and empty outputs: computed once
            launches.append(GPULaunch(k.name, [], [slot(v) for v in k.outputs],
                                      [v.type for v in k.outputs], host_value=value))
            continue
        for gk, rec in kernels[id(k)]:
            ins = [slot(v) for v in gk.program.inputs]
            outs = [slot(v) for v in gk.program.outputs]
            out_types = [v.type for v in gk.program.outputs]
            if rec is None:
                launches.append(GPULaunch(gk.name, ins, outs, out_types, kernel=gk,
                                          info={"kind": gk.kind}))
                continue
            launches.append(GPULaunch(
                gk.name, ins, outs, out_types, rec["ptx"], rec["entry"],
                LaunchConfig(tuple(rec["grid"]), tuple(rec["block"]),
                             rec.get("dynamic_shared_bytes", 0)), gk,
                info={"kind": gk.kind, "shared_bytes": rec["shared_bytes"],
                      "dynamic_shared_bytes": rec.get("dynamic_shared_bytes", 0)}))
        flops = sum(e.prim.cost([v.type for v in e.inputs], [v.type for v in e.outputs],
                                **e.params).flops for e in k.program.eqns)
        moved = sum(v.type.nbytes for v in k.inputs) + sum(v.type.nbytes for v in k.outputs)
        per_kernel.append({"kernel": k.name, "kind": k.kind, "flops": flops, "bytes": moved})
    output_slots = [slot(v) for v in program.outputs]
    slot_types = {s: types[i] for i, s in slots.items()}
    return launches, slot_types, output_slots, per_kernel


def plan_program_memory(program: Program, *, target: str, donated=(),
                        precision: str | None = None, top: int = 12) -> dict:
    """The device memory the CUDA executable of `program` (after the passes) would plan, worked
    out without PTX, MLIR or a GPU: the kernels are lowered to their codegen form only, and
    the launch list and the arena plan are those `compile_program` builds.

    Returns {"arena_bytes", "peak_bytes" (arguments + outputs + arena), "argument_bytes",
    "launches", "kernels" (distinct codegen kernels by name), "in_place", "live_at_peak":
    [(bytes, slot, the producing launch's name, kind and ops)] of the `top` largest arena values live at the
    launch where the arena's live bytes peak, "peak_launch" (that launch's index and name)}.
    precision: the matmul precision (default the config's)."""
    arch = parse_target(target)
    precision = precision or config.read("matmul_precision")
    fused = fuse(program)
    kernels = {}
    for k in fused.kernels:
        if not (k.kind.startswith("host:") or _empty(k)):
            kernels[id(k)] = [(gk, None) for gk, _ in lower_kernel(k, arch, precision)]
    launches, slot_types, output_slots, _ = _launch_list(program, fused, kernels)
    plan = plan_memory(launches, len(program.inputs), output_slots, slot_types,
                       donated=set(donated))
    n_in = len(program.inputs)
    first, last, producer = {}, {}, {}
    for n, launch in enumerate(launches):
        for s in launch.outputs:
            first.setdefault(s, n)
            if s not in producer:
                k = launch.kernel
                ops = ",".join(dict.fromkeys(k.op_names())) if k is not None else "host"
                producer[s] = f"{launch.name} ({k.kind if k is not None else 'host'}: {ops[:60]})"

        for s in launch.inputs:
            last[s] = n
    roots = {}  # arena slot -> the slot owning its buffer (in place)
    for s in set(plan.offsets) | set(plan.aliases):
        r = s
        while r in plan.aliases:
            r = plan.aliases[r]
        if r in plan.offsets:  # (not an output over a donated argument's buffer)
            roots[s] = r
    live_by_root: dict[int, tuple[int, int]] = {}  # root -> (first launch, last launch)
    for s, r in roots.items():
        a, b = first.get(s, 0), last.get(s, first.get(s, 0))
        lo, hi = live_by_root.get(r, (a, b))
        live_by_root[r] = (min(lo, a), max(hi, b))
    best, best_n = -1, 0
    for n in range(len(launches)):
        live = sum(slot_types[r].nbytes for r, (a, b) in live_by_root.items() if a <= n <= b)
        if live > best:
            best, best_n = live, n
    at_peak = sorted(((slot_types[r].nbytes, r, producer.get(r, "?"))
                      for r, (a, b) in live_by_root.items() if a <= best_n <= b), reverse=True)
    arg_bytes = sum(v.type.nbytes for v in program.inputs)
    return {"arena_bytes": plan.arena_bytes, "peak_bytes": plan.peak_bytes,
            "argument_bytes": arg_bytes, "launches": len(launches),
            "kernels": len({launch.name for launch in launches if launch.kernel is not None}),
            "in_place": len(plan.aliases), "live_at_peak": at_peak[:top],
            "peak_launch": (best_n, launches[best_n].name if launches else None),
            "output_slots": output_slots, "n_inputs": n_in}
