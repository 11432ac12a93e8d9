"""Native loops: under the compiled backend a scan or while body made only of generated kernels
runs as one native call (nova_scan / nova_while in nova/runtime/launcher.py) that rewrites the
carry and row slots between iterations. These tests make the Python iteration path fail, so
they pass only when the native loop ran, and check its results against NumPy loops for the
slot patterns it has to handle: carries that swap or pass through, ys rows no kernel writes (a
passed-through operand, a scalar row too small for the kernels' aligned stores), one value
shown by two outputs, reverse scans, zero and odd trip counts."""

from __future__ import annotations

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova import control_flow, lax

RNG = np.random.default_rng(1)


@pytest.fixture
def native_only(monkeypatch):
    """Fails any Region run from Python (the fallback the native loop replaces)."""
    def refuse(region, args):
        raise AssertionError("a loop body ran from Python instead of the native loop")

    monkeypatch.setattr(control_flow, "run_region", refuse)
    if nova.config.read("backend") != "compiled":
        pytest.skip("native loops are part of the compiled backend")


def _scan_np(step, carry, xs, reverse):
    ys = [None] * len(xs)
    for i in (range(len(xs) - 1, -1, -1) if reverse else range(len(xs))):
        carry, ys[i] = step(carry, xs[i])
    return carry, ys


@pytest.mark.parametrize("length", [0, 1, 2, 5])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_slot_patterns(native_only, length, reverse):
    def step(c, x):
        h, a, b, n, keep = c
        h2 = jnp.tanh(h * 0.5 + x)
        new = (h2, b, a, n + 1, keep)  # a and b swap; keep passes through
        # a scalar row (4 bytes: copied), x itself, the entering h, and h2 twice
        return new, (h2.sum(), x, h, h2, n * 2)

    def step_np(c, x):
        h, a, b, n, keep = c
        h2 = np.tanh(h * 0.5 + x)
        return (h2, b, a, n + 1, keep), (h2.sum(), x, h, h2, n * 2)

    xs = RNG.standard_normal((length, 3)).astype(np.float32)
    init = (RNG.standard_normal(3).astype(np.float32), np.float32(1.0), np.float32(2.0),
            np.int32(7), np.array([True, False]))
    got_c, got_y = nova.jit(lambda c, xs: lax.scan(step, c, xs, reverse=reverse))(init, xs)
    want_c, want_y = _scan_np(step_np, init, xs, reverse)
    for g, w in zip(got_c, want_c, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6)
    for k, g in enumerate(got_y):
        w = np.array([y[k] for y in want_y]) if length else np.zeros((0,) + np.shape(g)[1:])
        assert np.asarray(g).shape == ((length,) + np.shape(w)[1:])
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6)


def test_scan_results_are_fresh_and_operands_untouched(native_only):
    xs = np.arange(12, dtype=np.float32).reshape(4, 3)
    c0 = np.ones(3, np.float32)
    f = nova.jit(lambda c, xs: lax.scan(lambda c, x: (c + x, c), c, xs))
    c, ys = f(c0, xs)
    c2, _ = f(c0, xs)
    np.testing.assert_array_equal(np.asarray(c), 1 + xs.sum(0))
    np.testing.assert_array_equal(np.asarray(ys), 1 + np.concatenate(
        [np.zeros((1, 3)), np.cumsum(xs, 0)[:-1]]))
    np.testing.assert_array_equal(c0, np.ones(3))  # the initial carry was not written
    np.testing.assert_array_equal(np.asarray(c2), np.asarray(c))


def test_scan_gradient_runs_both_loops_natively(native_only):
    w = RNG.standard_normal((5, 5)).astype(np.float64) * 0.4
    xs = RNG.standard_normal((9, 2, 5))

    def loss(w, xs):
        h, ys = lax.scan(lambda h, x: (jnp.tanh(h @ w + x), (h ** 2).sum()),
                         jnp.zeros((2, 5), jnp.float64), xs)
        return (h ** 3).sum() + ys.sum()

    def loss_np(w):
        h, total = np.zeros((2, 5)), 0.0
        for x in xs:
            total += (h ** 2).sum()
            h = np.tanh(h @ w + x)
        return (h ** 3).sum() + total

    val, g = nova.jit(nova.value_and_grad(loss))(w, xs)
    np.testing.assert_allclose(float(val), loss_np(w), rtol=1e-12)
    eps, fd = 1e-6, np.zeros_like(w)
    for idx in np.ndindex(w.shape):
        d = np.zeros_like(w)
        d[idx] = eps
        fd[idx] = (loss_np(w + d) - loss_np(w - d)) / (2 * eps)
    np.testing.assert_allclose(np.asarray(g), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("n", [0, 1, 4, 7])
def test_while_trip_counts_and_carries(native_only, n):
    limit = np.int32(n)
    scale = np.float32(0.5)

    def run(limit, v):
        def cond(c):
            return c[0] < limit  # reads a value of the outer trace

        def body(c):
            i, v, _, fixed = c
            return i + 1, v * scale + 1.0, v.sum(), fixed

        return lax.while_loop(cond, body, (jnp.asarray(0, jnp.int32), v, jnp.asarray(0.0, jnp.float32), v))

    v0 = np.arange(3, dtype=np.float32)
    i, v, s_, fixed = nova.jit(run)(limit, v0)
    wv, ws = v0.copy(), np.float32(0.0)
    for _ in range(n):
        wv, ws = wv * np.float32(0.5) + np.float32(1.0), wv.sum()
    assert int(i) == n
    np.testing.assert_allclose(np.asarray(v), wv, rtol=1e-6)
    np.testing.assert_allclose(float(s_), ws, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(fixed), v0)


def test_while_predicate_is_a_carry(native_only):
    def run(x):
        def body(c):
            _, x = c
            x = x * 2.0
            return x.sum() < 100.0, x

        return lax.while_loop(lambda c: c[0], body, (jnp.asarray(True), x))

    go, x = nova.jit(run)(np.ones(2))
    assert not bool(go)
    np.testing.assert_array_equal(np.asarray(x), [64.0, 64.0])


def test_profiled_and_hosted_bodies_fall_back_to_python():
    """A body holding a host launch (an inner loop) iterates from Python and still agrees."""
    xs = RNG.standard_normal((3, 4, 2))

    def run(xs):
        def outer(c, x):
            inner, _ = lax.scan(lambda a, r: (a * 0.5 + r, None), c, x)
            return inner, inner.sum()

        return lax.scan(outer, np.zeros(2), xs)

    c, ys = nova.jit(run)(xs)
    wc, wys = np.zeros(2), []
    for x in xs:
        for r in x:
            wc = wc * 0.5 + r
        wys.append(wc.sum())
    np.testing.assert_allclose(np.asarray(c), wc, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ys), wys, rtol=1e-12)


def test_loops_sharing_executables_in_swapped_roles_run_from_threads():
    """(review) one Region executable is the body of one loop and the condition of another:
    run_while takes the two locks in one order, else two threads deadlocked."""
    import threading

    x = lambda c: jnp.logical_not(c)
    y = lambda c: c == jnp.asarray(True)
    f1 = nova.jit(lambda c: lax.while_loop(x, y, c))
    f2 = nova.jit(lambda c: lax.while_loop(y, x, c))
    assert bool(f1(np.bool_(True))) and not bool(f2(np.bool_(True)))
    done = []

    def run(f):
        for _ in range(300):
            f(np.bool_(True))
        done.append(f)

    threads = [threading.Thread(target=run, args=(f,), daemon=True) for f in (f1, f2, f1, f2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(done) == 4
