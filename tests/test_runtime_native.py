"""The native launcher (nova/runtime/launcher.py): a compiled program runs its generated kernels
in one native call, stretches between host launches each in one call, with the same results as
calling every kernel from Python and as the reference interpreter."""

import ctypes
import numpy as np
import pytest

import nova
import nova.numpy as jnp
from nova.compiler.backend_cpu import compile_program
from nova.compiler.pipeline import run_passes
from nova.core.interpreter import run_program
from nova.runtime import executable, launcher
from tests.helpers import assert_close


def _softmax(x):
    e = jnp.exp(x - jnp.max(x, -1, keepdims=True))
    return e / jnp.sum(e, -1, keepdims=True)


def _mlp_step(x, w1, w2):
    def loss(w1, w2):
        h = jnp.tanh(x @ w1)
        return jnp.sum(_softmax(h @ w2) ** 2)

    g1, g2 = nova.grad(loss, argnums=(0, 1))(w1, w2)
    return w1 - 0.1 * g1, w2 - 0.1 * g2


def _args(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((16, 32)).astype(np.float32),
            rng.standard_normal((32, 48)).astype(np.float32) * 0.2,
            rng.standard_normal((48, 24)).astype(np.float32) * 0.2]


class _Counting:
    """Wraps the launcher's ctypes function, counting native calls and launches."""

    def __init__(self, fn):
        self.fn, self.calls, self.launches = fn, 0, 0

    def __call__(self, table, count, slots):
        self.calls += 1
        self.launches += count
        return self.fn(table, count, slots)


def test_a_step_is_one_native_call_with_the_same_results():
    args = _args()
    program = run_passes(nova.make_program(_mlp_step)(*args))
    exe = compile_program(program)
    assert exe.launcher is not None
    assert all(launch.fn is not None for launch in exe.launches) and len(exe.launches) > 5
    exe.launcher = counting = _Counting(exe.launcher)
    for _ in range(2):  # the slot table is reused between calls
        got = exe(args)
        assert counting.launches == counting.calls * len(exe.launches)
        for g, p, w in zip(got, exe._run(args, None), run_program(program, args), strict=True):
            assert np.array_equal(g, p)
            assert_close(g, w, rtol=1e-5, atol=1e-6)
    assert counting.calls == 2
    # fresh outputs per call: the caller may keep the first results
    first, second = exe(args), exe(args)
    assert not any(np.shares_memory(a, b) for a, b in zip(first, second))


def test_host_launches_split_the_list_into_native_stretches():
    big = np.arange(64 * 80, dtype=np.float32).reshape(64, 80) / 5000.0  # a host:constant

    def f(x):
        y = jnp.exp(x) * 2.0
        return jnp.sum(jnp.tanh(y + big) * y, -1)

    x = np.random.default_rng(1).standard_normal((64, 80)).astype(np.float32)
    program = run_passes(nova.make_program(f)(x))
    exe = compile_program(program)
    host = [n for n, launch in enumerate(exe.launches) if launch.fn is None]
    assert host, exe.as_text()
    exe.launcher = counting = _Counting(exe.launcher)
    (got,) = exe([x])
    native = len(exe.launches) - len(host)
    assert counting.launches == native and 1 <= counting.calls <= len(host) + 1
    assert_close(got, run_program(program, [x])[0], rtol=1e-5, atol=1e-5)


def test_launches_past_the_argument_limit_run_from_python(monkeypatch):
    monkeypatch.setattr(launcher, "MAX_ARGS", 2)
    args = _args(2)
    program = run_passes(nova.make_program(_mlp_step)(*args))
    exe = compile_program(program)
    exe.launcher = counting = _Counting(exe.launcher)
    got = exe(args)
    wide = sum(1 for launch in exe.launches if len(launch.inputs) + len(launch.outputs) > 2)
    assert wide and counting.launches == len(exe.launches) - wide
    for g, w in zip(got, run_program(program, args), strict=True):
        assert_close(g, w, rtol=1e-5, atol=1e-6)


def test_donated_inputs_are_reused_on_the_native_path():
    f = nova.jit(lambda p, g: p - 0.1 * jnp.tanh(g), donate_argnums=(0,))
    p, g = jnp.ones((128, 128)), jnp.full((128, 128), 2.0)
    out = f(p, g)
    assert_close(out, np.full((128, 128), 1 - 0.1 * np.tanh(2.0), np.float32), rtol=1e-6)
    assert p.is_deleted()


