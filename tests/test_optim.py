"""nova.optim against optax itself: the same random gradients, 20 steps, relative error <= 1e-6."""

import functools

import jax
import jax.numpy as xnp
import numpy as np
import optax
import pytest

import nova
import nova.numpy as jnp
import nova.optim as no
from nova.core.pytree import tree_leaves
from nova.optim.base import safe_increment

RTOL = 1e-6
STEPS = 20


def _params(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "w": rng.standard_normal((8, 5)).astype(np.float32),
        "b": rng.standard_normal(5).astype(np.float32),
        "s": np.float32(rng.standard_normal()),
    }


def _grads(params, seed=1):
    rng = np.random.default_rng(seed)
    return [{k: (3 * rng.standard_normal(np.shape(v))).astype(np.float32)
             for k, v in params.items()} for _ in range(STEPS)]


def _assert_trees_close(actual_leaves, expected_leaves, what):
    """Integer leaves equal; float leaves within RTOL in the pytree's max norm:
    max |a - e| / max |e| over all float leaves together (a leaf whose values cancel to near
    zero, e.g. a scalar momentum, is measured against the scale of the whole tree)."""
    assert len(actual_leaves) == len(expected_leaves), (what, len(actual_leaves),
                                                        len(expected_leaves))
    diff, scale = 0.0, 0.0
    for i, (a, e) in enumerate(zip(actual_leaves, expected_leaves, strict=True)):
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape and a.dtype == e.dtype, (what, i, a.shape, e.shape, a.dtype,
                                                           e.dtype)
        if e.dtype.kind in "iu":
            np.testing.assert_array_equal(a, e, err_msg=f"{what} leaf {i}")
            continue
        a, e = a.astype(np.float64), e.astype(np.float64)
        diff = max(diff, float(np.max(np.abs(a - e), initial=0.0)))
        scale = max(scale, float(np.max(np.abs(e), initial=0.0)))
    err = diff / max(scale, 1e-30)
    assert err <= RTOL, f"{what}: relative error {err:.2e} > {RTOL}"


def _run(opt, params, grads, apply):
    state = opt.init(params)
    p = params
    updates = []
    for g in grads:
        u, state = opt.update(g, state, p)
        p = apply(p, u)
        updates.append(u)
    return p, state, updates


def _is_matrix(p):
    return jax.tree.map(lambda x: x.ndim >= 2, p)


PAIRS = {
    "sgd": (lambda: no.sgd(0.05), lambda: optax.sgd(0.05)),
    "sgd_momentum": (lambda: no.sgd(0.05, momentum=0.9), lambda: optax.sgd(0.05, momentum=0.9)),
    "sgd_nesterov": (lambda: no.sgd(0.05, momentum=0.9, nesterov=True),
                     lambda: optax.sgd(0.05, momentum=0.9, nesterov=True)),
    "adam": (lambda: no.adam(1e-2), lambda: optax.adam(1e-2)),
    "adam_eps_root": (lambda: no.adam(3e-3, b1=0.8, b2=0.95, eps=1e-6, eps_root=1e-4),
                      lambda: optax.adam(3e-3, b1=0.8, b2=0.95, eps=1e-6, eps_root=1e-4)),
    "adamw": (lambda: no.adamw(1e-2, weight_decay=0.1),
              lambda: optax.adamw(1e-2, weight_decay=0.1)),
    "adamw_mask_fn": (
        lambda: no.adamw(1e-2, weight_decay=0.1, mask=no.weight_decay_mask),
        lambda: optax.adamw(1e-2, weight_decay=0.1, mask=_is_matrix)),
    "adamw_mask_tree": (
        lambda: no.adamw(1e-2, weight_decay=0.3, mask={"w": False, "b": True, "s": True}),
        lambda: optax.adamw(1e-2, weight_decay=0.3, mask={"w": False, "b": True, "s": True})),
    "adamw_schedule": (
        lambda: no.adamw(no.warmup_cosine_decay_schedule(0.0, 1e-2, 5, STEPS, 1e-3),
                         weight_decay=0.1, mask=no.weight_decay_mask),
        lambda: optax.adamw(optax.warmup_cosine_decay_schedule(0.0, 1e-2, 5, STEPS, 1e-3),
                            weight_decay=0.1, mask=_is_matrix)),
    "clip_adam": (lambda: no.chain(no.clip_by_global_norm(4.0), no.adam(1e-2)),
                  lambda: optax.chain(optax.clip_by_global_norm(4.0), optax.adam(1e-2))),
    "sgd_linear_schedule": (lambda: no.sgd(no.linear_schedule(0.1, 0.01, 15, 2), momentum=0.5),
                            lambda: optax.sgd(optax.linear_schedule(0.1, 0.01, 15, 2),
                                              momentum=0.5)),
}


