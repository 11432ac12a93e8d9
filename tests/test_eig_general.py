"""eig / eigvals of general real matrices (nova/numpy_impl/eig_general.py, eig_schur.py:
Hessenberg reduction, Francis double-shift QR, back substitution on the Schur form) and
roots (nova/numpy_impl/polynomials.py): eigenvalues against NumPy and JAX (matched by
nearest, the order is not specified), the residuals A v = lambda v, unit norms and the
conjugate-pair structure, repeated / real / defective spectra, batches, jit, vmap,
derivatives against JAX and finite differences, and the errors."""

import jax
import jax.numpy as jjnp
import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova.core.errors import ShapeError
from nova.numpy_impl import eig_schur

LA = jnp.linalg
RNG = np.random.default_rng(11)


def _match(w, ref):
    """The largest distance between w's entries and ref's after a greedy nearest pairing."""
    w, ref = list(np.asarray(w, np.complex128)), list(np.asarray(ref, np.complex128))
    assert len(w) == len(ref)
    worst = 0.0
    for x in w:
        d = [abs(x - y) for y in ref]
        k = int(np.argmin(d))
        worst = max(worst, d[k])
        ref.pop(k)
    return worst


def _tol(dtype):
    return 1e-12 if dtype == np.float64 else 3e-5


def _check_eig(a, w, v, dtype):
    a = np.asarray(a, np.float64)
    w, v = np.asarray(w), np.asarray(v)
    cdt = np.complex128 if dtype == np.float64 else np.complex64
    assert w.dtype == cdt and v.dtype == cdt
    n = a.shape[-1]
    scale = max(np.abs(a).max(), 1.0) * n
    assert _match(w, np.linalg.eigvals(a)) <= _tol(dtype) * scale
    np.testing.assert_allclose(a @ v - v * w[None, :], 0, atol=_tol(dtype) * scale)
    np.testing.assert_allclose(np.linalg.norm(v, axis=0), 1, atol=_tol(dtype) * n)
    # real eigenvalues have real eigenvectors; a conjugate pair conjugate ones
    real = w.imag == 0
    assert np.all(v[:, real].imag == 0)
    for k in range(n - 1):
        if w[k].imag > 0:
            assert w[k + 1] == np.conj(w[k])
            np.testing.assert_array_equal(v[:, k + 1], np.conj(v[:, k]))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 32])
def test_eigvals_random_float64_against_numpy(n):
    a = RNG.standard_normal((n, n))
    w = LA.eigvals(a)
    assert w.dtype == np.complex128 and w.shape == (n,)
    assert _match(w, np.linalg.eigvals(a)) <= 1e-12 * n
    if n >= 5:  # a random matrix of this size has complex-conjugate pairs
        assert np.any(np.abs(np.asarray(w).imag) > 1e-3)


@pytest.mark.parametrize("n", [4, 32])
def test_eigvals_float32_under_jit_against_jax(n):
    a = RNG.standard_normal((n, n)).astype(np.float32)
    w = nova.jit(LA.eigvals)(a)
    assert w.dtype == np.complex64
    ref = jjnp.linalg.eigvals(a)
    assert ref.dtype == np.complex64
    assert _match(w, ref) <= 3e-5 * n


@pytest.mark.parametrize("n,dtype", [(2, np.float64), (7, np.float64), (32, np.float64),
                                     (7, np.float32), (32, np.float32)])
def test_eig_residuals_norms_and_pairs(n, dtype):
    a = RNG.standard_normal((n, n)).astype(dtype)
    w, v = nova.jit(LA.eig)(a)
    _check_eig(a, w, v, dtype)


def test_eig_against_jax_up_to_phase():
    a = RNG.standard_normal((6, 6))
    w, v = LA.eig(a)
    with jax.enable_x64(True):
        wj, vj = jjnp.linalg.eig(a)
        wj, vj = np.asarray(wj), np.asarray(vj)
    w, v = np.asarray(w), np.asarray(v)
    for k in range(6):
        j = int(np.argmin(np.abs(wj - w[k])))
        assert abs(wj[j] - w[k]) < 1e-12
        assert abs(abs(np.vdot(vj[:, j], v[:, k])) - 1) < 1e-12  # same vector up to phase


def _similar(d, seed):
    s = np.random.default_rng(seed).standard_normal((len(d), len(d))) + 3 * np.eye(len(d))
    return s @ np.diag(d) @ np.linalg.inv(s)


@pytest.mark.parametrize("case", ["repeated", "diagonal", "triangular", "rotation",
                                  "symmetric", "zero", "permutation"])
