"""Collectives over named vmap axes (nova/collectives.py) against jax.lax's under jax.vmap:
psum, pmean, pmax, pmin, all_gather, psum_scatter, ppermute, pshuffle, all_to_all, axis_index,
axis_size; nested axes, jit on either side, grad on either side, control flow and errors."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import nova.numpy as jnp
import numpy as np
import pytest

import nova

L, J = nova.lax, jax.lax
X = np.arange(1.0, 4.0, dtype=np.float32)
X2 = np.arange(6.0, dtype=np.float32).reshape(2, 3)


def _np(lib):
    return jnp if lib is L else jjnp


def _same(got, want, tol=1e-6):
    got, want = jax.tree.map(np.asarray, got), jax.tree.map(np.asarray, want)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


# (name, f(lib) -> per-member function): one axis named "i" of size 3
ONE_AXIS = [
    ("psum", lambda lib: lambda v: lib.psum(v, "i")),
    ("pmean", lambda lib: lambda v: lib.pmean(v ** 2, "i")),
    ("pmax", lambda lib: lambda v: lib.pmax(v, "i") - v),
    ("pmin", lambda lib: lambda v: lib.pmin(v * v, "i")),
    ("axis_index", lambda lib: lambda v: lib.axis_index("i") + v),
    ("psum_of_one", lambda lib: lambda v: lib.psum(1, "i") * v),
    ("axis_size", lambda lib: lambda v: lib.axis_size("i") * v),
    ("tree", lambda lib: lambda v: lib.psum({"a": v, "b": (2 * v, v - 1)}, "i")),
    ("all_gather", lambda lib: lambda v: lib.all_gather(v, "i")),
    ("all_gather_tiled", lambda lib: lambda v: lib.all_gather(v * _np(lib).ones(2), "i", tiled=True)),
    ("ppermute", lambda lib: lambda v: lib.ppermute(v, "i", [(0, 1), (1, 2), (2, 0)])),
    ("pshuffle", lambda lib: lambda v: lib.pshuffle(v, "i", [2, 0, 1])),
    ("psum_scatter", lambda lib: lambda v: lib.psum_scatter(v * _np(lib).arange(3.0), "i")),
    ("psum_scatter_tiled", lambda lib: lambda v: lib.psum_scatter(
        v * _np(lib).arange(6.0).reshape(2, 3), "i", scatter_dimension=1, tiled=True)),
    ("all_to_all", lambda lib: lambda v: lib.all_to_all(v * _np(lib).arange(3.0), "i", 0, 0)),
    ("all_to_all_axes", lambda lib: lambda v: lib.all_to_all(
        v * _np(lib).arange(12.0).reshape(3, 4), "i", 0, 1)),
    ("all_to_all_tiled", lambda lib: lambda v: lib.all_to_all(
        v * _np(lib).arange(24.0).reshape(6, 4), "i", 0, 1, tiled=True)),
]


@pytest.mark.parametrize("name,f", ONE_AXIS, ids=[c[0] for c in ONE_AXIS])
@pytest.mark.parametrize("where", ["eager", "jit_outside", "jit_inside"])
def test_one_axis_matches_jax(name, f, where):
    want = jax.vmap(f(J), axis_name="i")(X)
    if where == "eager":
        got = nova.vmap(f(L), axis_name="i")(X)
    elif where == "jit_outside":
        got = nova.jit(nova.vmap(f(L), axis_name="i"))(X)
    else:
        got = nova.vmap(nova.jit(f(L)), axis_name="i")(X)
    _same(got, want)


def test_a_jitted_function_under_two_axis_sizes():
    f = nova.jit(lambda v: L.psum(v, "i") + L.axis_index("i"))
    np.testing.assert_allclose(np.asarray(nova.vmap(f, axis_name="i")(X)), [6.0, 7.0, 8.0])
    np.testing.assert_allclose(np.asarray(nova.vmap(f, axis_name="i")(X[:2])), [3.0, 4.0])


NESTED = [
    ("outer_psum", lambda lib: lambda v: lib.psum(v, "i")),
    ("inner_psum", lambda lib: lambda v: lib.psum(v, "j")),
    ("both_names", lambda lib: lambda v: lib.psum(v, ("i", "j"))),
    ("pmean_both", lambda lib: lambda v: lib.pmean(v, ("i", "j"))),
    ("index_pair", lambda lib: lambda v: lib.axis_index(("i", "j")) + 0 * v),
    ("indices", lambda lib: lambda v: lib.axis_index("i") * 10 + lib.axis_index("j") + 0 * v),
    ("gather_outer", lambda lib: lambda v: lib.all_gather(v, "i")),
    ("permute_inner", lambda lib: lambda v: lib.ppermute(v, "j", [(0, 2), (1, 0), (2, 1)])),
    ("scatter_outer", lambda lib: lambda v: lib.psum_scatter(v * _np(lib).ones(2), "i")),
]


@pytest.mark.parametrize("name,f", NESTED, ids=[c[0] for c in NESTED])
def test_nested_axes_match_jax(name, f):
    def nest(lib, vmap):
        return vmap(vmap(f(lib), axis_name="j"), axis_name="i")

    _same(nest(L, nova.vmap)(X2), nest(J, jax.vmap)(X2))


GRADS = [
    ("psum", lambda lib: lambda v: lib.psum(v, "i") * v),
    ("pmean", lambda lib: lambda v: lib.pmean(v ** 2, "i")),
    ("all_gather", lambda lib: lambda v: (lib.all_gather(v, "i") * _np(lib).arange(3.0)).sum()),
    ("ppermute", lambda lib: lambda v: (lib.ppermute(v * v, "i", [(0, 1), (1, 2), (2, 0)])
                                        * _np(lib).arange(1.0, 4.0)).sum()),
    ("psum_scatter", lambda lib: lambda v: lib.psum_scatter(v * _np(lib).arange(3.0), "i") ** 2),
    ("all_to_all", lambda lib: lambda v: (lib.all_to_all(v * _np(lib).arange(3.0), "i", 0, 0)
                                          ** 2).sum()),
]


@pytest.mark.parametrize("name,f", GRADS, ids=[c[0] for c in GRADS])
def test_gradients_match_jax_in_both_orders(name, f):
    inner = nova.vmap(nova.grad(f(L)), axis_name="i")(X)  # per member: JAX's transpose rules
    _same(inner, jax.vmap(jax.grad(f(J)), axis_name="i")(X), tol=1e-5)

    def total(lib, vmap, grad):
        return grad(lambda v: vmap(f(lib), axis_name="i")(v).sum())

    _same(total(L, nova.vmap, nova.grad)(X), total(J, jax.vmap, jax.grad)(X), tol=1e-5)


def test_pmax_has_no_derivative_as_in_jax():
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'pmax'"):
        nova.vmap(nova.grad(lambda v: L.pmax(v, "i")), axis_name="i")(X)


def test_data_parallel_gradient_mean():
    rng = np.random.default_rng(0)
    w, xs = rng.standard_normal((4, 2)).astype(np.float32), rng.standard_normal((3, 5, 4)).astype(np.float32)

    def step(lib, grad, np_):
        def per_device(w, xb):
            return lib.pmean(grad(lambda w: (np_.tanh(xb @ w) ** 2).mean())(w), "dev")
        return per_device

    want = jax.vmap(step(J, jax.grad, jjnp), in_axes=(None, 0), axis_name="dev")(w, xs)
    for run in (lambda f: f, nova.jit):
        got = run(nova.vmap(step(L, nova.grad, jnp), in_axes=(None, 0), axis_name="dev"))(w, xs)
        _same(got, want, tol=1e-6)
        assert np.asarray(got).shape == (3, 4, 2)


def test_collectives_inside_control_flow():
    def scanned(lib):
        def f(v):
            def body(c, _):
                c = c + lib.psum(c, "i") * 0.1
                return c, lib.axis_index("i") * c
            return lib.scan(body, v, None, length=3)
        return f

    _same(nova.vmap(scanned(L), axis_name="i")(X), jax.vmap(scanned(J), axis_name="i")(X))

    def branchy(lib):
        return lambda v: lib.cond(v > 1.5, lambda u: lib.psum(u, "i"), lambda u: lib.pmax(u, "i"), v)

    _same(nova.vmap(branchy(L), axis_name="i")(X), jax.vmap(branchy(J), axis_name="i")(X))

    def looped(lib):
        return lambda v: lib.while_loop(lambda c: c[0] < 3,
                                        lambda c: (c[0] + 1, c[1] + lib.psum(c[1], "i")), (0, v))[1]

    _same(nova.vmap(looped(L), axis_name="i")(X), jax.vmap(looped(J), axis_name="i")(X))


def test_no_collective_reaches_the_program():
    prog = nova.make_program(nova.vmap(lambda v: L.psum(v, "i") * v, axis_name="i"))(X)
    assert prog.count("psum") == 0 and prog.count("reduce_sum") == 1


def test_partial_ppermute_sends_zeros_to_unnamed_members():
    got = nova.vmap(lambda v: L.ppermute(v, "i", [(0, 2)]), axis_name="i")(X)
    np.testing.assert_array_equal(np.asarray(got), [0.0, 0.0, 1.0])
    # a replicated (unmapped) operand is broadcast first
    got = nova.vmap(lambda v: L.ppermute(jnp.float32(5.0), "i", [(1, 0)]) + 0 * v,
                    axis_name="i")(X)
    np.testing.assert_array_equal(np.asarray(got), [5.0, 0.0, 0.0])


def test_errors_name_the_axis_and_the_shapes():
    with pytest.raises(NameError, match=r"psum: unbound axis name: 'k' \(bound here: \[\]"):
        L.psum(X, "k")
    with pytest.raises(NameError, match=r"unbound axis name: 'k' \(bound here: \['i'\]"):
        nova.vmap(lambda v: L.psum(v, "k"), axis_name="i")(X)
    with pytest.raises(NameError, match="axis_index: unbound axis name"):
        nova.vmap(lambda v: L.axis_index("j") + v)(X)
    with pytest.raises(ValueError, match=r"ppermute: perm \(\(0, 1\), \(1, 1\)\) must pair distinct"):
        nova.vmap(lambda v: L.ppermute(v, "i", [(0, 1), (1, 1)]), axis_name="i")(X)
    with pytest.raises(ValueError, match=r"dimension 0 of the operand of shape \(2,\) must be equal"):
        nova.vmap(lambda v: L.psum_scatter(v * jnp.ones(2), "i"), axis_name="i")(X)
    with pytest.raises(ValueError, match="not a permutation of range"):
        nova.vmap(lambda v: L.pshuffle(v, "i", [0, 0, 1]), axis_name="i")(X)
    with pytest.raises(NotImplementedError, match="axis_index_groups"):
        nova.vmap(lambda v: L.psum(v, "i", axis_index_groups=[[0, 1], [2]]), axis_name="i")(X)
    with pytest.raises(ValueError, match=r"all_gather: axis 2 is out of range .* shape \(\)"):
        nova.vmap(lambda v: L.all_gather(v, "i", axis=2), axis_name="i")(X)


# --- found by review (session 23): custom rules and checkpoints under a named vmap -------------

XR = (np.arange(12.0).reshape(3, 4) / 7).astype(np.float32)


def test_a_checkpoint_recomputes_collectives_over_the_same_axis():
    def f(lib, np_):
        return lambda b: np_.sin(b) * lib.lax.psum(b, "i")

    def total(lib, np_, ckpt):
        return lib.grad(lambda a: np_.sum(lib.vmap(ckpt(f(lib, np_)), axis_name="i")(a)))

    _same(total(nova, jnp, nova.checkpoint)(XR), total(jax, jjnp, jax.checkpoint)(XR), tol=1e-5)

    def scanned(lib, np_, ckpt):
        body = ckpt(lambda c, y: (np_.sin(c) * lib.lax.psum(y, "i"), c))
        return lib.grad(lambda a: np_.sum(lib.vmap(lambda b: lib.lax.scan(body, 1.0, b)[0],
                                                   axis_name="i")(a)))

    _same(scanned(nova, jnp, nova.checkpoint)(XR), scanned(jax, jjnp, jax.checkpoint)(XR),
          tol=1e-5)


def _squared_sum(lib, custom_vjp, psum_in_bwd):
    @custom_vjp
    def g(a):
        return lib.lax.psum(a * a, "i")

    def bwd(r, ct):
        return (2 * r * (lib.lax.psum(ct, "i") if psum_in_bwd else ct),)

    g.defvjp(lambda a: (g(a), a), bwd)
    return g


def test_custom_vjp_with_collectives_under_vmap():
    got = nova.vmap(_squared_sum(nova, nova.custom_vjp, False), axis_name="i")(XR)
    assert got.shape == (3, 4)  # an unmapped output of an eager vmap still gets the batch axis
    _same(got, jax.vmap(_squared_sum(jax, jax.custom_vjp, False), axis_name="i")(XR))
    gn = _squared_sum(nova, nova.custom_vjp, True)
    gj = _squared_sum(jax, jax.custom_vjp, True)
    _same(nova.vmap(nova.grad(lambda a: jnp.sum(jnp.sin(gn(a)))), axis_name="i")(XR),
          jax.vmap(jax.grad(lambda a: jjnp.sum(jjnp.sin(gj(a)))), axis_name="i")(XR), tol=1e-5)

    @nova.custom_vjp
    def h(a, b):
        return b * 2.0

    h.defvjp(lambda a, b: (h(a, b), None), lambda r, ct: (ct * 0, ct * 2))
    assert nova.vmap(h, in_axes=(0, None))(XR, XR[0]).shape == (3, 4)


def test_custom_jvp_with_collectives_differentiated_outside_the_vmap():
    def make(lib, custom_jvp, np_):
        @custom_jvp
        def g(a):
            return lib.lax.psum(np_.sin(a), "i")

        @g.defjvp
        def g_jvp(p, t):
            return g(p[0]), lib.lax.psum(np_.cos(p[0]) * t[0], "i")

        return g

    gn, gj = make(nova, nova.custom_jvp, jnp), make(jax, jax.custom_jvp, jjnp)
    assert nova.vmap(gn, axis_name="i")(XR).shape == (3, 4)
    _same(nova.grad(lambda a: jnp.sum(nova.vmap(gn, axis_name="i")(a)))(XR),
          jax.grad(lambda a: jjnp.sum(jax.vmap(gj, axis_name="i")(a)))(XR), tol=1e-5)


def test_psum_of_bools_counts_as_int32():
    b = np.array([[True, False], [True, True], [True, False]])
    got = nova.vmap(lambda v: L.psum(v, "i"), axis_name="i")(b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), [[3, 1]] * 3)
    got = nova.vmap(lambda v: L.psum(jnp.array([True, False]), "i") + 0 * v, axis_name="i")(X)
    np.testing.assert_array_equal(np.asarray(got)[0], [3, 0])