@pytest.mark.parametrize("name", list(PAIRS))
def test_matches_optax_over_20_steps(name):
    make_nova, make_optax = PAIRS[name]
    params = _params()
    grads = _grads(params)
    pn, sn, un = _run(make_nova(), params, grads, no.apply_updates)
    po, so, uo = _run(make_optax(), params, grads, optax.apply_updates)
    _assert_trees_close(tree_leaves(pn), jax.tree.leaves(po), f"{name}: parameters")
    for t in range(STEPS):
        _assert_trees_close(tree_leaves(un[t]), jax.tree.leaves(uo[t]), f"{name}: updates {t}")
    # States: the same leaves (step counts, moments, momentum) in the same order.
    _assert_trees_close(tree_leaves(sn), jax.tree.leaves(so), f"{name}: state")
    assert all(np.asarray(c).dtype == np.int32 for c in tree_leaves(sn) if np.ndim(c) == 0
               and np.asarray(c).dtype.kind in "iu")


def _mlp_loss(np_, params, x, y):
    h = np_.tanh(x @ params["w1"] + params["b1"])
    return np_.mean((h @ params["w2"] + params["b2"] - y) ** 2)


def test_jitted_value_and_grad_and_update_step_matches_optax():
    rng = np.random.default_rng(2)
    params = {"w1": rng.standard_normal((6, 16)).astype(np.float32) * 0.5,
              "b1": np.zeros(16, np.float32),
              "w2": rng.standard_normal((16, 3)).astype(np.float32) * 0.5,
              "b2": np.zeros(3, np.float32)}
    xs = rng.standard_normal((STEPS, 32, 6)).astype(np.float32)
    ys = rng.standard_normal((STEPS, 32, 3)).astype(np.float32)
    opt_n = no.chain(no.clip_by_global_norm(0.5), no.adamw(
        no.warmup_cosine_decay_schedule(0.0, 3e-2, 4, STEPS, 3e-3), weight_decay=0.1,
        mask=no.weight_decay_mask))
    opt_o = optax.chain(optax.clip_by_global_norm(0.5), optax.adamw(
        optax.warmup_cosine_decay_schedule(0.0, 3e-2, 4, STEPS, 3e-3), weight_decay=0.1,
        mask=_is_matrix))

    @functools.partial(nova.jit, donate_argnums=(0, 1))
    def step_n(p, s, x, y):
        loss, g = nova.value_and_grad(functools.partial(_mlp_loss, jnp))(p, x, y)
        u, s = opt_n.update(g, s, p)
        return no.apply_updates(p, u), s, loss

    @jax.jit
    def step_o(p, s, x, y):
        loss, g = jax.value_and_grad(functools.partial(_mlp_loss, xnp))(p, x, y)
        u, s = opt_o.update(g, s, p)
        return optax.apply_updates(p, u), s, loss

    pn, sn = {k: jnp.asarray(v) for k, v in params.items()}, opt_n.init(params)
    po, so = params, opt_o.init(params)
    losses_n, losses_o = [], []
    for t in range(STEPS):
        pn, sn, ln = step_n(pn, sn, xs[t], ys[t])
        po, so, lo = step_o(po, so, xs[t], ys[t])
        losses_n.append(float(ln))
        losses_o.append(float(lo))
    np.testing.assert_allclose(losses_n, losses_o, rtol=1e-5)
    assert losses_n[-1] < 0.9 * losses_n[0]  # it trains
    _assert_trees_close(tree_leaves(pn), jax.tree.leaves(po), "jitted step: parameters")
    _assert_trees_close(tree_leaves(sn), jax.tree.leaves(so), "jitted step: state")
    info = step_n.cache_info()
    assert (info.misses, info.hits) == (1, STEPS - 1)  # the int32 count never retraces


