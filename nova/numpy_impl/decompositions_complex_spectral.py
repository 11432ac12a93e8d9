"""Complex inputs of the orthogonal decompositions: QR (Q unitary), eigh / eigvalsh of Hermitian
matrices (real eigenvalues, unitary eigenvectors) and the SVD, with what is built on the SVD
(pinv, lstsq, matrix_rank, cond). decompositions.py dispatches here for complex arguments.

Algorithms (the real ones of decompositions.py, made unitary):

- QR: Householder reflections H = I - tau v v^H as LAPACK's zlarfg (Anderson et al.,
  "LAPACK Users' Guide", 3rd ed., 5.4), whose beta = -sign(Re alpha) ||x|| is real: R has a
  real diagonal with LAPACK's signs (the last reflector of a square matrix makes R[n-1, n-1]
  real too).
- eigh below n = EIGH_TRIDIAGONAL_MIN_N: the parallel cyclic Jacobi method, each rotation
  preceded by the diagonal phase diag(1, conj(a_pq) / |a_pq|) that makes the pivot entry
  real (Golub & Van Loan, "Matrix Computations", 4th ed., 8.5 for the real rotation);
  from there the Householder reduction to a Hermitian tridiagonal matrix with a real
  off-diagonal (the zlarfg reflectors again, n - 1 of them, as LAPACK's zhetrd), the real
  tridiagonal solver of eigh_tridiagonal.py, and the back-transform V = Q Z.
- SVD: one-sided Jacobi (Hestenes 1958) whose pair rotations carry the phase of the Gram
  entry g_p^H g_q, then U from the complex QR of the orthogonalized columns.

Derivatives, in JAX's convention (the conjugated adjoint for the inner product Re tr(X^H Y),
see decompositions_complex.py): QR (m >= n; derived from A = QR with Q^H dQ skew-Hermitian
and R's diagonal real), eigh (Giles 2008, 3.1 with ^H; eigenvectors only up to phase, so a
loss must not depend on their phases) and the reduced SVD (Townsend 2016 with ^H, plus the
term i Im(diag(U^H U_bar)) / s that the phases of the singular vectors add; losses must be
invariant under u_j, v_j -> e^(i t) u_j, e^(i t) v_j).
"""

from __future__ import annotations

import functools

import numpy as np

from nova.core import dtypes
from nova.numpy_impl import decompositions as _d
from nova.numpy_impl import decompositions_complex as _c
from nova.numpy_impl.util import where_am_i

_jnp, _lax, _mT, _iota, _row, _col, _eye = (_d._jnp, _d._lax, _d._mT, _d._iota, _d._row,
                                            _d._col, _d._eye)
mH = _c.mH


def _zero_if(mask, x):
    return _jnp().where(mask, _jnp().zeros_like(x), x)


def reflector(u, head):
    """(v, kappa, beta) with (I - kappa v v^H)^H u = beta e_head for a complex vector u that is
    zero above `head` (a bool mask of one entry): beta = -sign(Re alpha) ||u|| real, alpha =
    u[head], v = u - beta e_head, kappa = -1 / (beta conj(alpha - beta)). kappa = 0 (H = I)
    where u is zero, or where u is already beta e_head's real multiple (LAPACK's tau = 0)."""
    jnp = _jnp()
    alpha = jnp.sum(jnp.where(head, u, jnp.zeros_like(u)))
    mag2 = jnp.real(u * jnp.conj(u))
    norm = jnp.sqrt(jnp.sum(mag2))
    below = jnp.sum(jnp.where(head, jnp.zeros_like(mag2), mag2))
    beta = jnp.where(jnp.real(alpha) < 0, norm, -norm)
    v = u - jnp.where(head, beta.astype(u.dtype), jnp.zeros_like(u))
    trivial = (norm == 0) | ((below == 0) & (jnp.imag(alpha) == 0))
    den = beta * jnp.conj(alpha - beta)
    kappa = jnp.where(trivial, jnp.zeros_like(den), -1 / jnp.where(trivial, 1, den))
    beta = jnp.where(trivial, jnp.real(alpha), beta)
    return v, kappa, beta


