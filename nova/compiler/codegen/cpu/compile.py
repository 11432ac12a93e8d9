"""Compiles MLIR text of CPU kernels into a shared library and loads its functions with ctypes.

Route (MLIR_NOTES.md §3, route A): parse, lower with CPU_PIPELINE, translate to LLVM IR and compile
it to a position-independent object for the host CPU with Nova's LLVM pass pipeline (object_code.py;
MLIR's ExecutionEngine at -O3 where libLLVM's C API is not at hand), link it with the system linker
into a .so (`ld -shared`, or `gcc -shared`: link_commands). Kernels take bare pointers (static
shapes; `use-bare-ptr-memref-call-conv`), so a kernel is a plain C function `void k(void*, ...)`
that a later process loads with ctypes without importing MLIR.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
import threading
import warnings

from nova.compiler.codegen.cpu import object_code
from nova.core.errors import CompilerError

# Ops of the `math` dialect that LLVM has no intrinsic for are first expanded (tanh, sinh, ...)
# or turned into libm calls; `finalize-memref-to-llvm` must precede `convert-scf-to-cf` when
# OpenMP regions are present (MLIR_NOTES.md §2), and `convert-ub-to-llvm` is required (§1).
CPU_PIPELINE = (
    "builtin.module("
    "canonicalize,cse,convert-vector-to-scf,lower-affine,"
    "expand-strided-metadata,finalize-memref-to-llvm,convert-scf-to-cf,"
    "convert-math-to-llvm,convert-math-to-libm,convert-vector-to-llvm,convert-arith-to-llvm,"
    "convert-index-to-llvm,convert-ub-to-llvm,convert-cf-to-llvm,"
    "convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},convert-arith-to-llvm,"
    "reconcile-unrealized-casts)"
)

# With OpenMP regions (`omp.parallel`, emitted e.g. by the matmul generator for threads > 1) the
# same pipeline plus `convert-openmp-to-llvm`, which must run after the dialects inside the
# regions are already LLVM (MLIR_NOTES.md §2).
CPU_PIPELINE_OPENMP = CPU_PIPELINE.replace(
    ",reconcile-unrealized-casts)", ",convert-openmp-to-llvm,reconcile-unrealized-casts)"
)

_lock = threading.Lock()

# Whether a failed compile keeps its MLIR source for the error message (False in forked
# compile workers, whose errors nobody reads: see compile_in_parallel).
_keep_failed_source = True


def openmp_runtime() -> str:
    """The path of the OpenMP runtime `libiomp5.so` shipped by the `intel-openmp` PyPI wheel.

    MLIR's OpenMP lowering calls the `__kmpc_*` entry points, which libiomp5 implements; the
    wheel installs it into `<prefix>/lib`, so setup stays pip-only. Raises CompilerError when
    it is missing.
    """
    import sys
    from importlib import metadata

    candidates = []
    try:
        for f in metadata.distribution("intel-openmp").files or []:
            if os.path.basename(str(f)) == "libiomp5.so":
                candidates.append(str(f.locate()))
    except metadata.PackageNotFoundError:
        pass
    candidates += [os.path.join(p, "lib", "libiomp5.so") for p in (sys.prefix, sys.base_prefix)]
    for c in candidates:
        if os.path.exists(c):
            return os.path.realpath(c)
    raise CompilerError("OpenMP kernels need libiomp5.so: pip install intel-openmp")


def use_openmp_defaults() -> None:
    """Nova's OpenMP runtime settings, unless the user set them: call before the first threaded
    kernel runs (the runtime reads its environment when it initializes, at the first parallel
    region).

    KMP_BLOCKTIME=5 (ms): idle workers spin 5 ms before they sleep (the default is 200 ms).
    Measured on the 2-vCPU development machine (bench/NOTES.md): waking a sleeping worker costs
    ~100-200 us there (a 2-thread 256^3 matmul took 325-439 us with 0 against 205-244 us with 5),
    while 200 ms of spinning slowed single-threaded work that followed (1473-1560 against
    1371-1457 us for a 2-thread matmul + 1 ms of serial kernels). 5 ms keeps the workers hot
    across the back-to-back kernels of a step and frees the core soon after.
    """
    os.environ.setdefault("KMP_BLOCKTIME", "5")


# LLVM command-line options for every kernel compile, set once per process in the libLLVM.so
# the MLIR bindings use (nothing else in the process shares it). -unroll-threshold=60 (O3's
# default is 300) stops LLVM from fully unrolling the 96-step reduction loops of a row kernel
# and from unrolling the matmul's K loop once more on top of the generator's own register tile:
# LLVM's time on the tiny GPT-2 step's 47 kernels fell from 7.0 to 5.1 s, while 1-thread GEMM at
# 256-2048 and the fused softmax / layer norm / GELU stayed within the run-to-run noise
# (bench/NOTES.md). NOVA_LLVM_OPTIONS replaces the list (space-separated; "" for LLVM's
# defaults). Part of every kernel's cache key (cache.host_target).
LLVM_OPTIONS = ("-unroll-threshold=60",)

_llvm_options_set = False


def llvm_options() -> tuple[str, ...]:
    """The LLVM options kernels are compiled with (see LLVM_OPTIONS)."""
    env = os.environ.get("NOVA_LLVM_OPTIONS")
    return LLVM_OPTIONS if env is None else tuple(env.split())


def _set_llvm_options() -> None:
    """Passes llvm_options() to LLVM's option parser, once per process (LLVM rejects a second
    occurrence of an option by exiting the process)."""
    global _llvm_options_set
    if _llvm_options_set:
        return
    _llvm_options_set = True
    opts = llvm_options()
    if not opts:
        return
    lib = object_code.libllvm_path()
    if lib is None:  # bindings linked otherwise: compile with LLVM's defaults
        return
    if "NOVA_LLVM_OPTIONS" in os.environ:
        # LLVM's parser ends the process on an option it does not know: ask llc (same LLVM)
        # first, and raise instead.
        llc = os.path.join(os.path.dirname(os.path.dirname(lib)), "bin", "llc")
        if os.path.exists(llc):
            res = subprocess.run([llc, *opts, "-o", os.devnull, os.devnull], capture_output=True,
                                 text=True)
            if res.returncode != 0:
                _llvm_options_set = False
                raise ValueError(f"NOVA_LLVM_OPTIONS={os.environ['NOVA_LLVM_OPTIONS']!r}: LLVM "
                                 f"rejects it: {res.stderr.strip()}")
    llvm = ctypes.CDLL(lib)
    args = [b"nova"] + [o.encode() for o in opts]
    llvm.LLVMParseCommandLineOptions(len(args), (ctypes.c_char_p * len(args))(*args), None)


def compile_to_shared_library(text: str, func_names: list[str], so_path: str, *,
                              dump_dir: str | None = None, what: str = "kernels",
                              openmp: bool = False) -> None:
    """Compiles the MLIR module `text` defining `func_names` into the shared library `so_path`.

    With `openmp=True` the module may contain `omp` dialect regions: it is lowered with
    CPU_PIPELINE_OPENMP, JIT-resolved against and linked to libiomp5 (`openmp_runtime()`), with
    an rpath so that loading the library finds the runtime without LD_LIBRARY_PATH.

    The library is written atomically (temporary file + rename). Raises CompilerError naming the
    kernels, the failing stage and the path of a dump of the MLIR.
    """
    from nova.compiler.bindings import load_mlir

    load_mlir()
    _set_llvm_options()

    omp_lib = openmp_runtime() if openmp else None
    if openmp:
        use_openmp_defaults()
    work = tempfile.mkdtemp(prefix="nova-cc-")
    try:
        _compile_and_link(text, func_names, so_path, work, dump_dir, what, omp_lib)
    except CompilerError:
        # The error names the MLIR source: without a dump_dir it lives in `work`, so keep that
        # one file (the object and the half-written library go). A forked compile worker keeps
        # nothing: the parent compiles a failed job again and reports its own copy.
        if dump_dir is not None or not _keep_failed_source:
            shutil.rmtree(work, ignore_errors=True)
        else:
            for name in os.listdir(work):
                if not name.endswith(".mlir"):
                    os.remove(os.path.join(work, name))
        raise
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    shutil.rmtree(work, ignore_errors=True)


def _compile_and_link(text: str, func_names: list[str], so_path: str, work: str,
                      dump_dir: str | None, what: str, omp_lib: str | None) -> None:
    """compile_to_shared_library's work, with its scratch files (MLIR source unless dump_dir,
    object file) in the folder `work`."""
    from mlir import ir, passmanager

    openmp = omp_lib is not None
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
            pm = passmanager.PassManager.parse(CPU_PIPELINE_OPENMP if openmp else CPU_PIPELINE)
            # MLIR verifies the whole module after every pass by default: 55-65 % of the
            # lowering time of the small GPT-2 step's kernels (0.98-1.20 s against 0.38-0.51 s
            # without; bench/NOTES.md round 6). The input was verified above and the result is
            # verified once below; with `verify_passes` (the test suite) every pass is checked,
            # so a failure names the pass that broke the module.
            pm.enable_verifier(_verify_each_pass())
            pm.run(module.operation)
            stage = "verify lowered"
            module.operation.verify()
            if dump_dir:
                base = os.path.join(dump_dir, os.path.basename(so_path))
                with open(base + ".llvm.mlir", "w") as f:
                    f.write(str(module))
                from mlir.dialects import llvm as llvm_dialect

                with open(base + ".ll", "w") as f:  # the LLVM IR handed to the JIT
                    f.write(llvm_dialect.translate_module_to_llvmir(module.operation))
            stage = "llvm"
            obj = os.path.join(work, "k.o")
            native = object_code.llvm()
            if native is not None:  # Nova's pass pipeline (object_code.py)
                from mlir.dialects import llvm as llvm_dialect

                native.emit_object(llvm_dialect.translate_module_to_llvmir(module.operation),
                                   obj, object_code.pipeline())
            else:
                # Materializing the object resolves every external symbol in-process; an
                # unresolved `__kmpc_*` would abort the whole process, hence shared_libs.
                from mlir.execution_engine import ExecutionEngine

                shared = [omp_lib] if openmp else []
                engine = ExecutionEngine(module, opt_level=3, enable_pic=True,
                                         shared_libs=shared)
                for name in func_names:
                    engine.raw_lookup(name)
                engine.dump_to_object_file(obj)
        except Exception as e:  # noqa: BLE001 - rethrown with the kernel and stage named
            raise CompilerError(
                f"compiling {what} failed in stage '{stage}': {e}\n  MLIR: {src_path}"
            ) from None
    tmp_so = f"{so_path}.tmp{os.getpid()}.{threading.get_ident()}"  # per process and thread
    omp_dir = os.path.dirname(omp_lib) if openmp else None
    errors = []
    for link in link_commands(obj, tmp_so, omp_dir):
        res = subprocess.run(link, capture_output=True, text=True)
        if res.returncode == 0:
            break
        errors.append(f"{link[0]}: {res.stderr.strip()}")
    else:
        if os.path.exists(tmp_so):
            os.remove(tmp_so)
        raise CompilerError(f"linking {what} failed: {'; '.join(errors)}\n  MLIR: {src_path}")
    os.replace(tmp_so, so_path)


def _verify_each_pass() -> bool:
    from nova.config import config

    return bool(config.read("verify_passes"))


def link_commands(obj: str, out: str, omp_dir: str | None) -> list[list[str]]:
    """Commands that link the object file `obj` into the shared library `out`, to try in order.

    The system linker `ld` directly first: the kernels need no C runtime start files, and the
    gcc driver (gcc -> collect2 -> ld, with its LTO plugin) cost ~46 ms a library against
    ~14 ms for ld alone (bench/NOTES.md round 6). LLVM may call libgcc's helpers (a float64 ->
    float16 conversion is `__truncdfhf2` on a host without AVX-512 FP16), so ld links libgcc.a
    as gcc would, and `-z defs` makes any symbol still undefined a link error rather than a
    library that fails to load. `gcc -shared` where ld is missing or fails. With omp_dir, the
    library needs libiomp5 and finds it through its run path."""
    libs = ["-lm", "-lc"]
    cmds = []
    libgcc = _libgcc()
    if shutil.which("ld") and libgcc:
        omp = [f"-L{omp_dir}", "-liomp5", "-rpath", omp_dir] if omp_dir else []
        cmds.append(["ld", "-shared", "-z", "defs", "-o", out, obj, *libs, libgcc, *omp])
    omp = [f"-L{omp_dir}", "-liomp5", f"-Wl,-rpath,{omp_dir}"] if omp_dir else []
    cmds.append(["gcc", "-shared", "-o", out, obj, *libs, *omp])
    return cmds


_libgcc_path: list = []


def _libgcc() -> str | None:
    """The path of gcc's libgcc.a (`gcc -print-libgcc-file-name`, asked once), or None."""
    if not _libgcc_path:
        path = None
        try:
            res = subprocess.run(["gcc", "-print-libgcc-file-name"], capture_output=True,
                                 text=True)
            cand = res.stdout.strip()
            if res.returncode == 0 and os.path.isabs(cand) and os.path.exists(cand):
                path = cand
        except OSError:
            pass
        _libgcc_path.append(path)
    return _libgcc_path[0]


