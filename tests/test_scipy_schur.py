"""nova.scipy.linalg.schur / rsf2csf / funm (linalg_schur.py), the complex inputs of the matrix
functions (expm, expm_frechet, sqrtm, polar, solve_sylvester), dft, and complex nova.lax.linalg,
against scipy.linalg / jax.scipy.linalg / jax.lax.linalg on random real and complex matrices.
Schur forms are not unique, so they are compared by their invariants: a = Z T Z^H, Z unitary,
T's eigenvalues and T's structure (triangular, or quasi-triangular with a 2x2 block exactly
for each complex conjugate pair)."""

import jax
import jax.lax.linalg as jll
import jax.numpy as jjnp
import jax.scipy.linalg as jl
import nova.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl
from nova.lax import linalg as nll

import nova
import nova.scipy.linalg as L

TOL = {np.float32: 2e-5, np.complex64: 2e-5, np.float64: 1e-12, np.complex128: 1e-12}


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _mat(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _mH(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _eigs_sorted(m):
    return np.sort_complex(np.linalg.eigvals(np.asarray(m, np.complex128)))


def assert_same_spectrum(x, y, atol):
    """x and y (n,) complex equal as multisets: each x matched to the nearest unused y."""
    x, y = list(np.asarray(x, np.complex128)), list(np.asarray(y, np.complex128))
    assert len(x) == len(y)
    for v in x:
        k = int(np.argmin(np.abs(np.asarray(y) - v)))
        assert abs(y[k] - v) <= atol, (v, y)
        y.pop(k)


def check_schur(a, t, z, real_form, tol):
    """The invariants of a Schur decomposition a = Z T Z^H."""
    a, t, z = np.asarray(a), np.asarray(t), np.asarray(z)
    n = a.shape[-1]
    scale = max(1.0, np.abs(a).max())
    np.testing.assert_allclose(z @ t @ _mH(z), a, atol=50 * n * tol * scale)
    np.testing.assert_allclose(_mH(z) @ z, np.broadcast_to(np.eye(n), a.shape),
                               atol=50 * n * tol)
    assert (np.tril(t, -2 if real_form else -1) == 0).all()
    for k in np.ndindex(a.shape[:-2]):
        # the eigenvalues are T's (from its blocks) and a's
        assert_same_spectrum(_eigs_sorted(t[k]), _eigs_sorted(a[k]), 1e3 * tol * scale)
    if real_form:
        for k in np.ndindex(a.shape[:-2]):
            sub = np.diagonal(t[k], -1)
            blocks = np.nonzero(sub)[0]
            assert (np.diff(blocks) > 1).all()  # no two adjacent subdiagonal entries
            n_pairs = int(np.sum(np.abs(np.imag(np.linalg.eigvals(a[k]))) > 1e3 * tol * scale))
            assert len(blocks) == n_pairs // 2
            for m in blocks:  # standardized: equal diagonal, b c < 0
                blk = t[k][m:m + 2, m:m + 2]
                assert abs(blk[0, 0] - blk[1, 1]) <= 10 * tol * scale
                assert blk[0, 1] * blk[1, 0] < 0


# --- schur ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_schur_real_matches_scipy_invariants(rng, dtype, n):
    a = _mat(rng, (n, n), dtype)
    t, z = L.schur(a)
    assert t.dtype == dtype and z.dtype == dtype and t.shape == (n, n)
    check_schur(a, t, z, True, TOL[dtype])
    st, _ = sl.schur(a.astype(np.float64))  # the same block structure as LAPACK's
    assert np.count_nonzero(np.abs(np.diagonal(st, -1)) > 0) == \
        np.count_nonzero(np.diagonal(np.asarray(t), -1))


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_schur_complex_output(rng, dtype):
    a = _mat(rng, (6, 6), dtype)
    t, z = L.schur(a, output="complex")
    assert t.dtype == np.complex64 and z.dtype == np.complex64
    check_schur(a, t, z, False, TOL[np.complex64])
    want_t, _ = sl.schur(a, output="complex")
    assert_same_spectrum(np.diagonal(np.asarray(t)), np.diagonal(want_t), 1e-4)


def test_schur_complex128_matches_jax(rng):
    a = _mat(rng, (7, 7), np.complex128)
    t, z = L.schur(a)
    assert t.dtype == np.complex128
    check_schur(a, t, z, False, TOL[np.complex128])
    with jax.enable_x64(True):
        jt, _ = jl.schur(jjnp.asarray(a), output="complex")
        want = np.asarray(jt)
    assert want.dtype == np.complex128
    assert_same_spectrum(np.diagonal(np.asarray(t)), np.diagonal(want), 1e-11)


@pytest.mark.parametrize("a", [np.zeros((5, 5)), np.eye(5), np.diag([3.0, -1.0, 2.0, 0.0, 2.0]),
                               np.array([[1.0, 1.0], [0.0, 1.0]]),
                               np.array([[0.0, 1.0], [-1.0, 0.0]]),
                               np.array([[2.0, 1.0], [1.0, 2.0]]),
                               np.roll(np.eye(5), 1, axis=1), np.ones((5, 5))])
def test_schur_special_matrices(a):
    for x in (a, a.astype(np.complex128)):
        for output in ("real", "complex"):
            t, z = L.schur(x, output)
            check_schur(x, t, z, output == "real" and x.dtype.kind == "f", 1e-13)


def test_schur_batched_jit_vmap_vs_jax(rng):
    a = _mat(rng, (2, 3, 5, 5), np.float32)
    t, z = nova.jit(L.schur, static_argnums=1)(a, "real")
    assert t.shape == (2, 3, 5, 5)
    check_schur(a, t, z, True, TOL[np.float32])
    jt, _ = jl.schur(a)  # batched, as jax's
    for k in np.ndindex(2, 3):
        assert_same_spectrum(_eigs_sorted(np.asarray(t)[k]), _eigs_sorted(np.asarray(jt)[k]),
                             1e-4)
    c = _mat(rng, (3, 4, 4), np.complex64)
    t, z = nova.vmap(lambda m: L.schur(m, "complex"))(c)
    check_schur(c, t, z, False, TOL[np.complex64])
    t, z = nova.jit(L.schur)(c)
    check_schur(c, t, z, False, TOL[np.complex64])


def test_schur_nonfinite_is_nan():
    a = np.array([[np.nan, 1.0], [1.0, 1.0]])
    for x in (a, a.astype(np.complex128)):
        assert np.isnan(np.asarray(L.schur(x)[0])).all()


def test_schur_errors():
    with pytest.raises(ValueError, match=r"schur: a must be a \(batched\) square matrix.*\(2, 3\)"):
        L.schur(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"schur: a must be .*got shape \(3,\)"):
        L.schur(np.ones(3))
    with pytest.raises(ValueError, match="schur: output must be 'real' or 'complex', got 'x'"):
        L.schur(np.eye(2), output="x")
    with pytest.raises(TypeError, match="dtype <U1 is not supported"):
        L.schur(np.array([["a"]]))
    with pytest.raises(NotImplementedError, match="schur: sort"):
        L.schur(np.eye(2), sort="lhp")
    with pytest.raises(ValueError, match="expected square matrix"):
        sl.schur(np.ones((2, 3)))  # SciPy raises ValueError too


# --- rsf2csf --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rsf2csf_matches_scipy(rng, dtype):
    a = _mat(rng, (7, 7), dtype)
    st, sz = sl.schur(a)  # SciPy's real Schur form
    t2, z2 = L.rsf2csf(st, sz)
    want_t, want_z = sl.rsf2csf(st, sz)
    cdt = np.complex64 if dtype == np.float32 else np.complex128
    assert t2.dtype == cdt and z2.dtype == cdt
    check_schur(a, t2, z2, False, TOL[dtype])
    # the same rotations as SciPy's: the same triangular form
    np.testing.assert_allclose(np.asarray(t2), want_t, atol=1e3 * TOL[dtype])
    np.testing.assert_allclose(np.asarray(z2), want_z, atol=1e3 * TOL[dtype])
    jt, _ = jl.rsf2csf(st.astype(np.float32), sz.astype(np.float32))
    assert_same_spectrum(np.diagonal(np.asarray(t2)), np.diagonal(np.asarray(jt)), 1e-4)


def test_rsf2csf_of_nova_schur_jit_and_batched(rng):
    a = _mat(rng, (3, 6, 6), np.float32)
    t, z = L.schur(a)
    t2, z2 = nova.jit(L.rsf2csf)(t, z)
    check_schur(a, t2, z2, False, TOL[np.float32])


def test_rsf2csf_errors():
    with pytest.raises(ValueError, match=r"rsf2csf: T and Z must have the same shape"):
        L.rsf2csf(np.eye(3), np.eye(2))
    with pytest.raises(ValueError, match=r"rsf2csf: Z must be .*\(2, 3\)"):
        L.rsf2csf(np.eye(2), np.ones((2, 3)))


# --- funm and sqrtm -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("func", ["exp", "sin", "cos"])
def test_funm_matches_scipy(rng, dtype, func):
    a = _mat(rng, (6, 6), dtype)
    f = L.funm(a, getattr(jnp, func))
    assert f.dtype == np.complex128
    np.testing.assert_allclose(np.asarray(f), sl.funm(a, getattr(np, func)), atol=1e-9)
    if func == "exp":
        np.testing.assert_allclose(np.asarray(f), sl.expm(a), atol=1e-9)
    f, err = L.funm(a, getattr(jnp, func), disp=False)
    _, want_err = sl.funm(a, getattr(np, func), disp=False)
    assert np.asarray(err).dtype == np.float64
    assert 0 < float(err) <= 1 and float(err) < 1e3 * max(float(want_err), 1e-16)


def test_funm_float32_jit_vs_jax(rng):
    a = _mat(rng, (5, 5), np.float32)
    got = nova.jit(lambda m: L.funm(m, jnp.exp))(a)
    want = jl.funm(a, jjnp.exp)
    assert got.dtype == np.complex64 and want.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-3)


def test_funm_errors():
    with pytest.raises(ValueError, match=r"funm: A must be a 2-D square matrix.*\(2, 3, 3\)"):
        L.funm(np.ones((2, 3, 3)), jnp.exp)
    with pytest.raises(ValueError, match=r"funm: A must be .*\(2, 3\)"):
        L.funm(np.ones((2, 3)), jnp.exp)


def test_sqrtm_complex_matches_scipy(rng):
    a = _mat(rng, (6, 6), np.complex128)
    x = L.sqrtm(a)
    assert x.dtype == np.complex128
    np.testing.assert_allclose(np.asarray(x), sl.sqrtm(a), atol=1e-10)
    np.testing.assert_allclose(np.asarray(x @ x), a, atol=1e-10)
    # a real matrix with negative eigenvalues: SciPy's complex root, from a complex input
    neg = np.array([[-4.0, 1.0, 0.0], [0.0, 2.0, 1.0], [1.0, 0.0, -1.0]])
    want = sl.sqrtm(neg)
    assert want.dtype.kind == "c"
    got = L.sqrtm(neg.astype(np.complex128))
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-10)
    np.testing.assert_allclose(np.asarray(L.sqrtm(np.diag([-1.0, 4.0]) + 0j)),
                               np.diag([1j, 2.0]), atol=1e-14)


