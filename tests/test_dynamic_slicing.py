"""jax.lax's dynamic slicing and small helpers (nova/ops/dynamic.py): against NumPy with JAX's
wrapping of negative starts and XLA's clamping, eagerly, under jit (traced starts), grad, vmap,
and in a fori_loop."""

from __future__ import annotations

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova import lax
from nova.core.errors import ShapeError

RNG = np.random.default_rng(7)
X = RNG.standard_normal((5, 6, 4))


def _fit(s, d, n):
    """JAX's start rule: a negative start counts from the end, then XLA's clamp."""
    s = int(s)
    return min(max(s + d if s < 0 else s, 0), d - n)


def _np_dynamic_slice(x, starts, sizes):
    starts = [_fit(s, d, n) for s, d, n in zip(starts, x.shape, sizes, strict=True)]
    return x[tuple(slice(s, s + n) for s, n in zip(starts, sizes, strict=True))]


def _np_dynamic_update_slice(x, u, starts):
    starts = [_fit(s, d, n) for s, d, n in zip(starts, x.shape, u.shape, strict=True)]
    y = x.copy()
    y[tuple(slice(s, s + n) for s, n in zip(starts, u.shape, strict=True))] = u
    return y


STARTS = [(0, 0, 0), (1, 2, 3), (4, 5, 3), (-3, 10, 1), (2, -1, 0), (-20, -2, -4)]


@pytest.mark.parametrize("starts", STARTS)
@pytest.mark.parametrize("traced", [(), (0,), (0, 1, 2), (1,)])
def test_dynamic_slice_matches_numpy_with_clamping(starts, traced):
    sizes = (2, 3, 4)
    want = _np_dynamic_slice(X, starts, sizes)

    def f(x, *dyn):
        s = list(starts)
        for k, v in zip(traced, dyn, strict=True):
            s[k] = v
        return lax.dynamic_slice(x, s, sizes)

    dyn = [np.int32(starts[k]) for k in traced]
    np.testing.assert_array_equal(np.asarray(f(X, *dyn)), want)
    np.testing.assert_array_equal(np.asarray(nova.jit(f)(X, *dyn)), want)


@pytest.mark.parametrize("starts", STARTS)
def test_dynamic_update_slice_matches_numpy_with_clamping(starts):
    for shape in [(2, 3, 4), (5, 6, 4), (1, 1, 1), (5, 2, 4)]:
        u = RNG.standard_normal(shape)
        want = _np_dynamic_update_slice(X, u, starts)
        got = nova.jit(lambda x, u, s: lax.dynamic_update_slice(x, u, s))(
            X, u, np.asarray(starts, np.int32))
        np.testing.assert_array_equal(np.asarray(got), want)
        got = lax.dynamic_update_slice(X, u, starts)  # static starts, eagerly
        np.testing.assert_array_equal(np.asarray(got), want)


def test_in_dim_variants():
    i = np.int32(2)
    np.testing.assert_array_equal(np.asarray(lax.dynamic_slice_in_dim(X, i, 2, axis=1)),
                                  X[:, 2:4])
    np.testing.assert_array_equal(np.asarray(lax.dynamic_index_in_dim(X, i, 2)), X[:, :, 2:3])
    np.testing.assert_array_equal(
        np.asarray(lax.dynamic_index_in_dim(X, i, 0, keepdims=False)), X[2])
    u = np.ones((5, 4))
    want = X.copy()
    want[:, 3] = 1.0
    np.testing.assert_array_equal(
        np.asarray(lax.dynamic_update_index_in_dim(X, u, np.int32(3), 1)), want)
    want = X.copy()
    want[1:3] = 0.0
    np.testing.assert_array_equal(
        np.asarray(lax.dynamic_update_slice_in_dim(X, np.zeros((2, 6, 4)), 1, 0)), want)
    np.testing.assert_array_equal(np.asarray(lax.index_in_dim(X, -1, 1, keepdims=False)),
                                  X[:, -1])
    np.testing.assert_array_equal(np.asarray(lax.slice_in_dim(X, 1, None, 2, axis=2)),
                                  X[:, :, 1::2])


