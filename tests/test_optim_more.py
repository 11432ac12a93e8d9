"""nova.optim's further optimizers, transformations and wrappers against optax itself: the same
gradients on a pytree of a matrix, a vector and a scalar, STEPS steps, eagerly and under
nova.jit, relative error <= 1e-6; the wrappers' behaviour; bad-input errors."""

import functools

import jax
import jax.numpy as xnp
import nova.numpy as jnp
import numpy as np
import optax
import pytest

import nova
import nova.optim as no
from nova.core.pytree import tree_leaves

RTOL = 1e-6
STEPS = 6  # RAdam's rectification starts at step 6 (rho_6 = 5.97 >= threshold 5)


def _params(seed=0, scalar=True):
    rng = np.random.default_rng(seed)
    p = {"w": rng.standard_normal((8, 5)).astype(np.float32),
         "b": rng.standard_normal(5).astype(np.float32)}
    if scalar:  # a 0-d ndarray: optax's abs_sq rejects NumPy scalars
        p["s"] = np.asarray(rng.standard_normal(), np.float32)
    return p


def _grads(params, n=STEPS, seed=1):
    rng = np.random.default_rng(seed)
    return [{k: np.asarray(3 * rng.standard_normal(np.shape(v)), np.float32)
             for k, v in params.items()} for _ in range(n)]


def _np_leaves(tree, from_jax):
    leaves = jax.tree.leaves(tree) if from_jax else tree_leaves(tree)
    out = []
    for x in leaves:
        if from_jax and jax.dtypes.issubdtype(getattr(x, "dtype", np.float32),
                                              jax.dtypes.prng_key):
            x = jax.random.key_data(x)  # optax keeps typed keys, nova raw uint32 ones
        out.append(np.asarray(x))
    return out


def _assert_close(actual, expected, what, rtol=RTOL):
    """Same leaves; integer and bool leaves equal, float leaves within rtol in the pytree's max
    norm (max |a - e| over max |e|, over all float leaves together, as tests/test_optim.py),
    non-finite values equal."""
    a_leaves, e_leaves = _np_leaves(actual, False), _np_leaves(expected, True)
    assert len(a_leaves) == len(e_leaves), (what, len(a_leaves), len(e_leaves))
    diff = scale = 0.0
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves, strict=True)):
        assert a.shape == e.shape and a.dtype == e.dtype, (what, i, a.shape, e.shape, a.dtype,
                                                           e.dtype)
        if e.dtype.kind in "iub":
            np.testing.assert_array_equal(a, e, err_msg=f"{what} leaf {i}")
            continue
        a, e = a.astype(np.float64), e.astype(np.float64)
        ok = np.isfinite(e)  # NaNs and infinities where optax has them, the rest close
        np.testing.assert_array_equal(a[~ok], e[~ok], err_msg=f"{what} leaf {i}")
        diff = max(diff, float(np.max(np.abs(a[ok] - e[ok]), initial=0.0)))
        scale = max(scale, float(np.max(np.abs(e)[ok], initial=0.0)))
    err = diff / max(scale, 1e-30)
    assert err <= rtol, f"{what}: relative error {err:.2e} > {rtol}"


def _run(opt, params, grads, apply, jit=None):
    state = opt.init(params)
    update = opt.update if jit is None else jit(opt.update)
    p, updates = params, []
    for g in grads:
        u, state = update(g, state, p)
        p = apply(p, u)
        updates.append(u)
    return p, state, updates


def _matrices(m):
    tree_map = jax.tree.map if m is optax else nova.tree_util.tree_map
    return lambda params: tree_map(lambda x: np.ndim(x) >= 2, params)

