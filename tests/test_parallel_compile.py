"""Cold compiles split a large kernel batch over forked processes (codegen/cpu/compile.py)."""

import glob
import os

import numpy as np
import pytest

import nova
import nova.numpy as jnp
from nova.compiler import backend_cpu, cache
from nova.compiler.codegen.cpu import compile as cc
from nova.core.errors import CompilerError

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def test_split_balances_the_text_over_processes():
    sizes = [50, 10, 40, 30, 20, 5]
    groups = cc.split_for_processes(sizes, 2)
    assert sorted(i for g in groups for i in g) == list(range(6))
    assert all(g == sorted(g) for g in groups)
    totals = sorted(sum(sizes[i] for i in g) for g in groups)
    assert totals == [75, 80]
    assert cc.split_for_processes(sizes, 1) == [list(range(6))]
    assert cc.split_for_processes([7], 4) == [[0]]


def test_compile_processes_reads_the_environment(monkeypatch):
    monkeypatch.setenv("NOVA_COMPILE_PROCESSES", "3")
    assert cc.compile_processes() == 3
    monkeypatch.setenv("NOVA_COMPILE_PROCESSES", "0")
    assert cc.compile_processes() == 1
    monkeypatch.setenv("NOVA_COMPILE_PROCESSES", "two")
    with pytest.raises(ValueError, match="NOVA_COMPILE_PROCESSES.*'two'"):
        cc.compile_processes()


def test_a_batch_compiled_by_two_processes_gives_several_libraries(monkeypatch, tmp_path):
    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NOVA_COMPILE_PROCESSES", "2")
    monkeypatch.setattr(backend_cpu, "MIN_PARALLEL_TEXT", 0)
    cache.clear_memory()  # an earlier test in this process may hold the matmul kernel already
    rng = np.random.default_rng(5)
    x = rng.standard_normal((40, 24)).astype(np.float32)
    w = rng.standard_normal((24, 16)).astype(np.float32)

    def f(x, w):  # a matmul, a row reduction and a column reduction: three kernels
        h = jnp.tanh(x @ w)
        return jnp.sum(h * h, axis=1), jnp.max(h, axis=0)

    got = nova.jit(f)(x, w)
    h = np.tanh(x @ w)
    np.testing.assert_allclose(np.asarray(got[0]), np.sum(h * h, axis=1), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got[1]), np.max(h, axis=0), rtol=1e-5)
    libraries = [p for p in glob.glob(str(tmp_path / "cpu" / "lib" / "*.so"))
                 if "launcher" not in p]
    assert len(libraries) == 3  # up to GROUPS_PER_PROCESS libraries per process


def test_processes_take_jobs_from_a_queue_each_compiled_once(tmp_path, monkeypatch):
    """Two workers (this process and a forked child) claim jobs in order: every job is compiled
    exactly once, both workers compile, and every library exists afterwards."""
    import time

    log = tmp_path / "log"
    real = cc.compile_to_shared_library
    parent = os.getpid()

    def logged(**job):
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {job['func_names'][0]}\n")
        if os.getpid() == parent and job["func_names"][0] == "k_0":
            time.sleep(1.0)  # a slow first job: the child takes the next ones meanwhile
        real(**job)

    monkeypatch.setattr(cc, "compile_to_shared_library", logged)
    jobs = [dict(text=f"func.func @k_{n}(%a: memref<4xf32>) {{\n  return\n}}\n",
                 func_names=[f"k_{n}"], so_path=str(tmp_path / f"k{n}.so"), what=f"k_{n}")
            for n in range(6)]
    cc.compile_in_parallel(jobs, workers=2)
    entries = [ln.split() for ln in log.read_text().splitlines()]
    assert sorted(name for _, name in entries) == sorted(f"k_{n}" for n in range(6))
    assert len({pid for pid, _ in entries}) == 2
    assert all(os.path.exists(j["so_path"]) for j in jobs)


def test_a_failing_child_job_is_reported_by_the_parent(tmp_path):
    good = ("func.func @k_good(%a: memref<4xf32>) {\n  return\n}\n")
    bad = ("func.func @k_bad(%a: memref<4xf32>) {\n  %x = arith.addf %a, %a : f32\n"
           "  return\n}\n")
    jobs = [dict(text=good, func_names=["k_good"], so_path=str(tmp_path / "good.so"),
                 what="kernel k_good"),
            dict(text=bad, func_names=["k_bad"], so_path=str(tmp_path / "bad.so"),
                 what="kernel k_bad")]
    with pytest.raises(CompilerError, match=r"(?s)k_bad.*stage 'parse'"):
        cc.compile_in_parallel(jobs)
    assert os.path.exists(tmp_path / "good.so") and not os.path.exists(tmp_path / "bad.so")


