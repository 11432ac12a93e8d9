"""vjp / grad / value_and_grad / jvp: composed functions against JAX and finite differences."""

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import nova
import nova.numpy as jnp
from tests.helpers import assert_close, check_grads



@pytest.fixture(autouse=True)
def _jax_x64():
    """JAX in float64 for this module's references only (the flag is process-wide)."""
    with jax.enable_x64(True):
        yield


def mlp_loss(params, x, y, np_=jnp):
    (w1, b1), (w2, b2) = params["l1"], params["l2"]
    h = np_.tanh(x @ w1 + b1)
    out = h @ w2 + b2
    return np_.mean((out - y) ** 2)


def _mlp(rng, dtype=np.float32):
    p = {"l1": (rng.standard_normal((5, 16)), rng.standard_normal(16) * 0.1),
         "l2": (rng.standard_normal((16, 3)), rng.standard_normal(3) * 0.1)}
    p = jax.tree_util.tree_map(lambda a: np.asarray(a, dtype), p)
    return p, rng.standard_normal((7, 5)).astype(dtype), rng.standard_normal((7, 3)).astype(dtype)


def test_mlp_value_and_grad_jit_matches_jax_float32():
    """The issue's done-criterion: jit(value_and_grad(loss)) equals JAX within 1e-6 relative."""
    p, x, y = _mlp(np.random.default_rng(0))
    step = nova.jit(nova.value_and_grad(mlp_loss))
    text = step.trace(p, x, y).as_text()
    assert "nova.dot_general" in text and "nova.tanh" in text
    v, g = step(p, x, y)
    jv, jg = jax.jit(jax.value_and_grad(lambda p, x, y: mlp_loss(p, x, y, jjnp)))(p, x, y)
    assert_close(v, jv, rtol=1e-6, atol=1e-7)
    for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(jg), strict=True):
        assert_close(a, b, rtol=1e-6, atol=1e-6)
    assert nova.tree_util.tree_structure(g) == nova.tree_util.tree_structure(
        jax.tree_util.tree_map(np.asarray, jg))


def test_mlp_grad_matches_finite_differences_float64():
    p, x, y = _mlp(np.random.default_rng(1), np.float64)
    leaves, td = nova.tree_util.tree_flatten(p)
    check_grads(lambda *ls: mlp_loss(nova.tree_util.tree_unflatten(td, ls), x, y), leaves)


def _softmax_xent(logits, labels, np_):
    m = np_.max(logits, axis=-1, keepdims=True)
    z = logits - m
    lse = np_.log(np_.sum(np_.exp(z), axis=-1, keepdims=True))
    logp = z - lse
    onehot = (labels[:, None] == np_.arange(logits.shape[-1])[None, :]).astype(logits.dtype) \
        if np_ is jjnp else np.eye(logits.shape[-1])[labels].astype(np.float64)
    return -np_.mean(np_.sum(logp * onehot, axis=-1))


def test_softmax_cross_entropy_grad():
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((6, 5))
    labels = rng.integers(0, 5, 6)
    check_grads(lambda l: _softmax_xent(l, labels, jnp), [logits])
    g = nova.grad(lambda l: _softmax_xent(l, labels, jnp))(logits)
    jg = jax.grad(lambda l: _softmax_xent(l, labels, jjnp))(logits)
    assert_close(g, jg, rtol=1e-10)


def _layer_norm(x, g, b, np_):
    mu = np_.mean(x, axis=-1, keepdims=True)
    var = np_.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / np_.sqrt(var + 1e-5) * g + b


def test_layer_norm_grad():
    rng = np.random.default_rng(3)
    x, gm, b = rng.standard_normal((4, 8)), rng.standard_normal(8), rng.standard_normal(8)
    check_grads(lambda x, gm, b: _layer_norm(x, gm, b, jnp), [x, gm, b])
    ct = rng.standard_normal((4, 8))
    got = nova.grad(lambda *a: jnp.sum(_layer_norm(*a, jnp) * ct), argnums=(0, 1, 2))(x, gm, b)
    want = jax.grad(lambda *a: jjnp.sum(_layer_norm(*a, jjnp) * ct), argnums=(0, 1, 2))(x, gm, b)
    for a, w in zip(got, want, strict=True):
        assert_close(a, w, rtol=1e-9, atol=1e-12)


def _attention(q, k, v, np_):
    t, d = q.shape[-2], q.shape[-1]
    s = (q @ np_.swapaxes(k, -1, -2)) / np.sqrt(d)
    mask = np.tril(np.ones((t, t), bool))
    s = np_.where(mask, s, -1e30)
    s = s - np_.max(s, axis=-1, keepdims=True)
    p = np_.exp(s)
    p = p / np_.sum(p, axis=-1, keepdims=True)
    return p @ v


