"""Host callbacks (nova.pure_callback, nova.experimental.io_callback, nova.debug.callback /
print): eager, under jit (once per run, in order, never dropped), grad, vmap, and the errors."""

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova import ShapeDtypeStruct as SDS

X = np.arange(3, dtype=np.float32)


def test_pure_callback_eager_and_jit():
    def f(x):
        y = nova.pure_callback(lambda a: np.cos(a) * 2, SDS(x.shape, x.dtype), x)
        return jnp.sin(x) + y

    want = np.sin(X) + 2 * np.cos(X)
    np.testing.assert_allclose(np.asarray(f(X)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(nova.jit(f)(X)), want, rtol=1e-6)


def test_pure_callback_pytrees_kwargs_and_cast():
    seen = {}

    def cb(pair, scale=None):
        seen["types"] = (type(pair[0]), type(scale))
        return {"s": pair[0] + pair[1] * scale, "n": np.int64(pair[0].size)}

    out = nova.jit(lambda a, b: nova.pure_callback(
        cb, {"s": SDS((3,), np.float32), "n": SDS((), np.int32)}, (a, b),
        scale=np.float32(3)))(X, X)
    np.testing.assert_allclose(np.asarray(out["s"]), 4 * X)
    assert int(out["n"]) == 3 and np.asarray(out["n"]).dtype == np.int32
    assert seen["types"] == (np.ndarray, np.ndarray)


def test_pure_callback_result_checks():
    with pytest.raises(ValueError, match=r"shape \(2,\).*declares \(3,\)"):
        nova.pure_callback(lambda a: np.zeros(2, np.float32), SDS((3,), np.float32), X)
    with pytest.raises(TypeError, match="returned 2 array"):
        nova.pure_callback(lambda a: (a, a), SDS((3,), np.float32), X)
    with pytest.raises(TypeError, match="dtype float32"):
        nova.pure_callback(lambda a: a, SDS((3,), np.int32), X)
    with pytest.raises(TypeError, match="callable"):
        nova.pure_callback(3, SDS((3,), np.float32), X)
    with pytest.raises(TypeError, match=r"\.shape and \.dtype"):
        nova.pure_callback(np.sin, 3.0, X)
    with pytest.raises(ValueError, match="vmap_method"):
        nova.pure_callback(np.sin, SDS((3,), np.float32), X, vmap_method="loop")


def test_pure_callback_is_not_differentiable():
    f = lambda x: nova.pure_callback(np.sin, SDS((3,), np.float32), x).sum()
    with pytest.raises(TypeError, match="not differentiable.*custom_jvp"):
        nova.grad(f)(X)
    with pytest.raises(TypeError, match="not differentiable"):
        nova.jvp(lambda x: nova.pure_callback(np.sin, SDS((3,), np.float32), x), (X,), (X,))


def test_pure_callback_with_custom_jvp():
    @nova.custom_jvp
    def host_sin(x):
        return nova.pure_callback(np.sin, SDS(x.shape, x.dtype), x)

    @host_sin.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return host_sin(x), jnp.cos(x) * t

    g = nova.jit(nova.grad(lambda x: host_sin(x).sum()))(X)
    np.testing.assert_allclose(np.asarray(g), np.cos(X), rtol=1e-6)


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
def test_pure_callback_vmap(method):
    calls = []

    def cb(a, b):
        calls.append(a.shape)
        return np.asarray(a * b, np.float32)

    xs = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = nova.vmap(lambda a: nova.pure_callback(cb, SDS((3,), np.float32), a, X,
                                                 vmap_method=method))(xs)
    np.testing.assert_allclose(np.asarray(out), xs * X)
    assert calls == ([(3,), (3,)] if method == "sequential" else [(2, 3)])


def test_pure_callback_vmap_needs_a_method():
    with pytest.raises(NotImplementedError, match="vmap_method"):
        nova.vmap(lambda a: nova.pure_callback(np.sin, SDS((), np.float32), a))(X)


def test_unused_pure_callback_is_dropped_under_jit():
    calls = []

    def f(x):
        nova.pure_callback(lambda a: (calls.append(1), a)[1], SDS((3,), np.float32), x)
        return x * 2

    nova.jit(f)(X)
    assert calls == []  # pure: nothing reads it, so it is not run


def test_debug_print_runs_on_every_call_in_order(capsys):
    @nova.jit
    def f(x):
        nova.debug.print("a {}", x)
        y = jnp.sin(x)
        nova.debug.print("b {y:.3f}", y=y.sum())
        nova.debug.print("b {y:.3f}", y=y.sum())  # the same call twice: printed twice
        return x * 2

    f(X)
    f(X + 1)
    lines = capsys.readouterr().out.splitlines()
    s0, s1 = np.sin(X).sum(), np.sin(X + 1).sum()
    assert lines == [f"a {X}", f"b {s0:.3f}", f"b {s0:.3f}",
                     f"a {X + 1}", f"b {s1:.3f}", f"b {s1:.3f}"]


def test_debug_print_eager_grad_and_vmap(capsys):
    def loss(x):
        nova.debug.print("x={}", x)
        return jnp.sin(x).sum()

    g = nova.grad(loss)(X)
    np.testing.assert_allclose(np.asarray(g), np.cos(X), rtol=1e-6)
    g = nova.jit(nova.grad(loss))(X)
    np.testing.assert_allclose(np.asarray(g), np.cos(X), rtol=1e-6)
    nova.vmap(lambda v: nova.debug.print("v={}", v))(X)
    out = capsys.readouterr().out.splitlines()
    assert out == [f"x={X}", f"x={X}", "v=0.0", "v=1.0", "v=2.0"]
    with pytest.raises(TypeError, match="fmt must be a str"):
        nova.debug.print(X)


def test_debug_callback_receives_numpy_pytrees():
    got = []
    nova.jit(lambda t: nova.debug.callback(lambda d: got.append(d), {"w": t, "b": t[0]}))(X)
    assert set(got[0]) == {"w", "b"} and isinstance(got[0]["w"], np.ndarray)
    np.testing.assert_array_equal(got[0]["w"], X)


def test_io_callback_results_and_effects():
    log = []

    def record(a):
        log.append(float(a.sum()))
        return a * 2

    f = nova.jit(lambda x: nova.experimental.io_callback(record, SDS((3,), np.float32), x))
    np.testing.assert_allclose(np.asarray(f(X)), 2 * X)
    # results unused: still called (an effect), once per call
    nova.jit(lambda x: (nova.experimental.io_callback(record, SDS((3,), np.float32), x), x)[1])(X)
    assert log == [3.0, 3.0]
    with pytest.raises(TypeError, match="io_callback is not differentiable"):
        nova.grad(lambda x: nova.experimental.io_callback(
            record, SDS((3,), np.float32), x).sum())(X)


def _scan_printing(x):
    def body(c, v):
        nova.debug.print("c={} v={}", c, v)
        return c + v, c * v

    return nova.lax.scan(body, np.float32(0), x)


SCAN_LINES = ["c=0.0 v=0.0", "c=0.0 v=1.0", "c=1.0 v=2.0"]


@pytest.mark.parametrize("how", ["eager", "jit", "grad", "jit_grad", "jvp", "jit_jvp"])
def test_debug_print_in_scan_once_per_iteration(capsys, how):
    loss = lambda x: _scan_printing(x)[0]
    run = {"eager": lambda: _scan_printing(X),
           "jit": lambda: nova.jit(lambda x: (_scan_printing(x), x)[1])(X),  # results unused
           "grad": lambda: nova.grad(loss)(X),
           "jit_grad": lambda: nova.jit(nova.grad(loss))(X),
           "jvp": lambda: nova.jvp(loss, (X,), (X,)),
           "jit_jvp": lambda: nova.jit(lambda x: nova.jvp(loss, (x,), (x,))[1])(X)}[how]
    run()
    assert capsys.readouterr().out.splitlines() == SCAN_LINES


def test_debug_print_in_while_and_cond(capsys):
    def body(c):
        nova.debug.print("i={}", c[0])
        return c[0] + 1, c[1] * 2

    out = nova.jit(lambda s: nova.lax.while_loop(lambda c: c[0] < 3, body, (0, s)))(
        np.float32(1))
    assert float(out[1]) == 8.0
    g = nova.jit(lambda p, x: nova.lax.cond(
        p, lambda x: (nova.debug.print("T {}", x), x)[1],
        lambda x: (nova.debug.print("F {}", x), -x)[1], x))
    g(True, X)
    g(False, X)
    nova.grad(lambda x: g(True, x).sum())(X)
    assert capsys.readouterr().out.splitlines() == ["i=0", "i=1", "i=2", f"T {X}", f"F {X}",
                                                    f"T {X}"]


def test_callbacks_in_vmapped_scan_and_pure_in_loop(capsys):
    nova.vmap(_scan_printing)(np.stack([X, X + 10]))
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["c=0.0 v=0.0", "c=0.0 v=10.0", "c=0.0 v=1.0", "c=10.0 v=11.0",
                     "c=1.0 v=2.0", "c=21.0 v=12.0"]
    out = nova.lax.fori_loop(0, 3, lambda i, c: c + nova.pure_callback(
        np.cos, SDS((), np.float32), c), np.float32(0))
    c = np.float32(0)
    for _ in range(3):
        c = c + np.cos(c)
    np.testing.assert_allclose(float(out), c, rtol=1e-6)


def test_program_with_callback_stays_out_of_the_disk_cache(tmp_path, monkeypatch):
    from nova.compiler import executable_cache

    stored = []
    monkeypatch.setattr(executable_cache, "store", lambda *a: stored.append(a))
    nova.jit(lambda x: nova.pure_callback(np.sin, SDS((3,), np.float32), x) + 1)(X)
    assert stored == []


# --- found by review (session 23) ---------------------------------------------------------------


def test_callbacks_get_read_only_copies_of_the_operands():
    kept = []

    @nova.jit
    def f(x):
        nova.debug.callback(kept.append, x * 3.0)
        return x + 1.0

    f(jnp.ones(3))
    f(jnp.full(3, 5.0))  # the compiled program reuses its buffers: what was kept must not change
    np.testing.assert_array_equal(np.stack(kept), [[3.0] * 3, [15.0] * 3])
    assert not kept[0].flags.writeable

    def scribble(a):
        a[0] = 99.0  # raises: the operand is read-only
        return a

    g = nova.jit(lambda x: nova.pure_callback(scribble, SDS((3,), np.float32), x))
    with pytest.raises(ValueError, match="read-only"):
        g(jnp.ones(3))
    x = jnp.ones(3)
    with pytest.raises(ValueError, match="read-only"):
        nova.debug.callback(lambda a: a.__setitem__(0, 9.0), x)
    np.testing.assert_array_equal(np.asarray(x), [1.0, 1.0, 1.0])


def test_debug_functions_pass_non_array_arguments_through(capsys):
    seen = []
    nova.jit(lambda v: nova.debug.print("{} {tag}", v, tag="label"))(jnp.arange(3.0))
    nova.jit(lambda v: nova.debug.callback(lambda a, s, n: seen.append((a, s, n)), v, "hi",
                                           None))(jnp.arange(2.0))
    assert capsys.readouterr().out == "[0. 1. 2.] label\n"
    np.testing.assert_array_equal(seen[0][0], [0.0, 1.0])
    assert seen[0][1:] == ("hi", None)


def test_sequential_vmap_over_an_empty_batch():
    f = nova.vmap(lambda x: nova.pure_callback(lambda a: a * 2, SDS((3,), np.float32), x,
                                               vmap_method="sequential"))
    out = f(jnp.zeros((0, 3)))
    assert out.shape == (0, 3) and out.dtype == np.float32


def test_a_result_of_another_dtype_kind_raises():
    f = nova.jit(lambda x: nova.pure_callback(lambda a: np.arange(3, dtype=np.int32),
                                              SDS((3,), np.float32), x))
    with pytest.raises(TypeError, match="has dtype int32, but result_shape_dtypes declares float32"):
        f(jnp.ones(3))
    g = nova.jit(lambda x: nova.pure_callback(lambda a: np.ones(3),  # float64 -> float32: a cast
                                              SDS((3,), np.float32), x))
    assert g(jnp.ones(3)).dtype == np.float32


def test_eager_vmap_runs_an_effect_once_per_element_even_unmapped():
    calls = []
    nova.vmap(lambda x, c: (nova.debug.callback(lambda v: calls.append(1), c), x)[1],
              in_axes=(0, None))(jnp.ones(3), jnp.float32(2.0))
    assert len(calls) == 1  # an unmapped operand: one call, as JAX

    calls.clear()

    def scanned(x, c):
        def body(carry, _):
            nova.debug.callback(lambda v: calls.append(1), c)
            return carry, None
        return nova.lax.scan(body, x, None, length=2)[0]

    nova.vmap(scanned, in_axes=(0, None))(jnp.ones(3), jnp.float32(2.0))
    assert len(calls) == 2


def test_an_effect_of_constants_runs_on_every_call_not_at_compile_time(capsys):
    f = nova.jit(lambda x: (nova.debug.print("const {}", 3.0), x + 1)[1])
    f(jnp.ones(2))
    f(jnp.ones(2))
    assert capsys.readouterr().out == "const 3.0\nconst 3.0\n"
