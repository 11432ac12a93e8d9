"""The per-call fast paths of jit and eager ops (bench/NOTES.md round 24): a jitted call of plain
positional arguments builds its cache key directly, one-kernel executables run without the
slot table or the lock, fresh results skip the sharing analysis, and config.code_key is cached.
Each test checks that the fast path keeps the general path's behaviour: every key change
retraces, values match NumPy / JAX, ownership and donation are as before."""

import os
import threading

import jax
import jax.numpy as jjnp
import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova.core.errors import DeletedArrayError
from tests.helpers import assert_close

f32 = np.float32


def test_code_key_follows_updates_direct_mutation_and_the_environment(monkeypatch):
    monkeypatch.delenv("NOVA_CUDA_ARCH", raising=False)
    c = nova.config
    k0 = c.code_key()
    assert k0 is c.code_key()  # cached
    c.update("matmul_precision", "tf32")
    assert dict(c.code_key())["matmul_precision"] == "tf32"
    saved = dict(c._values)
    saved["matmul_precision"] = "highest"
    c._values.clear()  # the test suite's restore (conftest.py) mutates the dict in place
    c._values.update(saved)
    assert c.code_key() == k0
    c._values["gemm_tile"] = (128, 128)
    assert dict(c.code_key())["gemm_tile"] == (128, 128)
    del c._values["gemm_tile"]
    with pytest.raises(KeyError):
        c.code_key()
    c._values.setdefault("gemm_tile", None)
    assert c.code_key() == k0
    monkeypatch.setenv("NOVA_CUDA_ARCH", "sm_90")
    assert dict(c.code_key())["NOVA_CUDA_ARCH"] == "sm_90"
    os.environ["NOVA_CUDA_ARCH"] = "sm_80"
    assert dict(c.code_key())["NOVA_CUDA_ARCH"] == "sm_80"
    monkeypatch.delenv("NOVA_CUDA_ARCH")
    assert c.code_key() == k0


def test_every_part_of_a_plain_call_key_retraces():
    traces = []

    def f(a, b):
        traces.append(1)
        return a * b + 1.0

    jf = nova.jit(f)
    x = jnp.asarray(np.arange(6, dtype=f32))
    jf(x, 2.0)
    jf(x, 3.0)  # a hit on the fast path: a Python float's value is not part of the key
    assert jf.cache_info().hits == 1 and len(traces) == 1
    jf(x, 2)  # int: weakly typed int32, another signature
    jf(x, True)
    jf(jnp.asarray(np.arange(6, dtype=np.float64)), 2.0)
    jf(jnp.asarray(np.arange(8, dtype=f32)), 2.0)
    jf(np.arange(6, dtype=f32), 2.0)  # a NumPy array of x's type: the same signature
    info = jf.cache_info()
    assert (info.hits, info.misses) == (2, 5)
    assert "argument 'b' changed" in info.miss_reasons[1]
    assert "argument 'a' changed: tensor<6xf32> -> tensor<6xf64>" in info.miss_reasons[3]
    assert "tensor<6xf64> -> tensor<8xf32>" in info.miss_reasons[4]
    nova.config.update("matmul_precision", "tf32")
    try:
        jf(x, 2.0)
    finally:
        nova.config.update("matmul_precision", "highest")
    jf(x, 2.0)
    info = jf.cache_info()
    assert info.misses == 6 and "config flags changed" in info.miss_reasons[5]
    assert info.hits == 3
    assert_close(jf(x, 2.5), np.asarray(jax.jit(lambda a, b: a * b + 1.0)(np.arange(6, dtype=f32),
                                                                          2.5)))


def test_env_arch_change_retraces_a_plain_call(monkeypatch):
    monkeypatch.delenv("NOVA_CUDA_ARCH", raising=False)
    jf = nova.jit(lambda a: a + 1.0)
    x = jnp.ones(4)
    jf(x)
    jf(x)
    monkeypatch.setenv("NOVA_CUDA_ARCH", "sm_90")
    jf(x)
    info = jf.cache_info()
    assert (info.hits, info.misses) == (1, 2) and "NOVA_CUDA_ARCH" in info.miss_reasons[1]


