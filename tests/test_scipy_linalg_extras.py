"""nova.scipy.linalg's special matrices (linalg_special.py), matrix functions (linalg_functions.py:
expm, expm_frechet, sqrtm, polar, solve_sylvester) and the extra decompositions (hessenberg,
qr_multiply, eigh_tridiagonal) against scipy.linalg and jax.scipy.linalg on random float32
inputs, under nova.jit, nova.vmap and nova.grad, and their bad-input errors."""

import jax
import jax.scipy.linalg as jl
import nova.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl

import nova
import nova.scipy.linalg as L

RTOL, ATOL = 1e-4, 1e-5


def close(got, want, rtol=RTOL, atol=ATOL):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# --- special matrices ---------------------------------------------------------------------------


def test_vector_constructors_match_scipy(rng):
    c = rng.standard_normal(4).astype(np.float32)
    r = rng.standard_normal(3).astype(np.float32)
    fc = [rng.standard_normal(k).astype(np.float32) for k in (2, 3, 6, 7)]
    convs = [(mode, n) for mode in ("full", "same", "valid") for n in (2, 6)]

    @nova.jit  # one compiled program for all of them: eager calls compile one by one
    def build(c, r, fc):
        return ([L.toeplitz(c, r), L.toeplitz(c), L.hankel(c, r), L.hankel(c), L.circulant(c),
                 L.leslie(c, r), L.companion(c), L.fiedler(c)],
                [L.fiedler_companion(a) for a in fc],
                [L.convolution_matrix(c, n, mode) for mode, n in convs])

    got, got_fc, got_conv = build(c, r, fc)
    want = [sl.toeplitz(c, r), sl.toeplitz(c), sl.hankel(c, r), sl.hankel(c), sl.circulant(c),
            sl.leslie(c, r), sl.companion(c), sl.fiedler(c)]
    for g, w in zip(got, want, strict=True):
        close(g, w)
    for g, a in zip(got_fc, fc, strict=True):
        close(g, sl.fiedler_companion(a))
    for g, (mode, n) in zip(got_conv, convs, strict=True):
        close(g, sl.convolution_matrix(c, n, mode))
    blocks = (np.ones((2, 3), np.float32), 5.0, [1.0, 2.0])
    close(L.block_diag(*blocks), sl.block_diag(*blocks))
    assert L.block_diag().shape == (1, 0)


def test_vector_constructors_dtypes_and_batches(rng):
    t = L.toeplitz([1, 2, 3])
    assert t.dtype == jnp.int32
    close(t, jl.toeplitz(np.array([1, 2, 3])))
    assert L.companion([1, -3, 2]).dtype == jnp.float32
    cb = rng.standard_normal((2, 4)).astype(np.float32)
    rb = rng.standard_normal(3).astype(np.float32)

    @nova.jit
    def build(cb, rb):
        return (L.toeplitz(cb, rb), L.circulant(cb), L.fiedler_companion(cb),
                L.convolution_matrix(cb, 3, "same"), L.hankel(cb, rb))

    got = build(cb, rb)
    want = (jl.toeplitz(cb, rb), jl.circulant(cb), jl.fiedler_companion(cb),
            jl.convolution_matrix(cb, 3, "same"), np.stack([sl.hankel(x, rb) for x in cb]))
    for g, w in zip(got, want, strict=True):
        close(g, w)


def test_order_n_constructors():
    for n in (0, 1, 4):
        close(L.hilbert(n), sl.hilbert(n))
        close(L.invhilbert(n), sl.invhilbert(n), rtol=1e-6)
        for kind in ("symmetric", "lower", "upper"):
            close(L.pascal(n, kind), sl.pascal(n, kind))
            close(L.invpascal(n, kind), sl.invpascal(n, kind))
    assert L.pascal(3).dtype == jnp.float32
    for n in (1, 5):
        close(L.helmert(n), sl.helmert(n))
        close(L.helmert(n, full=True), sl.helmert(n, full=True))
    h = L.hadamard(8)
    assert h.dtype == jnp.int32
    close(h, sl.hadamard(8))
    assert L.hadamard(4, dtype=jnp.float32).dtype == jnp.float32


def test_constructor_errors():
    with pytest.raises(ValueError, match=r"leslie: s must have length len\(f\) - 1 = 2"):
        L.leslie([1.0, 2.0, 3.0], [1.0])
    with pytest.raises(ValueError, match="leslie: f must have length at least 2"):
        L.leslie([1.0], [])
    with pytest.raises(ValueError, match=r"companion: a must have length at least 2.*\(1,\)"):
        L.companion([1.0])
    with pytest.raises(ValueError, match="hankel: c must be at least 1-dimensional"):
        L.hankel(3.0)
    with pytest.raises(ValueError, match="toeplitz: operands could not be broadcast"):
        L.toeplitz(np.ones((2, 3)), np.ones((3, 3)))
    with pytest.raises(ValueError, match="block_diag: .*at most 2 dimensions.*argument 1"):
        L.block_diag(np.ones(2), np.ones((1, 1, 1)))
    with pytest.raises(ValueError, match="hadamard: n must be a positive power of 2, got 6"):
        L.hadamard(6)
    with pytest.raises(ValueError, match="convolution_matrix: mode must be"):
        L.convolution_matrix([1.0, 2.0], 3, "circular")
    with pytest.raises(ValueError, match="convolution_matrix: n must be a positive integer"):
        L.convolution_matrix([1.0, 2.0], 0)
    with pytest.raises(ValueError, match="pascal: kind must be"):
        L.pascal(3, "diagonal")
    with pytest.raises(TypeError, match="hilbert: n must be an integer, got float"):
        L.hilbert(2.5)


