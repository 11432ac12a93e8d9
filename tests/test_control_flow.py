"""lax.scan, fori_loop, while_loop, cond, switch and map against NumPy loops: eager and under
jit, their derivatives against central differences, vmap against a loop over examples,
closures over traced values, the Program's text round trip, and bad input."""

import subprocess
import sys
import textwrap

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova import lax
from nova.core.interpreter import run_program
from nova.core.ir import parse_program

RNG = np.random.default_rng(0)
W = RNG.standard_normal((4, 4)) * 0.5
XS = RNG.standard_normal((6, 4))
H0 = RNG.standard_normal(4)


def _rnn_step(h, x, w=W):
    h = jnp.tanh(w @ h + x)
    return h, {"s": jnp.sin(h).sum(), "h": h}


def _rnn_np(h, xs, w=W, reverse=False):
    ys_s, ys_h = [None] * len(xs), [None] * len(xs)
    order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    for i in order:
        h = np.tanh(w @ h + xs[i])
        ys_s[i], ys_h[i] = np.sin(h).sum(), h
    return h, {"s": np.array(ys_s), "h": np.array(ys_h)}


def _fd_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        g[idx] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


def _close(a, b, tol=1e-12):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# --- scan ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("jit", [False, True])
def test_scan_matches_a_python_loop(reverse, jit):
    def run(h, xs):
        return lax.scan(_rnn_step, h, xs, reverse=reverse)

    h, ys = (nova.jit(run) if jit else run)(H0, XS)
    h_ref, ys_ref = _rnn_np(H0, XS, reverse=reverse)
    _close(h, h_ref)
    assert set(ys) == {"s", "h"} and ys["h"].shape == (6, 4) and ys["s"].shape == (6,)
    _close(ys["s"], ys_ref["s"])
    _close(ys["h"], ys_ref["h"])


def test_scan_pytree_carry_no_xs_and_none_y():
    def step(c, _):
        return {"n": c["n"] + 1, "v": c["v"] * 2.0}, None

    c, ys = nova.jit(lambda c: lax.scan(step, c, None, length=5))({"n": 0, "v": np.ones(2)})
    assert int(c["n"]) == 5 and ys is None
    _close(c["v"], np.full(2, 32.0))


def test_python_scalar_carries_take_the_bodys_dtype():
    # as JAX's weakly typed loop inputs: 0.0 would be float32, the body makes float64
    c, ys = lax.scan(lambda c, x: (c + x.sum(), c), 0.0, XS)
    assert c.dtype == np.float64 and ys.dtype == np.float64
    _close(c, XS.sum())
    v = lax.fori_loop(0, 3, lambda i, v: v + jnp.asarray(XS)[i].sum(), 0.0)
    assert v.dtype == np.float64
    _close(v, XS[:3].sum())
    w = lax.while_loop(lambda v: v < 10.0, lambda v: v + np.float64(3.0), 0.0)
    assert w.dtype == np.float64 and float(w) == 12.0


def test_scan_of_length_zero_returns_init():
    c, ys = lax.scan(lambda c, x: (c + x, c * x), np.ones(3), np.zeros((0, 3)))
    _close(c, np.ones(3))
    assert ys.shape == (0, 3)


@pytest.mark.parametrize("jit", [False, True])
def test_scan_gradient_wrt_init_xs_and_closed_over_weights(jit):
    def loss(w, h, xs):
        h, ys = lax.scan(lambda h, x: _rnn_step(h, x, w), h, xs)
        return (ys["s"] * jnp.arange(6.0)).sum() + (h ** 2).sum()

    def loss_np(w, h, xs):
        h, ys = _rnn_np(h, xs, w)
        return (ys["s"] * np.arange(6.0)).sum() + (h ** 2).sum()

    g = nova.grad(loss, argnums=(0, 1, 2))
    gw, gh, gx = (nova.jit(g) if jit else g)(W, H0, XS)
    _close(gw, _fd_grad(lambda w: loss_np(w, H0, XS), W), 1e-7)
    _close(gh, _fd_grad(lambda h: loss_np(W, h, XS), H0), 1e-7)
    _close(gx, _fd_grad(lambda x: loss_np(W, H0, x), XS), 1e-7)


