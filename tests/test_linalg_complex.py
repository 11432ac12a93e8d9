"""Complex matrices in nova.numpy.linalg / nova.scipy.linalg (nova/numpy_impl/
decompositions_complex*.py): values against NumPy and SciPy (LAPACK) in complex64 and
complex128, the defining identities (A = LL^H, PA = LU, A = QR with Q unitary, AV = VW,
A = USV^H), batches, nova.jit and nova.vmap, gradients of real-valued losses against
jax.grad (JAX's convention), real inputs unchanged, and the errors."""

import jax
import jax.numpy as jjnp
import nova.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl

import nova
import nova.scipy.linalg as nsl
from nova.core.errors import ShapeError

LA = jnp.linalg
RNG = np.random.default_rng(7)
DTYPES = [np.complex64, np.complex128]


def _cz(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def _well(n, batch=(), dtype=np.complex128):
    return (_cz(*batch, n, n) + 2 * np.sqrt(n) * np.eye(n)).astype(dtype)


def _hpd(n, batch=(), dtype=np.complex128):
    a = _cz(*batch, n, n)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def _herm(n, dtype=np.complex128):
    a = _cz(n, n)
    return (a + a.conj().T).astype(dtype)


def _tol(dtype):
    return 1e-11 if dtype == np.complex128 else 2e-4


def _close(got, want, tol, scale=1.0):
    got = np.asarray(got)
    np.testing.assert_allclose(got.astype(np.complex128), np.asarray(want), rtol=tol,
                               atol=tol * scale)


def _wide(x):
    return np.asarray(x).astype(np.complex128)


# --- LU-based ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_inv_det_slogdet_against_numpy(dtype):
    a, b = _well(5, dtype=dtype), _cz(5, 3, dtype=dtype)
    A, B = _wide(a), _wide(b)
    tol = _tol(dtype)
    x = LA.solve(a, b)
    assert x.dtype == dtype
    _close(x, np.linalg.solve(A, B), tol * 10, 1.0)
    _close(LA.solve(a, b[:, 0]), np.linalg.solve(A, B[:, 0]), tol * 10)
    _close(LA.inv(a), np.linalg.inv(A), tol * 10)
    _close(LA.det(a), np.linalg.det(A), tol * 10, abs(np.linalg.det(A)))
    sign, logdet = LA.slogdet(a)
    es, el = np.linalg.slogdet(A)
    assert sign.dtype == dtype and logdet.dtype == np.real(np.zeros((), dtype)).dtype
    _close(sign, es, tol)
    np.testing.assert_allclose(float(logdet), el, rtol=tol, atol=tol)
    with jax.enable_x64(dtype == np.complex128):  # jax.numpy's conventions for the sign
        js, jl = jjnp.linalg.slogdet(a)
        assert js.dtype == sign.dtype and jl.dtype == logdet.dtype
    _close(LA.matrix_power(a, 3), np.linalg.matrix_power(A, 3), tol * 10, 100)
    _close(LA.matrix_power(a, -2), np.linalg.matrix_power(A, -2), tol * 10)
    # a real matrix with a complex right-hand side, and the reverse
    r = RNG.standard_normal((5, 5)) + 3 * np.eye(5)
    _close(LA.solve(r, B), np.linalg.solve(r, B), 1e-11)
    _close(LA.solve(A, r), np.linalg.solve(A, r), 1e-11)
    sg, _ = LA.slogdet(np.zeros((3, 3), dtype))
    assert complex(sg) == 0


def test_tensorsolve_tensorinv():
    a = _well(6).reshape(2, 3, 6)
    b = _cz(2, 3)
    _close(LA.tensorsolve(a, b), np.linalg.tensorsolve(a, b), 1e-11)
    t = _well(6).reshape(6, 2, 3)
    _close(LA.tensorinv(t, ind=1), np.linalg.tensorinv(t, ind=1), 1e-11)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_family_against_scipy(dtype):
    a, b = _cz(6, 6, dtype=dtype), _cz(6, 2, dtype=dtype)
    A, B = _wide(a), _wide(b)
    tol = _tol(dtype)
    lu, piv = nsl.lu_factor(a)
    elu, epiv = sl.lu_factor(A)
    np.testing.assert_array_equal(np.asarray(piv), epiv)  # LAPACK's |Re| + |Im| pivots
    _close(lu, elu, tol * 10)
    for trans in (0, 1, 2):
        _close(nsl.lu_solve((lu, piv), b, trans=trans), sl.lu_solve((elu, epiv), B, trans=trans),
               tol * 100, 10)
    for shape in [(6, 6), (4, 6), (6, 4)]:
        m = _cz(*shape, dtype=dtype)
        P, L, U = nsl.lu(m)
        eP, eL, eU = sl.lu(_wide(m))
        _close(P, eP, 0)
        _close(L, eL, tol * 10)
        _close(U, eU, tol * 10, 5)
        pl, u = nsl.lu(m, permute_l=True)
        _close(np.asarray(pl) @ np.asarray(u), m, tol * 10, 5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_triangular_and_scipy_solve(dtype):
    a, b = _well(5, dtype=dtype), _cz(5, 2, dtype=dtype)
    A, B = _wide(a), _wide(b)
    tol = _tol(dtype)
    for trans in (0, 1, 2, "C"):
        for lower in (True, False):
            got = nsl.solve_triangular(a, b, trans=trans, lower=lower)
            _close(got, sl.solve_triangular(A, B, trans=trans, lower=lower), tol * 10)
    h = _hpd(5, dtype=dtype)
    for assume_a in ("pos", "her"):
        for lower in (True, False):
            # only the named triangle is read: spoil the other one
            junk = np.triu(np.ones((5, 5)), 1) if lower else np.tril(np.ones((5, 5)), -1)
            spoiled = h + junk
            _close(nsl.solve(spoiled.astype(dtype), b, lower=lower, assume_a=assume_a),
                   np.linalg.solve(_wide(h), B), tol * 10)
    s = _cz(5, 5)
    sym = np.tril(s) + np.tril(s, -1).T
    _close(nsl.solve(np.tril(s).astype(dtype), b, lower=True, assume_a="sym"),
           np.linalg.solve(sym, B), tol * 100)


# --- Cholesky ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_family(dtype):
    h, b = _hpd(5, dtype=dtype), _cz(5, 2, dtype=dtype)
    H, B = _wide(h), _wide(b)
    tol = _tol(dtype)
    L = LA.cholesky(h)
    assert L.dtype == dtype
    _close(L, np.linalg.cholesky(H), tol * 10, 3)
    _close(LA.cholesky(h, upper=True), np.linalg.cholesky(H).conj().T, tol * 10, 3)
    _close(nsl.cholesky(h), sl.cholesky(H), tol * 10, 3)
    _close(nsl.cholesky(np.tril(h), lower=True), sl.cholesky(H, lower=True), tol * 10, 3)
    _close(LA.cholesky(np.tril(h), symmetrize_input=False), np.linalg.cholesky(H), tol * 10, 3)
    for lower in (False, True):
        c = nsl.cho_factor(h, lower=lower)
        _close(nsl.cho_solve(c, b), np.linalg.solve(H, B), tol * 10)
    assert np.isnan(np.asarray(LA.cholesky(-h))).any()  # not positive definite: NaN, as JAX


# --- QR, eigh, SVD ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 5), (6, 4), (4, 6), (1, 1)])
def test_qr_against_numpy(shape, dtype):
    a = _cz(*shape, dtype=dtype)
    tol = _tol(dtype)
    for mode in ("reduced", "complete"):
        q, r = LA.qr(a, mode)
        eq, er = np.linalg.qr(_wide(a), mode)
        assert q.dtype == dtype
        _close(q, eq, tol * 10)  # LAPACK's signs: R's diagonal real
        _close(r, er, tol * 10, 3)
        q = np.asarray(q).astype(np.complex128)
        np.testing.assert_allclose(q.conj().T @ q, np.eye(q.shape[1]), atol=tol * 10)
    _close(LA.qr(a, "r"), np.linalg.qr(_wide(a), "r"), tol * 10, 3)
    _close(nsl.qr(a)[1], sl.qr(_wide(a))[1], tol * 10, 3)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_eigh_against_numpy(n, dtype):
    h = _herm(n, dtype)
    H = _wide(h)
    tol = _tol(dtype)
    w, v = LA.eigh(h)
    assert w.dtype == np.real(np.zeros((), dtype)).dtype and v.dtype == dtype
    np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh(H), rtol=tol * 10,
                               atol=tol * 10)
    v = _wide(v)
    np.testing.assert_allclose(H @ v, v * np.asarray(w)[None, :], atol=tol * 20)
    np.testing.assert_allclose(v.conj().T @ v, np.eye(n), atol=tol * 10)
    np.testing.assert_allclose(np.asarray(LA.eigvalsh(h)), np.linalg.eigvalsh(H),
                               rtol=tol * 10, atol=tol * 10)
    # the triangle read without symmetrizing: the other one is ignored
    junk = h + 5j * np.triu(np.ones((n, n)), 1)
    np.testing.assert_allclose(np.asarray(LA.eigh(junk, symmetrize_input=False)[0]),
                               np.linalg.eigvalsh(H), rtol=tol * 10, atol=tol * 10)
    np.testing.assert_allclose(np.asarray(nsl.eigh(np.triu(h), lower=False, eigvals_only=True)),
                               np.linalg.eigvalsh(H), rtol=tol * 10, atol=tol * 10)


def test_eigh_tridiagonal_path_and_repeated_eigenvalues():
    n = 50  # above EIGH_TRIDIAGONAL_MIN_N: Householder to a real tridiagonal matrix
    h = _herm(n)
    w, v = LA.eigh(h)
    np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh(h), atol=1e-11)
    v = np.asarray(v)
    np.testing.assert_allclose(h @ v, v * np.asarray(w)[None, :], atol=1e-10)
    np.testing.assert_allclose(v.conj().T @ v, np.eye(n), atol=1e-11)
    np.testing.assert_allclose(np.asarray(LA.eigvalsh(h)), np.linalg.eigvalsh(h), atol=1e-11)
    # a unitary similarity of diag(1, 1, 1, 2, 2, 3): the repeated vectors stay orthonormal
    q, _ = np.linalg.qr(_cz(6, 6))
    d = np.array([1.0, 1, 1, 2, 2, 3])
    w, v = LA.eigh((q * d) @ q.conj().T)
    np.testing.assert_allclose(np.asarray(w), d, atol=1e-12)
    np.testing.assert_allclose(np.asarray(v).conj().T @ np.asarray(v), np.eye(6), atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 5), (6, 4), (4, 6), (1, 3)])
