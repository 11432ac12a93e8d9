"""nova/numpy_impl/decompositions.py through nova.numpy.linalg, nova.scipy.linalg and
nova.lax.linalg: values against NumPy (float64 to ~1e-13, float32 to ~1e-5), the defining
identities of each factorization (A = LL^T, PA = LU, A = QR with orthonormal Q, AV = VW,
A = USV^T), batches, odd sizes, rank-deficient and repeated-eigenvalue inputs, the same under
jit and vmap, derivatives against finite differences in both modes, and the errors."""

import nova.numpy as jnp
import numpy as np
import pytest

import nova
import nova.scipy.linalg as nsl
from nova import lax
from nova.core.errors import ShapeError
from tests.helpers import check_grads

LA = jnp.linalg
RNG = np.random.default_rng(0)


def _spd(n, batch=()):
    a = RNG.standard_normal((*batch, n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _tol(dtype):
    return 1e-12 if dtype == np.float64 else 2e-4


def _np(x):
    return np.asarray(x).astype(np.float64)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_cholesky_solve_inv_det_against_numpy(n, dtype):
    a = RNG.standard_normal((n, n)) + np.eye(n)
    s = _spd(n)
    b = RNG.standard_normal((n, 3))
    tol = _tol(dtype)
    c = LA.cholesky(s.astype(dtype))
    assert c.dtype == dtype
    np.testing.assert_allclose(_np(c), np.linalg.cholesky(s), rtol=tol, atol=tol)
    np.testing.assert_allclose(_np(LA.cholesky(s.astype(dtype), upper=True)),
                               np.linalg.cholesky(s).T, rtol=tol, atol=tol)
    np.testing.assert_allclose(_np(LA.solve(a.astype(dtype), b.astype(dtype))),
                               np.linalg.solve(a, b), rtol=tol * 10, atol=tol * 10)
    np.testing.assert_allclose(_np(LA.solve(a.astype(dtype), b[:, 0].astype(dtype))),
                               np.linalg.solve(a, b[:, 0]), rtol=tol * 10, atol=tol * 10)
    np.testing.assert_allclose(_np(LA.inv(a.astype(dtype))), np.linalg.inv(a), rtol=tol * 10,
                               atol=tol * 10)
    np.testing.assert_allclose(float(LA.det(a.astype(dtype))), np.linalg.det(a), rtol=tol * 10)
    sign, logdet = LA.slogdet(a.astype(dtype))
    es, el = np.linalg.slogdet(a)
    assert float(sign) == es
    np.testing.assert_allclose(float(logdet), el, rtol=tol, atol=tol)
    assert LA.slogdet(a).logabsdet is not None


def test_batches_broadcast_and_jit():
    a = RNG.standard_normal((2, 3, 4, 4)) + 2 * np.eye(4)
    b = RNG.standard_normal((3, 4, 2))  # broadcasts against a's batch
    np.testing.assert_allclose(_np(LA.solve(a, b)), np.linalg.solve(a, b), rtol=1e-11)
    np.testing.assert_allclose(_np(nova.jit(LA.solve)(a, b)), np.linalg.solve(a, b), rtol=1e-11)
    np.testing.assert_allclose(_np(LA.det(a)), np.linalg.det(a), rtol=1e-11)
    np.testing.assert_allclose(_np(nova.jit(LA.inv)(a)), np.linalg.inv(a), rtol=1e-10)
    s = _spd(3, (5,))
    np.testing.assert_allclose(_np(nova.vmap(LA.cholesky)(s)), np.linalg.cholesky(s),
                               rtol=1e-12, atol=1e-12)
    w = nova.jit(LA.eigvalsh)(s)
    np.testing.assert_allclose(_np(w), np.linalg.eigvalsh(s), rtol=1e-12)


def test_cholesky_of_indefinite_matrix_is_nan_and_reads_the_symmetrized_input():
    bad = np.array([[1.0, 2.0], [2.0, 1.0]])
    assert np.isnan(np.asarray(LA.cholesky(bad))).any()
    s = _spd(4)
    skew = s + np.triu(np.ones((4, 4)), 1) - np.tril(np.ones((4, 4)), -1)  # same symmetric part
    np.testing.assert_allclose(_np(LA.cholesky(skew)), np.linalg.cholesky(s), rtol=1e-12)


def test_singular_matrices():
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert float(LA.det(a)) == 0.0
    sign, logdet = LA.slogdet(a)
    assert float(sign) == 0.0 and float(logdet) == -np.inf
    assert not np.isfinite(np.asarray(LA.inv(a))).all()


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (1, 3), (6, 1), (2, 3, 2)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_against_numpy(shape, mode):
    a = RNG.standard_normal(shape)
    out = LA.qr(a, mode=mode)
    ref = np.linalg.qr(a, mode=mode)
    if mode == "r":
        np.testing.assert_allclose(_np(out), ref, rtol=1e-11, atol=1e-12)
        return
    q, r = _np(out.Q), _np(out.R)
    assert q.shape == ref.Q.shape and r.shape == ref.R.shape
    np.testing.assert_allclose(q @ r, a, atol=1e-12)
    k = q.shape[-1]
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(k), q.shape[:-2] + (k, k)), atol=1e-12)
    np.testing.assert_array_equal(np.tril(r, -1), 0)
    # LAPACK's signs: R's leading rows as numpy's
    kk = min(shape[-2:])
    np.testing.assert_allclose(r[..., :kk, :], ref.R[..., :kk, :], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [1, 2, 3, 7, 16, 33])
