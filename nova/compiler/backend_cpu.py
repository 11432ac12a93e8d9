"""The CPU backend: passes -> fusion -> kernel synthesis -> cached native code -> executable."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import threading
import time
import warnings

import ml_dtypes
import numpy as np

from nova.compiler import cache
from nova.compiler.codegen.cpu import matmul as _matmul
from nova.compiler.codegen.cpu.attention import emit_attention
from nova.compiler.codegen.cpu.compile import (
    MIN_PARALLEL_TEXT,
    BackgroundCompile,
    compile_cost,
    compile_in_parallel,
    compile_processes,
    load_function,
    split_for_processes,
    use_openmp_defaults,
)
from nova.compiler.codegen.cpu.contraction import (
    emit_contraction,
    emit_generic_contraction,
    generic_matmul_text,
)
from nova.compiler.codegen.cpu.gemv import emit_gemv, gemv_layout
from nova.compiler.codegen.cpu.loops import emit_loop_kernel
from nova.compiler.codegen.cpu.matmul import module_text, needs_openmp
from nova.compiler.codegen.cpu.sequential import emit_sequential_kernel
from nova.compiler.fuse import fuse
from nova.compiler.kernel import FusedProgram, Kernel
from nova.compiler.plan_memory import live_bytes, plan_memory
from nova.core.errors import CompilerError
from nova.core.ir import Eqn, Program, Var
from nova.core.primitive import lookup
from nova.compiler.dot_layout import gemm_operands
from nova.compiler.legalize_complex import has_complex, legalize_complex
from nova.core.trace import _reference_eval
from nova.ops.callback import has_effects
from nova.runtime.executable import CPUExecutable, Launch
from nova.runtime.launcher import load_launcher, prefetch_launcher

log = logging.getLogger("nova.compiler")


def _contraction_as_loop(k: Kernel) -> Kernel:
    """A dot_general as a loop kernel: iterate (batch, lhs free, rhs free, contract) and reduce
    the contracting axes; the operands are read through transposes and broadcasts (no copies)."""
    (e,) = [q for q in k.program.eqns if q.prim.name == "dot_general"]
    x, y = e.inputs
    (lc, rc), (lb, rb) = e.params["dimension_numbers"]
    xf = [i for i in range(x.type.ndim) if i not in lc and i not in lb]
    yf = [i for i in range(y.type.ndim) if i not in rc and i not in rb]
    out_shape = e.outputs[0].type.shape
    csizes = tuple(x.type.shape[i] for i in lc)
    S = tuple(out_shape) + csizes
    nb, nxf, nyf = len(lb), len(xf), len(yf)
    eqns = []

    def emit(name, ins, params):
        prim = lookup(name)
        params = prim.canonical_params(params)
        t = prim.abstract_eval([v.type for v in ins], **params)
        v = Var(t)
        eqns.append(Eqn(prim, list(ins), params, [v]))
        return v

    xt = emit("transpose", [x], {"permutation": tuple(lb) + tuple(xf) + tuple(lc)})
    xb = emit("broadcast_in_dim", [xt], {"shape": S, "broadcast_dimensions": tuple(range(nb + nxf)) + tuple(range(nb + nxf + nyf, len(S)))})
    yt = emit("transpose", [y], {"permutation": tuple(rb) + tuple(yf) + tuple(rc)})
    yb = emit("broadcast_in_dim", [yt], {"shape": S, "broadcast_dimensions": tuple(range(nb)) + tuple(range(nb + nxf, len(S)))})
    axes = tuple(range(len(out_shape), len(S)))
    out_dtype = e.outputs[0].type.dtype
    low = out_dtype in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
    if low:  # products and sums in float32, one rounding at the end (as the reference does)
        xb = emit("convert_element_type", [xb], {"new_dtype": np.dtype(np.float32)})
        yb = emit("convert_element_type", [yb], {"new_dtype": np.dtype(np.float32)})
    prod = emit("mul", [xb, yb], {})
    prim = lookup("reduce_sum")
    if low:
        red = emit("reduce_sum", [prod], {"axes": axes})
        prim = lookup("convert_element_type")
        eqns.append(Eqn(prim, [red], prim.canonical_params({"new_dtype": out_dtype}),
                        [e.outputs[0]]))
    else:
        # The reduction defines the dot_general's own result, so epilogue equations still read it.
        eqns.append(Eqn(prim, [prod], prim.canonical_params({"axes": axes}), [e.outputs[0]]))
    rest = [q for q in k.program.eqns if q is not e]
    sub = Program(list(k.program.inputs), eqns + rest, list(k.program.outputs))
    return Kernel("loop", sub, k.inputs, k.outputs, {"iter_shape": S, "red_axes": axes})


def _empty(k: Kernel) -> bool:
    """All outputs have size 0 and no equation is made for its effect (an io_callback whose
    token nothing reads): there is nothing to compute (no kernel is generated)."""
    return all(v.type.size == 0 for v in k.outputs) and \
        not any(has_effects(e) for e in k.program.eqns)


def _complex_copy_fn(k: Kernel):
    """The host function of a lone complex_as_pairs / pairs_as_complex kernel (the copies at a
    complex Program's boundary: nova/ops/complex.py), writing into one buffer it keeps: a
    fresh 8 MB array per call page-faulted for ~3 ms of a 0.6 ms copy. The buffer is only
    read within a call (the executable copies host outputs it returns: _collect), and an
    executable runs one call at a time. None for other kernels."""
    prog = k.program
    if len(prog.eqns) != 1 or prog.eqns[0].prim.name not in ("complex_as_pairs",
                                                               "pairs_as_complex"):
        return None
    (e,) = prog.eqns
    if list(e.inputs) != list(prog.inputs) or list(e.outputs) != list(prog.outputs):
        return None
    t = e.outputs[0].type
    kept: list = []
    split = e.prim.name == "complex_as_pairs"

    def run(arrays):
        if not kept:
            kept.append(np.empty(t.shape, t.dtype))
        out, x = kept[0], arrays[0]
        if split:
            np.copyto(out[0, ...], x.real)
            np.copyto(out[1, ...], x.imag)
        else:
            out.real, out.imag = x[0], x[1]
        return [out]

    run.kernel = k
    return run


def _host_fn(k: Kernel):
    """A Python function running kernel k's equations by their references (its `kernel`
    attribute is k, which the executable cache stores)."""
    fast = _complex_copy_fn(k)
    if fast is not None:
        return fast
    prog = k.program

    def run(arrays):
        if _empty(k):
            return [np.empty(v.type.shape, v.type.dtype) for v in prog.outputs]
        env = {id(v): a for v, a in zip(prog.inputs, arrays, strict=True)}
        for e in prog.eqns:
            outs = _reference_eval(e.prim, [env[id(v)] for v in e.inputs], e.params,
                                   [o.type for o in e.outputs])
            for o, a in zip(e.outputs, outs, strict=True):
                env[id(o)] = a
        # The launch's outputs get slots of their own, and the memory plan reuses an input's
        # buffer once it is dead: a reference that hands back (a view of) an input would see
        # its result overwritten, so such outputs are copied.
        outs = [env[id(v)] for v in prog.outputs]
        return [o.copy() if any(np.may_share_memory(o, a) for a in arrays
                                if isinstance(a, np.ndarray)) else o for o in outs]

    run.kernel = k
    return run


def _split_epilogue(k: Kernel):
    """A contraction kernel as two: the bare matmul, then its epilogue as a loop kernel."""
    (dot,) = [e for e in k.program.eqns if e.prim.name == "dot_general"]
    x, y = dot.inputs
    out = dot.outputs[0]
    operands = [x] if x is y else [x, y]  # `a @ a`: one input
    mm = Kernel("contraction", Program(operands, [dot], [out]), operands, [out])
    rest = [e for e in k.program.eqns if e is not dot]
    ins = [out] + list(k.program.inputs)  # the operands too, if the epilogue reads them
    used = {id(v) for e in rest for v in e.inputs}
    ins = [v for v in ins if id(v) in used]
    epi = Kernel("loop", Program(ins, rest, list(k.program.outputs)), ins, list(k.outputs),
                 {"iter_shape": out.type.shape, "red_axes": None})
    return [mm, epi]


# Lowered kernels by structure: (kernel name, schedule before lowering, host device) ->
# (schedule after, [(symbol, MLIR text, parameter vector)]). The name hashes the kernel's kind
# and its printed sub-Program (shapes and dtypes included), and the emitters read nothing else
# but the host device, so the repeated layers of a model are emitted once: of the small GPT-2
# step's 145 kernels 110 repeat one of the others, and emitting them took ~0.4 s of its cold
# compile.
# Only kernels lowered as themselves are kept (a split epilogue's parts name other Vars).
# Bounded: oldest entries go first beyond _LOWER_MEMO_SIZE.
_LOWER_MEMO: dict = {}
_LOWER_MEMO_SIZE = 2048


def _lower(k: Kernel) -> list:
    """[(codegen kernel, symbol, MLIR text, parameter vector or None)] implementing fusion
    kernel k, in launch order. A parameter vector is an extra argument after the inputs (a
    shape-generic matmul's shapes and blocking), which the executable holds as a constant.
    Repeated kernels come from _LOWER_MEMO, with the schedule their lowering chose."""
    if k.kind.startswith("host:") or _empty(k):
        return []
    key = (k.name, repr(sorted(k.schedule.items())), _matmul.host_device())
    hit = _LOWER_MEMO.get(key)
    if hit is not None:
        k.schedule.update(hit[0])
        return [(k, sym, text, None if params is None else params.copy())
                for sym, text, params in hit[1]]
    out = _lower_uncached(k)
    if all(gk is k for gk, _, _, _ in out):
        if len(_LOWER_MEMO) >= _LOWER_MEMO_SIZE:
            _LOWER_MEMO.pop(next(iter(_LOWER_MEMO), None), None)
        _LOWER_MEMO[key] = (dict(k.schedule),
                            [(sym, text, params) for _, sym, text, params in out])
    return out


def _lower_uncached(k: Kernel) -> list:
    """_lower without the memo."""
    if k.kind == "contraction":
        text = emit_gemv(k.name, k)
        if text is not None:
            return [(k, k.name, text, None)]
        parts = _split_epilogue(k) if len(k.program.eqns) > 1 else None
        if parts is not None and gemv_layout(parts[0]) is not None:
            # A matrix-vector product with an epilogue: the product's own kernel, then the
            # epilogue over the (short) result (a GEMM kernel would pack the whole matrix).
            return [lowered for part in parts for lowered in _lower(part)]
        generic = emit_generic_contraction(k) if GENERIC_MATMULS else None
        if generic is not None:
            sym, text, params = generic
            return [(k, sym, text, params)]
        text = emit_contraction(k.name, k)
        if text is not None:
            return [(k, k.name, text, None)]
        if parts is not None:
            return [lowered for part in parts for lowered in _lower(part)]
        gk = _contraction_as_loop(k)
        return [(gk, gk.name, emit_loop_kernel(gk.name, gk), None)]
    if k.kind in ("scatter", "scan", "sort"):
        return [(k, k.name, emit_sequential_kernel(k.name, k), None)]
    if k.kind == "attention":  # no kernel for the dtype: the reference runs it on the host
        text = emit_attention(k.name, k)
        return [(k, k.name, text, None)] if text is not None else []
    return [(k, k.name, emit_loop_kernel(k.name, k), None)]


# Libraries per compile process when a batch is split (compile_in_parallel's queue): with one,
# the tiny GPT-2 step's two processes finished 0.3 s apart (the cost estimate's error); each
# library more costs an MLIR context, an LLVM target machine and a link (~40-60 ms). With
# Nova's short LLVM pipeline the fixed part weighs more: the tiny step's parallel phase took
# 0.81-1.11 s with 2 (median 0.89) against 1.03-1.20 s with 3 and 0.95-1.04 s with 1 (three
# alternating rounds; the small step's was within the noise either way; bench/NOTES.md round 6).
GROUPS_PER_PROCESS = 2

# Lone matmuls run shape-generic kernels (codegen/cpu/matmul.py generic_variant); False
# compiles one kernel per shape (for comparisons: NOVA_GENERIC_MATMULS=0).
GENERIC_MATMULS = os.environ.get("NOVA_GENERIC_MATMULS", "1") != "0"


def _library_job(entries: list, target: str, dump_dir: str | None) -> tuple[dict, str, bool]:
    """(compile job, library path, in memory only) building the kernels `entries`, a list of
    (symbol, MLIR text), into one shared library named by the hash of its module. Without a
    usable disk cache the library goes to a temporary folder (in memory only: the caller
    removes it once loaded)."""
    names = [sym for sym, _ in entries]
    text = module_text([t for _, t in entries])
    batch = hashlib.sha256((text + target + cache.CODEGEN_VERSION).encode()).hexdigest()[:24]
    so = cache.library_path(batch)
    in_memory_only = so is None
    if in_memory_only:
        so = os.path.join(tempfile.mkdtemp(prefix="nova-mem-"), batch + ".so")
    job = dict(text=text, func_names=names, so_path=so, dump_dir=dump_dir,
               what=f"{len(names)} kernel(s) {', '.join(names[:4])}", openmp=needs_openmp(text))
    return job, so, in_memory_only


# Kernels being built by a forked child while this process goes on (compile.BackgroundCompile),
# by kernel-cache key: (the job, its library, the symbol, the argument count). Two sources:
# the costliest kernels of a program (attention, contractions), built while the rest are
# still being synthesized (compile_program), and the shape-generic matmul of a program that
# has matmuls, built while the passes run (prefetch_generic_matmuls). The child writes the
# kernel cache's entries; compile_fused waits for a kernel it needs and loads it.
_background: dict[str, tuple] = {}
_background_lock = threading.Lock()


def _fresh_locks_in_child() -> None:
    """A forked compile child starts with the background-compile lock free (another thread
    may have held it at the fork)."""
    global _background_lock
    _background_lock = threading.Lock()


os.register_at_fork(after_in_child=_fresh_locks_in_child)

# Kernel kinds built ahead of the rest of their program (the largest texts: the flash attention
# kernels and the generic GEMM took ~0.7 of the tiny GPT-2 step's 1.7 s of LLVM CPU time;
# bench/NOTES.md round 11).
_EARLY_KINDS = ("attention", "contraction")


def _compile_in_background(entries: list, target: str) -> bool:
    """Starts building `entries`, a list of (symbol, key, argument count, MLIR text) of kernels
    missing from the cache, in a forked child; registers them in _background. False (nothing
    started) with a single compile process or without a usable disk cache (the child's library
    and entries could not reach this process)."""
    if compile_processes() < 2 or not hasattr(os, "fork"):
        return False
    job, so, in_memory_only = _library_job([(sym, text) for sym, _, _, text in entries], target,
                                           os.environ.get("NOVA_DUMP_DIR"))
    if in_memory_only:
        shutil.rmtree(os.path.dirname(so), ignore_errors=True)
        return False

    def after():  # in the child, once the library exists
        for sym, key, nargs, _ in entries:
            cache.disk_put(key, so, sym, nargs)

    with _background_lock:
        # Checked and registered under the lock: two threads never start one kernel twice.
        if any(key in _background for _, key, _, _ in entries):
            return False
        bg = BackgroundCompile(job, after)
        for sym, key, nargs, _ in entries:
            _background[key] = (bg, so, sym, nargs)
    return True


def _take_background(key: str) -> None:
    """Waits for the background job building `key` (compiling it here if the child failed) and
    puts the loaded kernel in the memory cache; nothing when no job builds it (any more). Every
    thread needing the kernel waits on the same job; the record goes once it is loaded."""
    with _background_lock:
        rec = _background.get(key)
    if rec is None:
        return
    bg, so, sym, nargs = rec
    bg.wait()
    with _background_lock:
        if cache.memory_get(key) is None:
            if needs_openmp(bg.job["text"]):
                use_openmp_defaults()
            cache.memory_put(key, load_function(so, sym, nargs))
        if _background.get(key) is rec:
            del _background[key]


def _load_or_build(sym: str, nargs: int, key: str, text: str, target: str,
                   dump_dir: str | None) -> None:
    """Puts kernel `key` in the memory cache: from its disk entry, else compiled here."""
    if needs_openmp(text):
        use_openmp_defaults()
    rec = cache.disk_get(key)
    if rec is not None:
        try:
            cache.memory_put(key, load_function(rec["so"], rec["symbol"], rec["nargs"]))
            return
        except (OSError, CompilerError):
            pass
    job, so, in_memory_only = _library_job([(sym, text)], target, dump_dir)
    try:
        compile_in_parallel([job], 1)
        cache.memory_put(key, load_function(so, sym, nargs))
        if not in_memory_only:
            cache.disk_put(key, so, sym, nargs)
    finally:
        if in_memory_only:
            shutil.rmtree(os.path.dirname(so), ignore_errors=True)


def _reap_background() -> None:
    """Forgets finished background jobs nobody waited for (a prefetched kernel the program did
    not use): the child has written their cache entries; a later program loads them from disk."""
    with _background_lock:
        done = [key for key, (bg, *_rest) in _background.items() if bg.done()]
        for key in done:
            del _background[key]


def _start_early(kernels: list, lowered: dict, target: str) -> None:
    """Starts building the kernels of `kernels` (already lowered) that no cache holds, in the
    background, when their text is worth a process of its own (MIN_PARALLEL_TEXT)."""
    entries: dict[str, tuple] = {}
    for k in kernels:
        for gk, sym, text, params in lowered[id(k)]:
            key = cache.kernel_key(sym, text, target)
            if key in entries or key in _background or cache.cached(key):
                continue
            nargs = len(gk.program.inputs) + len(gk.program.outputs) + (params is not None)
            entries[key] = (sym, key, nargs, text)
    if sum(compile_cost(sym, text) for sym, _, _, text in entries.values()) < MIN_PARALLEL_TEXT:
        return
    if _compile_in_background(list(entries.values()), target):
        cache.stats["misses"] += len(entries)


def prefetch_generic_matmuls(program: Program, target: str | None = None) -> None:
    """Before the passes run on `program`: starts building, in the background, the shape-generic
    matmul kernel of each dtype among its matmuls (codegen/cpu/matmul.py generic_variant) that
    the cache lacks. Their text depends only on the dtype and the host, so they can be built
    before fusion decides which matmuls run them; one a program ends up not using is simply
    in the cache for the next. Matmuls of fewer than GENERIC_PREFETCH_MIN_OUTPUT output
    elements are not counted (a matrix-vector product or a tiny matmul keeps its own kernel)."""
    if not GENERIC_MATMULS or compile_processes() < 2:
        return
    target = target or cache.host_target()
    _reap_background()
    dtypes_seen = []
    for e in program.eqns:
        if e.prim.name != "dot_general" or e.outputs[0].type.size < GENERIC_PREFETCH_MIN_OUTPUT:
            continue
        dt = e.inputs[0].type.dtype
        if dt == e.inputs[1].type.dtype and dt not in dtypes_seen:
            dtypes_seen.append(dt)
    for dt in dtypes_seen:
        found = generic_matmul_text(dt)
        if found is None:
            continue
        sym, text, nargs = found
        key = cache.kernel_key(sym, text, target)
        if key in _background or cache.cached(key):
            continue
        _compile_in_background([(sym, key, nargs, text)], target)


GENERIC_PREFETCH_MIN_OUTPUT = 4096


def compile_fused(fused: FusedProgram, *, target: str | None = None,
                  lowered: dict | None = None) -> dict:
    """{id(fusion kernel): [(codegen kernel, ctypes function, parameter vector or None)]} for
    every generated kernel. lowered: {id(fusion kernel): _lower(kernel)} when already done."""
    target = target or cache.host_target()
    dump_dir = os.environ.get("NOVA_DUMP_DIR")
    t_start = time.perf_counter()
    result: dict[int, list] = {}
    missing: dict[str, tuple] = {}
    waiting: list[tuple] = []  # (sym, nargs, key, text) of kernels built in the background
    plans = []
    for k in fused.kernels:
        parts = []
        for gk, sym, text, params in (lowered[id(k)] if lowered is not None else _lower(k)):
            if needs_openmp(text):
                use_openmp_defaults()  # before a threaded kernel is loaded in this process
            key = cache.kernel_key(sym, text, target)
            fn = cache.memory_get(key)
            nargs = len(gk.program.inputs) + len(gk.program.outputs) + (params is not None)
            if fn is None and key in _background:  # being built ahead: joined after the batch
                waiting.append((sym, nargs, key, text))
                parts.append((gk, key, params))
                continue
            if fn is None:
                rec = cache.disk_get(key)
                if rec is not None:
                    try:
                        fn = load_function(rec["so"], rec["symbol"], rec["nargs"])
                        cache.memory_put(key, fn)
                    except (OSError, CompilerError):  # unloadable or lacking it: rebuild
                        fn = None
            if fn is None:
                missing.setdefault(sym, (nargs, key, text))
            parts.append((gk, key, params))
        plans.append((k, parts))
    if missing:
        cache.stats["misses"] += len(missing)
        syms = list(missing)
        sizes = [compile_cost(sym, missing[sym][2]) for sym in syms]
        procs = compile_processes() if sum(sizes) >= MIN_PARALLEL_TEXT else 1
        # More libraries than processes, costliest first: the processes take them from a
        # queue (compile_in_parallel), so a wrong cost estimate leaves no process idle.
        groups = split_for_processes(sizes, min(procs * GROUPS_PER_PROCESS if procs > 1 else 1,
                                                len(syms)))
        groups.sort(key=lambda g: -sum(sizes[i] for i in g))
        jobs, libraries = [], []
        for group in groups:
            names = [syms[i] for i in group]
            job, so, in_memory_only = _library_job([(sym, missing[sym][2]) for sym in names],
                                                   target, dump_dir)
            jobs.append(job)
            libraries.append((names, so, in_memory_only))
        try:
            compile_in_parallel(jobs, procs)
            for names, so, in_memory_only in libraries:
                for sym in names:
                    nargs, key, _ = missing[sym]
                    fn = load_function(so, sym, nargs)
                    cache.memory_put(key, fn)
                    if not in_memory_only:
                        cache.disk_put(key, so, sym, nargs)
        finally:
            for _, so, in_memory_only in libraries:
                if in_memory_only:  # loaded (the mapping outlives the file), or failed
                    shutil.rmtree(os.path.dirname(so), ignore_errors=True)
    for sym, nargs, key, text in waiting:
        _take_background(key)
        if cache.memory_get(key) is None:
            # Another thread's compile forgot the finished job (_reap_background) before this
            # one took it: its child wrote the cache entry; built here if it did not.
            _load_or_build(sym, nargs, key, text, target, dump_dir)
    if waiting:
        _reap_background()  # children of unused prefetches are waited for (no zombies)
    for k, parts in plans:
        result[id(k)] = [(gk, cache.memory_get(key), params) for gk, key, params in parts]
    if os.environ.get("NOVA_LOG_COMPILES") == "1":
        n = sum(len(p) for _, p in plans)
        log.warning("nova codegen: %d kernel(s) for %d fused group(s); %d built, %d from cache; "
                    "%.3f s", n, len(plans), len(missing), n - len(missing),
                    time.perf_counter() - t_start)
    return result


def compile_program(program: Program, *, target: str | None = None,
                    donated=()) -> CPUExecutable:
    """The CPU executable of `program`. donated: indices of inputs whose buffers the call may
    reuse for its values (the jitted function's donate_argnums, flattened)."""
    if has_complex(program):  # an eager op's Program skips the pass pipeline
        program = legalize_complex(program)
    program = gemm_operands(program)  # dot_generals the GEMM reads in place (dot_layout.py)
    if len(program.eqns) > 1:
        _prefetch_launcher()
    fused = fuse(program)
    # The costliest kernels first, built in the background while the rest are synthesized.
    target = cache.host_target() if target is None else target
    early = [k for k in fused.kernels if k.kind in _EARLY_KINDS]
    lowered = {id(k): _lower(k) for k in early}
    if len(fused.kernels) > 1:
        _start_early(early, lowered, target)
    for k in fused.kernels:
        if id(k) not in lowered:
            lowered[id(k)] = _lower(k)
    slots: dict[int, int] = {}
    for i, v in enumerate(program.inputs):
        slots[id(v)] = i

    def slot(v):
        key = v if isinstance(v, tuple) else id(v)  # ("params", n): a constant's own slot
        if key not in slots:
            slots[key] = len(slots)
        return slots[key]

    # The launch list and its memory plan come first (they need the codegen kernels, not their
    # machine code): a kernel whose output the plan writes in place over an input is re-emitted
    # without streaming stores before anything is compiled (_temporal_where_in_place).
    launches = []
    placed = []  # (fusion kernel, its launches in order)
    per_kernel = []
    constants: dict = {}  # slot -> parameter vector
    for k in fused.kernels:
        parts = lowered[id(k)]
        mine = []
        if not parts:
            launches.append(Launch(k.name, [slot(v) for v in k.inputs],
                                   [slot(v) for v in k.outputs], [v.type for v in k.outputs],
                                   None, _host_fn(k)))
        for gk, _sym, _text, params in parts:
            ins = [slot(v) for v in gk.program.inputs]
            if params is not None:  # a constant slot of its own, after the inputs
                ins.append(slot(("params", len(constants))))
                constants[ins[-1]] = params
            launch = Launch(gk.name, ins, [slot(v) for v in gk.program.outputs],
                            [v.type for v in gk.program.outputs], None, None, gk)
            launches.append(launch)
            mine.append(launch)
        placed.append((k, mine))
        per_kernel.append({**k.cost(), "launches": max(1, len(parts))})
    output_slots = [slot(v) for v in program.outputs]
    types_by_id = {id(v): v.type for v in program.inputs}
    for k in fused.kernels:
        for e in k.program.eqns:
            for o in e.outputs:
                types_by_id[id(o)] = o.type
        for v in k.inputs + k.outputs:
            types_by_id[id(v)] = v.type
    slot_types = {s_: types_by_id[v_id] for v_id, s_ in slots.items() if v_id in types_by_id}
    plan = plan_memory(launches, len(program.inputs), output_slots, slot_types,
                       donated=set(donated))
    _temporal_where_in_place(placed, lowered, plan)
    fns = compile_fused(fused, target=target, lowered=lowered)
    for k, mine in placed:
        for launch, (_gk, fn, _params) in zip(mine, fns.get(id(k), []), strict=True):
            launch.fn = fn
    memory = _memory(program, fused)
    memory.update(plan.summary())
    memory["planned_peak_bytes"] = plan.peak_bytes
    costs = {"flops": sum(p["flops"] for p in per_kernel),
             "bytes accessed": sum(p["bytes accessed"] for p in per_kernel),
             "kernels": len(per_kernel), "per_kernel": per_kernel}
    # A single launch gains nothing from the launcher (one ctypes call either way), so an
    # eager op never waits for the launcher's first build.
    return CPUExecutable(len(program.inputs), launches, output_slots, fused.as_text(),
                         costs, memory, plan, slot_types,
                         launcher=_launcher() if len(launches) > 1 else None,
                         constants=constants)


def _temporal_where_in_place(placed, lowered: dict, plan) -> None:
    """Re-emits, with plain stores, every loop kernel that chose streaming (non-temporal)
    stores but whose output the memory plan writes in place over one of its inputs: those
    output lines were just read into the cache, so a streaming store saves no read-for-ownership
    and evicts them instead (the tied-embedding AdamW update of the small GPT-2 step, in place
    over the donated parameters and moments, ran 0.81 ms with plain stores against 1.6-1.9 ms
    streaming). The variant gets its own symbol (`<name>_t`): another launch of the same kernel
    may keep the streaming one."""
    for k, mine in placed:
        parts = lowered[id(k)]
        for n, launch in enumerate(mine):
            gk, sym, text, params = parts[n]
            if not gk.schedule.get("nontemporal_stores"):
                continue
            if not any(s in plan.aliases for s in launch.outputs):
                continue
            parts[n] = (gk, sym + "_t", emit_loop_kernel(sym + "_t", gk, streaming=False),
                        params)


_launcher_failed = False


def _launcher_dir() -> str | None:
    so = cache.library_path("launcher")
    return os.path.dirname(so) if so else None


def _prefetch_launcher() -> None:
    """Starts building the native launcher in the background if this cache has none yet."""
    if not _launcher_failed:
        prefetch_launcher(_launcher_dir())


def _launcher():
    """The native launcher (one call per step), built into the kernel cache's library folder;
    None (kernels called one by one from Python, with one warning) if it cannot be built."""
    global _launcher_failed
    if _launcher_failed:
        return None
    try:
        return load_launcher(_launcher_dir())
    except OSError as e:
        _launcher_failed = True
        warnings.warn(f"nova: native launcher unavailable ({e}); kernels are called one by one",
                      stacklevel=2)
        return None


def _memory(program: Program, fused: FusedProgram) -> dict:
    peak, temps = live_bytes([(k.inputs, k.outputs) for k in fused.kernels], program.inputs,
                             program.outputs)
    return {"argument_bytes": sum(v.type.nbytes for v in program.inputs),
            "output_bytes": sum(v.type.nbytes for v in program.outputs),
            "temp_bytes": temps, "peak_bytes": peak, "kernels": len(fused.kernels)}
