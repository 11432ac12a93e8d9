"""nova.custom_vjp: a function's own reverse-mode rule, met by every transform that reaches it.

A rule that differs on purpose from the true derivative (100 x g) shows which one ran; the
numerically stable log1pexp rule of JAX's custom_vjp documentation shows why users want one.
"""

import functools

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova.nn import functional as F
from tests.helpers import assert_close

X = np.array([0.3, -1.2, 2.0], np.float32)


def _hundred():
    """g(x) = 2x, with the deliberately wrong rule d/dx = 100 (tells whose rule ran)."""
    calls = {"fun": 0, "fwd": 0, "bwd": 0}

    @nova.custom_vjp
    def g(x):
        calls["fun"] += 1
        return x * 2.0

    def g_fwd(x):
        calls["fwd"] += 1
        return g(x), None

    def g_bwd(res, ct):
        calls["bwd"] += 1
        assert res is None
        return (ct * 100.0,)

    g.defvjp(g_fwd, g_bwd)
    return g, calls


def test_the_rule_is_used_by_grad_vjp_jit_and_jit_inside_grad():
    g, calls = _hundred()

    def loss(x):
        return jnp.sum(g(x))

    want = np.full(3, 100.0, np.float32)
    assert_close(nova.grad(loss)(X), want)
    assert_close(nova.jit(nova.grad(loss))(X), want)
    assert_close(nova.grad(lambda x: jnp.sum(nova.jit(g)(x)))(X), want)
    assert_close(nova.jit(nova.grad(lambda x: jnp.sum(nova.jit(g)(x))))(X), want)
    out, f_vjp = nova.vjp(g, X)
    assert_close(out, 2 * X)
    assert_close(f_vjp(np.ones(3, np.float32))[0], want)
    assert calls["bwd"] >= 5


def test_outside_transforms_the_function_itself_runs():
    g, calls = _hundred()
    assert_close(g(X), 2 * X)
    assert calls == {"fun": 1, "fwd": 0, "bwd": 0}


def test_under_jit_without_a_derivative_no_marker_and_no_residual_work():
    @nova.custom_vjp
    def f(x):
        return jnp.sin(x)

    def f_fwd(x):
        return f(x), jnp.exp(jnp.cos(x))  # a residual only bwd reads

    f.defvjp(f_fwd, lambda r, ct: (ct * r,))
    program = nova.jit(f).lower(X).program
    names = {e.prim.name for e in program.eqns}
    assert "custom_vjp_call" not in names and "exp" not in names and "cos" not in names
    assert_close(nova.jit(f)(X), np.sin(X))
    traced = nova.make_program(f)(X)
    assert "custom_vjp_call" not in {e.prim.name for e in traced.eqns}


def _log1pexp():
    @nova.custom_vjp
    def log1pexp(x):
        return jnp.log1p(jnp.exp(x))

    def fwd(x):
        return log1pexp(x), x

    def bwd(x, g):
        return (g * (1.0 - 1.0 / (1.0 + jnp.exp(x))),)  # no inf / inf at large x

    log1pexp.defvjp(fwd, bwd)
    return log1pexp


def test_a_stable_rule_gives_the_gradient_where_autodiff_overflows():
    x = np.array([100.0, 0.0, -3.0], np.float32)
    naive = nova.grad(lambda x: jnp.sum(jnp.log1p(jnp.exp(x))))(x)
    assert not np.isclose(np.asarray(naive)[0], 1.0)  # inf / inf: NaN or 0, not 1
    f = _log1pexp()
    want = np.array([1.0, 0.5, 1 / (1 + np.exp(3.0))], np.float32)
    assert_close(nova.grad(lambda x: jnp.sum(f(x)))(x), want, rtol=1e-6)
    assert_close(nova.jit(nova.grad(lambda x: jnp.sum(f(x))))(x), want, rtol=1e-6)