# --- expm and its Frechet derivative ------------------------------------------------------------


@pytest.mark.parametrize("scale", [0.05, 0.7, 2.0, 8.0])  # Pade degrees 3, 5, 7 and squarings
def test_expm_matches_scipy(rng, scale):
    a = (rng.standard_normal((4, 4)) * scale).astype(np.float32)
    want = sl.expm(a.astype(np.float64))
    close(L.expm(a), want, rtol=RTOL * max(1.0, scale), atol=ATOL * np.abs(want).max())


def test_expm_float64_batched_and_jit(rng):
    a = rng.standard_normal((2, 3, 3)) * 1.5
    close(L.expm(a[0]), sl.expm(a[0]), rtol=1e-10, atol=1e-12)  # Pade degree 13
    a32 = a.astype(np.float32)
    close(nova.jit(L.expm)(a32), jl.expm(a32))  # a batch (nova.vmap inside) under jit
    u = np.triu(a32[0])
    close(L.expm(u, upper_triangular=True), sl.expm(u))


def test_expm_too_many_squarings_is_nan():
    a = np.eye(2, dtype=np.float32) * 30.0  # ||a||_1 / theta_7 = 7.6: 3 squarings
    assert np.isnan(np.asarray(L.expm(a, max_squarings=2))).all()
    close(L.expm(a, max_squarings=3), np.eye(2) * np.exp(30.0), rtol=1e-4)


def test_expm_grad_matches_jax(rng):
    a = (rng.standard_normal((3, 3)) * 0.8).astype(np.float32)
    w = rng.standard_normal((3, 3)).astype(np.float32)
    got = nova.jit(nova.grad(lambda x: jnp.sum(jnp.sin(L.expm(x)) * w)))(a)
    want = jax.grad(lambda x: (jax.numpy.sin(jl.expm(x)) * w).sum())(a)
    close(got, want)


def test_expm_frechet_matches_scipy(rng):
    a = rng.standard_normal((3, 3)).astype(np.float32)
    e = rng.standard_normal((3, 3)).astype(np.float32)
    ea, fa = L.expm_frechet(a, e)
    want_ea, want_fa = sl.expm_frechet(a.astype(np.float64), e.astype(np.float64))
    close(ea, want_ea)
    close(fa, want_fa)
    close(L.expm_frechet(a, e, compute_expm=False), want_fa)