def test_causal_attention_grad_against_jax_and_fd():
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((2, 5, 4)) for _ in range(3))
    check_grads(lambda q, k, v: _attention(q, k, v, jnp), [q, k, v])
    ct = rng.standard_normal((2, 5, 4))
    got = nova.jit(nova.grad(lambda *a: jnp.sum(_attention(*a, jnp) * ct), argnums=(0, 1, 2)))(q, k, v)
    want = jax.grad(lambda *a: jjnp.sum(_attention(*a, jjnp) * ct), argnums=(0, 1, 2))(q, k, v)
    for a, w in zip(got, want, strict=True):
        assert_close(a, w, rtol=1e-9, atol=1e-12)


def test_grad_of_grad_second_and_third_order():
    f = lambda x: jnp.sin(x) * x ** 3  # noqa: E731
    x = 0.7
    d1 = nova.grad(f)
    d2 = nova.grad(d1)
    d3 = nova.grad(d2)
    want1 = np.cos(x) * x**3 + 3 * x**2 * np.sin(x)
    want2 = -np.sin(x) * x**3 + 6 * x**2 * np.cos(x) + 6 * x * np.sin(x)
    want3 = -np.cos(x) * x**3 - 9 * x**2 * np.sin(x) + 18 * x * np.cos(x) + 6 * np.sin(x)
    assert_close(d1(np.float64(x)), want1, rtol=1e-12)
    assert_close(d2(np.float64(x)), want2, rtol=1e-12)
    assert_close(d3(np.float64(x)), want3, rtol=1e-10)
    assert_close(nova.jit(d2)(np.float64(x)), want2, rtol=1e-12)


def test_no_perturbation_confusion():
    # d/dx [x * d/dy (x + y)] = d/dx [x * 1] = 1 (a classic nested-AD trap).
    f = lambda x: x * nova.grad(lambda y: x + y)(x)  # noqa: E731
    assert_close(nova.grad(f)(np.float64(2.0)), 1.0)
    assert_close(nova.jit(nova.grad(f))(np.float64(2.0)), 1.0)


def test_hessian_vector_product_matches_jax():
    rng = np.random.default_rng(5)
    x, v = rng.standard_normal(4), rng.standard_normal(4)
    f = lambda x, np_: np_.sum(np_.tanh(x) ** 2 * x)  # noqa: E731
    hvp = nova.jvp(nova.grad(lambda x: f(x, jnp)), (x,), (v,))[1]
    jhvp = jax.jvp(jax.grad(lambda x: f(x, jjnp)), (x,), (v,))[1]
    assert_close(hvp, jhvp, rtol=1e-10)
    # reverse-over-reverse gives the same
    hvp2 = nova.grad(lambda x: jnp.sum(nova.grad(lambda y: f(y, jnp))(x) * v))(x)
    assert_close(hvp2, jhvp, rtol=1e-10)


def test_vjp_multiple_outputs_and_pytrees():
    def f(d):
        return {"a": jnp.sin(d["x"]) * d["y"], "b": jnp.sum(d["x"])}
    d = {"x": np.array([0.1, 0.2]), "y": np.array([1.0, 3.0])}
    out, vjp_fn = nova.vjp(f, d)
    (g,) = vjp_fn({"a": np.array([1.0, 2.0]), "b": np.array(0.5)})
    assert_close(g["x"], np.cos(d["x"]) * d["y"] * [1, 2] + 0.5)
    assert_close(g["y"], np.sin(d["x"]) * [1, 2])
    assert_close(out["b"], 0.3)


def test_has_aux_and_argnums():
    def f(x, y):
        return jnp.sum(x * y), {"norm": jnp.sum(x * x)}
    x, y = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    (v, aux), (gx, gy) = nova.value_and_grad(f, argnums=(0, 1), has_aux=True)(x, y)
    assert_close(v, 11.0)
    assert_close(aux["norm"], 5.0)
    assert_close(gx, y)
    assert_close(gy, x)
    g, aux2 = nova.grad(f, argnums=1, has_aux=True)(x, y)
    assert_close(g, x)
    assert_close(aux2["norm"], 5.0)


def test_python_control_flow_on_values_outside_jit():
    def f(x):
        if jnp.sum(x) > 0:
            return jnp.sum(x ** 2)
        return jnp.sum(-x)
    assert_close(nova.grad(f)(np.array([1.0, 2.0])), [2.0, 4.0])
    assert_close(nova.grad(f)(np.array([-1.0, -2.0])), [-1.0, -1.0])