# --- parallel compilation in forked processes --------------------------------------------------
# The MLIR bindings hold the GIL through lowering and LLVM (bench/NOTES.md: two Python threads
# took as long as one after the other), and LLVM's instruction selection is ~85 % of a cold
# compile. So a large batch is split, and the parts are compiled at once in forked children
# (they inherit the imported MLIR, a fresh interpreter would pay ~0.3 s to import it) while the
# parent compiles the first part; every part becomes its own shared library.
# NOVA_COMPILE_PROCESSES caps the processes (1: no fork); the default is the usable cores.
# A batch is split only from MIN_PARALLEL_TEXT characters of MLIR on: a fork of a process with
# a few hundred MB mapped costs milliseconds, a small kernel's compile ~50-100 ms.
MIN_PARALLEL_TEXT = 20_000


def compile_processes() -> int:
    """How many processes may compile one batch at once (>= 1)."""
    env = os.environ.get("NOVA_COMPILE_PROCESSES")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise ValueError(f"NOVA_COMPILE_PROCESSES must be an integer, got {env!r}") from None
    if not hasattr(os, "fork"):
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def split_for_processes(sizes: list[int], parts: int) -> list[list[int]]:
    """Indices of `sizes` (a cost per kernel, here its MLIR text length) in at most `parts`
    groups of about equal total: largest first, each into the lightest group (LPT scheduling,
    within 4/3 of the optimum). Groups keep the given order inside; empty groups are dropped."""
    groups: list[list[int]] = [[] for _ in range(max(1, parts))]
    load = [0] * len(groups)
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        g = load.index(min(load))
        groups[g].append(i)
        load[g] += sizes[i]
    return [sorted(g) for g in groups if g]


