"""nova.lax.stop_gradient: identity forward, zero derivative in reverse and forward mode."""

import jax
import jax.numpy as jjnp
import numpy as np

import nova
import nova.numpy as jnp
from nova import lax


def test_value_is_the_identity_and_no_copy_survives_compilation():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(lax.stop_gradient(x)), x)
    c = nova.jit(lambda x: lax.stop_gradient(x) * 2.0).lower(x).compile()
    assert "stop_gradient" not in c.as_text()
    np.testing.assert_array_equal(np.asarray(c(x)), 2 * x)


def test_reverse_and_forward_mode_match_jax():
    def f(lib, sg):
        return lambda x: lib.sum(x * sg(x) + lib.sin(sg(x * x)))

    x = np.linspace(-1, 2, 7).astype(np.float32)
    g = nova.grad(f(jnp, lax.stop_gradient))(x)
    gj = jax.grad(f(jjnp, jax.lax.stop_gradient))(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(gj), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g), x, rtol=1e-6)  # only the first factor differentiates
    t = np.ones_like(x)
    _, tn = nova.jvp(f(jnp, lax.stop_gradient), (x,), (t,))
    _, tj = jax.jvp(f(jjnp, jax.lax.stop_gradient), (x,), (t,))
    np.testing.assert_allclose(np.asarray(tn), np.asarray(tj), rtol=1e-6)
    gjit = nova.jit(nova.grad(f(jnp, lax.stop_gradient)))(x)
    np.testing.assert_allclose(np.asarray(gjit), x, rtol=1e-6)


def test_pytrees_and_integer_leaves():
    tree = {"w": np.ones(3, np.float32), "n": np.arange(3, dtype=np.int32), "s": 2.0}
    out = lax.stop_gradient(tree)
    assert set(out) == {"w", "n", "s"}
    assert out["n"].dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out["n"]), tree["n"])

    def loss(p):
        q = lax.stop_gradient(p)
        return jnp.sum(p["w"] * q["w"]) * q["s"]

    g = nova.grad(loss)({"w": np.full(3, 3.0, np.float32), "s": np.float32(2.0)})
    np.testing.assert_allclose(np.asarray(g["w"]), np.full(3, 6.0))
    assert float(g["s"]) == 0.0


def test_grad_of_a_jitted_function_keeps_its_stop_gradient():
    """A jitted function called inside grad is replayed as traced: the compiler's passes drop
    stop_gradient from the optimized program, which grad must still see (found by review)."""
    x = np.array([1.0, 2.0], np.float32)

    def f(w):
        return jnp.sum(lax.stop_gradient(w) * w)

    want = np.asarray(jax.grad(lambda w: jjnp.sum(jax.lax.stop_gradient(w) * w))(x))
    for g in (nova.grad(f), nova.grad(nova.jit(f)), nova.jit(nova.grad(nova.jit(f)))):
        np.testing.assert_allclose(np.asarray(g(x)), want)
    jf = nova.jit(f)
    jf(x)  # compiled first: the inlined program is still the traced one
    np.testing.assert_allclose(np.asarray(nova.grad(jf)(x)), want)