def test_where_discarded_branch_gives_zero_not_nan():
    # JAX gives NaN here; Nova documents zero (DESIGN.md, Numerics).
    f = lambda x: jnp.sum(jnp.where(x > 0, jnp.sqrt(x), 0.0))  # noqa: E731
    g = nova.grad(f)(np.array([0.0, 4.0]))
    assert_close(g, [0.0, 0.25])
    g2 = nova.grad(lambda x: jnp.sum(jnp.where(x > 0, jnp.log(x), 0.0)))(np.array([0.0, 2.0]))
    assert_close(g2, [0.0, 0.5])


def test_jvp_matches_jax_for_composed_function():
    rng = np.random.default_rng(6)
    x, t = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    f = lambda x, np_: np_.max(np_.exp(x) / np_.sum(np_.exp(x), axis=0), axis=1)  # noqa: E731
    y, ty = nova.jvp(lambda x: f(x, jnp), (x,), (t,))
    jy, jty = jax.jvp(lambda x: f(x, jjnp), (x,), (t,))
    assert_close(y, jy, rtol=1e-12)
    assert_close(ty, jty, rtol=1e-10)


def test_jit_of_grad_equals_grad_of_jit():
    rng = np.random.default_rng(7)
    p, x, y = _mlp(rng, np.float64)
    a = nova.jit(nova.grad(mlp_loss))(p, x, y)
    b = nova.grad(nova.jit(mlp_loss))(p, x, y)
    c = nova.grad(mlp_loss)(p, x, y)
    for u, v, w in zip(nova.tree_util.tree_leaves(a), nova.tree_util.tree_leaves(b),
                       nova.tree_util.tree_leaves(c), strict=True):
        assert_close(u, v, rtol=1e-12)
        assert_close(u, w, rtol=1e-12)


@pytest.mark.parametrize("bad", [lambda x: x * 2.0, lambda x: (x * 2).astype(jnp.int32).sum()])
def test_grad_of_non_scalar_or_int_output_raises(bad):
    with pytest.raises(TypeError, match="scalar output|float output"):
        nova.grad(bad)(np.array([1.0, 2.0]))


def test_grad_wrt_integer_input_raises():
    with pytest.raises(TypeError, match="argument 'n' has dtype int32"):
        nova.grad(lambda n: jnp.sum(n * 2.0))(np.array([1, 2], np.int32))
    with pytest.raises(TypeError, match="int32"):
        nova.grad(lambda x, n: jnp.sum(x) * n, argnums=1)(np.ones(2), 3)


def test_zero_cotangent_through_infinite_partials_is_zero():
    # exp(1000.) overflows: the discarded branch's derivative is inf, its cotangent is 0.
    f = lambda x: jnp.sum(jnp.where(x < 10.0, jnp.exp(x), 0.0))  # noqa: E731
    g = nova.grad(f)(np.array([1.0, 1000.0], np.float32))
    assert_close(g, [np.e, 0.0], rtol=1e-6)
    h = nova.grad(lambda x: jnp.sum(jnp.where(x > 0, x * np.float32(np.inf), 0.0)))(
        np.array([-1.0, 2.0], np.float32))
    assert h[0] == 0 and np.isinf(h[1])


def test_reverse_mode_masks_only_partials_that_may_be_infinite():
    """The zero-cotangent mask (isnan / isinf / select) is traced for a partial that may be
    non-finite, not for a broadcast of a finite constant; an inf constant keeps it, and a zero
    cotangent through it still gives 0, not NaN."""
    x = np.array([1.0, 2.0, 3.0], np.float32)

    def prims(f, *args):
        return [e.prim.name for e in nova.make_program(f)(*args).eqns]

    # x * y: both partials (y for x, x for y) masked; x * 0.5: only the constant's own partial
    # (x, dead code) is, not 0.5's broadcast for x
    assert prims(nova.grad(lambda x, y: jnp.sum(x * y)), x, x).count("isnan") == 2
    assert prims(nova.grad(lambda x: jnp.sum(x * 0.5)), x).count("isnan") == 1
    assert prims(nova.grad(lambda x: jnp.sum(x * np.float32(np.inf))), x).count("isnan") == 2
    # d/dx of 0 * (x * inf): the cotangent reaching x * inf is 0, so the gradient is 0
    g = nova.grad(lambda x: jnp.sum(0.0 * (x * np.float32(np.inf))))(x)
    np.testing.assert_array_equal(np.asarray(g), 0.0)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_zero_cotangent_through_an_infinite_constant_stays_zero_in_every_float(dtype):
    """A constant holding inf or NaN keeps its zero-cotangent mask in every float dtype
    (bfloat16 has NumPy kind 'V': it must not pass as a finite constant)."""
    dt = jnp.dtype(dtype)
    x = np.array([-1.0, 2.0], np.float32).astype(dt)
    inf, nan = np.array(np.inf).astype(dt), np.array(np.nan).astype(dt)
    h = nova.grad(lambda x: jnp.sum(jnp.where(x > 0, x * inf, 0.0)).astype(jnp.float32))(x)
    np.testing.assert_array_equal(np.asarray(h).astype(np.float32), [0.0, np.inf])
    g = nova.grad(lambda x: jnp.sum((0.0 * (x * nan)).astype(jnp.float32)))(x)
    np.testing.assert_array_equal(np.asarray(g).astype(np.float32), [0.0, 0.0])