def test_llvm_options_default_and_override(monkeypatch):
    monkeypatch.delenv("NOVA_LLVM_OPTIONS", raising=False)
    assert cc.llvm_options() == cc.LLVM_OPTIONS
    monkeypatch.setenv("NOVA_LLVM_OPTIONS", "-unroll-threshold=100 -disable-lsr")
    assert cc.llvm_options() == ("-unroll-threshold=100", "-disable-lsr")
    monkeypatch.setenv("NOVA_LLVM_OPTIONS", "")
    assert cc.llvm_options() == ()


def test_llvm_options_are_part_of_the_kernel_target(monkeypatch):
    from nova.compiler import cache

    monkeypatch.delenv("NOVA_LLVM_OPTIONS", raising=False)
    default = cache.host_target()
    monkeypatch.setenv("NOVA_LLVM_OPTIONS", "")
    assert cache.host_target() != default


def test_an_unknown_llvm_option_raises_instead_of_ending_the_process(monkeypatch):
    monkeypatch.setenv("NOVA_LLVM_OPTIONS", "-no-such-llvm-option=3")
    monkeypatch.setattr(cc, "_llvm_options_set", False)
    with pytest.raises(ValueError, match="NOVA_LLVM_OPTIONS.*no-such-llvm-option"):
        cc._set_llvm_options()
    assert cc._llvm_options_set is False


def test_compile_cost_weights_generic_matmuls():
    """A shape-generic matmul costs LLVM about twice a loop kernel's time per character, so the
    split counts its text double."""
    assert cc.compile_cost("k_0123", "x" * 1000) == 1000.0
    assert cc.compile_cost("nova_gemm_f32_nn_6x16", "x" * 1000) == 2000.0
    # three generic matmuls no longer land together against many loop kernels of equal text
    names = ["nova_gemm_a", "nova_gemm_b", "nova_gemm_c"] + [f"k_{i}" for i in range(6)]
    sizes = [cc.compile_cost(n, "x" * 100) for n in names]
    groups = cc.split_for_processes(sizes, 2)
    loads = [sum(sizes[i] for i in g) for g in groups]
    assert max(loads) - min(loads) <= 200


@pytest.mark.parametrize("cache_usable", [True, False])
def test_a_failed_parallel_compile_leaves_only_the_source_its_error_names(
        cache_usable, monkeypatch, tmp_path):
    """Forked workers keep nothing of a failed compile (the parent compiles the job again and
    names its own copy), and libraries meant for memory only (an unusable cache directory)
    leave no folders behind when the compile fails (both found by review)."""
    import tempfile
    import warnings

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    if cache_usable:
        monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path / "cache"))
    else:
        (tmp_path / "not-a-dir").write_text("")
        monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path / "not-a-dir"))
    monkeypatch.setenv("NOVA_COMPILE_PROCESSES", "2")
    monkeypatch.setenv("NOVA_LLVM_PIPELINE", "function(no-such-pass)")
    monkeypatch.setattr(backend_cpu, "MIN_PARALLEL_TEXT", 0)
    cache.clear_memory()
    rng = np.random.default_rng(9)
    x = rng.standard_normal((41, 23)).astype(np.float32)
    w = rng.standard_normal((23, 17)).astype(np.float32)

    def f(x, w):
        h = jnp.tanh(x @ w)
        return jnp.sum(h * h, axis=1), jnp.max(h, axis=0), jnp.exp(h) - 1.0

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unusable cache directory's warning
        with pytest.raises(CompilerError, match="stage 'llvm'") as ei:
            nova.jit(f)(x, w)
    named = str(ei.value).split("MLIR: ")[1].strip()
    from nova.runtime import launcher

    launcher._finish_pending_at_exit()  # a prefetched launcher build keeps a folder meanwhile
    left = sorted(str(p) for p in scratch.rglob("*")
                  if p.is_file() and p.relative_to(scratch).parts[0].startswith("nova-"))
    assert left == [named]
    assert not [p for p in scratch.iterdir() if p.name.startswith("nova-mem-")]