# --- QR ---------------------------------------------------------------------------------------


def _qr_core(a):
    """(Q (m, m), R (m, n)) of a complex 2-D a, R's diagonal real."""
    jnp, lax = _jnp(), _lax()
    m, n = a.shape
    i = _iota(m)

    def step(j, c):
        q, r = c
        v, kappa, _ = reflector(jnp.where(i >= j, _col(r, j), jnp.zeros((m,), r.dtype)), i == j)
        r = r - jnp.conj(kappa) * v[:, None] * (jnp.conj(v) @ r)[None, :]
        q = q - kappa * (q @ v)[:, None] * jnp.conj(v)[None, :]
        return q, r

    q, r = lax.fori_loop(0, min(m, n), step, (_eye(m, a.dtype), a))
    r = jnp.triu(r)
    eye = _iota(m, 0, 2) == _iota(n, 1, 2)
    return q, jnp.where(eye, jnp.real(r).astype(r.dtype), r)  # the diagonal's rounding


def _qr_raw(a):
    sc = _d._pow2_scale(a)
    q, r = _qr_core(a / sc)
    return q, r * sc


@functools.cache
def _qr_reduced_fn():
    import nova

    @nova.custom_vjp
    def qr_reduced(a):
        q, r = _qr_raw(a)
        n = a.shape[1]
        return q[:, :n], r[:n, :]

    def fwd(a):
        out = qr_reduced(a)
        return out, out

    def bwd(res, g):
        jnp = _jnp()
        q, r = res
        gq, gr = jnp.conj(g[0]), jnp.conj(g[1])  # the adjoint's cotangents
        # B = Q^H Q_bar - R_bar R^H; A_bar = (Q_bar + Q D) R^-H with D Hermitian: minus B's
        # upper triangle, mirrored, with the real part of B's diagonal.
        b = mH(q) @ gq - gr @ mH(r)
        up = jnp.triu(b, 1)
        n = b.shape[-1]
        eye = _iota(n, 0, 2) == _iota(n, 1, 2)
        dmat = -(up + mH(up) + jnp.where(eye, jnp.real(b).astype(b.dtype), jnp.zeros_like(b)))
        c = gq + q @ dmat
        # X R^H = C  <=>  R X^H = C^H: an upper triangular solve
        return (jnp.conj(mH(_d._tri_solve_raw(r, mH(c), False, False))),)

    qr_reduced.defvjp(fwd, bwd)
    return qr_reduced


def qr(a, mode="reduced"):
    """decompositions.qr for complex a: Q unitary, R upper triangular with a real diagonal
    (LAPACK's signs)."""
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}"
                         f"{where_am_i()}")
    if mode == "raw":
        raise NotImplementedError(f"qr: mode 'raw' (LAPACK's packed reflectors) is not "
                                  f"supported{where_am_i()}")
    jnp = _jnp()
    x = _c.matrix("qr", a, square=False)
    m, n = x.shape[-2:]
    k = min(m, n)
    if x.size == 0:
        kk = m if mode == "complete" else k
        q = jnp.broadcast_to(_eye(m, x.dtype)[:, :kk], (*x.shape[:-2], m, kk))
        r = jnp.zeros((*x.shape[:-2], kk, n), x.dtype)
    elif mode == "reduced" and m >= n:
        q, r = _d._batched(_qr_reduced_fn(), x, n_batch=x.ndim - 2)
    else:
        q, r = _d._batched(_qr_raw, x, n_batch=x.ndim - 2)
        if mode != "complete":
            q, r = q[..., :, :k], r[..., :k, :]
    return r if mode == "r" else _d.QRResult(q, r)


# --- eigh -------------------------------------------------------------------------------------


def _pair_phases(z, isp):
    """(own, other): the diagonal phase D of this index and of its partner, D = 1 at a pair's
    first member p and conj(z) / |z| at its second q, z = a_pq (so (D^H A D)_pq = |a_pq|)."""
    jnp = _jnp()
    mag = jnp.abs(z)
    ph = jnp.where(mag > 0, jnp.conj(z) / jnp.where(mag > 0, mag, 1).astype(z.dtype),
                   jnp.ones_like(z))
    one = jnp.ones_like(z)
    return jnp.where(isp, one, ph), jnp.where(isp, ph, one), mag