# name -> (factory of the module m, nova.optim or optax; parameters with a scalar leaf)
CASES = {
    "rmsprop": (lambda m: m.rmsprop(1e-2), True),
    "rmsprop_centered_nesterov": (
        lambda m: m.rmsprop(1e-2, centered=True, momentum=0.9, nesterov=True), True),
    "rmsprop_bias_correction": (
        lambda m: m.rmsprop(1e-2, eps_in_sqrt=False, bias_correction=True, initial_scale=0.1),
        True),
    "adagrad": (lambda m: m.adagrad(0.1), True),
    "adamax": (lambda m: m.adamax(1e-2), True),
    "adamaxw_mask_fn": (lambda m: m.adamaxw(1e-2, weight_decay=0.1, mask=_matrices(m)), True),
    "nadam": (lambda m: m.nadam(1e-2), True),
    "nadamw_scheduled_decay": (
        lambda m: m.nadamw(1e-2, weight_decay=m.linear_schedule(0.2, 0.0, 4)), True),
    "amsgrad": (lambda m: m.amsgrad(1e-2), True),
    "adabelief_nesterov": (lambda m: m.adabelief(1e-2, nesterov=True), True),
    "radam": (lambda m: m.radam(1e-2), True),
    "yogi": (lambda m: m.yogi(1e-2), True),
    "adan": (lambda m: m.adan(1e-2, weight_decay=0.1), True),
    "lion": (lambda m: m.lion(1e-3), True),
    "lamb": (lambda m: m.lamb(1e-2, weight_decay=0.1), True),
    "lars": (lambda m: m.lars(0.1, weight_decay=0.1, trust_ratio_mask={"w": True, "b": True,
                                                                      "s": False}), True),
    "novograd": (lambda m: m.novograd(1e-2, weight_decay=0.1), True),
    "adafactor": (lambda m: m.adafactor(), True),
    "adafactor_factored_momentum": (
        lambda m: m.adafactor(1e-2, min_dim_size_to_factor=4, momentum=0.9,
                              weight_decay_rate=0.01), True),
    "adadelta": (lambda m: m.adadelta(1.0, weight_decay=0.01), True),
    # lr near 1: c - 1 = 1 / sqrt(1 + lr^2) - 1 cancels less than for a small lr
    "fromage_schedule": (lambda m: m.fromage(m.linear_schedule(1.0, 0.3, 5)), True),
    "noisy_sgd": (lambda m: m.noisy_sgd(1e-2, key=3), True),
    "signum": (lambda m: m.signum(1e-2), True),
    "rprop": (lambda m: m.rprop(1e-2), True),
    "sm3": (lambda m: m.sm3(1e-2), False),  # optax's SM3 has no accumulator for a scalar
    "optimistic_gd": (lambda m: m.optimistic_gradient_descent(1e-2, alpha=0.5), True),
    "optimistic_adam_v2": (lambda m: m.optimistic_adam_v2(1e-2, beta=0.5), True),
    "clips": (lambda m: m.chain(m.clip(2.0), m.centralize(), m.clip_by_block_rms(1.0),
                                m.adaptive_grad_clip(0.5), m.sgd(0.1)), True),
    "block_scalings": (
        lambda m: m.chain(m.scale_by_trust_ratio(min_norm=0.1), m.scale_by_param_block_norm(),
                          m.ema(0.9), m.scale(-0.1), m.keep_params_nonnegative()), True),
    "lion_smooth": (lambda m: m.chain(m.scale_by_lion(mode="smooth", smooth_beta=2.0),
                                      m.scale(-0.01)), True),
    "masked_prefix": (lambda m: m.masked(m.adam(0.1), {"w": True, "b": False, "s": True}), True),
    "multi_transform": (
        lambda m: m.multi_transform({"a": m.adam(0.1), "z": m.set_to_zero(), "s": m.sgd(0.3)},
                                    {"w": "a", "b": "z", "s": "s"}), True),
    "named_chain_flatten": (
        lambda m: m.named_chain(("clip", m.clip_by_global_norm(5.0)),
                                ("opt", m.flatten(m.adam(0.1)))), True),
    "multisteps": (lambda m: m.MultiSteps(m.adam(0.1), 3).gradient_transformation(), True),
    "apply_every": (lambda m: m.chain(m.apply_every(2), m.sgd(0.1, momentum=0.5)), True),
    "conditional": (
        lambda m: m.chain(m.conditionally_transform(m.scale(2.0), lambda s: s >= 3),
                          m.conditionally_mask(m.adam(0.1), lambda s: s % 2 == 0)), True),
}


