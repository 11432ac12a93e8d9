"""nova.optim's extra update arguments, line searches, L-BFGS and Polyak SGD against optax, and
the optax-style module wiring (nova.optim.losses, nova.optim.schedules, top-level aliases)."""

import jax
import jax.numpy as jjnp
import nova.numpy as np
import numpy as onp
import optax
import pytest

import nova
import nova.optim as no

jax.config.update("jax_platforms", "cpu")

OPTAX_LOSSES = ["convex_kl_divergence", "cosine_distance", "cosine_similarity", "ctc_loss",
                "ctc_loss_with_forward_probs", "generalized_kl_divergence", "hinge_loss",
                "huber_loss", "kl_divergence", "l2_loss", "log_cosh", "ntxent",
                "safe_softmax_cross_entropy", "sigmoid_binary_cross_entropy",
                "sigmoid_focal_loss", "smooth_labels", "softmax_cross_entropy",
                "softmax_cross_entropy_with_integer_labels", "squared_error"]
OPTAX_SCHEDULES = ["constant_schedule", "cosine_decay_schedule", "cosine_onecycle_schedule",
                   "exponential_decay", "join_schedules", "linear_onecycle_schedule",
                   "linear_schedule", "piecewise_constant_schedule",
                   "piecewise_interpolate_schedule", "polynomial_schedule", "sgdr_schedule",
                   "warmup_constant_schedule", "warmup_cosine_decay_schedule",
                   "warmup_exponential_decay_schedule"]


def close(a, b, tol=1e-4):
    onp.testing.assert_allclose(onp.asarray(a), onp.asarray(b), rtol=tol, atol=tol)


# --- wiring --------------------------------------------------------------------------------------


def test_losses_and_schedules_modules_and_top_level_aliases():
    import nova.optim.losses as losses_module
    import nova.optim.schedules as schedules_module

    assert no.losses is losses_module and no.schedules is schedules_module
    for name in OPTAX_LOSSES:
        assert hasattr(optax, name) and hasattr(optax.losses, name)
        assert getattr(no, name) is getattr(no.losses, name), name
    for name in OPTAX_SCHEDULES:
        assert hasattr(optax.schedules, name)
        assert getattr(no, name) is getattr(no.schedules, name), name
    assert no.schedules.inject_hyperparams is no.inject_hyperparams
    assert set(OPTAX_LOSSES + OPTAX_SCHEDULES) <= set(no.__all__)
    assert len(no.__all__) == len(set(no.__all__))


def test_top_level_aliases_compute_like_optax():
    logits = onp.array([[1.0, -2.0, 0.5], [0.3, 0.2, -1.0]], onp.float32)
    labels = onp.array([[0.0, 1.0, 0.0], [0.5, 0.25, 0.25]], onp.float32)
    close(no.softmax_cross_entropy(np.asarray(logits), np.asarray(labels)),
          optax.softmax_cross_entropy(logits, labels), 1e-5)
    close(no.huber_loss(np.asarray(logits), np.asarray(labels)),
          optax.huber_loss(logits, labels), 1e-5)
    sched_n = no.warmup_exponential_decay_schedule(0.0, 1.0, 5, 10, 0.5)
    sched_o = optax.warmup_exponential_decay_schedule(0.0, 1.0, 5, 10, 0.5)
    for step in (0, 3, 7, 40):
        close(sched_n(step), sched_o(step), 1e-6)


# --- the extra-args interface --------------------------------------------------------------------


def _recorder(seen):
    def update(updates, state, params=None, **extra):
        seen.append(sorted(extra))
        return nova.tree_util.tree_map(lambda u: u * extra.get("factor", 1.0), updates), state

    return no.GradientTransformationExtraArgs(no.init_empty_state, update)


def test_chain_forwards_extra_args_only_to_transformations_that_take_them():
    seen = []
    opt = no.chain(no.scale(2.0), _recorder(seen), no.chain(_recorder(seen), no.scale(-1.0)))
    assert isinstance(opt, no.GradientTransformationExtraArgs)
    state = opt.init({"w": np.zeros(2)})
    out, _ = opt.update({"w": np.ones(2)}, state, None, factor=3.0, value=1.0)
    close(out["w"], [-18.0, -18.0])
    assert seen == [["factor", "value"], ["factor", "value"]]
    wrapped = no.with_extra_args_support(no.scale(0.5))
    assert isinstance(wrapped, no.GradientTransformationExtraArgs)
    assert no.with_extra_args_support(wrapped) is wrapped
    close(wrapped.update(np.ones(2), no.EmptyState(), None, anything=1)[0], [0.5, 0.5])
    with pytest.raises(TypeError, match="tx must be a GradientTransformation"):
        no.with_extra_args_support(lambda g: g)


