"""nova.optim's small optax utilities against optax: freeze, selective_transform,
scale_gradient, normalize_by_update_norm, safe_increment and the empty-state aliases."""

import jax
import jax.numpy as jjnp
import nova.numpy as np
import numpy as onp
import optax
import pytest

import nova
import nova.optim as no

jax.config.update("jax_platforms", "cpu")


def close(a, b, tol=1e-6):
    onp.testing.assert_allclose(onp.asarray(a), onp.asarray(b), rtol=tol, atol=tol)


PARAMS = {"a": onp.array([1.0, -2.0, 3.0], onp.float32), "b": onp.array([[0.5, 4.0]], onp.float32)}
GRADS = {"a": onp.array([0.3, 0.1, -0.7], onp.float32), "b": onp.array([[2.0, -1.0]], onp.float32)}


def _nova(tree):
    return {k: np.asarray(v) for k, v in tree.items()}


def _compare(opt_n, opt_o, steps=3, jit=False):
    pn, po = _nova(PARAMS), {k: jjnp.asarray(v) for k, v in PARAMS.items()}
    sn, so = opt_n.init(pn), opt_o.init(po)
    update = nova.jit(opt_n.update) if jit else opt_n.update
    for i in range(steps):
        g = {k: v * (i + 1) for k, v in GRADS.items()}
        un, sn = update(_nova(g), sn, pn)
        uo, so = opt_o.update(g, so, po)
        for k in PARAMS:
            close(un[k], uo[k], 1e-5)
        pn, po = no.apply_updates(pn, un), optax.apply_updates(po, uo)


@pytest.mark.parametrize("jit", [False, True])
def test_freeze_and_selective_transform_match_optax(jit):
    mask = {"a": True, "b": False}
    _compare(no.chain(no.freeze(mask), no.sgd(0.1)),
             optax.chain(optax.freeze(mask), optax.sgd(0.1)), jit=jit)
    _compare(no.selective_transform(no.adam(0.1), freeze_mask=mask),
             optax.selective_transform(optax.adam(0.1), freeze_mask=mask), jit=jit)


@pytest.mark.parametrize("jit", [False, True])
def test_normalize_by_update_norm_matches_optax(jit):
    _compare(no.normalize_by_update_norm(scale_factor=-0.5, eps=1e-3),
             optax.normalize_by_update_norm(scale_factor=-0.5, eps=1e-3), jit=jit)


def test_scale_gradient_value_and_gradient():
    x = onp.array([0.5, -1.5, 2.0], onp.float32)

    def fn(v):
        return np.sum(no.scale_gradient(v, 0.25) ** 2)

    def fj(v):
        return jjnp.sum(optax.scale_gradient(v, 0.25) ** 2)

    close(no.scale_gradient(np.asarray(x), 0.25), x, 0.0)
    close(nova.grad(fn)(np.asarray(x)), jax.grad(fj)(x))
    close(nova.jit(nova.grad(fn))(np.asarray(x)), jax.grad(fj)(x))
    close(nova.grad(lambda v: np.sum(no.scale_gradient(v, 0.0) * v))(np.asarray(x)), x)
    tree = no.scale_gradient({"w": np.asarray(x)}, 2.0)
    close(tree["w"], x, 0.0)


def test_safe_increment_saturates_like_optax():
    for value, dtype in [(1, onp.int32), (2**31 - 1, onp.int32), (127, onp.int8),
                         (3.5, onp.float32), (onp.finfo(onp.float32).max, onp.float32)]:
        got = no.safe_increment(np.asarray(onp.array(value, dtype)))
        want = optax.safe_increment(jjnp.asarray(onp.array(value, dtype)))
        assert onp.dtype(got.dtype) == onp.dtype(want.dtype)
        close(got, want, 0.0)
    assert no.safe_int32_increment is no.safe_increment
    close(nova.jit(no.safe_increment)(np.asarray(7, dtype=np.int32)), 8, 0.0)
    with pytest.raises(ValueError, match="integer or float dtype, got bool"):
        no.safe_increment(np.asarray(True))


def test_state_aliases_and_init_empty_state():
    for name in ["ClipState", "ClipByGlobalNormState", "ScaleState", "ScaleByTrustRatioState",
                 "NonNegativeParamsState", "AdaptiveGradClipState"]:
        assert hasattr(optax, name)
        assert getattr(no, name) is no.EmptyState
    assert no.init_empty_state({"w": np.ones(2)}) == no.EmptyState()
    assert no.scale(2.0).init(np.ones(2)) == no.ScaleState()


def test_bad_input():
    with pytest.raises(ValueError, match="scale_factor must be nonzero"):
        no.normalize_by_update_norm(scale_factor=0.0)
    with pytest.raises(ValueError, match="eps must be in"):
        no.normalize_by_update_norm(eps=-1.0)
    with pytest.raises(TypeError, match="optimizer must be a GradientTransformation"):
        no.selective_transform("adam", freeze_mask={"a": True})
    with pytest.raises(TypeError, match="scale must be a real number"):
        no.scale_gradient(np.ones(2), "half")
