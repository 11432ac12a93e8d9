"""The executable cache (nova/compiler/executable_cache.py): a traced program compiled once is
loaded by later jit objects and later processes without running the compiler."""

import glob
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nova
import nova.numpy as jnp
from nova.compiler import executable_cache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _mlp(w1, b1, w2, x):
    return jnp.sum(jnp.tanh(x @ w1 + b1) @ w2)


def _args(seed, n=13):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, 17), np.float32), rng.standard_normal(17, np.float32),
            rng.standard_normal((17, 5), np.float32), rng.standard_normal((9, n), np.float32))


def _entries():
    return glob.glob(os.path.join(os.environ["NOVA_CACHE_DIR"], "cpu", "exe", "*", "*.json"))


def test_a_new_jit_of_the_same_program_loads_the_executable():
    args = _args(0, n=11)
    f = nova.jit(nova.value_and_grad(_mlp, argnums=(0, 1, 2)))
    c1 = f.lower(*args).compile()
    assert not c1.from_cache
    c2 = nova.jit(nova.value_and_grad(_mlp, argnums=(0, 1, 2))).lower(*args).compile()
    assert c2.from_cache
    assert c2._lowered._program is None  # the passes did not run
    v1, g1 = c1(*args)
    v2, g2 = c2(*args)
    np.testing.assert_array_equal(np.asarray(v1), np.asarray(v2))
    for a, b in zip(g1, g2):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # Introspection still works: the optimized Program is computed on demand.
    assert "nova.kernel" in c2.as_text()
    assert "func.func @main" in c2._lowered.as_text()
    assert c2.memory_analysis()["planned_peak_bytes"] == c1.memory_analysis()["planned_peak_bytes"]
    assert c2.cost_analysis()["flops"] == c1.cost_analysis()["flops"]


def test_key_changes_with_donation_config_and_program():
    args = _args(1)
    prog = nova.jit(_mlp).trace(*args).program
    other = nova.jit(lambda *a: _mlp(*a) * 2.0).trace(*args).program
    base = executable_cache.program_key(prog)
    assert executable_cache.program_key(prog) == base
    assert executable_cache.program_key(prog, donated=(0,)) != base
    assert executable_cache.program_key(other) != base
    from nova.compiler import pipeline

    without_last = pipeline.PASSES[:-1]
    saved = list(pipeline.PASSES)
    try:
        pipeline.PASSES[:] = without_last
        assert executable_cache.program_key(prog) != base
    finally:
        pipeline.PASSES[:] = saved
    assert executable_cache.program_key(prog) == base
    nova.config.update("matmul_precision", "tf32")
    assert executable_cache.program_key(prog) != base


def test_corrupt_entry_is_dropped_and_rebuilt():
    args = _args(2, n=7)
    f = lambda *a: _mlp(*a) + 1.0  # noqa: E731
    before = set(_entries())
    expected = np.asarray(nova.jit(f)(*args))
    (entry,) = set(_entries()) - before
    with open(entry, "w") as fh:
        fh.write('{"sha256": "0", "body": "{}"}')
    with pytest.warns(UserWarning, match="dropping executable cache entry"):
        c = nova.jit(f).lower(*args).compile()
    assert not c.from_cache
    np.testing.assert_allclose(np.asarray(c(*args)), expected, rtol=1e-6)
    assert nova.jit(f).lower(*args).compile().from_cache  # stored again


def test_entry_whose_kernels_left_the_kernel_cache_recompiles():
    args = _args(3, n=5)
    f = lambda *a: _mlp(*a) * 3.0  # noqa: E731
    expected = np.asarray(nova.jit(f)(*args))
    from nova.compiler import cache

    cache.clear_memory()
    for p in glob.glob(os.path.join(os.environ["NOVA_CACHE_DIR"], "cpu", "??", "*.json")):
        os.remove(p)
    c = nova.jit(f).lower(*args).compile()
    assert not c.from_cache
    np.testing.assert_allclose(np.asarray(c(*args)), expected, rtol=1e-6)


def test_host_launch_of_a_large_constant_round_trips():
    table = np.arange(5000, dtype=np.float32).reshape(50, 100) / 7.0  # > 4096 elements: host data
    x = np.linspace(0, 1, 100, dtype=np.float32)
    f = lambda x: jnp.sum(jnp.asarray(table) * x, axis=1)  # noqa: E731
    c1 = nova.jit(f).lower(x).compile()
    c2 = nova.jit(f).lower(x).compile()
    assert c2.from_cache
    np.testing.assert_allclose(np.asarray(c2(x)), (table * x).sum(1), rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(c2(x)), np.asarray(c1(x)))


def test_second_process_runs_without_the_compiler(tmp_path):
    script = textwrap.dedent("""
        import sys, numpy as np, nova, nova.numpy as jnp
        f = nova.jit(nova.grad(lambda w, x: jnp.sum(jnp.exp(x @ w) / 3.0)))
        w = np.full((6, 4), 0.1, np.float32); x = np.ones((8, 6), np.float32)
        c = f.lower(w, x).compile()
        g = np.asarray(c(w, x))
        print(int(c.from_cache), int(c._lowered._program is None), int("mlir" in sys.modules),
              float(g.sum()))
    """)
    env = dict(os.environ, NOVA_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env=env, cwd=ROOT, timeout=600) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    first, second = (r.stdout.split() for r in runs)
    assert first[:2] == ["0", "0"]
    assert second[:3] == ["1", "1", "0"]  # from the cache, no passes, MLIR never imported
    assert float(first[3]) == float(second[3])