def test_negative_starts_wrap_unless_refused():
    x = np.arange(10.0)
    # as jax.lax: -3 counts from the end, -30 wraps to -20 and clamps to 0
    np.testing.assert_array_equal(np.asarray(lax.dynamic_slice(x, (-3,), (2,))), [7.0, 8.0])
    np.testing.assert_array_equal(np.asarray(lax.dynamic_slice(x, (-30,), (2,))), [0.0, 1.0])
    np.testing.assert_array_equal(np.asarray(lax.dynamic_slice(x, (-1,), (2,))), [8.0, 9.0])
    f = nova.jit(lambda i: lax.dynamic_slice(x, (i,), (2,)))
    np.testing.assert_array_equal(np.asarray(f(np.int32(-3))), [7.0, 8.0])
    # refused: a traced negative start clamps to 0; a static one raises
    g = nova.jit(lambda i: lax.dynamic_slice(x, (i,), (2,), allow_negative_indices=False))
    np.testing.assert_array_equal(np.asarray(g(np.int32(-3))), [0.0, 1.0])
    with pytest.raises(ValueError, match="start index -3 is out of bounds.*allow_negative"):
        lax.dynamic_slice(x, (-3,), (2,), allow_negative_indices=False)
    want = x.copy()
    want[7:9] = 1.0
    np.testing.assert_array_equal(
        np.asarray(lax.dynamic_update_slice(x, np.ones(2), (np.int32(-3),))), want)
    # per axis
    y = np.arange(12.0).reshape(3, 4)
    h = nova.jit(lambda i, j: lax.dynamic_slice(y, (i, j), (1, 2),
                                                allow_negative_indices=(True, False)))
    np.testing.assert_array_equal(np.asarray(h(np.int32(-1), np.int32(-1))), y[2:3, 0:2])
    with pytest.raises(ValueError, match="allow_negative_indices has 1 entries"):
        lax.dynamic_slice(y, (0, 0), (1, 1), allow_negative_indices=(True,))
    np.testing.assert_array_equal(np.asarray(lax.dynamic_index_in_dim(y, np.int32(-1), 1,
                                                                      keepdims=False)), y[:, 3])
    last = nova.jit(lambda i: lax.dynamic_index_in_dim(y, i, 1, keepdims=False,
                                                       allow_negative_indices=False))
    np.testing.assert_array_equal(np.asarray(last(np.int32(-1))), y[:, 0])


def test_gradients_and_vmap():
    def f(x, i):
        return jnp.sum(jnp.sin(lax.dynamic_slice(x, (i, 1, 0), (2, 3, 4))))

    i = np.int32(3)
    g = nova.jit(nova.grad(f))(X, i)
    want = np.zeros_like(X)
    want[3:5, 1:4] = np.cos(X[3:5, 1:4])
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-12)

    def h(x, u, i):
        return jnp.sum(lax.dynamic_update_slice(x, u, (i, 0, 0)) ** 2)

    u = RNG.standard_normal((1, 6, 4))
    gx, gu = nova.grad(h, argnums=(0, 1))(X, u, np.int32(2))
    want = 2 * X
    want[2] = 0.0
    np.testing.assert_allclose(np.asarray(gx), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(gu), 2 * u, rtol=1e-12)
    # per-example starts under vmap
    idx = np.array([0, 3, 9], np.int32)
    rows = nova.vmap(lambda i: lax.dynamic_slice(X, (i, 0, 0), (1, 6, 4)))(idx)
    np.testing.assert_array_equal(np.asarray(rows), np.stack([X[0:1], X[3:4], X[4:5]]))
    neg = nova.vmap(lambda i: lax.dynamic_slice(X, (i, 0, 0), (1, 6, 4)))(-idx)
    np.testing.assert_array_equal(np.asarray(neg), np.stack([X[0:1], X[2:3], X[0:1]]))
    written = nova.vmap(lambda i: lax.dynamic_update_index_in_dim(X, jnp.zeros((6, 4), jnp.float64), i, 0))(
        idx)
    for k, i in enumerate([0, 3, 4]):
        want = X.copy()
        want[i] = 0.0
        np.testing.assert_array_equal(np.asarray(written[k]), want)


def test_a_kv_cache_filled_in_a_fori_loop():
    rows = RNG.standard_normal((6, 4))

    def fill(rows):
        def body(i, cache):
            row = lax.dynamic_index_in_dim(rows, i, 0)
            return lax.dynamic_update_slice(cache, row * 2.0, (i, 0))

        return lax.fori_loop(0, 6, body, jnp.zeros((6, 4), jnp.float64))

    np.testing.assert_allclose(np.asarray(nova.jit(fill)(rows)), rows * 2.0, rtol=1e-12)
    g = nova.grad(lambda r: jnp.sum(fill(r) * np.arange(4.0)))(rows)
    np.testing.assert_allclose(np.asarray(g), np.broadcast_to(2 * np.arange(4.0), (6, 4)))


