"""nova.pmap (vectorized on one device, with named-axis collectives) and nova.make_jaxpr."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import nova
import nova.numpy as jnp

X = np.arange(8.0, dtype=np.float32).reshape(4, 2)


def test_pmap_matches_a_named_vmap_of_jax():
    def f(lib):
        return lambda v: v / lib.lax.psum(v, "i") + lib.lax.axis_index("i")

    got = nova.pmap(f(nova), axis_name="i")(X)
    want = jax.vmap(f(jax), axis_name="i")(X)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    # on a single-device host, jax.pmap over one member gives the same as Nova's
    one = jax.pmap(f(jax), axis_name="i")(X[:1])
    np.testing.assert_allclose(np.asarray(nova.pmap(f(nova), axis_name="i")(X[:1])),
                               np.asarray(one))


def test_pmap_static_arguments_axes_and_decorator():
    @nova.pmap
    def double(v):
        return 2 * v

    np.testing.assert_array_equal(np.asarray(double(X)), 2 * X)

    g = nova.pmap(lambda v, k, w: v * k + w, axis_name="d", static_broadcasted_argnums=1,
                  in_axes=(0, None, None))
    w = np.float32(0.5)
    np.testing.assert_allclose(np.asarray(g(X, 3, w)), X * 3 + 0.5)
    np.testing.assert_allclose(np.asarray(g(X, 2, w)), X * 2 + 0.5)

    h = nova.pmap(axis_name="i", out_axes=1)(lambda v: nova.lax.all_gather(v, "i").sum(0))
    np.testing.assert_allclose(np.asarray(h(X)), np.tile(X.sum(0)[:, None], (1, 4)))


def test_pmap_donation_and_errors():
    f = nova.pmap(lambda v: v + 1.0, donate_argnums=0)
    a = jnp.asarray(X)
    np.testing.assert_array_equal(np.asarray(f(a)), X + 1.0)
    with pytest.raises(TypeError, match="expected a function"):
        nova.pmap(3)
    with pytest.raises(ValueError, match="one device"):
        nova.pmap(lambda v: v, devices=["a", "b"])
    with pytest.raises(TypeError, match="hashable"):
        nova.pmap(lambda v, k: v, static_broadcasted_argnums=1)(X, [1])


def test_make_jaxpr_gives_the_program_and_shapes():
    prog = nova.make_jaxpr(lambda a: jnp.sin(a) * 2)(X)
    assert [e.prim.name for e in prog.eqns].count("sin") == 1
    assert "nova.sin" in str(prog)
    prog, shapes = nova.make_jaxpr(lambda a: (a.sum(), {"t": a.T}), return_shape=True)(
        nova.ShapeDtypeStruct((4, 2), np.float32))
    assert shapes[0].shape == () and shapes[1]["t"].shape == (2, 4)
    assert shapes[1]["t"].dtype == np.float32
    _, jshapes = jax.make_jaxpr(lambda a: (a.sum(), {"t": a.T}), return_shape=True)(X)
    assert [s.shape for s in jax.tree.leaves(jshapes)] == [s.shape for s in jax.tree.leaves(shapes)]
    with pytest.raises(NotImplementedError, match="axis_env"):
        nova.make_jaxpr(lambda a: a, axis_env=[("i", 2)])(X)
