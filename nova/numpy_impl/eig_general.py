"""eig and eigvals of general (non-symmetric) real matrices for nova.numpy.linalg: the real
Schur form (eig_schur.py: Hessenberg reduction and Francis double-shift QR), its eigenvalues
read off the 1x1 and 2x2 diagonal blocks, and the right eigenvectors by back substitution on
the complexified Schur form, all in Nova's own ops (no LAPACK).

Eigenvectors (Golub & Van Loan, "Matrix Computations", 4th ed., 7.6.4): each 2x2 block of the
real Schur form T = Z^T A Z is made upper triangular by a 2x2 unitary W_b whose first column is
the block's unit eigenvector for its first eigenvalue, so U = W^H T W is upper triangular with
the eigenvalues on its diagonal; the eigenvectors of U come from one back substitution over
all of them at once (row i of X from rows i+1.. ; a divisor smaller than eps |lambda_k| is
replaced by it, as LAPACK's trevc), and A's are Z W X, normalized as LAPACK's geev: unit
2-norm, the largest component real (and positive here), real vectors for real eigenvalues,
conjugate vectors for a conjugate pair.

Derivatives (custom VJPs, reverse and forward mode): with P = V^-1 dA V, d lambda = diag(P)
and dV = V (F o P) - V diag(Re diag(V^H V (F o P))), F_ij = 1 / (lambda_j - lambda_i) off the
diagonal (the first-order perturbation of a simple eigenpair, Magnus 1985, "On
differentiating eigenvalues and eigenvectors", Theorem 1, with unit-norm vectors). Their
transpose in Nova's convention (no conjugation) gives A_bar = Re(V^-T G V^T) with
G = diag(lambda_bar) + F o (V^T (V_bar - conj(V) diag(Re(1^T (V_bar o V))))). The phase
convention of the vectors is not differentiated (as JAX's), so only phase-invariant functions
of the eigenvectors have exact gradients; repeated eigenvalues make them infinite.
"""

from __future__ import annotations

import functools
from collections import namedtuple

import numpy as np

from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.numpy_impl import eig_schur
from nova.numpy_impl.util import asarray, where_am_i
from nova.ops import complex as cx

EigResult = namedtuple("EigResult", ["eigenvalues", "eigenvectors"])


def _jnp():
    import nova.numpy as jnp

    return jnp


def _lax():
    from nova import lax

    return lax


def _input(name, a):
    """(a as the float matrix computed on, the complex result dtype)."""
    x = asarray(a)
    if dtypes.is_complex(x.dtype):
        raise NotImplementedError(
            f"{name}: complex input matrices (dtype {x.dtype}, shape {x.shape}) are not "
            f"supported yet (this needs a complex Hessenberg QR iteration); only real ones"
            f"{where_am_i()}")
    if x.dtype == dtypes.bool_ or dtypes.is_int(x.dtype):
        x = x.astype(dtypes.default_float)
    if not dtypes.is_float(x.dtype):
        raise TypeError(f"{name}: a must be a numeric array, got dtype {x.dtype}{where_am_i()}")
    if x.ndim < 2:
        raise ShapeError(f"{name}: a must have at least 2 dimensions, got shape {x.shape}"
                         f"{where_am_i()}")
    if x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{name}: a must be square in its last two dimensions, got shape "
                         f"{x.shape}{where_am_i()}")
    if x.dtype in (dtypes.float16, dtypes.bfloat16):
        x = x.astype(dtypes.float32)
    return x, dtypes.complex_dtype(x.dtype)


def _pow2_scale(a):
    from nova.numpy_impl.decompositions import _pow2_scale as scale

    return scale(a)


def _schur(a, want_vectors):
    """(re, im, top, bottom, T, Z, ok) of a 2-D (n, n) a, n >= 2 (see eig_schur)."""
    h, q = eig_schur.hessenberg(a, want_vectors)
    t, z, ok = eig_schur.schur(h, q)
    re, im, top, bottom = eig_schur.block_eigenvalues(t)
    return re, im, top, bottom, t, z, ok


def _eigvals_raw(a):
    jnp = _jnp()
    if a.shape[0] == 1:
        return cx.complex(a[0], jnp.zeros_like(a[0]))
    sc = _pow2_scale(a)
    re, im, _, _, _, _, ok = _schur(a / sc, False)
    nan = jnp.full_like(re, np.nan)
    return cx.complex(jnp.where(ok, re * sc, nan), jnp.where(ok, im * sc, nan))