def _eigh_jacobi(a):
    """(w ascending, V) with a V = V diag(w) for a Hermitian 2-D a: decompositions._eigh_core
    with U = D G for each pair (D the phase of _pair_phases, G the real rotation)."""
    jnp, lax = _jnp(), _lax()
    n0 = a.shape[0]
    n = n0 + (n0 % 2)
    if n != n0:
        a = jnp.pad(a, ((0, 1), (0, 1)))
    partner_np, first_np = _d._round_robin(n)
    partner, first = jnp.asarray(partner_np), jnp.asarray(first_np)
    idx = jnp.arange(n, dtype=dtypes.int32)
    real = dtypes.real_dtype(a.dtype)
    eps = float(np.finfo(np.dtype(real)).eps)
    upper = _iota(n, 0, 2) < _iota(n, 1, 2)

    def abs2(x):
        return jnp.real(x * jnp.conj(x))

    def rotations(r, x):
        part, isp = _row(partner, r), _row(first, r)
        diag = jnp.real(jnp.diagonal(x))
        dp = diag[part]
        z = jnp.where(isp, x[idx, part], x[part, idx])  # a_pq, read by both members
        own, other, mag = _pair_phases(z, isp)
        cc, ss = _d._rotation(jnp.where(isp, diag, dp), jnp.where(isp, dp, diag), mag)
        sgn = jnp.where(isp, -ss, ss)
        # X <- U^H X U, V <- V U: the column factors of U for this index and its partner
        return (cc * own).astype(a.dtype), (sgn * other).astype(a.dtype), part

    def apply(x, v, cs, cp, part):
        x = jnp.conj(cs)[:, None] * x + jnp.conj(cp)[:, None] * x[part, :]
        x = x * cs[None, :] + x[:, part] * cp[None, :]
        return x, v * cs[None, :] + v[:, part] * cp[None, :]

    rounds = n - 1
    tol = (eps * eps) * jnp.sum(abs2(a))
    limit = _d._max_sweeps(real) * rounds

    def cond(c):
        x, r = c[0], c[2]
        off2 = jnp.sum(jnp.where(upper, abs2(x), jnp.zeros(x.shape, real)))
        return (((r % rounds) != 0) | (off2 > tol)) & (r < limit)

    def body(c):
        x, v, r, cs, cp, part = c
        x, v = apply(x, v, cs, cp, part)
        r = r + 1
        return (x, v, r, *rotations(r % rounds, x))

    zero = jnp.zeros((), dtypes.int32)
    x, v = lax.while_loop(cond, body, (a, _eye(n, a.dtype), zero, *rotations(zero, a)))[:2]
    w = jnp.real(jnp.diagonal(x))[:n0]
    order = jnp.argsort(w)
    return w[order], v[:n0, :n0][:, order]


def tridiagonalize(a, want_q=True):
    """(d (n,), e (n - 1,) real, Q (n, n) unitary or None) with a = Q T Q^H for a Hermitian
    complex 2-D a, T the real symmetric tridiagonal matrix tridiag(e, d, e)."""
    jnp, lax = _jnp(), _lax()
    n = a.shape[0]
    i = _iota(n)

    def step(k, c):
        x, q = c
        u = jnp.where(i > k, _col(x, k), jnp.zeros((n,), x.dtype))
        v, kappa, _ = reflector(u, i == k + 1)
        # X <- H^H X H = X - v w^H - w v^H, p = kappa X v, w = p - conj(kappa) (v^H p) v / 2
        p = kappa * (x @ v)
        w = p - (0.5 * jnp.conj(kappa) * jnp.sum(jnp.conj(v) * p)) * v
        x = x - v[:, None] * jnp.conj(w)[None, :] - w[:, None] * jnp.conj(v)[None, :]
        if q is not None:
            q = q - kappa * (q @ v)[:, None] * jnp.conj(v)[None, :]
        return x, q

    q0 = _eye(n, a.dtype) if want_q else None
    x, q = lax.fori_loop(0, n - 1, step, (a, q0))
    d = jnp.real(jnp.diagonal(x))
    e = jnp.real(jnp.diagonal(x, -1) + jnp.conj(jnp.diagonal(x, 1))) * 0.5
    return d, e, q