@pytest.mark.parametrize("dtype,tol", [("bfloat16", 2e-2), ("float16", 4e-3)])
def test_narrow_float_cotangent_sums_accumulate_in_float32(dtype, tol):
    """The gradient of a bias broadcast over 4096 rows sums the rows' cotangents (a broadcast's
    VJP). In bfloat16 that sum was a bfloat16 running sum: a cross-entropy's bias gradient came
    out 95 % off. It accumulates in float32 now (ops/reduction.reduce_sum), eagerly and under
    jit, within the dtype's rounding of the float64 gradient."""
    from nova.nn import functional as F

    dt = jnp.dtype(dtype)
    rng = np.random.default_rng(0)
    n, v = 4096, 256
    x = rng.standard_normal((n, v)).astype(dt)
    b = (0.1 * rng.standard_normal(v)).astype(dt)
    labels = rng.integers(0, v, n).astype(np.int32)
    z = x.astype(np.float64) + b.astype(np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(n), labels] -= 1.0
    want = p.sum(axis=0) / n

    def loss(x, b):
        return F.cross_entropy(x + b, labels)

    for fn in (nova.grad(loss, argnums=1), nova.jit(nova.grad(loss, argnums=1))):
        got = np.asarray(fn(x, b)).astype(np.float64)
        assert np.abs(got - want).max() <= tol * np.abs(want).max()


def test_zero_safe_product_is_bitwise_the_masked_product_and_keeps_its_derivative():
    """VJPs multiply cotangent and partial as ct * d with d read as 0 where ct == 0 and d is not
    finite (DESIGN.md, Numerics): bit for bit (signed zeros included), eagerly and compiled, and
    its derivative with respect to ct is 0 at the masked points, d elsewhere."""
    from nova.ops.elementwise import _zero_safe_mul

    vals = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan], np.float32)
    ct, d = (a.ravel() for a in np.meshgrid(vals, vals, indexing="ij"))
    with np.errstate(invalid="ignore"):
        want = ct * np.where((ct == 0) & ~np.isfinite(d), np.float32(0), d)
    for f in (_zero_safe_mul, nova.jit(_zero_safe_mul)):
        got = np.asarray(f(ct, d))
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    dct = np.asarray(nova.grad(lambda c: jnp.sum(_zero_safe_mul(c, d)))(ct))
    masked = (ct == 0) & ~np.isfinite(d)
    np.testing.assert_array_equal(dct[masked], 0.0)
    np.testing.assert_array_equal(dct[~masked], d[~masked])


def test_jvp_refuses_a_tangent_of_another_dtype():
    """As jax.jvp: a float64 tangent of a float32 primal raises (it was cast silently)."""
    x = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="tangent for 'x' has dtype float64, but its primal has "
                                        "dtype float32"):
        nova.jvp(lambda x: jnp.sin(x), (x,), (np.ones(3),))
    y, t = nova.jvp(lambda x: jnp.sin(x), (x,), (np.ones(3, np.float32),))
    assert np.asarray(t).dtype == np.float32


def test_eager_gradients_are_buffers_of_their_own():
    """Two unused arguments' zero gradients are one recorded value inside the trace, but two
    arrays outside it: writing one through NumPy leaves the other (found by review)."""
    one = np.ones(3, np.float32)
    gy, gz = nova.grad(lambda x, y, z: jnp.sum(x), argnums=(1, 2))(one, one, one)
    view = np.asarray(gy)
    assert view.flags.writeable
    view[0] = 7.0
    np.testing.assert_array_equal(np.asarray(gz), [0, 0, 0])
