"""nova.custom_jvp (nova/custom_derivatives.py): the rule is what every transform uses (forward
mode calls it, reverse mode transposes it), checked against jax.custom_jvp on the same
functions; higher order, pytrees, static arguments, jit; errors."""

import jax
import jax.numpy as jjnp
import nova.numpy as jnp
import numpy as np
import pytest

import nova
from tests.helpers import assert_close

f32 = np.float32


def _sin_times(np_mod, custom):
    @custom
    def f(x, y):
        return np_mod.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        return f(x, y), np_mod.cos(x) * tx * y + np_mod.sin(x) * ty

    return f


def _args():
    rng = np.random.default_rng(0)
    return rng.standard_normal(6).astype(f32), rng.standard_normal(6).astype(f32)


def test_grad_jvp_and_jit_match_jax_custom_jvp():
    f, fj = _sin_times(jnp, nova.custom_jvp), _sin_times(jjnp, jax.custom_jvp)
    x, y = _args()

    def loss(f, mod):
        return lambda x, y: mod.sum(f(x, y) ** 2)

    want = jax.grad(loss(fj, jjnp), argnums=(0, 1))(x, y)
    for g in (nova.grad(loss(f, jnp), argnums=(0, 1)),
              nova.jit(nova.grad(loss(f, jnp), argnums=(0, 1))),
              nova.grad(nova.jit(loss(f, jnp)), argnums=(0, 1))):
        for a, b in zip(g(x, y), want, strict=True):
            assert_close(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    tx, ty = np.ones(6, f32), np.full(6, 0.5, f32)
    out, t = nova.jvp(f, (x, y), (tx, ty))
    wout, wt = jax.jvp(fj, (x, y), (tx, ty))
    assert_close(np.asarray(out), np.asarray(wout), rtol=1e-6)
    assert_close(np.asarray(t), np.asarray(wt), rtol=1e-5, atol=1e-6)
    (ct,) = [nova.vjp(f, x, y)[1](np.ones(6, f32))]
    wct = jax.vjp(fj, x, y)[1](np.ones(6, f32))
    for a, b in zip(ct, wct, strict=True):
        assert_close(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_second_derivatives_match_jax():
    f, fj = _sin_times(jnp, nova.custom_jvp), _sin_times(jjnp, jax.custom_jvp)
    x, y = _args()

    def hess_diag(f, mod, grad):
        return grad(lambda x: mod.sum(grad(lambda z: mod.sum(f(z, y) ** 2))(x)))

    got = hess_diag(f, jnp, nova.grad)(x)
    want = hess_diag(fj, jjnp, jax.grad)(x)
    assert_close(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-5)


def test_the_rule_replaces_the_functions_derivative():
    """A rule that is not f's derivative (2 t for the identity) is what every transform gives,
    and under jit without a derivative only the function remains (no marker)."""
    @nova.custom_jvp
    def f(x):
        return x * 1.0

    f.defjvp(lambda primals, tangents: (f(*primals), 2.0 * tangents[0]))
    x = np.arange(4, dtype=f32)
    for g in (nova.grad(lambda x: jnp.sum(f(x))), nova.jit(nova.grad(lambda x: jnp.sum(f(x))))):
        np.testing.assert_array_equal(np.asarray(g(x)), 2.0)
    np.testing.assert_array_equal(np.asarray(nova.jvp(f, (x,), (np.ones(4, f32),))[1]), 2.0)
    text = nova.jit(f).trace(x).program.as_text()
    assert "custom_jvp_call" not in text and "nova.mul" in text
    np.testing.assert_array_equal(np.asarray(nova.jit(f)(x)), x)


def test_defjvps_gives_a_stable_derivative():
    """log(1 + e^x) differentiated as written is wrong at x = 100 (e^x overflows: JAX gets
    inf / inf = NaN, Nova's zero-safe products 0); its defjvps rule (the logistic function)
    gives 1 (JAX's documentation example)."""
    def log1pexp(x):
        return jnp.log1p(jnp.exp(x))

    custom = nova.custom_jvp(log1pexp)
    custom.defjvps(lambda t, out, x: t * (1.0 / (1.0 + jnp.exp(-x))))
    x = np.array([-100.0, 0.0, 50.0, 100.0], f32)
    plain = np.asarray(nova.grad(lambda x: jnp.sum(log1pexp(x)))(x))
    assert not np.isclose(plain[-1], 1.0)
    for g in (nova.grad(lambda x: jnp.sum(custom(x))),
              nova.jit(nova.grad(lambda x: jnp.sum(custom(x))))):
        np.testing.assert_allclose(np.asarray(g(x)), [0.0, 0.5, 1.0, 1.0], atol=1e-7)


def test_pytrees_several_outputs_nondiff_and_integer_arguments():
    @nova.custom_jvp
    def f(n, p, idx):
        return {"a": p["w"] ** n, "b": jnp.sum(p["v"])}, idx

    f = nova.custom_jvp(f.fun, nondiff_argnums=(0,))

    @f.defjvp
    def f_jvp(n, primals, tangents):
        p, idx = primals
        tp, tidx = tangents
        assert np.asarray(tidx).dtype == np.int32  # an integer argument's tangent: zeros
        out = f(n, p, idx)
        return out, ({"a": n * p["w"] ** (n - 1) * tp["w"], "b": None}, None)

    p = {"w": np.array([1.0, 2.0, 3.0], f32), "v": np.ones(2, f32)}
    idx = np.array([1, 2], np.int32)
    g = nova.grad(lambda p: jnp.sum(f(3, p, idx)[0]["a"]) + f(3, p, idx)[0]["b"])(p)
    np.testing.assert_allclose(np.asarray(g["w"]), 3 * p["w"] ** 2)
    np.testing.assert_array_equal(np.asarray(g["v"]), 0.0)  # its rule says None: zero
    out, tan = nova.jvp(lambda p: f(3, p, idx)[0], (p,), ({"w": np.ones(3, f32),
                                                           "v": np.ones(2, f32)},))
    np.testing.assert_allclose(np.asarray(tan["a"]), 3 * p["w"] ** 2)
    assert float(np.asarray(tan["b"])) == 0.0


def test_custom_jvp_inside_custom_vjp_and_keywords():
    """Keyword arguments bind by the signature; a custom_jvp call inside a custom_vjp's fwd is
    not differentiated (bwd gives the derivative)."""
    @nova.custom_jvp
    def scale(x, k=3.0):
        return x * k

    scale.defjvp(lambda primals, tangents: (scale(*primals), tangents[0] * primals[1]))
    x = np.arange(3, dtype=f32)
    np.testing.assert_allclose(np.asarray(nova.grad(lambda x: jnp.sum(scale(x, k=2.0)))(x)), 2.0)
    np.testing.assert_allclose(np.asarray(nova.grad(lambda x: jnp.sum(scale(x)))(x)), 3.0)

    @nova.custom_vjp
    def g(x):
        return scale(x)

    g.defvjp(lambda x: (scale(x), None), lambda res, ct: (ct * 10.0,))
    np.testing.assert_allclose(np.asarray(nova.grad(lambda x: jnp.sum(g(x)))(x)), 10.0)


def test_errors_are_named():
    @nova.custom_jvp
    def f(x):
        return x * 2.0

    x = np.ones(3, f32)
    with pytest.raises(AttributeError, match="no JVP defined.*f"):
        f(x)
    with pytest.raises(TypeError, match="defjvp takes a function"):
        f.defjvp(3)
    f.defjvp(lambda primals, tangents: tangents[0])
    with pytest.raises(TypeError, match="must return a pair"):
        nova.grad(lambda x: jnp.sum(f(x)))(x)
    f.defjvp(lambda primals, tangents: (f(*primals), (tangents[0], tangents[0])))
    with pytest.raises(TypeError, match="tangent_out has the structure"):
        nova.jvp(f, (x,), (x,))
    f.defjvp(lambda primals, tangents: (f(*primals), jnp.ones(4)))
    with pytest.raises(ValueError, match=r"shape \(4,\), but the output has shape \(3,\)"):
        nova.grad(lambda x: jnp.sum(f(x)))(x)

    @nova.custom_jvp
    def h(x, how):
        return x

    h.defjvp(lambda primals, tangents: (primals[0], tangents[0]))
    with pytest.raises(TypeError, match="argument 'how' holds a str.*nondiff_argnums=\\(1,\\)"):
        nova.grad(lambda x: jnp.sum(h(x, "fast")))(x)
    h2 = nova.custom_jvp(h.fun, nondiff_argnums=(1,))
    h2.defjvp(lambda how, primals, tangents: (primals[0], tangents[0]))
    with pytest.raises(TypeError, match="argument 1 is in nondiff_argnums but holds a traced"):
        nova.grad(lambda x: jnp.sum(h2(x, x)))(x)
    c = nova.custom_jvp(lambda x, y: x, nondiff_argnums=(5,))
    c.defjvp(lambda *a: a)
    with pytest.raises(ValueError, match="names argument 5, but 2 were given"):
        c(x, x)


def test_a_closed_over_differentiated_value_is_refused():
    """f closing over z that is being differentiated would lose z's derivative (the rule gives
    derivatives for the arguments only): reverse and forward mode raise."""
    def outer(z):
        @nova.custom_jvp
        def f(x):
            return x * z

        f.defjvp(lambda primals, tangents: (f(*primals), tangents[0] * z))
        return jnp.sum(f(np.ones(3, f32)))

    z = np.full(3, 2.0, f32)
    with pytest.raises(TypeError, match="custom_jvp .*closes over a value that is being"):
        nova.grad(outer)(z)
    with pytest.raises(TypeError, match="custom_jvp .*closes over a value that is being"):
        nova.jvp(outer, (z,), (np.ones(3, f32),))


# --- found by review (each failed before its fix) --------------------------------------------


def test_scalar_and_reduced_tangents_broadcast_to_the_output():
    @nova.custom_jvp
    def f(x):
        return x * 2.0

    f.defjvp(lambda p, t: (f(*p), 0.0))
    x = np.ones(3, f32)
    np.testing.assert_array_equal(np.asarray(nova.grad(lambda x: jnp.sum(f(x)))(x)), 0.0)
    f.defjvp(lambda p, t: [f(*p), jnp.sum(t[0])])  # a list pair, as JAX accepts
    np.testing.assert_array_equal(np.asarray(nova.jvp(f, (x,), (x,))[1]), 3.0)
    np.testing.assert_array_equal(np.asarray(nova.grad(lambda x: jnp.sum(f(x)))(x)), 3.0)


def test_a_jit_of_the_function_inside_its_rule_keeps_the_rule():
    """The rule computes its primal with nova.jit(f): that jit's cached Program must still
    carry f's rule (a guard set while the rule ran once made it cache f without it)."""
    x = np.array([0.5, 1.0], f32)

    @nova.custom_jvp
    def f(x):
        return jnp.sin(x)

    jf = nova.jit(f)
    f.defjvp(lambda p, t: (jf(*p), 10.0 * t[0]))
    np.testing.assert_allclose(np.asarray(nova.jvp(f, (x,), (np.ones(2, f32),))[1]), 10.0)
    np.testing.assert_allclose(np.asarray(nova.grad(lambda x: jnp.sum(jf(x)))(x)), 10.0)
    np.testing.assert_allclose(np.asarray(nova.jvp(jf, (x,), (np.ones(2, f32),))[1]), 10.0)


def test_second_order_through_ans_equals_f_of_x():
    """JAX's idiom `ans = f(x)` inside the rule: higher orders meet the rule again (a
    quantized sigmoid whose derivative is sigmoid's, through its output)."""
    def make(m, custom):
        @custom
        def qsig(x):
            return m.round(16.0 / (1.0 + m.exp(-x))) / 16.0

        @qsig.defjvp
        def _(p, t):
            ans = qsig(p[0])
            return ans, ans * (1.0 - ans) * t[0]

        return qsig

    x = np.array([0.3, 1.7, -2.2], f32)

    def d2(q, m, grad):
        return grad(lambda x: m.sum(grad(lambda z: m.sum(q(z)))(x)))(x)

    got = d2(make(jnp, nova.custom_jvp), jnp, nova.grad)
    want = d2(make(jjnp, jax.custom_jvp), jjnp, jax.grad)
    assert_close(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    assert np.abs(np.asarray(want)).max() > 0.01  # (not all zero, as the bare function's)


def test_a_closed_over_value_returned_unchanged_is_refused():
    def outer(z):
        @nova.custom_jvp
        def f(x):
            return x * 2.0, z

        f.defjvp(lambda p, t: (f(*p), (2.0 * t[0], jnp.zeros_like(z))))
        return jnp.sum(f(np.ones(3, f32))[1])

    with pytest.raises(TypeError, match="closes over a value that is being differentiated"):
        nova.grad(outer)(np.full(3, 2.0, f32))


def test_messages_name_custom_jvp():
    @nova.custom_jvp
    def k(x, *, s=1.0):
        return x * s

    k.defjvp(lambda p, t: (k(*p), t[0]))
    with pytest.raises(TypeError, match=r"^custom_jvp .*k: keyword-only arguments"):
        k(np.ones(2, f32), s=2.0)


def test_custom_vjp_whose_fwd_calls_a_jit_of_itself():
    """A jit of g traced inside g's own fwd runs g bare (recording g's marker there would run
    fwd again, without end) and is not kept: later, grad(jit(g)) meets g's rule."""
    x = np.array([0.5, 1.0], f32)

    @nova.custom_vjp
    def g(x):
        return jnp.sin(x)

    jg = nova.jit(g)
    g.defvjp(lambda x: (jg(x), None), lambda r, ct: (10.0 * ct,))
    np.testing.assert_allclose(np.asarray(nova.grad(lambda x: jnp.sum(g(x)))(x)), 10.0)
    np.testing.assert_allclose(np.asarray(nova.grad(lambda x: jnp.sum(jg(x)))(x)), 10.0)
    np.testing.assert_allclose(np.asarray(jg(x)), np.sin(x), rtol=1e-6)