def test_threads_compiling_one_library_do_not_share_a_temporary_file(tmp_path):
    """Two threads of one process building the same library (one kernel met by two threads'
    first calls) each link into a temporary of their own before the atomic rename (the
    temporary was named by the process id alone: one thread's rename took the other's file,
    found by review)."""
    import threading

    text = "func.func @k_t(%a: memref<4xf32>) {\n  return\n}\n"
    so = str(tmp_path / "k_t.so")
    errors = []

    def build():
        try:
            for _ in range(3):
                cc.compile_to_shared_library(text, ["k_t"], so, what="k_t")
        except Exception as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)

    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert os.path.exists(so) and not glob.glob(so + ".tmp*")


def test_a_background_compile_builds_in_a_child_and_reports_failures_here(tmp_path, monkeypatch):
    monkeypatch.setenv("NOVA_COMPILE_PROCESSES", "2")
    parent = os.getpid()
    good = dict(text="func.func @k_bg(%a: memref<4xf32>) {\n  return\n}\n", func_names=["k_bg"],
                so_path=str(tmp_path / "bg.so"), what="kernel k_bg")
    marks = tmp_path / "after"
    bg = cc.BackgroundCompile(good, after=lambda: marks.write_text(str(os.getpid())))
    assert bg.pid is not None  # a child builds it
    bg.wait()
    assert os.path.exists(good["so_path"]) and bg.done()
    assert int(marks.read_text()) != parent  # the cache entries were written by the child
    bg.wait()  # idempotent
    bad = dict(text="func.func @k_bad(%a: memref<4xf32>) {\n  %x = arith.addf %a, %a : f32\n"
               "  return\n}\n", func_names=["k_bad"], so_path=str(tmp_path / "bad.so"),
               what="kernel k_bad")
    with pytest.raises(CompilerError, match=r"(?s)k_bad.*stage 'parse'"):
        cc.BackgroundCompile(bad).wait()
    monkeypatch.setenv("NOVA_COMPILE_PROCESSES", "1")  # no fork: wait() compiles here
    one = dict(good, so_path=str(tmp_path / "one.so"))
    bg = cc.BackgroundCompile(one, after=lambda: marks.write_text(str(os.getpid())))
    assert bg.pid is None and not os.path.exists(one["so_path"])
    bg.wait()
    assert os.path.exists(one["so_path"]) and int(marks.read_text()) == parent


@pytest.mark.parametrize("shape", [((96, 64), (64, 80), False, False),
                                   ((64, 96), (64, 80), True, False),
                                   ((3, 96, 64), (3, 80, 64), False, True)])
def test_the_prefetched_generic_matmul_is_the_kernel_matmuls_run(shape, monkeypatch, tmp_path):
    """The shape-generic matmul built before the passes (prefetch_generic_matmuls) has the very
    cache key of the kernel a matmul of any shape and transposes then runs, and the jitted
    result is right."""
    (sa, sb, ta, tb) = shape
    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NOVA_COMPILE_PROCESSES", "2")
    cache.clear_memory()
    rng = np.random.default_rng(3)
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)

    def f(a, b):
        a2 = jnp.swapaxes(a, -1, -2) if ta else a
        b2 = jnp.swapaxes(b, -1, -2) if tb else b
        return a2 @ b2

    started = []
    real = backend_cpu._compile_in_background

    def spy(entries, target):
        started.extend(key for _, key, _, _ in entries)
        return real(entries, target)

    monkeypatch.setattr(backend_cpu, "_compile_in_background", spy)
    got = nova.jit(f)(a, b)
    np.testing.assert_allclose(np.asarray(got), f(a, b), rtol=1e-4, atol=1e-4)
    sym, text, nargs = backend_cpu.generic_matmul_text(np.float32)
    key = cache.kernel_key(sym, text, cache.host_target())
    assert started[0] == key  # prefetched first, before the passes
    assert cache.disk_get(key) is not None
    assert key not in backend_cpu._background  # joined and loaded by compile_fused
    used = [launch.fn for launch in nova.jit(f).lower(a, b).compile()._exe.launches]
    assert key in [cache.key_of(fn) for fn in used]