# --- Polyak --------------------------------------------------------------------------------------


def _quadratic(lib):
    a = lib.asarray(onp.array([[3.0, 1.0, 0.0], [1.0, 2.0, 0.5], [0.0, 0.5, 1.0]], onp.float32))
    b = lib.asarray(onp.array([1.0, -2.0, 3.0], onp.float32))
    return lambda x: 0.5 * x @ (a @ x) - b @ x + 2.5


def _rosenbrock(lib):
    return lambda x: lib.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


@pytest.mark.parametrize("variant", ["sps", "sps+"])
def test_polyak_sgd_matches_optax(variant):
    fj, fn = _quadratic(jjnp), _quadratic(np)
    oj = optax.polyak_sgd(max_learning_rate=0.8, f_min=0.5, variant=variant)
    on = no.polyak_sgd(max_learning_rate=0.8, f_min=0.5, variant=variant)

    def step_n(x, s):
        v, g = nova.value_and_grad(fn)(x)
        u, s = on.update(g, s, x, value=v)
        return no.apply_updates(x, u), s

    x0 = onp.array([2.0, -1.0, 0.5], onp.float32)
    xj, sj = jjnp.asarray(x0), oj.init(jjnp.asarray(x0))
    xe, se = np.asarray(x0), on.init(np.asarray(x0))
    xc, sc = xe, se
    jstep = nova.jit(step_n)

    @jax.jit
    def step_j(x, s):
        v, g = jax.value_and_grad(fj)(x)
        u, s = oj.update(g, s, x, value=v)
        return optax.apply_updates(x, u), s

    for _ in range(3):
        xj, sj = step_j(xj, sj)
        xe, se = step_n(xe, se)
        xc, sc = jstep(xc, sc)
        close(xe, xj, 1e-5)
        close(xc, xj, 1e-5)


# --- backtracking --------------------------------------------------------------------------------


def test_backtracking_linesearch_matches_optax_with_stored_grad():
    fj, fn = _quadratic(jjnp), _quadratic(np)
    kw = dict(max_backtracking_steps=15, store_grad=True, decrease_factor=0.7)
    oj = optax.chain(optax.sgd(1.0), optax.scale_by_backtracking_linesearch(**kw))
    on = no.chain(no.sgd(1.0), no.scale_by_backtracking_linesearch(**kw))
    vg_j, vg_n = optax.value_and_grad_from_state(fj), no.value_and_grad_from_state(fn)

    @jax.jit
    def step_j(x, s):
        v, g = vg_j(x, state=s)
        u, s = oj.update(g, s, x, value=v, grad=g, value_fn=fj)
        return optax.apply_updates(x, u), s

    def step_n(x, s):
        v, g = vg_n(x, state=s)
        u, s = on.update(g, s, x, value=v, grad=g, value_fn=fn)
        return no.apply_updates(x, u), s

    xj = jjnp.zeros(3)
    sj = oj.init(xj)
    xe, se = np.zeros(3), on.init(np.zeros(3))
    xc, sc = xe, se
    jstep = nova.jit(step_n)
    trials = []
    for i in range(5):
        xj, sj = step_j(xj, sj)
        xc, sc = jstep(xc, sc)
        trials.append(int(sj[1].info.num_linesearch_steps))
        close(xc, xj, 1e-5)
        close(sc[1].learning_rate, sj[1].learning_rate, 1e-5)
        assert int(sc[1].info.num_linesearch_steps) == int(sj[1].info.num_linesearch_steps)
        close(sc[1].grad, sj[1].grad, 1e-5)
        if i < 1:
            xe, se = step_n(xe, se)
            close(xe, xj, 1e-5)
    assert max(trials) > 1  # some steps backtracked


# --- zoom ----------------------------------------------------------------------------------------


def _wavy(lib):
    w = lib.asarray(onp.array([10.0, 1.0, 0.1, 3.0], onp.float32))
    return lambda x: lib.sum(w * x**2) + lib.sum(lib.cos(x)) + x[0] ** 4


