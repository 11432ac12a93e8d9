"""The rest of optax's public API in nova.optim, checked against optax on the same inputs:
tree_utils, monitoring (snapshot, monitor, measure_with_ema, incremental/periodic updates),
per-example clipping, optimistic_adam, DoG, tree_map_params, power iteration, matrix inverse
roots and the Hungarian methods."""

import warnings

import jax
import jax.numpy as xnp
import nova.numpy as jnp
import numpy as np
import optax
import optax.tree_utils as otu
import pytest

import nova
from nova import optim
from nova.optim import tree_utils as tu

RNG = np.random.default_rng(0)
A = {"w": RNG.standard_normal((2, 3)).astype(np.float32),
     "b": RNG.standard_normal(3).astype(np.float32)}
B = {"w": RNG.standard_normal((2, 3)).astype(np.float32),
     "b": RNG.standard_normal(3).astype(np.float32)}


def nv(tree):
    return jax.tree.map(jnp.asarray, tree)


def close(x, y, tol=1e-5):
    xs, ys = jax.tree.leaves(jax.tree.map(np.asarray, x)), jax.tree.leaves(y)
    assert len(xs) == len(ys)
    for a, b in zip(xs, ys, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# --- tree_utils ----------------------------------------------------------------------------------


@pytest.mark.parametrize("ord_", [None, 1, 2, np.inf, "inf"])
@pytest.mark.parametrize("squared", [False, True])
def test_tree_norm(ord_, squared):
    close(tu.tree_norm(nv(A), ord_, squared), otu.tree_norm(A, ord_, squared))


def test_tree_math_matches_optax():
    a, b = nv(A), nv(B)
    close(tu.tree_add(a, b, a), otu.tree_add(A, B, A))
    close(tu.tree_sub(a, b), otu.tree_sub(A, B))
    close(tu.tree_mul(a, b), otu.tree_mul(A, B))
    close(tu.tree_div(a, b), otu.tree_div(A, B))
    close(tu.tree_scalar_mul(0.5, a), otu.tree_scale(0.5, A))
    close(tu.tree_add_scale(a, -2.0, b), otu.tree_add_scale(A, -2.0, B))
    close(tu.tree_vdot(a, b), otu.tree_vdot(A, B))
    close(tu.tree_sum(a), otu.tree_sum(A))
    close(tu.tree_max(a), otu.tree_max(A))
    close(tu.tree_min(a), otu.tree_min(A))
    assert tu.tree_size(a) == otu.tree_size(A) == 9
    close(tu.tree_l1_norm(a), otu.tree_norm(A, 1))
    close(tu.tree_linf_norm(a), otu.tree_norm(A, "inf"))
    close(tu.tree_l2_norm(a, squared=True), otu.tree_norm(A, squared=True))
    close(tu.tree_clip(a, -0.5, 0.5), otu.tree_clip(A, -0.5, 0.5))
    close(tu.tree_clip(a, None, 0.0), otu.tree_clip(A, None, 0.0))
    close(tu.tree_where(jnp.asarray(False), a, b), otu.tree_where(False, A, B))
    close(tu.tree_conj(a), otu.tree_conj(A))
    close(tu.tree_full_like(a, 3.0), otu.tree_full_like(A, 3.0))
    ones = tu.tree_ones_like(a, dtype=jnp.int32)
    assert ones["w"].dtype == np.int32 and np.all(np.asarray(ones["w"]) == 1)
    assert tu.tree_zeros_like(a)["b"].shape == (3,)
    assert tu.tree_cast(a, jnp.bfloat16)["w"].dtype == jnp.bfloat16


def test_tree_math_under_jit_and_grad():
    a, b = nv(A), nv(B)
    f = nova.jit(lambda x, y: tu.tree_norm(tu.tree_add_scale(x, 2.0, y)))
    close(f(a, b), otu.tree_norm(otu.tree_add_scale(A, 2.0, B)))
    g = nova.grad(lambda x: tu.tree_l2_norm(x, squared=True) + tu.tree_vdot(x, b))(a)
    close(g, jax.tree.map(lambda x, y: 2 * x + y, A, B))


def test_tree_dtype():
    mixed = {"a": jnp.ones(2, jnp.int32), "b": jnp.ones(2, jnp.float32)}
    assert tu.tree_dtype(nv(A)) == np.float32
    assert tu.tree_dtype(mixed, "promote") == np.float32
    assert tu.tree_dtype(mixed, "lowest") == np.int32
    with pytest.raises(ValueError, match="leaf 1 has dtype float32 but leaf 0 has int32"):
        tu.tree_dtype(mixed)
    with pytest.raises(ValueError, match="mixed_dtype_handler must be"):
        tu.tree_dtype(mixed, "max")
    with pytest.raises(ValueError, match="ord must be None, 1, 2 or inf"):
        tu.tree_norm(nv(A), 3)


def test_tree_get_set_and_map_params():
    opt = optim.chain(optim.add_noise(0.1, 0.5, 0), optim.adam(0.1))
    state = opt.init(nv(A))
    ostate = optax.chain(optax.add_noise(0.1, 0.5, 0), optax.adam(0.1)).init(A)
    with pytest.raises(KeyError, match="found 2 values for 'count'"):
        tu.tree_get(state, "count")
    with pytest.raises(KeyError):  # optax also finds several
        otu.tree_get(ostate, "count")
    assert int(tu.tree_get(state, "ScaleByAdamState").count) == 0
    assert tu.tree_get(state, "missing", default=7) == 7
    mu = tu.tree_get(state, "mu")
    assert set(mu) == {"b", "w"}
    new = tu.tree_set(state, lambda path, _: "ScaleByAdamState" in str(path[-1]),
                      count=jnp.asarray(5, jnp.int32))
    assert int(new[1][0].count) == 5 and int(new[0].count) == 0
    with pytest.raises(KeyError, match="no value for 'nope'"):
        tu.tree_set(state, nope=1)
    specs = {"w": "W", "b": "B"}
    mapped = optim.tree_map_params(opt, lambda _, s: s, state, specs,
                                   transform_non_params=lambda _: None)
    omapped = optax.tree_map_params(optax.chain(optax.add_noise(0.1, 0.5, 0), optax.adam(0.1)),
                                    lambda _, s: s, ostate, specs,
                                    transform_non_params=lambda _: None)
    assert mapped[1][0]._asdict() == omapped[1][0]._asdict()
    assert mapped[1][0].mu == specs and mapped[1][0].count is None


# --- monitoring ----------------------------------------------------------------------------------


def _run(nopt, oopt, steps=3, jit=False):
    x, ox = jnp.asarray([1.0, 2.0, 3.0]), xnp.asarray([1.0, 2.0, 3.0])
    ns, os_ = nopt.init(x), oopt.init(ox)
    step = nova.jit(nopt.update) if jit else nopt.update
    for _ in range(steps):
        nu, ns = step(2 * x, ns, x)
        ou, os_ = oopt.update(2 * ox, os_, ox)
        x, ox = optim.apply_updates(x, nu), optax.apply_updates(ox, ou)
    return x, ox, ns, os_


def test_snapshot_and_monitor():
    nopt = optim.chain(optim.sgd(0.1, momentum=0.9),
                       optim.monitor({"norm": tu.tree_norm,
                                      "is_clipped": optim.measure_with_ema(
                                          lambda u: tu.tree_norm(u) > 1.0, 0.9)}),
                       optim.snapshot("clipped_norm", tu.tree_norm),
                       optim.clip_by_global_norm(1.0))
    oopt = optax.chain(optax.sgd(0.1, momentum=0.9),
                       optax.monitor({"norm": optax.tree.norm,
                                      "is_clipped": optax.measure_with_ema(
                                          lambda u: optax.tree.norm(u) > 1.0, 0.9)}),
                       optax.snapshot("clipped_norm", optax.tree.norm),
                       optax.clip_by_global_norm(1.0))
    x, ox, ns, os_ = _run(nopt, oopt)
    close(x, ox)
    for key in ("norm", "is_clipped", "clipped_norm"):
        close(tu.tree_get(ns, key), optax.tree.get(os_, key))
    assert isinstance(ns[1], optim.MonitorState) and isinstance(ns[2], optim.SnapshotState)


def test_snapshot_under_jit_and_errors():
    nopt = optim.chain(optim.adam(0.1), optim.snapshot("n", tu.tree_norm))
    oopt = optax.chain(optax.adam(0.1), optax.snapshot("n", optax.tree.norm))
    x, ox, ns, os_ = _run(nopt, oopt, jit=True)
    close(x, ox)
    close(tu.tree_get(ns, "n"), optax.tree.get(os_, "n"))
    with pytest.raises(TypeError, match="measure must be callable"):
        optim.snapshot("n", 3)
    with pytest.raises(TypeError, match="measure 'x' must be callable"):
        optim.monitor({"x": 1.0})


def test_incremental_and_periodic_update():
    a, b = nv(A), nv(B)
    close(optim.incremental_update(a, b, 0.25), optax.incremental_update(A, B, 0.25))
    f = nova.jit(optim.periodic_update)
    for steps in (4, 5):
        close(f(a, b, jnp.asarray(steps), 2), optax.periodic_update(A, B, steps, 2))


# --- clipping, optimizers ------------------------------------------------------------------------


@pytest.mark.parametrize("clip", [np.inf, 0.0, 1.25])
def test_per_example_global_norm_clip(clip):
    g = [np.array([[0, 0, 0], [0, 3, 4], [4, 0, 3], [3, 4, 0]])]
    s, n = optim.per_example_global_norm_clip([jnp.asarray(g[0])], clip)
    os_, on = optax.per_example_global_norm_clip([xnp.asarray(g[0])], clip)
    close(s, os_)
    assert int(n) == int(on) and n.dtype == np.int32


@pytest.mark.parametrize("uniform", [True, False])
def test_per_example_layer_norm_clip(uniform):
    g = {"a": RNG.standard_normal((4, 3)).astype(np.float32),
         "b": RNG.standard_normal((4, 2, 2)).astype(np.float32)}
    out = nova.jit(lambda t: optim.per_example_layer_norm_clip(t, 1.0, uniform))(nv(g))
    close(out, optax.per_example_layer_norm_clip(g, 1.0, uniform))
    with pytest.raises(ValueError, match=r"same batch dimension on axis 0.*\(4, 3\), \(3,\)"):
        optim.per_example_layer_norm_clip([jnp.ones((4, 3)), jnp.ones(3)], 1.0)


def test_optimistic_adam():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        oopt = optax.optimistic_adam(0.05, 0.5)
    with pytest.warns(DeprecationWarning, match="optimistic_adam_v2"):
        nopt = optim.optimistic_adam(0.05, 0.5)
    x, ox, _, _ = _run(nopt, oopt, steps=4, jit=True)
    close(x, ox)
    with pytest.raises(ValueError, match="takes no schedules"), pytest.warns(DeprecationWarning):
        optim.optimistic_adam(lambda c: 0.1)


def test_scale_by_distance_over_gradients():
    nopt = optim.chain(optim.scale_by_distance_over_gradients(reps_rel=1e-4), optim.scale(-1.0))
    oopt = optax.chain(optax.scale_by_distance_over_gradients(reps_rel=1e-4), optax.scale(-1.0))
    x, ox, ns, os_ = _run(nopt, oopt, steps=4, jit=True)
    close(x, ox)
    close(ns[0], os_[0])
    with pytest.raises(ValueError, match="update needs params"):
        nopt.update(jnp.ones(3), ns)
    with pytest.raises(ValueError, match="reps_rel must be in"):
        optim.scale_by_distance_over_gradients(reps_rel=-1.0)


# --- linear algebra ------------------------------------------------------------------------------

_M = RNG.standard_normal((5, 5)).astype(np.float32)
SPD = _M @ _M.T + np.eye(5, dtype=np.float32)


def test_power_iteration():
    ev, vec = nova.jit(optim.power_iteration)(jnp.asarray(SPD))
    oev, ovec = optax.power_iteration(xnp.asarray(SPD))
    close(ev, oev)
    close(np.abs(np.asarray(vec)), np.abs(np.asarray(ovec)), tol=1e-4)
    v0 = {"x": jnp.ones(5)}
    ev2, vec2 = optim.power_iteration(lambda v: {"x": jnp.asarray(SPD) @ v["x"]}, v0=v0)
    close(ev2, oev)
    assert set(vec2) == {"x"}
    with pytest.raises(ValueError, match="v0 must be given"):
        optim.power_iteration(lambda v: v)
    with pytest.raises(ValueError, match=r"must be square \(n, n\), got shape \(2, 3\)"):
        optim.power_iteration(jnp.ones((2, 3)))


@pytest.mark.parametrize("p", [2, 4])
def test_matrix_inverse_pth_root(p):
    root, err = nova.jit(lambda m: optim.matrix_inverse_pth_root(m, p))(jnp.asarray(SPD))
    oroot, oerr = optax.matrix_inverse_pth_root(xnp.asarray(SPD), p)
    close(root, oroot, tol=1e-4)
    assert float(err) < 1e-5 and float(oerr) < 1e-5
    exact = np.linalg.matrix_power(np.asarray(root, np.float64), p) @ SPD
    np.testing.assert_allclose(exact, np.eye(5), atol=1e-3)


def test_matrix_inverse_pth_root_errors_and_1x1():
    root, _ = optim.matrix_inverse_pth_root(jnp.asarray([[4.0]]), 2)
    close(root, optax.matrix_inverse_pth_root(xnp.asarray([[4.0]]), 2)[0])
    with pytest.raises(TypeError, match="p must be an int"):
        optim.matrix_inverse_pth_root(jnp.eye(2), 2.5)
    with pytest.raises(ValueError, match="p must be >= 1"):
        optim.matrix_inverse_pth_root(jnp.eye(2), 0)


# --- assignment ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["hungarian_algorithm", "base_hungarian_algorithm"])
@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3)])
def test_hungarian_matches_optax(name, shape):
    cost = RNG.random(shape).astype(np.float32)
    i, j = nova.jit(getattr(optim.assignment, name))(jnp.asarray(cost))
    oi, oj = getattr(optax.assignment, name)(xnp.asarray(cost))
    np.testing.assert_array_equal(np.asarray(i), np.asarray(oi))
    np.testing.assert_array_equal(np.asarray(j), np.asarray(oj))
    assert i.dtype == np.int32 and j.dtype == np.int32


@pytest.mark.parametrize("name", ["hungarian_algorithm", "base_hungarian_algorithm"])
def test_hungarian_eager_integer_ties(name):
    cost = np.array([[90, 80, 75, 70], [35, 85, 55, 65], [125, 95, 90, 95],
                     [45, 110, 95, 115], [50, 100, 90, 100]])
    i, j = getattr(optim.assignment, name)(jnp.asarray(cost))
    i, j = np.asarray(i), np.asarray(j)
    assert cost[i, j].sum() == 265 and len(set(i)) == len(set(j)) == 4
    e = getattr(optim.assignment, name)(jnp.zeros((0, 3)))
    assert e[0].shape == (0,) and e[1].shape == (0,)


def test_hungarian_errors():
    with pytest.raises(ValueError, match=r"must be 2-D \(n, m\), got shape \(3,\)"):
        optim.assignment.hungarian_algorithm(jnp.ones(3))
    with pytest.raises(TypeError, match="must have a real dtype, got bool"):
        optim.assignment.base_hungarian_algorithm(jnp.ones((2, 2), bool))