def test_helpers():
    x = np.arange(6.0).reshape(2, 3)
    assert lax.expand_dims(x, (0, 3)).shape == (1, 2, 3, 1)
    assert lax.squeeze(np.ones((1, 3, 1)), (0, 2)).shape == (3,)
    np.testing.assert_array_equal(np.asarray(lax.clamp(1.0, x, 4.0)), np.clip(x, 1, 4))
    np.testing.assert_array_equal(
        np.asarray(lax.clamp(np.zeros((2, 3)), x, np.full((2, 3), 2.5))), np.clip(x, 0, 2.5))
    for y in (0, 1, 2, 5, -3):
        np.testing.assert_allclose(np.asarray(lax.integer_pow(x + 1, y)), (x + 1) ** float(y),
                                   rtol=1e-15)
    assert int(lax.integer_pow(np.int32(3), 13)) == 3 ** 13
    v = np.array([[3.0, 1.0, 3.0, np.nan, 2.0], [0.0, 5.0, -1.0, 5.0, 5.0]])
    vals, idx = lax.top_k(v, 3)
    np.testing.assert_array_equal(np.asarray(idx), [[3, 0, 2], [1, 3, 4]])
    np.testing.assert_array_equal(np.asarray(vals)[1], [5.0, 5.0, 5.0])
    assert np.isnan(np.asarray(vals)[0, 0]) and np.asarray(idx).dtype == np.int32
    g = nova.grad(lambda v: jnp.sum(lax.top_k(v, 2)[0] * np.array([10.0, 1.0])))(
        np.array([1.0, 4.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(g), [0.0, 10.0, 1.0])


def test_clamp_derivatives_follow_jax_at_the_bounds():
    x = np.array([0.0, 0.5, 1.0, 2.0, -1.0])
    # JAX: x's derivative only strictly inside, min's below it, max's above it, none at a bound
    np.testing.assert_array_equal(np.asarray(nova.grad(
        lambda x: jnp.sum(lax.clamp(0.0, x, 1.0)))(x)), [0.0, 1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(np.asarray(nova.jit(nova.grad(
        lambda lo: jnp.sum(lax.clamp(lo, x, np.ones(5)))))(np.zeros(5))), [0, 0, 0, 0, 1.0])
    np.testing.assert_array_equal(np.asarray(nova.grad(
        lambda hi: jnp.sum(lax.clamp(np.zeros(5), x, hi)))(np.ones(5))), [0, 0, 0, 1.0, 0])
    # a scalar bound gathers its positions
    assert float(nova.grad(lambda hi: jnp.sum(lax.clamp(-5.0, x, hi)))(np.float64(0.75))) == 2.0
    _, t = nova.jvp(lambda x: lax.clamp(0.0, x, 1.0), (x,), (np.ones(5),))
    np.testing.assert_array_equal(np.asarray(t), [0.0, 1.0, 0.0, 0.0, 0.0])
    # inverted bounds take XLA's value min(max(x, lo), hi)
    np.testing.assert_array_equal(np.asarray(lax.clamp(3.0, x, 1.0)), np.ones(5))
    assert int(lax.clamp(np.int32(0), np.int32(7), np.int32(5))) == 5


def test_top_k_orders_signed_zeros_as_jax():
    vals, idx = lax.top_k(np.array([-0.0, 0.0, 1.0, -0.0]), 4)
    np.testing.assert_array_equal(np.asarray(idx), [2, 1, 0, 3])
    assert list(np.signbit(np.asarray(vals))) == [False, False, True, True]
    _, idx = nova.jit(lambda v: lax.top_k(v, 2))(np.array([[0.0, -0.0, -1.0], [-0.0, 0.0, 0.0]]))
    np.testing.assert_array_equal(np.asarray(idx), [[0, 1], [1, 2]])


def test_errors():
    with pytest.raises(ShapeError, match="2 start indices for an operand of 3"):
        lax.dynamic_slice(X, (0, 0), (1, 1, 1))
    with pytest.raises(ShapeError, match="slice size 7 of axis 1 is outside"):
        lax.dynamic_slice(X, (0, 0, 0), (1, 7, 1))
    with pytest.raises(TypeError, match="start index 0 must be an integer scalar"):
        lax.dynamic_slice(X, (np.float32(1.0), 0, 0), (1, 1, 1))
    with pytest.raises(TypeError, match="update has dtype float32, operand float64"):
        lax.dynamic_update_slice(X, np.ones((1, 1, 1), np.float32), (0, 0, 0))
    with pytest.raises(ShapeError, match="does not fit"):
        lax.dynamic_update_slice(X, np.ones((6, 1, 1)), (0, 0, 0))
    with pytest.raises(ValueError, match="axis 2 has size 3, not 1"):
        lax.squeeze(np.ones((1, 1, 3)), (2,))
    with pytest.raises(ValueError, match="k=6 is outside"):
        lax.top_k(np.ones(5), 6)
    with pytest.raises(IndexError, match="index 5 is out of bounds"):
        lax.index_in_dim(np.ones(5), 5)
    with pytest.raises(TypeError, match="integer_pow: .* got bool"):
        lax.integer_pow(np.array([True, False]), 2)
    with pytest.raises(ValueError, match="expand_dims: repeated axis"):
        lax.expand_dims(np.ones(3), (0, 0))
    with pytest.raises(ValueError, match="expand_dims: repeated axis"):
        lax.expand_dims(np.ones(3), (0, -3))
    with pytest.raises(ValueError, match="squeeze: repeated axis"):
        lax.squeeze(np.ones((1, 3)), (0, -2))