def test_special_spectra(case):
    m = RNG.standard_normal((6, 6))
    a = {
        "repeated": _similar([1.0, 1.0, 2.0, 3.0, 3.0, -1.0], 1),
        "diagonal": np.diag([3.0, -1.0, 2.0, 2.0, 0.5, 7.0]),
        "triangular": np.triu(RNG.standard_normal((6, 6))),
        "rotation": np.kron(np.eye(3), np.array([[0.0, -1.0], [1.0, 0.0]])),
        "symmetric": m + m.T,
        "zero": np.zeros((6, 6)),
        "permutation": np.eye(6)[[1, 2, 3, 4, 5, 0]],  # the sixth roots of unity
    }[case]
    w, v = nova.jit(LA.eig)(a)
    _check_eig(a, w, v, np.float64)
    if case == "symmetric":
        np.testing.assert_allclose(np.sort(np.asarray(w).real), np.linalg.eigvalsh(a),
                                   atol=1e-12 * 10)
        assert np.all(np.asarray(w).imag == 0)


def test_defective_jordan_block():
    # a Jordan block's eigenvalue is only determined to eps^(1/k) (the same for LAPACK)
    a = np.diag(np.full(4, 2.0)) + np.diag(np.ones(3), 1)
    a[3, 0] = 1e-10
    w, v = LA.eig(a)
    assert _match(w, np.linalg.eigvals(a)) < 1e-4
    np.testing.assert_allclose(a @ np.asarray(v) - np.asarray(v) * np.asarray(w), 0,
                               atol=1e-10)


def test_badly_scaled_magnitudes():
    a = RNG.standard_normal((5, 5))
    for s in (1e-150, 1e150):
        w = LA.eigvals(a * s)
        assert _match(np.asarray(w) / s, np.linalg.eigvals(a)) < 1e-12


def test_non_finite_input_gives_nan():
    a = RNG.standard_normal((4, 4))
    a[1, 2] = np.nan
    w, v = LA.eig(a)
    assert np.all(np.isnan(np.asarray(w))) and np.all(np.isnan(np.asarray(v)))


def test_batched_and_vmap():
    a = RNG.standard_normal((2, 3, 5, 5))
    w, v = nova.jit(LA.eig)(a)
    assert w.shape == (2, 3, 5) and v.shape == (2, 3, 5, 5)
    for idx in np.ndindex(2, 3):
        _check_eig(a[idx], w[idx], v[idx], np.float64)
    wv = nova.vmap(LA.eigvals)(a[0])
    for k in range(3):
        assert _match(wv[k], np.linalg.eigvals(a[0, k])) < 1e-12
    assert LA.eigvals(np.zeros((3, 0, 0))).shape == (3, 0)


def test_many_random_and_integer_matrices():
    # integer entries and near-split 2x2 blocks with real eigenvalues exercise the block
    # unitary's choice of eigenvector
    a = np.concatenate([RNG.standard_normal((20, 6, 6)),
                        RNG.integers(-3, 4, (20, 6, 6)).astype(np.float64)])
    w, v = nova.jit(LA.eig)(a)
    for k in range(a.shape[0]):
        _check_eig(a[k], w[k], v[k], np.float64)


def test_schur_form_is_orthogonal_similarity():
    a = RNG.standard_normal((9, 9))
    h, q = eig_schur.hessenberg(jnp.asarray(a), True)
    t, z, ok = eig_schur.schur(h, q)
    t, z = np.asarray(t), np.asarray(z)
    assert bool(ok)
    np.testing.assert_allclose(z @ t @ z.T, a, atol=1e-13)
    np.testing.assert_allclose(z.T @ z, np.eye(9), atol=1e-14)
    assert np.all(np.tril(t, -2) == 0)
    sub = np.diagonal(t, -1)
    assert not np.any((sub[:-1] != 0) & (sub[1:] != 0))  # 2x2 blocks never touch


def _eigvals_loss(lib):
    def loss(a):
        w = lib.linalg.eigvals(a)
        return lib.sum(lib.real(w) ** 2 + lib.imag(w) ** 2 * lib.real(w))

    return loss


def test_grad_eigvals_against_jax():
    a = RNG.standard_normal((5, 5))
    g = nova.grad(_eigvals_loss(jnp))(a)
    with jax.enable_x64(True):
        gj = np.asarray(jax.grad(_eigvals_loss(jjnp))(a))
    np.testing.assert_allclose(np.asarray(g), gj, atol=1e-11)
    gb = nova.jit(nova.grad(_eigvals_loss(jnp)))(a.astype(np.float32))
    np.testing.assert_allclose(np.asarray(gb), gj, atol=2e-4)