def test_second_derivative_differentiates_the_bwd_rule():
    @nova.custom_vjp
    def s(x):
        return jnp.sin(x)

    s.defvjp(lambda x: (s(x), jnp.cos(x)), lambda c, g: (c * g,))
    d2 = nova.grad(lambda x: jnp.sum(nova.grad(lambda y: jnp.sum(s(y)))(x)))(X)
    assert_close(d2, -np.sin(X), rtol=1e-5)
    d2j = nova.jit(nova.grad(lambda x: jnp.sum(nova.grad(lambda y: jnp.sum(s(y)))(x))))(X)
    assert_close(d2j, -np.sin(X), rtol=1e-5)


def test_jvp_transposes_the_bwd_rule():
    g, _ = _hundred()
    out, tan = nova.jvp(g, (X,), (np.array([1.0, 2.0, 3.0], np.float32),))
    assert_close(out, 2 * X)
    assert_close(tan, np.array([100.0, 200.0, 300.0], np.float32))


def test_pytrees_several_outputs_an_unused_output_and_an_integer_argument():
    @nova.custom_vjp
    def f(p, k):
        return {"a": p["w"] * p["b"], "b": jnp.sum(p["w"]) + k.astype(np.float32)}

    def f_fwd(p, k):
        return f(p, k), (p["w"], p["b"])

    def f_bwd(res, g):
        w, b = res
        return ({"w": g["a"] * b + g["b"], "b": g["a"] * w}, None)

    f.defvjp(f_fwd, f_bwd)
    p = {"w": X, "b": np.array([2.0, 3.0, 4.0], np.float32)}
    k = np.array(5, np.int32)
    got = nova.grad(lambda p: jnp.sum(f(p, k)["a"]))(p)  # "b" unused: its cotangent is zero
    assert_close(got["w"], p["b"])
    assert_close(got["b"], X)
    got = nova.jit(nova.grad(lambda p: jnp.sum(f(p, k)["a"]) + 3.0 * f(p, k)["b"]))(p)
    assert_close(got["w"], p["b"] + 3.0)


def test_nondiff_argnums_and_keyword_arguments():
    @functools.partial(nova.custom_vjp, nondiff_argnums=(0,))
    def clip_gradient(bound, x, scale=1.0):
        return x * scale

    def fwd(bound, x, scale):
        return clip_gradient(bound, x, scale), scale

    def bwd(bound, scale, g):
        return (jnp.clip(g * scale, -bound, bound), None)

    clip_gradient.defvjp(fwd, bwd)
    got = nova.grad(lambda x: jnp.sum(clip_gradient(0.5, x=x, scale=3.0)))(X)
    assert_close(got, np.full(3, 0.5, np.float32))
    assert_close(clip_gradient(0.5, X), X)


def test_jacobian_matches_finite_differences_for_a_correct_rule():
    f = _log1pexp()
    x = np.array([0.7, -0.4, 1.9], np.float64)
    eps = 1e-6
    fd = np.array([(np.log1p(np.exp(x[i] + eps)) - np.log1p(np.exp(x[i] - eps))) / (2 * eps)
                   for i in range(3)])
    assert_close(nova.grad(lambda x: jnp.sum(f(x)))(x), fd, rtol=1e-8)


def test_errors_name_the_function_and_the_problem():
    @nova.custom_vjp
    def f(x):
        return x * 2.0

    with pytest.raises(AttributeError, match="no VJP defined.*f"):
        nova.grad(lambda x: jnp.sum(f(x)))(X)
    f.defvjp(lambda x: x * 2.0, lambda r, g: (g,))
    with pytest.raises(TypeError, match="fwd must return a pair"):
        nova.grad(lambda x: jnp.sum(f(x)))(X)
    f.defvjp(lambda x: (x * 2.0, None), lambda r, g: (g, g))
    with pytest.raises(TypeError, match=r"one cotangent per differentiated argument \(1\)"):
        nova.grad(lambda x: jnp.sum(f(x)))(X)
    f.defvjp(lambda x: (x * 2.0, None), lambda r, g: (jnp.sum(g),))
    with pytest.raises(ValueError, match=r"shape \(\), but the argument has shape \(3,\)"):
        nova.grad(lambda x: jnp.sum(f(x)))(X)
    with pytest.raises(TypeError, match="defvjp takes two functions"):
        f.defvjp(None, None)

    @nova.custom_vjp
    def h(x, how):
        return x

    h.defvjp(lambda x, how: (x, None), lambda r, g: (g, None))
    with pytest.raises(TypeError, match="argument 'how' holds a str.*nondiff_argnums=\\(1,\\)"):
        nova.grad(lambda x: jnp.sum(h(x, "fast")))(X)