def test_profiling_times_every_kernel_and_skips_the_launcher(monkeypatch):
    monkeypatch.setattr(executable, "_profiling", True)
    monkeypatch.setattr(executable, "_PROFILE", {})
    args = _args(3)
    program = run_passes(nova.make_program(_mlp_step)(*args))
    exe = compile_program(program)
    exe.launcher = counting = _Counting(exe.launcher)
    exe(args)
    assert counting.calls == 0
    names = {launch.name for launch in exe.launches}
    assert names <= set(executable._PROFILE) and "(host between kernels)" in executable._PROFILE


def test_launcher_table_contract():
    """nova_run calls each entry with its slots' addresses in order and stops (returning the
    index) at an argument count it has no case for."""
    run = launcher.load_launcher(None)
    # memcpy(dst, src, n) stands in for a kernel: three pointer-sized arguments from slots.
    addr = ctypes.cast(ctypes.CDLL(None).memcpy, ctypes.c_void_p).value
    src = np.arange(4, dtype=np.float64)
    dst = np.zeros(4, np.float64)
    slots = np.array([dst.ctypes.data, src.ctypes.data, src.nbytes], np.uint64)
    table = np.array([addr, 3, 0, 1, 2, 0, launcher.MAX_ARGS + 1], np.int64)
    assert run(table.ctypes.data, 2, slots.ctypes.data) == 1
    assert np.array_equal(dst, src)


def test_launcher_builds_elsewhere_when_the_cache_folder_is_unusable(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    fn = launcher.load_launcher(str(blocker / "lib"))  # cannot be created, even by root
    assert fn is not None and blocker.is_file()


def test_a_damaged_launcher_library_is_rebuilt(tmp_path):
    so = tmp_path / launcher.library_name()
    so.write_bytes(b"\x7fELF" + bytes(60))  # truncated (as another process might leave it)
    assert launcher.load_launcher(str(tmp_path)) is not None
    assert so.stat().st_size > 64


@pytest.mark.parametrize("process", ["cold", "warm"])
def test_profile_table_says_what_each_kernel_computes(process, tmp_path):
    """NOVA_PROFILE's table: per kernel its calls, time, share of the total and a description
    (kind, distinctive primitives, largest output shape) from describe_kernel, also when the
    executable comes from the executable cache (a warm process: no codegen Kernel at hand)."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import numpy as np, nova, nova.numpy as jnp
        f = nova.jit(lambda x, w: jnp.exp(x @ w - jnp.max(x @ w, axis=-1, keepdims=True)))
        x = np.ones((64, 32), np.float32); w = np.ones((32, 48), np.float32)
        for _ in range(3):
            f(x, w)
    """)
    env = dict(__import__("os").environ, NOVA_PROFILE="1", NOVA_CACHE_DIR=str(tmp_path))
    for _ in range(1 if process == "cold" else 2):
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.split("NOVA_PROFILE\n", 1)[1].splitlines()
    assert lines[0].split()[:5] == ["kernel", "calls", "total", "ms", "mean"]
    rows = {ln.split()[0]: ln for ln in lines[1:] if ln.startswith("k_")}
    assert any("contraction dot_general [64, 48]" in r for r in rows.values()), lines
    assert any("loop" in r and "reduce_max" in r and "exp" in r for r in rows.values()), lines
    assert all(r.split()[1] == "3" for r in rows.values())  # three calls each


def test_fresh_outputs_reuse_buffers_the_caller_dropped():
    """Outputs of at least POOL_MIN_BYTES come from a per-slot pool: a call reuses the buffer of
    an earlier output that nothing references any more, never one still held (as an Array, a
    NumPy view of it, or an argument of the call), and values are never disturbed."""
    from nova.runtime.executable import POOL_MIN_BYTES

    f = nova.jit(lambda x: (x * 2.0, jnp.sum(x)))
    x = np.ones((256, 256), np.float32)
    assert x.nbytes >= POOL_MIN_BYTES
    a, _ = f(x)
    first = np.asarray(a).ctypes.data
    b, _ = f(x * 3.0)
    assert np.asarray(b).ctypes.data != first  # a is still held
    del a
    c, _ = f(x * 5.0)
    assert np.asarray(c).ctypes.data == first  # a was dropped: its buffer is reused
    np.testing.assert_array_equal(np.asarray(b), 6.0)
    view = np.asarray(c)
    del c
    d, _ = f(x)
    assert np.asarray(d).ctypes.data != view.ctypes.data  # a NumPy view keeps it alive
    np.testing.assert_array_equal(view, 10.0)
    # an output fed back as the next call's argument is not handed out while it is read
    e, _ = f(d)
    assert np.asarray(e).ctypes.data != np.asarray(d).ctypes.data
    np.testing.assert_array_equal(np.asarray(e), 4.0)


