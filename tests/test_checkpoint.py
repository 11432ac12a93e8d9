"""nova.checkpoint (gradient checkpointing, as jax.checkpoint) and lax.optimization_barrier:
the same values and derivatives as without it, less memory planned under jit, and the
barrier is what keeps the recomputation from being merged back."""

from __future__ import annotations

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova import lax

RNG = np.random.default_rng(5)
WS = [(RNG.standard_normal((64, 64)) * 0.15).astype(np.float32) for _ in range(6)]
X = RNG.standard_normal((128, 64)).astype(np.float32)


def _block(w, h):
    a = jnp.tanh(h @ w)
    b = jnp.sin(a) * a
    return jnp.tanh(b + h)


def _loss(wrap):
    def loss(ws, x):
        h = x
        for w in ws:
            h = wrap(_block)(w, h)
        return jnp.sum(h ** 2)

    return loss


def _arena(loss):
    return nova.jit(nova.value_and_grad(loss)).lower(WS, X).compile() \
        .memory_analysis()["arena_bytes"]


def test_values_gradients_and_memory_under_jit():
    plain, ck = _loss(lambda f: f), _loss(nova.checkpoint)
    v0, g0 = nova.jit(nova.value_and_grad(plain))(WS, X)
    v1, g1 = nova.jit(nova.value_and_grad(ck))(WS, X)
    np.testing.assert_allclose(float(v1), float(v0), rtol=1e-6)
    for a, b in zip(g1, g0, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-6)
    # the checkpointed step keeps one activation per block instead of three
    a_plain, a_ck = _arena(plain), _arena(ck)
    assert a_ck < 0.75 * a_plain, (a_ck, a_plain)
    # without the barrier cse merges the recomputation into the forward: no saving
    no_cse = _arena(_loss(lambda f: nova.checkpoint(f, prevent_cse=False)))
    assert no_cse > 0.9 * a_plain
    eqns = nova.make_program(nova.value_and_grad(ck))(WS, X).eqns
    assert sum(e.prim.name == "optimization_barrier" for e in eqns) == len(WS)


def test_closures_statics_decorator_and_eager():
    w = WS[0].astype(np.float64)
    x = X[:8].astype(np.float64)

    def loss(w, x):
        @nova.checkpoint
        def inner(h):  # reads w from the enclosing trace: its cotangent must flow
            return _block(w, h)

        return jnp.sum(inner(inner(x)) ** 2)

    want = nova.grad(lambda w, x: jnp.sum(_block(w, _block(w, x)) ** 2), argnums=(0, 1))(w, x)
    for fn in (nova.grad(loss, argnums=(0, 1)), nova.jit(nova.grad(loss, argnums=(0, 1)))):
        for a, b in zip(fn(w, x), want, strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12)

    @nova.checkpoint(static_argnums=(1,))
    def power(h, n):
        for _ in range(n):
            h = jnp.sin(h)
        return h

    g = nova.grad(lambda v: jnp.sum(power(v, 3)))(np.array([0.3, -0.7]))
    v = np.array([0.3, -0.7])
    s1, s2 = np.sin(v), np.sin(np.sin(v))
    np.testing.assert_allclose(np.asarray(g), np.cos(s2) * np.cos(s1) * np.cos(v), rtol=1e-12)
    # outside any transform it is the function itself
    np.testing.assert_allclose(np.asarray(power(v, 2)), s2, rtol=1e-15)


@pytest.mark.parametrize("policy", [None, "keep_all_but_names"])
def test_forward_mode_vmap_scan_and_second_order(policy):
    if policy is not None:  # every value kept through the saved-output custom_vjps
        policy = nova.checkpoint_policies.save_anything_except_these_names()
    f = nova.checkpoint(lambda x: jnp.sin(x) * x, policy=policy)
    x = np.array([0.5, -1.2, 2.0])
    _, t = nova.jvp(f, (x,), (np.ones(3),))
    np.testing.assert_allclose(np.asarray(t), np.cos(x) * x + np.sin(x), rtol=1e-12)
    g = nova.vmap(nova.grad(lambda v: f(v) * 2.0))(x)
    np.testing.assert_allclose(np.asarray(g), 2 * (np.cos(x) * x + np.sin(x)), rtol=1e-12)
    h = nova.grad(nova.grad(lambda v: f(v)))(np.float64(0.5))
    np.testing.assert_allclose(float(h), 2 * np.cos(0.5) - 0.5 * np.sin(0.5), rtol=1e-12)
    step = nova.checkpoint(lambda c, x: (jnp.tanh(c * x), None), prevent_cse=False,
                           policy=policy)
    loss = lambda c: lax.scan(step, c, x)[0]
    c = np.float64(0.7)
    want = nova.grad(lambda c: lax.scan(lambda c, x: (jnp.tanh(c * x), None), c, x)[0])(c)
    np.testing.assert_allclose(float(nova.jit(nova.grad(loss))(c)), float(want), rtol=1e-12)