def test_scan_forward_mode_and_second_order():
    def f(h):
        return lax.scan(lambda h, x: _rnn_step(h, x), h, XS)[0]

    J = np.asarray(nova.jacfwd(f)(H0))
    Jr = np.asarray(nova.jacrev(f)(H0))
    ref = np.stack([_fd_grad(lambda h, i=i: _rnn_np(h, XS)[0][i], H0) for i in range(4)])
    _close(J, ref, 1e-7)
    _close(Jr, J, 1e-12)
    H = np.asarray(nova.hessian(lambda h: f(h).sum())(H0))
    _close(H, H.T, 1e-10)
    ref_h = np.stack([_fd_grad(lambda h, i=i: float(np.asarray(
        nova.grad(lambda q: f(q).sum())(h))[i]), H0) for i in range(4)])
    _close(H, ref_h, 1e-6)


def test_nested_scans_and_their_gradient():
    def inner(c, x):
        return c * 0.5 + jnp.sin(x), None

    def outer(c, row):
        c2, _ = lax.scan(inner, c, row)
        return c2, c2.sum()

    xs = RNG.standard_normal((3, 5, 2))

    def f(c):
        return lax.scan(outer, c, xs)[1].sum()

    def f_np(c):
        total = 0.0
        for row in xs:
            for x in row:
                c = c * 0.5 + np.sin(x)
            total += c.sum()
        return total

    c0 = np.array([0.3, -0.2])
    _close(nova.jit(f)(c0), f_np(c0))
    _close(nova.jit(nova.grad(f))(c0), _fd_grad(f_np, c0), 1e-7)


def test_map_is_a_scan_without_carry():
    xs = RNG.standard_normal((5, 3))
    want = np.exp(xs) * xs.sum(1, keepdims=True)
    _close(lax.map(lambda x: jnp.exp(x) * x.sum(), xs), want)
    for bs in (1, 2, 5, 8):  # blocks of bs vmapped, the remainder in one last block
        got = nova.jit(lambda xs, bs=bs: lax.map(lambda x: {"y": jnp.exp(x) * x.sum()}, xs,
                                                  batch_size=bs))(xs)
        _close(got["y"], want)
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        lax.map(jnp.sin, xs, batch_size=0)


# --- fori_loop and while_loop --------------------------------------------------------------------


def test_fori_loop_static_bounds_is_a_differentiable_scan():
    def f(x):
        return lax.fori_loop(0, 4, lambda i, v: v * x + i, x)

    def f_np(x):
        v = x
        for i in range(4):
            v = v * x + i
        return v

    prog = nova.make_program(f)(1.5)
    assert prog.count("scan") == 1 and prog.count("while") == 0
    _close(f(1.5), f_np(1.5))
    _close(nova.grad(f)(1.5), _fd_grad(lambda a: f_np(a), np.array(1.5)), 1e-7)
    _close(lax.fori_loop(5, 2, lambda i, v: v + 1.0, 0.0), 0.0)  # empty range


def test_fori_loop_traced_bound_is_a_while_loop():
    f = nova.jit(lambda n, x: lax.fori_loop(0, n, lambda i, v: v + i * x, 0.0))
    for n in (0, 1, 7):
        _close(f(n, 2.0), 2.0 * sum(range(n)))
    assert nova.make_program(lambda n: lax.fori_loop(0, n, lambda i, v: v + 1, 0))(3).count("while") == 1


def test_while_loop_runs_a_data_dependent_number_of_steps():
    def newton_sqrt(a):
        def body(c):
            x, k = c
            return 0.5 * (x + a / x), k + 1

        return lax.while_loop(lambda c: jnp.abs(c[0] * c[0] - a) > 1e-12, body, (a, 0))

    for a in (2.0, 9.0, 1e4):
        x, k = nova.jit(newton_sqrt)(np.float64(a))
        _close(x, np.sqrt(a))
        assert 0 < int(k) < 30
    x, _ = newton_sqrt(np.float64(2.0))  # eager
    _close(x, np.sqrt(2.0))