def test_sqrtm_complex64_jit_batched_vs_jax(rng):
    a = _mat(rng, (2, 4, 4), np.complex64) + 3 * np.eye(4, dtype=np.complex64)
    got = nova.jit(L.sqrtm)(a)
    assert got.dtype == np.complex64
    for k in range(2):
        np.testing.assert_allclose(np.asarray(got[k]), np.asarray(jl.sqrtm(a[k])), atol=1e-4)


# --- expm and friends of complex matrices ---------------------------------------------------


@pytest.mark.parametrize("dtype,tol", [(np.complex64, 2e-4), (np.complex128, 1e-11)])
def test_expm_complex_matches_scipy(rng, dtype, tol):
    a = _mat(rng, (2, 5, 5), dtype)
    got = nova.jit(L.expm)(a)
    assert got.dtype == dtype
    for k in range(2):
        np.testing.assert_allclose(np.asarray(got[k]), sl.expm(a[k].astype(np.complex128)),
                                   rtol=tol, atol=tol)
    tri = np.triu(a[0])
    np.testing.assert_allclose(np.asarray(L.expm(tri, upper_triangular=True)),
                               sl.expm(tri.astype(np.complex128)), rtol=tol, atol=tol)


def test_expm_complex_grad_matches_jax(rng):
    a = 0.5 * _mat(rng, (4, 4), np.complex128)
    w = _mat(rng, (4, 4), np.complex128)

    def loss(xp, m):
        e = (jl if xp is jjnp else L).expm(m)
        return xp.sum(xp.abs(e * w) ** 2)

    got = nova.grad(lambda m: loss(jnp, m))(a)
    with jax.enable_x64(True):
        want = jax.grad(lambda m: loss(jjnp, m))(jjnp.asarray(a))
        want = np.asarray(want)
    assert np.asarray(got).dtype == np.complex128
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-9, atol=1e-9)
    got_jit = nova.jit(nova.grad(lambda m: loss(jnp, m)))(a.astype(np.complex64))
    np.testing.assert_allclose(np.asarray(got_jit), want, rtol=2e-3, atol=2e-3)