# Eager nova.random compiles every Threefry op for every leaf shape (~10 s on 2 cores); the
# eager random ops are tested in tests/test_random.py, add_noise here under jit only.
JIT_ONLY = {"noisy_sgd"}
# The trust ratio and block norm read the parameters, so their rounding (~1e-7) feeds back.
LOOSER = {"block_scalings": 2e-6}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_optax_eager_and_jitted(name):
    make, scalar = CASES[name]
    params = _params(scalar=scalar)
    grads = _grads(params)
    rtol = LOOSER.get(name, RTOL)
    # optax under jax.jit: eager jax computes float ** int32 by repeated squaring (1 ulp off a
    # rounded pow, which RAdam's rho_t amplifies to 1e-3), jitted jax and Nova by pow.
    po, so, uo = _run(make(optax), params, grads, optax.apply_updates, jit=jax.jit)
    modes = (("jit", nova.jit),) if name in JIT_ONLY else (("eager", None), ("jit", nova.jit))
    for mode, jit in modes:
        pn, sn, un = _run(make(no), params, grads, no.apply_updates, jit=jit)
        _assert_close(pn, po, f"{name} ({mode}): parameters", rtol)
        for t in range(STEPS):
            _assert_close(un[t], uo[t], f"{name} ({mode}): updates {t}", rtol)
        _assert_close(sn, so, f"{name} ({mode}): state", rtol)


def test_state_types_and_names_match_optax():
    p = _params()
    for make in (lambda m: m.scale_by_rms(bias_correction=True), lambda m: m.scale_by_adan(),
                 lambda m: m.scale_by_factored_rms(), lambda m: m.apply_if_finite(m.sgd(1.0), 1),
                 lambda m: m.MultiSteps(m.sgd(1.0), 2).gradient_transformation(),
                 lambda m: m.zero_nans(), lambda m: m.scale_by_novograd()):
        sn, so = make(no).init(p), make(optax).init(p)
        assert type(sn).__name__ == type(so).__name__
        assert sn._fields == so._fields
    assert np.asarray(no.scale_by_lion().init(p).count).dtype == np.int32


def test_bfloat16_first_moment_matches_eager_optax():
    # Under jax.jit XLA keeps bfloat16 products in float32 inside fusions; eager optax rounds
    # each as Nova does (eager and jitted).
    params = _params()
    grads = _grads(params, n=3)
    po, so, _ = _run(optax.adam(1e-2, mu_dtype=xnp.bfloat16), params, grads,
                     optax.apply_updates)
    for jit in (None, nova.jit):
        pn, sn, _ = _run(no.adam(1e-2, mu_dtype=jnp.bfloat16), params, grads, no.apply_updates,
                         jit=jit)
        assert sn[0].mu["w"].dtype == jnp.bfloat16 and sn[0].nu["w"].dtype == np.float32
        _assert_close(pn, po, "bfloat16 first moment: parameters")
        _assert_close(sn, so, "bfloat16 first moment: state")


def test_multisteps_accumulates_then_applies():
    params = _params()
    grads = _grads(params, n=6)
    ms = no.MultiSteps(no.adam(0.1), every_k_schedule=3)
    step = nova.jit(ms.update)
    state = ms.init(params)
    direct = no.adam(0.1)
    d_state = direct.init(params)
    for t, g in enumerate(grads):
        u, state = step(g, state, params)
        if t % 3 < 2:  # accumulating: nothing moves, the inner optimizer is untouched
            assert all(np.all(np.asarray(x) == 0) for x in tree_leaves(u))
            assert int(state.inner_opt_state[0].count) == t // 3
            assert not bool(ms.has_updated(state))
        else:  # the inner step on the mean of the last three gradients
            mean = {k: np.mean([grads[s][k] for s in range(t - 2, t + 1)], axis=0)
                    for k in params}
            want, d_state = direct.update(mean, d_state, params)
            for k in params:
                np.testing.assert_allclose(np.asarray(u[k]), np.asarray(want[k]), rtol=1e-5)
            assert bool(ms.has_updated(state))
            assert int(state.gradient_step) == (t + 1) // 3
            assert all(np.all(np.asarray(a) == 0) for a in tree_leaves(state.acc_grads))
    assert step.cache_info().misses == 1