def test_svd_family_against_numpy(shape, dtype):
    a = _cz(*shape, dtype=dtype)
    A = _wide(a)
    tol = _tol(dtype)
    m, n = shape
    k = min(shape)
    u, s, vh = LA.svd(a)
    assert u.dtype == dtype and s.dtype == np.real(np.zeros((), dtype)).dtype
    np.testing.assert_allclose(np.asarray(s), np.linalg.svd(A, compute_uv=False),
                               rtol=tol * 10, atol=tol * 10)
    u, vh = _wide(u), _wide(vh)
    np.testing.assert_allclose((u[:, :k] * np.asarray(s)) @ vh[:k], A, atol=tol * 20)
    np.testing.assert_allclose(u.conj().T @ u, np.eye(m), atol=tol * 10)
    np.testing.assert_allclose(vh @ vh.conj().T, np.eye(n), atol=tol * 10)
    assert LA.svd(a, full_matrices=False)[0].shape == (m, k)
    np.testing.assert_allclose(np.asarray(LA.svdvals(a)), np.linalg.svd(A, compute_uv=False),
                               rtol=tol * 10, atol=tol * 10)
    _close(LA.pinv(a), np.linalg.pinv(A), tol * 10)
    b = _cz(m, 2, dtype=dtype)
    x, res, rank, _ = LA.lstsq(a, b)
    ex, eres, erank, _ = np.linalg.lstsq(A, _wide(b))
    _close(x, ex, tol * 10)
    np.testing.assert_allclose(np.asarray(res), eres, rtol=tol * 10)
    assert int(rank) == erank
    np.testing.assert_allclose(float(LA.norm(a, 2)), np.linalg.norm(A, 2), rtol=tol)
    np.testing.assert_allclose(float(LA.cond(a)), np.linalg.cond(A), rtol=tol * 10)
    low = (_cz(m, 1) @ _cz(1, n)).astype(dtype)  # rank 1
    assert int(LA.matrix_rank(low)) == 1 and int(LA.matrix_rank(a)) == k