def test_static_keyword_and_pytree_calls_still_key_on_everything():
    jf = nova.jit(lambda x, n, scale=1.0: x * n * scale, static_argnums=1)
    x = np.ones(3, f32)
    assert_close(jf(x, 2), 2 * x)
    assert_close(jf(x, 3), 3 * x)
    assert_close(jf(x, 3, scale=2.0), 6 * x)
    assert jf.cache_info().misses == 3
    jt = nova.jit(lambda t: t[0] + t[1])
    assert_close(jt((x, x)), 2 * x)
    assert_close(jt([x, x]), 2 * x)
    assert "pytree structure changed" in jt.cache_info().miss_reasons[1]


def test_deleted_and_donated_arguments_on_the_fast_path():
    jf = nova.jit(lambda a: a * 2.0, donate_argnums=0)
    x = jnp.asarray(np.arange(4, dtype=f32))
    y = jf(x)  # compiles
    assert x.is_deleted()
    z = jf(y)  # a hit: donated and deleted as well
    assert y.is_deleted() and jf.cache_info().hits == 1
    assert_close(z, np.arange(4, dtype=f32) * 4)
    with pytest.raises(DeletedArrayError, match="donated"):
        jf(y)
    g = nova.jit(lambda a: a + 1.0)
    w = jnp.ones(3)
    g(w)
    w.delete()
    with pytest.raises(DeletedArrayError):
        g(w)


def test_results_are_fresh_owned_arrays_and_arguments_stay_intact():
    x = jnp.asarray(np.arange(5, dtype=f32))
    for out in (nova.jit(lambda a: a + 1.0)(x), x + x, x + 1.0):
        assert out._owned and not np.shares_memory(np.asarray(out), np.asarray(x))
    assert_close(x, np.arange(5, dtype=f32))
    # An identity returns the argument's buffer: the general rule (no owned result, no alias)
    ident = nova.jit(lambda a: a)
    a = jnp.asarray(np.arange(3, dtype=f32))
    for _ in range(2):
        r = ident(a)
        assert not r._owned
        assert_close(r, np.arange(3, dtype=f32))
    # The same value returned twice: two buffers
    twice = nova.jit(lambda a: (a + 1.0, a + 1.0))
    for _ in range(2):
        p, q = twice(a)
        assert not np.shares_memory(np.asarray(p), np.asarray(q))
        assert_close(p, np.arange(3, dtype=f32) + 1)


def test_outputs_in_another_order_than_the_kernel_writes_them():
    def f(a, b):
        s = a + b
        return (a * b, s, s * 2.0)

    jf = nova.jit(f)
    a = np.arange(6, dtype=f32).reshape(2, 3)
    b = np.full((2, 3), 3.0, f32)
    want = jax.jit(f)(a, b)
    for _ in range(2):
        got = jf(a, b)
        for g, w in zip(got, want, strict=True):
            assert_close(g, np.asarray(w))


@pytest.mark.parametrize("make", [
    lambda v: v[::2],  # strided
    lambda v: np.asfortranarray(v.reshape(4, 4)).T,  # a transposed Fortran array: C-contiguous
    lambda v: np.asfortranarray(v.reshape(4, 4)),  # not C-contiguous
    lambda v: np.broadcast_to(v[:1], (16,)),  # read-only
])
def test_inputs_of_any_layout_on_the_direct_kernel_call(make):
    v = np.arange(16, dtype=f32)
    arg = make(v)
    want = np.asarray(jax.jit(lambda a: a * 3.0 - 1.0)(arg))
    jf = nova.jit(lambda a: a * 3.0 - 1.0)
    for _ in range(2):
        assert_close(jf(arg), want)
    assert_close(jnp.asarray(arg) * 3.0, np.asarray(jjnp.asarray(arg) * 3.0))


def test_empty_and_zero_dimensional_operands():
    jf = nova.jit(lambda a, b: a * b)
    for _ in range(2):
        assert jf(np.zeros((0, 3), f32), np.ones((0, 3), f32)).shape == (0, 3)
        assert_close(jf(np.float32(2.0), 3.0), 6.0)
    e = jnp.zeros((0,)) + jnp.zeros((0,))
    assert e.shape == (0,) and e.dtype == np.float32
    s = jnp.asarray(2.0) * jnp.asarray(4.0)
    assert s.shape == () and float(s) == 8.0