def test_expm_frechet_polar_sylvester_complex(rng):
    a, e = _mat(rng, (4, 4), np.complex128), _mat(rng, (4, 4), np.complex128)
    ea, fa = L.expm_frechet(a, e)
    want_ea, want_fa = sl.expm_frechet(a, e)
    np.testing.assert_allclose(np.asarray(ea), want_ea, atol=1e-10)
    np.testing.assert_allclose(np.asarray(fa), want_fa, atol=1e-10)
    m = _mat(rng, (5, 3), np.complex128)
    for side in ("right", "left"):
        u, p = L.polar(m, side)
        want_u, want_p = sl.polar(m, side)
        np.testing.assert_allclose(np.asarray(u), want_u, atol=1e-10)
        np.testing.assert_allclose(np.asarray(p), want_p, atol=1e-10)
    b, c = _mat(rng, (3, 3), np.complex128), _mat(rng, (4, 3), np.complex128)
    x = L.solve_sylvester(a, b, c)
    np.testing.assert_allclose(np.asarray(x), sl.solve_sylvester(a, b, c), atol=1e-10)


def test_dft_matches_scipy_and_jax():
    for scale in (None, "sqrtn", "n"):
        got = L.dft(6, scale)
        assert got.dtype == np.complex64
        np.testing.assert_allclose(np.asarray(got), sl.dft(6, scale), atol=1e-6)
        np.testing.assert_allclose(np.asarray(got), np.asarray(jl.dft(6, scale)), atol=1e-5)
    x = np.arange(6.0)
    np.testing.assert_allclose(np.asarray(L.dft(6, dtype=np.complex128) @ x), np.fft.fft(x),
                               atol=1e-12)
    with pytest.raises(ValueError, match="dft: scale must be"):
        L.dft(4, "bad")
    with pytest.raises(ValueError, match="dft: n must be non-negative"):
        L.dft(-1)