def test_costly_kernels_built_ahead_in_a_child_that_fails_are_rebuilt_here(monkeypatch,
                                                                           tmp_path):
    """The attention and contraction kernels of a program are built in a child while the rest
    are synthesized; a child that fails (here: every compile in a child raises) changes
    nothing but time: the parent builds them and the results are right."""
    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NOVA_COMPILE_PROCESSES", "2")
    monkeypatch.setattr(backend_cpu, "MIN_PARALLEL_TEXT", 0)
    cache.clear_memory()
    parent = os.getpid()
    real = cc.compile_to_shared_library

    def failing_in_children(*args, **job):
        if os.getpid() != parent:
            raise CompilerError("injected failure in a compile child")
        return real(*args, **job)

    monkeypatch.setattr(cc, "compile_to_shared_library", failing_in_children)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((48, 32)).astype(np.float32)
    w = rng.standard_normal((32, 40)).astype(np.float32)

    def f(x, w):
        h = jnp.tanh(x @ w)  # a contraction with an epilogue: built ahead
        return jnp.sum(h * h, axis=1), jnp.max(h, axis=0)

    early = []
    monkeypatch.setattr(backend_cpu, "_EARLY_KINDS", ("contraction",))
    real_start = backend_cpu._compile_in_background

    def spy(entries, target):
        early.append([sym for sym, _, _, _ in entries])
        return real_start(entries, target)

    monkeypatch.setattr(backend_cpu, "_compile_in_background", spy)
    s, m = nova.jit(f)(x, w)
    h = np.tanh(x @ w)
    np.testing.assert_allclose(np.asarray(s), np.sum(h * h, axis=1), rtol=1e-4)
    np.testing.assert_allclose(np.asarray(m), np.max(h, axis=0), rtol=1e-5)
    assert early and not backend_cpu._background


def test_a_background_kernel_forgotten_by_another_thread_is_loaded_from_its_entry(
        monkeypatch, tmp_path):
    """compile_fused saw a kernel in the background, but before it took the job another
    thread's compile forgot the finished job (_reap_background): the kernel comes from the
    child's cache entry (or is built here), never a missing function."""
    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NOVA_COMPILE_PROCESSES", "2")
    cache.clear_memory()

    def forgotten(key):  # what a reap in another thread leaves: no job, no loaded kernel
        with backend_cpu._background_lock:
            rec = backend_cpu._background.pop(key, None)
        if rec is not None:
            rec[0].wait()

    monkeypatch.setattr(backend_cpu, "_take_background", forgotten)
    rng = np.random.default_rng(6)
    a = rng.standard_normal((128, 64)).astype(np.float32)
    b = rng.standard_normal((64, 96)).astype(np.float32)
    got = nova.jit(lambda a, b: a @ b)(a, b)
    np.testing.assert_allclose(np.asarray(got), a @ b, rtol=1e-4, atol=1e-4)


def test_threads_compiling_matmul_programs_at_once_all_get_their_kernels(monkeypatch, tmp_path):
    """Four threads' first calls, each with a float32 matmul (the generic kernel built in the
    background) and a kernel of its own: every thread waits on the one job building the shared
    kernel (a thread took another's record before: a missing function, in 6 of 14 runs)."""
    import threading

    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NOVA_COMPILE_PROCESSES", "2")
    cache.clear_memory()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((96, 64)).astype(np.float32)
    b = rng.standard_normal((64, 80)).astype(np.float32)
    fs = [nova.jit(lambda a, b, op=op: (a @ b, jnp.sum(op(a), axis=0)))
          for op in (jnp.sin, jnp.cos, jnp.exp, jnp.tanh)]
    barrier = threading.Barrier(len(fs))
    errors = []

    def run(f):
        barrier.wait()
        try:
            np.testing.assert_allclose(np.asarray(f(a, b)[0]), a @ b, rtol=1e-4, atol=1e-4)
        except BaseException as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)

    threads = [threading.Thread(target=run, args=(f,)) for f in fs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert not backend_cpu._background


def _wait_child(pid: int, seconds: float = 60.0) -> int | None:
    """The exit status of child pid, or None (after killing it) when it is still running."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return None


def test_a_forked_compile_child_does_not_wait_on_locks_held_at_the_fork():
    """Found in a CI run: a background-compile child waited forever on a lock that another
    thread of the parent (the launcher build) held at the fork. Nova's module locks start free
    in the child, and the temporary directory is resolved before forking."""
    import tempfile
    import threading

    from nova.runtime import launcher

    def child():
        cache.memory_get("no such key")
        with backend_cpu._background_lock, launcher._lock:
            pass
        tempfile.mkdtemp(prefix="nova-fork-test-")

    held = threading.Event()
    release = threading.Event()

    def hold():  # another thread holding every lock while the fork happens
        with cache._lock, backend_cpu._background_lock, launcher._lock:
            held.set()
            release.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(30)
    saved, tempfile.tempdir = tempfile.tempdir, None
    try:
        pid = cc._fork_worker(child)
    finally:
        release.set()
        t.join()
        if tempfile.tempdir is None:
            tempfile.tempdir = saved
    assert pid is not None
    assert _wait_child(pid) == 0  # 0: the child ran through; None: it hung (killed)
    assert tempfile.tempdir is not None  # resolved before the fork