class TestLinearCrossEntropy:
    """F.linear_cross_entropy, chunked through custom_vjp, against cross_entropy of the whole
    logits: loss and gradients, eager and jitted, with a bias and ignored positions."""

    def _data(self, n=37, c=16, v=50, seed=0):
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((n, c)).astype(np.float32)
        w = (0.3 * rng.standard_normal((v, c))).astype(np.float32)
        b = rng.standard_normal(v).astype(np.float32)
        y = rng.integers(0, v, n)
        y[[3, 11]] = -100
        return x, w, b, y

    @pytest.mark.parametrize("chunk", [None, 1, 8, 5, 36, 37, 1000])
    @pytest.mark.parametrize("reduction", ["mean", "sum"])
    def test_matches_the_whole_logits(self, chunk, reduction):
        x, w, b, y = self._data()

        def ref(x, w, b):
            return F.cross_entropy(x @ w.T + b, y, reduction=reduction)

        def lce(x, w, b):
            return F.linear_cross_entropy(x, w, y, b, reduction=reduction, chunk_size=chunk)

        v0, g0 = nova.value_and_grad(ref, argnums=(0, 1, 2))(x, w, b)
        for fn in (nova.value_and_grad(lce, argnums=(0, 1, 2)),
                   nova.jit(nova.value_and_grad(lce, argnums=(0, 1, 2)))):
            v1, g1 = fn(x, w, b)
            assert_close(v1, v0, rtol=1e-5)
            for a, e in zip(g1, g0, strict=True):
                assert_close(a, e, rtol=1e-4, atol=1e-6)

    def test_batched_x_no_bias_and_reduction_none(self):
        x, w, _, y = self._data(n=24)
        x3, y3 = x.reshape(2, 12, -1), y.reshape(2, 12)
        got = nova.grad(lambda x: F.linear_cross_entropy(x, w, y3, chunk_size=7))(x3)
        want = nova.grad(lambda x: F.cross_entropy(jnp.einsum("btc,vc->btv", x, w), y3))(x3)
        assert_close(got, want, rtol=1e-4, atol=1e-6)
        none = F.linear_cross_entropy(x3, w, y3, reduction="none")
        assert_close(none, F.cross_entropy(x3 @ w.T, y3, reduction="none"))

    def test_under_jit_without_grad_only_the_forward_remains(self):
        x, w, b, y = self._data()
        f = nova.jit(lambda x, w, b: F.linear_cross_entropy(x, w, y, b, chunk_size=8))
        program = f.lower(x, w, b).program
        assert program.count("dot_general") == 5  # one logits GEMM per chunk, nothing more
        assert_close(f(x, w, b), F.cross_entropy(x @ w.T + b, y), rtol=1e-5)

    def test_bad_inputs(self):
        x, w, b, y = self._data()
        with pytest.raises(ValueError, match=r"weight of shape \(50, 15\) does not match x"):
            F.linear_cross_entropy(x, w[:, :15], y)
        with pytest.raises(ValueError, match=r"labels of shape \(36,\) do not match x"):
            F.linear_cross_entropy(x, w, y[:36])
        with pytest.raises(ValueError, match=r"bias of shape \(49,\)"):
            F.linear_cross_entropy(x, w, y, b[:49])
        with pytest.raises(ValueError, match="chunk_size must be >= 1"):
            F.linear_cross_entropy(x, w, y, chunk_size=0)
        with pytest.raises(TypeError, match="chunk_size must be an int"):
            F.linear_cross_entropy(x, w, y, chunk_size=2.5)
        with pytest.raises(TypeError, match="labels must be integers"):
            F.linear_cross_entropy(x, w, y.astype(np.float32))
        with pytest.raises(ValueError, match="outside \\[0, 50\\)"):
            F.linear_cross_entropy(x, w, np.full(37, 50))
        with pytest.raises(ValueError, match="reduction must be"):
            F.linear_cross_entropy(x, w, y, reduction="avg")

    def test_default_chunk_rows(self):
        assert F._lce_chunk_rows(8192, 50304) == 1024
        assert F._lce_chunk_rows(512, 50304) == 512
        assert F._lce_chunk_rows(10, 1 << 30) == 1