def test_eigh_against_numpy(n, dtype):
    s = _spd(n)
    w, v = nova.jit(LA.eigh)(s.astype(dtype))
    assert w.dtype == dtype and v.shape == (n, n)
    w, v = _np(w), _np(v)
    scale = np.abs(np.linalg.eigvalsh(s)).max()
    tol = 1e-13 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(w, np.linalg.eigvalsh(s), atol=tol * scale * 10)
    np.testing.assert_allclose(s @ v - v * w, 0, atol=tol * scale * 10)
    np.testing.assert_allclose(v.T @ v, np.eye(n), atol=tol * 100)
    assert np.all(np.diff(w) >= 0)


def test_eigh_repeated_and_diagonal_and_uplo():
    for m in [np.eye(4), np.diag([3.0, 1.0, 1.0, -2.0, 5.0]), np.zeros((3, 3))]:
        w, v = LA.eigh(m)
        np.testing.assert_allclose(_np(w), np.linalg.eigvalsh(m), atol=1e-14)
        np.testing.assert_allclose(_np(v).T @ _np(v), np.eye(len(m)), atol=1e-14)
    s = _spd(4)
    junk = np.tril(s) + np.triu(RNG.standard_normal((4, 4)), 1)  # only the lower triangle is s
    np.testing.assert_allclose(_np(LA.eigh(junk, UPLO="L", symmetrize_input=False)[0]),
                               np.linalg.eigvalsh(s), rtol=1e-12)
    junk_u = np.triu(s) + np.tril(RNG.standard_normal((4, 4)), -1)
    np.testing.assert_allclose(_np(LA.eigh(junk_u, UPLO="U", symmetrize_input=False)[0]),
                               np.linalg.eigvalsh(s), rtol=1e-12)
    w, v = LA.eigh(_spd(3, (2, 2)))
    assert w.shape == (2, 2, 3) and v.shape == (2, 2, 3, 3)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (3, 5), (6, 6), (9, 4), (2, 4, 3)])
def test_svd_against_numpy(shape, dtype):
    a = RNG.standard_normal(shape)
    tol = 1e-12 if dtype == np.float64 else 2e-5
    s_ref = np.linalg.svd(a, compute_uv=False)
    np.testing.assert_allclose(_np(LA.svd(a.astype(dtype), compute_uv=False)), s_ref, atol=tol * 10)
    for full in (True, False):
        u, s, vh = (_np(z) for z in nova.jit(lambda x, f=full: LA.svd(x, full_matrices=f))(a.astype(dtype)))
        ru, rs, rvh = np.linalg.svd(a, full_matrices=full)
        assert u.shape == ru.shape and s.shape == rs.shape and vh.shape == rvh.shape
        k = s.shape[-1]
        np.testing.assert_allclose((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], a,
                                   atol=tol * 10)
        ut = np.swapaxes(u, -1, -2)
        np.testing.assert_allclose(ut @ u, np.broadcast_to(np.eye(u.shape[-1]), ut.shape[:-1] + (u.shape[-1],)), atol=tol * 10)
        np.testing.assert_allclose(vh @ np.swapaxes(vh, -1, -2), np.broadcast_to(np.eye(vh.shape[-2]), vh.shape[:-1] + (vh.shape[-2],)), atol=tol * 10)


