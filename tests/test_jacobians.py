"""jacrev, jacfwd and hessian against closed forms and central differences, their pytree
structure, their composition with jit, vmap and grad; and vjp's pullback called under jit,
vmap and grad (the reverse-mode Jacobian idiom), which records where it is called."""

import nova.numpy as jnp
import numpy as np
import pytest

import nova


def _fd_jacobian(f, x, eps=1e-6):
    """Central differences of a float64 NumPy function: shape f(x).shape + x.shape."""
    y = np.asarray(f(x))
    J = np.zeros(y.shape + x.shape)
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        J[(...,) + idx] = (np.asarray(f(x + d)) - np.asarray(f(x - d))) / (2 * eps)
    return J


def _sin_sum(x):
    return jnp.sin(x) * x.sum()


def _sin_sum_jacobian(x):
    return np.diag(np.cos(x) * x.sum()) + np.sin(x)[:, None]


X3 = np.array([0.3, -1.2, 2.0])


@pytest.mark.parametrize("jac", [nova.jacrev, nova.jacfwd])
def test_closed_form(jac):
    got = jac(_sin_sum)(X3)
    assert isinstance(got, nova.Array) and got.shape == (3, 3) and got.dtype == np.float64
    np.testing.assert_allclose(np.asarray(got), _sin_sum_jacobian(X3), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("jac", [nova.jacrev, nova.jacfwd])
def test_shapes_are_output_then_input(jac):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 4))
    x = rng.standard_normal((2, 2))

    def f(x):
        return jnp.tanh(A @ x.reshape(4)).reshape(2, 3)

    got = np.asarray(jac(f)(x))
    assert got.shape == (2, 3, 2, 2)
    ref = _fd_jacobian(lambda v: np.tanh(A @ v.reshape(4)).reshape(2, 3), x)
    np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-9)


def test_float32_keeps_dtype():
    x = X3.astype(np.float32)
    for jac in (nova.jacrev, nova.jacfwd):
        got = jac(_sin_sum)(x)
        assert got.dtype == np.float32
        np.testing.assert_allclose(np.asarray(got), _sin_sum_jacobian(X3), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("jac", [nova.jacrev, nova.jacfwd])
def test_pytrees_and_argnums(jac):
    a = np.array([1.0, 2.0, 3.0])
    b = {"w": np.array([[0.5, -1.0], [2.0, 0.25]]), "c": np.array(1.5)}

    def f(a, b, scale):
        u = a * b["c"] * scale
        v = (b["w"] ** 2).sum() + (a ** 2).sum()
        return {"u": u, "v": v}

    one = jac(f)(a, b, 2.0)  # argnums=0: inner leaves are a's blocks
    assert set(one) == {"u", "v"}
    np.testing.assert_allclose(np.asarray(one["u"]), np.diag(np.full(3, 3.0)))
    np.testing.assert_allclose(np.asarray(one["v"]), 2 * a)

    both = jac(f, argnums=(0, 1))(a, b, 2.0)
    assert isinstance(both["u"], tuple) and len(both["u"]) == 2
    du_da, du_db = both["u"]
    np.testing.assert_allclose(np.asarray(du_da), np.diag(np.full(3, 3.0)))
    assert du_db["w"].shape == (3, 2, 2) and du_db["c"].shape == (3,)
    np.testing.assert_allclose(np.asarray(du_db["w"]), 0.0)
    np.testing.assert_allclose(np.asarray(du_db["c"]), a * 2.0)
    dv_da, dv_db = both["v"]
    assert dv_db["w"].shape == (2, 2) and dv_db["c"].shape == ()
    np.testing.assert_allclose(np.asarray(dv_db["w"]), 2 * b["w"])
    np.testing.assert_allclose(np.asarray(dv_db["c"]), 0.0)
    np.testing.assert_allclose(np.asarray(dv_da), 2 * a)


@pytest.mark.parametrize("jac", [nova.jacrev, nova.jacfwd])
def test_has_aux(jac):
    J, aux = jac(lambda x: (_sin_sum(x), {"n": x.shape[0], "m": x.max()}), has_aux=True)(X3)
    np.testing.assert_allclose(np.asarray(J), _sin_sum_jacobian(X3), rtol=1e-13)
    assert aux["n"] == 3 and float(aux["m"]) == 2.0


@pytest.mark.parametrize("jac", [nova.jacrev, nova.jacfwd])
def test_under_jit(jac):
    f = nova.jit(jac(_sin_sum))
    for x in (X3, X3 * 2):
        np.testing.assert_allclose(np.asarray(f(x)), _sin_sum_jacobian(x), rtol=1e-13, atol=1e-14)


def test_vmap_of_jacrev_is_per_example():
    xs = np.random.default_rng(1).standard_normal((4, 3))
    got = np.asarray(nova.vmap(nova.jacrev(_sin_sum))(xs))
    assert got.shape == (4, 3, 3)
    for i in range(4):
        np.testing.assert_allclose(got[i], _sin_sum_jacobian(xs[i]), rtol=1e-13, atol=1e-14)


def _g(x):
    return (jnp.sin(x) ** 2).sum() * x[0]


def _g_hessian(x):
    H = np.diag(2 * np.cos(2 * x) * x[0])
    H[0, :] += np.sin(2 * x)
    H[:, 0] += np.sin(2 * x)
    return H


def test_hessian_closed_form_and_symmetric():
    for f in (nova.hessian(_g), nova.jit(nova.hessian(_g)), nova.jacrev(nova.jacrev(_g)),
              nova.jacfwd(nova.jacfwd(_g))):
        H = np.asarray(f(X3))
        np.testing.assert_allclose(H, _g_hessian(X3), rtol=1e-12, atol=1e-13)


def test_hessian_of_two_arguments_nests_blocks():
    def f(x, y):
        return (x ** 2).sum() * y[0] + jnp.dot(x, y[:3])

    x, y = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0, 4.0])
    (hxx, hxy), (hyx, hyy) = nova.hessian(f, argnums=(0, 1))(x, y)
    assert hxx.shape == (3, 3) and hxy.shape == (3, 4) and hyx.shape == (4, 3) and hyy.shape == (4, 4)
    np.testing.assert_allclose(np.asarray(hxx), 2 * y[0] * np.eye(3))
    ref_xy = np.zeros((3, 4))
    ref_xy[:, 0] = 2 * x
    ref_xy[:, :3] += np.eye(3)
    np.testing.assert_allclose(np.asarray(hxy), ref_xy)
    np.testing.assert_allclose(np.asarray(hyx), ref_xy.T)
    np.testing.assert_allclose(np.asarray(hyy), 0.0)