def test_while_loop_forward_mode_and_reverse_mode_error():
    def f(x):
        return lax.while_loop(lambda c: c[1] < 3, lambda c: (jnp.sin(c[0]) * 2.0, c[1] + 1),
                              (x, 0))[0]

    def f_np(x):
        for _ in range(3):
            x = np.sin(x) * 2.0
        return x

    _, t = nova.jvp(f, (0.7,), (1.0,))
    _close(t, _fd_grad(f_np, np.array(0.7)), 1e-7)
    _close(nova.jacfwd(f)(0.7), _fd_grad(f_np, np.array(0.7)), 1e-7)
    with pytest.raises(TypeError, match="Reverse-mode differentiation does not work for "
                                        "lax.while_loop.*fori_loop with Python int bounds"):
        nova.grad(f)(0.7)


# --- cond and switch -----------------------------------------------------------------------------


@pytest.mark.parametrize("jit", [False, True])
def test_cond_and_switch_pick_their_branch(jit):
    def f(p, x):
        return lax.cond(p, lambda x: {"a": x * 2}, lambda x: {"a": x - 1}, x)

    g = nova.jit(f) if jit else f
    _close(g(True, 3.0)["a"], 6.0)
    _close(g(False, 3.0)["a"], 2.0)
    _close(g(5, 3.0)["a"], 6.0)  # a nonzero number is true
    branches = [lambda x: x + 10, lambda x: x * 10, lambda x: -x]
    s = nova.jit(lambda i, x: lax.switch(i, branches, x)) if jit else \
        (lambda i, x: lax.switch(i, branches, x))
    for i, want in [(0, 12.0), (1, 20.0), (2, -2.0), (9, -2.0), (-4, 12.0)]:  # clamped
        _close(s(i, 2.0), want)


def test_cond_gradient_flows_through_the_taken_branch_and_closures():
    def f(w, x, p):
        return lax.cond(p, lambda x: jnp.sin(x) * w, lambda x: x * x, x)

    w, x = np.float64(3.0), np.float64(0.5)
    gw, gx = nova.grad(f, argnums=(0, 1))(w, x, True)
    _close(gw, np.sin(0.5))
    _close(gx, 3.0 * np.cos(0.5))
    gw, gx = nova.jit(nova.grad(f, argnums=(0, 1)))(w, x, False)
    _close(gw, 0.0)
    _close(gx, 1.0)
    _, t = nova.jvp(lambda x: f(w, x, True), (x,), (np.float64(1.0),))
    _close(t, 3.0 * np.cos(0.5))


def test_python_if_raises_under_jit_but_cond_works():
    def bad(x):
        return x * 2 if x.sum() > 0 else x

    with pytest.raises(nova.TracerBoolConversionError):
        nova.jit(bad)(np.ones(2))
    good = nova.jit(lambda x: lax.cond(x.sum() > 0, lambda x: x * 2, lambda x: x, x))
    _close(good(np.ones(2)), np.full(2, 2.0))
    _close(good(-np.ones(2)), -np.ones(2))


# --- vmap ----------------------------------------------------------------------------------------


def test_vmap_of_scan_per_example_sequences():
    hs, xss = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 6, 4))
    h, ys = nova.vmap(lambda h, xs: lax.scan(_rnn_step, h, xs))(hs, xss)
    for b in range(3):
        h_ref, ys_ref = _rnn_np(hs[b], xss[b])
        _close(h[b], h_ref)
        _close(ys["h"][b], ys_ref["h"])