def test_svd_rank_deficient_and_zero():
    a = np.outer(np.arange(1.0, 5.0), np.arange(1.0, 4.0))  # rank 1
    u, s, vh = (_np(z) for z in LA.svd(a))
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), atol=1e-13)
    np.testing.assert_allclose(u.T @ u, np.eye(4), atol=1e-13)
    np.testing.assert_allclose((u[:, :3] * s) @ vh, a, atol=1e-13)
    z = np.zeros((3, 2))
    u, s, vh = (_np(t) for t in LA.svd(z))
    np.testing.assert_array_equal(s, [0.0, 0.0])
    np.testing.assert_allclose(u.T @ u, np.eye(3), atol=1e-15)
    assert int(LA.matrix_rank(a)) == 1 and int(LA.matrix_rank(z)) == 0
    assert int(LA.matrix_rank(np.eye(3))) == 3


def test_functions_of_the_svd():
    a = RNG.standard_normal((6, 4))
    np.testing.assert_allclose(_np(LA.pinv(a)), np.linalg.pinv(a), rtol=1e-11, atol=1e-12)
    low = np.outer(np.arange(1.0, 4.0), np.arange(1.0, 3.0))
    np.testing.assert_allclose(_np(LA.pinv(low)), np.linalg.pinv(low), atol=1e-12)
    b = RNG.standard_normal((6, 2))
    x, res, rank, s = LA.lstsq(a, b)
    ex, eres, erank, es = np.linalg.lstsq(a, b)
    np.testing.assert_allclose(_np(x), ex, rtol=1e-11)
    np.testing.assert_allclose(_np(res), eres, rtol=1e-10)
    assert int(rank) == erank
    np.testing.assert_allclose(_np(s), es, rtol=1e-12)
    x1, *_ = LA.lstsq(a, b[:, 0])
    assert x1.shape == (4,)
    sq = RNG.standard_normal((4, 4))
    for p in (None, 2, -2, 1, -1, np.inf, "fro", "nuc"):
        np.testing.assert_allclose(float(LA.cond(sq, p)), np.linalg.cond(sq, p), rtol=1e-10)
    for o in (2, -2, "nuc"):
        np.testing.assert_allclose(float(LA.norm(sq, o)), np.linalg.norm(sq, o), rtol=1e-12)
    np.testing.assert_allclose(_np(LA.svdvals(sq)), np.linalg.svd(sq, compute_uv=False),
                               rtol=1e-12)


def test_matrix_power_multi_dot_tensor_functions():
    a = RNG.standard_normal((3, 3)) + 2 * np.eye(3)
    for p in (0, 1, 2, 5, -1, -3):
        np.testing.assert_allclose(_np(LA.matrix_power(a, p)), np.linalg.matrix_power(a, p),
                                   rtol=1e-10, atol=1e-12)
    ai = np.arange(9).reshape(3, 3)
    assert LA.matrix_power(ai, 3).dtype == ai.dtype
    np.testing.assert_array_equal(np.asarray(LA.matrix_power(ai, 3)), np.linalg.matrix_power(ai, 3))
    ms = [RNG.standard_normal(s) for s in [(10,), (10, 3), (3, 20), (20, 2), (2,)]]
    np.testing.assert_allclose(float(LA.multi_dot(ms)), np.linalg.multi_dot(ms), rtol=1e-12)
    ms2 = [RNG.standard_normal(s) for s in [(4, 10), (10, 3), (3, 5)]]
    np.testing.assert_allclose(_np(LA.multi_dot(ms2)), np.linalg.multi_dot(ms2), rtol=1e-12)
    t = RNG.standard_normal((2, 3, 6)) + np.eye(6).reshape(2, 3, 6) * 3
    np.testing.assert_allclose(_np(LA.tensorinv(t, ind=2)), np.linalg.tensorinv(t, ind=2), rtol=1e-10)
    a4 = RNG.standard_normal((6, 2, 3)) + np.eye(6).reshape(6, 2, 3) * 3
    b4 = RNG.standard_normal(6)
    np.testing.assert_allclose(_np(LA.tensorsolve(a4, b4)), np.linalg.tensorsolve(a4, b4), rtol=1e-10)