# LLVM time per character of MLIR text, relative to loop kernels, for the kernels that cost
# more: a shape-generic matmul (dynamic sizes and strides: ~9 us/char against ~4-5 for loop
# and shape-specific matmul kernels, measured one kernel at a time on the tiny GPT-2 step).
_COST_WEIGHTS = (("nova_gemm_", 2.0),)


def compile_cost(symbol: str, text: str) -> float:
    """Estimated LLVM cost of one kernel for split_for_processes: its MLIR text length, weighted
    by kind (_COST_WEIGHTS). With text length alone, the tiny GPT-2 step's two parts took 2.25
    and 1.82 s (the three generic matmuls in one)."""
    for prefix, weight in _COST_WEIGHTS:
        if symbol.startswith(prefix):
            return len(text) * weight
    return float(len(text))


def compile_in_parallel(jobs: list[dict], workers: int | None = None) -> None:
    """Runs `compile_to_shared_library(**job)` for every job on `workers` processes (default:
    one per job): this one and forked children, which take the jobs from a shared queue in the
    given order (put the costliest first), each claiming a job by creating its claim file
    (O_EXCL), so a worker that finishes early takes more and none idles while another still
    has a queue. A job a child claimed but did not finish (or a child that could not be forked)
    is compiled again here, so errors surface as this process's CompilerError."""
    if not jobs:
        return
    workers = len(jobs) if workers is None else max(1, min(workers, len(jobs)))
    claims = tempfile.mkdtemp(prefix="nova-claims-")

    def claim(n: int) -> bool:
        try:
            os.close(os.open(os.path.join(claims, str(n)), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            return False

    def work() -> None:
        for n, job in enumerate(jobs):
            if claim(n):
                compile_to_shared_library(**job)

    children = [pid for pid in (_fork_worker(work) for _ in range(workers - 1))
                if pid is not None]
    try:
        work()
    finally:
        for pid in children:
            os.waitpid(pid, 0)
        shutil.rmtree(claims, ignore_errors=True)
    for job in jobs:
        if not os.path.exists(job["so_path"]):
            compile_to_shared_library(**job)


def _fork_worker(fn) -> int | None:
    """Forks a child that runs fn() and leaves without running the exit hooks (status 0 when fn
    returned, 1 when it raised); the child's pid, or None when the fork failed. Forks happen
    while this process holds the compile lock, so that no other thread of it is inside MLIR or
    LLVM (whose internal locks a child would inherit held); the child starts with a lock of its
    own and keeps no failed MLIR source (the parent compiles a failed job again and reports)."""
    global _lock, _keep_failed_source
    # The child makes temporary folders: resolve the temporary directory here, once, so the
    # child never takes tempfile's module lock for it, which another thread may hold at the
    # fork (a child waited on it forever in a CI run, when the launcher was built in a thread;
    # it is a process of its own now). Nova's own module locks are renewed in the child by
    # os.register_at_fork (cache.py, backend_cpu.py, launcher.py).
    tempfile.gettempdir()
    with _lock:
        try:
            with warnings.catch_warnings():
                # JAX, when imported, warns about any fork (its threads hold locks a child
                # using JAX could wait on forever); the child here runs MLIR and LLVM only.
                warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
                pid = os.fork()
        except OSError:
            return None
        if pid == 0:
            code = 1
            try:
                _lock = threading.Lock()
                _keep_failed_source = False
                fn()
                code = 0
            except BaseException:  # noqa: BLE001 - the parent recompiles and reports
                pass
            finally:
                os._exit(code)
    return pid


class BackgroundCompile:
    """`compile_to_shared_library(**job)` in a forked child while this process goes on, so LLVM
    runs on another core during the Python part of a compile (passes, kernel synthesis).

    `after()` runs once the library exists (in the child, or here when the job had to be
    compiled here): the kernel cache's entries for it. `wait()` joins the child and, when it
    left no library (it failed, or no child could be forked, or a single compile process is
    configured: NOVA_COMPILE_PROCESSES=1), compiles the job in this process, so a failure
    raises this process's CompilerError. `done()` tells without blocking whether wait() would
    return at once."""

    def __init__(self, job: dict, after=None):
        self.job = job
        self._after = after
        self._lock = threading.Lock()
        self._finished = False
        self.pid = None
        if compile_processes() > 1:
            def run():
                compile_to_shared_library(**job)
                if after is not None:
                    after()

            self.pid = _fork_worker(run)

    def done(self) -> bool:
        if not self._lock.acquire(blocking=False):
            return False  # another thread is in wait()
        try:
            if self._finished or self.pid is None:
                return True
            try:
                pid, _ = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                pid = self.pid
            if pid == 0:
                return False
            self.pid = None
            return True
        finally:
            self._lock.release()

    def wait(self) -> None:
        with self._lock:
            if self._finished:
                return
            if self.pid is not None:
                try:
                    os.waitpid(self.pid, 0)
                except ChildProcessError:
                    pass
                self.pid = None
            if not os.path.exists(self.job["so_path"]):
                compile_to_shared_library(**self.job)
                if self._after is not None:
                    self._after()
            self._finished = True


_omp_preloaded = False


def _preload_openmp_runtime() -> None:
    """Loads this environment's `openmp_runtime()` into the process (RTLD_GLOBAL), once.

    A kernel library from the on-disk cache may have been linked by another environment (another
    checkout's .venv sharing ~/.cache/nova): its rpath names that environment's libiomp5.so. Had it
    been loaded first, the next kernel compiled here (ExecutionEngine dlopens this environment's
    runtime by path) would bring a second OpenMP runtime into the process, and libiomp5 aborts the
    process ("OMP: Error #15 ... already initialized"). With this environment's runtime loaded
    first, every kernel's DT_NEEDED `libiomp5.so` resolves to it by soname, whatever its rpath
    says (or whether that path still exists). Without intel-openmp it does nothing."""
    global _omp_preloaded
    if _omp_preloaded:
        return
    _omp_preloaded = True
    try:
        path = openmp_runtime()
    except CompilerError:
        return
    ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


def load_function(so_path: str, name: str, nargs: int):
    """A ctypes function `void name(void*, ...)` from a compiled library (this environment's
    OpenMP runtime is loaded first, see `_preload_openmp_runtime`)."""
    _preload_openmp_runtime()
    lib = ctypes.CDLL(so_path)
    try:
        fn = getattr(lib, name)
    except AttributeError:  # e.g. an LLVM pipeline (NOVA_LLVM_PIPELINE) that dropped it
        raise CompilerError(f"the compiled library {so_path} does not define the kernel "
                            f"{name}") from None
    fn.argtypes = [ctypes.c_void_p] * nargs
    fn.restype = None
    return fn