def test_policies_and_errors():
    f = lambda x: jnp.sin(x)
    assert nova.checkpoint(f, policy=nova.checkpoint_policies.everything_saveable) is f
    g = nova.checkpoint(f, policy=nova.checkpoint_policies.nothing_saveable)
    np.testing.assert_allclose(float(nova.grad(g)(np.float64(0.3))), np.cos(0.3), rtol=1e-15)
    assert nova.remat is nova.checkpoint
    with pytest.raises(TypeError, match="policy must be callable"):
        nova.checkpoint(f, policy="dots")
    with pytest.raises(TypeError, match="must be callable"):
        nova.checkpoint(3)
    with pytest.raises(TypeError, match="argument 1 is in static_argnums but holds a traced"):
        nova.grad(lambda v: nova.checkpoint(lambda a, b: a * b, static_argnums=1)(v, v))(1.0)
    with pytest.raises(ValueError, match=r"static_argnums \(5,\) must lie in \[-2, 2\)"):
        nova.grad(lambda v: nova.checkpoint(lambda a, n: a * n, static_argnums=5)(v, 2))(1.0)
    with pytest.raises(ValueError, match="static_argnums"):
        nova.checkpoint(lambda a, n: a * n, static_argnums=(-3,))(1.0, 2)  # eagerly, too
    h = nova.checkpoint(lambda a, n: a * n, static_argnums=-1)
    assert float(nova.grad(h)(1.0, 3)) == 3.0


def test_optimization_barrier_on_pytrees():
    tree = {"a": np.ones(2), "b": (np.arange(3), 2.0)}
    out = lax.optimization_barrier(tree)
    np.testing.assert_array_equal(np.asarray(out["a"]), tree["a"])
    np.testing.assert_array_equal(np.asarray(out["b"][0]), tree["b"][0])
    f = nova.jit(lambda x: lax.optimization_barrier(x * 2) + 1)
    np.testing.assert_array_equal(np.asarray(f(np.arange(3.0))), [1.0, 3.0, 5.0])
    assert "optimization_barrier" not in f.lower(np.arange(3.0)).as_text()
    g = nova.grad(lambda x: jnp.sum(lax.optimization_barrier(x) ** 2))(np.arange(3.0))
    np.testing.assert_array_equal(np.asarray(g), [0.0, 2.0, 4.0])


def test_integer_inputs_and_outputs():
    # (found by a GPU test) the recomputation's vjp covers the float inputs only
    @nova.checkpoint
    def f(x, i):
        return jnp.sin(x) * i.astype(x.dtype), i + 1

    def loss(x, i):
        y, j = f(x, i)
        return jnp.sum(y) * j.astype(y.dtype)

    x, i = np.array([0.3, -0.4]), np.int32(3)
    g = nova.jit(nova.grad(loss))(x, i)
    np.testing.assert_allclose(np.asarray(g), np.cos(x) * 3 * 4, rtol=1e-12)


P = nova.checkpoint_policies


def _named_block(w, h):
    a = nova.checkpoint_name(jnp.tanh(h @ w), "a")
    b = jnp.sin(a) * a
    return jnp.tanh(b + h)


def _counts(loss):
    from nova.compiler.pipeline import run_passes

    names = [e.prim.name for e in run_passes(
        nova.make_program(nova.value_and_grad(loss))(WS, X)).eqns]
    return names.count("dot_general"), names.count("tanh")


@pytest.mark.parametrize("policy", [
    P.dots_saveable, P.checkpoint_dots, P.dots_with_no_batch_dims_saveable,
    P.save_only_these_names("a"), P.save_any_names_but_these("b"),
    P.save_anything_except_these_names("a"),
    P.save_from_both_policies(P.nothing_saveable, P.save_only_these_names("a")),
    lambda prim, *types, **params: prim.name == "tanh"])