def test_expm_errors():
    with pytest.raises(ValueError, match=r"expm: A must be a \(batched\) square matrix.*\(2, 3\)"):
        L.expm(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"expm: A must be .*got shape \(3,\)"):
        L.expm(np.ones(3))
    with pytest.raises(ValueError, match=r"expm_frechet: A and E must have the same shape"):
        L.expm_frechet(np.ones((2, 2)), np.ones((3, 3)))
    with pytest.raises(ValueError, match=r"expm_frechet: E must be .*\(2, 3\)"):
        L.expm_frechet(np.ones((2, 2)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="expm_frechet: method must be"):
        L.expm_frechet(np.ones((2, 2)), np.ones((2, 2)), method="taylor")


# --- sqrtm, polar, solve_sylvester --------------------------------------------------------------


def test_sqrtm(rng):
    b = rng.standard_normal((4, 4)).astype(np.float32)
    spd = b @ b.T + 4 * np.eye(4, dtype=np.float32)
    close(L.sqrtm(spd), sl.sqrtm(spd))
    gen = (3 * np.eye(4) + rng.standard_normal((4, 4))).astype(np.float32)
    close(L.sqrtm(gen), np.real(sl.sqrtm(gen.astype(np.float64))), rtol=1e-3)
    close(nova.jit(L.sqrtm)(spd), sl.sqrtm(spd))
    assert np.isnan(np.asarray(L.sqrtm(np.diag([-1.0, 2.0]).astype(np.float32)))).all()
    with pytest.raises(ValueError, match=r"sqrtm: A must be .*\(2, 3\)"):
        L.sqrtm(np.ones((2, 3)))
    with pytest.raises(NotImplementedError, match="sqrtm: only blocksize=1"):
        L.sqrtm(spd, blocksize=2)


@pytest.mark.parametrize("side", ["right", "left"])
def test_polar_matches_scipy(rng, side):
    a = rng.standard_normal((5, 3)).astype(np.float32)
    u, p = L.polar(a, side, method="svd")
    want_u, want_p = sl.polar(a, side)
    close(u, want_u)
    close(p, want_p)


def test_polar_errors():
    with pytest.raises(ValueError, match="polar: side must be 'right' or 'left', got 'up'"):
        L.polar(np.eye(2), "up")
    with pytest.raises(ValueError, match="polar: a must have at least 2 dimensions"):
        L.polar(np.ones(3))


def test_solve_sylvester(rng):
    a = (rng.standard_normal((3, 3)) + 3 * np.eye(3)).astype(np.float32)
    b = (rng.standard_normal((2, 2)) + 2 * np.eye(2)).astype(np.float32)
    c = rng.standard_normal((3, 2)).astype(np.float32)
    close(L.solve_sylvester(a, b, c), sl.solve_sylvester(a, b, c))
    cb = rng.standard_normal((2, 3, 2)).astype(np.float32)
    close(L.solve_sylvester(a, b, cb), np.stack([sl.solve_sylvester(a, b, m) for m in cb]))
    with pytest.raises(ValueError, match=r"solve_sylvester: C must have shape \(\.\.\., 3, 2\)"):
        L.solve_sylvester(a, b, np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"solve_sylvester: B must be .*\(2, 3\)"):
        L.solve_sylvester(a, np.ones((2, 3)), c)


# --- hessenberg, qr_multiply, eigh_tridiagonal --------------------------------------------------


def test_hessenberg(rng):
    a = rng.standard_normal((5, 5)).astype(np.float32)
    h, q = L.hessenberg(a, calc_q=True)
    h, q = np.asarray(h), np.asarray(q)
    close(q @ h @ q.T, a)
    close(q.T @ q, np.eye(5))
    assert np.all(np.tril(h, -2) == 0)
    close(np.abs(h), np.abs(sl.hessenberg(a)))  # Householder signs may differ
    close(np.abs(nova.jit(L.hessenberg)(a)), np.abs(h))
    with pytest.raises(ValueError, match=r"hessenberg: a must be square .*\(2, 3\)"):
        L.hessenberg(np.ones((2, 3)))


def test_qr_multiply(rng):
    a = rng.standard_normal((5, 3)).astype(np.float32)
    for mode, c in (("right", rng.standard_normal((2, 5))), ("left", rng.standard_normal((3, 2))),
                    ("right", rng.standard_normal(5))):
        c = c.astype(np.float32)
        got_cq, got_r = L.qr_multiply(a, c, mode)
        want_cq, want_r = sl.qr_multiply(a, c, mode)
        # Q's column signs are LAPACK's in both (R's diagonal negative where LAPACK's is)
        close(np.abs(got_cq), np.abs(want_cq))
        close(got_r, want_r)
    with pytest.raises(ValueError, match=r"qr_multiply: for a of shape \(5, 3\) and mode "
                                         r"'right', c must have 5 columns"):
        L.qr_multiply(a, np.ones((2, 3)), "right")
    with pytest.raises(ValueError, match="qr_multiply: mode must be 'left' or 'right'"):
        L.qr_multiply(a, np.ones((2, 5)), "middle")


def test_eigh_tridiagonal(rng):
    d = rng.standard_normal(5).astype(np.float32)
    e = rng.standard_normal(4).astype(np.float32)
    want = sl.eigh_tridiagonal(d, e, eigvals_only=True)
    close(L.eigh_tridiagonal(d, e, eigvals_only=True), want)
    close(L.eigh_tridiagonal(d, e, eigvals_only=True, select="i", select_range=(1, 3)),
          want[1:4])
    w, v = L.eigh_tridiagonal(d, e)  # eigenvectors too, as SciPy (JAX has none)
    ws, vs = sl.eigh_tridiagonal(d, e)
    close(w, ws)
    t = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
    w, v = np.asarray(w), np.asarray(v)
    np.testing.assert_allclose(t @ v, v * w, atol=1e-5)
    np.testing.assert_allclose(v.T @ v, np.eye(5), atol=1e-5)
    np.testing.assert_allclose(np.abs(v), np.abs(vs), atol=1e-4)  # (up to column signs)
    w1, v1 = L.eigh_tridiagonal(np.float32([3.0]), np.zeros(0, np.float32))
    assert np.asarray(w1).tolist() == [3.0] and np.asarray(v1).tolist() == [[1.0]]
    with pytest.raises(NotImplementedError, match="select must be 'a' or 'i'"):
        L.eigh_tridiagonal(d, e, select="v", select_range=(0.0, 1.0))
    with pytest.raises(ValueError, match=r"d must be \(n,\) and e \(n - 1,\).*\(5,\) and \(5,\)"):
        L.eigh_tridiagonal(d, np.ones(5), eigvals_only=True)


def test_all_names_exported():
    for name in ("expm", "expm_frechet", "sqrtm", "polar", "solve_sylvester", "hessenberg",
                 "qr_multiply", "eigh_tridiagonal", "toeplitz", "hankel", "circulant",
                 "block_diag", "companion", "convolution_matrix", "fiedler",
                 "fiedler_companion", "hadamard", "helmert", "hilbert", "invhilbert",
                 "pascal", "invpascal", "leslie"):
        assert name in L.__all__ and callable(getattr(L, name))