# --- nova.lax.linalg with complex matrices --------------------------------------------------


def test_lax_lu_complex_matches_jax(rng):
    a = _mat(rng, (2, 5, 4), np.complex64)
    lu, piv, perm = nll.lu(a)
    want_lu, want_piv, want_perm = jll.lu(a)
    assert lu.dtype == np.complex64
    np.testing.assert_array_equal(np.asarray(piv), np.asarray(want_piv))
    np.testing.assert_array_equal(np.asarray(perm), np.asarray(want_perm))
    np.testing.assert_allclose(np.asarray(lu), np.asarray(want_lu), atol=1e-5)
    got = nova.jit(nll.lu)(a)[0]
    np.testing.assert_allclose(np.asarray(got), np.asarray(want_lu), atol=1e-5)


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("transpose_a", [True, False])
@pytest.mark.parametrize("conjugate_a", [True, False])
def test_lax_triangular_solve_conjugate(rng, left_side, transpose_a, conjugate_a):
    a = _mat(rng, (4, 4), np.complex64) + 4 * np.eye(4, dtype=np.complex64)
    b = _mat(rng, (4, 3) if left_side else (3, 4), np.complex64)
    kw = {"left_side": left_side, "lower": True, "transpose_a": transpose_a,
          "conjugate_a": conjugate_a}
    got = nll.triangular_solve(a, b, **kw)
    want = jll.triangular_solve(a, b, **kw)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)


def test_lax_qr_eigh_svd_cholesky_complex(rng):
    a = _mat(rng, (4, 4), np.complex128)
    q, r = nll.qr(a)
    np.testing.assert_allclose(np.asarray(q @ r), a, atol=1e-12)
    h = a @ _mH(a) + np.eye(4)
    v, w = nll.eigh(h)
    with jax.enable_x64(True):
        want_w = np.asarray(jll.eigh(jjnp.asarray(h))[1])
        want_s = np.asarray(jll.svd(jjnp.asarray(a), compute_uv=False))
        want_c = np.asarray(jll.cholesky(jjnp.asarray(h)))
    np.testing.assert_allclose(np.asarray(w), want_w, atol=1e-11)
    np.testing.assert_allclose(np.asarray(v) @ np.diag(np.asarray(w)) @ _mH(np.asarray(v)), h,
                               atol=1e-11)
    u, s, vh = nll.svd(a)
    np.testing.assert_allclose(np.asarray(u * s.astype(u.dtype)[None, :] @ vh), a, atol=1e-11)
    np.testing.assert_allclose(np.asarray(s), want_s, atol=1e-11)
    np.testing.assert_allclose(np.asarray(nll.svd(a, compute_uv=False)), want_s, atol=1e-11)
    np.testing.assert_allclose(np.asarray(nll.cholesky(h)), want_c, atol=1e-11)


def test_exports():
    for name in ("schur", "rsf2csf", "funm", "dft"):
        assert name in L.__all__ and callable(getattr(L, name))


def test_special_matrices_of_complex_vectors():
    c = np.array([1 + 2j, 3, 4j], np.complex64)
    r = np.array([5j, 1, 2 - 1j], np.complex64)
    for got, want in [(L.toeplitz(c), sl.toeplitz(c)), (L.toeplitz(c, r), sl.toeplitz(c, r)),
                      (L.hankel(c, r), sl.hankel(c, r)), (L.circulant(c), sl.circulant(c))]:
        assert got.dtype == np.complex64
        np.testing.assert_allclose(np.asarray(got), want, atol=1e-6)
    np.testing.assert_allclose(np.asarray(L.toeplitz(c)), np.asarray(jl.toeplitz(c)), atol=1e-6)