def test_policies_keep_values_and_derivatives(policy):
    plain = _loss(lambda f: f)
    ck = _loss(lambda f: nova.checkpoint(f, policy=policy))
    v0, g0 = nova.jit(nova.value_and_grad(plain))(WS, X)
    v1, g1 = nova.jit(nova.value_and_grad(ck))(WS, X)
    np.testing.assert_allclose(float(v1), float(v0), rtol=1e-6)
    for a, b in zip(g1, g0, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-6)
    w, x = WS[0].astype(np.float64), X[:4].astype(np.float64)
    f = nova.checkpoint(_named_block, policy=policy)
    for argnums in (0, 1):  # eagerly, float64: exact against the plain derivative
        got = nova.grad(lambda w, x: jnp.sum(f(w, x) ** 2), argnums=argnums)(w, x)
        want = nova.grad(lambda w, x: jnp.sum(_named_block(w, x) ** 2), argnums=argnums)(w, x)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)


def test_what_each_policy_recomputes():
    n = len(WS)
    # plain: one matmul forward and two backward per block (but the first block's input
    # cotangent: X is not differentiated), tanh twice forward
    assert _counts(_loss(lambda f: f)) == (3 * n - 1, 2 * n)
    # nothing kept: the forward again in the backward (one more matmul and two more tanh)
    assert _counts(_loss(nova.checkpoint)) == (4 * n - 1, 4 * n)
    # dots kept: the matmul is not recomputed, the tanh around it are
    assert _counts(_loss(lambda f: nova.checkpoint(f, policy=P.dots_saveable))) == \
        (3 * n - 1, 4 * n)
    # a named tanh kept: neither it nor the matmul under it is recomputed (the other tanh is)
    named = _loss(lambda f: nova.checkpoint(_named_block, policy=P.save_only_these_names("a")))
    assert _counts(named) == (3 * n - 1, 3 * n)
    # a name nobody asks for changes nothing
    other = _loss(lambda f: nova.checkpoint(_named_block, policy=P.save_only_these_names("z")))
    assert _counts(other) == (4 * n - 1, 4 * n)


def test_policy_memory_lies_between_the_extremes():
    def block(w, h):  # the backward reads several values computed from the product
        a = h @ w
        return jnp.tanh(jnp.sin(a) * jnp.exp(-a * a) + h)

    def loss(wrap):
        def f(ws, x):
            h = x
            for w in ws:
                h = wrap(block)(w, h)
            return jnp.sum(h ** 2)

        return f

    plain, none = _arena(loss(lambda f: f)), _arena(loss(nova.checkpoint))
    dots = _arena(loss(lambda f: nova.checkpoint(f, policy=P.dots_saveable)))
    # measured: 524,480 / 458,944 / 295,104 bytes (the product kept instead of its functions)
    assert none < dots < plain, (none, dots, plain)


def test_checkpoint_name_is_the_identity_everywhere():
    x = np.arange(6.0).reshape(2, 3)
    y = nova.checkpoint_name({"p": x, "q": [x * 2]}, "n")
    np.testing.assert_array_equal(np.asarray(y["q"][0]), x * 2)
    np.testing.assert_array_equal(
        np.asarray(nova.jit(lambda v: nova.checkpoint_name(v, "n") + 1)(x)), x + 1)
    g = nova.grad(lambda v: jnp.sum(nova.checkpoint_name(v, "n") ** 2))(x)
    np.testing.assert_array_equal(np.asarray(g), 2 * x)
    v = nova.vmap(lambda r: nova.checkpoint_name(r, "n") * 3)(x)
    np.testing.assert_array_equal(np.asarray(v), 3 * x)
    _, t = nova.jvp(lambda v: nova.checkpoint_name(v, "n"), (x,), (np.ones_like(x),))
    np.testing.assert_array_equal(np.asarray(t), np.ones_like(x))
    from nova.compiler.pipeline import run_passes

    prog = run_passes(nova.make_program(lambda v: nova.checkpoint_name(v, "n") * 2)(x))
    assert all(e.prim.name != "checkpoint_name" for e in prog.eqns)
    with pytest.raises(TypeError, match="name must be a str"):
        nova.checkpoint_name(x, 3)