GRAD_CASES = [
    ("cholesky", lambda x: LA.cholesky(x), lambda: [_spd(4)]),
    ("solve", lambda x, y: LA.solve(x, y), lambda: [RNG.standard_normal((4, 4)) + 2 * np.eye(4),
                                                   RNG.standard_normal((4, 2))]),
    ("inv", lambda x: LA.inv(x), lambda: [RNG.standard_normal((3, 3)) + 2 * np.eye(3)]),
    ("det", lambda x: LA.det(x), lambda: [RNG.standard_normal((3, 3))]),
    ("slogdet", lambda x: LA.slogdet(x)[1], lambda: [RNG.standard_normal((3, 3))]),
    ("qr", lambda x: LA.qr(x), lambda: [RNG.standard_normal((5, 3))]),
    ("qr_complete", lambda x: LA.qr(x, mode="complete"), lambda: [RNG.standard_normal((4, 3))]),
    ("eigvalsh", lambda x: LA.eigvalsh(x), lambda: [_spd(4)]),
    ("eigh_vectors", lambda x: jnp.abs(LA.eigh(x)[1]), lambda: [_spd(4)]),
    ("svdvals", lambda x: LA.svdvals(x), lambda: [RNG.standard_normal((5, 3))]),
    ("svd_tall", lambda x: [jnp.abs(z) for z in LA.svd(x, full_matrices=False)],
     lambda: [RNG.standard_normal((5, 3))]),
    ("svd_wide", lambda x: [jnp.abs(z) for z in LA.svd(x, full_matrices=False)],
     lambda: [RNG.standard_normal((3, 5))]),
    ("pinv", lambda x: LA.pinv(x), lambda: [RNG.standard_normal((5, 3))]),
    ("norm_nuc", lambda x: LA.norm(x, "nuc"), lambda: [RNG.standard_normal((4, 3))]),
    ("solve_triangular", lambda x, y: nsl.solve_triangular(x, y, lower=True),
     lambda: [RNG.standard_normal((4, 4)) + 3 * np.eye(4), RNG.standard_normal((4, 2))]),
    ("solve_triangular_t", lambda x, y: nsl.solve_triangular(x, y, trans="T", unit_diagonal=True),
     lambda: [RNG.standard_normal((4, 4)), RNG.standard_normal(4)]),
    ("cho_solve", lambda x, y: nsl.cho_solve(nsl.cho_factor(x), y),
     lambda: [_spd(3), RNG.standard_normal(3)]),
]