def test_jvp_eigvals_against_finite_differences():
    a, t = RNG.standard_normal((4, 4)), RNG.standard_normal((4, 4))
    w, dw = nova.jvp(LA.eigvals, (a,), (t,))
    w, dw = np.asarray(w), np.asarray(dw)
    h = 1e-6
    wp, wm = np.linalg.eigvals(a + h * t), np.linalg.eigvals(a - h * t)
    for k in range(4):
        j = int(np.argmin(np.abs(wp - w[k])))
        i = int(np.argmin(np.abs(wm - w[k])))
        assert abs((wp[j] - wm[i]) / (2 * h) - dw[k]) < 1e-6


def test_grad_eig_phase_invariant_loss_against_finite_differences():
    def loss(lib, a):
        w, v = lib.linalg.eig(a)
        return lib.sum(lib.abs(v[0]) ** 2 * lib.real(w)) + lib.sum(lib.abs(v[1] * lib.conj(v[2])))

    a = RNG.standard_normal((5, 5))
    g = np.asarray(nova.grad(lambda x: loss(jnp, x))(a))
    fd = np.zeros_like(a)
    h = 1e-6
    for i, j in np.ndindex(5, 5):
        e = np.zeros_like(a)
        e[i, j] = h
        fd[i, j] = (loss(np, a + e) - loss(np, a - e)) / (2 * h)
    np.testing.assert_allclose(g, fd, atol=1e-7)


# --- roots ------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [[1.0, -3.0, 2.0], [2.0, 1.0, 1.0, 3.0, -1.0],
                               [0.0, 0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 0.0],
                               [1.0, 0.0, -2.0, 5.0, 0.0], [3.0], [0.0, 0.0]])
def test_roots_against_numpy_and_jax(p):
    p = np.asarray(p)
    r = jnp.roots(p)
    ref = np.roots(p)
    assert r.dtype == np.complex128 and r.shape == ref.shape
    assert _match(r, ref) < 1e-12
    with jax.enable_x64(True):
        rj = np.asarray(jjnp.roots(p))
    assert _match(r, rj) < 1e-12


def test_roots_dtypes_and_strip_zeros_false_under_jit():
    r = jnp.roots([1, 2, 3])  # integers: float32, complex64 (jax.numpy's)
    assert r.dtype == jjnp.roots(jjnp.asarray([1, 2, 3])).dtype == np.complex64
    assert _match(r, np.roots([1, 2, 3])) < 1e-6
    p = np.asarray([0.0, 0.0, 1.0, 0.0, -4.0])
    r = np.asarray(nova.jit(lambda q: jnp.roots(q, strip_zeros=False))(p))
    rj = np.asarray(jjnp.roots(p.astype(np.float32), strip_zeros=False))
    assert r.shape == rj.shape == (4,)
    assert np.all(np.isnan(r[2:])) and np.all(np.isnan(rj[2:]))
    assert _match(r[:2], [2.0, -2.0]) < 1e-12
    assert np.all(np.isnan(np.asarray(jnp.roots(np.zeros(3), strip_zeros=False))))


def test_grad_roots():
    # d r / d p_k for a simple root r of p: -r^(n-k) / p'(r)
    p = np.asarray([1.0, -6.0, 11.0, -6.0])  # roots 1, 2, 3
    g = np.asarray(nova.grad(lambda q: jnp.sum(jnp.real(jnp.roots(q, strip_zeros=False))))(p))
    want = -sum(np.array([r**3, r**2, r, 1.0]) / np.polyval(np.polyder(p), r) for r in (1, 2, 3))
    np.testing.assert_allclose(g, want, atol=1e-9)


# --- errors -------------------------------------------------------------------------------------


def test_bad_inputs():
    with pytest.raises(ShapeError, match=r"square.*\(2, 3\)"):
        LA.eigvals(np.ones((2, 3)))
    with pytest.raises(ShapeError, match=r"at least 2 dimensions.*\(3,\)"):
        LA.eig(np.ones(3))
    with pytest.raises(NotImplementedError, match="complex input matrices.*complex64"):
        LA.eig(np.eye(2, dtype=np.complex64))
    with pytest.raises(ValueError, match=r"roots: p must be 1-d.*\(2, 2\)"):
        jnp.roots(np.ones((2, 2)))
    with pytest.raises(TypeError, match="strip_zeros=False"):
        nova.jit(jnp.roots)(np.ones(3))
    with pytest.raises(NotImplementedError, match="complex coefficients"):
        jnp.roots(np.ones(3, np.complex64))


def test_integer_and_half_inputs_give_complex64():
    a = np.array([[1, 2], [3, 4]], np.int32)
    w = LA.eigvals(a)
    assert w.dtype == jjnp.linalg.eigvals(a).dtype == np.complex64
    assert _match(w, np.linalg.eigvals(a)) < 1e-5
    assert LA.eigvals(a.astype(np.float16)).dtype == np.complex64