def _nan_grads(params):
    grads = _grads(params, n=STEPS)
    grads[1]["w"][2, 3] = np.nan
    grads[2]["b"][0] = np.inf
    grads[4]["s"] = np.asarray(np.nan, np.float32)
    return grads


def test_apply_if_finite_skips_and_counts_non_finite_steps():
    params = _params()
    grads = _nan_grads(params)
    opt = no.apply_if_finite(no.adam(0.1), max_consecutive_errors=5)
    step = nova.jit(opt.update)
    state = opt.init(params)
    for t, g in enumerate(grads):
        count_before = int(state.inner_state[0].count)
        u, state = step(g, state, params)
        bad = t in (1, 2, 4)
        assert bool(state.last_finite) is (not bad)
        if bad:
            assert all(np.all(np.asarray(x) == 0) for x in tree_leaves(u))
            assert int(state.inner_state[0].count) == count_before
        else:
            assert all(np.all(np.isfinite(np.asarray(x))) for x in tree_leaves(u))
    assert int(state.total_notfinite) == 3 and int(state.notfinite_count) == 0
    assert int(state.inner_state[0].count) == 3
    # With max_consecutive_errors=1 the second bad step in a row is applied: the same as optax.
    for make in (lambda m: m.apply_if_finite(m.adam(0.1), 1),
                 lambda m: m.MultiSteps(m.adam(0.1), 2, should_skip_update_fn=m.skip_not_finite
                                        ).gradient_transformation(),
                 lambda m: m.MultiSteps(m.sgd(0.1), 2, should_skip_update_fn=functools.partial(
                     m.skip_large_updates, max_squared_norm=600.0)).gradient_transformation(),
                 lambda m: m.zero_nans()):
        _, sn, un = _run(make(no), params, grads, no.apply_updates, jit=nova.jit)
        _, so, uo = _run(make(optax), params, grads, optax.apply_updates, jit=jax.jit)
        for t in range(STEPS):
            _assert_close(un[t], uo[t], f"non-finite steps: updates {t}")
        _assert_close(sn, so, "non-finite steps: state")


def test_masked_leaves_untouched():
    params = _params()
    g = _grads(params, n=1)[0]
    opt = no.masked(no.chain(no.scale(-3.0), no.adam(0.1)), lambda p: {"w": True, "b": False,
                                                                       "s": False})
    state = opt.init(params)
    assert isinstance(state.inner_state[1][0].mu["b"], no.MaskedNode)
    u, state = nova.jit(opt.update)(g, state, params)
    np.testing.assert_array_equal(np.asarray(u["b"]), g["b"])
    np.testing.assert_array_equal(np.asarray(u["s"]), g["s"])
    assert not np.allclose(np.asarray(u["w"]), g["w"])
    # set_to_zero under a label freezes that group
    frozen = no.multi_transform({"train": no.sgd(0.1), "freeze": no.set_to_zero()},
                                lambda p: {"w": "train", "b": "freeze", "s": "freeze"})
    u, _ = frozen.update(g, frozen.init(params), params)
    np.testing.assert_array_equal(np.asarray(u["b"]), np.zeros(5, np.float32))
    np.testing.assert_allclose(np.asarray(u["w"]), -0.1 * g["w"], rtol=1e-6)