# --- batches, jit, vmap -----------------------------------------------------------------------

def test_batched_under_jit_and_vmap():
    a, b, h = _well(4, (2, 3)), _cz(2, 3, 4, 2), _hpd(4, (2, 3))

    def f(a, b, h):
        return (LA.solve(a, b), LA.det(a), LA.cholesky(h), LA.eigvalsh(h), LA.qr(a)[1],
                LA.svd(a, compute_uv=False), LA.inv(a))

    got = nova.jit(f)(a, b, h)
    want = (np.linalg.solve(a, b), np.linalg.det(a), np.linalg.cholesky(h),
            np.linalg.eigvalsh(h), np.linalg.qr(a)[1], np.linalg.svd(a, compute_uv=False),
            np.linalg.inv(a))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, atol=1e-10, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(nova.vmap(LA.det)(a[0])), np.linalg.det(a[0]),
                               rtol=1e-11)
    w, v = nova.vmap(LA.eigh)(h[0])
    np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh(h[0]), atol=1e-11)
    np.testing.assert_allclose(h[0] @ np.asarray(v), np.asarray(v) * np.asarray(w)[:, None, :],
                               atol=1e-10)
    lu, piv = nova.jit(nsl.lu_factor)(a)
    np.testing.assert_allclose(np.asarray(nsl.lu_solve((lu, piv), b, trans=2)),
                               np.linalg.solve(np.conj(np.swapaxes(a, -1, -2)), b), atol=1e-11)