def _block_unitary(t, re, im, top):
    """W (n, n) complex, block diagonal: at each 2x2 block [[a, b], [c, d]] of t starting at
    row r the unitary [[u1, -conj(u2)], [u2, conj(u1)]] with (u1, u2) the block's unit
    eigenvector for its first eigenvalue lambda_r: (b, lambda_r - a) or (lambda_r - d, c),
    whichever is longer (the other may cancel to rounding noise); 1 elsewhere."""
    jnp = _jnp()
    n = t.shape[0]
    dt = t.dtype
    z1 = jnp.zeros((1,), dt)
    d = jnp.diagonal(t)
    a = d
    d_next = jnp.concatenate([d[1:], z1])
    b = jnp.concatenate([jnp.diagonal(t, 1), z1])
    c = jnp.concatenate([jnp.diagonal(t, -1), z1])
    na = b * b + (re - a) * (re - a) + im * im
    nb = (re - d_next) * (re - d_next) + im * im + c * c
    first = na > nb
    u1r = jnp.where(first, b, re - d_next)
    u1i = jnp.where(first, jnp.zeros_like(im), im)
    u2r = jnp.where(first, re - a, c)
    u2i = jnp.where(first, im, jnp.zeros_like(im))
    nrm = jnp.sqrt(jnp.maximum(na, nb))
    nrm = jnp.where(top & (nrm > 0), nrm, jnp.ones_like(nrm))
    u1r, u1i, u2r, u2i = u1r / nrm, u1i / nrm, u2r / nrm, u2i / nrm
    bottom = jnp.concatenate([jnp.zeros((1,), bool), top[:-1]])

    def prev(x):
        return jnp.concatenate([z1, x[:-1]])

    k = jnp.arange(n, dtype=dtypes.int32)
    eye = k[:, None] == k[None, :]
    below = (k[:, None] == k[None, :] + 1) & top[None, :]  # W[r + 1, r] = u2[r]
    above = (k[:, None] + 1 == k[None, :]) & top[:, None]  # W[r, r + 1] = -conj(u2[r])
    zero = jnp.zeros((n, n), dt)

    def assemble(diag, low, up):
        w = jnp.where(eye, diag[:, None], zero)
        return w + jnp.where(below, low[None, :], zero) + jnp.where(above, up[:, None], zero)

    one = jnp.ones_like(u1r)
    wr = assemble(jnp.where(top, u1r, jnp.where(bottom, prev(u1r), one)), u2r, -u2r)
    wi = assemble(jnp.where(top, u1i, jnp.where(bottom, -prev(u1i), 0 * one)), u2i, u2i)
    return cx.complex(wr, wi)


def _triangular_vectors(u, lam):
    """X (n, n) upper triangular with unit diagonal and u X = X diag(lam), for an upper
    triangular complex u whose diagonal is lam: back substitution for every column at once."""
    jnp, lax = _jnp(), _lax()
    n = u.shape[0]
    rdt = dtypes.real_dtype(u.dtype)
    eps = float(np.finfo(np.dtype(rdt)).eps)
    tiny = float(np.finfo(np.dtype(rdt)).tiny)
    big = 1 / (eps * eps)  # columns are rescaled past this, so none overflows
    k = jnp.arange(n, dtype=dtypes.int32)
    lr, li = cx.real(lam), cx.imag(lam)
    smin = jnp.maximum(eps * jnp.sqrt(lr * lr + li * li), tiny / eps)

    def step(s, x):
        i = n - 1 - s
        row = lax.dynamic_index_in_dim(u, i, 0, keepdims=False)
        row = jnp.where(k > i, row, jnp.zeros_like(row))
        num = row @ x
        lam_i = lax.dynamic_index_in_dim(lam, i, 0, keepdims=False)
        dr, di = cx.real(lam_i) - lr, cx.imag(lam_i) - li
        tiny_den = jnp.sqrt(dr * dr + di * di) < smin
        den = cx.complex(jnp.where(tiny_den, smin, dr), jnp.where(tiny_den, 0 * di, di))
        xi = jnp.where(k > i, -num / den, lax.dynamic_index_in_dim(x, i, 0, keepdims=False))
        x = lax.dynamic_update_index_in_dim(x, xi, i, 0)
        m = jnp.max(jnp.abs(cx.real(x)) + jnp.abs(cx.imag(x)), axis=0)
        return x / cx.complex(jnp.where(m > big, m, jnp.ones_like(m)), jnp.zeros_like(m))

    x0 = cx.complex(jnp.eye(n, dtype=rdt), jnp.zeros((n, n), rdt))
    return lax.fori_loop(0, n, step, x0)