def test_inject_hyperparams_with_a_schedule():
    params = _params()
    grads = _grads(params)

    def make(m):
        return m.inject_hyperparams(m.adamw)(learning_rate=m.linear_schedule(0.1, 0.01, 4),
                                             b1=0.8, weight_decay=0.05)

    opt = make(no)
    step = nova.jit(opt.update)
    sn = opt.init(params)
    so = make(optax).init(params)
    ostep = jax.jit(make(optax).update)
    for t, g in enumerate(grads):
        un, sn = step(g, sn, params)
        uo, so = ostep(g, so, params)
        _assert_close(un, uo, f"inject_hyperparams: updates {t}")
        _assert_close(sn.hyperparams, so.hyperparams, f"inject_hyperparams: hyperparams {t}")
        _assert_close(sn.inner_state, so.inner_state, f"inject_hyperparams: inner state {t}")
        want_lr = 0.1 + (0.01 - 0.1) * min(t, 4) / 4
        np.testing.assert_allclose(float(sn.hyperparams["learning_rate"]), want_lr, rtol=1e-6)
        assert sn.hyperparams["b1"].dtype == np.float32
    assert step.cache_info().misses == 1
    # A hyperparameter written into the state is used at the next step (no retrace).
    sn.hyperparams["b1"] = jnp.asarray(0.5, dtype=jnp.float32)
    so.hyperparams["b1"] = xnp.asarray(0.5, dtype=xnp.float32)
    un, sn = step(grads[0], sn, params)
    uo, so = ostep(grads[0], so, params)
    _assert_close(un, uo, "inject_hyperparams: after changing b1")
    assert step.cache_info().misses == 1
    # An integer a factory needs as a Python int stays static.
    injected = no.inject_hyperparams(no.adafactor, static_args="min_dim_size_to_factor")(
        learning_rate=0.01, min_dim_size_to_factor=4)
    plain = no.adafactor(0.01, min_dim_size_to_factor=4)
    ui, si = injected.update(grads[0], injected.init(params), params)
    up, _ = plain.update(grads[0], plain.init(params), params)
    assert set(si.hyperparams) == {"learning_rate", "decay_rate", "decay_offset",
                                   "clipping_threshold", "eps"}
    for k in params:
        np.testing.assert_allclose(np.asarray(ui[k]), np.asarray(up[k]), rtol=1e-6)


def test_meta_gradient_through_injected_learning_rate():
    params = {"w": _params()["w"]}
    x = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32)

    def meta_loss(m, np_, grad, lr):
        opt = m.inject_hyperparams(m.rmsprop)(learning_rate=0.1, momentum=0.9)
        state = opt.init(params)
        state.hyperparams["learning_rate"] = lr
        p = params
        for _ in range(2):
            g = grad(lambda q: np_.sum(np_.tanh(x @ q["w"]) ** 2))(p)
            u, state = opt.update(g, state, p)
            p = m.apply_updates(p, u)
        return np_.sum(np_.tanh(x @ p["w"]) ** 2)

    lr = np.float32(0.05)
    got = nova.jit(nova.grad(functools.partial(meta_loss, no, jnp, nova.grad)))(lr)
    want = jax.grad(functools.partial(meta_loss, optax, xnp, jax.grad))(lr)
    np.testing.assert_allclose(float(got), float(want), rtol=1e-4)
    assert abs(float(want)) > 1e-3


def test_lookahead_matches_optax():
    params = _params()
    grads = _grads(params)

    def make(m):
        return m.lookahead(m.sgd(0.1, momentum=0.9), sync_period=2, slow_step_size=0.5,
                           reset_state=True)

    pn = no.LookaheadParams.init_synced(params)
    po = optax.LookaheadParams.init_synced(params)
    opt_n, opt_o = make(no), make(optax)
    sn, so = opt_n.init(pn), opt_o.init(po)
    step_n, step_o = nova.jit(opt_n.update), jax.jit(opt_o.update)
    for t, g in enumerate(grads):
        un, sn = step_n(g, sn, pn)
        uo, so = step_o(g, so, po)
        pn, po = no.apply_updates(pn, un), optax.apply_updates(po, uo)
        _assert_close(pn, po, f"lookahead: params {t}")
    _assert_close(sn, so, "lookahead: state")


def test_stateless_helpers_and_traced_control():
    params = _params()
    g = _grads(params, n=1)[0]
    tx = no.stateless_with_tree_map(lambda u, p: u * 2 + p)
    u, s = tx.update(g, tx.init(params), params)
    assert s == no.EmptyState()
    np.testing.assert_allclose(np.asarray(u["w"]), g["w"] * 2 + params["w"], rtol=1e-6)
    tx = no.stateless(lambda u, p: nova.tree_util.tree_map(lambda x: -x, u) if p is None else u)
    u, _ = tx.update(g, tx.init(params))
    np.testing.assert_array_equal(np.asarray(u["b"]), -g["b"])
    # A traced hyperparameter is refused outside inject_hyperparams, accepted inside it.
    with pytest.raises(TypeError, match="scale_by_rms: decay is a traced value"):
        nova.jit(lambda d: no.rmsprop(0.1, decay=d).init(params))(np.float32(0.9))