# --- gradients against jax.grad ---------------------------------------------------------------

_C = _cz(5, 5)
_W = RNG.standard_normal((5, 5))
_B = _cz(5, 2)
_T = _cz(6, 4)
_CT = _cz(6, 4)
_WT = RNG.standard_normal((6, 4))

def _qr_loss(m, q, r):
    return m.real(m.sum(q * _CT[:q.shape[0], :q.shape[1]])) + m.imag(m.sum(r))


def _svd_loss(m, u, s, vh):
    return m.real(m.sum((u @ vh) * _CT)) + m.sum(m.abs(u) ** 2 * _WT) + m.sum(s)


GRADS = {  # name: (loss of the module m, input)
    "solve_a": (lambda m: lambda a: m.real(m.sum(m.linalg.solve(a, _B) * _C[:, :2])),
                _well(5)),
    "inv": (lambda m: lambda a: m.sum(m.abs(m.linalg.inv(a)) ** 2), _well(5)),
    "det_abs": (lambda m: lambda a: m.abs(m.linalg.det(a)), _well(5)),
    "det_re": (lambda m: lambda a: m.real(m.linalg.det(a) * (1 + 2j)), _well(5)),
    "logabsdet": (lambda m: lambda a: m.linalg.slogdet(a)[1], _well(5)),
    "slogdet_sign": (lambda m: lambda a: m.imag(m.linalg.slogdet(a)[0] * (2 - 1j)), _well(5)),
    "cholesky": (lambda m: lambda a: m.real(m.sum(m.linalg.cholesky(a) * _C)), _hpd(5)),
    "cholesky_abs": (lambda m: lambda a: m.sum(m.abs(m.linalg.cholesky(a)) ** 3), _hpd(5)),
    "eigvalsh": (lambda m: lambda a: m.sum(m.linalg.eigvalsh(a) * m.arange(5.0)), _herm(5)),
    "eigh_w": (lambda m: lambda a: m.sum(m.linalg.eigh(a)[0] ** 2), _herm(5)),
    # eigenvectors through phase-invariant quantities (|v|^2 and projectors)
    "eigh_v": (lambda m: lambda a: m.sum(m.abs(m.linalg.eigh(a)[1]) ** 2 * _W), _herm(5)),
    "qr": (lambda m: lambda a: _qr_loss(m, *m.linalg.qr(a)), _T),
    # m < n and mode="complete": derivatives of the Householder loop itself
    "qr_wide": (lambda m: lambda a: _qr_loss(m, *m.linalg.qr(a)), _T.T.copy()),
    "qr_complete": (lambda m: lambda a: _qr_loss(m, *m.linalg.qr(a[:4], "complete")), _T),
    "svdvals": (lambda m: lambda a: m.sum(m.linalg.svd(a, compute_uv=False) ** 2 *
                                          m.arange(1.0, 5.0)), _T),
    # singular vectors through quantities invariant under u_j, v_j -> e^(it) (u_j, v_j)
    "svd_uv": (lambda m: lambda a: _svd_loss(m, *m.linalg.svd(a, full_matrices=False)), _T),
    "pinv": (lambda m: lambda a: m.real(m.sum(m.linalg.pinv(a) * _CT.T)), _T),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(GRADS))