def _normalize(v, im, top):
    """v's columns with unit 2-norm and their largest component real and positive; real for a
    real eigenvalue, and the conjugate of the one before for the second of a conjugate pair."""
    jnp = _jnp()
    vr, vi = cx.real(v), cx.imag(v)
    mag2 = vr * vr + vi * vi
    n = v.shape[0]
    k = jnp.arange(n, dtype=dtypes.int32)
    at = jnp.argmax(mag2, axis=0).astype(dtypes.int32)
    hit = k[:, None] == at[None, :]
    pr = jnp.sum(jnp.where(hit, vr, jnp.zeros_like(vr)), axis=0)
    pi = jnp.sum(jnp.where(hit, vi, jnp.zeros_like(vi)), axis=0)
    pm = jnp.sqrt(pr * pr + pi * pi)
    nrm = jnp.sqrt(jnp.sum(mag2, axis=0))
    scale = pm * nrm
    scale = jnp.where(scale > 0, scale, jnp.ones_like(scale))
    # v * conj(p) / (|p| ||v||)
    cr, ci = pr / scale, -pi / scale
    wr, wi = vr * cr - vi * ci, vr * ci + vi * cr
    wi = jnp.where(hit | (im[None, :] == 0), jnp.zeros_like(wi), wi)
    second = jnp.concatenate([jnp.zeros((1,), bool), top[:-1]]) & (im != 0)
    prev_r = jnp.concatenate([wr[:, :1], wr[:, :-1]], axis=1)
    prev_i = jnp.concatenate([wi[:, :1], wi[:, :-1]], axis=1)
    wr = jnp.where(second[None, :], prev_r, wr)
    wi = jnp.where(second[None, :], -prev_i, wi)
    return cx.complex(wr, wi)


def _eig_raw(a):
    """(lambda (n,), V (n, n)) of a 2-D real a, complex."""
    jnp = _jnp()
    n = a.shape[0]
    if n == 1:
        lam = cx.complex(a[0], jnp.zeros_like(a[0]))
        return lam, cx.complex(jnp.ones_like(a), jnp.zeros_like(a))
    sc = _pow2_scale(a)
    re, im, top, _, t, z, ok = _schur(a / sc, True)
    lam = cx.complex(re, im)
    w = _block_unitary(t, re, im, top)
    tc = cx.complex(t, jnp.zeros_like(t))
    u = jnp.swapaxes(cx.conj(w), 0, 1) @ tc @ w
    k = jnp.arange(n, dtype=dtypes.int32)
    u = jnp.where(k[:, None] < k[None, :], u, jnp.where(k[:, None] == k[None, :], lam, 0 * u))
    x = _triangular_vectors(u, lam)
    v = _normalize(cx.complex(z, jnp.zeros_like(z)) @ w @ x, im, top)
    nan = jnp.full_like(re, np.nan)
    lam = cx.complex(jnp.where(ok, re * sc, nan), jnp.where(ok, im * sc, nan))
    v = jnp.where(ok, v, cx.complex(jnp.full_like(t, np.nan), jnp.full_like(t, np.nan)))
    return lam, v


# --- derivatives ----------------------------------------------------------------------------


def _csolve(m, b):
    """y with m y = b for complex 2-D m (n, n), b (n, k), by the real system
    [[Re m, -Im m], [Im m, Re m]] [Re y; Im y] = [Re b; Im b]."""
    from nova.numpy_impl.decompositions import solve

    jnp = _jnp()
    n = m.shape[0]
    mr, mi = cx.real(m), cx.imag(m)
    big = jnp.concatenate([jnp.concatenate([mr, -mi], axis=1),
                           jnp.concatenate([mi, mr], axis=1)], axis=0)
    y = solve(big, jnp.concatenate([cx.real(b), cx.imag(b)], axis=0))
    return cx.complex(y[:n], y[n:])


def _a_bar(lam, v, g_inner):
    """Re(V^-T G V^T) (the cotangent of the real matrix, module docstring)."""
    jnp = _jnp()
    vt = jnp.swapaxes(v, 0, 1)
    return cx.real(_csolve(vt, g_inner @ vt))


def _diag(x):
    jnp = _jnp()
    n = x.shape[0]
    k = jnp.arange(n, dtype=dtypes.int32)
    eye = k[:, None] == k[None, :]
    xr, xi = cx.real(x), cx.imag(x)
    zero = jnp.zeros((n, n), xr.dtype)
    return cx.complex(jnp.where(eye, xr[None, :], zero), jnp.where(eye, xi[None, :], zero))