def test_threads_calling_one_jitted_function_and_one_eager_op():
    jf = nova.jit(lambda a: a * 2.0 + 1.0)
    xs = [np.full(8, i, f32) for i in range(8)]
    jf(xs[0])
    xs[0] + xs[0]
    bad = []

    def work(i):
        for _ in range(200):
            r = jf(xs[i])
            e = jnp.asarray(xs[i]) + jnp.asarray(xs[i])
            if not (np.array_equal(np.asarray(r), xs[i] * 2 + 1)
                    and np.array_equal(np.asarray(e), xs[i] * 2)):
                bad.append(i)
                return
        done.append(i)

    done = []
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == [] and sorted(done) == list(range(8))


def test_eager_results_match_jax_and_carry_their_type():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)).astype(f32), rng.standard_normal((3, 4)).astype(f32)
    x, y = jnp.asarray(a), jnp.asarray(b)
    for got, want in ((x + y, a + b), (x * y, a * b), (jnp.maximum(x, y), np.maximum(a, b)),
                      (x - 2.0, a - 2.0), (jnp.sum(x, axis=1), a.sum(1))):
        assert got._aval is None or got._aval == nova.typeof(np.asarray(got))
        assert_close(got, want)
    hi, lo = jnp.divmod(jnp.asarray(np.array([7, -7], np.int32)), 3)  # two results
    assert_close(hi, np.array([2, -3])) and assert_close(lo, np.array([1, 2]))


def test_jit_grad_and_vmap_around_a_fast_path_function():
    jf = nova.jit(lambda a: jnp.sin(a) * a)
    x = np.linspace(-1, 1, 5).astype(f32)
    jf(x)
    ref = jax.grad(lambda a: (jjnp.sin(a) * a).sum())(x)
    assert_close(nova.grad(lambda a: jf(a).sum())(x), np.asarray(ref), rtol=1e-5)
    assert_close(nova.vmap(jf)(x.reshape(5, 1)), (np.sin(x) * x).reshape(5, 1), rtol=1e-6)
    assert_close(nova.jit(lambda a: jf(a) + 1.0)(x), np.sin(x) * x + 1, rtol=1e-6)


def test_debug_nans_and_disable_jit_leave_the_fast_path():
    jf = nova.jit(lambda a: jnp.log(a))
    x = np.array([-1.0, 1.0], f32)
    jf(np.ones(2, f32))
    nova.config.update("debug_nans", True)
    try:
        with pytest.raises(FloatingPointError, match="log"):
            jf(x)
        with pytest.raises(FloatingPointError, match="log"):
            jnp.log(jnp.asarray(x))
    finally:
        nova.config.update("debug_nans", False)
    with nova.disable_jit():
        seen = []
        g = nova.jit(lambda a: seen.append(type(a)) or a + 1.0)
        g(jnp.ones(2))
        g(jnp.ones(2))
    assert len(seen) == 2


def test_interpreter_backend_eager_ops_keep_the_overlap_checks():
    nova.config.update("backend", "interpreter")
    try:
        x = jnp.asarray(np.arange(6, dtype=f32))
        r = jnp.reshape(x, (2, 3))
        assert_close(r, np.arange(6, dtype=f32).reshape(2, 3))
        s = x + x
        assert_close(s, 2 * np.arange(6, dtype=f32))
    finally:
        nova.config.update("backend", "compiled")


def test_bad_arguments_raise_as_before():
    jf = nova.jit(lambda a: a + 1.0)
    jf(jnp.ones(2))
    with pytest.raises(TypeError, match="argument 'a' of type str"):
        jf("x")
    with pytest.raises(TypeError, match="unsupported operand type str"):
        jnp.ones(2) + "x"


def test_clear_cache_and_clear_caches_reach_the_fast_path():
    traces = []
    jf = nova.jit(lambda a: traces.append(1) or a - 1.0)
    x = jnp.ones(3)
    jf(x)
    jf(x)
    jf.clear_cache()
    assert_close(jf(x), np.zeros(3, f32))
    nova.clear_caches()
    jf(x)
    assert len(traces) == 3 and jf.cache_info().misses == 1  # counts restart with the cache