def test_grad_matches_jax(name, dtype):
    loss, x = GRADS[name]
    x = x.astype(dtype)
    got = np.asarray(nova.grad(loss(jnp))(x))
    assert got.dtype == dtype
    with jax.enable_x64(dtype == np.complex128):
        want = np.asarray(jax.grad(loss(jjnp))(x))
    tol = 1e-9 if dtype == np.complex128 else 2e-3
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_grad_under_jit_and_of_real_input():
    loss, x = GRADS["solve_a"]
    got = nova.jit(nova.grad(loss(jnp)))(x)
    with jax.enable_x64(True):
        want = jax.grad(loss(jjnp))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10)
    # a real matrix in a complex computation gets the real part of the cotangent (JAX's)
    r = RNG.standard_normal((5, 5)) + 3 * np.eye(5)
    f = lambda m: lambda a: m.abs(m.linalg.det(a + 1j * a.T))
    got = nova.grad(f(jnp))(r)
    assert got.dtype == np.float64
    with jax.enable_x64(True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(jax.grad(f(jjnp))(r)), rtol=1e-10)


# --- real inputs unchanged, errors ------------------------------------------------------------

def test_real_inputs_keep_real_dtypes():
    a = RNG.standard_normal((4, 4)).astype(np.float32) + 3 * np.eye(4, dtype=np.float32)
    assert LA.solve(a, a).dtype == np.float32
    assert LA.slogdet(a).sign.dtype == np.float32 and LA.eigh(a @ a.T)[1].dtype == np.float32
    assert LA.svd(a)[0].dtype == np.float32 and LA.qr(a)[0].dtype == np.float32
    np.testing.assert_allclose(np.asarray(LA.det(a)), np.linalg.det(a), rtol=1e-5)
    assert LA.solve(a, a.astype(np.complex64)).dtype == np.complex64


def test_errors():
    z = _cz(3, 4)
    with pytest.raises(ShapeError, match=r"solve: a must be square.*\(3, 4\)"):
        LA.solve(z, z)
    with pytest.raises(ShapeError, match="b must have shape"):
        LA.solve(_cz(3, 3), _cz(4, 2))
    with pytest.raises(ShapeError, match="at least 2 dimensions"):
        LA.cholesky(_cz(3))
    with pytest.raises(ValueError, match="UPLO must be 'L' or 'U'"):
        LA.eigh(_herm(3), UPLO="X")
    with pytest.raises(ValueError, match="trans must be"):
        nsl.solve_triangular(_cz(3, 3), _cz(3), trans=5)
    with pytest.raises(ValueError, match="qr: mode must be"):
        LA.qr(z, "bogus")
    with pytest.raises(ShapeError, match=r"lu_solve: piv must have shape \(3,\)"):
        nsl.lu_solve((_cz(3, 3), np.zeros(2, np.int32)), _cz(3))
    with pytest.raises(NotImplementedError, match="full_matrices=False"):
        nova.grad(lambda a: jnp.sum(jnp.abs(LA.svd(a)[0])))(_cz(3, 3))