def test_bad_inputs_raise():
    params = _params()
    g = _grads(params, n=1)[0]
    with pytest.raises(ValueError, match="masked: the mask's structure"):
        no.masked(no.sgd(0.1), {"w": True, "b": False}).init(params)
    with pytest.raises(TypeError, match="masked: inner must be a GradientTransformation"):
        no.masked(lambda g: g, {"w": True})
    with pytest.raises(ValueError, match=r"multi_transform: the labels \['c'\] have no"):
        no.multi_transform({"a": no.sgd(0.1)}, {"w": "a", "b": "a", "s": "c"}).init(params)
    with pytest.raises(ValueError, match="MultiSteps: every_k_schedule must be >= 1, got 0"):
        no.MultiSteps(no.sgd(0.1), 0)
    with pytest.raises(TypeError, match="MultiSteps: every_k_schedule must be an int"):
        no.MultiSteps(no.sgd(0.1), 2.5)
    bad_skip = no.MultiSteps(no.sgd(0.1), 2, should_skip_update_fn=lambda u, s, p: (s, ()))
    with pytest.raises(ValueError, match="0-d bool first, got shape \\(\\) and dtype int32"):
        bad_skip.update(g, bad_skip.init(params), params)
    with pytest.raises(ValueError, match="max_consecutive_errors must be >= 0"):
        no.apply_if_finite(no.sgd(0.1), -1)
    with pytest.raises(ValueError, match="static_args \\['beta'\\] are not parameters of adam"):
        no.inject_hyperparams(no.adam, static_args="beta")
    with pytest.raises(ValueError, match="scale_by_lion: mode must be one of"):
        no.scale_by_lion(mode="soft")
    with pytest.raises(ValueError, match="scale_by_sm3: parameters must have ndim >= 1"):
        no.sm3(0.1).init(params)
    with pytest.raises(ValueError, match="scale_by_trust_ratio: update needs params"):
        no.scale_by_trust_ratio().update(g, no.EmptyState())
    with pytest.raises(ValueError, match="scale_by_rms: decay must be in \\[0.0, 1.0\\]"):
        no.rmsprop(0.1, decay=1.5)
    with pytest.raises(ValueError, match="named_chain: the names must be unique"):
        no.named_chain(("a", no.sgd(0.1)), ("a", no.adam(0.1)))
    with pytest.raises(ValueError, match="lookahead: sync_period must be >= 1"):
        no.lookahead(no.sgd(0.1), 0, 0.5)
    la = no.lookahead(no.sgd(0.1), 2, 0.5)
    with pytest.raises(TypeError, match="lookahead: update needs params as LookaheadParams"):
        la.update(g, la.init(no.LookaheadParams.init_synced(params)), params)
    with pytest.raises(ValueError, match="adamw: weight_decay must be in \\[0.0, inf\\)"):
        no.adamw(0.1, weight_decay=-1.0)
    with pytest.raises(ValueError, match="unitwise_norm: expected a parameter with 1 to 5"):
        no.unitwise_norm(np.ones((1, 2, 1, 2, 1, 2), np.float32))
    with pytest.raises(ValueError, match="min_step_size \\(1.0\\) exceeds max_step_size"):
        no.rprop(0.1, min_step_size=1.0, max_step_size=0.5)
    with pytest.raises(ValueError, match="scale_by_adam: mu_dtype must be a float dtype, got "
                                         "int32"):
        no.adam(0.1, mu_dtype=np.int32)
    with pytest.raises(ValueError, match="scale_by_adam.update: update leaf 0 has shape"):
        tx = no.nadam(0.1)
        tx.update({**g, "b": np.ones(3, np.float32)}, tx.init(params), params)