def test_vmap_of_while_with_per_example_trip_counts():
    def collatz_steps(n):
        def body(c):
            m, k = c
            return jnp.where(m % 2 == 0, m // 2, 3 * m + 1), k + 1

        return lax.while_loop(lambda c: c[0] != 1, body, (n, 0))[1]

    def ref(n):
        k = 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            k += 1
        return k

    ns = np.array([1, 6, 7, 27], np.int32)
    got = nova.jit(nova.vmap(collatz_steps))(ns)
    np.testing.assert_array_equal(np.asarray(got), [ref(int(n)) for n in ns])


def test_vmap_of_cond_with_a_mapped_predicate():
    xs = np.array([-2.0, 3.0, -0.5, 4.0])
    got = nova.vmap(lambda x: lax.cond(x > 0, lambda x: jnp.sqrt(x), lambda x: x * x, x))(xs)
    _close(got, np.where(xs > 0, np.sqrt(np.abs(xs)), xs * xs))
    g = nova.vmap(nova.grad(lambda x: lax.cond(x > 0, lambda x: jnp.sqrt(x), lambda x: x * x, x)))(xs)
    _close(g, np.where(xs > 0, 0.5 / np.sqrt(np.abs(xs)), 2 * xs))


# --- closures, the IR, the caches ----------------------------------------------------------------


def test_closure_over_jit_values_and_large_constants():
    big = RNG.standard_normal((64, 64)) * 0.1  # past the inline-constant limit: a resource

    @nova.jit
    def f(scale, xs):
        return lax.scan(lambda c, x: (jnp.tanh(big @ c * scale + x), None), np.zeros(64), xs)[0]

    xs = RNG.standard_normal((3, 64))
    c = np.zeros(64)
    for x in xs:
        c = np.tanh(big @ c * 0.5 + x)
    _close(f(0.5, xs), c)
    prog = nova.make_program(f)(np.float64(0.5), xs)
    text = prog.as_text()
    back = parse_program(text)
    assert back.structural_hash() == prog.structural_hash()
    _close(run_program(back, [np.asarray(0.5), xs])[0], c)


def test_reference_and_compiled_backends_agree():
    f = lambda xs: lax.scan(lambda c, x: (c * 0.9 + x, c.sum()), np.zeros(3), xs)
    want = f(XS[:, :3])
    nova.config.update("backend", "interpreter")
    try:
        got = f(XS[:, :3])
    finally:
        nova.config.update("backend", "compiled")
    _close(got[0], want[0])
    _close(got[1], want[1])


def test_executable_cache_reloads_a_program_with_a_loop(tmp_path):
    code = textwrap.dedent("""
        import numpy as np, nova, nova.numpy as jnp
        from nova import lax
        f = nova.jit(lambda xs: lax.scan(lambda c, x: (jnp.sin(c) + x, c * 2), np.zeros(2), xs))
        c, ys = f(np.arange(8.0).reshape(4, 2))
        print(repr(np.asarray(c).tolist()), repr(np.asarray(ys).sum()))
    """)
    env = {"NOVA_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, timeout=300, check=False) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert runs[0].stdout == runs[1].stdout and runs[0].stdout.strip()


# --- errors --------------------------------------------------------------------------------------


def test_errors_name_the_problem():
    with pytest.raises(TypeError, match=r"scan: f's carry output must have the input's shapes "
                                        r"and dtypes: leaf 0: tensor<3xf64> where the input is "
                                        r"tensor<3xf32>"):
        lax.scan(lambda c, x: (c + x, None), np.zeros(3, np.float32), np.ones((2, 3)))
    with pytest.raises(TypeError, match="f must return a pair"):
        lax.scan(lambda c, x: c + x, np.zeros(3), np.ones((2, 3)))
    with pytest.raises(ValueError, match="different leading axes"):
        lax.scan(lambda c, x: (c, None), 0.0, (np.ones(2), np.ones(3)))
    with pytest.raises(ValueError, match="length must be given"):
        lax.scan(lambda c, x: (c, None), 0.0, None)
    with pytest.raises(ValueError, match="length 4 differs"):
        lax.scan(lambda c, x: (c, None), 0.0, np.ones(3), length=4)
    with pytest.raises(TypeError, match="every branch must return the same"):
        lax.cond(True, lambda x: x, lambda x: x.astype(np.float32), np.ones(2))
    with pytest.raises(TypeError, match="pred must be a scalar"):
        lax.cond(np.array([True, False]), lambda x: x, lambda x: x, 1.0)
    with pytest.raises(TypeError, match="cond_fun must return a bool scalar"):
        lax.while_loop(lambda c: c, lambda c: c, 1.0)
    with pytest.raises(TypeError, match="body_fun's output must have the structure"):
        lax.while_loop(lambda c: c[0] < 1, lambda c: c[0], (0, 1.0))
    with pytest.raises(TypeError, match="index must be an integer scalar"):
        lax.switch(1.5, [lambda: 1.0, lambda: 2.0])


def test_gradient_program_runs_the_forward_loop_once_and_only_needed_outputs():
    # merge_scans: the primal scan merges into reverse mode's residual-stacking one; dce drops
    # the backward scan's cotangent of xs (not asked for) and the body work feeding only it.
    def loss(w, xs):
        h, ys = lax.scan(lambda h, x: (jnp.tanh(h @ w + x), h.sum()), np.zeros((2, 3)), xs)
        return ys.sum() + (h ** 2).sum()

    w, xs = np.eye(3) * 0.5, RNG.standard_normal((4, 2, 3))
    f = nova.jit(nova.value_and_grad(loss))
    traced = nova.make_program(nova.value_and_grad(loss))(w, xs)
    assert traced.count("scan") == 3  # primal, residual-stacking forward, backward
    scans = [e for e in f.lower(w, xs).program.eqns if e.prim.name == "scan"]
    assert len(scans) == 2
    bwd = scans[1]
    assert bwd.params["reverse"] and len(bwd.outputs) == bwd.params["n_carry"]  # no d xs
    value, g = f(w, xs)

    def loss_np(w):
        h, total = np.zeros((2, 3)), 0.0
        for x in xs:
            total += h.sum()
            h = np.tanh(h @ w + x)
        return total + (h ** 2).sum()

    _close(value, loss_np(w))
    _close(g, _fd_grad(loss_np, w), 1e-7)


def test_dce_prunes_unused_while_carries_and_cond_results():
    # Carry b feeds only the unused result b and c's matmul only c: both go; i (the predicate's)
    # and a stay. The cond's unused second result goes, and with it the operand only it read.
    def f(n, v):
        i, a, b, c = lax.while_loop(
            lambda c: c[0] < n,
            lambda c: (c[0] + 1, c[1] * 2.0, jnp.sin(c[2]) + c[1], c[3] @ c[3]),
            (jnp.asarray(0, jnp.int32), v, v, jnp.eye(4)))
        return i, a

    def g(i, x, y):
        a, _ = lax.cond(i > 0, lambda x, y: (x * 2, y @ y), lambda x, y: (x + 1, y), x, y)
        return a

    n, v = np.int32(3), np.arange(3.0)
    (w,) = [e for e in nova.jit(f).lower(n, v).program.eqns if e.prim.name == "while"]
    assert len(w.outputs) == 2 and len(w.inputs) == 3  # n, and the carries i and a
    assert "dot_general" not in w.params["body"].text
    i, a = nova.jit(f)(n, v)
    assert int(i) == 3
    _close(a, v * 8)
    x, y = np.arange(3.0), np.eye(5)
    (c,) = [e for e in nova.jit(g).lower(1, x, y).program.eqns if e.prim.name == "cond"]
    assert len(c.outputs) == 1 and len(c.inputs) == 2  # the index and x
    _close(nova.jit(g)(1, x, y), x * 2)
    _close(nova.jit(g)(0, x, y), x + 1)


def _clip_grad():
    @nova.custom_vjp
    def clip_grad(x):
        return x

    clip_grad.defvjp(lambda x: (x, None), lambda _, ct: (jnp.clip(ct, -0.1, 0.1),))
    return clip_grad


@pytest.mark.parametrize("jit", [False, True])
def test_gradients_through_loops_meet_custom_rules_inside(jit):
    clip_grad = _clip_grad()

    @nova.custom_jvp
    def soft(x):
        return jnp.sin(x)

    soft.defjvp(lambda p, t: (jnp.sin(p[0]), 10.0 * t[0]))  # a deliberately different rule

    def f(x):
        return lax.scan(lambda c, _: (clip_grad(c) * 2.0, None), x, None, length=3)[0]

    def g(x):
        return lax.cond(x > 0, lambda v: soft(v) * 3.0, lambda v: v, x)

    def h(x):
        return lax.fori_loop(0, 2, lambda i, c: soft(c), x)

    t = nova.jit if jit else (lambda fn: fn)
    _close(f(np.float64(1.5)), 12.0)
    # each step's rule clips its incoming cotangent (2 x the next step's) to 0.1
    _close(t(nova.grad(f))(np.float64(1.5)), 0.1)
    _close(t(nova.grad(g))(np.float64(0.5)), 30.0)
    _close(t(nova.grad(g))(np.float64(-0.5)), 1.0)
    _close(t(nova.grad(h))(np.float64(0.3)), 100.0)
    _, tangent = nova.jvp(h, (np.float64(0.3),), (np.float64(1.0),))
    _close(tangent, 100.0)
    # under vmap too (the rule's batched form)
    _close(t(nova.vmap(nova.grad(f)))(np.array([1.5, -2.0])), [0.1, 0.1])
    # a gradient taken inside the body meets the rule as usual
    gi = lax.scan(lambda c, _: (c + nova.grad(lambda y: clip_grad(y) * 5.0)(c), None),
                  np.float64(0.0), None, length=2)[0]
    _close(gi, 0.2)


def test_second_derivatives_through_a_loop_with_a_custom_rule_are_refused():
    clip_grad = _clip_grad()

    def f(x):
        return lax.scan(lambda c, _: (clip_grad(c) ** 2, None), x, None, length=2)[0]

    nova.grad(f)(np.float64(0.5))  # first order: the rule
    with pytest.raises(NotImplementedError, match="differentiating twice through lax.scan"):
        nova.grad(nova.grad(f))(np.float64(0.5))


@pytest.mark.parametrize("make", ["cond", "while", "scan0"])
def test_a_passed_through_operand_is_not_overwritten_under_jit(make):
    # (review) a Region handing back its input: the outer executable reused that operand's
    # buffer for a later value, and the loop reading the result saw a * 7
    a, b = np.arange(4.0), np.ones(4)

    def passthrough(t):
        if make == "cond":
            return lax.cond(b[0] > 100, lambda q: q * 2.0, lambda q: q, t)
        if make == "while":
            return lax.while_loop(lambda q: q.sum() < -1.0, lambda q: q * 2.0, t)
        return lax.scan(lambda c, x: (c * x, None), t, np.zeros((0, 4)))[0]

    def g(a, b):
        v = passthrough(a * 3.0 + b)
        return lax.scan(lambda c, x: (c + x, None), v, (a * 7.0)[None])[0]

    _close(nova.jit(g)(a, b), a * 10.0 + 1.0)
    _close(g(a, b), a * 10.0 + 1.0)


def test_second_order_through_nested_scans_and_an_identity_cond():
    w = np.float64(0.3)

    def h(w):  # 2 w^2
        inner = lambda c, _: (c * w, None)
        return lax.scan(lambda c, _: (lax.cond(True, lambda q: q, lambda q: q,
                                                lax.scan(inner, c, None, length=1)[0]) * 2.0,
                                      None), w, None, length=1)[0]

    _close(nova.hessian(h)(w), 4.0)
    _close(nova.jit(nova.hessian(h))(w), 4.0)
    _close(nova.vmap(lambda t: nova.jvp(nova.grad(h), (w,), (t,))[1])(np.ones(2)), [4.0, 4.0])


def test_bad_functions_and_indices():
    xs = np.ones((2, 3))
    with pytest.raises(TypeError, match="switch: the index must be an integer, got the bool"):
        lax.switch(True, [lambda: 1.0, lambda: 2.0])
    with pytest.raises(TypeError, match="branches must be a sequence of functions"):
        lax.switch(0, lambda a: a, 1.0)
    with pytest.raises(TypeError, match=r"lax.while_loop: cond_fun must be a function, got NoneType"):
        lax.while_loop(None, lambda c: c, 3)
    with pytest.raises(TypeError, match=r"lax.scan: f must be a function, got int"):
        lax.scan(5, 0.0, xs)
    with pytest.raises(TypeError, match=r"lax.fori_loop: body_fun must be a function"):
        lax.fori_loop(0, 3, None, 1.0)
    with pytest.raises(TypeError, match=r"lax.map: f must be a function"):
        lax.map(None, xs)
    with pytest.raises(TypeError, match=r"lax.cond: false_fun must be a function"):
        lax.cond(True, lambda: 1.0, 2.0)
    # a body returning [carry, y] (any pair) is accepted, as in JAX
    c, ys = lax.scan(lambda c, x: [c + x.sum(), c], np.float64(0.0), xs)
    _close(c, 6.0)
    _close(ys, [0.0, 3.0])