SCHEDULES = {
    "constant": (lambda m: m.constant_schedule(0.3), 10),
    "linear": (lambda m: m.linear_schedule(1.0, 0.1, 100, transition_begin=20), 150),
    "polynomial": (lambda m: m.polynomial_schedule(2.0, 0.5, 2.0, 80, 5), 120),
    "cosine": (lambda m: m.cosine_decay_schedule(0.5, 200), 260),
    "cosine_alpha_exponent": (lambda m: m.cosine_decay_schedule(1e-3, 150, 0.1, 2.0), 200),
    "warmup_cosine": (lambda m: m.warmup_cosine_decay_schedule(0.0, 6e-4, 50, 1000, 6e-5), 1100),
    "warmup_cosine_no_warmup": (lambda m: m.warmup_cosine_decay_schedule(1.0, 1.0, 0, 40), 60),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_schedules_match_optax_at_every_step(name):
    make, n = SCHEDULES[name]
    steps = np.arange(n, dtype=np.int32)
    got = np.broadcast_to(np.asarray(make(no)(jnp.asarray(steps)), np.float64), steps.shape)
    want = np.broadcast_to(np.asarray(make(optax)(xnp.asarray(steps)), np.float64), steps.shape)
    scale = np.max(np.abs(want))
    # Absolute error relative to the schedule's peak: near the end of a cosine, 1 + cos(x) cancels,
    # so one ulp of cos is a large relative error of a tiny value that no step would notice.
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * scale)
    for s in (0, n // 3, n - 1):  # Python ints as well as arrays
        np.testing.assert_allclose(float(np.asarray(make(no)(s))), float(make(optax)(s)),
                                   rtol=RTOL, atol=RTOL * scale)


def test_schedule_traced_under_jit():
    sched = no.warmup_cosine_decay_schedule(0.0, 1.0, 10, 100, 0.1)
    f = nova.jit(sched)
    for s in (0, 5, 10, 57, 100, 150):
        np.testing.assert_allclose(float(f(np.int32(s))), float(sched(s)), rtol=1e-6)
    assert f.cache_info().misses == 1


def test_mask_selects_which_leaves_decay():
    params = {"w": np.full((2, 3), 2.0, np.float32), "b": np.full(3, 2.0, np.float32),
              "s": np.float32(2.0)}
    assert no.weight_decay_mask(params) == {"w": True, "b": False, "s": False}
    zero = {k: np.zeros_like(v) for k, v in params.items()}
    opt = no.chain(no.add_decayed_weights(0.5, no.weight_decay_mask), no.scale(-0.1))
    u, _ = opt.update(zero, opt.init(params), params)
    np.testing.assert_array_equal(np.asarray(u["w"]), np.full((2, 3), -0.1, np.float32))
    np.testing.assert_array_equal(np.asarray(u["b"]), np.zeros(3, np.float32))
    assert float(np.asarray(u["s"])) == 0.0
    # adamw on zero gradients: only the masked-in leaf moves, by -lr * wd * p.
    opt = no.adamw(0.1, weight_decay=0.5, mask={"w": False, "b": True, "s": False})
    u, _ = opt.update(zero, opt.init(params), params)
    np.testing.assert_allclose(np.asarray(u["b"]), np.full(3, -0.1), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(u["w"]), np.zeros((2, 3), np.float32))


def test_mask_errors():
    params = {"w": np.ones((2, 3), np.float32), "b": np.ones(3, np.float32)}
    with pytest.raises(ValueError, match="mask's structure"):
        no.add_decayed_weights(0.1, {"w": True}).init(params)
    opt = no.add_decayed_weights(0.1, lambda p: {"w": np.ones(2) > 0, "b": False})
    with pytest.raises(TypeError, match="mask leaves must be Python bools"):
        opt.update(params, opt.init(params), params)
    with pytest.raises(ValueError, match="needs params"):
        no.add_decayed_weights(0.1).update(params, ())


def test_clip_by_global_norm():
    g = {"a": np.array([3.0, 0.0], np.float32), "b": np.array([[4.0]], np.float32)}  # norm 5
    clip = no.clip_by_global_norm(2.5)
    u, state = clip.update(g, clip.init(g))
    assert state == no.EmptyState()
    np.testing.assert_allclose(np.asarray(u["a"]), [1.5, 0.0], rtol=1e-7)
    np.testing.assert_allclose(np.asarray(u["b"]), [[2.0]], rtol=1e-7)
    np.testing.assert_allclose(float(no.global_norm(u)), 2.5, rtol=1e-7)
    u, _ = no.clip_by_global_norm(5.5).update(g, ())  # below the threshold: unchanged
    np.testing.assert_array_equal(np.asarray(u["a"]), g["a"])
    np.testing.assert_array_equal(np.asarray(u["b"]), g["b"])
    with pytest.raises(ValueError, match="max_norm"):
        no.clip_by_global_norm(0.0)


def test_chain_order_and_state():
    g = {"a": np.array([3.0, 4.0], np.float32)}
    t = no.chain(no.scale(2.0), no.scale(3.0))
    u, s = t.update(g, t.init(g))
    np.testing.assert_array_equal(np.asarray(u["a"]), [18.0, 24.0])
    assert s == (no.EmptyState(), no.EmptyState())
    clip_then_scale = no.chain(no.clip_by_global_norm(1.0), no.scale(10.0))
    scale_then_clip = no.chain(no.scale(10.0), no.clip_by_global_norm(1.0))
    a, _ = clip_then_scale.update(g, clip_then_scale.init(g))
    b, _ = scale_then_clip.update(g, scale_then_clip.init(g))
    np.testing.assert_allclose(np.asarray(a["a"]), [6.0, 8.0], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(b["a"]), [0.6, 0.8], rtol=1e-6)
    state = no.adamw(1e-3).init(g)
    assert [type(x).__name__ for x in state] == ["ScaleByAdamState", "AddDecayedWeightsState",
                                                 "EmptyState"]
    assert np.asarray(state[0].count).dtype == np.int32
    with pytest.raises(TypeError, match="argument 1"):
        no.chain(no.scale(1.0), lambda g: g)
    with pytest.raises(ValueError, match="state tuple of 2"):
        t.update(g, (no.EmptyState(),))


def test_nesterov_by_hand():
    lr, m = 0.1, 0.9
    g1, g2 = np.array([1.0, -2.0], np.float32), np.array([0.5, 4.0], np.float32)
    opt = no.sgd(lr, momentum=m, nesterov=True)
    s = opt.init(g1)
    u1, s = opt.update(g1, s)
    u2, s = opt.update(g2, s)
    trace2 = g2 + m * g1
    np.testing.assert_allclose(np.asarray(u1), -lr * (g1 + m * g1), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(u2), -lr * (g2 + m * trace2), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(s[0].trace), trace2, rtol=1e-6)
    heavy_ball = no.sgd(lr, momentum=m)  # without Nesterov the update is the trace itself
    s = heavy_ball.init(g1)
    _, s = heavy_ball.update(g1, s)
    u2, _ = heavy_ball.update(g2, s)
    np.testing.assert_allclose(np.asarray(u2), -lr * trace2, rtol=1e-6)


def test_step_count_saturates_and_bad_hyperparameters_raise():
    top = np.iinfo(np.int32).max
    assert int(np.asarray(safe_increment(jnp.asarray(top - 1, dtype=jnp.int32)))) == top
    assert int(np.asarray(safe_increment(jnp.asarray(top, dtype=jnp.int32)))) == top
    with pytest.raises(ValueError, match="b1 must be in"):
        no.adam(1e-3, b1=1.0)
    with pytest.raises(ValueError, match="learning_rate"):
        no.sgd(-0.1)
    with pytest.raises(TypeError, match="learning_rate must be a real number"):
        no.sgd("0.1")
    with pytest.raises(ValueError, match="decay_steps .* must exceed warmup_steps"):
        no.warmup_cosine_decay_schedule(0.0, 1.0, 10, 10)
    with pytest.raises(TypeError, match="decay_steps must be an int"):
        no.cosine_decay_schedule(1.0, 10.5)
    with pytest.raises(ValueError, match="shape"):
        no.apply_updates({"a": np.ones(3, np.float32)}, {"a": np.ones(4, np.float32)})


def test_updates_not_shaped_like_the_state_raise_naming_the_leaf():
    # These failed inside an elementwise add ("operands could not be broadcast") or in tree_map,
    # naming neither the optimizer nor the leaf.
    params = {"b": np.zeros(2, np.float32), "w": np.zeros((2, 2), np.float32)}
    for tx, fn, what in ((no.adam(0.1), "scale_by_adam.update", "mu"),
                         (no.sgd(0.1, momentum=0.9), "trace.update", "trace")):
        state = tx.init(params)
        bad_shape = {"b": np.ones(2, np.float32), "w": np.ones(3, np.float32)}
        with pytest.raises(ValueError, match=rf"{fn}: update leaf 1 has shape \(3,\) but the "
                                             rf"state's {what} has \(2, 2\) there"):
            tx.update(bad_shape, state, params)
        with pytest.raises(ValueError, match=rf"{fn}: the updates' structure .* differs from the "
                                             rf"state's {what}"):
            tx.update({"w": np.ones((2, 2), np.float32)}, state, params)


def test_flag_and_array_hyperparameters():
    # nesterov="no" was truthy and silently turned Nesterov momentum on.
    with pytest.raises(TypeError, match="sgd: nesterov must be a bool, got str 'no'"):
        no.sgd(0.1, momentum=0.9, nesterov="no")
    with pytest.raises(TypeError, match="trace: nesterov must be a bool, got int 1"):
        no.trace(0.9, nesterov=1)
    # A 0-d NumPy array is a number, as optax takes it (it raised "must be a real number").
    p = {"w": np.ones(3, np.float32)}
    g = {"w": np.full(3, 2.0, np.float32)}
    tx = no.sgd(np.array(0.25))
    u, _ = tx.update(g, tx.init(p), p)
    np.testing.assert_allclose(np.asarray(u["w"]), [-0.5, -0.5, -0.5])
    with pytest.raises(TypeError, match="learning_rate must be a real number, got ndarray"):
        no.sgd(np.array([0.1, 0.2]))


def test_adam_on_float64_parameters_corrects_its_bias_in_float64():
    """The bias corrections 1 - b**t are float64 for float64 moments (optax with x64): in
    float32 the first step erred by ~7e-6 relative (found by review)."""
    p = {"w": np.array([1.0, 2.0, 3.0])}
    g = {"w": np.array([0.1, -0.2, 0.3])}
    tx = no.adam(1.0)
    state = tx.init(p)
    m = v = np.zeros(3)
    for t in range(1, 4):
        upd, state = tx.update(g, state, p)
        m = 0.9 * m + 0.1 * g["w"]
        v = 0.999 * v + 0.001 * g["w"] ** 2
        want = -(m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
        assert np.asarray(upd["w"]).dtype == np.float64
        np.testing.assert_allclose(np.asarray(upd["w"]), want, rtol=1e-12)


def test_hyperparameters_as_arrays_and_masks_as_numpy_bools():
    """A 0-d nova Array learning rate and 0-d NumPy bool mask leaves are taken (optax takes
    both); a traced learning rate says to pass a number or a schedule."""
    p = {"w": np.ones(3, np.float32), "b": np.ones(2, np.float32)}
    g = {"w": np.full(3, 0.5, np.float32), "b": np.full(2, 0.5, np.float32)}
    a = no.adamw(jnp.asarray(np.float32(0.1)), mask={"w": np.array(True), "b": np.array(False)})
    b = no.adamw(0.1, mask={"w": True, "b": False})
    ua, _ = a.update(g, a.init(p), p)
    ub, _ = b.update(g, b.init(p), p)
    for k in p:
        np.testing.assert_array_equal(np.asarray(ua[k]), np.asarray(ub[k]))
    with pytest.raises(TypeError, match="learning_rate is a traced value.*schedule"):
        nova.jit(lambda lr: no.sgd(lr).init(p))(np.float32(0.1))