@functools.cache
def _eigvals_fn():
    import nova

    @nova.custom_vjp
    def eigvals2(a):
        return _eigvals_raw(a)

    def fwd(a):
        lam, v = _eig_raw(a)
        return lam, (lam, v)

    def bwd(res, g):
        lam, v = res
        return (_a_bar(lam, v, _diag(g)),)

    eigvals2.defvjp(fwd, bwd)
    return eigvals2


@functools.cache
def _eig_fn():
    import nova

    @nova.custom_vjp
    def eig2(a):
        return _eig_raw(a)

    def fwd(a):
        out = _eig_raw(a)
        return out, out

    def bwd(res, g):
        jnp = _jnp()
        lam, v = res
        glam, gv = g
        n = lam.shape[0]
        k = jnp.arange(n, dtype=dtypes.int32)
        eye = k[:, None] == k[None, :]
        diff = lam[None, :] - lam[:, None]
        one = cx.complex(jnp.ones((n, n), cx.real(lam).dtype), jnp.zeros((n, n),
                                                                          cx.real(lam).dtype))
        f = jnp.where(eye, 0 * one, one / jnp.where(eye, one, diff))
        c = cx.real(jnp.sum(gv * v, axis=0))
        gv2 = gv - cx.conj(v) * cx.complex(c, jnp.zeros_like(c))[None, :]
        inner = _diag(glam) + f * (jnp.swapaxes(v, 0, 1) @ gv2)
        return (_a_bar(lam, v, inner),)

    eig2.defvjp(fwd, bwd)
    return eig2


# --- the public functions -------------------------------------------------------------------


def _batched(core, x):
    from nova.numpy_impl.decompositions import _batched as batched

    return batched(core, x, n_batch=x.ndim - 2)


def eigvals(a):
    """The eigenvalues of a general square matrix (numpy.linalg.eigvals).

    a: (..., n, n) float32 or float64 (ints and bools become float32, float16 and bfloat16
    compute in float32; leading dimensions are batch dimensions). Returns (..., n) complex64
    for float32, complex128 for float64: real eigenvalues have imaginary part 0 and a complex
    conjugate pair comes as two consecutive entries, the positive imaginary part first; the
    order otherwise is the Schur form's (not sorted, and not LAPACK's). A matrix on which the
    QR iteration does not converge (30 Francis steps per eigenvalue; NaN or inf entries) gives
    NaN. Algorithm: Householder Hessenberg reduction and Francis' implicit double-shift QR
    iteration (Golub & Van Loan, 4th ed., Alg. 7.4.2, 7.5.1, 7.5.2), without balancing.
    Differentiable (d lambda = diag(V^-1 dA V); see eig_general's module docstring).

    Raises ShapeError for fewer than 2 dimensions or a non-square a, NotImplementedError for a
    complex a, TypeError for a non-numeric dtype.
    """
    jnp = _jnp()
    x, cdt = _input("eigvals", a)
    n = x.shape[-1]
    if n == 0 or x.size == 0:
        return jnp.zeros(x.shape[:-1], cdt)
    return _batched(_eigvals_fn(), x)


def eig(a):
    """Eigenvalues and right eigenvectors of a general square matrix (numpy.linalg.eig):
    a @ v[..., :, k] = w[..., k] * v[..., :, k].

    a: (..., n, n) real, dtypes as eigvals'. Returns EigResult(eigenvalues (..., n),
    eigenvectors (..., n, n)), both complex64 for float32 input and complex128 for float64;
    the eigenvalues in eigvals' order, each eigenvector (a column) of unit 2-norm with its
    largest component real and positive (LAPACK's geev normalizes the same way up to that
    component's sign), real for a real eigenvalue, and the conjugate of its partner's for a
    conjugate pair. Eigenvectors of a defective matrix are (nearly) parallel, as LAPACK's.
    Algorithm: the real Schur form (eigvals), then back substitution on the complexified
    triangular form (eig_general's module docstring). Differentiable in both outputs (the
    eigenvectors' phase convention is not differentiated, as in JAX; repeated eigenvalues
    give infinite derivatives).

    Raises as eigvals.
    """
    jnp = _jnp()
    x, cdt = _input("eig", a)
    n = x.shape[-1]
    if n == 0 or x.size == 0:
        return EigResult(jnp.zeros(x.shape[:-1], cdt), jnp.zeros(x.shape, cdt))
    w, v = _batched(_eig_fn(), x)
    return EigResult(w, v)