def _eigh_raw(a, want_vectors=True):
    sc = _d._pow2_scale(a)
    x = a / sc
    if a.shape[0] >= _d.EIGH_TRIDIAGONAL_MIN_N:
        from nova.numpy_impl import eigh_tridiagonal as tri

        d, e, q = tridiagonalize(x, want_vectors)
        w = tri.tridiagonal_eigvals(d, e)
        v = q @ tri.tridiagonal_eigvecs(d, e, w).astype(a.dtype) if want_vectors else None
    else:
        w, v = _eigh_jacobi(x)
    return w * sc, v


@functools.cache
def _eigh_fn():
    import nova

    @nova.custom_vjp
    def eigh2(a):
        return _eigh_raw(a)

    def fwd(a):
        w, v = _eigh_raw(a)
        return (w, v), (w, v)

    def bwd(res, g):
        jnp = _jnp()
        w, v = res
        gw, gv = g
        # Giles 2008, 3.1 with ^H: A_bar = V (diag(w_bar) + F o (V^H V_bar)) V^H, V_bar =
        # conj(g_v); its Hermitian part, conjugated
        diff = w[None, :] - w[:, None]
        eye = _iota(w.shape[0], 0, 2) == _iota(w.shape[0], 1, 2)
        f = _zero_if(eye, 1 / jnp.where(eye, jnp.ones_like(diff), diff))
        inner = f * (mH(v) @ jnp.conj(gv)) + jnp.where(eye, gw[None, :], jnp.zeros_like(diff))
        ga = v @ inner @ mH(v)
        return (jnp.conj((ga + mH(ga)) * 0.5),)

    eigh2.defvjp(fwd, bwd)
    return eigh2


@functools.cache
def _eigvalsh_fn():
    import nova

    @nova.custom_vjp
    def eigvalsh2(a):
        return _eigh_raw(a, a.shape[0] < _d.EIGH_TRIDIAGONAL_MIN_N)[0]

    def fwd(a):
        return _eigh_raw(a)

    def bwd(v, gw):
        return (_jnp().conj((v * gw[None, :]) @ mH(v)),)

    eigvalsh2.defvjp(fwd, bwd)
    return eigvalsh2


def _eigh_input(a, UPLO, symmetrize_input, name):
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"{name}: UPLO must be 'L' or 'U', got {UPLO!r}{where_am_i()}")
    x = _c.matrix(name, a)
    if symmetrize_input:
        return (x + mH(x)) * 0.5
    return _c.hermitian_from_triangle(x, UPLO in (None, "L"))


def eigh(a, UPLO=None, symmetrize_input=True):
    """decompositions.eigh for a complex Hermitian a: w real ascending (float32 for
    complex64, float64 for complex128), v unitary of a's dtype (each column up to a phase)."""
    jnp = _jnp()
    x = _eigh_input(a, UPLO, symmetrize_input, "eigh")
    if x.shape[-1] == 0:
        return _d.EighResult(jnp.zeros(x.shape[:-1], dtypes.real_dtype(x.dtype)), x)
    w, v = _d._batched(_eigh_fn(), x, n_batch=x.ndim - 2)
    return _d.EighResult(w, v)


def eigvalsh(a, UPLO="L", *, symmetrize_input=True):
    """decompositions.eigvalsh for a complex Hermitian a: real ascending eigenvalues."""
    x = _eigh_input(a, UPLO, symmetrize_input, "eigvalsh")
    if x.shape[-1] == 0:
        return _jnp().zeros(x.shape[:-1], dtypes.real_dtype(x.dtype))
    return _d._batched(_eigvalsh_fn(), x, n_batch=x.ndim - 2)