def test_review_findings_rules_inside_a_fwd_defaults_closures_nondiff_tracers_none_leaves():
    """Found by review: (1) a custom rule used inside another function's fwd (through a jit it
    traces) was switched off, and the jit cache kept the wrong gradient; (2) defaults were
    bound only when a keyword was passed; (3) a value the fwd closes over got a zero gradient
    silently; (4) a traced array in nondiff_argnums escaped its trace; (5) None in a leaf's
    place of a cotangent was refused."""
    @nova.custom_vjp
    def clip(x):
        return x

    clip.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))
    jg = nova.jit(lambda x: jnp.sum(clip(x) * 10.0))

    @nova.custom_vjp
    def f(x):
        return jg(x)

    f.defvjp(lambda x: (jg(x), x), lambda x, g: (g * jnp.ones_like(x),))
    x = np.array([1.0, 2.0], np.float32)
    assert_close(nova.grad(f)(x), np.ones(2, np.float32))
    assert_close(nova.grad(jg)(x), np.ones(2, np.float32))  # clip's rule: 10 -> 1

    @nova.custom_vjp
    def kd(x, scale=2.0):
        return x * scale

    kd.defvjp(lambda x, scale=2.0: (x * scale, scale), lambda s, g: (g * s * 10, None))
    assert float(nova.grad(lambda x: kd(x))(1.0)) == 20.0
    assert float(nova.grad(lambda x: kd(x, scale=3.0))(1.0)) == 30.0

    def outer(y):
        @nova.custom_vjp
        def g(x):
            return x * y

        g.defvjp(lambda x: (x * y, None), lambda _, ct: (ct * y,))
        return g(jnp.array(3.0))

    with pytest.raises(TypeError, match="closes over a value that is being differentiated"):
        nova.grad(outer)(np.float32(2.0))
    assert float(nova.jit(outer)(np.float32(2.0))) == 6.0  # not differentiated: fine

    @functools.partial(nova.custom_vjp, nondiff_argnums=(1,))
    def an(x, s):
        return x * s

    an.defvjp(lambda x, s: (x * s, None), lambda s, r, g: (g * s,))
    assert float(nova.grad(an)(1.0, 3.0)) == 3.0
    with pytest.raises(TypeError, match="argument 1 is in nondiff_argnums but holds a traced"):
        nova.grad(nova.jit(lambda x, s: an(x, s)))(1.0, 3.0)

    @nova.custom_vjp
    def d(p):
        return p["a"] * 3.0 + p["b"]

    d.defvjp(lambda p: (d(p), None), lambda r, g: ({"a": g * 3.0, "b": None},))
    got = nova.grad(d)({"a": 1.0, "b": 2.0})
    assert float(got["a"]) == 3.0 and float(got["b"]) == 0.0


def test_linear_cross_entropy_many_chunks_and_bfloat16_sums():
    """Review: 400 one-row chunks overflowed codegen's recursion (a 400-add chain); at most 64
    chunks are made now and the parts are summed pairwise. bfloat16 inputs sum over chunks in
    float32: the loss stays within bfloat16's rounding of the float64 value."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((400, 4)).astype(np.float32)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    y = rng.integers(0, 8, 400)
    f = nova.jit(lambda x, w: F.linear_cross_entropy(x, w, y, chunk_size=1))
    assert_close(f(x, w), F.cross_entropy(x @ w.T, y), rtol=1e-5)
    from nova.core import dtypes

    xb, wb = x.astype(dtypes.bfloat16), w.astype(dtypes.bfloat16)
    got = F.linear_cross_entropy(xb, wb, y, chunk_size=7)
    assert got.dtype == dtypes.bfloat16
    logits = xb.astype(np.float64) @ wb.astype(np.float64).T
    lse = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
    want = np.mean(lse - logits[np.arange(400), y])
    assert abs(float(got) - want) <= 1e-2 * abs(want)