@pytest.mark.parametrize("lr, kw", [
    (1.0, {}),  # step 1 too long: zoom by interpolation
    (0.001, {}),  # too short: the interval search grows it
    (0.001, dict(max_learning_rate=0.1)),  # capped: curvature condition left unmet
    (0.3, dict(curv_rtol=0.1, max_linesearch_steps=5, approx_dec_rtol=None)),
])
def test_zoom_linesearch_matches_optax_under_jit(lr, kw):
    kw.setdefault("max_linesearch_steps", 15)
    fj, fn = _wavy(jjnp), _wavy(np)
    oj = optax.chain(optax.sgd(lr), optax.scale_by_zoom_linesearch(**kw))
    on = no.chain(no.sgd(lr), no.scale_by_zoom_linesearch(**kw))

    @jax.jit
    def step_j(x, s):
        v, g = jax.value_and_grad(fj)(x)
        u, s = oj.update(g, s, x, value=v, grad=g, value_fn=fj)
        return optax.apply_updates(x, u), s

    @nova.jit
    def step_n(x, s):
        v, g = nova.value_and_grad(fn)(x)
        u, s = on.update(g, s, x, value=v, grad=g, value_fn=fn)
        return no.apply_updates(x, u), s

    x0 = onp.array([1.5, -2.0, 3.0, 0.7], onp.float32)
    xj, sj = jjnp.asarray(x0), oj.init(jjnp.asarray(x0))
    xn, sn = np.asarray(x0), on.init(np.asarray(x0))
    for _ in range(3):
        xj, sj = step_j(xj, sj)
        xn, sn = step_n(xn, sn)
        close(xn, xj)
        close(sn[1].learning_rate, sj[1].learning_rate)
        assert int(sn[1].info.num_linesearch_steps) == int(sj[1].info.num_linesearch_steps)
        close(sn[1].info.curvature_error, sj[1].info.curvature_error)
        close(sn[1].value, sj[1].value)


# --- L-BFGS --------------------------------------------------------------------------------------


def _run_lbfgs(make_f, x0, steps, eager_steps, **kw):
    fj, fn = make_f(jjnp), make_f(np)
    oj, on = optax.lbfgs(**kw), no.lbfgs(**kw)
    vg_j, vg_n = optax.value_and_grad_from_state(fj), no.value_and_grad_from_state(fn)

    @jax.jit
    def step_j(x, s):
        v, g = vg_j(x, state=s)
        u, s = oj.update(g, s, x, value=v, grad=g, value_fn=fj)
        return optax.apply_updates(x, u), s

    def step_n(x, s):
        v, g = vg_n(x, state=s)
        u, s = on.update(g, s, x, value=v, grad=g, value_fn=fn)
        return no.apply_updates(x, u), s

    jstep = nova.jit(step_n)
    xj, sj = jjnp.asarray(x0), oj.init(jjnp.asarray(x0))
    xc, sc = np.asarray(x0), on.init(np.asarray(x0))
    xe, se = xc, sc
    for i in range(steps):
        xj, sj = step_j(xj, sj)
        xc, sc = jstep(xc, sc)
        close(xc, xj)
        close(sc[2].value, sj[2].value)
        assert int(sc[2].info.num_linesearch_steps) == int(sj[2].info.num_linesearch_steps)
        if i < eager_steps:
            xe, se = step_n(xe, se)
            close(xe, xj)
    return fj(xj)


def test_lbfgs_tracks_optax_on_a_quadratic():
    value = _run_lbfgs(_quadratic, onp.array([4.0, -3.0, 2.0], onp.float32), 5, 1)
    assert value < 0.0  # the minimum of the quadratic is below its constant 2.5


def test_lbfgs_tracks_optax_on_rosenbrock():
    x0 = onp.array([-1.2, 1.0, -0.5, 0.8], onp.float32)
    value = _run_lbfgs(_rosenbrock, x0, 14, 0, memory_size=5)
    assert value < 3.4


def test_lbfgs_without_line_search_and_scale_by_lbfgs_gradient():
    fj, fn = _quadratic(jjnp), _quadratic(np)
    oj = optax.lbfgs(learning_rate=0.1, memory_size=3, linesearch=None)
    on = no.lbfgs(learning_rate=0.1, memory_size=3, linesearch=None)
    xj, sj = jjnp.ones(3), oj.init(jjnp.ones(3))
    xn, sn = np.ones(3), on.init(np.ones(3))
    upd_j = jax.jit(lambda x, s: oj.update(jax.grad(fj)(x), s, x))
    upd_n = nova.jit(lambda x, s: on.update(nova.grad(fn)(x), s, x))
    for _ in range(4):
        uj, sj = upd_j(xj, sj)
        un, sn = upd_n(xn, sn)
        close(un, uj, 1e-5)
        xj, xn = optax.apply_updates(xj, uj), no.apply_updates(xn, un)
    # reverse mode through the two-loop recursion (lax.scan), against jax.grad
    tj, tn = optax.scale_by_lbfgs(memory_size=3), no.scale_by_lbfgs(memory_size=3)
    g_j = jax.jit(jax.grad(lambda g: jjnp.sum(tj.update(g, sj[0], xj)[0] ** 2)))(
        jjnp.arange(3.0))
    g_n = nova.grad(lambda g: np.sum(tn.update(g, sn[0], xn)[0] ** 2))(np.arange(3.0))
    close(g_n, g_j, 1e-4)


