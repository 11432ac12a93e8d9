"""eigh / eigvalsh above the Jacobi crossover (nova/numpy_impl/eigh_tridiagonal.py:
Householder tridiagonalization, multisection, inverse iteration): values against NumPy,
the identities A V = V diag(w) and V^T V = I, repeated and clustered eigenvalues, the
tridiagonal stages against SciPy, jit, vmap, gradients against JAX, and the errors."""

import jax
import nova.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import nova
from nova.core.errors import ShapeError
from nova.numpy_impl import decompositions as D
from nova.numpy_impl import eigh_tridiagonal as et

LA = jnp.linalg
RNG = np.random.default_rng(7)


def _orthogonal(n):
    return np.linalg.qr(RNG.standard_normal((n, n)))[0]


def _check(a, dtype=np.float64, fn=None):
    w, v = (fn or nova.jit(LA.eigh))(a.astype(dtype))
    assert w.dtype == dtype and v.dtype == dtype
    w, v = np.asarray(w, np.float64), np.asarray(v, np.float64)
    n = a.shape[0]
    scale = np.abs(np.linalg.eigvalsh(a)).max() or 1.0  # the zero matrix: absolute
    tol = 1e-13 if dtype == np.float64 else 2e-6
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), atol=tol * scale * 10)
    np.testing.assert_allclose(a @ v - v * w, 0, atol=tol * scale * 10)
    np.testing.assert_allclose(v.T @ v, np.eye(n), atol=tol * 100)
    assert np.all(np.diff(w) >= 0)


def test_sizes_exercise_the_tridiagonal_solver():
    assert D.EIGH_TRIDIAGONAL_MIN_N <= 64


@pytest.mark.parametrize("n", [64, 128])
def test_random_symmetric_against_numpy(n):
    a = RNG.standard_normal((n, n))
    _check(a + a.T)


def test_float32():
    a = RNG.standard_normal((64, 64))
    _check(a @ a.T + 64 * np.eye(64), np.float32)


@pytest.mark.parametrize("n", [64, 128])
def test_identity_and_repeated_diagonal(n):
    _check(np.eye(n))
    d = np.repeat([-2.0, 0.5, 0.5, 3.0], n // 4)
    _check(np.diag(RNG.permutation(d)))
    q = _orthogonal(n)
    _check(q @ np.diag(d) @ q.T)


def test_rank_one_plus_identity_and_clusters():
    n = 64
    u = RNG.standard_normal(n)
    _check(np.eye(n) + np.outer(u, u))  # n - 1 eigenvalues exactly 1
    q = _orthogonal(n)
    w = np.sort(np.concatenate([1 + 1e-10 * np.arange(20), 2 + 1e-7 * np.arange(20),
                                RNG.standard_normal(24)]))
    _check(q @ np.diag(w) @ q.T)
    _check(np.zeros((n, n)))


def test_scaling_extremes():
    a = RNG.standard_normal((64, 64))
    a = a + a.T
    for s in (1e-150, 1e150):
        w = np.asarray(nova.jit(LA.eigvalsh)(a * s))
        np.testing.assert_allclose(w / s, np.linalg.eigvalsh(a), atol=1e-12 * np.abs(w / s).max())


def test_tridiagonal_stages_against_scipy():
    n = 70
    d, e = RNG.standard_normal(n), RNG.standard_normal(n - 1)
    e[[10, 40]] = 0.0  # T splits into blocks
    want = scipy.linalg.eigvalsh_tridiagonal(d, e)
    w = nova.jit(et.tridiagonal_eigvals)(jnp.asarray(d), jnp.asarray(e))
    np.testing.assert_allclose(np.asarray(w), want, atol=1e-13 * np.abs(want).max())
    z = np.asarray(nova.jit(et.tridiagonal_eigvecs)(jnp.asarray(d), jnp.asarray(e), w))
    t = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
    np.testing.assert_allclose(t @ z - z * np.asarray(w), 0, atol=1e-13 * np.abs(want).max())
    np.testing.assert_allclose(z.T @ z, np.eye(n), atol=1e-12)
    a = RNG.standard_normal((n, n))
    a = a + a.T
    dd, ee, q = nova.jit(et.tridiagonalize)(jnp.asarray(a))
    tt = np.diag(np.asarray(dd)) + np.diag(np.asarray(ee), 1) + np.diag(np.asarray(ee), -1)
    np.testing.assert_allclose(np.asarray(q) @ tt @ np.asarray(q).T, a, atol=1e-12)


def test_vmap_and_batches():
    a = RNG.standard_normal((2, 48, 48))
    a = a + np.swapaxes(a, 1, 2)
    w = np.asarray(nova.vmap(LA.eigvalsh)(a))
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), atol=1e-12 * np.abs(w).max())
    w2, v2 = LA.eigh(a)
    assert w2.shape == (2, 48) and v2.shape == (2, 48, 48)
    np.testing.assert_allclose(np.asarray(w2), np.linalg.eigvalsh(a), atol=1e-12 * 20)


def test_gradients_against_jax():
    n = 48
    a = RNG.standard_normal((n, n))
    a = a + a.T
    c = RNG.standard_normal(n)
    m = RNG.standard_normal((n, n))

    def f(xp, x):
        w, v = xp.linalg.eigh(x)
        return xp.sum(w * c) + xp.sum((v * v) * m)  # sign-invariant in the eigenvectors

    g = np.asarray(nova.jit(nova.grad(lambda x: f(jnp, x)))(a))
    with jax.enable_x64(True):  # (scoped: a global switch changes other tests' references)
        want = np.asarray(jax.grad(lambda x: f(jax.numpy, x))(a))
    np.testing.assert_allclose(g, want, rtol=1e-7, atol=1e-8 * np.abs(want).max())
    gv = np.asarray(nova.grad(lambda x: jnp.sum(LA.eigvalsh(x) * c))(a))
    with jax.enable_x64(True):
        wantv = np.asarray(jax.grad(lambda x: jax.numpy.sum(jax.numpy.linalg.eigvalsh(x) * c))(a))
    np.testing.assert_allclose(gv, wantv, atol=1e-10)


def test_errors():
    with pytest.raises(ValueError, match="eigvalsh: UPLO must be 'L' or 'U', got 'X'"):
        LA.eigvalsh(np.eye(64), UPLO="X")
    with pytest.raises(ShapeError, match=r"eigvalsh: a must be square.*\(64, 63\)"):
        LA.eigvalsh(np.ones((64, 63)))
    with pytest.raises(ShapeError, match=r"eigh: a must have at least 2 dimensions.*\(64,\)"):
        LA.eigh(np.ones(64))