@pytest.mark.parametrize("name,f,args", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_derivatives_against_finite_differences(name, f, args):
    check_grads(f, args(), rtol=1e-5, atol=1e-6)


def test_gradient_of_batched_logdet_under_jit():
    a = RNG.standard_normal((3, 4, 4)) + 3 * np.eye(4)
    g = nova.jit(nova.grad(lambda x: jnp.sum(LA.slogdet(x)[1])))(a)
    np.testing.assert_allclose(_np(g), np.swapaxes(np.linalg.inv(a), -1, -2), rtol=1e-10)


def test_full_svd_derivative_is_refused():
    with pytest.raises(NotImplementedError, match="full_matrices=False"):
        nova.grad(lambda x: jnp.sum(LA.svd(x)[0]))(RNG.standard_normal((3, 2)))


def test_scipy_linalg():
    s = _spd(4)
    np.testing.assert_allclose(_np(nsl.cholesky(s)), np.linalg.cholesky(s).T, rtol=1e-12)
    np.testing.assert_allclose(_np(nsl.cholesky(s, lower=True)), np.linalg.cholesky(s), rtol=1e-12)
    a = RNG.standard_normal((5, 4))
    p, l, u = (_np(z) for z in nsl.lu(a))
    np.testing.assert_allclose(p @ l @ u, a, atol=1e-13)
    assert np.all(np.abs(l) <= 1 + 1e-15) and np.allclose(np.diag(l), 1)
    np.testing.assert_array_equal(np.triu(l, 1), 0)
    np.testing.assert_array_equal(np.tril(u, -1), 0)
    pl, u2 = nsl.lu(a, permute_l=True)
    np.testing.assert_allclose(_np(pl) @ _np(u2), a, atol=1e-13)
    sq = RNG.standard_normal((4, 4))
    lu_, piv = nsl.lu_factor(sq)
    b = RNG.standard_normal(4)
    np.testing.assert_allclose(_np(nsl.lu_solve((lu_, piv), b)), np.linalg.solve(sq, b), rtol=1e-10)
    np.testing.assert_allclose(_np(nsl.lu_solve((lu_, piv), b, trans=1)), np.linalg.solve(sq.T, b),
                               rtol=1e-10)
    np.testing.assert_allclose(_np(nsl.solve(s, b, assume_a="pos")), np.linalg.solve(s, b), rtol=1e-11)
    np.testing.assert_allclose(_np(nsl.solve(sq, b, transposed=True)), np.linalg.solve(sq.T, b),
                               rtol=1e-10)
    q, r = nsl.qr(a)
    assert q.shape == (5, 5) and r.shape == (5, 4)
    (r_only,) = nsl.qr(a, mode="r")
    np.testing.assert_allclose(_np(r_only), _np(r), atol=1e-14)
    w = nsl.eigh(s, eigvals_only=True)
    np.testing.assert_allclose(_np(w), np.linalg.eigvalsh(s), rtol=1e-12)
    t = np.triu(sq) + 3 * np.eye(4)
    np.testing.assert_allclose(_np(nsl.solve_triangular(t, b)), np.linalg.solve(np.triu(t), b),
                               rtol=1e-11)


def test_lax_linalg_conventions():
    s = _spd(3)
    v, w = lax.linalg.eigh(s)
    np.testing.assert_allclose(_np(w), np.linalg.eigvalsh(s), rtol=1e-12)
    assert v.shape == (3, 3)
    a = RNG.standard_normal((4, 3))
    lu_, piv, perm = lax.linalg.lu(a)
    assert piv.dtype == jnp.int32 and piv.shape == (3,) and perm.shape == (4,)
    packed = _np(lu_)
    L = np.tril(packed, -1)[:, :3] + np.eye(4, 3)
    np.testing.assert_allclose(L @ np.triu(packed)[:3], a[np.asarray(perm)], atol=1e-13)
    t = np.tril(RNG.standard_normal((3, 3))) + 3 * np.eye(3)
    b = RNG.standard_normal((2, 3))
    x = lax.linalg.triangular_solve(t, b, lower=True)  # x t = b
    np.testing.assert_allclose(_np(x) @ t, b, atol=1e-13)
    x2 = lax.linalg.triangular_solve(t, b.T, left_side=True, lower=True, transpose_a=True)
    np.testing.assert_allclose(t.T @ _np(x2), b.T, atol=1e-13)
    q, _ = lax.linalg.qr(a, full_matrices=False)
    assert q.shape == (4, 3)
    np.testing.assert_allclose(_np(lax.linalg.cholesky(s)), np.linalg.cholesky(s), rtol=1e-12)
    np.testing.assert_allclose(_np(lax.linalg.svd(a, compute_uv=False)),
                               np.linalg.svd(a, compute_uv=False), rtol=1e-12)


def test_integer_inputs_and_errors():
    assert LA.inv(np.eye(2, dtype=np.int32)).dtype == jnp.float32
    with pytest.raises(ShapeError, match=r"square in its last two dimensions, got shape \(2, 3\)"):
        LA.inv(np.ones((2, 3)))
    with pytest.raises(ShapeError, match="at least 2 dimensions"):
        LA.cholesky(np.ones(3))
    with pytest.raises(ShapeError, match=r"b must have shape \(\.\.\., 3\)"):
        LA.solve(np.eye(3), np.ones(4))
    with pytest.raises(ValueError, match="mode must be"):
        LA.qr(np.eye(2), mode="economic")
    with pytest.raises(ValueError, match="UPLO"):
        LA.eigh(np.eye(2), UPLO="X")
    with pytest.raises(TypeError, match="exponent must be an integer"):
        LA.matrix_power(np.eye(2), 1.5)
    with pytest.raises(ValueError, match="at least two arrays"):
        LA.multi_dot([np.eye(2)])


def test_review_scaled_and_empty_matrices():
    # entries whose squares overflow or underflow (the sweeps stopped at once before)
    s = np.array([[2.0, 1.0], [1.0, 2.0]])
    for scale, dtype in [(1e155, np.float64), (1e-170, np.float64), (1e19, np.float32),
                         (1e-25, np.float32)]:
        a = (scale * s).astype(dtype)
        tol = 1e-12 if dtype == np.float64 else 1e-5
        np.testing.assert_allclose(_np(LA.eigvalsh(a)) / scale, [1.0, 3.0], rtol=tol)
        np.testing.assert_allclose(_np(LA.svdvals(a)) / scale, [3.0, 1.0], rtol=tol)
        np.testing.assert_allclose(_np(LA.pinv(a)) * scale, np.linalg.inv(s), rtol=tol * 10)
        np.testing.assert_allclose(_np(LA.cholesky(a)) / np.sqrt(scale), np.linalg.cholesky(s),
                                   rtol=tol)
        assert int(LA.matrix_rank(a)) == 2
    z = np.zeros((0, 0))
    assert LA.inv(z).shape == (0, 0) and float(LA.det(z)) == 1.0
    sign, logdet = LA.slogdet(z)
    assert float(sign) == 1.0 and float(logdet) == 0.0
    assert LA.solve(z, np.zeros(0)).shape == (0,)
    assert LA.qr(z).Q.shape == (0, 0) and LA.qr(np.zeros((3, 0))).Q.shape == (3, 0)
    assert LA.qr(np.zeros((3, 0)), mode="complete").Q.shape == (3, 3)
    assert int(LA.matrix_rank(z)) == 0


def test_review_scipy_triangles_and_lu_solve_under_jit():
    s = _spd(4)
    r = RNG.standard_normal((4, 4))
    upper_only = s + np.tril(r, -1)  # the lower triangle is garbage; SciPy's upper U reads above
    np.testing.assert_allclose(_np(nsl.cholesky(upper_only)), np.linalg.cholesky(s).T,
                               rtol=1e-12, atol=1e-12)
    lower_only = s + np.triu(r, 1)
    np.testing.assert_allclose(_np(nsl.cholesky(lower_only, lower=True)), np.linalg.cholesky(s),
                               rtol=1e-12, atol=1e-12)
    b = RNG.standard_normal(4)
    for assume in ("pos", "sym"):
        np.testing.assert_allclose(
            _np(nsl.solve(np.tril(s), b, assume_a=assume, lower=True)), np.linalg.solve(s, b),
            rtol=1e-11)
        np.testing.assert_allclose(
            _np(nsl.solve(np.triu(s), b, assume_a=assume)), np.linalg.solve(s, b), rtol=1e-11)
    a = RNG.standard_normal((4, 4))
    f = nova.jit(lambda m, v: nsl.lu_solve(nsl.lu_factor(m), v))
    np.testing.assert_allclose(_np(f(a, b)), np.linalg.solve(a, b), rtol=1e-11)
    ab, bb = RNG.standard_normal((3, 4, 4)), RNG.standard_normal((3, 4))
    np.testing.assert_allclose(_np(nsl.lu_solve(nsl.lu_factor(ab), bb)),
                               np.linalg.solve(ab, bb[..., None])[..., 0], rtol=1e-10)
    np.testing.assert_allclose(_np(nova.vmap(lambda m, v: nsl.lu_solve(nsl.lu_factor(m), v))(ab, bb)),
                               np.linalg.solve(ab, bb[..., None])[..., 0], rtol=1e-10)