def test_output_pools_hold_no_buffers_for_eager_ops_and_stay_in_budget(monkeypatch):
    """Eager ops (one cached executable per op and shape) keep no spare outputs; jitted
    programs keep them only within POOL_BUDGET bytes for the whole process."""
    import gc

    gc.collect()  # pools of executables earlier tests dropped
    before = executable._pooled_bytes[0]
    for n in range(3):
        y = jnp.exp(jnp.ones((256, 256 + 8 * n), jnp.float32))
        del y
    assert executable._pooled_bytes[0] == before
    monkeypatch.setattr(executable, "POOL_BUDGET", before)  # no room for anything more
    f = nova.jit(lambda x: x * 3.0)
    x = np.ones((256, 512), np.float32)
    f(x)
    assert executable._pooled_bytes[0] == before  # no room: allocated as NumPy does, not kept
    monkeypatch.setattr(executable, "POOL_BUDGET", before + 10 * x.nbytes)
    g = nova.jit(lambda x: x * 5.0)
    g(x)
    assert executable._pooled_bytes[0] == before + x.nbytes
    del g
    gc.collect()
    assert executable._pooled_bytes[0] == before  # a dropped executable's pool is released


def test_one_executable_called_from_several_threads_at_once():
    """Calls share the arena and the launcher's slot array, so the executable runs them one at
    a time (before, 8 threads x 30 calls gave ~190 wrong results)."""
    import threading

    f = nova.jit(lambda x, w: jnp.tanh(x @ w) * 2.0 + jnp.sum(x, axis=1, keepdims=True))
    rng = np.random.default_rng(12)
    w = rng.standard_normal((256, 256)).astype(np.float32)
    xs = [rng.standard_normal((512, 256)).astype(np.float32) for _ in range(6)]
    want = [np.tanh(x @ w) * 2.0 + x.sum(1, keepdims=True) for x in xs]
    np.asarray(f(xs[0], w))
    wrong = []

    def run(i):
        for _ in range(20):
            if not np.allclose(np.asarray(f(xs[i], w)), want[i], rtol=1e-4, atol=1e-4):
                wrong.append(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_the_launcher_is_built_in_the_background_and_eager_ops_do_not_wait(tmp_path,
                                                                            monkeypatch):
    """With a fresh cache, an eager op (one launch) runs without the launcher (nothing is
    built); a jitted program starts the launcher's build as its compile begins and uses it."""
    from nova.compiler import cache

    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path))
    cache.clear_memory()
    lib = tmp_path / "cpu" / "lib" / launcher.library_name()
    y = jnp.exp(jnp.asarray(np.linspace(-1, 1, 77, dtype=np.float32)))
    assert_close(np.asarray(y), np.exp(np.linspace(-1, 1, 77, dtype=np.float32)), rtol=1e-6)
    assert not lib.exists()
    starts = []
    real = launcher.prefetch_launcher
    monkeypatch.setattr(launcher, "prefetch_launcher", lambda d: (starts.append(d), real(d)))
    import nova.compiler.backend_cpu as backend_cpu

    monkeypatch.setattr(backend_cpu, "prefetch_launcher", launcher.prefetch_launcher)
    x = np.random.default_rng(3).standard_normal((40, 33)).astype(np.float32)
    f = nova.jit(lambda x: jnp.sum(jnp.tanh(x) * 2.0, axis=0) + jnp.max(x, axis=1).sum())
    got = f(x)
    assert starts == [str(tmp_path / "cpu" / "lib")] and lib.exists()
    assert_close(np.asarray(got), np.tanh(x).sum(0) * 2.0 + x.max(1).sum(), rtol=1e-5)
    assert f.lower(x).compile()._exe.launcher is not None