def test_grad_of_jacobian_trace_matches_hessian():
    # d/dx trace(J(x)) = sum_i d2 f_i / dx_i dx: a gradient through a whole Jacobian.
    def tr(x):
        return jnp.trace(nova.jacrev(_sin_sum)(x))

    got = np.asarray(nova.grad(tr)(X3))
    ref = _fd_jacobian(lambda v: np.trace(_sin_sum_jacobian(v)), X3)
    np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-8)


def test_softmax_cross_entropy_against_differences():
    rng = np.random.default_rng(2)
    W = rng.standard_normal((5, 4))

    def f(x):
        z = W @ x
        return z - jnp.log(jnp.exp(z).sum())

    def f_np(x):
        z = W @ x
        return z - np.log(np.exp(z).sum())

    x = rng.standard_normal(4)
    ref = _fd_jacobian(f_np, x)
    for jac in (nova.jacrev, nova.jacfwd):
        np.testing.assert_allclose(np.asarray(jac(f)(x)), ref, rtol=1e-7, atol=1e-9)


def test_errors():
    with pytest.raises(TypeError, match="jacrev requires floating-point inputs.*'x'"):
        nova.jacrev(lambda x: x * 2)(np.arange(3))
    with pytest.raises(TypeError, match="jacfwd requires floating-point inputs"):
        nova.jacfwd(lambda x: x * 2)(np.arange(3))
    with pytest.raises(TypeError, match="jacrev requires floating-point outputs.*int32"):
        nova.jacrev(lambda x: jnp.argmax(x))(X3)
    with pytest.raises(ValueError, match="argnums 2 refers to argument 2, but only 1"):
        nova.jacrev(_sin_sum, argnums=2)(X3)
    with pytest.raises(TypeError, match="argnums must be an int"):
        nova.jacfwd(_sin_sum, argnums=0.5)(X3)


# --- the pullback of vjp under other transforms --------------------------------------------------


def test_pullback_under_jit_vmap_and_grad():
    _, pullback = nova.vjp(_sin_sum, X3)
    J = _sin_sum_jacobian(X3)
    ct = np.array([1.0, -2.0, 0.5])
    (eager,) = pullback(ct)
    np.testing.assert_allclose(np.asarray(eager), ct @ J, rtol=1e-13)
    (jitted,) = nova.jit(pullback)(ct)
    np.testing.assert_allclose(np.asarray(jitted), ct @ J, rtol=1e-13)
    (rows,) = nova.vmap(pullback)(np.eye(3))
    np.testing.assert_allclose(np.asarray(rows), J, rtol=1e-13, atol=1e-14)
    # the pullback is linear in its cotangent: its gradient is J's column sums weighted by w
    w = np.array([0.25, 1.0, -1.0])
    g = nova.grad(lambda c: (pullback(c)[0] * w).sum())(ct)
    np.testing.assert_allclose(np.asarray(g), J @ w, rtol=1e-13)
    # the forward was not recomputed into the trace of the eager pullback call: still one result
    (again,) = pullback(ct)
    np.testing.assert_allclose(np.asarray(again), ct @ J, rtol=1e-13)


def test_pullback_inside_the_transform_that_made_it():
    # vjp inside jit, its pullback vmapped inside the same jit: the forward's values are
    # captured from the enclosing trace.
    def jac_inside(x):
        _, pb = nova.vjp(_sin_sum, x)
        return nova.vmap(pb)(jnp.eye(3, dtype=x.dtype))[0]

    np.testing.assert_allclose(np.asarray(nova.jit(jac_inside)(X3)), _sin_sum_jacobian(X3),
                               rtol=1e-13, atol=1e-14)
    # ... and inside grad: a second derivative through the vmapped pullback
    got = np.asarray(nova.grad(lambda x: jnp.trace(jac_inside(x)))(X3))
    ref = _fd_jacobian(lambda v: np.trace(_sin_sum_jacobian(v)), X3)
    np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-8)


def test_pullback_of_a_finished_jit_trace_still_raises():
    kept = []

    @nova.jit
    def f(x):
        _, pb = nova.vjp(_sin_sum, x)
        kept.append(pb)
        return x

    f(X3)
    with pytest.raises(nova.UnexpectedTracerError):
        kept[0](np.ones(3))
    with pytest.raises(nova.UnexpectedTracerError, match="pullback was made by vjp inside a jit"):
        nova.jit(kept[0])(np.ones(3))