def test_line_search_passes_data_to_value_fn():
    def loss_j(w, data):
        return jjnp.mean((data @ w - 1.0) ** 2)

    def loss_n(w, data):
        return np.mean((data @ w - 1.0) ** 2)

    data = onp.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.1]], onp.float32)
    oj, on = optax.lbfgs(), no.lbfgs()
    wj, wn = jjnp.zeros(2), np.zeros(2)
    sj, sn = oj.init(wj), on.init(wn)
    @jax.jit
    def step_j(w, s, data):
        v, g = jax.value_and_grad(loss_j)(w, data)
        u, s = oj.update(g, s, w, value=v, grad=g, value_fn=loss_j, data=data)
        return optax.apply_updates(w, u), s

    @nova.jit
    def step_n(w, s, data):
        v, g = nova.value_and_grad(loss_n)(w, data)
        u, s = on.update(g, s, w, value=v, grad=g, value_fn=loss_n, data=data)
        return no.apply_updates(w, u), s

    for _ in range(2):
        wj, sj = step_j(wj, sj, data)
        wn, sn = step_n(wn, sn, np.asarray(data))
        close(wn, wj)


# --- bad input -----------------------------------------------------------------------------------


def test_bad_input():
    fn = _quadratic(np)
    x = np.zeros(3)
    g = nova.grad(fn)(x)
    zoom = no.scale_by_zoom_linesearch(5)
    with pytest.raises(TypeError, match=r"extra arguments \['batch'\].*value_fn"):
        zoom.update(g, zoom.init(x), x, value=fn(x), grad=g, value_fn=fn, batch=1)
    with pytest.raises(ValueError, match="value must be a scalar"):
        zoom.update(g, zoom.init(x), x, value=np.zeros(2), grad=g, value_fn=fn)
    with pytest.raises(ValueError, match="grad's leaf shapes"):
        zoom.update(g, zoom.init(x), x, value=fn(x), grad=np.zeros(2), value_fn=fn)
    with pytest.raises(ValueError, match="update needs params"):
        zoom.update(g, zoom.init(x), None, value=fn(x), grad=g, value_fn=fn)
    with pytest.raises(ValueError, match="initial_guess_strategy must be 'one' or 'keep'"):
        no.scale_by_zoom_linesearch(5, initial_guess_strategy="two")
    with pytest.raises(ValueError, match="max_backtracking_steps must be >= 0"):
        no.scale_by_backtracking_linesearch(-1)
    with pytest.raises(ValueError, match="decrease_factor must be in"):
        no.scale_by_backtracking_linesearch(3, decrease_factor=1.5)
    with pytest.raises(ValueError, match="memory_size must be >= 1"):
        no.scale_by_lbfgs(memory_size=0)
    with pytest.raises(TypeError, match="linesearch must be a GradientTransformation"):
        no.lbfgs(linesearch="zoom")
    with pytest.raises(ValueError, match="variant must be 'sps' or 'sps\\+'"):
        no.polyak_sgd(variant="sps-")
    with pytest.raises(ValueError, match="fields named 'value'"):
        no.value_and_grad_from_state(fn)(x, state=no.sgd(0.1).init(x))
    bt = no.scale_by_backtracking_linesearch(3)
    with pytest.raises(ValueError, match="grad' is None"):
        no.value_and_grad_from_state(fn)(x, state=bt.init(x))


def test_lbfgs_weights_follow_the_parameters_float_dtype():
    # found by review (session 23): the 1/<du, dw> weights were float32 for float64 params
    opt = no.scale_by_lbfgs(memory_size=3)
    assert opt.init(onp.ones(4, onp.float64)).weights_memory.dtype == onp.float64
    assert opt.init({"w": onp.ones(2, onp.float32)}).weights_memory.dtype == onp.float32
